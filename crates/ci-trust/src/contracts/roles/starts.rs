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
    /// A `push` that a mirroring bot made of a pull request (copy-pr-bot's
    /// `pull-request/N` branches, [`Mirror`]), or a run chained to or
    /// dispatched from one: the pushed commit, its workflow files included,
    /// is the pull request's, and it runs once a maintainer has vetted it.
    pub mirror: bool,
}

impl Start {
    /// The run's workflow files are a pull request's own (a mirror's push,
    /// or a workflow it calls): how its steps treat bytes is the author's
    /// choice, not this repository's; only what the run can reach is.
    pub fn runs_own_copy(&self) -> bool {
        self.mirror && self.event == "push"
    }

    /// The run is this repository's own copy of the workflows, holding
    /// what such runs hold: neither the pull request's own run
    /// (`pull_request` and its reviews) nor a mirror's copy of it. What a
    /// run leaves on a persistent runner reaches such a run.
    pub fn runs_this_repositorys_copy(&self) -> bool {
        !self.runs_own_copy()
            && !matches!(
                self.event.as_str(),
                "pull_request" | "pull_request_review" | "pull_request_review_comment"
            )
    }

    /// Who can cause the run, in words.
    pub fn who(&self) -> String {
        if self.mirror {
            return "a fork's pull request that copy-pr-bot pushed to a `pull-request/N` branch of this repository, once a maintainer commented `/ok to test`".to_owned();
        }
        self.actor.describe(&self.event).to_owned()
    }
}

/// A bot that pushes pull requests into branches of this repository, where
/// `push` runs take them with the repository's secrets: NVIDIA's
/// copy-pr-bot, enabled by `.github/copy-pr-bot.yaml`, pushes a pull
/// request's head to `pull-request/<number>` (an outside author's only
/// after a maintainer's `/ok to test <sha>`; a member's signed commits at
/// once, which the member could push anyway).
#[derive(Debug, Clone)]
pub struct Mirror {
    /// The configuration file that enables it, relative to the root.
    pub file: String,
    /// Its `enabled:` line, or the file's start.
    pub pos: crate::contracts::workflow::Pos,
}

/// Branch names of the form the mirror pushes, tried against a trigger's
/// filters (a filter may admit some numbers and not others).
const MIRROR_BRANCHES: &[&str] = &[
    "pull-request/1",
    "pull-request/42",
    "pull-request/123",
    "pull-request/1234",
    "pull-request/12345",
    "pull-request/99999",
    "pull-request/123456",
];

impl Mirror {
    /// The mirror the tree at `root` enables, if any: a copy-pr-bot
    /// configuration whose `enabled:` is not `false`.
    pub fn of_tree(root: &std::path::Path) -> Option<Mirror> {
        for name in [".github/copy-pr-bot.yaml", ".github/copy-pr-bot.yml"] {
            // A file that is there but not text still enables the bot as
            // far as this check can tell: read it as text, lossily.
            let Ok(bytes) = std::fs::read(root.join(name)) else {
                if root.join(name).exists() {
                    return Some(Mirror {
                        file: name.to_owned(),
                        pos: crate::contracts::workflow::Pos { line: 1, column: 1 },
                    });
                }
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            // Read as YAML reads it (a block scalar's `enabled: false` line
            // is text). Unreadable, or `enabled:` not a plain `false`: the
            // bot may act on it, so it counts as enabled.
            let enabled = crate::contracts::workflow::top_level_scalar(&text, "enabled");
            let pos = match enabled {
                Ok(Some(value)) => {
                    if matches!(
                        value.value.trim().to_ascii_lowercase().as_str(),
                        "false" | "no" | "off"
                    ) {
                        return None;
                    }
                    value.pos
                }
                _ => crate::contracts::workflow::Pos { line: 1, column: 1 },
            };
            return Some(Mirror {
                file: name.to_owned(),
                pos,
            });
        }
        None
    }

    /// Whether the mirror's pushes start a run through `trigger` (a `push`).
    fn admits(trigger: &crate::contracts::workflow::Trigger) -> bool {
        MIRROR_BRANCHES
            .iter()
            .any(|b| crate::contracts::filters::admits_branch(trigger, b))
    }
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
        mirror: Option<&Mirror>,
    ) -> Starts {
        let mut done: BTreeMap<usize, Vec<Start>> = BTreeMap::new();
        let ctx = Context {
            memo,
            workflows,
            callers,
            policy,
            mirror,
        };
        let by_workflow = (0..workflows.len())
            .map(|w| {
                let mut seen = BTreeSet::new();
                starts_of(&ctx, w, 0, &mut seen, &mut done)
            })
            .collect();
        Starts { by_workflow }
    }
}

/// What every start is computed from.
struct Context<'a> {
    memo: &'a Memo,
    workflows: &'a [Workflow],
    callers: &'a BTreeMap<usize, Vec<JobRef>>,
    policy: &'a Policy,
    mirror: Option<&'a Mirror>,
}

fn starts_of(
    ctx: &Context,
    w: usize,
    depth: usize,
    seen: &mut BTreeSet<usize>,
    done: &mut BTreeMap<usize, Vec<Start>>,
) -> Vec<Start> {
    let Context {
        memo,
        workflows,
        callers,
        policy,
        mirror,
    } = *ctx;
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
        mirror: false,
    };
    for trigger in &wf.triggers {
        let event = trigger.event.value.as_str();
        match event {
            "workflow_call" => {
                for caller in callers.get(&w).into_iter().flatten() {
                    let outer = starts_of(ctx, caller.workflow, depth + 1, seen, done);
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
                    let up = starts_of(ctx, u, depth + 1, seen, done);
                    for start in up {
                        // A reusable workflow's run is its caller's.
                        if !start.via.is_empty() {
                            continue;
                        }
                        let mut chained = direct("workflow_run", start.actor, Some(start.event));
                        chained.mirror = start.mirror;
                        out.push(chained);
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
                        let up = starts_of(ctx, u, depth + 1, seen, done);
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
                            dispatched.mirror = start.mirror;
                            out.push(dispatched);
                        }
                    }
                }
            }
            _ => {
                let mirrored = event == "push" && mirror.is_some() && Mirror::admits(trigger);
                // Kept beside a mirror's start: the bot copies a member's
                // signed pull request at once, and that run (this
                // repository's member's code, with its secrets) is the next
                // job on a machine a fork's run left state on.
                out.push(direct(event, Actor::Repository, None));
                // A mirror's push of an outside author's pull request, vetted
                // by a maintainer: the author's bytes, this repository's run.
                if mirrored {
                    let mut mirrored = direct(event, Actor::Outsider, None);
                    mirrored.mirror = true;
                    out.push(mirrored);
                }
            }
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
