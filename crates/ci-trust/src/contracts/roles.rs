//! What every job is: publisher, untrusted-code job, pod job, lifecycle job
//! or isolated writer, inferred from the workflows themselves.
//!
//! A job's role depends on more than its own file: a job that calls a
//! reusable workflow (`uses: ./.github/workflows/x.yml`) carries its
//! caller's triggers, token permissions and publisher status into the
//! callee's jobs, so roles are computed over the whole workflow set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Result, bail};

use super::expr;
use super::workflow::{Job, Permissions, Pos, Scalar, Step, Workflow};
use crate::policy::Policy;

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

#[derive(Debug)]
pub struct JobInfo {
    pub at: JobRef,
    /// The events that can start this job, through callers for reusable workflows.
    pub triggers: BTreeSet<String>,
    pub publisher: bool,
    /// Why this job runs code not from the default branch in a privileged
    /// scope; empty when it does not.
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
}

impl JobInfo {
    pub fn is_untrusted(&self) -> bool {
        !self.untrusted.is_empty()
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
}

/// The workflow set with every job's inferred role.
pub struct Model {
    pub workflows: Vec<Workflow>,
    pub jobs: Vec<JobInfo>,
    index: BTreeMap<JobRef, usize>,
}

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
                let Some(&callee) = by_name.get(name) else {
                    bail!(
                        "{}:{}:{}: job `{}` calls {}, which is not in .github/workflows",
                        wf.path,
                        uses.pos.line,
                        uses.pos.column,
                        job.id.value,
                        uses.value
                    );
                };
                let at = JobRef {
                    workflow: w,
                    job: j,
                };
                callers.entry(callee).or_default().push(at);
                callees.insert(at, callee);
            }
        }

        let triggers: Vec<BTreeSet<String>> = (0..workflows.len())
            .map(|w| effective_triggers(&workflows, &callers, w, &mut BTreeSet::new()))
            .collect();
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
                let job_triggers = job.if_cond.as_ref().map_or_else(
                    || triggers[w].clone(),
                    |c| expr::guard_events(&c.value, &triggers[w]),
                );
                let runner = runs_on_pod(&workflows, &callers, at, policy);
                let pod = runner.as_ref().map(|(why, _, _)| why.clone());
                let ephemeral = runner.as_ref().is_some_and(|(_, e, _)| *e);
                let passed_labels = runner.map(|(_, _, labels)| labels).unwrap_or_default();
                let privileged: Vec<&String> = job_triggers
                    .iter()
                    .filter(|t| PRIVILEGED_EVENTS.contains(&t.as_str()))
                    .collect();
                let publisher = publisher_wf[w];
                let mut untrusted = Vec::new();
                // A pod alone is not foreign code: it runs what the job
                // checks out or downloads, judged below and by the same-run
                // download taint. (On `pull_request` the persistent-runner
                // rule covers the runner's state.)
                if !privileged.is_empty() {
                    let privileged_set: BTreeSet<String> =
                        privileged.iter().map(|e| (*e).clone()).collect();
                    // Inputs are maintainer-chosen in a dispatch; a callee's
                    // come from callers this job cannot see all of.
                    let inputs_trusted = inputs_are_maintainers(&workflows, &callers, &triggers, w);
                    let caller_inputs = caller_inputs(&workflows, &callers, w);
                    let judge = Judge {
                        policy,
                        root,
                        events: &privileged_set,
                        inputs_trusted,
                        static_matrix: !job.dynamic_matrix,
                        env_values: env_values(wf, job),
                        callers: &caller_inputs,
                        call_inputs: &wf.call_inputs,
                        tainted: tainted_env(wf, job, &privileged_set, inputs_trusted),
                    };
                    // What every step of the job starts with: the default
                    // working directory and the job's and workflow's env.
                    let surroundings: Vec<&str> = job
                        .default_working_directory
                        .iter()
                        .chain(&wf.default_working_directory)
                        .map(|d| d.value.as_str())
                        .chain(job.env.iter().chain(&wf.env).map(|(_, v)| v.value.as_str()))
                        .collect();
                    untrusted.extend(other_code(job, &judge, &privileged, &surroundings)?);
                    // A remote reusable workflow's jobs are not in this
                    // repository. It runs foreign code only with evidence: a
                    // pull-request ref or SHA flows into its inputs, or an
                    // event that carries pull-request content starts it.
                    let remote = job
                        .uses
                        .as_ref()
                        .filter(|u| super::workflow::local_uses(&u.value).is_none());
                    if let Some(uses) = remote.filter(|_| !publisher) {
                        // The events whose run is a pull request's own
                        // (`workflow_run` is another run's: what the callee
                        // takes from it must flow in through `with:`).
                        let carrying: Vec<&String> = privileged
                            .iter()
                            .copied()
                            .filter(|e| {
                                matches!(e.as_str(), "pull_request_target" | "issue_comment")
                            })
                            .collect();
                        let input = job.with.iter().find(|(_, v)| {
                            expr::carries_pr_content(&v.value, &privileged_set)
                                || !inputs_trusted && v.value.contains("inputs.")
                        });
                        let evidence = match (input, carrying.is_empty()) {
                            (Some((name, value)), _) => Some(format!(
                                "passes `{}: {}`, which a pull request controls,",
                                name.value, value.value
                            )),
                            (None, false) => Some(format!(
                                "is started by {}, whose payload a pull request controls,",
                                events_text(&carrying)
                            )),
                            (None, true) => None,
                        };
                        if let Some(evidence) = evidence {
                            untrusted.push(Why {
                                pos: uses.pos,
                                text: format!(
                                    "calls the reusable workflow `{}`, whose jobs this check cannot see, and {evidence} in a workflow started by {}",
                                    uses.value,
                                    events_text(&privileged)
                                ),
                            });
                        }
                    }
                }
                let permissions = effective_permissions(&workflows, &callers, at, 0);
                let lifecycle = !publisher
                    && untrusted.is_empty()
                    && permissions.iter().any(|p| p.writes("actions"));
                index.insert(at, jobs.len());
                jobs.push(JobInfo {
                    at,
                    triggers: job_triggers,
                    publisher,
                    untrusted,
                    pod,
                    ephemeral,
                    passed_labels,
                    lifecycle,
                    permissions,
                    callee: callees.get(&at).copied(),
                });
            }
        }
        taint_same_run_downloads(&workflows, &callees, &mut jobs);
        Ok(Model {
            workflows,
            jobs,
            index,
        })
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

/// A job in a privileged run that downloads this run's artifacts handles
/// what any job of the run uploaded; when one of those jobs runs untrusted
/// code, the downloader does too ("build in one job, cache in the next").
/// A run is a workflow with its own triggers and every reusable workflow it
/// calls, transitively; a callee shared by two workflows is in both runs.
fn taint_same_run_downloads(
    workflows: &[Workflow],
    callees: &BTreeMap<JobRef, usize>,
    jobs: &mut [JobInfo],
) {
    // The runs (by their top-level workflow) each workflow's jobs take part in.
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
    let mut uploader: BTreeMap<usize, String> = BTreeMap::new();
    for info in jobs.iter().filter(|info| info.is_untrusted()) {
        let wf = &workflows[info.at.workflow];
        for run in &runs[info.at.workflow] {
            uploader
                .entry(*run)
                .or_insert_with(|| format!("`{}` of {}", wf.jobs[info.at.job].id.value, wf.name));
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
            .find_map(|run| uploader.get(run));
        let Some(source) = source.filter(|_| !privileged.is_empty()) else {
            continue;
        };
        let job = &workflows[info.at.workflow].jobs[info.at.job];
        let download = job.steps.iter().enumerate().find_map(|(index, step)| {
            let same_run =
                step.uses_action("actions/download-artifact") && other_run_download(step).is_none();
            (same_run && !same_run_download_is_data(&job.steps, index)).then_some(step)
        });
        if let Some(step) = download {
            info.untrusted.push(Why {
                pos: step.uses.as_ref().map_or(step.pos, |u| u.pos),
                text: format!(
                    "downloads artifacts of this run, which the untrusted-code job {source} can upload, in a workflow started by {}",
                    events_text(&privileged)
                ),
            });
            info.lifecycle = false;
        }
    }
}

/// True when the job provably handles the artifacts of this run that step
/// `index` downloads as data only: it unpacks them into a directory of their
/// own (a literal `path:` that is not the workspace root, where later tools
/// would read a planted `.git/config`, `.cargo/config.toml` or `.npmrc`),
/// no later step runs code (`runs_code`: a build, an interpreter, a program
/// given by path, a local action, a cache save), and no later step works
/// inside that directory (`working-directory:`, `cd`). A rebased tree that
/// is only verified and pushed with git, or a report that is only posted,
/// is data; anything the check cannot show is not.
fn same_run_download_is_data(steps: &[Step], index: usize) -> bool {
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
    // Working inside it (git reads a `.git/config` there), putting it on
    // the search path or into the environment, or handing it to an action
    // that may build it (a Dockerfile's `RUN`) makes its bytes run.
    const INSIDE: &[&str] = &[
        "cd ",
        "pushd ",
        "-C ",
        "--git-dir",
        "--work-tree",
        "GITHUB_PATH",
        "GITHUB_ENV",
    ];
    let works_inside = later.iter().any(|step| {
        let third_party = !posts_only(step)
            && step.action().is_some_and(|(action, _)| {
                let owner = action.split('/').next().unwrap_or("");
                !owner.eq_ignore_ascii_case("actions") && !owner.eq_ignore_ascii_case("github")
            });
        step.working_directory
            .as_ref()
            .is_some_and(|dir| dir.value.contains(name))
            || step.env.iter().any(|(_, value)| value.value.contains(name))
            || third_party
                && step
                    .with
                    .iter()
                    .any(|(_, value)| value.value.contains(name))
            || step.run.as_ref().is_some_and(|run| {
                run.value.lines().any(|line| {
                    line.contains(name) && INSIDE.iter().any(|form| line.contains(form))
                })
            })
    });
    !works_inside
}

fn effective_triggers(
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    w: usize,
    seen: &mut BTreeSet<usize>,
) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = workflows[w]
        .events()
        .filter(|e| *e != "workflow_call")
        .map(str::to_owned)
        .collect();
    if !seen.insert(w) {
        return set;
    }
    for caller in callers.get(&w).into_iter().flatten() {
        let events = effective_triggers(workflows, callers, caller.workflow, seen);
        // The calling job's own `if:` narrows what reaches the callee.
        let calling = &workflows[caller.workflow].jobs[caller.job];
        set.extend(match &calling.if_cond {
            Some(cond) => expr::guard_events(&cond.value, &events),
            None => events,
        });
    }
    set
}

fn is_publisher(
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

/// GitHub-hosted runner labels; everything else (self-hosted, custom
/// labels, unresolved expressions, runner groups) is treated as a pod.
///
/// The standard images are matched exactly (`ubuntu-latest`, `ubuntu-24.04`,
/// `ubuntu-24.04-arm`, `windows-2022`, `macos-15-xlarge`, …), not by prefix:
/// `runs-on: ubuntu-gpu` is a custom label that a self-hosted runner may
/// carry. Labels compare case-insensitively, as GitHub compares them.
pub fn is_hosted(label: &str, policy: &Policy) -> bool {
    is_hosted_label(label, policy)
}

fn is_hosted_label(label: &str, policy: &Policy) -> bool {
    let label = label.trim().to_ascii_lowercase();
    is_standard_hosted_label(&label)
        || is_larger_hosted_label(&label)
        || is_third_party_hosted_label(&label)
        || policy
            .contracts
            .hosted_labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&label))
}

/// GitHub's larger runners as their owners usually name them after the
/// image: `ubuntu-latest-16-cores`, `ubuntu-22.04-8core`, `windows-2022-64core`,
/// `ubuntu-24.04-arm64-4-core`, `macos-14-arm64`.
fn is_larger_hosted_label(label: &str) -> bool {
    let mut parts: Vec<&str> = label.split('-').collect();
    if parts.len() < 3 {
        return false;
    }
    let cores = |p: &str| {
        p.strip_suffix("cores")
            .or_else(|| p.strip_suffix("core"))
            .is_some_and(|n| n.is_empty() || is_number(n))
    };
    // A size (`16core`, `16-cores`, `4-core`), then optionally `arm64`/`arm`.
    let mut sized = false;
    match parts.as_slice() {
        [.., n, c] if (*c == "cores" || *c == "core") && is_number(n) => {
            parts.truncate(parts.len() - 2);
            sized = true;
        }
        [.., c] if cores(c) => {
            parts.pop();
            sized = true;
        }
        _ => {}
    }
    if matches!(parts.last(), Some(&"arm64" | &"arm")) {
        parts.pop();
        sized = true;
    }
    sized && parts.len() == 2 && is_standard_hosted_label(&parts.join("-"))
}

/// Hosted-runner services whose runners are fresh virtual machines per job
/// (so not persistent pods) and the label forms they document. The policy
/// adds others with `contracts.hosted-labels`.
pub const THIRD_PARTY_HOSTED: &[(&str, &str)] = &[
    ("depot", "depot-"),
    ("Namespace", "namespace-profile-"),
    ("Namespace", "nscloud-"),
    ("Blacksmith", "blacksmith-"),
    ("WarpBuild", "warp-"),
    ("RunsOn", "runs-on="),
    ("RunsOn", "runs-on/"),
    ("Ubicloud", "ubicloud-"),
    ("BuildJet", "buildjet-"),
    ("Cirun", "cirun-"),
    ("Actuated", "actuated-"),
    ("CodSpeed", "codspeed-"),
    ("Blaze", "blaze/"),
];

fn is_third_party_hosted_label(label: &str) -> bool {
    // Larger GitHub runners named `github-<image>-…` by their owners.
    if let Some(rest) = label.strip_prefix("github-") {
        let image: Vec<&str> = rest.splitn(3, '-').take(2).collect();
        if image.len() == 2 && is_standard_hosted_label(&image.join("-")) {
            return true;
        }
    }
    THIRD_PARTY_HOSTED.iter().any(|(_, prefix)| {
        label.starts_with(prefix) || label == prefix.trim_end_matches(['-', '=', '/'])
    })
}

fn is_standard_hosted_label(label: &str) -> bool {
    let version = |v: &str, dotted: bool| {
        v == "latest"
            || match v.split_once('.') {
                Some((major, minor)) => dotted && is_number(major) && is_number(minor),
                None => !dotted && is_number(v),
            }
    };
    let (image, rest) = label.split_once('-').unwrap_or((label, ""));
    let (v, suffix) = match rest.split_once('-') {
        Some((v, suffix)) => (v, Some(suffix)),
        None => (rest, None),
    };
    match image {
        "ubuntu" => rest == "slim" || version(v, true) && matches!(suffix, None | Some("arm")),
        "windows" => rest == "11-arm" || version(v, false) && suffix.is_none(),
        "macos" => {
            version(v, false) && matches!(suffix, None | Some("large" | "xlarge" | "xl" | "intel"))
        }
        _ => false,
    }
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// True for a label that names one runner made for this run: an output of
/// an earlier job (`needs.create-pod.outputs.label`) or one built from the
/// run id. Such a runner is registered and removed around the run.
fn is_per_run_label(label: &str) -> bool {
    expr::expressions(label)
        .iter()
        .any(|(_, body)| body.starts_with("needs.") || body.contains("github.run_id"))
}

/// Whether a job runs on a self-hosted pod, why, whether that pod is
/// known to be ephemeral, and, for a `${{ inputs.NAME }}` runner of a
/// reusable workflow (resolved from its callers' `with:`, each caller's
/// label), the literal labels passed.
fn runs_on_pod(
    workflows: &[Workflow],
    callers: &BTreeMap<usize, Vec<JobRef>>,
    at: JobRef,
    policy: &Policy,
) -> Option<(Why, bool, Vec<String>)> {
    let job = &workflows[at.workflow].jobs[at.job];
    let ephemeral_label = |label: &str| {
        is_per_run_label(label)
            || policy
                .contracts
                .ephemeral_labels
                .iter()
                .any(|l| l.eq_ignore_ascii_case(label.trim()))
    };
    if let Some(unresolved) = &job.runs_on_unresolved {
        let input = expr::sole_expression(&unresolved.value)
            .and_then(|body| body.strip_prefix("inputs."))
            .filter(|name| {
                name.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            });
        let passed: Vec<(String, String)> = input
            .map(|name| {
                callers
                    .get(&at.workflow)
                    .into_iter()
                    .flatten()
                    .filter_map(|caller| {
                        let calling = &workflows[caller.workflow].jobs[caller.job];
                        super::workflow::lookup(&calling.with, name).map(|v| {
                            (
                                v.value.clone(),
                                format!(
                                    "`{}` of {}",
                                    calling.id.value, workflows[caller.workflow].name
                                ),
                            )
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let all_callers = callers.get(&at.workflow).map_or(0, Vec::len);
        if input.is_some() && !passed.is_empty() && passed.len() == all_callers {
            let literal: Vec<String> = passed
                .iter()
                .map(|(label, _)| label.clone())
                .filter(|label| !label.contains("${{"))
                .collect();
            let pod = passed
                .iter()
                .find(|(label, _)| label.contains("${{") || !is_hosted_label(label, policy));
            return pod.map(|(label, caller)| {
                (
                    Why {
                        pos: unresolved.pos,
                        text: format!(
                            "runs on the runner its caller {caller} passes as `{}`: `{label}`, which may be a self-hosted runner",
                            unresolved.value
                        ),
                    },
                    ephemeral_label(label),
                    literal,
                )
            });
        }
        return Some((
            Why {
                pos: unresolved.pos,
                text: format!(
                    "runs on `{}`, which may be a self-hosted runner",
                    unresolved.value
                ),
            },
            ephemeral_label(&unresolved.value),
            Vec::new(),
        ));
    }
    let pod = job
        .runs_on
        .iter()
        .find(|label| !is_hosted_label(&label.value, policy))?;
    let ephemeral = job.runs_on.iter().any(|l| ephemeral_label(&l.value));
    Some((
        Why {
            pos: pod.pos,
            text: format!("runs on the self-hosted runner label `{}`", pod.value),
        },
        ephemeral,
        Vec::new(),
    ))
}

/// True when a workflow's `inputs.*` are chosen by maintainers: it is not
/// a reusable workflow (a dispatch's inputs need write access), or every
/// caller is in this repository and passes nothing that carries
/// pull-request content (or its own callee-chosen inputs) in its `with:`.
fn inputs_are_maintainers(
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
type EnvValue = (String, String, Vec<(String, String)>);

/// The values `${{ env.NAME }}` can have in a job (see [`Judge`]).
fn env_values(wf: &Workflow, job: &Job) -> Vec<EnvValue> {
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
        for line in run.value.lines().filter(|l| l.contains("GITHUB_ENV")) {
            let text = line.trim().trim_start_matches("echo").trim();
            let text = text.trim_start_matches(['"', '\'']);
            if let Some((name, rest)) = text.split_once('=') {
                let value = rest.split(['"', '\'']).next().unwrap_or("");
                let value = value.split(" >>").next().unwrap_or(value).trim();
                out.push((name.trim().to_owned(), value.to_owned(), pairs(&step.env)));
            }
        }
    }
    out
}

/// A `${{ env.NAME }}` ref is trusted when every value the job gives NAME
/// is: a literal without `pull/`, `$GITHUB_REF`/`$GITHUB_SHA`, or shell
/// variables whose step `env:` values are trusted refs themselves.
fn env_ref_trusted(name: &str, judge: &Judge) -> bool {
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
struct CallerInputs {
    with: Vec<(String, String)>,
    inputs_trusted: bool,
    static_matrix: bool,
}

fn caller_inputs(
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
fn substitute_inputs(
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
struct Judge<'a> {
    policy: &'a Policy,
    root: &'a Path,
    events: &'a BTreeSet<String>,
    inputs_trusted: bool,
    static_matrix: bool,
    /// `${{ env.NAME }}` values the job can give a `ref:`: its `env:`
    /// entries and the `NAME=…` lines its scripts write to `$GITHUB_ENV`,
    /// with the step environment that expands them.
    env_values: Vec<EnvValue>,
    /// For a reusable workflow: what each caller passes.
    callers: &'a [CallerInputs],
    call_inputs: &'a [(String, Option<String>)],
    tainted: Vec<String>,
}

/// The environment variables (workflow, job, steps) whose value carries
/// pull-request content under `events`, or an input a caller chose.
fn tainted_env(
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

/// Why a job in a privileged workflow runs code that is not the default branch's.
fn other_code(
    job: &Job,
    judge: &Judge,
    privileged: &[&String],
    surroundings: &[&str],
) -> Result<Vec<Why>> {
    let events = events_text(privileged);
    let mut whys = Vec::new();
    for (index, step) in job.steps.iter().enumerate() {
        let mut budget = super::rules::LOCAL_ACTION_BUDGET;
        let found = step_other_code(step, judge, None, &mut budget)?;
        // Pull-request bytes in a working tree matter when something runs
        // them: a build, a program, an action other than GitHub's own, or a
        // cache save that hands them on. Checked out only to be read by git
        // (rebased, diffed, pushed), they are not code.
        let local = step
            .uses
            .as_ref()
            .is_some_and(|u| super::workflow::local_uses(&u.value).is_some());
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
    // Interpreters and tools that run project code (build tools are
    // `expr::builds_code`'s); a command given by path counts too.
    const RUNNERS: &[&str] = &[
        "bash", "sh", "zsh", "source", ".", "eval", "python", "python3", "node", "npm", "npx",
        "pip", "pip3", "chmod", "docker", "uv", "uvx", "pnpm", "yarn", "bun", "deno", "go", "mvn",
        "gradle", "dotnet", "ruby", "bundle", "rake", "perl", "php", "composer", "java", "pytest",
        "tox", "nox", "just", "bazel", "bazelisk", "nix", "poetry", "hatch", "maturin", "xargs",
        "env", "make", "cmake", "ninja", "meson",
    ];
    for step in later {
        if let Some(run) = &step.run {
            if let Some(line) = expr::builds_code(&run.value) {
                return Some(format!("builds (`{}`)", line.trim()));
            }
            // The commands (the first word of each `;`/`&&`/`|` segment,
            // after `sudo` and `VAR=value`): an interpreter, or a program
            // given by path (`scripts/ci/reap.sh`, `./bin/x`). Only what the
            // shell runs counts: quoted text (a URL, a message naming a
            // path), comments, here-document bodies and the argument lines
            // of a command continued with `\` are blanked first.
            let code = expr::shell_code(&run.value);
            let mut offset = 0;
            for line in code.split('\n') {
                let start = offset;
                offset += line.len() + 1;
                let runs = line
                    .split([';', '&', '|', '(', ')', '`'])
                    .filter_map(|segment| {
                        segment
                            .split_whitespace()
                            .find(|w| *w != "sudo" && *w != "exec" && !w.contains('='))
                    })
                    .any(|w| RUNNERS.contains(&w) || w.contains('/') && !w.starts_with('-'));
                if runs {
                    let original = run.value[start..].lines().next().unwrap_or("");
                    return Some(format!("runs `{}`", original.trim()));
                }
            }
        }
        if let Some(uses) = step
            .uses
            .as_ref()
            .filter(|u| super::workflow::local_uses(&u.value).is_some())
        {
            return Some(format!("runs the local action `{}`", uses.value));
        }
        if let Some((_, why)) = super::caches::cache_save(step) {
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
const POSTING_ACTIONS: &[&str] = &[
    "marocchino/sticky-pull-request-comment",
    "peter-evans/create-or-update-comment",
    "peter-evans/find-comment",
    "thollander/actions-comment-pull-request",
    "mshick/add-pr-comment",
];

fn posts_only(step: &Step) -> bool {
    POSTING_ACTIONS.iter().any(|name| step.uses_action(name))
}

/// The subdirectory an `actions/checkout` step checks out into (`path:
/// pr`), when it is a literal one and not the workspace itself.
fn checkout_subdir(step: &Step) -> Option<String> {
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
fn mentions_dir(text: &str, dir: &str, names: &[String]) -> bool {
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
fn runs_code_from(later: &[Step], dir: &str, surroundings: &[&str]) -> Option<String> {
    const READ_ONLY: &[&str] = &[
        "git",
        "diff",
        "cmp",
        "wc",
        "cat",
        "head",
        "tail",
        "grep",
        "rg",
        "ls",
        "echo",
        "printf",
        "jq",
        "yq",
        "sha256sum",
        "sha1sum",
        "md5sum",
        "du",
        "stat",
        "file",
        "cloc",
        "tokei",
        "scc",
        "test",
        "[",
        "[[",
        "true",
        "exit",
        "rm",
        "mkdir",
        "touch",
        "gh",
    ];
    const INTERPRETERS: &[&str] = &[
        "python", "python3", "node", "ruby", "perl", "bash", "sh", "zsh", "php",
    ];
    const SEARCHES: &[&str] = &[
        "pytest",
        "py.test",
        "tox",
        "nox",
        "pre-commit",
        "go",
        "cargo",
        "bazel",
        "bazelisk",
        "find",
        "xargs",
        "eval",
        "source",
        ".",
    ];
    // The variables that stand for the directory.
    let mut names: Vec<String> = Vec::new();
    for step in later {
        for (name, value) in &step.env {
            if mentions_dir(&value.value, dir, &[]) {
                names.push(name.value.clone());
            }
        }
        for line in step.run.iter().flat_map(|r| r.value.lines()) {
            let line = line.trim().trim_start_matches("export ");
            if let Some((name, value)) = line.split_once('=') {
                let ident =
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if ident && mentions_dir(value, dir, &[]) {
                    names.push(name.to_owned());
                }
            }
        }
    }
    // A job whose default working directory or environment points into it
    // works inside it in every step.
    let everywhere = surroundings.iter().any(|s| mentions_dir(s, dir, &[]));
    for step in later {
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
        if let Some(run) = &step.run {
            let code = expr::shell_code(&run.value);
            let mut offset = 0;
            for line in code.split('\n') {
                let start = offset;
                offset += line.len() + 1;
                let original = &run.value[start..start + line.len()];
                let segments: Vec<&str> = original.split([';', '&', '|']).collect();
                let commands: Vec<&str> = line
                    .split([';', '&', '|', '(', ')', '`'])
                    .filter_map(|segment| {
                        segment
                            .split_whitespace()
                            .find(|w| *w != "sudo" && *w != "exec" && !w.contains('='))
                    })
                    .collect();
                // Put on the search path or into the environment of later
                // steps, it runs wherever they do.
                let exported = (original.contains("GITHUB_PATH")
                    || original.contains("GITHUB_ENV"))
                    && mentions_dir(original, dir, &names);
                let runs_from = exported
                    || commands.iter().any(|command| {
                        if SEARCHES.contains(command) || mentions_dir(command, dir, &names) {
                            return true;
                        }
                        if READ_ONLY.contains(command) {
                            return false;
                        }
                        // The segment of the original line this command heads.
                        let segment = segments
                            .iter()
                            .find(|s| s.split_whitespace().any(|w| w == *command))
                            .copied()
                            .unwrap_or(original);
                        // `PYTHONPATH=pr python x.py`: an assignment into it.
                        let assigns = segment
                            .split_whitespace()
                            .take_while(|w| w != command)
                            .any(|w| w.contains('=') && mentions_dir(w, dir, &names));
                        if assigns {
                            return true;
                        }
                        if INTERPRETERS.contains(command) {
                            let mut args = segment
                                .split_whitespace()
                                .skip_while(|w| w != command)
                                .skip(1);
                            // `-c`, `-m`, `-e`: not a script file; judged by mention.
                            let script = args
                                .find(|a| !a.starts_with('-') || matches!(*a, "-c" | "-m" | "-e"));
                            return match script {
                                Some("-c" | "-m" | "-e") | None => {
                                    inside || mentions_dir(segment, dir, &names)
                                }
                                Some(script) => inside || mentions_dir(script, dir, &names),
                            };
                        }
                        inside || mentions_dir(segment, dir, &names)
                    });
                if runs_from {
                    let first = run.value[start..].lines().next().unwrap_or("");
                    return Some(format!("runs `{}` on it", first.trim()));
                }
            }
        }
        if let Some(uses) = &step.uses {
            let given = step
                .with
                .iter()
                .any(|(_, v)| mentions_dir(&v.value, dir, &names));
            let local = super::workflow::local_uses(&uses.value);
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
        if let Some((_, why)) = super::caches::cache_save(step) {
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

/// "`workflow_run`, `schedule`", for messages.
fn events_text(events: &[&String]) -> String {
    events
        .iter()
        .map(|e| format!("`{e}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A local composite action being looked into: where the workflow uses it,
/// its file, and its inputs (defaults overridden by the caller's `with:`).
struct Inside<'a> {
    at: Pos,
    file: &'a str,
    inputs: &'a [(String, String)],
}

/// What one step does that brings in other code, in words. Local composite
/// actions (`uses: ./.github/actions/x`) are read from the tree at `root`,
/// with `${{ inputs.NAME }}` resolved; one the tree does not have comes from
/// a checkout made during the run, which is other code itself.
fn step_other_code(
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
        if let Some(line) = expr::fetches_pr_code(&run.value, judge.events, &judge.tainted, false) {
            found.push(place(run.pos, format!("runs `{}`", line.trim())));
        }
    }
    let Some(uses) = step
        .uses
        .as_ref()
        .filter(|u| super::workflow::local_uses(&u.value).is_some())
    else {
        return Ok(found);
    };
    let outer = inside.map_or(&[][..], |i| i.inputs);
    let Some(action) = super::workflow::expand_local_action(root, step, outer)? else {
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
                super::rules::LOCAL_ACTION_BUDGET
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

fn effective_permissions(
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
    fn only_standard_hosted_images_are_hosted_without_the_policy() {
        for hosted in [
            "ubuntu-latest",
            "ubuntu-24.04",
            "ubuntu-22.04-arm",
            "ubuntu-slim",
            "windows-2022",
            "windows-latest",
            "windows-11-arm",
            "macos-15",
            "macos-14-xlarge",
            "macos-latest-large",
            "macos-13-intel",
        ] {
            assert!(is_standard_hosted_label(hosted), "{hosted}");
        }
        for custom in [
            "ubuntu-gpu",
            "ubuntu-24.04-gpu",
            "ubuntu-",
            "windows-cuda",
            "macos-m2-pool",
            "self-hosted",
            "linux",
        ] {
            assert!(!is_standard_hosted_label(custom), "{custom}");
        }
    }

    #[test]
    fn missing_callee_is_an_input_error() {
        let wf = Workflow::parse(
            ".github/workflows/a.yml",
            "on: push\njobs:\n  a:\n    uses: ./.github/workflows/gone.yml\n",
        )
        .unwrap();
        let err = Model::new(vec![wf], &Policy::default(), Path::new("."))
            .err()
            .unwrap();
        assert!(format!("{err}").contains("a.yml:4:11"), "{err}");
    }
}
