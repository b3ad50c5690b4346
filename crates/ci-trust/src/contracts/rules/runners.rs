//! Family `runners`: rule `persistent-runner`. Pull-request code on a
//! self-hosted runner that keeps its state, shared with a trusted job that
//! has something to lose, or a self-hosted runner handed to a remote
//! reusable workflow by a pull request.
//!
//! Owns this check. Which labels are hosted or ephemeral is `roles/runners.rs`'s.

use std::collections::BTreeSet;

use anyhow::Result;

use super::{Checker, RuleId};
use crate::contracts::caches::cache_save;
use crate::contracts::expr;
use crate::contracts::roles::JobInfo;
use crate::contracts::workflow::Job;

/// `persistent-runner`.
pub(super) fn check_persistent_runner(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        c.persistent_runner(info, job);
        Ok(())
    })
}

impl Checker<'_> {
    /// Pull-request code on a self-hosted runner that keeps its state
    /// between jobs: what it leaves (the tool cache, `~/`, cargo and ccache
    /// directories, a process left running) reaches the next job there,
    /// trusted ones and their secrets included.
    pub(super) fn persistent_runner(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let pr_code = info.triggers.contains("pull_request")
            || info.own_copy.is_some()
            || info
                .untrusted
                .iter()
                .any(|why| info.pod.as_ref().is_none_or(|pod| pod.text != why.text));
        // A runner group (or a runner named by an expression) usually fronts
        // an autoscaled fleet whose ephemerality the workflow cannot show;
        // labels of individually registered runners are what is reported,
        // and any runner whose job mounts host storage into its container
        // (that storage is there for the next job, whatever the fleet).
        let labelled = job.runs_on_unresolved.is_none()
            || !info.passed_labels.is_empty()
            || !job.host_mounts.is_empty();
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
            } else if let Some(own) = info.own_copy.as_ref().filter(|_| info.untrusted.is_empty()) {
                format!("({})", own.why.text)
            } else {
                info.untrusted
                    .iter()
                    .find(|why| why.text != pod.text)
                    .map_or_else(String::new, |why| format!("({})", why.text))
            };
            self.push(
                RuleId::PersistentRunner,
                at,
                at.workflow,
                pod.pos,
                format!(
                    "{} runs pull-request code {how} on a self-hosted runner ({}{}) that is not known to be ephemeral: the runner state that code leaves (tool cache, `~/`, build caches, a process left running) reaches later jobs on that machine, such as {exposed}",
                    self.label(at),
                    pod.text,
                    job.host_mounts.first().map_or_else(String::new, |mount| format!(
                        "; its container mounts the host's `{}`",
                        mount.value
                    ))
                ),
            );
        }
        // A reusable workflow handed a self-hosted runner by a job that
        // pull requests start, with secrets in scope.
        let remote = job
            .uses
            .as_ref()
            .filter(|u| crate::contracts::workflow::local_uses(&u.value).is_none());
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
                        .any(|l| !crate::contracts::roles::is_hosted(l, self.policy))
            });
            if let Some((name, value)) = runner {
                self.push(
                    RuleId::PersistentRunner,
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

    /// A trusted job that runs on the same self-hosted runners as `info`
    /// (a shared specific label, or runner group) and has something to
    /// lose: secrets, a cache write, or the publisher role. In words.
    pub(super) fn trusted_sharer(&self, info: &JobInfo, job: &Job) -> Option<String> {
        let keys = runner_keys(info, job);
        self.model.jobs.iter().find_map(|other| {
            let other_job = self.model.job(other.at);
            // Not the starts that run the pull request's workflow code (its
            // own events, a mirror's push of it); `pull_request_target`
            // runs the default branch's, with secrets.
            let trusted_events: BTreeSet<&String> = other
                .starts
                .iter()
                .filter(|s| s.runs_this_repositorys_copy())
                .map(|s| &s.event)
                .collect();
            // The job itself, started by a trusted event, is the next job
            // on its machine even where other starts bring in untrusted
            // code (a nightly that also runs for pull requests).
            let itself = other.at == info.at;
            let wf = self.model.workflow(other.at);
            let secret = other_job
                .scalars
                .iter()
                .chain(wf.env.iter().map(|(_, v)| v))
                .flat_map(|s| expr::secret_refs(&s.value))
                .find_map(|r| r.name.filter(|n| n != "GITHUB_TOKEN"));
            // GitHub hands secrets to a pull request from a branch of this
            // repository: such a run of this job (a member's, behind the
            // same label gate) is the next job a fork's run leaves state
            // for (NVIDIA/NeMo-Skills `gpu_tests.yml`, holdout6's R4).
            let member_pull_request = itself
                && trusted_events.is_empty()
                && secret.is_some()
                && other.triggers.iter().any(|t| t == "pull_request");
            if other.pod.is_none()
                || (other.is_untrusted() && !itself)
                || (trusted_events.is_empty() && !member_pull_request)
                || runner_keys(other, other_job).is_disjoint(&keys)
            {
                return None;
            }
            if member_pull_request {
                return Some(format!(
                    "this job itself, which receives `secrets.{}` when a pull request from a branch of this repository starts it",
                    secret.unwrap_or_default()
                ));
            }
            let saves = other_job.steps.iter().any(|s| cache_save(s).is_some());
            // A trusted run's cache token is on the machine while it runs
            // (the runner's worker holds it, under the same user as what
            // the pull request left running), and it writes the shared
            // scope of the run's branch.
            let cache_token = || {
                trusted_events.iter().any(|t| {
                    matches!(
                        t.as_str(),
                        "push" | "schedule" | "workflow_dispatch" | "merge_group" | "release"
                    )
                }) && self
                    .cache_write_token(other.at, &mut BTreeSet::new())
                    .is_some()
            };
            let stake = match (secret, saves || other.publisher) {
                (Some(name), _) => format!("receives `secrets.{name}`"),
                (None, true) => "writes the cache".to_owned(),
                (None, false) if cache_token() => {
                    "holds a token that can write its branch's cache".to_owned()
                }
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
}

/// The runners a job may land on, for comparing jobs: its specific labels
/// (lowercased; `self-hosted`, OS and architecture labels say nothing on
/// their own) or its runner group, else `self-hosted` (any runner).
fn runner_keys(info: &JobInfo, job: &Job) -> BTreeSet<String> {
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
    // A runner its callers pass: the labels they pass, else the expression.
    if info.passed_labels.is_empty() {
        keys.extend(
            job.runs_on_unresolved
                .iter()
                .map(|u| u.value.trim().to_ascii_lowercase()),
        );
    } else {
        keys.extend(
            info.passed_labels
                .iter()
                .map(|l| l.trim().to_ascii_lowercase())
                .filter(|l| !GENERIC.contains(&l.as_str())),
        );
    }
    if keys.is_empty() {
        keys.insert("self-hosted".to_owned());
    }
    keys
}
