//! Family `privileged`: privileged jobs and the trusted steps they run. The
//! trusted key step (and any trusted `cargo xtask`) sees no pull-request
//! bytes (`trusted-step-environment`), attacker-controlled text never
//! expands into a privileged `run:` (`privileged-injection`), and the gates
//! untrusted code waits for hold (`gate-bypass`).
//!
//! Owns these checks and the recognisers only they use, and
//! `Checker::privilege` (what makes a job privileged), which `remote_code`
//! reads. It must not touch role inference (`roles/`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use super::keys::{checkouts_before, is_within, join_dir, key_signature, normalize_dir};
use super::secrets::pr_bytes;
use super::{Checker, RuleId, Severity};
use crate::contracts::commands;
use crate::contracts::eval::{self, Taint};
use crate::contracts::expr;
use crate::contracts::roles::{Actor, JobInfo, JobRef, Level, PRIVILEGED_EVENTS, Start};
use crate::contracts::shell::Script;
use crate::contracts::workflow::{Job, Pos, Scalar, Step};

/// `trusted-step-environment`.
pub(super) fn check_trusted_step_environment(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        c.trusted_step_environment(info, job);
        Ok(())
    })
}

/// `privileged-injection`.
pub(super) fn check_privileged_injection(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if let Some((why, _)) = c.privilege(info, job) {
            c.privileged_injection(info, job, &why);
        }
        Ok(())
    })
}

/// `gate-bypass`.
pub(super) fn check_gate_bypass(c: &mut Checker) -> Result<()> {
    c.each_job(|c, info, job| {
        if info.is_untrusted() {
            c.gate_bypass(info, job);
        }
        Ok(())
    })
}

/// A script a job runs: the step it belongs to, its text, the composite
/// action's inputs it reads (name, value), and the `uses:` it is reported at
/// when it comes from a local action.
type JobScript<'a> = (
    &'a crate::contracts::workflow::Step,
    Scalar,
    Vec<(String, String)>,
    Option<Pos>,
    Vec<(String, String)>,
);

impl Checker<'_> {
    /// Why the job's code matters beyond its own logs: it is a publisher, it
    /// holds a secret, or its token may write (then the flag is true: the
    /// write token is its only privilege). `None` for the rest.
    pub(super) fn privilege(&self, info: &JobInfo, job: &Job) -> Option<(String, bool)> {
        if info.publisher {
            return Some(("publisher job".to_owned(), false));
        }
        // A pull request's own run (its definition, no secrets for forks,
        // its own cache scope) gives its author nothing they lack.
        let isolated = [
            "pull_request",
            "pull_request_review",
            "pull_request_review_comment",
        ];
        if !info.triggers.is_empty() && info.triggers.iter().all(|t| isolated.contains(&t.as_str()))
        {
            return None;
        }
        let wf = self.model.workflow(info.at);
        let scalars = job
            .scalars
            .iter()
            .chain(wf.env.iter().map(|(_, value)| value));
        for scalar in scalars {
            for reference in expr::secret_refs(&scalar.value) {
                match reference.name {
                    Some(name) if name == "GITHUB_TOKEN" => {}
                    Some(name) => return Some((format!("job holding the secret `{name}`"), false)),
                    None => return Some(("job reading every secret".to_owned(), false)),
                }
            }
        }
        let only_pull_request = info.triggers.iter().all(|t| t == "pull_request");
        for effective in &info.permissions {
            let writes = match &effective.permissions {
                // The repository default may be write, except where GitHub
                // makes every pull_request token read-only for forks anyway.
                None => !only_pull_request,
                Some(crate::contracts::workflow::Permissions::Shorthand(s)) => {
                    s.value.trim() == "write-all"
                }
                Some(crate::contracts::workflow::Permissions::Map { scopes, .. }) => scopes
                    .iter()
                    .any(|(_, level)| level.value.trim() == "write"),
            };
            if writes {
                return Some(("job whose token can write".to_owned(), true));
            }
        }
        None
    }

    /// `trusted-step-environment`: the key step and every other trusted
    /// `cargo xtask` step of a privileged or publisher job run with no
    /// pull-request bytes in their tools, configuration or environment.
    pub(super) fn trusted_step_environment(&mut self, info: &JobInfo, job: &Job) {
        let privileged = info
            .triggers
            .iter()
            .any(|t| PRIVILEGED_EVENTS.contains(&t.as_str()));
        if !(info.publisher || privileged) {
            return;
        }
        let wf = self.model.workflow(info.at);
        let step_id = &self.policy.key.step_id;
        let trusted: Vec<&Step> = job
            .steps
            .iter()
            .filter(|s| {
                s.id.as_ref().is_some_and(|id| &id.value == step_id)
                    || s.run
                        .as_ref()
                        .is_some_and(|r| commands::runs_xtask(&r.value))
            })
            .collect();
        let Some(last) = trusted.last().map(|s| s.index) else {
            return;
        };
        let untrusted = untrusted_checkouts(job, last, &self.policy.default_branch);
        if untrusted.is_empty() {
            return;
        }
        let mut found: Vec<(Pos, String)> = Vec::new();
        // 1. Variables that point a trusted step's tools into the PR. A
        //    relative path is read from the directory of a trusted step.
        let dirs: Vec<String> = trusted
            .iter()
            .map(|s| key_signature(wf, job, s).working_directory)
            .collect();
        let mut envs: Vec<&(Scalar, Scalar)> = wf.env.iter().chain(job.env.iter()).collect();
        for step in &trusted {
            envs.extend(step.env.iter());
        }
        for (name, value) in envs {
            if !TOOL_ENV.contains(&name.value.as_str()) {
                continue;
            }
            let pointed = dirs
                .iter()
                .find_map(|dir| points_into(&value.value, &untrusted, dir));
            if let Some(path) = pointed {
                found.push((
                    name.pos,
                    format!(
                        "`{}: {}` points into the pull-request checkout `{path}`, so the trusted `cargo xtask` steps run its tools or configuration",
                        name.value, value.value
                    ),
                ));
            }
        }
        // 2. Writes to GITHUB_ENV / GITHUB_PATH, before the last trusted
        //    step, that read the PR checkout.
        for step in &job.steps[..last] {
            let Some(run) = &step.run else { continue };
            let script = Script::cached(&run.value);
            let Some(line) = script
                .commands()
                .find(|c| c.writes_to("GITHUB_ENV") || c.writes_to("GITHUB_PATH"))
                .map(|c| commands::line(&run.value, &script, c))
            else {
                continue;
            };
            let in_pr = step.working_directory.as_ref().and_then(|d| {
                let dir = normalize_dir(&d.value);
                untrusted.iter().find(|p| is_within(&dir, p)).cloned()
            });
            let reads = in_pr.or_else(|| mentions_checkout(&run.value, &untrusted));
            if let Some(path) = reads {
                found.push((
                    wf.locate(run.pos, line),
                    format!(
                        "`{}` writes the environment of later steps from the pull-request checkout `{path}`; the trusted `cargo xtask` steps would run with values the pull request chose",
                        line.trim()
                    ),
                ));
            }
        }
        // 3. The directory a trusted step runs in: cargo and rustup read
        //    `.cargo/config.toml` and `rust-toolchain.toml` from it and from
        //    every parent, so an enclosing PR checkout configures it.
        for step in &trusted {
            let is_key = step.id.as_ref().is_some_and(|id| &id.value == step_id);
            let dir = key_signature(wf, job, step).xtask_dir();
            let checkouts = checkouts_before(job, step.index);
            let owner = checkouts
                .iter()
                .rev()
                .find(|(path, _)| is_within(&dir, path) || is_within(path, &dir))
                .map(|(path, _)| path.clone());
            let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
            let owner_untrusted = owner.as_ref().is_some_and(|o| untrusted.contains(o));
            // key-xtask-checkout already judges the checkout a key step runs from.
            if owner_untrusted && !is_key {
                found.push((
                    pos,
                    format!(
                        "this `cargo xtask` step runs the xtask of the pull-request checkout `{}`",
                        owner.clone().unwrap_or_default()
                    ),
                ));
                continue;
            }
            if owner_untrusted {
                continue;
            }
            let enclosing = checkouts
                .iter()
                .map(|(path, _)| path)
                .filter(|path| untrusted.contains(path))
                .find(|path| **path != dir && is_within(&dir, path));
            if let Some(path) = enclosing {
                found.push((
                    pos,
                    format!(
                        "the pull-request checkout `{path}` encloses `{dir}`, where this trusted `cargo xtask` step runs: cargo reads `.cargo/config.toml` and rustup `rust-toolchain.toml` from every parent directory; check the pull request out beside the trusted tree (e.g. `path: pr`)"
                    ),
                ));
            }
        }
        for (pos, message) in found {
            self.push(
                RuleId::TrustedStepEnvironment,
                info.at,
                info.at.workflow,
                pos,
                message,
            );
        }
    }

    /// `privileged-injection`: an attacker-controlled expression expanded
    /// into the script of a privileged job.
    pub(super) fn privileged_injection(&mut self, info: &JobInfo, job: &Job, why: &str) {
        let wf = self.model.workflow(info.at);
        let mut found = Vec::new();
        // The scripts the job runs: its own steps', and those of the local
        // composite actions it uses (their `inputs.NAME` read as what the
        // step passes), reported at the step's `uses:`.
        let mut scripts: Vec<JobScript<'_>> = Vec::new();
        for step in &job.steps {
            for script in step.run.iter().chain(
                step.input("script")
                    .filter(|_| step.uses_action("actions/github-script")),
            ) {
                scripts.push((step, script.clone(), Vec::new(), None, Vec::new()));
            }
            let mut budget = super::LOCAL_ACTION_BUDGET;
            let mut pending = vec![(step.clone(), Vec::new())];
            while let Some((outer, inputs)) = pending.pop() {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let Ok(Some(action)) =
                    crate::contracts::workflow::expand_local_action(self.root, &outer, &inputs)
                else {
                    continue;
                };
                for inner in &action.steps {
                    if let Some(run) = &inner.run {
                        let at = step.uses.as_ref().map_or(step.pos, |u| u.pos);
                        // The inner step's `env:`, its inputs resolved to
                        // what the caller passes.
                        let env = inner
                            .env
                            .iter()
                            .map(|(k, v)| (k.value.clone(), v.value.clone()))
                            .collect();
                        scripts.push((step, run.clone(), action.inputs.clone(), Some(at), env));
                    }
                    if inner.uses.is_some() {
                        pending.push((inner.clone(), action.inputs.clone()));
                    }
                }
            }
        }
        for (step, script, inputs, place, _) in &scripts {
            let step: &crate::contracts::workflow::Step = step;
            {
                // A shell parses a `run:` script (its own, or a local
                // action's): text escaped for a shell is inert there; in a
                // github-script's JavaScript it is text.
                // (A local action's inner step names its own shell, which
                // is not followed here: read as not a shell's.)
                let parsed_by_shell = place.is_none()
                    && !step.uses_action("actions/github-script")
                    && runs_in_posix_shell(wf, job, step)
                    && parsed_once(&crate::contracts::shell::Script::cached(&script.value));
                let text = if parsed_by_shell {
                    Taint::PR_TEXT_UNESCAPED
                } else {
                    Taint::PR_TEXT
                };
                for (_, body) in expr::expressions(&script.value) {
                    let substituted = substitute_inputs(body, inputs);
                    let body: &str = &substituted;
                    // What the expression is under each start of the job:
                    // text a pull request's author wrote (a boolean or a
                    // number made from it is no text).
                    // A member's choice (a dispatch's input, a member's
                    // comment, a run past a gate on its actor) is the
                    // recovery path's, not the pull request author's.
                    let mut chosen: Vec<&Start> = Vec::new();
                    let tainted: Vec<&Start> = info
                        .starts
                        .iter()
                        .filter(|start| !isolated(start))
                        .filter(|start| {
                            let scope = self.model.scope(info.at, start, Some(step.index));
                            let taint = eval::eval_body(body, &scope).taint();
                            if taint.has(text) && taint.has(Taint::MAINTAINER) {
                                chosen.push(start);
                            }
                            taint.has(text)
                        })
                        .collect();
                    let text = (!tainted.is_empty()).then(|| {
                        if let Some(context) = attacker_controlled(body) {
                            return context.to_owned();
                        }
                        // Through the callers' `with:` (a reusable workflow's
                        // input), each caller named once.
                        let mut callers: Vec<String> = tainted
                            .iter()
                            .filter_map(|s| s.via.last())
                            .map(|c| {
                                format!(
                                    "`{}` of {}",
                                    self.model.job(*c).id.value,
                                    self.model.workflow(*c).name
                                )
                            })
                            .collect();
                        callers.sort();
                        callers.dedup();
                        let events: std::collections::BTreeSet<&str> =
                            tainted.iter().map(|s| s.event.as_str()).collect();
                        let events: Vec<String> = events.iter().map(|e| format!("`{e}`")).collect();
                        if callers.is_empty() {
                            format!(
                                "{body}, which carries pull-request text under {}",
                                events.join(", ")
                            )
                        } else {
                            format!(
                                "{body}, which carries pull-request text as its callers {} pass it",
                                callers.join(", ")
                            )
                        }
                    });
                    // Certain when someone outside the maintainers writes it
                    // (a fork's or a same-repository author, a merged commit);
                    // a maintainer's dispatch that names the pull request is
                    // the recovery path.
                    let members = self
                        .policy
                        .contracts
                        .same_repository_pull_requests_untrusted();
                    let text_level =
                        tainted
                            .iter()
                            .filter(|s| !chosen.contains(s))
                            .any(|s| match s.actor {
                                Actor::Outsider | Actor::Repository => true,
                                Actor::Member => members,
                                Actor::Maintainer => false,
                            });
                    let text = text.filter(|_| {
                        text_level
                            || tainted
                                .iter()
                                .any(|s| s.actor == Actor::Maintainer || chosen.contains(s))
                    });
                    let (context, severity) = match text {
                        Some(t) => (
                            Some(t),
                            if text_level {
                                (Severity::Error, None)
                            } else {
                                (
                                    Severity::Warning,
                                    Some("the text comes from a pull request that a maintainer's dispatch names or a member's comment runs (the recovery path)".to_owned()),
                                )
                            },
                        ),
                        None => match self.untrusted_output(info.at, body) {
                            Some((t, level)) => (
                                Some(t),
                                match level {
                                    Level::Error => (Severity::Error, None),
                                    Level::Warning => (
                                        Severity::Warning,
                                        Some("that job runs untrusted code only where a maintainer's dispatch or an unseen value chooses it".to_owned()),
                                    ),
                                },
                            ),
                            None => (None, (Severity::Error, None)),
                        },
                    };
                    if let Some(context) = context {
                        found.push((
                            severity,
                            place.unwrap_or_else(|| wf.locate(script.pos, body)),
                            format!(
                                "`${{{{ {body} }}}}` expands `{context}`, which the pull request's author picks, into a script of {} `{}`, a {why}; pass it through `env:` and quote it",
                                self.model.info(info.at).role(),
                                job.id.value
                            ),
                        ));
                    }
                }
            }
        }
        // Pull-request bytes written to `$GITHUB_ENV` or `$GITHUB_PATH` set
        // every later step's environment (LD_PRELOAD, PATH, BASH_ENV) in a job
        // whose steps hold its privileges. A local composite action's steps
        // count as the step that uses it: their `env:` (resolved to what the
        // step passes) and `${{ inputs.NAME }}` are written into the script,
        // so that the outer step's scope evaluates them.
        for (step, run, inputs, place, inner_env) in &scripts {
            let step: &crate::contracts::workflow::Step = step;
            // A github-script `script:` is JavaScript, not shell.
            if place.is_none() && step.run.as_ref().is_none_or(|r| r.value != run.value) {
                continue;
            }
            let text = if place.is_some() {
                composite_script(&run.value, inputs, inner_env)
            } else {
                run.value.clone()
            };
            let script = crate::contracts::shell::Script::cached(&text);
            for file in ["GITHUB_ENV", "GITHUB_PATH"] {
                for command in script.commands().filter(|c| c.writes_to(file)) {
                    let mut chosen: Vec<&Start> = Vec::new();
                    let tainted: Vec<&Start> = info
                        .starts
                        .iter()
                        .filter(|start| !isolated(start))
                        .filter(|start| {
                            let scope = self.model.scope(info.at, start, Some(step.index));
                            let shell = scope.shell(&script);
                            let mut taint = shell.command_taint(command);
                            // `echo "X=$v" | tee -a "$GITHUB_ENV"`: what the pipe carries.
                            if command.program_is("tee") {
                                for earlier in script.commands().filter(|c| {
                                    c.pipeline == command.pipeline
                                        && c.pipe_position < command.pipe_position
                                }) {
                                    taint |= shell.command_taint(earlier);
                                }
                            }
                            // Text can carry a new line (a new variable); a
                            // SHA or a number cannot.
                            if taint.has(Taint::PR_TEXT) && taint.has(Taint::MAINTAINER) {
                                chosen.push(start);
                            }
                            taint.has(Taint::PR_TEXT)
                        })
                        .collect();
                    let certain =
                        tainted
                            .iter()
                            .filter(|s| !chosen.contains(s))
                            .any(|s| match s.actor {
                                Actor::Outsider | Actor::Repository => true,
                                Actor::Member => self
                                    .policy
                                    .contracts
                                    .same_repository_pull_requests_untrusted(),
                                Actor::Maintainer => false,
                            });
                    if tainted.is_empty() {
                        continue;
                    }
                    let line = crate::contracts::commands::line(&text, &script, command);
                    let severity = if certain {
                        (Severity::Error, None)
                    } else {
                        (
                            Severity::Warning,
                            Some("the bytes come from a pull request that a maintainer's dispatch names or a member's comment runs (the recovery path)".to_owned()),
                        )
                    };
                    found.push((
                        severity,
                        place.unwrap_or_else(|| wf.locate(run.pos, line)),
                        format!(
                            "`{}` writes `${file}` from bytes a pull request controls, which set the environment of every later step of {} `{}`, a {why}; keep pull-request values out of `${file}`",
                            line.trim(),
                            self.model.info(info.at).role(),
                            job.id.value
                        ),
                    ));
                }
            }
        }
        // Pull-request text in a variable expanded outside double quotes is
        // split into words and globbed: extra arguments (`--method DELETE`,
        // `--repo other/repo`) to a command holding the job's privileges.
        for step in &job.steps {
            let (Some(script), Some(run)) = (step.script(), &step.run) else {
                continue;
            };
            // Each command once, at its first variable that any start taints.
            let mut split: BTreeMap<usize, String> = BTreeMap::new();
            for start in info.starts.iter().filter(|s| !isolated(s)) {
                let scope = self.model.scope(info.at, start, Some(step.index));
                let shell = scope.shell(&script);
                for (index, command) in script.commands().enumerate() {
                    if split.contains_key(&index)
                        || matches!(
                            command.program().as_deref(),
                            None | Some(
                                "echo" | "printf" | "test" | "[" | "[[" | "export" | "local"
                            )
                        )
                    {
                        continue;
                    }
                    let tainted = command.args().iter().find_map(|w| {
                        w.unquoted_variables().find(|name| {
                            shell
                                .variable(name, w.span.start)
                                .taint()
                                .has(Taint::PR_TEXT)
                        })
                    });
                    if let Some(name) = tainted {
                        split.insert(index, name.to_owned());
                    }
                }
            }
            for (index, name) in split {
                let Some(command) = script.commands().nth(index) else {
                    continue;
                };
                let line = crate::contracts::commands::line(&run.value, &script, command);
                found.push((
                    (
                        Severity::Warning,
                        Some(format!(
                            "can extra arguments or a glob in `{}` do harm with this job's credentials?",
                            command.program().unwrap_or_default()
                        )),
                    ),
                    wf.locate(run.pos, line),
                    format!(
                        "`{}` expands `${name}`, text a pull request controls, outside double quotes in a script of {} `{}`, a {why}: the shell splits and globs it into arguments; quote it and check its form (a number, a SHA)",
                        line.trim(),
                        self.model.info(info.at).role(),
                        job.id.value
                    ),
                ));
            }
        }
        for ((severity, question), pos, message) in found {
            self.push_as(
                RuleId::PrivilegedInjection,
                info.at,
                info.at.workflow,
                pos,
                message,
                severity,
                question,
            );
        }
    }

    /// `needs.JOB.outputs.…` of an untrusted-code job of the same workflow:
    /// the pull request's code runs in that job and can set what its steps
    /// output (the runner's output files lie in a directory it can list), so
    /// every output of it is attacker-controlled text.
    pub(super) fn untrusted_output(&self, at: JobRef, body: &str) -> Option<(String, Level)> {
        let wf = self.model.workflow(at);
        body.match_indices("needs.").find_map(|(i, _)| {
            let rest = &body[i + "needs.".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
                .collect();
            if !rest[name.len()..].starts_with(".outputs") {
                return None;
            }
            let j = wf.jobs.iter().position(|j| j.id.value == name)?;
            let source = self.model.info(JobRef {
                workflow: at.workflow,
                job: j,
            });
            source.is_untrusted().then(|| {
                (
                    format!(
                        "needs.{name}.outputs, which the pull-request code in {} `{name}` can set",
                        source.role()
                    ),
                    source.level(),
                )
            })
        })
    }

    /// `gate-bypass`: the jobs an untrusted-code job needs (its gates) must
    /// be able to stop it.
    pub(super) fn gate_bypass(&mut self, info: &JobInfo, job: &Job) {
        // Gates matter where pull-request bytes run in a privileged run; a
        // pod job of a push workflow has nothing to be gated from.
        let Some(bytes) = pr_bytes(info) else { return };
        let gates = self.gates(info.at);
        let mut found = Vec::new();
        for gate in &gates {
            let gate_job = self.model.job(*gate);
            let gate_wf = self.model.workflow(*gate);
            let name = &gate_job.id.value;
            if let Some(c) = gate_job
                .continue_on_error
                .as_ref()
                .filter(|c| c.value.trim() != "false")
            {
                found.push((
                    gate.workflow,
                    c.pos,
                    format!(
                        "`continue-on-error: {}` on `{name}` of {}, which {} `{}` needs: a refusal no longer stops the pull-request code",
                        c.value,
                        gate_wf.name,
                        self.model.info(info.at).role(),
                        job.id.value
                    ),
                ));
            }
            for step in &gate_job.steps {
                if let Some(c) = step
                    .continue_on_error
                    .as_ref()
                    .filter(|c| c.value.trim() != "false")
                {
                    found.push((
                        gate.workflow,
                        c.pos,
                        format!(
                            "a step of `{name}` of {} has `continue-on-error: {}`; `{name}` gates {} `{}`, so a refusal in that step no longer stops it",
                            gate_wf.name,
                            c.value,
                            self.model.info(info.at).role(),
                            job.id.value
                        ),
                    ));
                }
            }
        }
        // A status function other than success() runs the job whatever its
        // needs concluded, unless the condition asks for their results.
        // A pod cleanup job's `always()` is its purpose; only a job that
        // brings in pull-request bytes itself is held to its gates here.
        let own_bytes = info.pod.as_ref().is_none_or(|pod| pod.pos != bytes.pos);
        if let Some(cond) = job.if_cond.as_ref().filter(|_| own_bytes) {
            let text = cond.value.replace(' ', "");
            let bypasses = ["always()", "failure()", "cancelled()"]
                .iter()
                .any(|f| text.contains(f));
            if bypasses {
                for needed in &job.needs {
                    if !text.contains(&format!("needs.{}.result", needed.value)) {
                        found.push((
                            info.at.workflow,
                            cond.pos,
                            format!(
                                "`if: {}` runs `{}` even when `{}` fails or refuses; require `needs.{}.result == 'success'`",
                                cond.value.trim(),
                                job.id.value,
                                needed.value,
                                needed.value
                            ),
                        ));
                    }
                }
            }
        }
        for (file, pos, message) in found {
            self.push(RuleId::GateBypass, info.at, file, pos, message);
        }
    }

    /// The jobs `at` needs, transitively, with those its callers need when
    /// it is in a reusable workflow.
    pub(super) fn gates(&self, at: JobRef) -> BTreeSet<JobRef> {
        let mut out = BTreeSet::new();
        let mut pending = vec![at];
        let mut seen = BTreeSet::from([at]);
        while let Some(current) = pending.pop() {
            let wf = self.model.workflow(current);
            let job = self.model.job(current);
            let mut next: Vec<JobRef> = job
                .needs
                .iter()
                .filter_map(|n| wf.jobs.iter().position(|j| j.id.value == n.value))
                .map(|j| JobRef {
                    workflow: current.workflow,
                    job: j,
                })
                .collect();
            next.extend(
                self.model
                    .jobs
                    .iter()
                    .filter(|c| c.callee == Some(current.workflow))
                    .map(|c| c.at),
            );
            for n in next {
                if seen.insert(n) {
                    pending.push(n);
                    // A caller is not a gate itself; its needs are.
                    if self.model.info(n).callee != Some(current.workflow) {
                        out.insert(n);
                    }
                }
            }
        }
        out
    }
}

/// Variables that decide which toolchain, wrapper, configuration or shell
/// start-up file a `cargo xtask` step runs. One pointing into a
/// pull-request checkout hands that step to the pull request.
const TOOL_ENV: &[&str] = &[
    "PATH",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO",
    "CARGO_BUILD_RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "BASH_ENV",
];

/// The paths of the checkouts before step `index` that hold code other than
/// the trusted commit: a `ref:` that is not trusted, or another repository.
/// A checkout without `ref:` is the commit the run is for (the default
/// branch's, in a privileged or publisher run).
/// The artifacts of another run (the pull request's CI run, for a
/// `workflow_run` consumer) unpacked before it count the same way.
fn untrusted_checkouts(job: &Job, index: usize, default: &str) -> Vec<String> {
    let mut paths: Vec<String> = checkouts_before(job, index)
        .into_iter()
        .filter(|(_, step)| {
            let bad_ref = step
                .input("ref")
                .is_some_and(|r| !expr::is_trusted_ref(&r.value, default));
            let bad_repo = step
                .input("repository")
                .is_some_and(|r| expr::sole_expression(&r.value) != Some("github.repository"));
            bad_ref || bad_repo
        })
        .map(|(path, _)| path)
        .collect();
    for step in &job.steps[..index] {
        if crate::contracts::roles::other_run_download(step).is_some() {
            // download-artifact unpacks into the workspace without `path:`.
            paths.push(normalize_dir(
                step.input("path").map_or(".", |p| p.value.as_str()),
            ));
        }
    }
    paths
}

/// The workspace-relative form of a path in a variable or script (a
/// relative one read from `base`), or `None` for one outside the workspace
/// (absolute, `$HOME`, `~`, `$PATH`).
fn workspace_path(token: &str, base: &str) -> Option<String> {
    let token = token.trim().trim_matches(|c| c == '"' || c == '\'');
    for prefix in [
        "$GITHUB_WORKSPACE",
        "${GITHUB_WORKSPACE}",
        "$PWD",
        "${PWD}",
        "$(pwd)",
    ] {
        if let Some(rest) = token.strip_prefix(prefix) {
            return Some(normalize_dir(rest));
        }
    }
    if token.is_empty() || token.starts_with(['/', '$', '~']) || token.contains("${{") {
        return None;
    }
    Some(join_dir(base, token))
}

/// `${{ github.workspace }}` in the shell's spelling, so that paths split
/// on spaces stay whole.
fn unexpand_workspace(text: &str) -> String {
    text.replace("${{ github.workspace }}", "$GITHUB_WORKSPACE")
        .replace("${{github.workspace}}", "$GITHUB_WORKSPACE")
}

/// The untrusted checkout a `PATH`-like value points into.
fn points_into(value: &str, untrusted: &[String], base: &str) -> Option<String> {
    unexpand_workspace(value)
        .split([':', ' ', '\n'])
        .filter_map(|token| workspace_path(token, base))
        .find_map(|path| untrusted.iter().find(|u| is_within(&path, u)).cloned())
}

/// The untrusted checkout a script reads from (`pr/…`, `cd pr`, `$GITHUB_WORKSPACE/pr`).
fn mentions_checkout(script: &str, untrusted: &[String]) -> Option<String> {
    let script = unexpand_workspace(script);
    let parsed = Script::cached(&script);
    for command in parsed.commands() {
        let entering = matches!(command.program().as_deref(), Some("cd" | "pushd"));
        let words = command
            .words
            .iter()
            .chain(command.assignments.iter().map(|a| &a.value))
            .chain(command.redirects.iter().map(|r| &r.target));
        for (i, word) in words.enumerate() {
            // A path says so (`pr/x`, `$GITHUB_WORKSPACE/pr`), or is where the
            // script changes directory to; a bare word is text. A word of
            // several paths (`X=$(cat pr/x)`) is read piece by piece.
            let text = word.text();
            for piece in text.split(['=', ',', ':', ' ']) {
                let entered = entering && i == 1;
                if !(piece.contains('/') || entered) {
                    continue;
                }
                let Some(path) = workspace_path(piece, ".") else {
                    continue;
                };
                if let Some(found) = untrusted.iter().find(|u| is_within(&path, u)) {
                    return Some(found.clone());
                }
            }
        }
        // What a substitution reads (`$(cat pr/rust-toolchain)`) is read by
        // its own command, met in this loop too.
    }
    None
}

/// An expression body of a composite action's script with each
/// `inputs.NAME` replaced by what the calling step passes (an expression's
/// body, or a literal).
fn substitute_inputs(body: &str, inputs: &[(String, String)]) -> String {
    if inputs.is_empty() || !body.contains("inputs.") {
        return body.to_owned();
    }
    let mut out = body.to_owned();
    for (name, value) in inputs {
        let needle = format!("inputs.{name}");
        if !out.contains(&needle) {
            continue;
        }
        let replacement = match expr::sole_expression(value) {
            Some(inner) => format!("({inner})"),
            None => format!("'{}'", value.replace('\'', "''")),
        };
        out = out.replace(&needle, &replacement);
    }
    out
}

/// A composite action's `run:` as the step that uses it runs it: each
/// `$NAME` / `${NAME}` of the inner step's `env:` replaced by its value (an
/// expression of the caller's, or a literal), and every `inputs.NAME` in
/// an expression by what the caller passes ([`substitute_inputs`]).
fn composite_script(run: &str, inputs: &[(String, String)], env: &[(String, String)]) -> String {
    let with_inputs = |text: &str| {
        let mut out = String::new();
        let mut rest = 0;
        for (start, body) in expr::expressions(text) {
            let Some(len) = text[start..].find("}}") else {
                break;
            };
            out.push_str(&text[rest..start]);
            out.push_str(&format!("${{{{ {} }}}}", substitute_inputs(body, inputs)));
            rest = start + len + 2;
        }
        out.push_str(&text[rest..]);
        out
    };
    let mut text = with_inputs(run);
    // Longer names first, so that `$VALUE` does not eat `$VALUE_2`.
    let mut env: Vec<&(String, String)> = env.iter().collect();
    env.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    for (name, value) in env {
        let value = with_inputs(value);
        text = text.replace(&format!("${{{name}}}"), &value);
        text = text.replace(&format!("${name}"), &value);
    }
    text
}

/// A start whose run holds nothing the pull request lacks (its own
/// `pull_request` run), or whose steps are the pull request's own copy (a
/// mirror's push): what the steps expand is the author's choice there.
fn isolated(start: &Start) -> bool {
    matches!(
        start.event.as_str(),
        "pull_request" | "pull_request_review" | "pull_request_review_comment"
    ) || start.runs_own_copy()
}

/// The attacker-controlled context an expression body reads, if any: pull
/// request, issue and comment text, branch names, commit messages and
/// authors, and `workflow_run` display titles.
pub fn attacker_controlled(body: &str) -> Option<&str> {
    body.split(|c: char| {
        !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '[' | ']' | '*' | '\''))
    })
    .filter(|t| t.starts_with("github."))
    .find(|token| {
        let lower = token.to_ascii_lowercase();
        // `pull_requests[0].head.ref` → `pull_requests.head.ref`.
        let path: String = {
            let mut out = String::new();
            let mut depth = 0;
            for c in lower.chars() {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ if depth == 0 => out.push(c),
                    _ => {}
                }
            }
            out
        };
        let last = path.rsplit('.').next().unwrap_or("");
        path == "github.head_ref"
            || matches!(
                last,
                "head_ref"
                    | "head_branch"
                    | "title"
                    | "display_title"
                    | "body"
                    | "message"
                    | "page_name"
                    | "description"
            )
            || path.ends_with("workflow_run.name")
            || path.ends_with(".head.ref")
            || path.ends_with(".head.label")
            || path.contains(".author.")
            || path.contains(".committer.")
            || path.contains(".pusher.")
    })
}

/// True when a `run:` step's script is parsed by a POSIX shell on Linux
/// or macOS: `bash` or `sh` named by the step, the job's or the
/// workflow's defaults (or none named), on a runner whose labels say
/// Linux or macOS. On Windows changed-files writes `\\` for `/`, which
/// cancels its own escape, and `pwsh` reads a backslash as no escape; a
/// self-hosted runner's labels may name neither.
fn runs_in_posix_shell(
    wf: &crate::contracts::workflow::Workflow,
    job: &Job,
    step: &crate::contracts::workflow::Step,
) -> bool {
    let named = step
        .shell
        .as_ref()
        .or(job.default_shell.as_ref())
        .or(wf.default_shell.as_ref());
    if let Some(shell) = named {
        let program = shell.value.split_whitespace().next().unwrap_or("");
        if !matches!(program, "bash" | "sh") {
            return false;
        }
    }
    job.runs_on_unresolved.is_none()
        && !job.runs_on.is_empty()
        && job.runs_on.iter().all(|label| {
            let label = label.value.to_ascii_lowercase();
            !label.contains("windows") && !label.contains("${{")
        })
        && job.runs_on.iter().any(|label| {
            let label = label.value.to_ascii_lowercase();
            label.starts_with("ubuntu") || label.starts_with("macos") || label.contains("linux")
        })
}

/// True when the shell parses the script's words once and nothing parses
/// them again: every command is `echo`, `printf`, a test or an
/// assignment, none is piped, no here-document is fed to anything, and
/// output goes only to the runner's files or `/dev/null`. (`eval`,
/// `bash -c`, `ssh`, `xargs sh -c`, a here-document into a shell, or a
/// file a later command sources would parse what the first parse
/// unescaped.)
fn parsed_once(script: &crate::contracts::shell::Script) -> bool {
    use crate::contracts::shell::RedirectOp;
    const PLAIN: &[&str] = &["echo", "printf", "test", "[", "[[", ":", "true", "false"];
    script.commands().all(|command| {
        // (`[[ -n a || -n b ]]` reaches here split at `||`: a "program"
        // `-n` is the test's operand, and no program a shell could run.)
        let plain = command.program().is_none_or(|program| {
            PLAIN.contains(&program.as_str()) || program.starts_with('-') || program == "]]"
        });
        let redirects_plain = command.redirects.iter().all(|r| {
            r.heredoc.is_none()
                && (r.op == RedirectOp::Read || {
                    let target = r.target.text();
                    [
                        "GITHUB_OUTPUT",
                        "GITHUB_STEP_SUMMARY",
                        "GITHUB_ENV",
                        "/dev/null",
                        "&1",
                        "&2",
                    ]
                    .iter()
                    .any(|t| target.contains(t))
                        || r.target.literal().is_some_and(|l| l == "1" || l == "2")
                })
        });
        plain && redirects_plain && command.pipe_len <= 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attacker_controlled_contexts() {
        for bad in [
            "github.head_ref",
            "github.event.pull_request.title",
            "github.event.pull_request.head.ref",
            "github.event.workflow_run.head_branch",
            "github.event.workflow_run.display_title",
            "github.event.workflow_run.pull_requests[0].head.ref",
            "github.event.head_commit.message",
            "github.event.comment.body",
            "format('{0}', github.event.issue.body)",
            "github.event.head_commit.author.email",
            "github.event.workflow_run.head_repository.description",
            "github.event.workflow_run.name",
        ] {
            assert!(attacker_controlled(bad).is_some(), "{bad}");
        }
        for ok in [
            "github.sha",
            "github.event.workflow_run.head_sha",
            "inputs.head_sha",
            "github.ref",
            "github.event.pull_request.number",
            "steps.x.outputs.title",
            "github.event.workflow_run.id",
            "github.event.repository.name",
        ] {
            assert!(attacker_controlled(ok).is_none(), "{ok}");
        }
    }

    #[test]
    fn paths_into_checkouts() {
        let pr = vec!["pr".to_owned()];
        assert_eq!(
            points_into("${{ github.workspace }}/pr/bin:/usr/bin", &pr, ".").as_deref(),
            Some("pr")
        );
        assert!(points_into("$GITHUB_WORKSPACE/trusted/bin:$PATH", &pr, ".").is_none());
        assert!(points_into("/home/runner/.cargo", &pr, ".").is_none());
        assert!(points_into("../pr/wrap.sh", &pr, "trusted").is_some());
        assert!(points_into("../pr/wrap.sh", &pr, ".").is_none());
        assert_eq!(
            mentions_checkout("echo \"X=$(cat pr/rust-toolchain)\" >> $GITHUB_ENV", &pr).as_deref(),
            Some("pr")
        );
        assert!(mentions_checkout("echo pr >> $GITHUB_ENV", &pr).is_none());
    }
}
