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

use std::cell::Cell;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use http_body_util::{BodyExt, Limited};
use octocrab::Octocrab;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// No API response the finder reads is anywhere near this large; a bigger
/// one is refused rather than buffered.
const MAX_JSON_BYTES: usize = 16 << 20;

/// The most bytes of API answers the whole reuse path reads (every page,
/// run, branch and comparison together). A full listing of 1000 pages is
/// about 60 MB; past this bound the search stops, so that a hostile API
/// cannot hold the job's memory or time with answers just under the
/// per-response limit.
pub const MAX_API_BYTES: u64 = 128 << 20;

/// The slowest a download may be: fewer bytes than this per second, over
/// any window of `artifacts.timeout-secs`, fails it. A stall (no byte at
/// all) is the limiting case.
pub const MIN_TRANSFER_BYTES_PER_SEC: u64 = 64 << 10;

/// The one time by which the whole reuse path (lookups, download,
/// extraction, verification) must be done, from `artifacts.reuse-deadline-secs`.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    secs: u64,
}

impl Deadline {
    /// `secs` seconds from now.
    pub fn after(secs: u64) -> Deadline {
        let now = Instant::now();
        Deadline {
            // Policy validation bounds `secs`; a year stands in for "never".
            at: now
                .checked_add(Duration::from_secs(secs))
                .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600)),
            secs,
        }
    }

    /// The time left, zero once it has passed.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    pub fn passed(&self) -> bool {
        self.remaining().is_zero()
    }

    /// What went wrong when it passed during `what`.
    pub fn message(&self, what: &str) -> String {
        format!(
            "the reuse path passed its deadline of {} s (artifacts.reuse-deadline-secs) {what}",
            self.secs
        )
    }

    /// An error once the deadline has passed.
    pub fn check(&self, what: &str) -> Result<()> {
        if self.passed() {
            bail!(self.message(what));
        }
        Ok(())
    }
}

/// A reader that fails once `deadline` has passed: what the reuse path does
/// after the download (extraction, zstd and tar verification) is bounded by
/// the same deadline, however much a few bytes of zstd decode to.
pub struct DeadlineReader<'a, R> {
    pub inner: R,
    pub deadline: &'a Deadline,
    pub what: &'a str,
}

impl<R: std::io::Read> std::io::Read for DeadlineReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.deadline.passed() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                self.deadline.message(self.what),
            ));
        }
        self.inner.read(buf)
    }
}

impl<R: std::io::Seek> std::io::Seek for DeadlineReader<'_, R> {
    fn seek(&mut self, position: std::io::SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(position)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for DeadlineReader<'_, R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.deadline.passed() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                self.deadline.message(self.what),
            ));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
    }
}

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
        // A value that is not UTF-8 is read with replacement characters,
        // which every check below refuses, rather than as "not set".
        GithubEnv::from_lookup(|name| {
            std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
        })
    }

    /// Reads the environment through `lookup`; the error names every missing
    /// or malformed variable and how to provide it.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<GithubEnv, String> {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let mut problems = Vec::new();
        let api_url = match get("GITHUB_API_URL") {
            Some(url) => match check_api_url(&url) {
                Ok(url) => url,
                Err(why) => {
                    problems.push(format!("GITHUB_API_URL={url:?} {why}"));
                    String::new()
                }
            },
            None => {
                problems.push("GITHUB_API_URL is not set".to_owned());
                String::new()
            }
        };
        let (owner, repo) = match get("GITHUB_REPOSITORY") {
            Some(full) => match full.split_once('/') {
                Some((owner, repo)) if is_name(owner) && is_name(repo) => {
                    (owner.to_owned(), repo.to_owned())
                }
                _ => {
                    problems.push(format!(
                        "GITHUB_REPOSITORY={:?} is not `owner/name`",
                        crate::gha::log_text(&full, false)
                    ));
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
                problems.push(format!(
                    "GITHUB_RUN_ID={:?} is not a number",
                    crate::gha::log_text(&id, false)
                ));
                0
            }),
            None => {
                problems.push("GITHUB_RUN_ID is not set".to_owned());
                0
            }
        };
        let token = match get("GITHUB_TOKEN") {
            Some(token) => match check_token(&token) {
                Ok(token) => token,
                Err(why) => {
                    problems.push(format!("GITHUB_TOKEN {why}"));
                    String::new()
                }
            },
            None => {
                problems.push(
                    "GITHUB_TOKEN is not set (give the step `env: GITHUB_TOKEN: ${{ github.token }}` and `actions: read`)"
                        .to_owned(),
                );
                String::new()
            }
        };
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(GithubEnv {
            api_url,
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

/// The token as it may go into an `Authorization` header: one trailing
/// newline (a secret pasted with one) is removed with a warning; any other
/// character outside visible ASCII (CR, LF, a control byte, a space, a
/// non-ASCII letter) is refused. The HTTP client would otherwise panic
/// building the header, or send a header split in two.
pub fn check_token(token: &str) -> Result<String, String> {
    let trimmed = token
        .strip_suffix("\r\n")
        .or_else(|| token.strip_suffix('\n'))
        .unwrap_or(token);
    if let Some(bad) = trimmed.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!(
            "holds a character that cannot be sent in an HTTP header ({}); a token is visible ASCII only",
            describe_char(bad)
        ));
    }
    if trimmed.is_empty() {
        return Err("is empty".to_owned());
    }
    if trimmed.len() != token.len() {
        crate::gha::warning(
            "GITHUB_TOKEN ends in a newline (a secret saved with one?); using it without the newline",
        );
    }
    Ok(trimmed.to_owned())
}

/// `c` for a message that must not carry it raw.
fn describe_char(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("{c:?}")
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

/// `GITHUB_API_URL` as the clients can use it: an absolute `http` or
/// `https` URL with a host, no credentials, query or fragment, and no
/// trailing slash. Anything else is refused before a client is built from
/// it.
pub fn check_api_url(url: &str) -> Result<String, String> {
    if let Some(bad) = url.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(format!("holds {}, which no URL holds", describe_char(bad)));
    }
    let uri: http::Uri = url.parse().map_err(|err| format!("is not a URL ({err})"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("is not an http(s) URL".to_owned());
    }
    let Some(authority) = uri.authority() else {
        return Err("has no host".to_owned());
    };
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err("must name a host and no credentials".to_owned());
    }
    if uri.query().is_some() || url.contains('#') {
        return Err("must not have a query or fragment".to_owned());
    }
    Ok(url.trim_end_matches('/').to_owned())
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
    /// The longest any single request may take, and the window over which a
    /// download must keep [`MIN_TRANSFER_BYTES_PER_SEC`].
    timeout: Duration,
    /// The end of the whole reuse path; every wait is cut at it.
    deadline: Deadline,
    /// Bytes of API answers still allowed ([`MAX_API_BYTES`]).
    api_budget: Cell<u64>,
    api_origin: String,
    api_base_path: String,
}

impl Github {
    /// Builds both clients; must be called inside a tokio runtime.
    pub fn new(env: GithubEnv, timeout: Duration, deadline: Deadline) -> Result<Github> {
        // `from_env` checked both; a caller that built the environment by
        // hand gets the same checks, since the client panics on what they refuse.
        let api_url = check_api_url(&env.api_url)
            .map_err(|why| anyhow!("GITHUB_API_URL={:?} {why}", env.api_url))?;
        check_token(&env.token).map_err(|why| anyhow!("GITHUB_TOKEN {why}"))?;
        let env = GithubEnv { api_url, ..env };
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
            deadline,
            api_budget: Cell::new(MAX_API_BYTES),
            api_origin,
            api_base_path,
        })
    }

    pub fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// Lowers the API byte budget ([`MAX_API_BYTES`]), so that a test can
    /// spend it without serving 128 MiB.
    #[cfg(test)]
    pub fn set_api_budget(&self, bytes: u64) {
        self.api_budget.set(bytes);
    }

    /// An error once the deadline has passed or the API byte budget is
    /// spent: the search stops, it does not skip its way to the end.
    pub fn check_bounds(&self, what: &str) -> Result<()> {
        self.deadline.check(what)?;
        if self.api_budget.get() == 0 {
            bail!(
                "the API answers passed {} MiB in total (the reuse path's bound) {what}",
                MAX_API_BYTES >> 20
            );
        }
        Ok(())
    }

    /// Runs `future` for at most the per-request timeout, cut at the
    /// deadline; the error says which of the two ended it.
    async fn within<F: std::future::Future>(&self, what: &str, future: F) -> Result<F::Output> {
        let limit = self.timeout.min(self.deadline.remaining());
        match tokio::time::timeout(limit, future).await {
            Ok(output) => Ok(output),
            Err(_) if self.deadline.passed() => {
                bail!(self.deadline.message(&format!("during {what}")))
            }
            Err(_) => bail!("{what}: no answer within {} s", self.timeout.as_secs()),
        }
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
                clip(&answer.name)
            );
        }
        if !is_commit(&answer.commit.sha) {
            bail!(
                "the head of branch {branch:?} is {:?}, not a commit id",
                clip(&answer.commit.sha)
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

    /// Streams the zip of artifact `artifact_id`, which the listing says is
    /// `expected` bytes long, to `on_data` chunk by chunk. The API answers
    /// with a redirect to blob storage, which is followed by hand with the
    /// credential-free client: the token stays on the API host.
    ///
    /// Bounded in bytes and time whatever the servers say: a
    /// `Content-Length` other than `expected` is refused before the body,
    /// the body is cut off as soon as it passes `expected` (announced or
    /// not), fewer than [`MIN_TRANSFER_BYTES_PER_SEC`] over any window of
    /// the per-request timeout fail it, and so does the deadline.
    pub async fn download_artifact_zip(
        &self,
        artifact_id: u64,
        expected: u64,
        mut on_data: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let route = self.repo_route(&format!("/actions/artifacts/{artifact_id}/zip"));
        let response = self
            .within(&format!("GET {route}"), self.api._get(route.as_str()))
            .await?
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
            self.within(&format!("the download from {host}"), self.blob._get(uri))
                .await?
                .map_err(|err| anyhow!("download from {host}: {}", describe_octocrab_error(&err)))?
        } else {
            response
        };
        let status = response.status();
        if !status.is_success() {
            bail!("the artifact download answered HTTP {status}");
        }
        if let Some(announced) = response.headers().get(http::header::CONTENT_LENGTH) {
            let announced = announced
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
            if announced != Some(expected) {
                bail!(
                    "the download announces {} bytes, but the listing's size_in_bytes is {expected}",
                    announced
                        .map_or_else(|| "an unreadable number of".to_owned(), |n| n.to_string())
                );
            }
        }
        let window = self.timeout;
        let window_minimum = MIN_TRANSFER_BYTES_PER_SEC.saturating_mul(window.as_secs().max(1));
        let mut received: u64 = 0;
        let mut window_start = Instant::now();
        let mut window_bytes: u64 = 0;
        let mut body = response.into_body();
        loop {
            let window_end = window_start + window;
            let wait = window_end
                .saturating_duration_since(Instant::now())
                .min(self.deadline.remaining());
            match tokio::time::timeout(wait, body.frame()).await {
                Err(_) if self.deadline.passed() => bail!(self.deadline.message(&format!(
                    "during the download, after {received} of {expected} bytes"
                ))),
                // The window ended without a frame: judged below.
                Err(_) => {}
                Ok(None) => break,
                Ok(Some(frame)) => {
                    let frame = frame.map_err(|err| {
                        anyhow!(
                            "the download broke off after {received} bytes: {}",
                            describe_octocrab_error(&err)
                        )
                    })?;
                    if let Ok(data) = frame.into_data() {
                        received = received.saturating_add(data.len() as u64);
                        if received > expected {
                            bail!(
                                "the download is longer than the listing's size_in_bytes ({expected}): cut off at {received} bytes"
                            );
                        }
                        window_bytes += data.len() as u64;
                        on_data(&data)?;
                    }
                }
            }
            if Instant::now() >= window_end {
                if window_bytes == 0 {
                    bail!(
                        "the download stalled: no data for {} s after {received} bytes",
                        window.as_secs()
                    );
                }
                if window_bytes < window_minimum {
                    bail!(
                        "the download is too slow: {window_bytes} bytes in {} s after {received} of {expected} bytes, under the minimum of {MIN_TRANSFER_BYTES_PER_SEC} bytes/s",
                        window.as_secs()
                    );
                }
                window_start = Instant::now();
                window_bytes = 0;
            }
        }
        if received != expected {
            bail!("the download is truncated: {received} of {expected} bytes");
        }
        Ok(())
    }

    /// GETs `route` (relative to the API base, or an absolute URL on the API
    /// host) and decodes the JSON body; also returns the `rel="next"` link.
    /// The whole exchange, body included, is bounded by the per-request
    /// timeout, the deadline and the API byte budget.
    async fn get_json<T: DeserializeOwned>(&self, route: &str) -> Result<(T, Option<String>)> {
        self.check_bounds(&format!("before GET {route}"))?;
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
            let budget = self.api_budget.get();
            let limit = usize::try_from(budget)
                .unwrap_or(usize::MAX)
                .min(MAX_JSON_BYTES);
            let body = match collect_limited(response.into_body(), limit).await {
                Ok(body) => body,
                Err(BodyError::TooLong) if limit < MAX_JSON_BYTES => {
                    self.api_budget.set(0);
                    bail!(
                        "the API answers passed {} MiB in total (the reuse path's bound)",
                        MAX_API_BYTES >> 20
                    );
                }
                Err(BodyError::TooLong) => {
                    self.api_budget.set(budget.saturating_sub(limit as u64));
                    bail!("the answer is longer than {} MiB", MAX_JSON_BYTES >> 20);
                }
                Err(BodyError::Broken(err)) => bail!("cannot read the response body: {err}"),
            };
            self.api_budget
                .set(budget.saturating_sub(body.len() as u64));
            if !status.is_success() {
                let message = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                    .unwrap_or_default();
                let message = clip(&message);
                if rate_limited {
                    bail!("rate limited by the GitHub API (HTTP {status}): {message}{reset}");
                }
                bail!("HTTP {status}: {message}");
            }
            // serde's message quotes the value it got, which the API chose.
            let value = serde_json::from_slice(&body)
                .map_err(|err| anyhow!("unexpected JSON: {}", clip(&err.to_string())))?;
            Ok((value, next))
        };
        self.within(&format!("GET {route}"), request)
            .await?
            .with_context(|| format!("GET {route}"))
    }

    /// Turns a `Link: rel="next"` URL into a route for the API client, after
    /// checking that it stays on the API host: the token must not follow a
    /// pagination link anywhere else.
    fn next_route(&self, link: &str) -> Result<String> {
        let shown = clip(link);
        let uri: http::Uri = link
            .parse()
            .with_context(|| format!("the next-page link {shown:?} is not a URL"))?;
        let Some(link_origin) = origin(&uri) else {
            bail!("the next-page link {shown:?} is not absolute");
        };
        if link_origin != self.api_origin || !uri.path().starts_with(&self.api_base_path) {
            bail!(
                "the next-page link {shown:?} leaves the API at {}; refusing to send the token there",
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
            bail!("the next-page link {shown:?} is not a page of {listing}; refusing to follow it");
        }
        Ok(uri
            .path_and_query()
            .map(|pq| pq.as_str().to_owned())
            .unwrap_or_default())
    }
}

/// The most characters of one attacker-chosen string (an API message, a
/// name, a path) that a log line or a reason carries.
pub const SHOWN_CHARS: usize = 200;

/// `text`, cut to [`SHOWN_CHARS`] characters with a note of its length: a
/// hostile API cannot flood the log with one string.
pub fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    clip_to(text, SHOWN_CHARS)
}

/// `text`, cut to `chars` characters with a note of its length.
pub fn clip_to(text: &str, chars: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(chars) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => {
            std::borrow::Cow::Owned(format!("{}… ({} bytes in all)", &text[..cut], text.len()))
        }
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
    let shown = clip(location);
    let uri: http::Uri = location
        .parse()
        .with_context(|| format!("the redirect target {shown:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if !api_is_https => {}
        Some("http") => bail!("the redirect target {shown:?} downgrades https to http"),
        _ => bail!("the redirect target {shown:?} is not an http(s) URL"),
    }
    if uri.authority().is_none() {
        bail!("the redirect target {shown:?} is not absolute");
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

/// Why a body could not be collected.
enum BodyError {
    /// It is longer than the limit.
    TooLong,
    Broken(String),
}

/// Collects a response body, refusing one larger than `limit` bytes.
async fn collect_limited<B>(body: B, limit: usize) -> Result<Vec<u8>, BodyError>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLong),
        Err(err) => Err(BodyError::Broken(err.to_string())),
    }
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
