//! `verify-key --trace`: runs a build under strace and proves that every file
//! of the repository any process of the build opened, executed or examined is
//! a key input.
//!
//! This module owns the tracer (finding strace, its command line), the parser
//! of strace's output and the check of the recorded accesses against a key
//! manifest. It does not compute keys, run builds of its own or read
//! dep-info files (that is [`super::check`]'s job).
//!
//! The dep-info check sees what rustc reports and what build scripts declare;
//! a build script or proc macro that opens a file without declaring it is
//! invisible to it. The trace sees the system calls themselves, in every
//! process the build starts (cargo, build scripts, rustc with its proc
//! macros, linkers, tools a build script runs), so it also catches what
//! nobody declared.
//!
//! What counts as a read of a repository file (documented in README.md):
//! - opening it for reading (`open`, `openat`, `openat2`), or executing it
//!   (`execve`, `execveat`: a script executed is read);
//! - its metadata: a successful `stat`/`statx`/`access`/`readlink` of a file
//!   (of a directory: its existence, which the key implies when an input
//!   lies below it), and a directory listing (`open` with `O_DIRECTORY`),
//!   which reads the name of every entry in it (the directory's entry set
//!   must be an input): code that tests whether a file exists or lists a
//!   directory depends on it as much as code that reads it. Cargo's and git's own metadata scans (cargo's freshness
//!   checks and target discovery, `git status`-style scans) are exempt:
//!   they do not shape the compiled bytes, and git state is a documented
//!   residual of the key;
//! - the source of a rename (the build moved a repository file), and a
//!   file or directory it removed (a listing is checked against the
//!   directory as it is after the build).
//!
//! Not a miss: files under the target directories (build output), `.git/`,
//! files outside the repository (registry sources, toolchain: covered by
//! `Cargo.lock` and the rustc version), files the build itself created during
//! the trace before reading them, and failed lookups (a path that does not
//! exist), but those of the files a cargo or rustup looks for from its
//! working directory up (`NESTED_PROBES`), whose absence must be keyed.
//!
//! Paths are resolved the way the kernel did: strace's `-y` prints the
//! directory behind every `dirfd` (`AT_FDCWD</cwd>`) and the file behind
//! every returned descriptor, so build scripts that `chdir` and open relative
//! paths, `openat` on a directory descriptor and symlinks all come out as
//! absolute paths. Calls that take no `dirfd` (`open`, `stat`, `execve`,
//! `chdir`) are resolved against a per-process working directory that
//! follows `chdir`/`fchdir` and is inherited at `fork`/`clone` (shared with
//! `CLONE_FS`). `-xx` prints every string in hex, so quotes, newlines and
//! non-UTF-8 bytes in file names parse exactly; a truncated string is an
//! error, never a guess.

#[cfg(not(unix))]
use not_unix::{OsStrExt, OsStringExt};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
#[cfg(unix)]
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{Context, Result, bail};

/// strace exists on Linux only, and [`Tracer::find`] finds none elsewhere,
/// so no trace is ever recorded or parsed there. These stand-ins for the
/// Unix byte views of paths only let the parser compile on Windows: a path
/// that is not UTF-8 there is shown as `<non-UTF-8>`.
#[cfg(not(unix))]
mod not_unix {
    use std::ffi::{OsStr, OsString};

    pub trait OsStrExt {
        fn as_bytes(&self) -> &[u8];
        fn from_bytes(bytes: &[u8]) -> &Self;
    }
    impl OsStrExt for OsStr {
        fn as_bytes(&self) -> &[u8] {
            self.as_encoded_bytes()
        }
        fn from_bytes(bytes: &[u8]) -> &OsStr {
            OsStr::new(std::str::from_utf8(bytes).unwrap_or("<non-UTF-8>"))
        }
    }
    pub trait OsStringExt {
        fn from_vec(bytes: Vec<u8>) -> Self;
    }
    impl OsStringExt for OsString {
        fn from_vec(bytes: Vec<u8>) -> OsString {
            OsString::from(String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

use crate::policy::TracerChoice;

#[cfg(target_os = "linux")]
mod fanotify;

/// The system calls the tracer records, and what each means to the check.
/// One registry: the strace `-e trace=` list is built from it.
const SYSCALLS: &[(&str, Call)] = &[
    (
        "open",
        Call::Open {
            dirfd: None,
            path: 0,
            flags: 1,
        },
    ),
    (
        "openat",
        Call::Open {
            dirfd: Some(0),
            path: 1,
            flags: 2,
        },
    ),
    (
        "openat2",
        Call::Open {
            dirfd: Some(0),
            path: 1,
            flags: 2,
        },
    ),
    (
        "creat",
        Call::Create {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "execve",
        Call::Exec {
            dirfd: None,
            path: 0,
            argv: 1,
        },
    ),
    (
        "execveat",
        Call::Exec {
            dirfd: Some(0),
            path: 1,
            argv: 2,
        },
    ),
    ("chdir", Call::Chdir),
    ("fchdir", Call::Fchdir),
    (
        "stat",
        Call::Stat {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "lstat",
        Call::Stat {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "newfstatat",
        Call::Stat {
            dirfd: Some(0),
            path: 1,
        },
    ),
    (
        "statx",
        Call::Stat {
            dirfd: Some(0),
            path: 1,
        },
    ),
    (
        "access",
        Call::Stat {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "faccessat",
        Call::Stat {
            dirfd: Some(0),
            path: 1,
        },
    ),
    (
        "faccessat2",
        Call::Stat {
            dirfd: Some(0),
            path: 1,
        },
    ),
    (
        "readlink",
        Call::Stat {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "readlinkat",
        Call::Stat {
            dirfd: Some(0),
            path: 1,
        },
    ),
    (
        "rename",
        Call::Move {
            from: (None, 0),
            to: (None, 1),
        },
    ),
    (
        "renameat",
        Call::Move {
            from: (Some(0), 1),
            to: (Some(2), 3),
        },
    ),
    (
        "renameat2",
        Call::Move {
            from: (Some(0), 1),
            to: (Some(2), 3),
        },
    ),
    (
        "link",
        Call::Move {
            from: (None, 0),
            to: (None, 1),
        },
    ),
    (
        "linkat",
        Call::Move {
            from: (Some(0), 1),
            to: (Some(2), 3),
        },
    ),
    (
        "symlink",
        Call::Create {
            dirfd: None,
            path: 1,
        },
    ),
    (
        "symlinkat",
        Call::Create {
            dirfd: Some(1),
            path: 2,
        },
    ),
    // Directories the build makes are its own, like its files.
    (
        "mkdir",
        Call::Create {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "mkdirat",
        Call::Create {
            dirfd: Some(0),
            path: 1,
        },
    ),
    // Removing a repository file the build did not make hides it from
    // what a listing is checked against (the directory as it is after the
    // build): the removal counts as a use.
    (
        "unlink",
        Call::Remove {
            dirfd: None,
            path: 0,
        },
    ),
    (
        "unlinkat",
        Call::Remove {
            dirfd: Some(0),
            path: 1,
        },
    ),
    (
        "rmdir",
        Call::Remove {
            dirfd: None,
            path: 0,
        },
    ),
    ("clone", Call::Fork),
    ("clone3", Call::Fork),
    ("fork", Call::Fork),
    ("vfork", Call::Fork),
    // File operations submitted through io_uring never pass through a
    // traced system call: a process that sets one up is reported.
    ("io_uring_setup", Call::Unseen),
    // A file opened by handle has no path in the trace; looking the handle
    // up is a lookup of the path like `stat`.
    (
        "name_to_handle_at",
        Call::Stat {
            dirfd: Some(0),
            path: 1,
        },
    ),
    ("open_by_handle_at", Call::Unseen),
    // After these the paths a process uses no longer name the files they
    // name for everyone else: a repository file bind-mounted over a path in
    // the target directory is read as build output. No build needs them.
    ("unshare", Call::Unseen),
    ("setns", Call::Unseen),
    ("mount", Call::Unseen),
    ("open_tree", Call::Unseen),
    ("move_mount", Call::Unseen),
    ("chroot", Call::Unseen),
    ("pivot_root", Call::Unseen),
];

/// Why a process that made an [`Call::Unseen`] call is reported: the path
/// shown, how it used files, and the fix.
fn unseen_miss(syscall: &str) -> (String, &'static str, &'static str) {
    match syscall {
        "io_uring_setup" => (
            "(io_uring)".to_owned(),
            "hid file operations in io_uring",
            "io_uring submits file operations no system-call trace sees; the build must not use it while it is traced",
        ),
        "open_by_handle_at" => (
            "(open_by_handle_at)".to_owned(),
            "opened a file by handle",
            "a file opened by handle has no path the trace can check; the build must open files by path",
        ),
        other => (
            format!("({other})"),
            "changed its view of the file system",
            "after a mount, namespace or root change, paths no longer name the files they name outside (a repository file can be mounted over build output); the build must not do this while it is traced",
        ),
    }
}

/// What a recorded system call does; the numbers are argument positions.
#[derive(Debug, Clone, Copy)]
enum Call {
    Open {
        dirfd: Option<usize>,
        path: usize,
        flags: usize,
    },
    Create {
        dirfd: Option<usize>,
        path: usize,
    },
    Exec {
        dirfd: Option<usize>,
        path: usize,
        argv: usize,
    },
    Chdir,
    Fchdir,
    Stat {
        dirfd: Option<usize>,
        path: usize,
    },
    Move {
        from: (Option<usize>, usize),
        to: (Option<usize>, usize),
    },
    Remove {
        dirfd: Option<usize>,
        path: usize,
    },
    Fork,
    Unseen,
}

/// Tools whose metadata scans of the repository are not reads (their file
/// name, outside the repository): see the module header.
const METADATA_EXEMPT_TOOLS: &[&str] = &["cargo", "git"];

/// Files those tools read only to decide which files their scans list
/// (cargo lists a package's files through git's ignore rules): part of
/// the scan, not of what is compiled.
const SCAN_RULE_FILES: &[&str] = &[".gitignore", ".gitattributes"];

/// Why strace cannot trace a build here: it is Linux's, and may be missing.
pub const TRACER_MISSING: &str = if cfg!(target_os = "linux") {
    "strace is not installed or does not run (apt-get install strace)"
} else {
    "strace exists on Linux only (run the traced build on a Linux runner; `verify-key` without --trace, the dep-info check, works everywhere)"
};

/// The strace binary that records a build.
#[derive(Debug, Clone)]
pub struct Tracer {
    pub program: PathBuf,
}

impl Tracer {
    /// strace from `PATH`, if it is installed and runs; never on a system
    /// other than Linux, where strace does not exist.
    pub fn find() -> Option<Tracer> {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let path = std::env::var_os("PATH")?;
        let program = std::env::split_paths(&path)
            .map(|dir| dir.join("strace"))
            .find(|candidate| candidate.is_file())?;
        let works = std::process::Command::new(&program)
            .arg("-V")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        works.then_some(Tracer { program })
    }

    /// The arguments that make strace run `command` and write its trace to
    /// `log`: every process (`-f`), only the calls of [`SYSCALLS`], stopped
    /// in the kernel by a seccomp filter rather than on every call
    /// (`--seccomp-bpf`), descriptors decoded to paths (`-y`), strings in hex
    /// (`-xx`) and never truncated (`-s`), no signal or exit lines.
    pub fn args(&self, log: &Path, command: &[OsString]) -> Vec<OsString> {
        let names: Vec<&str> = SYSCALLS.iter().map(|(name, _)| *name).collect();
        let mut args: Vec<OsString> = [
            "-f",
            "--seccomp-bpf",
            "-qq",
            "-y",
            "-xx",
            "-s",
            "65536",
            "-e",
            "signal=none",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push(format!("--trace={}", names.join(",")).into());
        args.push("-o".into());
        args.push(log.into());
        args.push("--".into());
        args.extend(command.iter().cloned());
        args
    }
}

/// What the check excludes and counts, and what it found.
#[derive(Debug, Default)]
pub struct TraceReport {
    /// What was recorded: "system calls" (strace) or "fanotify events".
    pub recorded: &'static str,
    /// Only the repository's files were watched (fanotify): nothing is
    /// known of files outside it.
    pub watched_repository_only: bool,
    /// Recorded calls or events, and processes.
    pub calls: usize,
    pub processes: usize,
    /// Distinct repository files the build read, all checked.
    pub repository_files: usize,
    /// Distinct files outside the repository (registry, toolchain, system).
    pub external_files: usize,
    /// Distinct files under the target directories.
    pub output_files: usize,
    /// Distinct repository files the build wrote before it read them.
    pub created_files: usize,
    /// A few of them, repository-relative and escaped, for the log.
    pub created_examples: Vec<String>,
    pub git_files: usize,
    pub misses: Vec<TraceMiss>,
}

/// A repository file the build used that the key does not cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceMiss {
    /// Repository-relative, `/`-separated (non-UTF-8 bytes shown escaped).
    pub path: String,
    /// How it was used: "read", "executed", "listed", "examined".
    pub access: &'static str,
    /// The process: what it is, its pid.
    pub process: String,
    pub fix: String,
}

impl TraceReport {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "verify-key --trace: {} {} of {} processes and threads recorded",
            self.calls,
            if self.recorded.is_empty() {
                "system calls"
            } else {
                self.recorded
            },
            self.processes
        );
        let _ = writeln!(
            out,
            "  {} repository files used by the build, {} of them key inputs",
            self.repository_files,
            self.repository_files.saturating_sub(self.misses.len())
        );
        if self.watched_repository_only {
            let _ = writeln!(
                out,
                "  files outside the repository and under the target directories: not watched (registry and toolchain are covered by Cargo.lock and the rustc version)"
            );
        } else {
            let _ = writeln!(
                out,
                "  {} files outside the repository (registry, toolchain, system): covered by Cargo.lock and the rustc version, not hashed",
                self.external_files
            );
            let _ = writeln!(
                out,
                "  {} files under the target directories: build output",
                self.output_files
            );
        }
        let _ = writeln!(
            out,
            "  {} repository files the build wrote before reading them{}",
            self.created_files,
            if self.created_examples.is_empty() {
                String::new()
            } else {
                format!(
                    " ({}{})",
                    self.created_examples.join(", "),
                    if self.created_files > self.created_examples.len() {
                        ", …"
                    } else {
                        ""
                    }
                )
            }
        );
        if self.git_files > 0 {
            let _ = writeln!(
                out,
                "  {} git metadata files: never key inputs",
                self.git_files
            );
        }
        if self.misses.is_empty() {
            let _ = writeln!(
                out,
                "every repository file the build used is covered by the key"
            );
        } else {
            let _ = writeln!(
                out,
                "{} files the build used are NOT covered by the key:",
                self.misses.len()
            );
            for miss in &self.misses {
                let _ = writeln!(
                    out,
                    "  {}  ({} by {})\n    fix: {}",
                    miss.path, miss.access, miss.process, miss.fix
                );
            }
        }
        out
    }
}

/// How a build is traced.
#[derive(Debug, Clone)]
pub enum Backend {
    /// strace: the recorded system calls of every process of the build,
    /// metadata probes included; each recorded call stops its process.
    Strace(Tracer),
    /// fanotify: every open and exec on the repository's mounts, reported
    /// by the kernel without stopping anything (Linux, `CAP_SYS_ADMIN`).
    Fanotify,
}

impl Backend {
    /// The backend `choice` names, if it can run here: `auto` is fanotify
    /// where this process may use it, else strace when installed. Otherwise
    /// why no tracer can run, with the fix.
    pub fn choose(choice: TracerChoice) -> std::result::Result<Backend, String> {
        const NO_STRACE: &str = TRACER_MISSING;
        const NO_FANOTIFY: &str =
            "fanotify is not permitted (it needs Linux and CAP_SYS_ADMIN: run the job as root)";
        match choice {
            TracerChoice::Auto if fanotify_available() => Ok(Backend::Fanotify),
            TracerChoice::Auto => Tracer::find()
                .map(Backend::Strace)
                .ok_or_else(|| format!("{NO_STRACE}, and {NO_FANOTIFY}")),
            TracerChoice::Strace => Tracer::find()
                .map(Backend::Strace)
                .ok_or_else(|| format!("the strace tracer was chosen, but {NO_STRACE}")),
            TracerChoice::Fanotify if fanotify_available() => Ok(Backend::Fanotify),
            TracerChoice::Fanotify => Err(format!(
                "the fanotify tracer was chosen, but {NO_FANOTIFY}; or choose strace"
            )),
        }
    }

    /// What the log calls it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Strace(_) => "strace",
            Backend::Fanotify => "fanotify",
        }
    }
}

#[cfg(target_os = "linux")]
fn fanotify_available() -> bool {
    fanotify::OpenWatch::available()
}

#[cfg(not(target_os = "linux"))]
fn fanotify_available() -> bool {
    false
}

/// One traced build: a strace log in a private temporary directory and the
/// command line that writes it, or a running fanotify watch.
pub struct TraceLog {
    dir: tempfile::TempDir,
    backend: Backend,
    #[cfg(target_os = "linux")]
    watch: RefCell<Option<fanotify::OpenWatch>>,
    #[cfg(target_os = "linux")]
    collected: RefCell<Option<fanotify::Collected>>,
}

impl TraceLog {
    /// Starts a trace: for fanotify, the watch runs from here until
    /// [`TraceLog::stop`].
    pub fn new(backend: &Backend) -> Result<TraceLog> {
        let dir = tempfile::Builder::new()
            .prefix("ci-trust-trace-")
            .tempdir()
            .context("cannot create a directory for the trace")?;
        Ok(TraceLog {
            dir,
            backend: backend.clone(),
            #[cfg(target_os = "linux")]
            watch: RefCell::new(None),
            #[cfg(target_os = "linux")]
            collected: RefCell::new(None),
        })
    }

    /// Starts watching `root` but its output directories (fanotify);
    /// nothing for strace, which starts with each command. Callers first
    /// refuse output directories of the repository that already hold files
    /// ([`refuse_occupied_output_dirs`]).
    pub fn start(&self, root: &Path, output_dirs: &[PathBuf]) -> Result<()> {
        #[cfg(target_os = "linux")]
        if matches!(self.backend, Backend::Fanotify) {
            *self.watch.borrow_mut() = Some(fanotify::OpenWatch::start(root, output_dirs)?);
        }
        let _ = (root, output_dirs);
        Ok(())
    }

    /// Ends the watch (fanotify) once its events are read: call it after
    /// the build and before this process reads the repository again.
    pub fn stop(&self) -> Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(watch) = self.watch.borrow_mut().take() {
            *self.collected.borrow_mut() = Some(watch.finish()?);
        }
        Ok(())
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("strace.log")
    }

    /// The command as it runs traced: under strace, or as it is (fanotify
    /// watches from outside).
    pub fn wrap(&self, command: &[OsString]) -> (PathBuf, Vec<OsString>) {
        match &self.backend {
            Backend::Strace(tracer) => (tracer.program.clone(), tracer.args(&self.path(), command)),
            Backend::Fanotify => (PathBuf::from(&command[0]), command[1..].to_vec()),
        }
    }

    /// Checks the trace against the key inputs of `manifest`.
    pub fn check(
        &self,
        root: &Path,
        manifest: &crate::key::KeyManifest,
        output_dirs: &[PathBuf],
        start_dir: &Path,
    ) -> Result<TraceReport> {
        self.stop()?;
        let implied = crate::key::implied_dirs(manifest);
        let mut inputs: BTreeSet<&str> = manifest.inputs.iter().map(|i| i.path.as_str()).collect();
        inputs.extend(implied.iter().map(String::as_str));
        // Output directories as the kernel names them, so that they compare
        // with the resolved paths of the trace.
        let output_dirs: Vec<PathBuf> = output_dirs
            .iter()
            .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
            .collect();
        // Build output is excluded wholesale: a target directory that holds
        // the repository would exclude everything.
        if let Some(dir) = output_dirs.iter().find(|d| root.starts_with(d)) {
            bail!(
                "the target directory {} contains the repository {}, so the trace could check nothing; build into a directory of its own",
                dir.display(),
                root.display()
            );
        }
        let scope = Scope {
            root,
            output_dirs: &output_dirs,
            inputs: &inputs,
            start_dir,
        };
        match &self.backend {
            Backend::Strace(_) => {
                let log = std::fs::read(self.path()).with_context(|| {
                    format!(
                        "strace wrote no trace to {} (it failed to start: see its message above)",
                        self.path().display()
                    )
                })?;
                check(&log, &scope)
            }
            #[cfg(target_os = "linux")]
            Backend::Fanotify => {
                let collected = self.collected.borrow();
                let collected = collected
                    .as_ref()
                    .context("the fanotify watch was never started")?;
                fanotify::check(collected, &scope)
            }
            #[cfg(not(target_os = "linux"))]
            Backend::Fanotify => bail!("fanotify exists only on Linux"),
        }
    }
}

/// Refuses output directories inside the repository, other than the
/// default `target/`, that hold a file before the build: the trace counts
/// what is in them as build output, and an `[[archive]]`'s `--target-dir`
/// or the checkout's `build.target-dir` may name a directory of the
/// checkout. (`target/` is where caches restore dependencies; a file the
/// checkout commits there is an open residual.) `trusted` are directories
/// the trusted command line itself names (`verify-key --trace -- cargo
/// build --target-dir DIR`): a later build may find the earlier one's
/// output there.
pub fn refuse_occupied_output_dirs(
    root: &Path,
    output_dirs: &[PathBuf],
    trusted: &[PathBuf],
) -> Result<()> {
    let default_target = root.join("target");
    let trusted: Vec<PathBuf> = trusted
        .iter()
        .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
        .collect();
    for dir in output_dirs {
        // A `..` resolves differently once the build created the
        // directories before it (`target/x/../../data` passes for `target/`
        // here, and is `data` after the build).
        if dir
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!(
                "the build's output directory {} goes through `..`: name it without (an absolute path, or one relative to the repository root)",
                escape_controls(&dir.display().to_string())
            );
        }
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        if root.starts_with(&dir) {
            bail!(
                "the target directory {} contains the repository {}, so the trace could check nothing; build into a directory of its own",
                escape_controls(&dir.display().to_string()),
                escape_controls(&root.display().to_string())
            );
        }
        if !dir.starts_with(root) || dir.starts_with(&default_target) || trusted.contains(&dir) {
            continue;
        }
        let occupied = walkdir::WalkDir::new(&dir)
            .into_iter()
            .filter_map(std::result::Result::ok)
            .find(|entry| !entry.file_type().is_dir());
        if let Some(entry) = occupied {
            bail!(
                "the build's output directory {} is inside the repository and already holds {}: the trace would count it as build output, though it comes from the checkout or an earlier build; build into a new or empty directory (or `target/`)",
                escape_controls(&dir.display().to_string()),
                escape_controls(&entry.path().display().to_string())
            );
        }
    }
    Ok(())
}

/// The directories a traced build writes to: the target directories the
/// command names, or else the workspace's. The workspace's is left out when
/// the command builds elsewhere: what is in it was there before the build
/// (the checkout may commit files there, a `build.target-dir` may name a
/// directory of the checkout), so a read of it is a read of the
/// repository, never of build output.
pub fn build_output_dirs(
    root: &Path,
    workspace_target: &Path,
    command: &[OsString],
) -> Vec<PathBuf> {
    let named = command_target_dirs(root, command);
    if named.is_empty() {
        vec![workspace_target.to_path_buf()]
    } else {
        named
    }
}

/// The target directories the command line itself names: `--target-dir
/// DIR` and `VAR=DIR` arguments (`env CARGO_TARGET_DIR=… cargo …`), not
/// the checkout's configuration.
pub fn command_line_target_dirs(root: &Path, command: &[OsString]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for (i, arg) in command.iter().enumerate() {
        let text = arg.to_string_lossy();
        if text == "--target-dir" {
            dirs.extend(command.get(i + 1).map(|dir| root.join(dir)));
        } else if let Some(dir) = text.strip_prefix("--target-dir=") {
            dirs.push(root.join(dir));
        } else if let Some((var, dir)) = text.split_once('=')
            && [
                "CARGO_TARGET_DIR",
                "CARGO_BUILD_TARGET_DIR",
                "CARGO_BUILD_BUILD_DIR",
            ]
            .contains(&var)
            && !dir.is_empty()
        {
            dirs.push(root.join(dir));
        }
    }
    dirs
}

/// The target directory a cargo command line names with `--target-dir`, or
/// `CARGO_TARGET_DIR`: build output like the workspace's own.
pub fn command_target_dirs(root: &Path, command: &[OsString]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for (i, arg) in command.iter().enumerate() {
        let arg = arg.to_string_lossy();
        if arg == "--target-dir" {
            if let Some(dir) = command.get(i + 1) {
                dirs.push(root.join(dir));
            }
        } else if let Some(dir) = arg.strip_prefix("--target-dir=") {
            dirs.push(root.join(dir));
        }
    }
    const OUTPUT_VARS: [&str; 3] = [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_BUILD_DIR",
    ];
    for var in OUTPUT_VARS {
        if let Some(dir) = std::env::var_os(var).filter(|d| !d.is_empty()) {
            dirs.push(root.join(dir));
        }
    }
    // `env CARGO_TARGET_DIR=out cargo build`: set by the command itself.
    for arg in command {
        let arg = arg.to_string_lossy();
        if let Some((var, dir)) = arg.split_once('=')
            && OUTPUT_VARS.contains(&var)
            && !dir.is_empty()
        {
            dirs.push(root.join(dir));
        }
    }
    // `--config build.target-dir=…` / `build.build-dir`, and the build
    // directory of the configuration: output too (the precise choice is
    // `Workspace::command_output`; here every candidate is build output).
    use crate::key::cargo_config::{CargoConfig, expand_build_dir};
    let args: Vec<String> = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    let values: Vec<&str> = args
        .iter()
        .zip(args.iter().skip(1))
        .filter(|(flag, _)| *flag == "--config")
        .map(|(_, value)| value.as_str())
        .chain(args.iter().filter_map(|a| a.strip_prefix("--config=")))
        .collect();
    let configs = [
        CargoConfig::from_command_line(root, &values),
        CargoConfig::load(root),
    ];
    for config in configs.iter().flatten() {
        dirs.extend(config.target_dir(root).map(|dir| dir.path));
        dirs.extend(
            config
                .build_dir(root)
                .and_then(|dir| expand_build_dir(&dir, root).ok()),
        );
    }
    dirs
}

/// `verify-key --trace -- COMMAND…`: runs the command from `root` under
/// strace, its output passing through, and checks the trace. Exit 1 on
/// misses; an error (exit 2) when the tracer is missing, the command fails
/// or the trace is empty.
pub fn verify_command(
    root: &Path,
    policy: &crate::policy::Policy,
    manifest: &crate::key::KeyManifest,
    command: &[OsString],
    output_dirs: &[PathBuf],
    choice: TracerChoice,
) -> Result<std::process::ExitCode> {
    if command.is_empty() {
        bail!(
            "--trace needs the build command after `--`, e.g. `verify-key --trace -- cargo build --workspace`"
        );
    }
    let backend =
        Backend::choose(choice).map_err(|why| anyhow::anyhow!("--trace cannot run: {why}"))?;
    let log = TraceLog::new(&backend)?;
    let (program, args) = log.wrap(command);
    crate::gha::log(&format!(
        "verify-key --trace: running {} under {}",
        command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        backend.name()
    ));
    // The build is the checkout's code: it gets no runner control channel
    // or credential, and its output cannot issue workflow commands.
    let mut build = std::process::Command::new(&program);
    build.args(&args).current_dir(root);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(crate::gha::is_runner_control_var) {
            build.env_remove(name);
        }
    }
    log.start(root, output_dirs)?;
    let status = {
        let _paused = crate::gha::CommandsPaused::start();
        build
            .status()
            .with_context(|| format!("cannot run {}", program.display()))?
    };
    log.stop()?;
    if !status.success() {
        let traced = matches!(backend, Backend::Fanotify)
            || std::fs::metadata(log.path()).is_ok_and(|m| m.len() > 0);
        if !traced {
            bail!(
                "strace did not trace the build ({status}); nothing was checked: see strace's message above"
            );
        }
        bail!("the traced build failed ({status}); nothing was checked, fix the build first");
    }
    let report = log.check(root, manifest, output_dirs, root)?;
    eprint!("{}", crate::gha::log_block(&report.render()));
    // The key was computed before the build; a build that rewrote an input
    // (cargo updating Cargo.lock, a build script writing into src/) built
    // bytes that key does not describe.
    let after = crate::key::compute(root, policy)
        .context("cannot compute the key again after the build")?;
    let changed = changed_inputs(manifest, &after);
    for path in &changed {
        crate::gha::warning(&format!(
            "the build changed the key input {path}: the key computed before the build does not describe what was built; a build must write only to its target directory (OUT_DIR), and cargo must not rewrite Cargo.lock (--locked)"
        ));
    }
    if report.misses.is_empty() && changed.is_empty() {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    for miss in &report.misses {
        crate::gha::warning(&format!(
            "{} is {} by the build but is not a key input ({}): {}",
            miss.path, miss.access, miss.process, miss.fix
        ));
    }
    Ok(std::process::ExitCode::from(1))
}

/// Inputs added, removed or changed between two manifests of one tree.
pub fn changed_inputs(
    before: &crate::key::KeyManifest,
    after: &crate::key::KeyManifest,
) -> Vec<String> {
    let index = |m: &crate::key::KeyManifest| -> BTreeMap<String, (String, String)> {
        m.inputs
            .iter()
            .map(|i| (i.path.clone(), (i.sha256.clone(), i.kind.clone())))
            .collect()
    };
    let (before, after) = (index(before), index(after));
    // A lockfile the key hashed as absent (ci-key warned) that cargo then
    // generated is not a change of what the key says.
    let generated_lock = |path: &str| {
        path == "Cargo.lock" && before.get(path).is_some_and(|(_, kind)| kind == "absent")
    };
    let mut changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path) && !generated_lock(path))
        .map(|path| escape_controls(path))
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

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
}

/// Checks a strace log written with [`Tracer::args`].
pub fn check(log: &[u8], scope: &Scope) -> Result<TraceReport> {
    let calls = parse_log(log)?;
    let mut analysis = Analysis::new(scope);
    for call in &calls {
        analysis
            .record(call)
            .with_context(|| format!("cannot interpret the traced call `{}`", call.display()))?;
    }
    analysis.finish(calls.len())
}

/// One system call, its entry and exit lines joined.
#[derive(Debug)]
struct Traced {
    pid: u32,
    name: String,
    args: Vec<String>,
    /// `None` when the process ended inside the call.
    ret: Option<String>,
}

impl Traced {
    fn display(&self) -> String {
        let args: Vec<String> = self.args.iter().map(|a| decode_for_display(a)).collect();
        format!(
            "{} {}({}) = {}",
            self.pid,
            self.name,
            args.join(", "),
            self.ret.as_deref().unwrap_or("?")
        )
    }

    fn succeeded(&self) -> bool {
        // Unknown (the process died in the call) counts as success: the
        // check errs towards reporting.
        self.ret
            .as_deref()
            .is_none_or(|ret| !ret.starts_with('-') && !ret.starts_with('?'))
    }
}

/// Parses strace's log into calls in the order they were entered, joining
/// `<unfinished ...>` entries with their `<... resumed>` exits.
fn parse_log(log: &[u8]) -> Result<Vec<Traced>> {
    let text = std::str::from_utf8(log).context(
        "the trace is not ASCII although strace ran with -xx: it is damaged (did the build write to it?)",
    )?;
    let mut calls: Vec<Traced> = Vec::new();
    // pid -> (index of its unfinished call, the text so far)
    let mut pending: HashMap<u32, (usize, String)> = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line_no = number + 1;
        let Some((pid, rest)) = line.split_once(' ') else {
            bail!("trace line {line_no} has no process id: {line:?}");
        };
        let pid: u32 = pid
            .parse()
            .with_context(|| format!("trace line {line_no} does not start with a pid: {line:?}"))?;
        let rest = rest.trim_start();
        if rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = resumed.split_once(" resumed>") else {
                bail!("trace line {line_no}: unreadable resumption {line:?}");
            };
            // A thread that calls execve continues as the thread-group
            // leader, under the leader's pid: take that pending call.
            let key = if pending.contains_key(&pid) {
                Some(pid)
            } else if name == "execve" || name == "execveat" {
                pending
                    .iter()
                    .find(|(_, (i, _))| calls[*i].name == name)
                    .map(|(p, _)| *p)
            } else {
                None
            };
            let Some((index, head)) = key.and_then(|k| pending.remove(&k)) else {
                // The entry was never recorded (strace attached mid-call).
                continue;
            };
            let full = format!("{head}{tail}");
            let (args, ret) = split_call(&full, name)
                .with_context(|| format!("trace line {line_no}: cannot parse {full:?}"))?;
            calls[index].args = args;
            calls[index].ret = ret;
            continue;
        }
        let Some(paren) = rest.find('(') else {
            bail!("trace line {line_no}: no system call in {line:?}");
        };
        let name = &rest[..paren];
        if !SYSCALLS.iter().any(|(n, _)| *n == name) {
            continue;
        }
        if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            calls.push(Traced {
                pid,
                name: name.to_owned(),
                args: Vec::new(),
                ret: None,
            });
            pending.insert(pid, (calls.len() - 1, head.to_owned()));
            continue;
        }
        let (args, ret) = split_call(rest, name)
            .with_context(|| format!("trace line {line_no}: cannot parse {line:?}"))?;
        calls.push(Traced {
            pid,
            name: name.to_owned(),
            args,
            ret,
        });
    }
    // Calls whose process ended inside them keep what their entry printed.
    for (index, head) in pending.into_values() {
        let name = calls[index].name.clone();
        if let Ok((args, _)) = split_call(&format!("{head}) = ?"), &name) {
            calls[index].args = args;
        }
    }
    Ok(calls)
}

/// Splits `name(arg, arg, …) = ret` into its top-level arguments and return.
fn split_call(text: &str, name: &str) -> Result<(Vec<String>, Option<String>)> {
    let body = text
        .strip_prefix(name)
        .and_then(|t| t.strip_prefix('('))
        .with_context(|| format!("expected `{name}(`"))?;
    let bytes = body.as_bytes();
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut start = 0;
    let mut i = 0;
    let mut end = None;
    // Strings and decoded paths are hex (`-xx`): no delimiter hides in
    // them, so each is skipped to its closing quote or `>` at once.
    let skip_to = |from: usize, byte: u8| -> Result<usize> {
        memchr::memchr(byte, &bytes[from..])
            .map(|at| from + at + 1)
            .with_context(|| format!("unterminated {:?}", byte as char))
    };
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = skip_to(i + 1, b'"')?,
            b'<' if bytes[i + 1..].starts_with(b"\\x") || bytes.get(i + 1) == Some(&b'>') => {
                i = skip_to(i + 1, b'>')?;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b')' if depth == 0 => {
                end = Some(i);
                break;
            }
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b',' if depth == 0 => {
                args.push(body[start..i].trim().to_owned());
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    let end = end.context("unbalanced parentheses")?;
    let last = body[start..end].trim();
    if !last.is_empty() || !args.is_empty() {
        args.push(last.to_owned());
    }
    let ret = body[end + 1..]
        .trim_start()
        .strip_prefix('=')
        .map(|r| r.trim().to_owned());
    Ok((args, ret))
}

/// The bytes of a `"\x2f\x61"` string argument. A string strace cut short
/// (`"…"...`) is an error: a prefix of a path is not the path.
fn decode_string(arg: &str) -> Result<Option<Vec<u8>>> {
    let Some(inner) = arg.strip_prefix('"') else {
        return Ok(None);
    };
    let Some(end) = inner.find('"') else {
        bail!("unterminated string {arg:?}");
    };
    if inner[end + 1..].starts_with("...") {
        bail!("strace truncated the string {arg:?}; it must run with a larger -s");
    }
    decode_hex(&inner[..end]).map(Some)
}

/// The path of a `3<\x2f…>` / `AT_FDCWD<\x2f…>` descriptor, if decoded.
fn decode_fd(arg: &str) -> Result<Option<Vec<u8>>> {
    match (arg.find('<'), arg.ends_with('>')) {
        (Some(start), true) => {
            let inner = &arg[start + 1..arg.len() - 1];
            // Sockets and pipes decode as `socket:[…]`, not as hex paths.
            if inner.starts_with("\\x") {
                decode_hex(inner).map(Some)
            } else {
                Ok(None)
            }
        }
        _ => Ok(None),
    }
}

fn decode_hex(text: &str) -> Result<Vec<u8>> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 4);
    for chunk in bytes.chunks(4) {
        let byte = match chunk {
            [b'\\', b'x', high, low] => digit(*high).zip(digit(*low)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        out.push(byte.with_context(|| format!("not a -xx string: {text:?}"))?);
    }
    Ok(out)
}

/// An argument with its hex decoded, for messages.
fn decode_for_display(arg: &str) -> String {
    match decode_string(arg) {
        Ok(Some(bytes)) => format!("{:?}", OsStr::from_bytes(&bytes)),
        _ => arg.to_owned(),
    }
}

/// Who made a call: a process as the report names it.
#[derive(Debug, Clone, Default)]
struct Process {
    pid: u32,
    /// The executed file.
    exe: PathBuf,
    /// `--crate-name` of a rustc command line.
    crate_name: Option<String>,
    /// The working directory it started in (a build script's package).
    start_dir: PathBuf,
    /// Not started by the xtask (fanotify sees every process).
    outside_tree: bool,
}

impl Process {
    /// The process as the report names it, control characters escaped:
    /// executable names and `--crate-name` come from the checkout.
    fn describe(&self, scope: &Scope) -> String {
        let described = self.describe_raw(scope);
        if self.outside_tree {
            return escape_controls(&format!(
                "{described}, not started by the build: another process read the repository while the build ran; if it is no daemon of the build, stop it and trace again"
            ));
        }
        escape_controls(&described)
    }

    fn describe_raw(&self, scope: &Scope) -> String {
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

    fn is_build_script(&self) -> bool {
        self.exe
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("build-script-"))
    }
}

/// The state the trace is replayed into.
struct Analysis<'a> {
    scope: &'a Scope<'a>,
    processes: HashMap<u32, Rc<Process>>,
    /// Each thread's working directory; threads cloned with `CLONE_FS` share one.
    cwds: HashMap<u32, Rc<RefCell<PathBuf>>>,
    /// Files the build wrote (absolute, resolved), in the order seen.
    created: HashSet<OsString>,
    /// Repository files used: path -> (first access, process, created-before?).
    used: BTreeMap<PathBuf, (&'static str, Rc<Process>)>,
    external: HashSet<OsString>,
    outputs: HashSet<OsString>,
    created_used: HashSet<OsString>,
    git: HashSet<OsString>,
    /// Directories listed by processes whose listings count.
    listed: Vec<(PathBuf, Rc<Process>)>,
    /// The first process that listed the repository root.
    listed_root: Option<Rc<Process>>,
    /// (thread, directory) listed by an exempt tool (cargo's package scan).
    scanned: HashSet<(u32, PathBuf)>,
    /// Canonical forms of parent directories, resolved once.
    canonical_dirs: HashMap<OsString, PathBuf>,
    /// Repository symlinks a directory path passes through, found once.
    symlinks_on_the_way: HashMap<OsString, Vec<PathBuf>>,
    /// Processes that made a [`Call::Unseen`] call, with the call.
    unseen: Vec<(String, Rc<Process>)>,
    /// Configuration files a cargo or rustup looked for and did not find
    /// ([`is_configuration_probe`]): one added there changes the build.
    probed: Vec<(PathBuf, Rc<Process>)>,
    /// Programs born during the build (fanotify: by birth time, wherever
    /// they are): never exempt tools, whatever their name.
    new_programs: HashSet<OsString>,
    repository_opens: usize,
}

/// Whether `path` is a file cargo or rustup looks for in its working
/// directory and every ancestor ([`crate::key::cargo_config::NESTED_PROBES`]:
/// `Cargo.toml`, `Cargo.lock`, `.cargo/config[.toml]`,
/// `rust-toolchain[.toml]`). Its absence is what main's build used, and
/// a failed lookup is otherwise not checked.
fn is_configuration_probe(path: &Path) -> bool {
    crate::key::cargo_config::NESTED_PROBES
        .iter()
        .any(|(probe, _)| path.ends_with(probe))
}

impl<'a> Analysis<'a> {
    fn new(scope: &'a Scope<'a>) -> Self {
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
        }
    }

    fn process(&mut self, pid: u32) -> Rc<Process> {
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

    fn cwd(&mut self, pid: u32) -> Rc<RefCell<PathBuf>> {
        let start = self.scope.start_dir.to_path_buf();
        self.cwds
            .entry(pid)
            .or_insert_with(|| Rc::new(RefCell::new(start)))
            .clone()
    }

    /// The directory a path argument is relative to: the decoded `dirfd`,
    /// or the process's working directory. A decoded `AT_FDCWD` also
    /// corrects the tracked working directory.
    fn base(&mut self, call: &Traced, dirfd: Option<usize>) -> Result<PathBuf> {
        let cwd = self.cwd(call.pid);
        if let Some(index) = dirfd {
            let arg = call.args.get(index).map(String::as_str).unwrap_or("");
            if let Some(dir) = decode_fd(arg)? {
                let dir = PathBuf::from(OsString::from_vec(dir));
                if arg.starts_with("AT_FDCWD") {
                    *cwd.borrow_mut() = dir.clone();
                }
                return Ok(dir);
            }
            if !arg.starts_with("AT_FDCWD") {
                bail!("the directory descriptor {arg:?} was not decoded to a path");
            }
        }
        Ok(cwd.borrow().clone())
    }

    /// The absolute path of the path argument `index`, or `None` for an
    /// empty path (a call on the descriptor itself).
    fn path_arg(
        &mut self,
        call: &Traced,
        dirfd: Option<usize>,
        index: usize,
    ) -> Result<Option<PathBuf>> {
        let arg = call.args.get(index).map(String::as_str).unwrap_or("");
        let Some(bytes) = decode_string(arg)? else {
            bail!("argument {index} is not a path string");
        };
        if bytes.is_empty() {
            return Ok(None);
        }
        let path = PathBuf::from(OsString::from_vec(bytes));
        if path.is_absolute() {
            return Ok(Some(path));
        }
        Ok(Some(self.base(call, dirfd)?.join(path)))
    }

    fn record(&mut self, call: &Traced) -> Result<()> {
        let Some((_, kind)) = SYSCALLS.iter().find(|(n, _)| *n == call.name) else {
            return Ok(());
        };
        let process = self.process(call.pid);
        match *kind {
            Call::Fork => {
                let Some(child) = call.ret.as_deref().and_then(|r| r.parse::<u32>().ok()) else {
                    return Ok(());
                };
                if child == 0 {
                    return Ok(());
                }
                let cwd = self.cwd(call.pid);
                let shares_fs = call.args.iter().any(|a| a.contains("CLONE_FS"));
                let child_cwd = if shares_fs {
                    cwd
                } else {
                    Rc::new(RefCell::new(cwd.borrow().clone()))
                };
                self.cwds.insert(child, child_cwd);
                self.processes.insert(
                    child,
                    Rc::new(Process {
                        pid: child,
                        ..(*process).clone()
                    }),
                );
            }
            Call::Chdir => {
                if call.succeeded() {
                    if let Some(dir) = self.path_arg(call, None, 0)? {
                        let dir = self.resolve(&dir, &process);
                        *self.cwd(call.pid).borrow_mut() = dir;
                    }
                }
            }
            Call::Fchdir => {
                if call.succeeded() {
                    let arg = call.args.first().map(String::as_str).unwrap_or("");
                    let Some(dir) = decode_fd(arg)? else {
                        bail!("fchdir's descriptor {arg:?} was not decoded to a path");
                    };
                    *self.cwd(call.pid).borrow_mut() = PathBuf::from(OsString::from_vec(dir));
                }
            }
            Call::Exec { dirfd, path, argv } => {
                let Some(file) = self.path_arg(call, dirfd, path)? else {
                    return Ok(());
                };
                if !call.succeeded() {
                    return Ok(());
                }
                let file = self.resolve(&file, &process);
                let argv = argv_strings(call.args.get(argv).map(String::as_str).unwrap_or(""));
                let crate_name = argv
                    .iter()
                    .position(|a| a == "--crate-name")
                    .and_then(|i| argv.get(i + 1).cloned());
                let start_dir = self.cwd(call.pid).borrow().clone();
                let new = Rc::new(Process {
                    pid: call.pid,
                    exe: file.clone(),
                    crate_name,
                    start_dir,
                    outside_tree: false,
                });
                self.processes.insert(call.pid, new.clone());
                self.use_file(&file, "executed", &new);
            }
            Call::Open { dirfd, path, flags } => {
                let Some(requested) = self.path_arg(call, dirfd, path)? else {
                    return Ok(());
                };
                if !call.succeeded() {
                    let absent = call.ret.as_deref().is_some_and(|r| r.contains("ENOENT"));
                    if absent && is_configuration_probe(&requested) {
                        let requested = self.resolve(&requested, &process);
                        self.probed.push((requested, process));
                    }
                    return Ok(());
                }
                let flags = call.args.get(flags).map(String::as_str).unwrap_or("");
                let writes = flags.contains("O_WRONLY") || flags.contains("O_RDWR");
                let reads = !flags.contains("O_WRONLY") && !flags.contains("O_PATH");
                let replaces = writes && (flags.contains("O_TRUNC") || flags.contains("O_EXCL"));
                let opened = call
                    .ret
                    .as_deref()
                    .map(decode_fd)
                    .transpose()?
                    .flatten()
                    .map(|p| PathBuf::from(OsString::from_vec(p)));
                let requested = self.resolve(&requested, &process);
                let mut paths = vec![requested.clone()];
                if let Some(opened) = opened {
                    if opened != requested {
                        paths.push(opened);
                    }
                }
                for file in &paths {
                    if replaces {
                        self.created.insert(file.clone().into_os_string());
                    } else if reads
                        && (flags.contains("O_DIRECTORY")
                            || (is_under(
                                file.as_os_str().as_bytes(),
                                self.scope.root.as_os_str().as_bytes(),
                            ) && file.is_dir()))
                    {
                        // A directory opened without `O_DIRECTORY` lists
                        // all the same (`getdents` on the descriptor).
                        if !self.metadata_exempt(&process) {
                            self.listed.push((file.clone(), process.clone()));
                        } else {
                            self.scanned.insert((call.pid, file.clone()));
                        }
                    } else if reads && self.is_scan_rule(file, &process) {
                        continue;
                    } else if reads {
                        self.use_file(file, "read", &process);
                    } else if flags.contains("O_PATH") && !self.metadata_exempt(&process) {
                        self.use_file(file, "examined", &process);
                    }
                    if writes && flags.contains("O_CREAT") {
                        self.created.insert(file.clone().into_os_string());
                    }
                }
            }
            Call::Create { dirfd, path } => {
                if let Some(file) = self.path_arg(call, dirfd, path)? {
                    let file = self.resolve(&file, &process);
                    self.created.insert(file.into_os_string());
                }
            }
            Call::Stat { dirfd, path } => {
                if !call.succeeded() {
                    // Cargo tests for its manifest and configuration with
                    // `stat`: a failed one is a probe like a failed open.
                    let absent = call.ret.as_deref().is_some_and(|r| r.contains("ENOENT"));
                    if !absent {
                        return Ok(());
                    }
                    let probe = match self.path_arg(call, dirfd, path)? {
                        Some(file) if is_configuration_probe(&file) => file,
                        _ => return Ok(()),
                    };
                    let file = self.resolve(&probe, &process);
                    // Cargo's scan of a package it lists tests each
                    // subdirectory for a manifest (a package of its own);
                    // that is no lookup from a working directory.
                    let scan = file.ends_with("Cargo.toml")
                        && file.parent().and_then(Path::parent).is_some_and(|listed| {
                            self.scanned.contains(&(call.pid, listed.to_path_buf()))
                        });
                    if !scan {
                        self.probed.push((file, process));
                    }
                    return Ok(());
                }
                if self.metadata_exempt(&process) {
                    return Ok(());
                }
                if let Some(file) = self.path_arg(call, dirfd, path)? {
                    let file = self.resolve(&file, &process);
                    self.use_file(&file, "examined", &process);
                }
            }
            Call::Move { from, to } => {
                let source = self.path_arg(call, from.0, from.1)?;
                let target = self.path_arg(call, to.0, to.1)?;
                if !call.succeeded() {
                    return Ok(());
                }
                if let Some(source) = source {
                    let source = self.resolve(&source, &process);
                    self.use_file(&source, "moved", &process);
                }
                if let Some(target) = target {
                    let target = self.resolve(&target, &process);
                    self.created.insert(target.into_os_string());
                }
            }
            Call::Remove { dirfd, path } => {
                if !call.succeeded() {
                    return Ok(());
                }
                if let Some(file) = self.path_arg(call, dirfd, path)? {
                    let file = self.resolve(&file, &process);
                    self.use_file(&file, "removed", &process);
                }
            }
            // A failed call hides nothing.
            Call::Unseen => {
                if call.succeeded() {
                    self.unseen.push((call.name.clone(), process));
                }
            }
        }
        Ok(())
    }

    /// Cargo's and git's metadata scans; see [`METADATA_EXEMPT_TOOLS`].
    fn metadata_exempt(&self, process: &Process) -> bool {
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
    fn is_scan_rule(&self, file: &Path, process: &Process) -> bool {
        file.file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|name| SCAN_RULE_FILES.contains(&name))
            && self.metadata_exempt(process)
    }

    /// `path` with its directories resolved as the kernel resolved them
    /// (symlinks, `..`); the last component is kept, so a symlink stays
    /// the link. A symlinked directory of the repository on the way is
    /// used too: its target text chose the file.
    fn resolve(&mut self, path: &Path, process: &Rc<Process>) -> PathBuf {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return crate::key::workspace::normalize(path);
        };
        for link in self.symlinked_dirs(parent) {
            self.use_file(&link, "followed", process);
        }
        if path.ends_with("..") || path.ends_with(".") {
            return std::fs::canonicalize(path)
                .unwrap_or_else(|_| crate::key::workspace::normalize(path));
        }
        // Keyed by the bytes: hashing a path component by component is slow.
        let parent = match self.canonical_dirs.get(parent.as_os_str()) {
            Some(dir) => dir.clone(),
            None => {
                let dir = std::fs::canonicalize(parent)
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
    fn symlinked_dirs(&mut self, dir: &Path) -> Vec<PathBuf> {
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
                if prefix.is_symlink() {
                    links.push(prefix.clone());
                }
            }
        }
        self.symlinks_on_the_way
            .insert(dir.as_os_str().to_owned(), links.clone());
        links
    }

    /// Sorts a used file into a category; repository files are kept for the check.
    fn use_file(&mut self, file: &Path, access: &'static str, process: &Rc<Process>) {
        self.use_file_as(file, access, process, true);
    }

    /// [`Self::use_file`] of a file known to have been in the repository
    /// before the build (`may_be_created` false): a file the build later
    /// created under the same name does not exempt it.
    fn use_file_as(
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
            let Ok(meta) = std::fs::symlink_metadata(dir) else {
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

    fn finish(mut self, calls: usize) -> Result<TraceReport> {
        if calls == 0 || self.processes.is_empty() {
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
            let Ok(entries) = std::fs::read_dir(&dir) else {
                // Gone by now (removed or moved by the build): its names
                // cannot be checked, so the directory itself is the miss
                // (unless the build made it).
                self.use_file(&dir, "listed", &process);
                continue;
            };
            self.repository_opens += 1;
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| !t.is_dir()) {
                    self.use_file(&entry.path(), "listed", &process);
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
        if self.repository_opens == 0 {
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
            let is_dir = std::fs::metadata(file).is_ok_and(|m| m.is_dir()) && !file.is_symlink();
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
        Ok(report)
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`): file names
/// are the pull request's to choose, and a newline in one must not start
/// a line of its own in the log (a workflow command).
fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
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
fn is_under(bytes: &[u8], dir: &[u8]) -> bool {
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

/// The strings of an `execve` argv array `["\x..", …]`.
fn argv_strings(arg: &str) -> Vec<String> {
    let inner = arg
        .trim()
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or("");
    inner
        .split(", ")
        .filter_map(|item| decode_string(item.trim()).ok().flatten())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> String {
        text.bytes().map(|b| format!("\\x{b:02x}")).collect()
    }

    #[test]
    fn calls_split_into_arguments_and_return() {
        let line = format!(
            "openat(AT_FDCWD<{}>, \"{}\", O_RDONLY|O_CLOEXEC) = 3<{}>",
            hex("/r"),
            hex("a, b)\"\n"),
            hex("/r/a, b)\"\n")
        );
        let (args, ret) = split_call(&line, "openat").unwrap();
        assert_eq!(args.len(), 3);
        assert_eq!(decode_string(&args[1]).unwrap().unwrap(), b"a, b)\"\n");
        assert_eq!(decode_fd(&args[0]).unwrap().unwrap(), b"/r");
        assert_eq!(decode_fd(&ret.unwrap()).unwrap().unwrap(), b"/r/a, b)\"\n");
    }

    #[test]
    fn a_truncated_string_is_an_error_not_a_prefix() {
        let arg = format!("\"{}\"...", hex("/r/some/long"));
        assert!(decode_string(&arg).is_err());
    }

    #[test]
    fn unfinished_calls_are_joined_with_their_resumption() {
        let log = format!(
            "7 openat(AT_FDCWD<{d}>, \"{p}\", O_RDONLY <unfinished ...>\n8 chdir(\"{d}\") = 0\n7 <... openat resumed>) = 3<{f}>\n",
            d = hex("/r"),
            p = hex("x"),
            f = hex("/r/x")
        );
        let calls = parse_log(log.as_bytes()).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "openat");
        assert_eq!(calls[0].args.len(), 3);
        assert_eq!(
            decode_fd(calls[0].ret.as_ref().unwrap()).unwrap().unwrap(),
            b"/r/x"
        );
        assert_eq!(calls[1].name, "chdir");
    }

    #[test]
    fn a_damaged_line_is_an_error() {
        assert!(parse_log(b"12 openat(AT_FDCWD, \"\\x2f\"\n").is_err());
        assert!(parse_log(b"openat(AT_FDCWD) = 0\n").is_err());
    }

    #[test]
    fn working_directories_follow_chdir_and_are_copied_at_fork() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for file in ["a/x.txt", "b/y.txt", "in.txt", "rt/z.txt"] {
            std::fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            std::fs::write(root.join(file), "x").unwrap();
        }
        let r = root.to_str().unwrap();
        let h = |p: &str| hex(p);
        let log = [
            format!(
                "1 execve(\"{}\", [\"{}\"], 0x1 /* 1 var */) = 0",
                h("/usr/bin/tool"),
                h("tool")
            ),
            format!("1 chdir(\"{}\") = 0", h("a")),
            // The child gets the parent's directory as it is at the fork…
            "1 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD) = 2".to_owned(),
            // …and keeps it when the parent moves on.
            format!("1 chdir(\"{}\") = 0", h(&format!("{r}/b"))),
            format!(
                "2 open(\"{}\", O_RDONLY) = 3<{}>",
                h("x.txt"),
                h(&format!("{r}/a/x.txt"))
            ),
            format!(
                "1 open(\"{}\", O_RDONLY) = 3<{}>",
                h("y.txt"),
                h(&format!("{r}/b/y.txt"))
            ),
            // A thread sharing its directory (CLONE_FS) follows a chdir of the other.
            "1 clone3({flags=CLONE_VM|CLONE_FS|CLONE_THREAD, exit_signal=0}, 88) = 3".to_owned(),
            format!("1 chdir(\"{}\") = 0", h(&format!("{r}/rt"))),
            format!(
                "3 stat(\"{}\", {{st_mode=S_IFREG|0644, st_size=1, ...}}) = 0",
                h("z.txt")
            ),
            // Written, then read: the build's own bytes.
            format!(
                "1 openat(AT_FDCWD<{}>, \"{}\", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4<{}>",
                h(r),
                h("w.txt"),
                h(&format!("{r}/w.txt"))
            ),
            format!(
                "1 openat(AT_FDCWD<{}>, \"{}\", O_RDONLY) = 4<{}>",
                h(r),
                h("w.txt"),
                h(&format!("{r}/w.txt"))
            ),
            format!(
                "1 openat(AT_FDCWD<{}>, \"{}\", O_RDONLY) = 4<{}>",
                h(r),
                h("in.txt"),
                h(&format!("{r}/in.txt"))
            ),
            format!(
                "1 openat(AT_FDCWD<{}>, \"{}\", O_RDONLY) = -1 ENOENT (No such file or directory)",
                h(r),
                h("absent.txt")
            ),
            "1 io_uring_setup(8, {flags=0}) = 5".to_owned(),
            "1 unshare(CLONE_NEWNS|CLONE_NEWUSER) = 0".to_owned(),
            "1 mount(\"none\", \"/\", NULL, MS_REC|MS_PRIVATE, NULL) = -1 EPERM (Operation not permitted)".to_owned(),
        ]
        .join("\n");
        let inputs = BTreeSet::from(["in.txt"]);
        let report = check(
            log.as_bytes(),
            &Scope {
                root: &root,
                output_dirs: &[],
                inputs: &inputs,
                start_dir: &root,
            },
        )
        .unwrap();
        let missed: Vec<(&str, &str)> = report
            .misses
            .iter()
            .map(|m| (m.path.as_str(), m.access))
            .collect();
        assert_eq!(
            missed,
            vec![
                ("a/x.txt", "read"),
                ("b/y.txt", "read"),
                ("rt/z.txt", "examined"),
                ("(io_uring)", "hid file operations in io_uring"),
                ("(unshare)", "changed its view of the file system"),
            ],
            "{}",
            report.render()
        );
        assert_eq!(report.created_files, 1);
    }

    #[test]
    #[cfg(unix)]
    fn a_symlinked_directory_on_the_way_is_used_too() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::fs::write(root.join("real/f.txt"), "x").unwrap();
        std::os::unix::fs::symlink("real", root.join("link")).unwrap();
        let r = root.to_str().unwrap();
        let log = format!(
            "1 execve(\"{}\", [\"{}\"], 0x1 /* 1 var */) = 0\n1 openat(AT_FDCWD<{}>, \"{}\", O_RDONLY) = 3<{}>\n",
            hex("/usr/bin/tool"),
            hex("tool"),
            hex(r),
            hex("link/f.txt"),
            hex(&format!("{r}/real/f.txt"))
        );
        let check_with = |inputs: &[&str]| {
            let inputs: BTreeSet<&str> = inputs.iter().copied().collect();
            let report = check(
                log.as_bytes(),
                &Scope {
                    root: &root,
                    output_dirs: &[],
                    inputs: &inputs,
                    start_dir: &root,
                },
            )
            .unwrap();
            report
                .misses
                .iter()
                .map(|m| format!("{} {}", m.path, m.access))
                .collect::<Vec<_>>()
        };
        // The link's target text chose the file: it is used as well.
        assert_eq!(check_with(&["real/f.txt"]), vec!["link followed"]);
        assert!(check_with(&["real/f.txt", "link"]).is_empty());
    }

    #[test]
    fn cargo_scans_are_exempt_and_the_same_reads_by_a_build_script_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("p/kernels")).unwrap();
        std::fs::write(root.join(".gitignore"), "target\n").unwrap();
        std::fs::write(root.join("p/kernels/a.cu"), "x").unwrap();
        std::fs::write(root.join("p/notes.txt"), "x").unwrap();
        let r = root.to_str().unwrap();
        let script = format!("{r}/target/debug/build/p-1/build-script-build");
        let mut log = String::new();
        for (pid, exe) in [(1, "/opt/rust/bin/cargo"), (2, script.as_str())] {
            let _ = writeln!(
                log,
                "{pid} execve(\"{}\", [\"{}\"], 0x1 /* 1 var */) = 0",
                hex(exe),
                hex("x")
            );
            let _ = writeln!(
                log,
                "{pid} openat(AT_FDCWD<{}>, \"{}\", O_RDONLY|O_CLOEXEC) = 3<{}>",
                hex(r),
                hex(".gitignore"),
                hex(&format!("{r}/.gitignore"))
            );
            let _ = writeln!(
                log,
                "{pid} openat(AT_FDCWD<{}>, \"{}\", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 3<{}>",
                hex(r),
                hex("p/kernels"),
                hex(&format!("{r}/p/kernels"))
            );
            let _ = writeln!(
                log,
                "{pid} statx(AT_FDCWD<{}>, \"{}\", AT_STATX_SYNC_AS_STAT, STATX_ALL, {{stx_mode=S_IFREG|0644}}) = 0",
                hex(r),
                hex("p/notes.txt")
            );
        }
        let inputs = BTreeSet::new();
        let report = check(
            log.as_bytes(),
            &Scope {
                root: &root,
                output_dirs: &[root.join("target")],
                inputs: &inputs,
                start_dir: &root,
            },
        )
        .unwrap();
        let missed: Vec<String> = report
            .misses
            .iter()
            .map(|m| format!("{} {} by {}", m.path, m.access, m.process))
            .collect();
        assert_eq!(
            missed,
            vec![
                ".gitignore read by build script of p (pid 2)",
                "p/kernels listed by build script of p (pid 2)",
                "p/kernels/a.cu listed by build script of p (pid 2)",
                "p/notes.txt examined by build script of p (pid 2)",
            ],
            "{}",
            report.render()
        );
    }
}
