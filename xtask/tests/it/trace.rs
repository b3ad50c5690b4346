//! `cargo xtask verify-key --trace -- BUILD…`: real builds of fixture
//! workspaces under strace, whose build scripts and proc macros read files
//! no dep-info file or `rerun-if-changed` line names.
//!
//! Every test is skipped, with one printed line, when strace is not
//! installed; `.ci/run` installs it, so CI skips nothing.

use std::path::PathBuf;
use std::process::Output;

use crate::support::{Fixture, stderr, xtask_cmd};

/// True when strace runs here; otherwise says the test is skipped.
fn have_strace(test: &str) -> bool {
    let found = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped {test}: strace is not installed (apt-get install strace)");
    }
    found
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// True when this process may use fanotify (root); otherwise says the test
/// is skipped.
fn have_fanotify(test: &str) -> bool {
    let output = xtask_cmd(&[
        "verify-key",
        "--trace",
        "--tracer",
        "fanotify",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    let found = !stderr(&output).contains("fanotify is not permitted");
    if !found {
        eprintln!("skipped {test}: fanotify needs CAP_SYS_ADMIN (run the tests as root)");
    }
    found
}

/// `xtask verify-key --root WS --trace --tracer strace -- cargo build …`
/// with the target directory outside the workspace.
fn traced_build(ws: &Fixture, target: &Fixture, extra: &[&str]) -> Output {
    traced_build_with(ws, target, "strace", extra)
}

fn traced_build_with(ws: &Fixture, target: &Fixture, tracer: &str, extra: &[&str]) -> Output {
    let cargo = cargo();
    let target = target.path().to_str().unwrap();
    let mut args = vec![
        "verify-key",
        "--root",
        ws.path().to_str().unwrap(),
        "--trace",
        "--tracer",
        tracer,
        "--",
        cargo.as_str(),
        "build",
        "--workspace",
        "--offline",
        "--quiet",
        "--target-dir",
        target,
    ];
    args.extend_from_slice(extra);
    xtask_cmd(&args).output().unwrap()
}

/// Writes the fixture's Cargo.lock (no compilation), so the build does not.
fn lock(ws: &Fixture) {
    let output = std::process::Command::new(cargo())
        .args(["generate-lockfile", "--offline"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

fn package(ws: &Fixture, dir: &str, name: &str, extra: &str) {
    ws.file(
        &format!("{dir}/Cargo.toml"),
        &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{extra}"),
    );
}

/// One workspace, one undeclared read per package, each by a different
/// kind of process; and one package whose reads are all declared.
fn undeclared_reads_workspace() -> Fixture {
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"declared\", \"undeclared\", \"outside\", \"mac\", \"user\", \"my crate\", \"chdir\"]\nresolver = \"2\"\n",
    );
    // Reads what it declares: covered.
    package(&ws, "declared", "declared", "");
    ws.file("declared/src/lib.rs", "")
        .file(
            "declared/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=config.txt\");\n    let _ = std::fs::read(\"config.txt\");\n}\n",
        )
        .file("declared/config.txt", "declared\n");
    // Declares one file, reads another.
    package(&ws, "undeclared", "undeclared", "");
    ws.file("undeclared/src/lib.rs", "")
        .file(
            "undeclared/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let _ = std::fs::read(\"secret.txt\");\n}\n",
        )
        .file("undeclared/secret.txt", "not declared\n");
    // Declares nothing (so its whole package is hashed) and reads outside it.
    package(&ws, "outside", "outside", "");
    ws.file("outside/src/lib.rs", "")
        .file(
            "outside/build.rs",
            "fn main() {\n    let _ = std::fs::read(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../shared/kernel.cu\"));\n}\n",
        )
        .file("shared/kernel.cu", "__global__ void k() {}\n");
    // A proc macro that reads a file with std::fs while rustc expands it.
    package(&ws, "mac", "mac", "[lib]\nproc-macro = true\n");
    ws.file(
        "mac/src/lib.rs",
        "use proc_macro::TokenStream;\n#[proc_macro]\npub fn table(_: TokenStream) -> TokenStream {\n    let text = std::fs::read_to_string(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/table.txt\")).unwrap();\n    format!(\"{}\", text.trim().len()).parse().unwrap()\n}\n",
    )
    .file("mac/table.txt", "read at expansion\n");
    package(
        &ws,
        "user",
        "user",
        "[dependencies]\nmac = { path = \"../mac\" }\n",
    );
    ws.file("user/src/lib.rs", "pub const N: usize = mac::table!();\n");
    // A package directory with a space, reading an undeclared file whose
    // name holds a newline and a quote.
    package(&ws, "my crate", "spaced", "");
    ws.file("my crate/src/lib.rs", "")
        .file(
            "my crate/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let _ = std::fs::read(\"we ird\\nna\\\"me.txt\");\n}\n",
        )
        .file("my crate/we ird\nna\"me.txt", "odd name\n");
    // Changes directory, opens a relative path, and runs a script of the
    // repository.
    package(&ws, "chdir", "chdir", "");
    ws.file("chdir/src/lib.rs", "")
        .file(
            "chdir/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    std::env::set_current_dir(\"../assets\").unwrap();\n    let _ = std::fs::read(\"k.cfg\");\n    let _ = std::process::Command::new(\"sh\").arg(\"gen.sh\").status();\n}\n",
        )
        .file("assets/k.cfg", "relative\n")
        .file("assets/gen.sh", "true\n");
    ws
}

#[test]
fn undeclared_reads_by_build_scripts_and_proc_macros_are_caught() {
    if !have_strace("undeclared_reads_by_build_scripts_and_proc_macros_are_caught") {
        return;
    }
    let ws = undeclared_reads_workspace();
    let target = Fixture::new();
    let output = traced_build(&ws, &target, &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for needle in [
        "undeclared/secret.txt  (read by build script of undeclared",
        "shared/kernel.cu  (read by build script of outside",
        "mac/table.txt  (read by rustc compiling crate `user`, or a proc macro it ran",
        "my crate/we ird\\nna\"me.txt  (read by build script of spaced",
        "assets/k.cfg  (read by build script of chdir",
        "assets/gen.sh  (read by sh",
        "6 files the build used are NOT covered by the key",
        "cargo::rerun-if-changed=secret.txt",
    ] {
        assert!(
            text.contains(needle),
            "the report lacks {needle:?}:\n{text}"
        );
    }
    // Declared reads, sources and manifests are covered.
    assert!(!text.contains("declared/config.txt"), "{text}");
    assert!(!text.contains("src/lib.rs  ("), "{text}");
}

#[test]
fn a_clean_workspace_passes_and_files_it_wrote_are_not_misses() {
    if !have_strace("a_clean_workspace_passes_and_files_it_wrote_are_not_misses") {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\", \"mac\"]\nresolver = \"2\"\n",
    );
    package(
        &ws,
        "app",
        "app",
        "[dependencies]\nmac = { path = \"../mac\" }\n",
    );
    ws.file(
        "app/src/lib.rs",
        "pub const N: usize = mac::one!();\npub const T: &str = include_str!(\"../data/t.txt\");\n",
    )
    .file("app/data/t.txt", "embedded\n")
    // Writes a file into its own package, then reads it back: the build
    // made those bytes, so the read is not a miss.
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    std::fs::write(\"generated.txt\", \"x\").unwrap();\n    let _ = std::fs::read(\"generated.txt\");\n    std::fs::remove_file(\"generated.txt\").unwrap();\n}\n",
    );
    package(&ws, "mac", "mac", "[lib]\nproc-macro = true\n");
    ws.file(
        "mac/src/lib.rs",
        "use proc_macro::TokenStream;\n#[proc_macro]\npub fn one(_: TokenStream) -> TokenStream { \"1\".parse().unwrap() }\n",
    );
    lock(&ws);
    let target = Fixture::new();
    let output = traced_build(&ws, &target, &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("every repository file the build used is covered by the key"),
        "{text}"
    );
    assert!(
        text.contains("1 repository files the build wrote before reading them (app/generated.txt)"),
        "{text}"
    );

    // A lockfile cargo rewrites (here: one it finds stale) is a changed
    // input: the key computed before the build describes other bytes.
    let lock = std::fs::read_to_string(ws.join("Cargo.lock")).unwrap();
    ws.file(
        "Cargo.lock",
        &lock.replace("# It is not intended for manual editing.\n", ""),
    );
    let output = traced_build(&ws, &target, &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("the build changed the key input Cargo.lock"),
        "{text}"
    );
}

#[test]
fn a_failing_build_or_a_trace_of_nothing_is_an_error() {
    if !have_strace("a_failing_build_or_a_trace_of_nothing_is_an_error") {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"bad\"]\nresolver = \"2\"\n",
    );
    package(&ws, "bad", "bad", "");
    ws.file("bad/src/lib.rs", "pub fn f() -> u32 { \"not a number\" }\n");
    let target = Fixture::new();
    let output = traced_build(&ws, &target, &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the traced build failed (exit status: 101)"),
        "{text}"
    );

    // A command that touches nothing of the repository proves nothing.
    let root = ws.path().to_str().unwrap();
    let output = xtask_cmd(&[
        "verify-key",
        "--root",
        root,
        "--trace",
        "--tracer",
        "strace",
        "--",
        "true",
    ])
    .output()
    .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the trace recorded no access to a file inside"),
        "{text}"
    );

    // A target directory holding the repository would exclude all of it.
    let output = xtask_cmd(&[
        "verify-key",
        "--root",
        root,
        "--trace",
        "--tracer",
        "strace",
        "--",
        "sh",
        "-c",
        "cat Cargo.toml",
        "--target-dir",
        ".",
    ])
    .output()
    .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("contains the repository"), "{text}");

    // A command strace cannot start: no trace, an error.
    let missing: PathBuf = ws.join("no-such-tool");
    let output = xtask_cmd(&[
        "verify-key",
        "--root",
        root,
        "--trace",
        "--tracer",
        "strace",
        "--",
    ])
    .arg(&missing)
    .output()
    .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("strace did not trace the build"), "{text}");
}

#[test]
fn trace_needs_a_command_and_a_command_needs_trace() {
    let ws = Fixture::new();
    let root = ws.path().to_str().unwrap();
    let output = xtask_cmd(&["verify-key", "--root", root, "--trace"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let output = xtask_cmd(&["verify-key", "--root", root, "--", "cargo", "build"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// A workspace whose one binary is an archive, and whose build script reads
/// a file it does not declare.
fn leaky_archive_workspace(policy_extra: &str) -> Fixture {
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"leaky\"]\nresolver = \"2\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        &format!(
            "[[archive]]\nfile = \"leaky.tar.zst\"\nbuild = [\"-p\", \"leaky\", \"--bin\", \"leaky\"]\nbinaries = [\"leaky\"]\n{policy_extra}"
        ),
    );
    package(&ws, "leaky", "leaky", "");
    ws.file("leaky/src/main.rs", "fn main() {}\n")
        .file(
            "leaky/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let _ = std::fs::read(\"undeclared.cfg\");\n}\n",
        )
        .file("leaky/undeclared.cfg", "opt-level tweak\n");
    lock(&ws);
    ws
}

/// A `PATH` with cargo, rustc, rustup and cc but no strace.
fn path_without_strace() -> Fixture {
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
    bin
}

#[test]
fn gpu_archive_traces_its_fresh_build_and_publishes_nothing_on_a_miss() {
    if !have_strace("gpu_archive_traces_its_fresh_build_and_publishes_nothing_on_a_miss") {
        return;
    }
    let ws = leaky_archive_workspace("[verify]\ntracer = \"strace\"\n");
    let scratch = Fixture::new();
    let out = scratch.join("out");
    let output = xtask_cmd(&["gpu-archive", "--out"])
        .arg(&out)
        .arg("--root")
        .arg(ws.path())
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .output()
        .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    for needle in [
        "the traced build of leaky.tar.zst is not covered by the key",
        "leaky/undeclared.cfg (read by build script of leaky",
        "cargo::rerun-if-changed=undeclared.cfg",
    ] {
        assert!(
            text.contains(needle),
            "gpu-archive lacks {needle:?}:\n{text}"
        );
    }
    assert!(
        !out.join("leaky.tar.zst").exists(),
        "an archive was published under a key that does not describe it"
    );
}

#[test]
fn without_strace_gpu_archive_warns_or_fails_as_the_policy_says() {
    let bin = path_without_strace();
    let run = |ws: &Fixture, scratch: &Fixture| {
        xtask_cmd(&["gpu-archive", "--out"])
            .arg(scratch.join("out"))
            .arg("--root")
            .arg(ws.path())
            .env("CARGO_TARGET_DIR", scratch.join("target"))
            .env("PATH", bin.path())
            .output()
            .unwrap()
    };
    // Required: no tracer, no build.
    let ws = leaky_archive_workspace("[verify]\nrequire-trace = true\ntracer = \"strace\"\n");
    let scratch = Fixture::new();
    let output = run(&ws, &scratch);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the strace tracer was chosen, but strace is not installed or does not run (apt-get install strace)), and the policy ([verify] require-trace) requires"),
        "{text}"
    );
    assert!(!scratch.join("target").exists(), "it built anyway:\n{text}");

    // Not required: a loud warning, and the dep-info check alone, which
    // cannot see the undeclared read.
    let ws = leaky_archive_workspace("[verify]\ntracer = \"strace\"\n");
    let scratch = Fixture::new();
    let output = run(&ws, &scratch);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("warning: no tracer can run (the strace tracer was chosen, but strace is not installed or does not run (apt-get install strace)): the fresh build is NOT traced"),
        "{text}"
    );
    assert!(scratch.join("out/leaky.tar.zst").is_file(), "{text}");
}

#[test]
fn fanotify_catches_undeclared_reads_listings_and_symlinks() {
    if !have_fanotify("fanotify_catches_undeclared_reads_listings_and_symlinks") {
        return;
    }
    let ws = undeclared_reads_workspace();
    // A build script that lists a directory and reads through a symlink
    // that is not a key input (its target is).
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"declared\", \"undeclared\", \"outside\", \"mac\", \"user\", \"my crate\", \"chdir\", \"lister\"]\nresolver = \"2\"\n",
    );
    package(&ws, "lister", "lister", "");
    ws.file("lister/src/lib.rs", "")
        .file(
            "lister/build.rs",
            "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    println!(\"cargo::rerun-if-changed=real.txt\");\n    let _ = std::fs::read_dir(\"../plugins\").map(|d| d.count());\n    let _ = std::fs::read(\"via-link.txt\");\n}\n",
        )
        .file("lister/real.txt", "declared target\n")
        .file("plugins/one.toml", "listed\n");
    std::os::unix::fs::symlink("real.txt", ws.join("lister/via-link.txt")).unwrap();
    let target = Fixture::new();
    let output = traced_build_with(&ws, &target, "fanotify", &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for needle in [
        "under fanotify",
        "fanotify events of",
        "undeclared/secret.txt  (read by build script of undeclared",
        "shared/kernel.cu  (read by build script of outside",
        "mac/table.txt  (read by rustc",
        "my crate/we ird\\nna\"me.txt  (read by build script of spaced",
        "assets/k.cfg  (read by build script of chdir",
        "assets/gen.sh  (read by ",
        "plugins/one.toml  (listed by build script of lister",
        "lister/via-link.txt  (followed by build script of lister",
        "8 files the build used are NOT covered by the key",
    ] {
        assert!(
            text.contains(needle),
            "the report lacks {needle:?}:\n{text}"
        );
    }
    assert!(!text.contains("declared/config.txt"), "{text}");
    assert!(!text.contains("lister/real.txt  ("), "{text}");
    assert!(!text.contains("src/lib.rs  ("), "{text}");
}

#[test]
fn fanotify_passes_a_clean_build_and_exempts_what_the_build_wrote() {
    if !have_fanotify("fanotify_passes_a_clean_build_and_exempts_what_the_build_wrote") {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    );
    package(&ws, "app", "app", "");
    ws.file(
        "app/src/lib.rs",
        "pub const T: &str = include_str!(\"../data/t.txt\");\n",
    )
    .file("app/data/t.txt", "embedded\n")
    // Writes a file into its package, reads it back and removes it: the
    // bytes are the build's own, and the check runs after the file is gone.
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    std::fs::write(\"generated.txt\", \"x\").unwrap();\n    let _ = std::fs::read(\"generated.txt\");\n    std::fs::remove_file(\"generated.txt\").unwrap();\n}\n",
    );
    lock(&ws);
    let target = Fixture::new();
    let output = traced_build_with(&ws, &target, "fanotify", &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("every repository file the build used is covered by the key"),
        "{text}"
    );
    assert!(
        text.contains("1 repository files the build wrote before reading them (app/generated.txt)"),
        "{text}"
    );
    // Every process's reads count: a daemon the build started may have left
    // its process tree. A bystander that reads the repository while the
    // build runs is reported as such (fail closed).
    ws.file("app/undeclared.txt", "read by a bystander\n");
    let reader = std::process::Command::new("sh")
        .arg("-c")
        // A builtin redirection: the long-lived shell opens the file itself.
        .arg("while true; do : < app/undeclared.txt; sleep 0.05; done")
        .current_dir(ws.path())
        .spawn()
        .unwrap();
    let output = traced_build_with(&ws, &target, "fanotify", &["--release"]);
    let mut reader = reader;
    let _ = reader.kill();
    let _ = reader.wait();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("app/undeclared.txt  (read by ")
            && text.contains("not started by the build: another process read the repository"),
        "{text}"
    );

    // A daemon of the build that left its process tree (double fork) reads
    // for the build all the same.
    ws.file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let out = std::env::var(\"OUT_DIR\").unwrap();\n    std::process::Command::new(\"sh\").arg(\"-c\").arg(format!(\"(sleep 0.3; cat daemon.txt > {out}/copy.txt) & exit 0\")).status().unwrap();\n    while std::fs::metadata(format!(\"{out}/copy.txt\")).map_or(true, |m| m.len() == 0) { std::thread::sleep(std::time::Duration::from_millis(50)); }\n}\n",
    )
    .file("app/daemon.txt", "read by a daemon\n");
    std::fs::remove_file(ws.join("app/undeclared.txt")).unwrap();
    let output = traced_build_with(&ws, &target, "fanotify", &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("app/daemon.txt  (read by "), "{text}");
}

/// True when this process may bind-mount (root), which the attack below
/// needs; otherwise says the test is skipped.
fn can_bind_mount(test: &str) -> bool {
    let scratch = Fixture::new();
    scratch.file("a", "a").file("b", "b");
    let ok = std::process::Command::new("mount")
        .arg("--bind")
        .arg(scratch.join("a"))
        .arg(scratch.join("b"))
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = std::process::Command::new("umount")
            .arg(scratch.join("b"))
            .status();
    } else {
        eprintln!("skipped {test}: bind mounts need root");
    }
    ok
}

#[test]
fn fanotify_sees_a_repository_file_read_through_a_bind_mount() {
    let test = "fanotify_sees_a_repository_file_read_through_a_bind_mount";
    if !have_fanotify(test) || !can_bind_mount(test) {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    );
    package(&ws, "app", "app", "");
    // The build script mounts an undeclared file over a key input, which
    // rustc then embeds: the path is a key input, the bytes are not.
    ws.file(
        "app/src/lib.rs",
        "pub const T: &str = include_str!(\"data.txt\");\n",
    )
    .file("app/src/data.txt", "keyed\n")
    .file("app/secret.txt", "not keyed\n")
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let ok = std::process::Command::new(\"mount\").args([\"--bind\", \"secret.txt\", \"src/data.txt\"]).status().unwrap().success();\n    assert!(ok);\n}\n",
    );
    lock(&ws);
    let target = Fixture::new();
    let output = traced_build_with(&ws, &target, "fanotify", &[]);
    let _ = std::process::Command::new("umount")
        .arg(ws.join("app/src/data.txt"))
        .status();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("app/src/data.txt  (read through a mount the build made by rustc"),
        "{text}"
    );
}
