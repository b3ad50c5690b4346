//! Edits a pull-request author can make that change what the build compiles
//! while leaving every file the key hashed untouched: each test reproduces
//! one such edit from the attack table (docs/key-attacks.md) and proves the
//! key now moves, or the check now fails closed. Real fixture workspaces,
//! the real binary, and real cargo builds where the build's change is the
//! point.

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

fn key(f: &Fixture) -> String {
    let output = xtask(f, &["ci-key"]);
    assert!(
        output.status.success(),
        "ci-key failed:\n{}",
        stderr(&output)
    );
    stdout(&output).trim().to_owned()
}

/// A real `cargo` command in the fixture, offline, with a clean build environment.
fn cargo_in(f: &Fixture, args: &[&str]) -> Output {
    let mut cmd = Command::new(cargo());
    cmd.args(args).arg("--offline").current_dir(f.path());
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    cmd.output().expect("run cargo")
}

fn package(f: &Fixture, dir: &str, name: &str, extra: &str) {
    f.file(
        &format!("{dir}/Cargo.toml"),
        &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{extra}"),
    );
}

/// Attack: add `README.md` beside a manifest. Cargo finds it at build time
/// and hands its name to rustc as `CARGO_PKG_README`, so code reading that
/// variable compiles differently; no hashed file changed.
#[test]
fn a_readme_cargo_finds_beside_a_manifest_moves_the_key() {
    let f = Fixture::new();
    package(&f, ".", "app", "");
    f.file("Cargo.lock", "version = 4\n").file(
        "src/main.rs",
        "fn main() { println!(\"{:?}\", option_env!(\"CARGO_PKG_README\")); }\n",
    );
    // Fresh builds, as on two CI runners: cargo's own freshness check does
    // not look for a new README.
    let out = Fixture::new();
    let run = |f: &Fixture, dir: &str| {
        let target = out.join(dir);
        let output = cargo_in(
            f,
            &["run", "--quiet", "--target-dir", target.to_str().unwrap()],
        );
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output)
    };
    // (The first build writes the lockfile: the key is taken after it.)
    let built_before = run(&f, "before");
    let key_before = key(&f);
    f.file("README.md", "# app\n");
    let built_after = run(&f, "after");
    assert_ne!(built_before, built_after, "the build must see the README");
    assert_ne!(key(&f), key_before, "an added README must move the key");

    // `readme = false` turns the lookup off: then the README is just a file.
    let g = Fixture::new();
    package(&g, ".", "app", "readme = false\n");
    g.file("Cargo.lock", "version = 4\n").file("src/lib.rs", "");
    let before = key(&g);
    g.file("README.md", "# app\n");
    assert_eq!(key(&g), before, "a README cargo does not use is no input");
}

/// Attack: add `.cargo/config.toml` (or `.cargo/config`, or a toolchain
/// file) in a member's directory. The root's cargo never reads it, but a
/// build script that builds kernels with a nested `cargo build` starts that
/// cargo in its package directory, which reads it, and what it includes.
#[test]
fn configuration_a_nested_cargo_would_read_moves_the_key() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/gpu\"]\nresolver = \"2\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file("crates/gpu/src/lib.rs", "")
    .file(
        "crates/gpu/build.rs",
        "fn main() { println!(\"cargo:rerun-if-changed=build.rs\"); }\n",
    );
    package(&f, "crates/gpu", "gpu", "");
    for probe in [
        "crates/gpu/.cargo/config.toml",
        "crates/gpu/.cargo/config",
        "crates/.cargo/config.toml",
        "crates/gpu/rust-toolchain.toml",
        "crates/rust-toolchain",
    ] {
        let before = key(&f);
        f.file(probe, "[env]\nKERNEL_FLAVOUR = \"evil\"\n");
        assert_ne!(key(&f), before, "adding {probe} must move the key");
        f.remove(probe);
        assert_eq!(key(&f), before, "removing {probe} restores the key");
    }
    // What such a configuration includes, and the files it hands to the
    // build, are inputs like the root's.
    f.file(
        "crates/gpu/.cargo/config.toml",
        "include = \"../../../ci/kernels.toml\"\n[build]\nrustc-wrapper = \"../../ci/wrap.sh\"\n",
    )
    .file("ci/kernels.toml", "[env]\nKERNEL_FLAVOUR = \"plain\"\n")
    .file("ci/wrap.sh", "#!/bin/sh\nexec \"$@\"\n");
    for rel in ["ci/kernels.toml", "ci/wrap.sh"] {
        let before = key(&f);
        let mut text = std::fs::read_to_string(f.join(rel)).unwrap();
        text.push_str("# changed\n");
        f.file(rel, &text);
        assert_ne!(key(&f), before, "{rel} must be a key input");
    }
}
