//! `cargo xtask gpu-archive`: put the GPU nextest archives of the current
//! content key into `--out`, from the cheapest source that can be proven
//! trustworthy.
//!
//! The sources are tried in order: a cache restore the workflow already made
//! (`--cache-hit`; used only if every archive verifies), an artifact of an
//! earlier trusted run named by the key (`--reuse`; [`trust`] holds the
//! checks, [`github`] the API client and [`download`] the transfer), and
//! otherwise a fresh build ([`build`]) with the runner's control variables
//! scrubbed. Anything that goes wrong before the build is a warning and a
//! fallback, never a failure and never a partial file in `--out`. The cache
//! and artifact paths compile nothing.
//!
//! Owns the order of the sources and what is reported about them. Must not
//! derive a key (that is `key::compute`) or judge an artifact itself.

mod build;
mod download;
mod github;
mod trust;
mod verify;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::policy::{ArchiveSpec, Policy};
use crate::{flags, gha};

pub use github::{GithubEnv, MIN_TRANSFER_BYTES_PER_SEC};

/// Where the archives came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Cache,
    Artifact(Reused),
    /// A fresh build, and why the cheaper sources were not used.
    Build {
        reason: String,
        /// Where it ran: in the key tree (what it held), or in the
        /// checkout and why (`build::choose_key_tree`).
        key_tree: String,
    },
}

/// The artifact a reuse installed, and its producing run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reused {
    pub artifact_id: u64,
    pub run_id: u64,
    pub event: String,
    pub workflow: String,
    pub created_at: String,
}

/// How a search for a trusted artifact ended, when it could be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reuse {
    /// A trusted artifact was downloaded, verified and installed.
    Installed(Reused),
    /// No artifact carries the name.
    Missing { name: String },
    /// Candidates exist, and each failed a trust check.
    Untrusted {
        name: String,
        skipped: trust::Skips,
        /// Why the listing was not read to its end, if it was not.
        stopped: Option<String>,
    },
}

impl fmt::Display for Reuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reuse::Installed(r) => write!(
                f,
                "reused artifact {} from run {} ({}, {}, created {})",
                r.artifact_id, r.run_id, r.event, r.workflow, r.created_at
            ),
            Reuse::Missing { name } => write!(f, "no artifact named {name}"),
            Reuse::Untrusted {
                name,
                skipped,
                stopped,
            } => {
                // The log has every skip; the reason names the first few.
                const SHOWN: usize = 5;
                write!(
                    f,
                    "no trusted artifact named {name} ({} skipped: ",
                    skipped.total()
                )?;
                for (index, skip) in skipped.iter().take(SHOWN).enumerate() {
                    if index > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{skip}")?;
                }
                if skipped.total() > SHOWN {
                    write!(f, "; and {} more", skipped.total() - SHOWN)?;
                }
                if let Some(stopped) = stopped {
                    write!(f, "; stopped: {stopped}")?;
                }
                write!(f, ")")
            }
        }
    }
}

impl Source {
    /// The value of the `source=` output.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Cache => "cache",
            Source::Artifact(_) => "artifact",
            Source::Build { .. } => "build",
        }
    }

    /// The one log line that says where the archives came from.
    pub fn describe(&self) -> String {
        match self {
            Source::Cache => "cache hit".to_owned(),
            Source::Artifact(r) => Reuse::Installed(r.clone()).to_string(),
            Source::Build { reason, .. } => format!("fresh build ({reason})"),
        }
    }
}

/// What one invocation is asked to do.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub root: &'a Path,
    /// The policy of the tree being keyed: its `[[archive]]` recipes.
    pub policy: &'a Policy,
    /// The policy whose trust settings (`default-branch`, `[publisher]`,
    /// `[artifacts]`) judge artifacts (`--trust-policy`).
    pub trust: &'a Policy,
    /// The artifact name derived from the content key.
    pub artifact_name: &'a str,
    pub out: &'a Path,
    pub reuse: bool,
    pub cache_hit: bool,
    /// The pull-request head commit the archives are built from, if any.
    pub head_sha: Option<&'a str>,
}

impl flags::GpuArchive {
    pub fn run(&self) -> Result<ExitCode> {
        // A panic's message can carry API or file text; it reaches the log
        // encoded like every other line (the reuse path catches its panics
        // and falls back, so only a bug elsewhere gets here).
        std::panic::set_hook(Box::new(|info| {
            eprintln!("{}", gha::log_text(&info.to_string(), gha::in_actions()));
        }));
        // What the runner will read from this step's files, before anything
        // runs: the build must leave them as they are.
        let runner_files = gha::RunnerFiles::capture();
        process::contain()?;
        let root = self.common.root()?;
        let policy = self.common.load_policy(&root)?;
        if policy.archive.is_empty() {
            bail!(
                "the policy ({}) lists no [[archive]]; add one with `file` and `nextest` or `build`",
                policy.describe_source()
            );
        }
        // Trust settings decide which runs may hand this job its archives;
        // the tree being keyed is pull-request code in the consumer, so they
        // come from the trusted checkout's policy when the workflow names it.
        let (trust, trust_source) = match &self.trust_policy {
            Some(path) => {
                let trust = Policy::load(&root, Some(path)).context("--trust-policy")?;
                refuse_trust_policy_inside(path, &root)?;
                let source = format!("{} (--trust-policy)", trust.describe_source());
                (trust, source)
            }
            None => (
                policy.clone(),
                format!(
                    "{} (the policy of the tree being keyed; no --trust-policy)",
                    policy.describe_source()
                ),
            ),
        };
        gha::log(&format!("trust settings: {trust_source}"));
        if self.reuse && self.trust_policy.is_none() {
            gha::warning(&format!(
                "artifact reuse is judged by the trust settings of {trust_source}; pass --trust-policy with the trusted checkout's policy when the tree is pull-request code"
            ));
        }
        let manifest = crate::key::compute(&root, &policy)?;
        // The default lives in the repository's target directory; a given
        // `--out` is taken as the user typed it: a relative path from the
        // current directory, like every other path flag.
        let out = match &self.out {
            Some(out) => std::path::absolute(out).context("cannot resolve --out")?,
            None => root.join("target/gpu-archive"),
        };
        refuse_out_through_tree_link(&root, &out)?;
        let request = Request {
            root: &root,
            policy: &policy,
            trust: &trust,
            artifact_name: &manifest.artifact_name,
            out: &out,
            reuse: self.reuse,
            cache_hit: self.cache_hit,
            head_sha: self.head_sha.as_deref(),
        };
        let source = obtain_with(&request, GithubEnv::from_env, contained_build)?;
        if matches!(source, Source::Build { .. }) {
            // The key was derived statically; the build just showed what
            // the compiler really read. Fail closed on any difference.
            if let Err(err) = crate::verify::check_archive_builds(&root, &manifest, &policy) {
                remove_archives(&out, &policy.archive);
                return Err(err);
            }
        }
        let (outputs, summary) = report(
            &source,
            &manifest.key,
            &manifest.artifact_name,
            &trust_source,
            &policy.archive,
            &out,
        )?;
        // The build has ended and whatever it left running is dead: from
        // here on nothing but this process writes the runner's files. A
        // change since the start is the build's (or a daemon's) doing.
        let changed = runner_files.changed_since();
        if !changed.is_empty() {
            remove_archives(&out, &policy.archive);
            bail!(
                "the runner's files changed while gpu-archive ran, which only the build could have done: {}; the step's outputs, environment or summary may be forged, so the step fails and --out is emptied",
                changed.join(", ")
            );
        }
        let pairs: Vec<(&str, &str)> = outputs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if let Err(err) = gha::write_step_outputs(&pairs) {
            remove_archives(&out, &policy.archive);
            return Err(err);
        }
        gha::append_step_summary(&summary)?;
        Ok(ExitCode::SUCCESS)
    }
}

/// The fresh build, contained: workflow commands are paused from before it
/// starts until every process it left has been killed (a daemon printing
/// `::set-output` after the build's own pause ends would otherwise be
/// obeyed), and the kill happens before anything is reported or written.
fn contained_build(request: &Request) -> Result<String> {
    let paused = gha::CommandsPaused::start();
    let built = build::build_all(request).map(|built| built.key_tree);
    let killed = process::kill_leftovers();
    drop(paused);
    match killed {
        Ok(pids) if !pids.is_empty() => gha::warning(&format!(
            "killed {} process(es) the build left running (pid {}): nothing the build started outlives it",
            pids.len(),
            pids.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Ok(_) => {}
        Err(err) => {
            return Err(err.context("cannot stop what the build left running"));
        }
    }
    built
}

/// Refuses an `--out` that is, or lies under, a symbolic link inside the
/// tree being keyed. Such a link is the pull request's (committed, or made
/// by its build), and would send the archives, the staging directory and
/// the cleanup of a damaged restore to a place of its choosing. A link
/// outside the tree is the workflow's own and is followed.
fn refuse_out_through_tree_link(root: &Path, out: &Path) -> Result<()> {
    let root = std::fs::canonicalize(root)
        .with_context(|| format!("cannot resolve the root {}", root.display()))?;
    if let Some(link) = first_link_inside(out, &root)? {
        bail!(
            "--out {} goes through the symbolic link {}, which lies inside the tree being keyed ({}): the tree would choose where the archives go; refused (pass an --out without links inside the tree)",
            out.display(),
            link.display(),
            root.display()
        );
    }
    Ok(())
}

/// The first symbolic link met while resolving `path` one component at a
/// time (as the kernel does) whose own location lies inside `root`
/// (canonical), if any. Components that do not exist yet end the walk: they
/// will be created as directories.
fn first_link_inside(path: &Path, root: &Path) -> Result<Option<PathBuf>> {
    use std::collections::VecDeque;
    use std::path::Component;
    let mut pending: VecDeque<PathBuf> = path
        .components()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut current = PathBuf::new();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match part.components().next() {
            Some(Component::Prefix(_)) => current = part.clone(),
            Some(Component::RootDir) => current.push(&part),
            Some(Component::CurDir) | None => {}
            Some(Component::ParentDir) => {
                current.pop();
            }
            Some(Component::Normal(name)) => {
                let candidate = current.join(name);
                let meta = match std::fs::symlink_metadata(&candidate) {
                    Ok(meta) => meta,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(err) => {
                        return Err(err)
                            .with_context(|| format!("cannot examine {}", candidate.display()));
                    }
                };
                if !meta.file_type().is_symlink() {
                    current = candidate;
                    continue;
                }
                // `current` is fully resolved, so this says where the link is.
                if current.starts_with(root) {
                    return Ok(Some(candidate));
                }
                hops += 1;
                if hops > 40 {
                    bail!(
                        "--out {}: too many levels of symbolic links",
                        path.display()
                    );
                }
                let target = std::fs::read_link(&candidate)
                    .with_context(|| format!("cannot read the link {}", candidate.display()))?;
                for component in target.components().rev() {
                    pending.push_front(PathBuf::from(component.as_os_str()));
                }
            }
        }
    }
    Ok(None)
}

/// Refuses a `--trust-policy` that is (or, through a link, resolves to) a
/// file of the tree being keyed: that tree is the pull request's in the
/// consumer, and its policy would choose which runs may hand it archives
/// while the output claimed the settings came from elsewhere.
fn refuse_trust_policy_inside(trust_policy: &Path, root: &Path) -> Result<()> {
    let resolved = std::fs::canonicalize(trust_policy)
        .with_context(|| format!("--trust-policy: cannot resolve {}", trust_policy.display()))?;
    let root = std::fs::canonicalize(root)
        .with_context(|| format!("cannot resolve the root {}", root.display()))?;
    if resolved.starts_with(&root) {
        bail!(
            "--trust-policy {} is inside the tree being keyed ({}), whose settings it exists to replace; pass the trusted checkout's policy (in the consumer: .github/ci-trust.toml of the workflow's own checkout), or omit the flag",
            resolved.display(),
            root.display()
        );
    }
    Ok(())
}

/// Fills `request.out` from the first source that works and says which.
/// Errors only when the fresh build itself fails.
pub fn obtain(
    request: &Request,
    github_env: impl FnOnce() -> Result<GithubEnv, String>,
) -> Result<Source> {
    obtain_with(request, github_env, |request| {
        build::build_all(request).map(|built| built.key_tree)
    })
}

/// [`obtain`], with `build` as the fresh build.
fn obtain_with(
    request: &Request,
    github_env: impl FnOnce() -> Result<GithubEnv, String>,
    build: impl FnOnce(&Request) -> Result<String>,
) -> Result<Source> {
    let specs = &request.policy.archive;
    let mut not_used = Vec::new();
    // One deadline for everything before the build: a pull request's own
    // cache scope can hold a restore of its choosing, and its verification
    // and then the reuse must not take one deadline each.
    let deadline = github::Deadline::after(request.trust.artifacts.reuse_deadline_secs);
    if request.cache_hit {
        let verified = specs.iter().try_for_each(|spec| {
            verify::check_archive_within(&request.out.join(&spec.file), spec, Some(&deadline))
                .map(|_| ())
        });
        match verified {
            Ok(()) => return Ok(Source::Cache),
            Err(err) => {
                let reason = format!("the restored cache is damaged: {err:#}");
                gha::warning(&format!("{reason}; not using it"));
                remove_archives(request.out, specs);
                not_used.push(reason);
            }
        }
    } else {
        not_used.push("no cache hit".to_owned());
    }
    if request.reuse {
        let reason = match github_env() {
            Err(missing) => format!("artifact reuse needs the Actions environment: {missing}"),
            Ok(env) => match reuse_artifact_within(env, request, deadline) {
                Ok(Reuse::Installed(reused)) => return Ok(Source::Artifact(reused)),
                Ok(not_reused) => not_reused.to_string(),
                Err(err) => format!("artifact reuse failed: {err:#}"),
            },
        };
        gha::warning(&format!("{reason}; building instead"));
        not_used.push(reason);
    } else {
        not_used.push("artifact reuse not requested".to_owned());
    }
    let key_tree = build(request)?;
    Ok(Source::Build {
        reason: not_used.join("; "),
        key_tree,
    })
}

/// Looks for a trusted artifact named `request.artifact_name` and installs
/// it into `request.out`. Errors when the search or the transfer fails,
/// when the trust policy's `artifacts.reuse-deadline-secs` passes first
/// (whatever stage it is in), and when anything in it panics: every way it
/// ends is a fallback to the fresh build, never an abort.
pub fn reuse_artifact(env: GithubEnv, request: &Request) -> Result<Reuse> {
    let deadline = github::Deadline::after(request.trust.artifacts.reuse_deadline_secs);
    reuse_artifact_within(env, request, deadline)
}

/// [`reuse_artifact`], by `deadline` (which a cache verification before it
/// may have spent in part).
fn reuse_artifact_within(
    env: GithubEnv,
    request: &Request,
    deadline: github::Deadline,
) -> Result<Reuse> {
    deadline.check("before the artifact search began (the cache verification used it)")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            match tokio::time::timeout(
                deadline.remaining(),
                reuse_artifact_async(env, request, deadline),
            )
            .await
            {
                Ok(result) => result,
                Err(_) => Err(anyhow::anyhow!(
                    deadline.message("(the search or download was cut off)")
                )),
            }
        })
    }));
    // A DNS lookup of a hostile redirect target may still be running on a
    // blocking thread: it is abandoned, not waited for, so the deadline
    // holds.
    runtime.shutdown_background();
    match outcome {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            bail!(
                "the reuse path failed unexpectedly (a bug, please report it: {})",
                github::clip(&message)
            )
        }
    }
}

async fn reuse_artifact_async(
    env: GithubEnv,
    request: &Request<'_>,
    deadline: github::Deadline,
) -> Result<Reuse> {
    let name = request.artifact_name;
    let artifacts = &request.trust.artifacts;
    let github = github::Github::new(
        env,
        Duration::from_secs(artifacts.timeout_secs.max(1)),
        deadline,
    )?;
    let search = trust::find(&github, name, request.trust, request.head_sha).await?;
    let Some(trust::Accepted { artifact, run }) = search.accepted else {
        if search.skipped.is_empty() && search.stopped.is_none() {
            return Ok(Reuse::Missing {
                name: name.to_owned(),
            });
        }
        return Ok(Reuse::Untrusted {
            name: name.to_owned(),
            skipped: search.skipped,
            stopped: search.stopped,
        });
    };
    gha::log(&format!(
        "artifact search: accepted artifact {} from run {} ({}, {})",
        artifact.id,
        run.id,
        run.event,
        run.path.as_deref().unwrap_or("?")
    ));
    download::install(
        &github,
        &artifact,
        &request.policy.archive,
        request.out,
        artifacts.max_download_bytes,
    )
    .await
    .with_context(|| format!("artifact {} from run {}", artifact.id, run.id))?;
    Ok(Reuse::Installed(Reused {
        artifact_id: artifact.id,
        run_id: run.id,
        event: run.event,
        workflow: run.path.unwrap_or_default(),
        created_at: github::clip(
            &run.created_at
                .or(artifact.created_at)
                .unwrap_or_else(|| "at an unknown time".to_owned()),
        )
        .into_owned(),
    }))
}

/// Verifies every expected archive in `out`.
pub fn verify_all(out: &Path, specs: &[ArchiveSpec]) -> Result<()> {
    for spec in specs {
        verify::check_archive(&out.join(&spec.file), spec)?;
    }
    Ok(())
}

/// Removes the expected archives from `out` (a damaged restore must not be
/// mistaken for a good one by a later step if the build then fails).
fn remove_archives(out: &Path, specs: &[ArchiveSpec]) {
    for spec in specs {
        let path = out.join(&spec.file);
        if let Err(err) = std::fs::remove_file(&path)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            gha::warning(&format!("cannot remove {}: {err}", path.display()));
        }
    }
}

/// The step outputs, held in memory until they can be written safely.
type Outputs = Vec<(&'static str, String)>;

/// Logs the source, the archive sizes and the free disk space, and returns
/// the step outputs and the step summary's Markdown; writes nothing.
fn report(
    source: &Source,
    key: &str,
    artifact_name: &str,
    trust_source: &str,
    specs: &[ArchiveSpec],
    out: &Path,
) -> Result<(Outputs, String)> {
    // The source's reason carries run, branch and artifact names and API
    // text: encoded for the log, code spans in the summary.
    let in_actions = gha::in_actions();
    println!(
        "{}",
        gha::log_text(
            &format!("archive source: {}", source.describe()),
            in_actions
        )
    );
    let mut rows = String::new();
    for spec in specs {
        let path: PathBuf = out.join(&spec.file);
        let bytes = std::fs::metadata(&path)
            .with_context(|| format!("{} vanished", path.display()))?
            .len();
        println!(
            "{}",
            gha::log_text(
                &format!("  {}: {}", path.display(), download::mib(bytes)),
                in_actions
            )
        );
        rows.push_str(&format!(
            "| {} | {} |\n",
            gha::markdown_code(&spec.file),
            download::mib(bytes)
        ));
    }
    let free = free_disk_bytes(out)
        .map(download::mib)
        .unwrap_or_else(|err| format!("unknown ({err})"));
    println!(
        "{}",
        gha::log_text(
            &format!("  free disk space at {}: {free}", out.display()),
            in_actions
        )
    );

    let mut outputs = vec![
        ("key", key.to_owned()),
        ("artifact_name", artifact_name.to_owned()),
        ("source", source.kind().to_owned()),
    ];
    // On the other sources the ids are written empty, so that every output
    // of this step is this program's.
    let (artifact_id, run_id) = match source {
        Source::Artifact(reused) => (reused.artifact_id.to_string(), reused.run_id.to_string()),
        _ => (String::new(), String::new()),
    };
    outputs.push(("artifact_id", artifact_id));
    outputs.push(("run_id", run_id));
    Ok((
        outputs,
        summary_markdown(source, key, trust_source, &rows, &free),
    ))
}

/// The step summary: every part that is not this program's own text is a
/// code span ([`gha::markdown_code`]) in a table cell, where nothing is
/// markup: no link, autolink, image, mention or HTML.
fn summary_markdown(
    source: &Source,
    key: &str,
    trust_source: &str,
    rows: &str,
    free: &str,
) -> String {
    let reason = source.describe();
    let built_in = match source {
        Source::Build { key_tree, .. } => {
            format!("| built in | {} |\n", gha::markdown_code(key_tree))
        }
        _ => String::new(),
    };
    format!(
        "### GPU archives\n\n| | |\n|---|---|\n| source | {} |\n{built_in}| key | {} |\n| trust settings | {} |\n| free disk space | {} |\n\n| archive | size |\n|---|---|\n{rows}\n",
        gha::markdown_code(&github::clip_to(&reason, SUMMARY_REASON_CHARS)),
        gha::markdown_code(key),
        gha::markdown_code(trust_source),
        gha::markdown_code(free),
    )
}

/// The most characters of the source's reason the summary shows (the log
/// has all of it); the runner refuses a summary over 1 MiB.
const SUMMARY_REASON_CHARS: usize = 4000;

/// Free space available to unprivileged users on the filesystem of `path`.
#[cfg(not(unix))]
fn free_disk_bytes(_path: &Path) -> Result<u64, String> {
    Err("not measured on this platform".into())
}

/// Free space available to unprivileged users on the filesystem of `path`.
#[cfg(unix)]
#[allow(unsafe_code)]
fn free_disk_bytes(path: &Path) -> Result<u64, String> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` a valid
    // out-pointer for the duration of the call.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// Keeping what the fresh build starts under this process, and ending it.
mod process {
    use anyhow::Result;

    /// Called once, before anything runs: this process becomes the reaper
    /// of its orphaned descendants, so that a daemon the build starts
    /// (double fork, `setsid`) stays where [`kill_leftovers`] finds it; it
    /// and everything it starts can no longer gain privileges
    /// (`no_new_privs`: `sudo` fails); and it becomes non-dumpable, so that
    /// the build, running as the same user, can neither read its
    /// environment and memory through `/proc` nor attach to it with
    /// `ptrace` (where `kernel.yama.ptrace_scope` is 0) to change the
    /// outputs it holds.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    pub fn contain() -> Result<()> {
        crate::verify::trace::become_subreaper()?;
        // No process started from here on gains privileges through a
        // set-user-id binary or file capabilities: on a GitHub-hosted
        // runner the step's user has password-less sudo, which would hand
        // a hostile build root, and root is beyond every check below.
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        if rc != 0 {
            anyhow::bail!(
                "cannot keep the build from gaining privileges (PR_SET_NO_NEW_PRIVS): {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if rc != 0 {
            anyhow::bail!(
                "cannot make gpu-archive non-dumpable (PR_SET_DUMPABLE): {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub fn contain() -> Result<()> {
        Ok(())
    }

    /// Kills every process the build left running (this process's
    /// descendants, orphans included); returns their pids.
    #[cfg(target_os = "linux")]
    pub fn kill_leftovers() -> Result<Vec<u32>> {
        crate::verify::trace::kill_descendants()
    }

    /// Off Linux a build's daemon cannot be found once it detached; only
    /// the read-back of the outputs guards against it.
    #[cfg(not(target_os = "linux"))]
    pub fn kill_leftovers() -> Result<Vec<u32>> {
        Ok(Vec::new())
    }
}
