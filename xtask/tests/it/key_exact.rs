//! What the key must get right now that the archive is built from the key's
//! inputs alone (issue 17): directories and their entry sets, what a nested
//! cargo looks for, whole-package walks past crates that are no package of
//! the build, the root manifests of nested workspaces, assembler and linker
//! files, the fixes the reports suggest, every dep-info format cargo and
//! rustc write, and the tooling package of an adopted host.
//!
//! Each test is an edit a pull-request author controls, made on a real
//! fixture workspace and built with real cargo: the build's output changes,
//! so the key must move (or the check must fail closed).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

/// Environment a developer's shell may hold that moves the build.
const BUILD_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
    "CARGO_BUILD_TARGET",
];

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn xtask(f: &Fixture, args: &[&str]) -> Output {
    let mut cmd = xtask_cmd(args);
    cmd.arg("--root").arg(f.path());
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("run xtask")
}

fn key_of(root: &Path) -> String {
    let mut cmd = xtask_cmd(&["ci-key"]);
    cmd.arg("--root").arg(root);
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    let output = cmd.output().expect("run xtask");
    assert!(
        output.status.success(),
        "ci-key failed:\n{}",
        stderr(&output)
    );
    stdout(&output).trim().to_owned()
}

fn key(f: &Fixture) -> String {
    key_of(f.path())
}

/// A real `cargo` command in `dir`, offline, with a clean build environment.
fn cargo_at(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(cargo());
    cmd.args(args).arg("--offline").current_dir(dir);
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("run cargo")
}

fn lock(f: &Fixture) {
    let output = cargo_at(f.path(), &["generate-lockfile"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// `cargo run` of the tree at `dir` into a fresh target directory under
/// `out`: what the built program prints.
fn run_at(dir: &Path, out: &Fixture, name: &str) -> String {
    let target = out.join(name);
    let output = cargo_at(
        dir,
        &["run", "--quiet", "--target-dir", target.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

fn package(f: &Fixture, dir: &str, name: &str, extra: &str) {
    f.file(
        &format!("{dir}/Cargo.toml"),
        &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{extra}"),
    );
}

fn have(tool: &str) -> bool {
    crate::support::tool_available(
        tool,
        Command::new(tool).arg("--version"),
        &format!("`apt-get install {tool}`"),
    )
}

/// The tracers that run here (strace when installed, fanotify as root).
fn tracers() -> Vec<&'static str> {
    let mut found = Vec::new();
    if crate::support::tool_available(
        "strace",
        Command::new("strace").arg("-V"),
        "`apt-get install strace`",
    ) {
        found.push("strace");
    }
    let probe = xtask_cmd(&[
        "verify-key",
        "--trace",
        "--tracer",
        "fanotify",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    if !stderr(&probe).contains("fanotify is not permitted") {
        found.push("fanotify");
    }
    found
}

/// `verify-key --trace --tracer TRACER -- cargo build …` of `f`, into a
/// fresh target directory `out/name`.
fn traced(f: &Fixture, tracer: &str, out: &Fixture, name: &str, extra: &[&str]) -> Output {
    let cargo = cargo();
    let target = out.join(name);
    let mut args = vec![
        "verify-key",
        "--root",
        f.path().to_str().unwrap(),
        "--trace",
        "--tracer",
        tracer,
        "--",
        &cargo,
        "build",
        "--offline",
        "--quiet",
        "--target-dir",
        target.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut cmd = xtask_cmd(&args);
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("run xtask")
}

/// A build script that watches `plugins/` and compiles the names in it.
const LISTING_BUILD_SCRIPT: &str = r#"fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=plugins");
    let mut names: Vec<String> = std::fs::read_dir("plugins")
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    println!("cargo::rustc-env=PLUGINS={}", names.join(","));
}
"#;

/// Attack: add an empty directory to a directory the build script watches
/// and lists. No file changed, but the build compiled another list.
#[test]
fn an_empty_directory_in_a_watched_directory_moves_the_key() {
    let f = Fixture::new();
    package(&f, ".", "app", "");
    f.file("build.rs", LISTING_BUILD_SCRIPT)
        .file(
            "src/main.rs",
            "fn main() { println!(\"{}\", env!(\"PLUGINS\")); }\n",
        )
        .file("plugins/a.toml", "a\n");
    lock(&f);
    let out = Fixture::new();
    let (built, keyed) = (run_at(f.path(), &out, "main"), key(&f));
    std::fs::create_dir(f.join("plugins/extra")).unwrap();
    assert_ne!(run_at(f.path(), &out, "pr"), built, "the build lists it");
    assert_ne!(
        key(&f),
        keyed,
        "an empty directory the build lists must move the key"
    );
    // Its entry set is an input of its own, with the directory kind.
    let explain = xtask(&f, &["ci-key", "--explain"]);
    let text = stderr(&explain);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("plugins/extra ") && l.contains("[directory]")),
        "{text}"
    );
    // A renamed entry moves it too, though no file's bytes changed.
    let keyed = key(&f);
    std::fs::rename(f.join("plugins/extra"), f.join("plugins/other")).unwrap();
    assert_ne!(key(&f), keyed);
}

/// Attack: a submodule a fresh clone checks out as an empty directory (a
/// gitlink), in a package whose build script declares nothing, so cargo
/// watches the whole package. The script compiles whether it is there.
#[test]
fn a_gitlink_checked_out_as_an_empty_directory_is_an_input() {
    if !have("git") {
        return;
    }
    let git = |dir: &Path, args: &[&str]| {
        let output = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "protocol.file.allow=always",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {}", stderr(&output));
    };
    let sub = Fixture::new();
    sub.file("lib.c", "int f(void) { return 1; }\n");
    git(sub.path(), &["init", "-q"]);
    git(sub.path(), &["add", "."]);
    git(sub.path(), &["commit", "-qm", "sub"]);
    let origin = Fixture::new();
    package(&origin, ".", "app", "");
    origin
        .file(
            "build.rs",
            "fn main() {\n    println!(\"cargo::rustc-env=VENDORED={}\", std::path::Path::new(\"vendor/lib\").exists());\n}\n",
        )
        .file(
            "src/main.rs",
            "fn main() { println!(\"{}\", env!(\"VENDORED\")); }\n",
        );
    lock(&origin);
    git(origin.path(), &["init", "-q"]);
    git(origin.path(), &["add", "."]);
    git(origin.path(), &["commit", "-qm", "app"]);
    git(
        origin.path(),
        &[
            "submodule",
            "add",
            "-q",
            sub.path().to_str().unwrap(),
            "vendor/lib",
        ],
    );
    git(origin.path(), &["commit", "-qm", "vendor"]);
    let clones = Fixture::new();
    git(
        clones.path(),
        &["clone", "-q", origin.path().to_str().unwrap(), "c"],
    );
    let clone = clones.join("c");
    assert!(
        std::fs::read_dir(clone.join("vendor/lib"))
            .unwrap()
            .next()
            .is_none(),
        "a clone without --recurse-submodules checks the gitlink out empty"
    );
    let out = Fixture::new();
    let (built, keyed) = (run_at(&clone, &out, "with"), key_of(&clone));
    std::fs::remove_dir(clone.join("vendor/lib")).unwrap();
    assert_ne!(run_at(&clone, &out, "without"), built);
    assert_ne!(key_of(&clone), keyed, "the empty gitlink is an input");
}

/// The trace: a build script lists a directory that holds no file. Each
/// name it read was checked before, and there was none; now the listing
/// needs the directory's entry set in the key, and the suggested glob
/// provides it.
#[test]
fn a_listing_of_a_directory_needs_its_entry_set_in_the_key() {
    let f = Fixture::new();
    package(&f, "app", "app", "");
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("app/src/lib.rs", "pub const PLUGINS: &str = env!(\"PLUGINS\");\n")
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let n = std::fs::read_dir(\"../plugins\").unwrap().count();\n    println!(\"cargo::rustc-env=PLUGINS={n}\");\n}\n",
    );
    std::fs::create_dir_all(f.join("plugins/empty")).unwrap();
    lock(&f);
    let out = Fixture::new();
    for tracer in tracers() {
        f.file(".github/ci-trust.toml", "");
        let output = traced(&f, tracer, &out, &format!("{tracer}-1"), &[]);
        let report = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{tracer}: {report}");
        assert!(
            report.contains("plugins  (listed by build script of app")
                && report.contains("key.include = [\"plugins/**\"]"),
            "{tracer}: {report}"
        );
        // The suggestion covers what it claims.
        f.file(
            ".github/ci-trust.toml",
            "[key]\ninclude = [\"plugins/**\"]\n",
        );
        let output = traced(&f, tracer, &out, &format!("{tracer}-2"), &[]);
        assert!(output.status.success(), "{tracer}: {}", stderr(&output));
    }
}

/// The trace (strace sees metadata calls; fanotify does not): a build
/// script tests whether a directory exists. Nothing in the key says it
/// does, so a pull request removing it changes the build.
#[test]
fn strace_reports_an_existence_check_of_a_directory_the_key_does_not_imply() {
    if !tracers().contains(&"strace") {
        return;
    }
    let f = Fixture::new();
    package(&f, "app", "app", "");
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("app/src/lib.rs", "pub const ON: &str = env!(\"FEATURE_X\");\n")
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    println!(\"cargo::rustc-env=FEATURE_X={}\", std::path::Path::new(\"../feature_x\").is_dir());\n}\n",
    );
    std::fs::create_dir_all(f.join("feature_x")).unwrap();
    lock(&f);
    let out = Fixture::new();
    let output = traced(&f, "strace", &out, "first", &[]);
    let report = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains("feature_x  (examined by build script of app")
            && report.contains("cargo::rerun-if-changed=../feature_x"),
        "{report}"
    );
    // A directory an input lies in exists as far as the key says: the
    // check of `app/src`-like directories passes without its entry set.
    f.file("feature_x/marker.txt", "x\n").file(
        ".github/ci-trust.toml",
        "[key]\ninclude = [\"feature_x/marker.txt\"]\n",
    );
    let output = traced(&f, "strace", &out, "second", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A build script that runs `cargo metadata` in `tools/kernels` and
/// compiles in the workspace root that nested cargo found.
const NESTED_CARGO_BUILD_SCRIPT: &str = r#"fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    WATCH
    let out = std::process::Command::new(std::env::var("CARGO").unwrap())
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir("../tools/kernels")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let root = text.split("\"workspace_root\":\"").nth(1).unwrap().split('"').next().unwrap();
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let top = std::path::Path::new(&manifest_dir).parent().unwrap();
    let rel = std::path::Path::new(root).strip_prefix(top).unwrap();
    println!("cargo::rustc-env=KERNEL_ROOT=[{}]", rel.display());
}
"#;

/// Attack: a build script starts a nested cargo in a directory with no
/// manifest; cargo walks up for `Cargo.toml` and finds the root workspace.
/// A pull request adds `tools/kernels/Cargo.toml` (or one in `tools/`):
/// the nested cargo finds another workspace. The trace reports those
/// lookups until the script watches the directory, and then the key
/// records each absence, so adding one moves it.
#[test]
fn the_manifests_and_lockfiles_a_nested_cargo_looks_for_are_inputs() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file(
        "app/src/main.rs",
        "fn main() { println!(\"{}\", env!(\"KERNEL_ROOT\")); }\n",
    )
    .file(
        "app/build.rs",
        &NESTED_CARGO_BUILD_SCRIPT.replace("WATCH", ""),
    )
    .file("tools/kernels/kernel.cu", "__global__ void k() {}\n");
    package(&f, "app", "app", "");
    lock(&f);
    let out = Fixture::new();
    if tracers().contains(&"strace") {
        let output = traced(&f, "strace", &out, "unwatched", &[]);
        let report = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{report}");
        for probe in ["tools/kernels/Cargo.toml", "tools/Cargo.toml"] {
            assert!(
                report.contains(&format!("{probe}  (looked for (absent)")),
                "{probe}: {report}"
            );
        }
    }
    f.file(
        "app/build.rs",
        &NESTED_CARGO_BUILD_SCRIPT.replace(
            "WATCH",
            r#"println!("cargo::rerun-if-changed=../tools/kernels");"#,
        ),
    );
    if tracers().contains(&"strace") {
        let output = traced(&f, "strace", &out, "watched", &[]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let built = run_at(f.path(), &out, "main");
    assert_eq!(
        built.trim(),
        "[]",
        "the nested cargo found the root workspace"
    );
    for (probe, text) in [
        (
            "tools/kernels/Cargo.toml",
            "[package]\nname = \"kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\npath = \"kernel.rs\"\n[workspace]\n",
        ),
        ("tools/Cargo.toml", "[workspace]\nmembers = []\n"),
        ("tools/kernels/Cargo.lock", "version = 4\n"),
    ] {
        let before = key(&f);
        f.file(probe, text);
        assert_ne!(key(&f), before, "adding {probe} must move the key");
        if probe == "tools/kernels/Cargo.toml" {
            f.file("tools/kernels/kernel.rs", "");
            let pr = run_at(f.path(), &out, "pr");
            assert_eq!(pr.trim(), "[tools/kernels]", "the build changed");
            f.remove("tools/kernels/kernel.rs");
        }
        f.remove(probe);
        assert_eq!(key(&f), before);
    }
}

/// Attack: a package whose build script declares nothing (cargo watches
/// the whole package) reads a file of a test-fixture crate inside it. The
/// fixture has a `Cargo.toml` but is no package of the build, so no rule
/// of the key hashes it: the walk used to skip it all the same.
#[test]
fn a_whole_package_walk_enters_a_crate_that_is_no_package_of_the_build() {
    let f = Fixture::new();
    package(&f, ".", "app", "[workspace]\nmembers = [\"sub\"]\n");
    package(&f, "sub", "sub", "");
    f.file(
        "build.rs",
        "fn main() {\n    let t = std::fs::read_to_string(\"fixtures/proj/expected.txt\").unwrap();\n    println!(\"cargo::rustc-env=EXPECTED={}\", t.trim());\n}\n",
    )
    .file(
        "src/main.rs",
        "fn main() { println!(\"{}\", env!(\"EXPECTED\")); }\n",
    )
    .file("sub/src/lib.rs", "")
    .file("sub/notes.txt", "not read by any build\n")
    .file(
        "fixtures/proj/Cargo.toml",
        "[package]\nname = \"proj\"\nversion = \"0.1.0\"\n",
    )
    .file("fixtures/proj/expected.txt", "one\n");
    lock(&f);
    let out = Fixture::new();
    let (built, keyed) = (run_at(f.path(), &out, "main"), key(&f));
    f.file("fixtures/proj/expected.txt", "two\n");
    assert_ne!(run_at(f.path(), &out, "pr"), built);
    assert_ne!(
        key(&f),
        keyed,
        "the fixture crate is part of the package cargo watches"
    );
    // A member the key hashes under its own rules is still left to them.
    let keyed = key(&f);
    f.file("sub/notes.txt", "edited\n");
    assert_eq!(
        key(&f),
        keyed,
        "a member's other files are its own rules' to hash"
    );
}

/// Attack: a path dependency that belongs to a workspace of its own (a
/// vendored workspace) inherits its description from that workspace's root
/// manifest, which no package's manifest is. Edit the inherited value.
#[test]
fn the_root_manifest_of_a_path_dependencys_workspace_is_an_input() {
    let f = Fixture::new();
    package(
        &f,
        ".",
        "app",
        "[dependencies]\ndep = { path = \"vendor/ws/crates/dep\" }\n",
    );
    f.file(
        "src/main.rs",
        "fn main() { println!(\"{}\", dep::VERSION); }\n",
    )
    .file(
        "vendor/ws/Cargo.toml",
        "[workspace]\nmembers = [\"crates/dep\"]\n[workspace.package]\ndescription = \"one\"\n",
    )
    .file(
        "vendor/ws/crates/dep/Cargo.toml",
        "[package]\nname = \"dep\"\nversion = \"0.1.0\"\ndescription.workspace = true\nedition = \"2021\"\n",
    )
    .file(
        "vendor/ws/crates/dep/src/lib.rs",
        "pub const VERSION: &str = env!(\"CARGO_PKG_DESCRIPTION\");\n",
    );
    lock(&f);
    let out = Fixture::new();
    let (built, keyed) = (run_at(f.path(), &out, "main"), key(&f));
    let explain = stderr(&xtask(&f, &["ci-key", "--explain"]));
    assert!(
        explain
            .lines()
            .any(|l| l.trim_start().starts_with("vendor/ws/Cargo.toml ")
                && !l.contains("(absent)")),
        "{explain}"
    );
    f.file(
        "vendor/ws/Cargo.toml",
        "[workspace]\nmembers = [\"crates/dep\"]\n[workspace.package]\ndescription = \"two\"\n",
    );
    assert_ne!(run_at(f.path(), &out, "pr"), built);
    assert_ne!(key(&f), keyed);
}

/// A GPU-shaped host whose own xtask is a member of its workspace (as
/// cubecl's and wgpu's are; init-ci's thin xtask is a workspace of its own,
/// which the archives' builds never load, see `adoption_hosts`): cargo
/// loads every member's manifest for any build, so a traced fresh build of
/// a GPU package reads `xtask/Cargo.toml`. The key left the xtask out, and
/// every traced build of such a host failed. Every member is an input now,
/// manifest and sources, so the build passes and an edit to either moves
/// the key.
#[test]
fn a_traced_fresh_build_in_a_host_with_a_member_xtask_passes() {
    let host = Fixture::new();
    host.file(
        "Cargo.toml",
        "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\", \"xtask\"]\nexclude = [\"kernels\"]\n",
    )
    .file(
        "crates/gpu-core/Cargo.toml",
        "[package]\nname = \"gpu-core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\ncuda = []\n\n[dependencies]\nkernels = { path = \"../../kernels\" }\n",
    )
    .file(
        "crates/gpu-core/build.rs",
        "fn main() { println!(\"cargo:rerun-if-changed=build.rs\"); }\n",
    )
    .file(
        "crates/gpu-core/src/lib.rs",
        "pub fn scale(x: u32) -> u32 { kernels::FACTOR * x }\n#[cfg(feature = \"cuda\")]\npub fn on_gpu() -> bool { true }\n",
    )
    .file(
        "kernels/Cargo.toml",
        "[package]\nname = \"kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("kernels/src/lib.rs", "pub const FACTOR: u32 = 3;\n")
    .file(
        "xtask/Cargo.toml",
        "[package]\nname = \"xtask\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n",
    )
    .file("xtask/src/main.rs", "fn main() {}\n")
    .file(
        ".github/ci-trust.toml",
        "[[archive]]\nfile = \"gpu.tar.zst\"\nnextest = [\"-p\", \"gpu-core\", \"--features\", \"cuda\"]\n",
    );
    let lock = cargo_at(host.path(), &["generate-lockfile"]);
    assert!(lock.status.success(), "{}", stderr(&lock));
    let out = Fixture::new();
    for tracer in &tracers() {
        let output = traced(
            &host,
            tracer,
            &out,
            tracer,
            &["-p", "gpu-core", "--features", "cuda", "--locked"],
        );
        let report = stderr(&output);
        assert!(output.status.success(), "{tracer}: {report}");
    }
    let explain = stderr(&xtask(&host, &["ci-key", "--explain"]));
    assert!(
        explain
            .lines()
            .any(|l| l.trim_start().starts_with("xtask/Cargo.toml ")),
        "{explain}"
    );
    // A member is an input like any other: its manifest and its sources.
    let keyed = key(&host);
    host.file("xtask/src/main.rs", "fn main() {}\n// edited\n");
    let after_source = key(&host);
    assert_ne!(after_source, keyed, "the member xtask's sources are inputs");
    host.file(
        "xtask/Cargo.toml",
        "[package]\nname = \"xtask\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n# edited\n",
    );
    assert_ne!(key(&host), after_source, "cargo reads the xtask's manifest");
}

/// A package with every kind of target (a library that is also a cdylib,
/// whose rustc dep-info has several outputs; a binary, an example, an
/// integration test, a bench, a build script) and an example whose proc
/// macro makes rustc read `data/x.txt`, which no static reading finds.
fn every_target_workspace() -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\", \"mac\"]\nresolver = \"2\"\n",
    );
    package(
        &f,
        "app",
        "app",
        "[lib]\ncrate-type = [\"rlib\", \"cdylib\"]\n[[bench]]\nname = \"b\"\nharness = false\n[dev-dependencies]\nmac = { path = \"../mac\" }\n",
    );
    f.file("app/src/lib.rs", "pub fn f() -> u32 { 1 }\n")
        .file(
            "app/src/main.rs",
            "fn main() { println!(\"{}\", app::f()); }\n",
        )
        .file(
            "app/build.rs",
            "fn main() { println!(\"cargo::rerun-if-changed=build.rs\"); }\n",
        )
        .file(
            "app/examples/ex.rs",
            "const X: &str = mac::embed!();\nfn main() { println!(\"{X}{}\", app::f()); }\n",
        )
        .file("app/data/x.txt", "read through a proc macro\n")
        .file(
            "app/tests/t.rs",
            "#[test]\nfn t() { assert_eq!(app::f(), 1); }\n",
        )
        .file("app/benches/b.rs", "fn main() {}\n");
    package(&f, "mac", "mac", "[lib]\nproc-macro = true\n");
    f.file(
        "mac/src/lib.rs",
        "use proc_macro::TokenStream;\n#[proc_macro]\npub fn embed(_: TokenStream) -> TokenStream {\n    \"include_str!(\\\"../data/x.txt\\\")\".parse().unwrap()\n}\n",
    );
    lock(&f);
    f
}

/// `verify-key` exited 2 on any target directory where cargo built an
/// example: cargo's own dep-info beside the final artifacts is one line,
/// not rustc's format. Every format is read now, on real builds: rustc's
/// (one output, and several for a cdylib), and cargo's with absolute paths
/// and, under `build.dep-info-basedir`, relative ones. Cargo's files are
/// read, not skipped: with rustc's dep-info of the example gone, the miss
/// is still found through them.
#[test]
fn verify_key_reads_every_dep_info_format_cargo_and_rustc_write() {
    let f = every_target_workspace();
    let out = Fixture::new();
    for (name, basedir) in [("absolute", None), ("relative", Some("."))] {
        if let Some(dir) = basedir {
            f.file(
                ".cargo/config.toml",
                &format!("[build]\ndep-info-basedir = \"{dir}\"\n"),
            );
        }
        let target = out.join(name);
        let target = target.to_str().unwrap();
        let build = cargo_at(
            f.path(),
            &["build", "--all-targets", "--quiet", "--target-dir", target],
        );
        assert!(build.status.success(), "{}", stderr(&build));
        let example = out.join(&format!("{name}/debug/examples/ex.d"));
        let cargo_written = std::fs::read_to_string(&example).unwrap();
        match basedir {
            None => {
                assert!(cargo_written.contains(f.path().join("app/data/x.txt").to_str().unwrap()))
            }
            Some(_) => assert!(cargo_written.contains(" app/data/x.txt"), "{cargo_written}"),
        }
        let several =
            std::fs::read_to_string(out.join(&format!("{name}/debug/deps/app.d"))).unwrap();
        assert_eq!(
            several.matches(": ").count(),
            3,
            "rustc's rules for .d, .rlib and .so: {several}"
        );
        let verify = xtask(&f, &["verify-key", "--target-dir", target]);
        let report = stderr(&verify);
        assert_eq!(verify.status.code(), Some(1), "{name}: {report}");
        assert!(
            report.contains("app/data/x.txt  (read by compilation of crate `ex`)"),
            "{name}: {report}"
        );
        // Only cargo's file of the example is left: it names the file too.
        for entry in std::fs::read_dir(out.join(&format!("{name}/debug/examples"))).unwrap() {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_str().unwrap();
            if file.starts_with("ex-") && file.ends_with(".d") {
                std::fs::remove_file(&path).unwrap();
            }
        }
        let verify = xtask(&f, &["verify-key", "--target-dir", target]);
        let report = stderr(&verify);
        assert_eq!(verify.status.code(), Some(1), "{name}: {report}");
        assert!(
            report.contains("app/data/x.txt  (read by the artifact `ex` (cargo's dep-info))"),
            "{name}: {report}"
        );
        // Keyed, it passes.
        f.file(
            ".github/ci-trust.toml",
            "[key]\ninclude = [\"app/data/x.txt\"]\n",
        );
        let verify = xtask(&f, &["verify-key", "--target-dir", target]);
        assert!(verify.status.success(), "{name}: {}", stderr(&verify));
        f.file(".github/ci-trust.toml", "");
    }
}

/// Attack: the assembler reads files rustc's dep-info never lists:
/// `.incbin` embeds a file's bytes, `.include` another assembler source,
/// both resolved from rustc's working directory (the workspace root), in a
/// template written inline or `include_str!`d. Edit any of them: the
/// program changes, and the key must move. A file an operand chooses is
/// refused.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn the_files_an_assembler_template_reads_are_inputs() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/a\"]\nresolver = \"2\"\n",
    );
    package(&f, "crates/a", "a", "");
    f.file(
        "crates/a/src/main.rs",
        r#"std::arch::global_asm!(
    ".section .rodata",
    ".global BLOB",
    "BLOB:",
    ".incbin \"assets/blob.bin\"",
    ".byte 0",
);
std::arch::global_asm!(include_str!("../boot.s"));
extern "C" {
    static BLOB: u8;
    static BOOT: u8;
}
fn text(p: *const u8) -> &'static str {
    unsafe { std::ffi::CStr::from_ptr(p.cast()) }.to_str().unwrap()
}
fn main() {
    println!("{} {}", text(unsafe { &BLOB }), text(unsafe { &BOOT }));
}
"#,
    )
    .file(
        "crates/a/boot.s",
        ".section .rodata\n.global BOOT\nBOOT:\n.include \"assets/more.s\"\n",
    )
    .file("assets/more.s", ".incbin \"assets/inner.bin\"\n.byte 0\n")
    .file("assets/blob.bin", "blob")
    .file("assets/inner.bin", "inner");
    lock(&f);
    let out = Fixture::new();
    let built = run_at(f.path(), &out, "main");
    assert_eq!(built.trim(), "blob inner");
    for (file, text) in [
        ("assets/blob.bin", "BLOB"),
        (
            "assets/more.s",
            ".incbin \"assets/inner.bin\"\n.ascii \"!\"\n.byte 0\n",
        ),
        ("assets/inner.bin", "INNER"),
    ] {
        let (before, keyed) = (run_at(f.path(), &out, "before"), key(&f));
        f.file(file, text);
        assert_ne!(
            run_at(f.path(), &out, "after"),
            before,
            "{file} changes the program"
        );
        assert_ne!(key(&f), keyed, "{file} must be an input");
    }
    // rustc's dep-info does not list them; the trace sees rustc open them.
    for tracer in tracers() {
        let output = traced(&f, tracer, &out, tracer, &[]);
        assert!(output.status.success(), "{tracer}: {}", stderr(&output));
    }
    // A file name an operand chooses cannot be known: refused until declared.
    f.file(
        "crates/a/src/main.rs",
        "std::arch::global_asm!(\".incbin \\\"assets/{}.bin\\\"\", const 1);\nfn main() {}\n",
    );
    let refused = xtask(&f, &["ci-key"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("crates/a/src/main.rs:1: global_asm! names a `.incbin \"assets/{}.bin\"` whose file an asm! operand chooses")
            && stderr(&refused).contains("[[key.dynamic-include]]"),
        "{}",
        stderr(&refused)
    );
    // Under another name the template would go unread: refused.
    f.file(
        "crates/a/src/main.rs",
        "use std::arch::global_asm as ga;
ga!(\".incbin \\\"assets/blob.bin\\\"\");
fn main() {}
",
    );
    let refused = xtask(&f, &["ci-key"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("`use … global_asm as ga;` renames an assembler macro"),
        "{}",
        stderr(&refused)
    );
}

/// An assembler template a `macro_rules!` body builds from its callers'
/// tokens (issue 18, from Rust-CUDA's `optix_device` and `cuda_std`):
/// `concat!("…", stringify!($num))`, and a workspace macro's output
/// (`load_scope!($s)`) among the pieces. Nothing a call passes can spell
/// `.incbin` or `.include`, so no file is read: it keys (it was refused),
/// and the program is real code that builds and runs.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn an_assembler_template_built_from_a_callers_token_keys() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/a\"]\nresolver = \"2\"\n",
    );
    package(&f, "crates/a", "a", "");
    f.file(
        "crates/a/src/main.rs",
        r#"macro_rules! width {
    ($n:tt) => { stringify!($n) };
}
macro_rules! report {
    ($name:ident, $num:tt) => {
        fn $name() -> u32 {
            let out: u32;
            unsafe {
                std::arch::asm!(
                    concat!("mov {0:e}, ", stringify!($num)),
                    concat!("add {0:e}, ", width!($num)),
                    out(reg) out,
                );
            }
            out
        }
    };
    () => {
        report!(seven, 7);
    };
}
report!();
report!(two, 2);
fn main() {
    println!("{} {}", seven(), two());
}
"#,
    );
    lock(&f);
    let out = Fixture::new();
    assert_eq!(run_at(f.path(), &out, "main").trim(), "14 4");
    let keyed = xtask(&f, &["ci-key"]);
    assert!(keyed.status.success(), "{}", stderr(&keyed));
}

/// The same shape, but a call whose argument is a literal that makes the
/// template `.incbin "…"`: the assembler reads a file ci-key does not
/// expand, so that call is refused, by its line, with the entry to paste;
/// the other call is not blamed.
#[test]
fn a_call_whose_argument_can_spell_an_assembler_include_is_refused_by_name() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/a\"]\nresolver = \"2\"\n",
    );
    package(&f, "crates/a", "a", "");
    f.file(
        "crates/a/src/main.rs",
        r#"macro_rules! emit {
    ($t:literal) => {
        std::arch::global_asm!(concat!(".section .rodata\n", $t));
    };
}
emit!("nop");
emit!(".incbin \"assets/secret.bin\"");
fn main() {}
"#,
    )
    .file("assets/secret.bin", "secret");
    let refused = xtask(&f, &["ci-key"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let err = stderr(&refused);
    assert!(
        err.contains("crates/a/src/main.rs:7: emit! names arguments `\".incbin \\\"assets/secret.bin\\\"\"` that can spell an `.incbin`/`.include` directive")
            && err.contains("[[key.dynamic-include]]")
            && !err.contains("main.rs:6"),
        "{err}"
    );
}

/// tract's benchmark shape (`linalg/benches/arm64simd.rs`): a macro
/// `include_str!`s an assembler source whose path its callers complete,
/// through a second macro (`ksimd!` → `kloop!`). Each file it can name is
/// an input and is read for its own directives: the `.incbin` one of them
/// holds stays in the key. Edit the source or the file it `.incbin`s: the
/// program changes, and so must the key.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn an_assembler_source_a_macro_includes_from_its_callers_path_stays_keyed() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/a\"]\nresolver = \"2\"\n",
    );
    package(&f, "crates/a", "a", "");
    f.file(
        "crates/a/src/main.rs",
        r#"macro_rules! kloop {
    ($dir:literal, $path:literal) => {
        std::arch::global_asm!(include_str!(concat!("../asm/", $dir, "/", $path)));
    };
}
macro_rules! ksimd {
    ($path:literal) => {
        kloop!("simd", $path);
    };
}
ksimd!("k/one.tmpli");
extern "C" {
    static ONE: u8;
}
fn main() {
    let text = unsafe { std::ffi::CStr::from_ptr((&ONE as *const u8).cast()) };
    println!("{}", text.to_str().unwrap());
}
"#,
    )
    .file(
        "crates/a/asm/simd/k/one.tmpli",
        ".section .rodata\n.global ONE\nONE:\n.incbin \"assets/one.bin\"\n.byte 0\n",
    )
    .file("assets/one.bin", "one");
    lock(&f);
    let out = Fixture::new();
    assert_eq!(run_at(f.path(), &out, "main").trim(), "one");
    for (file, text) in [
        ("assets/one.bin", "ONE"),
        (
            "crates/a/asm/simd/k/one.tmpli",
            ".section .rodata\n.global ONE\nONE:\n.ascii \"!\"\n.incbin \"assets/one.bin\"\n.byte 0\n",
        ),
    ] {
        let (before, keyed) = (run_at(f.path(), &out, "before"), key(&f));
        f.file(file, text);
        assert_ne!(
            run_at(f.path(), &out, "after"),
            before,
            "{file} changes the program"
        );
        assert_ne!(key(&f), keyed, "{file} must be an input");
    }
}

/// SHA-256 of a built file, to tell two builds apart.
#[cfg(target_os = "linux")]
fn digest(path: &Path) -> String {
    let output = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// Attack: a linker response file. A build script's literal
/// `rustc-link-arg=@link/args.rsp` (or the configuration's
/// `rustflags = ["-Clink-arg=@…"]`) makes the linker read the file and the
/// version script it names; neither was an input. Edit the version script:
/// the binary's exported symbols change under the same key.
#[test]
#[cfg(target_os = "linux")]
fn a_linker_response_file_and_the_files_it_names_are_inputs() {
    let f = Fixture::new();
    package(&f, ".", "app", "");
    f.file(
        "build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    println!(\"cargo::rustc-link-arg=@link/args.rsp\");\n}\n",
    )
    .file(
        "src/main.rs",
        "#[no_mangle]\npub extern \"C\" fn exported_one() -> u32 { 1 }\nfn main() { println!(\"{}\", exported_one()); }\n",
    )
    .file("link/args.rsp", "-Wl,--export-dynamic -Wl,--version-script=link/app.map\n")
    .file("link/app.map", "{ global: exported_one; local: *; };\n");
    lock(&f);
    let out = Fixture::new();
    let build = |name: &str| {
        let target = out.join(name);
        let output = cargo_at(
            f.path(),
            &["build", "--quiet", "--target-dir", target.to_str().unwrap()],
        );
        assert!(output.status.success(), "{}", stderr(&output));
        digest(&target.join("debug/app"))
    };
    let (built, keyed) = (build("main"), key(&f));
    f.file("link/app.map", "{ global: *; };\n");
    assert_ne!(build("pr"), built, "the version script shapes the binary");
    assert_ne!(key(&f), keyed, "a file a response file names is an input");
    let keyed = key(&f);
    f.file("link/args.rsp", "-Wl,--export-dynamic\n");
    assert_ne!(key(&f), keyed, "the response file is an input");

    // The configuration's rustflags: the same, through an argfile of rustc.
    let g = Fixture::new();
    package(&g, ".", "app", "");
    g.file(
        "src/main.rs",
        "#[no_mangle]\npub extern \"C\" fn exported_one() -> u32 { 1 }\nfn main() { println!(\"{}\", exported_one()); }\n",
    )
    .file(".cargo/config.toml", "[build]\nrustflags = [\"@ci/rustc.args\"]\n")
    .file("ci/rustc.args", "-Clink-arg=@ci/link.rsp\n")
    .file("ci/link.rsp", "-Wl,--version-script=ci/app.map\n")
    .file("ci/app.map", "{ global: *; };\n");
    lock(&g);
    for file in ["ci/link.rsp", "ci/app.map"] {
        let keyed = key(&g);
        let text = std::fs::read_to_string(g.join(file)).unwrap();
        g.file(file, &format!("{text} "));
        assert_ne!(
            key(&g),
            keyed,
            "{file}, named through an argfile, is an input"
        );
    }

    // Named at run time, the response file is verify-key's to check after
    // the build, with the files it names.
    let h = Fixture::new();
    package(&h, ".", "app", "");
    h.file(
        "build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let dir = std::env::var(\"CARGO_MANIFEST_DIR\").unwrap();\n    println!(\"cargo::rustc-link-arg=@{dir}/link/args.rsp\");\n}\n",
    )
    .file("src/main.rs", "fn main() {}\n")
    .file("link/args.rsp", "-Wl,--version-script=link/app.map\n")
    .file("link/app.map", "{ global: *; };\n");
    lock(&h);
    let target = out.join("h");
    let output = cargo_at(
        h.path(),
        &["build", "--quiet", "--target-dir", target.to_str().unwrap()],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let verify = xtask(
        &h,
        &["verify-key", "--target-dir", target.to_str().unwrap()],
    );
    let report = stderr(&verify);
    assert_eq!(verify.status.code(), Some(1), "{report}");
    for miss in ["link/args.rsp  (read by", "link/app.map  (read by"] {
        assert!(report.contains(miss), "{miss}: {report}");
    }
}

/// Builds `main_rs` (its `blob` symbol holds `secret.bin`'s 8 bytes, read by
/// the assembler) twice, `secret.bin` edited between: the program changes,
/// so ci-key must refuse or move the key (the asm-attack review's shape).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn an_assembled_secret_is_keyed_or_refused(main_rs: &str) {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/a\"]\nresolver = \"2\"\n",
    );
    package(&f, "crates/a", "a", "");
    f.file(
        "crates/a/src/main.rs",
        &format!(
            "{main_rs}\nextern \"C\" {{\n    static blob: [u8; 8];\n}}\nfn main() {{\n    println!(\"{{:?}}\", unsafe {{ blob }});\n}}\n"
        ),
    )
    .file("secret.bin", "AAAAAAAA");
    lock(&f);
    let keyed = xtask(&f, &["ci-key"]);
    if keyed.status.code() == Some(2) {
        return;
    }
    assert!(keyed.status.success(), "{}", stderr(&keyed));
    let out = Fixture::new();
    let before = (run_at(f.path(), &out, "before"), key(&f));
    f.file("secret.bin", "BBBBBBBB");
    let after = (run_at(f.path(), &out, "after"), key(&f));
    assert_ne!(after.0, before.0, "secret.bin changes the program");
    assert_ne!(after.1, before.1, "secret.bin must be an input");
}

/// `concat!` takes a char literal's value: `'\x2e'` is the `.` of a
/// `.incbin` no string literal spells.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn an_assembler_template_with_an_escaped_char_literal_is_keyed_or_refused() {
    an_assembled_secret_is_keyed_or_refused(
        r#"macro_rules! emit {
    ($t:literal) => {
        std::arch::global_asm!(concat!(".section .rodata\n.globl blob\nblob:\n", '\x2e', "incbin \"secret.bin\"\n", $t));
    };
}
emit!(".text\n");"#,
    );
}

/// The assembler's macro language pastes `.incbin` from `\a\b`, `.irp`'s
/// `\d` and `\()`: no substring of the template spells it.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn an_assembler_template_pasting_a_directive_with_assembler_macros_is_keyed_or_refused() {
    for body in [
        r#".macro m a, b\n.\\a\\b \"secret.bin\"\n.endm\nm inc, bin"#,
        r#".irp d, incbin\n.\\d \"secret.bin\"\n.endr"#,
        r#".macro m\n.inc\\()bin \"secret.bin\"\n.endm\nm"#,
    ] {
        an_assembled_secret_is_keyed_or_refused(&format!(
            "std::arch::global_asm!(\".section .rodata\\n.globl blob\\nblob:\\n{body}\\n.text\\n\");"
        ));
        an_assembled_secret_is_keyed_or_refused(&format!(
            "macro_rules! emit {{\n    ($t:literal) => {{\n        std::arch::global_asm!(concat!(\".section .rodata\\n.globl blob\\nblob:\\n{body}\\n\", $t));\n    }};\n}}\nemit!(\".text\\n\");"
        ));
    }
}

/// A `sym` operand substitutes the symbol's name, which `#[export_name]`
/// makes `.incbin`: the template holds only `{} "…"`.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[ignore = "open: asm-attack review, a sym operand named by #[export_name] spells the directive"]
fn an_assembler_sym_operand_exported_as_a_directive_is_keyed_or_refused() {
    an_assembled_secret_is_keyed_or_refused(
        r#"#[export_name = ".incbin"]
pub static MARK: u8 = 0;
std::arch::global_asm!(".section .rodata\n.globl blob\nblob:\n{} \"secret.bin\"\n.text\n", sym MARK);"#,
    );
}
