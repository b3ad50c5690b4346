//! The shared replay of a trace: [`Analysis`] takes what either tracer
//! recorded (strace's calls, fanotify's events) in the checker's terms,
//! sorts every file used into repository, build output, outside and git,
//! and checks each repository file against the key's inputs; [`Process`]
//! names who used it, and [`fix_for`] says how to cover a miss.
//! Must not: parse a tracer's output (`strace.rs`, `fanotify.rs`) or
//! compute keys.

#[cfg(not(unix))]
use super::not_unix::OsStrExt;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{Result, bail};

use super::escape_controls;
use super::report::{AbsentInTree, TraceMiss, TraceReport};
use super::strace::unseen_miss;
use crate::key_tree::TreeView;

/// What the check needs besides the trace.
pub struct Scope<'a> {
    /// The repository root, canonical.
    pub root: &'a Path,
    /// Build output directories (canonical where they exist).
    pub output_dirs: &'a [PathBuf],
    /// The key inputs, repository-relative (a directory whose entry set
    /// the key hashes by its path, the root as `.`), and, ending in `/`,
    /// each directory whose existence a present input implies.
    pub inputs: &'a BTreeSet<&'a str>,
    /// The working directory the traced command started in.
    pub start_dir: &'a Path,
    /// The key tree the build ran in, mounted at `root` (strace names its
    /// files by the build's paths): where they are on this process's disk.
    pub view: Option<&'a TreeView>,
}

/// Tools whose metadata scans of the repository are not reads (their file
/// name, outside the repository): see the module header.
const METADATA_EXEMPT_TOOLS: &[&str] = &["cargo", "git"];

/// Files those tools read only to decide which files their scans list
/// (cargo lists a package's files through git's ignore rules): part of
/// the scan, not of what is compiled.
const SCAN_RULE_FILES: &[&str] = &[".gitignore", ".gitattributes"];

/// Who made a call: a process as the report names it.
#[derive(Debug, Clone, Default)]
pub(super) struct Process {
    pub(super) pid: u32,
    /// The executed file.
    pub(super) exe: PathBuf,
    /// `--crate-name` of a rustc command line.
    pub(super) crate_name: Option<String>,
    /// The working directory it started in (a build script's package).
    pub(super) start_dir: PathBuf,
    /// Not started by the xtask (fanotify sees every process).
    pub(super) outside_tree: bool,
}

impl Process {
    /// The process as the report names it, control characters escaped:
    /// executable names and `--crate-name` come from the checkout.
    pub(super) fn describe(&self, scope: &Scope) -> String {
        let described = self.describe_raw(scope);
        if self.outside_tree {
            return escape_controls(&format!(
                "{described}, not started by the build: another process read the repository while the build ran; if it is no daemon of the build, stop it and trace again"
            ));
        }
        escape_controls(&described)
    }

    pub(super) fn describe_raw(&self, scope: &Scope) -> String {
        let file_name = self
            .exe
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "?".to_owned());
        if file_name.starts_with("build-script-") {
            // `<target>/<profile>/build/<package>-<hash>/build-script-build`
            let package = self
                .exe
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy())
                .map(|n| {
                    n.rsplit_once('-')
                        .map_or(n.to_string(), |(p, _)| p.to_owned())
                })
                .unwrap_or_default();
            return format!("build script of {package} (pid {})", self.pid);
        }
        if let Some(crate_name) = &self.crate_name {
            return format!(
                "{file_name} compiling crate `{crate_name}`, or a proc macro it ran (pid {})",
                self.pid
            );
        }
        let exe = match self.exe.strip_prefix(scope.root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => self.exe.display().to_string(),
        };
        format!("{file_name} (pid {}, {exe})", self.pid)
    }

    pub(super) fn is_build_script(&self) -> bool {
        self.exe
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("build-script-"))
    }
}

/// The state the trace is replayed into.
pub(super) struct Analysis<'a> {
    pub(super) scope: &'a Scope<'a>,
    pub(super) processes: HashMap<u32, Rc<Process>>,
    /// Each thread's working directory; threads cloned with `CLONE_FS` share one.
    pub(super) cwds: HashMap<u32, Rc<RefCell<PathBuf>>>,
    /// Files the build wrote (absolute, resolved), in the order seen.
    pub(super) created: HashSet<OsString>,
    /// Repository files used: path -> (first access, process, created-before?).
    pub(super) used: BTreeMap<PathBuf, (&'static str, Rc<Process>)>,
    pub(super) external: HashSet<OsString>,
    pub(super) outputs: HashSet<OsString>,
    pub(super) created_used: HashSet<OsString>,
    pub(super) git: HashSet<OsString>,
    /// Directories listed by processes whose listings count.
    pub(super) listed: Vec<(PathBuf, Rc<Process>)>,
    /// The first process that listed the repository root.
    listed_root: Option<Rc<Process>>,
    /// (thread, directory) listed by an exempt tool (cargo's package scan).
    pub(super) scanned: HashSet<(u32, PathBuf)>,
    /// Canonical forms of parent directories, resolved once.
    pub(super) canonical_dirs: HashMap<OsString, PathBuf>,
    /// Repository symlinks a directory path passes through, found once.
    pub(super) symlinks_on_the_way: HashMap<OsString, Vec<PathBuf>>,
    /// Processes that made a [`Call::Unseen`] call, with the call.
    pub(super) unseen: Vec<(String, Rc<Process>)>,
    /// Configuration files a cargo or rustup looked for and did not find
    /// ([`is_configuration_probe`]): one added there changes the build.
    pub(super) probed: Vec<(PathBuf, Rc<Process>)>,
    /// Programs born during the build (fanotify: by birth time, wherever
    /// they are): never exempt tools, whatever their name.
    pub(super) new_programs: HashSet<OsString>,
    pub(super) repository_opens: usize,
    /// Repository paths a lookup did not find (`ENOENT`, `ENOTDIR`): in a
    /// key tree, the checkout may have them.
    pub(super) failed: Vec<(PathBuf, Rc<Process>)>,
    /// The build ran in a key tree and the watch is of the checkout
    /// (fanotify): no access to it at all is what a good build does.
    pub(super) checkout_unused_is_fine: bool,
}

/// Whether `path` is a file cargo or rustup looks for in its working
/// directory and every ancestor ([`crate::key::cargo_config::NESTED_PROBES`]:
/// `Cargo.toml`, `Cargo.lock`, `.cargo/config[.toml]`,
/// `rust-toolchain[.toml]`). Its absence is what main's build used, and
/// a failed lookup is otherwise not checked.
pub(super) fn is_configuration_probe(path: &Path) -> bool {
    crate::key::cargo_config::NESTED_PROBES
        .iter()
        .any(|(probe, _)| path.ends_with(probe))
}

impl<'a> Analysis<'a> {
    pub(super) fn new(scope: &'a Scope<'a>) -> Self {
        Analysis {
            scope,
            processes: HashMap::new(),
            cwds: HashMap::new(),
            created: HashSet::new(),
            used: BTreeMap::new(),
            external: HashSet::new(),
            outputs: HashSet::new(),
            created_used: HashSet::new(),
            git: HashSet::new(),
            listed: Vec::new(),
            listed_root: None,
            scanned: HashSet::new(),
            canonical_dirs: HashMap::new(),
            symlinks_on_the_way: HashMap::new(),
            unseen: Vec::new(),
            probed: Vec::new(),
            new_programs: HashSet::new(),
            repository_opens: 0,
            failed: Vec::new(),
            checkout_unused_is_fine: false,
        }
    }

    pub(super) fn process(&mut self, pid: u32) -> Rc<Process> {
        self.processes
            .entry(pid)
            .or_insert_with(|| {
                Rc::new(Process {
                    pid,
                    ..Process::default()
                })
            })
            .clone()
    }

    pub(super) fn cwd(&mut self, pid: u32) -> Rc<RefCell<PathBuf>> {
        let start = self.scope.start_dir.to_path_buf();
        self.cwds
            .entry(pid)
            .or_insert_with(|| Rc::new(RefCell::new(start)))
            .clone()
    }

    /// Cargo's and git's metadata scans; see [`METADATA_EXEMPT_TOOLS`].
    pub(super) fn metadata_exempt(&self, process: &Process) -> bool {
        let exempt_name = process
            .exe
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| METADATA_EXEMPT_TOOLS.contains(&n));
        let exe = process.exe.as_os_str();
        exempt_name
            && process.exe.is_absolute()
            && !process.exe.starts_with(self.scope.root)
            && !self
                .scope
                .output_dirs
                .iter()
                .any(|d| is_under(exe.as_bytes(), d.as_os_str().as_bytes()))
            && !self.created.contains(exe)
            && !self.new_programs.contains(exe)
    }

    /// A [`SCAN_RULE_FILES`] file read by a metadata-exempt tool.
    pub(super) fn is_scan_rule(&self, file: &Path, process: &Process) -> bool {
        file.file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|name| SCAN_RULE_FILES.contains(&name))
            && self.metadata_exempt(process)
    }

    /// Where the build's `path` lies on this process's disk: the key tree,
    /// for a build that ran in one.
    pub(super) fn disk(&self, path: &Path) -> PathBuf {
        self.scope
            .view
            .map_or_else(|| path.to_path_buf(), |view| view.to_disk(path))
    }

    /// The build's name of `path` on this process's disk.
    fn undisk(&self, path: PathBuf) -> PathBuf {
        match self.scope.view {
            Some(view) => view.from_disk(&path),
            None => path,
        }
    }

    /// A repository path a lookup did not find (see [`Self::failed`]).
    pub(super) fn lookup_failed(&mut self, path: PathBuf, process: Rc<Process>) {
        if self.scope.view.is_some() && path.starts_with(self.scope.root) {
            self.failed.push((path, process));
        }
    }

    /// `path` with its directories resolved as the kernel resolved them
    /// (symlinks, `..`); the last component is kept, so a symlink stays
    /// the link. A symlinked directory of the repository on the way is
    /// used too: its target text chose the file.
    pub(super) fn resolve(&mut self, path: &Path, process: &Rc<Process>) -> PathBuf {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return crate::key::workspace::normalize(path);
        };
        for link in self.symlinked_dirs(parent) {
            self.use_file(&link, "followed", process);
        }
        if path.ends_with("..") || path.ends_with(".") {
            return std::fs::canonicalize(self.disk(path))
                .map(|real| self.undisk(real))
                .unwrap_or_else(|_| crate::key::workspace::normalize(path));
        }
        // Keyed by the bytes: hashing a path component by component is slow.
        let parent = match self.canonical_dirs.get(parent.as_os_str()) {
            Some(dir) => dir.clone(),
            None => {
                let dir = std::fs::canonicalize(self.disk(parent))
                    .map(|real| self.undisk(real))
                    .unwrap_or_else(|_| crate::key::workspace::normalize(parent));
                self.canonical_dirs
                    .insert(parent.as_os_str().to_owned(), dir.clone());
                dir
            }
        };
        parent.join(name)
    }

    /// The symlinks among the repository directories `dir` passes through,
    /// read lexically up to the first `..`.
    pub(super) fn symlinked_dirs(&mut self, dir: &Path) -> Vec<PathBuf> {
        if let Some(links) = self.symlinks_on_the_way.get(dir.as_os_str()) {
            return links.clone();
        }
        let mut links = Vec::new();
        if let Ok(rel) = dir.strip_prefix(self.scope.root) {
            let mut prefix = self.scope.root.to_path_buf();
            for component in rel.components() {
                let std::path::Component::Normal(part) = component else {
                    break;
                };
                prefix.push(part);
                if self.disk(&prefix).is_symlink() {
                    links.push(prefix.clone());
                }
            }
        }
        self.symlinks_on_the_way
            .insert(dir.as_os_str().to_owned(), links.clone());
        links
    }

    /// Sorts a used file into a category; repository files are kept for the check.
    pub(super) fn use_file(&mut self, file: &Path, access: &'static str, process: &Rc<Process>) {
        self.use_file_as(file, access, process, true);
    }

    /// [`Self::use_file`] of a file known to have been in the repository
    /// before the build (`may_be_created` false): a file the build later
    /// created under the same name does not exempt it.
    pub(super) fn use_file_as(
        &mut self,
        file: &Path,
        access: &'static str,
        process: &Rc<Process>,
        may_be_created: bool,
    ) {
        // Byte prefixes: `Path::starts_with` compares component by
        // component, which a trace of a large build feels.
        let bytes = file.as_os_str().as_bytes();
        if self
            .scope
            .output_dirs
            .iter()
            .any(|d| is_under(bytes, d.as_os_str().as_bytes()))
        {
            self.outputs.insert(file.as_os_str().to_owned());
            return;
        }
        let root = self.scope.root.as_os_str().as_bytes();
        if !is_under(bytes, root) {
            self.external.insert(file.as_os_str().to_owned());
            return;
        }
        let rel = OsStr::from_bytes(bytes[root.len()..].strip_prefix(b"/").unwrap_or(&[]));
        self.repository_opens += 1;
        if crate::key::is_git_metadata(&rel.to_string_lossy()) {
            self.git.insert(file.as_os_str().to_owned());
            return;
        }
        if may_be_created && self.created.contains(file.as_os_str()) {
            self.created_used.insert(file.as_os_str().to_owned());
            return;
        }
        if rel.is_empty() {
            return;
        }
        self.used
            .entry(file.to_path_buf())
            .or_insert_with(|| (access, process.clone()));
    }

    /// Whether the key records that `file` (`rel` in the repository) is
    /// absent: as an absent input, or through the deepest directory on its
    /// way that exists, when that is an input: a directory's entry set
    /// lacks the next name (cargo's scan of a package tests every
    /// subdirectory for a `Cargo.toml`), a file has nothing below it.
    fn absence_is_keyed(&self, file: &Path, rel: &str) -> bool {
        if self.scope.inputs.contains(rel) {
            return true;
        }
        let mut dir = file;
        while let Some(parent) = dir.parent() {
            dir = parent;
            let Ok(meta) = std::fs::symlink_metadata(self.disk(dir)) else {
                continue;
            };
            // A symlink on the way: what lies behind it is not its text's
            // to say (a dangling link's target may be created).
            if meta.file_type().is_symlink() {
                return false;
            }
            let Ok(dir_rel) = dir.strip_prefix(self.scope.root) else {
                return false;
            };
            let dir_rel = match dir_rel.to_string_lossy().replace('\\', "/") {
                empty if empty.is_empty() => ".".to_owned(),
                dir_rel => dir_rel,
            };
            return self.scope.inputs.contains(dir_rel.as_str());
        }
        false
    }

    pub(super) fn finish(mut self, calls: usize) -> Result<TraceReport> {
        if calls == 0 || (self.processes.is_empty() && !self.checkout_unused_is_fine) {
            bail!("the trace recorded no system call: strace did not trace the build");
        }
        // A listing reads every name in the directory: each file in it (as
        // it is now) counts as examined, unless the build created it, and
        // the directory's entry set must be an input itself (an empty
        // directory or a subdirectory in it is a name the build saw).
        let mut listed_dirs = Vec::new();
        for (dir, process) in std::mem::take(&mut self.listed) {
            if self.scope.output_dirs.iter().any(|d| dir.starts_with(d))
                || !dir.starts_with(self.scope.root)
            {
                continue;
            }
            listed_dirs.push((dir.clone(), process.clone()));
            let Ok(entries) = std::fs::read_dir(self.disk(&dir)) else {
                // Gone by now (removed or moved by the build): its names
                // cannot be checked, so the directory itself is the miss
                // (unless the build made it).
                self.use_file(&dir, "listed", &process);
                continue;
            };
            self.repository_opens += 1;
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| !t.is_dir()) {
                    let file = self.undisk(entry.path());
                    self.use_file(&file, "listed", &process);
                }
            }
        }
        for (dir, process) in listed_dirs {
            if dir == self.scope.root {
                self.listed_root.get_or_insert(process);
                continue;
            }
            self.use_file(&dir, "listed", &process);
            // A listing says more than an existence check of the same directory.
            if let Some(used) = self.used.get_mut(&dir) {
                *used = ("listed", process);
            }
        }
        if self.repository_opens == 0 && !self.checkout_unused_is_fine {
            bail!(
                "the trace recorded no access to a file inside {}: a build that reads nothing of the repository proves nothing (is the command a build of this repository?)",
                self.scope.root.display()
            );
        }
        let mut report = TraceReport {
            calls,
            processes: self.processes.len(),
            external_files: self.external.len(),
            output_files: self.outputs.len(),
            created_files: self.created_used.len(),
            created_examples: {
                let mut examples: Vec<String> = self
                    .created_used
                    .iter()
                    .filter_map(|f| Path::new(f).strip_prefix(self.scope.root).ok())
                    .map(|rel| escape_controls(&rel.to_string_lossy()))
                    .collect();
                examples.sort();
                examples.truncate(3);
                examples
            },
            git_files: self.git.len(),
            ..TraceReport::default()
        };
        if let Some(process) = &self.listed_root {
            report.repository_files += 1;
            if !self.scope.inputs.contains(".") {
                report.misses.push(TraceMiss {
                    path: ".".to_owned(),
                    access: "listed",
                    process: process.describe(self.scope),
                    fix: fix_for_dir(
                        ".",
                        &relative_to(self.scope.root, &process.start_dir).to_string_lossy(),
                        "listed",
                        process,
                    ),
                });
            }
        }
        for (file, (access, process)) in &self.used {
            let on_disk = self.disk(file);
            let is_dir =
                std::fs::metadata(&on_disk).is_ok_and(|m| m.is_dir()) && !on_disk.is_symlink();
            if is_dir {
                // A directory's existence is what a `stat` or `access` of
                // it uses: implied by any present input below it, or by
                // its entry set in the key; a listing uses the entry set.
                report.repository_files += 1;
                let rel = file
                    .strip_prefix(self.scope.root)
                    .expect("used files are inside the root")
                    .to_string_lossy()
                    .replace('\\', "/");
                let covered = self.scope.inputs.contains(rel.as_str())
                    || (*access != "listed"
                        && self.scope.inputs.contains(format!("{rel}/").as_str()));
                if !covered {
                    let shown = escape_controls(&rel);
                    let from_package =
                        escape_controls(&relative_to(file, &process.start_dir).to_string_lossy());
                    report.misses.push(TraceMiss {
                        fix: fix_for_dir(&shown, &from_package, access, process),
                        path: shown,
                        access,
                        process: process.describe(self.scope),
                    });
                }
                continue;
            }
            report.repository_files += 1;
            let rel = file
                .strip_prefix(self.scope.root)
                .expect("used files are inside the root");
            let rel = rel.to_string_lossy().replace('\\', "/");
            if self.scope.inputs.contains(rel.as_str()) {
                continue;
            }
            let shown = escape_controls(&rel);
            let from_package =
                escape_controls(&relative_to(file, &process.start_dir).to_string_lossy());
            report.misses.push(TraceMiss {
                fix: fix_for(&shown, &from_package, access, process),
                path: shown,
                access,
                process: process.describe(self.scope),
            });
        }
        let mut probed_misses = BTreeSet::new();
        for (file, process) in &self.probed {
            let bytes = file.as_os_str().as_bytes();
            let outside = !is_under(bytes, self.scope.root.as_os_str().as_bytes());
            let output = self
                .scope
                .output_dirs
                .iter()
                .any(|d| is_under(bytes, d.as_os_str().as_bytes()));
            let Ok(rel) = file.strip_prefix(self.scope.root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if outside
                || output
                || crate::key::is_git_metadata(&rel)
                || self.absence_is_keyed(file, &rel)
                || !probed_misses.insert(rel.clone())
            {
                continue;
            }
            // The directory the tool started in: above `.cargo/`.
            let mut dir = Path::new(&rel).parent().unwrap_or(Path::new(""));
            if dir.file_name().is_some_and(|d| d == ".cargo") {
                dir = dir.parent().unwrap_or(Path::new(""));
            }
            let dir = dir.to_string_lossy().into_owned();
            let shown = escape_controls(&rel);
            report.misses.push(TraceMiss {
                fix: format!(
                    "a cargo or rustup started in `{}` looks for this file, so one added there changes the build, and the key does not record its absence; start the tool in a package directory, or make the build script watch `{}` with a literal `cargo::rerun-if-changed=` line (ci-key then keys it)",
                    escape_controls(if dir.is_empty() { "." } else { &dir }),
                    escape_controls(if dir.is_empty() { "." } else { &dir })
                ),
                path: shown,
                access: "looked for (absent)",
                process: process.describe(self.scope),
            });
        }
        for (syscall, process) in &self.unseen {
            let (path, access, fix) = unseen_miss(syscall);
            report.misses.push(TraceMiss {
                path,
                access,
                process: process.describe(self.scope),
                fix: fix.to_owned(),
            });
        }
        report.absent_in_tree = self.absent_in_tree();
        Ok(report)
    }

    /// The paths a build in a key tree looked for and did not find, which
    /// the checkout has: what it would have used, had the key held them.
    fn absent_in_tree(&self) -> Vec<AbsentInTree> {
        let Some(view) = self.scope.view else {
            return Vec::new();
        };
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        for (path, process) in &self.failed {
            let bytes = path.as_os_str().as_bytes();
            if view.is_through(path)
                || self
                    .scope
                    .output_dirs
                    .iter()
                    .any(|d| is_under(bytes, d.as_os_str().as_bytes()))
            {
                continue;
            }
            let Ok(rel) = path.strip_prefix(self.scope.root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if rel.is_empty()
                || crate::key::is_git_metadata(&rel)
                || rel.starts_with(".github/workflows/")
                || self.scope.inputs.contains(rel.as_str())
                || std::fs::symlink_metadata(view.to_disk(path)).is_ok()
            {
                continue;
            }
            // This process sees the checkout itself at the build's path.
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            if !seen.insert(rel.clone()) {
                continue;
            }
            let directory = meta.is_dir();
            found.push(AbsentInTree {
                fix: crate::key_tree::include_entry(&escape_controls(&rel), directory),
                path: escape_controls(&rel),
                directory,
                process: process.describe(self.scope),
            });
        }
        found
    }
}

/// The fix for a miss, by who used the file and how.
fn fix_for(rel: &str, from_package: &str, access: &str, process: &Process) -> String {
    let include =
        format!("add key.include = [\"{rel}\"] (or a glob of its directory) to the policy");
    if process.is_build_script() {
        format!(
            "the build script {access} it without declaring it: print `cargo::rerun-if-changed={from_package}` as a literal line so ci-key hashes it, or {include}"
        )
    } else if process.crate_name.is_some() && access != "listed" {
        format!(
            "a proc macro (or an include ci-key does not resolve) made rustc use it; {include}, or teach ci-key this form"
        )
    } else {
        // Compilers and linkers look names up along search paths (include
        // and library directories): a file added earlier on the path wins,
        // so only the whole directory in the key covers what they use.
        let dir = Path::new(rel)
            .parent()
            .map(|d| d.to_string_lossy().into_owned())
            .filter(|d| !d.is_empty());
        let who = if process.crate_name.is_some() {
            "rustc (searching a -L directory)"
        } else {
            "a tool the build ran"
        };
        match dir {
            Some(dir) => format!(
                "{who} {access} it; tools look files up along search paths, so key its directory whole: add key.include = [\"{dir}/**\"] to the policy (or declare `{dir}` with a literal rerun-if-changed)"
            ),
            None => format!("{who} {access} it; {include}"),
        }
    }
}

/// The fix for a directory whose existence or entry set the build used.
fn fix_for_dir(rel: &str, from_package: &str, access: &str, process: &Process) -> String {
    let glob = if rel == "." {
        "**".to_owned()
    } else {
        format!("{rel}/**")
    };
    let what = if access == "listed" {
        "the names in it"
    } else {
        "whether it exists"
    };
    let declare = if process.is_build_script() {
        format!(
            "print `cargo::rerun-if-changed={from_package}` as a literal line in the build script, or "
        )
    } else {
        String::new()
    };
    format!(
        "the build {access} this directory, so {what} can change the build, and the key does not hash its entry set; {declare}add key.include = [\"{glob}\"] to the policy (the directory whole: its files and the names in it)"
    )
}

/// Whether the path `bytes` is `dir` or lies below it.
pub(super) fn is_under(bytes: &[u8], dir: &[u8]) -> bool {
    bytes.starts_with(dir)
        && (bytes.len() == dir.len() || bytes[dir.len()] == b'/' || dir.ends_with(b"/"))
}

/// `path` relative to the directory `base` (both absolute): `../x` when
/// it lies beside it.
fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let path: Vec<_> = path.components().collect();
    let base: Vec<_> = base.components().collect();
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..base.len() {
        out.push("..");
    }
    for part in &path[common..] {
        out.push(part);
    }
    out
}
