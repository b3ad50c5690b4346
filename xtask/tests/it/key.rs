//! `cargo xtask ci-key` on real fixture workspaces, through the real binary
//! and the real `cargo metadata`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

/// Runs `ci-key` and returns the key, failing the test with stderr otherwise.
fn key(fixture: &Fixture) -> String {
    key_with(fixture, &[])
}

fn key_with(fixture: &Fixture, extra: &[&str]) -> String {
    let mut args = vec!["ci-key"];
    args.extend_from_slice(extra);
    let output = fixture.xtask(&args);
    assert!(
        output.status.success(),
        "ci-key failed:\n{}",
        stderr(&output)
    );
    let key = stdout(&output).trim().to_owned();
    assert!(
        !key.contains('\n') && !key.is_empty(),
        "stdout must hold the key alone: {key:?}"
    );
    key
}

fn explain(fixture: &Fixture) -> String {
    let output = fixture.xtask(&["ci-key", "--explain"]);
    assert!(output.status.success(), "{}", stderr(&output));
    stderr(&output)
}

fn fails_with(fixture: &Fixture, needles: &[&str]) {
    let output = fixture.xtask(&["ci-key"]);
    let err = stderr(&output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "expected exit 2, got {:?}:\n{err}",
        output.status
    );
    assert!(stdout(&output).is_empty(), "no key may be printed on error");
    for needle in needles {
        assert!(err.contains(needle), "stderr lacks {needle:?}:\n{err}");
    }
}

/// A workspace with one input of every class the key must cover.
fn rich_workspace() -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        r#"[workspace]
members = ["crates/*"]
exclude = ["kernels", "shared", "vendor/patched"]
resolver = "2"

[workspace.dependencies]
shared = { path = "shared" }

[patch.crates-io]
patched = { path = "vendor/patched" }
"#,
    )
    .file("Cargo.lock", "version = 4\n")
    .file(
        "crates/app/Cargo.toml",
        r#"[package]
name = "app"
version = "0.1.0"
edition = "2021"

[dependencies]
kernels = { path = "../../kernels" }
shared = { workspace = true }

[features]
cuda = []

[[bin]]
name = "tool"
path = "tools/tool.rs"

[[example]]
name = "cuda_demo"
required-features = ["cuda"]
"#,
    )
    .file(
        "crates/app/src/lib.rs",
        r#"#![doc = include_str!("../../../docs/guide.md")]
mod plain;
#[path = "../extra/moved.rs"]
mod moved;
// include_str!("../commented.md") is a comment, not an embed.
pub const FAKE: &str = "include_str!(\"../in_literal.md\")";
pub const A: &str = include_str!("../data/a.txt");
pub static B: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/b.bin"));
include!(concat!(env!("OUT_DIR"), "/generated.rs"));
"#,
    )
    .file("crates/app/src/plain.rs", "pub fn plain() {}\n")
    .file("crates/app/extra/moved.rs", "pub const M: &str = include_str!(\"moved_data.txt\");\n")
    .file("crates/app/extra/moved_data.txt", "moved data\n")
    .file("crates/app/extra/unrelated.txt", "not read by anything\n")
    .file("crates/app/src/testdata/broken.rs", "this is not rust { at all\n")
    .file("crates/app/data/a.txt", "a\n")
    .file("crates/app/assets/b.bin", "b\n")
    .file("crates/app/tools/tool.rs", "fn main() {}\n")
    .file("crates/app/examples/cuda_demo.rs", "fn main() {}\n")
    .file("crates/app/tests/smoke.rs", "#[test] fn t() {}\n")
    .file("crates/app/benches/speed.rs", "fn main() {}\n")
    .file("crates/app/build.rs", "fn main() { println!(\"cargo:rerun-if-changed=kernels.cu\"); }\n")
    .file("crates/app/kernels.cu", "__global__ void k() {}\n")
    .file("crates/app/notes.txt", "not watched: the build script declares its inputs\n")
    .file("crates/app/README.md", "unembedded readme\n")
    .file("crates/noscript/Cargo.toml", "[package]\nname = \"noscript\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"build.rs\"\n")
    .file("crates/noscript/src/lib.rs", "")
    .file("crates/noscript/build.rs", "fn main() {}\n")
    .file("crates/noscript/data/table.csv", "watched by cargo's whole-package rule\n")
    .file("crates/dynamic/Cargo.toml", "[package]\nname = \"dynamic\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
    .file("crates/dynamic/src/lib.rs", "")
    .file(
        "crates/dynamic/build.rs",
        "fn main() { let d = \"x\"; println!(\"cargo:rerun-if-changed={d}\"); }\n",
    )
    .file("crates/dynamic/x/input.txt", "read at run time\n")
    .file("crates/ghost/Cargo.toml", "[package]\nname = \"ghost\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
    .file("crates/ghost/src/lib.rs", "")
    .file("crates/ghost/build.rs", "fn main() { println!(\"cargo::rerun-if-changed=missing.txt\"); }\n")
    .file("crates/ghost/other.txt", "cargo reruns the script every build, so this counts\n")
    .file("kernels/Cargo.toml", "[package]\nname = \"kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
    .file("kernels/src/lib.rs", "pub const PTX: &str = include_str!(\"../ptx/k.ptx\");\n")
    .file("kernels/ptx/k.ptx", ".version 8.0\n")
    .file("shared/Cargo.toml", "[package]\nname = \"shared\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
    .file("shared/src/lib.rs", "")
    .file("vendor/patched/Cargo.toml", "[package]\nname = \"patched\"\nversion = \"1.0.0\"\nedition = \"2021\"\n")
    .file("vendor/patched/src/lib.rs", "")
    .file("docs/guide.md", "# Guide embedded as crate docs\n")
    .file("docs/other.md", "not embedded\n")
    .file("scripts/ci/build.sh", "#!/bin/sh\n")
    .file("scripts/other/tool.sh", "#!/bin/sh\n")
    .file(".cargo/config.toml", "[alias]\nxtask = \"run -p xtask --\"\n")
    .file("rust-toolchain.toml", "[toolchain]\nchannel = \"stable\"\n")
    .file(".github/workflows/ci.yml", "on: push\n")
    .file(".github/dependabot.yml", "version: 2\n")
    .file("target/debug/leftover.rs", "build output\n")
    .file("README.md", "top readme\n");
    f
}

fn append(fixture: &Fixture, rel: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(fixture.join(rel))
        .unwrap();
    file.write_all(b"\n").unwrap();
}

#[test]
fn every_input_class_changes_the_key_and_unrelated_files_do_not() {
    let f = rich_workspace();
    let base = key(&f);
    let inputs = [
        "Cargo.lock",
        "Cargo.toml",
        "crates/app/Cargo.toml",
        "crates/app/src/lib.rs",
        "crates/app/src/plain.rs",
        "crates/app/src/testdata/broken.rs",
        "crates/app/extra/moved.rs",
        "crates/app/extra/moved_data.txt",
        "crates/app/data/a.txt",
        "crates/app/assets/b.bin",
        "crates/app/tools/tool.rs",
        "crates/app/examples/cuda_demo.rs",
        "crates/app/tests/smoke.rs",
        "crates/app/benches/speed.rs",
        "crates/app/build.rs",
        "crates/app/kernels.cu",
        "crates/noscript/data/table.csv",
        "crates/dynamic/x/input.txt",
        "crates/ghost/other.txt",
        "kernels/Cargo.toml",
        "kernels/src/lib.rs",
        "kernels/ptx/k.ptx",
        "shared/src/lib.rs",
        "vendor/patched/src/lib.rs",
        "docs/guide.md",
        "scripts/ci/build.sh",
        ".cargo/config.toml",
        "rust-toolchain.toml",
    ];
    let mut misses = Vec::new();
    for rel in inputs {
        let original = std::fs::read(f.join(rel)).unwrap();
        append(&f, rel);
        if key(&f) == base {
            misses.push(rel);
        }
        std::fs::write(f.join(rel), original).unwrap();
    }
    assert!(
        misses.is_empty(),
        "changing these inputs did not change the key: {misses:?}"
    );
    let unrelated = [
        "crates/app/README.md",
        "crates/app/notes.txt",
        "crates/app/extra/unrelated.txt",
        "docs/other.md",
        "scripts/other/tool.sh",
        ".github/workflows/ci.yml",
        ".github/dependabot.yml",
        "target/debug/leftover.rs",
        "README.md",
    ];
    let mut spurious = Vec::new();
    for rel in unrelated {
        append(&f, rel);
        if key(&f) != base {
            spurious.push(rel);
        }
    }
    assert!(
        spurious.is_empty(),
        "changing these unrelated files changed the key: {spurious:?}"
    );
    // A new file in a walked directory and an executable bit are inputs too.
    f.file("crates/app/src/new_file.txt", "new");
    let with_new = key(&f);
    assert_ne!(with_new, base);
    let script = f.join("scripts/ci/build.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_ne!(key(&f), with_new, "the executable bit is part of the key");
}

#[test]
fn explain_says_why_each_input_is_there() {
    let f = rich_workspace();
    let text = explain(&f);
    for needle in [
        "embedded by include_str! at crates/app/src/lib.rs:7",
        "embedded by include_bytes! at crates/app/src/lib.rs:8",
        "embedded by include_str! at crates/app/src/lib.rs:1",
        "module of lib `app` of app",
        "crate root of the bin `tool` of app",
        "rerun-if-changed of the build script of app",
        "declares no rerun-if-changed",
        "builds a rerun-if-changed path at run time",
        "missing.txt, which does not exist",
        "manifest of kernels (path dependency `kernels` of app)",
        "manifest of patched ([patch.crates-io] `patched` in Cargo.toml)",
        "1 OUT_DIR embeds covered",
        "rustc 1.",
        "never hashed: .github/workflows/**",
    ] {
        assert!(text.contains(needle), "--explain lacks {needle:?}:\n{text}");
    }
    assert!(
        !text.contains("crates/app/src/testdata/broken.rs: syn"),
        "unreferenced test data must not be parsed"
    );
    assert!(!text.contains("in_literal.md") && !text.contains("commented.md"));
}

#[test]
fn key_is_the_same_in_two_checkout_paths() {
    let f = rich_workspace();
    let copy = Fixture::new();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", f.path().display()))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert_ne!(f.path(), copy.path());
    assert_eq!(key(&f), key(&copy));
    // Touching a file (a new timestamp, same content) keeps the key.
    let path = f.join("crates/app/src/lib.rs");
    let text = std::fs::read(&path).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, text).unwrap();
    assert_eq!(key(&f), key(&copy));
}

fn minimal(f: &Fixture, lib: &str) {
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file("src/lib.rs", lib);
}

#[test]
fn absent_lockfile_is_hashed_explicitly() {
    let f = Fixture::new();
    minimal(&f, "");
    let with_lock = key(&f);
    f.remove("Cargo.lock");
    let text = explain(&f);
    assert!(
        text.contains("Cargo.lock") && text.contains("(absent)"),
        "{text}"
    );
    assert!(text.contains("commit the lockfile"), "{text}");
    assert_ne!(key(&f), with_lock);
}

#[test]
fn module_with_syntax_no_parser_knows_is_read_as_tokens() {
    let f = Fixture::new();
    minimal(&f, "mod newer;\n");
    f.file(
        "src/newer.rs",
        "struct S { a: u8 b: u8 }\npub const X: &str = include_str!(\"x.txt\");\n",
    )
    .file("src/x.txt", "x");
    let output = f.xtask(&["ci-key"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // The embed it holds still counts, even outside the walked directories.
    f.file("data.txt", "d");
    f.file(
        "src/newer.rs",
        "struct S { a: u8 b: u8 }\npub const X: &str = include_str!(\"../data.txt\");\n",
    );
    let before = key(&f);
    f.file("data.txt", "changed");
    assert_ne!(key(&f), before);
}

#[test]
fn unresolvable_include_is_an_error_until_declared() {
    let f = Fixture::new();
    minimal(
        &f,
        "pub const P: &str = \"x\";\n\npub const X: &str = include_str!(P);\n",
    );
    fails_with(
        &f,
        &[
            "src/lib.rs:3",
            "include_str!",
            "P",
            "[[key.dynamic-include]]",
            "site = \"src/lib.rs\"",
        ],
    );
    f.file("gen/one.txt", "1").file(
        ".github/ci-trust.toml",
        "[[key.dynamic-include]]\nsite = \"src/lib.rs\"\nfiles = [\"gen/*.txt\"]\nreason = \"P names one of the generated tables\"\n",
    );
    let before = key(&f);
    f.file("gen/one.txt", "2");
    assert_ne!(key(&f), before, "declared dynamic-include files are inputs");
}

#[test]
fn macro_rules_pattern_embeds_are_globbed() {
    let f = Fixture::new();
    minimal(
        &f,
        "macro_rules! ptx { ($n:literal) => { include_bytes!(concat!(\"../kernels/\", $n, \".ptx\")) }; }\npub static K: &[u8] = ptx!(\"k\");\n",
    );
    f.file("kernels/k.ptx", "ptx")
        .file("kernels/readme.txt", "r");
    let before = key(&f);
    f.file("kernels/k.ptx", "ptx2");
    let after = key(&f);
    assert_ne!(after, before);
    f.file("kernels/readme.txt", "r2");
    assert_eq!(key(&f), after, "files outside the pattern are not inputs");
    // A metavariable may hold `/`: `ptx!("sub/k")` reads kernels/sub/k.ptx.
    f.file("kernels/sub/k.ptx", "ptx");
    assert_input(&f, "kernels/sub/k.ptx");
}

#[test]
fn a_macro_rules_embed_resolves_from_each_file_that_calls_it() {
    // rustc resolves the include from the file that calls the macro, so the
    // definition's directory (`src/gpu/`) would be the wrong place to look.
    let f = Fixture::new();
    minimal(
        &f,
        "#[macro_use]\nmod gpu;\npub static K: &[u8] = ptx!(\"k\");\n",
    );
    f.file(
        "src/gpu/mod.rs",
        "macro_rules! ptx { ($n:literal) => { include_bytes!(concat!(\"../cuda/\", $n, \".ptx\")) }; }\n",
    )
    .file("cuda/k.ptx", "ptx")
    .file("src/cuda/decoy.ptx", "not read");
    let text = explain(&f);
    assert!(
        text.contains("cuda/k.ptx")
            && text.contains("embedded by include_bytes! in the expansion of ptx! at src/lib.rs:3"),
        "{text}"
    );
    let before = key(&f);
    f.file("cuda/k.ptx", "ptx2");
    assert_ne!(
        key(&f),
        before,
        "the file the caller's include reads is an input"
    );
}

#[test]
fn paths_leaving_the_repository_are_refused() {
    let f = Fixture::new();
    minimal(
        &f,
        "pub const S: &str = include_str!(\"../../outside.txt\");\n",
    );
    fails_with(&f, &["src/lib.rs:1", "outside the repository"]);
    let g = Fixture::new();
    minimal(&g, "");
    // A sibling of the fixture directory, unique to this fixture.
    let sibling_name = format!(
        "{}-sibling",
        g.path().file_name().unwrap().to_string_lossy()
    );
    g.file(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nsib = {{ path = \"../{sibling_name}\" }}\n"
        ),
    );
    let sibling = g.path().parent().unwrap().join(&sibling_name);
    std::fs::create_dir_all(sibling.join("src")).unwrap();
    std::fs::write(
        sibling.join("Cargo.toml"),
        "[package]\nname = \"sib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(sibling.join("src/lib.rs"), "").unwrap();
    fails_with(&g, &["package `sib`", "outside the repository root"]);
    std::fs::remove_dir_all(sibling).unwrap();
}

#[test]
fn embedding_a_workflow_file_is_refused() {
    let f = Fixture::new();
    minimal(
        &f,
        "pub const W: &str = include_str!(\"../.github/workflows/ci.yml\");\n",
    );
    f.file(".github/workflows/ci.yml", "on: push\n");
    fails_with(&f, &["src/lib.rs:1", "workflow files are excluded"]);
}

#[test]
fn input_errors_are_clear() {
    let empty = Fixture::new();
    empty.file("README.md", "no workspace here");
    fails_with(&empty, &["not a Cargo workspace", "--root"]);

    let bad = Fixture::new();
    bad.file("Cargo.toml", "[package]\nname = \"m\"\nversion = \n")
        .file("src/lib.rs", "");
    fails_with(&bad, &["cargo metadata", "Cargo.toml", "fix the manifest"]);

    let fifo = Fixture::new();
    minimal(&fifo, "");
    let status = std::process::Command::new("mkfifo")
        .arg(fifo.join("src/pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    fails_with(&fifo, &["src/pipe", "not a regular file"]);

    let dir_embed = Fixture::new();
    minimal(&dir_embed, "pub const D: &str = include_str!(\"data\");\n");
    std::fs::create_dir(dir_embed.join("src/data")).unwrap();
    fails_with(&dir_embed, &["src/lib.rs:1", "names a directory"]);

    let bad_policy = Fixture::new();
    minimal(&bad_policy, "");
    bad_policy.file(".github/ci-trust.toml", "[key]\nversoin = \"v2\"\n");
    fails_with(&bad_policy, &["ci-trust.toml", "line 2", "versoin"]);
}

#[test]
fn symlinked_module_is_hashed_as_link_and_target() {
    let f = Fixture::new();
    minimal(&f, "mod linked;\n");
    f.file("shared_code/impl.rs", "pub fn f() {}\n");
    std::os::unix::fs::symlink("../shared_code/impl.rs", f.join("src/linked.rs")).unwrap();
    let text = explain(&f);
    assert!(
        text.contains("[symlink]") && text.contains("target of symlink src/linked.rs"),
        "{text}"
    );
    let before = key(&f);
    f.file("shared_code/impl.rs", "pub fn g() {}\n");
    assert_ne!(key(&f), before, "the symlink's target content is an input");
}

#[test]
fn components_come_from_the_policy_lockfile_and_environment() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"g\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ncudarc = { version = \"0.17\", optional = true }\n[features]\ncuda = [\"cudarc/cuda-12080\"]\n",
    )
    .file(
        "Cargo.lock",
        "version = 4\n\n[[package]]\nname = \"cudarc\"\nversion = \"0.17.3\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\n",
    )
    .file("src/lib.rs", "")
    .file(
        ".github/ci-trust.toml",
        "[key]\nname = \"cuda-archive\"\nversion = \"v7\"\nlabels = [\"pjrt\"]\nlocked-crates = [{ name = \"cudarc\", feature-prefix = \"cuda-\" }]\ntoolkit-env = [\"PTX_TOOLKIT_VERSION\"]\n",
    );
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .env("PTX_TOOLKIT_VERSION", "12.8")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let key = stdout(&output).trim().to_owned();
    assert!(key.starts_with("cuda-archive-v7-pjrt-rustc1."), "{key}");
    assert!(key.contains("-cudarc0.17.3-cuda-12080-12.8-"), "{key}");
    assert!(
        key.len() <= 512
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    );
    let other = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .env("PTX_TOOLKIT_VERSION", "12.6")
        .output()
        .unwrap();
    assert_ne!(stdout(&other).trim(), key);
    let unset = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .env_remove("PTX_TOOLKIT_VERSION")
        .output()
        .unwrap();
    assert_eq!(unset.status.code(), Some(2));
    assert!(
        stderr(&unset).contains("PTX_TOOLKIT_VERSION, which is not set"),
        "{}",
        stderr(&unset)
    );
}

#[test]
fn json_manifest_diff_and_github_output() {
    let f = Fixture::new();
    minimal(&f, "");
    let out_dir = Fixture::new();
    let json = out_dir.join("old.json");
    let gh_output = out_dir.join("github_output");
    std::fs::write(&gh_output, "").unwrap();
    let output = xtask_cmd(&["ci-key", "--github-output", "--json"])
        .arg(&json)
        .arg("--root")
        .arg(f.path())
        .env("GITHUB_OUTPUT", &gh_output)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let key = stdout(&output).trim().to_owned();
    assert_eq!(
        std::fs::read_to_string(&gh_output).unwrap(),
        format!("key={key}\nartifact_name={key}\n")
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(manifest["key"], key.as_str());
    assert_eq!(manifest["components"][0]["name"], "name");
    let lib = manifest["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["path"] == "src/lib.rs")
        .unwrap();
    assert_eq!(lib["sha256"].as_str().unwrap().len(), 64);
    assert!(lib["reason"].as_str().unwrap().contains("crate root"));

    f.file("src/lib.rs", "pub fn changed() {}\n")
        .file("src/new.rs", "");
    f.file(".github/ci-trust.toml", "[key]\nversion = \"v2\"\n");
    let diff = f.xtask(&["ci-key", "--diff", json.to_str().unwrap()]);
    let text = stderr(&diff);
    assert!(text.contains("key changed"), "{text}");
    assert!(text.contains("changed  src/lib.rs"), "{text}");
    assert!(text.contains("added    src/new.rs"), "{text}");
    assert!(text.contains("version: v1 -> v2"), "{text}");

    let no_env = f.xtask(&["ci-key", "--github-output"]);
    assert_eq!(no_env.status.code(), Some(2));
    assert!(stderr(&no_env).contains("GITHUB_OUTPUT is not set"));
}

/// A script that proves it ran: it drops a marker and tries to forge the step's key output.
fn evil_script(dir: &Path, marker: &Path) -> std::path::PathBuf {
    let path = dir.join("evil.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ntouch '{}'\n[ -n \"$GITHUB_OUTPUT\" ] && echo key=forged >> \"$GITHUB_OUTPUT\"\nexit 0\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn ci_key_never_runs_code_from_the_checkout() {
    let f = Fixture::new();
    let scratch = Fixture::new();
    let marker = scratch.join("ran");
    let evil = evil_script(scratch.path(), &marker);
    let evil = evil.display();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\", \"mac\"]\nresolver = \"2\"\n",
    )
    .file(
        "app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nmac = { path = \"../mac\" }\n",
    )
    .file("app/src/lib.rs", "mac::evil!();\n")
    .file(
        "app/build.rs",
        &format!("fn main() {{ std::process::Command::new(\"{evil}\").status().unwrap(); }}\n"),
    )
    .file(
        "mac/Cargo.toml",
        "[package]\nname = \"mac\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
    )
    .file(
        "mac/src/lib.rs",
        &format!(
            "#[proc_macro] pub fn evil(_: proc_macro::TokenStream) -> proc_macro::TokenStream {{ std::process::Command::new(\"{evil}\").status().unwrap(); Default::default() }}\n"
        ),
    )
    .file(
        ".cargo/config.toml",
        &format!(
            "[build]\nrustc-wrapper = \"{evil}\"\nrustc = \"{evil}\"\n[env]\nRUSTC_BOOTSTRAP = \"1\"\n[alias]\nmetadata = \"run\"\n"
        ),
    );
    let gh_output = scratch.join("github_output");
    std::fs::write(&gh_output, "").unwrap();
    let output = xtask_cmd(&["ci-key", "--github-output", "--root"])
        .arg(f.path())
        .env("GITHUB_OUTPUT", &gh_output)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!marker.exists(), "ci-key ran code from the checkout");
    let key = stdout(&output).trim().to_owned();
    assert_eq!(
        std::fs::read_to_string(&gh_output).unwrap(),
        format!("key={key}\nartifact_name={key}\n")
    );

    // A toolchain named by path would be a binary from the checkout: refused, not run.
    let toolchain = f.join("evil-toolchain/bin");
    std::fs::create_dir_all(&toolchain).unwrap();
    for tool in ["rustc", "cargo"] {
        std::fs::copy(scratch.join("evil.sh"), toolchain.join(tool)).unwrap();
    }
    f.file(
        "rust-toolchain.toml",
        &format!(
            "[toolchain]\npath = \"{}\"\n",
            f.join("evil-toolchain").display()
        ),
    );
    let output = xtask_cmd(&["ci-key", "--github-output", "--root"])
        .arg(f.path())
        .env("GITHUB_OUTPUT", &gh_output)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("rust-toolchain.toml:2") && stderr(&output).contains("`channel`"),
        "{}",
        stderr(&output)
    );
    assert!(!marker.exists(), "ci-key ran the checkout's toolchain");
    assert!(
        !std::fs::read_to_string(&gh_output)
            .unwrap()
            .contains("forged")
    );
}

/// Changing `rel` must change the key of `f`.
fn assert_input(f: &Fixture, rel: &str) {
    let before = key(f);
    append(f, rel);
    assert_ne!(key(f), before, "{rel} must be a key input");
}

#[test]
fn an_included_rust_file_is_walked_like_a_module() {
    // rustc reads an `include!`d file as code of the including module, with
    // the included file's directory as its module directory: its embeds and
    // `mod` declarations are compile inputs too.
    let f = Fixture::new();
    minimal(&f, "include!(\"../gen/part.rs\");\n");
    f.file(
        "gen/part.rs",
        "pub const D: &str = include_str!(\"d.txt\");\nmod child;\n",
    )
    .file("gen/d.txt", "d")
    .file(
        "gen/child.rs",
        "pub const C: &str = include_str!(\"../data/c.txt\");\n",
    )
    .file("data/c.txt", "c");
    assert_input(&f, "gen/part.rs");
    assert_input(&f, "gen/d.txt");
    assert_input(&f, "gen/child.rs");
    assert_input(&f, "data/c.txt");
    // An included expression is no file of items; no warning says otherwise.
    f.file(
        "src/lib.rs",
        "pub static T: &[&str] = &include!(\"../gen/table.in\");\n",
    )
    .file("gen/table.in", "[include_str!(\"row.txt\")]\n")
    .file("gen/row.txt", "r");
    let output = f.xtask(&["ci-key"]);
    assert!(
        output.status.success() && !stderr(&output).contains("warning"),
        "{}",
        stderr(&output)
    );
    assert_input(&f, "gen/row.txt");
}

#[test]
fn a_build_script_shared_by_two_packages_is_read_for_each() {
    // Both packages build with the same script file; its `rerun-if-changed`
    // is relative to each package, so each package's `kernels/` is an input
    // and, since the script declares its inputs, nothing else of the package.
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"a\", \"b\"]\nresolver = \"2\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file(
        "shared/build.rs",
        "fn main() { println!(\"cargo:rerun-if-changed=kernels\"); }\n",
    );
    for name in ["a", "b"] {
        f.file(
            &format!("{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"../shared/build.rs\"\n"),
        )
        .file(&format!("{name}/src/lib.rs"), "")
        .file(&format!("{name}/kernels/k.cu"), "k")
        .file(&format!("{name}/notes.txt"), "n");
    }
    assert_input(&f, "a/kernels/k.cu");
    assert_input(&f, "b/kernels/k.cu");
    let before = key(&f);
    append(&f, "b/notes.txt");
    assert_eq!(key(&f), before, "b's script declares its inputs");
}

#[test]
fn a_crate_root_shared_by_two_packages_embeds_from_each_manifest_dir() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"a\", \"b\"]\nresolver = \"2\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file(
        "common/lib.rs",
        "pub const T: &str = include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/table.txt\"));\n",
    );
    for name in ["a", "b"] {
        f.file(
            &format!("{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\npath = \"../common/lib.rs\"\n"),
        )
        .file(&format!("{name}/table.txt"), "t");
    }
    assert_input(&f, "a/table.txt");
    assert_input(&f, "b/table.txt");
}

#[test]
fn a_doc_comment_is_not_a_rerun_declaration() {
    // The script declares nothing, so cargo reruns it when anything in the
    // package changes; the text in its documentation must not narrow that.
    let f = Fixture::new();
    minimal(&f, "");
    f.file(
        "build.rs",
        "//! No line is printed, not even cargo:rerun-if-changed=build.rs\nfn main() { let _ = std::fs::read(\"tables/t.txt\"); }\n",
    )
    .file("tables/t.txt", "t");
    assert_input(&f, "tables/t.txt");
}

#[test]
fn modules_behind_cfg_if_and_cfg_attr_paths_are_walked() {
    let f = Fixture::new();
    minimal(
        &f,
        "cfg_if::cfg_if! { if #[cfg(unix)] { mod unix; } }\n#[cfg_attr(target_os = \"linux\", path = \"../platform/linux.rs\")]\nmod sys;\n",
    );
    f.file(
        "src/unix.rs",
        "pub const U: &[u8] = include_bytes!(\"../blobs/u.bin\");\n",
    )
    .file("blobs/u.bin", "u")
    .file("platform/linux.rs", "pub fn f() {}\n");
    assert_input(&f, "blobs/u.bin");
    assert_input(&f, "platform/linux.rs");
    let output = f.xtask(&["ci-key"]);
    assert!(
        !stderr(&output).contains("mod sys;"),
        "an absent default file beside cfg_attr paths is no warning:\n{}",
        stderr(&output)
    );
}

#[test]
fn parent_of_a_symlinked_directory_is_resolved_as_the_compiler_does() {
    // `src/kernels` links to `shared/kernels`; rustc opens
    // `src/kernels/../data.txt`, which the operating system resolves to
    // `shared/data.txt`, not `src/data.txt`.
    let f = Fixture::new();
    minimal(&f, "mod kernels;\n");
    f.file(
        "shared/kernels/mod.rs",
        "pub const D: &str = include_str!(\"../data.txt\");\n",
    )
    .file("shared/data.txt", "shared")
    .file("src/data.txt", "decoy");
    std::os::unix::fs::symlink("../shared/kernels", f.join("src/kernels")).unwrap();
    assert_input(&f, "shared/data.txt");
}

#[test]
fn a_replace_section_path_is_a_compiled_package() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nold = \"0.1\"\n\n[replace]\n\"old:0.1.0\" = { path = \"vendor/old\" }\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file("src/lib.rs", "")
    .file(
        "vendor/old/Cargo.toml",
        "[package]\nname = \"old\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("vendor/old/src/lib.rs", "");
    assert_input(&f, "vendor/old/src/lib.rs");
    assert!(explain(&f).contains("[replace] `old:0.1.0` in Cargo.toml"));
}

#[test]
fn a_build_script_watching_git_head_is_a_warning_not_an_error() {
    // `println!("cargo:rerun-if-changed=.git/HEAD")` is how many scripts
    // stamp the commit id; git metadata is never hashed, and saying so must
    // not stop the key.
    let f = Fixture::new();
    minimal(&f, "");
    f.file(".git/HEAD", "ref: refs/heads/main\n").file(
        "build.rs",
        "fn main() {\n    println!(\"cargo:rerun-if-changed=.git/HEAD\");\n    println!(\"cargo:rerun-if-changed=build.rs\");\n}\n",
    );
    let output = f.xtask(&["ci-key"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(".git/HEAD (rerun-if-changed); git metadata is never a key input"),
        "{}",
        stderr(&output)
    );
    let before = key(&f);
    f.file(".git/HEAD", "ref: refs/heads/other\n");
    assert_eq!(key(&f), before);
    assert_input(&f, "build.rs");
}

#[test]
fn an_embedded_symlink_brings_its_target() {
    // rustc reads the bytes behind the link; the link text alone would let
    // the target change under an unchanged key.
    let f = Fixture::new();
    minimal(&f, "pub const D: &str = include_str!(\"../data.txt\");\n");
    f.file("big/data.txt", "one");
    std::os::unix::fs::symlink("big/data.txt", f.join("data.txt")).unwrap();
    assert_input(&f, "big/data.txt");
}

#[test]
fn a_declared_symlink_brings_its_target() {
    let f = Fixture::new();
    minimal(&f, "");
    f.file(
        "build.rs",
        "fn main() { println!(\"cargo:rerun-if-changed=table.txt\"); }\n",
    )
    .file("big/table.txt", "one");
    std::os::unix::fs::symlink("big/table.txt", f.join("table.txt")).unwrap();
    assert_input(&f, "big/table.txt");
}

#[test]
fn the_checkouts_configured_target_dir_is_build_output() {
    // The build writes to `out/`, as the checkout's cargo configuration says;
    // a script that watches the whole package must not make the key depend
    // on what an earlier build left there.
    let f = Fixture::new();
    minimal(&f, "");
    f.file(".cargo/config.toml", "[build]\ntarget-dir = \"out\"\n")
        .file("build.rs", "fn main() {}\n")
        .file("out/debug/stale.rlib", "one")
        .file("tables/t.txt", "t");
    // The environment would override the configuration, as it does for cargo.
    let key = || {
        let output = xtask_cmd(&["ci-key", "--root"])
            .arg(f.path())
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR")
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    let before = key();
    f.file("out/debug/stale.rlib", "two");
    assert_eq!(key(), before, "out/ is build output");
    f.file("tables/t.txt", "changed");
    assert_ne!(key(), before, "the rest of the package is watched");
    // A target directory over the sources would hide them: refused.
    f.file(".cargo/config.toml", "[build]\ntarget-dir = \".\"\n");
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .output()
        .unwrap();
    let err = stderr(&output);
    assert!(
        !output.status.success()
            && err.contains("holds package `m`")
            && err.contains("build.target-dir"),
        "{err}"
    );
}

#[test]
fn rustup_toolchain_in_the_environment_overrides_the_toolchain_file() {
    // rustup builds with RUSTUP_TOOLCHAIN over rust-toolchain.toml, so the
    // key's rustc must come from the same place. A toolchain that does not
    // exist proves which one ci-key asked for.
    let f = Fixture::new();
    minimal(&f, "");
    let version = std::process::Command::new("rustc")
        .arg("-V")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    f.file(
        "rust-toolchain.toml",
        &format!("[toolchain]\nchannel = \"{version}\"\n"),
    );
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .env("RUSTUP_TOOLCHAIN", "ci-key-test-no-such-toolchain")
        .output()
        .unwrap();
    assert!(
        !output.status.success() && stderr(&output).contains("rustc -V"),
        "{}",
        stderr(&output)
    );
}
