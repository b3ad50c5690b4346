//! Shared test helpers: fixture trees on disk and running the xtask binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Writes an executable file through a child process. A descriptor open
/// for writing in this multi-threaded test process is inherited by any
/// child another test forks meanwhile (until that child execs), and
/// executing the file then fails with "Text file busy" (ETXTBSY).
pub fn write_executable(path: &Path, contents: &str) {
    use std::io::Write as _;
    std::fs::create_dir_all(path.parent().expect("a file path")).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("cat > \"$1\" && chmod 755 \"$1\"")
        .arg("sh")
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("run sh");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(contents.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "cannot write {}",
        path.display()
    );
}

/// A directory tree written for one test, removed when dropped.
pub struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().expect("create a temporary directory"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes `contents` to `rel`, creating parent directories.
    pub fn file(&self, rel: &str, contents: &str) -> &Fixture {
        let path = self.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        self
    }

    pub fn remove(&self, rel: &str) -> &Fixture {
        std::fs::remove_file(self.join(rel)).unwrap();
        self
    }

    /// Runs `xtask ARGS --root <fixture>` and returns its output.
    pub fn xtask(&self, args: &[&str]) -> Output {
        xtask_cmd(args)
            .arg("--root")
            .arg(self.path())
            .output()
            .expect("run xtask")
    }
}

/// The xtask binary under test, with a clean environment for Actions variables.
pub fn xtask_cmd(args: &[&str]) -> Command {
    // Run from a nextest archive on another machine (the GPU pod), the
    // compile-time path is the build machine's; nextest passes the remapped one.
    let binary = std::env::var_os("NEXTEST_BIN_EXE_xtask")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_xtask").into());
    let mut cmd = Command::new(binary);
    cmd.args(args);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("GITHUB_") || name.starts_with("ACTIONS_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Whether the external tool a test cannot do without is installed
/// (`probe` exits 0). When it is not, prints one line naming the tool and how
/// to install it, and the caller returns early: `cargo test` passes on a
/// machine with only a Rust toolchain. Under `CI=true` a missing tool fails
/// the test instead, because `.ci/run` installs every tool and CI must skip
/// nothing.
pub fn tool_available(tool: &str, probe: &mut Command, install: &str) -> bool {
    let found = probe
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|output| output.status.success());
    if found {
        return true;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test} needs {tool}, which is not installed, and CI=true skips nothing; install it with {install}"
        );
    }
    // Straight to the process's stderr: the harness captures `eprintln!`
    // of passing tests, and this line must be seen.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: needs {tool}, which is not installed; install it with {install}"
    );
    false
}

/// `tool --version` as the probe of [`tool_available`].
pub fn has_tool(tool: &str, install: &str) -> bool {
    tool_available(tool, Command::new(tool).arg("--version"), install)
}

/// Whether `cargo nextest` runs, for the tests that build a real nextest archive.
pub fn has_nextest() -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    tool_available(
        "cargo-nextest",
        Command::new(cargo).args(["nextest", "--version"]),
        "`cargo install cargo-nextest --locked` (https://nexte.st)",
    )
}
