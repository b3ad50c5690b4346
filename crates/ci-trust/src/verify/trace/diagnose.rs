//! Why a build in the key tree failed, when the reason is a file the key
//! lacks: the paths it looked for that the tree does not hold and the
//! checkout does, each with the `[key]` entry that adds it.
//!
//! strace records failed lookups (`ENOENT`, `ENOTDIR`); fanotify does not.
//! After a fanotify trace, or none, the failed build runs once more in the
//! same tree under strace (it resumes where cargo stopped, so this costs
//! the failing part only); without strace the message says how to get the
//! answer. Must not: decide the build's outcome (it has failed already).

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::backend::{Backend, TraceLog};
use super::strace::Tracer;
use crate::key::KeyManifest;

/// How many paths the message lists.
const SHOWN: usize = 20;

/// The explanation of a build that failed in the key tree. `traced` is its
/// trace, if any; `rerun` runs it again in the tree traced by the backend
/// it is given, and returns that trace.
pub fn key_tree_failure(
    traced: Option<&TraceLog>,
    rerun: &mut dyn FnMut(&Backend) -> Result<TraceLog>,
    root: &Path,
    manifest: &KeyManifest,
    output_dirs: &[PathBuf],
) -> String {
    let rerun_log;
    let log = match traced {
        Some(log) if matches!(log.backend(), Backend::Strace(_)) => log,
        _ => {
            let Some(tracer) = Tracer::find() else {
                return "the build failed in the key tree, which holds only the key's inputs; if it needs a file of the checkout the key lacks, install strace to have the failure name it (or run `verify-key --trace --tracer strace --key-tree -- BUILD` locally), then add it to [key] include".to_owned();
            };
            crate::gha::log(
                "the build failed in the key tree: running it again under strace, to see which paths it looked for",
            );
            match rerun(&Backend::Strace(tracer)) {
                Ok(log) => {
                    rerun_log = log;
                    &rerun_log
                }
                Err(err) => {
                    return format!(
                        "the build failed in the key tree (its failed lookups could not be traced: {err:#})"
                    );
                }
            }
        }
    };
    let absent = match log.check(root, manifest, output_dirs, root) {
        Ok(report) => report.absent_in_tree,
        Err(err) => {
            return format!(
                "the build failed in the key tree (its trace could not be read: {err:#})"
            );
        }
    };
    if absent.is_empty() {
        return "the build failed in the key tree, and looked for no path that the checkout has and the key lacks: the failure is the build's own".to_owned();
    }
    let list: Vec<String> = absent
        .iter()
        .take(SHOWN)
        .map(|a| {
            format!(
                "{}{} (looked for by {}; the checkout has it): add to [key] in the policy: {}",
                a.path,
                if a.directory { "/" } else { "" },
                a.process,
                a.fix
            )
        })
        .collect();
    format!(
        "the build failed in the key tree, which holds only the key's inputs; it looked for {} path(s) the checkout has and the key lacks (if the build needs one, key it):\n  {}{}",
        absent.len(),
        list.join("\n  "),
        if absent.len() > SHOWN { "\n  …" } else { "" }
    )
}
