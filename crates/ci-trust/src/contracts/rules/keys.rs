//! Family `keys`: the archive key is computed identically by the publisher
//! and every reader (`key-mismatch`), from every input (`key-coverage`), by
//! trusted tooling (`key-xtask-checkout`), and restored exactly
//! (`restore-keys`, `key-shape`).
//!
//! Owns these checks and the key-step and checkout helpers other families
//! read (`key_signature`, `checkouts_before`, the directory helpers). It
//! must not compute the key itself (that is `key/`).

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use globset::GlobMatcher;

use super::{Checker, Confidence, Finding, RuleId, Severity};
use crate::contracts::caches::is_false;
use crate::contracts::commands;
use crate::contracts::expr;
use crate::contracts::roles::JobRef;
use crate::contracts::shell::{Script, Word};
use crate::contracts::workflow::{Job, Step, Workflow};

/// `key-mismatch`, `key-coverage` and `key-xtask-checkout`: one pairing of
/// the key steps serves the three.
pub(super) fn check_key_pairing(c: &mut Checker) -> Result<()> {
    c.key_pairing()
}

/// `restore-keys` and `key-shape`: one walk over the saved and restored keys.
pub(super) fn check_cache_keys(c: &mut Checker) -> Result<()> {
    c.cache_keys();
    Ok(())
}

impl Checker<'_> {
    /// Rule 5: key steps agree, cover the inputs, and run trusted tooling.
    pub(super) fn key_pairing(&mut self) -> Result<()> {
        let step_id = self.policy.key.step_id.clone();
        let mut publisher = Vec::new();
        let mut readers = Vec::new();
        for info in &self.model.jobs {
            let job = self.model.job(info.at);
            for step in &job.steps {
                if step.id.as_ref().is_some_and(|id| id.value == step_id) {
                    let sig = key_signature(self.model.workflow(info.at), job, step);
                    if info.publisher {
                        publisher.push((info.at, step, sig));
                    } else {
                        readers.push((info.at, step, sig));
                    }
                }
            }
        }
        let reference = publisher.first().map(|(at, step, sig)| {
            let wf = self.model.workflow(*at);
            (format!("{}:{}", wf.path, step.pos.line), sig.clone())
        });
        for (at, step, sig) in publisher.iter().skip(1).chain(readers.iter()) {
            let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
            let message = match &reference {
                None => format!(
                    "job `{}` computes the archive key, but no publisher job has a step with `id: {step_id}` to pair it with",
                    self.model.job(*at).id.value
                ),
                Some((_, reference_sig)) if reference_sig == sig => continue,
                Some((where_, reference_sig)) => {
                    let (ours, theirs) = (sig.describe(), reference_sig.describe());
                    // Two texts can differ only in spacing that `describe`
                    // folds away; say so rather than print two equal strings.
                    let detail = if ours == theirs {
                        format!(
                            "{ours} in both, but the `run:` texts differ in spacing or other lines; make them byte-identical"
                        )
                    } else {
                        format!("{ours} vs {theirs}")
                    };
                    format!(
                        "job `{}` computes the archive key differently from the publisher ({where_}): {detail}",
                        self.model.job(*at).id.value
                    )
                }
            };
            self.push(RuleId::KeyMismatch, *at, at.workflow, pos, message);
        }
        for (at, step, sig) in publisher.iter().chain(readers.iter()) {
            self.key_source(*at, step, sig)?;
        }
        Ok(())
    }

    /// Rule 5: what the key is computed from.
    pub(super) fn key_source(&mut self, at: JobRef, step: &Step, sig: &KeySignature) -> Result<()> {
        let wf = self.model.workflow(at);
        let job = self.model.job(at);
        let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
        if sig.ci_key.is_some() {
            self.xtask_checkout(at, step, sig);
            return Ok(());
        }
        let mut text = String::new();
        for scalar in step
            .run
            .iter()
            .chain(step.with.iter().map(|(_, v)| v))
            .chain(step.env.iter().map(|(_, v)| v))
        {
            text.push_str(&scalar.value);
            text.push('\n');
        }
        let Some(patterns) = expr::hash_files_patterns(&text) else {
            self.push(
                RuleId::KeyCoverage,
                at,
                at.workflow,
                pos,
                "the key's `hashFiles` takes a non-literal argument; its coverage cannot be checked".to_owned(),
            );
            return Ok(());
        };
        if patterns.is_empty() {
            self.push(
                RuleId::KeyCoverage,
                at,
                at.workflow,
                pos,
                format!(
                    "the key step of job `{}` uses neither `cargo xtask ci-key` nor `hashFiles`; its coverage cannot be checked",
                    job.id.value
                ),
            );
            return Ok(());
        }
        let prefix = checkout_prefix(job, step.index, &patterns);
        let globs = HashGlobs::new(&patterns, &prefix).with_context(|| {
            format!(
                "{}:{}: a hashFiles pattern is not a valid glob",
                wf.path, pos.line
            )
        })?;
        for other in &self.model.workflows {
            if globs.matches(&other.path) {
                self.push(
                    RuleId::KeyCoverage,
                    at,
                    at.workflow,
                    pos,
                    format!(
                        "the key hashes {}; workflow files must not be key inputs (runs always use the default branch's definitions)",
                        other.path
                    ),
                );
                break;
            }
        }
        let Some(inputs) = self.key_inputs()? else {
            if !self.records(RuleId::KeyCoverage) {
                return Ok(());
            }
            self.findings.push(Finding {
                rule: RuleId::KeyCoverage.as_str(),
                severity: Severity::Note,
                confidence: Confidence::High,
                question: None,
                file: wf.path.clone(),
                pos,
                workflow: wf.name.clone(),
                job: Some(job.id.value.clone()),
                message: format!(
                    "coverage of the `hashFiles` key skipped: {} has no Cargo.toml to compute the inputs from",
                    self.root.display()
                ),
                suppressed: None,
            });
            return Ok(());
        };
        let missing: Vec<&String> = inputs.iter().filter(|p| !globs.matches(p)).collect();
        if !missing.is_empty() {
            let shown: Vec<&str> = missing.iter().take(5).map(|s| s.as_str()).collect();
            let more = if missing.len() > 5 {
                format!(" and {} more", missing.len() - 5)
            } else {
                String::new()
            };
            self.push(
                RuleId::KeyCoverage,
                at,
                at.workflow,
                pos,
                format!(
                    "the key's hashFiles patterns (relative to checkout path `{}`) miss {} input(s) `ci-key` includes: {}{more}",
                    prefix,
                    missing.len(),
                    shown.join(", ")
                ),
            );
        }
        Ok(())
    }

    /// The repository-relative paths `ci-key` hashes; `None` without a Cargo workspace.
    pub(super) fn key_inputs(&mut self) -> Result<Option<Vec<String>>> {
        if self.inputs.is_none() {
            let inputs = if self.root.join("Cargo.toml").is_file() {
                let manifest = crate::key::compute(self.root, self.policy).with_context(|| {
                    format!(
                        "cannot compute the ci-key inputs of {} to check hashFiles coverage",
                        self.root.display()
                    )
                })?;
                Some(
                    manifest
                        .inputs
                        .into_iter()
                        // hashFiles() hashes files: an absence or a
                        // directory's entry set is nothing it could cover.
                        .filter(|i| i.kind != "absent" && i.kind != "directory")
                        .map(|i| i.path)
                        .collect(),
                )
            } else {
                None
            };
            self.inputs = Some(inputs);
        }
        Ok(self.inputs.clone().flatten())
    }

    /// Rule 5: `cargo xtask ci-key` must run the default branch's xtask.
    pub(super) fn xtask_checkout(&mut self, at: JobRef, step: &Step, sig: &KeySignature) {
        let info = self.model.info(at);
        let job = self.model.job(at);
        let pos = step.run.as_ref().map_or(step.pos, |r| r.pos);
        let dir = sig.xtask_dir();
        // The last checkout that wrote into the xtask's directory decides
        // what runs: one at an enclosing path (the workspace root) replaces
        // it, and one inside it (`trusted/xtask`) replaces part of it.
        let checkout = checkouts_before(job, step.index)
            .into_iter()
            .rev()
            .find(|(path, _)| is_within(&dir, path) || is_within(path, &dir));
        let Some((path, checkout)) = checkout else {
            self.push(
                RuleId::KeyXtaskCheckout,
                at,
                at.workflow,
                pos,
                format!("no checkout before the key step provides the xtask it runs in `{dir}`"),
            );
            return;
        };
        let default = &self.policy.default_branch;
        let repository_ok = checkout
            .input("repository")
            .is_none_or(|r| expr::sole_expression(&r.value) == Some("github.repository"));
        let ref_ok = match checkout.input("ref") {
            None => info.publisher,
            Some(r) if expr::is_workflow_sha(&r.value) => true,
            Some(r) if !r.value.contains("${{") => expr::is_trusted_ref(&r.value, default),
            Some(r) => info.publisher && expr::is_trusted_ref(&r.value, default),
        };
        if !(repository_ok && ref_ok) {
            let what = checkout
                .input("ref")
                .map_or("the triggering ref".to_owned(), |r| {
                    format!("`{}`", r.value)
                });
            self.push(
                RuleId::KeyXtaskCheckout,
                at,
                at.workflow,
                pos,
                format!(
                    "`cargo xtask ci-key` runs the xtask of the checkout at `{path}` ({what}), which is not the trusted `${{{{ github.workflow_sha }}}}`"
                ),
            );
        }
    }

    /// Rule 6: exact restores and coherent rotation.
    pub(super) fn cache_keys(&mut self) {
        let mut saved = BTreeSet::new();
        for info in self.model.jobs.iter().filter(|i| i.publisher) {
            let job = self.model.job(info.at);
            for step in &job.steps {
                if let Some(shape) = rust_cache_shape(job, step) {
                    if !is_false(step.input("save-if")) {
                        saved.insert(shape);
                    }
                } else if step.uses_action("actions/cache")
                    || step.uses_action("actions/cache/save")
                {
                    if let Some(key) = step.input("key") {
                        saved.insert(expr::key_shape(&key.value));
                    }
                }
            }
        }
        let mut found = Vec::new();
        for info in self.model.jobs.iter().filter(|i| !i.publisher) {
            let job = self.model.job(info.at);
            for step in &job.steps {
                if let Some(shape) = rust_cache_shape(job, step) {
                    if info.is_untrusted() && !saved.contains(&shape) {
                        found.push((
                            RuleId::KeyShape,
                            info.at,
                            step.pos,
                            format!(
                                "job `{}` restores a rust-cache the publisher never saves (prefix-key/shared-key/key differ); align them with the publisher's rust-cache step",
                                job.id.value
                            ),
                        ));
                    }
                    continue;
                }
                if !(step.uses_action("actions/cache") || step.uses_action("actions/cache/restore"))
                {
                    continue;
                }
                let Some(key) = step.input("key") else {
                    continue;
                };
                let shape = expr::key_shape(&key.value);
                if saved.contains(&shape) {
                    if let Some(fallback) = step
                        .input("restore-keys")
                        .filter(|r| !r.value.trim().is_empty())
                    {
                        found.push((
                            RuleId::RestoreKeys,
                            info.at,
                            fallback.pos,
                            format!(
                                "job `{}` restores the publisher's key `{}` with `restore-keys`, so a miss reuses a different build",
                                job.id.value, key.value
                            ),
                        ));
                    }
                } else if info.is_untrusted() {
                    found.push((
                        RuleId::KeyShape,
                        info.at,
                        key.pos,
                        format!(
                            "job `{}` restores `{}`, whose shape `{shape}` the publisher never saves; a `vN` bump on one side only?",
                            job.id.value, key.value
                        ),
                    ));
                }
            }
        }
        for (rule, at, pos, message) in found {
            self.push(rule, at, at.workflow, pos, message);
        }
    }
}

/// The shape of a rust-cache step's key: the inputs that name it.
pub(super) fn rust_cache_shape(job: &Job, step: &Step) -> Option<String> {
    if !step.uses_action("Swatinem/rust-cache") {
        return None;
    }
    let get = |name: &str| step.input(name).map(|v| expr::key_shape(&v.value));
    let shared = get("shared-key").unwrap_or_else(|| format!("job:{}", job.id.value));
    Some(format!(
        "rust-cache|{}|{shared}|{}",
        get("prefix-key").unwrap_or_else(|| "v0-rust".to_owned()),
        get("key").unwrap_or_default()
    ))
}

/// How a key step computes the key, for comparing publisher and readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySignature {
    /// The `cargo xtask ci-key` invocation line, whitespace-collapsed.
    pub ci_key: Option<String>,
    /// Its words, as the shell splits them.
    pub ci_key_args: Vec<String>,
    /// What the `run` computes ([`commands::canonical`]: comments, layout
    /// and quoting left out), or the `uses`/`with`.
    pub text: String,
    pub working_directory: String,
}

impl KeySignature {
    fn describe(&self) -> String {
        let what = self.ci_key.as_deref().unwrap_or(&self.text);
        let what: String = what.chars().take(120).collect();
        format!(
            "`{}` in `{}`",
            what.replace('\n', "⏎"),
            self.working_directory
        )
    }

    /// The directory cargo runs the xtask from: the working directory, or
    /// the directory of a `--manifest-path`.
    pub(super) fn xtask_dir(&self) -> String {
        if self.ci_key.is_none() {
            return self.working_directory.clone();
        }
        let words = &self.ci_key_args;
        let manifest = words.iter().enumerate().find_map(|(i, w)| {
            w.strip_prefix("--manifest-path=").or_else(|| {
                (w == "--manifest-path")
                    .then(|| words.get(i + 1).map(String::as_str))
                    .flatten()
            })
        });
        match manifest {
            Some(path) => {
                let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir);
                join_dir(&self.working_directory, dir)
            }
            None => self.working_directory.clone(),
        }
    }
}

pub(super) fn key_signature(wf: &Workflow, job: &Job, step: &Step) -> KeySignature {
    let working_directory = normalize_dir(
        step.working_directory
            .as_ref()
            .or(job.default_working_directory.as_ref())
            .or(wf.default_working_directory.as_ref())
            .map_or(".", |s| s.value.as_str()),
    );
    if let Some(run) = &step.run {
        let script = Script::cached(&run.value);
        // The computation, not its comments or layout.
        let text = commands::canonical(&run.value, &script);
        let ci_key = commands::xtask(&script, "ci-key").next();
        let ci_key_args: Vec<String> = ci_key
            .map(|c| c.words.iter().map(Word::text).collect())
            .unwrap_or_default();
        return KeySignature {
            ci_key: ci_key.map(|_| ci_key_args.join(" ")),
            ci_key_args,
            text,
            working_directory,
        };
    }
    let mut text = step
        .uses
        .as_ref()
        .map_or(String::new(), |u| u.value.clone());
    for (name, value) in &step.with {
        text.push_str(&format!("\n{}={}", name.value, value.value));
    }
    KeySignature {
        ci_key: None,
        ci_key_args: Vec::new(),
        text,
        working_directory,
    }
}

/// `./a/`, `${{ github.workspace }}/a` → `a`; empty → `.`.
pub(super) fn normalize_dir(dir: &str) -> String {
    let mut dir = dir.trim();
    for prefix in [
        "${{ github.workspace }}",
        "${{github.workspace}}",
        "$GITHUB_WORKSPACE",
    ] {
        if let Some(rest) = dir.strip_prefix(prefix) {
            dir = rest;
        }
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in dir.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." && parts.last().is_some_and(|p| *p != "..") {
            parts.pop();
        } else {
            parts.push(part);
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

pub(super) fn join_dir(base: &str, rel: &str) -> String {
    if base == "." {
        normalize_dir(rel)
    } else {
        normalize_dir(&format!("{base}/{rel}"))
    }
}

/// True when `dir` is `checkout` or inside it.
pub(super) fn is_within(dir: &str, checkout: &str) -> bool {
    checkout == "." || dir == checkout || dir.starts_with(&format!("{checkout}/"))
}

/// The checkouts in effect before step `index`, by path, in step order (a
/// later checkout into the same path replaces an earlier one).
pub(super) fn checkouts_before(job: &Job, index: usize) -> Vec<(String, &Step)> {
    let mut by_path: Vec<(String, &Step)> = Vec::new();
    for step in job.steps[..index]
        .iter()
        .filter(|s| s.uses_action("actions/checkout"))
    {
        let path = normalize_dir(step.input("path").map_or(".", |p| p.value.as_str()));
        by_path.retain(|(p, _)| *p != path);
        by_path.push((path, step));
    }
    by_path
}

/// The checkout path the hashFiles patterns are written against: the
/// checkout (other than the root) whose path prefixes most patterns, else the
/// root checkout, else the last checkout (which unprefixed patterns then miss).
fn checkout_prefix(job: &Job, index: usize, patterns: &[String]) -> String {
    let checkouts: Vec<String> = checkouts_before(job, index)
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    let prefixed = checkouts
        .iter()
        .filter(|p| *p != ".")
        .map(|p| {
            let count = patterns
                .iter()
                .filter(|pat| pat.trim_start_matches('!').starts_with(&format!("{p}/")))
                .count();
            (count, p)
        })
        .filter(|(count, _)| *count > 0)
        .max();
    match prefixed {
        Some((_, path)) => path.clone(),
        None if checkouts.iter().any(|p| p == ".") => ".".to_owned(),
        None => checkouts.last().cloned().unwrap_or_else(|| ".".to_owned()),
    }
}

/// `hashFiles` patterns as repository-relative matchers, last match wins
/// (a `!` pattern excludes), a matched directory covers its descendants.
struct HashGlobs {
    patterns: Vec<(bool, GlobMatcher)>,
}

impl HashGlobs {
    fn new(patterns: &[String], prefix: &str) -> Result<HashGlobs> {
        let mut out = Vec::new();
        for pattern in patterns {
            let (include, pattern) = match pattern.strip_prefix('!') {
                Some(rest) => (false, rest),
                None => (true, pattern.as_str()),
            };
            let pattern = pattern.trim().trim_start_matches("./");
            let relative = if prefix == "." {
                Some(pattern)
            } else {
                pattern.strip_prefix(&format!("{prefix}/"))
            };
            // A pattern outside the checkout cannot match a repository file.
            let Some(relative) = relative else { continue };
            let glob = globset::GlobBuilder::new(relative)
                .literal_separator(true)
                .build()?
                .compile_matcher();
            out.push((include, glob));
        }
        Ok(HashGlobs { patterns: out })
    }

    fn matches(&self, path: &str) -> bool {
        let mut candidates = vec![path];
        let mut rest = path;
        while let Some((parent, _)) = rest.rsplit_once('/') {
            candidates.push(parent);
            rest = parent;
        }
        let mut matched = false;
        for (include, glob) in &self.patterns {
            if candidates.iter().any(|c| glob.is_match(c)) {
                matched = *include;
            }
        }
        matched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_globs_follow_actions_glob() {
        let globs = HashGlobs::new(
            &[
                "pr/Cargo.lock".into(),
                "pr/**/Cargo.toml".into(),
                "pr/src".into(),
                "!pr/src/generated/**".into(),
                "other/**".into(),
            ],
            "pr",
        )
        .unwrap();
        assert!(
            globs.matches("Cargo.toml"),
            "`**/` matches zero directories"
        );
        assert!(globs.matches("crates/a/Cargo.toml"));
        assert!(
            globs.matches("src/deep/lib.rs"),
            "a directory covers its descendants"
        );
        assert!(!globs.matches("src/generated/x.rs"), "a later `!` excludes");
        assert!(!globs.matches("benches/b.rs"));
        assert!(!globs.matches("other/x"), "outside the checkout path");
        let star = HashGlobs::new(&["*.toml".into()], ".").unwrap();
        assert!(!star.matches("a/b.toml"), "`*` does not cross `/`");
        assert!(star.matches(".cargo.toml"), "dotfiles match");
    }

    fn steps(yaml_steps: &str) -> Workflow {
        Workflow::parse(
            "x.yml",
            &format!("on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n{yaml_steps}"),
        )
        .unwrap()
    }

    #[test]
    fn key_signatures_ignore_trailing_space_but_not_directories() {
        let wf = steps(
            "      - id: k
        working-directory: ./trusted/
        run: |
          cargo   xtask ci-key --root ../pr   \n
      - id: k
        run: cargo xtask ci-key --root ../pr
      - id: k
        working-directory: trusted
        run: cargo xtask ci-key --manifest-path ../tools/Cargo.toml
",
        );
        let job = &wf.jobs[0];
        let sigs: Vec<KeySignature> = job
            .steps
            .iter()
            .map(|s| key_signature(&wf, job, s))
            .collect();
        assert_eq!(
            sigs[0].ci_key.as_deref(),
            Some("cargo xtask ci-key --root ../pr")
        );
        assert_eq!(sigs[0].working_directory, "trusted");
        assert_eq!(sigs[0].ci_key, sigs[1].ci_key);
        assert_ne!(
            sigs[0], sigs[1],
            "the working directory is part of the key computation"
        );
        assert_eq!(sigs[2].xtask_dir(), "tools");
    }

    #[test]
    fn directories_normalize() {
        assert_eq!(normalize_dir("./trusted/"), "trusted");
        assert_eq!(normalize_dir("${{ github.workspace }}/a/./b"), "a/b");
        assert_eq!(normalize_dir(""), ".");
        assert!(is_within("trusted/xtask", "trusted"));
        assert!(!is_within("trustedx", "trusted"));
    }
}
