//! Family `publisher`: the one writer of the shared caches starts only on
//! the default branch (`publisher-trigger`, `publisher-guard`) and builds
//! only the commit it runs for (`publisher-untrusted-ref`).
//!
//! Owns these checks. Which workflows publish is the policy's (or
//! `contracts/mod.rs`'s inference), never decided here.

use anyhow::Result;

use super::{Checker, RuleId};
use crate::contracts::commands;
use crate::contracts::expr;
use crate::contracts::roles::{JobInfo, JobRef};
use crate::contracts::shell::Script;
use crate::contracts::workflow::Job;

/// `publisher-trigger` and `publisher-guard` (one walk over the publisher
/// workflows serves both).
pub(super) fn check_publisher_workflows(c: &mut Checker) -> Result<()> {
    c.publisher_workflows();
    Ok(())
}

/// `publisher-untrusted-ref`.
pub(super) fn check_publisher_untrusted_ref(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.publisher {
            c.publisher_untrusted_ref(info, job);
            c.publisher_reuse(info, job);
        }
        Ok(())
    })
}

impl Checker<'_> {
    /// Rule 4: the publisher's triggers and branch guards.
    pub(super) fn publisher_workflows(&mut self) {
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
                self.push(RuleId::PublisherTrigger, first, w, pos, message);
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
                        RuleId::PublisherGuard,
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
    pub(super) fn publisher_untrusted_ref(&mut self, info: &JobInfo, job: &Job) {
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
            if let Some(at) = crate::contracts::roles::other_run_download(step) {
                found.push((
                    at.pos,
                    format!(
                        "publisher job `{}` downloads the artifacts of another run (`{}`); the publisher builds the commit it runs for",
                        job.id.value, at.value
                    ),
                ));
            }
            if let Some(run) = &step.run {
                if let Some(line) = commands::fetches_pr_code(&run.value, &info.triggers, &[], true)
                {
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
            self.push(RuleId::PublisherUntrustedRef, at, at.workflow, pos, message);
        }
    }

    /// `publisher-untrusted-ref`: the publisher builds; it never reuses an
    /// artifact another run uploaded.
    pub(super) fn publisher_reuse(&mut self, info: &JobInfo, job: &Job) {
        let wf = self.model.workflow(info.at);
        let mut found = Vec::new();
        for step in &job.steps {
            let Some(run) = &step.run else { continue };
            let script = Script::cached(&run.value);
            let Some(archive) = commands::xtask(&script, "gpu-archive").next() else {
                continue;
            };
            let line = commands::line(&run.value, &script, archive);
            let archive_args = archive.arg_texts();
            if archive_args.iter().any(|w| w == "--reuse") {
                found.push((
                    wf.locate(run.pos, line),
                    format!(
                        "publisher job `{}` runs `gpu-archive --reuse`, which may publish an archive another run uploaded; the publisher builds what it publishes",
                        job.id.value
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push(
                RuleId::PublisherUntrustedRef,
                info.at,
                info.at.workflow,
                pos,
                message,
            );
        }
    }
}
