//! `verify-key --trace -- BUILD…`: runs the command traced from the
//! repository root, checks the trace, and computes the key again to catch
//! a build that changed its own inputs. Must not: choose which directories
//! are output (the caller passes them).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::backend::{Backend, TraceLog};
use super::escape_controls;
use crate::key_tree::KeyTree;
use crate::policy::TracerChoice;

/// `verify-key --trace -- COMMAND…`: runs the command from `root` traced,
/// its output passing through, and checks the trace. With `key_tree` the
/// command runs in the key tree of `manifest`, as `gpu-archive`'s fresh
/// build does. Exit 1 on misses; an error (exit 2) when the tracer or the
/// key tree is missing, the command fails or the trace is empty.
pub fn verify_command(
    root: &Path,
    policy: &crate::policy::Policy,
    manifest: &crate::key::KeyManifest,
    command: &[OsString],
    output_dirs: &[PathBuf],
    choice: TracerChoice,
    key_tree: bool,
) -> Result<std::process::ExitCode> {
    if command.is_empty() {
        bail!(
            "--trace needs the build command after `--`, e.g. `verify-key --trace -- cargo build --workspace`"
        );
    }
    let backend =
        Backend::choose(choice).map_err(|why| anyhow::anyhow!("--trace cannot run: {why}"))?;
    let tree = if key_tree {
        let mechanism = crate::key_tree::available()
            .map_err(|why| anyhow::anyhow!("--key-tree cannot run: {why}"))?;
        let top = crate::key_tree::checkout_top(root, policy.key.repository_root.as_deref());
        let tree = KeyTree::stage(root, &top, manifest, mechanism)?;
        if let Some(warning) = tree.refuse_committed_output(output_dirs)? {
            crate::gha::warning(&warning);
        }
        crate::gha::log(&format!(
            "verify-key --trace: the build runs in the key tree, which holds exactly the key's inputs: {}",
            tree.describe()
        ));
        Some(tree)
    } else {
        None
    };
    let new_log = |backend: &Backend| -> Result<TraceLog> {
        let log = TraceLog::new(backend)?;
        Ok(match &tree {
            Some(tree) => log.in_key_tree(tree.view(output_dirs)),
            None => log,
        })
    };
    let log = new_log(&backend)?;
    crate::gha::log(&format!(
        "verify-key --trace: running {} under {}",
        command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        backend.name()
    ));
    // The build is the checkout's code: it gets no runner control channel
    // or credential, and its output cannot issue workflow commands.
    let build_for = |log: &TraceLog| -> Result<std::process::Command> {
        let (program, args) = log.wrap(command);
        let mut build = std::process::Command::new(program);
        build.args(args).current_dir(root);
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(crate::gha::is_runner_control_var) {
                build.env_remove(name);
            }
        }
        if let Some(tree) = &tree {
            tree.isolate(&mut build, root, output_dirs)?;
        }
        Ok(build)
    };
    let mut build = build_for(&log)?;
    let program = log.wrap(command).0;
    log.start(root, output_dirs)?;
    let status = {
        let _paused = crate::gha::CommandsPaused::start();
        build
            .status()
            .with_context(|| format!("cannot run {}", program.display()))?
    };
    log.stop()?;
    if !status.success() {
        let traced = matches!(backend, Backend::Fanotify)
            || std::fs::metadata(log.path()).is_ok_and(|m| m.len() > 0);
        if !traced {
            bail!(
                "strace did not trace the build ({status}); nothing was checked: see strace's message above"
            );
        }
        if tree.is_some() {
            let mut rerun = |backend: &Backend| -> Result<TraceLog> {
                let log = new_log(backend)?;
                let _paused = crate::gha::CommandsPaused::start();
                let _ = build_for(&log)?.status();
                Ok(log)
            };
            let why = super::key_tree_failure(Some(&log), &mut rerun, root, manifest, output_dirs);
            bail!("the traced build failed in the key tree ({status}); nothing was checked\n{why}");
        }
        bail!("the traced build failed ({status}); nothing was checked, fix the build first");
    }
    let report = log.check(root, manifest, output_dirs, root)?;
    eprint!("{}", crate::gha::log_block(&report.render()));
    if !report.absent_in_tree.is_empty() {
        crate::gha::warning(&format!(
            "the build looked for {} path(s) the checkout has and the key lacks, and ran without them (listed above with the [key] entry that adds each)",
            report.absent_in_tree.len()
        ));
    }
    // The key was computed before the build; a build that rewrote an input
    // (cargo updating Cargo.lock, a build script writing into src/) built
    // bytes that key does not describe.
    let after = crate::key::compute(root, policy)
        .context("cannot compute the key again after the build")?;
    let changed = changed_inputs(manifest, &after);
    for path in &changed {
        crate::gha::warning(&format!(
            "the build changed the key input {path}: the key computed before the build does not describe what was built; a build must write only to its target directory (OUT_DIR), and cargo must not rewrite Cargo.lock (--locked)"
        ));
    }
    if report.misses.is_empty() && changed.is_empty() {
        return Ok(std::process::ExitCode::SUCCESS);
    }
    for miss in &report.misses {
        crate::gha::warning(&format!(
            "{} is {} by the build but is not a key input ({}): {}",
            miss.path, miss.access, miss.process, miss.fix
        ));
    }
    Ok(std::process::ExitCode::from(1))
}

/// Inputs added, removed or changed between two manifests of one tree.
pub fn changed_inputs(
    before: &crate::key::KeyManifest,
    after: &crate::key::KeyManifest,
) -> Vec<String> {
    let index = |m: &crate::key::KeyManifest| -> BTreeMap<String, (String, String)> {
        m.inputs
            .iter()
            .map(|i| (i.path.clone(), (i.sha256.clone(), i.kind.clone())))
            .collect()
    };
    let (before, after) = (index(before), index(after));
    // A lockfile the key hashed as absent (ci-key warned) that cargo then
    // generated is not a change of what the key says.
    let generated_lock = |path: &str| {
        path == "Cargo.lock" && before.get(path).is_some_and(|(_, kind)| kind == "absent")
    };
    let mut changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path) && !generated_lock(path))
        .map(|path| escape_controls(path))
        .collect();
    changed.sort();
    changed.dedup();
    changed
}
