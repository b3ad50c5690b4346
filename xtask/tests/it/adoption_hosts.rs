//! `init-ci` on the committed synthetic hosts of `tests/fixtures/hosts/`,
//! one per case of adoption: a GPU workspace (the thin xtask), a host with
//! its own xtask, one with its own CI workflow, one whose `.gitignore`
//! ignores `Cargo.lock`, and one with a git dependency no one can fetch.
//! Each ends in a working adoption, proven in the host by the host's own
//! `cargo xtask`, or in exit non-zero with what to do.
//!
//! The hosts take ci-trust from this checkout by path (tests have no
//! network). Their xtasks build into one shared target directory
//! (`target/adoption-hosts`), so ci-trust's dependencies are compiled once
//! for all of them; the thin xtask's alias is overridden for that with
//! `CARGO_ALIAS_XTASK` (its own alias names `--target-dir target/xtask`).
//! The shared binary is rebuilt for each host, so these tests run one at a
//! time. The host with its own xtask (a workspace member) takes ci-trust
//! by a `file://` git dependency on a commit of this checkout's files:
//! the key refuses a path dependency outside the repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use crate::support::{Fixture, stderr, stdout, xtask_cmd};

/// One test at a time: the hosts share one xtask binary.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A copy of the committed host `name`, as a fresh git work tree.
fn host(name: &str) -> Fixture {
    let f = Fixture::new();
    let from = repo().join("xtask/tests/fixtures/hosts").join(name);
    for entry in walkdir::WalkDir::new(&from) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(&from).unwrap();
        if entry.file_type().is_file() {
            f.file(rel.to_str().unwrap(), &read(entry.path()));
        }
    }
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(f.path())
        .output()
        .unwrap();
    assert!(git.status.success(), "{}", stderr(&git));
    f
}

/// The environment every adoption and host command runs with. A git
/// dependency cannot be fetched offline: there, a proxy that refuses every
/// connection shows that nothing is fetched from the network.
fn host_env(command: &mut Command, thin: bool) {
    command
        .env("CARGO_TARGET_DIR", repo().join("target/adoption-hosts"))
        .env_remove("RUSTC_WRAPPER");
    if thin {
        command.env("CARGO_NET_OFFLINE", "true").env(
            "CARGO_ALIAS_XTASK",
            "run --manifest-path xtask/Cargo.toml --",
        );
    } else {
        command
            .env_remove("CARGO_NET_OFFLINE")
            .env("CARGO_HTTP_PROXY", "http://127.0.0.1:9")
            .env("CARGO_NET_RETRY", "0");
    }
}

/// A git repository (`file://` URL and commit) of this checkout's ci-trust:
/// the files a git dependency on ci-trust reads, committed once per run.
fn ci_trust_git() -> &'static (String, String) {
    static REPO: std::sync::OnceLock<(tempfile::TempDir, (String, String))> =
        std::sync::OnceLock::new();
    let (_, found) = REPO.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for part in [
            "Cargo.toml",
            "Cargo.lock",
            "crates/ci-trust",
            "xtask/Cargo.toml",
            "xtask/src",
            ".github",
            "scripts",
        ] {
            for entry in walkdir::WalkDir::new(repo().join(part)) {
                let entry = entry.unwrap();
                if entry.file_type().is_file() {
                    let rel = entry.path().strip_prefix(repo()).unwrap();
                    let to = dir.path().join(rel);
                    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                    std::fs::copy(entry.path(), &to).unwrap();
                }
            }
        }
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
            stdout(&out).trim().to_owned()
        };
        git(&["init", "-q"]);
        git(&["add", "-A"]);
        git(&["commit", "-qm", "ci-trust"]);
        let rev = git(&["rev-parse", "HEAD"]);
        let url = format!("file://{}", dir.path().display());
        (dir, (url, rev))
    });
    found
}

fn init_ci(host: &Fixture, args: &[&str], thin: bool) -> Output {
    let mut command = xtask_cmd(&["init-ci"]);
    command.args(args).arg("--root").arg(host.path());
    if thin {
        command.arg("--ci-trust-path").arg(repo());
    } else {
        let (url, rev) = ci_trust_git();
        command.args(["--ci-trust-git", url, "--ci-trust-rev", rev]);
    }
    command.current_dir(host.path());
    host_env(&mut command, thin);
    command.output().unwrap()
}

/// The host's own `cargo xtask ARGS`.
fn cargo_xtask(host: &Fixture, args: &[&str], thin: bool) -> Output {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.arg("xtask").args(args).current_dir(host.path());
    host_env(&mut command, thin);
    command.output().unwrap()
}

fn all(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

/// Every file of the host but `.git/` and `target/`, with its text.
fn snapshot(host: &Fixture) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(host.path()).sort_by_file_name() {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(host.path()).unwrap();
        let rel = rel.to_string_lossy().into_owned();
        if rel.starts_with(".git/") || rel.starts_with("target") || !entry.file_type().is_file() {
            continue;
        }
        files.push((rel, read(entry.path())));
    }
    files
}

/// What a proven adoption leaves: the proof's four steps passed, the
/// workflows pass this repository's own validator, and the key never
/// holds the xtask's files.
fn assert_proven(host: &Fixture, out: &Output, thin: bool) {
    assert!(out.status.success(), "{}", all(out));
    for step in ["proof 1/4", "proof 2/4", "proof 3/4", "proof 4/4"] {
        assert!(stderr(out).contains(step), "{step}:\n{}", all(out));
    }
    assert!(
        stderr(out).contains("adopted: review the changes"),
        "{}",
        all(out)
    );
    let problems = crate::workflows::validate_repository(host.path());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let help = cargo_xtask(host, &["--help"], thin);
    for command in ["ci-key", "check-contracts", "gpu-archive", "verify-key"] {
        assert!(
            stdout(&help).contains(command),
            "{command}:\n{}",
            all(&help)
        );
    }
}

#[test]
fn a_gpu_workspace_gets_a_thin_xtask_and_keeps_its_lockfile_and_key() {
    let _one = one_at_a_time();
    let h = host("gpu-workspace");
    let lock = read(&h.join("Cargo.lock"));
    let manifest = read(&h.join("Cargo.toml"));
    let out = init_ci(&h, &[], true);
    assert_proven(&h, &out, true);

    // The host's lockfile and manifest are untouched: the xtask is its
    // own workspace, with its own lockfile seeded from ci-trust's.
    assert_eq!(read(&h.join("Cargo.lock")), lock);
    assert_eq!(read(&h.join("Cargo.toml")), manifest);
    let xtask_manifest = read(&h.join("xtask/Cargo.toml"));
    assert!(
        xtask_manifest.contains("\n[workspace]\n"),
        "{xtask_manifest}"
    );
    assert!(
        xtask_manifest.contains("ci-trust = { path = "),
        "{xtask_manifest}"
    );
    let xtask_lock = read(&h.join("xtask/Cargo.lock"));
    assert!(xtask_lock.contains("name = \"ci-trust\"") && !xtask_lock.contains("wiremock"));
    assert!(
        read(&h.join(".cargo/config.toml")).contains(
            "xtask = \"run --manifest-path xtask/Cargo.toml --target-dir target/xtask --\""
        )
    );
    // At most 200 lines of Rust.
    let rust: usize = snapshot(&h)
        .iter()
        .filter(|(path, _)| path.ends_with(".rs") && path.starts_with("xtask/"))
        .map(|(_, text)| text.lines().count())
        .sum();
    assert!(rust > 0 && rust <= 200, "{rust} lines of Rust");

    // The key never names the xtask; the host's own `cargo test` never builds it.
    let key = cargo_xtask(&h, &["ci-key", "--explain"], true);
    assert!(key.status.success(), "{}", all(&key));
    assert!(
        !stderr(&key)
            .lines()
            .any(|l| l.trim_start().starts_with("xtask/")),
        "{}",
        stderr(&key)
    );
    let test = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--offline", "--locked"])
        .current_dir(h.path())
        .env("CARGO_TARGET_DIR", h.join("target"))
        .output()
        .unwrap();
    assert!(test.status.success(), "{}", all(&test));
    assert!(!stderr(&test).contains("Compiling xtask"), "{}", all(&test));

    // Run again, it changes nothing.
    let again = init_ci(&h, &[], true);
    assert!(again.status.success(), "{}", all(&again));
    assert!(
        !stderr(&again).lines().any(|l| l.starts_with("wrote ")),
        "{}",
        stderr(&again)
    );

    // A file init-ci owns and the user edited is refused without
    // --upgrade; --upgrade rewrites it, and only shows a diff of the
    // policy, which is the host's once written.
    let reap = h.join(".github/workflows/runpod-reap.yml");
    let written = read(&reap);
    std::fs::write(&reap, format!("{written}# an edit\n")).unwrap();
    let policy = h.join(".github/ci-trust.toml");
    std::fs::write(&policy, format!("{}# reviewed\n", read(&policy))).unwrap();
    let refused = init_ci(&h, &[], true);
    assert_eq!(refused.status.code(), Some(2), "{}", all(&refused));
    assert!(stderr(&refused).contains("runpod-reap.yml: written by an earlier init-ci"));
    assert!(stderr(&refused).contains("ci-trust.toml: exists with other content"));
    let upgraded = init_ci(&h, &["--upgrade"], true);
    assert!(upgraded.status.success(), "{}", all(&upgraded));
    assert_eq!(read(&reap), written);
    assert!(read(&policy).ends_with("# reviewed\n"));
    assert!(
        stderr(&upgraded).contains("kept .github/ci-trust.toml")
            && stderr(&upgraded).contains("-# reviewed"),
        "{}",
        stderr(&upgraded)
    );
}

#[test]
fn a_host_with_its_own_ci_workflow_keeps_it_and_every_job() {
    let _one = one_at_a_time();
    let h = host("own-ci");
    let ci = read(&h.join(".github/workflows/ci.yml"));
    let out = init_ci(&h, &["--ci-name", "Tensor CI"], true);
    assert_proven(&h, &out, true);
    assert_eq!(read(&h.join(".github/workflows/ci.yml")), ci);
    let checks = read(&h.join(".github/workflows/ci-trust.yml"));
    assert!(checks.contains("cargo xtask check-contracts") && !checks.contains("clippy"));
    let consumer = read(&h.join(".github/workflows/runpod-gpu-test.yml"));
    assert!(consumer.contains("workflows: [Tensor CI]"), "{consumer}");
    // `feature-prefix`-less toolkit: the single package's `cuda-12080` is its archive feature.
    let policy = read(&h.join(".github/ci-trust.toml"));
    assert!(policy.contains("\"-p\", \"tensor-gpu\""), "{policy}");

    // --force replaces nothing of the host's CI.
    let forced = init_ci(&h, &["--force", "--ci-name", "Tensor CI"], true);
    assert!(forced.status.success(), "{}", all(&forced));
    assert_eq!(read(&h.join(".github/workflows/ci.yml")), ci);

    // A workflow of the host's at a name init-ci writes is never replaced.
    let reap = h.join(".github/workflows/runpod-reap.yml");
    std::fs::write(&reap, "name: our own reaper\non: push\njobs: {}\n").unwrap();
    let before = snapshot(&h);
    let refused = init_ci(&h, &["--force", "--ci-name", "Tensor CI"], true);
    assert_eq!(refused.status.code(), Some(2), "{}", all(&refused));
    assert!(
        stderr(&refused).contains("never replaces one, even with --force"),
        "{}",
        all(&refused)
    );
    assert_eq!(snapshot(&h), before, "a refused run writes nothing");
}

#[test]
fn a_gitignored_lockfile_is_generated_and_unignored() {
    let _one = one_at_a_time();
    let h = host("ignored-lockfile");
    let ignored = |h: &Fixture| {
        Command::new("git")
            .args(["check-ignore", "-q", "Cargo.lock"])
            .current_dir(h.path())
            .status()
            .unwrap()
            .success()
    };
    assert!(ignored(&h) && !h.join("Cargo.lock").exists());
    let out = init_ci(&h, &[], true);
    assert_proven(&h, &out, true);
    assert!(h.join("Cargo.lock").is_file());
    assert!(!ignored(&h), "{}", read(&h.join(".gitignore")));
    assert!(read(&h.join(".gitignore")).starts_with("/target\nCargo.lock\n"));
    assert!(
        stderr(&out).contains("commit Cargo.lock"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_git_dependency_cargo_cannot_fetch_stops_with_what_to_do() {
    let _one = one_at_a_time();
    let h = host("unresolvable-dependency");
    let before = snapshot(&h);
    // No lockfile: cargo cannot generate one, and nothing is written.
    let out = init_ci(&h, &[], true);
    assert_eq!(out.status.code(), Some(2), "{}", all(&out));
    assert!(
        stderr(&out).contains("cargo could not resolve its dependencies"),
        "{}",
        all(&out)
    );
    assert!(
        stderr(&out).contains("nothing was written"),
        "{}",
        all(&out)
    );
    assert_eq!(snapshot(&h), before);

    // A lockfile that names it: the adoption is written, and the proof's
    // fresh build cannot fetch it, so init-ci fails and says what to do.
    h.file(
        "Cargo.lock",
        "version = 4\n\n[[package]]\nname = \"gpu\"\nversion = \"0.1.0\"\ndependencies = [\n \"helper\",\n]\n\n[[package]]\nname = \"helper\"\nversion = \"0.1.0\"\nsource = \"git+file:///nonexistent/ci-trust-fixture/helper.git#0123456789abcdef0123456789abcdef01234567\"\n",
    );
    let out = init_ci(&h, &[], true);
    assert_eq!(out.status.code(), Some(2), "{}", all(&out));
    assert!(
        stderr(&out).contains("the fresh build of the GPU archive failed"),
        "{}",
        all(&out)
    );
    assert!(!stderr(&out).contains("adopted:"), "{}", all(&out));
}

#[test]
fn a_host_with_its_own_xtask_gets_the_subcommands_and_keeps_its_own() {
    let _one = one_at_a_time();
    let h = host("own-xtask");
    let out = init_ci(&h, &[], false);
    assert_proven(&h, &out, false);
    let main = read(&h.join("xtask/src/main.rs"));
    assert!(
        main.contains("fn main() {\n    ci_trust_xtask::dispatch();\n"),
        "{main}"
    );
    assert!(
        main.ends_with("mod ci_trust_xtask; // ci-trust's subcommands (cargo xtask init-ci)\n")
    );
    assert!(
        read(&h.join("xtask/src/ci_trust_xtask.rs")).contains("@generated by ci-trust init-ci")
    );
    assert_eq!(
        read(&h.join(".cargo/config.toml")),
        "[alias]\nxtask = \"run --package xtask --\"\n"
    );
    // The host's own task and help are still there, beside ci-trust's.
    let codegen = cargo_xtask(&h, &["codegen"], false);
    assert!(
        stdout(&codegen).contains("the kernels table is up to date"),
        "{}",
        all(&codegen)
    );
    let help = cargo_xtask(&h, &["--help"], false);
    assert!(
        stdout(&help).contains("codegen") && stdout(&help).contains("ci-key"),
        "{}",
        all(&help)
    );

    // A `main` init-ci cannot place the call in: it says which two lines
    // to add, and fails until they are there.
    std::fs::write(
        h.join("xtask/src/main.rs"),
        "fn main()\n{\n    println!(\"tasks\");\n}\n",
    )
    .unwrap();
    let out = init_ci(&h, &[], false);
    assert_eq!(out.status.code(), Some(2), "{}", all(&out));
    assert!(
        stderr(&out).contains("mod ci_trust_xtask;")
            && stderr(&out).contains("ci_trust_xtask::dispatch();"),
        "{}",
        all(&out)
    );
    std::fs::write(
        h.join("xtask/src/main.rs"),
        "fn main()\n{\n    ci_trust_xtask::dispatch();\n    println!(\"tasks\");\n}\nmod ci_trust_xtask;\n",
    )
    .unwrap();
    let out = init_ci(&h, &[], false);
    assert_proven(&h, &out, false);
}
