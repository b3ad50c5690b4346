//! Snapshots of what a person reads: `check-contracts` (human and SARIF),
//! `ci-key --explain`, and both `verify-key` reports (dep-info and
//! `--trace`), on small fixed fixtures. One snapshot per file
//! (`snapshots/it__snapshots__NAME.snap`), so a change of one report is
//! re-blessed alone: `cargo insta review`, or `INSTA_UPDATE=always cargo
//! test -p xtask --test it -- snapshots::` and a look at the diff. What
//! differs between machines is replaced before the comparison: the fixture's
//! temporary path (`[ROOT]`), the rustc release and host triple, and the
//! key hash (it hashes the rustc release); counts of trace events. No
//! timing is printed by these reports.

use std::path::Path;
use std::process::Command;

use crate::support::{Fixture, has_tool, stderr, stdout, xtask_cmd};

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// The text with what differs between machines and runs replaced.
fn stable(text: &str, root: &Path) -> String {
    let rustc = Command::new("rustc").arg("-V").output().unwrap();
    let rustc = stdout(&rustc).trim().to_owned();
    let release = rustc.split_whitespace().nth(1).unwrap_or("?").to_owned();
    let host = Command::new("rustc").arg("-vV").output().unwrap();
    let host = stdout(&host)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .unwrap_or_default();
    let mut out = text
        .replace(&root.display().to_string(), "[ROOT]")
        .replace(&rustc, "[RUSTC]")
        .replace(&format!("rustc{release}"), "rustc[RELEASE]")
        .replace(&host, "[HOST]");
    // The key's hash (64 hex after the release) hashes the rustc release.
    while let Some(at) = out.find("rustc[RELEASE]-") {
        let start = at + "rustc[RELEASE]-".len();
        let end = out[start..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .map_or(out.len(), |i| start + i);
        if end - start != 64 {
            break;
        }
        out.replace_range(start..end, "[KEY]");
    }
    // A trace's event counts depend on the machine's scheduling, and the
    // files outside the repository and under the target directory on the
    // toolchain and system: their counts are replaced, not what they say.
    out.lines()
        .map(|line| {
            if line.starts_with("verify-key --trace: ") && line.ends_with(" recorded") {
                return "verify-key --trace: [N] events of [N] processes and threads recorded"
                    .to_owned();
            }
            let counted = [
                "files outside the repository (registry, toolchain, system)",
                "files under the target directories",
            ];
            match line.trim_start().split_once(' ') {
                Some((n, rest))
                    if n.parse::<u64>().is_ok() && counted.iter().any(|c| rest.starts_with(c)) =>
                {
                    format!("  [N] {rest}")
                }
                _ => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The contracts fixture with one regression: the job that builds
/// pull-request code may write the cache.
fn contracts_with_a_finding() -> Fixture {
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/contracts/good");
    let f = Fixture::new();
    for entry in walkdir::WalkDir::new(&good).sort_by_file_name() {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(&good).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let text = text.replace(
                "    # PR code runs here: the token must not be able to write the cache.\n    cache-mode: read\n",
                "    cache-mode: write\n",
            );
            f.file(rel.to_str().unwrap(), &text);
        }
    }
    f
}

/// A one-crate workspace that embeds a file.
fn crate_fixture() -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"snap\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .file(
        "Cargo.lock",
        "version = 4\n\n[[package]]\nname = \"snap\"\nversion = \"0.1.0\"\n",
    )
    .file(
        "src/lib.rs",
        "pub const TABLE: &str = include_str!(\"table.txt\");\n",
    )
    .file("src/table.txt", "kernel table\n");
    f
}

#[test]
fn check_contracts_human() {
    let f = contracts_with_a_finding();
    let out = f.xtask(&["check-contracts", "--format", "human"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    insta::assert_snapshot!(stable(&stdout(&out), f.path()));
}

#[test]
fn check_contracts_sarif() {
    let f = contracts_with_a_finding();
    let out = f.xtask(&["check-contracts", "--format", "sarif"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    insta::assert_snapshot!(stable(&stdout(&out), f.path()));
}

#[test]
fn ci_key_explain() {
    let f = crate_fixture();
    let out = f.xtask(&["ci-key", "--explain"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!(stable(
        &format!("{}--- stdout\n{}", stderr(&out), stdout(&out)),
        f.path()
    ));
}

#[test]
fn verify_key_dep_info() {
    let f = crate_fixture();
    let build = cargo()
        .args(["build", "--offline", "--locked"])
        .current_dir(f.path())
        .env("CARGO_TARGET_DIR", f.join("target"))
        .output()
        .unwrap();
    assert!(build.status.success(), "{}", stderr(&build));
    let out = f.xtask(&["verify-key"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!(stable(&stderr(&out), f.path()));
}

#[test]
fn verify_key_trace() {
    if !has_tool("strace", "`apt-get install strace`") {
        return;
    }
    let f = crate_fixture();
    let target = Fixture::new();
    let cargo_path = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = xtask_cmd(&["verify-key", "--trace", "--tracer", "strace", "--root"])
        .arg(f.path())
        .args([
            "--",
            &cargo_path,
            "build",
            "--offline",
            "--locked",
            "--quiet",
            "--target-dir",
        ])
        .arg(target.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out)
        .replace(&target.path().display().to_string(), "[TARGET]")
        .replace(&cargo_path, "[CARGO]");
    let text = stable(&text, f.path());
    insta::assert_snapshot!(text);
}
