//! The proof that an adoption works, run in the host with the host's own
//! `cargo xtask` (never this binary): it builds and runs ci-trust's
//! subcommands, `ci-key` keys, `check-contracts` passes on the workflows,
//! and a traced fresh build of one GPU archive is covered by the key.
//!
//! Owns: the steps and what their failure tells the user to do.
//! Must not: compute keys or judge contracts itself (the host's xtask does).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// One GPU archive's build, from the policy: what the traced build runs.
pub struct Build {
    pub file: String,
    pub nextest: Vec<String>,
}

/// Runs the proof; `Ok(1)` when `check-contracts` reports findings, an error
/// with what to do when a step could not run.
pub fn prove(
    host: &Path,
    own_xtask_lines: Option<&str>,
    build: Option<&Build>,
) -> Result<ExitCode> {
    let sh = Shell::new()?;
    sh.change_dir(host);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());

    eprintln!("--- proof 1/4: the host's `cargo xtask` builds and runs ci-trust's subcommands");
    let help = cmd!(sh, "{cargo} xtask ci-key --help")
        .ignore_status()
        .output()
        .context("cannot run cargo")?;
    let help_text = String::from_utf8_lossy(&help.stdout);
    if !help.status.success() || !help_text.contains("--root") {
        let log = String::from_utf8_lossy(&help.stderr);
        if let Some(lines) = own_xtask_lines {
            bail!(
                "the host's xtask does not run ci-trust's subcommands yet; add these two lines, then run init-ci again:\n{lines}\n(cargo xtask ci-key --help said:\n{})",
                tail(&log)
            );
        }
        bail!(
            "the host's xtask does not build or does not run `ci-key`:\n{}\nfix it (a git dependency cargo cannot fetch, a toolchain older than {}, versions the lockfile locks that cannot go together), then run init-ci again",
            tail(&log),
            env!("CARGO_PKG_RUST_VERSION")
        );
    }

    eprintln!("--- proof 2/4: cargo xtask ci-key --explain");
    cmd!(sh, "{cargo} xtask ci-key --explain")
        .run()
        .context("`cargo xtask ci-key` failed on the host (above): fix what it names, then run init-ci again")?;

    eprintln!("--- proof 3/4: cargo xtask check-contracts");
    let contracts = cmd!(sh, "{cargo} xtask check-contracts")
        .ignore_status()
        .output()
        .context("cannot run cargo xtask check-contracts")?;
    print!("{}", String::from_utf8_lossy(&contracts.stdout));
    eprint!("{}", String::from_utf8_lossy(&contracts.stderr));
    match contracts.status.code() {
        Some(0) => {}
        Some(1) => {
            eprintln!(
                "error: check-contracts found problems in the host's workflows (above); the generated `ci-trust` workflow runs it on every pull request and would fail: fix them, then run init-ci again"
            );
            return Ok(ExitCode::from(1));
        }
        _ => bail!("`cargo xtask check-contracts` could not check the host's workflows (above)"),
    }

    let Some(build) = build else {
        eprintln!(
            "--- proof 4/4: skipped (--no-build-proof): no fresh build was shown to be covered by the key"
        );
        return Ok(ExitCode::SUCCESS);
    };
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let target = scratch.path().join("target");
    let args = &build.nextest;
    let nextest = cmd!(sh, "{cargo} nextest --version")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok();
    let traced = cfg!(target_os = "linux");
    let what = if nextest { "nextest archive" } else { "build" };
    eprintln!(
        "--- proof 4/4: a fresh {what} of {} ({}), {}",
        build.file,
        args.join(" "),
        if traced {
            "traced: every repository file it used must be a key input"
        } else {
            "then verify-key on its dep-info"
        }
    );
    let result = match (traced, nextest) {
        (true, true) => {
            let archive = scratch.path().join(&build.file);
            cmd!(sh, "{cargo} xtask verify-key --trace -- {cargo} nextest archive {args...} --archive-file {archive} --target-dir {target}").run()
        }
        (true, false) => cmd!(
            sh,
            "{cargo} xtask verify-key --trace -- {cargo} build {args...} --target-dir {target}"
        )
        .run(),
        (false, _) => cmd!(sh, "{cargo} build {args...} --target-dir {target}")
            .run()
            .and_then(|()| cmd!(sh, "{cargo} xtask verify-key --target-dir {target}").run()),
    };
    result.context(
        "the fresh build of the GPU archive failed or read a file the key lacks (above): fix the build (a toolkit it needs, a dependency cargo cannot fetch) or the policy's [[archive]], or pass --no-build-proof to skip this step knowingly, then run init-ci again",
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The last lines of a log: what a failed build said.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
