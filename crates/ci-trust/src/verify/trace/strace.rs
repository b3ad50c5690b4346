//! strace, one of the two tracers: finding it, its command line (the one
//! registry of traced system calls, [`SYSCALLS`]), the parser of its
//! `-f -y -xx` output, and the replay of each call into the shared
//! [`Analysis`] (working directories, process names, what each call does to
//! a file). Must not: decide what a miss is (`analysis.rs`).

#[cfg(not(unix))]
use super::not_unix::{OsStrExt, OsStringExt};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
#[cfg(unix)]
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{Context, Result, bail};

use super::analysis::{Analysis, Process, Scope, is_configuration_probe, is_under};
use super::report::TraceReport;

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
pub(super) fn unseen_miss(syscall: &str) -> (String, &'static str, &'static str) {
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

/// Checks a strace log written with [`Tracer::args`].
pub fn check(log: &[u8], scope: &Scope) -> Result<TraceReport> {
    let calls = parse_log(log)?;
    let mut analysis = Analysis::new(scope);
    for call in &calls {
        analysis
            .record(call)
            .with_context(|| format!("cannot interpret the traced call `{}`", call.display()))?;
    }
    let mut report = analysis.finish(calls.len())?;
    if scope.view.is_some() {
        report.key_tree = Some(
            "the build ran in the key tree, mounted at the repository's path: the repository files here are the tree's".to_owned(),
        );
    }
    Ok(report)
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

impl Analysis<'_> {
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
                    if not_found(call) {
                        let file = self.resolve(&file, &process);
                        self.lookup_failed(file, process);
                    }
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
                        self.probed.push((requested, process.clone()));
                    }
                    if not_found(call) {
                        let requested = self.resolve(&requested, &process);
                        self.lookup_failed(requested, process);
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
                            ) && self.disk(file).is_dir()))
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
                    if !not_found(call) {
                        return Ok(());
                    }
                    let Some(requested) = self.path_arg(call, dirfd, path)? else {
                        return Ok(());
                    };
                    let file = self.resolve(&requested, &process);
                    // Cargo tests for its manifest and configuration with
                    // `stat`: a failed one is a probe like a failed open.
                    let absent = call.ret.as_deref().is_some_and(|r| r.contains("ENOENT"));
                    // Cargo's scan of a package it lists tests each
                    // subdirectory for a manifest (a package of its own);
                    // that is no lookup from a working directory.
                    let scan = file.ends_with("Cargo.toml")
                        && file.parent().and_then(Path::parent).is_some_and(|listed| {
                            self.scanned.contains(&(call.pid, listed.to_path_buf()))
                        });
                    if absent && is_configuration_probe(&requested) && !scan {
                        self.probed.push((file.clone(), process.clone()));
                    }
                    // In the key tree, any failed lookup may name a file the
                    // checkout has and the key lacks.
                    self.lookup_failed(file, process);
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
}

/// Whether a call failed because its path does not exist (`ENOENT`, or
/// `ENOTDIR`: a component is a file).
fn not_found(call: &Traced) -> bool {
    call.ret
        .as_deref()
        .is_some_and(|ret| ret.contains("ENOENT") || ret.contains("ENOTDIR"))
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
    use std::collections::BTreeSet;
    use std::fmt::Write as _;

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
                view: None,
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
                    view: None,
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
                view: None,
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
