//! What reaches the job log: text a pull request controls (file names of the
//! checkout) must never start a workflow command, on any line.

use crate::support::{Fixture, stderr, xtask_cmd};

/// A checkout whose `src/` holds a FIFO named with line breaks and
/// workflow commands; `ci-key` refuses it and names it in its `error:` line.
fn hostile_checkout() -> (Fixture, String) {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("Cargo.lock", "version = 4\n")
    .file("src/lib.rs", "");
    let name = "x\n::add-mask::secret\n::error::pwned";
    let status = std::process::Command::new("mkfifo")
        .arg(f.join("src").join(name))
        .status()
        .unwrap();
    assert!(status.success());
    let root = std::fs::canonicalize(f.path()).unwrap();
    (f, root.display().to_string())
}

const REFUSAL: &str = " is not a regular file (a directory, FIFO, socket or device); the key can only hash files, so remove it or list a file instead";

#[test]
fn a_hostile_file_name_in_the_error_line_starts_no_workflow_command() {
    let (f, root) = hostile_checkout();
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .env("GITHUB_ACTIONS", "true")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    let error_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(error_lines.len(), 1, "{text}");
    let line = error_lines[0];
    assert!(
        line.contains(&format!(
            "{root}/src/x%0A::add-mask::secret%0A::error::pwned{REFUSAL}"
        )),
        "{line}"
    );
    assert!(line.ends_with(REFUSAL), "{line}");
    for line in text.lines() {
        let body = line.trim_start();
        assert!(
            !body.starts_with("::") || body.starts_with("::warning::"),
            "a line of the log is a workflow command: {line:?}\n{text}"
        );
    }

    // Outside Actions the name keeps its line breaks, readable, but no line
    // starts with `::`.
    let output = xtask_cmd(&["ci-key", "--root"])
        .arg(f.path())
        .output()
        .unwrap();
    let text = stderr(&output);
    assert!(
        text.contains(&format!(
            "{root}/src/x\n%3A:add-mask::secret\n%3A:error::pwned{REFUSAL}\n"
        )),
        "{text}"
    );
    assert!(
        text.lines().all(|l| !l.trim_start().starts_with("::")),
        "{text}"
    );
}
