//! Which references and values a job may trust under the events that start
//! it: what its callers pass a reusable workflow, what `${{ env.NAME }}`
//! can hold, which dispatch inputs are maintainers', which environment
//! variables carry pull-request content.
//!
//! Owns [`Judge`], what judging a privileged job's steps needs. Must not
//! decide what a step runs (`code.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::super::expr;
use super::JobRef;
use crate::contracts::commands;
use crate::contracts::shell::Script;
use crate::contracts::workflow::{Job, Scalar, Workflow};
use crate::policy::Policy;

/// True when a workflow's `inputs.*` are chosen by maintainers: it is not
/// a reusable workflow (a dispatch's inputs need write access), or every
/// caller is in this repository and passes nothing that carries
/// pull-request content (or its own callee-chosen inputs) in its `with:`.
pub(super) fn inputs_are_maintainers(
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    triggers: &[BTreeSet<String>],
    w: usize,
) -> bool {
    if !workflows[w].events().any(|e| e == "workflow_call") {
        return true;
    }
    let list = callers.get(&w).map(Vec::as_slice).unwrap_or_default();
    !list.is_empty()
        && list.iter().all(|caller| {
            let calling = &workflows[caller.workflow].jobs[caller.job];
            let own_inputs_ok = !workflows[caller.workflow]
                .events()
                .any(|e| e == "workflow_call");
            calling.with.iter().all(|(_, value)| {
                !expr::carries_pr_content(&value.value, &triggers[caller.workflow])
                    && (own_inputs_ok || !value.value.contains("inputs."))
            })
        })
}

/// One value an environment variable can have: its name, the value, and
/// the environment of the step that writes it (for `$VAR` in the value).
pub(super) type EnvValue = (String, String, Vec<(String, String)>);

/// The values `${{ env.NAME }}` can have in a job (see [`Judge`]).
pub(super) fn env_values(wf: &Workflow, job: &Job) -> Vec<EnvValue> {
    let pairs = |list: &[(Scalar, Scalar)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.value.clone(), v.value.clone()))
            .collect()
    };
    let mut out: Vec<EnvValue> = wf
        .env
        .iter()
        .chain(job.env.iter())
        .map(|(k, v)| (k.value.clone(), v.value.clone(), Vec::new()))
        .collect();
    for step in &job.steps {
        let Some(run) = &step.run else { continue };
        let script = Script::parse(&run.value);
        for line in commands::file_lines(&script, "GITHUB_ENV") {
            out.push((line.name, line.value.text(), pairs(&step.env)));
        }
    }
    out
}

/// A `${{ env.NAME }}` ref is trusted when every value the job gives NAME
/// is: a literal without `pull/`, `$GITHUB_REF`/`$GITHUB_SHA`, or shell
/// variables whose step `env:` values are trusted refs themselves.
pub(super) fn env_ref_trusted(name: &str, judge: &Judge) -> bool {
    let values: Vec<&EnvValue> = judge
        .env_values
        .iter()
        .filter(|(n, _, _)| n == name)
        .collect();
    !values.is_empty()
        && values.iter().all(|(_, value, step_env)| {
            if value.contains("pull/") {
                return false;
            }
            if value.contains("${{") {
                return expr::is_trusted_ref_in(
                    value,
                    &judge.policy.default_branch,
                    judge.events,
                    judge.inputs_trusted,
                    judge.static_matrix,
                );
            }
            value
                .split('$')
                .skip(1)
                .map(|v| {
                    v.trim_start_matches('{')
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or("")
                })
                .all(|var| {
                    matches!(var, "GITHUB_REF" | "GITHUB_SHA" | "GITHUB_REF_NAME")
                        && step_env.iter().all(|(k, v)| {
                            k != var
                                || expr::sole_expression(v)
                                    == Some(&format!(
                                        "github.{}",
                                        var.trim_start_matches("GITHUB_").to_ascii_lowercase()
                                    ))
                        })
                        || step_env.iter().any(|(k, v)| {
                            k == var
                                && expr::is_trusted_ref_in(
                                    v,
                                    &judge.policy.default_branch,
                                    judge.events,
                                    judge.inputs_trusted,
                                    judge.static_matrix,
                                )
                        })
                })
        })
}

/// What one calling job passes to a reusable workflow, and how to judge it.
pub(super) struct CallerInputs {
    pub(super) with: Vec<(String, String)>,
    pub(super) inputs_trusted: bool,
    pub(super) static_matrix: bool,
}

pub(super) fn caller_inputs(
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    w: usize,
) -> Vec<CallerInputs> {
    callers
        .get(&w)
        .into_iter()
        .flatten()
        .map(|caller| {
            let calling = &workflows[caller.workflow].jobs[caller.job];
            CallerInputs {
                with: calling
                    .with
                    .iter()
                    .map(|(k, v)| (k.value.clone(), v.value.clone()))
                    .collect(),
                inputs_trusted: !workflows[caller.workflow]
                    .events()
                    .any(|e| e == "workflow_call"),
                static_matrix: !calling.dynamic_matrix,
            }
        })
        .collect()
}

/// `inputs.NAME` inside the expressions of `value` replaced by what `with`
/// (else the input's default, else nothing) gives it, as an expression.
pub(super) fn substitute_inputs(
    value: &str,
    with: &[(String, String)],
    defaults: &[(String, Option<String>)],
) -> String {
    let mut out = value.to_owned();
    let names: BTreeSet<&str> = with
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(defaults.iter().map(|(n, _)| n.as_str()))
        .collect();
    for name in names {
        let given = with
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| {
                defaults
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, d)| d.clone())
            })
            .unwrap_or_default();
        let as_expr = match expr::sole_expression(&given) {
            Some(body) => format!("({body})"),
            None => format!("'{}'", given.trim().replace('\'', "''")),
        };
        let needle = format!("inputs.{name}");
        let mut rebuilt = String::new();
        let mut rest = out.as_str();
        while let Some(at) = rest.find(&needle) {
            let end = at + needle.len();
            let boundary = rest[end..]
                .bytes()
                .next()
                .is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
            rebuilt.push_str(&rest[..at]);
            rebuilt.push_str(if boundary { &as_expr } else { &needle });
            rest = &rest[end..];
        }
        rebuilt.push_str(rest);
        out = rebuilt;
    }
    out
}

/// What judging a privileged job's steps needs: the events that start its
/// privileged runs, whether its `inputs.*` are maintainer-chosen, and the
/// environment variables that carry pull-request content.
pub(super) struct Judge<'a> {
    pub(super) policy: &'a Policy,
    pub(super) root: &'a Path,
    pub(super) events: &'a BTreeSet<String>,
    pub(super) inputs_trusted: bool,
    pub(super) static_matrix: bool,
    /// `${{ env.NAME }}` values the job can give a `ref:`: its `env:`
    /// entries and the `NAME=…` lines its scripts write to `$GITHUB_ENV`,
    /// with the step environment that expands them.
    pub(super) env_values: Vec<EnvValue>,
    /// For a reusable workflow: what each caller passes.
    pub(super) callers: &'a [CallerInputs],
    pub(super) call_inputs: &'a [(String, Option<String>)],
    pub(super) tainted: Vec<String>,
}

/// The environment variables (workflow, job, steps) whose value carries
/// pull-request content under `events`, or an input a caller chose.
pub(super) fn tainted_env(
    wf: &Workflow,
    job: &Job,
    events: &BTreeSet<String>,
    inputs_trusted: bool,
) -> Vec<String> {
    wf.env
        .iter()
        .chain(job.env.iter())
        .chain(job.steps.iter().flat_map(|s| s.env.iter()))
        .filter(|(_, value)| {
            expr::carries_pr_content(&value.value, events)
                || !inputs_trusted && value.value.contains("inputs.")
        })
        .map(|(name, _)| name.value.clone())
        .collect()
}
