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

use super::callers::{
    Expansions, Invokers, MacroCalls, MacroEmbed, MacroKnowledge, resolve_from_callers,
};
use super::inputs::{self, Hashed, InputSet};
use super::scan::{self, EmbedTarget, FileContext, FileScan};
use crate::policy::KeyPolicy;

/// The token-output macros (`quote!`, `parse_quote!`) whose crate the
/// package depends on from a registry, under the crate's own name, and no
/// other dependency is linked under: `quote!` there is the quote crate's
/// (unless a `macro_rules!` or alias of the workspace takes the name, which
/// [`discover`] checks). A `quote` of the checkout (a path or git
/// dependency, a `[patch]`, a workspace package of that name) is code the
/// pull request writes, so its arguments are read.
pub fn token_output_macros(
    package: &super::workspace::Package,
    workspace: &super::workspace::Workspace,
) -> Vec<&'static str> {
    scan::TOKEN_OUTPUT_MACROS
        .iter()
        .filter(|(_, krate)| {
            let deps = &package.dependency_renames;
            deps.iter()
                .any(|(name, rename, registry)| name == krate && rename.is_none() && *registry)
                && !deps
                    .iter()
                    .any(|(name, rename, _)| name != krate && rename.as_deref() == Some(krate))
                && !workspace.packages.iter().any(|p| p.name == *krate)
        })
        .map(|(name, _)| *name)
        .collect()
}

/// A crate root to start from.
#[derive(Clone)]
pub struct Root {
    pub file: PathBuf,
    pub package_dir: PathBuf,
    /// Says which target of which package this is, for `--explain`.
    pub label: String,
    /// The crate name of the target (`-` as `_`): a macro path through it
    /// (`my_crate::gen!`) names the workspace's macro.
    pub crate_name: String,
    pub build_script: bool,
    /// The token-output macros (`quote!`) of the package: the arguments of
    /// their calls are text the package emits, never read as includes.
    pub token_output: Vec<&'static str>,
    /// Where cargo runs rustc for this package (the workspace root, or the
    /// package's directory outside it): the assembler resolves the files of
    /// `.incbin` and `.include` from there.
    pub rustc_cwd: PathBuf,
    /// What cargo sets `CARGO_PKG_README` to for the package (`""` for none).
    pub readme: String,
    /// The directories of the packages whose macros the target can name:
    /// its own and its path dependencies', transitively
    /// ([`packages_seen_by`]). A `macro_rules! quote` of another package
    /// leaves this target's `quote!` the registry crate's.
    pub sees_packages: Vec<PathBuf>,
}

/// The directories of `package` and of every workspace package it reaches
/// through path dependencies (of any kind), transitively.
pub fn packages_seen_by(
    package: &super::workspace::Package,
    workspace: &super::workspace::Workspace,
) -> Vec<PathBuf> {
    let mut seen = vec![package.dir.clone()];
    let mut next = vec![package];
    while let Some(package) = next.pop() {
        for (_, manifest) in &package.path_dependencies {
            let Some(dep) = workspace.packages.iter().find(|p| &p.manifest == manifest) else {
                // Not read as a package: its directory still counts.
                if let Some(dir) = manifest.parent() {
                    if !seen.iter().any(|d| d == dir) {
                        seen.push(dir.to_path_buf());
                    }
                }
                continue;
            };
            if !seen.contains(&dep.dir) {
                seen.push(dep.dir.clone());
                next.push(dep);
            }
        }
    }
    seen
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
    /// The sites whose `[[key.dynamic-include]]` entry a refusal printed.
    pub suggested_sites: HashSet<String>,
    /// Token-output macro names (`quote`) that a `macro_rules!` or an alias
    /// of the workspace takes, with the package whose files do: in the
    /// targets that can name that package's macros, their arguments must be
    /// read after all.
    pub shadowed_token_output: HashSet<(String, PathBuf)>,
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
    // `quote!`'s arguments are skipped as token output; a `macro_rules!
    // quote` or `use … as quote` of the workspace makes the name its own,
    // and the walk is done again reading them.
    let mut roots = roots.to_vec();
    let mut shadowed: HashSet<(String, PathBuf)> = HashSet::new();
    for walks in 1.. {
        let (mut discovery, renames) = walk(&roots, inputs, policy, &aliases);
        let newly_shadowed = !discovery.shadowed_token_output.is_subset(&shadowed);
        if newly_shadowed {
            shadowed.extend(discovery.shadowed_token_output.iter().cloned());
            for root in &mut roots {
                let Root {
                    token_output,
                    sees_packages,
                    ..
                } = root;
                token_output.retain(|name| {
                    !shadowed.iter().any(|(shadowing, package)| {
                        shadowing == name && sees_packages.contains(package)
                    })
                });
            }
        }
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
        if aliases.len() == known && !newly_shadowed {
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
        frontier.extend(walk.follow_expansions());
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
    /// An include macro handed to a macro as a token is a call only where
    /// that macro may invoke it (`$m!(…)`): decided after the walk, once
    /// every `macro_rules!` is known (`Invokers`).
    metavariable_callers: HashSet<String>,
    bare_bang_to: HashSet<String>,
    macros_defined: HashSet<String>,
    /// The names `macro NAME` items (macros 2.0) define: their rules are
    /// not read, so none of them is known to emit only its own tokens.
    macro_items: HashSet<String>,
    /// Token-output macro names a `macro_rules!` or a rename takes, with
    /// the package whose files do (see [`Discovery::shadowed_token_output`]).
    token_output_taken: HashSet<(String, PathBuf)>,
    /// An `include!` of a file a build script writes (`OUT_DIR`): code the
    /// walk does not read, which may define any macro.
    includes_generated_code: bool,
    passed_include: Vec<scan::PassedInclude>,
    /// Includes whose path a macro call gives, and every `macro_rules!`
    /// definition seen: expanded once the definitions are known.
    expansions: Expansions,
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
    /// (site, name, macro_rules, the macro it is handed to) where a macro
    /// declaring modules is handed over as a token: refused where that
    /// macro may invoke it.
    handed_modules: Vec<(String, String, String, String)>,
    macro_embeds: Vec<MacroEmbed>,
    /// Assembler templates that `macro_rules!` bodies build from their
    /// callers' tokens, with the root they were read under.
    assembler_bounds: Vec<(scan::AssemblerBound, usize)>,
    /// Why each root's module files are inputs, spelt once per root.
    module_reasons: Vec<String>,
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
            metavariable_callers: HashSet::new(),
            bare_bang_to: HashSet::new(),
            macros_defined: HashSet::new(),
            macro_items: HashSet::new(),
            token_output_taken: HashSet::new(),
            includes_generated_code: false,
            passed_include: Vec::new(),
            expansions: Expansions::default(),
            visited: HashSet::new(),
            used_dynamic: HashSet::new(),
            walked: Vec::new(),
            macro_modules: Vec::new(),
            walked_texts: HashMap::new(),
            handed_modules: Vec::new(),
            macro_embeds: Vec::new(),
            assembler_bounds: Vec::new(),
            module_reasons: roots
                .iter()
                .map(|root| format!("module of {}", root.label))
                .collect(),
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
        // Spelt only for a message (this runs once per file read).
        let rel = |inputs: &InputSet| display(inputs.root(), &job.file);
        let reason = &self.module_reasons[job.root];
        let discovery = &mut self.discovery;
        match outcome {
            Outcome::Missing => {
                discovery.errors.push(format!(
                    "{}: the crate root of {} does not exist",
                    rel(self.inputs),
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
                if let Err(err) = self.inputs.add(&job.file, reason) {
                    discovery
                        .errors
                        .push(format!("{}: {err:#}", rel(self.inputs)));
                    return None;
                }
                discovery
                    .known
                    .insert(super::workspace::normalize(&job.file), hashed);
                self.walked
                    .push((job.file.clone(), job.module_dir.clone(), job.root));
                if let Some((target, target_hash)) = symlink_target {
                    let rel = rel(self.inputs);
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
        self.metavariable_callers
            .extend(scan.metavariable_callers.iter().cloned());
        self.bare_bang_to.extend(scan.bare_bang_to.iter().cloned());
        self.macros_defined
            .extend(scan.macro_rules_defined.iter().cloned());
        self.macro_items.extend(scan.macro_items.iter().cloned());
        let package = &self.roots[job.root].package_dir;
        let takes = scan
            .macro_rules_defined
            .iter()
            .chain(scan.use_renames.iter().map(|(_, to)| to));
        for name in takes {
            if scan::TOKEN_OUTPUT_MACROS.iter().any(|(n, _)| n == name) {
                self.token_output_taken
                    .insert((name.clone(), package.clone()));
            }
        }
        self.assembler_bounds.extend(
            scan.assembler_bounds
                .iter()
                .map(|bound| (bound.clone(), job.root)),
        );
        for definition in &scan.macro_definitions {
            self.expansions.define(definition);
        }
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
        // Spelt only for a message: this runs for every `mod x;` of the
        // workspace, on the one thread that records what the pool read.
        let site = |inputs: &InputSet| {
            format!(
                "{}:{}",
                display(inputs.root(), &module.site.file),
                module.site.line
            )
        };
        // A candidate the repository holds (`relative` is `Ok`) and a walk
        // met is there; any other is asked of the file system.
        let found = module.candidates.iter().find_map(|(file, dir)| {
            let rel = inputs.relative(file);
            let present = match &rel {
                Ok(rel) => inputs.is_known_present(rel),
                Err(_) => false,
            } || std::fs::symlink_metadata(file).is_ok();
            present.then_some((file, dir, rel.is_ok()))
        });
        match found {
            Some((file, dir, inside)) => {
                if !inside {
                    discovery.errors.push(format!(
                    "{}: `mod {};` loads {}, outside the repository or in an excluded area; move the file into the repository",
                    site(inputs),
                    module.name,
                    file.display()
                ));
                } else {
                    self.enqueue(file.clone(), dir.clone(), job.root, next);
                }
            }
            None => {
                let site = site(inputs);
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
                at_calls: match &embed.target {
                    EmbedTarget::AtCalls(what) => Some(what.clone()),
                    _ => None,
                },
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
                // One `lstat` says whether it exists and is a directory
                // (through a symlink, the target says).
                let meta = std::fs::symlink_metadata(&path).ok();
                let is_dir = match &meta {
                    Some(meta) if meta.file_type().is_symlink() => path.is_dir(),
                    Some(meta) => meta.is_dir(),
                    None => false,
                };
                if is_dir {
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
                } else if meta.is_none() {
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
            EmbedTarget::Candidates(paths) => {
                let mut found = false;
                for path in paths {
                    let path = super::workspace::normalize(path);
                    found |= std::fs::symlink_metadata(&path).is_ok();
                    if let Err(err) = inputs
                        .add_maybe_absent(&path, &why)
                        .and_then(|()| inputs.add_link_target(&path, &why))
                    {
                        discovery.errors.push(format!(
                            "{site}: {} cannot be a key input: {err:#}",
                            embed.macro_name
                        ));
                    }
                }
                if !found {
                    discovery.warnings.push(format!(
                        "{site}: {} reads none of its candidates, which do not exist; their absence is hashed",
                        embed.macro_name
                    ));
                }
            }
            // Resolved at each caller, once every module file is known.
            EmbedTarget::FromCallers | EmbedTarget::AtCalls(_) => {}
            // Expanded once the definitions of the workspace are known.
            EmbedTarget::Expand { .. } => {
                self.expansions.pending.push((embed.clone(), job.root));
            }
            EmbedTarget::OutDir => {
                discovery.out_dir_embeds += 1;
                // Whatever reads it as other than bytes or a string may
                // read it as code (`include!`, an alias of it).
                self.includes_generated_code |=
                    !matches!(embed.macro_name.as_str(), "include_str!" | "include_bytes!");
            }
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
            EmbedTarget::Assembler { path, source } => {
                self.resolve_assembler_files(job.root, embed, path, *source, &site);
            }
        }
    }

    /// The files an assembler template reads, from rustc's working
    /// directory: each is an input (present or absent), and an `.include`d
    /// source is read for its own directives, transitively.
    fn resolve_assembler_files(
        &mut self,
        root: usize,
        embed: &scan::Embed,
        path: &Path,
        source: bool,
        site: &str,
    ) {
        /// More assembler files than this from one template is a loop or an attack.
        const MAX_ASSEMBLER_FILES: usize = 1024;
        let cwd = self.roots[root].rustc_cwd.clone();
        let mut pending = vec![(cwd.join(path), source)];
        let mut seen = HashSet::new();
        while let Some((file, source)) = pending.pop() {
            let file = super::workspace::normalize(&file);
            if !seen.insert(file.clone()) {
                continue;
            }
            if seen.len() > MAX_ASSEMBLER_FILES {
                self.discovery.errors.push(format!(
                    "{site}: {} reads more than {MAX_ASSEMBLER_FILES} assembler files through `.include`; ci-key refuses to follow that many",
                    embed.macro_name
                ));
                return;
            }
            let rel = display(self.inputs.root(), &file);
            let why = format!("read by the assembler for {} at {site}", embed.macro_name);
            if let Err(err) = self
                .inputs
                .add_maybe_absent(&file, &why)
                .and_then(|()| self.inputs.add_link_target(&file, &why))
            {
                self.discovery.errors.push(format!(
                    "{site}: {} reads {rel}, which cannot be a key input: {err:#}",
                    embed.macro_name
                ));
                continue;
            }
            if !source || !file.is_file() {
                continue;
            }
            let text = match std::fs::read(&file).map(String::from_utf8) {
                Ok(Ok(text)) => text,
                _ => {
                    self.discovery.errors.push(format!(
                        "{site}: {} reads the assembler source {rel}, which is not readable UTF-8 text, so its `.incbin`/`.include` directives cannot be found",
                        embed.macro_name
                    ));
                    continue;
                }
            };
            for directive in scan::asm_directives(&text) {
                match directive {
                    Ok((name, source)) => pending.push((cwd.join(name), source)),
                    Err(why) => {
                        let what = format!("{why} in {rel}");
                        declare_or_refuse(
                            embed,
                            &what,
                            site,
                            self.policy,
                            self.inputs,
                            &mut self.used_dynamic,
                            &mut self.discovery,
                        );
                    }
                }
            }
        }
    }

    /// Which macros may invoke an identifier they are handed, as far as
    /// the walk knows.
    fn invokers(&self) -> Invokers {
        Invokers::new(
            &self.metavariable_callers,
            &self.bare_bang_to,
            &self.macros_defined,
            &self.renames,
            &self.macro_calls,
            &self.emit_only_their_own(),
        )
    }

    /// For each `macro_rules!` name, whether every definition of it emits
    /// only its own tokens, as far as the walk read them. The answer is by
    /// name, so it holds only where no macro of that name can hide from
    /// the walk: a `macro NAME` item defines the name with rules ci-key
    /// does not read, and so does a workspace proc macro's `fn NAME`; a
    /// `use $m::T;` or `use $a as T;` a macro expands to gives `T` to what
    /// ci-key does not see; a `macro_rules! $name` in a macro's body, a
    /// `use $a as $b`, and an `include!` of code a build script writes may
    /// define or rename any name, so with one of those nothing is.
    fn emit_only_their_own(&self) -> HashMap<String, bool> {
        let renamed = self.expansions.names_expansions_may_rename();
        let Some(renamed) = renamed.filter(|_| {
            !self.includes_generated_code && !self.macros_defined.iter().any(|n| n.starts_with('$'))
        }) else {
            return HashMap::new();
        };
        let mut own = self.expansions.emit_only_their_own();
        for name in self.macro_items.iter().chain(&renamed) {
            own.insert(name.clone(), false);
        }
        let candidates: Vec<String> = own
            .iter()
            .filter(|(_, own)| **own)
            .map(|(name, _)| name.clone())
            .collect();
        if candidates.is_empty() {
            return own;
        }
        let mut seen = HashSet::new();
        for (file, _, root) in &self.walked {
            if !self.roots[*root].label.starts_with("proc-macro ") || !seen.insert(file) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(file) else {
                // Unreadable here, so no name is known not to be its.
                return HashMap::new();
            };
            for name in &candidates {
                if scan::defines_fn(&text, name) {
                    own.insert(name.clone(), false);
                }
            }
        }
        own
    }

    /// The scan skips groups that hold no include form, and so the `use …
    /// as` renames inside them: a macro handed an include under a name the
    /// walk does not know may be an alias of one that invokes it. Every
    /// walked file that mentions such a name is read for its renames.
    fn learn_renames_of(&mut self, invokers: &Invokers) {
        let mut names: Vec<&str> = self
            .passed_include
            .iter()
            .map(|p| p.handed_to.as_str())
            .chain(self.handed_modules.iter().map(|h| h.3.as_str()))
            // An inert macro's renames too: a `use other::m as T;` in a
            // group the scan skipped would make `T` another macro.
            .filter(|name| invokers.is_unknown(name) || invokers.is_inert(name))
            .collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            return;
        }
        // A file walked under several packages' targets is listed once per
        // target: each of those packages takes a name it renames to.
        let mut packages_of: HashMap<&PathBuf, Vec<&PathBuf>> = HashMap::new();
        for (file, _, root) in &self.walked {
            packages_of
                .entry(file)
                .or_default()
                .push(&self.roots[*root].package_dir);
        }
        let mut renames = Vec::new();
        let mut taken = Vec::new();
        for (file, packages) in packages_of {
            let Ok(text) = std::fs::read_to_string(file) else {
                continue;
            };
            if !scan::may_rename_to(&text, &names) {
                continue;
            }
            let found = scan::use_renames(&text);
            for (_, to) in &found {
                if scan::TOKEN_OUTPUT_MACROS.iter().any(|(n, _)| n == to) {
                    taken.extend(packages.iter().map(|p| (to.clone(), (*p).clone())));
                }
            }
            renames.extend(found);
        }
        self.token_output_taken.extend(taken);
        self.renames.extend(renames);
    }

    /// Includes whose path a workspace macro's call gives, expanded where
    /// the definition is known; returns the `include!`d files to read next.
    fn follow_expansions(&mut self) -> Vec<Job> {
        let mut frontier = Vec::new();
        let files = self.expansions.resolve(
            self.roots,
            self.policy,
            self.inputs,
            &mut self.used_dynamic,
            &mut self.discovery,
        );
        for (file, root) in files {
            let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
            self.enqueue(file, dir, root, &mut frontier);
        }
        frontier
    }

    /// Reads every file walked so far into `walked_texts`, once each.
    fn read_walked_texts(&mut self) {
        for (file, _, _) in &self.walked {
            if !self.walked_texts.contains_key(file) {
                if let Ok(text) = std::fs::read_to_string(file) {
                    self.walked_texts.insert(file.clone(), text);
                }
            }
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
            self.read_walked_texts();
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
        let invokers = self.invokers();
        let known = MacroKnowledge {
            renames: &self.renames,
            macro_calls: &self.macro_calls,
            invokers: &invokers,
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
                site.handed_to.clone().unwrap_or_default(),
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
        let callers: Vec<(PathBuf, PathBuf)> = self
            .walked
            .iter()
            .map(|(file, _, root)| (file.clone(), self.roots[*root].package_dir.clone()))
            .collect();
        let invokers = self.invokers();
        let known = MacroKnowledge {
            renames: &self.renames,
            macro_calls: &self.macro_calls,
            invokers: &invokers,
        };
        let readmes: HashMap<PathBuf, String> = self
            .roots
            .iter()
            .map(|r| (r.package_dir.clone(), r.readme.clone()))
            .collect();
        let included = resolve_from_callers(
            &self.macro_embeds,
            &callers,
            &known,
            &self.expansions,
            &readmes,
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

    /// Assembler templates that `macro_rules!` bodies complete from their
    /// callers (`concat!("call ", stringify!($n))`,
    /// `include_str!(concat!("../", $dir, "/", $path))`), once every call
    /// and definition is known. Every file such a template may include is
    /// an input and is read for its own directives, exactly. The pieces its
    /// text can be made of (its tokens, what the workspace macros it calls
    /// transcribe, every call's arguments, the edges of those files) are
    /// then checked to spell no `.incbin`/`.include`
    /// ([`scan::may_spell_directive`]); where they could, the call whose
    /// arguments could is refused, by name, and where a piece cannot be
    /// bounded (a registry macro's output, a name handed to a macro that
    /// may invoke it), the template is.
    fn bound_assembler_templates(&mut self) {
        let mut bounds = std::mem::take(&mut self.assembler_bounds);
        bounds.sort_by(|(a, _), (b, _)| {
            (&a.site.file, a.site.line, &a.template).cmp(&(&b.site.file, b.site.line, &b.template))
        });
        bounds.dedup_by(|(a, _), (b, _)| a.site == b.site && a.template == b.template);
        if bounds.is_empty() {
            return;
        }
        self.read_walked_texts();
        let mut seen = HashSet::new();
        let callers: Vec<(PathBuf, usize, String)> = self
            .walked
            .iter()
            .filter(|(file, _, _)| seen.insert(file.clone()))
            .filter_map(|(file, _, root)| {
                Some((file.clone(), *root, self.walked_texts.get(file)?.clone()))
            })
            .collect();
        for (bound, root) in &bounds {
            let site = format!(
                "{}:{}",
                display(self.inputs.root(), &bound.site.file),
                bound.site.line
            );
            if let Err(refused) = self.bound_assembler_template(bound, *root, &callers, &site) {
                let (embed, what) = *refused;
                let at = format!(
                    "{}:{}",
                    display(self.inputs.root(), &embed.site.file),
                    embed.site.line
                );
                declare_or_refuse(
                    &embed,
                    &what,
                    &at,
                    self.policy,
                    self.inputs,
                    &mut self.used_dynamic,
                    &mut self.discovery,
                );
            }
        }
    }

    /// One template of [`Self::bound_assembler_templates`]; `Err` is the
    /// site to refuse (the template, or the call that could spell a
    /// directive) and why.
    fn bound_assembler_template(
        &mut self,
        bound: &scan::AssemblerBound,
        root: usize,
        callers: &[(PathBuf, usize, String)],
        site: &str,
    ) -> Result<(), Box<(scan::Embed, String)>> {
        let refusal = |file: &Path, line: usize, macro_name: String, what: String| {
            let embed = scan::Embed {
                macro_name,
                target: EmbedTarget::Unresolved(what.clone()),
                site: scan::Site {
                    file: file.to_path_buf(),
                    line,
                },
                caller_relative: None,
            };
            Box::new((embed, what))
        };
        let template = &bound.template;
        let here = |what: String| {
            refusal(
                &bound.site.file,
                bound.site.line,
                bound.macro_name.clone(),
                format!(
                    "the template `{template}` of macro_rules! {}, {what} (the assembler reads the files its `.incbin`/`.include` directives name)",
                    bound.macro_rules
                ),
            )
        };
        if let Some(why) = &bound.pieces.opaque {
            return Err(here(format!("which holds {why}")));
        }
        let aliases = self.aliases;
        let is_include_str = |name: &str| {
            name == "include_str" || aliases.get(name).map(String::as_str) == Some("include_str")
        };
        let mut atoms = bound.pieces.atoms.clone();
        atoms.extend([b" ".to_vec(), b"\n".to_vec()]);
        self.transcribed_atoms(bound.pieces.calls.clone(), &mut atoms)
            .map_err(|why| here(format!("which calls {why}")))?;
        // Every call, through aliases and the macros that call it, with
        // what its arguments can add.
        let mut sites: Vec<(usize, scan::CallSite, Vec<Vec<u8>>)> = Vec::new();
        if bound.pieces.metavariables || !bound.files.is_empty() {
            let invokers = self.invokers();
            let known = MacroKnowledge {
                renames: &self.renames,
                macro_calls: &self.macro_calls,
                invokers: &invokers,
            };
            let texts: Vec<&str> = callers.iter().map(|(_, _, text)| text.as_str()).collect();
            let calls = MacroCalls::read(&[bound.macro_rules.as_str()], &known, &texts)
                .map_err(|why| here(format!("whose callers cannot be followed: {why}")))?;
            let names = calls.names_of(&bound.macro_rules);
            for (index, found) in calls.sites.iter().enumerate() {
                for call in found.iter().filter(|s| names.contains(&s.name)) {
                    let file = &callers[index].0;
                    let at = |what: String| {
                        refusal(
                            file,
                            call.line,
                            format!("{}!", call.name),
                            format!(
                                "{what}, which macro_rules! {} pastes into the assembler template `{template}` ({} at {site}; the assembler reads the files its `.incbin`/`.include` directives name)",
                                bound.macro_rules, bound.macro_name
                            ),
                        )
                    };
                    if call.handed_over {
                        let handed_to = call.handed_to.as_deref().unwrap_or_default();
                        if invokers.may_invoke(handed_to) {
                            return Err(at(format!(
                                "the tokens `{}` is called with where it is handed to {handed_to}!, which may call it as `$m!(…)`",
                                call.name
                            )));
                        }
                        continue;
                    }
                    let pieces = scan::pieces_of(
                        &call.arguments,
                        (0, call.arguments.len()),
                        &is_include_str,
                    );
                    if let Some(why) = &pieces.opaque {
                        return Err(at(format!("arguments holding {why}")));
                    }
                    if !pieces.includes.is_empty() {
                        return Err(at("an `include_str!` among the arguments".to_owned()));
                    }
                    let mut call_atoms = pieces.atoms;
                    self.transcribed_atoms(pieces.calls, &mut call_atoms)
                        .map_err(|why| at(format!("arguments calling {why}")))?;
                    sites.push((index, call.clone(), call_atoms));
                }
            }
        }
        // The files it may include: resolved from its own file and from
        // each calling file, read for their own directives from the working
        // directory of each crate that compiles a call.
        let mut cwd_roots = vec![root];
        cwd_roots.extend(sites.iter().map(|(index, _, _)| callers[*index].1));
        cwd_roots.sort_unstable();
        cwd_roots.dedup();
        let why = format!("an assembler source of {} at {site}", bound.macro_name);
        let mut included = Vec::new();
        for (path, is_pattern, relative) in &bound.files {
            let mut candidates = vec![path.clone()];
            if let Some(relative) = relative {
                candidates.extend(sites.iter().map(|(index, _, _)| {
                    callers[*index]
                        .0
                        .parent()
                        .unwrap_or(Path::new("/"))
                        .join(relative)
                }));
            }
            candidates.sort();
            candidates.dedup();
            for candidate in candidates {
                let candidate = super::workspace::normalize(&candidate);
                if !is_pattern {
                    included.push(candidate);
                    continue;
                }
                let rel = display(self.inputs.root(), &candidate);
                if candidate.strip_prefix(self.inputs.root()).is_err() {
                    return Err(here(format!(
                        "which includes {rel}, outside the repository"
                    )));
                }
                let files = self
                    .inputs
                    .add_pattern_files(&rel, &why)
                    .map_err(|err| here(format!("whose files {rel} cannot be listed: {err:#}")))?;
                included.extend(files);
            }
        }
        included.sort();
        included.dedup();
        let embed = scan::Embed {
            macro_name: bound.macro_name.clone(),
            target: EmbedTarget::Unresolved(String::new()),
            site: bound.site.clone(),
            caller_relative: None,
        };
        let mut texts = Vec::new();
        for file in &included {
            if let Ok(bytes) = std::fs::read(file) {
                if std::str::from_utf8(&bytes).is_err() {
                    let rel = display(self.inputs.root(), file);
                    return Err(here(format!(
                        "which includes {rel}, not UTF-8 text, so its directives cannot be read"
                    )));
                }
                texts.push(bytes);
            }
            for &cwd_root in &cwd_roots {
                self.resolve_assembler_files(cwd_root, &embed, file, true, site);
            }
        }
        let texts: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
        let spells = |extra: Vec<&[u8]>| {
            scan::may_spell_directive(atoms.iter().map(Vec::as_slice).chain(extra), &texts)
        };
        let every_call = sites
            .iter()
            .flat_map(|(_, _, call_atoms)| call_atoms.iter().map(Vec::as_slice))
            .collect();
        if !spells(every_call) {
            return Ok(());
        }
        if spells(Vec::new()) {
            return Err(here(
                "whose own pieces can spell an `.incbin`/`.include` directive, which ci-key does not expand".to_owned(),
            ));
        }
        for (index, call, call_atoms) in &sites {
            if spells(call_atoms.iter().map(Vec::as_slice).collect()) {
                return Err(refusal(
                    &callers[*index].0,
                    call.line,
                    format!("{}!", call.name),
                    format!(
                        "arguments `{}` that can spell an `.incbin`/`.include` directive in the assembler template `{template}` of macro_rules! {} ({} at {site}), which ci-key does not expand",
                        call.arguments
                            .split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" "),
                        bound.macro_rules,
                        bound.macro_name
                    ),
                ));
            }
        }
        Err(here(
            "whose callers' arguments together can spell an `.incbin`/`.include` directive, which ci-key does not expand".to_owned(),
        ))
    }

    /// Adds to `atoms` every token a call of the workspace macros `pending`
    /// (and of the macros their transcribers call) can output; `Err` names
    /// one whose output is not bounded.
    fn transcribed_atoms(
        &self,
        mut pending: Vec<String>,
        atoms: &mut Vec<Vec<u8>>,
    ) -> Result<(), String> {
        /// More macros than this behind one template is a loop or an attack.
        const MAX_MACROS: usize = 256;
        let mut seen = HashSet::new();
        while let Some(name) = pending.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if seen.len() > MAX_MACROS {
                return Err(format!("more than {MAX_MACROS} macros"));
            }
            let definitions = self.expansions.definitions_of(&name);
            if definitions.is_empty() {
                return Err(format!(
                    "`{name}!`, which is not a macro_rules! of the workspace ci-key can read, so its output is not bounded"
                ));
            }
            for definition in definitions {
                for (_, transcriber) in &definition.rules {
                    let pieces = scan::pieces_of(transcriber, (0, transcriber.len()), &|n| {
                        n == "include_str"
                    });
                    if let Some(why) = pieces.opaque {
                        return Err(format!("`{name}!`, whose expansion holds {why}"));
                    }
                    if !pieces.includes.is_empty() {
                        return Err(format!("`{name}!`, whose expansion includes a file"));
                    }
                    atoms.extend(pieces.atoms);
                    pending.extend(pieces.calls);
                }
            }
        }
        Ok(())
    }

    /// Includes no definition could expand, and identifiers handed to a
    /// macro that may invoke them (`$m!(…)`), refused once the walk knows
    /// every `macro_rules!`.
    fn refuse_handed_over(&mut self) {
        self.bound_assembler_templates();
        self.expansions.refuse_unexpanded(
            self.policy,
            self.inputs,
            &mut self.used_dynamic,
            &mut self.discovery,
        );
        self.learn_renames_of(&self.invokers());
        let invokers = self.invokers();
        self.handed_modules.sort();
        self.handed_modules.dedup();
        for (site, name, macro_rules, handed_to) in &self.handed_modules {
            if invokers.may_invoke(handed_to) {
                self.discovery.errors.push(format!(
                    "{site}: `{name}` (macro_rules! {macro_rules}, which declares a file module) is handed to {handed_to}!, which may call it as `$m!(…)`, loading a module ci-key cannot place; call {name}! directly"
                ));
            }
        }
        for passed in &self.passed_include {
            if !invokers.may_invoke_include(&passed.handed_to, &passed.include) {
                continue;
            }
            let embed = &passed.embed;
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
        // An assembler template is read at a call by the macro's own name:
        // under another name its `.incbin` files would go unseen.
        for (from, to) in &self.renames {
            let assembler = scan::PATH_MACROS
                .iter()
                .any(|m| m.reads == scan::PathReads::AssemblerTemplate && m.name == from);
            if assembler {
                self.discovery.errors.push(format!(
                    "`use … {from} as {to};` renames an assembler macro, whose template ci-key reads (for the files its .incbin/.include directives name) only when it is called as {from}!; call {from}! by its name"
                ));
            }
        }
        for dynamic in &self.policy.dynamic_include {
            if !self.used_dynamic.contains(&dynamic.site) {
                self.discovery.warnings.push(format!(
                    "key.dynamic-include for {} matches no unresolvable include there; remove the stale entry",
                    dynamic.site
                ));
            }
        }
        self.discovery.shadowed_token_output = std::mem::take(&mut self.token_output_taken);
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

/// One sentence on why ci-key cannot know the files of an unresolved
/// include, from what it could not read.
fn why_unknowable(what: &str) -> &'static str {
    if what.contains("env!(") {
        "the variable is set only when the build runs (by a build script's `cargo:rustc-env` or the environment), and ci-key runs nothing"
    } else if what.contains("rules ci-key does not model") {
        "the macro's own code decides at compile time which files it reads, and ci-key runs no code of a crate"
    } else if what.contains("handed to") {
        "the macro it is handed to may invoke it with a path that no reading of the macro's definition shows"
    } else if what.contains("expand") || what.contains("a macro call") {
        "the path comes from a macro call ci-key does not expand"
    } else if what.contains("metavariable") || what.contains("callers") {
        "each caller of the macro chooses the path, and no call ci-key can find gives it as literals"
    } else {
        "ci-key evaluates only string literals, `concat!`, `env!(\"CARGO_MANIFEST_DIR\")` and the workspace's own `macro_rules!`"
    }
}

/// `text` as the inside of a TOML basic string.
fn toml_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_control() => c.escape_unicode().collect(),
            c => vec![c],
        })
        .collect()
}

/// An include whose files ci-key cannot compute: covered by the policy's
/// `[[key.dynamic-include]]` entries for its file, or refused.
pub(super) fn declare_or_refuse(
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
        let why = why_unknowable(what);
        let entry = if discovery.suggested_sites.insert(file_rel.clone()) {
            format!(
                "; declare the files it can read in .github/ci-trust.toml:\n      [[key.dynamic-include]]\n      site = \"{}\"\n      files = [\"<glob of the files it reads>\"]\n      reason = \"<why these files>\"",
                toml_escape(&file_rel)
            )
        } else {
            format!(
                "; the [[key.dynamic-include]] entry for site = \"{}\" covers it",
                toml_escape(&file_rel)
            )
        };
        discovery.errors.push(format!(
            "{site}: {} names {what}, which ci-key cannot resolve statically: {why}{entry}",
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

pub(super) fn display(root: &Path, path: &Path) -> String {
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
    // Nearly every module is a regular file: opened without following a
    // final symlink, it is read and hashed with no `stat` of its path.
    let (hashed, symlink_target, bytes) = match read_regular_file(path) {
        Some((bytes, meta)) => (inputs::hash_bytes(&bytes, &meta), None, bytes),
        None => match read_by_stat(path) {
            Ok(read) => read,
            Err(outcome) => return *outcome,
        },
    };
    scan_read(job, root, aliases, hashed, symlink_target, &bytes)
}

/// The bytes and metadata of `path` when it is a regular file (not a
/// symlink), opened with `O_NOFOLLOW`; `None` for anything else.
#[cfg(unix)]
fn read_regular_file(path: &Path) -> Option<(Vec<u8>, std::fs::Metadata)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file)?;
    // Read to the end into a buffer of the size `fstat` gave (one byte
    // more, to see the end): no second `fstat` and no `lseek`, as
    // `read_to_end` would make.
    let mut bytes = vec![0; usize::try_from(meta.len()).ok()? + 1];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            bytes.resize(bytes.len() * 2, 0);
        }
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    bytes.truncate(filled);
    Some((bytes, meta))
}

#[cfg(not(unix))]
fn read_regular_file(_path: &Path) -> Option<(Vec<u8>, std::fs::Metadata)> {
    None
}

type Read = (Hashed, Option<(PathBuf, Hashed)>, Vec<u8>);

/// Reads a module by `lstat` first: a symlink (hashed as its text, and the
/// file behind it), or the reason it cannot be read.
fn read_by_stat(path: &Path) -> Result<Read, Box<Outcome>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(Box::new(Outcome::Missing));
        }
        Err(err) => {
            return Err(Box::new(Outcome::Failed(format!(
                "{}: cannot stat: {err}",
                path.display()
            ))));
        }
    };
    let (link_hash, content_path) = if meta.file_type().is_symlink() {
        let link = match inputs::hash_path(path) {
            Ok(link) => link,
            Err(err) => return Err(Box::new(Outcome::Failed(format!("{err:#}")))),
        };
        match std::fs::canonicalize(path) {
            Ok(target) => (Some(link), target),
            Err(err) => {
                return Err(Box::new(Outcome::Failed(format!(
                    "{}: a module symlink that does not resolve: {err}",
                    path.display()
                ))));
            }
        }
    } else if meta.is_file() {
        (None, path.to_path_buf())
    } else {
        return Err(Box::new(Outcome::Failed(format!(
            "{}: a module that is not a regular file",
            path.display()
        ))));
    };
    let bytes = match std::fs::read(&content_path) {
        Ok(bytes) => bytes,
        Err(err) => {
            return Err(Box::new(Outcome::Failed(format!(
                "{}: cannot read: {err}",
                content_path.display()
            ))));
        }
    };
    let content_meta = match std::fs::metadata(&content_path) {
        Ok(meta) => meta,
        Err(err) => {
            return Err(Box::new(Outcome::Failed(format!(
                "{}: cannot stat: {err}",
                content_path.display()
            ))));
        }
    };
    let content_hash = inputs::hash_bytes(&bytes, &content_meta);
    Ok(match link_hash {
        Some(link) => (link, Some((content_path, content_hash)), bytes),
        None => (content_hash, None, bytes),
    })
}

/// Scans a module read whole, when the prefilter says it may reference files.
fn scan_read(
    job: &Job,
    root: &Root,
    aliases: &HashMap<String, String>,
    hashed: Hashed,
    symlink_target: Option<(PathBuf, Hashed)>,
    bytes: &[u8],
) -> Outcome {
    let path = &job.file;
    // A build script's files are always read: a directive it assembles at
    // run time (`concat!("cargo:rerun-if-", "changed=x")`) makes it watch
    // the whole package, and its pieces hold none of the prefilter's words.
    if !root.build_script
        && !scan::may_reference_files(bytes)
        && !aliases
            .keys()
            .any(|alias| memchr::memmem::find(bytes, alias.as_bytes()).is_some())
    {
        return Outcome::Read {
            hashed,
            symlink_target,
            scan: None,
        };
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
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
        token_output: &root.token_output,
        cargo_readme: Some(&root.readme),
    };
    Outcome::Read {
        hashed,
        symlink_target,
        scan: Some(Box::new(scan::scan_file(text, &ctx))),
    }
}
