//! `cargo xtask check-contracts`: checks the workflows under
//! `.github/workflows` against the cache-trust contracts.
//!
//! The command parses every workflow with a real YAML parser
//! ([`workflow`]), infers what every job is ([`roles`]), applies the rules
//! ([`rules`]), drops reviewed exceptions (`[[allow]]` entries in the policy
//! and inline `# ci-trust: allow[rule] reason` comments) and reports
//! ([`report`]). Exit 0: clean; 1: findings; 2: the input could not be
//! checked (bad YAML, unknown policy key, a policy naming a missing workflow).

mod caches;
mod commands;
mod eval;
mod expr;
mod filters;
mod report;
mod roles;
mod rules;
mod shell;
mod workflow;
mod yaml;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::flags;
use crate::policy::Policy;
use rules::{Confidence, Finding, Severity};
use workflow::{Pos, Workflow};

impl flags::CheckContracts {
    pub fn run(&self) -> Result<ExitCode> {
        let root = self.common.root()?;
        let mut policy = self.common.load_policy(&root)?;
        // A wrong name decides guards wrongly (`github.repository ==
        // 'org/repo'` false, the job never run): refuse any name that
        // cannot be a GitHub repository's `owner/name`.
        match &self.repository {
            Some(name) => {
                if let Err(why) = repository_name_problem(name) {
                    bail!("--repository {name:?}: {why}; give the repository as OWNER/NAME");
                }
                policy.contracts.repository = Some(name.trim().to_owned());
            }
            None => {
                if let Some(name) = &policy.contracts.repository {
                    if let Err(why) = repository_name_problem(name) {
                        bail!(
                            "[contracts] repository = {name:?} in the policy: {why}; give the repository as \"OWNER/NAME\""
                        );
                    }
                    policy.contracts.repository = Some(name.trim().to_owned());
                }
            }
        }
        let mut findings = check(&root, &policy)?;
        // The regular persona sees what fails the check; the auditor also
        // sees the paths that depend on what the repository does not show.
        let before = findings.len();
        if self.persona == flags::Persona::Regular {
            findings.retain(|f| f.severity != Severity::Warning);
        }
        let hidden = before - findings.len();
        let read_line = |file: &str, line: usize| -> Option<String> {
            let text = std::fs::read_to_string(root.join(file)).ok()?;
            text.lines().nth(line.checked_sub(1)?).map(str::to_owned)
        };
        print!(
            "{}",
            report::render(self.format, &findings, hidden, &read_line)
        );
        // Inside Actions the job page gets a table too; elsewhere this is a no-op.
        crate::gha::append_step_summary(&report::markdown_summary(&findings))?;
        Ok(if report::count_errors(&findings) == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Checks the workflows of `root` and returns every finding, suppressed ones
/// included (marked), sorted by file and position.
pub fn check(root: &Path, policy: &Policy) -> Result<Vec<Finding>> {
    let (mut workflows, unparsable) = load_workflows(root)?;
    // A workflow whose `on:` is commented out never runs: a note, and not checked.
    let mut disabled = Vec::new();
    workflows.retain(|wf| {
        if wf.disabled {
            disabled.push(Finding {
                rule: "disabled-workflow",
                severity: Severity::Note,
                confidence: Confidence::High,
                question: None,
                file: wf.path.clone(),
                pos: Pos { line: 1, column: 1 },
                workflow: wf.name.clone(),
                job: None,
                message: format!(
                    "{} has no `on:` (commented out?), so GitHub never runs it; its jobs were not checked",
                    wf.name
                ),
                suppressed: None,
            });
        }
        !wf.disabled
    });
    let mut policy = policy.clone();
    let mut notes = Vec::new();
    if policy.source.is_some() {
        keep_unwritten_defaults_that_exist(&mut policy, &workflows);
        validate_policy_names(&policy, &workflows)?;
    } else {
        notes.extend(apply_defaults(&mut policy, &workflows));
    }
    let refused = unparsable.iter().any(|f| f.severity == Severity::Error);
    if !refused && workflows.iter().all(|wf| wf.jobs.is_empty()) {
        bail!(
            "the {} workflow file(s) under .github/workflows define no job, so nothing was checked",
            workflows.len()
        );
    }
    let broken: BTreeSet<String> = unparsable.iter().map(|f| f.workflow.clone()).collect();
    let model = roles::Model::build(workflows, &policy, root, &broken)?;
    let mut checker = rules::Checker::new(&model, &policy, root);
    checker.run_all()?;
    let mut findings = checker.findings;
    // A call of a local reusable workflow the tree does not have: GitHub
    // refuses the calling workflow; every other file is still checked.
    for (at, uses) in &model.missing_callees {
        let wf = model.workflow(*at);
        findings.push(Finding {
            rule: rules::RuleId::ParseError.as_str(),
            severity: Severity::Error,
            confidence: Confidence::High,
            question: None,
            file: wf.path.clone(),
            pos: uses.pos,
            workflow: wf.name.clone(),
            job: Some(model.job(*at).id.value.clone()),
            message: format!(
                "job `{}` calls {}, which is not in .github/workflows, so GitHub would not run this workflow; add the reusable workflow or fix the path",
                model.job(*at).id.value,
                uses.value
            ),
            suppressed: None,
        });
    }
    findings.extend(unparsable);
    findings.extend(notes);
    findings.extend(disabled);
    findings.sort_by(|a, b| (&a.file, a.pos, a.rule).cmp(&(&b.file, b.pos, b.rule)));
    findings.dedup_by(|a, b| {
        a.file == b.file && a.pos == b.pos && a.rule == b.rule && a.message == b.message
    });
    apply_allows(&mut findings, &model.workflows, &policy);
    Ok(findings)
}

/// No policy file: the documented defaults name this repository's own
/// workflows, which another repository does not have. Names that do not
/// exist are dropped (never an error without a policy file); without a
/// publisher, one is inferred (a workflow whose job saves a cache under a
/// `github.ref == 'refs/heads/<default>'` guard), else the publisher, key
/// and artifact rules are skipped, and a note says so once.
fn apply_defaults(policy: &mut Policy, workflows: &[Workflow]) -> Vec<Finding> {
    let exists = |name: &String| workflows.iter().any(|w| &w.name == name);
    policy.publisher.workflows.retain(exists);
    policy.artifacts.trusted_workflows.retain(exists);
    let note = |message: String| Finding {
        rule: "policy",
        severity: Severity::Note,
        confidence: Confidence::High,
        question: None,
        file: crate::policy::DEFAULT_POLICY_PATH.to_owned(),
        pos: Pos { line: 1, column: 1 },
        workflow: String::new(),
        job: None,
        message,
        suppressed: None,
    };
    if !policy.publisher.workflows.is_empty() {
        return Vec::new();
    }
    let inferred: Vec<(String, String)> = workflows
        .iter()
        .filter_map(|wf| {
            let job = wf.jobs.iter().find(|job| {
                let guarded = job.if_cond.as_ref().is_some_and(|c| {
                    ["main", "master", policy.default_branch.as_str()]
                        .iter()
                        .any(|b| expr::requires_ref(&c.value, b))
                });
                guarded && job.steps.iter().any(|s| caches::cache_save(s).is_some())
            })?;
            Some((wf.name.clone(), job.id.value.clone()))
        })
        .collect();
    if inferred.is_empty() {
        let skipped = rules::publisher_rule_ids().join(", ");
        return vec![note(format!(
            "no .github/ci-trust.toml and no publisher found, so these rules were skipped: {skipped}; name the workflow that saves the shared caches under [publisher] workflows in .github/ci-trust.toml to enable them (docs/contracts.md#the-policy)"
        ))];
    }
    let list: Vec<String> = inferred
        .iter()
        .map(|(w, j)| format!("{w} (job `{j}` saves a cache under a default-branch guard)"))
        .collect();
    policy.publisher.workflows = inferred.into_iter().map(|(w, _)| w).collect();
    vec![note(format!(
        "no .github/ci-trust.toml: the publisher was inferred as {}; name it under [publisher] workflows in .github/ci-trust.toml to make this explicit",
        list.join(", ")
    ))]
}

/// Every `*.yml`/`*.yaml` directly under `.github/workflows` (GitHub reads no
/// subdirectories), sorted by name, and a `parse-error` finding for each
/// file GitHub would refuse: the other files are still checked.
fn load_workflows(root: &Path) -> Result<(Vec<Workflow>, Vec<Finding>)> {
    let dir = root.join(".github/workflows");
    if !dir.is_dir() {
        bail!(
            "{} does not exist; run check-contracts on a repository root (--root) that has workflows",
            dir.display()
        );
    }
    let mut paths = Vec::new();
    for entry in
        std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
    {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        let is_yaml = path.extension().is_some_and(|e| e == "yml" || e == "yaml");
        if is_yaml && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    // Never pass on nothing: a check of zero workflow files proves nothing.
    if paths.is_empty() {
        bail!(
            "{} holds no workflow file (*.yml, *.yaml), so nothing was checked; run check-contracts on a repository root (--root) that has workflows",
            dir.display()
        );
    }
    let mut workflows = Vec::new();
    let mut unparsable = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let rel = format!(".github/workflows/{name}");
        // An empty file defines nothing: GitHub lists it as invalid, and
        // there is nothing to check in it.
        if std::fs::read_to_string(path).is_ok_and(|t| t.trim().is_empty()) {
            unparsable.push(Finding {
                rule: "empty-workflow",
                severity: Severity::Note,
                confidence: Confidence::High,
                question: None,
                file: rel.clone(),
                pos: Pos { line: 1, column: 1 },
                workflow: name.to_string(),
                job: None,
                message: format!(
                    "{name} is empty: it defines no job, so nothing in it was checked"
                ),
                suppressed: None,
            });
            continue;
        }
        match Workflow::load(path, &rel) {
            Ok(wf) => workflows.push(wf),
            // Only comments: GitHub lists it as invalid, and there is
            // nothing in it to check.
            Err(err) if format!("{err:#}").ends_with("the file is empty") => {
                unparsable.push(Finding {
                    rule: "empty-workflow",
                    severity: Severity::Note,
                    confidence: Confidence::High,
                    question: None,
                    file: rel.clone(),
                    pos: Pos { line: 1, column: 1 },
                    workflow: name.to_string(),
                    job: None,
                    message: format!("{name} holds no YAML (only comments): it defines no job, so nothing in it was checked"),
                    suppressed: None,
                });
            }
            Err(err) => unparsable.push(parse_error(&rel, &name, &format!("{err:#}"))),
        }
    }
    Ok((workflows, unparsable))
}

/// A `parse-error` finding from a workflow error, which reads
/// `REL:LINE:COL: message` (the position is optional).
fn parse_error(rel: &str, name: &str, error: &str) -> Finding {
    let rest = error.strip_prefix(rel).unwrap_or(error);
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let mut numbers = Vec::new();
    let mut tail = rest;
    while numbers.len() < 2 {
        let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
        let Ok(n) = digits.parse::<usize>() else {
            break;
        };
        numbers.push(n);
        tail = &tail[digits.len()..];
        tail = tail.strip_prefix(':').unwrap_or(tail);
    }
    let pos = Pos {
        line: numbers.first().copied().unwrap_or(1).max(1),
        column: numbers.get(1).copied().unwrap_or(1).max(1),
    };
    Finding {
        rule: rules::RuleId::ParseError.as_str(),
        severity: Severity::Error,
        confidence: Confidence::High,
        question: None,
        file: rel.to_owned(),
        pos,
        workflow: name.to_owned(),
        job: None,
        message: format!(
            "GitHub would not load this workflow: {}; none of its jobs was checked",
            tail.trim()
        ),
        suppressed: None,
    }
}

/// A policy file without a `[publisher]` (or `[artifacts]`) table did not
/// name those workflows: the defaults' names (this repository's) that the
/// tree does not have are dropped, as without a policy file, so that a
/// policy of only `[contracts]` settings checks any repository.
fn keep_unwritten_defaults_that_exist(policy: &mut Policy, workflows: &[Workflow]) {
    let text = policy
        .source
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let has_table = |name: &str| {
        text.contains(&format!("{name}."))
            || text.lines().any(|l| {
                let l = l.trim();
                l.starts_with('[') && l.trim_matches(['[', ']']).trim() == name
            })
    };
    let exists = |name: &String| workflows.iter().any(|w| &w.name == name);
    if !has_table("publisher") {
        policy.publisher.workflows.retain(exists);
    }
    if !has_table("artifacts") {
        policy.artifacts.trusted_workflows.retain(exists);
    }
}

/// A policy that names a workflow, job or rule that does not exist is an
/// input error: the reviewer meant something that is not being checked.
fn validate_policy_names(policy: &Policy, workflows: &[Workflow]) -> Result<()> {
    let text = policy
        .source
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let source = policy.describe_source();
    let at = |needle: &str| -> String {
        let quoted = format!("\"{needle}\"");
        match text.lines().position(|l| l.contains(&quoted)) {
            Some(i) => format!("{source}:{}", i + 1),
            None => source.clone(),
        }
    };
    let workflow = |name: &str| workflows.iter().find(|w| w.name == name);
    let mut named: Vec<(&str, &str)> = Vec::new();
    named.extend(
        policy
            .publisher
            .workflows
            .iter()
            .map(|w| ("publisher.workflows", w.as_str())),
    );
    named.extend(
        policy
            .artifacts
            .trusted_workflows
            .iter()
            .map(|w| ("artifacts.trusted-workflows", w.as_str())),
    );
    for (key, name) in named {
        if workflow(name).is_none() {
            bail!(
                "{}: {key} names {name:?}, which is not a workflow in .github/workflows; fix the name or add the workflow",
                at(name)
            );
        }
    }
    let jobs = policy
        .contracts
        .job
        .iter()
        .map(|g| ("[contracts] job", g.workflow.as_str(), Some(g.job.as_str())))
        .chain(
            policy
                .allow
                .iter()
                .map(|a| ("[[allow]]", a.workflow.as_str(), a.job.as_deref())),
        );
    for (what, name, job) in jobs {
        let Some(wf) = workflow(name) else {
            bail!(
                "{}: {what} names the workflow {name:?}, which is not in .github/workflows",
                at(name)
            );
        };
        if let Some(job) = job {
            if wf.job(job).is_none() {
                bail!(
                    "{}: {what} names the job {job:?}, which {name} does not have",
                    at(job)
                );
            }
        }
    }
    for allow in &policy.allow {
        if rules::rule(&allow.rule).is_none() {
            let ids: Vec<&str> = rules::RULES.iter().map(|r| r.id).collect();
            bail!(
                "{}: [[allow]] names the rule {:?}, which does not exist; rules are: {}",
                at(&allow.rule),
                allow.rule,
                ids.join(", ")
            );
        }
    }
    Ok(())
}

/// Marks the findings a reviewed exception covers, and notes unused `[[allow]]` entries.
fn apply_allows(findings: &mut Vec<Finding>, workflows: &[Workflow], policy: &Policy) {
    let mut used = vec![false; policy.allow.len()];
    for finding in findings.iter_mut() {
        if finding.severity == Severity::Note {
            continue;
        }
        let entry = policy.allow.iter().position(|a| {
            a.rule == finding.rule
                && a.workflow == finding.workflow
                && a.job
                    .as_ref()
                    .is_none_or(|job| Some(job) == finding.job.as_ref())
        });
        if let Some(i) = entry {
            used[i] = true;
            finding.suppressed = Some(format!(
                "[[allow]] in {}: {}",
                policy.describe_source(),
                policy.allow[i].reason.trim()
            ));
            continue;
        }
        let Some(wf) = workflows.iter().find(|w| w.path == finding.file) else {
            continue;
        };
        match inline_allow(wf, finding.pos, finding.rule) {
            Some(InlineAllow::Reason(_)) if rules::rule(finding.rule).is_some_and(|r| r.policy_only) => {
                finding.message.push_str(&format!(
                    " (an inline `ci-trust: allow` comment cannot silence {}; only a policy [[allow]] entry with a reason can, because a policy change is reviewed on its own)",
                    finding.rule
                ));
            }
            Some(InlineAllow::Reason(reason)) => {
                finding.suppressed = Some(format!("inline allow: {reason}"));
            }
            Some(InlineAllow::NoReason(line)) => finding.message.push_str(&format!(
                " (the `ci-trust: allow` comment on line {line} has no reason, so it does not count)"
            )),
            None => {}
        }
    }
    for (i, allow) in policy.allow.iter().enumerate().filter(|(i, _)| !used[*i]) {
        findings.push(Finding {
            rule: rules::rule(&allow.rule).map_or("allow", |r| r.id),
            severity: Severity::Note,
            confidence: Confidence::High,
            question: None,
            file: policy.describe_source(),
            pos: Pos { line: 1, column: 1 },
            workflow: allow.workflow.clone(),
            job: allow.job.clone(),
            message: format!(
                "[[allow]] entry {} for {}{} matches no finding; remove it",
                i + 1,
                allow.workflow,
                allow
                    .job
                    .as_ref()
                    .map(|j| format!(" job {j}"))
                    .unwrap_or_default()
            ),
            suppressed: None,
        });
    }
}

enum InlineAllow {
    Reason(String),
    NoReason(usize),
}

/// An inline `# ci-trust: allow[rule, …] reason` comment for `rule`, on the
/// finding's line or in the comment lines right above it.
fn inline_allow(wf: &Workflow, pos: Pos, rule: &str) -> Option<InlineAllow> {
    let mut line = pos.line;
    let mut first = true;
    while line >= 1 {
        let text = wf.line(line);
        let comment_only = text.trim_start().starts_with('#');
        if !first && !comment_only {
            break;
        }
        if let Some(allow) = parse_allow(text, rule, line) {
            return Some(allow);
        }
        first = false;
        line -= 1;
    }
    None
}

fn parse_allow(text: &str, rule: &str, line: usize) -> Option<InlineAllow> {
    let at = text.find("ci-trust: allow[")?;
    if !text[..at].trim_end().ends_with('#') {
        return None;
    }
    let rest = &text[at + "ci-trust: allow[".len()..];
    let (rules, reason) = rest.split_once(']')?;
    if !rules.split(',').any(|r| r.trim() == rule) {
        return None;
    }
    let reason = reason.trim();
    Some(if reason.is_empty() {
        InlineAllow::NoReason(line)
    } else {
        InlineAllow::Reason(reason.to_owned())
    })
}

/// Why `name` (surrounding spaces aside) cannot be a GitHub repository's
/// `owner/name`: an owner of letters, digits and `-`, a name of letters,
/// digits, `.`, `-` and `_` that does not end in `.git`.
fn repository_name_problem(name: &str) -> std::result::Result<(), &'static str> {
    let Some((owner, repo)) = name.trim().split_once('/') else {
        return Err("no `/` between owner and name");
    };
    if owner.is_empty() || !owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err("the owner is letters, digits and `-`");
    }
    if repo.is_empty()
        || matches!(repo, "." | "..")
        || !repo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err("the name is letters, digits, `.`, `-` and `_`");
    }
    if repo.to_ascii_lowercase().ends_with(".git") {
        return Err("the name does not end in `.git` (that is a clone URL's)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_allows_need_the_rule_and_a_reason() {
        let wf = Workflow::parse(
            "x.yml",
            "on: push\n# ci-trust: allow[unpinned-action, key-shape] vendored, reviewed 2026-11\n# another comment\njobs: {}\nx: 1 # ci-trust: allow[restore-keys]\n",
        )
        .unwrap();
        let at = |line| Pos { line, column: 1 };
        assert!(
            matches!(inline_allow(&wf, at(4), "key-shape"), Some(InlineAllow::Reason(r)) if r == "vendored, reviewed 2026-11")
        );
        assert!(inline_allow(&wf, at(4), "restore-keys").is_none());
        assert!(matches!(
            inline_allow(&wf, at(5), "restore-keys"),
            Some(InlineAllow::NoReason(5))
        ));
        assert!(
            inline_allow(&wf, at(1), "key-shape").is_none(),
            "a comment below does not count"
        );
    }
}
