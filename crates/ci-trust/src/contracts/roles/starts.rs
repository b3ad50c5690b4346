//! Who can start a job, and through what: every way a run reaches a job
//! (an event of its workflow, of a caller through `workflow_call`, or of an
//! upstream workflow through `workflow_run`), with the person whose action
//! starts it, and only where the job's (and its callers') `if:` can be true
//! under that event.
//!
//! Owns: [`Start`], [`Actor`] and the reachability of jobs. Must not:
//! decide what the job runs (`code.rs`) or what values it sees (`flow.rs`
//! answers, given a start).

use std::collections::{BTreeMap, BTreeSet};

use super::JobRef;
use super::flow::{JobScope, Memo};
use crate::contracts::eval::{self, Tri};
use crate::contracts::workflow::Workflow;
use crate::policy::Policy;

/// Whose action starts a run, as the attacker model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Actor {
    /// Anyone: the author of a fork's pull request, of an issue or a comment.
    Outsider,
    /// The author of a pull request from a branch of this repository (write access).
    Member,
    /// Whoever dispatches the run (write access), choosing its inputs.
    Maintainer,
    /// The repository's own events: a push, a schedule, a release.
    Repository,
}

impl Actor {
    /// Who this is, in words.
    pub fn describe(self, event: &str) -> &'static str {
        match self {
            Actor::Outsider => match event {
                "issue_comment" | "issues" | "discussion" | "discussion_comment" => {
                    "anyone who can comment (the pull request's bytes are its author's, a fork's included)"
                }
                "repository_dispatch" => {
                    "anyone whose comment or pull request a workflow of this repository dispatches on"
                }
                _ => "a fork's pull request",
            },
            Actor::Member => "a pull request from a branch of this repository",
            Actor::Maintainer => "a maintainer's dispatch",
            Actor::Repository => "the repository's own event",
        }
    }
}

/// One way a run reaches a workflow's jobs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Start {
    /// The event of the run (`workflow_run` for a chained run).
    pub event: String,
    pub actor: Actor,
    /// For `workflow_run`: the event of the run that triggered it.
    pub upstream: Option<String>,
    /// The jobs that call this workflow, outermost first (`workflow_call`).
    pub via: Vec<JobRef>,
    /// The workflow whose `on:` the event is in (the run's top).
    pub top: usize,
    /// A `repository_dispatch` that peter-evans/slash-command-dispatch
    /// fired: it builds `client_payload` itself (`github.payload` is the
    /// comment's event). Under any other dispatcher the workflow writes
    /// the payload, from whatever it holds.
    pub payload_by_bot: bool,
}

/// Events a pull request's author causes, whose runs carry its head.
const PR_EVENTS: &[&str] = &[
    "pull_request",
    "pull_request_target",
    "pull_request_review",
    "pull_request_review_comment",
];

/// Events anyone can cause on issues and discussions (a comment on a pull
/// request included).
pub const COMMENT_EVENTS: &[&str] = &[
    "issue_comment",
    "issues",
    "discussion",
    "discussion_comment",
];

/// Events only someone with write access can send, choosing inputs.
const DISPATCH_EVENTS: &[&str] = &["workflow_dispatch", "repository_dispatch"];

/// How many `workflow_run` and `workflow_call` links a start may go
/// through (GitHub stops `workflow_run` chains at three).
const MAX_CHAIN: usize = 4;

/// The starts of every workflow, computed once.
pub struct Starts {
    pub by_workflow: Vec<Vec<Start>>,
}

impl Starts {
    /// `callers`: the jobs that call each workflow (`uses: ./…`).
    pub fn compute(
        memo: &Memo,
        workflows: &[Workflow],
        callers: &BTreeMap<usize, Vec<JobRef>>,
        policy: &Policy,
    ) -> Starts {
        let mut done: BTreeMap<usize, Vec<Start>> = BTreeMap::new();
        let by_workflow = (0..workflows.len())
            .map(|w| {
                let mut seen = BTreeSet::new();
                starts_of(memo, workflows, callers, policy, w, 0, &mut seen, &mut done)
            })
            .collect();
        Starts { by_workflow }
    }
}

#[allow(clippy::too_many_arguments)]
fn starts_of(
    memo: &Memo,
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    policy: &Policy,
    w: usize,
    depth: usize,
    seen: &mut BTreeSet<usize>,
    done: &mut BTreeMap<usize, Vec<Start>>,
) -> Vec<Start> {
    if let Some(known) = done.get(&w) {
        return known.clone();
    }
    if depth > MAX_CHAIN || !seen.insert(w) {
        return Vec::new();
    }
    let wf = &workflows[w];
    let mut out: Vec<Start> = Vec::new();
    let direct = |event: &str, actor: Actor, upstream: Option<String>| Start {
        event: event.to_owned(),
        actor,
        upstream,
        via: Vec::new(),
        top: w,
        payload_by_bot: false,
    };
    for trigger in &wf.triggers {
        let event = trigger.event.value.as_str();
        match event {
            "workflow_call" => {
                for caller in callers.get(&w).into_iter().flatten() {
                    let outer = starts_of(
                        memo,
                        workflows,
                        callers,
                        policy,
                        caller.workflow,
                        depth + 1,
                        seen,
                        done,
                    );
                    for start in outer {
                        if !job_runs(memo, workflows, callers, policy, *caller, &start) {
                            continue;
                        }
                        let mut start = start;
                        start.via.push(*caller);
                        out.push(start);
                    }
                }
            }
            "workflow_run" => {
                let names = trigger.filter("workflows").unwrap_or_default();
                let upstream: Vec<usize> = workflows
                    .iter()
                    .enumerate()
                    .filter(|(u, up)| {
                        *u != w
                            && names.iter().any(|n| {
                                up.display_name.as_deref() == Some(n.value.as_str())
                                    || up.name == n.value
                            })
                    })
                    .map(|(u, _)| u)
                    .collect();
                if upstream.is_empty() {
                    // A workflow the tree does not show: any pull request.
                    for actor in [Actor::Outsider, Actor::Member] {
                        out.push(direct(
                            "workflow_run",
                            actor,
                            Some("pull_request".to_owned()),
                        ));
                    }
                    continue;
                }
                for u in upstream {
                    let up = starts_of(memo, workflows, callers, policy, u, depth + 1, seen, done);
                    for start in up {
                        // A reusable workflow's run is its caller's.
                        if !start.via.is_empty() {
                            continue;
                        }
                        out.push(direct("workflow_run", start.actor, Some(start.event)));
                    }
                }
            }
            _ if PR_EVENTS.contains(&event) || COMMENT_EVENTS.contains(&event) => {
                for actor in [Actor::Outsider, Actor::Member] {
                    out.push(direct(event, actor, None));
                }
            }
            _ if DISPATCH_EVENTS.contains(&event) => {
                out.push(direct(event, Actor::Maintainer, None));
                // A `repository_dispatch` a workflow of this repository
                // fires is started by whoever can start that workflow's
                // firing job, as far as the firing step lets them.
                if event == "repository_dispatch" {
                    let types = trigger.filter("types").unwrap_or_default();
                    for (u, at, index, step, bot) in dispatchers(workflows, w, types) {
                        let up =
                            starts_of(memo, workflows, callers, policy, u, depth + 1, seen, done);
                        for start in up {
                            // A fork's `pull_request` run holds a read-only
                            // token and no secrets: it dispatches nothing.
                            let fork_pr = start.actor == Actor::Outsider
                                && matches!(
                                    start.event.as_str(),
                                    "pull_request"
                                        | "pull_request_review"
                                        | "pull_request_review_comment"
                                );
                            if fork_pr
                                || !start.via.is_empty()
                                || !job_runs(memo, workflows, callers, policy, at, &start)
                            {
                                continue;
                            }
                            let firing = &workflows[at.workflow].jobs[at.job].steps[index];
                            if let Some(cond) = &firing.if_cond {
                                let scope =
                                    JobScope::new(memo, workflows, callers, policy, at, &start)
                                        .at_step(index);
                                if eval::condition(&cond.value, &scope) == Tri::False {
                                    continue;
                                }
                            }
                            let actor = match (step, start.actor) {
                                // The bot lets anyone with at least this
                                // permission through; below write, anyone.
                                (Dispatcher::Open, a) => a,
                                (Dispatcher::WriteOnly, Actor::Outsider | Actor::Member) => {
                                    Actor::Maintainer
                                }
                                (Dispatcher::WriteOnly, a) => a,
                            };
                            let mut dispatched = direct(event, actor, Some(start.event));
                            dispatched.payload_by_bot = bot;
                            out.push(dispatched);
                        }
                    }
                }
            }
            _ => out.push(direct(event, Actor::Repository, None)),
        }
    }
    seen.remove(&w);
    out.sort();
    out.dedup();
    if seen.is_empty() {
        done.insert(w, out.clone());
    }
    out
}

/// How a firing step lets the people who start its job through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dispatcher {
    /// Anyone who starts the job dispatches (`peter-evans/repository-dispatch`,
    /// or slash-command-dispatch with `permission: none`, `read` or `triage`).
    Open,
    /// Only a commenter with write access (slash-command-dispatch's default).
    WriteOnly,
}

/// The steps of other workflows that fire a `repository_dispatch` of one
/// of `types` (any, when none is named): the workflow, the job and how it
/// lets its starters through, and whether slash-command-dispatch (which
/// builds the payload) fired it.
fn dispatchers(
    workflows: &[Workflow],
    w: usize,
    types: &[crate::contracts::workflow::Scalar],
) -> Vec<(usize, JobRef, usize, Dispatcher, bool)> {
    let wanted = |t: &str| types.is_empty() || types.iter().any(|x| x.value == t);
    let mut out = Vec::new();
    for (u, wf) in workflows.iter().enumerate() {
        if u == w {
            continue;
        }
        for (j, job) in wf.jobs.iter().enumerate() {
            let at = JobRef {
                workflow: u,
                job: j,
            };
            for step in &job.steps {
                let input = |name: &str| step.input(name).map(|v| v.value.trim().to_owned());
                if step.uses_action("peter-evans/repository-dispatch") {
                    if input("event-type").is_some_and(|t| wanted(&t)) {
                        out.push((u, at, step.index, Dispatcher::Open, false));
                    }
                    continue;
                }
                if !step.uses_action("peter-evans/slash-command-dispatch") {
                    continue;
                }
                if input("dispatch-type").is_some_and(|t| t != "repository") {
                    continue;
                }
                let default = input("permission").unwrap_or_else(|| "write".to_owned());
                // `config:` (JSON) names each command with its own permission;
                // otherwise `commands:` share `permission:`.
                let mut commands: Vec<(String, String)> = Vec::new();
                if let Some(config) = input("config") {
                    if let Ok(serde_json::Value::Array(entries)) =
                        serde_json::from_str::<serde_json::Value>(&config)
                    {
                        for e in entries {
                            if let Some(c) = e.get("command").and_then(|c| c.as_str()) {
                                let p = e
                                    .get("permission")
                                    .and_then(|p| p.as_str())
                                    .map_or(default.clone(), str::to_owned);
                                commands.push((c.to_owned(), p));
                            }
                        }
                    }
                }
                if commands.is_empty() {
                    for c in input("commands").unwrap_or_default().split([',', '\n']) {
                        let c = c.trim();
                        if !c.is_empty() {
                            commands.push((c.to_owned(), default.clone()));
                        }
                    }
                }
                // The dispatched type is the command and
                // `event-type-suffix` (default `-command`).
                let suffix = step
                    .input("event-type-suffix")
                    .map_or_else(|| "-command".to_owned(), |v| v.value.trim().to_owned());
                for (command, permission) in commands {
                    if !wanted(&format!("{command}{suffix}")) {
                        continue;
                    }
                    let open = matches!(permission.as_str(), "none" | "read" | "triage");
                    out.push((
                        u,
                        at,
                        step.index,
                        if open {
                            Dispatcher::Open
                        } else {
                            Dispatcher::WriteOnly
                        },
                        true,
                    ));
                }
            }
        }
    }
    out
}

/// True when job `at` can run under `start`: its `if:` is not false there.
pub fn job_runs(
    memo: &Memo,
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    policy: &Policy,
    at: JobRef,
    start: &Start,
) -> bool {
    let job = &workflows[at.workflow].jobs[at.job];
    let Some(cond) = &job.if_cond else {
        return true;
    };
    let scope = JobScope::new(memo, workflows, callers, policy, at, start);
    eval::condition(&cond.value, &scope) != Tri::False
}
