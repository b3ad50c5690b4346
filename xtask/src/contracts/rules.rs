//! The contracts: one function per rule, each turning the role model into
//! findings with a stable rule id and a message that says what to do.
//!
//! Every rule id has an anchor in `docs/contracts.md`; the ids are an
//! interface (allow entries and code-scanning alerts name them), so never
//! rename one.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};
use globset::GlobMatcher;

use super::caches::{self, cache_env_saves, cache_save, is_false};
use super::expr;
use super::roles::{JobInfo, JobRef, Model};
use super::workflow::{Job, Permissions, Pos, Step, Workflow};
use crate::policy::Policy;

/// A rule: its stable id, what it protects, and the usual fix.
pub struct Rule {
    pub id: &'static str,
    pub summary: &'static str,
    pub hint: &'static str,
    /// The rule compares against the publisher (its workflows, its key,
    /// its artifacts): without one, configured or inferred, it is skipped
    /// and the skip note lists it.
    pub needs_publisher: bool,
}

pub const RULES: &[Rule] = &[
    Rule {
        id: "untrusted-cache-save",
        summary: "A job that runs untrusted code saves to the shared cache.",
        hint: "use actions/cache/restore, `save-if: false` on rust-cache, turn the action's cache saving off, or `cache-mode: read`; only the publisher saves",
        needs_publisher: false,
    },
    Rule {
        id: "untrusted-write-permissions",
        summary: "A job that runs untrusted code holds a token that can write, or read scopes the policy does not grant.",
        hint: "give the job `permissions: { contents: read }` and list reviewed extra read scopes under [contracts] job in .github/ci-trust.toml",
        needs_publisher: false,
    },
    Rule {
        id: "untrusted-secrets",
        summary: "A job that runs untrusted code, or a pod job, receives a secret the policy does not list for it.",
        hint: "move the secret to a trusted job, or list it under [contracts] job secrets if the job must have it",
        needs_publisher: false,
    },
    Rule {
        id: "publisher-trigger",
        summary: "The publisher can be started by something other than a push to the default branch, a schedule or a dispatch.",
        hint: "limit `on:` to `push: branches: [<default>]`, `schedule` and `workflow_dispatch`",
        needs_publisher: true,
    },
    Rule {
        id: "publisher-guard",
        summary: "A publisher job does not refuse to run off the default branch.",
        hint: "add `if: github.ref == 'refs/heads/<default>'` to the job (other conditions may be joined with &&)",
        needs_publisher: true,
    },
    Rule {
        id: "publisher-untrusted-ref",
        summary: "The publisher checks out or fetches something other than the commit it runs for.",
        hint: "remove the `ref:`/`repository:` override or the git command; the publisher builds default-branch content only",
        needs_publisher: true,
    },
    Rule {
        id: "key-mismatch",
        summary: "A reader computes the archive key differently from the publisher.",
        hint: "make the key step's `run` (and working directory) identical in the publisher and every reader",
        needs_publisher: true,
    },
    Rule {
        id: "key-coverage",
        summary: "A `hashFiles` key misses an input `ci-key` would include, or hashes the workflow files.",
        hint: "use `cargo xtask ci-key`, or add patterns for the missing inputs and drop patterns under .github/workflows",
        needs_publisher: true,
    },
    Rule {
        id: "key-xtask-checkout",
        summary: "`cargo xtask ci-key` runs from a checkout that is not trusted.",
        hint: "run the xtask from a checkout of `${{ github.workflow_sha }}` (for example `path: trusted`) and point `--root` at the code to key",
        needs_publisher: true,
    },
    Rule {
        id: "restore-keys",
        summary: "A restore of a key the publisher saves falls back to other keys with `restore-keys`.",
        hint: "remove `restore-keys`; a miss must rebuild, not reuse a near match",
        needs_publisher: true,
    },
    Rule {
        id: "key-shape",
        summary: "A reader restores a cache key whose shape the publisher never saves.",
        hint: "use the publisher's key (same literal parts, same `vN`), or make the publisher save this one",
        needs_publisher: true,
    },
    Rule {
        id: "artifact-key",
        summary: "The GPU archive artifact is not named by the key step, or the key is computed after code was built.",
        hint: "compute the key first and upload with `name: ${{ steps.<key.step-id>.outputs.artifact_name }}`",
        needs_publisher: true,
    },
    Rule {
        id: "artifact-binding",
        summary: "A job that builds pull-request code reuses artifacts without binding them to its head commit.",
        hint: "pass `--head-sha` and the trusted checkout's `--trust-policy` to `cargo xtask gpu-archive --reuse`, and name the workflow's runs `artifacts.consumer-run-name` (`run-name:` with the head commit for `{head_sha}`)",
        needs_publisher: true,
    },
    Rule {
        id: super::archive_names::RULE,
        summary: "The archives the pod runs (`archives:` input) differ from the nextest [[archive]] files the policy builds.",
        hint: "make the `archives:` input list exactly the `file` of each nextest [[archive]] in .github/ci-trust.toml",
        needs_publisher: true,
    },
    Rule {
        id: "lifecycle-job",
        summary: "A job holding `actions: write` checks out untrusted code, keeps credentials, builds, or saves caches.",
        hint: "check out `${{ github.workflow_sha }}` with `persist-credentials: false`, run only trusted scripts, save nothing",
        needs_publisher: false,
    },
    Rule {
        id: "persistent-runner",
        summary: "Pull-request code runs on a self-hosted runner that is not known to be ephemeral.",
        hint: "run pull-request code on GitHub-hosted or ephemeral runners (a fresh machine per job) and list their labels under [contracts] ephemeral-labels in .github/ci-trust.toml",
        needs_publisher: false,
    },
    Rule {
        id: "parse-error",
        summary: "A workflow file GitHub would not load; none of its jobs was checked.",
        hint: "fix the file as the message says (GitHub rejects it too), then rerun",
        needs_publisher: false,
    },
    Rule {
        id: "unpinned-action",
        summary: "A third-party action in a privileged job is not pinned to a full commit SHA.",
        hint: "pin to the 40-hex commit SHA (keep the tag in a comment)",
        needs_publisher: false,
    },
    // The rules below are checked in rules_privileged.rs.
    Rule {
        id: "untrusted-persist-credentials",
        summary: "A checkout in a job that runs untrusted code, or in a pod job, keeps the token in .git/config.",
        hint: "add `persist-credentials: false` to every actions/checkout step of the job",
        needs_publisher: false,
    },
    Rule {
        id: "trusted-step-environment",
        summary: "A trusted `cargo xtask` step (the key step, a trusted build) can see pull-request bytes: tools, configuration or environment from the PR checkout.",
        hint: "check the pull request out beside the trusted tree (`path: pr`), and never point CARGO_HOME, RUSTUP_HOME, RUSTC_WRAPPER, PATH or GITHUB_ENV/GITHUB_PATH at it before the trusted steps",
        needs_publisher: false,
    },
    Rule {
        id: "privileged-injection",
        summary: "An attacker-controlled expression (PR title or body, branch name, commit message, comment) expands into a script of a publisher, secret-holding or write-token job.",
        hint: "pass the value through `env:` and quote it in the script (`\"$TITLE\"`)",
        needs_publisher: false,
    },
    Rule {
        id: "remote-script",
        summary: "A publisher or secret-holding job runs a script it downloads at run time.",
        hint: "vendor the script in the repository, or check a pinned checksum (`sha256sum -c`) before running it",
        needs_publisher: false,
    },
    Rule {
        id: "gate-bypass",
        summary: "A job that untrusted code waits for can no longer stop it (`continue-on-error`, or an `if:` that ignores its result).",
        hint: "remove `continue-on-error` from the gate, and require `needs.<gate>.result == 'success'` next to `always()`/`!cancelled()`",
        needs_publisher: false,
    },
];

/// A `run-name:` as the artifact finder sees it: each `${{ … }}` that
/// yields the head commit becomes `{head_sha}`; any other stays as written,
/// so that it cannot match the policy's format.
fn render_run_name(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text.trim();
    while let Some(start) = rest.find("${{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let body = &rest[start + 3..start + len];
        if body.contains("head_sha") {
            out.push_str(crate::policy::HEAD_SHA_PLACEHOLDER);
        } else {
            out.push_str(&rest[start..start + len + 2]);
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// Rules only a policy `[[allow]]` entry can suppress: an inline comment in
/// the workflow is written by whoever edits the workflow, while a policy
/// change is reviewed on its own.
pub const POLICY_ONLY_RULES: &[&str] = &["untrusted-cache-save", "untrusted-secrets"];

/// Write scopes that only post, label and edit pull requests, issues and
/// discussions.
const CONVERSATION_SCOPES: &[&str] = &["pull-requests", "issues", "discussions"];

/// How a workflow reads a pull request's labels or reviews: in an `if:`,
/// a `gh` query or a script.
const LABEL_GATE_FORMS: &[&str] = &[
    "pull_request.labels",
    "issue.labels",
    "labels.*.name",
    "event.label.",
    "--json labels",
    "reviewDecision",
    "review.state",
];

/// The ids of the rules that need a publisher, for the skip note.
pub fn publisher_rule_ids() -> Vec<&'static str> {
    RULES
        .iter()
        .filter(|r| r.needs_publisher)
        .map(|r| r.id)
        .collect()
}

pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Note,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Note => "note",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Severity,
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
}

impl<'a> Checker<'a> {
    pub fn new(model: &'a Model, policy: &'a Policy, root: &'a Path) -> Checker<'a> {
        Checker {
            model,
            policy,
            root,
            findings: Vec::new(),
            inputs: None,
        }
    }

    pub fn run_all(&mut self) -> Result<()> {
        // Without a publisher (none configured, none inferred) the rules
        // marked `needs_publisher` have nothing to compare with.
        let publisher_rules = !self.policy.publisher.workflows.is_empty();
        for info in &self.model.jobs {
            let job = self.model.job(info.at);
            if info.is_untrusted() {
                self.untrusted_cache_save(info, job)?;
                self.untrusted_write_permissions(info, job);
            } else if info.triggers.contains("pull_request") {
                self.pull_request_external_saves(info, job);
            }
            self.persistent_runner(info, job);
            // A pod on `pull_request` gets secrets only for branches of this
            // repository, whose authors can push anyway; persistent-runner
            // covers what its state exposes.
            if info.is_untrusted() {
                self.untrusted_secrets(info, job);
            }
            self.secrets_inherit(info, job);
            self.secrets_as_inputs(info, job);
            if info.publisher {
                self.publisher_untrusted_ref(info, job);
            }
            if info.lifecycle {
                self.lifecycle_job(info, job)?;
            }
            if info.publisher || info.is_untrusted() || info.lifecycle {
                self.unpinned_action(info, job);
            }
            if publisher_rules {
                self.artifact_key(info, job);
            }
        }
        if publisher_rules {
            self.publisher_workflows();
            self.key_pairing()?;
            self.cache_keys();
        }
        self.run_privileged();
        Ok(())
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

    /// Rule 1, for caches outside GitHub's: a `pull_request` job's Actions
    /// cache writes stay in the pull request's scope, but a write to an S3
    /// bucket, a registry or a binary cache lands where default-branch
    /// builds read, and `cache-mode:` cannot stop it.
    fn pull_request_external_saves(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let who = self.label(at);
        let credentials = self.credentials(at);
        // A fork's pull request gets no secrets (and a read-only
        // GITHUB_TOKEN): a write that needs one fails for it. A write with
        // ambient credentials (a runner's instance role) does not.
        let holds_token = job
            .scalars
            .iter()
            .chain(wf.env.iter().map(|(_, v)| v))
            .any(|s| !expr::secret_refs(&s.value).is_empty() || s.value.contains("github.token"));
        if holds_token {
            return;
        }
        for save in caches::external_saves(wf, job) {
            self.push(
                "untrusted-cache-save",
                at,
                at.workflow,
                save.pos,
                format!(
                    "{who} runs pull-request code (`pull_request`, forks included) and writes to {}, with {credentials} and no secret, so a fork's code can write too; that store is shared with default-branch builds and `cache-mode:` does not govern it",
                    save.backend
                ),
            );
        }
    }

    /// A trusted job that runs on the same self-hosted runners as `info`
    /// (a shared specific label, or runner group) and has something to
    /// lose: secrets, a cache write, or the publisher role. In words.
    fn trusted_sharer(&self, info: &JobInfo, job: &Job) -> Option<String> {
        let keys = runner_keys(job);
        self.model.jobs.iter().find_map(|other| {
            let other_job = self.model.job(other.at);
            let trusted_events: Vec<&String> = other
                .triggers
                .iter()
                .filter(|t| !t.starts_with("pull_request"))
                .collect();
            if other.pod.is_none()
                || other.is_untrusted()
                || trusted_events.is_empty()
                || runner_keys(other_job).is_disjoint(&keys)
            {
                return None;
            }
            let wf = self.model.workflow(other.at);
            let secret = other_job
                .scalars
                .iter()
                .chain(wf.env.iter().map(|(_, v)| v))
                .flat_map(|s| expr::secret_refs(&s.value))
                .find_map(|r| r.name.filter(|n| n != "GITHUB_TOKEN"));
            let saves = other_job.steps.iter().any(|s| cache_save(s).is_some());
            let stake = match (secret, saves || other.publisher) {
                (Some(name), _) => format!("receives `secrets.{name}`"),
                (None, true) => "writes the cache".to_owned(),
                (None, false) => return None,
            };
            let which = if other.at == info.at {
                "this job itself".to_owned()
            } else {
                format!("`{}` of {}", other_job.id.value, wf.name)
            };
            let events: Vec<String> = trusted_events.iter().map(|e| format!("`{e}`")).collect();
            Some(format!(
                "{which}, which {stake} when started by {}",
                events.join(", ")
            ))
        })
    }

    /// Pull-request code on a self-hosted runner that keeps its state
    /// between jobs: what it leaves (the tool cache, `~/`, cargo and ccache
    /// directories, a process left running) reaches the next job there,
    /// trusted ones and their secrets included.
    fn persistent_runner(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let pr_code = info.triggers.contains("pull_request")
            || info
                .untrusted
                .iter()
                .any(|why| info.pod.as_ref().is_none_or(|pod| pod.text != why.text));
        // A runner group (or a runner named by an expression) usually fronts
        // an autoscaled fleet whose ephemerality the workflow cannot show;
        // labels of individually registered runners are what is reported.
        let labelled = job.runs_on_unresolved.is_none();
        let pod = info
            .pod
            .as_ref()
            .filter(|_| pr_code && !info.ephemeral && labelled);
        // The state matters where a trusted job with something to lose
        // (secrets, cache writes, the publisher) runs on the same runners.
        let exposed = pod.and_then(|_| self.trusted_sharer(info, job));
        if let (Some(pod), Some(exposed)) = (pod, exposed) {
            let how = if info.triggers.contains("pull_request") {
                "on `pull_request`".to_owned()
            } else {
                info.untrusted
                    .iter()
                    .find(|why| why.text != pod.text)
                    .map_or_else(String::new, |why| format!("({})", why.text))
            };
            self.push(
                "persistent-runner",
                at,
                at.workflow,
                pod.pos,
                format!(
                    "{} runs pull-request code {how} on a self-hosted runner ({}) that is not known to be ephemeral: the runner state that code leaves (tool cache, `~/`, build caches, a process left running) reaches later jobs on that machine, such as {exposed}",
                    self.label(at),
                    pod.text
                ),
            );
        }
        // A reusable workflow handed a self-hosted runner by a job that
        // pull requests start, with secrets in scope.
        let remote = job
            .uses
            .as_ref()
            .filter(|u| super::workflow::local_uses(&u.value).is_none());
        let pr_started =
            info.triggers.contains("pull_request") || info.triggers.contains("pull_request_target");
        let secrets = job.secrets_inherit.is_some()
            || job
                .scalars
                .iter()
                .any(|s| !expr::secret_refs(&s.value).is_empty());
        if let (Some(uses), true, true) = (remote, pr_started, secrets) {
            let runner = job.with.iter().find(|(name, value)| {
                let name = name.value.to_ascii_lowercase();
                (name.contains("runner") || name.contains("runs-on"))
                    && !value.value.contains("${{")
                    && value
                        .value
                        .split([',', ' ', '[', ']', '"', '\''])
                        .filter(|l| !l.is_empty())
                        .any(|l| !super::roles::is_hosted(l, self.policy))
            });
            if let Some((name, value)) = runner {
                self.push(
                    "persistent-runner",
                    at,
                    at.workflow,
                    value.pos,
                    format!(
                        "job `{}` hands the self-hosted runner `{}` to the reusable workflow `{}` as `{}`, in a run pull requests start with secrets in scope: the pull request's code runs on that machine, whose state outlives the job",
                        job.id.value, value.value, uses.value, name.value
                    ),
                );
            }
        }
    }

    pub(super) fn push(
        &mut self,
        rule: &'static str,
        at: JobRef,
        file: usize,
        pos: Pos,
        message: String,
    ) {
        // The registry decides: a rule that needs a publisher reports
        // nothing without one (its note says it was skipped).
        let needs_publisher = RULES.iter().any(|r| r.id == rule && r.needs_publisher);
        if needs_publisher && self.policy.publisher.workflows.is_empty() {
            return;
        }
        let wf = &self.model.workflows[at.workflow];
        self.findings.push(Finding {
            rule,
            severity: Severity::Error,
            file: self.model.workflows[file].path.clone(),
            pos,
            workflow: wf.name.clone(),
            job: Some(wf.jobs[at.job].id.value.clone()),
            message,
            suppressed: None,
        });
    }

    pub(super) fn grant(&self, at: JobRef) -> Option<&crate::policy::JobGrant> {
        let wf = self.model.workflow(at);
        let job = self.model.job(at);
        self.policy
            .contracts
            .job
            .iter()
            .find(|g| g.workflow == wf.name && g.job == job.id.value)
    }

    pub(super) fn label(&self, at: JobRef) -> String {
        let info = self.model.info(at);
        format!(
            "{} `{}` of {}",
            info.role(),
            self.model.job(at).id.value,
            self.model.workflow(at).name
        )
    }

    /// Rule 1: untrusted-code jobs never save.
    fn untrusted_cache_save(&mut self, info: &JobInfo, job: &Job) -> Result<()> {
        let at = info.at;
        let wf = self.model.workflow(at);
        let why = &info.untrusted[0];
        let who = format!("{} ({}, line {})", self.label(at), why.text, why.pos.line);
        let mut saves = Vec::new();
        for step in &job.steps {
            saves.extend(self.step_saves(step)?);
        }
        saves.extend(cache_env_saves(wf, job));
        let credentials = self.credentials(at);
        for save in caches::external_saves(wf, job) {
            if !saves.iter().any(|(pos, _)| *pos == save.pos) {
                saves.push((
                    save.pos,
                    format!(
                        "it writes to {}, with {credentials}, which `cache-mode:` does not govern",
                        save.backend
                    ),
                ));
            }
        }
        for (pos, why) in saves {
            self.push(
                "untrusted-cache-save",
                at,
                at.workflow,
                pos,
                format!("{who} saves to the cache: {why}"),
            );
        }
        if let Some((pos, why)) = self.cache_write_token(at, &mut BTreeSet::new()) {
            self.push(
                "untrusted-cache-save",
                at,
                at.workflow,
                pos,
                format!(
                    "{who} holds a token that can write the cache ({why}); the code it runs can save without any save step, so set `cache-mode: read` (or `none`)"
                ),
            );
        }
        Ok(())
    }

    /// Why a job's token may write the cache when its `cache-mode` does not
    /// say `read` or `none`: its own, else its workflow's, else (for a
    /// reusable workflow) each caller's ceiling. The job's own explicit
    /// `write` is reported by [`cache_env_saves`]; a caller's is reported here.
    fn cache_write_token(&self, at: JobRef, seen: &mut BTreeSet<JobRef>) -> Option<(Pos, String)> {
        let top = seen.is_empty();
        seen.insert(at);
        let wf = self.model.workflow(at);
        let job = self.model.job(at);
        if let Some(mode) = job.cache_mode.as_ref().or(wf.cache_mode.as_ref()) {
            return match mode.value.trim() {
                "read" | "none" => None,
                "write" | "write-only" if top => None,
                other @ ("write" | "write-only") => {
                    Some((mode.pos, format!("`cache-mode: {other}` lets it write")))
                }
                other => Some((
                    mode.pos,
                    format!("`cache-mode: {other}` is not known to be read-only"),
                )),
            };
        }
        let callers: Vec<JobRef> = self
            .model
            .jobs
            .iter()
            .filter(|info| info.callee == Some(at.workflow))
            .map(|info| info.at)
            .collect();
        if callers.is_empty() {
            return Some((
                job.id.pos,
                "no `cache-mode:` on the job or its workflow, and the default lets it write"
                    .to_owned(),
            ));
        }
        // Each caller is asked once: one already asked said read-only (else
        // the search would have stopped), so cycles and shared callers end.
        callers.into_iter().find_map(|caller| {
            if seen.contains(&caller) {
                return None;
            }
            self.cache_write_token(caller, seen).map(|(_, why)| {
                (
                    job.id.pos,
                    format!(
                        "{why}, at its caller `{}` of {}",
                        self.model.job(caller).id.value,
                        self.model.workflow(caller).name
                    ),
                )
            })
        })
    }

    /// Where a step saves to the cache: the step itself, or, for a local
    /// composite action (`uses: ./.github/actions/x`), any step inside it.
    fn step_saves(&self, step: &Step) -> Result<Vec<(Pos, String)>> {
        let mut found = Vec::new();
        let mut budget = LOCAL_ACTION_BUDGET;
        self.collect_step_saves(step, None, &mut budget, &mut found)?;
        Ok(found)
    }

    fn collect_step_saves(
        &self,
        step: &Step,
        outer: Option<Outer<'_>>,
        budget: &mut usize,
        found: &mut Vec<(Pos, String)>,
    ) -> Result<()> {
        // Inside an action, findings point at the workflow's `uses:` line
        // and name the action file's line.
        let place = |pos: Pos, why: String| match outer {
            None => (pos, why),
            Some((at, file, _)) => (at, format!("{why} (in {file}, line {})", pos.line)),
        };
        if let Some((pos, why)) = cache_save(step) {
            found.push(place(pos, why));
        }
        let Some(uses) = &step.uses else {
            return Ok(());
        };
        if super::workflow::local_uses(&uses.value).is_none() {
            return Ok(());
        }
        let at = outer.map_or(uses.pos, |(at, _, _)| at);
        let inputs = outer.map_or(&[][..], |(_, _, inputs)| inputs);
        let Some(action) = super::workflow::expand_local_action(self.root, step, inputs)? else {
            // Fail closed: an action that is not in the trusted tree comes
            // from a checkout made during the run.
            found.push(place(
                uses.pos,
                format!(
                    "the local action `{}` has no action.yml under {}, so what it saves cannot be checked",
                    uses.value,
                    self.root.display()
                ),
            ));
            return Ok(());
        };
        let file = &action.file;
        if *budget == 0 {
            found.push((
                at,
                format!(
                    "it expands more than {LOCAL_ACTION_BUDGET} local actions (at `{file}`), so what they save was not all checked"
                ),
            ));
            return Ok(());
        }
        *budget -= 1;
        for inner in &action.steps {
            self.collect_step_saves(inner, Some((at, file, &action.inputs)), budget, found)?;
        }
        Ok(())
    }

    /// Rule 2: untrusted-code jobs hold read-only tokens with granted scopes only.
    fn untrusted_write_permissions(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let granted: Vec<String> = self
            .grant(at)
            .map(|g| g.read_scopes.clone())
            .unwrap_or_default();
        let who = self.label(at);
        // Reached through several callers, the repository default is one
        // finding for the job, listing the callers.
        let defaults: BTreeSet<&str> = info
            .permissions
            .iter()
            .filter(|p| p.permissions.is_none())
            .map(|p| self.model.workflows[p.workflow].name.as_str())
            .collect();
        if !defaults.is_empty() {
            let own = &self.model.workflow(at).name;
            let callers: Vec<&str> = defaults.iter().copied().filter(|n| n != own).collect();
            let via = if callers.is_empty() {
                String::new()
            } else {
                format!(", reached through {}", callers.join(", "))
            };
            self.push(
                "untrusted-write-permissions",
                at,
                at.workflow,
                job.id.pos,
                format!(
                    "{who} runs untrusted code with the repository default token (no `permissions:` anywhere{via}), which may be write; add `permissions: {{ contents: read }}`"
                ),
            );
        }
        for effective in &info.permissions {
            let file = effective.workflow;
            match &effective.permissions {
                None => {}
                // An empty `permissions:` is not `{}`: fail closed.
                Some(Permissions::Shorthand(level)) if level.value.trim() != "{}" => {
                    // The shorthand is written in `file`, which may be the caller's.
                    let pos = level.pos;
                    self.push(
                        "untrusted-write-permissions",
                        at,
                        file,
                        pos,
                        format!(
                            "{who} runs untrusted code with `permissions: {}` ({}); list read scopes instead",
                            level.value, effective.origin
                        ),
                    );
                }
                Some(Permissions::Shorthand(_)) => {}
                Some(Permissions::Map { scopes, .. }) => {
                    for (scope, level) in scopes {
                        let allowed = match level.value.as_str() {
                            "none" => true,
                            // Read scopes beyond contents are a reviewed grant
                            // when a policy file exists; without one, reading
                            // is allowed (the defaults govern writes).
                            "read" => {
                                matches!(scope.value.as_str(), "contents" | "metadata")
                                    || granted.contains(&scope.value)
                                    || self.policy.source.is_none()
                            }
                            _ => false,
                        };
                        // A conversation scope lets the code post, label
                        // and edit pull requests and issues: the job's
                        // purpose in a commenting bot. It reaches code only
                        // through a gate that trusts labels or reviews
                        // (events made with the job's token start no run,
                        // and a comment gate checks the commenter, which the
                        // bot is not), so it is reported when one exists.
                        let gate = if !allowed
                            && CONVERSATION_SCOPES.contains(&scope.value.as_str())
                        {
                            match self.label_gate() {
                                Some(gate) => format!(
                                    "; {gate} decides on labels or reviews, which this token can set"
                                ),
                                None => continue,
                            }
                        } else {
                            String::new()
                        };
                        if !allowed {
                            let what = if level.value == "read" {
                                format!(
                                    "`{}: read`, which the policy does not grant to this job",
                                    scope.value
                                )
                            } else {
                                format!("`{}: {}`", scope.value, level.value)
                            };
                            self.push(
                                "untrusted-write-permissions",
                                at,
                                file,
                                scope.pos,
                                format!(
                                    "{who} runs untrusted code holding {what} ({}){gate}",
                                    effective.origin
                                ),
                            );
                        }
                    }
                }
            }
        }
    }

    /// The first job of the repository that decides on a pull request's
    /// labels or reviews (`if:`, a script), as `file:line`: a gate that a
    /// token with a conversation scope can open.
    fn label_gate(&self) -> Option<String> {
        self.model.workflows.iter().find_map(|wf| {
            wf.jobs.iter().find_map(|job| {
                let gate = job.scalars.iter().chain(&job.if_cond).find(|scalar| {
                    LABEL_GATE_FORMS
                        .iter()
                        .any(|form| scalar.value.contains(form))
                })?;
                Some(format!("{}:{}", wf.path, gate.pos.line))
            })
        })
    }

    /// Rule 3: untrusted-code and pod jobs receive only the secrets the policy lists.
    fn untrusted_secrets(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let granted: Vec<String> = self
            .grant(at)
            .map(|g| g.secrets.clone())
            .unwrap_or_default();
        let who = self.label(at);
        let scalars = job
            .scalars
            .iter()
            .chain(wf.env.iter().map(|(_, value)| value));
        // One finding per job and secret, at its first use, listing the others.
        let mut found: Vec<(Option<String>, Vec<Pos>)> = Vec::new();
        for scalar in scalars {
            for reference in expr::secret_refs(&scalar.value) {
                let name = reference.name;
                if name
                    .as_ref()
                    .is_some_and(|n| n == "GITHUB_TOKEN" || granted.contains(n))
                {
                    continue;
                }
                let needle = name
                    .as_ref()
                    .map_or("secrets".to_owned(), |n| format!("secrets.{n}"));
                let pos = wf.locate(scalar.pos, &needle);
                match found.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, positions)) => positions.push(pos),
                    None => found.push((name, vec![pos])),
                }
            }
        }
        for (name, mut positions) in found {
            positions.sort();
            positions.dedup();
            let also = if positions.len() > 1 {
                let lines: Vec<String> =
                    positions[1..].iter().map(|p| p.line.to_string()).collect();
                format!(" (also on line {})", lines.join(", "))
            } else {
                String::new()
            };
            let message = match name {
                Some(name) => format!(
                    "{who} receives the secret `{name}`, which the policy does not list for it{also}"
                ),
                None => {
                    format!("{who} can read every secret through a dynamic `secrets` access{also}")
                }
            };
            self.push("untrusted-secrets", at, at.workflow, positions[0], message);
        }
    }

    /// Rule 3, at the call site: `secrets: inherit` hands every secret to the callee's jobs.
    fn secrets_inherit(&mut self, info: &JobInfo, job: &Job) {
        let Some(inherit) = &job.secrets_inherit else {
            return;
        };
        let Some(callee) = info.callee else {
            // A remote reusable workflow: what it does with them is unseen.
            if info.is_untrusted() {
                self.push(
                    "untrusted-secrets",
                    info.at,
                    info.at.workflow,
                    inherit.pos,
                    format!(
                        "`secrets: inherit` hands every secret to `{}`, whose jobs this check cannot see; pass only the secrets the policy lists",
                        job.uses.as_ref().map_or("", |u| u.value.as_str())
                    ),
                );
            }
            return;
        };
        let risky: Vec<String> = self
            .model
            .jobs_of(callee)
            .filter(|j| j.is_untrusted())
            .map(|j| format!("`{}`", self.model.job(j.at).id.value))
            .collect();
        if !risky.is_empty() {
            self.push(
                "untrusted-secrets",
                info.at,
                info.at.workflow,
                inherit.pos,
                format!(
                    "`secrets: inherit` hands every secret to {} in {}, which {} untrusted code; pass only the secrets {} need{}",
                    risky.join(", "),
                    self.model.workflows[callee].name,
                    if risky.len() == 1 { "runs" } else { "run" },
                    if risky.len() == 1 { "it" } else { "they" },
                    if risky.len() == 1 { "s" } else { "" },
                ),
            );
        }
    }

    /// Rule 3, at the call site: a secret passed as a `with:` input arrives
    /// as `inputs.NAME`, where the callee's own scan cannot see it.
    fn secrets_as_inputs(&mut self, info: &JobInfo, job: &Job) {
        let Some(callee) = info.callee else { return };
        let wf = self.model.workflow(info.at);
        let mut found = Vec::new();
        for (input, value) in &job.with {
            let refs = expr::secret_refs(&value.value);
            if refs.is_empty() {
                continue;
            }
            let wanted = format!("inputs.{}", input.value);
            for reader in self.model.jobs_of(callee) {
                if !reader.is_untrusted() {
                    continue;
                }
                let reads = self.model.job(reader.at).scalars.iter().any(|s| {
                    expr::expressions(&s.value).iter().any(|(_, body)| {
                        body.contains(&wanted)
                            || body.contains("inputs[")
                            || body.contains("toJSON(inputs)")
                    })
                });
                let granted = self
                    .grant(reader.at)
                    .map(|g| g.secrets.clone())
                    .unwrap_or_default();
                let ungranted = refs.iter().any(|r| {
                    r.name
                        .as_ref()
                        .is_none_or(|name| name != "GITHUB_TOKEN" && !granted.contains(name))
                });
                if reads && ungranted {
                    found.push((
                        wf.locate(value.pos, "secrets"),
                        format!(
                            "the input `{}` carries a secret into {} `{}` of {}, which does not get it from the policy; pass it only to trusted jobs",
                            input.value,
                            reader.role(),
                            self.model.job(reader.at).id.value,
                            self.model.workflows[callee].name
                        ),
                    ));
                }
            }
        }
        for (pos, message) in found {
            self.push("untrusted-secrets", info.at, info.at.workflow, pos, message);
        }
    }

    /// Rule 4: the publisher's triggers and branch guards.
    fn publisher_workflows(&mut self) {
        let default = self.policy.default_branch.clone();
        for (w, wf) in self.model.workflows.iter().enumerate() {
            if !self.policy.publisher.workflows.contains(&wf.name) {
                continue;
            }
            let first = JobRef {
                workflow: w,
                job: 0,
            };
            let mut pending = Vec::new();
            for trigger in &wf.triggers {
                let event = trigger.event.value.as_str();
                match event {
                    "schedule" | "workflow_dispatch" => {}
                    "push" => {
                        let branches = trigger.filter("branches");
                        let exact = branches.is_some_and(|b| b.len() == 1 && b[0].value == default);
                        if !exact {
                            pending.push((
                                branches.and_then(|b| b.first()).map_or(trigger.event.pos, |b| b.pos),
                                format!(
                                    "the publisher runs on pushes to branches other than `{default}`; use `branches: [{default}]`"
                                ),
                            ));
                        }
                        for (name, _) in &trigger.filters {
                            if matches!(name.value.as_str(), "branches-ignore" | "tags" | "tags-ignore") {
                                pending.push((
                                    name.pos,
                                    format!("the publisher's push trigger has `{}`; only `branches: [{default}]` (and path filters) are allowed", name.value),
                                ));
                            }
                        }
                    }
                    other => pending.push((
                        trigger.event.pos,
                        format!(
                            "the publisher is started by `{other}`; only a push to `{default}`, a schedule or a dispatch may start it"
                        ),
                    )),
                }
            }
            if wf.jobs.is_empty() {
                continue;
            }
            for (pos, message) in pending {
                // A trigger belongs to the workflow, not to one job.
                self.push("publisher-trigger", first, w, pos, message);
                if let Some(finding) = self.findings.last_mut() {
                    finding.job = None;
                }
            }
            for (j, job) in wf.jobs.iter().enumerate() {
                let guarded = job
                    .if_cond
                    .as_ref()
                    .is_some_and(|c| expr::requires_ref(&c.value, &default));
                if !guarded {
                    let pos = job.if_cond.as_ref().map_or(job.id.pos, |c| c.pos);
                    self.push(
                        "publisher-guard",
                        JobRef { workflow: w, job: j },
                        w,
                        pos,
                        format!(
                            "publisher job `{}` does not require `github.ref == 'refs/heads/{default}'` in its `if:`",
                            job.id.value
                        ),
                    );
                }
            }
        }
    }

    /// Rule 4: the publisher builds only the commit it runs for.
    fn publisher_untrusted_ref(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let mut found = Vec::new();
        for step in &job.steps {
            if step.uses_action("actions/checkout") {
                for input in ["ref", "repository"] {
                    if let Some(value) = step.input(input) {
                        // The commit the publisher runs for, by another name.
                        let same_commit = input == "ref"
                            && matches!(
                                expr::sole_expression(&value.value),
                                Some("github.sha" | "github.workflow_sha")
                            );
                        if same_commit {
                            continue;
                        }
                        found.push((
                            value.pos,
                            format!(
                                "publisher job `{}` checks out `{input}: {}`; the publisher must build the commit it runs for",
                                job.id.value, value.value
                            ),
                        ));
                    }
                }
            }
            if let Some(at) = super::roles::other_run_download(step) {
                found.push((
                    at.pos,
                    format!(
                        "publisher job `{}` downloads the artifacts of another run (`{}`); the publisher builds the commit it runs for",
                        job.id.value, at.value
                    ),
                ));
            }
            if let Some(run) = &step.run {
                if let Some(line) = expr::fetches_pr_code(&run.value, &info.triggers, &[], true) {
                    found.push((
                        wf.locate(run.pos, line),
                        format!(
                            "publisher job `{}` runs `{}`, which brings in other code",
                            job.id.value,
                            line.trim()
                        ),
                    ));
                }
            }
        }
        for (pos, message) in found {
            self.push("publisher-untrusted-ref", at, at.workflow, pos, message);
        }
    }

    /// Rule 5: key steps agree, cover the inputs, and run trusted tooling.
    fn key_pairing(&mut self) -> Result<()> {
        let step_id = self.policy.key.step_id.clone();
        let mut publisher = Vec::new();
        let mut readers = Vec::new();
        for info in &self.model.jobs {
            let job = self.model.job(info.at);
            for step in &job.steps {
                if step.id.as_ref().is_some_and(|id| id.value == step_id) {
                    let sig = key_signature(self.model.workflow(info.at), job, step);
                    if info.publisher {
                        publisher.push((info.at, step, sig));
                    } else {
                        readers.push((info.at, step, sig));
                    }
                }
            }
        }
        let reference = publisher.first().map(|(at, step, sig)| {
            let wf = self.model.workflow(*at);
            (format!("{}:{}", wf.path, step.pos.line), sig.clone())
        });
        for (at, step, sig) in publisher.iter().skip(1).chain(readers.iter()) {
            let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
            let message = match &reference {
                None => format!(
                    "job `{}` computes the archive key, but no publisher job has a step with `id: {step_id}` to pair it with",
                    self.model.job(*at).id.value
                ),
                Some((_, reference_sig)) if reference_sig == sig => continue,
                Some((where_, reference_sig)) => {
                    let (ours, theirs) = (sig.describe(), reference_sig.describe());
                    // Two texts can differ only in spacing that `describe`
                    // folds away; say so rather than print two equal strings.
                    let detail = if ours == theirs {
                        format!(
                            "{ours} in both, but the `run:` texts differ in spacing or other lines; make them byte-identical"
                        )
                    } else {
                        format!("{ours} vs {theirs}")
                    };
                    format!(
                        "job `{}` computes the archive key differently from the publisher ({where_}): {detail}",
                        self.model.job(*at).id.value
                    )
                }
            };
            self.push("key-mismatch", *at, at.workflow, pos, message);
        }
        for (at, step, sig) in publisher.iter().chain(readers.iter()) {
            self.key_source(*at, step, sig)?;
        }
        Ok(())
    }

    /// Rule 5: what the key is computed from.
    fn key_source(&mut self, at: JobRef, step: &Step, sig: &KeySignature) -> Result<()> {
        let wf = self.model.workflow(at);
        let job = self.model.job(at);
        let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
        if sig.ci_key.is_some() {
            self.xtask_checkout(at, step, sig);
            return Ok(());
        }
        let mut text = String::new();
        for scalar in step
            .run
            .iter()
            .chain(step.with.iter().map(|(_, v)| v))
            .chain(step.env.iter().map(|(_, v)| v))
        {
            text.push_str(&scalar.value);
            text.push('\n');
        }
        let Some(patterns) = expr::hash_files_patterns(&text) else {
            self.push(
                "key-coverage",
                at,
                at.workflow,
                pos,
                "the key's `hashFiles` takes a non-literal argument; its coverage cannot be checked".to_owned(),
            );
            return Ok(());
        };
        if patterns.is_empty() {
            self.push(
                "key-coverage",
                at,
                at.workflow,
                pos,
                format!(
                    "the key step of job `{}` uses neither `cargo xtask ci-key` nor `hashFiles`; its coverage cannot be checked",
                    job.id.value
                ),
            );
            return Ok(());
        }
        let prefix = checkout_prefix(job, step.index, &patterns);
        let globs = HashGlobs::new(&patterns, &prefix).with_context(|| {
            format!(
                "{}:{}: a hashFiles pattern is not a valid glob",
                wf.path, pos.line
            )
        })?;
        for other in &self.model.workflows {
            if globs.matches(&other.path) {
                self.push(
                    "key-coverage",
                    at,
                    at.workflow,
                    pos,
                    format!(
                        "the key hashes {}; workflow files must not be key inputs (runs always use the default branch's definitions)",
                        other.path
                    ),
                );
                break;
            }
        }
        let Some(inputs) = self.key_inputs()? else {
            self.findings.push(Finding {
                rule: "key-coverage",
                severity: Severity::Note,
                file: wf.path.clone(),
                pos,
                workflow: wf.name.clone(),
                job: Some(job.id.value.clone()),
                message: format!(
                    "coverage of the `hashFiles` key skipped: {} has no Cargo.toml to compute the inputs from",
                    self.root.display()
                ),
                suppressed: None,
            });
            return Ok(());
        };
        let missing: Vec<&String> = inputs.iter().filter(|p| !globs.matches(p)).collect();
        if !missing.is_empty() {
            let shown: Vec<&str> = missing.iter().take(5).map(|s| s.as_str()).collect();
            let more = if missing.len() > 5 {
                format!(" and {} more", missing.len() - 5)
            } else {
                String::new()
            };
            self.push(
                "key-coverage",
                at,
                at.workflow,
                pos,
                format!(
                    "the key's hashFiles patterns (relative to checkout path `{}`) miss {} input(s) `ci-key` includes: {}{more}",
                    prefix,
                    missing.len(),
                    shown.join(", ")
                ),
            );
        }
        Ok(())
    }

    /// The repository-relative paths `ci-key` hashes; `None` without a Cargo workspace.
    fn key_inputs(&mut self) -> Result<Option<Vec<String>>> {
        if self.inputs.is_none() {
            let inputs = if self.root.join("Cargo.toml").is_file() {
                let manifest = crate::key::compute(self.root, self.policy).with_context(|| {
                    format!(
                        "cannot compute the ci-key inputs of {} to check hashFiles coverage",
                        self.root.display()
                    )
                })?;
                Some(
                    manifest
                        .inputs
                        .into_iter()
                        .filter(|i| i.kind != "absent")
                        .map(|i| i.path)
                        .collect(),
                )
            } else {
                None
            };
            self.inputs = Some(inputs);
        }
        Ok(self.inputs.clone().flatten())
    }

    /// Rule 5: `cargo xtask ci-key` must run the default branch's xtask.
    fn xtask_checkout(&mut self, at: JobRef, step: &Step, sig: &KeySignature) {
        let info = self.model.info(at);
        let job = self.model.job(at);
        let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
        let dir = sig.xtask_dir();
        // The last checkout that wrote into the xtask's directory decides
        // what runs: one at an enclosing path (the workspace root) replaces
        // it, and one inside it (`trusted/xtask`) replaces part of it.
        let checkout = checkouts_before(job, step.index)
            .into_iter()
            .rev()
            .find(|(path, _)| is_within(&dir, path) || is_within(path, &dir));
        let Some((path, checkout)) = checkout else {
            self.push(
                "key-xtask-checkout",
                at,
                at.workflow,
                pos,
                format!("no checkout before the key step provides the xtask it runs in `{dir}`"),
            );
            return;
        };
        let default = &self.policy.default_branch;
        let repository_ok = checkout
            .input("repository")
            .is_none_or(|r| expr::sole_expression(&r.value) == Some("github.repository"));
        let ref_ok = match checkout.input("ref") {
            None => info.publisher,
            Some(r) if expr::is_workflow_sha(&r.value) => true,
            Some(r) if !r.value.contains("${{") => expr::is_trusted_ref(&r.value, default),
            Some(r) => info.publisher && expr::is_trusted_ref(&r.value, default),
        };
        if !(repository_ok && ref_ok) {
            let what = checkout
                .input("ref")
                .map_or("the triggering ref".to_owned(), |r| {
                    format!("`{}`", r.value)
                });
            self.push(
                "key-xtask-checkout",
                at,
                at.workflow,
                pos,
                format!(
                    "`cargo xtask ci-key` runs the xtask of the checkout at `{path}` ({what}), which is not the trusted `${{{{ github.workflow_sha }}}}`"
                ),
            );
        }
    }

    /// Rule 6: exact restores and coherent rotation.
    fn cache_keys(&mut self) {
        let mut saved = BTreeSet::new();
        for info in self.model.jobs.iter().filter(|i| i.publisher) {
            let job = self.model.job(info.at);
            for step in &job.steps {
                if let Some(shape) = rust_cache_shape(job, step) {
                    if !is_false(step.input("save-if")) {
                        saved.insert(shape);
                    }
                } else if step.uses_action("actions/cache")
                    || step.uses_action("actions/cache/save")
                {
                    if let Some(key) = step.input("key") {
                        saved.insert(expr::key_shape(&key.value));
                    }
                }
            }
        }
        let mut found = Vec::new();
        for info in self.model.jobs.iter().filter(|i| !i.publisher) {
            let job = self.model.job(info.at);
            for step in &job.steps {
                if let Some(shape) = rust_cache_shape(job, step) {
                    if info.is_untrusted() && !saved.contains(&shape) {
                        found.push((
                            "key-shape",
                            info.at,
                            step.pos,
                            format!(
                                "job `{}` restores a rust-cache the publisher never saves (prefix-key/shared-key/key differ); align them with the publisher's rust-cache step",
                                job.id.value
                            ),
                        ));
                    }
                    continue;
                }
                if !(step.uses_action("actions/cache") || step.uses_action("actions/cache/restore"))
                {
                    continue;
                }
                let Some(key) = step.input("key") else {
                    continue;
                };
                let shape = expr::key_shape(&key.value);
                if saved.contains(&shape) {
                    if let Some(fallback) = step
                        .input("restore-keys")
                        .filter(|r| !r.value.trim().is_empty())
                    {
                        found.push((
                            "restore-keys",
                            info.at,
                            fallback.pos,
                            format!(
                                "job `{}` restores the publisher's key `{}` with `restore-keys`, so a miss reuses a different build",
                                job.id.value, key.value
                            ),
                        ));
                    }
                } else if info.is_untrusted() {
                    found.push((
                        "key-shape",
                        info.at,
                        key.pos,
                        format!(
                            "job `{}` restores `{}`, whose shape `{shape}` the publisher never saves; a `vN` bump on one side only?",
                            job.id.value, key.value
                        ),
                    ));
                }
            }
        }
        for (rule, at, pos, message) in found {
            self.push(rule, at, at.workflow, pos, message);
        }
    }

    /// Rule 7: the archive artifact is named by a key computed before any build.
    fn artifact_key(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let step_id = &self.policy.key.step_id;
        let key_index = job
            .steps
            .iter()
            .position(|s| s.id.as_ref().is_some_and(|id| &id.value == step_id));
        let mut found = Vec::new();
        if let Some(key_index) = key_index {
            let wf = self.model.workflow(at);
            for step in &job.steps[..key_index] {
                let builds = step
                    .run
                    .as_ref()
                    .and_then(|r| {
                        expr::builds_code(&r.value).map(|line| (wf.locate(r.pos, line), line))
                    })
                    .or_else(|| {
                        step.uses
                            .as_ref()
                            .filter(|u| super::workflow::local_uses(&u.value).is_some())
                            .map(|u| (u.pos, u.value.as_str()))
                    });
                if let Some((pos, line)) = builds {
                    found.push((
                        pos,
                        format!(
                            "job `{}` runs `{}` before computing the key (step `{step_id}`); code that ran first could influence the key",
                            job.id.value,
                            line.trim()
                        ),
                    ));
                }
            }
        }
        let archive_files: Vec<&str> = self
            .policy
            .archive
            .iter()
            .map(|a| a.file.as_str())
            .collect();
        for step in &job.steps {
            if !step.uses_action("actions/upload-artifact") {
                continue;
            }
            let Some(path) = step.input("path") else {
                continue;
            };
            let is_archive = path.value.contains("gpu-archive")
                || archive_files.iter().any(|f| path.value.contains(f));
            if !is_archive {
                continue;
            }
            let wanted = format!("steps.{step_id}.outputs.");
            let named = step.input("name").is_some_and(|n| {
                expr::expressions(&n.value)
                    .iter()
                    .any(|(_, body)| body.starts_with(&wanted))
            });
            let before = key_index.is_some_and(|k| k < step.index);
            if !named || !before {
                let pos = step.input("name").map_or(step.pos, |n| n.pos);
                found.push((
                    pos,
                    format!(
                        "job `{}` uploads the GPU archive under a name that is not the output of an earlier step `{step_id}`",
                        job.id.value
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push("artifact-key", at, at.workflow, pos, message);
        }
        if !info.publisher {
            self.artifact_binding(info, job);
        }
    }

    /// Rule 7, continued: a reader's artifact reuse is bound to its head
    /// commit. PR code in another run's archive job could upload an artifact
    /// under any name; the finder tells it apart only by the producing run's
    /// name, which GitHub evaluates from `run-name:` before any job runs.
    fn artifact_binding(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let mut found = Vec::new();
        for step in &job.steps {
            let Some(run) = &step.run else { continue };
            let Some(line) = run.value.lines().find(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words
                    .windows(3)
                    .any(|w| w == ["cargo", "xtask", "gpu-archive"])
            }) else {
                continue;
            };
            if !run.value.contains("--reuse") {
                continue;
            }
            let pos = wf.locate(run.pos, line);
            if !run.value.contains("--head-sha") {
                found.push((
                    pos,
                    format!(
                        "job `{}` reuses artifacts without `--head-sha`, so it trusts publisher artifacts only; pass the pinned head commit",
                        job.id.value
                    ),
                ));
            }
            // The trust policy is the trusted checkout's; without it the
            // pull request's own policy would name the trusted workflows.
            if !run.value.contains("--trust-policy") {
                found.push((
                    pos,
                    format!(
                        "job `{}` reuses artifacts without `--trust-policy`, so the policy of the tree it keys (pull-request code) chooses which runs are trusted; pass the trusted checkout's policy",
                        job.id.value
                    ),
                ));
            }
            // The finder accepts a consumer run only under the whole name
            // `artifacts.consumer-run-name` renders to for the head commit.
            let expected = &self.policy.artifacts.consumer_run_name;
            let rendered = wf
                .run_name
                .as_ref()
                .map(|name| render_run_name(&name.value));
            if rendered.as_deref() != Some(expected.as_str()) {
                let pos = wf.run_name.as_ref().map_or(pos, |n| n.pos);
                let has = match &rendered {
                    Some(rendered) => format!("a `run-name:` that renders to {rendered:?}"),
                    None => "no `run-name:`".to_owned(),
                };
                found.push((
                    pos,
                    format!(
                        "workflow {} has {has}, not artifacts.consumer-run-name = {expected:?} stating the head commit, so artifacts its runs upload cannot be told apart from another pull request's",
                        wf.name
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push("artifact-binding", at, at.workflow, pos, message);
        }
    }

    /// Rule 8: lifecycle jobs stay on trusted code and write nothing but run state.
    fn lifecycle_job(&mut self, info: &JobInfo, job: &Job) -> Result<()> {
        let at = info.at;
        let wf = self.model.workflow(at);
        let who = format!("lifecycle job `{}` (holds `actions: write`)", job.id.value);
        let mut found = Vec::new();
        for step in &job.steps {
            if step.uses_action("actions/checkout") {
                match step.input("ref") {
                    Some(r) if expr::is_workflow_sha(&r.value) => {}
                    Some(r) => found.push((
                        r.pos,
                        format!(
                            "{who} checks out `{}`; check out `${{{{ github.workflow_sha }}}}`",
                            r.value
                        ),
                    )),
                    None => found.push((
                        step.pos,
                        format!("{who} checks out without `ref: ${{{{ github.workflow_sha }}}}`"),
                    )),
                }
                if let Some(r) = step.input("repository") {
                    found.push((r.pos, format!("{who} checks out repository `{}`", r.value)));
                }
                if !is_false(step.input("persist-credentials")) {
                    let pos = step
                        .input("persist-credentials")
                        .map_or(step.pos, |p| p.pos);
                    found.push((
                        pos,
                        format!(
                            "{who} keeps the token in .git/config; set `persist-credentials: false`"
                        ),
                    ));
                }
            }
            if let Some(run) = &step.run {
                if let Some(line) = expr::fetches_pr_code(&run.value, &info.triggers, &[], true) {
                    found.push((
                        wf.locate(run.pos, line),
                        format!("{who} runs `{}`", line.trim()),
                    ));
                }
                if let Some(line) = expr::builds_code(&run.value) {
                    found.push((
                        wf.locate(run.pos, line),
                        format!("{who} builds code: `{}`", line.trim()),
                    ));
                }
            }
            for (pos, why) in self.step_saves(step)? {
                found.push((pos, format!("{who} saves to the cache: {why}")));
            }
        }
        for (pos, why) in cache_env_saves(wf, job) {
            found.push((pos, format!("{who} saves to the cache: {why}")));
        }
        for (pos, message) in found {
            self.push("lifecycle-job", at, at.workflow, pos, message);
        }
        Ok(())
    }

    /// Rule 9: third-party actions in privileged jobs are pinned to a commit.
    fn unpinned_action(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let uses = job
            .uses
            .iter()
            .chain(job.steps.iter().filter_map(|s| s.uses.as_ref()));
        let mut found = Vec::new();
        for uses in uses {
            let value = uses.value.trim();
            if super::workflow::local_uses(value).is_some() {
                continue;
            }
            if let Some(image) = value.strip_prefix("docker://") {
                if !image.contains("@sha256:") {
                    found.push((
                        uses.pos,
                        format!(
                            "{} uses the image `{value}` without a `@sha256:` digest",
                            self.label(at)
                        ),
                    ));
                }
                continue;
            }
            let (name, reference) = super::workflow::split_uses(value);
            let owner = name.split('/').next().unwrap_or("").to_ascii_lowercase();
            if owner == "actions" || owner == "github" {
                continue;
            }
            if !expr::is_full_sha(reference) {
                found.push((
                    uses.pos,
                    format!(
                        "{} uses `{value}`, which is not pinned to a full commit SHA",
                        self.label(at)
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push("unpinned-action", at, at.workflow, pos, message);
        }
    }
}

/// The runners a job may land on, for comparing jobs: its specific labels
/// (lowercased; `self-hosted`, OS and architecture labels say nothing on
/// their own) or its runner group, else `self-hosted` (any runner).
fn runner_keys(job: &Job) -> BTreeSet<String> {
    const GENERIC: &[&str] = &[
        "self-hosted",
        "linux",
        "windows",
        "macos",
        "x64",
        "x86_64",
        "arm64",
        "arm",
        "aarch64",
    ];
    let mut keys: BTreeSet<String> = job
        .runs_on
        .iter()
        .map(|l| l.value.trim().to_ascii_lowercase())
        .filter(|l| !GENERIC.contains(&l.as_str()))
        .collect();
    keys.extend(
        job.runs_on_unresolved
            .iter()
            .map(|u| u.value.trim().to_ascii_lowercase()),
    );
    if keys.is_empty() {
        keys.insert("self-hosted".to_owned());
    }
    keys
}

/// Where a step inside a local action is reported: the workflow's `uses:`
/// position, the action file, and the action's resolved inputs.
type Outer<'o> = (Pos, &'o str, &'o [(String, String)]);

/// How many local actions one step may expand (nested uses included)
/// before the check stops and reports: a cycle or a wide tree of actions
/// must not make the check run for ever.
pub const LOCAL_ACTION_BUDGET: usize = 64;

/// The shape of a rust-cache step's key: the inputs that name it.
fn rust_cache_shape(job: &Job, step: &Step) -> Option<String> {
    if !step.uses_action("Swatinem/rust-cache") {
        return None;
    }
    let get = |name: &str| step.input(name).map(|v| expr::key_shape(&v.value));
    let shared = get("shared-key").unwrap_or_else(|| format!("job:{}", job.id.value));
    Some(format!(
        "rust-cache|{}|{shared}|{}",
        get("prefix-key").unwrap_or_else(|| "v0-rust".to_owned()),
        get("key").unwrap_or_default()
    ))
}

/// How a key step computes the key, for comparing publisher and readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySignature {
    /// The `cargo xtask ci-key` invocation line, whitespace-collapsed.
    pub ci_key: Option<String>,
    /// The whole `run` (trailing whitespace trimmed) or the `uses`/`with`.
    pub text: String,
    pub working_directory: String,
}

impl KeySignature {
    fn describe(&self) -> String {
        let what = self.ci_key.as_deref().unwrap_or(&self.text);
        let what: String = what.chars().take(120).collect();
        format!(
            "`{}` in `{}`",
            what.replace('\n', "⏎"),
            self.working_directory
        )
    }

    /// The directory cargo runs the xtask from: the working directory, or
    /// the directory of a `--manifest-path`.
    pub(super) fn xtask_dir(&self) -> String {
        let Some(line) = &self.ci_key else {
            return self.working_directory.clone();
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let manifest = words.iter().enumerate().find_map(|(i, w)| {
            w.strip_prefix("--manifest-path=").or_else(|| {
                (*w == "--manifest-path")
                    .then(|| words.get(i + 1).copied())
                    .flatten()
            })
        });
        match manifest {
            Some(path) => {
                let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir);
                join_dir(&self.working_directory, dir)
            }
            None => self.working_directory.clone(),
        }
    }
}

pub(super) fn key_signature(wf: &Workflow, job: &Job, step: &Step) -> KeySignature {
    let working_directory = normalize_dir(
        step.working_directory
            .as_ref()
            .or(job.default_working_directory.as_ref())
            .or(wf.default_working_directory.as_ref())
            .map_or(".", |s| s.value.as_str()),
    );
    if let Some(run) = &step.run {
        let text = run
            .value
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned();
        let ci_key = text.lines().find(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.windows(3).any(|w| w == ["cargo", "xtask", "ci-key"])
        });
        return KeySignature {
            ci_key: ci_key.map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")),
            text,
            working_directory,
        };
    }
    let mut text = step
        .uses
        .as_ref()
        .map_or(String::new(), |u| u.value.clone());
    for (name, value) in &step.with {
        text.push_str(&format!("\n{}={}", name.value, value.value));
    }
    KeySignature {
        ci_key: None,
        text,
        working_directory,
    }
}

/// `./a/`, `${{ github.workspace }}/a` → `a`; empty → `.`.
pub(super) fn normalize_dir(dir: &str) -> String {
    let mut dir = dir.trim();
    for prefix in [
        "${{ github.workspace }}",
        "${{github.workspace}}",
        "$GITHUB_WORKSPACE",
    ] {
        if let Some(rest) = dir.strip_prefix(prefix) {
            dir = rest;
        }
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in dir.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." && parts.last().is_some_and(|p| *p != "..") {
            parts.pop();
        } else {
            parts.push(part);
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

pub(super) fn join_dir(base: &str, rel: &str) -> String {
    if base == "." {
        normalize_dir(rel)
    } else {
        normalize_dir(&format!("{base}/{rel}"))
    }
}

/// True when `dir` is `checkout` or inside it.
pub(super) fn is_within(dir: &str, checkout: &str) -> bool {
    checkout == "." || dir == checkout || dir.starts_with(&format!("{checkout}/"))
}

/// The checkouts in effect before step `index`, by path, in step order (a
/// later checkout into the same path replaces an earlier one).
pub(super) fn checkouts_before(job: &Job, index: usize) -> Vec<(String, &Step)> {
    let mut by_path: Vec<(String, &Step)> = Vec::new();
    for step in job.steps[..index]
        .iter()
        .filter(|s| s.uses_action("actions/checkout"))
    {
        let path = normalize_dir(step.input("path").map_or(".", |p| p.value.as_str()));
        by_path.retain(|(p, _)| *p != path);
        by_path.push((path, step));
    }
    by_path
}

/// The checkout path the hashFiles patterns are written against: the
/// checkout (other than the root) whose path prefixes most patterns, else the
/// root checkout, else the last checkout (which unprefixed patterns then miss).
fn checkout_prefix(job: &Job, index: usize, patterns: &[String]) -> String {
    let checkouts: Vec<String> = checkouts_before(job, index)
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    let prefixed = checkouts
        .iter()
        .filter(|p| *p != ".")
        .map(|p| {
            let count = patterns
                .iter()
                .filter(|pat| pat.trim_start_matches('!').starts_with(&format!("{p}/")))
                .count();
            (count, p)
        })
        .filter(|(count, _)| *count > 0)
        .max();
    match prefixed {
        Some((_, path)) => path.clone(),
        None if checkouts.iter().any(|p| p == ".") => ".".to_owned(),
        None => checkouts.last().cloned().unwrap_or_else(|| ".".to_owned()),
    }
}

/// `hashFiles` patterns as repository-relative matchers, last match wins
/// (a `!` pattern excludes), a matched directory covers its descendants.
struct HashGlobs {
    patterns: Vec<(bool, GlobMatcher)>,
}

impl HashGlobs {
    fn new(patterns: &[String], prefix: &str) -> Result<HashGlobs> {
        let mut out = Vec::new();
        for pattern in patterns {
            let (include, pattern) = match pattern.strip_prefix('!') {
                Some(rest) => (false, rest),
                None => (true, pattern.as_str()),
            };
            let pattern = pattern.trim().trim_start_matches("./");
            let relative = if prefix == "." {
                Some(pattern)
            } else {
                pattern.strip_prefix(&format!("{prefix}/"))
            };
            // A pattern outside the checkout cannot match a repository file.
            let Some(relative) = relative else { continue };
            let glob = globset::GlobBuilder::new(relative)
                .literal_separator(true)
                .build()?
                .compile_matcher();
            out.push((include, glob));
        }
        Ok(HashGlobs { patterns: out })
    }

    fn matches(&self, path: &str) -> bool {
        let mut candidates = vec![path];
        let mut rest = path;
        while let Some((parent, _)) = rest.rsplit_once('/') {
            candidates.push(parent);
            rest = parent;
        }
        let mut matched = false;
        for (include, glob) in &self.patterns {
            if candidates.iter().any(|c| glob.is_match(c)) {
                matched = *include;
            }
        }
        matched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_globs_follow_actions_glob() {
        let globs = HashGlobs::new(
            &[
                "pr/Cargo.lock".into(),
                "pr/**/Cargo.toml".into(),
                "pr/src".into(),
                "!pr/src/generated/**".into(),
                "other/**".into(),
            ],
            "pr",
        )
        .unwrap();
        assert!(
            globs.matches("Cargo.toml"),
            "`**/` matches zero directories"
        );
        assert!(globs.matches("crates/a/Cargo.toml"));
        assert!(
            globs.matches("src/deep/lib.rs"),
            "a directory covers its descendants"
        );
        assert!(!globs.matches("src/generated/x.rs"), "a later `!` excludes");
        assert!(!globs.matches("benches/b.rs"));
        assert!(!globs.matches("other/x"), "outside the checkout path");
        let star = HashGlobs::new(&["*.toml".into()], ".").unwrap();
        assert!(!star.matches("a/b.toml"), "`*` does not cross `/`");
        assert!(star.matches(".cargo.toml"), "dotfiles match");
    }

    fn steps(yaml_steps: &str) -> Workflow {
        Workflow::parse(
            "x.yml",
            &format!("on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n{yaml_steps}"),
        )
        .unwrap()
    }

    #[test]
    fn key_signatures_ignore_trailing_space_but_not_directories() {
        let wf = steps(
            "      - id: k
        working-directory: ./trusted/
        run: |
          cargo   xtask ci-key --root ../pr   \n
      - id: k
        run: cargo xtask ci-key --root ../pr
      - id: k
        working-directory: trusted
        run: cargo xtask ci-key --manifest-path ../tools/Cargo.toml
",
        );
        let job = &wf.jobs[0];
        let sigs: Vec<KeySignature> = job
            .steps
            .iter()
            .map(|s| key_signature(&wf, job, s))
            .collect();
        assert_eq!(
            sigs[0].ci_key.as_deref(),
            Some("cargo xtask ci-key --root ../pr")
        );
        assert_eq!(sigs[0].working_directory, "trusted");
        assert_eq!(sigs[0].ci_key, sigs[1].ci_key);
        assert_ne!(
            sigs[0], sigs[1],
            "the working directory is part of the key computation"
        );
        assert_eq!(sigs[2].xtask_dir(), "tools");
    }

    #[test]
    fn directories_normalize() {
        assert_eq!(normalize_dir("./trusted/"), "trusted");
        assert_eq!(normalize_dir("${{ github.workspace }}/a/./b"), "a/b");
        assert_eq!(normalize_dir(""), ".");
        assert!(is_within("trusted/xtask", "trusted"));
        assert!(!is_within("trustedx", "trusted"));
    }
}
