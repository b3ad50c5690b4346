//! Family `permissions`: what the token of a job that runs untrusted code
//! can do (`untrusted-write-permissions`, `untrusted-persist-credentials`)
//! and what a lifecycle job holding `actions: write` may run
//! (`lifecycle-job`).
//!
//! Owns these checks. It must not decide which jobs are untrusted or
//! lifecycle jobs (`roles/`).

use std::collections::BTreeSet;

use anyhow::Result;

use super::{Checker, RuleId, Severity};
use crate::contracts::caches::{cache_env_saves, is_false};
use crate::contracts::commands;
use crate::contracts::expr;
use crate::contracts::roles::JobInfo;
use crate::contracts::workflow::{Job, Permissions, Pos};

/// A token scope (or shorthand) an untrusted-code job holds, and where it
/// is written (the job's workflow or a caller's).
struct Held {
    /// `holding `contents: write``, `with `permissions: write-all``.
    what: String,
    file: usize,
    pos: Pos,
    origin: String,
    /// What follows the origin: the fix, or the gate a scope opens.
    tail: String,
    /// A conversation scope without a gate it could open: a warning.
    ungated: bool,
}

/// `untrusted-write-permissions`.
pub(super) fn check_untrusted_write_permissions(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.is_untrusted() {
            c.untrusted_write_permissions(info, job);
        }
        Ok(())
    })
}

/// `lifecycle-job`.
pub(super) fn check_lifecycle_job(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.lifecycle {
            c.lifecycle_job(info, job)?;
        }
        Ok(())
    })
}

/// `untrusted-persist-credentials`. A pod that runs only trusted code reads
/// its own token; the token expires with the job, so a persistent pod's
/// disk keeps nothing usable (persistent-runner covers what PR code leaves).
pub(super) fn check_untrusted_persist_credentials(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.is_untrusted() {
            c.persist_credentials(info, job);
        }
        Ok(())
    })
}

impl Checker<'_> {
    /// Rule 2: untrusted-code jobs hold read-only tokens with granted scopes only.
    pub(super) fn untrusted_write_permissions(&mut self, info: &JobInfo, job: &Job) {
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
                RuleId::UntrustedWritePermissions,
                at,
                at.workflow,
                job.id.pos,
                format!(
                    "{who} runs untrusted code with the repository default token (no `permissions:` anywhere{via}), which may be write; add `permissions: {{ contents: read }}`"
                ),
            );
        }
        let mut found: Vec<Held> = Vec::new();
        for effective in &info.permissions {
            let file = effective.workflow;
            match &effective.permissions {
                None => {}
                // An empty `permissions:` is not `{}`: fail closed.
                Some(Permissions::Shorthand(level)) if level.value.trim() != "{}" => {
                    // The shorthand is written in `file`, which may be the caller's.
                    found.push(Held {
                        what: format!("with `permissions: {}`", level.value),
                        file,
                        pos: level.pos,
                        origin: effective.origin.clone(),
                        tail: "; list read scopes instead".to_owned(),
                        ungated: false,
                    });
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
                        // On a pod the pull request's code runs beside the
                        // runner, with the token: any write scope is its.
                        let mut ungated = false;
                        let gate = if !allowed
                            && CONVERSATION_SCOPES.contains(&scope.value.as_str())
                            && info.pod.is_none()
                        {
                            match self.label_gate() {
                                Some(gate) => format!(
                                    "; {gate} decides on labels or reviews, which this token can set"
                                ),
                                None => {
                                    ungated = true;
                                    String::new()
                                }
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
                            found.push(Held {
                                what: format!("holding {what}"),
                                file,
                                pos: scope.pos,
                                origin: effective.origin.clone(),
                                tail: gate,
                                ungated,
                            });
                        }
                    }
                }
            }
        }
        // Reached through several callers that grant the same, the job is
        // one finding, at the first grant, naming the others.
        let mut reported: Vec<&Held> = Vec::new();
        for held in &found {
            if reported.iter().any(|r| r.what == held.what) {
                continue;
            }
            reported.push(held);
            let others: Vec<String> = found
                .iter()
                .filter(|o| o.what == held.what && !std::ptr::eq(*o, held))
                .map(|o| format!("{}:{}", self.model.workflows[o.file].path, o.pos.line))
                .collect();
            let also = if others.is_empty() {
                String::new()
            } else {
                format!("; the same through {}", others.join(", "))
            };
            let (severity, question) = if held.ungated {
                (
                    Severity::Warning,
                    Some("the token can post, label and edit pull requests and issues: does any gate (a merge rule, a bot) trust what it can set?".to_owned()),
                )
            } else {
                self.job_severity(at)
            };
            self.push_as(
                RuleId::UntrustedWritePermissions,
                at,
                held.file,
                held.pos,
                format!(
                    "{who} runs untrusted code {} ({}{also}){}",
                    held.what, held.origin, held.tail
                ),
                severity,
                question,
            );
        }
    }

    /// The first job of the repository that decides on a pull request's
    /// labels or reviews (`if:`, a script), as `file:line`: a gate that a
    /// token with a conversation scope can open.
    pub(super) fn label_gate(&self) -> Option<String> {
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

    /// Rule 8: lifecycle jobs stay on trusted code and write nothing but run state.
    pub(super) fn lifecycle_job(&mut self, info: &JobInfo, job: &Job) -> Result<()> {
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
                if let Some(line) = commands::fetches_pr_code(&run.value, &info.triggers, &[], true)
                {
                    found.push((
                        wf.locate(run.pos, line),
                        format!("{who} runs `{}`", line.trim()),
                    ));
                }
                if let Some(line) = commands::builds_line(&run.value) {
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
            self.push(RuleId::LifecycleJob, at, at.workflow, pos, message);
        }
        Ok(())
    }

    /// `untrusted-persist-credentials`: every checkout in an untrusted-code
    /// or pod job says `persist-credentials: false`.
    pub(super) fn persist_credentials(&mut self, info: &JobInfo, job: &Job) {
        let who = self.label(info.at);
        let mut found = Vec::new();
        for step in job
            .steps
            .iter()
            .filter(|s| s.uses_action("actions/checkout"))
        {
            let setting = step.input("persist-credentials");
            if setting.is_some_and(|v| v.value.trim() == "false") {
                continue;
            }
            let pos = setting.map_or(step.uses.as_ref().map_or(step.pos, |u| u.pos), |v| v.pos);
            let what = setting.map_or("without `persist-credentials: false`".to_owned(), |v| {
                format!("with `persist-credentials: {}`", v.value)
            });
            found.push((
                pos,
                format!(
                    "{who} checks out {what}, so the token stays in .git/config where the code it runs can read it"
                ),
            ));
        }
        // A token that can write is a credential the code can use; a
        // read-only one reads what the code could read anyway, unless the
        // repository is private. `id-token: write` is no power of the
        // persisted token: an OIDC token is asked for with the runner's own
        // request token (its own rule, untrusted-write-permissions).
        let writes = info.permissions.iter().any(|p| match &p.permissions {
            None => true,
            Some(Permissions::Shorthand(s)) => {
                s.value.trim() != "{}" && s.value.trim() != "read-all"
            }
            Some(Permissions::Map { scopes }) => scopes
                .iter()
                .any(|(scope, level)| level.value == "write" && scope.value != "id-token"),
        });
        let (severity, question) = self.job_severity(info.at);
        let (severity, question) = if writes {
            (severity, question)
        } else {
            (
                Severity::Warning,
                Some(question.map_or_else(
                    || "the token is read-only here: is the repository private, so that reading it gives the code something?".to_owned(),
                    |q| format!("{q}; and the token is read-only: is the repository private?"),
                )),
            )
        };
        for (pos, message) in found {
            self.push_as(
                RuleId::UntrustedPersistCredentials,
                info.at,
                info.at.workflow,
                pos,
                message,
                severity,
                question.clone(),
            );
        }
    }
}

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
