//! Which directories a traced command writes to (its build output, never
//! a miss), and the refusal of output directories of the checkout that
//! already hold files. Must not: run the command.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::escape_controls;
use crate::build_plan::TracedCommand;

/// Refuses output directories inside the repository, other than the
/// default `target/`, that hold a file before the build: the trace counts
/// what is in them as build output, and an `[[archive]]`'s `--target-dir`
/// or the checkout's `build.target-dir` may name a directory of the
/// checkout. (`target/` is where caches restore dependencies; a file the
/// checkout commits there is an open residual.) `trusted` are directories
/// the trusted command line itself names (`verify-key --trace -- cargo
/// build --target-dir DIR`): a later build may find the earlier one's
/// output there.
pub fn refuse_occupied_output_dirs(
    root: &Path,
    output_dirs: &[PathBuf],
    trusted: &[PathBuf],
) -> Result<()> {
    let default_target = root.join("target");
    let trusted: Vec<PathBuf> = trusted
        .iter()
        .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
        .collect();
    for dir in output_dirs {
        // A `..` resolves differently once the build created the
        // directories before it (`target/x/../../data` passes for `target/`
        // here, and is `data` after the build).
        if dir
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            bail!(
                "the build's output directory {} goes through `..`: name it without (an absolute path, or one relative to the repository root)",
                escape_controls(&dir.display().to_string())
            );
        }
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        if root.starts_with(&dir) {
            bail!(
                "the target directory {} contains the repository {}, so the trace could check nothing; build into a directory of its own",
                escape_controls(&dir.display().to_string()),
                escape_controls(&root.display().to_string())
            );
        }
        if !dir.starts_with(root) || dir.starts_with(&default_target) || trusted.contains(&dir) {
            continue;
        }
        let occupied = walkdir::WalkDir::new(&dir)
            .into_iter()
            .filter_map(std::result::Result::ok)
            .find(|entry| !entry.file_type().is_dir());
        if let Some(entry) = occupied {
            bail!(
                "the build's output directory {} is inside the repository and already holds {}: the trace would count it as build output, though it comes from the checkout or an earlier build; build into a new or empty directory (or `target/`)",
                escape_controls(&dir.display().to_string()),
                escape_controls(&entry.path().display().to_string())
            );
        }
    }
    Ok(())
}

/// The directories a traced build writes to: the target directories the
/// command names, or else the workspace's. The workspace's is left out when
/// the command builds elsewhere: what is in it was there before the build
/// (the checkout may commit files there, a `build.target-dir` may name a
/// directory of the checkout), so a read of it is a read of the
/// repository, never of build output.
pub fn build_output_dirs(
    root: &Path,
    workspace_target: &Path,
    command: &[OsString],
) -> Vec<PathBuf> {
    let named = command_target_dirs(root, command);
    if named.is_empty() {
        vec![workspace_target.to_path_buf()]
    } else {
        named
    }
}

/// The target directories the command line itself names (see
/// [`TracedCommand::named_target_dirs`]).
pub fn command_line_target_dirs(root: &Path, command: &[OsString]) -> Vec<PathBuf> {
    TracedCommand::new(command).named_target_dirs(root)
}

/// Every directory the command may write its build to (see
/// [`TracedCommand::output_candidates`]): build output like the
/// workspace's own.
pub fn command_target_dirs(root: &Path, command: &[OsString]) -> Vec<PathBuf> {
    TracedCommand::new(command).output_candidates(root)
}
