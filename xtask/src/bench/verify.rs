//! `cargo xtask bench-verify`: how long `verify-key` takes after a real
//! build of a rust-analyzer-sized workspace (about 1,500 source files).
//!
//! The build itself is not timed; `ci-key` alone is timed beside
//! `verify-key` (which computes the key too) so the cost of reading the
//! dep-info files shows as the difference.

use std::process::ExitCode;

use anyhow::{Context, Result};
use xshell::{Shell, cmd};

use super::key::{Shape, generate, measure, workspace_dir};
use crate::flags;

impl flags::BenchVerify {
    pub fn run(&self) -> Result<ExitCode> {
        let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
        let shape = Shape {
            packages: 20,
            modules_per_package: 75,
            data_files_per_package: 0,
            megabytes: 45,
        };
        // A given repository is built into the scratch directory, so the
        // benchmark writes nothing inside it.
        let (workspace, target) = if let Some(root) = &self.root {
            let root = std::fs::canonicalize(root).with_context(|| {
                format!("--root {}: pass an existing repository", root.display())
            })?;
            eprintln!(
                "workspace: {} (given with --root); building it once…",
                root.display()
            );
            (root, scratch.path().join("target"))
        } else {
            let workspace = workspace_dir(self.workdir.as_deref(), scratch.path())?;
            let (files, bytes) = generate(&workspace, &shape)?;
            eprintln!(
                "workspace: {} ({files} files, {:.1} MB); building it once…",
                workspace.display(),
                bytes as f64 / 1e6
            );
            let target = workspace.join("target");
            (workspace, target)
        };
        let sh = Shell::new()?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        {
            let _cwd = sh.push_dir(&workspace);
            cmd!(
                sh,
                "{cargo} build --workspace --offline --quiet --target-dir {target}"
            )
            .run()
            .context("the benchmark build failed")?;
        }
        let exe = std::env::current_exe().context("cannot find the running xtask binary")?;
        let ci_key = measure(self.runs, || {
            cmd!(sh, "{exe} ci-key --root {workspace}")
                .quiet()
                .ignore_stderr()
                .read()
                .map(drop)
        })?;
        let verify = measure(self.runs, || {
            cmd!(
                sh,
                "{exe} verify-key --root {workspace} --target-dir {target}"
            )
            .quiet()
            .ignore_stderr()
            .run()
        })?;
        println!("{:<36} {:>10} {:>10}", "measurement", "median s", "min s");
        for (name, t) in [
            ("ci-key", ci_key),
            ("verify-key (key + dep-info check)", verify),
        ] {
            println!(
                "{name:<36} {:>10.3} {:>10.3}",
                t.median.as_secs_f64(),
                t.min.as_secs_f64()
            );
        }
        let files = if self.root.is_some() {
            "the repository's".to_owned()
        } else {
            (shape.packages * (shape.modules_per_package + 1)).to_string()
        };
        println!(
            "dep-info check alone: about {:.3} s over {files} source files",
            (verify.median.as_secs_f64() - ci_key.median.as_secs_f64()).max(0.0),
        );
        Ok(ExitCode::SUCCESS)
    }
}
