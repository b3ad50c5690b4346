//! `cargo xtask bench-trace`: what tracing a fresh build costs. Times, side
//! by side, the same clean build untraced, under the strace command line
//! `verify-key --trace` uses (`--seccomp-bpf`: only the recorded calls
//! stop), the same without the metadata calls (the anchor's list), under
//! plain `strace -f` with the full list (every call stops), and watched by
//! fanotify (where permitted), then the check of one trace of each kind.
//!
//! The build is a generated workspace (the `bench-key` generator, with a
//! build script in every package) or, with `--this-repository`, this
//! repository's `cargo build --workspace --all-targets`. Contenders run in
//! turn within each round so that load changes hit all of them alike; each
//! build starts from an empty target directory. Nothing here touches the
//! repository being measured.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::key::{Shape, generate, workspace_dir};
use crate::flags;
use ci_trust::policy::TracerChoice;
use ci_trust::verify::trace::{Backend, TraceLog, Tracer};

/// How a contender runs the build.
#[derive(Clone, Copy)]
enum Mode {
    Untraced,
    Seccomp,
    SeccompOpensOnly,
    PlainStrace,
    Fanotify,
}

const CONTENDERS: &[(&str, Mode)] = &[
    ("cargo build (untraced)", Mode::Untraced),
    ("strace --seccomp-bpf, full list", Mode::Seccomp),
    ("same, opens and execs only", Mode::SeccompOpensOnly),
    ("strace -f, no seccomp filter", Mode::PlainStrace),
    ("fanotify (auto, where permitted)", Mode::Fanotify),
];

impl flags::BenchTrace {
    pub fn run(&self) -> Result<ExitCode> {
        let tracer = Tracer::find()
            .with_context(|| format!("bench-trace: {}", ci_trust::verify::trace::TRACER_MISSING))?;
        let strace = Backend::Strace(tracer);
        // fanotify needs CAP_SYS_ADMIN: without it, its row says so.
        let fanotify = Backend::choose(TracerChoice::Fanotify)
            .map_err(|why| eprintln!("fanotify contender skipped: {why}"))
            .ok();
        let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
        let (workspace, build_args) = if let Some(root) = &self.common.root {
            let root = std::fs::canonicalize(root).with_context(|| {
                format!("--root {}: pass an existing repository", root.display())
            })?;
            (
                root,
                vec![
                    "build",
                    "--workspace",
                    "--all-targets",
                    "--offline",
                    "--quiet",
                ],
            )
        } else {
            let workspace = workspace_dir(self.workdir.as_deref(), scratch.path())?;
            let shape = Shape {
                packages: 12,
                modules_per_package: 40,
                data_files_per_package: 0,
                megabytes: 12,
            };
            let (files, bytes) = generate(&workspace, &shape)?;
            add_build_scripts(&workspace, shape.packages)?;
            eprintln!(
                "workspace: {} ({files} files, {:.1} MB, a build script per package)",
                workspace.display(),
                bytes as f64 / 1e6
            );
            (
                workspace,
                vec!["build", "--workspace", "--offline", "--quiet"],
            )
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let target = scratch.path().join("bench-target");
        let mut command: Vec<OsString> = vec![cargo];
        command.extend(build_args.iter().map(OsString::from));
        command.push("--target-dir".into());
        command.push(target.clone().into());

        // The workspace's own target directory is build output too: the
        // watch does not walk it.
        let mut watch_outputs = vec![target.clone()];
        if let Ok(loaded) = ci_trust::key::workspace::load(&workspace) {
            watch_outputs.push(loaded.target_dir);
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); CONTENDERS.len()];
        let mut cpu_times: Vec<Vec<Duration>> = vec![Vec::new(); CONTENDERS.len()];
        let mut last_log = None;
        let mut last_fanotify = None;
        // Round 0 warms the page cache and is not counted.
        for round in 0..=self.runs.max(1) {
            for (index, (name, mode)) in CONTENDERS.iter().enumerate() {
                if self.fanotify_only && !matches!(mode, Mode::Untraced | Mode::Fanotify) {
                    continue;
                }
                let backend = match mode {
                    Mode::Fanotify => match &fanotify {
                        Some(backend) => backend,
                        None => continue,
                    },
                    _ => &strace,
                };
                if target.exists() {
                    std::fs::remove_dir_all(&target)
                        .with_context(|| format!("cannot clear {}", target.display()))?;
                }
                let log = TraceLog::new(backend)?;
                let (program, args) = match mode {
                    Mode::Untraced => (PathBuf::from(&command[0]), command[1..].to_vec()),
                    Mode::Seccomp | Mode::Fanotify => log.wrap(&command),
                    // The anchor's call list: what the metadata calls cost.
                    Mode::SeccompOpensOnly => {
                        let (program, mut args) = log.wrap(&command);
                        for arg in &mut args {
                            if arg.to_string_lossy().starts_with("--trace=") {
                                *arg = "--trace=open,openat,openat2,execve,execveat,chdir,fchdir,clone,clone3,fork,vfork".into();
                            }
                        }
                        (program, args)
                    }
                    Mode::PlainStrace => {
                        let (program, mut args) = log.wrap(&command);
                        args.retain(|a| a != "--seccomp-bpf");
                        (program, args)
                    }
                };
                // fanotify's collector runs in this process: its time is
                // counted with the children's.
                let cpu_before = children_cpu_time() + own_cpu_time();
                let start = Instant::now();
                if matches!(mode, Mode::Fanotify) {
                    log.start(&workspace, &watch_outputs)?;
                }
                let status = std::process::Command::new(&program)
                    .args(&args)
                    .current_dir(&workspace)
                    .status()
                    .with_context(|| format!("cannot run {}", program.display()))?;
                log.stop()?;
                let elapsed = start.elapsed();
                let cpu = (children_cpu_time() + own_cpu_time()).saturating_sub(cpu_before);
                if !status.success() {
                    bail!("the benchmark build ({name}) failed: {status}");
                }
                eprintln!(
                    "round {round}: {name}: {:.2} s wall, {:.2} s CPU",
                    elapsed.as_secs_f64(),
                    cpu.as_secs_f64()
                );
                if round > 0 {
                    times[index].push(elapsed);
                    cpu_times[index].push(cpu);
                }
                match mode {
                    Mode::Seccomp => last_log = Some(log),
                    Mode::Fanotify => last_fanotify = Some(log),
                    _ => {}
                }
            }
        }
        let trace_bytes = last_log.as_ref().map_or(0, |log| {
            std::fs::metadata(log.path()).map_or(0, |m| m.len())
        });
        // The check of the last seccomp trace, with an empty key: it
        // examines every access (all repository files become misses).
        let manifest = ci_trust::key::KeyManifest {
            key: String::new(),
            artifact_name: String::new(),
            components: vec![],
            inputs: vec![],
            warnings: vec![],
            stats: Default::default(),
        };
        let root = std::fs::canonicalize(&workspace)?;

        let median = |t: &Vec<Duration>| {
            let mut t = t.clone();
            t.sort();
            t[t.len() / 2]
        };
        let base = median(&times[0]).as_secs_f64();
        let cpu_base = median(&cpu_times[0]).as_secs_f64();
        println!(
            "fresh build of {}, {} runs each (medians):",
            workspace.display(),
            self.runs.max(1)
        );
        println!(
            "{:<34} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "contender", "wall s", "min s", "vs base", "CPU s", "vs base"
        );
        for ((name, _), (t, c)) in CONTENDERS.iter().zip(times.iter().zip(&cpu_times)) {
            if t.is_empty() {
                println!("{name:<34} {:>9}", "not run");
                continue;
            }
            let m = median(t).as_secs_f64();
            let min = t.iter().min().expect("runs").as_secs_f64();
            let cpu = median(c).as_secs_f64();
            println!(
                "{name:<34} {m:>9.2} {min:>9.2} {:>+8.1}% {cpu:>9.2} {:>+8.1}%",
                (m / base - 1.0) * 100.0,
                (cpu / cpu_base - 1.0) * 100.0
            );
        }
        if let Some(log) = last_log {
            let start = Instant::now();
            let report = log.check(&root, &manifest, std::slice::from_ref(&target), &root)?;
            println!(
                "check of one strace trace: {:.3} s ({} calls, {:.1} MB of trace, {} processes)",
                start.elapsed().as_secs_f64(),
                report.calls,
                trace_bytes as f64 / 1e6,
                report.processes
            );
        }
        if let Some(log) = last_fanotify {
            let start = Instant::now();
            let report = log.check(&root, &manifest, std::slice::from_ref(&target), &root)?;
            println!(
                "check of one fanotify watch: {:.3} s ({} events, {} repository files)",
                start.elapsed().as_secs_f64(),
                report.calls,
                report.repository_files
            );
        }
        println!(
            "load average at the end: {}",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        Ok(ExitCode::SUCCESS)
    }
}

/// Off Unix there is no strace, and `run` stops at [`Tracer::find`] before
/// measuring anything: nothing ever reads these zeros.
#[cfg(not(unix))]
fn own_cpu_time() -> Duration {
    Duration::ZERO
}
#[cfg(not(unix))]
pub(super) fn children_cpu_time() -> Duration {
    Duration::ZERO
}

/// User plus system time of this process so far (fanotify's collector).
#[cfg(unix)]
fn own_cpu_time() -> Duration {
    rusage_time(libc::RUSAGE_SELF)
}

/// User plus system time of every waited-for child so far: the build's
/// processes and, for traced runs, strace's own work. Unlike wall time it
/// barely moves when other jobs load the machine.
#[cfg(unix)]
pub(super) fn children_cpu_time() -> Duration {
    rusage_time(libc::RUSAGE_CHILDREN)
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn rusage_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_usec).unwrap_or(0) * 1000,
        )
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// A build script in each generated package: a process per package, as in
/// real GPU workspaces, which is what tracing pays for.
pub(super) fn add_build_scripts(workspace: &Path, packages: usize) -> Result<()> {
    for p in 0..packages {
        let path = workspace.join(format!("crates/c{p:03}/build.rs"));
        std::fs::write(
            &path,
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let _ = std::fs::read_to_string(\"Cargo.toml\");\n}\n",
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
