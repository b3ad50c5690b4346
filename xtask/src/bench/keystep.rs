//! `cargo xtask bench-keystep`: the key step of a cold CI job, with and
//! without the prebuilt xtask.
//!
//! (a) is what a job without the prebuilt binary does: compile the xtask
//! from scratch (a fresh `CARGO_TARGET_DIR`, the cargo registry warm, as
//! after `rust-cache` or on a runner with a vendored registry), then run
//! `ci-key`. (b) restores the binary a publisher saved, the xtask built
//! with `--release` (here: a tar in a cache directory, unpacked into a
//! fresh directory, as `actions/cache` does), checks it (`--version`), then
//! runs `ci-key`. The cold builds run `--cold-runs` pairs (minutes each),
//! (a) and (c) in turn; (b) runs `--runs` times; medians are shown, the cold
//! builds' CPU time (user + system of cargo and rustc, what the load
//! distorts least) beside their wall time.
//! (c) is what a host that adopted ci-trust compiles cold: the thin xtask
//! `init-ci` writes (ci-trust by path from this checkout, its own workspace
//! and lockfile), with the same warm registry; the copy `init-ci` made before
//! compiled the crates of (a).
//! The machine's load average is printed with the figures, since other
//! compilations distort (a).

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

use crate::flags;

impl flags::BenchKeystep {
    pub fn run(&self) -> Result<ExitCode> {
        let root = self.common.root()?;
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the xtask lives in a repository")?
            .to_path_buf();
        let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
        let sh = Shell::new()?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        eprintln!("load average before: {}", load_average());

        // (a) compile from scratch and (c) the host's thin xtask, in turn:
        // pair i runs (a) first when i is even, (c) first when odd, so that
        // neither always meets the page cache the other warmed.
        let mut cold_builds: Vec<ColdBuild> = Vec::new();
        let mut host_builds: Vec<ColdBuild> = Vec::new();
        for pair in 0..self.cold_runs.max(1) {
            for which in [pair % 2, 1 - pair % 2] {
                if which == 0 {
                    cold_builds.push(xtask_cold_build(&sh, &cargo, &repo, scratch.path(), pair)?);
                } else {
                    host_builds.push(host_cold_build(&sh, &cargo, &repo, scratch.path(), pair)?);
                }
                eprintln!("load average after a cold build: {}", load_average());
            }
        }
        let crates = cold_builds[0].crates;
        let host_crates = host_builds[0].crates;
        let binary = cold_builds[0]
            .target
            .join("debug")
            .join(format!("xtask{}", std::env::consts::EXE_SUFFIX));
        let key_started = Instant::now();
        let cold_key = run_key(&sh, &binary, &root)?;
        let key_time = key_started.elapsed();
        let build_time = median(cold_builds.iter().map(|b| b.wall).collect());
        let build_cpu = median(cold_builds.iter().map(|b| b.cpu).collect());
        let host_time = median(host_builds.iter().map(|b| b.wall).collect());
        let host_cpu = median(host_builds.iter().map(|b| b.cpu).collect());
        let cold = build_time + key_time;

        // (b) the publisher's cache entry: the optimised binary in a tar
        // (its release build is the publisher's, on a miss: not timed).
        let (optimised, _) = super::optimised_xtask(None)?;
        let cache = scratch.path().join("cache/xtask-bin.tar");
        std::fs::create_dir_all(cache.parent().expect("has a parent"))?;
        {
            let mut builder = tar::Builder::new(std::fs::File::create(&cache)?);
            builder
                .append_path_with_name(&optimised, "xtask")
                .context("cannot pack the binary")?;
            builder.finish()?;
        }
        let mut warm = Vec::new();
        let mut version = String::new();
        for run in 0..=self.runs.max(1) {
            let dir = scratch.path().join(format!("restored-{run}"));
            let started = Instant::now();
            tar::Archive::new(std::fs::File::open(&cache)?)
                .unpack(&dir)
                .context("cannot unpack the cached binary")?;
            let restored = dir.join("xtask");
            version = cmd!(sh, "{restored} --version")
                .quiet()
                .read()
                .context("the restored xtask does not run")?;
            let key = run_key(&sh, &restored, &root)?;
            let elapsed = started.elapsed();
            if key != cold_key {
                bail!("the restored binary gave another key: {key} vs {cold_key}");
            }
            // Run 0 warms the page cache; it is not counted.
            if run > 0 {
                warm.push(elapsed);
            }
        }
        warm.sort();
        let restored = warm[warm.len() / 2];

        println!(
            "key step of a cold CI job on {} ({})",
            root.display(),
            cold_key
        );
        println!("{:<62} {:>10}", "path", "seconds");
        println!(
            "{:<62} {:>10.2}",
            format!("(a) compile the xtask ({crates} crates, dev profile), then ci-key"),
            cold.as_secs_f64()
        );
        println!(
            "{:<62} {:>10.2}",
            format!(
                "    of which the cold build (median of {})",
                cold_builds.len()
            ),
            build_time.as_secs_f64()
        );
        println!(
            "{:<62} {:>10.2}",
            "    its CPU time, user + system (median)",
            build_cpu.as_secs_f64()
        );
        println!(
            "{:<62} {:>10.2}",
            format!(
                "(b) restore the optimised prebuilt binary, check, ci-key (median of {})",
                warm.len()
            ),
            restored.as_secs_f64()
        );
        println!(
            "{:<62} {:>10.2}",
            format!(
                "(c) a host's cold build of init-ci's thin xtask ({host_crates} crates, median of {})",
                host_builds.len()
            ),
            host_time.as_secs_f64()
        );
        println!(
            "{:<62} {:>10.2}",
            "    its CPU time, user + system (median)",
            host_cpu.as_secs_f64()
        );
        println!("restored binary: {version}");
        let verdict = |ok: bool| if ok { "met" } else { "missed" };
        println!(
            "(c) is {:.2}x the cold build of (a) in wall time, {:.2}x in CPU time (target: no slower, at most 1.05x: wall {}, CPU {})",
            host_time.as_secs_f64() / build_time.as_secs_f64().max(1e-9),
            host_cpu.as_secs_f64() / build_cpu.as_secs_f64().max(1e-9),
            verdict(host_time <= build_time.mul_f64(1.05)),
            verdict(host_cpu <= build_cpu.mul_f64(1.05)),
        );
        println!(
            "(b) is {:.0}x faster than (a) (target: at least 20x, and under 5 s: {})",
            cold.as_secs_f64() / restored.as_secs_f64().max(1e-9),
            if restored < Duration::from_secs(5) {
                "met"
            } else {
                "missed"
            }
        );
        println!("load average at the end: {}", load_average());
        Ok(ExitCode::SUCCESS)
    }
}

/// The cold build of the thin xtask `init-ci` writes into a host: its time
/// and the number of crates compiled. The lockfile is settled first (cargo
/// prunes the seeded entries), outside the measurement.
fn host_cold_build(
    sh: &Shell,
    cargo: &str,
    repo: &Path,
    scratch: &Path,
    pair: usize,
) -> Result<ColdBuild> {
    let host = scratch.join(format!("host-{pair}"));
    std::fs::create_dir_all(&host)?;
    let source = ci_trust::init_ci::Source::Path(repo.to_path_buf());
    ci_trust::init_ci::write_thin_xtask(&host, &source, repo)?;
    let manifest = host.join("xtask/Cargo.toml");
    cmd!(
        sh,
        "{cargo} metadata --format-version 1 --manifest-path {manifest}"
    )
    .quiet()
    .ignore_stdout()
    .run()
    .context("cannot settle the thin xtask's lockfile")?;
    let target = scratch.join(format!("host-target-{pair}"));
    timed_build(
        cmd!(sh, "{cargo} build --locked --manifest-path {manifest}"),
        target,
        "the host's cold build of the thin xtask",
    )
}

/// One cold build: wall time, CPU time of the build's processes, the
/// crates compiled and where.
struct ColdBuild {
    wall: Duration,
    cpu: Duration,
    crates: usize,
    target: std::path::PathBuf,
}

/// (a): `cargo build --package xtask --locked` of this repository into a
/// fresh target directory.
fn xtask_cold_build(
    sh: &Shell,
    cargo: &str,
    repo: &Path,
    scratch: &Path,
    pair: usize,
) -> Result<ColdBuild> {
    let target = scratch.join(format!("cold-target-{pair}"));
    let _cwd = sh.push_dir(repo);
    timed_build(
        cmd!(sh, "{cargo} build --package xtask --locked"),
        target,
        "the cold build of the xtask",
    )
}

/// Runs one cargo build into a fresh `target`, timing its wall and CPU
/// time; `what` names it when it fails.
fn timed_build(
    build: xshell::Cmd<'_>,
    target: std::path::PathBuf,
    what: &str,
) -> Result<ColdBuild> {
    let cpu_before = children_cpu();
    let started = Instant::now();
    let output = build
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTC_WRAPPER")
        .ignore_status()
        .quiet()
        .output()
        .context("cannot run cargo build")?;
    let wall = started.elapsed();
    let cpu = children_cpu().saturating_sub(cpu_before);
    let log = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!("{what} failed:\n{log}");
    }
    Ok(ColdBuild {
        wall,
        cpu,
        crates: compiled_crates(&log),
        target,
    })
}

/// The `Compiling …` lines of a cargo build's log.
fn compiled_crates(log: &str) -> usize {
    log.lines()
        .filter(|l| l.trim_start().starts_with("Compiling "))
        .count()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// User plus system time of this process's waited-for descendants (cargo
/// and the rustc processes it waited for), so far.
#[cfg(unix)]
#[allow(unsafe_code)]
fn children_cpu() -> Duration {
    // SAFETY: zeroed `rusage` is a valid value; the pointer is valid for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid pointer only writes `usage`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

#[cfg(not(unix))]
fn children_cpu() -> Duration {
    Duration::ZERO
}

/// `BINARY ci-key --root ROOT`, returning the key.
fn run_key(sh: &Shell, binary: &Path, root: &Path) -> Result<String> {
    let key = cmd!(sh, "{binary} ci-key --root {root}")
        .quiet()
        .ignore_stderr()
        .read()
        .context("ci-key failed")?;
    Ok(key.trim().to_owned())
}

/// The 1, 5 and 15 minute load averages, where the system reports them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}
