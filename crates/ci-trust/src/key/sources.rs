//! Walking the module tree of every compiled target and resolving what it embeds.
//!
//! Starting from each target's crate root (and each build script), every
//! `mod x;` is followed to its file with rustc's rules and every include
//! macro is resolved to the file it reads. Files are read once, hashed from
//! the same bytes, and parsed only when a cheap byte search says they may
//! declare a file module or an include. Levels of the tree are processed in
//! parallel. Test-data `.rs` files that no module declares are never parsed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::inputs::{self, Hashed, InputSet};
use super::scan::{self, CallerRelative, EmbedTarget, FileContext, FileScan};
use crate::policy::KeyPolicy;

/// A crate root to start from.
pub struct Root {
    pub file: PathBuf,
    pub package_dir: PathBuf,
    /// Says which target of which package this is, for `--explain`.
    pub label: String,
    pub build_script: bool,
}

/// What the walk found besides the inputs it added.
#[derive(Default)]
pub struct Discovery {
    /// Digests of the files read for parsing, so they are not read again.
    pub known: HashMap<PathBuf, Hashed>,
    pub warnings: Vec<String>,
    /// Problems that make the key unprovable; each names file:line and the fix.
    pub errors: Vec<String>,
    /// Per root index: the `rerun-if-changed` literals of its tree, with file and line.
    pub rerun_literals: HashMap<usize, Vec<(String, PathBuf, usize)>>,
    /// How many `OUT_DIR` embeds were left to their build script's inputs.
    pub out_dir_embeds: usize,
    pub parsed_files: usize,
}

/// A file read in one context: (file, module directory, package directory,
/// the build script's root index).
type VisitKey = (PathBuf, PathBuf, PathBuf, Option<usize>);

struct Job {
    file: PathBuf,
    module_dir: PathBuf,
    root: usize,
}

enum Outcome {
    Missing,
    Read {
        hashed: Hashed,
        symlink_target: Option<(PathBuf, Hashed)>,
        scan: Option<Box<FileScan>>,
    },
    Failed(String),
}

/// Walks every root's module tree, adding module files and embedded files to `inputs`.
///
/// `use std::include_str as embed;` makes `embed!` an include macro in the
/// whole crate (`crate::embed!`, `use super::*`) and, re-exported, in other
/// crates. So the aliases are gathered workspace-wide, and when a walk finds
/// a rename it did not know, the walk is done again knowing it (inputs are
/// a set: the first walk's are a subset of the second's). Aliases made by
/// registry crates are `verify-key`'s to catch.
pub fn discover(roots: &[Root], inputs: &mut InputSet, policy: &KeyPolicy) -> Discovery {
    let mut aliases: HashMap<String, String> = HashMap::new();
    for walks in 1.. {
        let (mut discovery, renames) = walk(roots, inputs, policy, &aliases);
        let known = aliases.len();
        // A fixpoint: `use crate::embed as e2;` renames an alias.
        loop {
            let before = aliases.len();
            for (from, to) in &renames {
                let origin = scan::INCLUDE_MACROS
                    .iter()
                    .find(|m| **m == from)
                    .map(|m| (*m).to_owned())
                    .or_else(|| aliases.get(from).cloned());
                if let Some(origin) = origin {
                    if !scan::INCLUDE_MACROS.contains(&to.as_str()) {
                        aliases.entry(to.clone()).or_insert(origin);
                    }
                }
            }
            if aliases.len() == before {
                break;
            }
        }
        if aliases.len() == known {
            return discovery;
        }
        // Each walk reveals at least one more alias; a chain this long is
        // contrived, and reading it to the end would cost a walk per link.
        if walks == MAX_ALIAS_WALKS {
            let mut names: Vec<&String> = aliases.keys().collect();
            names.sort();
            discovery.errors.push(format!(
                "include macros are renamed through a chain of more than {MAX_ALIAS_WALKS} `use … as …` aliases ({}); call include_str!/include_bytes!/include! by name or through fewer aliases",
                names.iter().take(8).map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
            ));
            return discovery;
        }
    }
    unreachable!("the loop returns")
}

/// How many walks may discover new include-macro aliases before the key is refused.
const MAX_ALIAS_WALKS: usize = 8;

/// One walk of every module tree, knowing `aliases`; returns what it found
/// and every `use … as …` rename it saw.
///
/// Module files are read level by level; once no file is left, the
/// `mod x;` of `macro_rules!` bodies and their embeds are resolved from
/// their callers, which may add files to read, until nothing is added.
fn walk(
    roots: &[Root],
    inputs: &mut InputSet,
    policy: &KeyPolicy,
    aliases: &HashMap<String, String>,
) -> (Discovery, Vec<(String, String)>) {
    let mut walk = Walk::new(roots, inputs, policy, aliases);
    let mut frontier = walk.root_jobs();
    loop {
        while !frontier.is_empty() {
            frontier = walk.read_level(frontier);
        }
        frontier.extend(walk.follow_macro_modules());
        frontier.extend(walk.follow_macro_embeds());
        if frontier.is_empty() {
            break;
        }
    }
    walk.refuse_handed_over();
    walk.finish()
}

/// The state of one walk: what it was given, and what it has gathered.
struct Walk<'a> {
    roots: &'a [Root],
    inputs: &'a mut InputSet,
    policy: &'a KeyPolicy,
    aliases: &'a HashMap<String, String>,
    discovery: Discovery,
    renames: Vec<(String, String)>,
    macro_calls: Vec<(String, String)>,
    /// `include` handed to a macro as a token is a call only where some
    /// `macro_rules!` calls a metavariable (`$m!(…)`): decided after the walk.
    any_metavariable_call: bool,
    passed_include: Vec<scan::Embed>,
    /// A file is read once per context that changes what it means: its
    /// module directory, its package (`env!("CARGO_MANIFEST_DIR")`) and, for
    /// build scripts, the script itself, whose `rerun-if-changed` literals
    /// are counted per script (two scripts may share a helper by `#[path]`).
    visited: HashSet<VisitKey>,
    used_dynamic: HashSet<String>,
    /// Every file read, with its context, and the `mod x;` of `macro_rules!`
    /// bodies: loaded from each file that calls the macro. Embeds in
    /// `macro_rules!` bodies are resolved again from each calling file once
    /// every module file of the workspace is known.
    walked: Vec<(PathBuf, PathBuf, usize)>,
    macro_modules: Vec<scan::MacroModule>,
    walked_texts: HashMap<PathBuf, String>,
    /// (site, name, macro_rules) where a macro declaring modules is handed
    /// over as a token: refused once it is known that some macro_rules!
    /// calls a metavariable.
    handed_modules: Vec<(String, String, String)>,
    macro_embeds: Vec<MacroEmbed>,
}

impl<'a> Walk<'a> {
    fn new(
        roots: &'a [Root],
        inputs: &'a mut InputSet,
        policy: &'a KeyPolicy,
        aliases: &'a HashMap<String, String>,
    ) -> Self {
        Walk {
            roots,
            inputs,
            policy,
            aliases,
            discovery: Discovery::default(),
            renames: Vec::new(),
            macro_calls: Vec::new(),
            any_metavariable_call: false,
            passed_include: Vec::new(),
            visited: HashSet::new(),
            used_dynamic: HashSet::new(),
            walked: Vec::new(),
            macro_modules: Vec::new(),
            walked_texts: HashMap::new(),
            handed_modules: Vec::new(),
            macro_embeds: Vec::new(),
        }
    }

    /// Queues `file` to be read as a module of root `root` from `module_dir`,
    /// unless it was read in that context already.
    fn enqueue(&mut self, file: PathBuf, module_dir: PathBuf, root: usize, queue: &mut Vec<Job>) {
        let info = &self.roots[root];
        let key = (
            file.clone(),
            module_dir.clone(),
            info.package_dir.clone(),
            info.build_script.then_some(root),
        );
        if self.visited.insert(key) {
            queue.push(Job {
                file,
                module_dir,
                root,
            });
        }
    }

    /// Every crate root, each from its own directory.
    fn root_jobs(&mut self) -> Vec<Job> {
        let mut frontier = Vec::new();
        for (index, root) in self.roots.iter().enumerate() {
            let module_dir = root.file.parent().unwrap_or(Path::new("/")).to_path_buf();
            self.enqueue(root.file.clone(), module_dir, index, &mut frontier);
        }
        frontier
    }

    /// Reads and scans one level of module files in parallel, and returns
    /// the files they lead to.
    fn read_level(&mut self, frontier: Vec<Job>) -> Vec<Job> {
        let roots = self.roots;
        let aliases = self.aliases;
        let outcomes: Vec<(Job, Outcome)> = frontier
            .into_par_iter()
            .map(|job| {
                let outcome = read_and_scan(&job, &roots[job.root], aliases);
                (job, outcome)
            })
            .collect();
        let mut next = Vec::new();
        for (job, outcome) in outcomes {
            if let Some(scan) = self.record_read(&job, outcome) {
                self.follow_scan(&job, scan, &mut next);
            }
        }
        next
    }

    /// Adds a file read to the inputs (and the file behind it, for a
    /// symlink); returns its scan when it was parsed.
    fn record_read(&mut self, job: &Job, outcome: Outcome) -> Option<FileScan> {
        let root = &self.roots[job.root];
        let rel = display(self.inputs.root(), &job.file);
        let reason = format!("module of {}", root.label);
        let discovery = &mut self.discovery;
        match outcome {
            Outcome::Missing => {
                discovery.errors.push(format!(
                    "{rel}: the crate root of {} does not exist",
                    root.label
                ));
                None
            }
            Outcome::Failed(message) => {
                discovery.errors.push(message);
                None
            }
            Outcome::Read {
                hashed,
                symlink_target,
                scan,
            } => {
                if let Err(err) = self.inputs.add(&job.file, &reason) {
                    discovery.errors.push(format!("{rel}: {err:#}"));
                    return None;
                }
                discovery
                    .known
                    .insert(super::workspace::normalize(&job.file), hashed);
                self.walked
                    .push((job.file.clone(), job.module_dir.clone(), job.root));
                if let Some((target, target_hash)) = symlink_target {
                    let why = format!("target of symlink {rel}, a module of {}", root.label);
                    if let Err(err) = self.inputs.add(&target, &why) {
                        discovery.errors.push(format!(
                            "{rel} is a symlink whose target cannot be hashed: {err:#}"
                        ));
                    }
                    discovery.known.insert(target, target_hash);
                }
                scan.map(|scan| *scan)
            }
        }
    }

    /// What one parsed file declares: its macro knowledge, its modules,
    /// its embeds and, in a build script, its `rerun-if-changed` literals.
    fn follow_scan(&mut self, job: &Job, scan: FileScan, next: &mut Vec<Job>) {
        self.discovery.parsed_files += 1;
        self.renames.extend(scan.use_renames.iter().cloned());
        self.macro_calls
            .extend(scan.macro_rules_calls.iter().cloned());
        self.any_metavariable_call |= scan.metavariable_macro_call;
        self.passed_include
            .extend(scan.passed_include.iter().cloned());
        self.macro_modules
            .extend(scan.macro_modules.iter().cloned());
        if let Some((line, why)) = &scan.refused {
            let rel = display(self.inputs.root(), &job.file);
            self.discovery.errors.push(format!("{rel}:{line}: {why}"));
            return;
        }
        for module in &scan.modules {
            self.follow_module(job, module, next);
        }
        for embed in &scan.embeds {
            self.resolve_embed(job, embed, next);
        }
        if self.roots[job.root].build_script {
            let literals = self.discovery.rerun_literals.entry(job.root).or_default();
            for (value, line) in scan.rerun_literals {
                literals.push((value, job.file.clone(), line));
            }
        }
    }

    /// `mod x;`: the first candidate file that exists is read next; when
    /// none does, every candidate's absence is hashed.
    fn follow_module(&mut self, job: &Job, module: &scan::ModuleDecl, next: &mut Vec<Job>) {
        let inputs = &mut *self.inputs;
        let discovery = &mut self.discovery;
        let site = format!(
            "{}:{}",
            display(inputs.root(), &module.site.file),
            module.site.line
        );
        match module
            .candidates
            .iter()
            .find(|(file, _)| std::fs::symlink_metadata(file).is_ok())
        {
            Some((file, dir)) => {
                if inputs.relative(file).is_err() {
                    discovery.errors.push(format!(
                    "{site}: `mod {};` loads {}, outside the repository or in an excluded area; move the file into the repository",
                    module.name,
                    file.display()
                ));
                } else {
                    self.enqueue(file.clone(), dir.clone(), job.root, next);
                }
            }
            None => {
                // A `cfg`-gated module whose file is absent compiles;
                // hashing the absence makes its arrival change the key.
                // With `cfg_attr(…, path = …)` alternatives, the
                // default file is often absent by design.
                if !module.has_alternatives {
                    let tried: Vec<String> = module
                        .candidates
                        .iter()
                        .map(|(f, _)| display(inputs.root(), f))
                        .collect();
                    discovery.warnings.push(format!(
                        "{site}: `mod {};` has no file (tried {}); its absence is hashed",
                        module.name,
                        tried.join(", ")
                    ));
                }
                for (file, _) in &module.candidates {
                    if let Err(err) = inputs.add_maybe_absent(
                        file,
                        &format!("missing module `{}` declared at {site}", module.name),
                    ) {
                        discovery.errors.push(format!("{site}: {err:#}"));
                    }
                }
            }
        }
    }

    /// One include: the file, pattern or directory it reads becomes an
    /// input (an `include!`d file is read next, like a module), or it is
    /// declared in the policy or refused. One in a `macro_rules!` body is
    /// also kept to be resolved from its callers.
    fn resolve_embed(&mut self, job: &Job, embed: &scan::Embed, next: &mut Vec<Job>) {
        let site = format!(
            "{}:{}",
            display(self.inputs.root(), &embed.site.file),
            embed.site.line
        );
        let why = format!("embedded by {} at {site}", embed.macro_name);
        if let Some(relative) = &embed.caller_relative {
            self.macro_embeds.push(MacroEmbed {
                whole: embed.target == EmbedTarget::FromCallers,
                definition: embed.site.file.clone(),
                site: site.clone(),
                macro_name: embed.macro_name.clone(),
                relative: relative.clone(),
            });
        }
        let inputs = &mut *self.inputs;
        let discovery = &mut self.discovery;
        match &embed.target {
            EmbedTarget::File(path) => {
                let path = super::workspace::normalize(path);
                if path.is_dir() {
                    discovery.errors.push(format!(
                        "{site}: {} names a directory, {}",
                        embed.macro_name,
                        path.display()
                    ));
                } else if let Err(err) = inputs
                    .add_maybe_absent(&path, &why)
                    .and_then(|()| inputs.add_link_target(&path, &why))
                {
                    discovery.errors.push(format!(
                        "{site}: {} cannot be a key input: {err:#}",
                        embed.macro_name
                    ));
                } else if std::fs::symlink_metadata(&path).is_err() {
                    discovery.warnings.push(format!(
                        "{site}: {} names {}, which does not exist; its absence is hashed",
                        embed.macro_name,
                        display(inputs.root(), &path)
                    ));
                } else if embed.macro_name == "include!" {
                    // rustc parses an `include!`d file as code of the
                    // including module, with its own directory as the
                    // module directory: its `mod x;`, `#[path]` and
                    // embeds resolve from there, so it is walked like
                    // a module file.
                    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
                    self.enqueue(path, dir, job.root, next);
                }
            }
            EmbedTarget::Pattern(pattern) => {
                let pattern = super::workspace::normalize(pattern);
                let result = pattern
                    .strip_prefix(inputs.root())
                    .ok()
                    .and_then(|p| p.to_str())
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow::anyhow!("{} leaves the repository", pattern.display()))
                    .and_then(|rel| inputs.add_pattern(&rel, &why));
                if let Err(err) = result {
                    discovery
                        .errors
                        .push(format!("{site}: {} pattern: {err:#}", embed.macro_name));
                }
            }
            // Resolved at each caller, once every module file is known.
            EmbedTarget::FromCallers => {}
            EmbedTarget::OutDir => discovery.out_dir_embeds += 1,
            EmbedTarget::Tree(dir) => {
                let dir = super::workspace::normalize(dir);
                let result = if inputs.relative(&dir).is_err() {
                    Err(anyhow::anyhow!(
                        "it is outside the repository or in an excluded area; move it into the repository"
                    ))
                } else if dir.is_dir() {
                    inputs.add_dir(&dir, &why, false)
                } else {
                    inputs.add_maybe_absent(&dir, &why)
                };
                if let Err(err) = result {
                    discovery.errors.push(format!(
                        "{site}: {} reads {}, which cannot be a key input: {err:#}",
                        embed.macro_name,
                        display(inputs.root(), &dir)
                    ));
                }
            }
            EmbedTarget::Unresolved(what) => declare_or_refuse(
                embed,
                what,
                &site,
                self.policy,
                inputs,
                &mut self.used_dynamic,
                discovery,
            ),
        }
    }

    /// rustc loads a `macro_rules!` body's `mod x;` from the module where
    /// the macro is called: the calling file's module directory, or the
    /// directory of the inline modules the call stands in.
    /// A `#[macro_export]` macro loads from callers in other crates too.
    /// Aliases are read from every file walked so far (the prefilter may
    /// have skipped a file that only renames and calls the macro).
    /// Returns the module files to read next.
    fn follow_macro_modules(&mut self) -> Vec<Job> {
        let mut frontier = Vec::new();
        if !self.macro_modules.is_empty() {
            for (file, _, _) in &self.walked {
                if !self.walked_texts.contains_key(file) {
                    if let Ok(text) = std::fs::read_to_string(file) {
                        self.walked_texts.insert(file.clone(), text);
                    }
                }
            }
        }
        let calls = self.macro_module_calls();
        let Some(calls) = calls else {
            return frontier;
        };
        let index: HashMap<PathBuf, usize> = self
            .walked_texts
            .keys()
            .enumerate()
            .map(|(i, f)| (f.clone(), i))
            .collect();
        for module in self.macro_modules.clone() {
            let names = calls.names_of(&module.macro_rules);
            for (caller, module_dir, root) in self.walked.clone() {
                let sites: Vec<scan::CallSite> = index
                    .get(&caller)
                    .map(|&i| calls.sites[i].clone())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|s| names.contains(&s.name))
                    .collect();
                self.follow_macro_module_calls(
                    &module,
                    &sites,
                    (&caller, &module_dir, root),
                    &mut frontier,
                );
            }
        }
        frontier
    }

    /// The calls of the macros that declare modules, in every file walked
    /// (`None` when there are none, or too many names to follow).
    fn macro_module_calls(&mut self) -> Option<MacroCalls> {
        let known = MacroKnowledge {
            renames: &self.renames,
            macro_calls: &self.macro_calls,
            any_metavariable_call: self.any_metavariable_call,
        };
        let texts: Vec<&str> = self.walked_texts.values().map(String::as_str).collect();
        let roots_of_modules: Vec<&str> = self
            .macro_modules
            .iter()
            .map(|m| m.macro_rules.as_str())
            .collect();
        if self.macro_modules.is_empty() {
            None
        } else {
            match MacroCalls::read(&roots_of_modules, &known, &texts) {
                Ok(calls) => Some(calls),
                Err(why) => {
                    self.discovery.errors.push(why);
                    None
                }
            }
        }
    }

    /// The modules `module` (a `mod` of a `macro_rules!` body) loads where
    /// `caller` calls it at `sites`.
    fn follow_macro_module_calls(
        &mut self,
        module: &scan::MacroModule,
        sites: &[scan::CallSite],
        (caller, module_dir, root): (&Path, &Path, usize),
        frontier: &mut Vec<Job>,
    ) {
        for site in sites.iter().filter(|s| s.handed_over) {
            self.handed_modules.push((
                format!("{}:{}", display(self.inputs.root(), caller), site.line),
                site.name.clone(),
                module.macro_rules.clone(),
            ));
        }
        // Each inline module the macro is called in loads from its
        // own directory; one moved by `#[path]`/`cfg_attr` is refused.
        let mut places: Vec<(Vec<String>, bool, usize)> = sites
            .iter()
            .filter(|s| !s.handed_over)
            .map(|s| (s.inline.clone(), s.inline_moved, s.line))
            .collect();
        places.sort();
        places.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
        let package_dir = &self.roots[root].package_dir;
        for (inline, moved, line) in places {
            if moved {
                self.discovery.errors.push(format!(
                "{}:{line}: macro_rules! {} declares a file module and is called inside an inline module that #[path] or cfg_attr moves, which ci-key does not place; call it outside that module, or give the module a #[path] of its own",
                display(self.inputs.root(), caller),
                module.macro_rules
            ));
                continue;
            }
            let module_dir = inline
                .iter()
                .fold(module_dir.to_path_buf(), |dir, name| dir.join(name));
            for decl in macro_module_decls(module, caller, &module_dir, inline.len(), package_dir) {
                let site = format!(
                    "`mod {};` of macro_rules! {} called in {}",
                    decl.name,
                    module.macro_rules,
                    display(self.inputs.root(), caller)
                );
                match decl
                    .candidates
                    .iter()
                    .find(|(file, _)| std::fs::symlink_metadata(file).is_ok())
                {
                    Some((file, dir)) => {
                        if self.inputs.relative(file).is_err() {
                            self.discovery.errors.push(format!(
                    "{site}: loads {}, outside the repository or in an excluded area; move the file into the repository",
                    file.display()
                ));
                        } else {
                            self.enqueue(file.clone(), dir.clone(), root, frontier);
                        }
                    }
                    None => {
                        for (file, _) in &decl.candidates {
                            if let Err(err) = self
                                .inputs
                                .add_maybe_absent(file, &format!("missing {site}"))
                            {
                                self.discovery.errors.push(format!("{site}: {err:#}"));
                            }
                        }
                    }
                }
            }
            if module.name.is_none() {
                // A file added later that such a `mod` could load changes the key.
                let why = format!(
                    "a `mod $…;` of macro_rules! {} called in {} may load it",
                    module.macro_rules,
                    display(self.inputs.root(), caller)
                );
                let inputs = &mut *self.inputs;
                let result = module_dir
                    .strip_prefix(inputs.root())
                    .ok()
                    .and_then(|d| d.to_str())
                    .ok_or_else(|| {
                        anyhow::anyhow!("{} is outside the repository", module_dir.display())
                    })
                    .and_then(|d| inputs.add_pattern(&format!("{d}/*.rs"), &why));
                if let Err(err) = result {
                    self.discovery.errors.push(format!("{why}: {err:#}"));
                }
            }
        }
    }

    /// Embeds in `macro_rules!` bodies, resolved again from every calling
    /// file known so far; a file an `include!` there reads is walked
    /// like a module, from its own directory, as the walk does.
    fn follow_macro_embeds(&mut self) -> Vec<Job> {
        let mut frontier = Vec::new();
        let callers: Vec<PathBuf> = self
            .walked
            .iter()
            .map(|(file, _, _)| file.clone())
            .collect();
        let known = MacroKnowledge {
            renames: &self.renames,
            macro_calls: &self.macro_calls,
            any_metavariable_call: self.any_metavariable_call,
        };
        let included = resolve_from_callers(
            &self.macro_embeds,
            &callers,
            &known,
            self.policy,
            &mut self.used_dynamic,
            self.inputs,
            &mut self.discovery,
        );
        for (file, caller) in included {
            let Some(&(_, _, root)) = self.walked.iter().find(|(f, _, _)| *f == caller) else {
                continue;
            };
            let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
            self.enqueue(file, dir, root, &mut frontier);
        }
        frontier
    }

    /// Macros handed to another macro as a token, refused once the walk
    /// knows that some `macro_rules!` calls a metavariable (`$m!(…)`).
    fn refuse_handed_over(&mut self) {
        if !self.any_metavariable_call {
            return;
        }
        self.handed_modules.sort();
        self.handed_modules.dedup();
        for (site, name, macro_rules) in &self.handed_modules {
            self.discovery.errors.push(format!(
                "{site}: `{name}` (macro_rules! {macro_rules}, which declares a file module) is handed to a macro as a token that a macro_rules! may call as `$m!(…)`, loading a module ci-key cannot place; call {name}! directly"
            ));
        }
        for embed in &self.passed_include {
            if let EmbedTarget::Unresolved(what) = &embed.target {
                let site = format!(
                    "{}:{}",
                    display(self.inputs.root(), &embed.site.file),
                    embed.site.line
                );
                declare_or_refuse(
                    embed,
                    what,
                    &site,
                    self.policy,
                    self.inputs,
                    &mut self.used_dynamic,
                    &mut self.discovery,
                );
            }
        }
    }

    /// Warns about stale `[[key.dynamic-include]]` entries, drops repeated
    /// problems and hands back what was found.
    fn finish(mut self) -> (Discovery, Vec<(String, String)>) {
        for dynamic in &self.policy.dynamic_include {
            if !self.used_dynamic.contains(&dynamic.site) {
                self.discovery.warnings.push(format!(
                    "key.dynamic-include for {} matches no unresolvable include there; remove the stale entry",
                    dynamic.site
                ));
            }
        }
        // A body read once per `cfg_attr` directory repeats its problems.
        let mut seen = HashSet::new();
        self.discovery.errors.retain(|e| seen.insert(e.clone()));
        let mut seen = HashSet::new();
        self.discovery.warnings.retain(|w| seen.insert(w.clone()));
        (self.discovery, self.renames)
    }
}

/// What a `macro_rules!` body's `mod` loads when called in `caller`; for
/// `mod $m;`, whose name each caller chooses, every module that the caller's
/// module directory holds (`x.rs`, `x/mod.rs`).
fn macro_module_decls(
    module: &scan::MacroModule,
    caller: &Path,
    module_dir: &Path,
    inline_depth: usize,
    package_dir: &Path,
) -> Vec<scan::ModuleDecl> {
    let names: Vec<Option<String>> = match &module.name {
        Some(_) => vec![module.name.clone()],
        None => {
            let mut names: Vec<Option<String>> = std::fs::read_dir(module_dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|entry| {
                    let file_name = entry.file_name().to_str()?.to_owned();
                    match file_name.strip_suffix(".rs") {
                        Some(stem) => Some(Some(stem.to_owned())),
                        None => entry
                            .path()
                            .join("mod.rs")
                            .exists()
                            .then_some(Some(file_name)),
                    }
                })
                .collect();
            names.sort();
            names
        }
    };
    names
        .into_iter()
        .filter_map(|name| {
            let named = scan::MacroModule {
                name,
                ..module.clone()
            };
            named.decl(caller, module_dir, inline_depth, package_dir)
        })
        .collect()
}

/// An include whose files ci-key cannot compute: covered by the policy's
/// `[[key.dynamic-include]]` entries for its file, or refused.
fn declare_or_refuse(
    embed: &scan::Embed,
    what: &str,
    site: &str,
    policy: &KeyPolicy,
    inputs: &mut InputSet,
    used_dynamic: &mut HashSet<String>,
    discovery: &mut Discovery,
) {
    let file_rel = display(inputs.root(), &embed.site.file);
    let declared: Vec<_> = policy
        .dynamic_include
        .iter()
        .filter(|d| d.site == file_rel)
        .collect();
    if declared.is_empty() {
        discovery.errors.push(format!(
            "{site}: {} names {what}, which ci-key cannot resolve statically; list the files it can read in the policy: \
             [[key.dynamic-include]] site = \"{file_rel}\", files = [\"<glob>\"], reason = \"…\"",
            embed.macro_name
        ));
    }
    for dynamic in declared {
        used_dynamic.insert(dynamic.site.clone());
        for glob in &dynamic.files {
            let reason = format!("declared in key.dynamic-include for {site}");
            match inputs.add_glob(glob, &reason) {
                Ok(0) => discovery.warnings.push(format!(
                    "key.dynamic-include glob {glob:?} for {file_rel} matches no file"
                )),
                Ok(_) => {}
                Err(err) => discovery
                    .errors
                    .push(format!("key.dynamic-include {glob:?}: {err:#}")),
            }
        }
    }
}

/// The names a `macro_rules!` can be invoked by: its own, every `use … as`
/// alias of it (chains included), and, since a macro that calls it makes
/// rustc resolve the include from *that* macro's caller, the names of every
/// `macro_rules!` whose body calls one of these, with their aliases.
fn invocation_names(
    name: &str,
    renames: &[(String, String)],
    macro_calls: &[(String, String)],
) -> HashSet<String> {
    let mut names = HashSet::from([name.to_owned()]);
    loop {
        let before = names.len();
        for (from, to) in renames {
            if names.contains(from) {
                names.insert(to.clone());
            }
        }
        for (definer, called) in macro_calls {
            if names.contains(called) {
                names.insert(definer.clone());
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// An embed in a `macro_rules!` body, with a path relative to the file.
struct MacroEmbed {
    /// The path is wholly the caller's argument (`include_str!($p)`).
    whole: bool,
    definition: PathBuf,
    site: String,
    macro_name: String,
    relative: CallerRelative,
}

/// What the walk learned about macros, crate-wide.
struct MacroKnowledge<'a> {
    renames: &'a [(String, String)],
    macro_calls: &'a [(String, String)],
    any_metavariable_call: bool,
}

/// How many macro names (macros that include or declare modules, their
/// aliases and the macros that call them) ci-key follows before refusing.
const MAX_MACRO_NAMES: usize = 1024;

/// The calls of some macros in every module file, each file read once: its
/// call sites of any of their names, and the aliases and calling macros
/// that give them other names. A file the prefilter skipped may still alias
/// a macro (`use crate::m as k;`) or call it from another `macro_rules!`.
struct MacroCalls {
    /// Per text, in the order given.
    sites: Vec<Vec<scan::CallSite>>,
    renames: Vec<(String, String)>,
    calls: Vec<(String, String)>,
}

impl MacroCalls {
    /// `Err` when the names grow past [`MAX_MACRO_NAMES`].
    fn read(roots: &[&str], known: &MacroKnowledge<'_>, texts: &[&str]) -> Result<Self, String> {
        let mut names: HashSet<String> = roots
            .iter()
            .flat_map(|root| invocation_names(root, known.renames, known.macro_calls))
            .collect();
        let text_renames: Vec<Vec<(String, String)>> = texts
            .iter()
            .map(|text| {
                if memchr::memmem::find(text.as_bytes(), b"as").is_some() {
                    scan::use_renames(text)
                } else {
                    Vec::new()
                }
            })
            .collect();
        loop {
            if names.len() > MAX_MACRO_NAMES {
                return Err(format!(
                    "more than {MAX_MACRO_NAMES} macro names lead to include macros or module declarations in macro_rules! bodies (aliases and macros calling them); ci-key refuses to follow that many"
                ));
            }
            let before = names.len();
            for (from, to) in text_renames.iter().flatten() {
                if names.contains(from) {
                    names.insert(to.clone());
                }
            }
            let sites: Vec<Vec<scan::CallSite>> = texts
                .iter()
                .map(|text| {
                    if names.iter().any(|n| text.contains(n.as_str())) {
                        // A file that does not tokenise was refused when read.
                        scan::call_sites(text, &names).unwrap_or_default()
                    } else {
                        Vec::new()
                    }
                })
                .collect();
            // A macro whose body *calls* one of them; a mere mention
            // (`::core::prelude::v1`) is no call.
            for site in sites.iter().flatten() {
                if let Some(definer) = site.definer.as_ref().filter(|_| !site.handed_over) {
                    names.insert(definer.clone());
                }
            }
            if names.len() == before {
                let renames = known
                    .renames
                    .iter()
                    .cloned()
                    .chain(text_renames.into_iter().flatten())
                    .collect();
                let calls = known
                    .macro_calls
                    .iter()
                    .cloned()
                    .chain(
                        sites
                            .iter()
                            .flatten()
                            .filter(|s| !s.handed_over)
                            .filter_map(|s| Some((s.definer.clone()?, s.name.clone()))),
                    )
                    .collect();
                return Ok(MacroCalls {
                    sites,
                    renames,
                    calls,
                });
            }
        }
    }

    /// The names `root` is invoked by.
    fn names_of(&self, root: &str) -> HashSet<String> {
        invocation_names(root, &self.renames, &self.calls)
    }
}

/// rustc resolves a relative include path from the file where the outermost
/// macro call stands, not where `macro_rules!` defines it. The definition's
/// own directory was used while walking (right for a macro used in its own
/// file); here the path is resolved again from every other module file of
/// the workspace that calls the macro, by its name, an alias, or through
/// another `macro_rules!` that calls it (a `#[macro_export]` macro is
/// called from other crates). A path wholly the caller's (`include_str!($p)`)
/// is each outermost call's string literal, from the caller's file; a call
/// whose argument is not plain literals, or a macro handed over as a token
/// where some `macro_rules!` calls a metavariable, is refused unless
/// declared. Callers in registry crates are left to `verify-key`.
fn resolve_from_callers(
    macro_embeds: &[MacroEmbed],
    callers: &[PathBuf],
    known: &MacroKnowledge<'_>,
    policy: &KeyPolicy,
    used_dynamic: &mut HashSet<String>,
    inputs: &mut InputSet,
    discovery: &mut Discovery,
) -> Vec<(PathBuf, PathBuf)> {
    // (file an `include!` reads, the calling file): walked like modules.
    let mut included: Vec<(PathBuf, PathBuf)> = Vec::new();
    if macro_embeds.is_empty() {
        return included;
    }
    let mut seen: HashSet<&Path> = HashSet::new();
    let texts: Vec<(PathBuf, String)> = callers
        .iter()
        .filter(|caller| seen.insert(caller.as_path()))
        .filter_map(|caller| Some((caller.clone(), std::fs::read_to_string(caller).ok()?)))
        .collect();
    let text_refs: Vec<&str> = texts.iter().map(|(_, text)| text.as_str()).collect();
    let roots: Vec<&str> = macro_embeds
        .iter()
        .map(|e| e.relative.macro_rules.as_str())
        .collect();
    let calls = match MacroCalls::read(&roots, known, &text_refs) {
        Ok(calls) => calls,
        Err(why) => {
            discovery.errors.push(why);
            return included;
        }
    };
    let mut names_of: HashMap<&str, HashSet<String>> = HashMap::new();
    for embed in macro_embeds {
        let name = &embed.relative.macro_rules;
        let names = names_of
            .entry(name.as_str())
            .or_insert_with(|| calls.names_of(name))
            .clone();
        for ((caller, _), all_sites) in texts.iter().zip(&calls.sites) {
            let sites: Vec<&scan::CallSite> = all_sites
                .iter()
                .filter(|s| names.contains(&s.name))
                .collect();
            if sites.is_empty() {
                continue;
            }
            let caller_rel = display(inputs.root(), caller);
            let base = caller.parent().unwrap_or(Path::new("/"));
            let why = format!(
                "embedded by {} in macro_rules! {name} ({}), called from {caller_rel}",
                embed.macro_name, embed.site
            );
            for site in &sites {
                let at = format!("{caller_rel}:{}", site.line);
                let refusal = if site.handed_over {
                    known.any_metavariable_call.then(|| {
                        format!(
                            "a path chosen where `{}` (macro_rules! {name}, which includes a path at {}) is handed to a macro as a token that a macro_rules! may call as `$m!(…)`",
                            site.name, embed.site
                        )
                    })
                } else if !embed.whole {
                    None
                } else if site.definer.is_some() {
                    // Passing its own arguments on (`m!($p)`) is resolved at
                    // its callers; a literal or a macro call here is not.
                    (site.has_macro_call || !site.literals.is_empty()).then(|| {
                            format!(
                                "the path of {}! inside a macro_rules! body (macro_rules! {name} includes its argument at {}), which its callers' arguments do not give",
                                site.name, embed.site
                            )
                        })
                } else {
                    site.opaque.as_ref().map(|opaque| {
                        format!(
                            "the argument of {}! ({opaque}), which macro_rules! {name} includes as a path at {}",
                            site.name, embed.site
                        )
                    })
                };
                if let Some(what) = refusal {
                    let declared = scan::Embed {
                        macro_name: format!("{}!", site.name),
                        target: EmbedTarget::Unresolved(what.clone()),
                        site: scan::Site {
                            file: caller.clone(),
                            line: site.line,
                        },
                        caller_relative: None,
                    };
                    declare_or_refuse(
                        &declared,
                        &what,
                        &at,
                        policy,
                        inputs,
                        used_dynamic,
                        discovery,
                    );
                    continue;
                }
                if embed.whole && !site.handed_over && site.definer.is_none() {
                    for literal in &site.literals {
                        let path = super::workspace::normalize(&base.join(literal));
                        let why = format!("{why}:{}", site.line);
                        if let Err(err) = inputs
                            .add_maybe_absent(&path, &why)
                            .and_then(|()| inputs.add_link_target(&path, &why))
                        {
                            discovery.errors.push(format!(
                                "{at}: {}!({literal:?}), which macro_rules! {name} includes: {err:#}",
                                site.name
                            ));
                        } else if embed.macro_name == "include!" && path.is_file() {
                            included.push((path, caller.clone()));
                        }
                    }
                }
            }
            if embed.whole || *caller == embed.definition || !sites.iter().any(|s| !s.handed_over) {
                continue;
            }
            let path = super::workspace::normalize(&base.join(&embed.relative.text));
            let result = if embed.relative.is_pattern {
                path.strip_prefix(inputs.root())
                    .ok()
                    .and_then(|p| p.to_str())
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow::anyhow!("{} leaves the repository", path.display()))
                    .and_then(|rel| inputs.add_pattern(&rel, &why))
                    .map(drop)
            } else {
                inputs
                    .add_maybe_absent(&path, &why)
                    .and_then(|()| inputs.add_link_target(&path, &why))
            };
            if let Err(err) = result {
                discovery.errors.push(format!(
                    "{}: {} in macro_rules! {name}, called from {caller_rel}: {err:#}",
                    embed.site, embed.macro_name
                ));
            } else if embed.macro_name == "include!" && !embed.relative.is_pattern && path.is_file()
            {
                included.push((path, caller.clone()));
            }
        }
    }
    included
}

fn display(root: &Path, path: &Path) -> String {
    let normal = super::workspace::normalize(path);
    normal
        .strip_prefix(root)
        .unwrap_or(&normal)
        .display()
        .to_string()
}

/// Reads one module file (once) and scans it when it may reference files.
fn read_and_scan(job: &Job, root: &Root, aliases: &HashMap<String, String>) -> Outcome {
    let path = &job.file;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Outcome::Missing,
        Err(err) => return Outcome::Failed(format!("{}: cannot stat: {err}", path.display())),
    };
    let (link_hash, content_path) = if meta.file_type().is_symlink() {
        let link = match inputs::hash_path(path) {
            Ok(link) => link,
            Err(err) => return Outcome::Failed(format!("{err:#}")),
        };
        match std::fs::canonicalize(path) {
            Ok(target) => (Some(link), target),
            Err(err) => {
                return Outcome::Failed(format!(
                    "{}: a module symlink that does not resolve: {err}",
                    path.display()
                ));
            }
        }
    } else if meta.is_file() {
        (None, path.clone())
    } else {
        return Outcome::Failed(format!(
            "{}: a module that is not a regular file",
            path.display()
        ));
    };
    let bytes = match std::fs::read(&content_path) {
        Ok(bytes) => bytes,
        Err(err) => {
            return Outcome::Failed(format!("{}: cannot read: {err}", content_path.display()));
        }
    };
    let content_meta = match std::fs::metadata(&content_path) {
        Ok(meta) => meta,
        Err(err) => {
            return Outcome::Failed(format!("{}: cannot stat: {err}", content_path.display()));
        }
    };
    let content_hash = inputs::hash_bytes(&bytes, &content_meta);
    let (hashed, symlink_target) = match link_hash {
        Some(link) => (link, Some((content_path, content_hash))),
        None => (content_hash, None),
    };
    if !scan::may_reference_files(&bytes)
        && !aliases
            .keys()
            .any(|alias| memchr::memmem::find(&bytes, alias.as_bytes()).is_some())
    {
        return Outcome::Read {
            hashed,
            symlink_target,
            scan: None,
        };
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Outcome::Failed(format!(
            "{}: not UTF-8, so rustc would refuse it too",
            path.display()
        ));
    };
    let ctx = FileContext {
        file: path,
        module_dir: &job.module_dir,
        package_dir: &root.package_dir,
        aliases,
    };
    Outcome::Read {
        hashed,
        symlink_target,
        scan: Some(Box::new(scan::scan_file(text, &ctx))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_macro_calling_another_shares_its_callers_but_a_mention_does_not() {
        let known = MacroKnowledge {
            renames: &[],
            macro_calls: &[],
            any_metavariable_call: false,
        };
        let texts = [
            "macro_rules! prelude { () => { mod types; } }",
            // A mention of the name as a path segment, as libc's `s!` has.
            "macro_rules! s { () => { #[::core::prelude::v1::derive(Clone)] struct S; } }",
            "macro_rules! outer { () => { prelude!(); } }",
            "use crate::outer as o;",
        ];
        let names = MacroCalls::read(&["prelude"], &known, &texts)
            .unwrap()
            .names_of("prelude");
        let mut names: Vec<_> = names.into_iter().collect();
        names.sort();
        assert_eq!(names, ["o", "outer", "prelude"]);
    }

    #[test]
    fn too_many_macro_names_are_refused_not_followed() {
        let known = MacroKnowledge {
            renames: &[],
            macro_calls: &[],
            any_metavariable_call: false,
        };
        let roots: Vec<String> = (0..=MAX_MACRO_NAMES).map(|i| format!("m{i}")).collect();
        let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
        let err = MacroCalls::read(&roots, &known, &["m0!(\"x\");"])
            .err()
            .expect("refused");
        assert!(err.contains("refuses to follow that many"), "{err}");
    }
}
