//! The attack pass on the key tree (issue 17, docs/key-attacks.md, "Attack
//! pass on the key tree, issue 17"): edits a pull request can make, given
//! the threat model, against the tree itself rather than against the key's
//! rules. Rows that compare main's build with the pull request's use the
//! harness of `key_tree_attacks.rs` (its fixture, its prep/edit shell, both
//! keys from the real binary, both trees built in their key trees);
//! attacks on the stager and the namespace have tests of their own below.
//!
//! `CI_TRUST_ATTACK_TABLE=all` runs every row; the default suite runs the
//! rows whose fix a regression would undo. `CI_TRUST_ATTACK_PASS_OUT=FILE`
//! writes the outcome table to FILE.

use std::path::Path;
use std::process::{Command, Output};

use crate::key_tree_attacks::{Row, default_row, row, run_table};
use crate::support::{Fixture, stderr, xtask_cmd};

/// Moves the fixture's workspace into `ws/` of a git repository: a
/// workspace in a subdirectory of its checkout (`--root repo/ws`).
macro_rules! monorepo {
    () => {
        "mkdir ws && mv app util mac Cargo.toml Cargo.lock .cargo .github ws/ && git init -q && git add -A && git -c user.email=a@b -c user.name=a commit -qm main && "
    };
}

/// Sets the build script's `EXTRA` line in `$APP/build.rs`.
macro_rules! extra {
    ($app:literal) => {
        concat!("sed -i \"s#// EXTRA#$EXTRA#\" ", $app, "/build.rs")
    };
}

const fn in_subdir(row: Row) -> Row {
    Row {
        workspace: "ws",
        ..row
    }
}

const GIT_HEAD: &str = "println!(\"cargo:rustc-env=EXTRA={}\", std::process::Command::new(\"git\").args([\"rev-parse\", \"HEAD\"]).output().map(|o| String::from_utf8_lossy(\\&o.stdout).trim().to_string()).unwrap_or_default());";

const PASS_ROWS: &[Row] = &[
    in_subdir(default_row(
        "P1",
        "workspace in ws/ of its checkout: a build script reads ../../shared.txt (the checkout, outside the workspace)",
        concat!(
            monorepo!(),
            "echo one > shared.txt && EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(\"..\\/..\\/shared.txt\").unwrap_or_default().trim());' && ",
            extra!("ws/app")
        ),
        "echo two > shared.txt",
    )),
    in_subdir(default_row(
        "P2",
        "workspace in ws/: a build script embeds `git rev-parse HEAD` (the checkout's .git above the workspace); the pull request commits an unrelated file",
        concat!(
            monorepo!(),
            "EXTRA='",
            "println!(\"cargo:rustc-env=EXTRA={}\", std::process::Command::new(\"git\").args([\"rev-parse\", \"HEAD\"]).output().map(|o| String::from_utf8_lossy(\\&o.stdout).trim().to_string()).unwrap_or_default());",
            "' && ",
            extra!("ws/app"),
            " && git add -A && git -c user.email=a@b -c user.name=a commit -qm head"
        ),
        "echo notes > NOTES.md && git add -A && git -c user.email=a@b -c user.name=a commit -qm pr",
    )),
    in_subdir(row(
        "P3",
        "workspace in ws/: edit the checkout's rust-toolchain.toml above it",
        concat!(
            monorepo!(),
            "printf '[toolchain]\\nchannel = \"stable\"\\n' > rust-toolchain.toml"
        ),
        "printf '[toolchain]\\nchannel = \"nightly\"\\n' > rust-toolchain.toml",
    )),
    in_subdir(row(
        "P4",
        "workspace in ws/: edit the checkout's .cargo/config.toml above it ([env])",
        concat!(
            monorepo!(),
            "mkdir -p .cargo && printf '[env]\\nENVVAR = \"parent\"\\n' > .cargo/config.toml"
        ),
        "printf '[env]\\nENVVAR = \"pr\"\\n' > .cargo/config.toml",
    )),
    in_subdir(row(
        "P5",
        "workspace in ws/: src/peek.txt a link to ../../../shared.txt (above the workspace), embedded; edit the target",
        concat!(
            monorepo!(),
            "echo one > shared.txt && ln -s ../../../shared.txt ws/app/src/peek.txt && printf 'pub fn extra() -> String { include_str!(\"peek.txt\").trim().into() }\\n' > ws/app/src/extra.rs"
        ),
        "echo two > shared.txt",
    )),
    in_subdir(default_row(
        "P19",
        "workspace in ws/, a submodule of the checkout (ws/.git a gitfile): a build script reads ../../shared.txt of the superproject",
        concat!(
            monorepo!(),
            "echo 'gitdir: ../.git/modules/ws' > ws/.git && echo one > shared.txt && EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(\"..\\/..\\/shared.txt\").unwrap_or_default().trim());' && ",
            extra!("ws/app")
        ),
        "echo two > shared.txt",
    )),
    row(
        "P6",
        "a build script embeds `git rev-parse HEAD` of the checkout; the pull request commits an unrelated file",
        concat!(
            "git init -q && git add -A && git -c user.email=a@b -c user.name=a commit -qm main && EXTRA='",
            "println!(\"cargo:rustc-env=EXTRA={}\", std::process::Command::new(\"git\").args([\"rev-parse\", \"HEAD\"]).output().map(|o| String::from_utf8_lossy(\\&o.stdout).trim().to_string()).unwrap_or_default());",
            "' && ",
            extra!("app"),
            " && git add -A && git -c user.email=a@b -c user.name=a commit -qm head"
        ),
        "echo notes > NOTES.md && git add -A && git -c user.email=a@b -c user.name=a commit -qm pr",
    ),
    row(
        "P7",
        "chmod 4600 a declared input; the build script embeds its mode",
        concat!(
            "EXTRA='println!(\"cargo:rustc-env=EXTRA={:o}\", { use std::os::unix::fs::PermissionsExt; std::fs::metadata(\"data\\/cfg.txt\").unwrap().permissions().mode() \\& 0o7777 });' && ",
            extra!("app")
        ),
        "chmod 4600 app/data/cfg.txt",
    ),
    row(
        "P8",
        "chmod +x a declared input",
        "",
        "chmod +x app/data/cfg.txt",
    ),
    row(
        "P9",
        "backdate a declared input (touch -d 1990); the build script embeds whether its mtime is before 2000",
        concat!(
            "EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::metadata(\"data\\/cfg.txt\").unwrap().modified().unwrap() < std::time::UNIX_EPOCH + std::time::Duration::from_secs(946684800));' && ",
            extra!("app")
        ),
        "touch -d 1990-01-01 app/data/cfg.txt",
    ),
    row(
        "P10",
        "add an empty directory app/flags/ that the build script tests with is_dir()",
        concat!(
            "EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::path::Path::new(\"flags\").is_dir());' && ",
            extra!("app")
        ),
        "mkdir app/flags",
    ),
    row(
        "P11",
        "include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../notes.txt\")); edit notes.txt",
        "echo n1 > notes.txt && printf 'pub fn extra() -> String { include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../notes.txt\")).trim().into() }\\n' > app/src/extra.rs",
        "echo n2 > notes.txt",
    ),
    row(
        "P12",
        "a source file named with a backslash (app/src/a\\b.txt, which a `\\` → `/` mapping would place at a/b.txt)",
        "",
        "printf 'x' > 'app/src/a\\b.txt'",
    ),
    row(
        "P13",
        "a FIFO in .cargo/ (hashed whole)",
        "",
        "mkfifo .cargo/pipe",
    ),
    row(
        "P14",
        "a link in src/ that climbs out of the checkout (../../../../../../../../etc/hostname)",
        "",
        "ln -s ../../../../../../../../etc/hostname app/src/host.txt",
    ),
    row(
        "P15",
        "the build script lists the workspace root (read_dir(\"..\")); add NOTES.md and docs/",
        concat!(
            "EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_dir(\"..\").unwrap().count());' && ",
            extra!("app")
        ),
        "echo x > NOTES.md && mkdir -p docs && echo y > docs/a.md",
    ),
    row(
        "P16",
        "app/data a link to ../shared_data; the build script reads data/other.txt (undeclared, behind the link); edit it",
        concat!(
            "mv app/data shared_data && ln -s ../shared_data app/data && echo o1 > shared_data/other.txt && ",
            "EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(\"data\\/other.txt\").unwrap_or_default().trim());' && ",
            extra!("app")
        ),
        "echo o2 > shared_data/other.txt",
    ),
    row(
        "P17",
        "a proc macro reads the real checkout's file by the absolute path it was built from (file!() / CARGO_MANIFEST_DIR + /../secret.txt)",
        "echo 1 > secret.txt && printf 'use proc_macro::TokenStream;\\n#[proc_macro]\\npub fn value(_: TokenStream) -> TokenStream {\\n    let p = std::path::Path::new(env!(\"CARGO_MANIFEST_DIR\")).parent().unwrap().join(\"secret.txt\");\\n    std::fs::read_to_string(p).map(|v| v.trim().to_string()).unwrap_or_else(|_| \"0\".into()).parse().unwrap()\\n}\\n' > mac/src/lib.rs",
        "echo 2 > secret.txt",
    ),
    row(
        "P18",
        "a build script reads the checkout through $PWD/.. of cargo's starting directory (std::env::var(\"PWD\"))",
        concat!(
            "echo one > secret.txt && EXTRA='println!(\"cargo:rustc-env=EXTRA={}\", std::fs::read_to_string(format!(\"{}\\/secret.txt\", std::env::var(\"PWD\").unwrap_or_default())).unwrap_or_default().trim());' && ",
            extra!("app")
        ),
        "echo two > secret.txt",
    ),
];

#[test]
fn every_edit_of_the_attack_pass_moves_the_key_or_builds_like_main() {
    let test = "every_edit_of_the_attack_pass_moves_the_key_or_builds_like_main";
    if !crate::key_tree::have_key_tree(test) || !has_git() {
        return;
    }
    let all = std::env::var("CI_TRUST_ATTACK_TABLE").is_ok_and(|v| v == "all");
    run_table(PASS_ROWS, all, "CI_TRUST_ATTACK_PASS_OUT");
}

/// Row P2's build script is the one `GIT_HEAD` spells (kept in one place
/// for the doc).
#[test]
fn row_p2_embeds_the_head_commit() {
    let p2 = PASS_ROWS.iter().find(|r| r.id == "P2").unwrap();
    assert!(p2.prep.contains(GIT_HEAD));
}

fn has_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn xtask(args: &[&str]) -> Command {
    let mut cmd = xtask_cmd(args);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_BUILD_DIR",
        "CARGO_BUILD_TARGET",
        "CI_TRUST_NO_KEY_TREE",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(["-c", "user.email=a@b", "-c", "user.name=a"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", stderr(&output));
}

fn lock(dir: &Path) {
    let output = Command::new(cargo())
        .args(["generate-lockfile", "--offline"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

fn package(ws: &Fixture, dir: &str, name: &str) {
    ws.file(
        &format!("{dir}/Cargo.toml"),
        &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
    );
}

fn the_tracer() -> &'static str {
    crate::key_tree_attacks::table_tracer()
}

fn unpack(archive: &Path, name: &str) -> Vec<u8> {
    let unpacked = Fixture::new();
    let packed = std::fs::File::open(archive).unwrap();
    let decoder = ruzstd::decoding::StreamingDecoder::new(std::io::BufReader::new(packed)).unwrap();
    tar::Archive::new(decoder).unpack(unpacked.path()).unwrap();
    std::fs::read(unpacked.join(name)).unwrap()
}

fn gpu_archive(root: &Path, scratch: &Fixture) -> Output {
    xtask(&["gpu-archive", "--out"])
        .arg(scratch.join("out"))
        .arg("--root")
        .arg(root)
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .output()
        .unwrap()
}

/// A workspace in `ws/` of a git checkout whose default target directory
/// (`ws/target`, bound through into the key tree) holds a file the
/// checkout commits: refused like a committed `target/` at the top. The
/// git index is the checkout's (`.git` above the workspace); before, the
/// tree asked `ws/.git`, found none, and only warned.
#[test]
fn a_committed_target_dir_of_a_workspace_below_its_checkout_is_refused() {
    let test = "a_committed_target_dir_of_a_workspace_below_its_checkout_is_refused";
    if !crate::key_tree::have_key_tree(test) || !has_git() {
        return;
    }
    let repo = Fixture::new();
    repo.file(
        "ws/Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file("ws/app/src/main.rs", "fn main() {}\n")
    .file("ws/target/debug/.fingerprint/app/planted", "planted\n");
    package(&repo, "ws/app", "app");
    lock(&repo.join("ws"));
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "-A", "-f"]);
    git(repo.path(), &["commit", "-qm", "main"]);
    let output = xtask(&["verify-key", "--trace", "--key-tree", "--root"])
        .arg(repo.join("ws"))
        .arg("--")
        .arg(cargo())
        .args(["build", "--offline", "--quiet"])
        .output()
        .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the checkout commits ws/target/debug/.fingerprint/app/planted under the build's output directory ws/target"),
        "{text}"
    );
}

/// CI's layout: `$GITHUB_WORKSPACE` holds `trusted/`, `pr/` (the pull
/// request's repository) and the `--out` directory. The tree covers `pr/`,
/// and a file `pr/`'s index tracks under its target directory is refused;
/// a tree widened to `$GITHUB_WORKSPACE` asked a directory with no index
/// and only warned.
#[test]
fn in_ci_s_layout_a_committed_target_dir_of_the_pull_request_is_refused() {
    let test = "in_ci_s_layout_a_committed_target_dir_of_the_pull_request_is_refused";
    if !crate::key_tree::have_key_tree(test) || !has_git() {
        return;
    }
    let workspace = Fixture::new();
    workspace
        .file("trusted/README.md", "main's checkout\n")
        .file(
            "pr/Cargo.toml",
            "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
        )
        .file("pr/app/src/main.rs", "fn main() {}\n")
        .file("pr/target/debug/.fingerprint/app/planted", "planted\n");
    package(&workspace, "pr/app", "app");
    let pr = workspace.join("pr");
    lock(&pr);
    git(&pr, &["init", "-q"]);
    git(&pr, &["add", "-A", "-f"]);
    git(&pr, &["commit", "-qm", "pr"]);
    let output = xtask(&["verify-key", "--trace", "--key-tree", "--root"])
        .arg(&pr)
        .arg("--")
        .arg(cargo())
        .args(["build", "--offline", "--quiet"])
        .env("GITHUB_WORKSPACE", workspace.path())
        .output()
        .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the checkout commits target/debug/.fingerprint/app/planted under the build's output directory target"),
        "{text}"
    );
}

/// A daemon of the build, in a workspace below its checkout, swaps the
/// binary cargo wrote for a symlink to `<checkout>/secret.bin`, a file of
/// the pull request's checkout outside the workspace. Inside the namespace
/// the link dangles; the packer, outside it, would follow it. Refused
/// (before: only links into the workspace were).
#[test]
fn a_binary_swapped_for_a_link_to_the_checkout_around_the_workspace_is_not_packed() {
    let test = "a_binary_swapped_for_a_link_to_the_checkout_around_the_workspace_is_not_packed";
    if !crate::key_tree::have_key_tree(test) {
        return;
    }
    let repo = Fixture::new();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    repo.file("secret.bin", "SECRET-BINARY\n")
        .file(
            "ws/Cargo.toml",
            "[workspace]\nmembers = [\"leaky\"]\nresolver = \"2\"\n",
        )
        .file(
            "ws/.github/ci-trust.toml",
            &format!(
                "[[archive]]\nfile = \"leaky.tar.zst\"\nbuild = [\"-p\", \"leaky\", \"--bin\", \"leaky\", \"--offline\"]\nbinaries = [\"leaky\"]\n[verify]\ntracer = \"{}\"\nkey-tree = \"required\"\n",
                the_tracer()
            ),
        )
        .file("ws/leaky/src/main.rs", "fn main() {}\n")
        .file(
            "ws/leaky/build.rs",
            "fn main() {\n    if std::env::args().nth(1).as_deref() == Some(\"daemon\") {\n        let bin = std::env::args().nth(2).unwrap();\n        let secret = std::env::args().nth(3).unwrap();\n        for _ in 0..20000 {\n            if std::fs::symlink_metadata(&bin).is_ok_and(|m| m.is_file()) {\n                let _ = std::fs::remove_file(&bin);\n                std::os::unix::fs::symlink(&secret, &bin).unwrap();\n                return;\n            }\n            std::thread::sleep(std::time::Duration::from_millis(1));\n        }\n        return;\n    }\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let out = std::path::PathBuf::from(std::env::var(\"OUT_DIR\").unwrap());\n    let dir = std::path::PathBuf::from(std::env::var(\"CARGO_MANIFEST_DIR\").unwrap());\n    let secret = dir.parent().unwrap().parent().unwrap().join(\"secret.bin\");\n    std::process::Command::new(std::env::current_exe().unwrap()).arg(\"daemon\").arg(out.join(\"../../../leaky\")).arg(&secret).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();\n}\n",
        );
    package(&repo, "ws/leaky", "leaky");
    lock(&repo.join("ws"));
    let scratch = Fixture::new();
    let output = gpu_archive(&repo.join("ws"), &scratch);
    let text = stderr(&output);
    let archive = scratch.join("out/leaky.tar.zst");
    if output.status.success() {
        // The daemon lost the race: what is packed is what cargo built.
        assert!(
            !unpack(&archive, "leaky").starts_with(b"SECRET"),
            "a file of the checkout was packed: {text}"
        );
    } else {
        assert!(
            text.contains(
                "a file outside the build's output directories, not something the build wrote"
            ),
            "{text}"
        );
        assert!(!archive.exists(), "{text}");
    }
}

/// Two `[[archive]]` builds share one key tree. The first one's build
/// script finds the tree's path on disk (`/proc/self/mountinfo`), moves
/// the tree away and puts a symlink to the checkout at its path; the
/// second build's namespace would then bind the checkout over itself, and
/// its build script reads what no key names (a `stat`, which fanotify
/// does not see). The tree is checked to be the directory staged (its
/// inode), so the second build fails instead; and removing the tree
/// removes the link, not the checkout behind it.
#[test]
fn a_build_that_swaps_the_key_tree_for_a_link_to_the_checkout_cannot_expose_it_to_the_next() {
    let test =
        "a_build_that_swaps_the_key_tree_for_a_link_to_the_checkout_cannot_expose_it_to_the_next";
    if !crate::key_tree::have_key_tree(test) {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"a\", \"b\"]\nresolver = \"2\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        &format!(
            "[[archive]]\nfile = \"a.tar.zst\"\nbuild = [\"-p\", \"a\", \"--bin\", \"a\", \"--offline\"]\nbinaries = [\"a\"]\n[[archive]]\nfile = \"b.tar.zst\"\nbuild = [\"-p\", \"b\", \"--bin\", \"b\", \"--offline\"]\nbinaries = [\"b\"]\n[verify]\ntracer = \"{}\"\nkey-tree = \"required\"\n",
            the_tracer()
        ),
    )
    .file("a/src/main.rs", "fn main() { println!(\"{}\", env!(\"SWAPPED\")); }\n")
    .file(
        "a/build.rs",
        r#"fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = dir.parent().unwrap().to_str().unwrap().to_owned();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let source = info.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(4) == Some(&root.as_str())).then(|| fields[3].to_owned())
    });
    let mut swapped = String::from("no");
    if let Some(tree) = source {
        let moved = format!("{tree}.moved");
        if std::fs::rename(&tree, &moved).is_ok() && std::os::unix::fs::symlink(&root, &tree).is_ok() {
            // Where the test finds what to clean up.
            let _ = std::fs::write(std::env::var("SWAP_NOTE").unwrap(), &moved);
            swapped = tree;
        }
    }
    println!("cargo::rustc-env=SWAPPED={swapped}");
}
"#,
    )
    .file("b/src/main.rs", "fn main() { println!(\"{}\", env!(\"SEEN\")); }\n")
    .file(
        "b/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let seen = std::fs::metadata(\"secret.txt\").map(|m| m.len()).unwrap_or(0);\n    println!(\"cargo::rustc-env=SEEN=secret {seen}\");\n}\n",
    )
    .file("b/secret.txt", "SECRET\n");
    package(&ws, "a", "a");
    package(&ws, "b", "b");
    lock(ws.path());
    let scratch = Fixture::new();
    let note = scratch.join("swap-note");
    let output = xtask(&["gpu-archive", "--out"])
        .arg(scratch.join("out"))
        .arg("--root")
        .arg(ws.path())
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .env("SWAP_NOTE", &note)
        .output()
        .unwrap();
    let text = stderr(&output);
    // The tree the build moved aside is the build's; the test removes it.
    if let Ok(moved) = std::fs::read_to_string(&note) {
        let moved = Path::new(moved.trim());
        if moved.starts_with(std::env::temp_dir())
            && moved
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("ci-trust-key-tree-"))
        {
            let _ = std::fs::remove_dir_all(moved);
        }
    }
    assert!(
        note.exists(),
        "the first build did not swap the tree: {text}"
    );
    assert!(ws.join("b/secret.txt").exists(), "the checkout was removed");
    assert!(ws.join("Cargo.toml").exists(), "the checkout was removed");
    if output.status.success() {
        let seen = String::from_utf8(unpack(&scratch.join("out/b.tar.zst"), "b")).unwrap();
        panic!(
            "the second build ran after the tree was swapped: {seen:?} (a: {:?})\n{text}",
            String::from_utf8_lossy(&unpack(&scratch.join("out/a.tar.zst"), "a"))
        );
    }
    assert!(
        text.contains("is no longer a directory (a build replaced it)"),
        "{text}"
    );
    assert!(!scratch.join("out/b.tar.zst").exists(), "{text}");
}

/// A build script that reads a file of the checkout the key lacks, and
/// carries on without it (`unwrap_or_default`), builds in the key tree
/// without it. Under strace the log names the file and the `[key]` entry
/// that adds it (`key_tree::a_probe_for_a_file_the_key_lacks_is_reported_and_built_without`);
/// under fanotify, which sees no failed lookup and reruns under strace
/// only when the build fails, nothing says so.
#[test]
#[ignore = "known miss: under fanotify a build that reads an undeclared file and carries on without it is not reported (fanotify sees no failed lookup; rerunning every build under strace costs more than the 5% budget)"]
fn under_fanotify_a_build_that_reads_an_undeclared_file_and_carries_on_is_reported() {
    let test = "under_fanotify_a_build_that_reads_an_undeclared_file_and_carries_on_is_reported";
    if !crate::key_tree::have_key_tree(test) || the_tracer() != "fanotify" {
        return;
    }
    let ws = Fixture::new();
    ws.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file(
        ".github/ci-trust.toml",
        "[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"-p\", \"app\", \"--bin\", \"app\", \"--offline\"]\nbinaries = [\"app\"]\n[verify]\ntracer = \"fanotify\"\nkey-tree = \"required\"\n",
    )
    .file(
        "app/src/main.rs",
        "fn main() { println!(\"{}\", env!(\"FOUND\")); }\n",
    )
    .file(
        "app/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let extra = std::fs::read_to_string(\"extra.cfg\").unwrap_or_default();\n    println!(\"cargo::rustc-env=FOUND=extra {}\", extra.trim());\n}\n",
    )
    .file("app/extra.cfg", "needed\n");
    package(&ws, "app", "app");
    lock(ws.path());
    let scratch = Fixture::new();
    let output = gpu_archive(ws.path(), &scratch);
    let text = stderr(&output);
    assert!(text.contains("app/extra.cfg"), "{text}");
}

/// The same as the swap of the tree, one level down: in a workspace below
/// its checkout the workspace's place in the tree is an ordinary directory
/// of the tree, which the first build renames and replaces with a symlink
/// to its own absolute path (the checkout's workspace, seen from outside
/// the namespace). The next build must not start there, the xtask must not
/// read the checkout through it, and removing the tree must not follow it.
#[test]
fn a_build_that_swaps_the_workspace_in_the_tree_for_a_link_cannot_expose_the_checkout() {
    let test = "a_build_that_swaps_the_workspace_in_the_tree_for_a_link_cannot_expose_the_checkout";
    if !crate::key_tree::have_key_tree(test) {
        return;
    }
    let repo = Fixture::new();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    repo.file(
        "ws/Cargo.toml",
        "[workspace]\nmembers = [\"a\", \"b\"]\nresolver = \"2\"\n",
    )
    .file(
        "ws/.github/ci-trust.toml",
        &format!(
            "[[archive]]\nfile = \"a.tar.zst\"\nbuild = [\"-p\", \"a\", \"--bin\", \"a\", \"--offline\"]\nbinaries = [\"a\"]\n[[archive]]\nfile = \"b.tar.zst\"\nbuild = [\"-p\", \"b\", \"--bin\", \"b\", \"--offline\"]\nbinaries = [\"b\"]\n[verify]\ntracer = \"{}\"\nkey-tree = \"required\"\n",
            the_tracer()
        ),
    )
    .file("ws/a/src/main.rs", "fn main() { println!(\"{}\", env!(\"SWAPPED\")); }\n")
    .file(
        "ws/a/build.rs",
        r#"fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = dir.parent().unwrap().to_path_buf();
    let moved = root.with_extension("moved");
    let swapped = std::fs::rename(&root, &moved).is_ok() && std::os::unix::fs::symlink(&root, &root).is_ok();
    println!("cargo::rustc-env=SWAPPED={swapped}");
}
"#,
    )
    .file("ws/b/src/main.rs", "fn main() { println!(\"{}\", env!(\"SEEN\")); }\n")
    .file(
        "ws/b/build.rs",
        "fn main() {\n    println!(\"cargo::rerun-if-changed=build.rs\");\n    let seen = std::fs::metadata(\"secret.txt\").map(|m| m.len()).unwrap_or(0);\n    println!(\"cargo::rustc-env=SEEN=secret {seen}\");\n}\n",
    )
    .file("ws/b/secret.txt", "SECRET\n");
    package(&repo, "ws/a", "a");
    package(&repo, "ws/b", "b");
    lock(&repo.join("ws"));
    let scratch = Fixture::new();
    let output = gpu_archive(&repo.join("ws"), &scratch);
    let text = stderr(&output);
    assert!(
        repo.join("ws/b/secret.txt").exists(),
        "the checkout was removed"
    );
    assert!(
        repo.join("ws/Cargo.toml").exists(),
        "the checkout was removed"
    );
    assert!(
        std::fs::symlink_metadata(repo.join("ws")).is_ok_and(|m| m.is_dir()),
        "the checkout's workspace was replaced"
    );
    if output.status.success() {
        // Whatever ran, it ran in the tree: the file the key lacks unseen.
        let seen = String::from_utf8(unpack(&scratch.join("out/b.tar.zst"), "b")).unwrap();
        assert_eq!(seen.trim(), "secret 0", "{text}");
    } else {
        assert!(!scratch.join("out/b.tar.zst").exists(), "{text}");
    }
}
