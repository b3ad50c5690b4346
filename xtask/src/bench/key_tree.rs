//! `cargo xtask bench-key-tree`: what building in the key tree costs.
//! Times, side by side, the same clean `cargo build` in the checkout and
//! in the key tree (staged from the key, mounted at the checkout's path in
//! a private namespace), untraced both, and prints the cost of making the
//! tree on its own line: the tree is made once per `gpu-archive` run.
//!
//! The build is a generated workspace (the `bench-trace` shape: the
//! `bench-key` generator with a build script in every package) or, with
//! `--root`, that workspace's `cargo build --workspace`. Contenders run in
//! turn within each round; each build starts from an empty target
//! directory outside the workspace. Nothing here writes to the workspace
//! measured.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::key::{Shape, generate, workspace_dir};
use super::trace::{add_build_scripts, children_cpu_time};
use crate::flags;
use ci_trust::key_tree::KeyTree;

impl flags::BenchKeyTree {
    pub fn run(&self) -> Result<ExitCode> {
        let mechanism = ci_trust::key_tree::available().map_err(|why| {
            anyhow::anyhow!("bench-key-tree: no key tree can be made here: {why}")
        })?;
        let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
        let (workspace, policy) = match &self.common.root {
            Some(root) => {
                let root = std::fs::canonicalize(root).with_context(|| {
                    format!("--root {}: pass an existing workspace", root.display())
                })?;
                let policy = self.common.load_policy()?.unwrap_or_default();
                (root, policy)
            }
            None => {
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
                (workspace, ci_trust::policy::Policy::default())
            }
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        // The build would complete the generated lockfile, changing the
        // key's inputs under the tree: it is complete before the key is
        // computed. A real workspace is built as it is.
        if self.common.root.is_none() {
            let status = std::process::Command::new(&cargo)
                .args(["generate-lockfile", "--offline", "--quiet"])
                .current_dir(&workspace)
                .status()
                .context("cannot run cargo generate-lockfile")?;
            if !status.success() {
                bail!("cargo generate-lockfile failed in {}", workspace.display());
            }
        }
        let key_started = Instant::now();
        let manifest = ci_trust::key::compute(&workspace, &policy)?;
        let key_time = key_started.elapsed();
        let target = scratch.path().join("bench-target");
        let mut command: Vec<OsString> = vec![cargo];
        command.extend(
            [
                "build",
                "--workspace",
                "--offline",
                "--quiet",
                "--target-dir",
            ]
            .map(OsString::from),
        );
        command.push(target.clone().into());

        let names = ["cargo build in the checkout", "cargo build in the key tree"];
        let mut wall: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut cpu: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut staging: Vec<Duration> = Vec::new();
        let mut staged = None;
        // Round 0 warms the page cache and is not counted.
        for round in 0..=self.runs.max(1) {
            // The order alternates, so that whatever the first build of a
            // round leaves (a warmer cache, a cooler machine) favours each
            // contender in turn.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for index in order {
                let name = names[index];
                if target.exists() {
                    std::fs::remove_dir_all(&target)
                        .with_context(|| format!("cannot clear {}", target.display()))?;
                }
                let mut build = std::process::Command::new(&command[0]);
                build.args(&command[1..]).current_dir(&workspace);
                let cpu_before = children_cpu_time();
                let start = Instant::now();
                let tree = if index == 1 {
                    let tree = KeyTree::stage(&workspace, &workspace, &manifest, mechanism)?;
                    if round > 0 {
                        staging.push(tree.staged().elapsed);
                    }
                    eprintln!(
                        "round {round}: making the key tree: {:.3} s",
                        tree.staged().elapsed.as_secs_f64()
                    );
                    tree.isolate(&mut build, &workspace, &[])?;
                    Some(tree)
                } else {
                    None
                };
                let status = build
                    .status()
                    .with_context(|| format!("cannot run {}", command[0].to_string_lossy()))?;
                let elapsed = start.elapsed();
                let used = children_cpu_time().saturating_sub(cpu_before);
                if !status.success() {
                    bail!("the benchmark build ({name}) failed: {status}");
                }
                eprintln!(
                    "round {round}: {name}: {:.2} s wall, {:.2} s CPU",
                    elapsed.as_secs_f64(),
                    used.as_secs_f64()
                );
                if round > 0 {
                    wall[index].push(elapsed);
                    cpu[index].push(used);
                }
                if let Some(tree) = tree {
                    staged = Some(tree.describe());
                }
            }
        }
        let median = |t: &Vec<Duration>| {
            let mut t = t.clone();
            t.sort();
            t[t.len() / 2]
        };
        let (base, cpu_base) = (
            median(&wall[0]).as_secs_f64(),
            median(&cpu[0]).as_secs_f64(),
        );
        println!(
            "fresh `cargo build --workspace` of {}, {} runs each (medians):",
            workspace.display(),
            self.runs.max(1)
        );
        println!(
            "{:<32} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "contender", "wall s", "min s", "vs base", "CPU s", "vs base"
        );
        for (index, name) in names.iter().enumerate() {
            let m = median(&wall[index]).as_secs_f64();
            let min = wall[index].iter().min().expect("runs").as_secs_f64();
            let c = median(&cpu[index]).as_secs_f64();
            println!(
                "{name:<32} {m:>9.2} {min:>9.2} {:>+8.1}% {c:>9.2} {:>+8.1}%",
                (m / base - 1.0) * 100.0,
                (c / cpu_base - 1.0) * 100.0
            );
        }
        // Rounds run the two in turn, so that a load change hits both: the
        // median of the per-round ratios is what other jobs distort least.
        let paired = |series: &[Vec<Duration>; 2]| {
            let mut ratios: Vec<f64> = series[1]
                .iter()
                .zip(&series[0])
                .map(|(tree, plain)| tree.as_secs_f64() / plain.as_secs_f64())
                .collect();
            ratios.sort_by(f64::total_cmp);
            (ratios[ratios.len() / 2] - 1.0) * 100.0
        };
        println!(
            "paired (median of the per-round ratios, key tree / checkout): wall {:+.1}%, CPU {:+.1}%",
            paired(&wall),
            paired(&cpu)
        );
        let stage = median(&staging).as_secs_f64();
        println!(
            "making the key tree (included above): {stage:.3} s median ({:.2}% of the plain build); {}",
            stage / base * 100.0,
            staged.unwrap_or_default()
        );
        println!(
            "computing the key it is made from (before either build): {:.3} s, {} inputs",
            key_time.as_secs_f64(),
            manifest.inputs.len()
        );
        println!(
            "load average at the end: {}",
            std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
        );
        Ok(ExitCode::SUCCESS)
    }
}
