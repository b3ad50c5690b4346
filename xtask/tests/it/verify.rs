//! `cargo xtask verify-key` after a real `cargo build` of fixture workspaces
//! whose inputs static discovery alone cannot see.

use std::process::Command;

use crate::support::{Fixture, stderr, xtask_cmd};

/// A proc-macro crate `mac` whose macro expands to an `include_str!` of
/// `data/x.txt` of the calling crate, and the crate `user` that calls it.
fn proc_macro_pair(f: &Fixture) {
    f.file("mac/Cargo.toml", "[package]\nname = \"mac\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n")
        .file(
            "mac/src/lib.rs",
            "use proc_macro::TokenStream;\n#[proc_macro]\npub fn embed_data(_: TokenStream) -> TokenStream {\n    \"include_str!(concat!(env!(\\\"CARGO_MANIFEST_DIR\\\"), \\\"/data/x.txt\\\"))\".parse().unwrap()\n}\n",
        )
        .file(
            "user/Cargo.toml",
            "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nmac = { path = \"../mac\" }\n",
        );
}

/// A workspace with a proc macro that embeds a data file, a build script that
/// reads kernels outside its package through a run-time path, and an exported
/// `macro_rules!` include called from another crate; plus the forms static
/// discovery does cover (a literal rerun-if-changed, a `macro_rules!` include
/// called from its own file and from another file of its crate).
fn tricky_workspace() -> Fixture {
    let f = Fixture::new();
    proc_macro_pair(&f);
    f.file("Cargo.toml", "[workspace]\nmembers = [\"mac\", \"user\", \"gpu\", \"gpu2\", \"ptx\", \"kmac\", \"kuser\"]\nresolver = \"2\"\n")
        .file("user/src/lib.rs", "pub const X: &str = mac::embed_data!();\n")
        .file("user/data/x.txt", "data read through a proc macro\n")
        .file("gpu/Cargo.toml", "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
        .file("gpu/src/lib.rs", "")
        .file(
            "gpu/build.rs",
            "fn main() {\n    for e in std::fs::read_dir(\"kernels\").unwrap() { let _ = std::fs::read(e.unwrap().path()); }\n    println!(\"cargo:rerun-if-changed=kernels\");\n}\n",
        )
        .file("gpu/kernels/inside.cu", "__global__ void inside() {}\n")
        .file("gpu2/Cargo.toml", "[package]\nname = \"gpu2\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
        .file("gpu2/src/lib.rs", "")
        .file(
            "gpu2/build.rs",
            "fn main() {\n    let dir = std::path::Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"../kernels\");\n    for e in std::fs::read_dir(&dir).unwrap() { let _ = std::fs::read(e.unwrap().path()); }\n    println!(\"cargo:rerun-if-changed={}\", dir.display());\n}\n",
        )
        .file("kernels/shared.cu", "__global__ void shared() {}\n")
        .file("ptx/Cargo.toml", "[package]\nname = \"ptx\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
        .file(
            "ptx/src/lib.rs",
            "#[macro_use]\nmod gpu;\nmacro_rules! local_ptx { ($n:literal) => { include_bytes!(concat!(\"../kernels/\", $n, \".ptx\")) }; }\npub static LOCAL: &[u8] = local_ptx!(\"local\");\npub static CROSS: &[u8] = cross_ptx!(\"cross\");\n",
        )
        // Written relative to the invoking file, as rustc resolves it.
        .file(
            "ptx/src/gpu/mod.rs",
            "macro_rules! cross_ptx { ($n:literal) => { include_bytes!(concat!(\"../cuda/\", $n, \".ptx\")) }; }\n",
        )
        .file("ptx/kernels/local.ptx", ".version 8.0\n")
        .file("ptx/cuda/cross.ptx", ".version 8.0\n")
        // An exported macro whose include resolves from its caller in another
        // crate (static discovery follows it there).
        .file("kmac/Cargo.toml", "[package]\nname = \"kmac\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
        .file(
            "kmac/src/lib.rs",
            "#[macro_export]\nmacro_rules! kernel { ($n:literal) => { include_bytes!(concat!(\"../cuda/\", $n, \".ptx\")) }; }\n",
        )
        .file(
            "kuser/Cargo.toml",
            "[package]\nname = \"kuser\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nkmac = { path = \"../kmac\" }\n",
        )
        .file("kuser/src/lib.rs", "pub static K: &[u8] = kmac::kernel!(\"k\");\n")
        .file("kuser/cuda/k.ptx", ".version 8.0\n");
    f
}

#[test]
fn verify_key_reports_what_static_discovery_missed_and_passes_after_the_fix() {
    let f = tricky_workspace();
    let target = Fixture::new();
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--workspace",
            "--offline",
            "--quiet",
            "--target-dir",
        ])
        .arg(target.path())
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "fixture build failed:\n{}",
        stderr(&build)
    );

    let verify = |f: &Fixture| {
        xtask_cmd(&["verify-key", "--profile", "dev", "--target-dir"])
            .arg(target.path())
            .arg("--root")
            .arg(f.path())
            .output()
            .unwrap()
    };
    let before = verify(&f);
    let text = stderr(&before);
    assert_eq!(
        before.status.code(),
        Some(1),
        "misses must fail verify-key:\n{text}"
    );
    for needle in [
        "user/data/x.txt  (read by compilation of crate `user`)",
        "kernels/shared.cu  (read by build script of gpu2)",
        // The directory it declares: its entry set (a file added there
        // reruns the script).
        "kernels  (read by build script of gpu2)",
        "key.include = [\"kernels/**\"]",
        "3 files the build read are NOT covered",
        "files outside the repository",
    ] {
        assert!(
            text.contains(needle),
            "verify-key output lacks {needle:?}:\n{text}"
        );
    }
    // What static discovery does know is not reported.
    for covered in [
        "gpu/kernels/inside.cu",
        "ptx/kernels/local.ptx",
        "ptx/cuda/cross.ptx",
        // An exported macro_rules! include, resolved from its caller in another crate.
        "kuser/cuda/k.ptx",
    ] {
        assert!(
            !text.contains(covered),
            "{covered} is a key input and must not be reported:\n{text}"
        );
    }

    f.file(
        ".github/ci-trust.toml",
        "[key]\ninclude = [\"user/data/*.txt\", \"kernels/**\", \"kuser/cuda/*.ptx\"]\n",
    );
    let after = verify(&f);
    assert!(
        after.status.success(),
        "the documented fix must satisfy verify-key:\n{}",
        stderr(&after)
    );
    assert!(stderr(&after).contains("every file the build read is covered by the key"));
}

#[test]
fn verify_key_without_a_build_says_what_to_do() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("src/lib.rs", "");
    let target = Fixture::new();
    let output = xtask_cmd(&["verify-key", "--target-dir"])
        .arg(target.path())
        .arg("--root")
        .arg(f.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("build first"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn gpu_archive_fresh_build_refuses_a_key_that_misses_an_input() {
    // The fresh build is a real `cargo nextest archive`.
    if !crate::support::has_nextest() {
        return;
    }
    let f = Fixture::new();
    proc_macro_pair(&f);
    f.file("Cargo.toml", "[workspace]\nmembers = [\"mac\", \"user\"]\nresolver = \"2\"\n")
        .file("user/src/lib.rs", "pub const X: &str = mac::embed_data!();\n#[test]\nfn embedded() { assert!(X.contains(\"proc macro\")); }\n")
        .file("user/data/x.txt", "data read through a proc macro\n")
        // In the checkout: the key tree would not hold the file at all.
        .file(".github/ci-trust.toml", "[[archive]]\nfile = \"tests.tar.zst\"\nnextest = [\"-p\", \"user\"]\n[verify]\nkey-tree = \"off\"\n");
    let out = f.join("out");
    let run = || {
        xtask_cmd(&["gpu-archive", "--out"])
            .arg(&out)
            .arg("--root")
            .arg(f.path())
            .output()
            .unwrap()
    };

    let refused = run();
    let text = stderr(&refused);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "a miss must fail the fresh build:\n{text}"
    );
    assert!(
        text.contains("user/data/x.txt") && text.contains("not published under it"),
        "{text}"
    );
    assert!(
        !out.join("tests.tar.zst").exists(),
        "no archive may be left for upload under a wrong key"
    );

    f.file(
        ".github/ci-trust.toml",
        "[key]\ninclude = [\"user/data/*.txt\"]\n[[archive]]\nfile = \"tests.tar.zst\"\nnextest = [\"-p\", \"user\"]\n[verify]\nkey-tree = \"off\"\n",
    );
    let accepted = run();
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert!(stderr(&accepted).contains("every file the build read is covered by the key"));
    assert!(out.join("tests.tar.zst").is_file());
}

/// Builds `f` into `target` with the real cargo.
fn cargo_build(f: &Fixture, target: &Fixture) {
    let build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--workspace",
            "--offline",
            "--quiet",
            "--target-dir",
        ])
        .arg(target.path())
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "fixture build failed:\n{}",
        stderr(&build)
    );
}

fn verify_key(f: &Fixture, target: &Fixture) -> std::process::Output {
    xtask_cmd(&["verify-key", "--target-dir"])
        .arg(target.path())
        .arg("--root")
        .arg(f.path())
        .output()
        .unwrap()
}

/// A proc macro crate `mac` whose `embed!()` makes rustc read `user/data/<name>`,
/// which no static reading of `user` sees.
fn proc_macro_reading(f: &Fixture, name: &str) {
    let literal = format!("{:?}", format!("/data/{name}"));
    let expansion = format!("include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), {literal}))");
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"mac\", \"user\"]\nresolver = \"2\"\n",
    )
    .file(
        "mac/Cargo.toml",
        "[package]\nname = \"mac\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[lib]\nproc-macro = true\n",
    )
    .file(
        "mac/src/lib.rs",
        &format!(
            "use proc_macro::TokenStream;\n#[proc_macro]\npub fn embed(_: TokenStream) -> TokenStream {{\n    {:?}.parse().unwrap()\n}}\n",
            expansion
        ),
    )
    .file(
        "user/Cargo.toml",
        "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\nmac = { path = \"../mac\" }\n",
    )
    .file("user/src/lib.rs", "pub const X: &str = mac::embed!();\n")
    .file(&format!("user/data/{name}"), "read by the proc macro");
}

#[test]
fn verify_key_reads_names_with_spaces_tabs_hashes_and_backslashes_exactly() {
    // rustc escapes only spaces in dep-info; a tab, `#`, `$` or `\` stands as
    // itself. Misread, the name would look like a vanished file and the miss
    // would pass unnoticed.
    let name = "ta\tb #1$x\\ y.txt";
    let f = Fixture::new();
    proc_macro_reading(&f, name);
    let target = Fixture::new();
    cargo_build(&f, &target);
    let before = verify_key(&f, &target);
    let text = stderr(&before);
    assert_eq!(before.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "user/data/{name}  (read by compilation of crate `user`)"
        )),
        "{text}"
    );
    f.file(
        ".github/ci-trust.toml",
        "[key]\ninclude = [\"user/data/*\"]\n",
    );
    let after = verify_key(&f, &target);
    assert!(after.status.success(), "{}", stderr(&after));
}

#[test]
fn verify_key_refuses_a_dep_info_it_cannot_read_faithfully() {
    // rustc writes a line break in a file name raw, so the list is ambiguous.
    let f = Fixture::new();
    proc_macro_reading(&f, "new\nline.txt");
    let target = Fixture::new();
    cargo_build(&f, &target);
    let output = verify_key(&f, &target);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("line break"), "{text}");
    assert!(text.contains("user-"), "the dep-info file is named: {text}");
}

#[test]
fn verify_key_never_passes_on_nothing() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("src/lib.rs", "");
    // A profile directory exists but holds no dep-info (never built, or a
    // different --profile / --target).
    let target = Fixture::new();
    target.file("debug/deps/libm-1.rlib", "");
    let output = verify_key(&f, &target);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    for needle in [
        "no rustc dep-info",
        "nothing was checked",
        "--profile",
        "--target",
    ] {
        assert!(text.contains(needle), "lacks {needle:?}: {text}");
    }
    // Dep-info that lists no file of this repository proves nothing either.
    target.file(
        "debug/deps/other-1.d",
        "/t/other-1.rmeta: /elsewhere/lib.rs\n\n/elsewhere/lib.rs:\n",
    );
    let output = verify_key(&f, &target);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("list no file of this repository"), "{text}");
}
