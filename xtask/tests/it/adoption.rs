//! Adoption: `init-ci` on generated host workspaces, the key's view of the
//! adopted xtask and of `feature-prefix`, the benchmarks' safe `--workdir`,
//! `--root` on every command and relative paths from the current directory.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// A GPU-shaped host: a virtual workspace with inherited edition 2021 and an
/// old rust-version, a crate with a `cuda` feature, a build script and tests,
/// a CPU crate, and an excluded kernels crate reached by a path dependency.
fn gpu_host() -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "# The host's own comment stays.\n[workspace]\nresolver = \"2\"\nmembers = [\n    \"crates/*\",\n]\nexclude = [\"kernels\"]\n\n[workspace.package]\nedition = \"2021\"\nrust-version = \"1.70\"\n",
    )
    .file(
        "crates/gpu-core/Cargo.toml",
        "[package]\nname = \"gpu-core\"\nversion = \"0.1.0\"\nedition.workspace = true\n\n[features]\ncuda = []\n\n[dependencies]\nkernels = { path = \"../../kernels\" }\n",
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
        "crates/gpu-core/tests/scale.rs",
        "#[test]\nfn scales() { assert_eq!(gpu_core::scale(2), 6); }\n",
    )
    .file(
        "crates/app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition.workspace = true\n\n[dependencies]\ngpu-core = { path = \"../gpu-core\" }\n",
    )
    .file(
        "crates/app/src/lib.rs",
        "#[test]\nfn uses_the_gpu_crate() { assert_eq!(gpu_core::scale(1), 3); }\n",
    )
    .file(
        "kernels/Cargo.toml",
        "[package]\nname = \"kernels\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("kernels/src/lib.rs", "pub const FACTOR: u32 = 3;\n");
    let lock = cargo()
        .args(["generate-lockfile", "--offline"])
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(lock.status.success(), "{}", stderr(&lock));
    f
}

fn init_ci(host: &Fixture, extra: &[&str]) -> Output {
    let mut args = vec!["init-ci"];
    args.extend_from_slice(extra);
    xtask_cmd(&args)
        .arg("--root")
        .arg(host.path())
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// What every adopted host must satisfy: its own `cargo test` passes
/// without building the xtask, `ci-key` gives a key that holds none of the
/// xtask's files, `check-contracts` finds nothing, and the five workflows
/// pass the validator of this repository's CI.
fn assert_adopted(host: &Fixture) {
    let test = cargo()
        .args(["test", "--offline"])
        .current_dir(host.path())
        .env("CARGO_TARGET_DIR", host.join("target"))
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&test), stderr(&test));
    assert!(
        test.status.success(),
        "the host's cargo test failed:\n{text}"
    );
    assert!(
        !text.contains("Compiling xtask"),
        "cargo test built the xtask:\n{text}"
    );

    let key = host.xtask(&["ci-key", "--explain"]);
    assert!(key.status.success(), "{}", stderr(&key));
    assert!(
        stdout(&key).starts_with("cuda-archive-v1-"),
        "{}",
        stdout(&key)
    );
    assert!(
        !stderr(&key)
            .lines()
            .any(|l| l.trim_start().starts_with("xtask/")),
        "the xtask's files are key inputs:\n{}",
        stderr(&key)
    );

    let contracts = host.xtask(&["check-contracts"]);
    assert!(
        contracts.status.success(),
        "{}{}",
        stdout(&contracts),
        stderr(&contracts)
    );

    let problems = crate::workflows::validate_repository(host.path());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn init_ci_adopts_a_gpu_workspace() {
    let host = gpu_host();
    let out = init_ci(&host, &[]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));

    let manifest = read(&host.join("Cargo.toml"));
    assert!(
        manifest.starts_with("# The host's own comment stays.\n"),
        "{manifest}"
    );
    assert!(manifest.contains("members = [\"xtask\", "), "{manifest}");
    assert!(
        manifest.contains("default-members = [\"crates/app\", \"crates/gpu-core\"]")
            || manifest.contains("default-members = [\"crates/gpu-core\", \"crates/app\"]"),
        "{manifest}"
    );
    assert!(
        manifest.contains("[profile.dev.package.sha2]"),
        "{manifest}"
    );
    let xtask_manifest = read(&host.join("xtask/Cargo.toml"));
    assert!(
        xtask_manifest.contains("edition = \"2024\""),
        "{xtask_manifest}"
    );
    assert!(
        !xtask_manifest.contains(".workspace = true"),
        "{xtask_manifest}"
    );
    assert!(!host.join("xtask/tests").exists());
    assert!(read(&host.join(".cargo/config.toml")).contains("xtask = \"run --package xtask --\""));
    let policy = read(&host.join(".github/ci-trust.toml"));
    assert!(
        policy.contains(
            "file = \"gpu-core-gpu-tests.tar.zst\"\nnextest = [\"-p\", \"gpu-core\", \"--features\", \"cuda\", \"--locked\"]"
        ),
        "{policy}"
    );
    assert!(!policy.contains("file = \"app-"), "{policy}");
    let consumer = read(&host.join(".github/workflows/runpod-gpu-test.yml"));
    assert!(consumer.contains("      archives: gpu-core-gpu-tests.tar.zst\n"));
    assert!(host.join("scripts/ci/runpod_reap.sh").is_file());
    assert!(
        stderr(&out).contains("--- cargo xtask check-contracts"),
        "{}",
        stderr(&out)
    );

    assert_adopted(&host);

    // A second run changes nothing and needs no --force.
    let again = init_ci(&host, &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(read(&host.join("Cargo.toml")), manifest);

    // A file the user edited is never overwritten without --force, and
    // nothing at all is written then.
    let workflow = host.join(".github/workflows/ci.yml");
    std::fs::write(&workflow, "name: mine\n").unwrap();
    std::fs::remove_file(host.join(".github/workflows/runpod-reap.yml")).unwrap();
    let refused = init_ci(&host, &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains(".github/workflows/ci.yml"),
        "{}",
        stderr(&refused)
    );
    assert!(stderr(&refused).contains("--force"), "{}", stderr(&refused));
    assert_eq!(read(&workflow), "name: mine\n");
    assert!(!host.join(".github/workflows/runpod-reap.yml").exists());
    let forced = init_ci(&host, &["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(read(&workflow).contains("cargo xtask check-contracts"));
}

#[test]
fn init_ci_adopts_the_archive_fixture_with_flags() {
    // This repository's GPU archive fixture: a `cuda` feature, a build
    // script, a binary, and a policy of its own that init-ci must not
    // replace without --force.
    let host = crate::archive::gpu_workspace();
    let refused = init_ci(&host, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(".github/ci-trust.toml"),
        "{}",
        stderr(&refused)
    );

    let out = init_ci(
        &host,
        &[
            "--force",
            "--runner",
            "ubuntu-22.04",
            "--ci-name",
            "Rust CI",
        ],
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let ci = read(&host.join(".github/workflows/ci.yml"));
    assert!(ci.contains("\nname: Rust CI\n") && ci.contains("runs-on: ubuntu-22.04"));
    assert!(!ci.contains("ubuntu-24.04"));
    let consumer = read(&host.join(".github/workflows/runpod-gpu-test.yml"));
    assert!(consumer.contains("workflows: [Rust CI]"), "{consumer}");
    assert_adopted(&host);

    // A label that would inject YAML is refused before anything is written.
    let bad = init_ci(&host, &["--force", "--runner", "x\n    evil: true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(!read(&host.join(".github/workflows/ci.yml")).contains("evil"));
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
fn the_xtask_is_a_key_input_only_when_an_archive_builds_it() {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"gpu\", \"xtask\"]\ndefault-members = [\"gpu\"]\nresolver = \"2\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file(
        "gpu/Cargo.toml",
        "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("gpu/src/lib.rs", "")
    .file(
        "xtask/Cargo.toml",
        "[package]\nname = \"xtask\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("xtask/src/main.rs", "fn main() {}\n");
    let policy = |args: &str| {
        f.file(
            ".github/ci-trust.toml",
            &format!("[[archive]]\nfile = \"a.tar.zst\"\nnextest = [{args}]\n"),
        );
        let out = f.xtask(&["ci-key", "--explain"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stderr(&out);
        text.lines()
            .any(|l| l.trim_start().starts_with("xtask/src/main.rs"))
    };
    assert!(
        !policy("\"-p\", \"gpu\""),
        "an archive of -p gpu never compiles the xtask"
    );
    // Each way an archive build may compile it keeps it in (fail closed).
    assert!(policy("\"-p\", \"xtask\""));
    assert!(policy("\"--workspace\""));
    assert!(policy("\"-p\", \"g*\""));
    assert!(policy(""));
    f.file(
        "gpu/Cargo.toml",
        "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dev-dependencies]\nxtask = { path = \"../xtask\" }\n",
    );
    assert!(
        policy("\"-p\", \"gpu\""),
        "a path dependency on the xtask builds it"
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
