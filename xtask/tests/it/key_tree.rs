//! The key tree (issue 17): `gpu-archive`'s fresh build and `verify-key
//! --trace --key-tree` compile a tree that holds exactly the key's inputs,
//! mounted at the checkout's path in a private namespace. Real fixture
//! workspaces, the real binary, real `cargo build` / `cargo nextest
//! archive`, and builds that try to reach the checkout around the tree.
//!
//! Each test is skipped with one printed line where no key tree can be made
//! (not Linux, no `CAP_SYS_ADMIN` and no user namespaces: GitHub's Ubuntu
//! 24.04 runners as the `runner` user); `.ci/run` runs as root, so CI
//! skips nothing there.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{Fixture, has_nextest, stderr, stdout, xtask_cmd};

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Environment a developer's shell may hold that moves the build or a key.
const BUILD_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
    "CARGO_BUILD_TARGET",
    "CI_TRUST_NO_KEY_TREE",
];

pub(crate) fn xtask(args: &[&str]) -> Command {
    let mut cmd = xtask_cmd(args);
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// Whether a key tree can be made here; otherwise says the test is skipped.
pub fn have_key_tree(test: &str) -> bool {
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("src/lib.rs", "");
    let output = xtask(&["verify-key", "--trace", "--key-tree", "--root"])
        .arg(ws.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    let text = stderr(&output);
    let found = !text.contains("--key-tree cannot run") && !text.contains("--trace cannot run");
    if !found {
        eprintln!(
            "skipped {test}: no key tree can be made here (needs Linux, and root, CAP_SYS_ADMIN or user namespaces): {text}"
        );
    }
    found
}

/// The tracers that run here.
fn tracers() -> Vec<&'static str> {
    let mut found = Vec::new();
    if Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        found.push("strace");
    }
    let fanotify = xtask(&[
        "verify-key",
        "--trace",
        "--tracer",
        "fanotify",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    if !stderr(&fanotify).contains("fanotify is not permitted") {
        found.push("fanotify");
    }
    found
}

fn package(ws: &Fixture, dir: &str, name: &str) {
    ws.file(
        &format!("{dir}/Cargo.toml"),
        &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
    );
}

fn lock(ws: &Fixture) {
    let output = Command::new(cargo())
        .args(["generate-lockfile", "--offline"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A one-binary workspace (`app`) archived with `cargo build`, its build
/// script `build_rs`, and the policy's `[verify]` lines `verify`.
fn app_workspace(build_rs: &str, verify: &str) -> Fixture {
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        &format!(
            "[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"-p\", \"app\", \"--bin\", \"app\", \"--offline\"]\nbinaries = [\"app\"]\n[verify]\n{verify}"
        ),
    )
    .file(
        "app/src/main.rs",
        "fn main() { println!(\"{}\", env!(\"FOUND\")); }\n",
    )
    .file("app/build.rs", build_rs);
    package(&ws, "app", "app");
    lock(&ws);
    ws
}

/// Runs `gpu-archive --root WS --out SCRATCH/out` with the target directory
/// in `scratch`, and `env`.
fn gpu_archive(ws: &Fixture, scratch: &Fixture, env: &[(&str, &str)]) -> Output {
    let mut cmd = xtask(&["gpu-archive", "--out"]);
    cmd.arg(scratch.join("out"))
        .arg("--root")
        .arg(ws.path())
        .env("CARGO_TARGET_DIR", scratch.join("target"));
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

/// Unpacks a `build` archive and runs its binary `name`.
fn run_packed(archive: &Path, name: &str) -> String {
    let unpacked = Fixture::new();
    let packed = std::fs::File::open(archive).unwrap();
    let decoder = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(packed)).unwrap();
    tar::Archive::new(decoder).unpack(unpacked.path()).unwrap();
    let output = Command::new(unpacked.join(name)).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output).trim().to_owned()
}

/// Done when (issue 17): a real nextest archive built from the key tree
/// runs its tests with `cargo nextest run --archive-file`, and nextest's
/// recorded workspace is the checkout's own path.
#[test]
fn a_nextest_archive_built_in_the_key_tree_runs_its_tests() {
    let test = "a_nextest_archive_built_in_the_key_tree_runs_its_tests";
    if !has_nextest() || !have_key_tree(test) {
        return;
    }
    let ws = crate::archive::gpu_workspace();
    let policy = std::fs::read_to_string(ws.join(".github/ci-trust.toml")).unwrap();
    ws.file(
        ".github/ci-trust.toml",
        &format!("{policy}[verify]\nkey-tree = \"required\"\n"),
    );
    // Not an input: the build cannot see it, and the archive does not hold it.
    ws.file("gpu-crate/notes.txt", "not a key input\n");
    let scratch = Fixture::new();
    let summary = scratch.join("summary.md");
    let output = gpu_archive(
        &ws,
        &scratch,
        &[("GITHUB_STEP_SUMMARY", summary.to_str().unwrap())],
    );
    let text = stderr(&output);
    assert!(output.status.success(), "{}\n{text}", stdout(&output));
    assert!(
        text.contains("the fresh build runs in the key tree, which holds exactly the key's inputs"),
        "{text}"
    );
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(
        summary.contains("| built in | `the key tree: exactly the key's inputs ("),
        "{summary}"
    );

    let archive = scratch.join("out/cuda-tests.tar.zst");
    let packed = std::fs::File::open(&archive).unwrap();
    let decoder = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(packed)).unwrap();
    let mut tar = tar::Archive::new(decoder);
    let mut metadata = String::new();
    for entry in tar.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        assert!(!path.contains("notes.txt"), "{path}");
        if path == "target/nextest/cargo-metadata.json" {
            std::io::Read::read_to_string(&mut entry, &mut metadata).unwrap();
        }
    }
    let metadata: serde_json::Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(
        metadata["workspace_root"].as_str(),
        Some(ws.path().to_str().unwrap()),
        "nextest recorded another workspace"
    );
    let run = Command::new(cargo())
        .args(["nextest", "run", "--archive-file"])
        .arg(&archive)
        .arg("--workspace-remap")
        .arg(ws.path())
        .current_dir(ws.path())
        .output()
        .unwrap();
    let run_text = format!("{}{}", stdout(&run), stderr(&run));
    assert!(run.status.success(), "{run_text}");
    assert!(run_text.contains("2 tests run: 2 passed"), "{run_text}");
}

/// The attacks on the tree itself: a build script that tries every way it
/// knows to read a file of the checkout the key lacks (by its absolute
/// path, through `..`, through another process's `/proc/<pid>/root` or
/// `cwd`, with `sudo`, by unmounting the tree), to read and write the
/// runner's output file by its path, and to plant a file in the checkout.
/// It embeds what it found in the binary; the published binary must have
/// found nothing, under each tracer, and the checkout is untouched.
#[test]
fn a_build_in_the_key_tree_cannot_reach_the_checkout() {
    let test = "a_build_in_the_key_tree_cannot_reach_the_checkout";
    if !have_key_tree(test) {
        return;
    }
    let spy = r#"use std::io::Write;
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let root = std::env::var("SPY_ROOT").unwrap();
    let mut tries = vec![
        format!("{dir}/secret.txt"),
        format!("{dir}/../app/secret.txt"),
        format!("{root}/app/secret.txt"),
        format!("{root}/../{}/app/secret.txt", std::path::Path::new(&root).file_name().unwrap().to_str().unwrap()),
    ];
    let mut leaked = false;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if pid.chars().all(|c| c.is_ascii_digit()) {
            tries.push(format!("/proc/{pid}/root{root}/app/secret.txt"));
            tries.push(format!("/proc/{pid}/cwd/app/secret.txt"));
            tries.push(format!("/proc/{pid}/cwd/secret.txt"));
            if std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|e| e.windows(14).any(|w| w == b"GITHUB_OUTPUT=")) {
                leaked = true;
            }
        }
    }
    let mut found: Vec<String> = tries.iter().filter(|t| std::fs::read(t).is_ok()).cloned().collect();
    if leaked { found.push("an ancestor's GITHUB_OUTPUT".into()); }
    let sudo = std::process::Command::new("sudo").args(["-n", "cat"]).arg(format!("{root}/app/secret.txt")).output();
    if sudo.is_ok_and(|o| o.status.success()) { found.push("sudo".into()); }
    let umount = std::process::Command::new("umount").arg(&root).output();
    if umount.is_ok_and(|o| o.status.success()) { found.push("umount".into()); }
    let output = std::env::var("SPY_OUTPUT").unwrap();
    if std::fs::read_to_string(&output).is_ok_and(|t| t.contains("before")) { found.push("read the output file".into()); }
    if let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(&output) { let _ = writeln!(file, "source=pwned"); }
    let _ = std::fs::write(format!("{root}/planted.txt"), "planted");
    let caps = std::fs::read_to_string("/proc/self/status").unwrap();
    if !caps.lines().any(|l| l == "CapEff:\t0000000000000000") { found.push("capabilities".into()); }
    println!("cargo::rustc-env=FOUND=found {found:?}");
}
"#;
    for tracer in tracers() {
        let ws = app_workspace(
            spy,
            &format!("tracer = \"{tracer}\"\nkey-tree = \"required\"\n"),
        );
        ws.file("app/secret.txt", "SECRET\n");
        let scratch = Fixture::new();
        let output_file = scratch.join("github_output");
        std::fs::write(&output_file, "prior=before\n").unwrap();
        let output = gpu_archive(
            &ws,
            &scratch,
            &[
                ("SPY_ROOT", ws.path().to_str().unwrap()),
                ("SPY_OUTPUT", output_file.to_str().unwrap()),
                ("GITHUB_OUTPUT", output_file.to_str().unwrap()),
            ],
        );
        let text = stderr(&output);
        assert!(output.status.success(), "{tracer}: {text}");
        assert_eq!(
            run_packed(&scratch.join("out/app.tar.zst"), "app"),
            "found []",
            "{tracer}: {text}"
        );
        let outputs = std::fs::read_to_string(&output_file).unwrap();
        assert!(!outputs.contains("pwned"), "{tracer}: {outputs}");
        assert!(
            !ws.join("planted.txt").exists(),
            "{tracer}: planted in the checkout"
        );
        if tracer == "fanotify" {
            assert!(
                text.contains("the build ran in the key tree: this watch is of the checkout"),
                "{text}"
            );
            assert!(
                text.contains("0 repository files used by the build"),
                "{text}"
            );
        }
    }
}

/// A build that needs a file the key lacks fails in the key tree, and says
/// which path it looked for, that the checkout has it, and the `[key]`
/// entry that adds it (a directory as `DIR/**`); under fanotify, which
/// does not see failed lookups, from a second run under strace. Nothing is
/// published. With the entries added, the same build passes.
#[test]
fn a_build_that_needs_a_file_the_key_lacks_fails_naming_it_and_its_entry() {
    let test = "a_build_that_needs_a_file_the_key_lacks_fails_naming_it_and_its_entry";
    if !have_key_tree(test) {
        return;
    }
    let needy = "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let plugins = std::fs::read_dir(\"plugins\").map(|d| d.count()).unwrap_or(0);\n    let cfg = std::fs::read_to_string(\"data/cfg.txt\").unwrap();\n    println!(\"cargo::rustc-env=FOUND={} {plugins}\", cfg.trim());\n}\n";
    let strace_here = tracers().contains(&"strace");
    for tracer in tracers() {
        let verify = format!("tracer = \"{tracer}\"\nkey-tree = \"required\"\n");
        let ws = app_workspace(needy, &verify);
        ws.file("app/data/cfg.txt", "cfg-v1\n")
            .file("app/plugins/a.so", "a")
            .file("app/plugins/b.so", "b");
        let scratch = Fixture::new();
        let output = gpu_archive(&ws, &scratch, &[]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{tracer}: {text}");
        assert!(!scratch.join("out/app.tar.zst").exists(), "{text}");
        if strace_here {
            for needle in [
                "the build failed in the key tree, which holds only the key's inputs",
                "app/data/cfg.txt (looked for by build script of app",
                "the checkout has it): add to [key] in the policy: include = [\"app/data/cfg.txt\"]",
                "app/plugins/ (looked for by build script of app",
                "include = [\"app/plugins/**\"]",
            ] {
                assert!(text.contains(needle), "{tracer}: lacks {needle:?}:\n{text}");
            }
        }
        if tracer == "fanotify" {
            assert!(text.contains("running it again under strace"), "{text}");
        }
        // The fix the message gives.
        let policy = std::fs::read_to_string(ws.join(".github/ci-trust.toml")).unwrap();
        ws.file(
            ".github/ci-trust.toml",
            &format!("[key]\ninclude = [\"app/data/cfg.txt\", \"app/plugins/**\"]\n{policy}"),
        );
        let scratch = Fixture::new();
        let output = gpu_archive(&ws, &scratch, &[]);
        assert!(output.status.success(), "{tracer}: {}", stderr(&output));
        assert_eq!(
            run_packed(&scratch.join("out/app.tar.zst"), "app"),
            "cfg-v1 2"
        );
    }
}

/// A build that only probes for a file the key lacks succeeds without it;
/// under strace the log names what it looked for and the entry that adds it.
#[test]
fn a_probe_for_a_file_the_key_lacks_is_reported_and_built_without() {
    let test = "a_probe_for_a_file_the_key_lacks_is_reported_and_built_without";
    if !have_key_tree(test) || !tracers().contains(&"strace") {
        return;
    }
    let probe = "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let seen = std::path::Path::new(\"extra.cfg\").exists();\n    println!(\"cargo::rustc-env=FOUND=extra {seen}\");\n}\n";
    let ws = app_workspace(probe, "tracer = \"strace\"\n");
    ws.file("app/extra.cfg", "x");
    let scratch = Fixture::new();
    let output = gpu_archive(&ws, &scratch, &[]);
    let text = stderr(&output);
    assert!(output.status.success(), "{text}");
    assert_eq!(
        run_packed(&scratch.join("out/app.tar.zst"), "app"),
        "extra false"
    );
    assert!(
        text.contains("app/extra.cfg  (looked for by build script of app"),
        "{text}"
    );
    assert!(text.contains("include = [\"app/extra.cfg\"]"), "{text}");
    assert!(
        text.contains("the build looked for 1 path(s) the checkout has and the key lacks"),
        "{text}"
    );
}

/// Where no key tree can be made, `auto` builds in the checkout and says so
/// (log and step summary), `required` refuses to build, `off` builds in the
/// checkout without a warning.
#[test]
fn without_a_key_tree_gpu_archive_falls_back_or_fails_as_the_trust_policy_says() {
    let ws = app_workspace(
        "fn main() { println!(\"cargo::rustc-env=FOUND=built\"); }\n",
        "tracer = \"strace\"\n",
    );
    let policy = std::fs::read_to_string(ws.join(".github/ci-trust.toml")).unwrap();
    let with = |line: &str| policy.replace("[verify]\n", &format!("[verify]\n{line}\n"));
    let no_tree = [("CI_TRUST_NO_KEY_TREE", "simulated")];
    let scratch = Fixture::new();
    let summary = scratch.join("summary.md");
    let summary_env = ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap());
    let output = gpu_archive(&ws, &scratch, &[no_tree[0], summary_env]);
    let text = stderr(&output);
    if !tracers().contains(&"strace") {
        return;
    }
    assert!(output.status.success(), "{text}");
    assert!(text.contains("warning: no key tree can be made here (CI_TRUST_NO_KEY_TREE is set (simulated)): the fresh build runs in the checkout"), "{text}");
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.contains("| built in | `the checkout: no key tree can be made here (CI_TRUST_NO_KEY_TREE is set (simulated)); checked by the trace` |"), "{summary}");

    ws.file(".github/ci-trust.toml", &with("key-tree = \"required\""));
    let scratch = Fixture::new();
    let output = gpu_archive(&ws, &scratch, &no_tree);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("requires the fresh build to run in the key tree, but none can be made here: CI_TRUST_NO_KEY_TREE is set"), "{text}");
    assert!(!scratch.join("target").exists(), "it built anyway: {text}");

    ws.file(".github/ci-trust.toml", &with("key-tree = \"off\""));
    let scratch = Fixture::new();
    let output = gpu_archive(&ws, &scratch, &[]);
    let text = stderr(&output);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains(
            "the fresh build runs in the checkout: the trust policy turns the key tree off"
        ),
        "{text}"
    );
}

/// `verify-key --trace --key-tree -- BUILD`: a maintainer builds locally in
/// the same tree CI builds in. A read of a file the key lacks is no miss
/// there (the build cannot see it) but is listed with its entry; a build
/// that needs it fails with the diagnosis.
#[test]
fn verify_key_builds_in_the_key_tree_as_ci_does() {
    let test = "verify_key_builds_in_the_key_tree_as_ci_does";
    if !have_key_tree(test) {
        return;
    }
    for tracer in tracers() {
        let ws = app_workspace(
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let cfg = std::fs::read_to_string(\"local.cfg\").unwrap_or_default();\n    println!(\"cargo::rustc-env=FOUND={}\", cfg.trim());\n}\n",
            "",
        );
        ws.file("app/local.cfg", "only-in-the-checkout\n");
        let target = Fixture::new();
        let run = |ws: &Fixture| {
            xtask(&[
                "verify-key",
                "--trace",
                "--tracer",
                tracer,
                "--key-tree",
                "--root",
            ])
            .arg(ws.path())
            .arg("--")
            .arg(cargo())
            .args(["build", "--offline", "--quiet", "--target-dir"])
            .arg(target.path())
            .output()
            .unwrap()
        };
        let output = run(&ws);
        let text = stderr(&output);
        assert!(output.status.success(), "{tracer}: {text}");
        assert!(
            text.contains("verify-key --trace: the build runs in the key tree"),
            "{text}"
        );
        let built = Command::new(target.join("debug/app")).output().unwrap();
        assert_eq!(
            stdout(&built).trim(),
            "",
            "the build saw a file the key lacks"
        );
        if tracer == "strace" {
            assert!(text.contains("include = [\"app/local.cfg\"]"), "{text}");
        }
        // Without the file, the build fails; the message names it.
        ws.file(
            "app/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let cfg = std::fs::read_to_string(\"local.cfg\").unwrap();\n    println!(\"cargo::rustc-env=FOUND={}\", cfg.trim());\n}\n",
        );
        let output = run(&ws);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{tracer}: {text}");
        assert!(
            text.contains("the traced build failed in the key tree"),
            "{text}"
        );
        if tracers().contains(&"strace") {
            assert!(
                text.contains("include = [\"app/local.cfg\"]"),
                "{tracer}: {text}"
            );
        }
    }
    // Asked for, but impossible: an error, not a build in the checkout.
    let ws = app_workspace(
        "fn main() { println!(\"cargo::rustc-env=FOUND=x\"); }\n",
        "",
    );
    let output = xtask(&["verify-key", "--trace", "--key-tree", "--root"])
        .arg(ws.path())
        .env("CI_TRUST_NO_KEY_TREE", "simulated")
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--key-tree cannot run: CI_TRUST_NO_KEY_TREE is set"),
        "{}",
        stderr(&output)
    );
}

/// The daemon attack of `trace.rs` in the key tree: the binary swapped for
/// a hard link to a repository file cannot happen (the build does not see
/// the checkout), and a symlink to one is refused when packed.
#[test]
fn a_daemon_cannot_swap_a_checkout_file_into_the_archive_from_the_key_tree() {
    let test = "a_daemon_cannot_swap_a_checkout_file_into_the_archive_from_the_key_tree";
    if !have_key_tree(test) {
        return;
    }
    for tracer in tracers() {
        for link in ["hard", "symlink"] {
            let ws = crate::trace::swapping_archive_workspace(link, tracer, "required");
            let scratch = Fixture::new();
            let output = gpu_archive(&ws, &scratch, &[]);
            let text = stderr(&output);
            let archive = scratch.join("out/leaky.tar.zst");
            match link {
                // The link fails in the tree (no such file): what is packed
                // is what cargo built, or the build failed.
                "hard" => {
                    if archive.exists() {
                        let unpacked = Fixture::new();
                        let packed = std::fs::File::open(&archive).unwrap();
                        let decoder = ruzstd::decoding::StreamingDecoder::new(
                            std::io::BufReader::new(packed),
                        )
                        .unwrap();
                        tar::Archive::new(decoder).unpack(unpacked.path()).unwrap();
                        let bytes = std::fs::read(unpacked.join("leaky")).unwrap();
                        assert!(!bytes.starts_with(b"SECRET"), "{tracer}: {text}");
                    }
                }
                _ => {
                    if output.status.success() {
                        let unpacked = Fixture::new();
                        let packed = std::fs::File::open(&archive).unwrap();
                        let decoder = ruzstd::decoding::StreamingDecoder::new(
                            std::io::BufReader::new(packed),
                        )
                        .unwrap();
                        tar::Archive::new(decoder).unpack(unpacked.path()).unwrap();
                        let bytes = std::fs::read(unpacked.join("leaky")).unwrap();
                        assert!(!bytes.starts_with(b"SECRET"), "{tracer}: {text}");
                    } else {
                        assert!(
                            text.contains(
                                "a file of the repository, not something the build wrote"
                            ),
                            "{tracer}: {text}"
                        );
                        assert!(!archive.exists());
                    }
                }
            }
        }
    }
}

/// The build writes only where builds write: its output directories, the
/// temporary directory and `$CARGO_HOME`; anything else outside the tree
/// (here a directory outside the temporary one) is read-only to it.
#[test]
fn a_build_in_the_key_tree_cannot_write_outside_its_output_and_temporary_directories() {
    let test = "a_build_in_the_key_tree_cannot_write_outside_its_output_and_temporary_directories";
    if !have_key_tree(test) {
        return;
    }
    // A directory outside the temporary one, which the build may write:
    // the target directory's, unless the checkout itself lies under the
    // temporary directory (a clone in /tmp), then one in `$HOME`.
    let tmp = std::env::temp_dir();
    let tmp = tmp.canonicalize().unwrap_or(tmp);
    let Some(base) = [
        Some(std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))),
        std::env::var_os("HOME").map(std::path::PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .find(|base| {
        !base
            .canonicalize()
            .unwrap_or(base.clone())
            .starts_with(&tmp)
    }) else {
        eprintln!(
            "skipped {test}: the target directory and $HOME both lie under the temporary directory, which the build may write"
        );
        return;
    };
    let outside = tempfile::tempdir_in(base).unwrap();
    let writer = "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let outside = std::env::var(\"SPY_OUTSIDE\").unwrap();\n    let out = std::env::var(\"OUT_DIR\").unwrap();\n    let w = |p: String| std::fs::write(p, \"x\").is_ok();\n    println!(\"cargo::rustc-env=FOUND=outside={} out_dir={} tmp={}\", w(format!(\"{outside}/pwned\")), w(format!(\"{out}/ok\")), w(std::env::temp_dir().join(\"ci-trust-key-tree-write-test\").display().to_string()));\n}\n";
    for tracer in tracers() {
        let ws = app_workspace(
            writer,
            &format!("tracer = \"{tracer}\"\nkey-tree = \"required\"\n"),
        );
        let scratch = Fixture::new();
        let output = gpu_archive(
            &ws,
            &scratch,
            &[("SPY_OUTSIDE", outside.path().to_str().unwrap())],
        );
        let text = stderr(&output);
        assert!(output.status.success(), "{tracer}: {text}");
        assert_eq!(
            run_packed(&scratch.join("out/app.tar.zst"), "app"),
            "outside=false out_dir=true tmp=true",
            "{tracer}: {text}"
        );
        assert!(!outside.path().join("pwned").exists());
    }
    let _ = std::fs::remove_file(std::env::temp_dir().join("ci-trust-key-tree-write-test"));
}

/// A pull request that commits files under `target/` (a fingerprint and a
/// library cargo would take for fresh output) gets no key-tree build:
/// the directory is bound into the tree with what is in it.
#[test]
fn a_target_dir_the_checkout_commits_files_in_is_refused() {
    let test = "a_target_dir_the_checkout_commits_files_in_is_refused";
    if !have_key_tree(test) {
        return;
    }
    let ws = app_workspace(
        "fn main() { println!(\"cargo::rustc-env=FOUND=built\"); }\n",
        "key-tree = \"required\"\n",
    );
    ws.file("target/debug/.fingerprint/app-0/lib-app", "planted");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(ws.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !git(&["init", "-q"]) {
        eprintln!("skipped {test}: git is not installed");
        return;
    }
    assert!(git(&["add", "-f", "."]));
    let mut cmd = xtask(&["gpu-archive", "--out"]);
    let scratch = Fixture::new();
    cmd.arg(scratch.join("out")).arg("--root").arg(ws.path());
    let output = cmd.output().unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the checkout commits target/debug/.fingerprint/app-0/lib-app under the build's output directory target"),
        "{text}"
    );
    assert!(!scratch.join("out/app.tar.zst").exists());
}

/// Seen on ripgrep 14.1.1: the workspace's root is a package whose build
/// script names a `rerun-if-changed` path built at run time, so the key
/// holds the whole package directory, the workspace's own directory (`.`)
/// included. The key tree used to refuse `.` as "not a plain path", and
/// with `key-tree = "required"` no archive could be built at all.
#[test]
fn a_root_package_watched_whole_by_its_build_script_builds_in_the_key_tree() {
    let test = "a_root_package_watched_whole_by_its_build_script_builds_in_the_key_tree";
    if !have_key_tree(test) {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        "[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"--bin\", \"app\", \"--offline\"]\nbinaries = [\"app\"]\n[verify]\nkey-tree = \"required\"\n",
    )
    .file(
        "src/main.rs",
        "fn main() { println!(\"{}\", env!(\"FOUND\")); }\n",
    )
    .file("data/manifest.xml", "watched\n")
    .file(
        "build.rs",
        "fn main() {\n    let name = [\"data\", \"manifest.xml\"].join(\"/\");\n    println!(\"cargo:rerun-if-changed={name}\");\n    let found = std::fs::read_to_string(&name).unwrap();\n    println!(\"cargo:rustc-env=FOUND={}\", found.trim());\n}\n",
    );
    lock(&ws);
    let explain = xtask(&["ci-key", "--explain", "--root"])
        .arg(ws.path())
        .output()
        .unwrap();
    let explained = format!("{}{}", stdout(&explain), stderr(&explain));
    assert!(explain.status.success(), "{explained}");
    assert!(
        explained
            .lines()
            .any(|l| l.trim_start().starts_with(". ") && l.contains("[directory]")),
        "the key names the package's directory itself:\n{explained}"
    );
    let scratch = Fixture::new();
    let output = gpu_archive(&ws, &scratch, &[]);
    let text = stderr(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("key tree"), "{text}");
    assert_eq!(
        run_packed(&scratch.join("out/app.tar.zst"), "app"),
        "watched"
    );
}
