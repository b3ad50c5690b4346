//! Which runner a job gets: GitHub-hosted images and larger runners, hosted
//! services that give a fresh machine per job, self-hosted pods, and labels
//! made for one run (ephemeral).
//!
//! Owns the registry of hosted label forms (`THIRD_PARTY_HOSTED`) and the
//! pod decision. Must not decide what a job runs (`code.rs`).

use std::collections::BTreeMap;

use super::super::expr;
use super::{JobRef, Why};
use crate::contracts::workflow::Workflow;
use crate::policy::Policy;

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

pub(super) fn is_hosted_label(label: &str, policy: &Policy) -> bool {
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
pub(super) fn is_larger_hosted_label(label: &str) -> bool {
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

pub(super) fn is_third_party_hosted_label(label: &str) -> bool {
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

pub(super) fn is_standard_hosted_label(label: &str) -> bool {
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

pub(super) fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// True for a label that names one runner made for this run: an output of
/// an earlier job (`needs.create-pod.outputs.label`) or one built from the
/// run id. Such a runner is registered and removed around the run.
pub(super) fn is_per_run_label(label: &str) -> bool {
    expr::expressions(label)
        .iter()
        .any(|(_, body)| body.starts_with("needs.") || body.contains("github.run_id"))
}

/// Whether a job runs on a self-hosted pod, why, whether that pod is
/// known to be ephemeral, and, for a `${{ inputs.NAME }}` runner of a
/// reusable workflow (resolved from its callers' `with:`, each caller's
/// label), the literal labels passed.
pub(super) fn runs_on_pod(
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
        // `${{ inputs.NAME }}`, or `${{ fromJSON(inputs.NAME) }}` (a label
        // list passed as JSON text).
        let body = expr::sole_expression(&unresolved.value);
        let (input, json) = match body {
            Some(b) if b.starts_with("inputs.") => (b.strip_prefix("inputs."), false),
            Some(b) if b.len() > 9 && b[..9].eq_ignore_ascii_case("fromjson(") => (
                b[9..]
                    .strip_suffix(')')
                    .map(str::trim)
                    .and_then(|inner| inner.strip_prefix("inputs.")),
                true,
            ),
            _ => (None, false),
        };
        let input = input.filter(|name| {
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
        // Each caller's labels (a JSON list passed to fromJSON is its labels).
        let labels_of = |value: &str| -> Vec<String> {
            if json && !value.contains("${{") {
                match serde_json::from_str::<serde_json::Value>(value) {
                    Ok(serde_json::Value::Array(items)) => items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                        .collect(),
                    Ok(serde_json::Value::String(one)) => vec![one],
                    _ => vec![value.to_owned()],
                }
            } else {
                vec![value.to_owned()]
            }
        };
        let passed: Vec<(String, String)> = input
            .map(|name| {
                callers
                    .get(&at.workflow)
                    .into_iter()
                    .flatten()
                    .filter_map(|caller| {
                        let calling = &workflows[caller.workflow].jobs[caller.job];
                        crate::contracts::workflow::lookup(&calling.with, name).map(|v| {
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
                .filter(|(value, _)| !value.contains("${{"))
                .flat_map(|(value, _)| labels_of(value))
                .collect();
            let pod = passed.iter().find_map(|(value, caller)| {
                let labels = labels_of(value);
                let label = labels
                    .iter()
                    .find(|l| l.contains("${{") || !is_hosted_label(l, policy))?;
                Some((label.clone(), labels, caller))
            });
            return pod.map(|(label, labels, caller)| {
                (
                    Why {
                        pos: unresolved.pos,
                        text: format!(
                            "runs on the runner its caller {caller} passes as `{}`: `{label}`, which may be a self-hosted runner",
                            unresolved.value
                        ),
                    },
                    labels.iter().any(|l| ephemeral_label(l)),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
