//! Recall by mutation (issue 19): a generator that plants each attack class
//! into real workflows, in several spellings, and benign mutations that must
//! raise nothing new; the test runs it on a small committed synthetic corpus
//! (`tests/fixtures/contracts/mutation/`) so that it guards CI, and, ignored,
//! on a real corpus:
//!
//! ```text
//! CHECK_CONTRACTS_CORPUS=/tmp/corpus [CHECK_CONTRACTS_HALF=dev|test] [CHECK_CONTRACTS_HOSTS=N] \
//!   cargo test -p xtask --test it -- --ignored mutation::real_corpus --nocapture
//! CHECK_CONTRACTS_SEED=/tmp/seed cargo test -p xtask --test it -- --ignored mutation::seed --nocapture
//! ```
//!
//! A planted attack is a job added to a real workflow (its triggers kept, the
//! attack's trigger added) that reuses one of the workflow's own build steps,
//! or, for the reusable-workflow spelling, a callee file the real workflow
//! calls. It is caught when check-contracts reports the class's rule on the
//! planted job at its designed severity. A benign mutation is caught (a false
//! alarm) when an error appears that the unmutated tree did not have.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

use crate::support::{Fixture, stderr, stdout};

/// The attack classes of issue 19.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// A cache save or `cache-mode: write` in a job that runs PR code.
    CacheWrite,
    /// A PR checkout in a job holding secrets, write scopes or OIDC.
    Credentials,
    /// PR code on a persistent self-hosted runner a trusted job shares.
    PersistentRunner,
    /// A PR-controlled value reaching `run:` in a privileged job.
    Injection,
    /// `GITHUB_ENV` written from PR bytes.
    GithubEnv,
    /// A cache write outside GitHub's (no `cache-mode` governs it).
    ExternalCache,
    /// A remote reusable workflow at a branch, handed secrets and a PR ref.
    RemoteWorkflow,
    /// Write scopes on the pod that runs PR code.
    PodPermissions,
}

pub const CLASSES: &[Class] = &[
    Class::CacheWrite,
    Class::Credentials,
    Class::PersistentRunner,
    Class::Injection,
    Class::GithubEnv,
    Class::ExternalCache,
    Class::RemoteWorkflow,
    Class::PodPermissions,
];

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::CacheWrite => "cache write in a PR-code job",
            Class::Credentials => "PR checkout with secrets, write scopes or OIDC",
            Class::PersistentRunner => "PR code on a persistent self-hosted runner",
            Class::Injection => "PR value into a privileged run:",
            Class::GithubEnv => "GITHUB_ENV from PR bytes",
            Class::ExternalCache => "cache write outside GitHub's",
            Class::RemoteWorkflow => "remote reusable workflow at a branch with secrets",
            Class::PodPermissions => "write scopes on the pod",
        }
    }

    /// The rule that must report it, and whether an error is required (a
    /// persistent runner depends on what the repository cannot show: a warning).
    fn expect(self) -> (&'static str, bool) {
        match self {
            Class::CacheWrite | Class::ExternalCache => ("untrusted-cache-save", true),
            Class::Credentials => ("untrusted-secrets|untrusted-write-permissions", true),
            Class::PersistentRunner => ("persistent-runner", false),
            Class::Injection | Class::GithubEnv => ("privileged-injection", true),
            Class::RemoteWorkflow => ("untrusted-secrets", true),
            Class::PodPermissions => ("untrusted-write-permissions", true),
        }
    }

    /// The spellings the class is planted in.
    fn spellings(self) -> &'static [Spelling] {
        use Spelling::*;
        match self {
            Class::PersistentRunner => &[Direct, Matrix, Reusable],
            Class::RemoteWorkflow => &[Direct, Outputs, Matrix],
            Class::Injection | Class::GithubEnv => {
                &[Direct, Env, Outputs, Matrix, Composite, Reusable]
            }
            _ => &[Direct, Env, Outputs, Matrix, Git, Composite, Reusable],
        }
    }
}

/// How the pull request's ref (or text) reaches the planted step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    Direct,
    /// Through the workflow's `env:`.
    Env,
    /// Through a job's outputs, from a script that asks the API.
    Outputs,
    /// Through a matrix entry.
    Matrix,
    /// `git fetch` of the pull request and `git checkout FETCH_HEAD`.
    Git,
    /// Inside a local composite action.
    Composite,
    /// Inside a local reusable workflow the real workflow calls.
    Reusable,
}

/// The benign mutations.
pub const BENIGN: &[&str] = &[
    "reorder jobs",
    "rename a job",
    "comments",
    "harmless step",
    "trusted-only cache",
    "read-only permissions",
];

/// A tree of files (`.github/**`), by repository-relative path.
pub type Tree = BTreeMap<String, String>;

/// One mutant.
pub struct Mutant {
    pub class: Option<Class>,
    pub label: String,
    pub tree: Tree,
    /// For an attack: the workflow file and job that must be reported.
    pub target: Option<(String, String)>,
    /// For a benign mutation: renamed jobs (old, new), to compare with the original.
    pub renamed: Vec<(String, String)>,
}

/// The `.github` files of `root`.
pub fn read_tree(root: &Path) -> Tree {
    let mut tree = Tree::new();
    let github = root.join(".github");
    for entry in walkdir::WalkDir::new(&github).into_iter().flatten() {
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = entry.path().strip_prefix(root).unwrap();
        let rel = rel.to_string_lossy().replace('\\', "/");
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            tree.insert(rel, text);
        }
    }
    tree
}

fn load(text: &str) -> Option<Yaml> {
    YamlLoader::load_from_str(text).ok()?.into_iter().next()
}

fn emit(doc: &Yaml) -> String {
    let mut out = String::new();
    let mut emitter = YamlEmitter::new(&mut out);
    emitter.multiline_strings(true);
    emitter.dump(doc).unwrap();
    out.trim_start_matches("---").trim_start().to_owned() + "\n"
}

fn key(name: &str) -> Yaml {
    Yaml::String(name.to_owned())
}

fn get<'a>(doc: &'a Yaml, name: &str) -> Option<&'a Yaml> {
    doc.as_hash()?.get(&key(name))
}

/// The workflows of a tree that GitHub would run, with jobs, by path.
fn workflows(tree: &Tree) -> Vec<(String, Yaml)> {
    tree.iter()
        .filter(|(path, _)| {
            path.starts_with(".github/workflows/")
                && path.matches('/').count() == 2
                && (path.ends_with(".yml") || path.ends_with(".yaml"))
        })
        .filter_map(|(path, text)| {
            let doc = load(text)?;
            let jobs = get(&doc, "jobs")?.as_hash()?;
            (!jobs.is_empty() && get(&doc, "on").is_some()).then(|| (path.clone(), doc))
        })
        .collect()
}

/// Programs that build or test what they are run in (the generator's own
/// list: a planted attack must run the pull request's code unmistakably).
const BUILDERS: &[&str] = &[
    "cargo",
    "make",
    "cmake",
    "ninja",
    "meson",
    "bazel",
    "bazelisk",
    "pytest",
    "python",
    "python3",
    "pip",
    "pip3",
    "uv",
    "tox",
    "nox",
    "npm",
    "npx",
    "yarn",
    "pnpm",
    "go",
    "mvn",
    "gradle",
    "./gradlew",
    "dotnet",
    "just",
    "bash",
    "sh",
    "nix",
    "docker",
    "zig",
    "swift",
    "ctest",
];

/// A real `run:` step of the workflow that builds or tests (the first whose
/// first word is a builder), to stand for its build; `make test` when none.
fn real_step(doc: &Yaml) -> String {
    let jobs = get(doc, "jobs").and_then(Yaml::as_hash);
    for (_, job) in jobs.into_iter().flatten() {
        let Some(steps) = get(job, "steps").and_then(Yaml::as_vec) else {
            continue;
        };
        for step in steps {
            let Some(run) = get(step, "run").and_then(Yaml::as_str) else {
                continue;
            };
            if run.lines().count() > 40 || run.contains("${{") {
                continue;
            }
            let first = run
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("set "))
                .and_then(|l| l.split_whitespace().next())
                .unwrap_or("");
            if BUILDERS.contains(&first) || first.starts_with("./") {
                return run.to_owned();
            }
        }
    }
    "make test".to_owned()
}

/// The workflow with `event` (as YAML text) added to its triggers.
fn with_trigger(doc: &Yaml, event: &str, config: &str) -> Yaml {
    let mut doc = doc.clone();
    let on = get(&doc, "on").cloned().unwrap_or(Yaml::Null);
    let mut hash = yaml_rust2::yaml::Hash::new();
    match on {
        Yaml::String(e) => {
            hash.insert(key(&e), Yaml::Null);
        }
        Yaml::Array(list) => {
            for e in list {
                hash.insert(e, Yaml::Null);
            }
        }
        Yaml::Hash(h) => hash = h,
        _ => {}
    }
    let config = load(config).unwrap_or(Yaml::Null);
    hash.insert(key(event), config);
    if let Yaml::Hash(root) = &mut doc {
        root.insert(key("on"), Yaml::Hash(hash));
    }
    doc
}

fn insert_job(doc: &mut Yaml, name: &str, job: &str) {
    let job = load(job).unwrap_or_else(|| panic!("planted job does not parse:\n{job}"));
    if let Some(Yaml::Hash(jobs)) = doc.as_mut_hash().and_then(|h| h.get_mut(&key("jobs"))) {
        jobs.insert(key(name), job);
    }
}

fn set_env(doc: &mut Yaml, name: &str, value: &str) {
    if let Some(root) = doc.as_mut_hash() {
        let env = root
            .entry(key("env"))
            .or_insert_with(|| Yaml::Hash(yaml_rust2::yaml::Hash::new()));
        if let Yaml::Hash(env) = env {
            env.insert(key(name), key(value));
        }
    }
}

/// Indents every line of `text` by `n` spaces.
fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A literal block holding `script`, as a step's `run:`.
fn run_step(script: &str, extra: &str) -> String {
    format!("- {extra}run: |\n{}\n", indent(script, 4))
}

/// Everything one attack needs, in the order it is written.
struct Plan {
    /// The event the attack needs, and its configuration.
    event: (&'static str, &'static str),
    /// The ref expression of the pull request under that event.
    pr_ref: &'static str,
    /// The planted job's `runs-on`.
    runs_on: String,
    /// Job-level lines (permissions, env, cache-mode).
    job_head: String,
    /// The class's steps after the checkout and build.
    tail: String,
    /// Whether the job checks the pull request out and builds it.
    runs_pr_code: bool,
}

const PRT: (&str, &str) = ("pull_request_target", "types: [opened, synchronize]");
const WFR: (&str, &str) = (
    "workflow_run",
    "workflows: [Mutation upstream]\ntypes: [completed]",
);
const PRT_SHA: &str = "${{ github.event.pull_request.head.sha }}";
const WFR_SHA: &str = "${{ github.event.workflow_run.head_sha }}";
const TITLE: &str = "${{ github.event.pull_request.title }}";

fn plan(class: Class, variant: usize) -> Plan {
    let save = [
        "- uses: actions/cache@v4\n  with:\n    path: target\n    key: mut-${{ hashFiles('**/Cargo.lock') }}\n",
        "- uses: actions/cache/save@v4\n  with:\n    path: target\n    key: mut-${{ github.sha }}\n",
        "- uses: Swatinem/rust-cache@v2\n",
        "- uses: actions/setup-go@v5\n",
        "- run: cargo build\n  env:\n    SCCACHE_GHA_ENABLED: \"true\"\n",
    ];
    let external = [
        "- uses: runs-on/cache@v4\n  with:\n    path: target\n    key: mut\n",
        "- run: sccache --start-server && cargo build\n  env:\n    SCCACHE_BUCKET: mut-cache\n    AWS_SECRET_ACCESS_KEY: ${{ secrets.MUT_AWS_KEY }}\n",
        "- uses: docker/build-push-action@v6\n  with:\n    cache-to: type=registry,ref=ghcr.io/org/cache\n    password: ${{ secrets.MUT_REGISTRY }}\n",
    ];
    let read = "permissions:\n  contents: read\n".to_owned();
    match class {
        Class::CacheWrite => {
            let mode_write = variant % 6 == 5;
            Plan {
                event: if mode_write { PRT } else { WFR },
                pr_ref: if mode_write { PRT_SHA } else { WFR_SHA },
                runs_on: "ubuntu-latest".into(),
                job_head: if mode_write {
                    format!("{read}cache-mode: write\n")
                } else {
                    read
                },
                tail: if mode_write {
                    String::new()
                } else {
                    save[variant % save.len()].to_owned()
                },
                runs_pr_code: true,
            }
        }
        Class::Credentials => {
            let head = match variant % 3 {
                0 => format!("{read}env:\n  MUT_TOKEN: ${{{{ secrets.MUT_DEPLOY_TOKEN }}}}\n"),
                1 => "permissions:\n  contents: write\n".to_owned(),
                _ => "permissions:\n  contents: read\n  id-token: write\n".to_owned(),
            };
            Plan {
                event: PRT,
                pr_ref: PRT_SHA,
                runs_on: "ubuntu-latest".into(),
                job_head: format!("{head}cache-mode: read\n"),
                tail: String::new(),
                runs_pr_code: true,
            }
        }
        Class::PersistentRunner => Plan {
            event: ("pull_request", "branches: [main]"),
            pr_ref: "",
            runs_on: "[self-hosted, mut-gpu]".into(),
            job_head: read,
            tail: String::new(),
            runs_pr_code: true,
        },
        Class::Injection | Class::GithubEnv => Plan {
            event: PRT,
            pr_ref: PRT_SHA,
            runs_on: "ubuntu-latest".into(),
            job_head: format!(
                "{read}cache-mode: read\nenv:\n  MUT_TOKEN: ${{{{ secrets.MUT_DEPLOY_TOKEN }}}}\n"
            ),
            tail: String::new(),
            runs_pr_code: false,
        },
        Class::ExternalCache => Plan {
            event: PRT,
            pr_ref: PRT_SHA,
            // runs-on/cache writes RunsOn's bucket only on RunsOn's runners
            // (elsewhere it is GitHub's cache, which `cache-mode: read` closes).
            runs_on: if variant % external.len() == 0 {
                "runs-on=${{ github.run_id }}/runner=2cpu-linux-x64".into()
            } else {
                "ubuntu-latest".into()
            },
            job_head: format!("{read}cache-mode: read\n"),
            tail: external[variant % external.len()].to_owned(),
            runs_pr_code: true,
        },
        Class::RemoteWorkflow => Plan {
            event: PRT,
            pr_ref: PRT_SHA,
            runs_on: String::new(),
            job_head: String::new(),
            tail: String::new(),
            runs_pr_code: false,
        },
        Class::PodPermissions => {
            let scope = [
                "contents: write",
                "pull-requests: write",
                "actions: write",
                "id-token: write",
            ];
            Plan {
                event: WFR,
                pr_ref: WFR_SHA,
                runs_on: "[self-hosted, gpu-pod]".into(),
                job_head: format!(
                    "permissions:\n  contents: read\n  {}\ncache-mode: read\n",
                    scope[variant % scope.len()]
                )
                .replace("contents: read\n  contents: write", "contents: write"),
                tail: String::new(),
                runs_pr_code: true,
            }
        }
    }
}

/// The value the class plants (a ref, or text), as `spelling` makes it
/// reach the job: extra workflow env, extra jobs, job-level lines, and the
/// expression the steps use.
struct Reach {
    env: Option<(String, String)>,
    setup: Option<String>,
    job_extra: String,
    expression: String,
}

fn reach(spelling: Spelling, value: &str, text: bool, event: &str) -> Reach {
    let none = Reach {
        env: None,
        setup: None,
        job_extra: String::new(),
        expression: value.to_owned(),
    };
    match spelling {
        Spelling::Env => Reach {
            env: Some(("MUT_VALUE".into(), value.into())),
            expression: "${{ env.MUT_VALUE }}".into(),
            ..none
        },
        Spelling::Outputs => {
            let script = match (text, event) {
                (true, _) => "echo \"value=$(gh pr view ${{ github.event.pull_request.number }} --repo \"$GITHUB_REPOSITORY\" --json title --jq .title)\" >> \"$GITHUB_OUTPUT\"".to_owned(),
                (false, "pull_request_target") => "sha=$(gh api \"repos/$GITHUB_REPOSITORY/pulls/${{ github.event.pull_request.number }}\" --jq .head.sha)\necho \"value=$sha\" >> \"$GITHUB_OUTPUT\"".to_owned(),
                (false, _) => format!("echo \"value={value}\" >> \"$GITHUB_OUTPUT\""),
            };
            Reach {
                setup: Some(format!(
                    "runs-on: ubuntu-latest\npermissions:\n  pull-requests: read\noutputs:\n  value: ${{{{ steps.pr.outputs.value }}}}\nsteps:\n  - id: pr\n    env:\n      GH_TOKEN: ${{{{ github.token }}}}\n    run: |\n{}\n",
                    indent(&script, 6)
                )),
                job_extra: "needs: mut_setup\n".into(),
                expression: "${{ needs.mut_setup.outputs.value }}".into(),
                ..none
            }
        }
        Spelling::Matrix => Reach {
            job_extra: format!("strategy:\n  matrix:\n    include:\n      - value: \"{value}\"\n"),
            expression: "${{ matrix.value }}".into(),
            ..none
        },
        _ => none,
    }
}

/// The steps that bring the pull request in and build it.
fn bring_in(spelling: Spelling, pr_ref: &str, event: &str, build: &str) -> String {
    let checkout = match spelling {
        Spelling::Git => {
            let fetch = if event == "pull_request_target" {
                "git fetch origin \"pull/${{ github.event.pull_request.number }}/head\"".to_owned()
            } else {
                format!("git fetch origin \"{pr_ref}\"")
            };
            run_step(&format!("{fetch}\ngit checkout FETCH_HEAD"), "")
        }
        _ if pr_ref.is_empty() => "- uses: actions/checkout@v4\n".to_owned(),
        _ => format!("- uses: actions/checkout@v4\n  with:\n    ref: \"{pr_ref}\"\n"),
    };
    format!("{checkout}{}", run_step(build, ""))
}

/// Plants `class` in `spelling` into the workflow `path` of `tree`.
fn plant(
    tree: &Tree,
    path: &str,
    doc: &Yaml,
    class: Class,
    spelling: Spelling,
    variant: usize,
) -> Mutant {
    let mut tree = tree.clone();
    let plan = plan(class, variant);
    let (event, config) = plan.event;
    let build = real_step(doc);
    let file = path.to_owned();
    let mut doc = with_trigger(doc, event, config);
    let text_class = matches!(class, Class::Injection | Class::GithubEnv);
    let value = if text_class { TITLE } else { plan.pr_ref };
    let via = reach(spelling, value, text_class, event);
    if let Some((name, v)) = &via.env {
        set_env(&mut doc, name, v);
    }
    if let Some(setup) = &via.setup {
        insert_job(&mut doc, "mut_setup", setup);
    }
    let label = format!("{} / {:?} #{variant}", class.name(), spelling);
    // The class's own steps.
    let steps = match class {
        Class::Injection => run_step(&format!("echo \"checking {}\"", via.expression), ""),
        Class::GithubEnv => match variant % 3 {
            1 if spelling == Spelling::Direct => format!(
                "- uses: actions/checkout@v4\n  with:\n    ref: \"{PRT_SHA}\"\n    path: pr\n    persist-credentials: false\n{}",
                run_step("cat pr/ci.env >> \"$GITHUB_ENV\"", "")
            ),
            2 => run_step(
                "echo \"MUT_LABEL=$VALUE\" | tee -a \"$GITHUB_ENV\"",
                &format!("env:\n    VALUE: \"{}\"\n  ", via.expression),
            ),
            _ => run_step(
                &format!("echo \"MUT_LABEL={}\" >> \"$GITHUB_ENV\"", via.expression),
                "",
            ),
        },
        _ if plan.runs_pr_code => {
            let pr_ref = if plan.pr_ref.is_empty() {
                String::new()
            } else {
                via.expression.clone()
            };
            format!(
                "{}{}",
                bring_in(spelling, &pr_ref, event, &build),
                plan.tail
            )
        }
        _ => String::new(),
    };
    let job_name = "mut_job".to_owned();
    let (target_file, target_job) = match (class, spelling) {
        (Class::RemoteWorkflow, _) => {
            let job = format!(
                "{}uses: org/tools/.github/workflows/build.yml@main\nwith:\n  ref: \"{}\"\nsecrets: inherit\n",
                via.job_extra, via.expression
            );
            insert_job(&mut doc, &job_name, &job);
            (file.clone(), job_name.clone())
        }
        (Class::PersistentRunner, _) => {
            // The trusted job that shares the runner and holds a secret.
            let runner = "[self-hosted, mut-gpu]";
            let doc_with_push = with_trigger(&doc, "push", "branches: [main]");
            doc = doc_with_push;
            insert_job(
                &mut doc,
                "mut_release",
                &format!(
                    "if: github.event_name == 'push'\nruns-on: {runner}\npermissions:\n  contents: read\nsteps:\n  - uses: actions/checkout@v4\n  - run: ./release.sh\n    env:\n      TOKEN: ${{{{ secrets.MUT_RELEASE_TOKEN }}}}\n"
                ),
            );
            let runs_on = match spelling {
                Spelling::Matrix => "${{ matrix.runner }}".to_owned(),
                _ => plan.runs_on.clone(),
            };
            let extra = if spelling == Spelling::Matrix {
                "strategy:\n  matrix:\n    runner: [[self-hosted, mut-gpu]]\n".to_owned()
            } else {
                String::new()
            };
            let body = format!(
                "if: github.event_name == 'pull_request'\nruns-on: {runs_on}\n{extra}{}steps:\n{}",
                plan.job_head,
                indent(&steps, 2)
            );
            if spelling == Spelling::Reusable {
                let callee = ".github/workflows/mut-callee.yml".to_owned();
                tree.insert(
                    callee.clone(),
                    format!(
                        "on:\n  workflow_call:\n    inputs:\n      runner:\n        type: string\njobs:\n  mut_inner:\n    runs-on: ${{{{ fromJSON(inputs.runner) }}}}\n{}    steps:\n{}\n",
                        indent(&plan.job_head, 4) + "\n",
                        indent(&steps, 6)
                    ),
                );
                insert_job(
                    &mut doc,
                    &job_name,
                    "if: github.event_name == 'pull_request'\nuses: ./.github/workflows/mut-callee.yml\nwith:\n  runner: '[\"self-hosted\", \"mut-gpu\"]'\n",
                );
                (callee, "mut_inner".to_owned())
            } else {
                insert_job(&mut doc, &job_name, &body);
                (file.clone(), job_name.clone())
            }
        }
        (_, Spelling::Composite) => {
            let action = ".github/actions/mut-action/action.yml".to_owned();
            let mut inner = steps
                .replace(&via.expression, "${{ inputs.value }}")
                .replace("- run: |", "- shell: bash\n  run: |");
            // A composite action has no `secrets` context: the step that
            // uses it passes each secret as an input, as real actions do.
            let mut secret_inputs = String::new();
            let mut secret_with = String::new();
            while let Some(start) = inner.find("${{ secrets.") {
                let Some(len) = inner[start..].find("}}") else {
                    break;
                };
                let reference = inner[start..start + len + 2].to_owned();
                let name = reference
                    .trim_start_matches("${{ secrets.")
                    .trim_end_matches("}}")
                    .trim()
                    .to_ascii_lowercase();
                inner = inner.replace(&reference, &format!("${{{{ inputs.{name} }}}}"));
                secret_inputs.push_str(&format!("  {name}:\n    required: true\n"));
                secret_with.push_str(&format!("      {name}: {reference}\n"));
            }
            tree.insert(
                action,
                format!(
                    "name: mut\ninputs:\n  value:\n    required: true\n{secret_inputs}runs:\n  using: composite\n  steps:\n{}\n",
                    indent(&inner, 4)
                ),
            );
            let job = format!(
                "runs-on: {}\n{}{}steps:\n  - uses: actions/checkout@v4\n    with:\n      persist-credentials: false\n  - uses: ./.github/actions/mut-action\n    with:\n      value: \"{}\"\n{secret_with}",
                plan.runs_on, via.job_extra, plan.job_head, via.expression
            );
            insert_job(&mut doc, &job_name, &job);
            (file.clone(), job_name.clone())
        }
        (_, Spelling::Reusable) => {
            let callee = ".github/workflows/mut-callee.yml".to_owned();
            let inner = steps.replace(&via.expression, "${{ inputs.value }}");
            tree.insert(
                callee.clone(),
                format!(
                    "on:\n  workflow_call:\n    inputs:\n      value:\n        type: string\njobs:\n  mut_inner:\n    runs-on: {}\n{}\n    steps:\n{}\n",
                    plan.runs_on,
                    indent(&plan.job_head, 4),
                    indent(&inner, 6)
                ),
            );
            let job = format!(
                "{}uses: ./.github/workflows/mut-callee.yml\nwith:\n  value: \"{}\"\nsecrets: inherit\n",
                via.job_extra, via.expression
            );
            insert_job(&mut doc, &job_name, &job);
            (callee, "mut_inner".to_owned())
        }
        _ => {
            let job = format!(
                "runs-on: {}\n{}{}steps:\n{}",
                plan.runs_on,
                via.job_extra,
                plan.job_head,
                indent(&steps, 2)
            );
            insert_job(&mut doc, &job_name, &job);
            (file.clone(), job_name.clone())
        }
    };
    tree.insert(file, emit(&doc));
    Mutant {
        class: Some(class),
        label,
        tree,
        target: Some((target_file, target_job)),
        renamed: Vec::new(),
    }
}

/// The benign mutation `which` of workflow `path`.
fn benign(tree: &Tree, path: &str, doc: &Yaml, which: &str) -> Option<Mutant> {
    let mut tree = tree.clone();
    let mut doc = doc.clone();
    let mut renamed = Vec::new();
    let text = match which {
        "reorder jobs" => {
            let jobs = doc.as_mut_hash()?.get_mut(&key("jobs"))?.as_mut_hash()?;
            let mut entries: Vec<(Yaml, Yaml)> =
                jobs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            entries.reverse();
            jobs.clear();
            for (k, v) in entries {
                jobs.insert(k, v);
            }
            emit(&doc)
        }
        "rename a job" => {
            let original = tree.get(path)?.clone();
            let first = get(&doc, "jobs")?
                .as_hash()?
                .keys()
                .next()?
                .as_str()?
                .to_owned();
            let new = format!("{first}_renamed");
            renamed.push((first.clone(), new.clone()));
            // Every mention of the job id (its key, `needs:`, `needs.ID.`).
            let mut out = String::new();
            for line in original.lines() {
                let trimmed = line.trim_start();
                let replaced = if trimmed.starts_with(&format!("{first}:"))
                    && line.len() - trimmed.len() <= 4
                {
                    line.replacen(&format!("{first}:"), &format!("{new}:"), 1)
                } else {
                    line.replace(&format!("needs.{first}."), &format!("needs.{new}."))
                        .replace(&format!("needs: {first}"), &format!("needs: {new}"))
                        .replace(&format!("[{first},"), &format!("[{new},"))
                        .replace(&format!(", {first}]"), &format!(", {new}]"))
                        .replace(&format!("- {first}\n"), &format!("- {new}\n"))
                };
                out.push_str(&replaced);
                out.push('\n');
            }
            load(&out)?;
            out
        }
        "comments" => {
            let original = tree.get(path)?.clone();
            let mut out = String::new();
            for line in original.lines() {
                if !line.starts_with(' ') && !line.starts_with('#') && line.contains(':') {
                    out.push_str("# mutation: a comment before a top-level key\n");
                }
                out.push_str(line);
                out.push('\n');
            }
            out
        }
        "harmless step" => {
            let jobs = doc.as_mut_hash()?.get_mut(&key("jobs"))?.as_mut_hash()?;
            for (_, job) in jobs.iter_mut() {
                if let Some(Yaml::Array(steps)) =
                    job.as_mut_hash().and_then(|j| j.get_mut(&key("steps")))
                {
                    steps.push(load("run: echo 'a harmless step'").unwrap());
                }
            }
            emit(&doc)
        }
        "trusted-only cache" => {
            let mut doc = with_trigger(&doc, "push", "branches: [main]");
            insert_job(
                &mut doc,
                "mut_cache",
                "if: github.event_name == 'push' && github.ref == 'refs/heads/main'\nruns-on: ubuntu-latest\npermissions:\n  contents: read\nsteps:\n  - uses: actions/checkout@v4\n    with:\n      persist-credentials: false\n  - uses: actions/cache@v4\n    with:\n      path: target\n      key: mut-${{ hashFiles('**/Cargo.lock') }}\n  - run: cargo build\n",
            );
            emit(&doc)
        }
        "read-only permissions" => {
            let jobs = doc.as_mut_hash()?.get_mut(&key("jobs"))?.as_mut_hash()?;
            for (_, job) in jobs.iter_mut() {
                let Some(job) = job.as_mut_hash() else {
                    continue;
                };
                if job.get(&key("permissions")).is_none() && job.get(&key("uses")).is_none() {
                    job.insert(key("permissions"), load("contents: read").unwrap());
                }
            }
            emit(&doc)
        }
        _ => return None,
    };
    tree.insert(path.to_owned(), text);
    Some(Mutant {
        class: None,
        label: format!("benign: {which}"),
        tree,
        target: None,
        renamed,
    })
}

/// Every mutant of `tree`: each class in each of its spellings, planted in
/// up to `hosts` workflows, and each benign mutation of those workflows.
pub fn mutants(tree: &Tree, hosts: usize) -> Vec<Mutant> {
    let mut out = Vec::new();
    let list = workflows(tree);
    for (index, (path, doc)) in list.iter().take(hosts).enumerate() {
        for class in CLASSES {
            for (i, spelling) in class.spellings().iter().enumerate() {
                out.push(plant(tree, path, doc, *class, *spelling, index + i));
            }
        }
        for which in BENIGN {
            out.extend(benign(tree, path, doc, which));
        }
    }
    out
}

/// check-contracts' findings on a tree (auditor persona).
pub fn findings_of(tree: &Tree) -> Vec<Value> {
    let fixture = Fixture::new();
    for (path, text) in tree {
        fixture.file(path, text);
    }
    let output = fixture.xtask(&[
        "check-contracts",
        "--format",
        "json",
        "--persona",
        "auditor",
    ]);
    let code = output.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "exit {code}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    serde_json::from_str::<Value>(&stdout(&output))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// The errors of a run, as (rule, workflow, job) with renamed jobs mapped back.
fn error_keys(
    findings: &[Value],
    renamed: &[(String, String)],
) -> BTreeMap<(String, String, String), usize> {
    let mut out = BTreeMap::new();
    for f in findings {
        if f["severity"] != "error" || f["suppressed"] == true {
            continue;
        }
        let mut job = f["job"].as_str().unwrap_or("").to_owned();
        for (old, new) in renamed {
            if &job == new {
                job.clone_from(old);
            }
        }
        *out.entry((
            f["rule"].as_str().unwrap_or("").to_owned(),
            f["workflow"].as_str().unwrap_or("").to_owned(),
            job,
        ))
        .or_default() += 1;
    }
    out
}

/// With `MUTATION_DUMP=DIR`, a missed attack or a false alarm is written
/// under DIR (its tree and findings) to be read.
fn dump(origin: &str, mutant: &Mutant, found: &[Value]) {
    let Some(dir) = std::env::var_os("MUTATION_DUMP") else {
        return;
    };
    let name: String = format!("{origin}-{}", mutant.label)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut root = Path::new(&dir).join(&name);
    let mut n = 0;
    while root.exists() {
        n += 1;
        root = Path::new(&dir).join(format!("{name}-{n}"));
    }
    for (path, text) in &mutant.tree {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let findings = serde_json::to_string_pretty(found).unwrap();
    std::fs::write(root.join("findings.json"), findings).unwrap();
}

/// What the mutants of one tree gave.
#[derive(Default)]
pub struct Score {
    /// Per class: (caught, planted), and the labels missed.
    pub attacks: BTreeMap<Class, (usize, usize, Vec<String>)>,
    /// Per benign mutation: (false alarms, tried), and what was raised.
    pub benign: BTreeMap<String, (usize, usize, Vec<String>)>,
}

/// Runs every mutant of `tree` and scores it.
pub fn score(origin: &str, tree: &Tree, hosts: usize, score: &mut Score) {
    let baseline = error_keys(&findings_of(tree), &[]);
    for mutant in mutants(tree, hosts) {
        let found = findings_of(&mutant.tree);
        match (mutant.class, &mutant.target) {
            (Some(class), Some((file, job))) => {
                let (rules, error) = class.expect();
                let rules: BTreeSet<&str> = rules.split('|').collect();
                let workflow = file.rsplit('/').next().unwrap_or(file);
                let caught = found.iter().any(|f| {
                    rules.contains(f["rule"].as_str().unwrap_or(""))
                        && f["workflow"] == workflow
                        && f["job"] == job.as_str()
                        && (f["severity"] == "error" || !error && f["severity"] == "warning")
                });
                let entry = score.attacks.entry(class).or_default();
                entry.1 += 1;
                if caught {
                    entry.0 += 1;
                } else {
                    entry.2.push(mutant.label.clone());
                    dump(origin, &mutant, &found);
                }
            }
            _ => {
                let after = error_keys(&found, &mutant.renamed);
                let new: Vec<String> = after
                    .iter()
                    .filter(|(k, n)| baseline.get(k).is_none_or(|b| *n > b))
                    .map(|(k, _)| format!("{k:?}"))
                    .collect();
                let entry = score.benign.entry(mutant.label.clone()).or_default();
                entry.1 += 1;
                if !new.is_empty() {
                    dump(origin, &mutant, &found);
                    entry.0 += 1;
                    entry.2.push(new.join(", "));
                }
            }
        }
    }
}

/// The score as a table (for the docs and the test's message).
pub fn table(score: &Score) -> String {
    let mut out = String::from("| attack class | caught / planted |\n|---|---|\n");
    for (class, (caught, planted, _)) in &score.attacks {
        out.push_str(&format!("| {} | {caught} / {planted} |\n", class.name()));
    }
    out.push_str("\n| benign mutation | false alarms / tried |\n|---|---|\n");
    for (label, (alarms, tried, _)) in &score.benign {
        out.push_str(&format!(
            "| {} | {alarms} / {tried} |\n",
            label.trim_start_matches("benign: ")
        ));
    }
    out
}

fn misses(score: &Score) -> Vec<String> {
    let mut out = Vec::new();
    for (class, (caught, planted, missed)) in &score.attacks {
        if caught * 100 < planted * 95 {
            let mut by_label: BTreeMap<&str, usize> = BTreeMap::new();
            for m in missed {
                *by_label.entry(m.as_str()).or_default() += 1;
            }
            out.push(format!(
                "{}: {caught}/{planted}, missed {by_label:?}",
                class.name()
            ));
        }
    }
    for (label, (alarms, tried, raised)) in &score.benign {
        if alarms * 100 > *tried {
            out.push(format!(
                "{label}: {alarms}/{tried} false alarms: {raised:?}"
            ));
        }
    }
    out
}

const SYNTHETIC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/contracts/mutation"
);

/// The generator guards CI: on the committed synthetic corpus every class
/// is caught in every spelling and no benign mutation raises an error.
#[test]
fn every_planted_attack_is_caught_and_no_benign_mutation_raises_an_error() {
    let mut total = Score::default();
    let mut trees = 0;
    for entry in std::fs::read_dir(SYNTHETIC).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join(".github/workflows").is_dir() {
            continue;
        }
        trees += 1;
        score(
            &dir.file_name().unwrap().to_string_lossy(),
            &read_tree(&dir),
            1,
            &mut total,
        );
    }
    assert!(trees >= 3, "the synthetic corpus has {trees} trees");
    println!("{}", table(&total));
    for class in CLASSES {
        let (caught, planted, missed) = total.attacks.get(class).cloned().unwrap_or_default();
        assert!(planted > 0, "{} was never planted", class.name());
        assert_eq!(caught, planted, "{}: missed {missed:#?}", class.name());
    }
    for which in BENIGN {
        let (alarms, tried, raised) = total
            .benign
            .get(&format!("benign: {which}"))
            .cloned()
            .unwrap_or_default();
        assert!(tried > 0, "{which} was never tried");
        assert_eq!(alarms, 0, "{which}: {raised:#?}");
    }
}

/// The real corpus (docs/contracts.md, "Recall by mutation"): every
/// repository of `repos.txt` extracted under `$CHECK_CONTRACTS_CORPUS`.
#[test]
#[ignore = "needs CHECK_CONTRACTS_CORPUS (see the module header)"]
fn real_corpus() {
    let Some(corpus) = std::env::var_os("CHECK_CONTRACTS_CORPUS") else {
        panic!("set CHECK_CONTRACTS_CORPUS to the extracted corpus");
    };
    let repos = include_str!("../fixtures/contracts/corpus/repos.txt");
    let half = std::env::var("CHECK_CONTRACTS_HALF").ok();
    // How many workflows of each repository host the mutants (default 1).
    let hosts = std::env::var("CHECK_CONTRACTS_HOSTS")
        .ok()
        .and_then(|h| h.parse().ok())
        .unwrap_or(1);
    let mut total = Score::default();
    for line in repos.lines() {
        let mut parts = line.split_whitespace();
        let (Some(repo), Some(_), Some(part)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if half.as_deref().is_some_and(|h| h != part) {
            continue;
        }
        let dir = Path::new(&corpus).join(repo.replace('/', "__"));
        if !dir.join(".github/workflows").is_dir() {
            continue;
        }
        score(
            &dir.file_name().unwrap().to_string_lossy(),
            &read_tree(&dir),
            hosts,
            &mut total,
        );
    }
    println!("{}", table(&total));
    let missed = misses(&total);
    for (class, (_, _, m)) in &total.attacks {
        if !m.is_empty() {
            println!("{}: missed {}", class.name(), m.len());
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// The seed project's real workflows (`$CHECK_CONTRACTS_SEED`, see
/// fixtures/contracts/corpus/README.md): no false error, and every
/// single-edit weakening of their cache roles caught.
#[test]
#[ignore = "needs CHECK_CONTRACTS_SEED (see the module header)"]
fn seed() {
    let Some(seed) = std::env::var_os("CHECK_CONTRACTS_SEED") else {
        panic!("set CHECK_CONTRACTS_SEED to a copy of the seed's workflows");
    };
    let tree = read_tree(Path::new(&seed));
    let failures = crate::contracts_model::seed_weakenings(&tree);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
