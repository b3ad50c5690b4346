//! The rule registry: every rule of `check-contracts` is one [`RuleId`],
//! with its metadata (id string, summary, hint, family, whether it needs a
//! publisher, whether only the policy may suppress it) and its check
//! function in [`RULES`]; [`Checker::run_all`] runs them in one loop. The
//! checks live in one module per family (`caches`, `permissions`,
//! `secrets`, `publisher`, `keys`, `artifacts`, `runners`, `remote_code`,
//! `privileged`).
//!
//! Owns the registry, the finding type and the checker's shared helpers.
//! It must not hold a rule's logic (that is its family module's), infer
//! roles (`roles/`) or know how caches are written (`caches.rs`).
//!
//! Every rule id has a `### <id>` heading in `docs/contracts.md`; the ids
//! are an interface (allow entries and code-scanning alerts name them), so
//! never rename one.

mod artifacts;
mod caches;
mod keys;
mod permissions;
mod privileged;
mod publisher;
mod remote_code;
mod runners;
mod secrets;

use std::path::Path;

use anyhow::Result;

use super::expr;
use super::roles::{JobInfo, JobRef, Level, Model};
use super::workflow::{Job, Pos};
use crate::policy::Policy;

pub use caches::LOCAL_ACTION_BUDGET;

/// The stable id of every rule. The order is the order of [`RULES`] (a
/// test checks it) and of the SARIF rule list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleId {
    UntrustedCacheSave,
    UntrustedWritePermissions,
    UntrustedSecrets,
    PublisherTrigger,
    PublisherGuard,
    PublisherUntrustedRef,
    KeyMismatch,
    KeyCoverage,
    KeyXtaskCheckout,
    RestoreKeys,
    KeyShape,
    ArtifactKey,
    ArtifactBinding,
    ArchiveNames,
    LifecycleJob,
    PersistentRunner,
    ParseError,
    UnpinnedAction,
    UntrustedPersistCredentials,
    TrustedStepEnvironment,
    PrivilegedInjection,
    RemoteScript,
    GateBypass,
}

/// The module a rule's check lives in, and what the rules of it protect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Who may write the caches (`rules/caches.rs`).
    Caches,
    /// What the token of an untrusted-code or lifecycle job can do (`rules/permissions.rs`).
    Permissions,
    /// Which secrets reach untrusted code (`rules/secrets.rs`).
    Secrets,
    /// The publisher's triggers, guards and checkouts (`rules/publisher.rs`).
    Publisher,
    /// The archive key: computed alike, completely, by trusted tooling, restored exactly (`rules/keys.rs`).
    Keys,
    /// The GPU archive artifacts: named by the key, bound to a head commit (`rules/artifacts.rs`).
    Artifacts,
    /// Self-hosted runners that keep state (`rules/runners.rs`).
    Runners,
    /// Code fetched from elsewhere: unpinned actions, downloaded scripts (`rules/remote_code.rs`).
    RemoteCode,
    /// Privileged jobs and the trusted steps they run (`rules/privileged.rs`).
    Privileged,
    /// The workflow files themselves (reported while loading them, `contracts/mod.rs`).
    Workflow,
}

impl Family {
    /// The family's name: its module under `contracts/rules/`, and a SARIF tag.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Caches => "caches",
            Family::Permissions => "permissions",
            Family::Secrets => "secrets",
            Family::Publisher => "publisher",
            Family::Keys => "keys",
            Family::Artifacts => "artifacts",
            Family::Runners => "runners",
            Family::RemoteCode => "remote_code",
            Family::Privileged => "privileged",
            Family::Workflow => "workflow",
        }
    }
}

/// A rule's check: adds the rule's findings to the checker. A check may
/// share an analysis with sibling rules (the key pairing serves three);
/// [`Checker::push`] keeps only the findings of the rule being run.
pub type Check = fn(&mut Checker) -> Result<()>;

/// A rule: its id, what it protects, the usual fix, and its check.
pub struct Rule {
    pub rule: RuleId,
    /// The id as allow entries, reports and docs anchors spell it.
    pub id: &'static str,
    pub summary: &'static str,
    pub hint: &'static str,
    pub family: Family,
    /// The rule compares against the publisher (its workflows, its key,
    /// its artifacts): without one, configured or inferred, it is skipped
    /// and the skip note lists it.
    pub needs_publisher: bool,
    /// Only a policy `[[allow]]` entry can suppress it: an inline comment in
    /// the workflow is written by whoever edits the workflow, while a policy
    /// change is reviewed on its own.
    pub policy_only: bool,
    /// `None`: reported outside the loop (`parse-error`, while loading).
    pub check: Option<Check>,
}

impl RuleId {
    /// The registry entry of this rule.
    pub fn meta(self) -> &'static Rule {
        &RULES[self as usize]
    }

    pub fn as_str(self) -> &'static str {
        self.meta().id
    }

    /// The rule's section of the docs.
    pub fn docs_anchor(self) -> String {
        format!("docs/contracts.md#{}", self.as_str())
    }
}

pub const RULES: &[Rule] = &[
    Rule {
        rule: RuleId::UntrustedCacheSave,
        id: "untrusted-cache-save",
        summary: "A job that runs untrusted code saves to the shared cache.",
        hint: "use actions/cache/restore, `save-if: false` on rust-cache, turn the action's cache saving off, or `cache-mode: read`; only the publisher saves",
        family: Family::Caches,
        needs_publisher: false,
        policy_only: true,
        check: Some(caches::check_untrusted_cache_save),
    },
    Rule {
        rule: RuleId::UntrustedWritePermissions,
        id: "untrusted-write-permissions",
        summary: "A job that runs untrusted code holds a token that can write, or read scopes the policy does not grant.",
        hint: "give the job `permissions: { contents: read }` and list reviewed extra read scopes under [contracts] job in .github/ci-trust.toml",
        family: Family::Permissions,
        needs_publisher: false,
        policy_only: false,
        check: Some(permissions::check_untrusted_write_permissions),
    },
    Rule {
        rule: RuleId::UntrustedSecrets,
        id: "untrusted-secrets",
        summary: "A job that runs untrusted code, or a pod job, receives a secret the policy does not list for it.",
        hint: "move the secret to a trusted job, or list it under [contracts] job secrets if the job must have it",
        family: Family::Secrets,
        needs_publisher: false,
        policy_only: true,
        check: Some(secrets::check_untrusted_secrets),
    },
    Rule {
        rule: RuleId::PublisherTrigger,
        id: "publisher-trigger",
        summary: "The publisher can be started by something other than a push to the default branch, a schedule or a dispatch.",
        hint: "limit `on:` to `push: branches: [<default>]`, `schedule` and `workflow_dispatch`",
        family: Family::Publisher,
        needs_publisher: true,
        policy_only: false,
        check: Some(publisher::check_publisher_workflows),
    },
    Rule {
        rule: RuleId::PublisherGuard,
        id: "publisher-guard",
        summary: "A publisher job does not refuse to run off the default branch.",
        hint: "add `if: github.ref == 'refs/heads/<default>'` to the job (other conditions may be joined with &&)",
        family: Family::Publisher,
        needs_publisher: true,
        policy_only: false,
        check: Some(publisher::check_publisher_workflows),
    },
    Rule {
        rule: RuleId::PublisherUntrustedRef,
        id: "publisher-untrusted-ref",
        summary: "The publisher checks out or fetches something other than the commit it runs for.",
        hint: "remove the `ref:`/`repository:` override or the git command; the publisher builds default-branch content only",
        family: Family::Publisher,
        needs_publisher: true,
        policy_only: false,
        check: Some(publisher::check_publisher_untrusted_ref),
    },
    Rule {
        rule: RuleId::KeyMismatch,
        id: "key-mismatch",
        summary: "A reader computes the archive key differently from the publisher.",
        hint: "make the key step's `run` (and working directory) identical in the publisher and every reader",
        family: Family::Keys,
        needs_publisher: true,
        policy_only: false,
        check: Some(keys::check_key_pairing),
    },
    Rule {
        rule: RuleId::KeyCoverage,
        id: "key-coverage",
        summary: "A `hashFiles` key misses an input `ci-key` would include, or hashes the workflow files.",
        hint: "use `cargo xtask ci-key`, or add patterns for the missing inputs and drop patterns under .github/workflows",
        family: Family::Keys,
        needs_publisher: true,
        policy_only: false,
        check: Some(keys::check_key_pairing),
    },
    Rule {
        rule: RuleId::KeyXtaskCheckout,
        id: "key-xtask-checkout",
        summary: "`cargo xtask ci-key` runs from a checkout that is not trusted.",
        hint: "run the xtask from a checkout of `${{ github.workflow_sha }}` (for example `path: trusted`) and point `--root` at the code to key",
        family: Family::Keys,
        needs_publisher: true,
        policy_only: false,
        check: Some(keys::check_key_pairing),
    },
    Rule {
        rule: RuleId::RestoreKeys,
        id: "restore-keys",
        summary: "A restore of a key the publisher saves falls back to other keys with `restore-keys`.",
        hint: "remove `restore-keys`; a miss must rebuild, not reuse a near match",
        family: Family::Keys,
        needs_publisher: true,
        policy_only: false,
        check: Some(keys::check_cache_keys),
    },
    Rule {
        rule: RuleId::KeyShape,
        id: "key-shape",
        summary: "A reader restores a cache key whose shape the publisher never saves.",
        hint: "use the publisher's key (same literal parts, same `vN`), or make the publisher save this one",
        family: Family::Keys,
        needs_publisher: true,
        policy_only: false,
        check: Some(keys::check_cache_keys),
    },
    Rule {
        rule: RuleId::ArtifactKey,
        id: "artifact-key",
        summary: "The GPU archive artifact is not named by the key step, or the key is computed after code was built.",
        hint: "compute the key first and upload with `name: ${{ steps.<key.step-id>.outputs.artifact_name }}`",
        family: Family::Artifacts,
        needs_publisher: true,
        policy_only: false,
        check: Some(artifacts::check_artifact_key),
    },
    Rule {
        rule: RuleId::ArtifactBinding,
        id: "artifact-binding",
        summary: "A job that builds pull-request code reuses artifacts without binding them to its head commit.",
        hint: "pass `--head-sha` and the trusted checkout's `--trust-policy` to `cargo xtask gpu-archive --reuse`, and name the workflow's runs `artifacts.consumer-run-name` (`run-name:` with the head commit for `{head_sha}`)",
        family: Family::Artifacts,
        needs_publisher: true,
        policy_only: false,
        check: Some(artifacts::check_artifact_binding),
    },
    Rule {
        rule: RuleId::ArchiveNames,
        id: "archive-names",
        summary: "The archives the pod runs (`archives:` input) differ from the nextest [[archive]] files the policy builds.",
        hint: "make the `archives:` input list exactly the `file` of each nextest [[archive]] in .github/ci-trust.toml",
        family: Family::Artifacts,
        needs_publisher: true,
        policy_only: false,
        check: Some(artifacts::check_archive_names),
    },
    Rule {
        rule: RuleId::LifecycleJob,
        id: "lifecycle-job",
        summary: "A job holding `actions: write` checks out untrusted code, keeps credentials, builds, or saves caches.",
        hint: "check out `${{ github.workflow_sha }}` with `persist-credentials: false`, run only trusted scripts, save nothing",
        family: Family::Permissions,
        needs_publisher: false,
        policy_only: false,
        check: Some(permissions::check_lifecycle_job),
    },
    Rule {
        rule: RuleId::PersistentRunner,
        id: "persistent-runner",
        summary: "Pull-request code runs on a self-hosted runner that is not known to be ephemeral.",
        hint: "run pull-request code on GitHub-hosted or ephemeral runners (a fresh machine per job) and list their labels under [contracts] ephemeral-labels in .github/ci-trust.toml",
        family: Family::Runners,
        needs_publisher: false,
        policy_only: false,
        check: Some(runners::check_persistent_runner),
    },
    Rule {
        rule: RuleId::ParseError,
        id: "parse-error",
        summary: "A workflow file GitHub would not load; none of its jobs was checked.",
        hint: "fix the file as the message says (GitHub rejects it too), then rerun",
        family: Family::Workflow,
        needs_publisher: false,
        policy_only: false,
        check: None,
    },
    Rule {
        rule: RuleId::UnpinnedAction,
        id: "unpinned-action",
        summary: "A third-party action in a privileged job is not pinned to a full commit SHA.",
        hint: "pin to the 40-hex commit SHA (keep the tag in a comment)",
        family: Family::RemoteCode,
        needs_publisher: false,
        policy_only: false,
        check: Some(remote_code::check_unpinned_action),
    },
    Rule {
        rule: RuleId::UntrustedPersistCredentials,
        id: "untrusted-persist-credentials",
        summary: "A checkout in a job that runs untrusted code, or in a pod job, keeps the token in .git/config.",
        hint: "add `persist-credentials: false` to every actions/checkout step of the job",
        family: Family::Permissions,
        needs_publisher: false,
        policy_only: false,
        check: Some(permissions::check_untrusted_persist_credentials),
    },
    Rule {
        rule: RuleId::TrustedStepEnvironment,
        id: "trusted-step-environment",
        summary: "A trusted `cargo xtask` step (the key step, a trusted build) can see pull-request bytes: tools, configuration or environment from the PR checkout.",
        hint: "check the pull request out beside the trusted tree (`path: pr`), and never point CARGO_HOME, RUSTUP_HOME, RUSTC_WRAPPER, PATH or GITHUB_ENV/GITHUB_PATH at it before the trusted steps",
        family: Family::Privileged,
        needs_publisher: false,
        policy_only: false,
        check: Some(privileged::check_trusted_step_environment),
    },
    Rule {
        rule: RuleId::PrivilegedInjection,
        id: "privileged-injection",
        summary: "An attacker-controlled expression (PR title or body, branch name, commit message, comment) expands into a script of a publisher, secret-holding or write-token job.",
        hint: "pass the value through `env:` and quote it in the script (`\"$TITLE\"`)",
        family: Family::Privileged,
        needs_publisher: false,
        policy_only: false,
        check: Some(privileged::check_privileged_injection),
    },
    Rule {
        rule: RuleId::RemoteScript,
        id: "remote-script",
        summary: "A publisher or secret-holding job runs a script it downloads at run time.",
        hint: "vendor the script in the repository, or check a pinned checksum (`sha256sum -c`) before running it",
        family: Family::RemoteCode,
        needs_publisher: false,
        policy_only: false,
        check: Some(remote_code::check_remote_script),
    },
    Rule {
        rule: RuleId::GateBypass,
        id: "gate-bypass",
        summary: "A job that untrusted code waits for can no longer stop it (`continue-on-error`, or an `if:` that ignores its result).",
        hint: "remove `continue-on-error` from the gate, and require `needs.<gate>.result == 'success'` next to `always()`/`!cancelled()`",
        family: Family::Privileged,
        needs_publisher: false,
        policy_only: false,
        check: Some(privileged::check_gate_bypass),
    },
];

/// The registry entry of a rule id (`None` for an unknown id).
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// The ids of the rules that need a publisher, for the skip note.
pub fn publisher_rule_ids() -> Vec<&'static str> {
    RULES
        .iter()
        .filter(|r| r.needs_publisher)
        .map(|r| r.id)
        .collect()
}

/// How a finding counts. An error is a concrete path from attacker bytes to
/// a credential or a shared cache (it fails the check); a warning is one
/// that depends on something the repository does not show, and says what
/// (`--persona auditor` shows it); a note informs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// How sure the finding is of its path: `high` when every step of it is
/// in the workflows, `medium` when one step is a platform default or a
/// value someone chooses at run time, `low` when one is unseen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    High,
    Medium,
    Low,
}

impl Confidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
    pub confidence: Confidence,
    /// For a warning: what the path depends on, as a question.
    pub question: Option<String>,
    /// The repository-relative file the position is in.
    pub file: String,
    pub pos: Pos,
    /// The workflow file name and job the finding is about (for allow entries).
    pub workflow: String,
    pub job: Option<String>,
    pub message: String,
    /// Why the finding is accepted, and where that was said.
    pub suppressed: Option<String>,
}

pub struct Checker<'a> {
    pub model: &'a Model,
    pub policy: &'a Policy,
    pub root: &'a Path,
    pub findings: Vec<Finding>,
    /// The ci-key inputs of the workspace at the root, computed on first need.
    inputs: Option<Option<Vec<String>>>,
    /// The rule whose check is running: the only one `push` records.
    running: Option<RuleId>,
}

impl<'a> Checker<'a> {
    pub fn new(model: &'a Model, policy: &'a Policy, root: &'a Path) -> Checker<'a> {
        Checker {
            model,
            policy,
            root,
            findings: Vec::new(),
            inputs: None,
            running: None,
        }
    }

    /// Runs every rule of the registry, in its order. Without a publisher
    /// (none configured, none inferred) the rules marked `needs_publisher`
    /// have nothing to compare with and are skipped (the note says so).
    pub fn run_all(&mut self) -> Result<()> {
        let publisher = !self.policy.publisher.workflows.is_empty();
        for rule in RULES {
            let Some(check) = rule.check else {
                continue;
            };
            if rule.needs_publisher && !publisher {
                continue;
            }
            self.running = Some(rule.rule);
            check(self)?;
        }
        self.running = None;
        Ok(())
    }

    /// Whether findings of `rule` are recorded now: while its own check
    /// runs (or outside the loop).
    fn records(&self, rule: RuleId) -> bool {
        self.running.is_none_or(|running| running == rule)
    }

    /// Runs `each` on every job, with what the role model inferred of it.
    fn each_job(
        &mut self,
        mut each: impl FnMut(&mut Self, &'a JobInfo, &'a Job) -> Result<()>,
    ) -> Result<()> {
        let model = self.model;
        for info in &model.jobs {
            each(self, info, model.job(info.at))?;
        }
        Ok(())
    }

    /// Records a finding of `rule` about job `at`, at `pos` in workflow
    /// `file` (which may be a caller's). A finding of another rule than the
    /// running one comes from an analysis shared with a sibling rule, which
    /// reports it in its own turn.
    fn push(&mut self, rule: RuleId, at: JobRef, file: usize, pos: Pos, message: String) {
        let (severity, question) = self.default_severity(rule, at);
        self.push_as(rule, at, file, pos, message, severity, question);
    }

    /// As [`Checker::push`], with the severity and question given.
    #[allow(clippy::too_many_arguments)]
    fn push_as(
        &mut self,
        rule: RuleId,
        at: JobRef,
        file: usize,
        pos: Pos,
        message: String,
        severity: Severity,
        question: Option<String>,
    ) {
        if !self.records(rule) {
            return;
        }
        let wf = &self.model.workflows[at.workflow];
        let confidence = match (severity, &question) {
            (Severity::Error, _) => Confidence::High,
            (_, Some(q)) if q.contains("not show") => Confidence::Low,
            _ => Confidence::Medium,
        };
        self.findings.push(Finding {
            rule: rule.as_str(),
            severity,
            confidence,
            question,
            file: self.model.workflows[file].path.clone(),
            pos,
            workflow: wf.name.clone(),
            job: Some(wf.jobs[at.job].id.value.clone()),
            message,
            suppressed: None,
        });
    }

    /// A rule about a job that runs untrusted code is as certain as the
    /// job's exposure: a warning when only a maintainer's dispatch or an
    /// unseen value brings the code in, with the question that decides it.
    /// `persistent-runner` depends on what the workflow cannot show (is
    /// the runner fresh per job?).
    fn default_severity(&self, rule: RuleId, at: JobRef) -> (Severity, Option<String>) {
        match rule {
            RuleId::PersistentRunner => (
                Severity::Warning,
                Some("is this runner ephemeral (a fresh machine per job)? If it is, list its labels under [contracts] ephemeral-labels".to_owned()),
            ),
            // A trusted step beside pull-request bytes is as exposed as the
            // job is to them: only the recovery path's, a warning.
            RuleId::UntrustedCacheSave
            | RuleId::UntrustedWritePermissions
            | RuleId::UntrustedSecrets
            | RuleId::UntrustedPersistCredentials
            | RuleId::TrustedStepEnvironment
            | RuleId::GateBypass => self.job_severity(at),
            // A third party's code: a path only if its owner, or whoever
            // controls its URL, turns against the repository. The design's
            // own publisher, named in a policy file, is held to it.
            RuleId::UnpinnedAction | RuleId::RemoteScript => {
                let info = self.model.info(at);
                if info.publisher && self.policy.source.is_some() {
                    (Severity::Error, None)
                } else {
                    (
                        Severity::Warning,
                        Some("do you trust whoever can move that tag or change that URL with this job's secrets and token?".to_owned()),
                    )
                }
            }
            // The lifecycle contract (trusted checkout, no credentials kept,
            // no build, no cache) is the design's hardening of a job that
            // runs only trusted code; a policy file opts into it.
            // Without a policy file the publisher was inferred: holding a
            // workflow to the one-writer design's triggers, guards, refs and
            // key pairing is an opinion the repository has not stated. A
            // pull request's code where it saves is `untrusted-cache-save`'s
            // error either way.
            rule if self.policy.source.is_none()
                && RULES.iter().any(|r| r.rule == rule && r.needs_publisher) =>
            {
                (
                    Severity::Warning,
                    Some("the publisher was inferred (no .github/ci-trust.toml): is this workflow meant to be the one writer of the shared caches? Naming it under [publisher] workflows makes this an error".to_owned()),
                )
            }
            RuleId::LifecycleJob if self.policy.source.is_none() => (
                Severity::Warning,
                Some("the job holds `actions: write` but runs only the default branch's code; is the hardening wanted here? A policy file makes it an error".to_owned()),
            ),
            _ => (Severity::Error, None),
        }
    }

    /// The severity a job's untrusted code gives its findings.
    pub(crate) fn job_severity(&self, at: JobRef) -> (Severity, Option<String>) {
        let info = self.model.info(at);
        if !info.is_untrusted() || info.level() == Level::Error {
            return (Severity::Error, None);
        }
        let who: Vec<String> = info
            .exposures
            .iter()
            .flat_map(|e| e.who.iter().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        (
            Severity::Warning,
            Some(format!("the code comes in only through {}", who.join("; "))),
        )
    }

    fn grant(&self, at: JobRef) -> Option<&crate::policy::JobGrant> {
        let wf = self.model.workflow(at);
        let job = self.model.job(at);
        self.policy
            .contracts
            .job
            .iter()
            .find(|g| g.workflow == wf.name && g.job == job.id.value)
    }

    fn label(&self, at: JobRef) -> String {
        let info = self.model.info(at);
        format!(
            "{} `{}` of {}",
            info.role(),
            self.model.job(at).id.value,
            self.model.workflow(at).name
        )
    }

    /// The secrets a job's environment and inputs name: the credentials an
    /// external cache write would use, for messages.
    fn credentials(&self, at: JobRef) -> String {
        let wf = self.model.workflow(at);
        let job = self.model.job(at);
        let mut names: Vec<String> = Vec::new();
        let values = wf
            .env
            .iter()
            .chain(job.env.iter())
            .chain(
                job.steps
                    .iter()
                    .flat_map(|s| s.env.iter().chain(s.with.iter())),
            )
            .map(|(_, v)| v);
        for value in values {
            for r in expr::secret_refs(&value.value) {
                let name = r.name.unwrap_or_else(|| "(every secret)".to_owned());
                if name != "GITHUB_TOKEN" && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        if names.is_empty() {
            "the runner's ambient credentials".to_owned()
        } else {
            names.truncate(3);
            names
                .iter()
                .map(|n| format!("`secrets.{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_in_the_order_of_the_ids() {
        for (index, rule) in RULES.iter().enumerate() {
            assert_eq!(rule.rule as usize, index, "{} is out of place", rule.id);
            assert_eq!(rule.rule.meta().id, rule.id);
        }
    }

    /// Every rule id has its `### <id>` heading in docs/contracts.md, and
    /// the docs' "## Rules" section lists exactly the registry's rules, in
    /// its order.
    #[test]
    fn every_rule_has_its_docs_heading_and_the_lists_agree() {
        let docs = include_str!("../../../../../docs/contracts.md");
        for rule in RULES {
            assert!(
                docs.lines().any(|l| l.trim() == format!("### {}", rule.id)),
                "docs/contracts.md has no `### {}` heading",
                rule.id
            );
        }
        let start = docs.find("\n## Rules\n").expect("a `## Rules` section");
        let section = &docs[start + 1..];
        let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
        let documented: Vec<&str> = section[..end]
            .lines()
            .filter_map(|l| l.strip_prefix("### "))
            .map(str::trim)
            .collect();
        let mut documented = documented;
        documented.sort_unstable();
        let mut registered: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        registered.sort_unstable();
        assert_eq!(
            documented, registered,
            "docs/contracts.md `## Rules` vs RULES"
        );
    }

    #[test]
    fn every_rule_but_parse_error_has_a_check() {
        for rule in RULES {
            assert_eq!(
                rule.check.is_none(),
                rule.rule == RuleId::ParseError,
                "{}",
                rule.id
            );
        }
    }
}
