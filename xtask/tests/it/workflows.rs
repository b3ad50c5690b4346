//! A structural validator of this repository's five workflows.
//!
//! `check-contracts` judges any repository's workflows against the cache-trust
//! rules; this validator pins down the structure of *this* repository's CI
//! template, which a maintainer copies into a GPU project: triggers, job
//! names, permissions, `cache-mode`, the trusted/PR checkout layout, the key
//! step shared by publisher and consumer, the `if:` guards and the action
//! pins. It parses the files with a real YAML parser (duplicate keys are an
//! error), and every rule has a test below that breaks it in a copy of the
//! real files and expects the validator to say so.

use std::collections::BTreeMap;

use marked_yaml::types::{MarkedMappingNode, MarkedSequenceNode};
use marked_yaml::{LoaderOptions, Node};

const CI: &str = "ci.yml";
const PUBLISH: &str = "ci-cache-publish.yml";
const CONSUMER: &str = "runpod-gpu-test.yml";
const EXECUTE: &str = "runpod-gpu-execute.yml";
const REAP: &str = "runpod-reap.yml";
const WORKFLOWS: [&str; 5] = [CI, PUBLISH, CONSUMER, EXECUTE, REAP];

thread_local! {
    /// The repository whose workflows and policy are validated: this one,
    /// unless [`validate_repository`] names another (a host `init-ci` wrote).
    static VALIDATED_ROOT: std::cell::RefCell<Option<std::path::PathBuf>> =
        const { std::cell::RefCell::new(None) };
}

fn validated_root() -> std::path::PathBuf {
    VALIDATED_ROOT
        .with(|r| r.borrow().clone())
        .unwrap_or_else(repo_root)
}

/// The `name:` of every workflow of the validated repository.
fn host_workflow_names() -> Vec<String> {
    let dir = validated_root().join(".github/workflows");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if let Ok(Node::Mapping(root)) = marked_yaml::parse_yaml(0, &text) {
            if let Some(name) = root.get_scalar("name") {
                names.push(name.as_str().to_owned());
            }
        }
    }
    names
}

fn policy() -> toml::Table {
    let text = std::fs::read_to_string(validated_root().join(".github/ci-trust.toml"))
        .expect("read .github/ci-trust.toml");
    toml::from_str(&text).expect("parse .github/ci-trust.toml")
}

/// Validates the five workflows of another repository against its own
/// policy (for the workflows `init-ci` writes into a host).
// Only the adoption tests call it, and they are Unix-only.
#[cfg_attr(not(unix), allow(dead_code))]
pub fn validate_repository(root: &std::path::Path) -> Vec<String> {
    VALIDATED_ROOT.with(|r| *r.borrow_mut() = Some(root.to_path_buf()));
    // A host's CI is its own; init-ci's checks stand in its place.
    let files = WORKFLOWS
        .iter()
        .map(|file| {
            let name = if *file == CI { "ci-trust.yml" } else { file };
            let path = root.join(".github/workflows").join(name);
            (*file, std::fs::read_to_string(&path).unwrap_or_default())
        })
        .collect();
    let problems = validate(&files);
    VALIDATED_ROOT.with(|r| *r.borrow_mut() = None);
    problems
}

/// The nextest archives of this repository's policy: what the pod must run.
fn policy_nextest_archives() -> Vec<String> {
    policy()
        .get("archive")
        .and_then(|a| a.as_array())
        .map(|entries| {
            entries
                .iter()
                .filter(|entry| entry.get("nextest").is_some())
                .filter_map(|entry| entry.get("file")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The step id of the key step, from this repository's policy.
fn key_step_id() -> String {
    policy()
        .get("key")
        .and_then(|key| key.get("step-id"))
        .and_then(|id| id.as_str())
        .unwrap_or("archive_key")
        .to_owned()
}

fn repo_root() -> std::path::PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().unwrap().to_path_buf()
}

fn real_workflows() -> BTreeMap<&'static str, String> {
    WORKFLOWS
        .iter()
        .map(|file| {
            let path = repo_root().join(".github/workflows").join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("read {}: {err}", path.display()));
            (*file, text)
        })
        .collect()
}

/// One parsed workflow and the problems found in it.
struct Workflow<'a> {
    file: &'a str,
    text: &'a str,
    root: MarkedMappingNode,
}

struct Validator {
    problems: Vec<String>,
}

impl Validator {
    fn fail(&mut self, wf: &Workflow, line: usize, message: impl std::fmt::Display) {
        self.problems.push(format!("{}:{line}: {message}", wf.file));
    }
}

fn line_of(node: &Node) -> usize {
    node.span().start().map_or(0, |marker| marker.line())
}

fn map_line(map: &MarkedMappingNode) -> usize {
    map.span().start().map_or(0, |marker| marker.line())
}

fn scalar<'n>(map: &'n MarkedMappingNode, key: &str) -> Option<&'n str> {
    map.get_scalar(key).map(|s| s.as_str())
}

/// The value of a step's `env:` variable `name`.
fn env<'n>(step: &'n MarkedMappingNode, name: &str) -> Option<&'n str> {
    step.get_mapping("env").and_then(|env| scalar(env, name))
}

/// Every scalar under `node`, with its line: for scanning a job's text.
fn scalars<'n>(node: &'n Node, out: &mut Vec<(&'n str, usize)>) {
    match node {
        Node::Scalar(s) => out.push((s.as_str(), line_of(node))),
        Node::Sequence(seq) => seq.iter().for_each(|n| scalars(n, out)),
        Node::Mapping(map) => map.values().for_each(|n| scalars(n, out)),
    }
}

fn jobs<'n>(wf: &'n Workflow) -> Vec<(&'n str, &'n MarkedMappingNode)> {
    wf.root
        .get_mapping("jobs")
        .map(|jobs| {
            jobs.iter()
                .filter_map(|(name, job)| Some((name.as_str(), job.as_mapping()?)))
                .collect()
        })
        .unwrap_or_default()
}

fn job<'n>(wf: &'n Workflow, name: &str) -> Option<&'n MarkedMappingNode> {
    wf.root.get_mapping("jobs")?.get_mapping(name)
}

fn steps(job: &MarkedMappingNode) -> Vec<&MarkedMappingNode> {
    job.get_sequence("steps")
        .map(|steps| steps.iter().filter_map(Node::as_mapping).collect())
        .unwrap_or_default()
}

/// The steps of `job` that use `action` (`owner/repo[/path]`, any ref).
fn steps_using<'n>(job: &'n MarkedMappingNode, action: &str) -> Vec<&'n MarkedMappingNode> {
    steps(job)
        .into_iter()
        .filter(|step| {
            scalar(step, "uses").is_some_and(|uses| uses.split('@').next() == Some(action))
        })
        .collect()
}

fn with<'n>(step: &'n MarkedMappingNode, key: &str) -> Option<&'n str> {
    step.get_mapping("with").and_then(|w| scalar(w, key))
}

fn step_with_id<'n>(
    job: &'n MarkedMappingNode,
    id: &str,
) -> Option<(usize, &'n MarkedMappingNode)> {
    steps(job)
        .into_iter()
        .enumerate()
        .find(|(_, step)| scalar(step, "id") == Some(id))
}

/// A permissions mapping as sorted `scope: level` pairs; `None` when absent
/// or not a mapping (`read-all`, `write-all`).
fn permissions(map: &MarkedMappingNode) -> Option<Vec<(String, String)>> {
    let perms = map.get_mapping("permissions")?;
    let mut pairs: Vec<(String, String)> = perms
        .iter()
        .map(|(k, v)| {
            let level = v.as_scalar().map_or("?", |s| s.as_str());
            (k.as_str().to_owned(), level.to_owned())
        })
        .collect();
    pairs.sort();
    Some(pairs)
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    pairs.sort();
    pairs
}

fn sequence_strings(seq: Option<&MarkedSequenceNode>) -> Vec<&str> {
    seq.map(|seq| {
        seq.iter()
            .filter_map(|n| n.as_scalar().map(|s| s.as_str()))
            .collect()
    })
    .unwrap_or_default()
}

/// Parses the workflows and returns every problem found, as `file:line: message`.
fn validate(files: &BTreeMap<&'static str, String>) -> Vec<String> {
    let mut v = Validator {
        problems: Vec::new(),
    };
    let mut parsed = BTreeMap::new();
    for file in WORKFLOWS {
        let Some(text) = files.get(file) else {
            v.problems.push(format!("{file}: missing"));
            continue;
        };
        let options = LoaderOptions::default().error_on_duplicate_keys(true);
        match marked_yaml::parse_yaml_with_options(0, text, options) {
            Ok(Node::Mapping(root)) => {
                parsed.insert(file, Workflow { file, text, root });
            }
            Ok(_) => v
                .problems
                .push(format!("{file}: the top level is not a mapping")),
            Err(err) => v.problems.push(format!("{file}: does not parse: {err:?}")),
        }
    }
    if parsed.len() != WORKFLOWS.len() {
        return v.problems;
    }
    for wf in parsed.values() {
        check_common(&mut v, wf);
    }
    check_ci(&mut v, &parsed[CI], &parsed[CONSUMER]);
    check_publisher(&mut v, &parsed[PUBLISH]);
    check_consumer(&mut v, &parsed[CONSUMER], &parsed[PUBLISH]);
    check_runtime_staging(&mut v, &parsed[CONSUMER], &parsed[PUBLISH]);
    check_prebuilt_xtask(&mut v, &parsed[PUBLISH], &parsed[CONSUMER]);
    check_execute(&mut v, &parsed[EXECUTE]);
    check_reaper(&mut v, &parsed[REAP]);
    v.problems
}

/// Rules for every workflow: pins, permissions, credentials, cache writes.
fn check_common(v: &mut Validator, wf: &Workflow) {
    let top = wf.root.get_node("permissions");
    if !top.and_then(Node::as_mapping).is_some_and(|p| p.is_empty()) {
        let line = top.map_or(1, line_of);
        v.fail(
            wf,
            line,
            "top-level `permissions` must be `{}`; grant scopes per job",
        );
    }
    if let Some(on) = wf.root.get_node("on") {
        let mut triggers = Vec::new();
        scalars(on, &mut triggers);
        let names: Vec<&str> = match on {
            Node::Mapping(map) => map.keys().map(|k| k.as_str()).collect(),
            _ => triggers.iter().map(|(s, _)| *s).collect(),
        };
        for bad in ["pull_request_target", "issue_comment"] {
            if names.contains(&bad) {
                v.fail(
                    wf,
                    line_of(on),
                    format!("`{bad}` runs untrusted input with the base repository's credentials"),
                );
            }
        }
    }
    for (name, job) in jobs(wf) {
        let line = map_line(job);
        let reusable = job.get_scalar("uses").is_some();
        if job.get_node("permissions").is_none() {
            v.fail(
                wf,
                line,
                format!("job `{name}` must declare its `permissions`"),
            );
        }
        if !reusable && job.get_node("timeout-minutes").is_none() {
            v.fail(wf, line, format!("job `{name}` needs `timeout-minutes`"));
        }
        if let Some(uses) = job.get_scalar("uses") {
            if !uses.as_str().starts_with("./.github/workflows/") {
                v.fail(
                    wf,
                    line,
                    format!("job `{name}` calls a reusable workflow outside this repository"),
                );
            }
        }
        if scalar(job, "secrets") == Some("inherit") {
            v.fail(
                wf,
                line,
                format!(
                    "job `{name}` passes `secrets: inherit`; pass nothing, or name each secret"
                ),
            );
        }
        if let Some(perms) = permissions(job) {
            for (scope, level) in &perms {
                let allowed = wf.file == REAP && name == "reap" && scope == "actions";
                if level == "write" && !allowed {
                    v.fail(
                        wf,
                        line,
                        format!(
                            "job `{name}` has `{scope}: write`; only the reaper may write (actions)"
                        ),
                    );
                }
            }
        } else if let Some(p) = job.get_scalar("permissions") {
            v.fail(
                wf,
                line,
                format!(
                    "job `{name}` has `permissions: {}`; list scopes explicitly",
                    p.as_str()
                ),
            );
        }
        let cache_mode = scalar(job, "cache-mode");
        if cache_mode == Some("write") && wf.file != PUBLISH {
            v.fail(
                wf,
                line,
                format!(
                    "job `{name}` has `cache-mode: write`; only {PUBLISH} writes shared caches"
                ),
            );
        }
        if matches!(wf.file, CONSUMER | EXECUTE | REAP)
            && !reusable
            && !matches!(cache_mode, Some("read" | "none"))
        {
            v.fail(
                wf,
                line,
                format!(
                    "job `{name}` runs in the main scope and must say `cache-mode: read` or `none`"
                ),
            );
        }
        let mut texts = Vec::new();
        job.values().for_each(|n| scalars(n, &mut texts));
        if texts.iter().any(|(t, _)| t.contains("secrets."))
            && scalar(job, "environment") != Some("runpod")
        {
            v.fail(
                wf,
                line,
                format!("job `{name}` reads secrets outside the main-only `runpod` environment"),
            );
        }
        for step in steps(job) {
            check_step(v, wf, name, step);
        }
    }
}

fn check_step(v: &mut Validator, wf: &Workflow, job: &str, step: &MarkedMappingNode) {
    let line = map_line(step);
    if let Some(uses) = scalar(step, "uses") {
        let (action, reference) = uses.split_once('@').unwrap_or((uses, ""));
        let is_sha = reference.len() == 40
            && reference
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
        if !uses.starts_with("./") && !is_sha {
            v.fail(
                wf,
                line,
                format!("`{uses}` is not pinned to a full 40-hex commit SHA"),
            );
        }
        // The version comment is not part of the YAML tree: read the source line.
        let uses_line = step.get_node("uses").map_or(line, line_of);
        let source = wf
            .text
            .lines()
            .nth(uses_line.saturating_sub(1))
            .unwrap_or("");
        let has_version = source
            .split_once(" # v")
            .is_some_and(|(_, version)| version.starts_with(|c: char| c.is_ascii_digit()));
        if !uses.starts_with("./") && !has_version {
            v.fail(
                wf,
                line,
                format!("`{action}` needs a `# vX.Y.Z` comment naming the pinned version"),
            );
        }
        if action == "actions/checkout" && with(step, "persist-credentials") != Some("false") {
            v.fail(
                wf,
                line,
                format!("checkout in job `{job}` must set `persist-credentials: false`"),
            );
        }
        if action == "actions/cache" {
            v.fail(wf, line, "`actions/cache` saves in its post step; use actions/cache/restore or actions/cache/save");
        }
        if action == "actions/cache/save" && wf.file != PUBLISH {
            v.fail(
                wf,
                line,
                format!("`actions/cache/save` in job `{job}`; only {PUBLISH} saves shared caches"),
            );
        }
        if action == "Swatinem/rust-cache"
            && !matches!(wf.file, CI | PUBLISH)
            && with(step, "save-if") != Some("false")
        {
            v.fail(
                wf,
                line,
                format!("rust-cache in job `{job}` must set `save-if: false`"),
            );
        }
    }
    if let Some(run) = scalar(step, "run") {
        if run.contains("${{") {
            v.fail(
                wf,
                line,
                format!("a `run:` in job `{job}` expands `${{{{ }}}}`; pass values through `env:`"),
            );
        }
    }
}

fn check_ci(v: &mut Validator, ci: &Workflow, consumer: &Workflow) {
    let name = scalar(&ci.root, "name").unwrap_or("");
    let triggered_by = consumer
        .root
        .get_mapping("on")
        .and_then(|on| on.get_mapping("workflow_run"))
        .map(|run| sequence_strings(run.get_sequence("workflows")))
        .unwrap_or_default();
    // In a host, init-ci's checks (`ci-trust.yml`) stand beside the host's
    // CI: the consumer may follow either, and only the checks are required.
    if ci.text.contains("@generated by ci-trust init-ci") {
        let names = host_workflow_names();
        if triggered_by.len() != 1 || !names.iter().any(|n| n == triggered_by[0]) {
            v.fail(consumer, 1, format!("{CONSUMER} must follow one workflow of the host ({names:?}), not {triggered_by:?}"));
        }
        if !jobs(ci).iter().any(|(_, job)| {
            steps(job).iter().any(|s| {
                scalar(s, "run").is_some_and(|r| r.contains("cargo xtask check-contracts"))
            })
        }) {
            v.fail(ci, 1, "no job runs `cargo xtask check-contracts`");
        }
        return;
    }
    if triggered_by != [name] {
        v.fail(ci, 1, format!("`name: {name}` must be the one workflow {CONSUMER} runs after (it names {triggered_by:?})"));
    }
    let on = ci.root.get_mapping("on");
    let has_pr = on.is_some_and(|on| on.get_node("pull_request").is_some());
    let push_branches = on
        .and_then(|on| on.get_mapping("push"))
        .map(|push| sequence_strings(push.get_sequence("branches")))
        .unwrap_or_default();
    if !has_pr || push_branches != ["main"] {
        v.fail(ci, 1, "CI must run on `pull_request` and on `push` to main");
    }
    let mut runs = String::new();
    for (_, job) in jobs(ci) {
        for step in steps(job) {
            runs.push_str(scalar(step, "run").unwrap_or(""));
            runs.push('\n');
        }
    }
    for command in [
        "cargo fmt --all --check",
        "cargo clippy --workspace --all-targets --locked -- -D warnings",
        "cargo test --workspace",
        "shellcheck -x scripts/ci/*.sh",
        "cargo xtask check-contracts",
        "cargo xtask verify-key",
    ] {
        if !runs.contains(command) {
            v.fail(ci, 1, format!("no job runs `{command}`"));
        }
    }
}

fn check_publisher(v: &mut Validator, wf: &Workflow) {
    let on = wf.root.get_mapping("on");
    let triggers: Vec<&str> = on
        .map(|on| on.keys().map(|k| k.as_str()).collect())
        .unwrap_or_default();
    let mut sorted = triggers.clone();
    sorted.sort();
    if sorted != ["push", "schedule", "workflow_dispatch"] {
        v.fail(
            wf,
            1,
            format!(
                "the publisher runs on push to main, a schedule and dispatch only, not {triggers:?}"
            ),
        );
    }
    let push_branches = on
        .and_then(|on| on.get_mapping("push"))
        .map(|push| sequence_strings(push.get_sequence("branches")))
        .unwrap_or_default();
    if push_branches != ["main"] {
        v.fail(
            wf,
            1,
            "the publisher's push trigger must be limited to main",
        );
    }
    let has_cron = on
        .and_then(|on| on.get_sequence("schedule"))
        .is_some_and(|s| {
            s.iter()
                .any(|e| e.as_mapping().and_then(|m| scalar(m, "cron")).is_some())
        });
    if !has_cron {
        v.fail(
            wf,
            1,
            "the publisher needs a weekly schedule to refresh evicted caches",
        );
    }
    for (name, job) in jobs(wf) {
        let line = map_line(job);
        let guard = scalar(job, "if").unwrap_or("");
        if !guard.starts_with("github.ref == 'refs/heads/main'") || guard.contains("||") {
            v.fail(wf, line, format!("job `{name}` must refuse to run off main: `if: github.ref == 'refs/heads/main' …` (no `||`)"));
        }
        if scalar(job, "cache-mode") != Some("write") {
            v.fail(
                wf,
                line,
                format!("publisher job `{name}` must say `cache-mode: write`"),
            );
        }
        if permissions(job) != Some(pairs(&[("contents", "read")])) {
            v.fail(
                wf,
                line,
                format!("publisher job `{name}` needs `contents: read` and nothing else"),
            );
        }
    }
    let Some(archive) = job(wf, "gpu-archive") else {
        v.fail(wf, 1, "no `gpu-archive` job");
        return;
    };
    check_layout(v, wf, "gpu-archive", archive, None);
    let key_id = key_step_id();
    let key_output = format!("${{{{ steps.{key_id}.outputs.key }}}}");
    let name_output = format!("${{{{ steps.{key_id}.outputs.artifact_name }}}}");
    let lookup = steps_using(archive, "actions/cache/restore");
    if !lookup.iter().any(|s| {
        with(s, "lookup-only") == Some("true") && with(s, "key") == Some(key_output.as_str())
    }) {
        v.fail(
            wf,
            map_line(archive),
            "gpu-archive must look the key up (`lookup-only: true`) before building",
        );
    }
    let noted = steps(archive).iter().any(|s| {
        scalar(s, "if").is_some_and(|c| c.contains("cache-hit == 'true'"))
            && scalar(s, "run").is_some_and(|r| r.contains("already published"))
    });
    if !noted {
        v.fail(
            wf,
            map_line(archive),
            "gpu-archive must log that a key is already published",
        );
    }
    let saves = steps_using(archive, "actions/cache/save");
    if !saves.iter().any(|s| {
        with(s, "key") == Some(key_output.as_str()) && with(s, "path") == Some("gpu-archive")
    }) {
        v.fail(
            wf,
            map_line(archive),
            "gpu-archive must save `gpu-archive` under the key",
        );
    }
    check_upload(v, wf, "gpu-archive", archive, &name_output);
    for (name, script) in [
        ("cuda-toolkit", "install_cuda_toolkit_hosted.sh"),
        ("cuda-runtime", "install_cuda_runtime_tree.sh"),
        ("cutensor", "install_cutensor.sh"),
    ] {
        let Some(job) = job(wf, name) else {
            v.fail(wf, 1, format!("no `{name}` job"));
            continue;
        };
        let matrix = job
            .get_mapping("strategy")
            .and_then(|s| s.get_mapping("matrix"));
        if !matrix.is_some_and(|m| {
            m.values()
                .all(|n| n.as_sequence().is_some_and(|s| !s.is_empty()))
                && !m.is_empty()
        }) {
            v.fail(
                wf,
                map_line(job),
                format!("`{name}` takes its versions from a non-empty matrix"),
            );
        }
        let runs_script = steps(job).iter().any(|s| {
            scalar(s, "run").is_some_and(|r| r.contains(&format!("trusted/scripts/ci/{script}")))
        });
        if !runs_script {
            v.fail(
                wf,
                map_line(job),
                format!("`{name}` must install and verify with trusted/scripts/ci/{script}"),
            );
        }
        let restores = steps_using(job, "actions/cache/restore");
        if restores.iter().any(|s| with(s, "restore-keys").is_some()) || restores.is_empty() {
            v.fail(
                wf,
                map_line(job),
                format!("`{name}` must restore by exact key (no `restore-keys`)"),
            );
        }
    }
}

/// The trusted/PR checkout layout shared by publisher and consumer, and the
/// key step that must run in `trusted/` against `../pr`.
fn check_layout(
    v: &mut Validator,
    wf: &Workflow,
    name: &str,
    job: &MarkedMappingNode,
    pr_ref: Option<&str>,
) {
    let checkouts = steps_using(job, "actions/checkout");
    let layout: Vec<(Option<&str>, Option<&str>)> = checkouts
        .iter()
        .map(|s| (with(s, "path"), with(s, "ref")))
        .collect();
    // The consumer pins trusted/ to the workflow's own commit and pr/ to the
    // authorized head; the publisher overrides neither: both are its own commit.
    let trusted_ref = pr_ref.map(|_| "${{ github.workflow_sha }}");
    let expected = [(Some("trusted"), trusted_ref), (Some("pr"), pr_ref)];
    if layout != expected {
        v.fail(
            wf,
            map_line(job),
            format!(
                "job `{name}` must check out trusted/ ({}) and pr/ ({}), in that order; found {layout:?}",
                trusted_ref.unwrap_or("no ref override"),
                pr_ref.unwrap_or("no ref override"),
            ),
        );
    }
    let key_id = key_step_id();
    match step_with_id(job, &key_id) {
        None => v.fail(
            wf,
            map_line(job),
            format!("job `{name}` has no key step `id: {key_id}`"),
        ),
        Some((_, step)) => {
            let run = scalar(step, "run").unwrap_or("");
            if scalar(step, "working-directory") != Some("trusted")
                || !run.contains("cargo xtask ci-key")
                || !run.contains("--root ../pr")
            {
                v.fail(wf, map_line(step), "the key step must run the trusted xtask (`working-directory: trusted`, `cargo xtask ci-key --root ../pr`)");
            }
        }
    }
}

fn check_upload(
    v: &mut Validator,
    wf: &Workflow,
    name: &str,
    job: &MarkedMappingNode,
    name_output: &str,
) {
    let uploads = steps_using(job, "actions/upload-artifact");
    let ok = uploads.iter().any(|s| {
        with(s, "name") == Some(name_output)
            && with(s, "path") == Some("gpu-archive")
            && with(s, "retention-days") == Some("7")
    });
    if !ok {
        v.fail(wf, map_line(job), format!("job `{name}` must upload gpu-archive as an artifact named {name_output}, kept 7 days"));
    }
}

fn check_consumer(v: &mut Validator, wf: &Workflow, publisher: &Workflow) {
    // The finder binds a consumer artifact to the head commit its run name
    // states; a run name without it makes every consumer artifact unusable,
    // and one from PR-controlled text would make the binding worthless.
    if scalar(&wf.root, "run-name")
        != Some("GPU tests for ${{ github.event.workflow_run.head_sha || inputs.head_sha }}")
    {
        v.fail(
            wf,
            1,
            "the consumer's `run-name` must state the head commit it tests",
        );
    }
    let on = wf.root.get_mapping("on");
    let run = on.and_then(|on| on.get_mapping("workflow_run"));
    if run.map(|r| sequence_strings(r.get_sequence("types"))) != Some(vec!["in_progress"]) {
        v.fail(
            wf,
            1,
            "the consumer runs on `workflow_run` with `types: [in_progress]`",
        );
    }
    let inputs = on
        .and_then(|on| on.get_mapping("workflow_dispatch"))
        .and_then(|d| d.get_mapping("inputs"));
    if !inputs
        .is_some_and(|i| i.get_node("pr_number").is_some() && i.get_node("head_sha").is_some())
    {
        v.fail(
            wf,
            1,
            "the recovery dispatch needs `pr_number` and `head_sha` inputs",
        );
    }
    let triggers: Vec<&str> = on
        .map(|on| on.keys().map(|k| k.as_str()).collect())
        .unwrap_or_default();
    if triggers
        .iter()
        .any(|t| !matches!(*t, "workflow_run" | "workflow_dispatch"))
    {
        v.fail(
            wf,
            1,
            format!(
                "the consumer runs on workflow_run and workflow_dispatch only, not {triggers:?}"
            ),
        );
    }
    match job(wf, "authorize") {
        None => v.fail(wf, 1, "no `authorize` job"),
        Some(authorize) => {
            let guard = scalar(authorize, "if").unwrap_or("");
            if !guard.contains("github.event.workflow_run.event == 'pull_request'") {
                v.fail(
                    wf,
                    map_line(authorize),
                    "`authorize` must accept only pull_request runs of CI",
                );
            }
            let script: String = steps(authorize)
                .iter()
                .filter_map(|s| scalar(s, "run"))
                .collect();
            for needle in ["collaborators/", "REPO_ID", "head_sha="] {
                if !script.contains(needle) {
                    v.fail(wf, map_line(authorize), format!("`authorize` must check the role, the repository and pin the head SHA (missing `{needle}`)"));
                }
            }
        }
    }
    let Some(archive) = job(wf, "cuda-archive") else {
        v.fail(wf, 1, "no `cuda-archive` job");
        return;
    };
    if scalar(archive, "needs") != Some("authorize") {
        v.fail(
            wf,
            map_line(archive),
            "`cuda-archive` must need `authorize`",
        );
    }
    if permissions(archive) != Some(pairs(&[("contents", "read"), ("actions", "read")])) {
        v.fail(
            wf,
            map_line(archive),
            "`cuda-archive` gets `contents: read` and `actions: read` (the finder), nothing more",
        );
    }
    check_layout(
        v,
        wf,
        "cuda-archive",
        archive,
        Some("${{ needs.authorize.outputs.head_sha }}"),
    );
    let key_id = key_step_id();
    let key_output = format!("${{{{ steps.{key_id}.outputs.key }}}}");
    let name_output = format!("${{{{ steps.{key_id}.outputs.artifact_name }}}}");
    let theirs = job(publisher, "gpu-archive").and_then(|j| step_with_id(j, &key_id));
    if let (Some((index, ours)), Some((_, theirs))) = (step_with_id(archive, &key_id), theirs) {
        let fields = |step: &MarkedMappingNode| -> Vec<(String, String)> {
            step.iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        v.as_scalar()
                            .map_or("<not a scalar>", |s| s.as_str())
                            .to_owned(),
                    )
                })
                .collect()
        };
        if fields(ours) != fields(theirs) {
            v.fail(
                wf,
                map_line(ours),
                format!("the key step differs from {PUBLISH}'s; they must be byte-identical"),
            );
        }
        let restore = steps(archive).into_iter().enumerate().find(|(_, s)| {
            scalar(s, "uses").is_some_and(|u| u.starts_with("actions/cache/restore@"))
                && with(s, "path") != Some(PREBUILT_XTASK_PATH)
        });
        match restore {
            Some((at, step)) if at > index => {
                if with(step, "key") != Some(key_output.as_str())
                    || with(step, "restore-keys").is_some()
                    || with(step, "path") != Some("gpu-archive")
                {
                    v.fail(wf, map_line(step), "the archive restore must use exactly the key (no `restore-keys`) and path gpu-archive");
                }
            }
            _ => v.fail(
                wf,
                map_line(archive),
                "`cuda-archive` must restore the archive cache after computing the key",
            ),
        }
    }
    let builds = steps(archive).into_iter().any(|s| {
        scalar(s, "working-directory") == Some("trusted")
            && scalar(s, "run").is_some_and(|r| {
                r.contains("cargo xtask gpu-archive")
                    && r.contains("--reuse")
                    && r.contains("--head-sha \"$HEAD_SHA\"")
                    && r.contains("--trust-policy .github/ci-trust.toml")
            })
            && env(s, "HEAD_SHA") == Some("${{ needs.authorize.outputs.head_sha }}")
    });
    if !builds {
        v.fail(
            wf,
            map_line(archive),
            "`cuda-archive` must run the trusted `cargo xtask gpu-archive … --reuse --head-sha … --trust-policy .github/ci-trust.toml` with the authorized head",
        );
    }
    check_upload(v, wf, "cuda-archive", archive, &name_output);
    match job(wf, "gpu-tests") {
        None => v.fail(wf, 1, "no `gpu-tests` job"),
        Some(tests) => {
            if scalar(tests, "uses") != Some("./.github/workflows/runpod-gpu-execute.yml") {
                v.fail(
                    wf,
                    map_line(tests),
                    "`gpu-tests` must call ./.github/workflows/runpod-gpu-execute.yml",
                );
            }
            let archives: Vec<&str> = tests
                .get_mapping("with")
                .and_then(|w| scalar(w, "archives"))
                .map(|a| a.split_whitespace().collect())
                .unwrap_or_default();
            if archives != policy_nextest_archives() {
                v.fail(
                    wf,
                    map_line(tests),
                    format!(
                        "`gpu-tests` runs archives {archives:?}, but the policy's nextest [[archive]] files are {:?}",
                        policy_nextest_archives()
                    ),
                );
            }
            if tests.get_node("secrets").is_some() {
                v.fail(
                    wf,
                    map_line(tests),
                    "`gpu-tests` passes no secrets: they live in the `runpod` environment",
                );
            }
            if permissions(tests) != Some(pairs(&[("contents", "read")])) {
                v.fail(
                    wf,
                    map_line(tests),
                    "`gpu-tests` grants the lifecycle a read-only ceiling: `contents: read`",
                );
            }
        }
    }
}

/// The consumer's `gpu-runtime` restores what the publisher saved: the same
/// cache keys (the publisher's matrix values in place of the consumer's env),
/// versions the publisher publishes, and trusted scripts only.
fn check_runtime_staging(v: &mut Validator, wf: &Workflow, publisher: &Workflow) {
    let Some(stage) = job(wf, "gpu-runtime") else {
        v.fail(wf, 1, "no `gpu-runtime` job");
        return;
    };
    let line = map_line(stage);
    let checkouts = steps_using(stage, "actions/checkout");
    let trusted_only = checkouts.iter().all(|s| {
        with(s, "path") == Some("trusted") && with(s, "ref") == Some("${{ github.workflow_sha }}")
    });
    if !trusted_only {
        v.fail(
            wf,
            line,
            "`gpu-runtime` never checks out the pull request: trusted/ at the workflow's SHA only",
        );
    }
    let env = |name: &str| {
        stage
            .get_mapping("env")
            .and_then(|e| scalar(e, name))
            .unwrap_or("")
            .to_owned()
    };
    for (publisher_job, matrix_key, env_name, placeholders) in [
        (
            "cuda-runtime",
            "cuda",
            "CUDA_VERSION",
            &[("${{ env.CUDA_VERSION }}", "${{ matrix.cuda }}")][..],
        ),
        (
            "cutensor",
            "cutensor",
            "CUTENSOR_VERSION",
            &[
                ("${{ env.CUTENSOR_VERSION }}", "${{ matrix.cutensor }}"),
                ("${{ env.CUTENSOR_CUDA_MAJOR }}", "${{ matrix.cuda-major }}"),
            ][..],
        ),
    ] {
        let Some(theirs) = job(publisher, publisher_job) else {
            continue;
        };
        let published: Vec<&str> = theirs
            .get_mapping("strategy")
            .and_then(|s| s.get_mapping("matrix"))
            .map(|m| sequence_strings(m.get_sequence(matrix_key)))
            .unwrap_or_default();
        let version = env(env_name);
        if !published.contains(&version.as_str()) {
            v.fail(wf, line, format!("`gpu-runtime` stages {env_name}={version}, which {PUBLISH} `{publisher_job}` does not publish ({published:?})"));
        }
        let their_keys: Vec<&str> = steps_using(theirs, "actions/cache/restore")
            .iter()
            .filter_map(|s| with(s, "key"))
            .collect();
        let stem = their_keys
            .first()
            .and_then(|k| k.split("-${{").next())
            .unwrap_or("");
        let ours = steps_using(stage, "actions/cache/restore")
            .into_iter()
            .filter_map(|s| with(s, "key"))
            .find(|k| !stem.is_empty() && k.starts_with(&format!("{stem}-")));
        let translated = ours.map(|k| {
            placeholders
                .iter()
                .fold(k.to_owned(), |key, (from, to)| key.replace(from, to))
        });
        if translated.is_none() || their_keys.first().map(|k| k.to_string()) != translated {
            v.fail(wf, line, format!("`gpu-runtime` must restore `{publisher_job}` under the publisher's key {their_keys:?}, found {ours:?}"));
        }
    }
    let saves = !steps_using(stage, "actions/cache/save").is_empty();
    if saves {
        v.fail(wf, line, "`gpu-runtime` restores only");
    }
}

/// Where the prebuilt xtask is restored to and saved from.
const PREBUILT_XTASK_PATH: &str = "xtask-bin";

/// The prebuilt xtask: the publisher's `gpu-archive` is its only writer and
/// saves it under the key it restores with; the consumer's `cuda-archive`
/// restores it by the same exact key (no `restore-keys`). In both, the
/// restore and the step that routes `cargo xtask` to it are byte-identical
/// and come before the key step.
fn check_prebuilt_xtask(v: &mut Validator, publisher: &Workflow, consumer: &Workflow) {
    let key_id = key_step_id();
    let mut restores = Vec::new();
    for (wf, job_name) in [(publisher, "gpu-archive"), (consumer, "cuda-archive")] {
        let Some(job) = job(wf, job_name) else {
            continue;
        };
        let all = steps(job);
        let key_at = all
            .iter()
            .position(|s| scalar(s, "id") == Some(key_id.as_str()));
        let restore_at = all.iter().position(|s| {
            scalar(s, "uses").is_some_and(|u| u.starts_with("actions/cache/restore@"))
                && with(s, "path") == Some(PREBUILT_XTASK_PATH)
        });
        let use_at = all.iter().position(|s| {
            scalar(s, "run").is_some_and(|r| r.contains("scripts/ci/use_prebuilt_xtask.sh"))
        });
        let (Some(key_at), Some(restore_at), Some(use_at)) = (key_at, restore_at, use_at) else {
            v.fail(
                wf,
                1,
                format!(
                    "`{job_name}` must restore the prebuilt xtask and use it before the key step"
                ),
            );
            continue;
        };
        if !(restore_at < use_at && use_at < key_at) {
            v.fail(
                wf,
                map_line(all[restore_at]),
                format!(
                    "`{job_name}` must restore the prebuilt xtask and use it before the key step"
                ),
            );
        }
        let restore = all[restore_at];
        if with(restore, "restore-keys").is_some()
            || !with(restore, "key").is_some_and(|k| {
                k.starts_with("xtask-bin-")
                    && k.contains("hashFiles('trusted/xtask/**', 'trusted/crates/**'")
            })
        {
            v.fail(wf, map_line(restore), "the prebuilt xtask restore must use exactly its key (`xtask-bin-…` over trusted/xtask/** and trusted/crates/**, no `restore-keys`)");
        }
        restores.push((wf, restore, all[use_at]));
    }
    if let [
        (_, publisher_restore, publisher_use),
        (wf, consumer_restore, consumer_use),
    ] = restores[..]
    {
        for (ours, theirs) in [
            (consumer_restore, publisher_restore),
            (consumer_use, publisher_use),
        ] {
            if scalar(ours, "run") != scalar(theirs, "run")
                || with(ours, "key") != with(theirs, "key")
                || with(ours, "path") != with(theirs, "path")
                || scalar(ours, "if") != scalar(theirs, "if")
            {
                v.fail(
                    wf,
                    map_line(ours),
                    format!("the prebuilt xtask steps must be byte-identical to {PUBLISH}'s"),
                );
            }
        }
        let saves: Vec<&MarkedMappingNode> = job(publisher, "gpu-archive")
            .map(|job| steps_using(job, "actions/cache/save"))
            .unwrap_or_default()
            .into_iter()
            .filter(|s| with(s, "path") == Some(PREBUILT_XTASK_PATH))
            .collect();
        if saves.len() != 1 || with(saves[0], "key") != with(publisher_restore, "key") {
            v.fail(
                publisher,
                1,
                "`gpu-archive` must save the prebuilt xtask once, under the key it restores with",
            );
        }
        // What it saves is the optimised build (the cold fallback, the dev
        // build the key step compiles on a miss, stays what it is).
        let builds: Vec<&MarkedMappingNode> = job(publisher, "gpu-archive")
            .map(steps)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| {
                scalar(s, "run")
                    .is_some_and(|r| r.contains("install") && r.contains("xtask-bin/xtask"))
            })
            .collect();
        let optimised = builds.len() == 1
            && scalar(builds[0], "run").is_some_and(|r| {
                r.contains("cargo build --release --locked --package xtask")
                    && r.contains("target/release/xtask")
                    && !r.contains("target/debug/")
            });
        if !optimised {
            v.fail(
                publisher,
                builds.first().map_or(1, |s| map_line(s)),
                "`gpu-archive` must build the prebuilt xtask with `cargo build --release --locked --package xtask` and save target/release/xtask, the binary CI restores",
            );
        }
    }
}

fn check_execute(v: &mut Validator, wf: &Workflow) {
    let on = wf.root.get_mapping("on");
    let triggers: Vec<&str> = on
        .map(|on| on.keys().map(|k| k.as_str()).collect())
        .unwrap_or_default();
    if triggers != ["workflow_call"] {
        v.fail(
            wf,
            1,
            format!("the lifecycle is reusable only (`workflow_call`), not {triggers:?}"),
        );
    }
    for (name, job) in [
        ("create-pod", job(wf, "create-pod")),
        ("delete-pod", job(wf, "delete-pod")),
    ] {
        match job {
            None => v.fail(wf, 1, format!("no `{name}` job")),
            Some(job) if scalar(job, "environment") != Some("runpod") => {
                v.fail(
                    wf,
                    map_line(job),
                    format!("`{name}` must use the `runpod` environment"),
                );
            }
            Some(_) => {}
        }
    }
    if let Some(delete) = job(wf, "delete-pod") {
        let needs = sequence_strings(delete.get_sequence("needs"));
        if scalar(delete, "if") != Some("always()")
            || !needs.contains(&"create-pod")
            || !needs.contains(&"run-gpu-tests")
        {
            v.fail(
                wf,
                map_line(delete),
                "`delete-pod` must need create-pod and run-gpu-tests and run `if: always()`",
            );
        }
    }
    let Some(pod) = job(wf, "run-gpu-tests") else {
        v.fail(wf, 1, "no `run-gpu-tests` job");
        return;
    };
    let line = map_line(pod);
    let labels = sequence_strings(pod.get_sequence("runs-on"));
    if labels.first() != Some(&"self-hosted") {
        v.fail(
            wf,
            line,
            "`run-gpu-tests` runs on the pod's self-hosted runner",
        );
    }
    if pod.get_node("environment").is_some() {
        v.fail(
            wf,
            line,
            "the pod job must not use an environment: it would receive its secrets",
        );
    }
    let mut texts = Vec::new();
    pod.values().for_each(|n| scalars(n, &mut texts));
    if let Some((_, at)) = texts
        .iter()
        .find(|(t, _)| t.contains("secrets.") || t.contains("github.token"))
    {
        v.fail(wf, *at, "the pod job must receive no secret and no token");
    }
    if permissions(pod) != Some(pairs(&[("contents", "read")])) {
        v.fail(wf, line, "the pod job gets `contents: read` only");
    }
    let restore = steps_using(pod, "actions/cache/restore");
    if !restore.iter().any(|s| {
        with(s, "key") == Some("${{ inputs.archive_key }}") && with(s, "restore-keys").is_none()
    }) {
        v.fail(
            wf,
            line,
            "the pod job restores the archives by the exact key",
        );
    }
    let download = steps_using(pod, "actions/download-artifact");
    let fallback = download.iter().any(|s| {
        with(s, "name") == Some("${{ inputs.artifact_name }}")
            && scalar(s, "if").is_some_and(|c| c.contains("cache-hit != 'true'"))
    });
    if !fallback {
        v.fail(
            wf,
            line,
            "the pod job falls back to the calling run's artifact on a cache miss",
        );
    }
    let checks_runtime = steps(pod).iter().any(|s| {
        scalar(s, "if") == Some("inputs.runtime_artifact != ''")
            && scalar(s, "run").is_some_and(|r| r.contains(" cufft ") && r.contains("cutensor"))
    });
    if !checks_runtime {
        v.fail(wf, line, "the pod job must require the staged runtime's libraries (cuFFT, cuTENSOR, …) before the tests");
    }
    for step in steps(pod) {
        if let Some(run) = scalar(step, "run") {
            if run.split_whitespace().any(|word| word == "cargo") {
                v.fail(wf, map_line(step), "the pod job runs archived tests; it must not invoke cargo (no builds on the pod)");
            }
        }
    }
}

fn check_reaper(v: &mut Validator, wf: &Workflow) {
    let has_schedule = wf
        .root
        .get_mapping("on")
        .is_some_and(|on| on.get_node("schedule").is_some());
    if !has_schedule {
        v.fail(wf, 1, "the reaper runs on a schedule");
    }
    let Some(reap) = job(wf, "reap") else {
        v.fail(wf, 1, "no `reap` job");
        return;
    };
    let line = map_line(reap);
    let guard = scalar(reap, "if").unwrap_or("");
    if !guard.starts_with("github.ref == 'refs/heads/main'") || guard.contains("||") {
        v.fail(
            wf,
            line,
            "the reaper runs main's definition only: `if: github.ref == 'refs/heads/main' …`",
        );
    }
    if permissions(reap) != Some(pairs(&[("contents", "read"), ("actions", "write")])) {
        v.fail(wf, line, "the reaper gets `contents: read` and `actions: write` (to cancel expired runs), nothing more");
    }
    let checkouts = steps_using(reap, "actions/checkout");
    if checkouts.len() != 1 || with(checkouts[0], "ref") != Some("${{ github.workflow_sha }}") {
        v.fail(
            wf,
            line,
            "the reaper checks out `${{ github.workflow_sha }}` once",
        );
    }
    for step in steps(reap) {
        let uses = scalar(step, "uses").unwrap_or("");
        let run = scalar(step, "run").unwrap_or("");
        if uses.contains("cache") || uses.contains("install-action") || run.contains("cargo") {
            v.fail(
                wf,
                map_line(step),
                "the reaper never builds and never touches caches",
            );
        }
    }
    if !steps(reap)
        .iter()
        .any(|s| scalar(s, "run") == Some("scripts/ci/runpod_reap.sh"))
    {
        v.fail(wf, line, "the reaper runs scripts/ci/runpod_reap.sh");
    }
}

#[test]
fn prebuilt_xtask_breaches_are_caught() {
    // A reader that falls back to another binary, or computes its own key.
    assert_caught(
        CONSUMER,
        "          path: xtask-bin\n",
        "          path: xtask-bin\n          restore-keys: xtask-bin-\n",
        "exactly its key",
    );
    assert_caught(
        CONSUMER,
        "key: xtask-bin-v3-${{ runner.os }}-${{ env.RUST_TOOLCHAIN }}-${{ hashFiles('trusted/xtask/**'",
        "key: xtask-bin-v3-${{ runner.os }}-${{ hashFiles('trusted/xtask/**'",
        "byte-identical",
    );
    // The publisher saves under another key than it restores with.
    assert_caught(
        PUBLISH,
        "      - name: Publish the prebuilt xtask\n        if: steps.xtask_bin.outputs.cache-hit != 'true'\n        uses: actions/cache/save@5a3ec84eff668545956fd18022155c47e93e2684 # v4.2.3\n        with:\n          key: xtask-bin-v3-",
        "      - name: Publish the prebuilt xtask\n        if: steps.xtask_bin.outputs.cache-hit != 'true'\n        uses: actions/cache/save@5a3ec84eff668545956fd18022155c47e93e2684 # v4.2.3\n        with:\n          key: xtask-bin-v4-",
        "save the prebuilt xtask once",
    );
    // The dev build the key step compiled is saved instead of an optimised one.
    assert_caught(
        PUBLISH,
        "          cargo build --release --locked --package xtask\n          install -D -m 755 target/release/xtask \"$GITHUB_WORKSPACE/xtask-bin/xtask\"",
        "          install -D -m 755 target/debug/xtask \"$GITHUB_WORKSPACE/xtask-bin/xtask\"",
        "--release",
    );
    // Used after the key step: the key step compiled it anyway.
    assert_caught(
        CONSUMER,
        "      - name: Use the prebuilt xtask\n        if: steps.xtask_bin.outputs.cache-hit == 'true'\n        run: bash trusted/scripts/ci/use_prebuilt_xtask.sh \"$GITHUB_WORKSPACE/xtask-bin\"\n",
        "",
        "before the key step",
    );
}

#[test]
fn the_five_workflows_satisfy_the_design() {
    let problems = validate(&real_workflows());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Applies `from -> to` to `file` in a copy of the real workflows and
/// expects a problem containing `expected`.
fn assert_caught(file: &'static str, from: &str, to: &str, expected: &str) {
    let mut files = real_workflows();
    let text = files.get_mut(file).unwrap();
    assert!(text.contains(from), "{file} does not contain {from:?}");
    *text = text.replacen(from, to, 1);
    let problems = validate(&files);
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with(file) && p.contains(expected)),
        "mutating {file} ({from:?} -> {to:?}) was not caught as {expected:?}; problems: {problems:#?}"
    );
}

#[test]
fn unpinned_or_uncommented_actions_are_caught() {
    let pinned = "taiki-e/install-action@a416ddeedbd372e614cc1386e8b642692f66865e # v2.57.1";
    assert_caught(
        PUBLISH,
        pinned,
        "taiki-e/install-action@v2",
        "not pinned to a full 40-hex",
    );
    assert_caught(
        PUBLISH,
        pinned,
        "taiki-e/install-action@a416ddeedbd372e614cc1386e8b642692f66865e",
        "needs a `# vX.Y.Z` comment",
    );
    assert_caught(
        REAP,
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2",
        "actions/checkout@main # v4.2.2",
        "not pinned",
    );
}

#[test]
fn duplicate_keys_and_broken_yaml_are_caught() {
    assert_caught(
        REAP,
        "    timeout-minutes: 15\n",
        "    timeout-minutes: 15\n    timeout-minutes: 600\n",
        "does not parse",
    );
    assert_caught(CI, "jobs:\n", "jobs:\n  - [\n", "does not parse");
}

#[test]
fn credential_and_permission_breaches_are_caught() {
    assert_caught(
        REAP,
        "\npermissions: {}\n",
        "\npermissions: write-all\n",
        "top-level `permissions` must be `{}`",
    );
    assert_caught(
        CONSUMER,
        "      actions: read # the artifact finder",
        "      actions: write # the artifact finder",
        "only the reaper may write",
    );
    assert_caught(
        CONSUMER,
        "      contents: read\n      actions: read #",
        "      contents: read\n      packages: read\n      actions: read #",
        "`cuda-archive` gets `contents: read` and `actions: read`",
    );
    assert_caught(
        CI,
        "    permissions:\n      contents: read\n    timeout-minutes: 10\n",
        "    timeout-minutes: 10\n",
        "must declare its `permissions`",
    );
    assert_caught(
        REAP,
        "          persist-credentials: false\n",
        "",
        "must set `persist-credentials: false`",
    );
    assert_caught(
        CONSUMER,
        "    uses: ./.github/workflows/runpod-gpu-execute.yml\n",
        "    uses: ./.github/workflows/runpod-gpu-execute.yml\n    secrets: inherit\n",
        "`secrets: inherit`",
    );
    assert_caught(
        EXECUTE,
        "          ARCHIVES: ${{ inputs.archives }}\n",
        "          ARCHIVES: ${{ inputs.archives }}\n          KEY: ${{ secrets.RUNPOD_API_KEY }}\n",
        "no secret and no token",
    );
    assert_caught(
        EXECUTE,
        "    runs-on: [self-hosted, \"${{ needs.create-pod.outputs.runner_label }}\"]\n",
        "    runs-on: [self-hosted, \"${{ needs.create-pod.outputs.runner_label }}\"]\n    environment: runpod\n",
        "must not use an environment",
    );
    assert_caught(
        EXECUTE,
        "    environment: runpod\n    permissions: {}\n    cache-mode: none\n    timeout-minutes: 20\n",
        "    permissions: {}\n    cache-mode: none\n    timeout-minutes: 20\n",
        "outside the main-only `runpod` environment",
    );
    assert_caught(
        CI,
        "on:\n  pull_request:\n",
        "on:\n  pull_request_target:\n  pull_request:\n",
        "`pull_request_target`",
    );
}

#[test]
fn cache_write_breaches_are_caught() {
    assert_caught(
        CONSUMER,
        "    cache-mode: read\n",
        "    cache-mode: write\n",
        "only ci-cache-publish.yml writes",
    );
    assert_caught(
        REAP,
        "    cache-mode: none\n",
        "",
        "must say `cache-mode: read` or `none`",
    );
    assert_caught(
        PUBLISH,
        "    cache-mode: write\n    timeout-minutes: 90\n",
        "    timeout-minutes: 90\n",
        "must say `cache-mode: write`",
    );
    assert_caught(
        CONSUMER,
        "          save-if: false\n",
        "          save-if: true\n",
        "must set `save-if: false`",
    );
    assert_caught(
        CONSUMER,
        "uses: actions/cache/restore@5a3ec84eff668545956fd18022155c47e93e2684 # v4.2.3\n        with:\n          key: ${{ steps.archive_key.outputs.key }}\n",
        "uses: actions/cache/save@5a3ec84eff668545956fd18022155c47e93e2684 # v4.2.3\n        with:\n          key: ${{ steps.archive_key.outputs.key }}\n",
        "only ci-cache-publish.yml saves",
    );
    assert_caught(
        EXECUTE,
        "actions/cache/restore@",
        "actions/cache@",
        "saves in its post step",
    );
    assert_caught(
        CONSUMER,
        "          path: gpu-archive\n      - uses: Swatinem",
        "          path: gpu-archive\n          restore-keys: gpu-archive-\n      - uses: Swatinem",
        "exactly the key (no `restore-keys`)",
    );
}

#[test]
fn trust_layout_breaches_are_caught() {
    assert_caught(
        CONSUMER,
        "      archives: xtask-tests.tar.zst\n",
        "      archives: xtask-tests.tar.zst gpu-tests.tar.zst\n",
        "the policy's nextest [[archive]] files",
    );
    assert_caught(
        CONSUMER,
        "          ref: ${{ github.workflow_sha }}\n",
        "          ref: ${{ needs.authorize.outputs.head_sha }}\n",
        "must check out trusted/",
    );
    assert_caught(
        CONSUMER,
        "        run: cargo xtask ci-key --root ../pr --github-output\n",
        "        run: cargo xtask ci-key --root ../pr  --github-output\n",
        "differs from ci-cache-publish.yml's",
    );
    assert_caught(
        PUBLISH,
        "        working-directory: trusted\n        run: cargo xtask ci-key",
        "        working-directory: pr\n        run: cargo xtask ci-key",
        "must run the trusted xtask",
    );
    assert_caught(
        CONSUMER,
        "          args=(--root ../pr --out \"$GITHUB_WORKSPACE/gpu-archive\" --reuse --head-sha \"$HEAD_SHA\")\n",
        "          args=(--root ../pr --out \"$GITHUB_WORKSPACE/gpu-archive\" --head-sha \"$HEAD_SHA\")\n",
        "--reuse",
    );
    assert_caught(
        CONSUMER,
        " --reuse --head-sha \"$HEAD_SHA\")\n",
        " --reuse)\n",
        "--head-sha",
    );
    assert_caught(
        CONSUMER,
        "          args+=(--trust-policy .github/ci-trust.toml)\n",
        "",
        "--reuse --head-sha",
    );
    assert_caught(
        CONSUMER,
        "run-name: GPU tests for ${{ github.event.workflow_run.head_sha || inputs.head_sha }}\n",
        "run-name: GPU tests for ${{ github.event.workflow_run.display_title }}\n",
        "must state the head commit",
    );
    assert_caught(
        CONSUMER,
        "    needs: authorize\n",
        "",
        "must need `authorize`",
    );
    assert_caught(
        CONSUMER,
        "          retention-days: 7\n",
        "          retention-days: 30\n",
        "kept 7 days",
    );
    assert_caught(
        CONSUMER,
        "    types: [in_progress]\n",
        "    types: [completed]\n",
        "`types: [in_progress]`",
    );
    assert_caught(
        CONSUMER,
        "      github.event.workflow_run.event == 'pull_request'\n",
        "      true\n",
        "accept only pull_request runs",
    );
    assert_caught(
        CONSUMER,
        "          HEAD_SHA: ${{ needs.authorize.outputs.head_sha }}\n        run: |\n          set -euo pipefail\n          args=",
        "          HEAD_SHA: ${{ needs.authorize.outputs.head_sha }}\n        run: |\n          set -euo pipefail\n          echo ${{ github.event.workflow_run.head_branch }}\n          args=",
        "expands `${{ }}`",
    );
}

#[test]
fn runtime_staging_breaches_are_caught() {
    assert_caught(
        CONSUMER,
        "          key: cuda-runtime-${{ runner.os }}-${{ runner.arch }}-${{ env.CUDA_VERSION }}-minimal-v1\n",
        "          key: cuda-runtime-${{ runner.os }}-${{ runner.arch }}-${{ env.CUDA_VERSION }}-minimal-v2\n",
        "under the publisher's key",
    );
    assert_caught(
        CONSUMER,
        "-cuda${{ env.CUTENSOR_CUDA_MAJOR }}-runtime-v1\n",
        "-cuda11-runtime-v1\n",
        "must restore `cutensor` under the publisher's key",
    );
    assert_caught(
        CONSUMER,
        "      CUDA_VERSION: \"12.8.1\"\n",
        "      CUDA_VERSION: \"12.9.0\"\n",
        "does not publish",
    );
    assert_caught(
        CONSUMER,
        "          path: trusted\n          persist-credentials: false\n      - name: Prepare the tree root\n",
        "          path: trusted\n          persist-credentials: false\n      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          ref: ${{ needs.authorize.outputs.head_sha }}\n          path: pr\n          persist-credentials: false\n      - name: Prepare the tree root\n",
        "never checks out the pull request",
    );
}

#[test]
fn publisher_breaches_are_caught() {
    assert_caught(
        PUBLISH,
        "          path: pr\n",
        "          path: pr\n          ref: ${{ github.event.inputs.ref }}\n",
        "must check out trusted/ (no ref override) and pr/ (no ref override)",
    );
    assert_caught(
        PUBLISH,
        "    if: github.ref == 'refs/heads/main' && vars.CI_PUBLISH_CUDA == 'true'\n",
        "    if: vars.CI_PUBLISH_CUDA == 'true'\n",
        "must refuse to run off main",
    );
    assert_caught(
        PUBLISH,
        "    if: github.ref == 'refs/heads/main'\n",
        "    if: github.ref == 'refs/heads/main' || github.event_name == 'workflow_dispatch'\n",
        "must refuse to run off main",
    );
    assert_caught(
        PUBLISH,
        "  workflow_dispatch:\n",
        "  workflow_dispatch:\n  pull_request:\n",
        "push to main, a schedule and dispatch only",
    );
    assert_caught(
        PUBLISH,
        "          lookup-only: true\n",
        "",
        "look the key up",
    );
    assert_caught(
        PUBLISH,
        "$KEY is already published; nothing to build",
        "$KEY",
        "already published",
    );
    assert_caught(
        PUBLISH,
        "        cuda: [\"12.6.3\", \"12.8.1\"]\n",
        "        cuda: []\n",
        "non-empty matrix",
    );
    assert_caught(
        PUBLISH,
        "trusted/scripts/ci/install_cutensor.sh",
        "scripts/ci/install_cutensor.sh",
        "trusted/scripts/ci/install_cutensor.sh",
    );
    assert_caught(
        CI,
        "name: CI\n",
        "name: Checks\n",
        "must be the one workflow",
    );
    assert_caught(
        CI,
        "      - run: cargo xtask verify-key\n",
        "",
        "cargo xtask verify-key",
    );
}

#[test]
fn lifecycle_and_reaper_breaches_are_caught() {
    assert_caught(
        EXECUTE,
        "cudart cublas cublasLt cufft cusolver",
        "cudart cublas cublasLt cusolver",
        "require the staged runtime's libraries",
    );
    assert_caught(
        REAP,
        "    if: github.ref == 'refs/heads/main' && vars.RUNPOD_IMAGE != ''\n",
        "    if: vars.RUNPOD_IMAGE != ''\n",
        "runs main's definition only",
    );
    assert_caught(
        EXECUTE,
        "    if: always()\n",
        "    if: success()\n",
        "`if: always()`",
    );
    assert_caught(
        EXECUTE,
        "            cargo-nextest nextest run",
        "            cargo build && cargo-nextest nextest run",
        "must not invoke cargo",
    );
    assert_caught(
        EXECUTE,
        "        if: steps.archive_cache.outputs.cache-hit != 'true'\n",
        "",
        "falls back to the calling run's artifact",
    );
    assert_caught(
        REAP,
        "      actions: write #",
        "      packages: write\n      actions: write #",
        "only the reaper may write (actions)",
    );
    assert_caught(
        REAP,
        "        run: scripts/ci/runpod_reap.sh\n",
        "        run: cargo run -p reaper\n",
        "never builds",
    );
    assert_caught(
        REAP,
        "          ref: ${{ github.workflow_sha }}\n",
        "          ref: ${{ github.sha }}\n",
        "checks out `${{ github.workflow_sha }}`",
    );
}
