//! Choosing the tracer ([`Backend`]: fanotify where permitted, else strace,
//! or what `--tracer` / `[verify] tracer` names) and one traced build
//! ([`TraceLog`]: a strace log in a private directory, or a running
//! fanotify watch), checked against a key manifest. Must not: parse a
//! tracer's output or decide what a miss is.

#[cfg(target_os = "linux")]
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::analysis::Scope;
#[cfg(target_os = "linux")]
use super::fanotify;
use super::report::TraceReport;
use super::strace::{TRACER_MISSING, Tracer, check};
use crate::key_tree::TreeView;
use crate::policy::TracerChoice;

/// How a build is traced.
#[derive(Debug, Clone)]
pub enum Backend {
    /// strace: the recorded system calls of every process of the build,
    /// metadata probes included; each recorded call stops its process.
    Strace(Tracer),
    /// fanotify: every open and exec on the repository's mounts, reported
    /// by the kernel without stopping anything (Linux, `CAP_SYS_ADMIN`).
    Fanotify,
}

impl Backend {
    /// The backend `choice` names, if it can run here: `auto` is fanotify
    /// where this process may use it, else strace when installed. Otherwise
    /// why no tracer can run, with the fix.
    pub fn choose(choice: TracerChoice) -> std::result::Result<Backend, String> {
        const NO_STRACE: &str = TRACER_MISSING;
        const NO_FANOTIFY: &str =
            "fanotify is not permitted (it needs Linux and CAP_SYS_ADMIN: run the job as root)";
        match choice {
            TracerChoice::Auto if fanotify_available() => Ok(Backend::Fanotify),
            TracerChoice::Auto => Tracer::find()
                .map(Backend::Strace)
                .ok_or_else(|| format!("{NO_STRACE}, and {NO_FANOTIFY}")),
            TracerChoice::Strace => Tracer::find()
                .map(Backend::Strace)
                .ok_or_else(|| format!("the strace tracer was chosen, but {NO_STRACE}")),
            TracerChoice::Fanotify if fanotify_available() => Ok(Backend::Fanotify),
            TracerChoice::Fanotify => Err(format!(
                "the fanotify tracer was chosen, but {NO_FANOTIFY}; or choose strace"
            )),
        }
    }

    /// What the log calls it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Strace(_) => "strace",
            Backend::Fanotify => "fanotify",
        }
    }
}

#[cfg(target_os = "linux")]
fn fanotify_available() -> bool {
    fanotify::OpenWatch::available()
}

#[cfg(not(target_os = "linux"))]
fn fanotify_available() -> bool {
    false
}

/// One traced build: a strace log in a private temporary directory and the
/// command line that writes it, or a running fanotify watch.
pub struct TraceLog {
    dir: tempfile::TempDir,
    backend: Backend,
    /// The key tree the build runs in, when it does.
    key_tree: Option<TreeView>,
    #[cfg(target_os = "linux")]
    watch: RefCell<Option<fanotify::OpenWatch>>,
    #[cfg(target_os = "linux")]
    collected: RefCell<Option<fanotify::Collected>>,
}

impl TraceLog {
    /// Starts a trace: for fanotify, the watch runs from here until
    /// [`TraceLog::stop`].
    pub fn new(backend: &Backend) -> Result<TraceLog> {
        let dir = tempfile::Builder::new()
            .prefix("ci-trust-trace-")
            .tempdir()
            .context("cannot create a directory for the trace")?;
        Ok(TraceLog {
            dir,
            backend: backend.clone(),
            key_tree: None,
            #[cfg(target_os = "linux")]
            watch: RefCell::new(None),
            #[cfg(target_os = "linux")]
            collected: RefCell::new(None),
        })
    }

    /// The build runs in the key tree `view` describes, mounted at the
    /// root: strace names the tree's files by the root's paths, and the
    /// fanotify watch of the checkout sees only what escapes the tree
    /// (proved to work by the tree's own manifest, which cargo opens).
    pub fn in_key_tree(mut self, view: TreeView) -> TraceLog {
        self.key_tree = Some(view);
        self
    }

    pub fn key_tree(&self) -> Option<&TreeView> {
        self.key_tree.as_ref()
    }

    /// Starts watching `root` but its output directories (fanotify);
    /// nothing for strace, which starts with each command. Callers first
    /// refuse output directories of the repository that already hold files
    /// ([`refuse_occupied_output_dirs`]).
    pub fn start(&self, root: &Path, output_dirs: &[PathBuf]) -> Result<()> {
        #[cfg(target_os = "linux")]
        if matches!(self.backend, Backend::Fanotify) {
            let control: Vec<PathBuf> = self
                .key_tree
                .iter()
                .flat_map(|view| ["Cargo.toml", "Cargo.lock"].map(|f| view.to_disk(&root.join(f))))
                .filter(|file| file.is_file())
                .collect();
            *self.watch.borrow_mut() =
                Some(fanotify::OpenWatch::start(root, output_dirs, &control)?);
        }
        let _ = (root, output_dirs);
        Ok(())
    }

    /// Ends the watch (fanotify) once its events are read: call it after
    /// the build and before this process reads the repository again.
    pub fn stop(&self) -> Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(watch) = self.watch.borrow_mut().take() {
            *self.collected.borrow_mut() = Some(watch.finish()?);
        }
        Ok(())
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("strace.log")
    }

    /// The command as it runs traced: under strace, or as it is (fanotify
    /// watches from outside).
    pub fn wrap(&self, command: &[OsString]) -> (PathBuf, Vec<OsString>) {
        match &self.backend {
            Backend::Strace(tracer) => (tracer.program.clone(), tracer.args(&self.path(), command)),
            Backend::Fanotify => (PathBuf::from(&command[0]), command[1..].to_vec()),
        }
    }

    /// Checks the trace against the key inputs of `manifest`.
    pub fn check(
        &self,
        root: &Path,
        manifest: &crate::key::KeyManifest,
        output_dirs: &[PathBuf],
        start_dir: &Path,
    ) -> Result<TraceReport> {
        self.stop()?;
        let implied = crate::key::implied_dirs(manifest);
        let mut inputs: BTreeSet<&str> = manifest.inputs.iter().map(|i| i.path.as_str()).collect();
        inputs.extend(implied.iter().map(String::as_str));
        // Output directories as the kernel names them, so that they compare
        // with the resolved paths of the trace.
        let output_dirs: Vec<PathBuf> = output_dirs
            .iter()
            .map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()))
            .collect();
        // Build output is excluded wholesale: a target directory that holds
        // the repository would exclude everything.
        if let Some(dir) = output_dirs.iter().find(|d| root.starts_with(d)) {
            bail!(
                "the target directory {} contains the repository {}, so the trace could check nothing; build into a directory of its own",
                dir.display(),
                root.display()
            );
        }
        let scope = Scope {
            root,
            output_dirs: &output_dirs,
            inputs: &inputs,
            start_dir,
            view: match self.backend {
                Backend::Strace(_) => self.key_tree.as_ref(),
                Backend::Fanotify => None,
            },
        };
        match &self.backend {
            Backend::Strace(_) => {
                let log = std::fs::read(self.path()).with_context(|| {
                    format!(
                        "strace wrote no trace to {} (it failed to start: see its message above)",
                        self.path().display()
                    )
                })?;
                check(&log, &scope)
            }
            #[cfg(target_os = "linux")]
            Backend::Fanotify => {
                let collected = self.collected.borrow();
                let collected = collected
                    .as_ref()
                    .context("the fanotify watch was never started")?;
                fanotify::check(collected, &scope, self.key_tree.is_some())
            }
            #[cfg(not(target_os = "linux"))]
            Backend::Fanotify => bail!("fanotify exists only on Linux"),
        }
    }
}
