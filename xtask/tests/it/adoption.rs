//! Adoption's surroundings (`init-ci` itself is in `adoption_hosts.rs`): the
//! key's view of `feature-prefix`, the benchmarks' safe `--workdir`,
//! `--root` on every command and relative paths from the current directory.

use std::path::Path;
use std::process::Command;

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

#[test]
fn a_feature_prefix_must_select_a_version_feature() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\ncuda = [\"toolkit/cuda-version-from-build-system\"]\n\n[dependencies]\ntoolkit = { path = \"toolkit\" }\n",
    )
    .file("src/lib.rs", "")
    .file(
        "toolkit/Cargo.toml",
        "[package]\nname = \"toolkit\"\nversion = \"0.2.0\"\nedition = \"2021\"\n\n[features]\ncuda-version-from-build-system = []\ncuda-12080 = []\n",
    )
    .file("toolkit/src/lib.rs", "")
    .file(
        "Cargo.lock",
        "version = 4\n\n[[package]]\nname = \"gpu\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"toolkit\"\nversion = \"0.2.0\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        "[key]\nlocked-crates = [{ name = \"toolkit\", feature-prefix = \"cuda-\" }]\n",
    );
    // `cuda-version-from-build-system` starts with the prefix but names no
    // version: the key would say nothing about CUDA.
    let out = f.xtask(&["ci-key"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("enabled: cuda-version-from-build-system, which name no version"),
        "{}",
        stderr(&out)
    );
    f.file(
        "Cargo.toml",
        "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\ncuda = [\"toolkit/cuda-version-from-build-system\", \"toolkit/cuda-12080\"]\n\n[dependencies]\ntoolkit = { path = \"toolkit\" }\n",
    );
    let out = f.xtask(&["ci-key"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("-toolkit0.2.0-cuda-12080-"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_empty_dynamic_include_needs_allow_empty_and_is_explained() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file(
        "src/lib.rs",
        "pub const T: &str = include_str!(env!(\"SYSTEM_TABLE\"));\n",
    )
    .file(
        ".github/ci-trust.toml",
        "[[key.dynamic-include]]\nsite = \"src/lib.rs\"\nfiles = []\nreason = \"reads a system file\"\n",
    );
    let out = f.xtask(&["ci-key"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("set `allow-empty = true`"),
        "{}",
        stderr(&out)
    );
    f.file(
        ".github/ci-trust.toml",
        "[[key.dynamic-include]]\nsite = \"src/lib.rs\"\nfiles = []\nallow-empty = true\nreason = \"reads /etc/table, installed by the image\"\n",
    );
    let out = f.xtask(&["ci-key", "--explain"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("declared to read no repository file (allow-empty):\n  src/lib.rs: reads /etc/table, installed by the image"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bench_workdir_never_deletes_what_it_did_not_create() {
    let f = Fixture::new();
    f.file("precious/Cargo.toml", "mine");
    let out = xtask_cmd(&["bench-key", "--runs", "1", "--megabytes", "1", "--workdir"])
        .arg(f.join("precious"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not created by a benchmark"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read(&f.join("precious/Cargo.toml")), "mine");
    // `--workdir .` from inside a checkout is refused the same way.
    let out = xtask_cmd(&["bench-verify", "--runs", "1", "--workdir", "."])
        .current_dir(f.join("precious"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(read(&f.join("precious/Cargo.toml")), "mine");
}

#[test]
fn every_command_takes_root() {
    let help = xtask_cmd(&["--help"]).output().unwrap();
    let commands: Vec<String> = stdout(&help)
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 8, "{commands:?}");
    for command in commands {
        let out = xtask_cmd(&[&command, "--help"]).output().unwrap();
        assert!(
            stdout(&out).contains("--root <DIR>"),
            "{command} lacks --root"
        );
    }
}

#[test]
fn a_relative_out_is_taken_from_the_current_directory() {
    // `--root` and `--json` are both relative to the current directory.
    let f = Fixture::new();
    f.file(
        "repo/Cargo.toml",
        "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("repo/Cargo.lock", "version = 4\n")
    .file("repo/src/lib.rs", "")
    .file("elsewhere/.keep", "");
    let out = xtask_cmd(&["ci-key", "--root", "../repo", "--json", "key.json"])
        .current_dir(f.join("elsewhere"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(f.join("elsewhere/key.json").is_file());
    assert!(!f.join("repo/key.json").exists());
}

#[test]
fn check_contracts_cross_checks_the_pod_archives_with_the_policy() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let f = Fixture::new();
    for entry in std::fs::read_dir(repo.join(".github/workflows")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        f.file(&format!(".github/workflows/{name}"), &read(&path));
    }
    f.file(
        ".github/ci-trust.toml",
        &read(&repo.join(".github/ci-trust.toml")),
    );
    let clean = f.xtask(&["check-contracts"]);
    assert!(clean.status.success(), "{}", stdout(&clean));

    let consumer = f.join(".github/workflows/runpod-gpu-test.yml");
    let original = read(&consumer);
    assert!(original.contains("      archives: xtask-tests.tar.zst\n"));
    for (archives, expected) in [
        (
            "other.tar.zst",
            "runs the archive \"other.tar.zst\" on the pod, but no nextest [[archive]]",
        ),
        ("xtask-tests.tar.zst other.tar.zst", "\"other.tar.zst\""),
        ("cuda-tests.tar.zst", "never runs it on the pod"),
        ("${{ inputs.archives }}", "an expression"),
    ] {
        std::fs::write(
            &consumer,
            original.replace(
                "      archives: xtask-tests.tar.zst\n",
                &format!("      archives: {archives}\n"),
            ),
        )
        .unwrap();
        let out = f.xtask(&["check-contracts"]);
        assert_eq!(out.status.code(), Some(1), "{archives}: {}", stdout(&out));
        assert!(stdout(&out).contains("archive-names"), "{}", stdout(&out));
        assert!(
            stdout(&out).contains(expected),
            "{archives}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn a_relative_gpu_archive_out_is_taken_from_the_current_directory() {
    // A restored cache in ./rel-out of the working directory, not of the
    // repository: verified and used as it is, nothing compiled.
    let ws = crate::archive::gpu_workspace();
    let cwd = Fixture::new();
    cwd.file("placeholder", "");
    let out = cwd.join("rel-out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(
        out.join("cuda-tests.tar.zst"),
        crate::archive::zstd_tar(&[("target/nextest/binaries-metadata.json", b"{}")]),
    )
    .unwrap();
    std::fs::write(
        out.join("cuda-tutorial.tar.zst"),
        crate::archive::zstd_tar(&[("cuda_tutorial", b"\x7fELF")]),
    )
    .unwrap();
    let run = xtask_cmd(&["gpu-archive", "--cache-hit", "--out", "rel-out", "--root"])
        .arg(ws.path())
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", stdout(&run), stderr(&run));
    assert!(
        stdout(&run).contains("archive source: cache hit"),
        "{}",
        stdout(&run)
    );
    assert!(!ws.join("rel-out").exists());
}

#[test]
fn a_restored_prebuilt_xtask_is_checked_then_runs_as_cargo_xtask() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let script = repo.join("scripts/ci/use_prebuilt_xtask.sh");
    let f = Fixture::new();
    let bin = f.join("xtask-bin");
    let use_it = |version_line: &str| {
        crate::support::write_executable(
            &bin.join("xtask"),
            &format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version_line}'; else echo \"prebuilt ran: $*\"; fi\n"
            ),
        );
        for name in ["path", "env"] {
            f.file(name, "");
        }
        Command::new("bash")
            .arg(&script)
            .arg(&bin)
            .env("GITHUB_PATH", f.join("path"))
            .env("GITHUB_ENV", f.join("env"))
            .output()
            .unwrap()
    };
    // A binary that names no commit is not used.
    let refused = use_it("cargo xtask 0.1.0");
    assert!(!refused.status.success());
    assert!(read(&f.join("env")).is_empty() && read(&f.join("path")).is_empty());

    // An unoptimised build (the dev profile) is not the binary CI restores.
    let refused = use_it("cargo xtask 0.1.0 (built from 0123abc, unoptimised)");
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("not an optimised build"));
    assert!(read(&f.join("env")).is_empty() && read(&f.join("path")).is_empty());

    let used = use_it("cargo xtask 0.1.0 (built from 0123abc, optimised)");
    assert!(used.status.success(), "{}", stderr(&used));
    assert!(
        stdout(&used).contains("prebuilt xtask: cargo xtask 0.1.0 (built from 0123abc, optimised)")
    );
    // What later steps see: the alias from GITHUB_ENV, the wrapper on PATH,
    // and `cargo xtask` running the prebuilt binary without compiling,
    // even where a .cargo/config.toml defines the alias to compile it.
    let (name, value) = read(&f.join("env"))
        .trim()
        .split_once('=')
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .unwrap();
    f.file(
        ".cargo/config.toml",
        "[alias]\nxtask = \"run --package xtask --\"\n",
    );
    let path = format!(
        "{}:{}",
        read(&f.join("path")).trim(),
        std::env::var("PATH").unwrap()
    );
    let run = cargo()
        .args(["xtask", "ci-key", "--root", "../pr"])
        .current_dir(f.path())
        .env(name, value)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(stdout(&run), "prebuilt ran: ci-key --root ../pr\n");
}

#[test]
fn check_contracts_knows_the_prebuilt_xtask_cache() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let f = Fixture::new();
    for entry in std::fs::read_dir(repo.join(".github/workflows")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        f.file(&format!(".github/workflows/{name}"), &read(&path));
    }
    f.file(
        ".github/ci-trust.toml",
        &read(&repo.join(".github/ci-trust.toml")),
    );
    let consumer = f.join(".github/workflows/runpod-gpu-test.yml");
    let original = read(&consumer);
    let restore = "          path: xtask-bin\n      # A hit:";
    assert!(
        original.contains(restore),
        "the consumer restores the prebuilt xtask"
    );
    for (from, to, rule) in [
        // A reader that falls back to another key's binary.
        (
            restore,
            "          path: xtask-bin\n          restore-keys: xtask-bin-v1-\n      # A hit:",
            "restore-keys",
        ),
        // A reader that saves it: PR code runs in this job.
        (
            restore,
            "          path: xtask-bin\n      - uses: actions/cache/save@5a3ec84eff668545956fd18022155c47e93e2684 # v4.2.3\n        with:\n          key: xtask-bin-v1-${{ runner.os }}\n          path: xtask-bin\n      # A hit:",
            "untrusted-cache-save",
        ),
    ] {
        std::fs::write(&consumer, original.replace(from, to)).unwrap();
        let out = f.xtask(&["check-contracts"]);
        assert_eq!(out.status.code(), Some(1), "{rule}: {}", stdout(&out));
        assert!(stdout(&out).contains(rule), "{rule}: {}", stdout(&out));
    }
}

/// The xtask's cold build is paid by every CI job without the prebuilt
/// binary: the lockfile keeps two choices that cut it (README,
/// "Performance"). `cargo update` would silently undo the first, so it is
/// checked: `idna_adapter` 1.0.0 leaves out ICU4X (21 crates; the
/// xtask only talks to ASCII hosts, and a non-ASCII one is refused), and
/// one `sha2`, the version octocrab already builds.
#[test]
fn the_lockfile_keeps_the_xtask_build_small() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let lock: toml::Table = toml::from_str(&read(&repo.join("Cargo.lock"))).unwrap();
    let packages: Vec<(String, String)> = lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["version"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let versions = |name: &str| -> Vec<&str> {
        packages
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(
        versions("idna_adapter"),
        ["1.0.0"],
        "run `cargo update -p idna_adapter --precise 1.0.0`"
    );
    let icu: Vec<&str> = packages
        .iter()
        .filter(|(n, _)| n.starts_with("icu_"))
        .map(|(n, _)| n.as_str())
        .collect();
    assert!(icu.is_empty(), "ICU4X is back in the lockfile: {icu:?}");
    assert_eq!(versions("sha2").len(), 1, "{:?}", versions("sha2"));
}
