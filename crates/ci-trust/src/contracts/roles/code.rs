//! What code a job runs that is not the default branch's, under one start:
//! checkouts of a ref (or a repository) a pull request controls, git
//! commands that bring one into a tree, another run's artifacts, local
//! actions that live in a pull-request checkout, and what makes brought-in
//! bytes code rather than data (a build, an interpreter, a program by path,
//! a third-party action).
//!
//! Every value is judged by what it is under the start (`flow.rs`), never
//! by its name. Owns `POSTING_ACTIONS` and these recognisers. Must not
//! decide which runner a job gets (`runners.rs`) or what a value's taint
//! means for severity (`mod.rs`).

use anyhow::Result;

use super::flow::{FORK_REPO, JobScope, SELF_REPO};
use crate::contracts::commands;
use crate::contracts::eval::{Taint, Tri, Val};
use crate::contracts::expr;
use crate::contracts::shell::Script;
use crate::contracts::workflow::{Job, Pos, Scalar, Step};

/// Code a job runs that is not the default branch's: where, what, and the
/// taint of the value that chose it.
pub(super) struct Brought {
    pub pos: Pos,
    pub what: String,
    pub taint: Taint,
    /// The question the path depends on, where the workflows do not show
    /// whether the brought bytes run ([`Runs::unsure`]): a warning.
    pub unsure: Option<String>,
    /// The workflow (by index) whose runs on this repository's own branches
    /// a download takes the artifacts of, forks' runs left out: the path
    /// is an error when that workflow's own runs build pull-request code
    /// (`downloads::taint_branch_run_downloads`), a warning otherwise.
    pub artifacts_of: Option<usize>,
}

/// What a job runs under the start of `scope` that is not the default
/// branch's. `surroundings`: the job's default working directory and
/// environment, which every step starts in.
pub(super) fn other_code(
    job: &Job,
    scope: &JobScope,
    root: &std::path::Path,
    self_names: &[String],
    surroundings: &[&str],
) -> Result<Vec<Brought>> {
    let mut out = Vec::new();
    for (index, step) in job.steps.iter().enumerate() {
        let here = scope.at_step(index);
        // A step whose `if:` is false under this start does not run.
        if let Some(cond) = &step.if_cond {
            if crate::contracts::eval::condition(&cond.value, &here) == Tri::False {
                continue;
            }
        }
        let mut budget = crate::contracts::rules::LOCAL_ACTION_BUDGET;
        let judge = Judge {
            scope: &here,
            root,
            self_names,
            job,
            index,
        };
        let found = step_other_code(step, &judge, None, &mut budget)?;
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
            Some(Runs::sure(String::new()))
        } else if let Some(dir) = checkout_subdir(step) {
            runs_code_from(&job.steps[index + 1..], &dir, surroundings)
        } else {
            runs_code(&job.steps[index..], true).map(Runs::sure)
        };
        if let Some(then) = then {
            for found in found {
                let what = if then.what.is_empty() {
                    String::new()
                } else {
                    format!(" and then {}", then.what)
                };
                out.push(Brought {
                    what: format!("{}{what}", found.what),
                    taint: here.refine_taint(found.taint),
                    unsure: then.unsure.clone(),
                    artifacts_of: None,
                    ..found
                });
            }
        }
        // Another run's artifacts are that run's bytes: code when the job
        // builds, runs or caches after downloading them; data otherwise.
        if let Some((at, taint)) = other_run_download_taint(step, &here) {
            // Unpacked into a directory of its own, the bytes are code only
            // where something runs from that directory (as for a pull
            // request checked out into a subdirectory).
            let later = &job.steps[index + 1..];
            let then = match download_subdir(step) {
                Some(dir) => runs_code_from(later, &dir, surroundings),
                None => runs_code(later, false)
                    .or_else(|| git_in_workspace(later))
                    .map(Runs::sure),
            };
            if let Some(then) = then {
                let branches = branch_runs(step, &here, self_names);
                let artifacts_of = match &branches {
                    Some(BranchRuns::This { workflow }) => Some(*workflow),
                    _ => None,
                };
                let unsure = then.unsure.or_else(|| branches.map(|b| b.question(&here)));
                out.push(Brought {
                    pos: at.pos,
                    what: format!(
                        "downloads artifacts of another run (`{}`) and then {}",
                        at.value, then.what
                    ),
                    taint: here.refine_taint(taint),
                    unsure,
                    artifacts_of,
                });
            }
        }
    }
    Ok(out)
}

/// What judging one step needs.
struct Judge<'j, 'a> {
    scope: &'j JobScope<'a>,
    root: &'j std::path::Path,
    self_names: &'j [String],
    job: &'j Job,
    /// The step's index in the job.
    index: usize,
}

/// Where a checkout's repository points.
#[derive(Debug, PartialEq)]
enum Repo {
    /// This repository (no `repository:`, `github.repository`, its own name).
    This,
    /// A pull request's fork (its head repository), or a repository a
    /// value of `taint` chose.
    Chosen(Taint),
    /// Another repository, named in the workflow.
    Other,
}

fn repository_of(value: &Val, self_names: &[String]) -> Repo {
    let mut taint = Taint::NONE;
    let mut this = true;
    for alt in value.alternatives() {
        match alt {
            Val::Null => {}
            Val::Sym(s) | Val::Named(s, _) if *s == SELF_REPO => {}
            Val::Sym(s) if *s == FORK_REPO => taint |= Taint::PR_REF,
            Val::Str(s, t) if s.trim().is_empty() && t.is_empty() => {}
            Val::Str(s, t) => {
                taint |= *t;
                if !self_names.iter().any(|n| n.eq_ignore_ascii_case(s.trim())) {
                    this = false;
                }
            }
            other => taint |= other.taint() | Taint::UNSEEN,
        }
    }
    if !taint.without(Taint::UNSEEN).is_empty() || taint.has(Taint::UNSEEN) && this {
        Repo::Chosen(taint)
    } else if this {
        Repo::This
    } else {
        Repo::Other
    }
}

/// A checkout of this job before step `index` whose path encloses `path`
/// (the last one wins), with the taint of what it checked out.
fn enclosing_checkout<'j>(judge: &Judge<'j, '_>, path: &str) -> Option<(&'j Step, String, Taint)> {
    let mut found = None;
    for step in judge.job.steps.iter().take(judge.index) {
        if !step.uses_action("actions/checkout") {
            continue;
        }
        let dir = step
            .input("path")
            .map_or(".".to_owned(), |p| normalize(&p.value));
        let encloses = dir == "." || path == dir || path.starts_with(&format!("{dir}/"));
        if !encloses {
            continue;
        }
        let scope = judge.scope.at_step(step.index);
        let reference = step
            .input("ref")
            .map_or(Val::Null, |r| scope.value(&r.value));
        let repo = step
            .input("repository")
            .map_or(Val::Null, |r| scope.value(&r.value));
        let taint = match repository_of(&repo, judge.self_names) {
            Repo::Chosen(t) => t | reference.taint(),
            Repo::This => reference.taint(),
            Repo::Other => reference.taint() & (Taint::PR | Taint::MAINTAINER),
        };
        found = Some((step, dir, taint));
    }
    found
}

/// A workspace-relative path as written (`./a/`, `${{ github.workspace }}/a`).
fn normalize(path: &str) -> String {
    let mut rest = path.trim();
    for prefix in [
        "${{ github.workspace }}/",
        "${{github.workspace}}/",
        "$GITHUB_WORKSPACE/",
        "${GITHUB_WORKSPACE}/",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    // By segments: `pr/.`, `./pr/`, `pr//x`, `a/../pr` and `pr\x` name what
    // they name; a `..` above the workspace leaves the workspace itself.
    let mut parts: Vec<&str> = Vec::new();
    for segment in rest.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return ".".to_owned();
                }
            }
            segment => parts.push(segment),
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// What a job does after bringing in bytes that makes them code rather than
/// data: builds or runs something, uses a local action (or, with
/// `actions_run`, any action not owned by GitHub, which may run the
/// project's code), or saves a cache (which hands the bytes to later runs).
pub fn runs_code(later: &[Step], actions_run: bool) -> Option<String> {
    for step in later {
        if let Some(run) = &step.run {
            let script = Script::cached(&run.value);
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
                .is_some_and(|s| loads_workspace_file(&s.value));
        if loads {
            return Some("runs `actions/github-script` that loads a workspace file".to_owned());
        }
    }
    None
}

/// Third-party actions that only post what they are given (a comment from
/// a file or a text, a directory to a pages branch) and never run a file
/// of the workspace: after pull request bytes arrive, using one is no sign
/// that they run. The one list; `runs_git` says which push with git (and
/// so obey a planted `.git/config`) rather than call the REST API.
pub(super) const POSTING_ACTIONS: &[PostingAction] = &[
    PostingAction {
        name: "JamesIves/github-pages-deploy-action",
        runs_git: true,
    },
    PostingAction {
        name: "peaceiris/actions-gh-pages",
        runs_git: true,
    },
    PostingAction {
        name: "marocchino/sticky-pull-request-comment",
        runs_git: false,
    },
    PostingAction {
        name: "peter-evans/create-or-update-comment",
        runs_git: false,
    },
    PostingAction {
        name: "peter-evans/find-comment",
        runs_git: false,
    },
    PostingAction {
        name: "thollander/actions-comment-pull-request",
        runs_git: false,
    },
    PostingAction {
        name: "mshick/add-pr-comment",
        runs_git: false,
    },
];

pub(super) struct PostingAction {
    name: &'static str,
    runs_git: bool,
}

fn posting_action(step: &Step) -> Option<&'static PostingAction> {
    POSTING_ACTIONS.iter().find(|a| step.uses_action(a.name))
}

pub(super) fn posts_only(step: &Step) -> bool {
    posting_action(step).is_some()
}

/// The subdirectory an `actions/checkout` step checks out into (`path:
/// pr`), when it is a literal one and not the workspace itself.
pub(super) fn checkout_subdir(step: &Step) -> Option<String> {
    if !step.uses_action("actions/checkout") {
        return None;
    }
    let dir = normalize(step.input("path")?.value.trim());
    let plain = dir != "." && !dir.contains('$');
    plain.then_some(dir)
}

/// Unpacked into the workspace itself, bytes can plant a `.git/config`
/// (`core.fsmonitor`, `core.hooksPath`) that the next git command obeys: a
/// later `git`, or a third-party action (which may run git there).
fn git_in_workspace(later: &[Step]) -> Option<String> {
    for step in later {
        if let Some(script) = step.script() {
            if let Some(git) = script.commands().find(|c| c.program_is("git")) {
                let run = step.run.as_ref().map_or("", |r| r.value.as_str());
                let line = commands::line(run, &script, git);
                return Some(format!("runs `{}` where they were unpacked", line.trim()));
            }
        }
        if let Some((action, _)) = step.action() {
            let owner = action.split('/').next().unwrap_or("").to_ascii_lowercase();
            let api_only = posting_action(step).is_some_and(|a| !a.runs_git);
            if !matches!(owner.as_str(), "actions" | "github") && !api_only {
                return Some(format!(
                    "uses `{action}` where they were unpacked (it may run git there)"
                ));
            }
        }
    }
    None
}

/// The subdirectory a download of artifacts unpacks into (`path: ./artifacts`),
/// when it is a literal one and not the workspace itself.
fn download_subdir(step: &Step) -> Option<String> {
    // actions/download-artifact 4.0.0 to 4.1.6 unpack an entry named
    // `../x` outside `path:` (CVE-2024-42471): the whole workspace.
    let version = step
        .uses
        .as_ref()
        .filter(|_| step.uses_action("actions/download-artifact"))
        .and_then(|u| u.value.split_once('@'))
        .map(|(_, v)| v.trim().trim_start_matches('v').to_owned());
    if let Some(version) = version {
        let numbers: Vec<u32> = version.split('.').map_while(|n| n.parse().ok()).collect();
        if matches!(numbers.as_slice(), [4, 0, ..] | [4, 1, 0..=6, ..]) {
            return None;
        }
    }
    let path = step.input("path")?.value.trim();
    // `normalize` leaves no `..` and no leading `/`.
    let dir = normalize(path);
    let plain = dir != "." && !dir.contains('$');
    plain.then_some(dir)
}

/// True when `text` names the directory `dir` of the workspace (`pr`,
/// `./pr/x`, `$GITHUB_WORKSPACE/pr`) or one of `names`, the variables set
/// to it (`$PR`, `${PR}`).
pub(super) fn mentions_dir(text: &str, dir: &str, names: &[String]) -> bool {
    // Compared without case: macOS and Windows runners' file systems
    // ignore it (`./PR/x` is `pr/x` there).
    let dir = dir.to_ascii_lowercase();
    let path = text
        .split(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '=' | ':' | ',' | '(' | ')' | '@')
        })
        .any(|word| {
            let word = word.to_ascii_lowercase();
            let word = word
                .trim_start_matches("./")
                .trim_start_matches("${{ github.workspace }}/")
                .trim_start_matches("$GITHUB_WORKSPACE/")
                .trim_start_matches("${GITHUB_WORKSPACE}/");
            let names_it = |word: &str| {
                word == dir
                    || word.starts_with(&format!("{dir}/"))
                    || word.ends_with(&format!("/{dir}"))
                    || word.contains(&format!("/{dir}/"))
            };
            // An option glued to its value (`make -Cpr`, `perl -Ipr`).
            let glued = word
                .strip_prefix('-')
                .filter(|w| !w.starts_with('-'))
                .and_then(|w| w.get(1..))
                .is_some_and(|w| names_it(w.trim_start_matches("./")));
            names_it(word) || glued
        });
    path || names
        .iter()
        .any(|n| text.contains(&format!("${n}")) || text.contains(&format!("${{{n}}}")))
}

/// What runs bytes brought into a directory of their own, in words, and
/// the question it depends on where the workflows do not show whether the
/// bytes run (a trusted program handed the directory, an action not given
/// it): such a path is a warning, not an error.
pub(super) struct Runs {
    pub what: String,
    pub unsure: Option<String>,
}

impl Runs {
    fn sure(what: String) -> Runs {
        Runs { what, unsure: None }
    }
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
pub(super) fn runs_code_from(later: &[Step], dir: &str, surroundings: &[&str]) -> Option<Runs> {
    let scripts: Vec<Option<std::rc::Rc<Script>>> = later
        .iter()
        .map(|step| step.run.as_ref().map(|r| Script::cached(&r.value)))
        .collect();
    // The variables that stand for the directory.
    let mut names: Vec<String> = Vec::new();
    for (step, script) in later.iter().zip(&scripts) {
        for (name, value) in &step.env {
            if mentions_dir(&value.value, dir, &[]) {
                names.push(name.value.clone());
            }
        }
        for (_, assignment) in script.iter().flat_map(|s| s.assignments()) {
            if mentions_dir(&assignment.value.text(), dir, &[]) {
                names.push(assignment.name.clone());
            }
        }
    }
    // A job whose default working directory or environment points into it
    // works inside it in every step.
    let everywhere = surroundings.iter().any(|s| mentions_dir(s, dir, &[]));
    let mut first_unsure: Option<Runs> = None;
    for (step, script) in later.iter().zip(&scripts) {
        // Working inside it, or with an environment that points into it
        // (`PYTHONPATH: pr`), any command that is not read-only may run it.
        let loading_env = step
            .env
            .iter()
            .any(|(k, v)| !passed_on(step, &k.value) && mentions_dir(&v.value, dir, &names));
        let inside = everywhere
            || loading_env
            || step
                .working_directory
                .as_ref()
                .is_some_and(|d| mentions_dir(&d.value, dir, &names));
        // Handed to the step's programs under a name of their own that the
        // script itself passes on (`PROJECTS_ROOT: pr`, then
        // `./x.py "$PROJECTS_ROOT/config.json"`), the directory is what
        // those programs make of it: a program handed it may run code from
        // it, and which do is not in the workflow. A variable the script
        // never names, or one programs load through (`PYTHONPATH`,
        // `BUNDLE_GEMFILE`, `JAVA_TOOL_OPTIONS`), is there for the
        // programs to read by themselves: working inside it.
        let handed = step
            .env
            .iter()
            .any(|(k, v)| passed_on(step, &k.value) && mentions_dir(&v.value, dir, &names));
        if let (Some(run), Some(script)) = (&step.run, script) {
            for command in script.commands() {
                let segment = run.value.get(command.span.clone()).unwrap_or_default();
                // Put on the search path or into the environment of later
                // steps, it runs wherever they do.
                let exported = (command.writes_to("GITHUB_PATH")
                    || command.writes_to("GITHUB_ENV"))
                    && mentions_dir(segment, dir, &names);
                let mut unsure: Option<String> = None;
                let runs_from = exported
                    || command.program_text().is_some_and(|program| {
                        let name = command.program().unwrap_or_default();
                        // `find` runs what it finds only with `-exec` (or `-ok`).
                        let searches = if name == "find" {
                            command.arg_texts().iter().any(|a| {
                                matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
                            })
                        } else {
                            commands::WORKSPACE_SEARCHES.contains(&name.as_str())
                        };
                        if searches || mentions_dir(&program, dir, &names) {
                            return true;
                        }
                        // A read-only program still runs what a loading
                        // variable points it at (`GIT_CONFIG_GLOBAL`'s
                        // `core.fsmonitor`, `GIT_EXTERNAL_DIFF`, `PAGER`).
                        if commands::READ_ONLY.contains(&name.as_str()) || name == "find" {
                            return loading_env;
                        }
                        // An interpreter reading its program from a pipe
                        // (`cat pr/build.sh | bash`) runs what the
                        // pipeline's earlier commands print.
                        if commands::SCRIPT_INTERPRETERS.contains(&name.as_str())
                            && command.pipe_position > 0
                            && script.commands.iter().any(|c| {
                                c.pipeline == command.pipeline
                                    && c.pipe_position < command.pipe_position
                                    && mentions_dir(
                                        run.value.get(c.span.clone()).unwrap_or_default(),
                                        dir,
                                        &names,
                                    )
                            })
                        {
                            return true;
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
                            // `-c`, `-m`, `-e`: not a script file; judged by
                            // mention. Otherwise the script is the first
                            // argument named like one (`-W ignore pr/x.py`:
                            // an option's value is no script); with none
                            // so named, judged by mention too.
                            let script_arg = args
                                .iter()
                                .find(|a| {
                                    matches!(a.as_str(), "-c" | "-m" | "-e")
                                        || !a.starts_with('-') && has_script_extension(a)
                                })
                                .filter(|a| {
                                    matches!(a.as_str(), "-c" | "-m" | "-e") || !a.contains('$')
                                });
                            // What comes before the script is the
                            // interpreter's own (`perl -Ipr x.pl`,
                            // `python -X importtime`): options that load
                            // from the directory run it.
                            let before = script_arg
                                .and_then(|a| args.iter().position(|x| x == a))
                                .unwrap_or(args.len());
                            if args[..before].iter().any(|a| mentions_dir(a, dir, &names)) {
                                return true;
                            }
                            // Right after an option, the script-like word
                            // may be that option's value (`node -r
                            // ./setup.js pr/index.js`): which word is the
                            // script is not known, so a mention decides.
                            let after_option = before > 0
                                && args[before - 1].starts_with('-')
                                && !NO_VALUE_OPTIONS.contains(&args[before - 1].as_str());
                            if after_option && mentions_dir(segment, dir, &names) {
                                return true;
                            }
                            let script_arg = match script_arg {
                                Some(a) => Some(a),
                                None if mentions_dir(segment, dir, &names) || inside => {
                                    return true;
                                }
                                None => None,
                            };
                            return match script_arg.map(String::as_str) {
                                Some("-c" | "-m" | "-e") | None => {
                                    inside || handed || mentions_dir(segment, dir, &names)
                                }
                                Some(file) if inside || mentions_dir(file, dir, &names) => true,
                                // `python trusted.py pr/x`, or with the
                                // directory in its environment: what the
                                // trusted script does with it.
                                Some(file) if handed || mentions_dir(segment, dir, &names) => {
                                    unsure = Some(format!(
                                        "does `{file}` run code from the directory it is handed?"
                                    ));
                                    true
                                }
                                Some(_) => false,
                            };
                        }
                        if inside {
                            return true;
                        }
                        // A program of the trusted tree by its path
                        // (`./.github/scripts/x.py pr/config.json`), handed
                        // the directory: a trusted script reading it, as
                        // `python x.py pr/…` is, unless it runs what it reads.
                        let trusted_program = trusted_script_path(&program);
                        let mentioned = mentions_dir(segment, dir, &names);
                        if trusted_program && (mentioned || handed) {
                            unsure = Some(format!(
                                "does `{program}` run code from the directory it is handed?"
                            ));
                            return true;
                        }
                        if !mentioned
                            && handed
                            && !commands::INERT_BUILTINS.contains(&name.as_str())
                        {
                            unsure = Some(format!(
                                "does `{name}` run code from the directory its environment names?"
                            ));
                            return true;
                        }
                        mentioned
                    });
                if runs_from {
                    let first = commands::line(&run.value, script, command);
                    let runs = Runs {
                        what: format!("runs `{}` on it", first.trim()),
                        unsure,
                    };
                    // A path that depends on a question does not end the
                    // search: a later step may run the bytes for certain.
                    if runs.unsure.is_none() {
                        return Some(runs);
                    }
                    first_unsure.get_or_insert(runs);
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
            if local.is_some_and(|l| mentions_dir(l, dir, &[]))
                || local.is_some() && (given || inside)
            {
                return Some(Runs::sure(format!(
                    "runs the local action `{}` on it",
                    uses.value
                )));
            }
            if third_party && !posts_only(step) {
                // Given the directory (or working in it), the action runs
                // on it; not given it, whether it reads a directory of its
                // own choosing is the action's code, which is not here.
                let what = format!("uses `{}`", uses.value.trim());
                if given || inside {
                    return Some(Runs::sure(what));
                }
                first_unsure.get_or_insert(Runs {
                    what,
                    unsure: Some(format!(
                        "does `{}` read `{dir}`, which it is not given?",
                        uses.value.trim()
                    )),
                });
            }
        }
        if let Some((_, why)) = crate::contracts::caches::cache_save(step) {
            return Some(Runs::sure(format!("saves a cache ({why})")));
        }
        // A script that loads a file by a literal path outside `dir`
        // (`require('./.github/scripts/x.cjs')` from the trusted checkout
        // at `.`) loads trusted bytes. A computed path may point into it,
        // and a script that names `dir` anywhere (hands it to what it
        // loads, `process.chdir`s into it, runs a command there) or
        // changes directory may load from it whatever it loads.
        let loads = step.uses_action("actions/github-script")
            && step.input("script").is_some_and(|s| {
                let names_dir = mentions_dir(&s.value, dir, &names);
                let anywhere = inside || names_dir || s.value.contains("chdir");
                // `exec.exec('npm', ['test'], { cwd: 'pr' })`, a child process.
                let runs_there =
                    names_dir && (s.value.contains("exec.") || s.value.contains("child_process"));
                runs_there
                    || workspace_loads(&s.value).iter().any(|load| match load {
                        None => true,
                        Some(path) => anywhere || mentions_dir(path, dir, &names),
                    })
            });
        if loads {
            return Some(Runs::sure(
                "runs `actions/github-script` that loads a file from it".to_owned(),
            ));
        }
    }
    first_unsure
}

/// Interpreter options known to take no value (`python -u x.py`,
/// `bash -ex x.sh`): the word after them is the script.
const NO_VALUE_OPTIONS: &[&str] = &[
    "-u", "-B", "-E", "-s", "-S", "-O", "-OO", "-q", "-e", "-x", "-ex", "-xe", "-eu", "-eux", "-v",
    "-w",
];

/// File names of scripts an interpreter or a shell runs.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "py", "sh", "bash", "js", "mjs", "cjs", "ts", "rb", "pl", "php", "ps1", "zsh",
];

fn has_script_extension(path: &str) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && SCRIPT_EXTENSIONS.contains(&ext))
}

/// A program given by a literal path of the checkout that names a script
/// (`./.github/scripts/x.py`, `ci/build.sh`): the repository's own code.
/// A build tool's wrapper (`./gradlew`, `./mvnw`), an installed program
/// (`/usr/bin/make`, `node_modules/.bin/webpack`) or a computed path is
/// judged as any program is.
fn trusted_script_path(program: &str) -> bool {
    program.contains('/')
        && !program.starts_with('/')
        && !program.starts_with('~')
        && !program.contains('$')
        && !program.contains("node_modules")
        && has_script_extension(program)
}

/// True when `step`'s own script names the environment variable `name`
/// (`$NAME`, `${NAME}`) and programs do not load through it: the script
/// passes its value on to what it runs. Any other variable of the step's
/// `env:` is there for its programs to read by themselves.
fn passed_on(step: &Step, name: &str) -> bool {
    if commands::loads_through(name) {
        return false;
    }
    step.run.as_ref().is_some_and(|run| {
        let text = &run.value;
        // `$NAME`, `${NAME}` or `${NAME:-…}`, not `$NAMEX`.
        [format!("${name}"), format!("${{{name}")]
            .iter()
            .any(|needle| {
                text.match_indices(needle.as_str()).any(|(at, m)| {
                    !text[at + m.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            })
    })
}

/// True when a github-script's JavaScript loads a file (`require('./x')`,
/// `import(`${process.env.GITHUB_WORKSPACE}/x`)`, a computed path); a
/// module by name (`require('fs')`, `@actions/core`) is no workspace file.
pub(super) fn loads_workspace_file(script: &str) -> bool {
    !workspace_loads(script).is_empty()
}

/// The workspace files a github-script's JavaScript loads, each as its
/// literal path, or `None` where the path is computed at run time (a
/// variable, a template with `${…}`, the workspace's variable).
fn workspace_loads(script: &str) -> Vec<Option<String>> {
    let mut loads = Vec::new();
    for call in ["require(", "import("] {
        for (at, _) in script.match_indices(call) {
            let rest = script[at + call.len()..].trim_start();
            match rest.chars().next() {
                Some(q @ ('\'' | '"' | '`')) => {
                    let name: String = rest[1..].chars().take_while(|c| *c != q).collect();
                    // `'./' + dir + '/x.js'`: the literal is only a part.
                    let joined = rest[1..]
                        .get(name.len() + 1..)
                        .is_some_and(|after| !after.trim_start().starts_with(')'));
                    if joined
                        || name.contains("${")
                        || name.contains("GITHUB_WORKSPACE")
                        || name.contains('\\')
                    {
                        loads.push(None);
                    } else if name.starts_with('.') || name.starts_with('/') {
                        loads.push(Some(name));
                    }
                }
                Some(_) => loads.push(None),
                None => {}
            }
        }
    }
    loads
}

/// A local composite action being looked into: where the workflow uses it,
/// its file, and its inputs (defaults overridden by the caller's `with:`).
pub(super) struct Inside<'a> {
    at: Pos,
    file: &'a str,
    inputs: &'a [(String, String)],
}

/// Taint worth a finding in a checkout `ref:` of this repository: a pull
/// request's, a maintainer's choice, or a value the workflows do not show.
fn chooses_code(taint: Taint) -> bool {
    taint.pr() || taint.has(Taint::MAINTAINER) || taint.has(Taint::UNSEEN)
}

/// What one step does that brings in other code, in words, with the taint
/// of what chose it. Local composite actions (`uses: ./.github/actions/x`)
/// are read from the checkout they live in: from a pull request's checkout
/// they are its code; from the trusted tree they are read at `root`, with
/// `${{ inputs.NAME }}` resolved.
fn step_other_code(
    step: &Step,
    judge: &Judge,
    inside: Option<&Inside>,
    budget: &mut usize,
) -> Result<Vec<Brought>> {
    let scope = judge.scope;
    let place = |pos: Pos, what: String, taint: Taint| match inside {
        None => Brought {
            pos,
            what,
            taint,
            unsure: None,
            artifacts_of: None,
        },
        Some(inside) => Brought {
            pos: inside.at,
            what: format!("{what} (in {}, line {})", inside.file, pos.line),
            taint,
            unsure: None,
            artifacts_of: None,
        },
    };
    let mut found = Vec::new();
    if step.uses_action("actions/checkout") {
        let reference = step.input("ref").map(|r| (r, scope.value(&r.value)));
        let repository = step.input("repository").map(|r| (r, scope.value(&r.value)));
        let repo = repository
            .as_ref()
            .map_or(Repo::This, |(_, v)| repository_of(v, judge.self_names));
        match (&reference, &repo) {
            // A ref a pull request controls is its code, whatever repository names it.
            (Some((r, v)), _) if v.taint().pr() => {
                found.push(place(r.pos, format!("checks out `{}`", r.value), v.taint()));
            }
            (Some((r, v)), Repo::This | Repo::Chosen(_)) if chooses_code(v.taint()) => {
                let taint = v.taint()
                    | if let Repo::Chosen(t) = repo {
                        t
                    } else {
                        Taint::NONE
                    };
                found.push(place(r.pos, format!("checks out `{}`", r.value), taint));
            }
            _ => {
                if let (Some((r, _)), Repo::Chosen(t)) = (&repository, &repo) {
                    found.push(place(
                        r.pos,
                        format!("checks out repository `{}`", r.value),
                        *t,
                    ));
                }
            }
        }
    }
    let fetching = step.script().filter(|script| {
        script
            .commands()
            .any(|c| c.program_is("git") || c.program_is("gh"))
    });
    if let Some(script) = fetching {
        let run = step.run.as_ref().map_or("", |r| r.value.as_str());
        let shell = scope.shell(&script);
        let strict = matches!(
            scope.start.event.as_str(),
            "pull_request_target" | "issue_comment"
        ) || scope.start.event == "workflow_run"
            && matches!(
                scope.start.actor,
                super::starts::Actor::Outsider | super::starts::Actor::Member
            );
        let taint_of = |w: &crate::contracts::shell::Word| shell.word(w).taint();
        if let Some((line, taint)) =
            commands::fetches_pr_code_with(run, &script, strict, &taint_of, false)
        {
            if let Some(r) = &step.run {
                found.push(place(r.pos, format!("runs `{}`", line.trim()), taint));
            }
        }
    }
    let Some(uses) = step
        .uses
        .as_ref()
        .filter(|u| crate::contracts::workflow::local_uses(&u.value).is_some())
    else {
        return Ok(found);
    };
    // The action lives in whatever checkout holds its path.
    let path = normalize(crate::contracts::workflow::local_uses(&uses.value).unwrap_or(""));
    let holder = if inside.is_none() {
        enclosing_checkout(judge, &path)
    } else {
        None
    };
    if let Some((_, dir, taint)) = &holder {
        if taint.pr() || taint.has(Taint::MAINTAINER) {
            found.push(place(
                uses.pos,
                format!(
                    "runs the local action `{}`, which lives in the checkout `{dir}` of code a pull request controls",
                    uses.value
                ),
                *taint,
            ));
            return Ok(found);
        }
    }
    // Read from the trusted tree, below the checkout's own directory.
    let mut lookup = step.clone();
    if let Some((_, dir, _)) = &holder {
        if dir != "." {
            let inner = path
                .strip_prefix(dir.as_str())
                .unwrap_or(&path)
                .trim_start_matches('/');
            let written = format!("./{inner}");
            lookup.uses = Some(Scalar {
                value: written,
                pos: uses.pos,
            });
        }
    }
    let outer = inside.map_or(&[][..], |i| i.inputs);
    let Some(action) = crate::contracts::workflow::expand_local_action(judge.root, &lookup, outer)?
    else {
        found.push(place(
            uses.pos,
            format!(
                "runs the local action `{}`, which the tree at {} does not have (so it comes from a checkout made during the run)",
                uses.value,
                judge.root.display()
            ),
            Taint::UNSEEN,
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
            Taint::UNSEEN,
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

/// A download of another run's artifacts, with the taint of the run it names.
pub(super) fn other_run_download_taint<'s>(
    step: &'s Step,
    scope: &JobScope,
) -> Option<(&'s Scalar, Taint)> {
    let at = other_run_download(step)?;
    // Another run's artifacts are that run's bytes: a pull request's when
    // the run id is one's (`github.event.workflow_run.id` after a pull
    // request), a dispatcher's choice, or, for a run id the workflow
    // computes, a run the repository does not show.
    let chosen_by = |input: &Scalar| {
        let t = scope.value(&input.value).taint();
        if t.pr() || t.has(Taint::MAINTAINER) {
            t
        } else {
            t | Taint::UNSEEN
        }
    };
    let taint = if step.uses_action("actions/download-artifact") {
        chosen_by(at)
    } else if let Some(run) = step.input("run_id") {
        // dawidd6/action-download-artifact names the run as
        // download-artifact does.
        chosen_by(run)
    } else if step.input("pr").is_some() {
        // The newest run of a pull request's head.
        Taint::PR_REF
    } else if let Some(commit) = step.input("commit") {
        // The runs of a commit, which may be a pull request's.
        chosen_by(commit) | Taint::PR_REF
    } else {
        // The newest run of a workflow (on a branch, which a fork's pull
        // request may also be named), which may be a pull request's.
        Taint::PR_REF | Taint::UNSEEN
    };
    Some((at, taint))
}

/// Whose branches a `dawidd6/action-download-artifact` step (v3 on) takes
/// the newest matching run of, when it leaves forks' runs out
/// (`allow_forks`, off by default) and is given no run id or pull request:
/// a run of such a repository's own branch is whoever can push a branch
/// there (a member's pull request, a member's push, a maintainer's
/// dispatch), never a fork's pull request. `None`: a run id or pull
/// request it is given, forks allowed, an older or unknown version, or
/// (for this repository) a workflow it does not name as a literal file of
/// this tree.
#[derive(Debug)]
enum BranchRuns {
    /// Another repository's: who can push there is not in these workflows.
    Other { repo: String },
    /// This repository's runs of the workflow with this index. Its own
    /// runs under a start that brings in a fork's bytes (a
    /// `pull_request_target`, a comment, a `workflow_run`) are this
    /// repository's too; `downloads::taint_branch_run_downloads` makes
    /// those an error.
    This { workflow: usize },
}

impl BranchRuns {
    /// The question the download depends on.
    fn question(&self, scope: &JobScope) -> String {
        match self {
            BranchRuns::Other { repo } => format!(
                "does everyone who can push a branch to `{repo}` count as trusted here? This step takes the artifacts of that repository's newest matching run, forks' runs left out"
            ),
            BranchRuns::This { workflow } => {
                let policy = if scope
                    .policy
                    .contracts
                    .same_repository_pull_requests_untrusted()
                {
                    "the policy counts members' pull requests as untrusted (the default)"
                } else {
                    "the policy trusts members' pull requests"
                };
                format!(
                    "does everyone who can push a branch to this repository count as trusted here? This step takes the artifacts of the newest matching run of `{}` on this repository's own branches, forks' runs left out, so only a member's branch or a maintainer's dispatch can have made them; {policy}",
                    scope.workflows[*workflow].name
                )
            }
        }
    }
}

fn branch_runs(step: &Step, scope: &JobScope, self_names: &[String]) -> Option<BranchRuns> {
    if !step.uses_action("dawidd6/action-download-artifact") {
        return None;
    }
    if action_major_version(step, scope)? < 3 || step.has_ambiguous_inputs() {
        return None;
    }
    if ["run_id", "pr"]
        .iter()
        .any(|input| step.input(input).is_some())
    {
        return None;
    }
    // `workflow_search` without a `workflow:` takes the newest run of any
    // workflow (with one, dawidd6 lists that workflow's runs as before).
    if step.input("workflow").is_none()
        && step
            .input("workflow_search")
            .is_some_and(|v| v.value.trim() != "false")
    {
        return None;
    }
    if step
        .input("allow_forks")
        .is_some_and(|v| v.value.trim() != "false")
    {
        return None;
    }
    let repo = match step.input("repo") {
        None => Repo::This,
        Some(repo) => repository_of(&scope.value(&repo.value), self_names),
    };
    match repo {
        // Another repository's runs of a commit are as unknown as its
        // newest run: who can push there is the question either way.
        Repo::Other if step.input("commit").is_none() => Some(BranchRuns::Other {
            repo: step.input("repo")?.value.trim().to_owned(),
        }),
        Repo::Other | Repo::Chosen(_) => None,
        Repo::This => {
            // dawidd6 lists the runs of the workflow file it is given (by
            // file name); without one, of the current run's workflow (the
            // top of the run, for a step of a reusable workflow).
            let workflow = match step.input("workflow") {
                None => scope.start.top,
                Some(named) => {
                    let named = named.value.trim();
                    if named.contains("${{") {
                        return None;
                    }
                    let file = named
                        .trim_start_matches("./")
                        .trim_start_matches(".github/workflows/");
                    scope.workflows.iter().position(|wf| wf.name == file)?
                }
            };
            // Only the events it may take the run of (`event:`, or all of
            // the workflow's triggers) decide who made that run.
            let events: Vec<&str> = match step.input("event") {
                Some(event) if !event.value.contains("${{") => vec![event.value.trim()],
                Some(_) => return None,
                None => scope.workflows[workflow]
                    .triggers
                    .iter()
                    .map(|t| t.event.value.as_str())
                    .collect(),
            };
            events
                .iter()
                .all(|e| MEMBER_STARTED_EVENTS.contains(e))
                .then_some(BranchRuns::This { workflow })
        }
    }
}

/// Events whose runs on this repository (a fork's pull request left out,
/// as a run of the fork's head) only someone who can push here, or
/// GitHub's clock, can start. A run under any other (`pull_request_target`,
/// a comment, `workflow_run`, an issue) is this repository's own run with
/// an outsider's bytes in reach, so forks' runs left out does not leave it out.
const MEMBER_STARTED_EVENTS: &[&str] = &[
    "push",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "merge_group",
    "workflow_dispatch",
    "repository_dispatch",
    "schedule",
    "release",
    "create",
    "delete",
];

/// A step's action major version: of its ref (`@v9`), or, pinned to a
/// commit, of the version comment on its `uses:` line (`@8a33… # v19`),
/// read only where that line of the job's workflow file holds the step's
/// `uses:` (not for a step of a local action, whose lines are elsewhere).
fn action_major_version(step: &Step, scope: &JobScope) -> Option<u32> {
    if let Some(major) = step.major_version() {
        return Some(major);
    }
    let uses = step.uses.as_ref()?;
    let (_, reference) = step.action()?;
    if reference.len() != 40 || !reference.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let line = scope.workflows[scope.at.workflow]
        .lines
        .get(uses.pos.line.checked_sub(1)?)?;
    let (code, comment) = line.split_once('#')?;
    if !code.contains(uses.value.as_str()) {
        return None;
    }
    let word = comment.split_whitespace().next()?;
    word.strip_prefix('v')?.split('.').next()?.parse().ok()
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
