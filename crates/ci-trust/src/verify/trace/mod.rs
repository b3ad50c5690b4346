//! `verify-key --trace`: runs a build under strace and proves that every file
//! of the repository any process of the build opened, executed or examined is
//! a key input.
//!
//! This module is split by job: [`backend`] chooses the tracer and holds one
//! traced build ([`TraceLog`]); [`strace`] owns strace's command line (the
//! one registry of traced system calls) and the parser of its output;
//! `fanotify` is the other tracer; [`analysis`] replays either tracer's
//! record and checks every repository file used against the key's inputs;
//! [`report`] renders the result; [`output_dirs`] says which directories a
//! traced command writes to; [`command`] is `verify-key --trace -- BUILD`;
//! [`diagnose`] explains a build that failed in the key tree.
//! None of them computes keys, runs builds of its own or reads dep-info
//! files (that is [`super::check`]'s job).
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
//!   directory depends on it as much as code that reads it. Cargo's and
//!   git's own metadata scans (cargo's freshness
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

mod analysis;
mod backend;
mod command;
mod diagnose;
#[cfg(target_os = "linux")]
mod fanotify;
mod output_dirs;
/// gpu-archive keeps and kills what its fresh build leaves running as the
/// fanotify watch does (`archive/mod.rs`).
#[cfg(target_os = "linux")]
pub(crate) use fanotify::{become_subreaper, kill_descendants};
mod report;
mod strace;

pub use analysis::Scope;
#[cfg(target_os = "linux")]
use analysis::{Analysis, Process};
pub use backend::{Backend, TraceLog};
pub use command::{changed_inputs, verify_command};
pub use diagnose::key_tree_failure;
pub use output_dirs::{
    build_output_dirs, command_line_target_dirs, command_target_dirs, refuse_occupied_output_dirs,
};
use report::escape_controls;
pub use report::{AbsentInTree, TraceMiss, TraceReport};
pub use strace::{TRACER_MISSING, Tracer, check};
