//! `cargo xtask gpu-archive`: put the GPU nextest archives of the current
//! content key into `--out`, from the cheapest source that can be proven
//! trustworthy.
//!
//! The sources are tried in order: a cache restore the workflow already made
//! (`--cache-hit`; used only if every archive verifies), an artifact of an
//! earlier trusted run named by the key (`--reuse`; see [`finder`] for the
//! provenance rules and [`download`] for the transfer), and otherwise a fresh
//! build ([`build`]) with the runner's control variables scrubbed. Anything
//! that goes wrong before the build is a warning and a fallback, never a
//! failure and never a partial file in `--out`. The cache and artifact paths
//! compile nothing.

mod build;
mod download;
mod finder;
mod verify;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::policy::{ArchiveSpec, Policy};
use crate::{flags, gha};

pub use finder::GithubEnv;

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
            Source::Artifact(r) => format!(
                "reused artifact {} from run {} ({}, {}, created {})",
                r.artifact_id, r.run_id, r.event, r.workflow, r.created_at
            ),
            Source::Build { reason } => format!("fresh build ({reason})"),
        }
    }
}

/// What one invocation is asked to do.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub root: &'a Path,
    pub policy: &'a Policy,
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
        report(
            &source,
            &manifest.key,
            &manifest.artifact_name,
            &policy.archive,
            &out,
        )?;
        Ok(ExitCode::SUCCESS)
    }
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
            Ok(env) => {
                match reuse_artifact(
                    env,
                    request.artifact_name,
                    request.out,
                    request.policy,
                    request.head_sha,
                ) {
                    Ok(Ok(reused)) => return Ok(Source::Artifact(reused)),
                    Ok(Err(not_found)) => not_found,
                    Err(err) => format!("artifact reuse failed: {err:#}"),
                }
            }
        };
        gha::warning(&format!("{reason}; building instead"));
        not_used.push(reason);
    } else {
        not_used.push("artifact reuse not requested".to_owned());
    }
    build::build_all(request.root, specs, request.out)?;
    Ok(Source::Build {
        reason: not_used.join("; "),
    })
}

/// Looks for and installs a trusted artifact named `name`. `Ok(Err(reason))`
/// when the search completed without a trusted candidate.
pub fn reuse_artifact(
    env: GithubEnv,
    name: &str,
    out: &Path,
    policy: &Policy,
    head_sha: Option<&str>,
) -> Result<Result<Reused, String>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(reuse_artifact_async(env, name, out, policy, head_sha))
}

async fn reuse_artifact_async(
    env: GithubEnv,
    name: &str,
    out: &Path,
    policy: &Policy,
    head_sha: Option<&str>,
) -> Result<Result<Reused, String>> {
    let artifacts = &policy.artifacts;
    let github = finder::Github::new(env, Duration::from_secs(artifacts.timeout_secs.max(1)))?;
    let search = finder::find(&github, name, policy, head_sha).await?;
    let Some(accepted) = search.accepted else {
        let reason = if search.skipped.is_empty() {
            format!("no artifact named {name}")
        } else {
            // The log has every skip; the reason names the first few.
            const SHOWN: usize = 5;
            let mut shown = search.skipped[..search.skipped.len().min(SHOWN)].join("; ");
            if search.skipped.len() > SHOWN {
                shown.push_str(&format!("; and {} more", search.skipped.len() - SHOWN));
            }
            format!(
                "no trusted artifact named {name} ({} skipped: {shown})",
                search.skipped.len()
            )
        };
        return Ok(Err(reason));
    };
    let finder::Accepted { artifact, run } = accepted;
    eprintln!(
        "artifact search: accepted artifact {} from run {} ({}, {})",
        artifact.id,
        run.id,
        run.event,
        run.path.as_deref().unwrap_or("?")
    );
    download::install(
        &github,
        &artifact,
        &policy.archive,
        out,
        artifacts.max_download_bytes,
    )
    .await
    .with_context(|| format!("artifact {} from run {}", artifact.id, run.id))?;
    Ok(Ok(Reused {
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

/// Logs the source, the archive sizes and the free disk space, and writes the
/// step outputs and summary.
fn report(
    source: &Source,
    key: &str,
    artifact_name: &str,
    specs: &[ArchiveSpec],
    out: &Path,
) -> Result<()> {
    println!("archive source: {}", source.describe());
    let mut rows = String::new();
    for spec in specs {
        let path: PathBuf = out.join(&spec.file);
        let bytes = std::fs::metadata(&path)
            .with_context(|| format!("{} vanished", path.display()))?
            .len();
        println!("  {}: {}", path.display(), download::mib(bytes));
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
    gha::append_step_summary(&format!(
        "### GPU archives\n\nSource: {}\n\nKey: `{key}`\n\n| archive | size |\n|---|---|\n{rows}\nFree disk space: {free}\n\n",
        source.describe().replace('|', "\\|")
    ))
}

/// Free space available to unprivileged users on the filesystem of `path`.
#[cfg(not(unix))]
fn free_disk_bytes(_path: &Path) -> Result<u64, String> {
    Err("not measured on this platform".into())
}

/// Free space available to unprivileged users on the filesystem of `path`.
#[cfg(unix)]
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
