//! What a value is, by following data rather than names: the contexts a
//! job sees under one [`Start`] (`github.*` as that event fills it, the
//! caller's `with:` for `inputs.*`, `env` at every level, `needs.*.outputs`
//! through the job's `outputs:`, `steps.*.outputs` through what a script
//! writes to `$GITHUB_OUTPUT`, `$GITHUB_ENV` lines of earlier steps, matrix
//! values), and what a `run:` script's variables hold (assignments, command
//! substitutions, a script that asks the pull-request API).
//!
//! Owns: [`JobScope`] (an [`eval::Scope`]) and the shell's variable taint.
//! Must not: decide what a value's taint means for a finding (`code.rs`
//! and the rules do).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::JobRef;
use super::gates::{self, Checked, FlagGate, Gate};
use super::starts::{Actor, COMMENT_EVENTS, Start};
use crate::contracts::commands;
use crate::contracts::eval::{self, CompareOp, Expr, Names, Scope, Seg, Taint, Val};
use crate::contracts::shell::{Command, Part, RedirectOp, Script, Word};
use crate::contracts::workflow::{Job, Step, Workflow, lookup};
use crate::policy::Policy;

/// Identities the evaluator compares by identity.
pub const SELF_REPO: &str = "repo:self";
pub const FORK_REPO: &str = "repo:fork";
const SELF_OWNER: &str = "owner:self";

/// How deeply values may refer to each other (`env` → `needs` → `steps` → …).
const MAX_DEPTH: usize = 24;

/// What every scope of one model shares: this repository's names, and
/// values already worked out (the same `env.NAME` at the same step under
/// the same start is asked often).
#[derive(Default)]
pub struct Memo {
    env: RefCell<BTreeMap<EnvKey, Val>>,
    /// What each step is as a gate (`gates::step_gate`), read once.
    step_gates: RefCell<BTreeMap<(JobRef, usize), Option<Gate>>>,
    /// The output flags each step writes as gates (`gates::flag_gates`).
    flag_gates: RefCell<BTreeMap<(JobRef, usize), Vec<FlagGate>>>,
    /// What the gates before a step have proved, under a start.
    gated: RefCell<BTreeMap<StepKey, Gated>>,
    /// `github.repository` and `github.repository_owner` where the names
    /// are known; `Sym` identities otherwise.
    repository: Option<Arc<Names>>,
    owner: Option<Arc<Names>>,
}

impl Memo {
    /// A memo for a repository known by `names` (`owner/name`; empty when
    /// nothing says).
    pub fn new(names: Names) -> Memo {
        if names.names.is_empty() {
            return Memo::default();
        }
        let mut owners: Vec<String> = names
            .names
            .iter()
            .filter_map(|n| n.split_once('/').map(|(o, _)| o.to_owned()))
            .collect();
        owners.sort();
        owners.dedup();
        Memo {
            env: RefCell::default(),
            step_gates: RefCell::default(),
            flag_gates: RefCell::default(),
            gated: RefCell::default(),
            owner: Some(Arc::new(Names {
                names: owners,
                authoritative: names.authoritative,
            })),
            repository: Some(Arc::new(names)),
        }
    }

    /// This repository's `owner/name` as an expression sees it.
    pub fn this_repository(&self) -> Val {
        match &self.repository {
            Some(names) => Val::Named(SELF_REPO, names.clone()),
            None => Val::Sym(SELF_REPO),
        }
    }

    fn this_owner(&self) -> Val {
        match &self.owner {
            Some(names) => Val::Named(SELF_OWNER, names.clone()),
            None => Val::Sym(SELF_OWNER),
        }
    }
}

impl Memo {
    /// The gate step `step` of job `at` is, read once.
    fn step_gate(&self, workflows: &[Workflow], at: JobRef, step: &Step) -> Option<Gate> {
        let key = (at, step.index);
        if let Some(known) = self.step_gates.borrow().get(&key) {
            return known.clone();
        }
        let (owners, shell, windows, overridden) = self.shell_of(workflows, at, step);
        let gate = gates::step_gate(step, &owners, shell, windows || overridden);
        self.step_gates.borrow_mut().insert(key, gate.clone());
        gate
    }

    /// The output flags step `step` of job `at` writes as gates, read once.
    fn flag_gates(&self, workflows: &[Workflow], at: JobRef, step: &Step) -> Vec<FlagGate> {
        let key = (at, step.index);
        if let Some(known) = self.flag_gates.borrow().get(&key) {
            return known.clone();
        }
        let (owners, shell, windows, overridden) = self.shell_of(workflows, at, step);
        let found = gates::flag_gates(step, &owners, shell, windows, overridden);
        self.flag_gates.borrow_mut().insert(key, found.clone());
        found
    }

    /// Whether step `step` of job `at` fails whenever it runs.
    fn always_fails(&self, workflows: &[Workflow], at: JobRef, step: &Step) -> bool {
        let (_, shell, windows, _) = self.shell_of(workflows, at, step);
        gates::always_fails(step, shell, windows)
    }

    /// What a gate step's reading needs of its place: this repository's
    /// owners, the step's shell, whether its runner may be Windows, and
    /// whether a job or workflow `env:` sets what a shell check reads.
    fn shell_of<'w>(
        &self,
        workflows: &'w [Workflow],
        at: JobRef,
        step: &'w Step,
    ) -> (Vec<String>, Option<&'w str>, bool, bool) {
        let owners: Vec<String> = self
            .owner
            .as_ref()
            .map(|n| n.names.clone())
            .unwrap_or_default();
        let (wf, job) = (
            &workflows[at.workflow],
            &workflows[at.workflow].jobs[at.job],
        );
        let shell = step
            .shell
            .as_ref()
            .or(job.default_shell.as_ref())
            .or(wf.default_shell.as_ref())
            .map(|s| s.value.as_str());
        // A runner that may be Windows runs `pwsh` by default, which goes
        // on after a failing command.
        let windows = job.runs_on_unresolved.is_some()
            || job.runs_on.is_empty()
            || job.runs_on.iter().any(|l| {
                l.value.to_ascii_lowercase().contains("windows") || l.value.contains("${{")
            });
        // A job or workflow `env:` that sets what the shell's check reads
        // (the actor, the host `gh` asks) leaves no shell gate to read.
        let overridden = job
            .env
            .iter()
            .chain(&wf.env)
            .any(|(k, _)| gates::SHELL_GATE_ENV.contains(&k.value.as_str()));
        (owners, shell, windows, overridden)
    }
}

/// What the gates a step runs behind have proved: that the user who
/// started the run (the actor; the commenter on a comment event) may act
/// on this repository. (A gate on the pull request's author proves
/// nothing about the code a job runs, which a comment may name.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gated {
    pub starter: bool,
}

impl Gated {
    fn or(self, other: Gated) -> Gated {
        Gated {
            starter: self.starter || other.starter,
        }
    }

    fn with(mut self, gate: &Gate, start: &Start) -> Gated {
        let event = start.event.as_str();
        for checked in &gate.checked {
            match checked {
                // The actor is the run's starter only where nobody else's
                // action puts someone else's bytes under it.
                Checked::Actor => {
                    if actor_is_starter(start) {
                        self.starter = true;
                    }
                }
                Checked::Commenter => {
                    if COMMENTED_EVENTS.contains(&event) {
                        self.starter = true;
                    }
                }
                // The comment a workflow of this repository dispatched on
                // is the one whose author starts the run (`bot_payload`).
                Checked::PayloadCommenter => {
                    if bot_dispatch_of_comment(start) {
                        self.starter = true;
                    }
                }
                Checked::PrAuthor => {}
            }
        }
        self
    }
}

/// The ref of a mirror's push (`refs/heads/pull-request/N`, or its
/// short name): not any other branch, and it names the pull request's code.
/// The number stands for every number: no workflow tests one.
fn mirror_ref(full: bool) -> Val {
    let name = "pull-request/N";
    Val::Str(
        if full {
            format!("refs/heads/{name}")
        } else {
            name.to_owned()
        },
        Taint::PR_REF,
    )
}

/// Events whose actor is the author of `github.event.comment`.
const COMMENTED_EVENTS: &[&str] = &[
    "issue_comment",
    "discussion_comment",
    "pull_request_review_comment",
];

/// Events only an account with write access to the repository causes
/// (pushing, merging, tagging, releasing, dispatching): their `sender` is
/// such an account.
const WRITE_ACCESS_EVENTS: &[&str] = &[
    "push",
    "create",
    "delete",
    "release",
    "workflow_dispatch",
    "repository_dispatch",
    "merge_group",
    "deployment",
    "deployment_status",
];

/// Whether `github.actor` is the person whose action brings the run's
/// bytes: not under a `repository_dispatch` a workflow of this repository
/// fired (the actor is the token's owner, not the commenter), nor under
/// `workflow_run` or `pull_request_target`, where a maintainer's action
/// (a re-run, "Update branch", a reopen) makes the actor a maintainer
/// over someone else's code.
fn actor_is_starter(start: &Start) -> bool {
    !(start.event == "repository_dispatch" && start.upstream.is_some()
        || matches!(start.event.as_str(), "workflow_run" | "pull_request_target"))
}

/// Whether `start` is a comment bot's `repository_dispatch`, fired by a
/// workflow of this repository for a comment (`starts.rs`) through
/// slash-command-dispatch: its `client_payload.github.payload` is that
/// comment's event (under another dispatcher the workflow writes it).
fn bot_dispatch_of_comment(start: &Start) -> bool {
    start.event == "repository_dispatch"
        && start.payload_by_bot
        && matches!(start.actor, Actor::Outsider | Actor::Member)
        && start
            .upstream
            .as_deref()
            .is_some_and(|up| COMMENTED_EVENTS.contains(&up))
}

/// How a condition tests an output flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlagTest {
    /// `== 'true'`: runs only when it is `true`.
    IsTrue,
    /// `== 'false'`: runs when it is `false` (not when it is empty).
    IsFalse,
    /// `!= 'true'`: runs whenever it is not `true`.
    NotTrue,
}

/// A condition's expression (`if:` with or without `${{ }}`).
fn condition_expr(text: &str) -> Option<Expr> {
    let body = text.trim();
    let body = match body.strip_prefix("${{").and_then(|b| b.strip_suffix("}}")) {
        Some(inner) if !inner.contains("${{") => inner.trim(),
        _ if body.contains("${{") => return None,
        _ => body,
    };
    eval::parse(body).ok()
}

/// `CONTEXT.ID.outputs.NAME` compared with `'true'` or `'false'` (GitHub
/// compares strings ignoring case): the context, ID, NAME and the test.
fn flag_test(expr: &Expr) -> Option<(&str, &str, &str, FlagTest)> {
    let Expr::Compare(op, a, b) = expr else {
        return None;
    };
    let (path, lit) = match (a.as_ref(), b.as_ref()) {
        (Expr::Path(root, segs), Expr::Str(s)) | (Expr::Str(s), Expr::Path(root, segs)) => {
            ((root.as_str(), segs), s)
        }
        _ => return None,
    };
    let (root, segs) = path;
    let [Seg::Name(id), Seg::Name(outputs), Seg::Name(name)] = segs.as_slice() else {
        return None;
    };
    if !(root.eq_ignore_ascii_case("steps") || root.eq_ignore_ascii_case("needs"))
        || !outputs.eq_ignore_ascii_case("outputs")
    {
        return None;
    }
    let root = if root.eq_ignore_ascii_case("steps") {
        "steps"
    } else {
        "needs"
    };
    let test = match op {
        CompareOp::Eq if lit.eq_ignore_ascii_case("true") => FlagTest::IsTrue,
        CompareOp::Eq if lit.eq_ignore_ascii_case("false") => FlagTest::IsFalse,
        CompareOp::Ne if lit.eq_ignore_ascii_case("true") => FlagTest::NotTrue,
        _ => return None,
    };
    Some((root, id, name, test))
}

/// The flags a condition requires `true`: its top-level `&&` conjuncts
/// that are `== 'true'` tests.
fn required_flags(expr: &Expr) -> Vec<(&str, &str, &str)> {
    match expr {
        Expr::And(a, b) => {
            let mut out = required_flags(a);
            out.extend(required_flags(b));
            out
        }
        other => match flag_test(other) {
            Some((root, id, name, FlagTest::IsTrue)) => vec![(root, id, name)],
            _ => Vec::new(),
        },
    }
}

/// The one step of `steps` whose `id:` is `id` (contexts ignore case).
fn step_by_id<'s>(steps: &'s [Step], id: &str) -> Option<&'s Step> {
    let mut found = steps.iter().filter(|s| {
        s.id.as_ref()
            .is_some_and(|i| i.value.eq_ignore_ascii_case(id))
    });
    let one = found.next()?;
    found.next().is_none().then_some(one)
}

/// Whether a step or job `if:` may run it after an earlier step failed
/// (or was cancelled): then no gate before it holds. Without a status
/// function GitHub adds `success() &&`; with one, only a condition that
/// requires `success()` (a top-level `&&` conjunct) is known not to run
/// after a failure (`!success()`, `success() || X`, `always()`,
/// `failure()`, an unreadable condition: it may).
fn runs_after_failure(cond: &str) -> bool {
    let c = cond.to_ascii_lowercase();
    let status = ["success(", "always(", "failure(", "cancelled("];
    if !status.iter().any(|f| c.contains(f)) {
        return false;
    }
    let Some(expr) = condition_expr(cond) else {
        return true;
    };
    fn requires_success(e: &Expr) -> bool {
        match e {
            Expr::And(a, b) => requires_success(a) || requires_success(b),
            Expr::Call(name, args) => name.eq_ignore_ascii_case("success") && args.is_empty(),
            _ => false,
        }
    }
    !requires_success(&expr)
}

/// A `continue-on-error:` that may be true: the job goes on past a failure.
fn may_continue(value: Option<&crate::contracts::workflow::Scalar>) -> bool {
    value.is_some_and(|v| v.value.trim() != "false")
}

/// A job at a step under a start.
type StepKey = (JobRef, Option<usize>, Start);

/// `env.NAME` of a job at a step under a start.
type EnvKey = (JobRef, Option<usize>, Start, String);

/// What a job sees under one start, at one point of its steps.
pub struct JobScope<'a> {
    pub memo: &'a Memo,
    pub workflows: &'a [Workflow],
    pub callers: &'a BTreeMap<usize, Vec<JobRef>>,
    pub policy: &'a Policy,
    pub at: JobRef,
    pub start: &'a Start,
    /// The steps before this one have run (`None`: the job's own level, as
    /// its `if:` and `runs-on` see it; `Some(len)`: after every step).
    pub step: Option<usize>,
    depth: Cell<usize>,
}

impl<'a> JobScope<'a> {
    pub fn new(
        memo: &'a Memo,
        workflows: &'a [Workflow],
        callers: &'a BTreeMap<usize, Vec<JobRef>>,
        policy: &'a Policy,
        at: JobRef,
        start: &'a Start,
    ) -> JobScope<'a> {
        JobScope {
            memo,
            workflows,
            callers,
            policy,
            at,
            start,
            step: None,
            depth: Cell::new(0),
        }
    }

    /// The same job, at step `index` (its own `env:` and the effects of the
    /// steps before it visible).
    pub fn at_step(&self, index: usize) -> JobScope<'a> {
        JobScope {
            step: Some(index),
            depth: Cell::new(self.depth.get()),
            ..*self
        }
    }

    fn another<'b>(&self, at: JobRef, start: &'b Start, step: Option<usize>) -> JobScope<'b>
    where
        'a: 'b,
    {
        JobScope {
            memo: self.memo,
            workflows: self.workflows,
            callers: self.callers,
            policy: self.policy,
            at,
            start,
            step,
            depth: Cell::new(self.depth.get()),
        }
    }

    pub fn workflow(&self) -> &'a Workflow {
        &self.workflows[self.at.workflow]
    }

    pub fn job(&self) -> &'a Job {
        &self.workflows[self.at.workflow].jobs[self.at.job]
    }

    fn current_step(&self) -> Option<&'a Step> {
        self.step.and_then(|i| self.job().steps.get(i))
    }

    /// What the gates before this step (and in the jobs it needs) have
    /// proved under this start. A gate holds only where it provably ran
    /// (its `if:` true here) and stopped the job (no `continue-on-error`),
    /// and only for steps and jobs that run under `success()`.
    pub fn gated(&self) -> Gated {
        let key = (self.at, self.step, self.start.clone());
        if let Some(known) = self.memo.gated.borrow().get(&key) {
            return *known;
        }
        let gated = self.guarded(Gated::default(), || self.gated_uncached());
        self.memo.gated.borrow_mut().insert(key, gated);
        gated
    }

    fn gated_uncached(&self) -> Gated {
        let job = self.job();
        let mut gated = self.flag_guarded();
        let own = match self.step.and_then(|i| job.steps.get(i)) {
            Some(step) => !step
                .if_cond
                .as_ref()
                .is_some_and(|c| runs_after_failure(&c.value)),
            None => true,
        };
        if let (Some(index), true) = (self.step, own) {
            for earlier in job.steps.iter().take(index) {
                let Some(gate) = self.memo.step_gate(self.workflows, self.at, earlier) else {
                    continue;
                };
                if may_continue(earlier.continue_on_error.as_ref())
                    || self.untrusted_before(self.at, earlier.index)
                {
                    continue;
                }
                if let Some(cond) = &earlier.if_cond {
                    let scope = self.at_step(earlier.index);
                    if eval::condition(&cond.value, &scope) != eval::Tri::True {
                        continue;
                    }
                }
                gated = gated.with(&gate, self.start);
            }
            for earlier in job.steps.iter().take(index) {
                for gate in self.failing_on_flag(earlier) {
                    gated = gated.with(&gate, self.start);
                }
            }
        }
        // A job runs only when the jobs it needs succeeded, unless its
        // `if:` says otherwise.
        if job
            .if_cond
            .as_ref()
            .is_some_and(|c| runs_after_failure(&c.value))
            || may_continue(job.continue_on_error.as_ref())
        {
            return gated;
        }
        let wf = self.workflow();
        for need in &job.needs {
            let Some(j) = wf.jobs.iter().position(|x| x.id.value == need.value) else {
                continue;
            };
            let other = &wf.jobs[j];
            if may_continue(other.continue_on_error.as_ref()) {
                continue;
            }
            let at = JobRef {
                workflow: self.at.workflow,
                job: j,
            };
            let scope = self.another(at, self.start, Some(other.steps.len()));
            gated = gated.or(scope.gated());
        }
        gated
    }

    /// What the `if:`s of this step and of its job prove by requiring an
    /// output flag gate `true` (`steps.X.outputs.F == 'true'`, or
    /// `needs.J.outputs.O == 'true'` where J's output O is such a flag):
    /// the flag is `true` only where the check passed, so this holds
    /// whatever ran or failed before (`always()` included).
    fn flag_guarded(&self) -> Gated {
        let job = self.job();
        let mut gated = Gated::default();
        let mut conds: Vec<(&str, Option<usize>)> = Vec::new();
        if let Some(c) = &job.if_cond {
            conds.push((c.value.as_str(), None));
        }
        if let Some(step) = self.current_step() {
            if let Some(c) = &step.if_cond {
                conds.push((c.value.as_str(), Some(step.index)));
            }
        }
        for (cond, step) in conds {
            let Some(expr) = condition_expr(cond) else {
                continue;
            };
            for (root, id, name) in required_flags(&expr) {
                let found = match (root, step) {
                    // A step's own `if:` on an earlier step of its job.
                    ("steps", Some(index)) => {
                        step_by_id(&job.steps[..index], id).map(|s| (self.at, s, name.to_owned()))
                    }
                    // A job's `if:` on a job it needs, whose output is
                    // exactly one step's flag.
                    ("needs", None)
                        if job.needs.iter().any(|n| n.value.eq_ignore_ascii_case(id)) =>
                    {
                        self.needed_flag(id, name)
                    }
                    _ => None,
                };
                let Some((at, step, flag)) = found else {
                    continue;
                };
                if self.untrusted_before(at, step.index) {
                    continue;
                }
                for found in self.memo.flag_gates(self.workflows, at, step) {
                    if found.output.eq_ignore_ascii_case(&flag) {
                        gated = gated.with(&found.gate, self.start);
                    }
                }
            }
        }
        gated
    }

    /// Whether a step of job `at` before step `index` may have run bytes
    /// that are not the default branch's, or handed them to later steps:
    /// then no check at or after `index` proves anything (that code may
    /// have planted `~/.bash_profile`, a `$GITHUB_PATH` entry, a `bash`,
    /// the flag itself). Read fail-closed, before knowing whether the
    /// bytes run: a checkout whose `ref:` or `repository:` holds a value
    /// of any taint, a download of another run's artifacts, a `git`/`gh`
    /// fetch of pull-request code (as `code.rs` reads them), or a write to
    /// `$GITHUB_ENV`, `$GITHUB_PATH` or `BASH_ENV` in a step that sees a
    /// value of any taint.
    fn untrusted_before(&self, at: JobRef, index: usize) -> bool {
        let job = &self.workflows[at.workflow].jobs[at.job];
        job.steps.iter().take(index).any(|step| {
            let here = self.another(at, self.start, Some(step.index));
            let tainted = |text: &str| {
                !self
                    .guarded(Val::Unknown(Taint::UNSEEN), || here.value(text))
                    .taint()
                    .is_empty()
            };
            if step.uses_action("actions/checkout")
                && ["ref", "repository"]
                    .iter()
                    .any(|k| step.input(k).is_some_and(|v| tainted(&v.value)))
            {
                return true;
            }
            if super::code::other_run_download(step).is_some() {
                return true;
            }
            let Some(run) = &step.run else {
                return false;
            };
            let writes_env = ["GITHUB_ENV", "GITHUB_PATH", "BASH_ENV"]
                .iter()
                .any(|v| run.value.contains(v));
            if writes_env
                && (tainted(&run.value) || step.env.iter().any(|(_, v)| tainted(&v.value)))
            {
                return true;
            }
            let Some(script) = step.script() else {
                return false;
            };
            if !script
                .commands()
                .any(|c| c.program_is("git") || c.program_is("gh"))
            {
                return false;
            }
            let shell = here.shell(&script);
            let taint_of = |w: &Word| shell.word(w).taint();
            commands::fetches_pr_code_with(&run.value, &script, true, &taint_of, false).is_some()
        })
    }

    /// The step of job `id` (of this workflow) whose flag its output
    /// `name` is (`${{ steps.X.outputs.F }}`), with the flag's name.
    fn needed_flag(&self, id: &str, name: &str) -> Option<(JobRef, &'a Step, String)> {
        let wf = self.workflow();
        let j = wf
            .jobs
            .iter()
            .position(|x| x.id.value.eq_ignore_ascii_case(id))?;
        let (_, value) = wf.jobs[j]
            .outputs
            .iter()
            .find(|(k, _)| k.value.eq_ignore_ascii_case(name))?;
        let body = crate::contracts::expr::sole_expression(&value.value)?;
        let Ok(Expr::Path(root, segs)) = eval::parse(body) else {
            return None;
        };
        let [Seg::Name(sid), Seg::Name(outputs), Seg::Name(flag)] = segs.as_slice() else {
            return None;
        };
        if !root.eq_ignore_ascii_case("steps") || !outputs.eq_ignore_ascii_case("outputs") {
            return None;
        }
        let step = step_by_id(&wf.jobs[j].steps, sid)?;
        let at = JobRef {
            workflow: self.at.workflow,
            job: j,
        };
        Some((at, step, flag.clone()))
    }

    /// The gates proved by step `failing` of this job, when it fails
    /// whenever it runs and its `if:` is true whenever an earlier step's
    /// flag gate is not `true`: `!= 'true'`, or `== 'false'` where every
    /// run of the flag's step that did not pass the check and did not fail
    /// writes `false` (and that step provably ran).
    fn failing_on_flag(&self, failing: &Step) -> Vec<Gate> {
        let job = self.job();
        let Some(cond) = &failing.if_cond else {
            return Vec::new();
        };
        if may_continue(failing.continue_on_error.as_ref())
            || runs_after_failure(&cond.value)
            || !self.memo.always_fails(self.workflows, self.at, failing)
            || self.untrusted_before(self.at, failing.index)
        {
            return Vec::new();
        }
        let Some(expr) = condition_expr(&cond.value) else {
            return Vec::new();
        };
        let Some(("steps", id, name, test)) = flag_test(&expr) else {
            return Vec::new();
        };
        if test == FlagTest::IsTrue {
            return Vec::new();
        }
        let Some(flagged) = step_by_id(&job.steps[..failing.index], id) else {
            return Vec::new();
        };
        let ran = flagged.if_cond.as_ref().is_none_or(|c| {
            eval::condition(&c.value, &self.at_step(flagged.index)) == eval::Tri::True
        }) && !may_continue(flagged.continue_on_error.as_ref());
        self.memo
            .flag_gates(self.workflows, self.at, flagged)
            .into_iter()
            .filter(|f| {
                f.output.eq_ignore_ascii_case(name)
                    && (test == FlagTest::NotTrue || f.false_otherwise && ran)
            })
            .map(|f| f.gate)
            .collect()
    }

    /// Whether someone with write access started the run: a member's
    /// comment (the start's actor), or any start behind a gate on the actor.
    pub fn started_by_member(&self) -> bool {
        let event = self.start.event.as_str();
        COMMENT_EVENTS.contains(&event) && self.start.actor == Actor::Member || self.gated().starter
    }

    /// Whether `github.event.comment` (or `review`) is a member's text.
    fn comment_by_member(&self, first: &str) -> bool {
        let event = self.start.event.as_str();
        match first {
            "comment" => {
                COMMENTED_EVENTS.contains(&event)
                    && (self.start.actor == Actor::Member && COMMENT_EVENTS.contains(&event)
                        || self.gated().starter)
            }
            "review" => event == "pull_request_review" && self.gated().starter,
            _ => false,
        }
    }

    /// A taint as the start and the gates before this step refine it:
    /// pull-request bytes that a member chose to run (by a comment, or past
    /// a gate on the run's actor) are the recovery path's, a maintainer's
    /// choice ([`Taint::MAINTAINER`]), whatever the policy says of members'
    /// pull requests: the member may have chosen someone else's. A gate on
    /// the pull request's author alone changes nothing: the code the job
    /// runs need not be that pull request's (a comment can name another).
    pub fn refine_taint(&self, taint: Taint) -> Taint {
        if taint.pr() && self.started_by_member() {
            taint | Taint::MAINTAINER
        } else {
            taint
        }
    }

    fn refine(&self, value: Val) -> Val {
        if !value.taint().pr() {
            return value;
        }
        value.map_taint(&|t| self.refine_taint(t))
    }

    /// Evaluates a value as written (`ref: ${{ … }}`, text with expressions).
    pub fn value(&self, text: &str) -> Val {
        eval::eval_template(text, self)
    }

    fn guarded<T>(&self, fallback: T, f: impl FnOnce() -> T) -> T {
        let depth = self.depth.get();
        if depth >= MAX_DEPTH {
            return fallback;
        }
        self.depth.set(depth + 1);
        let out = f();
        self.depth.set(depth);
        out
    }

    /// Whether the event carries a pull request's payload (head, title, …).
    fn pr_event(&self) -> bool {
        matches!(
            self.start.event.as_str(),
            "pull_request"
                | "pull_request_target"
                | "pull_request_review"
                | "pull_request_review_comment"
        )
    }

    /// Whether a `workflow_run` start follows a pull request's run.
    fn upstream_pr(&self) -> bool {
        self.start.event == "workflow_run"
            && self.start.upstream.as_deref().is_none_or(|up| {
                matches!(
                    up,
                    "pull_request"
                        | "pull_request_target"
                        | "pull_request_review"
                        | "pull_request_review_comment"
                        | "issue_comment"
                        | "workflow_run"
                ) || matches!(
                    self.start.actor,
                    super::starts::Actor::Outsider | super::starts::Actor::Member
                )
            })
    }

    /// A mirror's push of a pull request (`Start::mirror`): its ref is a
    /// `pull-request/N` branch, its commit the pull request's.
    fn mirrored_push(&self) -> bool {
        self.start.mirror && self.start.event == "push"
    }

    fn default_ref(&self) -> Val {
        Val::str(format!("refs/heads/{}", self.policy.default_branch))
    }

    /// `github.…`.
    fn github(&self, path: &[String]) -> Val {
        let Some(first) = path.first().map(String::as_str) else {
            return Val::Unknown(Taint::NONE);
        };
        let event = self.start.event.as_str();
        let pr = self.pr_event();
        match first {
            "event_name" => Val::str(event),
            "repository" | "event_path" => match first {
                "repository" => self.memo.this_repository(),
                _ => Val::Unknown(Taint::NONE),
            },
            "repository_owner" => self.memo.this_owner(),
            "head_ref" => {
                if pr {
                    Val::Unknown(Taint::PR_REF | Taint::PR_TEXT)
                } else {
                    Val::str("")
                }
            }
            "base_ref" => {
                if pr {
                    Val::Unknown(Taint::NONE)
                } else {
                    Val::str("")
                }
            }
            "ref" | "ref_name" if self.mirrored_push() => mirror_ref(first == "ref"),
            "sha" if self.mirrored_push() => Val::Unknown(Taint::PR_REF),
            "ref" | "ref_name" => match event {
                "pull_request" | "pull_request_review" | "pull_request_review_comment" => {
                    Val::Unknown(Taint::PR_REF)
                }
                "workflow_run"
                | "issue_comment"
                | "issues"
                | "schedule"
                | "repository_dispatch"
                | "discussion"
                | "discussion_comment"
                    if first == "ref" =>
                {
                    self.default_ref()
                }
                _ => Val::Unknown(Taint::NONE),
            },
            "sha" => match event {
                "pull_request" | "pull_request_review" | "pull_request_review_comment" => {
                    Val::Unknown(Taint::PR_REF)
                }
                _ => Val::Unknown(Taint::NONE),
            },
            "token" => Val::Unknown(Taint::SECRET),
            "event" => self.event(&path[1..]),
            _ => Val::Unknown(Taint::NONE),
        }
    }

    /// `github.event.…`, as this start's event fills the payload.
    fn event(&self, path: &[String]) -> Val {
        let event = self.start.event.as_str();
        let outsider = self.start.actor == super::starts::Actor::Outsider;
        let Some(first) = path.first().map(String::as_str) else {
            return Val::Unknown(Taint::NONE);
        };
        let rest: Vec<&str> = path[1..].iter().map(String::as_str).collect();
        if self.mirrored_push() && rest.is_empty() {
            match first {
                "ref" => return mirror_ref(true),
                "after" => return Val::Unknown(Taint::PR_REF),
                _ => {}
            }
        }
        let text_field = |path: &[&str]| -> bool {
            let last = path.last().copied().unwrap_or("");
            matches!(
                last,
                "title"
                    | "body"
                    | "message"
                    | "display_title"
                    | "head_ref"
                    | "head_branch"
                    | "label"
                    | "page_name"
                    | "description"
                    | "name"
                    | "email"
            ) || path.windows(2).any(|w| w == ["head", "ref"])
                || path
                    .iter()
                    .any(|p| matches!(*p, "author" | "committer" | "pusher"))
        };
        let association = |outsider: bool| {
            let names: &[&str] = if outsider {
                &[
                    "CONTRIBUTOR",
                    "FIRST_TIME_CONTRIBUTOR",
                    "FIRST_TIMER",
                    "NONE",
                    "MANNEQUIN",
                ]
            } else {
                &["OWNER", "MEMBER", "COLLABORATOR"]
            };
            Val::any(names.iter().map(|n| Val::str(*n)).collect())
        };
        match first {
            "pull_request" => {
                if !self.pr_event() {
                    return Val::Null;
                }
                match rest.as_slice() {
                    [] => Val::Obj(Taint::PR_REF | Taint::PR_TEXT),
                    ["head", "sha"] => Val::Unknown(Taint::PR_REF),
                    ["head", "ref"] => Val::Unknown(Taint::PR_REF | Taint::PR_TEXT),
                    ["head", "repo", "full_name"] => {
                        if outsider {
                            Val::Sym(FORK_REPO)
                        } else {
                            self.memo.this_repository()
                        }
                    }
                    ["head", "repo", "fork"] => Val::Bool(outsider),
                    [
                        "head",
                        "repo",
                        "clone_url" | "html_url" | "ssh_url" | "git_url",
                    ] => Val::Unknown(if outsider { Taint::PR_REF } else { Taint::NONE }),
                    ["head", "repo", "owner", "login"] | ["head", "user", "login"] => {
                        Val::Unknown(if outsider { Taint::PR_REF } else { Taint::NONE })
                    }
                    ["head", ..] => Val::Unknown(Taint::PR_REF | Taint::PR_TEXT),
                    ["base", "repo", "full_name"] => self.memo.this_repository(),
                    ["base", ..] => Val::Unknown(Taint::NONE),
                    ["author_association"] => association(outsider),
                    [
                        "number" | "id" | "merged" | "draft" | "state" | "labels",
                        ..,
                    ] => Val::Unknown(Taint::NONE),
                    ["user", ..] => Val::Unknown(Taint::NONE),
                    [.., "sha"] => Val::Unknown(Taint::PR_REF),
                    other if text_field(other) => Val::Unknown(Taint::PR_TEXT),
                    _ => Val::Unknown(Taint::NONE),
                }
            }
            "number" => {
                if self.pr_event() {
                    Val::Unknown(Taint::NONE)
                } else {
                    Val::Null
                }
            }
            "issue" | "comment" | "review" | "discussion" => {
                let here = match first {
                    "issue" => matches!(event, "issue_comment" | "issues"),
                    "comment" => matches!(
                        event,
                        "issue_comment" | "pull_request_review_comment" | "discussion_comment"
                    ),
                    "review" => event == "pull_request_review",
                    _ => matches!(event, "discussion" | "discussion_comment"),
                };
                if !here {
                    return Val::Null;
                }
                // On a comment event the start's actor is the commenter:
                // the issue's (the pull request's) or the discussion's
                // author may be anyone, whoever comments.
                let commented = COMMENTED_EVENTS.contains(&event) && first != "comment";
                match rest.as_slice() {
                    ["author_association"] if commented => {
                        Val::any(vec![association(true), association(false)])
                    }
                    ["author_association"] => association(outsider),
                    [
                        "number" | "id" | "state" | "labels" | "pull_request" | "user",
                        ..,
                    ] => Val::Unknown(Taint::NONE),
                    // A member's own comment is a member's act, as a
                    // dispatch's input is.
                    other if text_field(other) && self.comment_by_member(first) => {
                        Val::Unknown(Taint::MAINTAINER)
                    }
                    other if text_field(other) => Val::Unknown(Taint::PR_TEXT),
                    _ => Val::Unknown(Taint::NONE),
                }
            }
            "workflow_run" => {
                if event != "workflow_run" {
                    return Val::Null;
                }
                let pr = self.upstream_pr();
                let code = if pr { Taint::PR_REF } else { Taint::NONE };
                let text = if pr { Taint::PR_TEXT } else { Taint::NONE };
                match rest.as_slice() {
                    ["event"] => match &self.start.upstream {
                        Some(up) => Val::str(up.clone()),
                        None => Val::Unknown(Taint::NONE),
                    },
                    ["pull_requests", rest @ ..] => {
                        Val::Unknown(if text_field(rest) { code | text } else { code })
                    }
                    ["head_sha"] | ["id"] => Val::Unknown(code),
                    ["head_branch"] => Val::Unknown(code | text),
                    // A mirror's run is on a branch of this repository,
                    // with a fork's bytes: a guard on the head repository
                    // does not keep them out.
                    ["head_repository", "full_name"] => {
                        if outsider && !self.start.mirror {
                            Val::Sym(FORK_REPO)
                        } else {
                            self.memo.this_repository()
                        }
                    }
                    ["head_repository", "fork"] => Val::Bool(outsider && !self.start.mirror),
                    ["head_repository", ..] => {
                        Val::Unknown(if outsider { code } else { Taint::NONE })
                    }
                    ["repository", "full_name"] => self.memo.this_repository(),
                    ["name"] => Val::Unknown(text),
                    other if text_field(other) => Val::Unknown(text),
                    _ => Val::Unknown(Taint::NONE),
                }
            }
            "inputs" => {
                if event == "workflow_dispatch" {
                    rest.first()
                        .map_or(Val::Unknown(Taint::MAINTAINER), |name| {
                            self.dispatch_input(name)
                        })
                } else {
                    Val::Null
                }
            }
            "client_payload" => {
                if event == "repository_dispatch" {
                    // A comment bot's dispatch carries the comment and the
                    // pull request it was made on.
                    match self.start.actor {
                        Actor::Outsider | Actor::Member if self.start.payload_by_bot => {
                            self.bot_payload(&rest)
                        }
                        // Another dispatcher's payload is what its
                        // workflow wrote, from the comment or the PR.
                        Actor::Outsider | Actor::Member => {
                            Val::Unknown(Taint::PR_REF | Taint::PR_TEXT)
                        }
                        _ => Val::Unknown(Taint::MAINTAINER),
                    }
                } else {
                    Val::Null
                }
            }
            "repository" => match rest.as_slice() {
                ["full_name"] => self.memo.this_repository(),
                ["default_branch"] => Val::str(self.policy.default_branch.clone()),
                _ => Val::Unknown(Taint::NONE),
            },
            "head_commit" | "commits" => {
                if event != "push" {
                    return Val::Null;
                }
                if text_field(&rest) {
                    Val::Unknown(Taint::PR_TEXT)
                } else {
                    Val::Unknown(Taint::NONE)
                }
            }
            "release" => {
                if event != "release" {
                    return Val::Null;
                }
                if text_field(&rest) {
                    Val::Unknown(Taint::PR_TEXT)
                } else {
                    Val::Unknown(Taint::NONE)
                }
            }
            "label" => {
                if matches!(
                    event,
                    "pull_request" | "pull_request_target" | "issues" | "discussion"
                ) {
                    Val::Unknown(Taint::NONE)
                } else {
                    Val::Null
                }
            }
            // Who pushed, merged or sent an event only an account with
            // write access can cause: that account's own login and email,
            // never a pull request author's text (the pushed commits'
            // messages and authors stay theirs, under `head_commit`).
            "pusher" => {
                if event == "push" {
                    Val::Unknown(Taint::MAINTAINER)
                } else {
                    Val::Null
                }
            }
            "sender" if WRITE_ACCESS_EVENTS.contains(&event) => Val::Unknown(Taint::MAINTAINER),
            "merge_group" => {
                if event == "merge_group" {
                    Val::Unknown(Taint::NONE)
                } else {
                    Val::Null
                }
            }
            _ => {
                if text_field(&path.iter().map(String::as_str).collect::<Vec<_>>()) {
                    Val::Unknown(Taint::PR_TEXT)
                } else {
                    Val::Unknown(Taint::NONE)
                }
            }
        }
    }

    /// `client_payload.…` of a `repository_dispatch` that a workflow of
    /// this repository fired for the event `start.upstream`:
    /// slash-command-dispatch's `github.payload` is that event's payload,
    /// its `pull_request` the pull request commented on, its
    /// `slash_command` the comment's words. Anything else is the pull
    /// request's bytes.
    fn bot_payload(&self, rest: &[&str]) -> Val {
        let owned = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
        let as_event = |event: &str, path: &[&str]| {
            let start = Start {
                event: event.to_owned(),
                upstream: None,
                ..self.start.clone()
            };
            let scope = self.another(self.at, &start, self.step);
            scope.event(&owned(path))
        };
        match rest {
            ["github", "payload", path @ ..] if !path.is_empty() => {
                match self.start.upstream.as_deref() {
                    Some(up) if up != "repository_dispatch" => as_event(up, path),
                    _ => Val::Unknown(Taint::PR_REF | Taint::PR_TEXT),
                }
            }
            ["pull_request", path @ ..] => {
                let mut full = vec!["pull_request"];
                full.extend_from_slice(path);
                as_event("pull_request_target", &full)
            }
            ["slash_command", ..] => {
                let member = (self.start.actor == Actor::Member || self.gated().starter)
                    && self
                        .start
                        .upstream
                        .as_deref()
                        .is_some_and(|up| COMMENTED_EVENTS.contains(&up));
                Val::Unknown(if member {
                    Taint::MAINTAINER
                } else {
                    Taint::PR_TEXT
                })
            }
            _ => Val::Unknown(Taint::PR_REF | Taint::PR_TEXT),
        }
    }

    /// A `workflow_dispatch` input: a choice is one of its options, a
    /// boolean true or false; any other input is what the dispatcher typed.
    fn dispatch_input(&self, name: &str) -> Val {
        let wf = &self.workflows[self.start.top];
        let spec = wf.dispatch_inputs.iter().find(|i| i.name == name);
        match spec {
            Some(spec) if spec.kind == "choice" && !spec.options.is_empty() => {
                Val::any(spec.options.iter().map(|o| Val::str(o.clone())).collect())
            }
            Some(spec) if spec.kind == "boolean" => {
                Val::any(vec![Val::Bool(true), Val::Bool(false)])
            }
            Some(spec) if spec.kind == "environment" => Val::Unknown(Taint::NONE),
            _ => Val::Unknown(Taint::MAINTAINER),
        }
    }

    /// `inputs.NAME`: a dispatch's input, or what the calling job passes.
    fn input(&self, name: &str) -> Val {
        let Some((caller, outer)) = self.start.via.split_last() else {
            if self.start.event == "workflow_dispatch" {
                return self.dispatch_input(name);
            }
            return Val::Null;
        };
        let wf = self.workflow();
        let calling = &self.workflows[caller.workflow].jobs[caller.job];
        let default = wf
            .call_inputs
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, d)| d.clone());
        let passed = lookup(&calling.with, name).map(|v| v.value.clone());
        let Some(text) = passed.or(default) else {
            return Val::Null;
        };
        // The caller's value, evaluated where the caller stands.
        let start = Start {
            via: outer.to_vec(),
            ..self.start.clone()
        };
        let scope = self.another(*caller, &start, None);
        let value = self.guarded(Val::Unknown(Taint::UNSEEN), || scope.value(&text));
        // A `boolean` input is a boolean: its `false` is false.
        let boolean = wf
            .call_input_types
            .iter()
            .any(|(n, kind)| n == name && kind == "boolean");
        match value {
            Val::Str(s, t) if boolean && t.is_empty() && matches!(s.trim(), "true" | "false") => {
                Val::Bool(s.trim() == "true")
            }
            other => other,
        }
    }

    /// `env.NAME` here: the step's own `env:`, the `$GITHUB_ENV` lines of
    /// earlier steps, the job's `env:`, the workflow's.
    fn env(&self, name: &str) -> Val {
        let key = (self.at, self.step, self.start.clone(), name.to_owned());
        if let Some(known) = self.memo.env.borrow().get(&key) {
            return known.clone();
        }
        let value = self.env_uncached(name);
        self.memo.env.borrow_mut().insert(key, value.clone());
        value
    }

    fn env_uncached(&self, name: &str) -> Val {
        if let Some(step) = self.current_step() {
            if let Some(v) = lookup(&step.env, name) {
                return self.guarded(Val::Unknown(Taint::UNSEEN), || self.outer().value(&v.value));
            }
        }
        // Lines an earlier step wrote to `$GITHUB_ENV`: those that name it
        // replace the job's value; those whose name is not known may.
        let mut written = Vec::new();
        let mut maybe = Vec::new();
        if let Some(index) = self.step {
            for earlier in self.job().steps.iter().take(index) {
                let Some(script) = earlier.script() else {
                    continue;
                };
                for line in commands::file_lines(&script, "GITHUB_ENV") {
                    if line.may_set(name) {
                        let scope = self.at_step(earlier.index);
                        let value = self.guarded(Val::Unknown(Taint::UNSEEN), || {
                            scope.shell_value(&script, &line.value)
                        });
                        if line.name.is_empty() {
                            maybe.push(value);
                        } else {
                            written.push(value);
                        }
                    }
                }
            }
        }
        if !written.is_empty() {
            written.extend(maybe);
            return Val::any(written);
        }
        let declared = if let Some(v) = lookup(&self.job().env, name) {
            let scope = self.another(self.at, self.start, None);
            self.guarded(Val::Unknown(Taint::UNSEEN), || scope.value(&v.value))
        } else if let Some(v) = lookup(&self.workflow().env, name) {
            let scope = self.another(self.at, self.start, None);
            self.guarded(Val::Unknown(Taint::UNSEEN), || scope.value(&v.value))
        } else {
            Val::Null
        };
        if maybe.is_empty() {
            return declared;
        }
        maybe.push(declared);
        Val::any(maybe)
    }

    /// This scope without the current step's own `env:` (what that `env:`'s values see).
    fn outer(&self) -> JobScope<'a> {
        match self.step {
            Some(i) => JobScope {
                step: Some(i),
                depth: Cell::new(self.depth.get()),
                ..*self
            },
            None => self.another(self.at, self.start, None),
        }
    }

    /// `needs.JOB.outputs.NAME`: the job's `outputs:` value, evaluated at
    /// the end of that job.
    fn needs(&self, path: &[String]) -> Val {
        let (Some(job), Some(what)) = (path.first(), path.get(1)) else {
            return Val::Unknown(Taint::NONE);
        };
        if what != "outputs" {
            return Val::Unknown(Taint::NONE);
        }
        let wf = self.workflow();
        let Some(j) = wf.jobs.iter().position(|x| &x.id.value == job) else {
            return Val::Unknown(Taint::UNSEEN);
        };
        let other = &wf.jobs[j];
        let Some(name) = path.get(2) else {
            return Val::Unknown(Taint::UNSEEN);
        };
        // A job that calls a reusable workflow: its outputs are the callee's.
        let Some(text) = lookup(&other.outputs, name) else {
            return if other.uses.is_some() {
                Val::Unknown(Taint::UNSEEN)
            } else {
                Val::Null
            };
        };
        let at = JobRef {
            workflow: self.at.workflow,
            job: j,
        };
        let end = other.steps.len();
        let scope = self.another(at, self.start, Some(end));
        self.guarded(Val::Unknown(Taint::UNSEEN), || scope.value(&text.value))
    }

    /// `steps.ID.outputs.NAME`, for a step before this one.
    fn steps(&self, path: &[String]) -> Val {
        let (Some(id), Some(what)) = (path.first(), path.get(1)) else {
            return Val::Unknown(Taint::NONE);
        };
        let limit = self.step.unwrap_or(self.job().steps.len());
        let Some(step) = self
            .job()
            .steps
            .iter()
            .take(limit)
            .find(|s| s.id.as_ref().is_some_and(|i| &i.value == id))
        else {
            return Val::Null;
        };
        if what != "outputs" {
            return Val::Unknown(Taint::NONE);
        }
        let Some(name) = path.get(2) else {
            return Val::Unknown(Taint::UNSEEN);
        };
        let scope = self.at_step(step.index);
        // A step whose `if:` is false here does not run: no outputs.
        if let Some(cond) = &step.if_cond {
            if eval::condition(&cond.value, &scope) == eval::Tri::False {
                return Val::Null;
            }
        }
        self.guarded(Val::Unknown(Taint::UNSEEN), || {
            scope.step_output(step, name)
        })
    }

    /// What `tj-actions/changed-files` outputs as `name`, by the kind its
    /// documentation gives each output: `…any_changed`, `…only_deleted`
    /// and the like are booleans and `…_count` numbers, which carry no
    /// text; `…_keys` are the names of the `files_yaml` groups, which are
    /// the step's own inputs or, read from a file, that file's (text: the
    /// job may have fetched it from a pull request); every other output
    /// lists file names, which a pull request's author chooses, escaped
    /// for a shell unless `safe_output` is off (or not known to be on).
    fn changed_files_output(&self, step: &Step, name: &str, inputs: Taint) -> Taint {
        const BOOLEANS: &[&str] = &[
            "any_changed",
            "only_changed",
            "any_modified",
            "only_modified",
            "any_deleted",
            "only_deleted",
        ];
        if BOOLEANS
            .iter()
            .any(|b| name == *b || name.ends_with(&format!("_{b}")))
            || name.ends_with("_count")
        {
            return Taint::NONE;
        }
        if name.ends_with("_keys") {
            // Read from a file, the names are that file's, which may be a
            // pull request's however the job came by it (a checkout, `gh
            // api`, `git show`); they are escaped but never quoted by git.
            let from_file = step
                .with
                .iter()
                .any(|(k, _)| k.value.to_ascii_lowercase().ends_with("_from_source_file"));
            return if from_file {
                inputs | Taint::PR_TEXT
            } else {
                inputs
            };
        }
        // `safe_output` came with v41 and is on by default; an older tag,
        // a branch or a commit is not known to have it.
        let escaping_version = step.major_version().is_some_and(|m| m >= 41);
        // The runner reads input names without regard to case.
        let escaped = escaping_version
            && step
                .with
                .iter()
                .filter(|(k, _)| k.value.eq_ignore_ascii_case("safe_output"))
                .all(|(_, v)| v.value.trim() == "true");
        let own = if escaped {
            Taint::PR_TEXT_SHELL_ESCAPED
        } else {
            Taint::PR_TEXT
        };
        own | inputs
    }

    /// What step `step` outputs as `name`.
    fn step_output(&self, step: &Step, name: &str) -> Val {
        if let Some(script) = step.script() {
            let lines: Vec<Val> = commands::file_lines(&script, "GITHUB_OUTPUT")
                .into_iter()
                .filter(|l| l.may_set(name))
                .map(|l| self.shell_value(&script, &l.value))
                .collect();
            if !lines.is_empty() {
                return Val::any(lines);
            }
            // Written some way the reader does not follow.
            let mentions = script.commands().any(|c| {
                c.words
                    .iter()
                    .any(|w| w.variables().any(|v| v == "GITHUB_OUTPUT"))
            });
            return if mentions {
                Val::Unknown(Taint::UNSEEN)
            } else {
                Val::Null
            };
        }
        let Some((action, _)) = step.action() else {
            return Val::Unknown(Taint::UNSEEN);
        };
        let inputs = step
            .with
            .iter()
            .fold(Taint::NONE, |t, (_, v)| t | self.value(&v.value).taint());
        if action.eq_ignore_ascii_case("tj-actions/changed-files") {
            return Val::Unknown(self.changed_files_output(step, name, inputs));
        }
        if let Some((_, taint)) = ACTION_OUTPUTS
            .iter()
            .find(|(a, _)| a.eq_ignore_ascii_case(action))
        {
            return Val::Unknown(*taint | inputs);
        }
        if action.eq_ignore_ascii_case("actions/github-script") {
            // JavaScript is not followed: what it reads says what its
            // outputs may carry (the pull-request API, the event's pull
            // request, issue or comment; a dispatch's inputs).
            let script = step.input("script").map_or("", |s| s.value.as_str());
            // Followed where it can be: an output made only of numbers
            // the event carries (`context.payload.issue.number`), of
            // literals and of comparisons is no text anyone wrote; a
            // pull request's number still names its code.
            if let Some(paths) = gates::script_output_sources(script, name) {
                let own = paths.iter().try_fold(Taint::NONE, |t, p| {
                    if let Some(field) = p.strip_prefix("api.pulls.get.") {
                        return pull_request_field(field).map(|f| t | f);
                    }
                    if !numeric_context(p) {
                        return None;
                    }
                    let names_pr = [
                        "payload.issue",
                        "payload.pull_request",
                        "payload.workflow_run",
                        "context.issue",
                    ]
                    .iter()
                    .any(|q| p.contains(q));
                    Some(t | if names_pr { Taint::PR_REF } else { Taint::NONE })
                });
                if let Some(own) = own {
                    return self.refine(Val::Unknown(own | inputs));
                }
            }
            let reads_pr = [
                "pull_request",
                "pulls.",
                "payload.issue",
                "payload.workflow_run",
            ]
            .iter()
            .any(|p| script.contains(p));
            let reads_comment = ["payload.comment", "payload.review"]
                .iter()
                .any(|p| script.contains(p));
            let reads_inputs =
                script.contains("payload.inputs") || script.contains("client_payload");
            let mut own = Taint::NONE;
            if reads_pr {
                own |= Taint::PR_REF | Taint::PR_TEXT;
            }
            if reads_comment {
                let member = if script.contains("payload.review") {
                    self.comment_by_member("review")
                } else {
                    self.comment_by_member("comment")
                };
                own |= if member {
                    Taint::MAINTAINER
                } else {
                    Taint::PR_REF | Taint::PR_TEXT
                };
            }
            if reads_inputs {
                own |= Taint::MAINTAINER;
            }
            return self.refine(Val::Unknown(own | inputs));
        }
        if action.eq_ignore_ascii_case("actions/checkout") {
            let reference = step
                .input("ref")
                .map_or(Val::Null, |r| self.value(&r.value));
            return Val::Unknown(reference.taint());
        }
        // A third-party action: what it outputs may come from anything it
        // reads; the workflow does not show it.
        Val::Unknown(Taint::UNSEEN | inputs)
    }

    /// `matrix.…`: the values the job's matrix lists (its axes and
    /// `include` entries), or what a computed matrix is made from.
    fn matrix(&self, path: &[String]) -> Val {
        let Some(matrix) = &self.job().matrix else {
            return Val::Null;
        };
        let computed = |text: &str| -> Val {
            let scope = self.another(self.at, self.start, None);
            Val::Unknown(self.guarded(Taint::UNSEEN, || scope.value(text).taint()))
        };
        let serde_json::Value::Object(map) = matrix else {
            return match matrix {
                serde_json::Value::String(s) => computed(s),
                _ => Val::Unknown(Taint::NONE),
            };
        };
        let Some(key) = path.first() else {
            return Val::Unknown(Taint::NONE);
        };
        let mut values = Vec::new();
        let mut taint = Taint::NONE;
        let mut collect = |v: &serde_json::Value| match v {
            serde_json::Value::Array(items) => values.extend(items.iter().cloned()),
            serde_json::Value::String(s) if s.contains("${{") => taint |= computed(s).taint(),
            other => values.push(other.clone()),
        };
        if let Some(axis) = map.get(key.as_str()) {
            collect(axis);
        }
        for entries in ["include"] {
            match map.get(entries) {
                Some(serde_json::Value::Array(list)) => {
                    for entry in list {
                        if let Some(v) = entry.get(key.as_str()) {
                            values.push(v.clone());
                        }
                    }
                }
                Some(serde_json::Value::String(s)) => taint |= computed(s).taint(),
                _ => {}
            }
        }
        if values.is_empty() {
            return if taint.is_empty() {
                Val::Null
            } else {
                Val::Unknown(taint)
            };
        }
        let mut out = Vec::new();
        for v in values {
            let mut v = &v;
            let mut missing = false;
            for seg in &path[1..] {
                match v.get(seg.as_str()) {
                    Some(inner) => v = inner,
                    None => {
                        missing = true;
                        break;
                    }
                }
            }
            if missing {
                out.push(Val::Null);
                continue;
            }
            out.push(match v {
                serde_json::Value::String(s) if s.contains("${{") => computed(s),
                serde_json::Value::String(s) => Val::str(s.clone()),
                serde_json::Value::Array(items) => Val::List(
                    items
                        .iter()
                        .map(|i| Val::str(i.as_str().unwrap_or_default()))
                        .collect(),
                ),
                serde_json::Value::Null => Val::Null,
                other => Val::str(other.to_string()),
            });
        }
        Val::any(out).tainted(taint)
    }

    /// The directories of the workspace that hold a pull request's bytes
    /// when this step runs (`.` for the workspace itself): checkouts at a
    /// pull request's ref or of a fork, and the artifacts of a pull
    /// request's run where they were unpacked (`download-artifact` with its
    /// `run-id`, dawidd6's action, or an `actions/github-script` that asks
    /// the API for the triggering run's artifacts and writes them here).
    pub fn pr_dirs(&self) -> Vec<String> {
        let limit = self.step.unwrap_or(self.job().steps.len());
        let mut dirs = Vec::new();
        let mut push = |dir: &str| {
            let dir = dir
                .trim()
                .trim_start_matches("./")
                .trim_matches('/')
                .to_owned();
            dirs.push(if dir.is_empty() { ".".to_owned() } else { dir });
        };
        for step in self.job().steps.iter().take(limit) {
            let scope = self.at_step(step.index);
            if let Some((_, taint)) = super::code::other_run_download_taint(step, &scope) {
                if taint.pr() {
                    push(step.input("path").map_or(".", |p| p.value.as_str()));
                }
                continue;
            }
            if step.uses_action("actions/github-script")
                && step.input("script").is_some_and(|s| {
                    s.value.contains("downloadArtifact") && s.value.contains("workflow_run")
                })
                && scope.upstream_pr()
            {
                push(".");
                continue;
            }
            if !step.uses_action("actions/checkout") {
                continue;
            }
            let reference = step
                .input("ref")
                .map_or(Val::Null, |r| scope.value(&r.value));
            let repository = step
                .input("repository")
                .map_or(Val::Null, |r| scope.value(&r.value));
            let fork = repository
                .alternatives()
                .iter()
                .any(|v| matches!(v, Val::Sym(s) if *s == FORK_REPO));
            if reference.taint().pr() || repository.taint().pr() || fork {
                push(step.input("path").map_or(".", |p| p.value.as_str()));
            }
        }
        dirs
    }

    // ---- the shell --------------------------------------------------------

    /// A variable a step's script starts with: the runner's own, or the
    /// workflow's, job's or step's `env:`, or a `$GITHUB_ENV` line of an
    /// earlier step. `None` when nothing sets it.
    pub fn shell_var(&self, name: &str) -> Option<Val> {
        let github = |field: &str| Some(self.github(&[field.to_owned()]));
        match name {
            "GITHUB_SHA" => return github("sha"),
            "GITHUB_REF" => return github("ref"),
            "GITHUB_REF_NAME" => return github("ref_name"),
            "GITHUB_HEAD_REF" => return github("head_ref"),
            "GITHUB_BASE_REF" => return github("base_ref"),
            "GITHUB_EVENT_NAME" => return github("event_name"),
            "GITHUB_REPOSITORY" => return Some(self.memo.this_repository()),
            _ => {}
        }
        match self.env(name) {
            Val::Null => None,
            v => Some(v),
        }
    }

    /// The value a word of `script` has when this step runs it.
    pub fn shell_value(&self, script: &Script, word: &Word) -> Val {
        let shell = ShellTaint::new(self, script);
        shell.word(word)
    }

    /// The taint of every variable of `script` as this step runs it.
    pub fn shell<'s>(&'s self, script: &'s Script) -> ShellTaint<'s> {
        ShellTaint::new(self, script)
    }
}

/// What third-party actions output, when their documentation says so: a
/// pull request's head for the comment-triggered checkout helpers. Any
/// other third-party action's outputs are unseen.
const ACTION_OUTPUTS: &[(&str, Taint)] = &[
    ("xt0rted/pull-request-comment-branch", Taint::PR),
    ("alessbell/pull-request-comment-branch", Taint::PR),
    ("peter-evans/find-comment", Taint::PR_TEXT),
    ("actions/create-github-app-token", Taint::SECRET),
];

impl Scope for JobScope<'_> {
    fn lookup(&self, path: &[String]) -> Val {
        let Some(root) = path.first() else {
            return Val::Unknown(Taint::NONE);
        };
        let rest = &path[1..];
        let value = match root.as_str() {
            "github" => self.github(rest),
            "inputs" => rest
                .first()
                .map_or(Val::Unknown(Taint::MAINTAINER), |name| self.input(name)),
            "env" => rest
                .first()
                .map_or(Val::Unknown(Taint::NONE), |name| self.env(name)),
            "needs" => self.needs(rest),
            "steps" => self.steps(rest),
            "matrix" => self.matrix(rest),
            "secrets" => Val::Unknown(Taint::SECRET),
            _ => Val::Unknown(Taint::NONE),
        };
        self.refine(value)
    }
}

/// The taint of a script's variables (every assignment, in any order: the
/// reader does not follow the script's branches, so a variable has every
/// value any branch gives it).
pub struct ShellTaint<'a> {
    scope: &'a JobScope<'a>,
    script: &'a Script,
    /// The pull-request checkouts a file read may come from.
    pr_dirs: Vec<String>,
    /// Where each variable is first assigned on every path (a command that
    /// is not conditional): after that, the environment's value is gone.
    shadowed: BTreeMap<String, usize>,
    vars: BTreeMap<String, Taint>,
    base: RefCell<BTreeMap<String, Option<Val>>>,
}

impl<'a> ShellTaint<'a> {
    fn new(scope: &'a JobScope<'a>, script: &'a Script) -> ShellTaint<'a> {
        let mut shell = ShellTaint {
            scope,
            script,
            pr_dirs: scope.pr_dirs(),
            shadowed: BTreeMap::new(),
            vars: BTreeMap::new(),
            base: RefCell::new(BTreeMap::new()),
        };
        let assignments = script.assignments();
        for (command, a) in &assignments {
            if !command.conditional && !command.substituted && command.words.is_empty() {
                shell
                    .shadowed
                    .entry(a.name.clone())
                    .or_insert(command.span.end);
            }
        }
        // A fixpoint: taints only grow, and there are finitely many.
        for _ in 0..8 {
            let mut changed = false;
            for (_, a) in &assignments {
                let t = shell.word(&a.value).taint();
                let entry = shell.vars.entry(a.name.clone()).or_default();
                if (*entry | t) != *entry {
                    *entry |= t;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        shell
    }

    /// What the environment gives `name`, looked up once.
    fn given(&self, name: &str) -> Option<Val> {
        if let Some(known) = self.base.borrow().get(name) {
            return known.clone();
        }
        let value = self.scope.shell_var(name);
        self.base
            .borrow_mut()
            .insert(name.to_owned(), value.clone());
        value
    }

    /// The value of a word: known text when every part is literal or a
    /// known variable, else unknown with the parts' taints.
    pub fn word(&self, word: &Word) -> Val {
        let mut pieces = Vec::new();
        for part in &word.parts {
            pieces.push(match part {
                Part::Literal { text, .. } => {
                    let taint = if text.contains("pull/") {
                        Taint::PR_REF
                    } else {
                        Taint::NONE
                    };
                    Val::Str(text.clone(), taint)
                }
                // An indirect expansion may be any variable, the
                // script's or one it was given.
                Part::Variable { name, .. } if name.starts_with('!') => {
                    Val::Unknown(self.vars.values().fold(Taint::UNSEEN, |t, v| t | *v))
                }
                Part::Variable { name, .. } => {
                    let assigned = self.vars.get(name).copied();
                    let shadowed = self
                        .shadowed
                        .get(name)
                        .is_some_and(|end| word.span.start >= *end);
                    let given = if shadowed { None } else { self.given(name) };
                    match (assigned, given) {
                        (None, Some(v)) => v,
                        (Some(t), given) => {
                            Val::Unknown(t | given.map_or(Taint::NONE, |v| v.taint()))
                        }
                        (None, None) => Val::Unknown(Taint::NONE),
                    }
                }
                // The shell parses what the expression expands to: what an
                // action escaped for a shell is its author's text again.
                Part::Expression(body) => {
                    let value = eval::eval_body(body, self.scope);
                    let taint = value.taint();
                    value.tainted(taint.parsed_by_shell())
                }
                Part::Substitution { commands } => Val::Unknown(self.commands(commands.clone())),
                Part::Arithmetic(_) => Val::Unknown(Taint::NONE),
            });
        }
        if pieces.is_empty() {
            return Val::str("");
        }
        let taint = pieces.iter().fold(Taint::NONE, |t, v| t | v.taint());
        match eval::concat(&pieces) {
            Val::Str(s, _) => Val::Str(s, taint),
            other => other.tainted(taint),
        }
    }

    /// The value of the variable `name` where `at` (a byte of the script)
    /// expands it.
    pub fn variable(&self, name: &str, at: usize) -> Val {
        self.word(&Word {
            span: at..at,
            parts: vec![Part::Variable {
                name: name.to_owned(),
                quoted: true,
            }],
        })
    }

    /// The taint of the output of the commands `range` (a substitution).
    fn commands(&self, range: std::ops::Range<usize>) -> Taint {
        // Each pipeline prints what its last member prints, which reads
        // what the member before it printed.
        let commands = self.script.commands.get(range).unwrap_or_default();
        let mut taint = Taint::NONE;
        let mut piped: Option<(usize, Taint)> = None;
        for command in commands.iter().filter(|c| c.pipe_len > 0) {
            let stdin = match piped {
                Some((pipeline, t))
                    if pipeline == command.pipeline && command.pipe_position > 0 =>
                {
                    t
                }
                _ => Taint::NONE,
            };
            let out = self.command_reading(command, stdin);
            if command.pipe_position + 1 >= command.pipe_len {
                taint |= out;
                piped = None;
            } else {
                piped = Some((command.pipeline, out));
            }
        }
        // A range that ends inside a pipeline (what a `tee` in its middle
        // prints: `commands::file_lines`) prints what its last member does.
        if let Some((_, out)) = piped {
            taint |= out;
        }
        taint
    }

    /// What a command's output may carry: what it asks and what it is given.
    pub fn command_taint(&self, command: &Command) -> Taint {
        self.command_reading(command, Taint::NONE)
    }

    /// What a command's output may carry: what it asks (the pull-request
    /// API, the event payload), everything it is given, and `stdin` from a pipe.
    fn command_reading(&self, command: &Command, stdin: Taint) -> Taint {
        let mut given = stdin;
        for w in command
            .words
            .iter()
            .chain(command.redirects.iter().map(|r| &r.target))
        {
            given |= self.word(w).taint();
        }
        for r in &command.redirects {
            if let Some(doc) = &r.heredoc {
                given |= self
                    .word(&Word {
                        span: doc.body.clone(),
                        parts: doc.parts.clone(),
                    })
                    .taint();
            }
        }
        let taint = given | self.source(command);
        // `tr -cd '[:alnum:]-'` keeps only the characters it names: no text
        // survives that could carry shell or a new line.
        if command.program_is("tr") {
            let args = command.arg_texts();
            let deletes_complement = args.iter().any(|a| {
                a.starts_with('-') && !a.starts_with("--") && a.contains('c') && a.contains('d')
            }) || args.iter().any(|a| a == "-c")
                && args.iter().any(|a| a == "-d");
            if deletes_complement {
                return taint.without(Taint::PR_TEXT);
            }
        }
        let program = command.program().unwrap_or_default();
        // A filter whose result is a boolean or a count
        // (`--jq '.title | contains("[no-ci]")'`, `… | length`) prints
        // `true`, `false` or digits, whatever its input holds. The filter
        // itself must be written in the script, not expanded from a value.
        if let Some(filter) = filter_text(&program, &command.arg_texts()) {
            let written = command
                .args()
                .iter()
                .any(|w| w.literal().is_some_and(|l| l.ends_with(filter.as_str())));
            // Its error messages quote the input: they must go to the log.
            if written
                && !filter.contains("${{")
                && !command.stderr_is_captured()
                && !self.script_captures_stderr()
                && jq_prints_no_text(&filter)
            {
                return taint.without(Taint::PR | Taint::UNSEEN | Taint::MAINTAINER);
            }
        }
        // The base side of a pull request (`.base.ref`, `baseRefName`) is the
        // repository's own branch: no pull-request content. In GitHub's
        // answer, that is; in a file the pull request wrote, any field is
        // its author's.
        let from_github = !taint.has(Taint::PR_FILE_BYTES);
        if from_github
            && filter_text(&program, &command.arg_texts()).is_some_and(|f| {
                // A plain path (`.base.ref`, `.baseRefName`), not an object or
                // array built from several fields.
                let f = f
                    .trim()
                    .trim_end_matches(" // empty")
                    .trim_start_matches('.');
                let plain = f
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'[' | b']'));
                plain
                    && f.split('.')
                        .next()
                        .is_some_and(|first| first.to_ascii_lowercase().starts_with("base"))
            })
        {
            return taint.without(Taint::PR);
        }
        // A filter that selects a SHA, a number, a login or a flag yields
        // hex, digits or a word no one can fill with shell: it names
        // pull-request code but carries no text.
        if let Some(field) = filter_field(&program, &command.arg_texts()) {
            let id_like = id_like_field(&field);
            // Only GitHub's answers (the API, the event) type their fields;
            // a file the pull request wrote is whatever it wrote.
            if id_like && taint.has(Taint::PR_TEXT) && from_github {
                return taint.without(Taint::PR_TEXT) | Taint::PR_REF;
            }
        }
        // A string whose every interpolation is such a field
        // (`"number=\(.number)\nhead-sha=\(.headRefOid)"`): the script's
        // own text around hex and digits.
        if let Some(filter) = filter_text(&program, &command.arg_texts()) {
            let written = command
                .args()
                .iter()
                .any(|w| w.literal().is_some_and(|l| l.ends_with(filter.as_str())));
            if written
                && from_github
                && taint.has(Taint::PR_TEXT)
                && !command.stderr_is_captured()
                && !self.script_captures_stderr()
                && jq_interpolates_only_ids(&filter)
            {
                return taint.without(Taint::PR_TEXT) | Taint::PR_REF;
            }
        }
        taint
    }

    /// True when the script sends every later command's standard error
    /// somewhere it can be read again (`exec 2>>"$GITHUB_OUTPUT"`).
    fn script_captures_stderr(&self) -> bool {
        self.script
            .commands
            .iter()
            .any(|c| c.program().is_none_or(|p| p == "exec") && c.stderr_is_captured())
    }

    /// The pull-request content a command reads by itself.
    fn source(&self, command: &Command) -> Taint {
        let program = command.program().unwrap_or_default();
        let args = command.arg_texts();
        let asks_pr = match program.as_str() {
            "gh" => match args.first().map(String::as_str) {
                Some("pr") => true,
                Some("api") => args.iter().any(|a| names_pr_api(a)),
                _ => false,
            },
            "curl" | "wget" | "http" => args.iter().any(|a| names_pr_api(a)),
            _ => false,
        };
        let reads_event = args.iter().any(|a| a.contains("GITHUB_EVENT_PATH"))
            || command
                .redirects
                .iter()
                .any(|r| r.target.variables().any(|v| v == "GITHUB_EVENT_PATH"));
        let event_taint = if reads_event
            && (self.scope.pr_event()
                || self.scope.upstream_pr()
                || matches!(self.scope.start.event.as_str(), "issue_comment" | "issues"))
        {
            Taint::PR_REF | Taint::PR_TEXT
        } else {
            Taint::NONE
        };
        let mut taint = event_taint;
        if asks_pr {
            taint |= Taint::PR_REF | Taint::PR_TEXT;
        }
        // A file of a pull-request checkout, read (`cat pr/VERSION`, `< .env`).
        if self.reads_pr_file(command) {
            taint |= Taint::PR_TEXT | Taint::PR_FILE_BYTES;
        }
        self.scope.refine_taint(taint)
    }

    /// True when the command names a file of a pull-request checkout as an
    /// argument or reads one on its standard input. With the pull request
    /// checked out in the workspace itself, any relative path is one.
    fn reads_pr_file(&self, command: &Command) -> bool {
        if self.pr_dirs.is_empty() {
            return false;
        }
        let program = command.program().unwrap_or_default();
        // Writers and the shell's own commands read nothing here.
        if matches!(
            program.as_str(),
            "echo" | "printf" | "mkdir" | "rm" | "cd" | "export" | "test" | "["
        ) {
            return false;
        }
        // A filter (`jq '.a.b'`, `gh … -q .author.login`) is no file; `gh`
        // reads only the files its options name (`--input F`, `-F k=@F`).
        let args = command.args();
        let filter = filter_text(&program, &command.arg_texts());
        let named: Vec<Word> = if program == "gh" {
            args.iter()
                .enumerate()
                .filter_map(|(i, w)| {
                    let flag = i
                        .checked_sub(1)
                        .and_then(|j| args[j].literal())
                        .is_some_and(|f| {
                            matches!(f.as_str(), "--input" | "--body-file" | "--notes-file")
                        });
                    let at_file = w
                        .literal()
                        .and_then(|l| l.split_once("=@").map(|(_, path)| path.to_owned()));
                    match at_file {
                        Some(path) => Some(Word {
                            span: w.span.clone(),
                            parts: vec![Part::Literal {
                                text: path,
                                quoted: false,
                            }],
                        }),
                        None if flag => Some(w.clone()),
                        None => None,
                    }
                })
                .collect()
        } else {
            args.iter()
                .filter(|w| !w.is_option())
                .filter(|w| filter.is_none() || w.literal() != filter)
                .cloned()
                .collect()
        };
        let paths = named.iter().chain(
            command
                .redirects
                .iter()
                .filter(|r| r.op == RedirectOp::Read)
                .map(|r| &r.target),
        );
        paths.into_iter().any(|w| {
            let Some(text) = workspace_relative(w) else {
                return false;
            };
            let path = text.trim_start_matches("./");
            if path.starts_with('/')
                || path.starts_with('-')
                || path.contains("://")
                || path.is_empty()
            {
                return false;
            }
            // In the workspace itself, a word is a file when it looks like
            // one (`./NR`, `pr/number`, `report.txt`), not any argument.
            let path_like = text.starts_with("./") || path.contains('/') || path.contains('.');
            self.pr_dirs
                .iter()
                .any(|d| d == "." && path_like || path == d || path.starts_with(&format!("{d}/")))
        })
    }
}

/// A word's text when it is written out, a path under the workspace
/// (`"$GITHUB_WORKSPACE/pr/meta.json"`, `${{ github.workspace }}/pr/x`)
/// relative to it.
fn workspace_relative(word: &Word) -> Option<String> {
    if let Some(text) = word.literal() {
        return Some(text);
    }
    let (first, rest) = word.parts.split_first()?;
    let workspace = match first {
        Part::Variable { name, .. } => name == "GITHUB_WORKSPACE",
        Part::Expression(body) => body.trim() == "github.workspace",
        _ => false,
    };
    if !workspace {
        return None;
    }
    let mut text = String::new();
    for part in rest {
        match part {
            Part::Literal { text: t, .. } => text.push_str(t),
            _ => return None,
        }
    }
    let text = text.strip_prefix('/')?.to_owned();
    Some(if text.is_empty() {
        ".".to_owned()
    } else {
        format!("./{text}")
    })
}

/// True for an API path or URL that returns a pull request, an issue or
/// their comments (what their authors wrote, and the heads they name).
fn names_pr_api(arg: &str) -> bool {
    let a = arg.to_ascii_lowercase();
    a.contains("/pulls") || a.contains("pull/") || a.contains("/issues") || a.starts_with("pulls")
}

/// The last field a `jq` filter (or `gh … --jq`) selects (`.head.sha` → `sha`).
fn filter_field(program: &str, args: &[String]) -> Option<String> {
    let filter = filter_text(program, args)?;
    // A definition may give a field's name to any function.
    if jq_names(&filter)?
        .iter()
        .any(|n| matches!(n.as_str(), "def" | "include" | "import"))
    {
        return None;
    }
    let last = filter
        .trim()
        .trim_end_matches(" // empty")
        .rsplit(['.', '|', ' '])
        .next()?
        .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .to_ascii_lowercase();
    (!last.is_empty()).then_some(last)
}

/// A field of GitHub's answer whose value is hex, digits, a flag or a
/// login-like word (`sha`, `headRefOid`, `number`, `login`): nothing
/// anyone can fill with shell.
fn id_like_field(field: &str) -> bool {
    let field = field.to_ascii_lowercase();
    field.ends_with("sha")
        || field.ends_with("oid")
        || matches!(
            field.as_str(),
            "number"
                | "id"
                | "length"
                | "login"
                | "fork"
                | "draft"
                | "merged"
                | "state"
                | "full_name"
                | "node_id"
        )
}

/// True when a jq filter is one string literal whose interpolations are
/// all plain paths (`\(.head.sha)`) ending in an [`id_like_field`].
fn jq_interpolates_only_ids(filter: &str) -> bool {
    let Some(body) = filter
        .trim()
        .strip_prefix('"')
        .and_then(|b| b.strip_suffix('"'))
    else {
        return false;
    };
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return false,
            '\\' => match chars.next() {
                Some('(') => {
                    let path: String = chars.by_ref().take_while(|c| *c != ')').collect();
                    let plain = path.starts_with('.')
                        && path[1..].split('.').all(|seg| {
                            !seg.is_empty()
                                && seg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        });
                    let last = path.rsplit('.').next().unwrap_or("");
                    if !plain || !id_like_field(last) {
                        return false;
                    }
                }
                Some(_) => {}
                None => return false,
            },
            _ => {}
        }
    }
    true
}

/// jq builtins whose result is always a boolean or a number.
const JQ_TYPED_BUILTINS: &[&str] = &[
    "contains",
    "inside",
    "startswith",
    "endswith",
    "test",
    "has",
    "in",
    "isempty",
    "any",
    "all",
    "not",
    "length",
    "utf8bytelength",
    "tonumber",
    "floor",
    "ceil",
    "round",
    "isnan",
    "isinfinite",
    "isnormal",
    "isvalid",
    "type",
];

/// Words of jq's grammar after which a stage's value is not its last
/// operator's (a conditional, a `try`/`catch`, a reduction, a definition,
/// a binding).
const JQ_KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "end", "try", "catch", "reduce", "foreach", "def", "label", "as",
    "import", "include",
];

/// True when every value a jq filter outputs is a boolean, a number or a
/// type name, so its output carries no text (`.title | contains("x")`,
/// `.labels | length`, `.a == .b`, `(.x | test("y")) | not`). It reads the
/// filter's last stage (after the last `|` outside brackets and strings):
/// a typed builtin called alone, or a comparison (`==`, `!=`, `<`, `<=`,
/// `>`, `>=`, `and`, `or`, which bind looser than arithmetic and tighter
/// than `//`, `,` and `|`) with no `,`, `//`, assignment or keyword at its
/// top level. A string with an interpolation (`"\(…)"`), or anything not
/// read, is text.
fn jq_prints_no_text(filter: &str) -> bool {
    // A definition anywhere may give a builtin's name to a function that
    // returns text (`def length: .title; length`); a module may define
    // anything.
    let Some(names) = jq_names(filter) else {
        return false;
    };
    if names
        .iter()
        .any(|n| matches!(n.as_str(), "def" | "include" | "import"))
    {
        return false;
    }
    jq_last_stage_is_typed(filter)
}

/// The names a jq filter uses that are not fields (`.def`), variables
/// (`$def`), formats (`@sh`) or inside strings; `None` for a string that
/// does not end or interpolates.
fn jq_names(filter: &str) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut name = String::new();
    let mut before = None;
    let mut chars = filter.chars().chain([' ']);
    while let Some(c) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            name.push(c);
            continue;
        }
        if !name.is_empty() && !matches!(before, Some('.' | '$' | '@')) {
            names.push(std::mem::take(&mut name));
        }
        name.clear();
        if c == '"' {
            jq_skip_string(&mut chars)?;
        }
        before = Some(c);
    }
    Some(names)
}

/// [`jq_prints_no_text`] of a filter without definitions: its last stage.
fn jq_last_stage_is_typed(filter: &str) -> bool {
    let Some(stages) = jq_top_level_split(filter, '|') else {
        return false;
    };
    let Some(last) = stages.last() else {
        return false;
    };
    let last = last.trim();
    // `( … )` around the whole stage: its inside decides.
    if last.starts_with('(') && jq_matching_close(last) == Some(last.len() - 1) {
        return jq_last_stage_is_typed(&last[1..last.len() - 1]);
    }
    if last.is_empty() {
        return false;
    }
    // A typed builtin alone, with or without arguments.
    let name_len = last
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    let (name, rest) = last.split_at(name_len);
    if JQ_TYPED_BUILTINS.contains(&name) {
        let rest = rest.trim();
        if rest.is_empty() {
            return true;
        }
        if rest.starts_with('(') && jq_matching_close(rest) == Some(rest.len() - 1) {
            return true;
        }
    }
    // A comparison at the stage's top level.
    let Some(top) = jq_top_level_text(last) else {
        return false;
    };
    // The stage's names that are not fields (`.and`) or variables (`$or`).
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut before = None;
    for c in top.chars().chain([' ']) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() && !matches!(before, Some('.' | '$' | '@')) {
            words.push(std::mem::take(&mut word));
        }
        word.clear();
        before = Some(c);
    }
    if words.iter().any(|w| JQ_KEYWORDS.contains(&w.as_str())) {
        return false;
    }
    if top.contains(',') || top.contains("//") {
        return false;
    }
    // `=` alone, or in `|=`, `+=`, `//=` …, is an assignment.
    let bytes = top.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'=' {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + 1).copied();
            let comparison =
                after == Some(b'=') || matches!(before, Some(b'=' | b'!' | b'<' | b'>'));
            if !comparison {
                return false;
            }
        }
    }
    top.contains("==")
        || top.contains("!=")
        || top.contains('<')
        || top.contains('>')
        || words.iter().any(|w| w == "and" || w == "or")
}

/// `text` split at `sep` outside brackets and strings; `None` for a string
/// with an interpolation or brackets that do not match.
fn jq_top_level_split(text: &str, sep: char) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => jq_skip_string(&mut (&mut chars).map(|(_, c)| c))?,
            '#' => return None,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.checked_sub(1)?,
            c if c == sep && depth == 0 => {
                // `|=` is an assignment, not a pipe.
                if chars.peek().map(|(_, n)| *n) == Some('=') {
                    return None;
                }
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    (depth == 0).then_some(())?;
    parts.push(&text[start..]);
    Some(parts)
}

/// The stage's text with every bracketed part and string left out.
fn jq_top_level_text(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                jq_skip_string(&mut chars)?;
                if depth == 0 {
                    out.push_str(" \"\" ");
                }
            }
            '(' | '[' | '{' => {
                if depth == 0 {
                    out.push_str(" () ");
                }
                depth += 1;
            }
            ')' | ']' | '}' => depth = depth.checked_sub(1)?,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    (depth == 0).then_some(out)
}

/// Consumes a jq string literal after its opening quote. `None` when it
/// does not end, or interpolates (`\\(…)` may hold quotes and any filter,
/// so whatever scans around it cannot know where it ends).
fn jq_skip_string(chars: &mut impl Iterator<Item = char>) -> Option<()> {
    loop {
        match chars.next()? {
            '\\' => {
                // The escaped character is consumed here either way.
                let escaped = chars.next()?;
                if escaped == '(' {
                    return None;
                }
            }
            '"' => return Some(()),
            _ => {}
        }
    }
}

/// The index of the bracket closing the one `text` opens with.
fn jq_matching_close(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => jq_skip_string(&mut (&mut chars).map(|(_, c)| c))?,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The filter of a `jq` command, or of `gh … --jq`/`-q`; `None` when the
/// command line is not read to the end: a filter from a file (`-f`), a
/// module search path (`-L`, which `include`/`import` read), an option
/// not known here, a `gh` template, or a cluster of short options.
fn filter_text(program: &str, args: &[String]) -> Option<String> {
    match program {
        "jq" => jq_filter_argument(args),
        "gh" => gh_jq_argument(args),
        _ => None,
    }
}

/// jq's options that take no value.
const JQ_FLAGS: &[&str] = &[
    "--null-input",
    "--raw-input",
    "--slurp",
    "--compact-output",
    "--raw-output",
    "--raw-output0",
    "--join-output",
    "--ascii-output",
    "--sort-keys",
    "--color-output",
    "--monochrome-output",
    "--tab",
    "--unbuffered",
    "--stream",
    "--stream-errors",
    "--seq",
    "--exit-status",
    "--binary",
    "--args",
    "--jsonargs",
];

/// The short options jq accepts without a value, alone or clustered (`-rc`).
const JQ_SHORT_FLAGS: &str = "nRscrjaSCMebh0";

/// jq's first argument that is neither an option nor an option's value.
fn jq_filter_argument(args: &[String]) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        match arg {
            "--" => return args.get(i + 1).cloned(),
            "--arg" | "--argjson" | "--slurpfile" | "--rawfile" | "--argfile" => i += 3,
            "--indent" => i += 2,
            long if long.starts_with("--") => {
                if !JQ_FLAGS.contains(&long) {
                    return None;
                }
                i += 1;
            }
            short if short.starts_with('-') && short.len() > 1 => {
                if !short[1..].chars().all(|c| JQ_SHORT_FLAGS.contains(c)) {
                    return None;
                }
                i += 1;
            }
            filter => return Some(filter.to_owned()),
        }
    }
    None
}

/// The filter `gh` applies: the last `--jq`/`-q` given (`--jq X`,
/// `--jq=X`, `-q X`, `-qX`, `-q=X`), as its flag parser keeps it.
fn gh_jq_argument(args: &[String]) -> Option<String> {
    let mut filter = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            break;
        }
        if matches!(arg, "--template" | "-t") || arg.starts_with("--template=") {
            return None;
        }
        if arg == "--jq" || arg == "-q" {
            filter = Some(args.get(i + 1)?.clone());
            i += 2;
            continue;
        }
        if let Some(value) = arg.strip_prefix("--jq=") {
            filter = Some(value.to_owned());
        } else if let Some(value) = arg.strip_prefix("-q") {
            filter = Some(value.strip_prefix('=').unwrap_or(value).to_owned());
        } else if arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(['q', 't']) {
            // `-iq X`: a cluster whose last flag takes the filter.
            return None;
        }
        i += 1;
    }
    filter
}

/// What a field of the pull-request API's answer (`pulls.get`'s `data`)
/// can carry, by the type GitHub's REST schema gives it: its number and
/// its commits' SHAs name its code; booleans, counts, ids, enumerated
/// states and logins (`[A-Za-z0-9-]`) carry no text. `None`: text its
/// author writes (title, body, branch names, labels) or a field not typed
/// here.
fn pull_request_field(field: &str) -> Option<Taint> {
    match field {
        "number" | "head.sha" | "base.sha" | "merge_commit_sha" => Some(Taint::PR_REF),
        "id"
        | "mergeable"
        | "merged"
        | "draft"
        | "locked"
        | "rebaseable"
        | "maintainer_can_modify"
        | "state"
        | "mergeable_state"
        | "commits"
        | "additions"
        | "deletions"
        | "changed_files"
        | "comments"
        | "review_comments"
        | "user.login"
        | "head.user.login"
        | "base.user.login"
        | "user.id"
        | "head.repo.fork"
        | "author_association"
        | "head.repo.full_name"
        | "base.repo.full_name"
        | "html_url"
        | "url"
        | "created_at"
        | "updated_at"
        | "closed_at"
        | "merged_at" => Some(Taint::NONE),
        // A list's or a string's length is a number.
        _ if field.ends_with(".length") => Some(Taint::NONE),
        _ => None,
    }
}

/// A `context.…` value that is a number or an identifier GitHub assigns
/// (`context.payload.issue.number`, `context.runId`, `….id`, `…_id`), or
/// this repository's own name (`context.repo.owner`): text no one chose.
fn numeric_context(path: &str) -> bool {
    let last = path.rsplit('.').next().unwrap_or("");
    path.starts_with("context.repo.")
        || matches!(
            last,
            "number"
                | "id"
                | "runId"
                | "runNumber"
                | "runAttempt"
                | "run_id"
                | "run_number"
                | "run_attempt"
        )
        || last.ends_with("_id")
}

#[cfg(test)]
mod jq_tests {
    use super::{filter_text, jq_prints_no_text};

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn the_filter_is_the_one_the_program_applies_or_none() {
        for (program, line, want) in [
            ("jq", "-rc .a", Some(".a")),
            ("jq", "--arg x y --argjson z 1 .a", Some(".a")),
            ("jq", "--argfile not /dev/stdin -n .title", Some(".title")),
            ("jq", "-- -a", Some("-a")),
            ("jq", "-L lib .a", None),
            ("jq", "-Llib .a", None),
            ("jq", "--library-path lib .a", None),
            ("jq", "-f prog.jq", None),
            ("jq", "--no-such-flag .a", None),
            ("gh", "pr view 1 --jq .a --jq .b", Some(".b")),
            ("gh", "pr view 1 --jq .a -q.b", Some(".b")),
            ("gh", "pr view 1 -q=.b", Some(".b")),
            ("gh", "api x --jq=.b", Some(".b")),
            ("gh", "api x -iq .b", None),
            ("gh", "api x --jq .a --template {{.b}}", None),
        ] {
            let got = filter_text(program, &args(line));
            assert_eq!(got.as_deref(), want, "{program} {line}");
        }
    }

    #[test]
    fn a_string_of_interpolated_ids_carries_no_text() {
        use super::jq_interpolates_only_ids as ids;
        assert!(ids(r#""number=\(.number)\nhead-sha=\(.headRefOid)""#));
        assert!(ids(r#""sha=\(.head.sha)""#));
        assert!(!ids(r#""title=\(.title)""#));
        assert!(!ids(r#""n=\(.number | tostring + .title)""#));
        assert!(!ids(r#""n=\(.number)" + .title"#));
        assert!(!ids(r#""n=\(.number)"#));
    }

    #[test]
    fn a_definition_or_a_module_anywhere_is_text() {
        for filter in [
            "def length: .title; length",
            r#"def contains(x): .title; .title | contains("x")"#,
            r#"include "m"; .title | length"#,
            r#"import "m" as m; .a == 1"#,
        ] {
            assert!(!jq_prints_no_text(filter), "{filter}");
        }
        // A field or a variable of that name is no definition.
        assert!(jq_prints_no_text(".def | length"));
        assert!(jq_prints_no_text(r#"$include == "x""#));
    }

    #[test]
    fn a_filter_that_ends_in_a_typed_builtin_or_a_comparison_prints_no_text() {
        for filter in [
            r#".title | contains("[no-ci]")"#,
            ".labels | length",
            r#"(.title | test("wip"; "i")) | not"#,
            r#".isDraft == false and (.title | startswith("[ready]"))"#,
            ".body | type",
            r#".a | has("b")"#,
            ".n + 1 > 3",
            r#"[.labels[].name] | any(. == "ok")"#,
        ] {
            assert!(jq_prints_no_text(filter), "{filter}");
        }
    }

    #[test]
    fn a_filter_that_can_print_its_input_is_text() {
        for filter in [
            ".title",
            ".node_id",
            r#".title | if contains("x") then . else "y" end"#,
            r#".title | contains("x"), .title"#,
            r#"(.title | select(contains("x"))) // .title"#,
            ".body | fromjson | .and",
            ".or",
            r#""\(.title)" + (.title == "x" | tostring)"#,
            r#".title | contains("x") | tostring"#,
            ".a |= 1",
            ".a = 1",
            r#"try (.a == 1) catch ."#,
            ".a as $x | $x",
            "reduce .[] as $x (0; . + $x)",
            r#".title | contains("x") # comment"#,
            "(.a",
            ".a)",
            "",
            "é == ü",
        ] {
            // The last one is a comparison (of two unknown names): no panic.
            if filter == "é == ü" {
                let _ = jq_prints_no_text(filter);
                continue;
            }
            assert!(!jq_prints_no_text(filter), "{filter}");
        }
    }
}
