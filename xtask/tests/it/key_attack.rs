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

/// `xtask ARGS` with the fixture as working directory, `--root` left to ARGS.
fn xtask_in(f: &Fixture, args: &[&str]) -> Output {
    let mut cmd = xtask_cmd(args);
    cmd.current_dir(f.path());
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
    // The kernels are no package of the workspace: the build script builds
    // them with a nested cargo started in `kernels/`, and watches their sources.
    .file(
        "crates/gpu/build.rs",
        "fn main() {\n    println!(\"cargo:rerun-if-changed=build.rs\");\n    println!(\"cargo:rerun-if-changed=../../kernels/src\");\n}\n",
    )
    .file("kernels/src/lib.rs", "");
    package(&f, "crates/gpu", "gpu", "");
    for probe in [
        "kernels/.cargo/config.toml",
        "kernels/rust-toolchain.toml",
        "crates/gpu/.cargo/config.toml",
        "crates/gpu/.cargo/config",
        "crates/.cargo/config.toml",
        "crates/gpu/rust-toolchain.toml",
        "crates/rust-toolchain",
    ] {
        let before = key(&f);
        let parent = f.join(probe).parent().unwrap().to_path_buf();
        let parent_existed = parent.exists();
        f.file(probe, "[env]\nKERNEL_FLAVOUR = \"evil\"\n");
        assert_ne!(key(&f), before, "adding {probe} must move the key");
        f.remove(probe);
        if !parent_existed {
            // An empty `.cargo/` left behind is a directory of its own.
            assert_ne!(key(&f), before, "an empty {} is an input", parent.display());
            std::fs::remove_dir(&parent).unwrap();
        }
        assert_eq!(key(&f), before, "removing {probe} restores the key");
    }
    // A file where a directory would be: nothing below it exists.
    assert!(!f.join("crates/gpu/.cargo").exists());
    f.file("crates/gpu/.cargo", "not a directory\n");
    let with_file = key(&f);
    f.remove("crates/gpu/.cargo");
    // What such a configuration includes, and the files it hands to the
    // build, are inputs like the root's.
    f.file(
        "crates/gpu/.cargo/config.toml",
        "include = \"../../../ci/kernels.toml\"\n[build]\nrustc-wrapper = \"../../ci/wrap.sh\"\n",
    )
    .file("ci/kernels.toml", "[env]\nKERNEL_FLAVOUR = \"plain\"\n")
    .file("ci/wrap.sh", "#!/bin/sh\nexec \"$@\"\n");
    assert_ne!(key(&f), with_file);
    for rel in ["ci/kernels.toml", "ci/wrap.sh"] {
        let before = key(&f);
        let mut text = std::fs::read_to_string(f.join(rel)).unwrap();
        text.push_str("# changed\n");
        f.file(rel, &text);
        assert_ne!(key(&f), before, "{rel} must be a key input");
    }
}

/// A one-package workspace whose crate embeds `src/d.txt`, locked.
fn embedding_package(f: &Fixture) {
    package(f, ".", "m", "");
    f.file(
        "src/lib.rs",
        "pub const D: &str = include_str!(\"d.txt\");\n",
    )
    .file("src/d.txt", "d");
    let output = cargo_in(f, &["generate-lockfile"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The number in verify-key's "read N dep-info files".
fn dep_infos_read(report: &str) -> usize {
    report
        .split("read ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Residual: with `build.build-dir` set (cargo's intermediate artifacts,
/// stable since 1.91), the dep-info files are not under the target
/// directory; verify-key must read them where cargo wrote them.
#[test]
fn verify_key_reads_the_dep_info_in_the_configured_build_dir() {
    for build_dir in ["bdir", "{workspace-root}/bdir2"] {
        let f = Fixture::new();
        embedding_package(&f);
        f.file(
            ".cargo/config.toml",
            &format!("[build]\nbuild-dir = \"{build_dir}\"\n"),
        );
        let out = Fixture::new();
        let target = out.path().to_str().unwrap();
        let output = cargo_in(&f, &["build", "--quiet", "--target-dir", target]);
        assert!(output.status.success(), "{}", stderr(&output));
        let output = xtask(&f, &["verify-key", "--target-dir", target]);
        let report = stderr(&output);
        assert!(output.status.success(), "{build_dir}: {report}");
        assert!(dep_infos_read(&report) > 0, "{build_dir}: {report}");
    }
    // A template only cargo can compute is refused, not guessed.
    let f = Fixture::new();
    embedding_package(&f);
    f.file(
        ".cargo/config.toml",
        "[build]\nbuild-dir = \"/tmp/{workspace-path-hash}\"\n",
    );
    let output = xtask(&f, &["verify-key"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("{workspace-path-hash}"),
        "{}",
        stderr(&output)
    );
}

/// Residual: a traced command whose `--config` moves the target or build
/// directory into the checkout; what it writes and reads back there is build
/// output, on the first build and on the next one.
#[test]
fn verify_key_trace_follows_the_commands_config_target_and_build_dirs() {
    if !crate::support::tool_available(
        "strace",
        Command::new("strace").arg("-V"),
        "`apt-get install strace`",
    ) {
        return;
    }
    let f = Fixture::new();
    embedding_package(&f);
    let cargo = cargo();
    for config in ["build.target-dir=\"tgt\"", "build.build-dir=\"bd\""] {
        for run in ["first", "second"] {
            let root = f.path().to_str().unwrap();
            let output = xtask_in(
                &f,
                &[
                    "verify-key",
                    "--root",
                    root,
                    "--trace",
                    "--",
                    &cargo,
                    "build",
                    "--offline",
                    "--quiet",
                    "--config",
                    config,
                ],
            );
            let report = stderr(&output);
            assert!(output.status.success(), "{config}, {run} build:\n{report}");
        }
    }
    // The command sets the environment itself: `env CARGO_TARGET_DIR=… cargo …`.
    for run in ["first", "second"] {
        let root = f.path().to_str().unwrap();
        let output = xtask_in(
            &f,
            &[
                "verify-key",
                "--root",
                root,
                "--trace",
                "--",
                "env",
                "CARGO_TARGET_DIR=tgt-env",
                &cargo,
                "build",
                "--offline",
                "--quiet",
            ],
        );
        let report = stderr(&output);
        assert!(output.status.success(), "env, {run} build:\n{report}");
    }
    assert!(f.join("tgt/debug").is_dir() && f.join("bd/debug/deps").is_dir());
    assert!(f.join("tgt-env/debug").is_dir());
}

/// Attack on the dep-info fallback: the recipe's `--config` sends the
/// archive build elsewhere while stale dep-info from an older build sits in
/// the default target directory. The check must read the build it ran,
/// which read a file the key lacks, and publish nothing.
#[test]
fn gpu_archive_checks_the_build_where_the_recipes_config_sent_it() {
    let f = Fixture::new();
    let out = Fixture::new();
    let elsewhere = out.join("elsewhere");
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"mac\", \"user\"]\nresolver = \"2\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        &format!(
            "[[archive]]\nfile = \"user.tar.zst\"\nbuild = [\"-p\", \"user\", \"--bin\", \"user\", \"--offline\", \"--config\", \"build.target-dir='{}'\"]\nbinaries = [\"user\"]\n[verify]\nkey-tree = \"off\"\n",
            elsewhere.display()
        ),
    )
    .file(
        "mac/src/lib.rs",
        "use proc_macro::TokenStream;\n#[proc_macro]\npub fn data(_: TokenStream) -> TokenStream {\n    \"include_str!(concat!(env!(\\\"CARGO_MANIFEST_DIR\\\"), \\\"/data/x.txt\\\"))\".parse().unwrap()\n}\n",
    )
    .file(
        "user/src/main.rs",
        "fn main() { println!(\"{}\", mac::data!()); }\n",
    )
    .file("user/data/x.txt", "read through a proc macro\n")
    // An older build's dep-info, listing only key inputs.
    .file(
        "target/debug/deps/user-0.d",
        "/t/user-0: user/src/main.rs\n\nuser/src/main.rs:\n",
    );
    package(&f, "mac", "mac", "[lib]\nproc-macro = true\n");
    package(
        &f,
        "user",
        "user",
        "[dependencies]\nmac = { path = \"../mac\" }\n",
    );
    let output = cargo_in(&f, &["generate-lockfile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // No tracer: the dep-info check is all there is.
    let bin = Fixture::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in ["cargo", "rustc", "rustup", "cc"] {
        if let Some(found) = std::env::split_paths(&path)
            .map(|dir| dir.join(tool))
            .find(|candidate| candidate.is_file())
        {
            std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
        }
    }
    let mut cmd = xtask_cmd(&["gpu-archive", "--out"]);
    cmd.arg(out.join("archives"))
        .arg("--root")
        .arg(f.path())
        .env("PATH", bin.path());
    for var in BUILD_ENV {
        cmd.env_remove(var);
    }
    let output = cmd.output().unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("user/data/x.txt") && text.contains("not published under it"),
        "{text}"
    );
    assert!(!out.join("archives/user.tar.zst").exists(), "{text}");
}

/// Attack: add `.config/nextest.toml.toml`. With no `.config/nextest.toml`,
/// nextest's loader tries the name with `.toml` appended and loads it: an
/// `[profile.default.archive] include` there adds files to the archive.
#[test]
fn the_nextest_configuration_nextest_falls_back_to_moves_the_key() {
    let f = Fixture::new();
    package(&f, ".", "m", "");
    f.file("Cargo.lock", "version = 4\n").file("src/lib.rs", "");
    let before = key(&f);
    f.file(
        ".config/nextest.toml.toml",
        "[profile.default.archive]\ninclude = [{ path = \"debug/build\", relative-to = \"target\" }]\n",
    );
    assert_ne!(key(&f), before, "nextest reads .config/nextest.toml.toml");
    if !crate::support::has_nextest() {
        return;
    }
    // The real nextest: the fallback file shapes the archive.
    let out = Fixture::new();
    let archive = |name: &str| {
        let file = out.join(name);
        let output = cargo_in(
            &f,
            &[
                "nextest",
                "archive",
                "--archive-file",
                file.to_str().unwrap(),
                "--target-dir",
                out.join("target").to_str().unwrap(),
            ],
        );
        assert!(output.status.success(), "{}", stderr(&output));
        stderr(&output)
    };
    assert!(archive("with.tar.zst").contains("extra path"));
    f.remove(".config/nextest.toml.toml");
    assert!(!archive("without.tar.zst").contains("extra path"));
}

/// Attack on verify-key: a build script declares, at run time, a file
/// outside its package with a space after the `=`. Cargo trims the value
/// and watches the file; verify-key must check that file, not call the
/// untrimmed name a vanished path.
#[test]
fn verify_key_trims_declared_paths_as_cargo_does() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("app/src/lib.rs", "pub const C: &str = env!(\"SHARED\");\n")
    .file(
        "app/build.rs",
        "fn main() {\n    let path = \"../shared/x.txt\";\n    println!(\"cargo:rerun-if-changed= {}\", path);\n    let text = std::fs::read_to_string(path).unwrap();\n    println!(\"cargo:rustc-env=SHARED={}\", text.trim());\n}\n",
    )
    .file("shared/x.txt", "read by the build script\n");
    package(&f, "app", "app", "");
    let out = Fixture::new();
    let target = out.path().to_str().unwrap();
    let output = cargo_in(&f, &["build", "--quiet", "--target-dir", target]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    let report = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains("shared/x.txt") && report.contains("build script of app"),
        "{report}"
    );
}

/// Attack on verify-key: a build script hands the linker a search
/// directory in the checkout (`rustc-link-search`). No dep-info lists what
/// the linker takes from it, and it probes `libX.so` before `libX.a`, so a
/// library replaced or added there changes the binary under the same key.
/// verify-key must count the directory whole, until the key does.
#[test]
fn verify_key_checks_what_build_scripts_hand_to_the_linker() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("app/src/main.rs", "fn main() {}\n")
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let dir = std::env::var(\"CARGO_MANIFEST_DIR\").unwrap();\n    println!(\"cargo::rustc-link-search=native={dir}/libs\");\n    println!(\"cargo::rustc-link-arg=-Wl,--version-script={dir}/link/app.map\");\n}\n",
    )
    .file("app/libs/libshim.a", "!<arch>\n")
    .file("app/link/app.map", "{ global: *; };\n");
    package(&f, "app", "app", "");
    let out = Fixture::new();
    let target = out.path().to_str().unwrap();
    let output = cargo_in(&f, &["build", "--quiet", "--target-dir", target]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    let report = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    // The search directory's entry set too: the linker lists it.
    for miss in [
        "app/libs/libshim.a",
        "app/link/app.map",
        "app/libs  (read by",
    ] {
        assert!(report.contains(miss), "{miss}: {report}");
    }
    assert!(
        report.contains("key.include = [\"app/libs/**\"]"),
        "{report}"
    );
    // The trace sees the linker read the version script, and asks for the
    // directory whole too.
    let strace = crate::support::tool_available(
        "strace",
        Command::new("strace").arg("-V"),
        "`apt-get install strace`",
    );
    let traced = |name: &str| {
        let root = f.path().to_str().unwrap();
        let traced_target = out.join(name);
        let cargo = cargo();
        xtask_in(
            &f,
            &[
                "verify-key",
                "--root",
                root,
                "--trace",
                "--tracer",
                "strace",
                "--",
                &cargo,
                "build",
                "--offline",
                "--quiet",
                "--target-dir",
                traced_target.to_str().unwrap(),
            ],
        )
    };
    if strace {
        let output = traced("traced");
        let report = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{report}");
        assert!(
            report.contains("app/link/app.map")
                && report.contains("key.include = [\"app/link/**\"]"),
            "{report}"
        );
        // rustc lists the search directory: the same advice.
        assert!(
            report.contains("rustc (searching a -L directory)")
                && report.contains("key.include = [\"app/libs/**\"]"),
            "{report}"
        );
    }
    // `DIR/*` is not what the advice says: it leaves out the directory's
    // entry set, which the linker read.
    f.file(
        ".github/ci-trust.toml",
        "[key]\ninclude = [\"app/libs/*\", \"app/link/*\"]\n",
    );
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("app/libs  (read by"),
        "{}",
        stderr(&output)
    );
    // The advice, followed, covers what it claims: both checks pass.
    f.file(
        ".github/ci-trust.toml",
        "[key]\ninclude = [\"app/libs/**\", \"app/link/**\"]\n",
    );
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    assert!(output.status.success(), "{}", stderr(&output));
    if strace {
        let output = traced("traced-fixed");
        assert!(output.status.success(), "{}", stderr(&output));
    }
}

/// Attack on the trace: a build script bind-mounts a repository file over
/// a file in its `OUT_DIR` (in a user and mount namespace of its own) and
/// reads it there; the trace saw only a read of build output. A process
/// that changes its view of the file system is now a miss.
#[test]
fn a_build_that_mounts_a_repository_file_over_build_output_fails_the_trace() {
    if !crate::support::tool_available(
        "strace",
        Command::new("strace").arg("-V"),
        "`apt-get install strace`",
    ) {
        return;
    }
    // User namespaces may be off (a container, a hardened kernel): then
    // this cannot be built, and there is nothing to check.
    let probe = Command::new("unshare")
        .args(["-Urm", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !probe {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED a_build_that_mounts_a_repository_file_over_build_output_fails_the_trace: `unshare -Urm` does not run here"
        );
        return;
    }
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("app/src/lib.rs", "pub const S: &str = env!(\"SEEN\");\n")
    .file(
        "app/build.rs",
        r#"fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let view = format!("{}/view.txt", std::env::var("OUT_DIR").unwrap());
    std::fs::write(&view, "").unwrap();
    let hidden = format!("{}/../hidden.txt", std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let script = format!("mount --bind {hidden} {view} && cat {view}");
    let out = std::process::Command::new("unshare").args(["-Urm", "sh", "-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    println!("cargo::rustc-env=SEEN={}", String::from_utf8_lossy(&out.stdout).trim());
}
"#,
    )
    .file("hidden.txt", "not a key input\n");
    package(&f, "app", "app", "");
    let output = cargo_in(&f, &["generate-lockfile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let root = f.path().to_str().unwrap();
    let cargo = cargo();
    let traced = |tracer: &str| {
        // A fresh target directory each time, so that the build script runs.
        let out = Fixture::new();
        xtask_in(
            &f,
            &[
                "verify-key",
                "--root",
                root,
                "--trace",
                "--tracer",
                tracer,
                "--",
                &cargo,
                "build",
                "--offline",
                "--quiet",
                "--target-dir",
                out.path().to_str().unwrap(),
            ],
        )
    };
    let output = traced("strace");
    let report = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains("(unshare)") && report.contains("changed its view of the file system"),
        "{report}"
    );
    // fanotify sees the repository file opened on a mount that is not the
    // repository's (where this process may use fanotify).
    let output = traced("fanotify");
    let report = stderr(&output);
    if !report.contains("fanotify is not permitted") {
        assert_eq!(output.status.code(), Some(1), "{report}");
        assert!(
            // Named by the file the kernel opened (by inode); the reader
            // is named when it is still alive when looked up (its exec is
            // on a mount of its own namespace, which no mark covers).
            report.contains("hidden.txt  (read through a mount the build made by "),
            "{report}"
        );
    }
}

/// The rest of the nested-cargo class: a build script starts cargo in a
/// directory that is neither a package's nor one it watches. Main's build
/// finds no `.cargo/config` there, and a pull request could add one; the
/// trace reports the failed lookup until the key records the absence
/// (the script watches the directory).
#[test]
fn the_trace_reports_configuration_a_nested_cargo_looked_for_in_vain() {
    if !crate::support::tool_available(
        "strace",
        Command::new("strace").arg("-V"),
        "`apt-get install strace`",
    ) {
        return;
    }
    let build_script = |watch: &str| {
        format!(
            r#"fn main() {{
    println!("cargo::rerun-if-changed=build.rs");
    {watch}
    let status = std::process::Command::new(std::env::var("CARGO").unwrap())
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir("../tools/kernels")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}}
"#
        )
    };
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("app/src/lib.rs", "")
    .file("app/build.rs", &build_script(""))
    .file(
        "tools/kernels/Cargo.toml",
        "[package]\nname = \"kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
    )
    .file("tools/kernels/src/lib.rs", "");
    package(&f, "app", "app", "");
    let output = cargo_in(&f, &["generate-lockfile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = Fixture::new();
    let traced = |f: &Fixture, target: &str| {
        let root = f.path().to_str().unwrap();
        let target = out.join(target);
        let cargo = cargo();
        // Failed lookups are seen by strace only.
        xtask_in(
            f,
            &[
                "verify-key",
                "--root",
                root,
                "--trace",
                "--tracer",
                "strace",
                "--",
                &cargo,
                "build",
                "--offline",
                "--quiet",
                "--target-dir",
                target.to_str().unwrap(),
            ],
        )
    };
    let output = traced(&f, "first");
    let report = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(
        report.contains("tools/kernels/.cargo/config") && report.contains("looked for (absent)"),
        "{report}"
    );
    assert!(report.contains("rerun-if-changed"), "{report}");
    // Watching the directory puts the absence in the key: the trace passes.
    f.file(
        "app/build.rs",
        &build_script(r#"println!("cargo::rerun-if-changed=../tools/kernels");"#),
    );
    let output = traced(&f, "second");
    assert!(output.status.success(), "{}", stderr(&output));
}

/// Not an attack, a false alarm: `cargo clippy` shares the target
/// directory, and clippy-driver lists `clippy.toml` in the dep-info of its
/// check builds; verify-key after a clippy run must find it covered.
#[test]
fn lint_configuration_clippy_lists_in_dep_info_is_an_input() {
    let f = Fixture::new();
    package(&f, ".", "m", "");
    f.file("Cargo.lock", "version = 4\n")
        .file("src/lib.rs", "")
        .file("clippy.toml", "msrv = \"1.80\"\n");
    let before = key(&f);
    f.file("clippy.toml", "msrv = \"1.85\"\n");
    assert_ne!(key(&f), before, "clippy.toml must be an input");
    let mut probe = Command::new(cargo());
    probe.args(["clippy", "--version"]);
    if !crate::support::tool_available("cargo-clippy", &mut probe, "`rustup component add clippy`")
    {
        return;
    }
    let out = Fixture::new();
    let target = out.path().to_str().unwrap();
    let output = cargo_in(&f, &["clippy", "--quiet", "--target-dir", target]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    assert!(output.status.success(), "{}", stderr(&output));
}

/// A host's own xtask that is a workspace member is a key input like any
/// member (init-ci's thin xtask is its own workspace instead): `cargo
/// xtask` compiling it into the archives' target directory is no miss, and
/// a package of the archive that reads an xtask file is checked.
#[test]
fn the_xtasks_own_compilation_in_a_host_workspace_is_not_a_miss() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"gpu\", \"xtask\"]\nresolver = \"2\"\n",
    )
    .file("gpu/src/lib.rs", "")
    .file("xtask/src/main.rs", "fn main() {}\n")
    .file(
        ".github/ci-trust.toml",
        "[[archive]]\nfile = \"gpu.tar.zst\"\nnextest = [\"-p\", \"gpu\"]\n",
    );
    package(&f, "gpu", "gpu", "");
    package(&f, "xtask", "xtask", "");
    let output = cargo_in(&f, &["generate-lockfile"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = Fixture::new();
    let target = out.path().to_str().unwrap();
    let output = cargo_in(
        &f,
        &["build", "--quiet", "--workspace", "--target-dir", target],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    let report = stderr(&output);
    assert!(output.status.success(), "{report}");
    assert!(
        report.contains("every file the build read is covered by the key"),
        "{report}"
    );
    let key = xtask(&f, &["ci-key", "--explain"]);
    assert!(
        stderr(&key)
            .lines()
            .any(|l| l.trim_start().starts_with("xtask/src/main.rs")),
        "{}",
        stderr(&key)
    );
    // The archive's crate reading an xtask file is checked as before.
    f.file(
        "gpu/src/lib.rs",
        "pub const T: &str = include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../xtask/table.txt\"));\n",
    )
    .file("xtask/table.txt", "t");
    let output = cargo_in(
        &f,
        &["build", "--quiet", "--workspace", "--target-dir", target],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let output = xtask(&f, &["verify-key", "--target-dir", target]);
    let report = stderr(&output);
    assert!(
        output.status.success(),
        "the include is a key input: {report}"
    );
    assert!(
        report.contains("every file the build read is covered by the key"),
        "the xtask file gpu reads was checked: {report}"
    );
}
