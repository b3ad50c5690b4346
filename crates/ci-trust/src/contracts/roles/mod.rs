//! What every job is: publisher, untrusted-code job, pod job, lifecycle job
//! or isolated writer, inferred from the workflows themselves.
//!
//! A job's role depends on more than its own file: a job that calls a
//! reusable workflow (`uses: ./.github/workflows/x.yml`) carries its
//! caller's triggers, token permissions and publisher status into the
//! callee's jobs, so roles are computed over the whole workflow set.

mod code;
mod downloads;
mod refs;
mod runners;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Result, bail};

use super::expr;
use super::workflow::{Job, Permissions, Pos, Workflow};
use crate::policy::Policy;
use code::other_code;
use downloads::taint_same_run_downloads;
use refs::{Judge, caller_inputs, env_values, inputs_are_maintainers, tainted_env};
use runners::runs_on_pod;

pub use code::other_run_download;
pub use runners::is_hosted;

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

pub(super) fn effective_triggers(
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

/// "`workflow_run`, `schedule`", for messages.
pub(super) fn events_text(events: &[&String]) -> String {
    events
        .iter()
        .map(|e| format!("`{e}`"))
        .collect::<Vec<_>>()
        .join(", ")
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
