//! What every job is: publisher, untrusted-code job, pod job, lifecycle job
//! or isolated writer, inferred from the workflows themselves.
//!
//! A job's role depends on more than its own file: a job that calls a
//! reusable workflow (`uses: ./.github/workflows/x.yml`) carries its
//! caller's triggers, token permissions and publisher status into the
//! callee's jobs, so roles are computed over the whole workflow set.

mod code;
mod downloads;
mod flow;
mod gates;
mod runners;
mod starts;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;

use super::workflow::{Job, Permissions, Pos, Scalar, Workflow};
use crate::policy::Policy;
use code::{Brought, other_code};
use downloads::{taint_branch_run_downloads, taint_same_run_downloads};
pub use flow::JobScope;
use flow::Memo;
use runners::runs_on_pod;
use starts::Starts;

use super::eval::{Names, Taint};

pub use code::other_run_download;
pub use runners::is_hosted;
pub use starts::{Actor, Mirror, Start};

/// Events whose runs execute with the default branch's privileges (its
/// cache scope, its secrets) while a pull request may control what they check out.
/// `schedule` always runs on the default branch: a nightly job that checks
/// out open pull requests writes the default branch's cache as surely as a
/// `workflow_run` one.
pub const PRIVILEGED_EVENTS: &[&str] = &[
    "workflow_run",
    "pull_request_target",
    "issue_comment",
    "workflow_dispatch",
    "repository_dispatch",
    "schedule",
];

/// A job, by workflow and job index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct JobRef {
    pub workflow: usize,
    pub job: usize,
}

/// Why a job has a role: where, and in words.
#[derive(Debug, Clone)]
pub struct Why {
    pub pos: Pos,
    pub text: String,
}

/// The token permissions a job runs with, and where they come from.
#[derive(Debug, Clone)]
pub struct EffectivePermissions {
    /// `None`: nothing sets them, so the repository default applies (counted as write).
    pub permissions: Option<Permissions>,
    pub origin: String,
    /// The workflow (index) whose file sets them.
    pub workflow: usize,
}

impl EffectivePermissions {
    /// True when the token may write `scope` (explicitly or via `write-all`).
    pub fn writes(&self, scope: &str) -> bool {
        match &self.permissions {
            None => false,
            Some(Permissions::Shorthand(s)) => s.value == "write-all",
            Some(Permissions::Map { scopes, .. }) => scopes
                .iter()
                .any(|(name, level)| name.value == scope && level.value == "write"),
        }
    }
}

/// How sure a path is: a concrete one from attacker bytes to a
/// credential or a shared cache, or one that depends on something the
/// repository does not show (a maintainer's choice, an unseen value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warning,
}

/// One way pull-request bytes (or bytes someone chose) become code in a
/// job: where, what, how sure, and under which starts.
#[derive(Debug, Clone)]
pub struct Exposure {
    pub pos: Pos,
    pub what: String,
    pub level: Level,
    /// The events of the starts it happens under.
    pub events: BTreeSet<String>,
    /// Who can cause it, in words.
    pub who: BTreeSet<String>,
    /// The starts it happens under.
    pub starts: Vec<Start>,
    /// For a download of a workflow's runs on this repository's own
    /// branches: that workflow (see `code::BranchRuns`).
    pub artifacts_of: Option<usize>,
}

impl Exposure {
    /// The exposure as a role reason, in words.
    pub fn why(&self) -> Why {
        let events: Vec<String> = self.events.iter().map(|e| format!("`{e}`")).collect();
        let who: Vec<&str> = self.who.iter().map(String::as_str).collect();
        Why {
            pos: self.pos,
            text: format!(
                "{} in a workflow started by {} ({})",
                self.what,
                events.join(", "),
                who.join("; ")
            ),
        }
    }
}

#[derive(Debug)]
pub struct JobInfo {
    pub at: JobRef,
    /// The events that can start this job, through callers for reusable
    /// workflows and `workflow_run` chains, where its `if:` can be true.
    pub triggers: BTreeSet<String>,
    pub publisher: bool,
    /// Every start that reaches the job (its `if:` can be true there).
    pub starts: Vec<Start>,
    /// The ways code not from the default branch runs in the job.
    pub exposures: Vec<Exposure>,
    /// Why this job runs code not from the default branch in a privileged
    /// scope (the exposures in words); empty when it does not.
    pub untrusted: Vec<Why>,
    /// Set when the job runs on a self-hosted (pod) runner.
    pub pod: Option<Why>,
    /// The pod is known to be ephemeral (policy `ephemeral-labels`, or a
    /// label made for this run by an earlier job): it keeps no state.
    pub ephemeral: bool,
    /// For a runner given as `${{ inputs.NAME }}`: the literal labels its
    /// callers pass (empty otherwise).
    pub passed_labels: Vec<String>,
    pub lifecycle: bool,
    /// One entry per way the job can be started (several callers may differ).
    pub permissions: Vec<EffectivePermissions>,
    /// For a job that calls a local reusable workflow: the callee's index.
    pub callee: Option<usize>,
    /// Set when a mirror's push runs the pull request's own copy of the job
    /// ([`Start::runs_own_copy`]). Kept apart from `exposures`: the steps,
    /// guards and permissions of that copy are its author's, so the rules
    /// that judge this repository's copy of them do not apply to it; what
    /// the run reaches is reported once per repository
    /// (`untrusted-secrets`), with its runner (`persistent-runner`) and its
    /// writes to stores outside GitHub's cache (`untrusted-cache-save`).
    pub own_copy: Option<OwnCopy>,
}

/// A job a mirror's push runs as the pull request's own copy.
#[derive(Debug, Clone)]
pub struct OwnCopy {
    pub why: Why,
    /// The workflows whose `push` starts it (the runs' tops).
    pub tops: BTreeSet<usize>,
}

impl JobInfo {
    pub fn is_untrusted(&self) -> bool {
        !self.untrusted.is_empty()
    }

    /// The most certain of the job's exposures (`Error` without any).
    pub fn level(&self) -> Level {
        self.exposures
            .iter()
            .map(|e| e.level)
            .min()
            .unwrap_or(Level::Error)
    }

    /// The role in words, for messages.
    pub fn role(&self) -> &'static str {
        if self.publisher {
            "publisher job"
        } else if self.pod.is_some() {
            "pod job"
        } else if self.is_untrusted() {
            "untrusted-code job"
        } else if self.lifecycle {
            "lifecycle job"
        } else if self.triggers.iter().all(|t| t == "pull_request") {
            "isolated writer"
        } else {
            "job"
        }
    }

    fn rebuild_untrusted(&mut self) {
        self.exposures
            .sort_by(|a, b| (a.pos, a.level, &a.what).cmp(&(b.pos, b.level, &b.what)));
        let mut merged: Vec<Exposure> = Vec::new();
        for e in std::mem::take(&mut self.exposures) {
            match merged
                .iter_mut()
                .find(|m| m.pos == e.pos && m.what == e.what)
            {
                Some(m) => {
                    m.level = m.level.min(e.level);
                    m.events.extend(e.events);
                    m.who.extend(e.who);
                    m.starts.extend(e.starts);
                    m.starts.sort();
                    m.starts.dedup();
                }
                None => merged.push(e),
            }
        }
        merged.sort_by_key(|e| (e.level, e.pos));
        self.untrusted = merged.iter().map(Exposure::why).collect();
        self.exposures = merged;
    }
}

/// The workflow set with every job's inferred role.
pub struct Model {
    pub workflows: Vec<Workflow>,
    pub jobs: Vec<JobInfo>,
    index: BTreeMap<JobRef, usize>,
    /// Calls of local reusable workflows the tree does not have: the
    /// calling job and the `uses:` value.
    pub missing_callees: Vec<(JobRef, Scalar)>,
    /// Who calls each workflow (`uses: ./…`).
    callers: BTreeMap<usize, Vec<JobRef>>,
    memo: Memo,
    policy: Policy,
    /// The bot that pushes pull requests into this repository's branches, if the tree enables one.
    pub mirror: Option<Mirror>,
}

/// How certain an exposure is under `start`, for bytes chosen by a value of
/// `taint`; `None` when nobody who can start the run controls them.
fn classify(start: &Start, taint: Taint, policy: &Policy) -> Option<(Level, String)> {
    let members_untrusted = policy.contracts.same_repository_pull_requests_untrusted();
    let who = start.who();
    // A ref a dispatcher's input named (a pull request number, a branch):
    // the recovery path, whoever's bytes they are.
    if taint.pr() && taint.has(Taint::MAINTAINER) {
        let text = match start.actor {
            Actor::Maintainer => {
                "a maintainer's dispatch that names a pull request or a ref (the recovery path: the dispatcher chooses the code)"
            }
            _ => {
                "a member's comment, or a run past a gate on its actor, that runs a pull request's code (the recovery path: a member chooses to run it)"
            }
        };
        return Some((Level::Warning, text.to_owned()));
    }
    if taint.pr() {
        return match start.actor {
            Actor::Outsider => Some((Level::Error, who)),
            Actor::Member if members_untrusted => Some((Level::Error, who)),
            Actor::Member => None,
            Actor::Maintainer | Actor::Repository => Some((
                Level::Error,
                format!("{who} that brings in pull requests' code (their authors choose it)"),
            )),
        };
    }
    if taint.has(Taint::MAINTAINER) {
        return Some((
            Level::Warning,
            "a maintainer's dispatch input chooses the code (the recovery path)".to_owned(),
        ));
    }
    if taint.has(Taint::UNSEEN) {
        return Some((
            Level::Warning,
            "depends on a value the workflows do not show: what chooses it?".to_owned(),
        ));
    }
    None
}

/// Events whose runs are a pull request's own (its definition, its
/// merge-ref cache scope, no secrets for forks): nothing is exposed there
/// that the pull request does not already have.
const ISOLATED_EVENTS: &[&str] = &[
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
];

impl Model {
    /// `root` is the repository whose local actions (`uses: ./…`) are read.
    #[cfg(test)]
    pub fn new(workflows: Vec<Workflow>, policy: &Policy, root: &Path) -> Result<Model> {
        Model::build(workflows, policy, root, &BTreeSet::new())
    }

    /// As [`Model::new`]; `broken` names the workflow files that did not
    /// parse (reported as `parse-error`), whose callers are not an error.
    pub fn build(
        workflows: Vec<Workflow>,
        policy: &Policy,
        root: &Path,
        broken: &BTreeSet<String>,
    ) -> Result<Model> {
        let by_name: BTreeMap<&str, usize> = workflows
            .iter()
            .enumerate()
            .map(|(i, wf)| (wf.name.as_str(), i))
            .collect();

        // Who calls whom.
        let mut callers: BTreeMap<usize, Vec<JobRef>> = BTreeMap::new();
        let mut callees: BTreeMap<JobRef, usize> = BTreeMap::new();
        let mut missing_callees = Vec::new();
        for (w, wf) in workflows.iter().enumerate() {
            for (j, job) in wf.jobs.iter().enumerate() {
                let Some(uses) = &job.uses else { continue };
                let Some(local) = super::workflow::local_uses(&uses.value) else {
                    continue;
                };
                let name = local.rsplit('/').next().unwrap_or(local);
                if broken.contains(name) {
                    continue;
                }
                let at = JobRef {
                    workflow: w,
                    job: j,
                };
                let Some(&callee) = by_name.get(name) else {
                    missing_callees.push((at, uses.clone()));
                    continue;
                };
                callers.entry(callee).or_default().push(at);
                callees.insert(at, callee);
            }
        }

        let known = known_names(policy, root);
        let self_names = self_names(&workflows, &known);
        let memo = Memo::new(known);
        let mirror = Mirror::of_tree(root);
        let starts = Starts::compute(&memo, &workflows, &callers, policy, mirror.as_ref());
        let publisher_wf: Vec<bool> = (0..workflows.len())
            .map(|w| is_publisher(&workflows, &callers, policy, w, &mut BTreeSet::new()))
            .collect();

        let mut jobs = Vec::new();
        let mut index = BTreeMap::new();
        for (w, wf) in workflows.iter().enumerate() {
            for (j, job) in wf.jobs.iter().enumerate() {
                let at = JobRef {
                    workflow: w,
                    job: j,
                };
                let reachable: Vec<Start> = starts.by_workflow[w]
                    .iter()
                    .filter(|s| starts::job_runs(&memo, &workflows, &callers, policy, at, s))
                    .cloned()
                    .collect();
                let job_triggers: BTreeSet<String> =
                    reachable.iter().map(|s| s.event.clone()).collect();
                let reachable_starts = reachable.clone();
                let runner = runs_on_pod(&workflows, &callers, at, policy);
                let pod = runner.as_ref().map(|(why, _, _)| why.clone());
                let ephemeral = runner.as_ref().is_some_and(|(_, e, _)| *e);
                let passed_labels = runner.map(|(_, _, labels)| labels).unwrap_or_default();
                let publisher = publisher_wf[w];
                // What every step of the job starts with: the default
                // working directory and the job's and workflow's env.
                let surroundings: Vec<&str> = job
                    .default_working_directory
                    .iter()
                    .chain(&wf.default_working_directory)
                    .map(|d| d.value.as_str())
                    .chain(job.env.iter().chain(&wf.env).map(|(_, v)| v.value.as_str()))
                    .collect();
                let mut exposures = Vec::new();
                let mut own_copy: Option<OwnCopy> = None;
                for start in &reachable_starts {
                    if ISOLATED_EVENTS.contains(&start.event.as_str()) {
                        continue;
                    }
                    if start.runs_own_copy() {
                        if let Some(mirror) = &mirror {
                            let why = mirrored_workflow(&workflows, at, start, mirror);
                            own_copy
                                .get_or_insert_with(|| OwnCopy {
                                    why,
                                    tops: BTreeSet::new(),
                                })
                                .tops
                                .insert(start.top);
                        }
                        continue;
                    }
                    let scope = JobScope::new(&memo, &workflows, &callers, policy, at, start);
                    let mut brought = other_code(job, &scope, root, &self_names, &surroundings)?;
                    if !publisher {
                        brought.extend(remote_workflow(job, &scope, start));
                    }
                    for b in brought {
                        let Some((level, who)) = classify(start, b.taint, policy) else {
                            continue;
                        };
                        // A mirror's run waits for a maintainer's vetting:
                        // the path depends on what that vetting reads.
                        let b = if start.mirror {
                            Brought {
                                unsure: b.unsure.or_else(|| Some(MIRROR_QUESTION.to_owned())),
                                ..b
                            }
                        } else {
                            b
                        };
                        // Whether the bytes run is not in the workflows: a
                        // warning that says what it depends on.
                        let (level, what) = match &b.unsure {
                            Some(question) => (
                                level.max(Level::Warning),
                                format!("{} (depends on: {question})", b.what),
                            ),
                            None => (level, b.what),
                        };
                        exposures.push(Exposure {
                            pos: b.pos,
                            what,
                            level,
                            events: BTreeSet::from([start.event.clone()]),
                            who: BTreeSet::from([who]),
                            starts: vec![start.clone()],
                            artifacts_of: b.artifacts_of,
                        });
                    }
                }
                let permissions = effective_permissions(&workflows, &callers, at, 0);
                let mut info = JobInfo {
                    at,
                    triggers: job_triggers,
                    starts: reachable,
                    publisher,
                    exposures,
                    untrusted: Vec::new(),
                    pod,
                    ephemeral,
                    passed_labels,
                    lifecycle: false,
                    permissions,
                    callee: callees.get(&at).copied(),
                    own_copy,
                };
                info.rebuild_untrusted();
                info.lifecycle = !publisher
                    && info.untrusted.is_empty()
                    && info.permissions.iter().any(|p| p.writes("actions"));
                index.insert(at, jobs.len());
                jobs.push(info);
            }
        }
        taint_same_run_downloads(&workflows, &callees, &mut jobs);
        taint_branch_run_downloads(&workflows, &callees, &mut jobs);
        for info in &mut jobs {
            info.rebuild_untrusted();
        }
        Ok(Model {
            workflows,
            jobs,
            index,
            missing_callees,
            callers,
            memo,
            policy: policy.clone(),
            mirror,
        })
    }

    /// What job `at` sees under `start`, at step `step` (`None`: the job's own level).
    pub fn scope<'a>(&'a self, at: JobRef, start: &'a Start, step: Option<usize>) -> JobScope<'a> {
        let scope = JobScope::new(
            &self.memo,
            &self.workflows,
            &self.callers,
            &self.policy,
            at,
            start,
        );
        match step {
            Some(i) => scope.at_step(i),
            None => scope,
        }
    }

    pub fn workflow(&self, at: JobRef) -> &Workflow {
        &self.workflows[at.workflow]
    }

    pub fn job(&self, at: JobRef) -> &Job {
        &self.workflows[at.workflow].jobs[at.job]
    }

    pub fn info(&self, at: JobRef) -> &JobInfo {
        &self.jobs[self.index[&at]]
    }

    /// The jobs of a callee workflow.
    pub fn jobs_of(&self, workflow: usize) -> impl Iterator<Item = &JobInfo> {
        self.jobs.iter().filter(move |j| j.at.workflow == workflow)
    }
}

/// What a mirror's run depends on.
pub const MIRROR_QUESTION: &str = "does the maintainer who comments `/ok to test` read every change first, this repository's workflow files and build scripts included? The pushed commit's own copy of every workflow runs, with the repository's secrets";

/// Under a mirror's push, the job itself is the pull request's: GitHub
/// runs the workflow files of the pushed commit, so the author chose every
/// step, and may add jobs that take any secret this repository has.
fn mirrored_workflow(workflows: &[Workflow], at: JobRef, start: &Start, mirror: &Mirror) -> Why {
    let top = &workflows[start.top];
    let line = top.trigger("push").map_or(0, |t| t.event.pos.line);
    let job = &workflows[at.workflow].jobs[at.job];
    Why {
        pos: job.id.pos,
        text: format!(
            "runs as the pull request's own copy: `{}` enables copy-pr-bot, whose push to `pull-request/N` starts `{}` (`on: push`, line {line}), once a maintainer comments `/ok to test`",
            mirror.file, top.name
        ),
    }
}

/// A call of a remote reusable workflow (`owner/repo/.github/workflows/x.yml@v`),
/// whose jobs this check cannot see: it runs a pull request's code when a
/// `with:` value carries it, or when the event's payload is the pull
/// request's (`pull_request_target`, `issue_comment`: the callee can read it).
fn remote_workflow(job: &Job, scope: &JobScope, start: &Start) -> Vec<Brought> {
    let Some(uses) = job
        .uses
        .as_ref()
        .filter(|u| super::workflow::local_uses(&u.value).is_none())
    else {
        return Vec::new();
    };
    let carrying = matches!(
        start.event.as_str(),
        "pull_request_target" | "issue_comment"
    );
    // A ref or SHA a pull request (or a dispatcher) chose, handed to the
    // callee, names the code it may check out: a concrete path. Text, or
    // only the event's payload, is the callee's to use in ways this check
    // cannot see: a path that depends on it.
    let input = job.with.iter().find_map(|(name, value)| {
        let t = scope.value(&value.value).taint();
        (t.has(Taint::PR_REF) || t.has(Taint::MAINTAINER)).then_some((name, value, t))
    });
    let text = job.with.iter().find_map(|(name, value)| {
        let t = scope.value(&value.value).taint();
        t.has(Taint::PR_TEXT).then_some((name, value))
    });
    let (evidence, taint) = match (input, text, carrying) {
        (Some((name, value, t)), _, _) => (
            format!(
                "passes `{}: {}`, which {} controls,",
                name.value,
                value.value,
                if t.pr() {
                    "a pull request"
                } else {
                    "a dispatch input"
                }
            ),
            t,
        ),
        (None, Some((name, value)), _) => (
            format!(
                "passes `{}: {}`, text a pull request's author writes (does the callee run it, or check out what it names?),",
                name.value, value.value
            ),
            Taint::UNSEEN,
        ),
        (None, None, true) => (
            format!(
                "is started by `{}`, whose payload a pull request controls (does the callee check it out?),",
                start.event
            ),
            Taint::UNSEEN,
        ),
        (None, None, false) => return Vec::new(),
    };
    vec![Brought {
        pos: uses.pos,
        what: format!(
            "calls the reusable workflow `{}`, whose jobs this check cannot see, and {evidence}",
            uses.value
        ),
        taint,
        unsure: None,
        artifacts_of: None,
    }]
}

/// The names this repository is known by (`owner/name`): the policy's
/// `[contracts] repository` (or `--repository`), which is authoritative;
/// else every GitHub remote of a git checkout at `root` (a fork's clone has
/// its own name, so the remotes are not all the repository can be called).
pub(super) fn known_names(policy: &Policy, root: &Path) -> Names {
    if let Some(name) = &policy.contracts.repository {
        return Names {
            names: vec![name.clone()],
            authoritative: true,
        };
    }
    let mut names = Vec::new();
    for line in git_config(root).lines() {
        let Some(url) = line.trim().strip_prefix("url = ") else {
            continue;
        };
        if let Some(rest) = url.split("github.com").nth(1) {
            let name = rest
                .trim_start_matches([':', '/'])
                .trim_end_matches('/')
                .trim_end_matches(".git");
            if name.matches('/').count() == 1 {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    Names {
        names,
        authoritative: false,
    }
}

/// The git configuration of the checkout at `root` (`.git/config`, or the
/// common directory's of a worktree or submodule), empty when none.
fn git_config(root: &Path) -> String {
    let dot_git = root.join(".git");
    let dir = if dot_git.is_file() {
        let Ok(text) = std::fs::read_to_string(&dot_git) else {
            return String::new();
        };
        let Some(gitdir) = text.trim().strip_prefix("gitdir:") else {
            return String::new();
        };
        let gitdir = root.join(gitdir.trim());
        match std::fs::read_to_string(gitdir.join("commondir")) {
            Ok(common) => gitdir.join(common.trim()),
            Err(_) => gitdir,
        }
    } else {
        dot_git
    };
    std::fs::read_to_string(dir.join("config")).unwrap_or_default()
}

/// The names this repository goes by (`owner/name`): the names it is
/// known by, and (unless the policy says which it is) the literals its
/// workflows compare `github.repository` with.
fn self_names(workflows: &[Workflow], known: &Names) -> Vec<String> {
    let mut names = known.names.clone();
    if known.authoritative {
        return names;
    }
    for wf in workflows {
        for line in &wf.lines {
            let Some(at) = line.find("github.repository") else {
                continue;
            };
            let rest = &line[at + "github.repository".len()..];
            let rest = rest.trim_start();
            let Some(rest) = rest.strip_prefix("==") else {
                continue;
            };
            let rest = rest.trim_start();
            if let Some(lit) = rest.strip_prefix('\'').and_then(|r| r.split('\'').next()) {
                if lit.matches('/').count() == 1 {
                    names.push(lit.to_owned());
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

pub(super) fn is_publisher(
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    policy: &Policy,
    w: usize,
    seen: &mut BTreeSet<usize>,
) -> bool {
    if policy.publisher.workflows.contains(&workflows[w].name) {
        return true;
    }
    if !seen.insert(w) {
        return false;
    }
    // A reusable workflow called only by publisher jobs is part of the publisher.
    let list = callers.get(&w).map(Vec::as_slice).unwrap_or_default();
    !list.is_empty()
        && list
            .iter()
            .all(|c| is_publisher(workflows, callers, policy, c.workflow, seen))
}

pub(super) fn effective_permissions(
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    at: JobRef,
    depth: usize,
) -> Vec<EffectivePermissions> {
    let wf = &workflows[at.workflow];
    let job = &wf.jobs[at.job];
    if let Some(p) = &job.permissions {
        return vec![EffectivePermissions {
            permissions: Some(p.clone()),
            origin: format!("set on job `{}` in {}", job.id.value, wf.name),
            workflow: at.workflow,
        }];
    }
    if let Some(p) = &wf.permissions {
        return vec![EffectivePermissions {
            permissions: Some(p.clone()),
            origin: format!(
                "inherited from the workflow-level permissions of {}",
                wf.name
            ),
            workflow: at.workflow,
        }];
    }
    // A reusable workflow without permissions runs with its caller's token.
    let list = callers
        .get(&at.workflow)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !list.is_empty() && depth < 8 {
        return list
            .iter()
            .flat_map(|caller| effective_permissions(workflows, callers, *caller, depth + 1))
            .map(|mut p| {
                p.origin = format!("{}, which calls {}", p.origin, wf.name);
                p
            })
            .collect();
    }
    vec![EffectivePermissions {
        permissions: None,
        origin: "the repository default (no `permissions:` anywhere)".to_owned(),
        workflow: at.workflow,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(files: &[(&str, &str)]) -> Model {
        let workflows = files
            .iter()
            .map(|(name, text)| {
                Workflow::parse(&format!(".github/workflows/{name}"), text).unwrap()
            })
            .collect();
        Model::new(workflows, &Policy::default(), Path::new(".")).unwrap()
    }

    #[test]
    fn roles_are_inferred_through_reusable_workflows() {
        let m = model(&[
            (
                "consumer.yml",
                "on: workflow_run\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n      - run: cargo build\n  call:\n    permissions:\n      actions: write\n    uses: ./.github/workflows/pod.yml\n",
            ),
            (
                "pod.yml",
                "on: workflow_call\njobs:\n  gpu:\n    runs-on: [self-hosted]\n    steps: []\n  watch:\n    runs-on: ubuntu-latest\n    steps: []\n",
            ),
            (
                "ci.yml",
                "on: pull_request\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: git checkout x\n",
            ),
        ]);
        let info = |w, j| {
            m.info(JobRef {
                workflow: w,
                job: j,
            })
        };
        assert!(info(0, 0).is_untrusted());
        assert_eq!(info(0, 0).untrusted[0].pos.line, 8);
        assert!(info(0, 1).lifecycle);
        assert!(info(1, 0).pod.is_some());
        assert!(info(1, 0).triggers.contains("workflow_run"));
        assert!(
            info(1, 1).lifecycle,
            "the callee inherits the caller's actions: write"
        );
        assert!(!info(2, 0).is_untrusted(), "pull_request runs are isolated");
        assert_eq!(info(2, 0).role(), "isolated writer");
    }

    #[test]
    fn same_run_downloads_are_tainted_only_by_jobs_of_that_run() {
        let download =
            "    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/download-artifact@v4\n";
        let m = model(&[
            (
                "consumer.yml",
                &format!(
                    "on: workflow_run\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: gh pr checkout 1 && cargo build\n  cache:\n{download}  call:\n    uses: ./.github/workflows/shared.yml\n"
                ),
            ),
            (
                "publish.yml",
                &format!(
                    "on: [push, workflow_dispatch]\njobs:\n  cache:\n{download}  call:\n    uses: ./.github/workflows/shared.yml\n"
                ),
            ),
            (
                "shared.yml",
                &format!("on: workflow_call\njobs:\n  fetch:\n{download}"),
            ),
        ]);
        let info = |w, j| {
            m.info(JobRef {
                workflow: w,
                job: j,
            })
        };
        assert!(info(0, 1).is_untrusted(), "the consumer's downloader");
        assert!(
            info(2, 0).is_untrusted(),
            "the shared callee also runs in the consumer's run"
        );
        assert!(
            !info(1, 0).is_untrusted(),
            "the publisher's run has no untrusted-code job"
        );
    }

    #[test]
    fn hosted_labels_from_the_policy_are_not_pods() {
        let wf = Workflow::parse(
            ".github/workflows/a.yml",
            "on: workflow_dispatch\njobs:\n  a:\n    runs-on: big-linux-16core\n    steps: []\n",
        )
        .unwrap();
        let policy =
            Policy::parse("[contracts]\nhosted-labels = [\"big-linux-16core\"]\n").unwrap();
        let m = Model::new(vec![wf], &policy, Path::new(".")).unwrap();
        assert!(m.jobs[0].pod.is_none());
        let wf = Workflow::parse(
            ".github/workflows/a.yml",
            "on: workflow_dispatch\njobs:\n  a:\n    runs-on: big-linux-16core\n    steps: []\n",
        )
        .unwrap();
        let m = Model::new(vec![wf], &Policy::default(), Path::new(".")).unwrap();
        assert!(
            m.jobs[0].pod.is_some(),
            "an unknown label is a self-hosted pod"
        );
    }

    #[test]
    fn a_missing_callee_is_recorded_on_the_calling_job() {
        let wf = Workflow::parse(
            ".github/workflows/a.yml",
            "on: push\njobs:\n  a:\n    uses: ./.github/workflows/gone.yml\n",
        )
        .unwrap();
        let m = Model::new(vec![wf], &Policy::default(), Path::new(".")).unwrap();
        assert_eq!(m.missing_callees.len(), 1);
        let (at, uses) = &m.missing_callees[0];
        assert_eq!((at.job, uses.pos.line, uses.pos.column), (0, 4, 11));
    }
}
