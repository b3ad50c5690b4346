//! This run's artifacts as pull-request bytes: a job that downloads what an
//! untrusted-code job of the same run uploaded runs those bytes unless it
//! provably handles them as data.
//!
//! Owns the same-run taint. Must not decide what a step runs beyond asking
//! `code.rs`.

use std::collections::{BTreeMap, BTreeSet};

use super::code::{other_run_download, posts_only, runs_code};
use super::{Exposure, JobInfo, JobRef, Level, PRIVILEGED_EVENTS, Start};
use crate::contracts::commands;
use crate::contracts::shell::{Script, Word};
use crate::contracts::workflow::{Scalar, Step, Workflow};

/// A job in a privileged run that downloads this run's artifacts handles
/// what any job of the run uploaded; when one of those jobs runs untrusted
/// code, the downloader does too ("build in one job, cache in the next").
/// A run is a workflow with its own triggers and every reusable workflow it
/// calls, transitively; a callee shared by two workflows is in both runs.
pub(super) fn taint_same_run_downloads(
    workflows: &[Workflow],
    callees: &BTreeMap<JobRef, usize>,
    jobs: &mut [JobInfo],
) {
    let runs = runs_of(workflows, callees);
    // The most certain untrusted-code job of each run uploads.
    let mut uploader: BTreeMap<usize, (Level, String, BTreeSet<String>, Vec<Start>)> =
        BTreeMap::new();
    for info in jobs.iter().filter(|info| info.is_untrusted()) {
        let wf = &workflows[info.at.workflow];
        let who: BTreeSet<String> = info
            .exposures
            .iter()
            .filter(|e| e.level == info.level())
            .flat_map(|e| e.who.iter().cloned())
            .collect();
        let starts: Vec<Start> = info
            .exposures
            .iter()
            .filter(|e| e.level == info.level())
            .flat_map(|e| e.starts.iter().cloned())
            .collect();
        for run in &runs[info.at.workflow] {
            let name = format!("`{}` of {}", wf.jobs[info.at.job].id.value, wf.name);
            let entry = uploader
                .entry(*run)
                .or_insert_with(|| (info.level(), name.clone(), who.clone(), starts.clone()));
            if info.level() < entry.0 {
                *entry = (info.level(), name, who.clone(), starts.clone());
            }
        }
    }
    for info in jobs.iter_mut().filter(|info| !info.is_untrusted()) {
        let privileged: Vec<&String> = info
            .triggers
            .iter()
            .filter(|t| PRIVILEGED_EVENTS.contains(&t.as_str()))
            .collect();
        let source = runs[info.at.workflow]
            .iter()
            .filter_map(|run| uploader.get(run))
            .min_by_key(|(level, _, _, _)| *level);
        let Some((level, source, who, starts)) = source.filter(|_| !privileged.is_empty()) else {
            continue;
        };
        let wf = &workflows[info.at.workflow];
        let job = &wf.jobs[info.at.job];
        // The workflow's and the job's `env:` and default directories hold
        // for every step.
        let outer_env: Vec<&(Scalar, Scalar)> = wf.env.iter().chain(job.env.iter()).collect();
        let outer_dirs: Vec<&str> = [
            &wf.default_working_directory,
            &job.default_working_directory,
        ]
        .into_iter()
        .flatten()
        .map(|d| d.value.as_str())
        .collect();
        let download = job.steps.iter().enumerate().find_map(|(index, step)| {
            let same_run =
                step.uses_action("actions/download-artifact") && other_run_download(step).is_none();
            (same_run && !same_run_download_is_data(&job.steps, index, &outer_env, &outer_dirs))
                .then_some(step)
        });
        if let Some(step) = download {
            info.exposures.push(Exposure {
                pos: step.uses.as_ref().map_or(step.pos, |u| u.pos),
                what: format!(
                    "downloads artifacts of this run, which the untrusted-code job {source} can upload"
                ),
                level: *level,
                events: privileged.iter().map(|e| (*e).clone()).collect(),
                who: who.clone(),
                // The downloader's own starts in the runs the uploader is in.
                starts: info
                    .starts
                    .iter()
                    .filter(|s| starts.iter().any(|u| u.top == s.top))
                    .cloned()
                    .collect(),
                artifacts_of: None,
            });
            info.lifecycle = false;
        }
    }
}

/// The runs (by their top-level workflow) each workflow's jobs take part
/// in: a workflow with its own triggers is its own run, and a reusable
/// workflow is in every run of its callers, transitively.
fn runs_of(workflows: &[Workflow], callees: &BTreeMap<JobRef, usize>) -> Vec<BTreeSet<usize>> {
    let mut runs: Vec<BTreeSet<usize>> = workflows
        .iter()
        .enumerate()
        .map(|(w, wf)| {
            let own = wf.events().any(|e| e != "workflow_call");
            if own {
                BTreeSet::from([w])
            } else {
                BTreeSet::new()
            }
        })
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for (caller, callee) in callees {
            let inherited = runs[caller.workflow].clone();
            let before = runs[*callee].len();
            runs[*callee].extend(inherited);
            changed |= runs[*callee].len() != before;
        }
    }
    runs
}

/// A download of a workflow's newest run on this repository's own branches
/// (forks' runs left out: `code::BranchRuns::This`) is a warning while
/// only members and maintainers can make such runs. That workflow's own
/// runs are this repository's too when its triggers bring a fork's bytes
/// into a run of the repository (`pull_request_target`, a comment, a
/// `workflow_run`): where one of its jobs runs pull-request code as an
/// error there, the download hands those bytes on, and is an error too.
/// Repeated until nothing changes, so a chain of such downloads is followed.
pub(super) fn taint_branch_run_downloads(
    workflows: &[Workflow],
    callees: &BTreeMap<JobRef, usize>,
    jobs: &mut [JobInfo],
) {
    let runs = runs_of(workflows, callees);
    // Bounded: each round raises at least one exposure to an error.
    for _ in 0..jobs.len().max(1) {
        // Per top-level workflow: an error-level untrusted-code job of its
        // run, under a start of the workflow's own triggers.
        let mut builds_pr_code: BTreeMap<usize, String> = BTreeMap::new();
        for info in jobs.iter() {
            for e in info.exposures.iter().filter(|e| e.level == Level::Error) {
                for start in &e.starts {
                    if runs[info.at.workflow].contains(&start.top) {
                        builds_pr_code.entry(start.top).or_insert_with(|| {
                            format!(
                                "`{}` of {} under `{}`",
                                workflows[info.at.workflow].jobs[info.at.job].id.value,
                                workflows[info.at.workflow].name,
                                start.event
                            )
                        });
                    }
                }
            }
        }
        let mut changed = false;
        for info in jobs.iter_mut() {
            for e in info.exposures.iter_mut() {
                let Some(workflow) = e.artifacts_of else {
                    continue;
                };
                if e.level == Level::Error {
                    continue;
                }
                let Some(source) = builds_pr_code.get(&workflow) else {
                    continue;
                };
                let what = e
                    .what
                    .rfind(" (depends on: ")
                    .map_or(e.what.as_str(), |at| &e.what[..at]);
                e.what = format!(
                    "{what}, the artifacts of a run of `{}` on this repository, whose job {source} runs pull-request code (leaving forks' runs out does not leave out that run)",
                    workflows[workflow].name
                );
                e.level = Level::Error;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// True when the job provably handles the artifacts of this run that step
/// `index` downloads as data only: it unpacks them into a directory of their
/// own (a literal `path:` that is not the workspace root, where later tools
/// would read a planted `.git/config`, `.cargo/config.toml` or `.npmrc`),
/// no later step runs code (`runs_code`: a build, an interpreter, a program
/// given by path, a local action, a cache save), and no later step works
/// inside that directory (`working-directory:`, `cd`, `git -C`, directly or
/// through a variable set to it) or points a loading variable at it
/// (`PATH`, `PYTHONPATH`, `GIT_DIR`: `commands::loads_through`). A rebased tree that
/// is only verified and pushed with git, or a report that is only posted,
/// is data; anything the check cannot show is not.
pub(super) fn same_run_download_is_data(
    steps: &[Step],
    index: usize,
    outer_env: &[&(Scalar, Scalar)],
    outer_dirs: &[&str],
) -> bool {
    let Some(path) = steps[index].input("path") else {
        return false;
    };
    let path = path.value.trim().trim_end_matches('/');
    // The only expressions whose value is known: the runner's temporary
    // directory and the workspace.
    let mut rest = path;
    for prefix in [
        "${{ runner.temp }}",
        "${{runner.temp}}",
        "$RUNNER_TEMP",
        "${RUNNER_TEMP}",
        "${{ github.workspace }}",
        "${{github.workspace}}",
        "$GITHUB_WORKSPACE",
        "${GITHUB_WORKSPACE}",
    ] {
        if let Some(after) = rest.strip_prefix(prefix) {
            if prefix.to_ascii_lowercase().contains("workspace")
                && after.trim_matches('/').is_empty()
            {
                return false;
            }
            rest = after;
            break;
        }
    }
    if rest.contains('$')
        || matches!(rest.trim_start_matches("./"), "" | ".")
        || rest.contains("..")
    {
        return false;
    }
    let later = &steps[index + 1..];
    if runs_code(later, false).is_some() {
        return false;
    }
    // The directory's own name, as later steps would spell it.
    let name = rest.trim_matches('/').rsplit('/').next().unwrap_or(rest);
    // Every variable that may hold the directory: set to a text naming it
    // (`OUT: ${{ runner.temp }}/out`) in the workflow's, the job's or a
    // later step's `env:`, or by a later script (`D="$RUNNER_TEMP/out"`),
    // or to another such variable, transitively.
    let scripts: Vec<std::rc::Rc<Script>> = later
        .iter()
        .filter_map(|step| step.run.as_ref())
        .map(|run| Script::cached(&run.value))
        .collect();
    let env: Vec<(String, String)> = outer_env
        .iter()
        .copied()
        .chain(later.iter().flat_map(|step| step.env.iter()))
        .map(|(var, value)| (var.value.clone(), value.value.clone()))
        .chain(scripts.iter().flat_map(|script| {
            script
                .assignments()
                .into_iter()
                .map(|(_, a)| (a.name, a.value.text()))
                .collect::<Vec<_>>()
        }))
        .collect();
    let mut aliases: Vec<String> = Vec::new();
    loop {
        let found: Vec<String> = env
            .iter()
            .filter(|(var, value)| !aliases.contains(var) && names_dir(value, name, &aliases))
            .map(|(var, _)| var.clone())
            .collect();
        if found.is_empty() {
            break;
        }
        aliases.extend(found);
        aliases.sort();
        aliases.dedup();
    }
    let names = |text: &str| names_dir(text, name, &aliases);
    let names_it = |word: &Word| names(&word.text());
    // Working inside it (git reads a `.git/config` there), putting it on
    // the search path or into the environment, or handing it to an action
    // that may build it (a Dockerfile's `RUN`) makes its bytes run; so
    // does a variable that programs load code or configuration through
    // (`PATH`, `PYTHONPATH`, `GIT_DIR`, …) pointed at it, and copying its
    // bytes out (`cp -r out/. .` plants a `.git/config` in the workspace).
    if outer_dirs.iter().any(|dir| names(dir))
        || env
            .iter()
            .any(|(var, value)| commands::loads_through(var) && names(value))
    {
        return false;
    }
    let works_inside = later.iter().any(|step| {
        let third_party = !posts_only(step)
            && step.action().is_some_and(|(action, _)| {
                let owner = action.split('/').next().unwrap_or("");
                !owner.eq_ignore_ascii_case("actions") && !owner.eq_ignore_ascii_case("github")
            });
        step.working_directory
            .as_ref()
            .is_some_and(|dir| names(&dir.value))
            || third_party && step.with.iter().any(|(_, value)| names(&value.value))
            || step.run.as_ref().is_some_and(|run| {
                let script = Script::cached(&run.value);
                script.commands().any(|command| {
                    let program = command.program().unwrap_or_default();
                    let enters = matches!(program.as_str(), "cd" | "pushd")
                        && command.args().iter().any(names_it);
                    // `git -C dir`, `--git-dir=dir`, `--work-tree dir`,
                    // `-c include.path=dir/x`, `git config … dir/x`.
                    let args = &command.words;
                    let points = args.windows(2).any(|pair| {
                        matches!(
                            pair[0].text().as_str(),
                            "-C" | "--git-dir" | "--work-tree" | "-c" | "--exec-path"
                        ) && names_it(&pair[1])
                    }) || args.iter().any(|w| {
                        let text = w.text();
                        text.starts_with("--") && text.contains('=') && names(&text)
                    }) || program == "git"
                        && command.args().iter().any(|w| w.text() == "config")
                        && command.args().iter().any(names_it);
                    let exports = (command.writes_to("GITHUB_PATH")
                        || command.writes_to("GITHUB_ENV"))
                        && run.value.get(command.span.clone()).is_some_and(&names);
                    // Any other program handed the directory may copy,
                    // move, link or unpack its bytes where they run.
                    let moves = !DATA_READERS.contains(&program.as_str())
                        && command.args().iter().any(names_it);
                    // Its bytes written into git's or the shell's
                    // configuration.
                    let configures = command.args().iter().any(names_it)
                        && command.redirects.iter().any(|r| {
                            let target = r.target.text();
                            target.contains(".git")
                                || target.starts_with('~')
                                || target.starts_with("$HOME")
                        });
                    enters || points || exports || moves || configures
                })
            })
    });
    !works_inside
}

/// Programs that only read, hash, post or delete the files they are
/// given: handed an unpacked directory's files, they leave its bytes data.
const DATA_READERS: &[&str] = &[
    "git",
    "gh",
    "cat",
    "head",
    "tail",
    "jq",
    "yq",
    "grep",
    "diff",
    "cmp",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "b3sum",
    "wc",
    "ls",
    "test",
    "[",
    "[[",
    "echo",
    "printf",
    "stat",
    "file",
    "du",
    "rm",
    "base64",
    "sort",
    "uniq",
    "curl",
];

/// Whether `text` names the directory `name`, or expands a variable that
/// may hold it (`$OUT`, `${OUT}`, `${{ env.OUT }}`).
fn names_dir(text: &str, name: &str, aliases: &[String]) -> bool {
    text.contains(name)
        || aliases.iter().any(|a| {
            [format!("${a}"), format!("${{{a}}}"), format!("env.{a}")]
                .iter()
                .any(|form| {
                    text.match_indices(form.as_str()).any(|(at, _)| {
                        !text[at + form.len()..]
                            .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                    })
                })
        })
}
