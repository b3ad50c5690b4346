//! What a trace check found ([`TraceReport`], [`TraceMiss`]) and how it is
//! shown; file names in it are the pull request's to choose, so control
//! characters are escaped ([`escape_controls`]). Must not: decide what a
//! miss is.

use std::fmt::Write as _;

/// What the check excludes and counts, and what it found.
#[derive(Debug, Default)]
pub struct TraceReport {
    /// What was recorded: "system calls" (strace) or "fanotify events".
    pub recorded: &'static str,
    /// Only the repository's files were watched (fanotify): nothing is
    /// known of files outside it.
    pub watched_repository_only: bool,
    /// Recorded calls or events, and processes.
    pub calls: usize,
    pub processes: usize,
    /// Distinct repository files the build read, all checked.
    pub repository_files: usize,
    /// Distinct files outside the repository (registry, toolchain, system).
    pub external_files: usize,
    /// Distinct files under the target directories.
    pub output_files: usize,
    /// Distinct repository files the build wrote before it read them.
    pub created_files: usize,
    /// A few of them, repository-relative and escaped, for the log.
    pub created_examples: Vec<String>,
    pub git_files: usize,
    pub misses: Vec<TraceMiss>,
    /// Paths a build in the key tree looked for that the tree lacks and the
    /// checkout has (strace only): not misses, since the build cannot see
    /// them, but what to add if the build needs them.
    pub absent_in_tree: Vec<AbsentInTree>,
    /// How the build ran in the key tree, for the log (`None`: in the checkout).
    pub key_tree: Option<String>,
}

/// A path the build looked up in the key tree that only the checkout has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsentInTree {
    /// Repository-relative, escaped.
    pub path: String,
    pub directory: bool,
    pub process: String,
    /// The `[key]` entry that adds it: `include = ["PATH"]`, `["DIR/**"]`.
    pub fix: String,
}

/// A repository file the build used that the key does not cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceMiss {
    /// Repository-relative, `/`-separated (non-UTF-8 bytes shown escaped).
    pub path: String,
    /// How it was used: "read", "executed", "listed", "examined".
    pub access: &'static str,
    /// The process: what it is, its pid.
    pub process: String,
    pub fix: String,
}

impl TraceReport {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "verify-key --trace: {} {} of {} processes and threads recorded",
            self.calls,
            if self.recorded.is_empty() {
                "system calls"
            } else {
                self.recorded
            },
            self.processes
        );
        if let Some(line) = &self.key_tree {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(
            out,
            "  {} repository files used by the build, {} of them key inputs",
            self.repository_files,
            self.repository_files.saturating_sub(self.misses.len())
        );
        if self.watched_repository_only {
            let _ = writeln!(
                out,
                "  files outside the repository and under the target directories: not watched (registry and toolchain are covered by Cargo.lock and the rustc version)"
            );
        } else {
            let _ = writeln!(
                out,
                "  {} files outside the repository (registry, toolchain, system): covered by Cargo.lock and the rustc version, not hashed",
                self.external_files
            );
            let _ = writeln!(
                out,
                "  {} files under the target directories: build output",
                self.output_files
            );
        }
        let _ = writeln!(
            out,
            "  {} repository files the build wrote before reading them{}",
            self.created_files,
            if self.created_examples.is_empty() {
                String::new()
            } else {
                format!(
                    " ({}{})",
                    self.created_examples.join(", "),
                    if self.created_files > self.created_examples.len() {
                        ", …"
                    } else {
                        ""
                    }
                )
            }
        );
        if self.git_files > 0 {
            let _ = writeln!(
                out,
                "  {} git metadata files: never key inputs",
                self.git_files
            );
        }
        if !self.absent_in_tree.is_empty() {
            let _ = writeln!(
                out,
                "{} paths the build looked for are not in the key tree, though the checkout has them (the build ran without them):",
                self.absent_in_tree.len()
            );
            for absent in &self.absent_in_tree {
                let _ = writeln!(
                    out,
                    "  {}{}  (looked for by {})\n    if the build needs it, add to [key] in the policy: {}",
                    absent.path,
                    if absent.directory { "/" } else { "" },
                    absent.process,
                    absent.fix
                );
            }
        }
        if self.misses.is_empty() {
            let _ = writeln!(
                out,
                "every repository file the build used is covered by the key"
            );
        } else {
            let _ = writeln!(
                out,
                "{} files the build used are NOT covered by the key:",
                self.misses.len()
            );
            for miss in &self.misses {
                let _ = writeln!(
                    out,
                    "  {}  ({} by {})\n    fix: {}",
                    miss.path, miss.access, miss.process, miss.fix
                );
            }
        }
        out
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`): file names
/// are the pull request's to choose, and a newline in one must not start
/// a line of its own in the log (a workflow command).
pub(super) fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
