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

pub use github::GithubEnv;

/// Where the archives came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Cache,
    Artifact(Reused),
    /// A fresh build, and why the cheaper sources were not used.
    Build {
        reason: String,
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
        skipped: Vec<trust::Skipped>,
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
                    skipped.len()
                )?;
                for (index, skip) in skipped.iter().take(SHOWN).enumerate() {
                    if index > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{skip}")?;
                }
                if skipped.len() > SHOWN {
                    write!(f, "; and {} more", skipped.len() - SHOWN)?;
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
            Source::Build { reason } => format!("fresh build ({reason})"),
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
        let source = obtain(&request, GithubEnv::from_env)?;
        if matches!(source, Source::Build { .. }) {
            // The key was derived statically; the build just showed what
            // the compiler really read. Fail closed on any difference.
            if let Err(err) = crate::verify::check_archive_builds(&root, &manifest, &policy) {
                remove_archives(&out, &policy.archive);
                return Err(err);
            }
        }
        let summary = report(
            &source,
            &manifest.key,
            &manifest.artifact_name,
            &trust_source,
            &policy.archive,
            &out,
        )?;
        gha::append_step_summary(&summary)?;
        Ok(ExitCode::SUCCESS)
    }
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
    let specs = &request.policy.archive;
    let mut not_used = Vec::new();
    if request.cache_hit {
        match verify_all(request.out, specs) {
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
            Ok(env) => match reuse_artifact(env, request) {
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
    build::build_all(request)?;
    Ok(Source::Build {
        reason: not_used.join("; "),
    })
}

/// Looks for a trusted artifact named `request.artifact_name` and installs
/// it into `request.out`. Errors when the search or the transfer fails.
pub fn reuse_artifact(env: GithubEnv, request: &Request) -> Result<Reuse> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(reuse_artifact_async(env, request))
}

async fn reuse_artifact_async(env: GithubEnv, request: &Request<'_>) -> Result<Reuse> {
    let name = request.artifact_name;
    let artifacts = &request.trust.artifacts;
    let github = github::Github::new(env, Duration::from_secs(artifacts.timeout_secs.max(1)))?;
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
        created_at: run
            .created_at
            .or(artifact.created_at)
            .unwrap_or_else(|| "at an unknown time".to_owned()),
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

/// Logs the source, the archive sizes and the free disk space, writes the
/// step outputs, and returns the step summary's Markdown.
fn report(
    source: &Source,
    key: &str,
    artifact_name: &str,
    trust_source: &str,
    specs: &[ArchiveSpec],
    out: &Path,
) -> Result<String> {
    // The source's reason carries run, branch and artifact names and API
    // text: encoded for the log, escaped for the summary.
    println!(
        "{}",
        gha::log_text(
            &format!("archive source: {}", source.describe()),
            gha::in_actions()
        )
    );
    let mut rows = String::new();
    for spec in specs {
        let path: PathBuf = out.join(&spec.file);
        let bytes = std::fs::metadata(&path)
            .with_context(|| format!("{} vanished", path.display()))?
            .len();
        println!("  {}: {}", path.display(), download::mib(bytes));
        // A plain file name by policy validation (letters, digits, `._-`).
        rows.push_str(&format!("| `{}` | {} |\n", spec.file, download::mib(bytes)));
    }
    let free = free_disk_bytes(out)
        .map(download::mib)
        .unwrap_or_else(|err| format!("unknown ({err})"));
    println!("  free disk space at {}: {free}", out.display());

    let mut outputs = vec![
        ("key", key.to_owned()),
        ("artifact_name", artifact_name.to_owned()),
        ("source", source.kind().to_owned()),
    ];
    // On the other sources the ids are written empty, so that a value some
    // earlier writer of this step left (the build runs PR-controlled code)
    // does not stand: the last line for a name wins.
    let (artifact_id, run_id) = match source {
        Source::Artifact(reused) => (reused.artifact_id.to_string(), reused.run_id.to_string()),
        _ => (String::new(), String::new()),
    };
    outputs.push(("artifact_id", artifact_id));
    outputs.push(("run_id", run_id));
    let pairs: Vec<(&str, &str)> = outputs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    gha::set_outputs_if_in_actions(&pairs)?;
    Ok(summary_markdown(source, key, trust_source, &rows, &free))
}

/// The step summary: every part that is not this program's own text goes
/// through [`gha::escape_markdown`].
fn summary_markdown(
    source: &Source,
    key: &str,
    trust_source: &str,
    rows: &str,
    free: &str,
) -> String {
    format!(
        "### GPU archives\n\nSource: {}\n\nKey: `{}`\n\nTrust settings: {}\n\n| archive | size |\n|---|---|\n{rows}\nFree disk space: {}\n\n",
        gha::escape_markdown(&source.describe()),
        // Key text by construction (letters, digits, `._-`).
        key,
        gha::escape_markdown(trust_source),
        gha::escape_markdown(free),
    )
}

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
