//! `cargo xtask bench-key`: `ci-key` against GitHub's `hashFiles()` and the
//! raw hashing floor, on a generated workspace of realistic shape.
//!
//! The workspace has many packages whose `lib.rs` declares file modules,
//! some modules embedding data with `include_str!`, and large binary test
//! data: at the default size over 5,000 files and 100 MB. Every contender
//! runs once to warm the page cache, then `--runs` times; medians are
//! compared. `hashFiles()` is GitHub's `@actions/glob` implementation, run by
//! `xtask/bench-assets/hashfiles.mjs` and installed at the pinned version of
//! `xtask/bench-assets/package.json` with npm into a scratch directory.
//! With `--root DIR` the contenders measure that repository instead.
//!
//! `ci-key` is the binary CI runs: this repository's xtask built with
//! `--release`, as the publisher builds the prebuilt one every job restores
//! (`--xtask BINARY` measures another). Its peak RSS (`wait4`'s
//! `ru_maxrss`, the largest of it and its `cargo metadata`) is printed too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use xshell::{Shell, cmd};

use crate::flags;

/// The shape of a generated workspace.
pub(super) struct Shape {
    pub packages: usize,
    pub modules_per_package: usize,
    pub data_files_per_package: usize,
    /// Approximate total size; a third of it Rust sources, the rest test data.
    pub megabytes: u64,
}

impl flags::BenchKey {
    pub fn run(&self) -> Result<ExitCode> {
        let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
        let workspace = if let Some(root) = &self.root {
            let root = std::fs::canonicalize(root).with_context(|| {
                format!("--root {}: pass an existing repository", root.display())
            })?;
            eprintln!("workspace: {} (given with --root)", root.display());
            root
        } else {
            let workspace = workspace_dir(self.workdir.as_deref(), scratch.path())?;
            let shape = Shape {
                packages: 50,
                modules_per_package: 80,
                data_files_per_package: 20,
                megabytes: self.megabytes,
            };
            let (files, bytes) = generate(&workspace, &shape)?;
            eprintln!(
                "workspace: {} ({files} files, {:.1} MB)",
                workspace.display(),
                bytes as f64 / 1e6
            );
            workspace
        };
        let (exe, version) = super::optimised_xtask(self.xtask.as_deref())?;
        println!("ci-key binary: {} ({version})", exe.display());
        let sh = Shell::new()?;

        let mut rows = Vec::new();
        let mut peak_kib = 0;
        let ci_key = measure(self.runs, || {
            let kib = run_with_peak_rss(&exe, &workspace)?;
            peak_kib = peak_kib.max(kib);
            Ok::<(), anyhow::Error>(())
        })?;
        rows.push(("cargo xtask ci-key", Some(ci_key)));

        let hash_files = match install_hash_files(&sh, scratch.path()) {
            Ok(script) => Some(measure(self.runs, || {
                cmd!(sh, "node {script} {workspace}")
                    .quiet()
                    .ignore_stderr()
                    .read()
                    .map(drop)
            })?),
            Err(err) => {
                eprintln!("hashFiles() anchor unavailable: {err:#}");
                None
            }
        };
        rows.push(("hashFiles() (@actions/glob)", hash_files));

        // The floor: read and hash the same bytes with coreutils. The script
        // is fixed text; the directory is passed as an argument, not spliced.
        let floor_script = "find \"$1\" -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum";
        let floor = measure(self.runs, || {
            cmd!(sh, "bash -c {floor_script} floor {workspace}")
                .quiet()
                .read()
                .map(drop)
        })?;
        rows.push(("find | sha256sum (floor)", Some(floor)));

        println!(
            "{:<30} {:>10} {:>10} {:>14}",
            "contender", "median s", "min s", "vs ci-key"
        );
        for (name, timing) in &rows {
            match timing {
                Some(t) => println!(
                    "{name:<30} {:>10.3} {:>10.3} {:>13.2}x",
                    t.median.as_secs_f64(),
                    t.min.as_secs_f64(),
                    t.median.as_secs_f64() / ci_key.median.as_secs_f64()
                ),
                None => println!("{name:<30} {:>10} {:>10} {:>14}", "-", "-", "-"),
            }
        }
        let verdict = |met: bool| if met { "met" } else { "MISSED" };
        if let Some(h) = hash_files {
            let times = h.median.as_secs_f64() / ci_key.median.as_secs_f64();
            println!(
                "ci-key is {times:.1}x faster than hashFiles() (target: at least 20x: {})",
                verdict(times >= 20.0)
            );
        }
        let of_floor = ci_key.median.as_secs_f64() / floor.median.as_secs_f64();
        println!(
            "ci-key takes {of_floor:.2}x the raw floor (target: at most 0.5x: {})",
            verdict(of_floor <= 0.5)
        );
        let peak_mb = peak_kib as f64 / 1024.0;
        println!(
            "ci-key peak RSS {peak_mb:.1} MB, the largest of its runs (target: under 64 MB: {})",
            verdict(peak_mb < 64.0)
        );
        println!("load average: {}", load_average());
        Ok(ExitCode::SUCCESS)
    }
}

/// `--workdir` when given (checked and cleared by [`super::workdir::prepare`]),
/// else a directory inside `scratch`.
pub(super) fn workspace_dir(workdir: Option<&Path>, scratch: &Path) -> Result<PathBuf> {
    match workdir {
        Some(dir) => super::workdir::prepare(dir),
        None => Ok(scratch.join("workspace")),
    }
}

#[derive(Clone, Copy)]
pub(super) struct Timing {
    pub median: Duration,
    pub min: Duration,
}

/// Runs `exe ci-key --root workspace` (output discarded) and returns its
/// peak RSS in KiB, from `wait4` so that it is the child's own (with its
/// waited-for children: `cargo metadata`).
#[cfg(unix)]
#[allow(unsafe_code)]
fn run_with_peak_rss(exe: &Path, workspace: &Path) -> Result<u64> {
    use std::process::{Command, Stdio};
    let child = Command::new(exe)
        .args(["ci-key", "--root"])
        .arg(workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let pid = libc::pid_t::try_from(child.id()).context("a pid out of range")?;
    let mut status: libc::c_int = 0;
    // SAFETY: zeroed `rusage` is a valid value; the pointers are valid for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped; the pointers are valid.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc != pid {
        anyhow::bail!("wait4 failed: {}", std::io::Error::last_os_error());
    }
    // `child` was reaped by wait4 above; dropping it does not wait again.
    drop(child);
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        anyhow::bail!(
            "ci-key failed on {} (wait status {status})",
            workspace.display()
        );
    }
    // Linux reports kilobytes.
    Ok(u64::try_from(usage.ru_maxrss).unwrap_or(0))
}

#[cfg(not(unix))]
fn run_with_peak_rss(exe: &Path, workspace: &Path) -> Result<u64> {
    let status = std::process::Command::new(exe)
        .args(["ci-key", "--root"])
        .arg(workspace)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(status.success(), "ci-key failed");
    Ok(0)
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

pub(super) fn measure<E>(
    runs: usize,
    mut f: impl FnMut() -> std::result::Result<(), E>,
) -> Result<Timing>
where
    E: Into<anyhow::Error>,
{
    f().map_err(Into::into).context("warm-up run failed")?;
    let mut times = Vec::new();
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        f().map_err(Into::into).context("benchmark run failed")?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(Timing {
        median: times[times.len() / 2],
        min: times[0],
    })
}

/// The runner script and its pinned `package.json`, built into the binary so
/// that the benchmark reproduces from the repository alone.
const HASHFILES_RUNNER: &[(&str, &str)] = &[
    (
        "hashfiles.mjs",
        include_str!("../../bench-assets/hashfiles.mjs"),
    ),
    (
        "package.json",
        include_str!("../../bench-assets/package.json"),
    ),
];

/// Writes the `hashFiles()` runner into the scratch directory and installs
/// its one npm dependency at the pinned version (needs `node` and `npm`).
fn install_hash_files(sh: &Shell, scratch: &Path) -> Result<PathBuf> {
    let dir = scratch.join("hashfiles");
    std::fs::create_dir_all(&dir)?;
    for (file, text) in HASHFILES_RUNNER {
        std::fs::write(dir.join(file), text).with_context(|| format!("cannot write {file}"))?;
    }
    let _cwd = sh.push_dir(&dir);
    cmd!(sh, "npm install --no-audit --no-fund --silent")
        .quiet()
        .run()
        .context("`npm install @actions/glob@0.7.0` failed: the anchor needs node, npm and the npm registry")?;
    Ok(dir.join("hashfiles.mjs"))
}

/// Writes the benchmark workspace; returns its file count and size.
/// `root` is a fresh scratch directory or one [`super::workdir::prepare`]
/// cleared: the generator never deletes anything.
pub(super) fn generate(root: &Path, shape: &Shape) -> Result<(usize, u64)> {
    let mut files = 0;
    let mut bytes = 0u64;
    let mut write = |path: PathBuf, contents: &[u8]| -> Result<()> {
        std::fs::create_dir_all(path.parent().expect("generated paths have parents"))?;
        std::fs::write(&path, contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
        files += 1;
        bytes += contents.len() as u64;
        Ok(())
    };
    write(
        root.join("Cargo.toml"),
        b"[workspace]\nmembers = [\"crates/*\"]\nresolver = \"2\"\n",
    )?;
    write(root.join("Cargo.lock"), b"version = 4\n")?;
    // About a third of the bytes are Rust sources, the rest binary test data.
    let data_files = (shape.packages * shape.data_files_per_package).max(1);
    let data_size = (shape.megabytes * 1_000_000 * 2 / 3) as usize / data_files;
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    for p in 0..shape.packages {
        let dir = root.join(format!("crates/c{p:03}"));
        write(
            dir.join("Cargo.toml"),
            format!("[package]\nname = \"c{p:03}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
                .as_bytes(),
        )?;
        let mut lib = String::from("//! Generated benchmark crate.\n");
        for m in 0..shape.modules_per_package {
            lib.push_str(&format!("pub mod m{m:02};\n"));
            write(
                dir.join(format!("src/m{m:02}.rs")),
                module_source(p, m, shape).as_bytes(),
            )?;
        }
        write(dir.join("src/lib.rs"), lib.as_bytes())?;
        for d in 0..shape.data_files_per_package {
            let mut data = vec![0u8; data_size];
            for chunk in data.chunks_mut(8) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                chunk.copy_from_slice(&rng.to_le_bytes()[..chunk.len()]);
            }
            write(dir.join(format!("tests/data/d{d:02}.bin")), &data)?;
        }
        write(dir.join("data/embedded.txt"), b"embedded text\n")?;
    }
    Ok((files, bytes))
}

/// A module of plausible Rust, sized so sources make up a third of the total.
fn module_source(package: usize, module: usize, shape: &Shape) -> String {
    let target =
        (shape.megabytes * 1_000_000 / 3) as usize / (shape.packages * shape.modules_per_package);
    let mut text =
        format!("//! Module {module} of package {package}.\n\nuse std::collections::HashMap;\n\n");
    if module % 10 == 0 {
        text.push_str("pub const EMBEDDED: &str = include_str!(\"../data/embedded.txt\");\n\n");
    }
    let mut n = 0;
    while text.len() < target {
        text.push_str(&format!(
            "/// Computes value {n}.\npub fn value_{n}(input: &HashMap<String, u64>) -> u64 {{\n    let mut total = {n}u64;\n    for (key, value) in input {{\n        total = total.wrapping_mul(31).wrapping_add(key.len() as u64 ^ value);\n    }}\n    total\n}}\n\n"
        ));
        n += 1;
    }
    text
}
