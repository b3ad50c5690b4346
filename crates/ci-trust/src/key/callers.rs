//! What `macro_rules!` bodies read from their callers, resolved once the
//! walk knows every module file: the names a macro is invoked by (aliases,
//! macros calling it), the call sites of those names in every file, what an
//! include or registry path macro in a body reads at each outermost call
//! (`resolve_from_callers`), which macros may invoke an identifier they are
//! handed (`Invokers`), and includes whose path a workspace macro's call
//! gives (`Expansions`). Must not: walk the module tree (that is
//! `sources.rs`) or read Rust itself (that is `scan/`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::inputs::InputSet;
use super::scan::{self, CallerRelative, EmbedTarget, FileContext};
use super::sources::{Discovery, Root, declare_or_refuse, display};
use crate::policy::KeyPolicy;

/// The names a `macro_rules!` can be invoked by: its own, every `use … as`
/// alias of it (chains included), and, since a macro that calls it makes
/// rustc resolve the include from *that* macro's caller, the names of every
/// `macro_rules!` whose body calls one of these, with their aliases.
fn invocation_names(
    name: &str,
    renames: &[(String, String)],
    macro_calls: &[(String, String)],
) -> HashSet<String> {
    callers_closure(HashSet::from([name.to_owned()]), renames, macro_calls)
}

/// `names`, and every alias of one of them and every `macro_rules!` whose
/// body calls one of them, until nothing is added.
fn callers_closure(
    mut names: HashSet<String>,
    renames: &[(String, String)],
    macro_calls: &[(String, String)],
) -> HashSet<String> {
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
pub(super) struct MacroEmbed {
    /// The path is wholly the caller's argument (`include_str!($p)`).
    pub(super) whole: bool,
    /// The path is known only by expanding each call (what the body's
    /// argument was, for a refusal).
    pub(super) at_calls: Option<String>,
    pub(super) definition: PathBuf,
    pub(super) site: String,
    pub(super) macro_name: String,
    pub(super) relative: CallerRelative,
}

/// Includes whose path a workspace macro's call gives
/// (`include!(crate::autogen_output!("errors.rs"))`), and the definitions
/// to expand them with. rustc expands the macro where the include stands,
/// so the result is read in the include's file and package.
#[derive(Default)]
pub(super) struct Expansions {
    definitions: HashMap<String, Vec<scan::MacroDefinition>>,
    /// (the include, the root it was read under) not yet expanded.
    pub(super) pending: Vec<(scan::Embed, usize)>,
}

/// How many macro calls deep an include argument is expanded.
const MAX_EXPANSION_DEPTH: usize = 8;

impl Expansions {
    /// Every definition of `name` the workspace has.
    pub(super) fn definitions_of(&self, name: &str) -> &[scan::MacroDefinition] {
        self.definitions
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// For each name the workspace defines by `macro_rules!`, whether no
    /// definition of it transcribes what a call hands it
    /// ([`scan::MacroDefinition::transcribes_input`]).
    pub(super) fn emit_only_their_own(&self) -> HashMap<String, bool> {
        self.definitions
            .iter()
            .map(|(name, definitions)| {
                let own = definitions.iter().all(|d| !d.transcribes_input());
                (name.clone(), own)
            })
            .collect()
    }

    /// The names a definition's expansion may give to a macro ci-key does
    /// not see (`use $m::T;`, `use $a as Group;`); `None`: any name
    /// (`use $a as $b;`).
    pub(super) fn names_expansions_may_rename(&self) -> Option<HashSet<String>> {
        let mut names = HashSet::new();
        for definition in self.definitions.values().flatten() {
            names.extend(definition.may_rename.clone()?);
        }
        Some(names)
    }

    pub(super) fn define(&mut self, definition: &scan::MacroDefinition) {
        let known = self.definitions.entry(definition.name.clone()).or_default();
        if !known.contains(definition) {
            known.push(definition.clone());
        }
    }

    /// Expands every pending include whose macro has a definition; returns
    /// the files an `include!` reads, with their root, to walk like modules.
    pub(super) fn resolve(
        &mut self,
        roots: &[Root],
        policy: &KeyPolicy,
        inputs: &mut InputSet,
        used_dynamic: &mut HashSet<String>,
        discovery: &mut Discovery,
    ) -> Vec<(PathBuf, usize)> {
        let mut walk = Vec::new();
        let crates: HashSet<&str> = roots.iter().map(|r| r.crate_name.as_str()).collect();
        let pending = std::mem::take(&mut self.pending);
        for (embed, root) in pending {
            let EmbedTarget::Expand { name, path, .. } = &embed.target else {
                continue;
            };
            // A path through a crate that is not the workspace's names a
            // registry crate's macro, whatever the workspace defines.
            let first = path
                .trim_start_matches('$')
                .split("::")
                .next()
                .unwrap_or("");
            let ours = first.is_empty()
                || matches!(first, "crate" | "self" | "super")
                || crates.contains(first);
            if !ours || !self.definitions.contains_key(name) {
                self.pending.push((embed, root));
                continue;
            }
            let site = format!(
                "{}:{}",
                display(inputs.root(), &embed.site.file),
                embed.site.line
            );
            let why = format!("embedded by {} at {site}", embed.macro_name);
            let aliases = HashMap::new();
            let ctx = FileContext {
                file: &embed.site.file,
                module_dir: embed.site.file.parent().unwrap_or(Path::new("/")),
                package_dir: &roots[root].package_dir,
                aliases: &aliases,
                token_output: &[],
                cargo_readme: Some(&roots[root].readme),
            };
            let mut targets = Vec::new();
            let mut unresolved = None;
            let mut work = vec![(embed.target.clone(), 0)];
            while let Some((target, depth)) = work.pop() {
                let EmbedTarget::Expand { name, args, .. } = &target else {
                    targets.push(target);
                    continue;
                };
                let definitions = self
                    .definitions
                    .get(name)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if depth == MAX_EXPANSION_DEPTH || definitions.is_empty() {
                    unresolved = Some(format!(
                        "`{name}!({args})`, a macro call ci-key cannot expand (no macro_rules! {name} of the workspace, or calls nested more than {MAX_EXPANSION_DEPTH} deep)"
                    ));
                    continue;
                }
                // Several definitions of the name: each may be the one in
                // scope, so each is read.
                for definition in definitions {
                    match scan::expand_include_argument(definition, args, &ctx) {
                        Ok(next) => work.push((next, depth + 1)),
                        Err(why) => {
                            unresolved = Some(format!(
                                "`{name}!({args})`, whose expansion ci-key cannot read ({why})"
                            ));
                        }
                    }
                }
            }
            if let Some(what) = unresolved {
                declare_or_refuse(
                    &embed,
                    &what,
                    &site,
                    policy,
                    inputs,
                    used_dynamic,
                    discovery,
                );
                continue;
            }
            for target in targets {
                match target {
                    EmbedTarget::File(path) => {
                        let path = super::workspace::normalize(&path);
                        if let Err(err) = inputs
                            .add_maybe_absent(&path, &why)
                            .and_then(|()| inputs.add_link_target(&path, &why))
                        {
                            discovery.errors.push(format!(
                                "{site}: {} cannot be a key input: {err:#}",
                                embed.macro_name
                            ));
                        } else if embed.macro_name == "include!" && path.is_file() {
                            walk.push((path, root));
                        }
                    }
                    EmbedTarget::OutDir => discovery.out_dir_embeds += 1,
                    EmbedTarget::Unresolved(what) => declare_or_refuse(
                        &embed,
                        &what,
                        &site,
                        policy,
                        inputs,
                        used_dynamic,
                        discovery,
                    ),
                    other => declare_or_refuse(
                        &embed,
                        &format!("a macro expansion that gives {other:?}"),
                        &site,
                        policy,
                        inputs,
                        used_dynamic,
                        discovery,
                    ),
                }
            }
        }
        walk
    }

    /// Refuses every include whose macro the workspace does not define.
    pub(super) fn refuse_unexpanded(
        &mut self,
        policy: &KeyPolicy,
        inputs: &mut InputSet,
        used_dynamic: &mut HashSet<String>,
        discovery: &mut Discovery,
    ) {
        for (embed, _) in std::mem::take(&mut self.pending) {
            let EmbedTarget::Expand { name, path, args } = &embed.target else {
                continue;
            };
            let site = format!(
                "{}:{}",
                display(inputs.root(), &embed.site.file),
                embed.site.line
            );
            let what = format!(
                "`{path}{name}!({args})`, a call of a macro that is not a macro_rules! of the workspace, so ci-key cannot expand it"
            );
            declare_or_refuse(
                &embed,
                &what,
                &site,
                policy,
                inputs,
                used_dynamic,
                discovery,
            );
        }
    }
}

/// What the walk learned about macros, crate-wide.
pub(super) struct MacroKnowledge<'a> {
    pub(super) renames: &'a [(String, String)],
    pub(super) macro_calls: &'a [(String, String)],
    pub(super) invokers: &'a Invokers,
}

/// Which macros may invoke an identifier they are handed as a macro
/// (`call!(include_str, "x")` with `macro_rules! call { ($m:ident, $p:expr)
/// => { $m!($p) } }`): a `macro_rules!` of the workspace whose body calls a
/// metavariable, one whose body calls such a macro, and their aliases. An
/// identifier handed to any other macro is never invoked by the workspace's
/// code: a `write!` named argument, a `register!` table of names.
pub(super) struct Invokers {
    may: HashSet<String>,
    /// A `!` handed over on its own, or a body calling a metavariable in a
    /// `macro_rules! $name` whose callers cannot be found: any macro may.
    any: bool,
    defined: HashSet<String>,
    /// Macros that emit only their own tokens: every definition of the
    /// name, and of each name a `use … as` renames to it, transcribes
    /// nothing a call hands it. Handed an include name or a `!`, such a
    /// macro calls neither.
    inert: HashSet<String>,
}

impl Invokers {
    pub(super) fn new(
        metavariable_callers: &HashSet<String>,
        bare_bang_to: &HashSet<String>,
        defined: &HashSet<String>,
        renames: &[(String, String)],
        macro_calls: &[(String, String)],
        emit_only_their_own: &HashMap<String, bool>,
    ) -> Invokers {
        let may = callers_closure(metavariable_callers.clone(), renames, macro_calls);
        // `pub use T_ as T;` (rust-analyzer's syntax-kind macro): an alias of
        // a workspace macro is the workspace's too.
        let mut defined = defined.clone();
        loop {
            let before = defined.len();
            for (from, to) in renames {
                if defined.contains(from) {
                    defined.insert(to.clone());
                }
            }
            if defined.len() == before {
                break;
            }
        }
        let inert = inert_macros(emit_only_their_own, renames);
        // A `!` handed to a registry macro (syn's `Token![!]`) is that
        // crate's business; handed to one of the workspace's (or an alias
        // of one) that may transcribe it, any call may be assembled.
        let any = bare_bang_to
            .iter()
            .any(|m| defined.contains(m) && !inert.contains(m))
            || metavariable_callers.iter().any(|m| m.starts_with('$'));
        Invokers {
            may,
            any,
            defined,
            inert,
        }
    }

    /// Whether `name!` emits only its own tokens (see `inert`).
    pub(super) fn is_inert(&self, name: &str) -> bool {
        self.inert.contains(name)
    }

    /// Whether `handed_to!` may invoke an identifier it is handed. A
    /// token-output macro (`quote!`) emits it as text, unless a
    /// `macro_rules!` of the workspace takes its name.
    pub(super) fn may_invoke(&self, handed_to: &str) -> bool {
        if self.inert.contains(handed_to) {
            return false;
        }
        if self.may.contains(handed_to) {
            return true;
        }
        let emits = scan::TOKEN_OUTPUT_MACROS
            .iter()
            .any(|(name, _)| *name == handed_to)
            && !self.defined.contains(handed_to);
        self.any && !emits
    }

    /// Whether nothing the walk knows says what `name!` is: not a macro
    /// that may invoke, nor one the workspace defines, nor a standard or
    /// token-output one. It may be an alias (`use crate::call as c;`) that
    /// only a full reading of the files shows.
    pub(super) fn is_unknown(&self, name: &str) -> bool {
        !self.may.is_empty()
            && !self.may_invoke(name)
            && !self.defined.contains(name)
            && !scan::STD_MACROS.contains(&name)
            && !scan::TOKEN_OUTPUT_MACROS.iter().any(|(n, _)| *n == name)
    }

    /// Whether `handed_to!` may invoke rustc's include macro `include` (or
    /// an alias of it) it is handed. A macro that is neither the
    /// workspace's nor the standard library's nor a token-output macro may
    /// be a registry crate's, whose body ci-key cannot read: handed
    /// `include_str`/`include_bytes` it may invoke them. `include`, a
    /// common word (a field, a flag), is refused only where a macro of the
    /// workspace may invoke it; a registry macro invoking it is
    /// `verify-key`'s to catch.
    pub(super) fn may_invoke_include(&self, handed_to: &str, include: &str) -> bool {
        if self.may_invoke(handed_to) {
            return true;
        }
        if include == "include" || self.defined.contains(handed_to) {
            return false;
        }
        !(scan::STD_MACROS.contains(&handed_to)
            || scan::TOKEN_OUTPUT_MACROS
                .iter()
                .any(|(name, _)| *name == handed_to))
    }
}

/// The names that emit only their own tokens: a name is, when it has a
/// definition or a rename to it, and every definition of it emits only its
/// own tokens and every name renamed to it is such a name. A name known
/// only by a rename from an unknown one (a registry crate's macro) is not;
/// neither is one in a cycle of renames.
fn inert_macros(
    emit_only_their_own: &HashMap<String, bool>,
    renames: &[(String, String)],
) -> HashSet<String> {
    let mut sources: HashMap<&str, Vec<&str>> = HashMap::new();
    for (from, to) in renames {
        sources.entry(to.as_str()).or_default().push(from.as_str());
    }
    let mut names: HashSet<&str> = sources.keys().copied().collect();
    names.extend(emit_only_their_own.keys().map(String::as_str));
    let mut inert: HashSet<String> = HashSet::new();
    loop {
        let before = inert.len();
        for &name in &names {
            if inert.contains(name) {
                continue;
            }
            let own = emit_only_their_own.get(name).copied();
            let froms = sources.get(name).map(Vec::as_slice).unwrap_or_default();
            if own != Some(false)
                && (own.is_some() || !froms.is_empty())
                && froms.iter().all(|from| inert.contains(*from))
            {
                inert.insert(name.to_owned());
            }
        }
        if inert.len() == before {
            return inert;
        }
    }
}

/// How many macro names (macros that include or declare modules, their
/// aliases and the macros that call them) ci-key follows before refusing.
const MAX_MACRO_NAMES: usize = 1024;

/// The calls of some macros in every module file, each file read once: its
/// call sites of any of their names, and the aliases and calling macros
/// that give them other names. A file the prefilter skipped may still alias
/// a macro (`use crate::m as k;`) or call it from another `macro_rules!`.
pub(super) struct MacroCalls {
    /// Per text, in the order given.
    pub(super) sites: Vec<Vec<scan::CallSite>>,
    renames: Vec<(String, String)>,
    calls: Vec<(String, String)>,
}

impl MacroCalls {
    /// `Err` when the names grow past [`MAX_MACRO_NAMES`].
    pub(super) fn read(
        roots: &[&str],
        known: &MacroKnowledge<'_>,
        texts: &[&str],
    ) -> Result<Self, String> {
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
    pub(super) fn names_of(&self, root: &str) -> HashSet<String> {
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
#[allow(clippy::too_many_arguments)]
pub(super) fn resolve_from_callers(
    macro_embeds: &[MacroEmbed],
    callers: &[(PathBuf, PathBuf)],
    known: &MacroKnowledge<'_>,
    expansions: &Expansions,
    readmes: &HashMap<PathBuf, String>,
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
    let mut seen: HashSet<(&Path, &Path)> = HashSet::new();
    // (calling file, its package directory, its text).
    let texts: Vec<(PathBuf, PathBuf, String)> = callers
        .iter()
        .filter(|(caller, package)| seen.insert((caller.as_path(), package.as_path())))
        .filter_map(|(caller, package)| {
            Some((
                caller.clone(),
                package.clone(),
                std::fs::read_to_string(caller).ok()?,
            ))
        })
        .collect();
    let text_refs: Vec<&str> = texts.iter().map(|(_, _, text)| text.as_str()).collect();
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
    let mut names_of: HashMap<String, HashSet<String>> = HashMap::new();
    let mut names = |name: &str| {
        names_of
            .entry(name.to_owned())
            .or_insert_with(|| calls.names_of(name))
            .clone()
    };
    // A wrapper called with literals inside another macro's body
    // (`macro_rules! fixed { () => { my_include!("a.txt") } }`): the path
    // is resolved from the file of each outermost call of that macro.
    let mut chained: Vec<(usize, String, Vec<String>)> = Vec::new();
    let mut expanded = CallExpansions::new(&texts, &calls, expansions, readmes);
    for (index, embed) in macro_embeds.iter().enumerate() {
        let name = &embed.relative.macro_rules;
        let names = names(name);
        // Every outermost call that reaches the include, expanded as rustc
        // expands it: what it includes is added to what plain reading
        // gives (the caller's literals, a glob from each caller's
        // directory), which it never replaces, since this reading may take
        // another rule than rustc. A path macro of a registry crate keeps
        // its own reading.
        let expandable = embed.relative.reads.is_none();
        if expandable {
            // A call that does not expand is refused at its site below.
            let _ = expanded.outermost_all_expand(&names, inputs, discovery, &mut included);
        }
        for (ci, ((caller, package, _), all_sites)) in texts.iter().zip(&calls.sites).enumerate() {
            let sites: Vec<(usize, &scan::CallSite)> = all_sites
                .iter()
                .enumerate()
                .filter(|(_, s)| names.contains(&s.name))
                .collect();
            if sites.is_empty() {
                continue;
            }
            let caller_rel = display(inputs.root(), caller);
            let why = format!(
                "embedded by {} in macro_rules! {name} ({}), called from {caller_rel}",
                embed.macro_name, embed.site
            );
            for &(si, site) in &sites {
                let at = format!("{caller_rel}:{}", site.line);
                if site.in_generated && !site.handed_over {
                    let what = format!(
                        "a call of {}! (macro_rules! {name} includes a path at {}) in the body of a macro_rules! that another macro defines under a name its caller chooses (`macro_rules! $name`), whose callers ci-key cannot find",
                        site.name, embed.site
                    );
                    refuse_call(
                        caller,
                        site,
                        &what,
                        &at,
                        policy,
                        inputs,
                        used_dynamic,
                        discovery,
                    );
                    continue;
                }
                // A call among the arguments of a macro of no workspace
                // crate (`paste!`, `seq!`, any proc macro): rustc expands
                // that macro first, and it may rewrite the call
                // (`asset!([<pr od>])` becomes `asset!(prod)`). A path only
                // the expansion gives is not read from the call as written.
                if embed.at_calls.is_some()
                    && !site.handed_over
                    && site.definer.is_none()
                    && let Some((outer, _)) = site.enclosing.iter().find(|(outer, _)| {
                        expanded.definitions_of(outer).is_empty()
                            && !scan::STD_MACROS.contains(&outer.as_str())
                    })
                {
                    let what = format!(
                        "a call of {}! (macro_rules! {name} includes a path only its expansion gives, at {}) among the arguments of {outer}!, a macro of no workspace crate (a proc macro such as paste! or seq!) that may rewrite the call before it expands",
                        site.name, embed.site
                    );
                    refuse_call(
                        caller,
                        site,
                        &what,
                        &at,
                        policy,
                        inputs,
                        used_dynamic,
                        discovery,
                    );
                    continue;
                }
                // A call among a workspace macro's arguments is what that
                // macro's expansion makes of it: expanded too, or refused.
                if expandable && site.definer.is_none() {
                    match expanded.enclosing(ci, si) {
                        None => {}
                        Some((_, Ok(reached))) => add_reached(
                            &reached,
                            caller,
                            &site.name,
                            &at,
                            inputs,
                            discovery,
                            &mut included,
                        ),
                        Some((outer, Err(why))) => {
                            let what = format!(
                                "a call of {}! (macro_rules! {name} includes a path at {}) among the arguments of {outer}!, whose expansion may rewrite it and does not expand here: {why}",
                                site.name, embed.site
                            );
                            refuse_call(
                                caller,
                                site,
                                &what,
                                &at,
                                policy,
                                inputs,
                                used_dynamic,
                                discovery,
                            );
                            continue;
                        }
                    }
                }
                // A call that expands still has its literals read (a path
                // wholly the caller's): this reading of macro by example
                // may pick another rule than rustc, so the expansion adds
                // to the over-approximation, never replaces it.
                let mut expanded_ok = false;
                let failed = if !expandable || site.handed_over {
                    None
                } else if site.definer.is_none() {
                    match expanded.at(ci, si) {
                        Ok(_) if !embed.whole => continue,
                        Ok(_) => {
                            expanded_ok = true;
                            None
                        }
                        Err(why) => Some(why.clone()),
                    }
                } else if let Some(definer) = &site.definer {
                    // A call inside another macro's body: read where that
                    // macro's outermost calls expand.
                    let definer_names = calls.names_of(definer);
                    if embed.at_calls.is_some() {
                        continue;
                    }
                    match expanded.outermost_all_expand(
                        &definer_names,
                        inputs,
                        discovery,
                        &mut included,
                    ) {
                        Ok(()) => continue,
                        Err(why) => Some(why),
                    }
                } else {
                    None
                };
                if let (Some(body), Some(failed)) = (&embed.at_calls, &failed) {
                    let what = format!(
                        "the path of {} in macro_rules! {name} at {} ({body}), which the expansion of this call does not give: {failed}",
                        embed.macro_name, embed.site
                    );
                    refuse_call(
                        caller,
                        site,
                        &what,
                        &at,
                        policy,
                        inputs,
                        used_dynamic,
                        discovery,
                    );
                    continue;
                }
                let refusal = if expanded_ok {
                    None
                } else if site.handed_over {
                    let handed_to = site.handed_to.as_deref().unwrap_or_default();
                    known.invokers.may_invoke(handed_to).then(|| {
                        format!(
                            "a path chosen where `{}` (macro_rules! {name}, which includes a path at {}) is handed to {handed_to}!, which may call it as `$m!(…)`",
                            site.name, embed.site
                        )
                    })
                } else if !embed.whole {
                    None
                } else if let Some(definer) = &site.definer {
                    // Passing its own arguments on (`m!($p)`) is resolved at
                    // its callers, and so are literals (from the file of
                    // each outermost call); a macro call there is not.
                    if site.opaque.is_none() && !site.literals.is_empty() {
                        chained.push((index, definer.clone(), site.literals.clone()));
                    }
                    (site.has_macro_call || (site.opaque.is_some() && !site.literals.is_empty())).then(|| {
                            format!(
                                "the path of {}! inside a macro_rules! body (macro_rules! {name} includes its argument at {}), built from a macro call or from literals and metavariables together",
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
                let refusal = match (refusal, &failed) {
                    (Some(what), Some(failed)) => {
                        Some(format!("{what}; expanding the call: {failed}"))
                    }
                    (refusal, _) => refusal,
                };
                if let Some(what) = refusal {
                    refuse_call(
                        caller,
                        site,
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
                    let has_default = matches!(
                        embed.relative.reads,
                        Some(scan::PathReads::ManifestDirTree { default: Some(_) })
                    );
                    let texts: Vec<Option<&str>> = if site.literals.is_empty() {
                        // `migrate!()`: the macro's default, if it has one
                        // (no literal and no default: rustc reads nothing).
                        if has_default { vec![None] } else { Vec::new() }
                    } else {
                        site.literals.iter().map(|l| Some(l.as_str())).collect()
                    };
                    for text in texts {
                        // A piece of a path the expansion assembled
                        // (`concat!("../data/", "y.txt")`) may be a directory.
                        let piece_is_dir = text.is_some_and(|t| {
                            caller.parent().is_some_and(|dir| dir.join(t).is_dir())
                        });
                        if expanded_ok && piece_is_dir {
                            continue;
                        }
                        // Where the expansion named what the call reads,
                        // the call's literals only add inputs: one that
                        // cannot be a path (a script's text, a name too
                        // long) adds nothing.
                        if expanded_ok
                            && text.is_some_and(|t| {
                                let path = caller.parent().unwrap_or(Path::new("/")).join(t);
                                std::fs::symlink_metadata(&path)
                                    .is_err_and(|e| e.kind() != std::io::ErrorKind::NotFound)
                            })
                        {
                            continue;
                        }
                        let why = format!("{why}:{}", site.line);
                        let read = CallerRead {
                            caller,
                            package,
                            reads: embed.relative.reads,
                            text,
                        };
                        match read.add(inputs, &why) {
                            Ok(Some(path)) if embed.macro_name == "include!" && path.is_file() => {
                                included.push((path, caller.clone()));
                            }
                            Ok(_) => {}
                            // The expansion named what this call reads; a
                            // literal that is no path adds nothing.
                            Err(_) if expanded_ok => {}
                            Err(err) => discovery.errors.push(format!(
                                "{at}: {}!({}), which macro_rules! {name} reads: {err:#}",
                                site.name,
                                text.map(|t| format!("{t:?}")).unwrap_or_default()
                            )),
                        }
                    }
                }
            }
            if embed.whole
                || embed.at_calls.is_some()
                || *caller == embed.definition
                || !sites.iter().any(|(_, s)| !s.handed_over)
            {
                continue;
            }
            let read = CallerRead {
                caller,
                package,
                reads: embed.relative.reads,
                text: Some(&embed.relative.text),
            };
            let result = if embed.relative.is_pattern {
                let path = super::workspace::normalize(
                    &caller
                        .parent()
                        .unwrap_or(Path::new("/"))
                        .join(&embed.relative.text),
                );
                path.strip_prefix(inputs.root())
                    .ok()
                    .and_then(|p| p.to_str())
                    .map(str::to_owned)
                    .ok_or_else(|| anyhow::anyhow!("{} leaves the repository", path.display()))
                    .and_then(|rel| inputs.add_pattern(&rel, &why))
                    .map(|_| None)
            } else {
                read.add(inputs, &why)
            };
            match result {
                Err(err) => discovery.errors.push(format!(
                    "{}: {} in macro_rules! {name}, called from {caller_rel}: {err:#}",
                    embed.site, embed.macro_name
                )),
                Ok(Some(path)) if embed.macro_name == "include!" && path.is_file() => {
                    included.push((path, caller.clone()));
                }
                Ok(_) => {}
            }
        }
    }
    for (index, definer, literals) in chained {
        let embed = &macro_embeds[index];
        let names = names(&definer);
        for ((caller, package, _), all_sites) in texts.iter().zip(&calls.sites) {
            let outermost = all_sites
                .iter()
                .filter(|s| names.contains(&s.name) && s.definer.is_none() && !s.handed_over)
                .map(|s| s.line)
                .min();
            let Some(line) = outermost else {
                continue;
            };
            let caller_rel = display(inputs.root(), caller);
            let why = format!(
                "embedded by {} in macro_rules! {} ({}), through macro_rules! {definer}, called from {caller_rel}:{line}",
                embed.macro_name, embed.relative.macro_rules, embed.site
            );
            for literal in &literals {
                let read = CallerRead {
                    caller,
                    package,
                    reads: embed.relative.reads,
                    text: Some(literal),
                };
                match read.add(inputs, &why) {
                    Ok(Some(path)) if embed.macro_name == "include!" && path.is_file() => {
                        included.push((path, caller.clone()));
                    }
                    Ok(_) => {}
                    Err(err) => discovery.errors.push(format!(
                        "{caller_rel}:{line}: {literal:?} of macro_rules! {definer}, which {} reads: {err:#}",
                        embed.macro_name
                    )),
                }
            }
        }
    }
    included
}

/// Refuses the call `site` in `caller`, saying `what`, unless the policy
/// declares what it reads.
#[allow(clippy::too_many_arguments)]
fn refuse_call(
    caller: &Path,
    site: &scan::CallSite,
    what: &str,
    at: &str,
    policy: &KeyPolicy,
    inputs: &mut InputSet,
    used_dynamic: &mut HashSet<String>,
    discovery: &mut Discovery,
) {
    let declared = scan::Embed {
        macro_name: format!("{}!", site.name),
        target: EmbedTarget::Unresolved(what.to_owned()),
        site: scan::Site {
            file: caller.to_path_buf(),
            line: site.line,
        },
        caller_relative: None,
    };
    declare_or_refuse(&declared, what, at, policy, inputs, used_dynamic, discovery);
}

/// The expansions of outermost macro calls (`calls.sites`, by text and
/// site), each computed once, and which have had their includes added.
struct CallExpansions<'a> {
    texts: &'a [(PathBuf, PathBuf, String)],
    calls: &'a MacroCalls,
    expansions: &'a Expansions,
    /// `CARGO_PKG_README` by package directory.
    readmes: &'a HashMap<PathBuf, String>,
    memo: HashMap<(usize, usize), Result<Vec<scan::ReachedInclude>, String>>,
    added: HashSet<(usize, usize)>,
}

impl<'a> CallExpansions<'a> {
    fn new(
        texts: &'a [(PathBuf, PathBuf, String)],
        calls: &'a MacroCalls,
        expansions: &'a Expansions,
        readmes: &'a HashMap<PathBuf, String>,
    ) -> Self {
        CallExpansions {
            texts,
            calls,
            expansions,
            readmes,
            memo: HashMap::new(),
            added: HashSet::new(),
        }
    }

    /// The definitions a call of `name` may invoke: the name's own and,
    /// for an alias (`use crate::m as k;`), those of what it renames.
    fn definitions_of(&self, name: &str) -> Vec<&'a scan::MacroDefinition> {
        let mut names = vec![name.to_owned()];
        let mut next = 0;
        while next < names.len() && names.len() <= MAX_MACRO_NAMES {
            for (from, to) in &self.calls.renames {
                if *to == names[next] && !names.contains(from) {
                    names.push(from.clone());
                }
            }
            next += 1;
        }
        names
            .iter()
            .flat_map(|n| self.expansions.definitions_of(n))
            .collect()
    }

    /// The includes the outermost call `(text, site)` expands to.
    fn at(&mut self, text: usize, site: usize) -> Result<Vec<scan::ReachedInclude>, String> {
        if let Some(known) = self.memo.get(&(text, site)) {
            return known.clone();
        }
        let (caller, package, _) = &self.texts[text];
        let call = &self.calls.sites[text][site];
        // An include macro's aliases (`use std::include_str as inc;`), by
        // any file's `use`: the expansion may call them by a path.
        let mut aliases: HashMap<String, String> = HashMap::new();
        loop {
            let before = aliases.len();
            for (from, to) in &self.calls.renames {
                let include = scan::INCLUDE_MACROS
                    .contains(&from.as_str())
                    .then(|| from.clone())
                    .or_else(|| aliases.get(from).cloned());
                if let Some(include) = include {
                    aliases.entry(to.clone()).or_insert(include);
                }
            }
            if aliases.len() == before {
                break;
            }
        }
        let ctx = FileContext {
            file: caller,
            module_dir: caller.parent().unwrap_or(Path::new("/")),
            package_dir: package,
            aliases: &aliases,
            token_output: &[],
            cargo_readme: self.readmes.get(package.as_path()).map(String::as_str),
        };
        let definitions = |name: &str| self.definitions_of(name);
        let result = scan::expand_call_includes(&call.name, &call.arguments, &definitions, &ctx);
        self.memo.insert((text, site), result.clone());
        result
    }

    /// The includes of the outermost workspace macro call whose arguments
    /// hold the call `(text, site)`, if any: rustc expands that call first,
    /// and its rules may rewrite the call (`w!(asset!(a))` giving
    /// `asset!(b)`). `Ok(None)` when no workspace macro encloses it.
    fn enclosing(
        &self,
        text: usize,
        site: usize,
    ) -> Option<(String, Result<Vec<scan::ReachedInclude>, String>)> {
        let call = &self.calls.sites[text][site];
        let (name, args) = call
            .enclosing
            .iter()
            .find(|(name, _)| !self.definitions_of(name).is_empty())?;
        let (caller, package, _) = &self.texts[text];
        let aliases = HashMap::new();
        let ctx = FileContext {
            file: caller,
            module_dir: caller.parent().unwrap_or(Path::new("/")),
            package_dir: package,
            aliases: &aliases,
            token_output: &[],
            cargo_readme: self.readmes.get(package.as_path()).map(String::as_str),
        };
        let definitions = |name: &str| self.definitions_of(name);
        Some((
            name.clone(),
            scan::expand_call_includes(name, args, &definitions, &ctx),
        ))
    }

    /// Whether every outermost call of one of `names` (in any file)
    /// expands, or the first that does not and why; the includes of each
    /// that does are added, once.
    fn outermost_all_expand(
        &mut self,
        names: &HashSet<String>,
        inputs: &mut InputSet,
        discovery: &mut Discovery,
        included: &mut Vec<(PathBuf, PathBuf)>,
    ) -> Result<(), String> {
        let mut all = Ok(());
        let calls = self.calls;
        for (text, sites) in calls.sites.iter().enumerate() {
            for (index, call) in sites.iter().enumerate() {
                if !names.contains(&call.name) || call.definer.is_some() || call.handed_over {
                    continue;
                }
                match self.at(text, index) {
                    Ok(reached) if self.added.insert((text, index)) => {
                        let caller = &self.texts[text].0;
                        let at = format!("{}:{}", display(inputs.root(), caller), call.line);
                        add_reached(
                            &reached, caller, &call.name, &at, inputs, discovery, included,
                        );
                    }
                    Ok(_) => {}
                    Err(why) => {
                        if all.is_ok() {
                            let caller = &self.texts[text].0;
                            all = Err(format!(
                                "the call at {}:{} does not expand here: {why}",
                                display(inputs.root(), caller),
                                call.line
                            ));
                        }
                    }
                }
            }
        }
        all
    }
}

/// Adds what one expanded call includes; an `include!`d file is walked
/// like a module of the calling file.
fn add_reached(
    reached: &[scan::ReachedInclude],
    caller: &Path,
    name: &str,
    at: &str,
    inputs: &mut InputSet,
    discovery: &mut Discovery,
    included: &mut Vec<(PathBuf, PathBuf)>,
) {
    for include in reached {
        let why = format!(
            "embedded by {} in the expansion of {name}! at {at}",
            include.macro_name
        );
        match &include.target {
            EmbedTarget::File(path) => {
                let path = super::workspace::normalize(path);
                if path.is_dir() {
                    discovery.errors.push(format!(
                        "{at}: {} in the expansion of {name}! names a directory, {}",
                        include.macro_name,
                        path.display()
                    ));
                } else if let Err(err) = inputs
                    .add_maybe_absent(&path, &why)
                    .and_then(|()| inputs.add_link_target(&path, &why))
                {
                    discovery.errors.push(format!(
                        "{at}: {} in the expansion of {name}! cannot be a key input: {err:#}",
                        include.macro_name
                    ));
                } else if include.macro_name == "include!" && path.is_file() {
                    included.push((path, caller.to_path_buf()));
                }
            }
            EmbedTarget::OutDir => discovery.out_dir_embeds += 1,
            other => discovery.errors.push(format!(
                "{at}: {} in the expansion of {name}! gives {other:?}, which ci-key cannot read",
                include.macro_name
            )),
        }
    }
}

/// What an include in a `macro_rules!` body reads when the macro is
/// called from `caller` (in `package`): `text` relative to the calling
/// file, or, for a macro of `PATH_MACROS` reading below
/// `CARGO_MANIFEST_DIR`, relative to the calling crate's directory (`None`:
/// the macro's default).
struct CallerRead<'a> {
    caller: &'a Path,
    package: &'a Path,
    reads: Option<scan::PathReads>,
    text: Option<&'a str>,
}

impl CallerRead<'_> {
    /// Adds what it reads; returns the file, when it is one file.
    fn add(&self, inputs: &mut InputSet, why: &str) -> anyhow::Result<Option<PathBuf>> {
        let manifest_relative = |text: &str| {
            let rest = text
                .strip_prefix("$CARGO_MANIFEST_DIR")
                .unwrap_or(text)
                .trim_start_matches('/');
            super::workspace::normalize(&self.package.join(rest))
        };
        match (self.reads, self.text) {
            (None | Some(scan::PathReads::FileRelative), Some(text)) => {
                let path = super::workspace::normalize(
                    &self.caller.parent().unwrap_or(Path::new("/")).join(text),
                );
                inputs.add_maybe_absent(&path, why)?;
                inputs.add_link_target(&path, why)?;
                Ok(Some(path))
            }
            (Some(scan::PathReads::ManifestDirTree { default }), text) => {
                let Some(text) = text.or(default) else {
                    anyhow::bail!("no path and no default");
                };
                if text.contains('$') {
                    anyhow::bail!("{text:?} names an environment variable");
                }
                let dir = manifest_relative(text);
                inputs.relative(&dir)?;
                if dir.is_dir() {
                    inputs.add_dir(&dir, why, false)?;
                } else {
                    inputs.add_maybe_absent(&dir, why)?;
                }
                Ok(None)
            }
            (Some(scan::PathReads::ManifestDirFirst { dirs }), Some(text)) => {
                for dir in dirs {
                    let path = manifest_relative(&format!("{dir}/{text}"));
                    inputs.add_maybe_absent(&path, why)?;
                    inputs.add_link_target(&path, why)?;
                }
                Ok(None)
            }
            // An assembler template a caller completes: its directives are
            // assembled at the call, which this reading does not model.
            (Some(scan::PathReads::AssemblerTemplate), Some(_)) => {
                anyhow::bail!(
                    "an assembler template a caller completes, which ci-key does not read"
                )
            }
            (Some(scan::PathReads::Declared), _) | (_, None) => {
                anyhow::bail!("no path ci-key can read")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a walk that found no macro knows.
    fn no_invokers() -> Invokers {
        Invokers::new(
            &HashSet::new(),
            &HashSet::new(),
            &HashSet::new(),
            &[],
            &[],
            &HashMap::new(),
        )
    }

    #[test]
    fn a_macro_calling_another_shares_its_callers_but_a_mention_does_not() {
        let invokers = no_invokers();
        let known = MacroKnowledge {
            renames: &[],
            macro_calls: &[],
            invokers: &invokers,
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
        let invokers = no_invokers();
        let known = MacroKnowledge {
            renames: &[],
            macro_calls: &[],
            invokers: &invokers,
        };
        let roots: Vec<String> = (0..=MAX_MACRO_NAMES).map(|i| format!("m{i}")).collect();
        let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
        let err = MacroCalls::read(&roots, &known, &["m0!(\"x\");"])
            .err()
            .expect("refused");
        assert!(err.contains("refuses to follow that many"), "{err}");
    }

    fn definition(name: &str, transcriber: &str) -> scan::MacroDefinition {
        scan::MacroDefinition {
            name: name.to_owned(),
            rules: vec![("[x]".to_owned(), transcriber.to_owned())],
            unreadable: None,
            may_rename: Some(Vec::new()),
        }
    }

    #[test]
    fn only_a_transcriber_without_metavariables_emits_only_its_own_tokens() {
        for own in ["$crate::K::BANG", "$ crate :: K", "1 + 2", "crate::x!()"] {
            assert!(!definition("T", own).transcribes_input(), "{own}");
        }
        for handed in [
            "$m!(\"a\")",
            "$ m",
            "$($t)*",
            "$crate::x!($p)",
            "$crates",
            "$",
        ] {
            assert!(definition("T", handed).transcribes_input(), "{handed}");
        }
        let mut unread = definition("T", "1");
        unread.unreadable = Some("too large".to_owned());
        assert!(unread.transcribes_input());
    }

    #[test]
    fn a_name_is_inert_only_when_every_definition_and_rename_to_it_is() {
        let own: HashMap<String, bool> = [("T_", true), ("Bad", false), ("Same", true)]
            .into_iter()
            .map(|(n, b)| (n.to_owned(), b))
            .collect();
        let renames: Vec<(String, String)> = [
            ("T_", "T"),
            ("Bad", "Same"),
            ("Unknown", "Reg"),
            ("A", "B"),
            ("B", "A"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
        let inert = inert_macros(&own, &renames);
        let mut inert: Vec<_> = inert.into_iter().collect();
        inert.sort();
        // `Same` is also a rename of `Bad`; `Reg` a registry crate's; `A`
        // and `B` only rename each other.
        assert_eq!(inert, ["T", "T_"]);
        let invokers = Invokers::new(
            &HashSet::from(["apply".to_owned()]),
            &HashSet::from(["T".to_owned(), "Same".to_owned()]),
            &HashSet::from(["T_".to_owned(), "Bad".to_owned(), "Same".to_owned()]),
            &renames,
            &[],
            &own,
        );
        assert!(!invokers.may_invoke("T"), "emits only its own tokens");
        assert!(
            invokers.may_invoke("Same"),
            "a `!` handed to `Same` may be assembled"
        );
    }
}
