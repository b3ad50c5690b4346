//! Finding a reusable artifact: the GitHub REST lookup and the provenance
//! checks that decide whether the run that produced it can be trusted.
//!
//! The name of an artifact is only a claim; anybody who can run a workflow
//! in this repository or a fork can upload an artifact with any name. What
//! makes an artifact trustworthy is the run that produced it: a run of this
//! repository (by numeric id, not only by name), of a trusted workflow file,
//! triggered by an event whose workflow definition comes from the default
//! branch, and, for events triggered directly, on the default branch at a
//! commit of its history (a tag may carry the branch's name). Every
//! candidate that fails a rule is skipped with its reason; a candidate whose
//! listing entry is odd or whose run cannot be read is skipped too, never
//! trusted and never fatal.
//!
//! octocrab's typed models lack the artifact `digest` and the run `path` and
//! reject a null `head_branch`, so this module declares its own serde types
//! and reads raw responses (the `Link` header drives pagination).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use http_body_util::{BodyExt, Limited};
use octocrab::Octocrab;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::policy::{ArtifactPolicy, Policy, UNTRUSTED_EVENTS};

/// No API response the finder reads is anywhere near this large; a bigger
/// one is refused rather than buffered.
const MAX_JSON_BYTES: usize = 16 << 20;

/// Pages of 100 artifacts read before giving up: artifacts expire after days,
/// so thousands of live ones with the same name mean something is wrong.
const MAX_PAGES: usize = 50;

/// The standard Actions environment the finder runs in. Its `Debug` form
/// leaves out the token, so that no log or error can carry it.
#[derive(Clone)]
pub struct GithubEnv {
    /// `GITHUB_API_URL`, such as `https://api.github.com`.
    pub api_url: String,
    pub owner: String,
    pub repo: String,
    /// `GITHUB_RUN_ID`: the run this command executes in.
    pub run_id: u64,
    pub token: String,
}

impl std::fmt::Debug for GithubEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubEnv")
            .field("api_url", &self.api_url)
            .field("owner", &self.owner)
            .field("repo", &self.repo)
            .field("run_id", &self.run_id)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl GithubEnv {
    /// Reads the environment of the current process.
    pub fn from_env() -> Result<GithubEnv, String> {
        GithubEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the environment through `lookup`; the error names every missing
    /// or malformed variable and how to provide it.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<GithubEnv, String> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let mut problems = Vec::new();
        let api_url = get("GITHUB_API_URL").unwrap_or_else(|| {
            problems.push("GITHUB_API_URL is not set".to_owned());
            String::new()
        });
        let (owner, repo) = match get("GITHUB_REPOSITORY") {
            Some(full) => match full.split_once('/') {
                Some((owner, repo)) if is_name(owner) && is_name(repo) => {
                    (owner.to_owned(), repo.to_owned())
                }
                _ => {
                    problems.push(format!("GITHUB_REPOSITORY={full:?} is not `owner/name`"));
                    Default::default()
                }
            },
            None => {
                problems.push("GITHUB_REPOSITORY is not set".to_owned());
                Default::default()
            }
        };
        let run_id = match get("GITHUB_RUN_ID") {
            Some(id) => id.trim().parse().unwrap_or_else(|_| {
                problems.push(format!("GITHUB_RUN_ID={id:?} is not a number"));
                0
            }),
            None => {
                problems.push("GITHUB_RUN_ID is not set".to_owned());
                0
            }
        };
        let token = get("GITHUB_TOKEN").unwrap_or_else(|| {
            problems.push(
                "GITHUB_TOKEN is not set (give the step `env: GITHUB_TOKEN: ${{ github.token }}` and `actions: read`)"
                    .to_owned(),
            );
            String::new()
        });
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(GithubEnv {
            api_url: api_url.trim_end_matches('/').to_owned(),
            owner,
            repo,
            run_id,
            token,
        })
    }

    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }
}

/// A repository owner or name as GitHub allows them; anything else could
/// smuggle path segments into API routes.
fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text != "."
        && text != ".."
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The two HTTP clients of the reuse path.
///
/// `api` carries the token and only ever talks to the API host; `blob` has no
/// credentials at all and fetches the redirect target of a download, so the
/// token cannot reach blob storage even if the redirect pointed elsewhere.
pub struct Github {
    pub env: GithubEnv,
    pub api: Octocrab,
    pub blob: Octocrab,
    /// The longest any single request, or any pause in a download, may take.
    pub timeout: Duration,
    api_origin: String,
    api_base_path: String,
}

impl Github {
    pub fn new(env: GithubEnv, timeout: Duration) -> Result<Github> {
        let base: http::Uri = env
            .api_url
            .parse()
            .with_context(|| format!("GITHUB_API_URL={:?} is not a URL", env.api_url))?;
        let api_origin = origin(&base)
            .with_context(|| format!("GITHUB_API_URL={:?} is not absolute", env.api_url))?;
        let api_base_path = base.path().trim_end_matches('/').to_owned();
        let api = Octocrab::builder()
            .base_uri(base)
            .context("cannot use GITHUB_API_URL as the API base")?
            .personal_token(env.token.clone())
            .build()
            .context("cannot build the GitHub API client")?;
        let blob = Octocrab::builder()
            .build()
            .context("cannot build the download client")?;
        Ok(Github {
            env,
            api,
            blob,
            timeout,
            api_origin,
            api_base_path,
        })
    }

    /// A route under this repository: `/repos/{owner}/{repo}{rest}`.
    pub fn repo_route(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.env.owner, self.env.repo)
    }

    /// GETs `route` (relative to the API base, or an absolute URL on the API
    /// host) and decodes the JSON body; also returns the `rel="next"` link.
    async fn get_json<T: DeserializeOwned>(&self, route: &str) -> Result<(T, Option<String>)> {
        let request = async {
            let response = self
                .api
                ._get(route)
                .await
                .map_err(|err| anyhow!("{}", describe_octocrab_error(&err)))?;
            let status = response.status();
            let next = response
                .headers()
                .get(http::header::LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
            let rate_limited = is_rate_limited(&response);
            let reset = response
                .headers()
                .get("x-ratelimit-reset")
                .and_then(|v| v.to_str().ok())
                .map(|v| format!(" (the limit resets at Unix time {v})"))
                .unwrap_or_default();
            let body = collect_limited(response.into_body(), MAX_JSON_BYTES).await?;
            if !status.is_success() {
                let message = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                    .unwrap_or_default();
                if rate_limited {
                    bail!("rate limited by the GitHub API (HTTP {status}): {message}{reset}");
                }
                bail!("HTTP {status}: {message}");
            }
            let value = serde_json::from_slice(&body).context("unexpected JSON")?;
            Ok((value, next))
        };
        tokio::time::timeout(self.timeout, request)
            .await
            .map_err(|_| anyhow!("no answer within {} s", self.timeout.as_secs()))?
            .with_context(|| format!("GET {route}"))
    }

    /// Turns a `Link: rel="next"` URL into a route for the API client, after
    /// checking that it stays on the API host: the token must not follow a
    /// pagination link anywhere else.
    fn next_route(&self, link: &str) -> Result<String> {
        let uri: http::Uri = link
            .parse()
            .with_context(|| format!("the next-page link {link:?} is not a URL"))?;
        let Some(link_origin) = origin(&uri) else {
            bail!("the next-page link {link:?} is not absolute");
        };
        if link_origin != self.api_origin || !uri.path().starts_with(&self.api_base_path) {
            bail!(
                "the next-page link {link:?} leaves the API at {}; refusing to send the token there",
                self.env.api_url
            );
        }
        Ok(uri
            .path_and_query()
            .map(|pq| pq.as_str().to_owned())
            .unwrap_or_default())
    }
}

/// `scheme://authority` of an absolute URI.
pub fn origin(uri: &http::Uri) -> Option<String> {
    Some(format!(
        "{}://{}",
        uri.scheme_str()?.to_ascii_lowercase(),
        uri.authority()?.as_str().to_ascii_lowercase()
    ))
}

/// The `rel="next"` target of a `Link` header, as GitHub writes them:
/// `<url>; rel="next", <url>; rel="last"`.
///
/// Each link is a `<…>` target followed by its parameters, up to the next
/// `<`; a comma inside a target (a query value) does not split it, and `rel`
/// may list several space-separated relations in any case (RFC 8288).
pub fn next_link(header: &str) -> Option<String> {
    let mut rest = header;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after.find('>')?;
        let target = &after[..close];
        let params_end = after[close..].find('<').map_or(after.len(), |i| close + i);
        let params = &after[close + 1..params_end];
        let is_next = params.split([';', ',']).any(|param| {
            let Some((key, value)) = param.split_once('=') else {
                return false;
            };
            key.trim().eq_ignore_ascii_case("rel")
                && value
                    .trim()
                    .trim_matches('"')
                    .split_ascii_whitespace()
                    .any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        if is_next {
            return Some(target.to_owned());
        }
        rest = &after[params_end..];
    }
    None
}

fn is_rate_limited<B>(response: &http::Response<B>) -> bool {
    let status = response.status();
    let remaining_zero = response
        .headers()
        .get("x-ratelimit-remaining")
        .is_some_and(|v| v.as_bytes() == b"0");
    status == http::StatusCode::TOO_MANY_REQUESTS
        || (status == http::StatusCode::FORBIDDEN
            && (remaining_zero || response.headers().contains_key("retry-after")))
}

/// octocrab's errors print as `Hyper` or `Service` only; the source chain
/// holds the useful part (connection refused, DNS, TLS).
pub fn describe_octocrab_error(err: &octocrab::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Collects a response body, refusing one larger than `limit` bytes.
async fn collect_limited<B>(body: B, limit: usize) -> Result<Vec<u8>>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let collected = Limited::new(body, limit)
        .collect()
        .await
        .map_err(|err| anyhow!("cannot read the response body: {err}"))?;
    Ok(collected.to_bytes().to_vec())
}

#[derive(Debug, Clone, Deserialize)]
struct RepositoryInfo {
    id: u64,
}

/// A listing page. Its entries are decoded one by one, so that one odd entry
/// is a skipped candidate rather than the end of the search.
#[derive(Debug, Deserialize)]
struct ArtifactPage {
    #[serde(default)]
    artifacts: Vec<serde_json::Value>,
}

/// One entry of `GET /repos/{o}/{r}/actions/artifacts`.
#[derive(Debug, Clone, Deserialize)]
pub struct Artifact {
    pub id: u64,
    pub name: String,
    pub size_in_bytes: u64,
    pub expired: bool,
    #[serde(default)]
    pub created_at: Option<String>,
    /// The `expired` flag can lag behind this time; a past one is expired too.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// `sha256:<hex>` for uploads from `actions/upload-artifact` v4 on.
    #[serde(default)]
    pub digest: Option<String>,
    #[serde(default)]
    pub workflow_run: Option<ArtifactRun>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ArtifactRun {
    #[serde(default)]
    pub id: Option<u64>,
    #[serde(default)]
    pub repository_id: Option<u64>,
    #[serde(default)]
    pub head_repository_id: Option<u64>,
}

/// The fields of `GET /repos/{o}/{r}/actions/runs/{id}` the checks need.
#[derive(Debug, Clone, Deserialize)]
pub struct Run {
    pub id: u64,
    /// The workflow file, such as `.github/workflows/ci.yml`, sometimes with `@ref`.
    #[serde(default)]
    pub path: Option<String>,
    pub event: String,
    #[serde(default)]
    pub head_branch: Option<String>,
    /// The commit whose workflow definition ran (for every event but
    /// `workflow_run`, whose head is the triggering run's).
    #[serde(default)]
    pub head_sha: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    /// The run's name, from the `run-name:` of the workflow definition: set
    /// by GitHub before any job runs, so code a job builds cannot change it.
    #[serde(default)]
    pub display_title: Option<String>,
    #[serde(default)]
    pub repository: Option<RunRepository>,
    #[serde(default)]
    pub head_repository: Option<RunRepository>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RunRepository {
    pub id: u64,
    pub full_name: String,
}

/// What the checks compare a producing run with.
#[derive(Debug, Clone)]
pub struct TrustContext<'a> {
    pub repository_id: u64,
    pub full_name: String,
    pub current_run_id: u64,
    pub default_branch: &'a str,
    pub policy: &'a ArtifactPolicy,
    /// `publisher.workflows`: the workflows that build default-branch code only.
    pub publisher_workflows: &'a [String],
    /// The pull-request head commit the archives are for (`--head-sha`).
    pub head_sha: Option<&'a str>,
    /// The time `expires_at` is compared with.
    pub now: chrono::DateTime<chrono::Utc>,
}

/// The checks that need only the artifact listing; they spare a run lookup.
pub fn judge_artifact(artifact: &Artifact, name: &str, ctx: &TrustContext) -> Result<u64, String> {
    if artifact.name != name {
        return Err(format!("its name {:?} is not {name:?}", artifact.name));
    }
    if artifact.expired {
        return Err("it has expired".to_owned());
    }
    // A time that does not parse leaves the decision to the flag: expiry
    // decides only whether the download can work, not whether it is trusted.
    if let Some(expires_at) = &artifact.expires_at
        && let Ok(at) = chrono::DateTime::parse_from_rfc3339(expires_at)
        && at <= ctx.now
    {
        return Err(format!("it has expired (at {expires_at})"));
    }
    if artifact.size_in_bytes > ctx.policy.max_download_bytes {
        return Err(format!(
            "its {} bytes exceed artifacts.max-download-bytes = {}",
            artifact.size_in_bytes, ctx.policy.max_download_bytes
        ));
    }
    let Some(run) = &artifact.workflow_run else {
        return Err("the listing names no producing run".to_owned());
    };
    let Some(run_id) = run.id else {
        return Err("the listing names no producing run".to_owned());
    };
    if run_id == ctx.current_run_id {
        return Err("it was produced by the current run".to_owned());
    }
    for (what, id) in [
        ("repository", run.repository_id),
        ("head repository", run.head_repository_id),
    ] {
        if let Some(id) = id
            && id != ctx.repository_id
        {
            return Err(format!(
                "its run's {what} id {id} is not this repository's ({})",
                ctx.repository_id
            ));
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

/// The provenance rules, applied to the producing run itself.
///
/// `Ok(Some(sha))` means the rules pass provided commit `sha` is in the
/// history of the default branch, which [`check_on_default_branch`] asks the
/// API. A `head_branch` equal to the default branch does not prove that on its
/// own: a push of a *tag* named like the default branch, or a dispatch on such
/// a tag, reports the tag's name as `head_branch` and runs the workflow
/// definition of whatever commit the tag points to.
pub fn judge_run(run: &Run, ctx: &TrustContext) -> Result<Option<String>, String> {
    if run.id == ctx.current_run_id {
        return Err("it was produced by the current run".to_owned());
    }
    for (what, repository) in [
        ("repository", &run.repository),
        ("head repository", &run.head_repository),
    ] {
        let Some(repository) = repository else {
            return Err(format!("its run has no {what} (a deleted fork?)"));
        };
        if repository.id != ctx.repository_id
            || !repository.full_name.eq_ignore_ascii_case(&ctx.full_name)
        {
            return Err(format!(
                "its run's {what} is {} (id {}), not {} (id {})",
                repository.full_name, repository.id, ctx.full_name, ctx.repository_id
            ));
        }
    }
    let path = run.path.as_deref().unwrap_or("");
    if !names_workflow(path, &ctx.policy.trusted_workflows, ctx.default_branch) {
        return Err(format!(
            "its workflow {path:?} is not one of artifacts.trusted-workflows {:?}",
            ctx.policy.trusted_workflows
        ));
    }
    // A trusted workflow that is not a publisher builds pull-request code
    // (the consumer), and that code held the job's artifact-upload
    // credential: it could have uploaded an artifact under any name, such as
    // the key of another pull request or of main. Such an artifact is
    // therefore reused only for the head commit it was built from, which the
    // run's name states (`run-name:`, fixed before any job ran).
    if !names_workflow(path, ctx.publisher_workflows, ctx.default_branch) {
        let Some(expected) = ctx.head_sha else {
            return Err(format!(
                "its workflow {path:?} builds pull-request code, and without --head-sha only publisher artifacts are trusted"
            ));
        };
        let title = run.display_title.as_deref().unwrap_or("");
        let names_commit = title
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| word.eq_ignore_ascii_case(expected));
        if !names_commit {
            return Err(format!(
                "its run {title:?} of {path:?} built pull-request code and does not name head commit {expected}; such artifacts are reused only for their own head commit"
            ));
        }
    }
    let event = run.event.as_str();
    if UNTRUSTED_EVENTS.contains(&event) || !ctx.policy.trusted_events.iter().any(|e| e == event) {
        return Err(format!(
            "its event {event:?} is not one of artifacts.trusted-events {:?}",
            ctx.policy.trusted_events
        ));
    }
    // A `workflow_run` run always executes the default branch's definition;
    // its head branch is the triggering run's and says nothing. Every other
    // trusted event runs the definition of its own ref, which must therefore
    // be the default branch.
    if event == "workflow_run" {
        return Ok(None);
    }
    match run.head_branch.as_deref() {
        Some(branch) if branch == ctx.default_branch => {}
        Some(branch) => {
            return Err(format!(
                "its {event} run was on branch {branch:?}, not the default branch {:?}",
                ctx.default_branch
            ));
        }
        None => {
            return Err(format!(
                "its {event} run has no head branch, so it cannot be shown to be on {:?}",
                ctx.default_branch
            ));
        }
    }
    match run.head_sha.as_deref() {
        Some(sha) if sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(Some(sha.to_ascii_lowercase()))
        }
        Some(sha) => Err(format!("its run's head commit {sha:?} is not a commit id")),
        None => Err(format!(
            "its {event} run names no head commit, so it cannot be shown to be on {:?}",
            ctx.default_branch
        )),
    }
}

#[derive(Debug, Deserialize)]
struct Comparison {
    status: String,
}

/// Checks that commit `sha` is in the history of `branch`, through
/// `GET /repos/{o}/{r}/compare/{branch}...{sha}`: the commit must be
/// `identical` to the branch or `behind` it. A commit only reachable from a
/// tag or another branch is refused.
///
/// This direction keeps the answer small: the comparison lists the commits
/// and files from the merge base to `sha`, none when `sha` is an ancestor.
pub async fn check_on_default_branch(
    github: &Github,
    sha: &str,
    branch: &str,
) -> Result<(), String> {
    // A branch name with anything else would need encoding GitHub's compare
    // route does not document; refuse it rather than guess.
    if branch.is_empty()
        || branch.contains("..")
        || !branch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
    {
        return Err(format!(
            "the default branch {branch:?} cannot be named in a compare request"
        ));
    }
    let route = github.repo_route(&format!("/compare/{branch}...{sha}?per_page=1"));
    let (comparison, _): (Comparison, _) = github
        .get_json(&route)
        .await
        .map_err(|err| format!("cannot tell whether its commit {sha} is on {branch:?}: {err:#}"))?;
    match comparison.status.as_str() {
        "identical" | "behind" => Ok(()),
        status => Err(format!(
            "its commit {sha} is not in the history of {branch:?} (compare status {status:?}); a tag or ref named like the default branch?"
        )),
    }
}

/// An artifact whose producing run passed every check.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub artifact: Artifact,
    pub run: Run,
}

/// The outcome of a search that completed.
#[derive(Debug)]
pub struct Search {
    pub accepted: Option<Accepted>,
    /// `artifact <id>: <reason>` for every candidate passed over.
    pub skipped: Vec<String>,
}

/// Pages through the artifacts called `name`, newest first, and returns the
/// first whose producing run passes every check.
///
/// Errors only when the search itself cannot proceed (the repository or a
/// listing page cannot be read); a candidate's unreadable run is a skip.
pub async fn find(
    github: &Github,
    name: &str,
    policy: &Policy,
    head_sha: Option<&str>,
) -> Result<Search> {
    let default_branch = policy.default_branch.as_str();
    let publisher_workflows = policy.publisher.workflows.as_slice();
    let policy = &policy.artifacts;
    let (repository, _): (RepositoryInfo, _) = github
        .get_json(&github.repo_route(""))
        .await
        .context("cannot read this repository's id")?;
    let ctx = TrustContext {
        repository_id: repository.id,
        full_name: github.env.full_name(),
        current_run_id: github.env.run_id,
        default_branch,
        policy,
        publisher_workflows,
        head_sha,
        now: chrono::Utc::now(),
    };
    let mut skipped = Vec::new();
    let mut runs: HashMap<u64, Result<Run, String>> = HashMap::new();
    let mut route = Some(github.repo_route(&format!(
        "/actions/artifacts?name={}&per_page=100",
        percent_encode(name)
    )));
    let mut pages = 0;
    let mut visited = std::collections::HashSet::new();
    while let Some(current) = route.take() {
        // A link back to a page already read would only repeat it until the
        // page cap; a listing that loops has nothing more to offer.
        if !visited.insert(current.clone()) {
            skipped.push(format!(
                "stopped: the next-page link after page {pages} repeats an earlier page"
            ));
            break;
        }
        pages += 1;
        if pages > MAX_PAGES {
            skipped.push(format!(
                "stopped after {MAX_PAGES} pages of candidates without a trusted one"
            ));
            break;
        }
        let (page, next): (ArtifactPage, _) = github
            .get_json(&current)
            .await
            .context("cannot list the artifacts")?;
        eprintln!(
            "artifact search: page {pages}: {} candidate(s) named {name}",
            page.artifacts.len()
        );
        for entry in page.artifacts {
            let artifact: Artifact = match serde_json::from_value(entry.clone()) {
                Ok(artifact) => artifact,
                Err(err) => {
                    let id = entry.get("id").map_or("?".to_owned(), |id| id.to_string());
                    let line = format!("artifact {id}: its listing entry is malformed: {err}");
                    eprintln!("artifact search: skipping {line}");
                    skipped.push(line);
                    continue;
                }
            };
            let run_id = match judge_artifact(&artifact, name, &ctx) {
                Ok(run_id) => run_id,
                Err(reason) => {
                    skip(&mut skipped, &artifact, reason);
                    continue;
                }
            };
            if let std::collections::hash_map::Entry::Vacant(slot) = runs.entry(run_id) {
                let run = github
                    .get_json::<Run>(&github.repo_route(&format!("/actions/runs/{run_id}")))
                    .await
                    .map(|(run, _)| run)
                    .map_err(|err| format!("its run {run_id} cannot be read: {err:#}"));
                slot.insert(run);
            }
            let verdict = match &runs[&run_id] {
                Ok(run) if run.id != run_id => Err(format!(
                    "the API answered run {} when asked for run {run_id}",
                    run.id
                )),
                Ok(run) => match judge_run(run, &ctx) {
                    Ok(Some(sha)) => check_on_default_branch(github, &sha, default_branch).await,
                    Ok(None) => Ok(()),
                    Err(reason) => Err(reason),
                },
                Err(reason) => Err(reason.clone()),
            };
            match verdict {
                Ok(()) => {
                    let run = runs[&run_id].clone().expect("judged Ok above");
                    return Ok(Search {
                        accepted: Some(Accepted { artifact, run }),
                        skipped,
                    });
                }
                Err(reason) => skip(&mut skipped, &artifact, reason),
            }
        }
        route = next.map(|link| github.next_route(&link)).transpose()?;
    }
    Ok(Search {
        accepted: None,
        skipped,
    })
}

fn skip(skipped: &mut Vec<String>, artifact: &Artifact, reason: String) {
    let line = format!("artifact {}: {reason}", artifact.id);
    eprintln!("artifact search: skipping {line}");
    skipped.push(line);
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved bytes).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
