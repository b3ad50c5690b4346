//! The set of files the key hashes, and the hashing itself.
//!
//! Paths are stored repository-relative with `/`, so the key does not depend
//! on where the repository is checked out. Symlinks are hashed as their
//! target text and never followed; a file the compiler reads through a
//! symlink is added separately by whoever resolved it. `.git/`, target
//! directories and `.github/workflows/` are never inputs.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::{Component, Input};

/// How a path was hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    // Windows has no executable bit (see `kind_of`).
    #[cfg_attr(not(unix), allow(dead_code))]
    Executable,
    Symlink,
    Absent,
    /// A directory whose entry set the key hashes (see [`Listing`]).
    Directory,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Executable => "executable",
            Kind::Symlink => "symlink",
            Kind::Absent => "absent",
            Kind::Directory => "directory",
        }
    }

    /// The byte the encoding uses for the kind.
    fn tag(self) -> u8 {
        match self {
            Kind::File => b'f',
            Kind::Executable => b'x',
            Kind::Symlink => b'l',
            Kind::Absent => b'a',
            Kind::Directory => b'd',
        }
    }
}

/// A path for a message, control characters escaped (`\n` stays two
/// characters), so attacker-chosen names cannot break the line.
pub fn shown(path: &Path) -> String {
    let text = path.display().to_string();
    if text.chars().any(char::is_control) {
        text.escape_debug().to_string()
    } else {
        text
    }
}

/// A path resolved as the kernel resolves it.
struct Resolved {
    /// The path with every symlink replaced by its target.
    real: PathBuf,
    /// The symlinks met on the way, inside the root.
    links: Vec<PathBuf>,
    /// Whether the resolution reached an existing path.
    exists: bool,
}

/// A hashed path.
#[derive(Debug, Clone)]
pub struct Hashed {
    pub kind: Kind,
    pub sha256: [u8; 32],
    pub size: u64,
}

#[derive(Debug)]
struct Entry {
    abs: PathBuf,
    reasons: BTreeSet<String>,
    may_be_absent: bool,
    /// A directory's entry set, hashed by the walk that listed it.
    listing: Option<Hashed>,
}

/// The entry set of one directory, hashed while a walk reads it: a build
/// that lists the directory (a build script's `read_dir`, cargo's
/// whole-package scan) or tests whether a name in it exists sees exactly
/// these names, so an added empty directory, a checked-out gitlink or a
/// renamed entry moves the key even when no file below changes.
///
/// The digest is SHA-256 over the entries in name order (the walk's own
/// sort), each as a type byte (`d` directory, `l` symlink, `f` anything
/// else) and the length-prefixed name. Git metadata and the build's output
/// directories are left out: they are never inputs, and a build that
/// creates `target/` must not move the key of the tree it built.
struct Listing {
    dir: PathBuf,
    hasher: Sha256,
    entries: u64,
}

impl Listing {
    fn new(dir: &Path) -> Listing {
        Listing {
            dir: dir.to_path_buf(),
            hasher: Sha256::new(),
            entries: 0,
        }
    }

    fn add(&mut self, name: &std::ffi::OsStr, file_type: std::fs::FileType) {
        let tag = if file_type.is_dir() {
            b'd'
        } else if file_type.is_symlink() {
            b'l'
        } else {
            b'f'
        };
        self.hasher.update([tag]);
        update_with_len(&mut self.hasher, name.as_encoded_bytes());
        self.entries += 1;
    }

    fn finish(self) -> (PathBuf, Hashed) {
        let hashed = Hashed {
            kind: Kind::Directory,
            sha256: self.hasher.finalize().into(),
            size: self.entries,
        };
        (self.dir, hashed)
    }
}

/// The files of the key, collected from every discovery rule.
pub struct InputSet {
    root: PathBuf,
    /// The repository's top directory (`root` or an ancestor): symlinks may
    /// lead anywhere inside it. Inputs above `root` are named `../…`.
    bound: PathBuf,
    skipped_dirs: Vec<PathBuf>,
    entries: BTreeMap<String, Entry>,
    /// Directories already known to be real (no symlink on the way from the
    /// root): resolving a path below one needs no further `lstat`.
    real_dirs: HashSet<PathBuf>,
    /// Why each skipped directory is build output, for refusals.
    skipped_why: Vec<String>,
    /// The directories of the packages the key hashes under their own
    /// rules: a walk of a whole package stops at them, as cargo does.
    packages: HashSet<PathBuf>,
    /// The workspace's `Cargo.lock`, an input of its own (present or
    /// absent): left out of its directory's entry set, so that a build
    /// that generates it does not change another input.
    lockfile: Option<PathBuf>,
}

/// The most symlinks one path may pass through, as Linux allows (`ELOOP`).
const MAX_LINK_HOPS: usize = 40;

/// Whether a repository-relative path is git metadata (`.git/…` at any depth).
pub fn is_git_metadata(rel: &str) -> bool {
    rel == ".git" || rel.starts_with(".git/") || rel.contains("/.git/") || rel.ends_with("/.git")
}

/// Why a path may never be an input, or `None`.
fn excluded_reason(rel: &str) -> Option<&'static str> {
    if is_git_metadata(rel) {
        Some("git metadata is never hashed")
    } else if rel.starts_with(".github/workflows/") {
        Some(
            "workflow files are excluded from the key by design: runs always use the default branch's definitions",
        )
    } else {
        None
    }
}

impl InputSet {
    /// `skipped_dirs` are absolute directories never walked (target directories).
    pub fn new(root: &Path, skipped_dirs: Vec<PathBuf>) -> InputSet {
        let skipped_why = vec![String::new(); skipped_dirs.len()];
        InputSet {
            root: root.to_path_buf(),
            bound: root.to_path_buf(),
            skipped_dirs,
            entries: BTreeMap::new(),
            real_dirs: HashSet::new(),
            skipped_why,
            packages: HashSet::new(),
            lockfile: None,
        }
    }

    /// The workspace's lockfile and the directories of the packages whose
    /// own rules hash them (see the fields).
    pub fn set_workspace(&mut self, lockfile: &Path, packages: impl IntoIterator<Item = PathBuf>) {
        self.lockfile = Some(super::workspace::normalize(lockfile));
        self.packages = packages.into_iter().collect();
    }

    /// Like [`InputSet::new`], each skipped directory with the setting that
    /// made it build output (`build.target-dir in .cargo/config.toml`).
    pub fn with_output_dirs(root: &Path, dirs: Vec<(PathBuf, String)>) -> InputSet {
        let (skipped_dirs, skipped_why): (Vec<_>, Vec<_>) = dirs.into_iter().unzip();
        let mut set = InputSet::new(root, skipped_dirs);
        set.skipped_why = skipped_why;
        set
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Lets symlinks lead anywhere inside `repository` (an ancestor of the
    /// root, where `.git` is), not only inside the workspace.
    pub fn set_repository_root(&mut self, repository: &Path) {
        if self.root.starts_with(repository) {
            self.bound = repository.to_path_buf();
        }
    }

    /// The repository-relative, `/`-separated form of `abs`, refusing paths
    /// that leave the repository or fall in an excluded area.
    pub fn relative(&self, abs: &Path) -> Result<String> {
        let normal = super::workspace::normalize(abs);
        let Ok(in_repository) = normal.strip_prefix(&self.bound) else {
            bail!(
                "{} is outside the repository root {}",
                shown(&normal),
                self.bound.display()
            );
        };
        let rel: Option<String> = match normal.strip_prefix(&self.root) {
            Ok(rel) => rel.to_str().map(str::to_owned),
            // Above the workspace, inside the repository: `../README.md`.
            Err(_) => {
                let depth = self
                    .root
                    .strip_prefix(&self.bound)
                    .map_or(0, |d| d.components().count());
                std::iter::repeat_n(Path::new(".."), depth)
                    .collect::<PathBuf>()
                    .join(in_repository)
                    .to_str()
                    .map(str::to_owned)
            }
        };
        let (Some(rel), Some(in_repository)) = (rel, in_repository.to_str()) else {
            bail!("{} is not valid UTF-8; rename it", shown(&normal));
        };
        if let Some(why) = excluded_reason(&rel).or_else(|| excluded_reason(in_repository)) {
            bail!("{} cannot be a key input: {why}", shown(Path::new(&rel)));
        }
        if let Some(index) = self
            .skipped_dirs
            .iter()
            .position(|dir| normal.starts_with(dir))
        {
            let why = &self.skipped_why[index];
            if why.is_empty() {
                bail!("{rel} is inside a target directory, which is build output and never hashed");
            }
            bail!(
                "{} is read by the build but lies inside the build output directory {} ({why}); the key never hashes build output, so point that setting at a directory of its own",
                shown(Path::new(&rel)),
                self.display(&self.skipped_dirs[index])
            );
        }
        Ok(rel)
    }

    /// Whether `rel` (as [`InputSet::relative`] spells it) is an input that
    /// must exist (a file a walk met, a module read): known to be there
    /// without asking the file system again. (Were it gone by the time it
    /// is hashed, the key is refused.)
    pub fn is_known_present(&self, rel: &str) -> bool {
        self.entries.get(rel).is_some_and(|e| !e.may_be_absent)
    }

    /// Adds a file that must exist when hashed.
    pub fn add(&mut self, abs: &Path, reason: &str) -> Result<()> {
        self.insert(abs, reason, false)
    }

    /// Adds a path whose absence is itself hashed (a missing lockfile, a
    /// module candidate, a `cfg`-gated embed of a file not there).
    pub fn add_maybe_absent(&mut self, abs: &Path, reason: &str) -> Result<()> {
        self.insert(abs, reason, true)
    }

    /// `abs` for a message: repository-relative, and with control
    /// characters escaped, since a file name or link text is the pull
    /// request's to choose and a newline in it would start a line the
    /// runner reads as a workflow command.
    fn display(&self, abs: &Path) -> String {
        shown(abs.strip_prefix(&self.root).unwrap_or(abs))
    }

    fn insert(&mut self, abs: &Path, reason: &str, may_be_absent: bool) -> Result<()> {
        let rel = self.relative(abs)?;
        // Resolved already (a module file was in its `src/` walk first):
        // the same path resolves the same way, its links are inputs.
        if let Some(entry) = self.entries.get_mut(&rel) {
            entry.may_be_absent &= may_be_absent;
            entry.reasons.insert(reason.to_owned());
            return Ok(());
        }
        // Whoever opens the path reads what its symlinks resolve to: the
        // links (hashed as their text) and the file behind them are inputs.
        let resolved = self.resolve(&super::workspace::normalize(abs))?;
        if !resolved.links.is_empty() {
            for link in &resolved.links {
                let why = format!("symlink on the way to {rel}, {reason}");
                self.insert_plain(link, &why, false)?;
            }
            let is_dir = resolved.real.is_dir();
            if resolved.real != super::workspace::normalize(abs) && !is_dir {
                let why = format!("target of symlink {rel}, {reason}");
                self.insert_plain(&resolved.real, &why, may_be_absent || !resolved.exists)?;
            }
        }
        self.insert_plain(abs, reason, may_be_absent)
    }

    /// Resolves `normal` (absolute, inside the root) the way the kernel
    /// does, one component at a time: a symlink's text replaces it, and a
    /// `..` in that text applies to the directory the link resolved into.
    /// A link to an absolute path (`/proc/self/cwd/…` included, whose target
    /// depends on who opens it) or one that leaves the root is refused.
    fn resolve(&mut self, normal: &Path) -> Result<Resolved> {
        // From the workspace root for its own paths, from the repository's
        // for those above it; `..` may climb to the repository's top.
        let base = if normal.starts_with(&self.root) {
            self.root.clone()
        } else {
            self.bound.clone()
        };
        let rel = normal
            .strip_prefix(&base)
            .with_context(|| format!("{} is outside the repository", normal.display()))?
            .to_path_buf();
        let mut pending: std::collections::VecDeque<std::ffi::OsString> =
            rel.components().map(|c| c.as_os_str().to_owned()).collect();
        let mut cur = base;
        let mut links = Vec::new();
        let mut hops = 0;
        let mut exists = true;
        while let Some(part) = pending.pop_front() {
            if part == ".." {
                if cur == self.bound {
                    bail!(
                        "{} resolves outside the checkout through the symlink {}; a link the build follows must stay inside the repository: make it a regular file or a link to a path inside it",
                        self.display(normal),
                        links
                            .last()
                            .map_or_else(|| "?".to_owned(), |l: &PathBuf| self.display(l))
                    );
                }
                cur.pop();
                continue;
            }
            if part == "." {
                continue;
            }
            let next = cur.join(&part);
            if !exists {
                cur = next;
                continue;
            }
            if !pending.is_empty() && self.real_dirs.contains(&next) {
                cur = next;
                continue;
            }
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    hops += 1;
                    if hops > MAX_LINK_HOPS {
                        bail!(
                            "{}: too many levels of symbolic links; remove the loop",
                            self.display(normal)
                        );
                    }
                    let target = std::fs::read_link(&next)
                        .with_context(|| format!("cannot read link {}", next.display()))?;
                    if target.is_absolute() {
                        bail!(
                            "{} is a symlink to the absolute path {}; the key only follows relative links that stay inside the checkout, so make it a relative link or a regular file",
                            self.display(&next),
                            shown(&target)
                        );
                    }
                    if next.starts_with(&self.bound) {
                        links.push(next);
                    }
                    for part in target.components().rev() {
                        pending.push_front(part.as_os_str().to_owned());
                    }
                }
                Ok(meta) => {
                    if meta.is_dir() && !pending.is_empty() {
                        self.real_dirs.insert(next.clone());
                    }
                    cur = next;
                }
                Err(_) => {
                    exists = false;
                    cur = next;
                }
            }
            if !cur.starts_with(&self.bound) {
                bail!(
                    "{} resolves to {}, outside the checkout, through the symlink {}; a link the build follows must stay inside the repository",
                    self.display(normal),
                    shown(&cur),
                    links
                        .last()
                        .map_or_else(|| "?".to_owned(), |l| self.display(l))
                );
            }
        }
        Ok(Resolved {
            real: cur,
            links,
            exists,
        })
    }

    /// Adds `abs` as it is, its symlinks already resolved by the caller.
    fn insert_plain(&mut self, abs: &Path, reason: &str, may_be_absent: bool) -> Result<()> {
        let rel = self.relative(abs)?;
        let entry = self.entries.entry(rel).or_insert_with(|| Entry {
            abs: super::workspace::normalize(abs),
            reasons: BTreeSet::new(),
            may_be_absent,
            listing: None,
        });
        entry.may_be_absent &= may_be_absent;
        entry.reasons.insert(reason.to_owned());
        Ok(())
    }

    /// Adds the file a symlink at `abs` points to, when it is one: the link
    /// itself is hashed as its text, but whoever opens it (rustc for an
    /// embed, a build script for a declared file) reads the target.
    pub fn add_link_target(&mut self, abs: &Path, reason: &str) -> Result<()> {
        // [`InputSet::add`] resolves every symlink on the way already; kept
        // for the callers that name the link explicitly. A path already an
        // input was resolved when it was added.
        if self
            .relative(abs)
            .is_ok_and(|rel| self.entries.contains_key(&rel))
        {
            return Ok(());
        }
        if abs.is_symlink() {
            self.add(abs, reason)?;
        }
        Ok(())
    }

    /// Adds every file below `dir` (nothing when it does not exist), and
    /// every directory walked with its entry set ([`Listing`]), hashed from
    /// the same walk. `stop_at_packages` skips the subdirectories that are
    /// packages the key hashes under their own rules (cargo skips every
    /// directory with a manifest when it watches a package, but a build
    /// script reads what it likes: a crate that is no package of the build,
    /// a test fixture, is walked like any directory).
    pub fn add_dir(&mut self, dir: &Path, reason: &str, stop_at_packages: bool) -> Result<()> {
        let mut visited = HashSet::new();
        self.add_dir_once(dir, reason, stop_at_packages, &mut visited)
    }

    /// [`InputSet::add_dir`], walking each real directory once: a symlink
    /// to a directory is walked where it points (inside the checkout), and
    /// a link back to an ancestor does not loop.
    fn add_dir_once(
        &mut self,
        dir: &Path,
        reason: &str,
        stop_at_packages: bool,
        visited: &mut HashSet<PathBuf>,
    ) -> Result<()> {
        if !dir.is_dir() {
            return Ok(());
        }
        if let Ok(real) = std::fs::canonicalize(dir)
            && !visited.insert(real)
        {
            return Ok(());
        }
        // The walk reads `dir` through whatever symlinks lead to it: those
        // are inputs, and each listing is recorded where it really is.
        let start = self.resolve(&super::workspace::normalize(dir))?;
        for link in &start.links {
            let why = format!("symlink on the way to {}, {reason}", self.display(dir));
            self.insert_plain(link, &why, false)?;
        }
        // Below a directory reached through no symlink, a regular file the
        // walk meets is reached through none either (the walk follows no
        // link): it is an input as it is, without resolving it again.
        let real_walk = start.links.is_empty() && start.real == super::workspace::normalize(dir);
        let real_start = start.real;
        let root = self.root.clone();
        let walker = walkdir::WalkDir::new(dir)
            .follow_links(false)
            .sort_by_file_name()
            .into_iter();
        let skipped = &self.skipped_dirs;
        let packages = &self.packages;
        let lockfile = self.lockfile.as_deref();
        // A build output directory inside a package is skipped when cargo's
        // whole-package rule watches the package (cargo skips it too), but
        // one inside sources the build reads (`src/`, `.cargo/`, a watched
        // directory) would hide them: refused below.
        let mut output_met: Option<usize> = None;
        // The listing of each directory the walk is inside, by depth: the
        // walk is depth first in name order, so a directory's entries
        // arrive in order, before the walk leaves it.
        let mut open: Vec<Listing> = Vec::new();
        let mut listings: Vec<(PathBuf, Hashed)> = Vec::new();
        let walker = walker.filter_entry(|entry| {
            let path = entry.path();
            let depth = entry.depth();
            while open.len() > depth {
                listings.extend(open.pop().map(Listing::finish));
            }
            if depth == 0 {
                open.push(Listing::new(path));
                return true;
            }
            let file_type = entry.file_type();
            let (descend, listed) = if file_type.is_dir() {
                let rel = path
                    .strip_prefix(&root)
                    .ok()
                    .and_then(|r| r.to_str())
                    .unwrap_or("");
                let output = skipped.iter().position(|s| path == s);
                if output.is_some() && !stop_at_packages {
                    output_met = output_met.or(output);
                }
                let never_input = excluded_reason(&format!("{rel}/")).is_some() || output.is_some();
                let other_package = stop_at_packages && packages.contains(path);
                (!never_input && !other_package, !never_input)
            } else {
                // A gitlink's `.git` file (anything inside `.git/` is never
                // reached), and the lockfile, an input of its own.
                let name = entry.file_name();
                let own_input = name == "Cargo.lock" && lockfile == Some(path);
                (true, name != ".git" && !own_input)
            };
            if listed {
                if let Some(parent) = open.last_mut() {
                    parent.add(entry.file_name(), file_type);
                }
            }
            if file_type.is_dir() && descend {
                open.push(Listing::new(path));
            }
            descend
        });
        let mut found = Vec::new();
        for entry in walker {
            let entry = entry.with_context(|| format!("cannot walk {}", dir.display()))?;
            if entry.file_type().is_dir() {
                continue;
            }
            let rel = entry
                .path()
                .strip_prefix(&self.root)
                .ok()
                .and_then(|r| r.to_str());
            if rel.is_some_and(|rel| excluded_reason(rel).is_some()) {
                continue;
            }
            let plain = real_walk && entry.file_type().is_file();
            found.push((entry.path_is_symlink(), plain, entry.into_path()));
        }
        listings.extend(open.drain(..).rev().map(Listing::finish));
        if let Some(index) = output_met {
            let why = match self.skipped_why[index].as_str() {
                "" => "a target directory".to_owned(),
                why => format!("set by {why}"),
            };
            bail!(
                "{} holds the build output directory {} ({why}), but the build reads {} ({reason}); the key never hashes build output, so point the output directory elsewhere",
                self.display(dir),
                self.display(&self.skipped_dirs[index]),
                self.display(dir),
            );
        }
        for (walked, listing) in listings {
            let real = match walked.strip_prefix(dir) {
                Ok(below) if below.as_os_str().is_empty() => real_start.clone(),
                Ok(below) => real_start.join(below),
                Err(_) => walked,
            };
            self.insert_listing(&real, reason, listing)?;
        }
        for (is_link, plain, path) in found {
            if plain {
                self.insert_plain(&path, reason, false)?;
                continue;
            }
            self.add(&path, reason)?;
            if is_link {
                let real = self.resolve(&super::workspace::normalize(&path))?.real;
                if real.is_dir() {
                    let why = format!(
                        "behind the directory symlink {}, {reason}",
                        self.display(&path)
                    );
                    self.add_dir_once(&real, &why, stop_at_packages, visited)?;
                }
            }
        }
        Ok(())
    }

    /// Adds the directory `real` (no symlink on the way) with the entry set
    /// a walk hashed. The repository root is `.`.
    fn insert_listing(&mut self, real: &Path, reason: &str, listing: Hashed) -> Result<()> {
        let rel = match self.relative(real)? {
            rel if rel.is_empty() => ".".to_owned(),
            rel => rel,
        };
        // A directory the key never hashes (`.github/workflows/` itself,
        // walked by a glob) has no listing either.
        if excluded_reason(&format!("{rel}/")).is_some() {
            return Ok(());
        }
        let entry = self.entries.entry(rel).or_insert_with(|| Entry {
            abs: super::workspace::normalize(real),
            reasons: BTreeSet::new(),
            may_be_absent: false,
            listing: None,
        });
        entry.may_be_absent = false;
        entry.reasons.insert(reason.to_owned());
        entry.listing.get_or_insert(listing);
        Ok(())
    }

    /// Adds the files matching a repository-relative glob; returns how many matched.
    pub fn add_glob(&mut self, pattern: &str, reason: &str) -> Result<usize> {
        Ok(self.add_matching(pattern, reason, true)?.len())
    }

    /// Adds the files a `macro_rules!` embed may name, its metavariables
    /// written as `*`. A metavariable's text may hold `/` (`ptx!("sub/k")`),
    /// so here `*` matches across directories.
    pub fn add_pattern(&mut self, pattern: &str, reason: &str) -> Result<usize> {
        Ok(self.add_matching(pattern, reason, false)?.len())
    }

    /// [`Self::add_pattern`], returning the files (not directories) it matched.
    pub fn add_pattern_files(&mut self, pattern: &str, reason: &str) -> Result<Vec<PathBuf>> {
        let mut matched = self.add_matching(pattern, reason, false)?;
        matched.retain(|path| path.is_file());
        Ok(matched)
    }

    fn add_matching(
        &mut self,
        pattern: &str,
        reason: &str,
        literal_separator: bool,
    ) -> Result<Vec<PathBuf>> {
        let matcher = globset::GlobBuilder::new(pattern)
            .literal_separator(literal_separator)
            .build()
            .with_context(|| format!("invalid glob {pattern:?}"))?
            .compile_matcher();
        // Walk only below the glob's literal prefix: a glob for `docs/*.md`
        // must not cost a walk of the whole repository.
        let prefix: PathBuf = pattern
            .split('/')
            .take_while(|part| !part.contains(['*', '?', '[', '{']))
            .collect();
        let start = self.root.join(&prefix);
        if start.is_file() || start.is_symlink() {
            if !matcher.is_match(pattern) {
                return Ok(Vec::new());
            }
            self.add(&start, reason)?;
            return Ok(vec![start]);
        }
        let mut scratch = InputSet::new(&self.root, self.skipped_dirs.clone());
        scratch.bound = self.bound.clone();
        // The same entry sets as every other walk of these directories.
        scratch.lockfile.clone_from(&self.lockfile);
        scratch.add_dir(&start, reason, false)?;
        // `dir/**` covers what is in `dir`: its entry set too.
        let whole_dir = pattern
            .strip_suffix("/**")
            .filter(|dir| !dir.contains(['*', '?', '[', '{']));
        let mut matched = Vec::new();
        for (rel, entry) in scratch.entries {
            if !matcher.is_match(&rel) && whole_dir != Some(rel.as_str()) {
                continue;
            }
            match entry.listing {
                Some(listing) => self.insert_listing(&entry.abs, reason, listing)?,
                None => self.add(&entry.abs, reason)?,
            }
            matched.push(entry.abs);
        }
        Ok(matched)
    }

    /// Hashes every input in parallel, reusing digests of files already read
    /// (the module-tree files were read once, to be parsed).
    pub fn hash(self, known: &HashMap<PathBuf, Hashed>) -> Result<Vec<(Input, Hashed)>> {
        let entries: Vec<(String, Entry)> = self.entries.into_iter().collect();
        entries
            .into_par_iter()
            .map(|(rel, entry)| {
                let hashed = match (entry.listing, known.get(&entry.abs)) {
                    (Some(listing), _) => listing,
                    (None, Some(hashed)) => hashed.clone(),
                    (None, None) => hash_path(&entry.abs)?,
                };
                if hashed.kind == Kind::Absent && !entry.may_be_absent {
                    bail!(
                        "{rel} ({}) does not exist",
                        entry
                            .reasons
                            .iter()
                            .next()
                            .map(String::as_str)
                            .unwrap_or("input")
                    );
                }
                let input = Input {
                    path: rel,
                    sha256: if hashed.kind == Kind::Absent {
                        String::new()
                    } else {
                        hex(&hashed.sha256)
                    },
                    size: hashed.size,
                    kind: hashed.kind.name().to_owned(),
                    reason: entry.reasons.into_iter().collect::<Vec<_>>().join("; "),
                };
                Ok((input, hashed))
            })
            .collect()
    }
}

thread_local! {
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 256 * 1024]);
}

/// Hashes one path without following a symlink: opened first (without
/// following a final symlink, and without blocking on a FIFO), so that a
/// regular file costs no `stat` of its path; a symlink or anything else
/// is looked at by [`hash_path_by_stat`].
#[cfg(unix)]
pub fn hash_path(path: &Path) -> Result<Hashed> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let Ok(file) = opened else {
        return hash_path_by_stat(path);
    };
    let meta = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?;
    if !meta.is_file() {
        return hash_path_by_stat(path);
    }
    hash_open_file(file, &meta, path)
}

#[cfg(not(unix))]
pub fn hash_path(path: &Path) -> Result<Hashed> {
    hash_path_by_stat(path)
}

/// [`hash_path`] by `lstat` first: absent paths, symlinks (their text), and
/// the refusal of what is not a regular file.
fn hash_path_by_stat(path: &Path) -> Result<Hashed> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        // Below a regular file (`app/.cargo` a file, `app/.cargo/config`
        // probed) nothing exists either: the kernel says ENOTDIR.
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Hashed {
                kind: Kind::Absent,
                sha256: [0; 32],
                size: 0,
            });
        }
        Err(err) => return Err(err).with_context(|| format!("cannot stat {}", path.display())),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path)
            .with_context(|| format!("cannot read link {}", path.display()))?;
        let text = target.as_os_str().as_encoded_bytes();
        return Ok(Hashed {
            kind: Kind::Symlink,
            sha256: Sha256::digest(text).into(),
            size: text.len() as u64,
        });
    }
    if !meta.is_file() {
        bail!(
            "{} is not a regular file (a directory, FIFO, socket or device); the key can only hash files, so remove it or list a file instead",
            path.display()
        );
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    hash_open_file(file, &meta, path)
}

/// Hashes the content of an open regular file, read in one buffer per
/// hashing thread.
fn hash_open_file(
    mut file: std::fs::File,
    meta: &std::fs::Metadata,
    path: &Path,
) -> Result<Hashed> {
    let mut hasher = Sha256::new();
    let mut size = 0;
    // One buffer per hashing thread: allocating and zeroing a fresh one per
    // file costs more than hashing the small files most workspaces hold.
    READ_BUFFER.with_borrow_mut(|buffer| -> Result<()> {
        loop {
            let n = file
                .read(buffer)
                .with_context(|| format!("cannot read {}", path.display()))?;
            if n == 0 {
                return Ok(());
            }
            size += n as u64;
            hasher.update(&buffer[..n]);
        }
    })?;
    Ok(Hashed {
        kind: kind_of(meta),
        sha256: hasher.finalize().into(),
        size,
    })
}

/// Hashes bytes already read from `meta`'s file.
pub fn hash_bytes(bytes: &[u8], meta: &std::fs::Metadata) -> Hashed {
    Hashed {
        kind: kind_of(meta),
        sha256: Sha256::digest(bytes).into(),
        size: bytes.len() as u64,
    }
}

#[cfg(unix)]
fn kind_of(meta: &std::fs::Metadata) -> Kind {
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o111 != 0 {
        Kind::Executable
    } else {
        Kind::File
    }
}

/// Windows has no executable bit: every file is hashed as a plain file there
/// (keys computed on Windows and on Unix differ anyway: the rustc host does).
#[cfg(not(unix))]
fn kind_of(_meta: &std::fs::Metadata) -> Kind {
    Kind::File
}

pub fn hex(bytes: &[u8]) -> String {
    // A table, not `format!` per byte: every input's digest is spelled in
    // hex, and formatting 32 bytes one by one cost 3-5% of `ci-key`.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        text.push(char::from(DIGITS[usize::from(b >> 4)]));
        text.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    text
}

/// The documented encoding (README, "How the key is computed"):
///
/// ```text
/// "ci-key/1\n"
/// per component, in order:            b'c' len(name) name len(value) value
/// per input, sorted by path bytes:    b'i' len(path) path kind sha256
/// ```
///
/// `len` is a big-endian u64, `kind` one byte (`f` file, `x` executable,
/// `l` symlink, `a` absent, `d` directory), `sha256` the 32 raw bytes of
/// the content's (link text's, directory entry set's) digest, zeros when
/// absent. Length prefixes make the encoding
/// unambiguous; sorting makes it independent of directory listing order.
pub fn key_digest(components: &[Component], inputs: &[(Input, Hashed)]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"ci-key/1\n");
    for component in components {
        hasher.update(b"c");
        update_with_len(&mut hasher, component.name.as_bytes());
        update_with_len(&mut hasher, component.value.as_bytes());
    }
    let mut sorted: Vec<&(Input, Hashed)> = inputs.iter().collect();
    sorted.sort_by(|a, b| a.0.path.as_bytes().cmp(b.0.path.as_bytes()));
    for (input, hashed) in sorted {
        hasher.update(b"i");
        update_with_len(&mut hasher, input.path.as_bytes());
        hasher.update([hashed.kind.tag()]);
        hasher.update(hashed.sha256);
    }
    hex(&hasher.finalize())
}

fn update_with_len(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(path: &str, byte: u8) -> (Input, Hashed) {
        (
            Input {
                path: path.into(),
                sha256: String::new(),
                size: 0,
                kind: "file".into(),
                reason: String::new(),
            },
            Hashed {
                kind: Kind::File,
                sha256: [byte; 32],
                size: 0,
            },
        )
    }

    #[test]
    fn hex_spells_each_byte_as_two_lowercase_digits() {
        let bytes: Vec<u8> = (0..=255).collect();
        let formatted: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&bytes), formatted);
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn digest_is_order_independent_and_unambiguous() {
        let c = vec![Component {
            name: "a".into(),
            value: "bc".into(),
        }];
        let one = key_digest(&c, &[input("x", 1), input("y", 2)]);
        assert_eq!(one, key_digest(&c, &[input("y", 2), input("x", 1)]));
        // Moving a byte between name and value must change the digest.
        let shifted = vec![Component {
            name: "ab".into(),
            value: "c".into(),
        }];
        assert_ne!(one, key_digest(&shifted, &[input("x", 1), input("y", 2)]));
        // Swapping contents between two paths must change it too.
        assert_ne!(one, key_digest(&c, &[input("x", 2), input("y", 1)]));
    }

    #[test]
    fn excluded_areas_are_refused() {
        let set = InputSet::new(Path::new("/r"), vec![PathBuf::from("/r/target")]);
        assert!(
            set.relative(Path::new("/r/.github/workflows/ci.yml"))
                .is_err()
        );
        assert!(set.relative(Path::new("/r/.git/config")).is_err());
        assert!(set.relative(Path::new("/r/target/debug/x")).is_err());
        assert!(set.relative(Path::new("/r/src/../../etc/passwd")).is_err());
        assert_eq!(
            set.relative(Path::new("/r/a/./b/../c.rs")).unwrap(),
            "a/c.rs"
        );
    }
}
