//! `ci-key` on what configuration hands to the build: symlinks met anywhere,
//! cargo's configuration (precedence, `include`, keys naming checkout files),
//! rustup's toolchain files, nextest's configuration, the archive recipe and
//! the build environment, and configured output directories. Real fixture
//! workspaces, the real binary, and a real `cargo build` where it matters.

use std::os::unix::fs::symlink;
use std::process::{Command, Output};

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

/// Environment variables of the test process that the key reads as build
/// configuration; each test sets the ones it wants explicitly.
const BUILD_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_INCREMENTAL",
];

fn run(f: &Fixture, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = xtask_cmd(args);
    cmd.arg("--root").arg(f.path());
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.output().expect("run xtask")
}

fn key_env(f: &Fixture, env: &[(&str, &str)]) -> String {
    let output = run(f, &["ci-key"], env);
    assert!(
        output.status.success(),
        "ci-key failed:\n{}",
        stderr(&output)
    );
    stdout(&output).trim().to_owned()
}

fn key(f: &Fixture) -> String {
    key_env(f, &[])
}

fn fails_with(f: &Fixture, needles: &[&str]) {
    let output = run(f, &["ci-key"], &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "expected exit 2:\n{err}");
    assert!(stdout(&output).is_empty(), "no key may be printed on error");
    for needle in needles {
        assert!(err.contains(needle), "stderr lacks {needle:?}:\n{err}");
    }
}

fn minimal(f: &Fixture) {
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file("src/lib.rs", "");
}

/// Changing `rel` must change the key of `f`.
fn assert_input(f: &Fixture, rel: &str) {
    let before = key(f);
    let path = f.join(rel);
    let mut text = std::fs::read(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    text.extend_from_slice(b"\n# changed\n");
    std::fs::write(&path, text).unwrap();
    assert_ne!(key(f), before, "{rel} must be a key input");
}

#[test]
fn files_behind_symlinks_met_anywhere_are_inputs() {
    let f = Fixture::new();
    minimal(&f);
    // The lockfile, the cargo configuration, a CI script and a directory
    // of CI scripts, each a link to a file kept elsewhere in the checkout.
    f.file("locks/Cargo.lock", "version = 4\n")
        .file("configs/cargo.toml", "[alias]\nx = \"build\"\n")
        .file("tools/build.sh", "#!/bin/sh\n")
        .file("tools/lib/common.sh", "#!/bin/sh\n");
    std::fs::remove_file(f.join("Cargo.lock")).unwrap();
    symlink("locks/Cargo.lock", f.join("Cargo.lock")).unwrap();
    std::fs::create_dir_all(f.join(".cargo")).unwrap();
    symlink("../configs/cargo.toml", f.join(".cargo/config.toml")).unwrap();
    std::fs::create_dir_all(f.join("scripts/ci")).unwrap();
    symlink("../../tools/build.sh", f.join("scripts/ci/build.sh")).unwrap();
    symlink("../../tools/lib", f.join("scripts/ci/lib")).unwrap();
    for rel in [
        "locks/Cargo.lock",
        "configs/cargo.toml",
        "tools/build.sh",
        "tools/lib/common.sh",
    ] {
        assert_input(&f, rel);
    }
    // `..` after a symlinked directory goes to the link target's parent.
    f.file("tools/neighbour.sh", "#!/bin/sh\n")
        .file("scripts/neighbour.sh", "decoy\n")
        .file(
            "src/lib.rs",
            "pub const N: &str = include_str!(\"../scripts/ci/lib/../neighbour.sh\");\n",
        );
    assert_input(&f, "tools/neighbour.sh");
}

#[test]
fn symlinks_leaving_the_checkout_are_refused() {
    let f = Fixture::new();
    minimal(&f);
    std::fs::create_dir_all(f.join("scripts/ci")).unwrap();
    symlink("/proc/self/cwd/Cargo.toml", f.join("scripts/ci/self.sh")).unwrap();
    fails_with(
        &f,
        &["scripts/ci/self.sh", "absolute path", "relative link"],
    );
    // The link text is the pull request's: a newline in it must not start a
    // line the runner would read as a workflow command.
    std::fs::remove_file(f.join("scripts/ci/self.sh")).unwrap();
    symlink("/x\n::error::pwned", f.join("scripts/ci/self.sh")).unwrap();
    let output = run(&f, &["ci-key"], &[]);
    let err = stderr(&output);
    assert!(
        !output.status.success() && err.contains("\\n::error::pwned"),
        "{err}"
    );
    assert!(!err.contains("\n::error"), "{err}");

    let g = Fixture::new();
    minimal(&g);
    std::fs::create_dir_all(g.join(".cargo")).unwrap();
    symlink("../../../../etc", g.join(".cargo/etc")).unwrap();
    fails_with(&g, &[".cargo/etc", "outside the checkout"]);

    // Through a directory link: `src/up` is `../..`, the checkout's parent.
    let h = Fixture::new();
    minimal(&h);
    symlink("../..", h.join("src/up")).unwrap();
    h.file(
        "src/lib.rs",
        "pub const X: &str = include_str!(\"up/etc/hostname\");\n",
    );
    fails_with(&h, &["outside the checkout"]);
}

#[test]
fn cargo_config_includes_are_inputs_and_cycles_are_refused() {
    let f = Fixture::new();
    minimal(&f);
    f.file(
        ".cargo/config.toml",
        "include = [\"extra.toml\", { path = \"../ci/cargo.toml\" }, { path = \"gone.toml\", optional = true }]\n",
    )
    .file(".cargo/extra.toml", "[alias]\ny = \"build\"\n")
    .file("ci/cargo.toml", "include = \"deeper.toml\"\n")
    .file("ci/deeper.toml", "[build]\nrustflags = [\"--cfg\", \"deep\"]\n");
    for rel in ["ci/cargo.toml", "ci/deeper.toml"] {
        assert_input(&f, rel);
    }
    f.file("ci/deeper.toml", "include = \"cargo.toml\"\n");
    fails_with(&f, &["include` cycle", "ci/cargo.toml"]);
    f.file("ci/deeper.toml", "include = \"../../outside.toml\"\n");
    fails_with(&f, &["ci/deeper.toml", "outside the checkout"]);
    // A FIFO would block the read forever.
    f.file("ci/deeper.toml", "include = \"pipe.toml\"\n");
    let status = Command::new("mkfifo")
        .arg(f.join("ci/pipe.toml"))
        .status()
        .unwrap();
    assert!(status.success());
    fails_with(&f, &["ci/pipe.toml", "regular file"]);
}

#[test]
fn dot_cargo_config_wins_over_config_toml_as_in_cargo() {
    // cargo: "If both files exist, Cargo will use the file without the
    // extension." Here `config` sends output to `out-a`, so `out-b` is an
    // ordinary directory of a package cargo watches whole.
    let f = Fixture::new();
    minimal(&f);
    f.file("build.rs", "fn main() {}\n")
        .file(".cargo/config", "[build]\ntarget-dir = \"out-a\"\n")
        .file(".cargo/config.toml", "[build]\ntarget-dir = \"out-b\"\n")
        .file("out-a/stale", "1")
        .file("out-b/table", "1");
    let before = key(&f);
    f.file("out-a/stale", "2");
    assert_eq!(key(&f), before, "out-a/ is the build output");
    assert_input(&f, "out-b/table");
}

#[test]
fn files_the_cargo_configuration_hands_to_the_build_are_inputs() {
    let f = Fixture::new();
    minimal(&f);
    f.file(
        ".cargo/config.toml",
        r#"[build]
rustc-wrapper = "tools/wrap.sh"
rustflags = ["@flags/args.txt", "-Clink-arg=-Tlink/gpu.ld", "-L", "native=libs", "--remap-path-prefix=/x=."]

[target.x86_64-unknown-linux-gnu]
linker = "tools/ld.sh"

[target.'cfg(unix)']
rustflags = ["-C", "link-args=-Wl,--version-script=link/ver.map"]

[source.crates-io]
replace-with = "vendored"

[source.vendored]
directory = "vendor"

[env]
KERNELS = { value = "kernels", relative = true }
TABLE = "assets/table.bin"
CARGO_WORKSPACE_DIR = { value = "", relative = true }
"#,
    )
    .file("tools/wrap.sh", "#!/bin/sh\nexec \"$@\"\n")
    .file("tools/ld.sh", "#!/bin/sh\n")
    .file("flags/args.txt", "--cfg\nfast\n")
    .file("link/gpu.ld", "SECTIONS {}\n")
    .file("link/ver.map", "{ global: *; };\n")
    .file("libs/libcuda_shim.a", "!<arch>\n")
    .file("vendor/dep/src/lib.rs", "pub fn f() {}\n")
    .file("kernels/k.ptx", ".version 8\n")
    .file("assets/table.bin", "t")
    .file("unrelated/notes.txt", "no one reads this\n");
    for rel in [
        "tools/wrap.sh",
        "tools/ld.sh",
        "flags/args.txt",
        "link/gpu.ld",
        "link/ver.map",
        "libs/libcuda_shim.a",
        "vendor/dep/src/lib.rs",
        "kernels/k.ptx",
        "assets/table.bin",
    ] {
        assert_input(&f, rel);
    }
    let before = key(&f);
    // (Not README.md: cargo hands that one's name to rustc.)
    f.file("unrelated/notes.txt", "still no one\n").file(
        "docs/guide.md",
        "the checkout itself, handed over by [env], is not read whole\n",
    );
    assert_eq!(
        key(&f),
        before,
        "only what the configuration names is added"
    );
    // The same through the environment, resolved from the checkout root.
    f.file("flags/env.txt", "--cfg\nenv\n");
    let with_env = key_env(&f, &[("RUSTFLAGS", "@flags/env.txt")]);
    f.file("flags/env.txt", "--cfg\nother\n");
    assert_ne!(key_env(&f, &[("RUSTFLAGS", "@flags/env.txt")]), with_env);
}

#[test]
fn an_argfile_in_rustflags_really_changes_the_build_and_the_key() {
    // Proof with the real compiler that the configuration changes what is
    // built: the argfile sets a cfg that picks the binary's output.
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file(
        "src/main.rs",
        "#[cfg(gpu_fast)]\nconst MODE: &str = \"fast\";\n#[cfg(not(gpu_fast))]\nconst MODE: &str = \"slow\";\nfn main() { println!(\"{MODE}\"); }\n",
    )
    .file(".cargo/config.toml", "[build]\nrustflags = [\"@flags/gpu.args\"]\n")
    .file("flags/gpu.args", "--cfg\ngpu_fast\n");
    // Cargo's own fingerprint does not track an argfile's content, so each
    // build gets a fresh target directory.
    let build_and_run = || {
        let target = tempfile::tempdir().unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["run", "--quiet", "--offline"])
            .current_dir(f.path());
        for var in BUILD_ENV {
            cmd.env_remove(var);
        }
        cmd.env("CARGO_TARGET_DIR", target.path());
        let output = cmd.output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output).trim().to_owned()
    };
    assert_eq!(build_and_run(), "fast");
    let before = key(&f);
    f.file("flags/gpu.args", "--cfg\nnot_fast\n");
    assert_eq!(build_and_run(), "slow", "the argfile changed the binary");
    assert_ne!(key(&f), before, "so the key must move");
}

#[test]
fn rust_toolchain_wins_over_rust_toolchain_toml_as_in_rustup() {
    // rustup: "If both files are present in a directory, the latter
    // [rust-toolchain] is used". A toolchain that does not exist proves
    // which file ci-key read.
    let f = Fixture::new();
    minimal(&f);
    f.file("rust-toolchain.toml", "[toolchain]\nchannel = \"stable\"\n")
        .file("rust-toolchain", "ci-key-test-no-such-toolchain\n");
    // rustup's proxy sets RUSTUP_TOOLCHAIN for the processes it starts,
    // which would override both files.
    let toolchain_key = |f: &Fixture| {
        let mut cmd = xtask_cmd(&["ci-key", "--root"]);
        cmd.arg(f.path()).env_remove("RUSTUP_TOOLCHAIN");
        cmd.output().unwrap()
    };
    let output = toolchain_key(&f);
    assert!(
        !output.status.success() && stderr(&output).contains("ci-key-test-no-such-toolchain"),
        "{}",
        stderr(&output)
    );
    f.file(
        "rust-toolchain",
        "[toolchain]\npath = \"/tmp/evil-toolchain\"\n",
    );
    let output = toolchain_key(&f);
    assert!(
        !output.status.success()
            && stderr(&output).contains("rust-toolchain:2: the toolchain is named by `path`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn nextest_configuration_is_an_input() {
    let f = Fixture::new();
    minimal(&f);
    let tool_config = f.join("ci/tool-nextest.toml");
    f.file(".config/nextest.toml", "[profile.ci]\nretries = 0\n")
        .file("ci/nextest.toml", "[profile.gpu]\nslow-timeout = \"60s\"\n")
        .file("ci/tool-nextest.toml", "[profile.gpu]\n")
        .file(
            ".github/ci-trust.toml",
            &format!(
                "[[archive]]\nfile = \"t.tar.zst\"\nnextest = [\"--config-file\", \"ci/nextest.toml\", \"--tool-config-file=mytool:{}\"]\n",
                tool_config.display()
            ),
        );
    for rel in [
        ".config/nextest.toml",
        "ci/nextest.toml",
        "ci/tool-nextest.toml",
    ] {
        assert_input(&f, rel);
    }
}

#[test]
fn the_recipe_and_the_build_environment_are_key_components() {
    let f = Fixture::new();
    minimal(&f);
    let policy = |args: &str| {
        f.file(
            ".github/ci-trust.toml",
            &format!("[[archive]]\nfile = \"t.tar.zst\"\nnextest = [{args}]\n"),
        );
    };
    policy("\"-p\", \"m\"");
    let base = key(&f);
    policy("\"-p\", \"m\", \"--features\", \"cuda\"");
    let featured = key(&f);
    assert_ne!(
        featured, base,
        "a changed recipe moves the key with no vN bump"
    );
    let output = run(&f, &["ci-key", "--explain"], &[]);
    let explain = stderr(&output);
    assert!(
        explain.contains("host") && explain.contains("\"--features\""),
        "{explain}"
    );
    for (var, value) in [
        ("RUSTFLAGS", "-Ctarget-cpu=native"),
        ("CARGO_ENCODED_RUSTFLAGS", "--cfg\x1fx"),
        ("CARGO_INCREMENTAL", "0"),
        ("CARGO_PROFILE_DEV_OPT_LEVEL", "3"),
        ("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER", "clang"),
        ("CARGO_BUILD_TARGET", "x86_64-unknown-linux-gnu"),
    ] {
        assert_ne!(
            key_env(&f, &[(var, value)]),
            featured,
            "{var} changes the build"
        );
    }
    // Where the output goes is not what it is.
    assert_eq!(
        key_env(&f, &[("CARGO_TARGET_DIR", "/tmp/elsewhere")]),
        featured
    );
}

#[test]
fn a_configured_target_dir_never_hides_sources() {
    // `data/` is both the configured output and what include_bytes! reads.
    let f = Fixture::new();
    minimal(&f);
    f.file(".cargo/config.toml", "[build]\ntarget-dir = \"data\"\n")
        .file("data/blob.bin", "payload")
        .file(
            "src/lib.rs",
            "pub static B: &[u8] = include_bytes!(\"../data/blob.bin\");\n",
        );
    fails_with(
        &f,
        &["data/blob.bin", "build.target-dir in .cargo/config.toml"],
    );

    // An output directory inside `src/`: the walk of the sources refuses it.
    let g = Fixture::new();
    minimal(&g);
    g.file(".cargo/config.toml", "[build]\ntarget-dir = \"src/gen\"\n")
        .file("src/gen/extra.rs", "pub fn hidden() {}\n");
    fails_with(&g, &["src/gen", "build.target-dir in .cargo/config.toml"]);

    // Inside a directory a build script watches.
    let h = Fixture::new();
    minimal(&h);
    h.file(
        "build.rs",
        "fn main() { println!(\"cargo:rerun-if-changed=assets\"); }\n",
    )
    .file(
        ".cargo/config.toml",
        "[build]\ntarget-dir = \"assets/out\"\n",
    )
    .file("assets/out/table.bin", "read by the build script");
    fails_with(&h, &["assets/out", "rerun-if-changed"]);
}

#[test]
fn verify_key_follows_the_configured_build_target() {
    // `[build] target` sends the build to `target/<triple>/debug`; verify-key
    // must read that directory, not the (absent) host one.
    let f = Fixture::new();
    minimal(&f);
    let host = Command::new("rustc").arg("-vV").output().unwrap();
    let host = stdout(&host)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .unwrap();
    f.file(
        ".cargo/config.toml",
        &format!("[build]\ntarget = \"{host}\"\n"),
    )
    .file(
        "src/lib.rs",
        "pub const D: &str = include_str!(\"d.txt\");\n",
    )
    .file("src/d.txt", "d");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--offline"]).current_dir(f.path());
    for var in BUILD_ENV {
        build.env_remove(var);
    }
    let output = build.output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(f.join(&format!("target/{host}/debug/deps")).is_dir());
    let output = run(&f, &["verify-key"], &[]);
    let report = stderr(&output);
    assert!(output.status.success(), "{report}");
    // The host directory exists too (cargo creates it), but holds no
    // dep-info: reading it would check nothing.
    let dep_infos: usize = report
        .split("read ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        dep_infos > 0,
        "verify-key read the wrong directory:\n{report}"
    );
}

#[test]
fn patches_and_target_dir_from_an_included_file_apply() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\npatched = \"1\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file("src/lib.rs", "")
    .file("build.rs", "fn main() {}\n")
    .file(".cargo/config.toml", "include = \"ci.toml\"\n")
    .file(
        ".cargo/ci.toml",
        "[patch.crates-io]\npatched = { path = \"third_party/patched\" }\n[build]\ntarget-dir = \"out\"\n",
    )
    .file(
        "third_party/patched/Cargo.toml",
        "[package]\nname = \"patched\"\nversion = \"1.0.0\"\nedition = \"2021\"\n",
    )
    .file("third_party/patched/src/lib.rs", "pub fn p() {}\n")
    .file("out/debug/stale", "1");
    let output = run(&f, &["ci-key", "--explain"], &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("[patch.crates-io] `patched` in .cargo/ci.toml"),
        "{}",
        stderr(&output)
    );
    assert_input(&f, "third_party/patched/src/lib.rs");
    let before = key(&f);
    f.file("out/debug/stale", "2");
    assert_eq!(
        key(&f),
        before,
        "out/ is the build output the included file sets"
    );
}

#[test]
fn config_given_on_the_recipes_command_line_is_read_too() {
    let f = Fixture::new();
    minimal(&f);
    f.file(
        ".github/ci-trust.toml",
        "[[archive]]\nfile = \"t.tar.zst\"\nnextest = [\"--config\", \"ci/gpu.toml\", \"--config=build.rustflags=['@flags/inline.args']\"]\n",
    )
    .file("ci/gpu.toml", "[build]\nrustc-wrapper = \"tools/wrap.sh\"\n")
    .file("tools/wrap.sh", "#!/bin/sh\n")
    .file("flags/inline.args", "--cfg\nx\n");
    for rel in ["ci/gpu.toml", "tools/wrap.sh", "flags/inline.args"] {
        assert_input(&f, rel);
    }
}
