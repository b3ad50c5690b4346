//! Family `secrets`: rule `untrusted-secrets`. Jobs that run untrusted
//! code, and pod jobs, receive only the secrets the policy lists; a caller
//! hands none to them (`secrets: inherit`, a secret as a `with:` input); and
//! a policy grant never gives secrets to a job that runs pull-request bytes.
//!
//! Owns these checks. It must not decide which jobs are untrusted
//! (`roles/`).

use anyhow::Result;

use super::{Checker, RuleId, Severity};
use crate::contracts::expr;
use crate::contracts::roles::{JobInfo, Level, PRIVILEGED_EVENTS};
use crate::contracts::workflow::{Job, Permissions, Pos};

/// `untrusted-secrets`. A pod on `pull_request` gets secrets only for
/// branches of this repository, whose authors can push anyway;
/// persistent-runner covers what its state exposes.
pub(super) fn check_untrusted_secrets(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.is_untrusted() {
            c.untrusted_secrets(info, job);
        }
        c.secrets_inherit(info, job);
        c.secrets_as_inputs(info, job);
        Ok(())
    })?;
    c.each_job(|c, info, job| {
        if info.is_untrusted() {
            c.grant_to_untrusted_code(info, job);
        }
        Ok(())
    })?;
    c.mirrored_runs();
    Ok(())
}

impl Checker<'_> {
    /// Rule 3, for a mirror's push (`roles::Mirror`): the run is the pull
    /// request's own copy of the workflows, so it reaches every secret of
    /// the repository, not only those its jobs name, and any token scope
    /// the repository allows; a workflow the pull request adds runs too.
    /// One warning per repository, at the file that enables the mirror,
    /// naming the workflows its push starts and what their jobs hold.
    pub(super) fn mirrored_runs(&mut self) {
        if !self.records(RuleId::UntrustedSecrets) {
            return;
        }
        let Some(mirror) = &self.model.mirror else {
            return;
        };
        let mut started: Vec<String> = Vec::new();
        // What the jobs hold, each with the jobs that hold it, in order.
        let mut held: Vec<(String, Vec<String>)> = Vec::new();
        let hold = |held: &mut Vec<(String, Vec<String>)>, what: String, at: &str| match held
            .iter_mut()
            .find(|(w, _)| *w == what)
        {
            Some((_, jobs)) if !jobs.iter().any(|j| j == at) => jobs.push(at.to_owned()),
            Some(_) => {}
            None => held.push((what, vec![at.to_owned()])),
        };
        let note = |list: &mut Vec<String>, what: String| {
            if !list.contains(&what) {
                list.push(what);
            }
        };
        for info in &self.model.jobs {
            let Some(own) = &info.own_copy else {
                continue;
            };
            for &top in &own.tops {
                note(
                    &mut started,
                    format!("`{}`", self.model.workflows[top].name),
                );
            }
            let job = self.model.job(info.at);
            let wf = self.model.workflow(info.at);
            let at = format!("`{}` of {}", job.id.value, wf.name);
            for scalar in job.scalars.iter().chain(wf.env.iter().map(|(_, v)| v)) {
                for reference in expr::secret_refs(&scalar.value) {
                    match reference.name {
                        Some(n) if n == "GITHUB_TOKEN" => {}
                        Some(n) => hold(&mut held, format!("`{n}`"), &at),
                        None => hold(&mut held, "a dynamic `secrets` access".to_owned(), &at),
                    }
                }
            }
            if job.secrets_inherit.is_some() {
                hold(&mut held, "`secrets: inherit`".to_owned(), &at);
            }
            // The scopes its permissions write: the repository lets a
            // workflow ask for them, so the copy can too.
            for p in &info.permissions {
                match &p.permissions {
                    Some(Permissions::Shorthand(s)) if s.value.trim() == "write-all" => {
                        hold(&mut held, "`permissions: write-all`".to_owned(), &at);
                    }
                    Some(Permissions::Map { scopes }) => {
                        for (scope, level) in scopes {
                            if level.value.trim() == "write" {
                                hold(&mut held, format!("`{}: write`", scope.value), &at);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        // A few jobs for each, so that the message stays readable.
        const JOBS_SHOWN: usize = 2;
        let shown = if held.is_empty() {
            "none of them names a secret, which the copy may change".to_owned()
        } else {
            let items: Vec<String> = held
                .iter()
                .map(|(what, jobs)| {
                    let more = jobs.len().saturating_sub(JOBS_SHOWN);
                    let mut list = jobs[..jobs.len().min(JOBS_SHOWN)].join("; ");
                    if more > 0 {
                        list.push_str(&format!("; {more} more"));
                    }
                    format!("{what} ({list})")
                })
                .collect();
            format!("their jobs hold {}", items.join(", "))
        };
        let starts = if started.is_empty() {
            "no workflow of this tree".to_owned()
        } else {
            started.join(", ")
        };
        // The copy chooses its runner and may send the dispatches its token
        // can (GitHub starts runs for `workflow_dispatch` and
        // `repository_dispatch` even from `GITHUB_TOKEN`): the self-hosted
        // runners that trusted jobs use, and the dispatched workflows that
        // hold secrets, are in its reach too.
        let mut reach: Vec<String> = Vec::new();
        for info in &self.model.jobs {
            let job = self.model.job(info.at);
            let wf = self.model.workflow(info.at);
            let trusted = info.starts.iter().any(|s| s.runs_this_repositorys_copy());
            if info.pod.is_some() && !info.ephemeral && trusted && !job.runs_on.is_empty() {
                let labels: Vec<&str> = job.runs_on.iter().map(|l| l.value.trim()).collect();
                let what = format!("the runner `[{}]`", labels.join(", "));
                if !reach.iter().any(|r| r.starts_with(&format!("{what} ("))) {
                    reach.push(format!("{what} (`{}` of {})", job.id.value, wf.name));
                }
            }
            let dispatched = info.starts.iter().find(|s| {
                matches!(
                    s.event.as_str(),
                    "workflow_dispatch" | "repository_dispatch"
                )
            });
            let holds = job
                .scalars
                .iter()
                .chain(wf.env.iter().map(|(_, v)| v))
                .any(|v| !expr::secret_refs(&v.value).is_empty())
                || job.secrets_inherit.is_some();
            if let (Some(start), true) = (dispatched, holds) {
                let what = format!(
                    "`{}` by `{}`",
                    self.model.workflows[start.top].name, start.event
                );
                if !reach.contains(&what) {
                    reach.push(what);
                }
            }
        }
        const REACH_SHOWN: usize = 6;
        let reach = match reach.len() {
            0 => String::new(),
            n => format!(
                "; it can also run on, or dispatch, {}{}",
                reach[..n.min(REACH_SHOWN)].join(", "),
                if n > REACH_SHOWN {
                    format!(" and {} more", n - REACH_SHOWN)
                } else {
                    String::new()
                }
            ),
        };
        self.findings.push(super::Finding {
            rule: RuleId::UntrustedSecrets.as_str(),
            severity: Severity::Warning,
            confidence: super::Confidence::Medium,
            question: Some(crate::contracts::roles::MIRROR_QUESTION.to_owned()),
            file: mirror.file.clone(),
            pos: mirror.pos,
            workflow: mirror.file.rsplit('/').next().unwrap_or("").to_owned(),
            job: None,
            message: format!(
                "`{}` enables copy-pr-bot: once a maintainer comments `/ok to test`, a fork's pull request is pushed to `pull-request/N`, and its own copy of every workflow that push starts ({starts}), or that it adds, runs with each secret of this repository that no environment keeps from that branch, not only those named here ({shown}){reach}; keep such secrets in environments whose deployment branches leave out `pull-request/*`, and the default token read-only",
                mirror.file
            ),
            suppressed: None,
        });
    }

    /// Rule 3: untrusted-code and pod jobs receive only the secrets the policy lists.
    pub(super) fn untrusted_secrets(&mut self, info: &JobInfo, job: &Job) {
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
            self.push(
                RuleId::UntrustedSecrets,
                at,
                at.workflow,
                positions[0],
                message,
            );
        }
    }

    /// Rule 3, at the call site: `secrets: inherit` hands every secret to the callee's jobs.
    pub(super) fn secrets_inherit(&mut self, info: &JobInfo, job: &Job) {
        let Some(inherit) = &job.secrets_inherit else {
            return;
        };
        let Some(callee) = info.callee else {
            // A remote reusable workflow: what it does with them is unseen.
            if info.is_untrusted() {
                self.push(
                    RuleId::UntrustedSecrets,
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
        // The callee's jobs that run untrusted code when this caller calls
        // them, and how certain that is.
        let through: Vec<(String, Level)> = self
            .model
            .jobs_of(callee)
            .filter_map(|j| {
                through_caller(j, info.at)
                    .map(|l| (format!("`{}`", self.model.job(j.at).id.value), l))
            })
            .collect();
        let risky: Vec<String> = through.iter().map(|(n, _)| n.clone()).collect();
        let level = through.iter().map(|(_, l)| *l).min();
        if let Some(level) = level {
            let (severity, question) = level_severity(level);
            self.push_as(
                RuleId::UntrustedSecrets,
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
                severity,
                question,
            );
        }
    }

    /// Rule 3, at the call site: a secret passed as a `with:` input arrives
    /// as `inputs.NAME`, where the callee's own scan cannot see it.
    pub(super) fn secrets_as_inputs(&mut self, info: &JobInfo, job: &Job) {
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
                let Some(level) = through_caller(reader, info.at) else {
                    continue;
                };
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
                        level,
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
        for (level, pos, message) in found {
            let (severity, question) = level_severity(level);
            self.push_as(
                RuleId::UntrustedSecrets,
                info.at,
                info.at.workflow,
                pos,
                message,
                severity,
                question,
            );
        }
    }

    /// `untrusted-secrets`: a policy grant of secrets to a job that runs
    /// pull-request-controlled bytes is refused, whatever it grants.
    pub(super) fn grant_to_untrusted_code(&mut self, info: &JobInfo, job: &Job) {
        let Some(grant) = self.grant(info.at) else {
            return;
        };
        if grant.secrets.is_empty() {
            return;
        }
        let Some(why) = pr_bytes(info) else { return };
        let wf = self.model.workflow(info.at);
        let pos = job
            .scalars
            .iter()
            .find_map(|s| {
                expr::secret_refs(&s.value).into_iter().find_map(|r| {
                    r.name
                        .filter(|n| grant.secrets.contains(n))
                        .map(|n| wf.locate(s.pos, &format!("secrets.{n}")))
                })
            })
            .unwrap_or(job.id.pos);
        let message = format!(
            "the policy grants {} to {}, which runs pull-request-controlled bytes ({}, line {}); a grant does not make that code trusted: give the secret to a job that runs only trusted code",
            grant
                .secrets
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.label(info.at),
            why.text,
            why.pos.line
        );
        self.push(
            RuleId::UntrustedSecrets,
            info.at,
            info.at.workflow,
            pos,
            message,
        );
    }
}

/// How certain it is that a callee's job runs untrusted code when `caller`
/// calls it (its exposures under starts through that caller); `None` when
/// it does not.
fn through_caller(job: &JobInfo, caller: crate::contracts::roles::JobRef) -> Option<Level> {
    job.exposures
        .iter()
        .filter(|e| e.starts.iter().any(|s| s.via.contains(&caller)))
        .map(|e| e.level)
        .min()
}

/// A finding's severity for an exposure level, with the recovery path's question.
fn level_severity(level: Level) -> (Severity, Option<String>) {
    match level {
        Level::Error => (Severity::Error, None),
        Level::Warning => (
            Severity::Warning,
            Some("the callee runs untrusted code only where a maintainer's dispatch or an unseen value chooses it".to_owned()),
        ),
    }
}

/// Why a job runs bytes a pull request controls: a reason other than its
/// runner, or, for a pod job in a privileged run, the pod itself (it exists
/// to run the pull request's tests).
pub(super) fn pr_bytes(info: &JobInfo) -> Option<&crate::contracts::roles::Why> {
    let pod_pos = info.pod.as_ref().map(|p| (p.pos, &p.text));
    let other = info
        .untrusted
        .iter()
        .find(|w| Some((w.pos, &w.text)) != pod_pos);
    let privileged = info
        .triggers
        .iter()
        .any(|t| PRIVILEGED_EVENTS.contains(&t.as_str()));
    other.or(info.pod.as_ref().filter(|_| privileged))
}
