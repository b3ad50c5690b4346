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
    /// The manual `vN` bumped when archive build commands or toolkit selection change.
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
}

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
        }
    }
}

/// Events whose workflow definition (and so whose code) a pull request controls.
pub const UNTRUSTED_EVENTS: &[&str] = &["pull_request", "pull_request_target", "issue_comment"];

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
    pub fn parse(text: &str) -> Result<Policy> {
        let policy: Policy = toml::from_str(text).map_err(|err| anyhow::anyhow!("{err}"))?;
        policy.validate()?;
        Ok(policy)
    }

    fn validate(&self) -> Result<()> {
        let key = &self.key;
        check_key_text("key.name", &key.name)?;
        let is_version = key.version.len() > 1
            && key.version.starts_with('v')
            && key.version[1..].bytes().all(|b| b.is_ascii_digit());
        if !is_version {
            bail!(
                "key.version = {:?} must be `v` followed by digits, such as \"v3\"; bump it when the archive build commands change",
                key.version
            );
        }
        for label in &key.labels {
            check_key_text("key.labels", label)?;
        }
        for var in &key.toolkit_env {
            if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                bail!("key.toolkit-env entry {var:?} is not an environment variable name");
            }
        }
        for glob in key
            .include
            .iter()
            .chain(key.dynamic_include.iter().flat_map(|d| &d.files))
        {
            check_relative_glob(glob)?;
        }
        for dynamic in &key.dynamic_include {
            if dynamic.reason.trim().is_empty() {
                bail!(
                    "key.dynamic-include for {} needs a non-empty reason",
                    dynamic.site
                );
            }
            // An empty list would silently cover the site with no file at
            // all: the include's reads would never reach the key.
            match (dynamic.files.is_empty(), dynamic.allow_empty) {
                (true, false) => bail!(
                    "key.dynamic-include for {} has `files = []`, so nothing the include reads would enter the key; list the globs it may read, or, if it reads no repository file, set `allow-empty = true` and say why in `reason`",
                    dynamic.site
                ),
                (false, true) => bail!(
                    "key.dynamic-include for {} sets `allow-empty = true` but lists files; drop `allow-empty`",
                    dynamic.site
                ),
                _ => {}
            }
        }
        let mut files = std::collections::BTreeSet::new();
        for archive in &self.archive {
            let name = &archive.file;
            if name.is_empty()
                || name.contains(['/', '\\'])
                || name == "."
                || name == ".."
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            {
                bail!(
                    "archive file {name:?} must be a plain file name (letters, digits, `.`, `_`, `-`)"
                );
            }
            if !files.insert(name.clone()) {
                bail!("archive file {name:?} is listed twice");
            }
            match (&archive.nextest, &archive.build) {
                (Some(_), None) if archive.binaries.is_empty() => {}
                (Some(_), None) => {
                    bail!("archive {name:?}: `binaries` goes with `build`, not `nextest`")
                }
                (None, Some(_)) if !archive.binaries.is_empty() => {}
                (None, Some(_)) => bail!("archive {name:?}: `build` needs `binaries` to pack"),
                _ => bail!("archive {name:?} needs exactly one of `nextest` or `build`"),
            }
        }
        for allow in &self.allow {
            if allow.reason.trim().is_empty() {
                bail!(
                    "[[allow]] for rule {} in {} needs a non-empty reason",
                    allow.rule,
                    allow.workflow
                );
            }
        }
        for event in &self.artifacts.trusted_events {
            if UNTRUSTED_EVENTS.contains(&event.as_str()) {
                bail!(
                    "artifacts.trusted-events lists {event:?}, whose workflow definition a pull request controls; remove it"
                );
            }
        }
        Ok(())
    }

    /// Says where the policy came from, for logs.
    pub fn describe_source(&self) -> String {
        match &self.source {
            Some(path) => path.display().to_string(),
            None => format!("defaults (no {DEFAULT_POLICY_PATH})"),
        }
    }
}

/// A key component must survive being a cache key and an artifact name.
pub fn is_key_text(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn check_key_text(what: &str, text: &str) -> Result<()> {
    if !is_key_text(text) {
        bail!("{what} = {text:?} may hold only letters, digits, `.`, `_` and `-`");
    }
    Ok(())
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
                "plain file name",
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
}
