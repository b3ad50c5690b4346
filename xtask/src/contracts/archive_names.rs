//! Rule `archive-names`: the archives the pod runs are the archives the
//! policy builds.
//!
//! The consumer passes the pod workflow an `archives:` input naming the
//! nextest archive files to run; the policy's `[[archive]]` entries say which
//! files are built and published under the key. A name in one and not the
//! other means a GPU test suite that is built and never run, or a pod run of
//! a file no key covers; both pass silently on GitHub. This rule owns only
//! that cross-check and touches no other rule.

use super::rules::{Finding, Severity};
use super::workflow::{Pos, Workflow};
use crate::policy::Policy;

pub const RULE: &str = "archive-names";

/// Every `archives:` input passed to a local reusable workflow, checked
/// against the policy's nextest `[[archive]]` file names.
pub fn check(workflows: &[Workflow], policy: &Policy) -> Vec<Finding> {
    let built: Vec<&str> = policy
        .archive
        .iter()
        .filter(|a| a.nextest.is_some())
        .map(|a| a.file.as_str())
        .collect();
    let mut findings = Vec::new();
    for workflow in workflows {
        for job in &workflow.jobs {
            let calls_local = job
                .uses
                .as_ref()
                .is_some_and(|u| u.value.starts_with("./.github/workflows/"));
            let Some((_, archives)) = job
                .with
                .iter()
                .find(|(name, _)| name.value == "archives")
                .filter(|_| calls_local)
            else {
                continue;
            };
            let mut finding = |pos: Pos, message: String| {
                findings.push(Finding {
                    rule: RULE,
                    severity: Severity::Error,
                    file: workflow.path.clone(),
                    pos,
                    workflow: workflow.name.clone(),
                    job: Some(job.id.value.clone()),
                    message,
                    suppressed: None,
                })
            };
            if archives.value.contains("${{") {
                finding(
                    archives.pos,
                    format!(
                        "job `{}` passes `archives: {}`, an expression; write the archive file names literally so they can be checked against the policy's [[archive]] entries",
                        job.id.value, archives.value
                    ),
                );
                continue;
            }
            let run: Vec<&str> = archives
                .value
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|s| !s.is_empty())
                .collect();
            for name in run.iter().filter(|n| !built.contains(n)) {
                finding(
                    archives.pos,
                    format!(
                        "job `{}` runs the archive {name:?} on the pod, but no nextest [[archive]] of the policy ({}) builds it; the policy builds {built:?}",
                        job.id.value,
                        policy.describe_source()
                    ),
                );
            }
            for name in built.iter().filter(|n| !run.contains(n)) {
                finding(
                    archives.pos,
                    format!(
                        "the policy builds the nextest archive {name:?}, but job `{}` never runs it on the pod (archives: {:?}); add it to `archives`",
                        job.id.value, archives.value
                    ),
                );
            }
        }
    }
    findings
}
