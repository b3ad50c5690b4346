//! The trust checks: whether the run that produced an artifact can be trusted,
//! and the search that applies them to the artifacts named by the key.
//!
//! Owns: the named list of checks ([`CHECKS`], in the order and with the
//! names of the table in `docs/gpu-archive.md`), one [`Rejection`] variant
//! per way a check fails, and the order candidates are judged in. Must not
//! talk HTTP itself (that is [`super::github`]) or touch the file system
//! (that is [`super::download`]).
//!
//! The name of an artifact is only a claim; anybody who can run a workflow
//! in this repository or a fork can upload an artifact with any name. What
//! makes an artifact trustworthy is the run that produced it: a run of this
//! repository (by numeric id, not only by name), of a trusted workflow file,
//! triggered by an event whose workflow definition comes from the default
//! branch, and, for events triggered directly, on the default branch at a
//! commit of the *branch's* history (a tag may carry the branch's name).
//! Every candidate that fails a check is skipped with its reason; a
//! candidate whose listing entry is odd or whose run cannot be read is
//! skipped too, never trusted and never fatal.
//!
//! The settings these checks read (`default-branch`, `[publisher]`,
//! `[artifacts]`) come from the trust policy, which the workflows take from
//! the trusted checkout (`--trust-policy`), never from the tree being keyed.

use std::collections::HashMap;
use std::fmt;

use anyhow::{Context, Result};

use super::github::{Artifact, Github, Run, clip, is_commit};
use crate::gha;
use crate::policy::{HEAD_SHA_PLACEHOLDER, Policy, UNTRUSTED_EVENTS};

/// Pages of 100 listing entries read before giving up. A page costs one
/// request and no run lookup, so expired or foreign decoys, however many,
/// cannot push a trusted artifact out of reach short of this sanity bound.
pub const MAX_PAGES: usize = 1000;

/// Candidates that passed the listing checks judged, newest first: each may
/// cost a run lookup. Artifacts expire after days, so hundreds of live ones
/// with the same name from this repository mean something is wrong.
pub const MAX_CANDIDATES: usize = 500;

/// The checks, in the order they are applied; their names are the first
/// column of the table in `docs/gpu-archive.md` (a test compares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    /// The listing entry is readable, names its producing run, and that run
    /// can be read.
    Listing,
    Name,
    Unexpired,
    Size,
    NotCurrentRun,
    Repository,
    Workflow,
    ConsumerRunName,
    Event,
    DefaultBranch,
    BranchHistory,
}

pub const CHECKS: &[Check] = &[
    Check::Listing,
    Check::Name,
    Check::Unexpired,
    Check::Size,
    Check::NotCurrentRun,
    Check::Repository,
    Check::Workflow,
    Check::ConsumerRunName,
    Check::Event,
    Check::DefaultBranch,
    Check::BranchHistory,
];

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::Listing => "listing",
            Check::Name => "name",
            Check::Unexpired => "unexpired",
            Check::Size => "size",
            Check::NotCurrentRun => "not-current-run",
            Check::Repository => "repository",
            Check::Workflow => "workflow",
            Check::ConsumerRunName => "consumer-run-name",
            Check::Event => "event",
            Check::DefaultBranch => "default-branch",
            Check::BranchHistory => "branch-history",
        }
    }
}

/// Why a candidate was passed over: one variant per way a check fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    MalformedEntry {
        error: String,
    },
    NoProducingRun,
    RunUnreadable {
        run_id: u64,
        error: String,
    },
    RunMismatch {
        asked: u64,
        answered: u64,
    },
    OtherName {
        name: String,
        wanted: String,
    },
    Expired {
        at: Option<String>,
    },
    TooLarge {
        bytes: u64,
        max: u64,
    },
    CurrentRun,
    ForeignRepositoryId {
        what: &'static str,
        id: u64,
        expected: u64,
    },
    ForeignRepository {
        what: &'static str,
        found: Option<(String, u64)>,
        expected: (String, u64),
    },
    UntrustedWorkflow {
        path: String,
        trusted: Vec<String>,
    },
    ConsumerWithoutHeadSha {
        path: String,
    },
    ConsumerRunName {
        path: String,
        title: Option<String>,
        expected: String,
    },
    UntrustedEvent {
        event: String,
        trusted: Vec<String>,
    },
    OffDefaultBranch {
        event: String,
        branch: Option<String>,
        default_branch: String,
    },
    NoHeadCommit {
        event: String,
        head_sha: Option<String>,
        default_branch: String,
    },
    NotInHistory {
        sha: String,
        branch: String,
        status: String,
    },
    HistoryUnknown {
        sha: String,
        branch: String,
        error: String,
    },
}

impl Rejection {
    /// The check this rejection fails.
    pub fn check(&self) -> Check {
        match self {
            Rejection::MalformedEntry { .. }
            | Rejection::NoProducingRun
            | Rejection::RunUnreadable { .. }
            | Rejection::RunMismatch { .. } => Check::Listing,
            Rejection::OtherName { .. } => Check::Name,
            Rejection::Expired { .. } => Check::Unexpired,
            Rejection::TooLarge { .. } => Check::Size,
            Rejection::CurrentRun => Check::NotCurrentRun,
            Rejection::ForeignRepositoryId { .. } | Rejection::ForeignRepository { .. } => {
                Check::Repository
            }
            Rejection::UntrustedWorkflow { .. } => Check::Workflow,
            Rejection::ConsumerWithoutHeadSha { .. } | Rejection::ConsumerRunName { .. } => {
                Check::ConsumerRunName
            }
            Rejection::UntrustedEvent { .. } => Check::Event,
            Rejection::OffDefaultBranch { .. } => Check::DefaultBranch,
            Rejection::NoHeadCommit { .. }
            | Rejection::NotInHistory { .. }
            | Rejection::HistoryUnknown { .. } => Check::BranchHistory,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::MalformedEntry { error } => {
                write!(f, "its listing entry is malformed: {}", clip(error))
            }
            Rejection::NoProducingRun => write!(f, "the listing names no producing run"),
            Rejection::RunUnreadable { run_id, error } => {
                write!(f, "its run {run_id} cannot be read: {}", clip(error))
            }
            Rejection::RunMismatch { asked, answered } => write!(
                f,
                "the API answered run {answered} when asked for run {asked}"
            ),
            Rejection::OtherName { name, wanted } => {
                write!(f, "its name {:?} is not {wanted:?}", clip(name))
            }
            Rejection::Expired { at: None } => write!(f, "it has expired"),
            Rejection::Expired { at: Some(at) } => write!(f, "it has expired (at {})", clip(at)),
            Rejection::TooLarge { bytes, max } => write!(
                f,
                "its {bytes} bytes exceed artifacts.max-download-bytes = {max}"
            ),
            Rejection::CurrentRun => write!(f, "it was produced by the current run"),
            Rejection::ForeignRepositoryId { what, id, expected } => write!(
                f,
                "its run's {what} id {id} is not this repository's ({expected})"
            ),
            Rejection::ForeignRepository {
                what, found: None, ..
            } => write!(f, "its run has no {what} (a deleted fork?)"),
            Rejection::ForeignRepository {
                what,
                found: Some((name, id)),
                expected: (expected_name, expected_id),
            } => write!(
                f,
                "its run's {what} is {} (id {id}), not {expected_name} (id {expected_id})",
                clip(name)
            ),
            Rejection::UntrustedWorkflow { path, trusted } => write!(
                f,
                "its workflow {:?} is not one of artifacts.trusted-workflows {trusted:?}",
                clip(path)
            ),
            Rejection::ConsumerWithoutHeadSha { path } => write!(
                f,
                "its workflow {:?} builds pull-request code, and without --head-sha only publisher artifacts are trusted",
                clip(path)
            ),
            Rejection::ConsumerRunName {
                path,
                title,
                expected,
            } => write!(
                f,
                "its run {:?} of {:?} built pull-request code and is not named exactly {expected:?} (artifacts.consumer-run-name); such artifacts are reused only for their own head commit",
                clip(title.as_deref().unwrap_or("")),
                clip(path)
            ),
            Rejection::UntrustedEvent { event, trusted } => write!(
                f,
                "its event {:?} is not one of artifacts.trusted-events {trusted:?}",
                clip(event)
            ),
            Rejection::OffDefaultBranch {
                event,
                branch: Some(branch),
                default_branch,
            } => write!(
                f,
                "its {} run was on branch {:?}, not the default branch {default_branch:?}",
                clip(event),
                clip(branch)
            ),
            Rejection::OffDefaultBranch {
                event,
                branch: None,
                default_branch,
            } => write!(
                f,
                "its {} run has no head branch, so it cannot be shown to be on {default_branch:?}",
                clip(event)
            ),
            Rejection::NoHeadCommit {
                event,
                head_sha: None,
                default_branch,
            } => write!(
                f,
                "its {} run names no head commit, so it cannot be shown to be on {default_branch:?}",
                clip(event)
            ),
            Rejection::NoHeadCommit {
                head_sha: Some(sha),
                ..
            } => write!(
                f,
                "its run's head commit {:?} is not a commit id",
                clip(sha)
            ),
            Rejection::NotInHistory {
                sha,
                branch,
                status,
            } => write!(
                f,
                "its commit {sha} is not in the history of branch {branch:?} (compare status {:?} against the branch head); a tag or ref named like the default branch?",
                clip(status)
            ),
            Rejection::HistoryUnknown { sha, branch, error } => write!(
                f,
                "cannot tell whether its commit {sha} is on branch {branch:?}: {}",
                clip(error)
            ),
        }
    }
}

/// A candidate passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The artifact id, or `?` when the listing entry had none.
    pub artifact: String,
    pub rejection: Rejection,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "artifact {}: {}", self.artifact, self.rejection)
    }
}

/// What the checks compare a producing run with.
#[derive(Debug, Clone)]
pub struct TrustContext<'a> {
    pub repository_id: u64,
    pub full_name: String,
    pub current_run_id: u64,
    /// The trust policy: `default-branch`, `[publisher]` and `[artifacts]`.
    pub trust: &'a Policy,
    /// The pull-request head commit the archives are for (`--head-sha`).
    pub head_sha: Option<&'a str>,
    /// The time `expires_at` is compared with.
    pub now: chrono::DateTime<chrono::Utc>,
}

/// The checks that need only the artifact listing (`listing` to
/// `repository`); they spare a run lookup. Returns the producing run's id.
pub fn judge_artifact(
    artifact: &Artifact,
    name: &str,
    ctx: &TrustContext,
) -> Result<u64, Rejection> {
    if artifact.name != name {
        return Err(Rejection::OtherName {
            name: artifact.name.clone(),
            wanted: name.to_owned(),
        });
    }
    if artifact.expired {
        return Err(Rejection::Expired { at: None });
    }
    // A time that does not parse leaves the decision to the flag: expiry
    // decides only whether the download can work, not whether it is trusted.
    if let Some(expires_at) = &artifact.expires_at
        && let Ok(at) = chrono::DateTime::parse_from_rfc3339(expires_at)
        && at <= ctx.now
    {
        return Err(Rejection::Expired {
            at: Some(expires_at.clone()),
        });
    }
    let max = ctx.trust.artifacts.max_download_bytes;
    if artifact.size_in_bytes > max {
        return Err(Rejection::TooLarge {
            bytes: artifact.size_in_bytes,
            max,
        });
    }
    let Some(run_id) = artifact.workflow_run.as_ref().and_then(|run| run.id) else {
        return Err(Rejection::NoProducingRun);
    };
    if run_id == ctx.current_run_id {
        return Err(Rejection::CurrentRun);
    }
    let run = artifact.workflow_run.as_ref().expect("has an id above");
    for (what, id) in [
        ("repository", run.repository_id),
        ("head repository", run.head_repository_id),
    ] {
        if let Some(id) = id
            && id != ctx.repository_id
        {
            return Err(Rejection::ForeignRepositoryId {
                what,
                id,
                expected: ctx.repository_id,
            });
        }
    }
    Ok(run_id)
}

/// Whether workflow `path` (as the API reports it) is one of `names`.
///
/// GitHub may append `@<ref>` to the path. Only a ref that names the default
/// branch is removed: `@` is legal in a file name, so `ci.yml@evil.yml` is
/// another workflow file, not `ci.yml` at a ref.
fn names_workflow(path: &str, names: &[String], default_branch: &str) -> bool {
    names.iter().any(
        |name| match path.strip_prefix(&format!(".github/workflows/{name}")) {
            Some("") => true,
            Some(suffix) => suffix.strip_prefix('@').is_some_and(|git_ref| {
                git_ref.strip_prefix("refs/heads/").unwrap_or(git_ref) == default_branch
            }),
            None => false,
        },
    )
}

/// The run name a consumer run for `head_sha` has: the policy's
/// `artifacts.consumer-run-name` with the commit in place of `{head_sha}`.
pub fn consumer_run_name(trust: &Policy, head_sha: &str) -> String {
    trust
        .artifacts
        .consumer_run_name
        .replace(HEAD_SHA_PLACEHOLDER, head_sha)
}

/// The checks on the producing run itself (`not-current-run` to
/// `default-branch`).
///
/// `Ok(Some(sha))` means they pass provided commit `sha` is in the history
/// of the default branch (`branch-history`), which [`check_branch_history`]
/// asks the API. A `head_branch` equal to the default branch does not prove
/// that on its own: a push of a *tag* named like the default branch, or a
/// dispatch on such a tag, reports the tag's name as `head_branch` and runs
/// the workflow definition of whatever commit the tag points to.
pub fn judge_run(run: &Run, ctx: &TrustContext) -> Result<Option<String>, Rejection> {
    let default_branch = ctx.trust.default_branch.as_str();
    let artifacts = &ctx.trust.artifacts;
    if run.id == ctx.current_run_id {
        return Err(Rejection::CurrentRun);
    }
    for (what, repository) in [
        ("repository", &run.repository),
        ("head repository", &run.head_repository),
    ] {
        let found = repository.as_ref().map(|r| (r.full_name.clone(), r.id));
        let is_this = repository.as_ref().is_some_and(|r| {
            r.id == ctx.repository_id && r.full_name.eq_ignore_ascii_case(&ctx.full_name)
        });
        if !is_this {
            return Err(Rejection::ForeignRepository {
                what,
                found,
                expected: (ctx.full_name.clone(), ctx.repository_id),
            });
        }
    }
    let path = run.path.as_deref().unwrap_or("");
    if !names_workflow(path, &artifacts.trusted_workflows, default_branch) {
        return Err(Rejection::UntrustedWorkflow {
            path: path.to_owned(),
            trusted: artifacts.trusted_workflows.clone(),
        });
    }
    // A trusted workflow that is not a publisher builds pull-request code
    // (the consumer), and that code held the job's artifact-upload
    // credential: it could have uploaded an artifact under any name, such as
    // the key of another pull request or of main. Such an artifact is
    // therefore reused only for the head commit it was built from, which the
    // run's name states (`run-name:`, fixed before any job ran). The whole
    // name must be the configured one: a name that merely contains the
    // commit (`GPU tests for <other> after <this>`) proves nothing.
    let is_publisher = names_workflow(path, &ctx.trust.publisher.workflows, default_branch);
    if !is_publisher {
        let Some(head_sha) = ctx.head_sha else {
            return Err(Rejection::ConsumerWithoutHeadSha {
                path: path.to_owned(),
            });
        };
        let expected = consumer_run_name(ctx.trust, head_sha);
        if run.display_title.as_deref() != Some(expected.as_str()) {
            return Err(Rejection::ConsumerRunName {
                path: path.to_owned(),
                title: run.display_title.clone(),
                expected,
            });
        }
    }
    let event = run.event.as_str();
    if UNTRUSTED_EVENTS.contains(&event) || !artifacts.trusted_events.iter().any(|e| e == event) {
        return Err(Rejection::UntrustedEvent {
            event: event.to_owned(),
            trusted: artifacts.trusted_events.clone(),
        });
    }
    // A `workflow_run` run always executes the default branch's definition;
    // its head branch is the triggering run's and says nothing. Every other
    // trusted event runs the definition of its own ref, which must therefore
    // be the default branch.
    //
    // A consumer's `workflow_run` run is bound to its head commit by its
    // name (above). A publisher's is bound to nothing else: its artifact is
    // reused for any pull request, so what it built must be the default
    // branch's, as for the other events. Had it been triggered by a run on
    // another branch (a `workflow_run` trigger without a branch filter, or
    // one a branch can satisfy), that branch's build scripts would have held
    // the job's artifact credential and could have uploaded under any name.
    if event == "workflow_run" && !is_publisher {
        return Ok(None);
    }
    if run.head_branch.as_deref() != Some(default_branch) {
        return Err(Rejection::OffDefaultBranch {
            event: event.to_owned(),
            branch: run.head_branch.clone(),
            default_branch: default_branch.to_owned(),
        });
    }
    match run.head_sha.as_deref() {
        Some(sha) if is_commit(sha) => Ok(Some(sha.to_ascii_lowercase())),
        head_sha => Err(Rejection::NoHeadCommit {
            event: event.to_owned(),
            head_sha: head_sha.map(str::to_owned),
            default_branch: default_branch.to_owned(),
        }),
    }
}

/// `branch-history`: commit `sha` is in the history of the *branch*
/// `branch` whose head is `branch_head` (read with
/// [`Github::branch_head`], never resolved from a bare ref name, which a tag
/// of the same name would win): `compare/{branch_head}...{sha}` must answer
/// `identical` or `behind`.
pub async fn check_branch_history(
    github: &Github,
    branch: &str,
    branch_head: &Result<String, String>,
    sha: &str,
) -> Result<(), Rejection> {
    let unknown = |error: String| Rejection::HistoryUnknown {
        sha: sha.to_owned(),
        branch: branch.to_owned(),
        error,
    };
    let head = branch_head.as_ref().map_err(|err| unknown(err.clone()))?;
    let status = github
        .compare_commits(head, sha)
        .await
        .map_err(|err| unknown(format!("{err:#}")))?;
    match status.as_str() {
        "identical" | "behind" => Ok(()),
        _ => Err(Rejection::NotInHistory {
            sha: sha.to_owned(),
            branch: branch.to_owned(),
            status,
        }),
    }
}

/// An artifact whose producing run passed every check.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub artifact: Artifact,
    pub run: Run,
}

/// Skipped candidates logged and kept with their reasons; past this many
/// they are only counted (by check), so that a listing of millions of odd
/// entries floods neither the log nor memory.
pub const MAX_KEPT_SKIPS: usize = 100;

/// The candidates passed over: the first [`MAX_KEPT_SKIPS`] with their
/// reasons (and dereferencing to them), and how many each check rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skips {
    kept: Vec<Skipped>,
    /// Per check, in the order of [`CHECKS`].
    counts: Vec<usize>,
}

impl Skips {
    /// Records a skip, and logs it while they are kept.
    pub fn push(&mut self, artifact: String, rejection: Rejection) {
        if self.counts.is_empty() {
            self.counts = vec![0; CHECKS.len()];
        }
        let check = rejection.check();
        if let Some(index) = CHECKS.iter().position(|c| *c == check) {
            self.counts[index] += 1;
        }
        let entry = Skipped {
            artifact,
            rejection,
        };
        if self.kept.len() < MAX_KEPT_SKIPS {
            gha::log(&format!(
                "artifact search: skipping {entry} [check {}]",
                check.name()
            ));
            self.kept.push(entry);
        } else if self.total() == MAX_KEPT_SKIPS + 1 {
            gha::log(&format!(
                "artifact search: more than {MAX_KEPT_SKIPS} candidates skipped; the rest are counted by check, not listed"
            ));
        }
    }

    /// Every skip, kept or only counted.
    pub fn total(&self) -> usize {
        self.counts.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// How many candidates each check rejected, in the order of [`CHECKS`]:
    /// `listing 2, workflow 1`, or `none`.
    pub fn tally(&self) -> String {
        let counts: Vec<String> = CHECKS
            .iter()
            .zip(&self.counts)
            .filter(|(_, count)| **count > 0)
            .map(|(check, count)| format!("{} {count}", check.name()))
            .collect();
        if counts.is_empty() {
            "none".to_owned()
        } else {
            counts.join(", ")
        }
    }
}

impl std::ops::Deref for Skips {
    type Target = [Skipped];

    fn deref(&self) -> &[Skipped] {
        &self.kept
    }
}

/// The outcome of a search that completed.
#[derive(Debug)]
pub struct Search {
    pub accepted: Option<Accepted>,
    /// Every candidate passed over, in the order it was judged.
    pub skipped: Skips,
    /// Why the listing was not read to its end, if it was not.
    pub stopped: Option<String>,
}

/// Reads every listing page of the artifacts called `name`, drops those the
/// listing alone rejects, and judges the rest newest first (by `created_at`,
/// then id: the API documents no order); returns the first whose producing
/// run passes every check.
///
/// Reading the whole listing before judging means that decoys the listing
/// rejects (expired, oversized, from a fork) cost no run lookup and cannot
/// push the trusted artifact out of reach, whatever their number and
/// position, up to [`MAX_PAGES`] pages; of the rest, the newest
/// [`MAX_CANDIDATES`] are judged.
///
/// Errors only when the search itself cannot proceed (the repository or a
/// listing page cannot be read); a candidate's unreadable run is a skip.
pub async fn find(
    github: &Github,
    name: &str,
    trust: &Policy,
    head_sha: Option<&str>,
) -> Result<Search> {
    let repository_id = github
        .repository_id()
        .await
        .context("cannot read this repository's id")?;
    let ctx = TrustContext {
        repository_id,
        full_name: github.env().full_name(),
        current_run_id: github.env().run_id,
        trust,
        head_sha,
        now: chrono::Utc::now(),
    };
    let mut skipped = Skips::default();
    let mut stopped = None;
    let mut candidates: Vec<(Artifact, u64)> = Vec::new();
    // Candidates beyond the newest MAX_CANDIDATES, dropped as the listing
    // is read so that memory holds at most twice that many.
    let mut dropped = 0usize;
    let mut listed = 0usize;
    let mut route = Some(github.artifacts_route(name));
    let mut pages = 0;
    let mut visited = std::collections::HashSet::new();
    while let Some(current) = route.take() {
        github.check_bounds(&format!("while reading listing page {}", pages + 1))?;
        // A link back to a page already read would only repeat it until the
        // page cap; a listing that loops has nothing more to offer.
        if !visited.insert(current.clone()) {
            stopped = Some(format!(
                "the next-page link after page {pages} repeats an earlier page"
            ));
            break;
        }
        if pages == MAX_PAGES {
            stopped = Some(format!(
                "the listing has more than {MAX_PAGES} pages; the rest was not read"
            ));
            break;
        }
        pages += 1;
        let (page, next) = github
            .artifact_page(&current)
            .await
            .context("cannot list the artifacts")?;
        listed += page.artifacts.len();
        for (index, entry) in page.artifacts.into_iter().enumerate() {
            // A page of millions of tiny entries is work without an await:
            // the deadline is checked as it goes.
            if index % 4096 == 4095 {
                github.check_bounds(&format!("while reading listing page {pages}"))?;
            }
            match serde_json::from_value::<Artifact>(entry.clone()) {
                Ok(artifact) => match judge_artifact(&artifact, name, &ctx) {
                    Ok(run_id) => candidates.push((artifact, run_id)),
                    Err(rejection) => skipped.push(artifact.id.to_string(), rejection),
                },
                Err(err) => {
                    let id = entry
                        .get("id")
                        .map_or("?".to_owned(), |id| clip(&id.to_string()).into_owned());
                    let rejection = Rejection::MalformedEntry {
                        error: err.to_string(),
                    };
                    skipped.push(id, rejection);
                }
            }
            if candidates.len() >= 2 * MAX_CANDIDATES {
                newest_first(&mut candidates);
                dropped += candidates.len() - MAX_CANDIDATES;
                candidates.truncate(MAX_CANDIDATES);
            }
        }
        route = next;
    }
    newest_first(&mut candidates);
    if candidates.len() > MAX_CANDIDATES || dropped > 0 {
        stopped = Some(format!(
            "only the newest {MAX_CANDIDATES} of {} candidates were judged",
            candidates.len() + dropped
        ));
        candidates.truncate(MAX_CANDIDATES);
    }
    gha::log(&format!(
        "artifact search: {listed} artifact(s) named {name} on {pages} page(s); {} skipped by the listing checks; {} candidate(s) to judge, newest first{}",
        skipped.total(),
        candidates.len(),
        stopped
            .as_deref()
            .map(|why| format!(" (stopped: {why})"))
            .unwrap_or_default()
    ));

    let default_branch = trust.default_branch.as_str();
    let mut runs: HashMap<u64, Result<Run, Rejection>> = HashMap::new();
    let mut branch_head: Option<Result<String, String>> = None;
    // The answer for a commit does not change within a run: many candidates
    // from runs of one commit cost one comparison.
    let mut histories: HashMap<String, Result<(), Rejection>> = HashMap::new();
    for (artifact, run_id) in candidates {
        // Past the deadline or the API byte budget the search stops here,
        // rather than skip every remaining candidate one failed request at
        // a time.
        github.check_bounds(&format!(
            "while judging the candidates (artifact {} next, {} skipped so far)",
            artifact.id,
            skipped.total()
        ))?;
        if let std::collections::hash_map::Entry::Vacant(slot) = runs.entry(run_id) {
            let run = match github.run(run_id).await {
                Ok(run) if run.id != run_id => Err(Rejection::RunMismatch {
                    asked: run_id,
                    answered: run.id,
                }),
                Ok(run) => Ok(run),
                Err(err) => Err(Rejection::RunUnreadable {
                    run_id,
                    error: format!("{err:#}"),
                }),
            };
            slot.insert(run);
        }
        let verdict = match &runs[&run_id] {
            Ok(run) => match judge_run(run, &ctx) {
                Ok(Some(sha)) => {
                    if branch_head.is_none() {
                        let head = github
                            .branch_head(default_branch)
                            .await
                            .map_err(|err| format!("cannot read the branch's head: {err:#}"));
                        branch_head = Some(head);
                    }
                    let head = branch_head.as_ref().expect("read above");
                    match histories.get(&sha) {
                        Some(known) => known.clone(),
                        None => {
                            let verdict =
                                check_branch_history(github, default_branch, head, &sha).await;
                            histories.insert(sha, verdict.clone());
                            verdict
                        }
                    }
                }
                Ok(None) => Ok(()),
                Err(rejection) => Err(rejection),
            },
            Err(rejection) => Err(rejection.clone()),
        };
        match verdict {
            Ok(()) => {
                let run = runs
                    .remove(&run_id)
                    .and_then(Result::ok)
                    .expect("judged Ok above");
                gha::log(&format!(
                    "artifact search: {} candidate(s) seen, {} skipped (by check: {}); accepted artifact {} from run {}",
                    listed,
                    skipped.total(),
                    skipped.tally(),
                    artifact.id,
                    run.id
                ));
                return Ok(Search {
                    accepted: Some(Accepted { artifact, run }),
                    skipped,
                    stopped,
                });
            }
            Err(rejection) => skipped.push(artifact.id.to_string(), rejection),
        }
    }
    gha::log(&format!(
        "artifact search: {listed} candidate(s) seen, {} skipped (by check: {}), none trusted",
        skipped.total(),
        skipped.tally()
    ));
    Ok(Search {
        accepted: None,
        skipped,
        stopped,
    })
}

/// Sorts candidates newest first (by `created_at`, then id); an
/// unparsable or missing time sorts last.
fn newest_first(candidates: &mut [(Artifact, u64)]) {
    candidates.sort_by_key(|(artifact, _)| {
        let created = artifact
            .created_at
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        std::cmp::Reverse((created, artifact.id))
    });
}
