//! Family `caches`: rule `untrusted-cache-save`, the one-writer rule. A job
//! that runs untrusted code never saves a cache and never holds a token
//! that could; a `pull_request` job never writes a store outside GitHub's
//! cache with ambient credentials.
//!
//! Owns these checks and the walk through local composite actions' steps.
//! How a step writes a cache is `contracts/caches.rs`'s (the one table);
//! this module never matches action names itself.

use std::collections::BTreeSet;

use anyhow::Result;

use super::{Checker, RuleId, Severity};
use crate::contracts::caches::{self, cache_env_saves, cache_save};
use crate::contracts::expr;
use crate::contracts::roles::{Actor, JobInfo, JobRef, Level, OwnCopy, Start};
use crate::contracts::workflow::{Job, Pos, Step};

/// `untrusted-cache-save`.
pub(super) fn check_untrusted_cache_save(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.is_untrusted() {
            c.untrusted_cache_save(info, job)?;
        } else if let Some(own) = &info.own_copy {
            c.own_copy_external_saves(info, job, own);
        } else if info.triggers.contains("pull_request") {
            c.pull_request_external_saves(info, job);
        }
        Ok(())
    })
}

impl Checker<'_> {
    /// Rule 1: untrusted-code jobs never save.
    pub(super) fn untrusted_cache_save(&mut self, info: &JobInfo, job: &Job) -> Result<()> {
        let at = info.at;
        let wf = self.model.workflow(at);
        let why = &info.untrusted[0];
        let who = format!("{} ({}, line {})", self.label(at), why.text, why.pos.line);
        // Where it saves, and whether the save goes to GitHub's Actions
        // cache (which `cache-mode:` and GitHub's token defaults govern).
        let mut saves: Vec<(Pos, String, bool)> = Vec::new();
        for step in &job.steps {
            saves.extend(self.step_saves_on(step, &job.runs_on)?);
        }
        let explicit: Vec<(Pos, String)> = cache_env_saves(wf, job);
        let explicit_write = explicit.iter().any(|(_, why)| why.contains("cache-mode"));
        saves.extend(explicit.into_iter().map(|(p, w)| (p, w, true)));
        let credentials = self.credentials(at);
        for save in caches::external_saves(wf, job) {
            if !saves.iter().any(|(pos, _, _)| *pos == save.pos) {
                saves.push((
                    save.pos,
                    format!(
                        "it writes to {}, with {credentials}, which `cache-mode:` does not govern",
                        save.backend
                    ),
                    false,
                ));
            }
        }
        let token = self.cache_write_token(at, &mut BTreeSet::new());
        let explicit_write = explicit_write
            || token
                .as_ref()
                .is_some_and(|(_, why)| why.contains("cache-mode: write"));
        let (severity, question) = self.job_severity(at);
        let actions = self.actions_cache_severity(info, severity, question.clone(), explicit_write);
        for (pos, why, governed) in saves {
            let (severity, question) = if governed {
                actions.clone()
            } else {
                (severity, question.clone())
            };
            self.push_as(
                RuleId::UntrustedCacheSave,
                at,
                at.workflow,
                pos,
                format!("{who} saves to the cache: {why}"),
                severity,
                question,
            );
        }
        if let Some((pos, why)) = token {
            let (severity, question) = actions.clone();
            self.push_as(
                RuleId::UntrustedCacheSave,
                at,
                at.workflow,
                pos,
                format!(
                    "{who} holds a token that can write the cache ({why}); the code it runs can save without any save step, so set `cache-mode: read` (or `none`)"
                ),
                severity,
                question,
            );
        }
        Ok(())
    }

    /// How certain a write to GitHub's Actions cache is: since 2026-06
    /// GitHub issues a read-only cache token to runs a non-collaborator can
    /// start in the default branch's scope (`pull_request_target`,
    /// `issue_comment`, a fork's `workflow_run`), unless `cache-mode: write`
    /// asks for more. A job that runs pull-request code only under such
    /// runs relies on that default: a warning that asks whether it holds.
    fn actions_cache_severity(
        &self,
        info: &JobInfo,
        severity: Severity,
        question: Option<String>,
        explicit_write: bool,
    ) -> (Severity, Option<String>) {
        if severity != Severity::Error || explicit_write {
            return (severity, question);
        }
        let starts: Vec<&Start> = info
            .exposures
            .iter()
            .filter(|e| e.level == Level::Error)
            .flat_map(|e| e.starts.iter())
            .collect();
        if starts.is_empty() || !starts.iter().all(|s| read_only_by_default(s)) {
            return (severity, question);
        }
        (
            Severity::Warning,
            Some("only runs that GitHub gives a read-only cache token by default (since 2026-06) bring the code in: does that default hold where this repository runs (not an older GitHub Enterprise Server)? `cache-mode: read` makes it explicit".to_owned()),
        )
    }

    /// Why a job's token may write the cache when its `cache-mode` does not
    /// say `read` or `none`: its own, else its workflow's, else (for a
    /// reusable workflow) each caller's ceiling. The job's own explicit
    /// `write` is reported by [`cache_env_saves`]; a caller's is reported here.
    pub(super) fn cache_write_token(
        &self,
        at: JobRef,
        seen: &mut BTreeSet<JobRef>,
    ) -> Option<(Pos, String)> {
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
        // Each caller is asked once (cycles and shared callers end), and
        // every caller that lets the job write is named: one finding for
        // the job, listing its callers, whichever way it is reached.
        let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
        for caller in callers {
            if seen.contains(&caller) {
                continue;
            }
            let Some((_, why)) = self.cache_write_token(caller, seen) else {
                continue;
            };
            let name = format!(
                "`{}` of {}",
                self.model.job(caller).id.value,
                self.model.workflow(caller).name
            );
            match reasons.iter_mut().find(|(known, _)| *known == why) {
                Some((_, names)) => names.push(name),
                None => reasons.push((why, vec![name])),
            }
        }
        if reasons.is_empty() {
            return None;
        }
        let text: Vec<String> = reasons
            .into_iter()
            .map(|(why, names)| {
                let callers = if names.len() == 1 {
                    "caller"
                } else {
                    "callers"
                };
                format!("{why}, at its {callers} {}", names.join(", "))
            })
            .collect();
        Some((job.id.pos, text.join("; ")))
    }

    /// Where a step saves to the cache: the step itself, or, for a local
    /// composite action (`uses: ./.github/actions/x`), any step inside it.
    pub(super) fn step_saves(&self, step: &Step) -> Result<Vec<(Pos, String)>> {
        Ok(self
            .step_saves_on(step, &[])?
            .into_iter()
            .map(|(pos, why, _)| (pos, why))
            .collect())
    }

    /// As [`Checker::step_saves`], on a job running on `runs_on`, with
    /// whether each save goes to GitHub's Actions cache (which `cache-mode:`
    /// governs) or elsewhere.
    pub(super) fn step_saves_on(
        &self,
        step: &Step,
        runs_on: &[crate::contracts::workflow::Scalar],
    ) -> Result<Vec<(Pos, String, bool)>> {
        let mut found = Vec::new();
        let mut budget = LOCAL_ACTION_BUDGET;
        self.collect_step_saves(step, None, runs_on, &mut budget, &mut found)?;
        Ok(found)
    }

    pub(super) fn collect_step_saves(
        &self,
        step: &Step,
        outer: Option<Outer<'_>>,
        runs_on: &[crate::contracts::workflow::Scalar],
        budget: &mut usize,
        found: &mut Vec<(Pos, String, bool)>,
    ) -> Result<()> {
        // Inside an action, findings point at the workflow's `uses:` line
        // and name the action file's line.
        let place = |pos: Pos, why: String, governed: bool| match outer {
            None => (pos, why, governed),
            Some((at, file, _)) => (
                at,
                format!("{why} (in {file}, line {})", pos.line),
                governed,
            ),
        };
        if let Some((pos, why)) = cache_save(step) {
            if caches::falls_back_to_actions_cache(step, runs_on) {
                let name = step.action().map_or("", |(n, _)| n);
                found.push(place(
                    pos,
                    format!("`{name}` saves, and on a runner that is not its service's it writes GitHub's Actions cache"),
                    true,
                ));
            } else {
                let governed = caches::saves_to_actions_cache(step, runs_on);
                found.push(place(pos, why, governed));
            }
        }
        let Some(uses) = &step.uses else {
            return Ok(());
        };
        if crate::contracts::workflow::local_uses(&uses.value).is_none() {
            return Ok(());
        }
        let at = outer.map_or(uses.pos, |(at, _, _)| at);
        let inputs = outer.map_or(&[][..], |(_, _, inputs)| inputs);
        let Some(action) =
            crate::contracts::workflow::expand_local_action(self.root, step, inputs)?
        else {
            // Fail closed: an action that is not in the trusted tree comes
            // from a checkout made during the run.
            found.push(place(
                uses.pos,
                format!(
                    "the local action `{}` has no action.yml under {}, so what it saves cannot be checked",
                    uses.value,
                    self.root.display()
                ),
                true,
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
                true,
            ));
            return Ok(());
        }
        *budget -= 1;
        for inner in &action.steps {
            self.collect_step_saves(
                inner,
                Some((at, file, &action.inputs)),
                runs_on,
                budget,
                found,
            )?;
        }
        Ok(())
    }

    /// A pull request's own copy of a job (a mirror's push) runs on its
    /// `pull-request/N` branch, whose Actions cache scope no other branch
    /// restores; a store outside GitHub's cache, written with the
    /// repository's credentials, is shared with default-branch builds.
    pub(super) fn own_copy_external_saves(&mut self, info: &JobInfo, job: &Job, own: &OwnCopy) {
        let who = format!("{} {}", self.label(info.at), own.why.text);
        self.push_external_saves(
            info,
            job,
            |backend, credentials| format!(
                "{who}; it writes to {backend}, with {credentials}: a store shared with default-branch builds, which `cache-mode:` does not govern"
            ),
            crate::contracts::roles::MIRROR_QUESTION,
        );
    }

    /// One `untrusted-cache-save` warning per write of the job to a store
    /// outside GitHub's cache, worded by `message(backend, credentials)`.
    fn push_external_saves(
        &mut self,
        info: &JobInfo,
        job: &Job,
        message: impl Fn(&str, &str) -> String,
        question: &str,
    ) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let credentials = self.credentials(at);
        for save in caches::external_saves(wf, job) {
            self.push_as(
                RuleId::UntrustedCacheSave,
                at,
                at.workflow,
                save.pos,
                message(&save.backend, &credentials),
                Severity::Warning,
                Some(question.to_owned()),
            );
        }
    }

    /// Rule 1, for caches outside GitHub's: a `pull_request` job's Actions
    /// cache writes stay in the pull request's scope, but a write to an S3
    /// bucket, a registry or a binary cache lands where default-branch
    /// builds read, and `cache-mode:` cannot stop it.
    pub(super) fn pull_request_external_saves(&mut self, info: &JobInfo, job: &Job) {
        let at = info.at;
        let wf = self.model.workflow(at);
        let who = self.label(at);
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
        self.push_external_saves(
            info,
            job,
            |backend, credentials| {
                format!(
                    "{who} runs pull-request code (`pull_request`, forks included) and writes to {backend}, with {credentials} and no secret, so a fork's code can write too; that store is shared with default-branch builds and `cache-mode:` does not govern it"
                )
            },
            "does the store accept the runner's own credentials (an instance role, a bucket open to writes) from a fork's run?",
        );
    }
}

/// Where a step inside a local action is reported: the workflow's `uses:`
/// position, the action file, and the action's resolved inputs.
type Outer<'o> = (Pos, &'o str, &'o [(String, String)]);

/// A start whose run GitHub gives a read-only Actions cache token by
/// default: one a non-collaborator can cause in the default branch's scope.
fn read_only_by_default(start: &Start) -> bool {
    matches!(
        start.event.as_str(),
        "pull_request_target" | "issue_comment" | "issues" | "discussion" | "discussion_comment"
    ) || start.event == "workflow_run" && start.actor == Actor::Outsider
}

/// How many local actions one step may expand (nested uses included)
/// before the check stops and reports: a cycle or a wide tree of actions
/// must not make the check run for ever.
pub const LOCAL_ACTION_BUDGET: usize = 64;
