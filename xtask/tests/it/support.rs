//! Shared test helpers: fixture trees on disk and running the xtask binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
