//! What code a job runs that is not the default branch's: checkouts of
//! other refs, git commands, another run's artifacts, local actions the tree
//! does not have, and what makes brought-in bytes code rather than data
//! (a build, an interpreter, a program by path, a third-party action).
//!
//! Owns `POSTING_ACTIONS` and these recognisers. Must not decide which
//! references are trusted (`refs.rs`) or which runner a job gets (`runners.rs`).

use anyhow::Result;

use super::super::expr;
use super::refs::{Judge, env_ref_trusted, substitute_inputs};
use super::{Why, events_text};
use crate::contracts::commands;
use crate::contracts::shell::Script;
use crate::contracts::workflow::{Job, Pos, Scalar, Step};

/// Why a job in a privileged workflow runs code that is not the default branch's.
pub(super) fn other_code(
    job: &Job,
    judge: &Judge,
    privileged: &[&String],
    surroundings: &[&str],
) -> Result<Vec<Why>> {
    let events = events_text(privileged);
    let mut whys = Vec::new();
    for (index, step) in job.steps.iter().enumerate() {
        let mut budget = crate::contracts::rules::LOCAL_ACTION_BUDGET;
        let found = step_other_code(step, judge, None, &mut budget)?;
        // Pull-request bytes in a working tree matter when something runs
        // them: a build, a program, an action other than GitHub's own, or a
        // cache save that hands them on. Checked out only to be read by git
        // (rebased, diffed, pushed), they are not code.
        let local = step
            .uses
            .as_ref()
            .is_some_and(|u| crate::contracts::workflow::local_uses(&u.value).is_some());
        let then = if found.is_empty() {
            None
        } else if local {
            Some(String::new())
        } else if let Some(dir) = checkout_subdir(step) {
            runs_code_from(&job.steps[index + 1..], &dir, surroundings)
        } else {
            runs_code(&job.steps[index..], true)
        };
        if let Some(then) = then {
            for (pos, what) in found {
                let then = if then.is_empty() {
                    String::new()
                } else {
                    format!(" and then {then}")
                };
                whys.push(Why {
                    pos,
                    text: format!("{what}{then} in a workflow started by {events}"),
                });
            }
        }
        // Another run's artifacts are that run's bytes: code when the job
        // builds, runs or caches after downloading them; data otherwise.
        if let Some(at) = other_run_download(step) {
            if let Some(use_) = runs_code(&job.steps[index + 1..], false) {
                whys.push(Why {
                    pos: at.pos,
                    text: format!(
                        "downloads artifacts of another run (`{}`) and then {use_} in a workflow started by {events}",
                        at.value
                    ),
                });
            }
        }
    }
    Ok(whys)
}

/// What a job does after bringing in bytes that makes them code rather than
/// data: builds or runs something, uses a local action (or, with
/// `actions_run`, any action not owned by GitHub, which may run the
/// project's code), or saves a cache (which hands the bytes to later runs).
pub fn runs_code(later: &[Step], actions_run: bool) -> Option<String> {
    for step in later {
        if let Some(run) = &step.run {
            let script = Script::parse(&run.value);
            if let Some(command) = commands::builds(&script) {
                let line = commands::line(&run.value, &script, command);
                return Some(format!("builds (`{}`)", line.trim()));
            }
            // The programs the shell runs (after `sudo`, `env X=1`, …): an
            // interpreter, or a program given by path (`scripts/ci/reap.sh`,
            // `./bin/x`). Quoted text, comments and here-document bodies are
            // no commands.
            for command in script.commands() {
                let Some(program) = command.program_text() else {
                    continue;
                };
                let name = command.program().unwrap_or_default();
                if commands::RUNNERS.contains(&name.as_str())
                    || program.contains('/') && !program.starts_with('-')
                {
                    let line = commands::line(&run.value, &script, command);
                    return Some(format!("runs `{}`", line.trim()));
                }
            }
        }
        if let Some(uses) = step
            .uses
            .as_ref()
            .filter(|u| crate::contracts::workflow::local_uses(&u.value).is_some())
        {
            return Some(format!("runs the local action `{}`", uses.value));
        }
        if let Some((_, why)) = crate::contracts::caches::cache_save(step) {
            return Some(format!("saves a cache ({why})"));
        }
        if let Some(uses) = step.uses.as_ref().filter(|_| actions_run) {
            let owner = uses
                .value
                .split('/')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if !matches!(owner.as_str(), "actions" | "github") && !posts_only(step) {
                return Some(format!("uses `{}`", uses.value.trim()));
            }
        }
        // A script that loads a file of the workspace runs it.
        let loads = step.uses_action("actions/github-script")
            && step
                .input("script")
                .is_some_and(|s| s.value.contains("require(") || s.value.contains("import("));
        if loads {
            return Some("runs `actions/github-script` that loads a workspace file".to_owned());
        }
    }
    None
}

/// Third-party actions that only post what they are given (a comment from
/// a file or a text) and never run a file of the workspace: after pull
/// request bytes arrive, using one is no sign that they run. The one list.
pub(super) const POSTING_ACTIONS: &[&str] = &[
    "marocchino/sticky-pull-request-comment",
    "peter-evans/create-or-update-comment",
    "peter-evans/find-comment",
    "thollander/actions-comment-pull-request",
    "mshick/add-pr-comment",
];

pub(super) fn posts_only(step: &Step) -> bool {
    POSTING_ACTIONS.iter().any(|name| step.uses_action(name))
}

/// The subdirectory an `actions/checkout` step checks out into (`path:
/// pr`), when it is a literal one and not the workspace itself.
pub(super) fn checkout_subdir(step: &Step) -> Option<String> {
    if !step.uses_action("actions/checkout") {
        return None;
    }
    let path = step.input("path")?.value.trim();
    let mut rest = path;
    for prefix in [
        "${{ github.workspace }}/",
        "${{github.workspace}}/",
        "$GITHUB_WORKSPACE/",
        "${GITHUB_WORKSPACE}/",
        "./",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.trim_matches('/');
    let plain = !rest.is_empty() && rest != "." && !rest.contains('$') && !rest.contains("..");
    plain.then(|| rest.to_owned())
}

/// True when `text` names the directory `dir` of the workspace (`pr`,
/// `./pr/x`, `$GITHUB_WORKSPACE/pr`) or one of `names`, the variables set
/// to it (`$PR`, `${PR}`).
pub(super) fn mentions_dir(text: &str, dir: &str, names: &[String]) -> bool {
    let path = text
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '=' | ':' | ',' | '(' | ')'))
        .any(|word| {
            let word = word
                .trim_start_matches("./")
                .trim_start_matches("${{ github.workspace }}/")
                .trim_start_matches("$GITHUB_WORKSPACE/")
                .trim_start_matches("${GITHUB_WORKSPACE}/");
            word == dir
                || word.starts_with(&format!("{dir}/"))
                || word.ends_with(&format!("/{dir}"))
                || word.contains(&format!("/{dir}/"))
        });
    path || names
        .iter()
        .any(|n| text.contains(&format!("${n}")) || text.contains(&format!("${{{n}}}")))
}

/// After a pull request was checked out into the subdirectory `dir` only,
/// what runs bytes from it: a command in it (by path, or an interpreter's
/// script there), any other command handed that directory (`pip install
/// ./pr`, `cp pr/x .`, `cd pr`) except a read-only one (`git`, `diff`,
/// `wc`, …) or an interpreter running a script from elsewhere (`python
/// sz.py "$PR"`: a trusted script reading it), a step working inside it,
/// a tool that searches the workspace (`pytest`, `go`, `cargo`, `find`),
/// a third-party action (unless it only posts) or local action given it,
/// or a cache save; `surroundings` (the job's default working directory and
/// environment) pointing into it make every step work inside it.
/// Everything else runs trusted bytes.
pub(super) fn runs_code_from(later: &[Step], dir: &str, surroundings: &[&str]) -> Option<String> {
    let scripts: Vec<Option<Script>> = later
        .iter()
        .map(|step| step.run.as_ref().map(|r| Script::parse(&r.value)))
        .collect();
    // The variables that stand for the directory.
    let mut names: Vec<String> = Vec::new();
    for (step, script) in later.iter().zip(&scripts) {
        for (name, value) in &step.env {
            if mentions_dir(&value.value, dir, &[]) {
                names.push(name.value.clone());
            }
        }
        for (_, assignment) in script.iter().flat_map(Script::assignments) {
            if mentions_dir(&assignment.value.text(), dir, &[]) {
                names.push(assignment.name.clone());
            }
        }
    }
    // A job whose default working directory or environment points into it
    // works inside it in every step.
    let everywhere = surroundings.iter().any(|s| mentions_dir(s, dir, &[]));
    for (step, script) in later.iter().zip(&scripts) {
        // Working inside it, or with an environment that points into it
        // (`PYTHONPATH: pr`), any command that is not read-only may run it.
        let inside = everywhere
            || step
                .working_directory
                .as_ref()
                .is_some_and(|d| mentions_dir(&d.value, dir, &names))
            || step
                .env
                .iter()
                .any(|(_, v)| mentions_dir(&v.value, dir, &names));
        if let (Some(run), Some(script)) = (&step.run, script) {
            for command in script.commands() {
                let segment = run.value.get(command.span.clone()).unwrap_or_default();
                // Put on the search path or into the environment of later
                // steps, it runs wherever they do.
                let exported = (command.writes_to("GITHUB_PATH")
                    || command.writes_to("GITHUB_ENV"))
                    && mentions_dir(segment, dir, &names);
                let runs_from = exported
                    || command.program_text().is_some_and(|program| {
                        let name = command.program().unwrap_or_default();
                        if commands::WORKSPACE_SEARCHES.contains(&name.as_str())
                            || mentions_dir(&program, dir, &names)
                        {
                            return true;
                        }
                        if commands::READ_ONLY.contains(&name.as_str()) {
                            return false;
                        }
                        // `PYTHONPATH=pr python x.py`: an assignment into it.
                        let assigns = command
                            .assignments
                            .iter()
                            .any(|a| mentions_dir(&a.value.text(), dir, &names))
                            || command.words[..command.program_index().unwrap_or(0)]
                                .iter()
                                .any(|w| {
                                    w.text().contains('=') && mentions_dir(&w.text(), dir, &names)
                                });
                        if assigns {
                            return true;
                        }
                        if commands::SCRIPT_INTERPRETERS.contains(&name.as_str()) {
                            let args = command.arg_texts();
                            // `-c`, `-m`, `-e`: not a script file; judged by mention.
                            let script_arg = args.iter().find(|a| {
                                !a.starts_with('-') || matches!(a.as_str(), "-c" | "-m" | "-e")
                            });
                            return match script_arg.map(String::as_str) {
                                Some("-c" | "-m" | "-e") | None => {
                                    inside || mentions_dir(segment, dir, &names)
                                }
                                Some(file) => inside || mentions_dir(file, dir, &names),
                            };
                        }
                        inside || mentions_dir(segment, dir, &names)
                    });
                if runs_from {
                    let first = commands::line(&run.value, script, command);
                    return Some(format!("runs `{}` on it", first.trim()));
                }
            }
        }
        if let Some(uses) = &step.uses {
            let given = step
                .with
                .iter()
                .any(|(_, v)| mentions_dir(&v.value, dir, &names));
            let local = crate::contracts::workflow::local_uses(&uses.value);
            let owner = uses
                .value
                .split('/')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let third_party = local.is_none() && !matches!(owner.as_str(), "actions" | "github");
            if local.is_some_and(|l| mentions_dir(l, dir, &[])) || local.is_some() && given {
                return Some(format!("runs the local action `{}` on it", uses.value));
            }
            if third_party && !posts_only(step) {
                return Some(format!("uses `{}`", uses.value.trim()));
            }
        }
        if let Some((_, why)) = crate::contracts::caches::cache_save(step) {
            return Some(format!("saves a cache ({why})"));
        }
        let loads = step.uses_action("actions/github-script")
            && step
                .input("script")
                .is_some_and(|s| s.value.contains("require(") || s.value.contains("import("));
        if loads {
            return Some("runs `actions/github-script` that loads a workspace file".to_owned());
        }
    }
    None
}

/// A local composite action being looked into: where the workflow uses it,
/// its file, and its inputs (defaults overridden by the caller's `with:`).
pub(super) struct Inside<'a> {
    at: Pos,
    file: &'a str,
    inputs: &'a [(String, String)],
}

/// What one step does that brings in other code, in words. Local composite
/// actions (`uses: ./.github/actions/x`) are read from the tree at `root`,
/// with `${{ inputs.NAME }}` resolved; one the tree does not have comes from
/// a checkout made during the run, which is other code itself.
pub(super) fn step_other_code(
    step: &Step,
    judge: &Judge,
    inside: Option<&Inside>,
    budget: &mut usize,
) -> Result<Vec<(Pos, String)>> {
    let (policy, root) = (judge.policy, judge.root);
    let place = |pos: Pos, what: String| match inside {
        None => (pos, what),
        Some(inside) => (
            inside.at,
            format!("{what} (in {}, line {})", inside.file, pos.line),
        ),
    };
    // Inner steps arrive with their inputs resolved (expand_local_action).
    let resolve = |value: &str| value.to_owned();
    let mut found = Vec::new();
    // A `ref:` of another repository is that repository's, not the pull request's.
    let other_repository = step.input("repository").is_some_and(|r| {
        expr::sole_expression(&r.value) != Some("github.repository")
            && !expr::carries_pr_content(&r.value, judge.events)
            && (judge.inputs_trusted || !r.value.contains("inputs."))
    });
    if step.uses_action("actions/checkout") {
        if let Some(reference) = step.input("ref").filter(|_| !other_repository) {
            let value = resolve(&reference.value);
            // In a reusable workflow, an input is what each caller passes.
            let trusted = if !judge.callers.is_empty() && value.contains("inputs.") {
                judge.callers.iter().all(|caller| {
                    let passed = substitute_inputs(&value, &caller.with, judge.call_inputs);
                    expr::is_trusted_ref_in(
                        &passed,
                        &policy.default_branch,
                        judge.events,
                        caller.inputs_trusted,
                        caller.static_matrix,
                    )
                })
            } else if let Some(name) =
                expr::sole_expression(&value).and_then(|b| b.strip_prefix("env."))
            {
                env_ref_trusted(name, judge)
            } else {
                expr::is_trusted_ref_in(
                    &value,
                    &policy.default_branch,
                    judge.events,
                    judge.inputs_trusted,
                    judge.static_matrix,
                )
            };
            if !trusted {
                found.push(place(reference.pos, format!("checks out `{value}`")));
            }
        }
        if let Some(repository) = step.input("repository") {
            let value = resolve(&repository.value);
            // Another named repository is not pull-request code; a fork's
            // name from the event payload is.
            let foreign =
                expr::sole_expression(&value) != Some("github.repository") && !other_repository;
            if foreign {
                found.push(place(
                    repository.pos,
                    format!("checks out repository `{value}`"),
                ));
            }
        }
    }
    if let Some(run) = &step.run {
        if let Some(line) =
            commands::fetches_pr_code(&run.value, judge.events, &judge.tainted, false)
        {
            found.push(place(run.pos, format!("runs `{}`", line.trim())));
        }
    }
    let Some(uses) = step
        .uses
        .as_ref()
        .filter(|u| crate::contracts::workflow::local_uses(&u.value).is_some())
    else {
        return Ok(found);
    };
    let outer = inside.map_or(&[][..], |i| i.inputs);
    let Some(action) = crate::contracts::workflow::expand_local_action(root, step, outer)? else {
        found.push(place(
            uses.pos,
            format!(
                "runs the local action `{}`, which the tree at {} does not have (so it comes from a checkout made during the run)",
                uses.value,
                root.display()
            ),
        ));
        return Ok(found);
    };
    let file = &action.file;
    if *budget == 0 {
        found.push(place(
            uses.pos,
            format!(
                "expands more than {} local actions (at `{file}`), which were not all checked",
                crate::contracts::rules::LOCAL_ACTION_BUDGET
            ),
        ));
        return Ok(found);
    }
    *budget -= 1;
    let nested = Inside {
        at: inside.map_or(uses.pos, |i| i.at),
        file,
        inputs: &action.inputs,
    };
    for inner in &action.steps {
        found.extend(step_other_code(inner, judge, Some(&nested), budget)?);
    }
    Ok(found)
}

/// The `run-id:` (or `uses:`) of a step that downloads the artifacts of
/// another run. For a `workflow_run` consumer that run is the pull
/// request's CI run, so the bytes are the pull request's.
pub fn other_run_download(step: &Step) -> Option<&Scalar> {
    if step.uses_action("actions/download-artifact") {
        step.input("run-id")
            .filter(|id| expr::sole_expression(&id.value) != Some("github.run_id"))
    } else if step.uses_action("dawidd6/action-download-artifact") {
        step.uses.as_ref()
    } else {
        None
    }
}
