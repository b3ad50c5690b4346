//! Family `artifacts`: the GPU archive artifact is named by the key
//! (`artifact-key`), its reuse is bound to the head commit and run names
//! carry nothing an attacker picks (`artifact-binding`), and the archives
//! the pod runs are the ones the policy builds (`archive-names`).
//!
//! Owns these checks. How the finder trusts an artifact is
//! `gpu_archive`'s; this only checks that workflows use it as documented.

use anyhow::Result;

use super::privileged::attacker_controlled;
use super::{Checker, Confidence, Finding, RuleId, Severity};
use crate::contracts::commands;
use crate::contracts::expr;
use crate::contracts::roles::{JobInfo, JobRef};
use crate::contracts::shell::Script;
use crate::contracts::workflow::{Job, Pos, Workflow};
use crate::policy::Policy;

/// `artifact-key`.
pub(super) fn check_artifact_key(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        c.artifact_key(info, job);
        Ok(())
    })
}

/// `artifact-binding`: each reader's reuse, then the run names.
pub(super) fn check_artifact_binding(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if !info.publisher {
            c.artifact_binding(info, job);
        }
        Ok(())
    })?;
    c.run_name_binding();
    Ok(())
}

/// `archive-names`.
pub(super) fn check_archive_names(c: &mut Checker) -> Result<()> {
    let found = archive_names(&c.model.workflows, c.policy);
    c.findings.extend(found);
    Ok(())
}

impl Checker<'_> {
    /// Rule 7: the archive artifact is named by a key computed before any build.
    pub(super) fn artifact_key(&mut self, info: &JobInfo, job: &Job) {
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
                        commands::builds_line(&r.value).map(|line| (wf.locate(r.pos, line), line))
                    })
                    .or_else(|| {
                        step.uses
                            .as_ref()
                            .filter(|u| crate::contracts::workflow::local_uses(&u.value).is_some())
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
            self.push(RuleId::ArtifactKey, at, at.workflow, pos, message);
        }
    }

    /// Rule 7, continued: a reader's artifact reuse is bound to its head
    /// commit. PR code in another run's archive job could upload an artifact
    /// under any name; the finder tells it apart only by the producing run's
    /// name, which GitHub evaluates from `run-name:` before any job runs.
    pub(super) fn artifact_binding(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let mut found = Vec::new();
        for step in &job.steps {
            let Some(run) = &step.run else { continue };
            let script = Script::cached(&run.value);
            let Some(archive) = commands::xtask(&script, "gpu-archive").next() else {
                continue;
            };
            let line = commands::line(&run.value, &script, archive);
            let archive_args = archive.arg_texts();
            if !archive_args.iter().any(|w| w == "--reuse") {
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
            self.push(RuleId::ArtifactBinding, at, at.workflow, pos, message);
        }
    }

    /// `artifact-binding`: the run name the artifact finder trusts contains
    /// nothing the pull request's author picks.
    pub(super) fn run_name_binding(&mut self) {
        let model = self.model;
        for (w, wf) in model.workflows.iter().enumerate() {
            let Some(name) = &wf.run_name else { continue };
            let binds = self.policy.artifacts.trusted_workflows.contains(&wf.name)
                || wf.jobs.iter().any(|j| {
                    j.steps.iter().any(|s| {
                        s.run.as_ref().is_some_and(|r| {
                            commands::runs_xtask(&r.value) && r.value.contains("--reuse")
                        })
                    })
                });
            if !binds || wf.jobs.is_empty() {
                continue;
            }
            for (_, body) in expr::expressions(&name.value) {
                if let Some(context) = attacker_controlled(body) {
                    self.push(
                        RuleId::ArtifactBinding,
                        JobRef { workflow: w, job: 0 },
                        w,
                        name.pos,
                        format!(
                            "the `run-name:` of {} expands `{context}`, which the pull request's author picks; the artifact finder trusts a run whose name states the head commit, so a branch or title could state another commit: use only the head SHA",
                            wf.name
                        ),
                    );
                    if let Some(finding) = self.findings.last_mut() {
                        finding.job = None;
                    }
                }
            }
        }
    }
}

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

/// Every `archives:` input passed to a local reusable workflow, checked
/// against the policy's nextest `[[archive]]` file names.
fn archive_names(workflows: &[Workflow], policy: &Policy) -> Vec<Finding> {
    let built: Vec<&str> = policy
        .archive
        .iter()
        .filter(|a| a.nextest.is_some())
        .map(|a| a.file.as_str())
        .collect();
    let mut findings = Vec::new();
    for workflow in workflows {
        for job in &workflow.jobs {
            let calls_local = job
                .uses
                .as_ref()
                .is_some_and(|u| u.value.starts_with("./.github/workflows/"));
            let Some((_, archives)) = job
                .with
                .iter()
                .find(|(name, _)| name.value == "archives")
                .filter(|_| calls_local)
            else {
                continue;
            };
            let mut finding = |pos: Pos, message: String| {
                findings.push(Finding {
                    rule: RuleId::ArchiveNames.as_str(),
                    severity: Severity::Error,
                    confidence: Confidence::High,
                    question: None,
                    file: workflow.path.clone(),
                    pos,
                    workflow: workflow.name.clone(),
                    job: Some(job.id.value.clone()),
                    message,
                    suppressed: None,
                })
            };
            if archives.value.contains("${{") {
                finding(
                    archives.pos,
                    format!(
                        "job `{}` passes `archives: {}`, an expression; write the archive file names literally so they can be checked against the policy's [[archive]] entries",
                        job.id.value, archives.value
                    ),
                );
                continue;
            }
            let run: Vec<&str> = archives
                .value
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|s| !s.is_empty())
                .collect();
            for name in run.iter().filter(|n| !built.contains(n)) {
                finding(
                    archives.pos,
                    format!(
                        "job `{}` runs the archive {name:?} on the pod, but no nextest [[archive]] of the policy ({}) builds it; the policy builds {built:?}",
                        job.id.value,
                        policy.describe_source()
                    ),
                );
            }
            for name in built.iter().filter(|n| !run.contains(n)) {
                finding(
                    archives.pos,
                    format!(
                        "the policy builds the nextest archive {name:?}, but job `{}` never runs it on the pod (archives: {:?}); add it to `archives`",
                        job.id.value, archives.value
                    ),
                );
            }
        }
    }
    findings
}
