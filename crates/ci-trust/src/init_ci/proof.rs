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
    xtask_manifest: &Path,
    own_xtask_lines: Option<&str>,
    build: Option<&Build>,
) -> Result<ExitCode> {
    let sh = Shell::new()?;
    sh.change_dir(host);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());

    eprintln!("--- proof 1/4: the host's `cargo xtask` builds and runs ci-trust's subcommands");
    let mut help = cmd!(sh, "{cargo} xtask ci-key --help")
        .ignore_status()
        .output()
        .context("cannot run cargo")?;
    // A version the host's lockfile holds may not go with what ci-trust's
    // dependencies ask for (a feature they turn on needs a newer patch
    // release): cargo does not move a locked version by itself, so init-ci
    // moves that one package, says so, and tries again, a bounded number
    // of times. The lockfile's diff shows what moved.
    let mut moved: Vec<String> = Vec::new();
    // Only a failed build is read: a successful one may print anything
    // the host's code chooses (a `#[deprecated]` note, a build script).
    while !help.status.success() && moved.len() < MAX_LOCK_UPDATES {
        let log = String::from_utf8_lossy(&help.stderr);
        // The same package again: `cargo update` could not move it, and
        // the failure below says what cargo said.
        let Some(spec) = locked_conflict(&log).filter(|spec| !moved.contains(spec)) else {
            break;
        };
        eprintln!(
            "note: the lockfile locks {spec}, which ci-trust's dependencies cannot use: `cargo update -p {spec}` (review the lockfile's diff)"
        );
        cmd!(sh, "{cargo} update -p {spec} --manifest-path {xtask_manifest}")
            .run()
            .with_context(|| format!("`cargo update -p {spec}` failed (above): update it yourself, then run init-ci again"))?;
        moved.push(spec);
        help = cmd!(sh, "{cargo} xtask ci-key --help")
            .ignore_status()
            .output()
            .context("cannot run cargo")?;
    }
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

/// How many locked packages init-ci moves before it gives up.
const MAX_LOCK_UPDATES: usize = 16;

/// The locked package a failed resolution names, as `name@version`:
/// cargo says "failed to select a version for `X`" and "previously
/// selected package `X vV`". `None` for any other failure.
fn locked_conflict(log: &str) -> Option<String> {
    // Cargo's own error, at the start of a line, and what follows it.
    let start = log
        .match_indices("error: failed to select a version for `")
        .map(|(at, _)| at)
        .find(|&at| at == 0 || log[..at].ends_with('\n'))?;
    let block = &log[start..];
    let at = block.find("\n  previously selected package `")?
        + "\n  previously selected package `".len();
    let rest = &block[at..];
    let spec = &rest[..rest.find('`')?];
    let (name, version) = spec.split_once(" v")?;
    let plain = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'))
    };
    // A crate name starts with a letter or `_`, a version with a digit:
    // nothing here can read as one of cargo's flags.
    let named = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    let versioned = version.starts_with(|c: char| c.is_ascii_digit());
    (named && versioned && plain(name) && plain(version)).then(|| format!("{name}@{version}"))
}

#[cfg(test)]
mod tests {
    use super::locked_conflict;

    /// Cargo's words, adopting egui (its lockfile locks `futures-io 0.3.32`;
    /// octocrab's `futures` turns on what needs 0.3.33).
    #[test]
    fn a_locked_version_that_stops_resolution_is_named() {
        let log = "error: failed to select a version for `futures-io`.\n    ... required by package `futures-util v0.3.33`\nversions that meet the requirements `^0.3.33` are: 0.3.34, 0.3.33\n\nall possible versions conflict with previously selected packages.\n\n  previously selected package `futures-io v0.3.32`\n    ... which satisfies dependency `futures-io = \"^0.3.32\"` (locked to 0.3.32) of package `futures v0.3.32`\n";
        assert_eq!(locked_conflict(log).as_deref(), Some("futures-io@0.3.32"));
        assert_eq!(locked_conflict("error: could not find `Cargo.toml`"), None);
        // Attacker-shaped text is not passed on to cargo.
        let odd =
            "failed to select a version for `x`\n  previously selected package `x; rm -rf / v1`\n";
        assert_eq!(locked_conflict(odd), None);
        let flag =
            "error: failed to select a version for `x`\n  previously selected package `-Zx v1`\n";
        assert_eq!(locked_conflict(flag), None);
        // The host's own warning, quoting cargo's words, is not cargo's error.
        let warning = "warning: use of deprecated function `f`: failed to select a version for `x`\n  previously selected package `memchr v2.8.3`\n";
        assert_eq!(locked_conflict(warning), None);
    }
}
