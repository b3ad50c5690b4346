//! The CI trust policy: `.github/ci-trust.toml`, read by every command.
//!
//! This module owns the schema, its documented defaults and its validation.
//! A missing file means the defaults; an unknown key, a wrong type or a value
//! that could not form a valid cache key is an error that names the file and
//! line, because a typo in a security policy must never be silently ignored.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// Where the policy lives, relative to the repository root.
pub const DEFAULT_POLICY_PATH: &str = ".github/ci-trust.toml";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Policy {
    /// The branch whose content is trusted: the only branch the publisher runs on.
    #[serde(default = "default_branch")]
    pub default_branch: String,
    #[serde(default)]
    pub key: KeyPolicy,
    #[serde(default)]
    pub publisher: PublisherPolicy,
    #[serde(default)]
    pub artifacts: ArtifactPolicy,
    /// The archives published under one key.
    #[serde(default)]
    pub archive: Vec<ArchiveSpec>,
    #[serde(default)]
    pub contracts: ContractsPolicy,
    #[serde(default)]
    pub verify: VerifyPolicy,
    /// Reviewed exceptions to `check-contracts` rules.
    #[serde(default)]
    pub allow: Vec<AllowEntry>,
    /// The file this policy was read from; `None` when the defaults apply.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KeyPolicy {
    /// The first component of the key: what it names.
    #[serde(default = "default_key_name")]
    pub name: String,
    /// The manual `vN`, bumped when something the key cannot see changes the
    /// archives (the recipe and the build environment are components already).
    #[serde(default = "default_key_version")]
    pub version: String,
    /// Literal labels, in order, after the version.
    #[serde(default)]
    pub labels: Vec<String>,
    /// The `id:` of the workflow step that computes the archive key.
    #[serde(default = "default_step_id")]
    pub step_id: String,
    /// Extra file globs (repository-relative, `/`-separated) hashed into the key.
    #[serde(default)]
    pub include: Vec<String>,
    /// Locked crates whose resolved version (and optionally one feature) enters the key.
    #[serde(default)]
    pub locked_crates: Vec<LockedCrate>,
    /// Environment variables whose values (toolkit versions) enter the key.
    #[serde(default)]
    pub toolkit_env: Vec<String>,
    /// Include sites whose path cannot be resolved statically, each declared
    /// covered by the files it may read.
    #[serde(default)]
    pub dynamic_include: Vec<DynamicInclude>,
    /// The repository's top directory relative to the workspace root (`..`),
    /// inside which symlinks may point; by default the nearest directory
    /// holding `.git`. Below a `.git` it may only narrow that directory.
    #[serde(default)]
    pub repository_root: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockedCrate {
    pub name: String,
    /// A feature prefix such as `cuda-`: the workspace's enabled feature of
    /// this crate with that prefix is appended to the component.
    #[serde(default)]
    pub feature_prefix: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DynamicInclude {
    /// The repository-relative source file that holds the unresolvable include.
    pub site: String,
    /// Globs of the files that include may read; they are hashed into the key.
    pub files: Vec<String>,
    /// `files = []` says the include reads no repository file (an absolute
    /// system path, say); so strong a claim must be made explicitly.
    #[serde(default)]
    pub allow_empty: bool,
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PublisherPolicy {
    /// Workflow file names (under `.github/workflows/`) allowed to save shared caches.
    #[serde(default = "default_publisher_workflows")]
    pub workflows: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ArtifactPolicy {
    /// Workflow file names whose runs may have produced a reusable artifact.
    #[serde(default = "default_trusted_workflows")]
    pub trusted_workflows: Vec<String>,
    /// Events whose workflow definition comes from the default branch.
    #[serde(default = "default_trusted_events")]
    pub trusted_events: Vec<String>,
    /// The largest artifact zip the finder will download.
    #[serde(default = "default_max_download_bytes")]
    pub max_download_bytes: u64,
    /// Seconds one API request or a stalled download may take before falling back.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Seconds the whole reuse path (lookups, download, extraction,
    /// verification) may take before it falls back to a fresh build.
    #[serde(default = "default_reuse_deadline_secs")]
    pub reuse_deadline_secs: u64,
    /// The whole name (`run-name:`) of a consumer run built for a head
    /// commit, with `{head_sha}` where the commit goes.
    #[serde(default = "default_consumer_run_name")]
    pub consumer_run_name: String,
}

/// The placeholder of `artifacts.consumer-run-name`.
pub const HEAD_SHA_PLACEHOLDER: &str = "{head_sha}";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ArchiveSpec {
    /// The archive's file name inside `--out` and inside the artifact.
    pub file: String,
    /// Arguments after `cargo nextest archive --archive-file <out>/<file>`.
    #[serde(default)]
    pub nextest: Option<Vec<String>>,
    /// Arguments after `cargo build`; the `binaries` are then packed as a zstd tar.
    #[serde(default)]
    pub build: Option<Vec<String>>,
    #[serde(default)]
    pub binaries: Vec<String>,
}

/// How the fresh build of `gpu-archive` is proven against the key.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VerifyPolicy {
    /// Fail, rather than fall back to the dep-info check, when strace is
    /// not available to trace the build.
    #[serde(default)]
    pub require_trace: bool,
    /// Which tracer proves the fresh build (see README, "What the trace
    /// proves"): `auto` (fanotify where permitted, else strace), `strace`
    /// or `fanotify`.
    #[serde(default)]
    pub tracer: TracerChoice,
    /// Whether the fresh build runs in the key tree, a tree of exactly the
    /// key's inputs (Linux with `CAP_SYS_ADMIN` or user namespaces): `auto`
    /// where it can be made, else in the checkout with a warning;
    /// `required` fails instead; `off` builds in the checkout.
    #[serde(default)]
    pub key_tree: KeyTreeChoice,
}

/// Whether the fresh build runs in the key tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyTreeChoice {
    /// In the key tree where one can be made, else in the checkout (warned).
    #[default]
    Auto,
    /// In the key tree, or not at all.
    Required,
    /// In the checkout, traced (what every build did before the key tree).
    Off,
}

/// A tracer for the fresh build, as the policy or `--tracer` names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TracerChoice {
    /// fanotify when this process may use it (CAP_SYS_ADMIN), else strace.
    #[default]
    Auto,
    /// strace: every call of every process, metadata probes included.
    Strace,
    /// fanotify: every open and exec on the repository's mounts.
    Fanotify,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ContractsPolicy {
    /// Per-job grants that the rules would otherwise refuse.
    #[serde(default)]
    pub job: Vec<JobGrant>,
    /// Runner labels of GitHub-hosted (larger) runners besides `ubuntu-*`,
    /// `windows-*` and `macos-*`; any other label is treated as a self-hosted pod.
    #[serde(default)]
    pub hosted_labels: Vec<String>,
    /// Labels of self-hosted runners that are ephemeral (a fresh machine
    /// per job, no state kept), so pull-request code on them is not the
    /// `persistent-runner` finding. Compared case-insensitively.
    #[serde(default)]
    pub ephemeral_labels: Vec<String>,
    /// Whether a pull request from a branch of this repository (its author
    /// has write access) is untrusted like a fork's: `"untrusted"` (the
    /// default, the seed design's choice) or `"trusted"`.
    #[serde(default)]
    pub same_repository_pull_requests: SameRepositoryPullRequests,
    /// This repository's `owner/name` (what `--repository` sets): a
    /// checkout of `repository: org/repo` with this name is this
    /// repository's, and guards such as `github.repository == 'org/other'`
    /// are decided by it (a name that cannot be a repository's is refused).
    /// Without it, the git remotes decide only that a guard naming their
    /// one repository holds: a renamed repository or fork keeps its old
    /// remote, so no other literal is decided.
    #[serde(default)]
    pub repository: Option<String>,
}

/// How `check-contracts` counts a same-repository pull request's author.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SameRepositoryPullRequests {
    #[default]
    Untrusted,
    Trusted,
}

impl ContractsPolicy {
    /// True unless the policy trusts same-repository pull requests.
    pub fn same_repository_pull_requests_untrusted(&self) -> bool {
        self.same_repository_pull_requests == SameRepositoryPullRequests::Untrusted
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct JobGrant {
    pub workflow: String,
    pub job: String,
    /// Extra `read` permission scopes this job may hold (never a write).
    #[serde(default)]
    pub read_scopes: Vec<String>,
    /// Secrets this job may receive.
    #[serde(default)]
    pub secrets: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AllowEntry {
    pub rule: String,
    pub workflow: String,
    #[serde(default)]
    pub job: Option<String>,
    pub reason: String,
}

fn default_branch() -> String {
    "main".to_owned()
}
fn default_key_name() -> String {
    "gpu-archive".to_owned()
}
fn default_key_version() -> String {
    "v1".to_owned()
}
fn default_step_id() -> String {
    "archive_key".to_owned()
}
fn default_publisher_workflows() -> Vec<String> {
    vec!["ci-cache-publish.yml".to_owned()]
}
fn default_trusted_workflows() -> Vec<String> {
    vec![
        "runpod-gpu-test.yml".to_owned(),
        "ci-cache-publish.yml".to_owned(),
    ]
}
fn default_trusted_events() -> Vec<String> {
    ["workflow_run", "workflow_dispatch", "push", "schedule"]
        .map(str::to_owned)
        .to_vec()
}
fn default_max_download_bytes() -> u64 {
    4 << 30
}
fn default_timeout_secs() -> u64 {
    60
}
fn default_reuse_deadline_secs() -> u64 {
    300
}
/// The longest `artifacts.reuse-deadline-secs` and `timeout-secs` accepted.
pub const MAX_REUSE_SECS: u64 = 24 * 60 * 60;
fn default_consumer_run_name() -> String {
    "GPU tests for {head_sha}".to_owned()
}

impl Default for Policy {
    fn default() -> Self {
        toml::from_str("").expect("the empty policy deserialises to the defaults")
    }
}
impl Default for KeyPolicy {
    fn default() -> Self {
        toml::from_str("").expect("the empty key policy deserialises to the defaults")
    }
}
impl Default for PublisherPolicy {
    fn default() -> Self {
        Self {
            workflows: default_publisher_workflows(),
        }
    }
}
impl Default for ArtifactPolicy {
    fn default() -> Self {
        Self {
            trusted_workflows: default_trusted_workflows(),
            trusted_events: default_trusted_events(),
            max_download_bytes: default_max_download_bytes(),
            timeout_secs: default_timeout_secs(),
            reuse_deadline_secs: default_reuse_deadline_secs(),
            consumer_run_name: default_consumer_run_name(),
        }
    }
}

/// Events a pull request triggers, or whose workflow definition (and so
/// whose code) it controls: the review events and `merge_group` run the
/// definition of the pull request's merge ref, not the default branch's.
pub const UNTRUSTED_EVENTS: &[&str] = &[
    "pull_request",
    "pull_request_target",
    "pull_request_review",
    "pull_request_review_comment",
    "merge_group",
    "issue_comment",
];

impl Policy {
    /// Reads the policy for `root`: `explicit` when given (it must exist),
    /// otherwise `root/.github/ci-trust.toml`, otherwise the defaults.
    pub fn load(root: &Path, explicit: Option<&Path>) -> Result<Policy> {
        let path = match explicit {
            Some(path) => {
                if !path.is_file() {
                    bail!(
                        "policy file {} does not exist; pass an existing file to --policy or omit it to use {}",
                        path.display(),
                        DEFAULT_POLICY_PATH
                    );
                }
                path.to_path_buf()
            }
            None => {
                let path = root.join(DEFAULT_POLICY_PATH);
                if !path.exists() {
                    return Ok(Policy::default());
                }
                path
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read policy file {}", path.display()))?;
        let mut policy = Policy::parse(&text)
            .with_context(|| format!("invalid policy file {}", path.display()))?;
        policy.source = Some(path);
        Ok(policy)
    }

    /// Parses and validates policy text; errors carry the line and column.
    /// A file that parses is validated as a whole: the error lists every
    /// problem, each at its line and column, not only the first.
    pub fn parse(text: &str) -> Result<Policy> {
        let policy: Policy = toml::from_str(text).map_err(|err| anyhow::anyhow!("{err}"))?;
        let problems = policy.problems();
        if problems.is_empty() {
            return Ok(policy);
        }
        let document = toml::de::DeTable::parse(text).ok();
        let mut message = format!("{} problem(s):", problems.len());
        for problem in &problems {
            let at = document
                .as_ref()
                .and_then(|doc| locate(doc, &problem.path))
                .map(|offset| {
                    let before = &text[..offset];
                    let line = before.matches('\n').count() + 1;
                    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!("line {line}, column {column}")
                })
                .unwrap_or_else(|| "(defaults)".to_owned());
            message.push_str(&format!("\n  {at}: {}", problem.message));
        }
        bail!(message)
    }

    /// Every problem of a policy that deserialised, with where it is.
    fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut problem = |path: Vec<Seg>, message: String| out.push(Problem { path, message });
        let key = &self.key;
        let key_text = |path: Vec<Seg>, what: &str, text: &str| {
            (!is_key_text(text)).then(|| {
                (
                    path,
                    format!("{what} = {text:?} may hold only letters, digits, `.`, `_` and `-`"),
                )
            })
        };
        if let Some((path, message)) = key_text(
            vec![Seg::Key("key"), Seg::Key("name")],
            "key.name",
            &key.name,
        ) {
            problem(path, message);
        }
        let is_version = key.version.len() > 1
            && key.version.starts_with('v')
            && key.version[1..].bytes().all(|b| b.is_ascii_digit());
        if !is_version {
            problem(
                vec![Seg::Key("key"), Seg::Key("version")],
                format!(
                    "key.version = {:?} must be `v` followed by digits, such as \"v3\"; bump it when something outside the checkout changes the archives",
                    key.version
                ),
            );
        }
        for (index, label) in key.labels.iter().enumerate() {
            if let Some((path, message)) = key_text(
                vec![Seg::Key("key"), Seg::Key("labels"), Seg::Index(index)],
                "key.labels",
                label,
            ) {
                problem(path, message);
            }
        }
        for (index, var) in key.toolkit_env.iter().enumerate() {
            if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                problem(
                    vec![Seg::Key("key"), Seg::Key("toolkit-env"), Seg::Index(index)],
                    format!("key.toolkit-env entry {var:?} is not an environment variable name"),
                );
            }
        }
        if let Some(up) = &key.repository_root {
            if up.is_empty() || !up.split('/').all(|part| matches!(part, ".." | "." | "")) {
                problem(
                    vec![Seg::Key("key"), Seg::Key("repository-root")],
                    format!(
                        "key.repository-root = {up:?} must name an ancestor of the workspace root, such as \"..\" or \"../..\""
                    ),
                );
            }
        }
        for (index, glob) in key.include.iter().enumerate() {
            if let Err(err) = check_relative_glob(glob) {
                problem(
                    vec![Seg::Key("key"), Seg::Key("include"), Seg::Index(index)],
                    format!("{err:#}"),
                );
            }
        }
        for (index, dynamic) in key.dynamic_include.iter().enumerate() {
            let at = |field| {
                vec![
                    Seg::Key("key"),
                    Seg::Key("dynamic-include"),
                    Seg::Index(index),
                    Seg::Key(field),
                ]
            };
            for glob in &dynamic.files {
                if let Err(err) = check_relative_glob(glob) {
                    problem(at("files"), format!("{err:#}"));
                }
            }
            if dynamic.reason.trim().is_empty() {
                problem(
                    at("reason"),
                    format!(
                        "key.dynamic-include for {} needs a non-empty reason",
                        dynamic.site
                    ),
                );
            }
            // An empty list would silently cover the site with no file at
            // all: the include's reads would never reach the key.
            match (dynamic.files.is_empty(), dynamic.allow_empty) {
                (true, false) => problem(
                    at("files"),
                    format!(
                        "key.dynamic-include for {} has `files = []`, so nothing the include reads would enter the key; list the globs it may read, or, if it reads no repository file, set `allow-empty = true` and say why in `reason`",
                        dynamic.site
                    ),
                ),
                (false, true) => problem(
                    at("allow-empty"),
                    format!(
                        "key.dynamic-include for {} sets `allow-empty = true` but lists files; drop `allow-empty`",
                        dynamic.site
                    ),
                ),
                _ => {}
            }
        }
        let mut files = std::collections::BTreeSet::new();
        for (index, archive) in self.archive.iter().enumerate() {
            let at = |field| vec![Seg::Key("archive"), Seg::Index(index), Seg::Key(field)];
            let name = &archive.file;
            if !is_archive_file_name(name) {
                problem(
                    at("file"),
                    format!(
                        "archive file {name:?} must be a plain `*.tar.zst` file name (letters, digits, `.`, `_`, `-`, not starting with `.` or `-`)"
                    ),
                );
            }
            if !files.insert(name.clone()) {
                problem(at("file"), format!("archive file {name:?} is listed twice"));
            }
            let shape = match (&archive.nextest, &archive.build) {
                (Some(_), None) if archive.binaries.is_empty() => None,
                (Some(_), None) => Some("`binaries` goes with `build`, not `nextest`"),
                (None, Some(_)) if !archive.binaries.is_empty() => None,
                (None, Some(_)) => Some("`build` needs `binaries` to pack"),
                _ => Some("needs exactly one of `nextest` or `build`"),
            };
            if let Some(shape) = shape {
                problem(at("file"), format!("archive {name:?}: {shape}"));
            }
        }
        for (index, allow) in self.allow.iter().enumerate() {
            if allow.reason.trim().is_empty() {
                problem(
                    vec![Seg::Key("allow"), Seg::Index(index), Seg::Key("reason")],
                    format!(
                        "[[allow]] for rule {} in {} needs a non-empty reason",
                        allow.rule, allow.workflow
                    ),
                );
            }
        }
        for (key, value) in [
            ("timeout-secs", self.artifacts.timeout_secs),
            ("reuse-deadline-secs", self.artifacts.reuse_deadline_secs),
        ] {
            if !(1..=MAX_REUSE_SECS).contains(&value) {
                problem(
                    vec![Seg::Key("artifacts"), Seg::Key(key)],
                    format!(
                        "artifacts.{key} = {value} must be between 1 and {MAX_REUSE_SECS} seconds"
                    ),
                );
            }
        }
        let run_name = &self.artifacts.consumer_run_name;
        if run_name.matches(HEAD_SHA_PLACEHOLDER).count() != 1
            || run_name
                .replace(HEAD_SHA_PLACEHOLDER, "")
                .contains(['{', '}'])
        {
            problem(
                vec![Seg::Key("artifacts"), Seg::Key("consumer-run-name")],
                format!(
                    "artifacts.consumer-run-name = {run_name:?} must hold `{HEAD_SHA_PLACEHOLDER}` exactly once and no other braces, such as \"GPU tests for {HEAD_SHA_PLACEHOLDER}\""
                ),
            );
        }
        for (index, event) in self.artifacts.trusted_events.iter().enumerate() {
            if UNTRUSTED_EVENTS.contains(&event.as_str()) {
                problem(
                    vec![
                        Seg::Key("artifacts"),
                        Seg::Key("trusted-events"),
                        Seg::Index(index),
                    ],
                    format!(
                        "artifacts.trusted-events lists {event:?}, whose workflow definition a pull request controls; remove it"
                    ),
                );
            }
        }
        out
    }

    /// Says where the policy came from, for logs.
    pub fn describe_source(&self) -> String {
        match &self.source {
            Some(path) => path.display().to_string(),
            None => format!("defaults (no {DEFAULT_POLICY_PATH})"),
        }
    }
}

/// An `[[archive]]` file name: a plain `*.tar.zst` name, which is all the
/// archive builder writes and all the reuse path extracts, installed into
/// `--out` under it. Nothing hidden (`.`) or flag-like (`-`), no path.
pub fn is_archive_file_name(name: &str) -> bool {
    name.strip_suffix(".tar.zst")
        .is_some_and(|stem| !stem.is_empty())
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A key component must survive being a cache key and an artifact name.
pub fn is_key_text(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// One step of the way to a value in the policy file.
#[derive(Debug, Clone, Copy)]
enum Seg {
    Key(&'static str),
    Index(usize),
}

/// A validation problem and the value it is about.
#[derive(Debug)]
struct Problem {
    path: Vec<Seg>,
    message: String,
}

/// The byte offset of the value at `path` in the parsed document, or of the
/// deepest part of the path that is there (a default has no place).
fn locate(document: &toml::Spanned<toml::de::DeTable<'_>>, path: &[Seg]) -> Option<usize> {
    let mut offset = None;
    let mut table = Some(document.get_ref());
    let mut array: Option<&toml::de::DeArray<'_>> = None;
    for seg in path {
        let value = match seg {
            Seg::Key(key) => table?
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == *key)
                .map(|(_, v)| v)?,
            Seg::Index(index) => array?.get(*index)?,
        };
        offset = Some(value.span().start);
        table = value.get_ref().as_table();
        array = value.get_ref().as_array();
    }
    offset
}

fn check_relative_glob(glob: &str) -> Result<()> {
    if glob.starts_with('/') || glob.split('/').any(|part| part == "..") || glob.contains('\\') {
        bail!(
            "include glob {glob:?} must be repository-relative, `/`-separated and stay inside the repository"
        );
    }
    globset::Glob::new(glob)
        .with_context(|| format!("include glob {glob:?} is not a valid glob"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_policy_gives_documented_defaults() {
        let policy = Policy::parse("").unwrap();
        assert_eq!(policy.default_branch, "main");
        assert_eq!(policy.key.version, "v1");
        assert_eq!(policy.key.step_id, "archive_key");
        assert_eq!(policy.publisher.workflows, ["ci-cache-publish.yml"]);
        assert!(
            policy
                .artifacts
                .trusted_events
                .contains(&"workflow_run".to_owned())
        );
    }

    #[test]
    fn unknown_key_is_an_error_with_its_line() {
        let err =
            Policy::parse("default-branch = \"main\"\n[key]\nversoin = \"v2\"\n").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("versoin"), "{text}");
    }

    #[test]
    fn bad_values_are_refused() {
        for (text, needle) in [
            ("[key]\nversion = \"3\"", "must be `v` followed by digits"),
            ("[key]\nlabels = [\"a b\"]", "may hold only"),
            ("[key]\ninclude = [\"../x\"]", "inside the repository"),
            (
                "[artifacts]\ntrusted-events = [\"pull_request\"]",
                "pull request controls",
            ),
            ("[[archive]]\nfile = \"a.tar.zst\"", "exactly one of"),
            (
                "[[archive]]\nfile = \"../a\"\nnextest = []",
                "plain `*.tar.zst` file name",
            ),
            (
                "[artifacts]\nreuse-deadline-secs = 0",
                "artifacts.reuse-deadline-secs = 0 must be between 1 and",
            ),
            (
                "[artifacts]\ntimeout-secs = 18446744073709551615",
                "artifacts.timeout-secs = 18446744073709551615 must be between",
            ),
            ("[[archive]]\nfile = \"a\"\nbuild = []", "needs `binaries`"),
            (
                "[[key.dynamic-include]]\nsite = \"src/lib.rs\"\nfiles = []\nreason = \"r\"",
                "set `allow-empty = true`",
            ),
            (
                "[[key.dynamic-include]]\nsite = \"src/lib.rs\"\nfiles = [\"a\"]\nallow-empty = true\nreason = \"r\"",
                "drop `allow-empty`",
            ),
            (
                "[[allow]]\nrule = \"x\"\nworkflow = \"y\"\nreason = \" \"",
                "non-empty reason",
            ),
        ] {
            let err = format!("{:#}", Policy::parse(text).unwrap_err());
            assert!(err.contains(needle), "{text:?} gave {err}");
        }
    }

    #[test]
    fn every_problem_is_reported_at_its_line_and_column() {
        let text = "[key]\nversion = \"3\"\nlabels = [\"ok\", \"a b\"]\n[artifacts]\ntrusted-events = [\"push\", \"pull_request\"]\n[[archive]]\nfile = \"../a\"\nnextest = []\n";
        let err = format!("{:#}", Policy::parse(text).unwrap_err());
        assert_eq!(
            err,
            "4 problem(s):\n  line 2, column 11: key.version = \"3\" must be `v` followed by digits, such as \"v3\"; bump it when something outside the checkout changes the archives\n  line 3, column 17: key.labels = \"a b\" may hold only letters, digits, `.`, `_` and `-`\n  line 7, column 8: archive file \"../a\" must be a plain `*.tar.zst` file name (letters, digits, `.`, `_`, `-`, not starting with `.` or `-`)\n  line 5, column 27: artifacts.trusted-events lists \"pull_request\", whose workflow definition a pull request controls; remove it"
        );
    }

    /// The archive names a policy may give are exactly plain `*.tar.zst`
    /// names: each other one is refused at its line in the file.
    #[test]
    fn archive_file_names_are_plain_tar_zst_names() {
        for good in ["cuda-tests.tar.zst", "a.tar.zst", "A_1.b-2.tar.zst"] {
            assert!(is_archive_file_name(good), "{good}");
        }
        for bad in [
            "cuda-tests.zip",
            ".tar.zst",
            "..tar.zst",
            ".hidden.tar.zst",
            "-rf.tar.zst",
            "a.tar.zst.exe",
            "a.tar.zst/",
            "dir/a.tar.zst",
            "a b.tar.zst",
            "a\u{0}.tar.zst",
            "\u{441}uda.tar.zst",
            "",
        ] {
            assert!(!is_archive_file_name(bad), "{bad:?}");
            let text = format!(
                "[artifacts]\ntimeout-secs = 5\n\n[[archive]]\nfile = {}\nnextest = []\n",
                toml::Value::String(bad.to_owned())
            );
            let err = format!("{:#}", Policy::parse(&text).unwrap_err());
            assert!(
                err.contains("line 5, column 8: archive file")
                    && err.contains("must be a plain `*.tar.zst` file name"),
                "{bad:?}: {err}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ci-trust.toml");
        std::fs::write(&file, "[[archive]]\nfile = \"x.tgz\"\nnextest = []\n").unwrap();
        let err = format!("{:#}", Policy::load(dir.path(), Some(&file)).unwrap_err());
        assert!(
            err.contains(&format!("invalid policy file {}", file.display()))
                && err.contains("line 2, column 8"),
            "{err}"
        );
    }

    #[test]
    fn full_example_parses() {
        let policy = Policy::parse(
            r#"
default-branch = "main"
[key]
name = "cuda-archive"
version = "v4"
labels = ["pjrt"]
include = ["docs/guides/*.md"]
locked-crates = [{ name = "cudarc", feature-prefix = "cuda-" }]
toolkit-env = ["PTX_TOOLKIT_VERSION"]
[publisher]
workflows = ["ci-cache-publish.yml"]
[artifacts]
trusted-workflows = ["runpod-gpu-test.yml", "ci-cache-publish.yml"]
trusted-events = ["workflow_run", "workflow_dispatch", "push", "schedule"]
[[archive]]
file = "cuda-tests.tar.zst"
nextest = ["-p", "gpu-crate", "--features", "cuda", "--cargo-profile", "ci"]
[[archive]]
file = "cuda-tutorial.tar.zst"
build = ["--profile", "ci", "--bin", "cuda_tutorial"]
binaries = ["cuda_tutorial"]
"#,
        )
        .unwrap();
        assert_eq!(policy.archive.len(), 2);
        assert_eq!(
            policy.key.locked_crates[0].feature_prefix.as_deref(),
            Some("cuda-")
        );
    }

    #[test]
    fn the_trace_requirement_defaults_off_and_is_read() {
        assert!(!Policy::parse("").unwrap().verify.require_trace);
        let policy = Policy::parse("[verify]\nrequire-trace = true\n").unwrap();
        assert!(policy.verify.require_trace);
        assert_eq!(policy.verify.tracer, TracerChoice::Auto);
        let policy = Policy::parse("[verify]\ntracer = \"strace\"\n").unwrap();
        assert_eq!(policy.verify.tracer, TracerChoice::Strace);
        assert!(Policy::parse("[verify]\ntracer = \"ptrace\"\n").is_err());
        assert_eq!(
            Policy::parse("").unwrap().verify.key_tree,
            KeyTreeChoice::Auto
        );
        let policy = Policy::parse("[verify]\nkey-tree = \"required\"\n").unwrap();
        assert_eq!(policy.verify.key_tree, KeyTreeChoice::Required);
        assert!(Policy::parse("[verify]\nkey-tree = true\n").is_err());
        assert!(Policy::parse("[verify]\nrequire-trac = true\n").is_err());
    }
}
