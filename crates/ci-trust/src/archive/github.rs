//! The GitHub REST client of the reuse path: the requests the trust checks
//! and the download make, and the wire types of their answers.
//!
//! Owns: the token (only ever sent to the API host), the credential-free
//! client that follows a download's redirect, timeouts, pagination links,
//! response size limits and the JSON types. Must not decide trust: it
//! answers what GitHub says, and [`super::trust`] judges it. Its fields are
//! private, so no other module reaches into octocrab.
//!
//! octocrab's typed models lack the artifact `digest` and the run `path` and
//! reject a null `head_branch`, so this module declares its own serde types
//! and reads raw responses (the `Link` header drives pagination).

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use http_body_util::{BodyExt, Limited};
use octocrab::Octocrab;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// No API response the finder reads is anywhere near this large; a bigger
/// one is refused rather than buffered.
const MAX_JSON_BYTES: usize = 16 << 20;

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

/// A branch name that can be put in a route as it is. Anything else would
/// need encoding GitHub's routes do not document; it is refused, not guessed.
pub fn is_routable_branch(branch: &str) -> bool {
    !branch.is_empty()
        && !branch.contains("..")
        && branch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
}

/// A full 40-hex commit id.
pub fn is_commit(sha: &str) -> bool {
    sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The GitHub API of one repository, as the reuse path needs it.
///
/// `api` carries the token and only ever talks to the API host; `blob` has no
/// credentials at all and fetches the redirect target of a download, so the
/// token cannot reach blob storage even if the redirect pointed elsewhere.
pub struct Github {
    env: GithubEnv,
    api: Octocrab,
    blob: Octocrab,
    /// The longest any single request, or any pause in a download, may take.
    timeout: Duration,
    api_origin: String,
    api_base_path: String,
}

impl Github {
    /// Builds both clients; must be called inside a tokio runtime.
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

    pub fn env(&self) -> &GithubEnv {
        &self.env
    }

    /// A route under this repository: `/repos/{owner}/{repo}{rest}`.
    fn repo_route(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.env.owner, self.env.repo)
    }

    /// `GET /repos/{o}/{r}`: the repository's numeric id.
    pub async fn repository_id(&self) -> Result<u64> {
        let (repository, _): (RepositoryInfo, _) = self.get_json(&self.repo_route("")).await?;
        Ok(repository.id)
    }

    /// The route of the first page of artifacts called `name`.
    pub fn artifacts_route(&self, name: &str) -> String {
        self.repo_route(&format!(
            "/actions/artifacts?name={}&per_page=100",
            percent_encode(name)
        ))
    }

    /// One listing page, and the route of the next one (checked to stay on
    /// the API host).
    pub async fn artifact_page(&self, route: &str) -> Result<(ArtifactPage, Option<String>)> {
        let (page, next): (ArtifactPage, _) = self.get_json(route).await?;
        let next = next.map(|link| self.next_route(&link)).transpose()?;
        Ok((page, next))
    }

    /// `GET /repos/{o}/{r}/actions/runs/{id}`.
    pub async fn run(&self, run_id: u64) -> Result<Run> {
        let (run, _) = self
            .get_json(&self.repo_route(&format!("/actions/runs/{run_id}")))
            .await?;
        Ok(run)
    }

    /// `GET /repos/{o}/{r}/branches/{branch}`: the commit the *branch* points
    /// to. A tag of the same name cannot answer this route, as it can a bare
    /// ref in a compare.
    pub async fn branch_head(&self, branch: &str) -> Result<String> {
        if !is_routable_branch(branch) {
            bail!("the branch {branch:?} cannot be named in a request");
        }
        let (answer, _): (Branch, _) = self
            .get_json(&self.repo_route(&format!("/branches/{branch}")))
            .await?;
        if answer.name != branch {
            bail!(
                "asked for branch {branch:?}, the API answered branch {:?}",
                answer.name
            );
        }
        if !is_commit(&answer.commit.sha) {
            bail!(
                "the head of branch {branch:?} is {:?}, not a commit id",
                answer.commit.sha
            );
        }
        Ok(answer.commit.sha.to_ascii_lowercase())
    }

    /// `GET /repos/{o}/{r}/compare/{base}...{head}` between two commit ids:
    /// the comparison's `status` (`identical`, `behind`, `ahead`, `diverged`).
    pub async fn compare_commits(&self, base: &str, head: &str) -> Result<String> {
        if !is_commit(base) || !is_commit(head) {
            bail!("a comparison is made between two commit ids, not {base:?} and {head:?}");
        }
        // This direction keeps the answer small: the comparison lists the
        // commits and files from the merge base to `head`, none when `head`
        // is an ancestor of `base`.
        let (comparison, _): (Comparison, _) = self
            .get_json(&self.repo_route(&format!("/compare/{base}...{head}?per_page=1")))
            .await?;
        Ok(comparison.status)
    }

    /// Streams the zip of artifact `artifact_id`: `on_start` gets the
    /// announced length, `on_data` every chunk. The API answers with a
    /// redirect to blob storage, which is followed by hand with the
    /// credential-free client: the token stays on the API host.
    pub async fn download_artifact_zip(
        &self,
        artifact_id: u64,
        on_start: impl FnOnce(Option<u64>) -> Result<()>,
        mut on_data: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let route = self.repo_route(&format!("/actions/artifacts/{artifact_id}/zip"));
        let response = tokio::time::timeout(self.timeout, self.api._get(route.as_str()))
            .await
            .map_err(|_| anyhow!("GET {route}: no answer within {} s", self.timeout.as_secs()))?
            .map_err(|err| anyhow!("GET {route}: {}", describe_octocrab_error(&err)))?;
        let status = response.status();
        let response = if status.is_redirection() {
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| anyhow!("GET {route}: HTTP {status} without a Location"))?
                .to_owned();
            let api_is_https = self.env.api_url.starts_with("https://");
            let uri = redirect_target(&location, api_is_https)
                .with_context(|| format!("GET {route}: refusing the redirect"))?;
            let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
            tokio::time::timeout(self.timeout, self.blob._get(uri))
                .await
                .map_err(|_| {
                    anyhow!(
                        "download from {host}: no answer within {} s",
                        self.timeout.as_secs()
                    )
                })?
                .map_err(|err| anyhow!("download from {host}: {}", describe_octocrab_error(&err)))?
        } else {
            response
        };
        let status = response.status();
        if !status.is_success() {
            bail!("the artifact download answered HTTP {status}");
        }
        let announced = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        on_start(announced)?;
        let mut received: u64 = 0;
        let mut body = response.into_body();
        loop {
            let frame = tokio::time::timeout(self.timeout, body.frame())
                .await
                .map_err(|_| {
                    anyhow!(
                        "the download stalled: no data for {} s after {received} bytes",
                        self.timeout.as_secs()
                    )
                })?;
            let Some(frame) = frame else { return Ok(()) };
            let frame = frame.map_err(|err| {
                anyhow!(
                    "the download broke off after {received} bytes: {}",
                    describe_octocrab_error(&err)
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            received += data.len() as u64;
            on_data(&data)?;
        }
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
        // The next page of this listing is this listing's route with another
        // query; a link to another route (another repository's artifacts)
        // would feed the search candidates this repository never listed.
        let listing = format!(
            "{}{}",
            self.api_base_path,
            self.repo_route("/actions/artifacts")
        );
        if uri.path() != listing {
            bail!("the next-page link {link:?} is not a page of {listing}; refusing to follow it");
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

/// The URL a download redirect may lead to: absolute http(s), and https when
/// the API itself is, so that a redirect cannot strip the transport security
/// from an artifact whose digest the API may not give.
pub fn redirect_target(location: &str, api_is_https: bool) -> Result<http::Uri> {
    let uri: http::Uri = location
        .parse()
        .with_context(|| format!("the redirect target {location:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if !api_is_https => {}
        Some("http") => bail!("the redirect target {location:?} downgrades https to http"),
        _ => bail!("the redirect target {location:?} is not an http(s) URL"),
    }
    if uri.authority().is_none() {
        bail!("the redirect target {location:?} is not absolute");
    }
    Ok(uri)
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
fn describe_octocrab_error(err: &octocrab::Error) -> String {
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

#[derive(Debug, Clone, Deserialize)]
struct RepositoryInfo {
    id: u64,
}

#[derive(Debug, Deserialize)]
struct Comparison {
    status: String,
}

#[derive(Debug, Deserialize)]
struct Branch {
    name: String,
    commit: BranchCommit,
}

#[derive(Debug, Deserialize)]
struct BranchCommit {
    sha: String,
}

/// A listing page. Its entries are decoded one by one, so that one odd entry
/// is a skipped candidate rather than the end of the search.
#[derive(Debug, Deserialize)]
pub struct ArtifactPage {
    #[serde(default)]
    pub artifacts: Vec<serde_json::Value>,
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
