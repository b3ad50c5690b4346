//! `cargo xtask check-contracts` on repositories that are not this one (issue
//! 10): no policy file, workflows written the many ways GitHub accepts,
//! runners and references judged as GitHub would, every cache seen. Each
//! test is a small workflow tree shaped after what the real-world corpus
//! (docs/contracts.md, "Real-world corpus") showed.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::{Fixture, stderr, stdout};

/// A tree with only `.github/workflows/*` (no policy unless given).
fn repo(files: &[(&str, &str)]) -> Fixture {
    let fixture = Fixture::new();
    for (name, text) in files {
        let path = if name.contains('/') {
            (*name).to_owned()
        } else {
            format!(".github/workflows/{name}")
        };
        fixture.file(&path, text);
    }
    fixture
}

/// The findings (JSON), asserting the run ended in 0 or 1.
fn findings(fixture: &Fixture) -> Vec<Value> {
    let output = fixture.xtask(&[
        "check-contracts",
        "--format",
        "json",
        "--persona",
        "auditor",
    ]);
    let code = output.status.code().expect("exit code");
    assert!(
        code == 0 || code == 1,
        "exit {code}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    let all: Value = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|err| panic!("JSON output: {err}\n{}", stdout(&output)));
    all.as_array().unwrap().clone()
}

/// The findings that fail the check.
fn errors(findings: &[Value]) -> Vec<&Value> {
    findings
        .iter()
        .filter(|f| f["severity"] == "error" && f["suppressed"] == false)
        .collect()
}

/// The findings reported at any level (errors and warnings).
fn reported(findings: &[Value]) -> Vec<&Value> {
    findings
        .iter()
        .filter(|f| f["severity"] != "note" && f["suppressed"] == false)
        .collect()
}

fn rules(findings: &[Value]) -> BTreeSet<String> {
    reported(findings)
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect()
}

fn messages(findings: &[Value]) -> String {
    reported(findings)
        .iter()
        .map(|f| format!("{}: {}", f["rule"], f["message"]))
        .collect::<Vec<_>>()
        .join("\n")
}

const PR_CI: &str = "on: pull_request\npermissions: {}\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - uses: Swatinem/rust-cache@v2\n      - run: cargo test\n";

#[test]
fn without_a_policy_every_format_prints_a_document_and_one_note() {
    let fixture = repo(&[("ci.yml", PR_CI)]);
    let all = findings(&fixture);
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let notes: Vec<&Value> = all.iter().filter(|f| f["severity"] == "note").collect();
    assert_eq!(notes.len(), 1, "{all:#?}");
    let note = notes[0]["message"].as_str().unwrap();
    assert!(
        note.contains("publisher-trigger") && note.contains("[publisher] workflows"),
        "{note}"
    );
    let sarif = fixture.xtask(&["check-contracts", "--format", "sarif"]);
    assert_eq!(sarif.status.code(), Some(0), "{}", stderr(&sarif));
    let doc: Value = serde_json::from_str(&stdout(&sarif)).unwrap();
    assert_eq!(doc["version"], "2.1.0");
    let human = fixture.xtask(&["check-contracts"]);
    assert!(
        stdout(&human).contains("0 finding(s)"),
        "{}",
        stdout(&human)
    );
    let github = fixture.xtask(&["check-contracts", "--format", "github"]);
    assert!(
        stdout(&github).starts_with("::notice"),
        "{}",
        stdout(&github)
    );
}

#[test]
fn a_publisher_is_inferred_from_a_save_guarded_to_the_default_branch() {
    let publish = "on: [push, pull_request]\njobs:\n  warm:\n    if: github.ref == 'refs/heads/main'\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/cache/save@v4\n        with: { path: target, key: k }\n";
    let fixture = repo(&[("ci.yml", PR_CI), ("warm.yml", publish)]);
    let all = findings(&fixture);
    let note = all.iter().find(|f| f["severity"] == "note").unwrap();
    assert!(
        note["message"]
            .as_str()
            .unwrap()
            .contains("inferred as warm.yml"),
        "{note}"
    );
    // The publisher rules now apply: a publisher may not run on pull_request.
    assert!(
        rules(&all).contains("publisher-trigger"),
        "{}",
        messages(&all)
    );
}

/// A `workflow_run` job that checks out the pull request's head and saves.
const POISON_STEPS: &str = "      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n      - uses: actions/cache@v4\n        with: { path: target, key: k }\n";

#[test]
fn anchors_aliases_bom_and_flow_collections_are_read_as_github_does() {
    let text = format!(
        "\u{feff}on:\n  workflow_run:\n    workflows: [CI]\npermissions: {{ contents: read,\n  actions: read }}\njobs:\n  first:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    steps: &steps\n{POISON_STEPS}  second:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    steps: *steps\n"
    );
    let fixture = repo(&[("consumer.yml", &text)]);
    let all = findings(&fixture);
    let jobs: BTreeSet<&str> = errors(&all)
        .iter()
        .filter(|f| f["rule"] == "untrusted-cache-save")
        .map(|f| f["job"].as_str().unwrap())
        .collect();
    assert_eq!(
        jobs,
        BTreeSet::from(["first", "second"]),
        "the alias carries the steps: {}",
        messages(&all)
    );
}

#[test]
fn a_workflow_github_would_refuse_is_one_finding_and_the_others_are_checked() {
    let merge =
        "on: push\nx: &base\n  runs-on: ubuntu-latest\njobs:\n  a:\n    <<: *base\n    steps: []\n";
    let poison = format!(
        "on: workflow_run\njobs:\n  b:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    steps:\n{POISON_STEPS}"
    );
    let fixture = repo(&[
        ("merge.yml", merge),
        ("broken.yml", "on: [push\njobs: {}\n"),
        ("consumer.yml", &poison),
    ]);
    let all = findings(&fixture);
    let parse: Vec<&Value> = errors(&all)
        .into_iter()
        .filter(|f| f["rule"] == "parse-error")
        .collect();
    assert_eq!(parse.len(), 2, "{}", messages(&all));
    let merge_finding = parse
        .iter()
        .find(|f| f["file"] == ".github/workflows/merge.yml")
        .unwrap();
    assert_eq!(merge_finding["line"], 6);
    assert!(
        merge_finding["message"]
            .as_str()
            .unwrap()
            .contains("merge keys"),
        "{merge_finding}"
    );
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
}

#[test]
fn a_job_reached_through_several_callers_is_reported_once() {
    let callee = "on: workflow_call\njobs:\n  build:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n      - run: cargo build\n";
    let caller = |name: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [{name}]\njobs:\n  call:\n    uses: ./.github/workflows/build.yml\n"
        )
    };
    let fixture = repo(&[
        ("build.yml", callee),
        ("a.yml", &caller("A")),
        ("b.yml", &caller("B")),
    ]);
    let all = findings(&fixture);
    let perms: Vec<&Value> = errors(&all)
        .into_iter()
        .filter(|f| f["rule"] == "untrusted-write-permissions" && f["job"] == "build")
        .collect();
    assert_eq!(perms.len(), 1, "{}", messages(&all));
    let message = perms[0]["message"].as_str().unwrap();
    assert!(
        message.contains("a.yml") && message.contains("b.yml"),
        "{message}"
    );
}

/// A job on `runs-on: LABELS` (YAML), with `strategy`, started by pull
/// requests and by pushes to main (where it receives a secret).
fn on_runner(runs_on: &str, strategy: &str) -> String {
    format!(
        "on:\n  pull_request:\n  push:\n    branches: [main]\npermissions: {{}}\njobs:\n  test:\n    runs-on: {runs_on}\n{strategy}    env:\n      UPLOAD: ${{{{ secrets.UPLOAD_TOKEN }}}}\n    steps:\n      - run: cargo test\n"
    )
}

#[test]
fn runner_labels_resolve_and_hosted_services_are_not_pods() {
    let hosted = [
        on_runner("Ubuntu-Latest", ""),
        on_runner("windows-2022-16core", ""),
        on_runner("depot-ubuntu-24.04-4", ""),
        on_runner("blacksmith-4vcpu-ubuntu-2404", ""),
        on_runner("namespace-profile-default", ""),
        on_runner(
            "${{ matrix.platform.runner }}",
            "    strategy:\n      matrix:\n        platform:\n          - { runner: ubuntu-latest }\n          - { runner: macos-15 }\n",
        ),
        on_runner(
            "${{ matrix.os }}",
            "    strategy:\n      matrix:\n        include:\n          - os: windows-latest\n",
        ),
        on_runner("${{ fromJSON('[\"ubuntu-24.04\"]') }}", ""),
        on_runner(
            "${{ github.repository == 'o/r' && 'ubuntu-latest' || 'macos-latest' }}",
            "",
        ),
    ];
    for text in &hosted {
        let all = findings(&repo(&[("ci.yml", text)]));
        assert!(errors(&all).is_empty(), "{text}\n{}", messages(&all));
    }
    let pods = [
        on_runner("[self-hosted, gpu]", ""),
        on_runner(
            "${{ matrix.platform.runner }}",
            "    strategy:\n      matrix:\n        platform:\n          - { runner: ubuntu-latest }\n          - { runner: gpu-box }\n",
        ),
        on_runner("${{ fromJSON('[\"self-hosted\", \"cuda\"]') }}", ""),
    ];
    for text in &pods {
        let all = findings(&repo(&[("ci.yml", text)]));
        assert_eq!(
            rules(&all),
            BTreeSet::from(["persistent-runner".to_owned()]),
            "{text}"
        );
    }
}

#[test]
fn ephemeral_runners_from_the_policy_are_not_persistent() {
    let text = on_runner("[self-hosted, GPU-Ephemeral]", "");
    let fixture = repo(&[("ci.yml", &text)]);
    let all = findings(&fixture);
    let message = messages(&all);
    assert!(message.contains("state"), "{message}");
    assert!(message.contains("secrets"), "{message}");
    assert!(!message.contains("cache-mode"), "{message}");
    fixture.file(
        ".github/ci-trust.toml",
        "[publisher]\nworkflows = []\n[artifacts]\ntrusted-workflows = []\n[contracts]\nephemeral-labels = [\"gpu-ephemeral\"]\n",
    );
    let all = findings(&fixture);
    assert!(errors(&all).is_empty(), "{}", messages(&all));
}

#[test]
fn persistent_runner_names_the_trusted_job_that_shares_the_runner() {
    let pr = "on: pull_request\npermissions: {}\njobs:\n  test:\n    runs-on: [self-hosted, gpu]\n    steps:\n      - run: cargo test\n";
    let all = findings(&repo(&[("ci.yml", pr)]));
    assert!(errors(&all).is_empty(), "PR jobs only: {}", messages(&all));
    let nightly = "on: schedule\npermissions: {}\njobs:\n  bench:\n    runs-on: [self-hosted, GPU]\n    steps:\n      - run: cargo bench\n        env:\n          HF_TOKEN: ${{ secrets.HF_TOKEN }}\n";
    let all = findings(&repo(&[("ci.yml", pr), ("nightly.yml", nightly)]));
    assert_eq!(
        rules(&all),
        BTreeSet::from(["persistent-runner".to_owned()])
    );
    let message = messages(&all);
    assert!(
        message.contains("`bench` of nightly.yml") && message.contains("secrets.HF_TOKEN"),
        "{message}"
    );
    // ggml-org/whisper.cpp: the same job runs pull requests and pushes on
    // the machine; its push runs hold a token that writes the default
    // branch's cache, which what a pull request left running can take.
    let both = pr.replace("on: pull_request\n", "on: [push, pull_request]\n");
    let all = findings(&repo(&[("ci.yml", &both)]));
    assert_eq!(
        rules(&all),
        BTreeSet::from(["persistent-runner".to_owned()]),
        "{}",
        messages(&all)
    );
    let message = messages(&all);
    assert!(
        message.contains("this job itself") && message.contains("cache"),
        "{message}"
    );
    let read_only = both.replace("    steps:\n", "    cache-mode: read\n    steps:\n");
    let all = findings(&repo(&[("ci.yml", &read_only)]));
    assert!(rules(&all).is_empty(), "{}", messages(&all));
    // Runner groups front autoscaled fleets whose ephemerality the workflow
    // cannot show: not reported.
    let grouped = |text: &str| {
        text.replace("[self-hosted, gpu]", "{ group: gpu }")
            .replace("[self-hosted, GPU]", "{ group: gpu }")
    };
    let all = findings(&repo(&[
        ("ci.yml", &grouped(pr)),
        ("nightly.yml", &grouped(nightly)),
    ]));
    assert!(
        !rules(&all).contains("persistent-runner"),
        "{}",
        messages(&all)
    );
    // huggingface/optimum-nvidia (holdout3, R3): whatever the group's
    // fleet is, a container that mounts the host's storage leaves the pull
    // request's bytes there for the next job: reported, naming the mount.
    let mounting = |options: &str| {
        grouped(pr).replace(
            "    steps:\n",
            &format!("    container:\n      image: nvidia/cuda:12.6.3-devel-ubuntu24.04\n      options: {options}\n    steps:\n"),
        )
    };
    for (options, mount) in [
        (
            "--mount type=tmpfs,destination=/tmp --privileged --gpus all -v /mnt/hf_cache:/mnt/cache/",
            "/mnt/hf_cache:/mnt/cache/",
        ),
        ("--volume=/srv/ccache:/ccache", "/srv/ccache:/ccache"),
        (
            "--mount type=bind,source=/data,target=/data",
            "type=bind,source=/data,target=/data",
        ),
    ] {
        let all = findings(&repo(&[
            ("ci.yml", &mounting(options)),
            ("nightly.yml", &grouped(nightly)),
        ]));
        assert!(
            rules(&all).contains("persistent-runner"),
            "{options}: {}",
            messages(&all)
        );
        assert!(messages(&all).contains(mount), "{}", messages(&all));
    }
    // A tmpfs mount is gone with the container.
    let all = findings(&repo(&[
        (
            "ci.yml",
            &mounting("--mount type=tmpfs,destination=/tmp --gpus all"),
        ),
        ("nightly.yml", &grouped(nightly)),
    ]));
    assert!(
        !rules(&all).contains("persistent-runner"),
        "{}",
        messages(&all)
    );
}

#[test]
fn self_repository_reusable_workflows_are_followed_and_inherit_triggers() {
    let callee = "on: workflow_call\njobs:\n  build:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    permissions: {}\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n      - uses: actions/cache@v4\n        with: { path: t, key: k }\n";
    let caller = "on: workflow_run\njobs:\n  call:\n    uses: $/.github/workflows/build.yml\n";
    let all = findings(&repo(&[("build.yml", callee), ("consumer.yml", caller)]));
    let found = rules(&all);
    assert!(found.contains("untrusted-cache-save"), "{}", messages(&all));
    assert!(
        !messages(&all).contains("cannot see") && !found.contains("unpinned-action"),
        "{}",
        messages(&all)
    );
}

#[test]
fn remote_reusable_workflows_need_evidence() {
    let release = "on:\n  push:\n    tags: ['v*']\njobs:\n  publish:\n    uses: org/release/.github/workflows/publish.yml@0123456789abcdef0123456789abcdef01234567\n    secrets: inherit\n";
    let all = findings(&repo(&[("release.yml", release)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let dispatch = "on: workflow_dispatch\njobs:\n  docs:\n    uses: org/docs/.github/workflows/build.yml@0123456789abcdef0123456789abcdef01234567\n    with:\n      sha: ${{ github.event.pull_request.head.sha || github.sha }}\n";
    let all = findings(&repo(&[("docs.yml", dispatch)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let target = "on: pull_request_target\npermissions: {}\njobs:\n  docs:\n    cache-mode: read\n    uses: org/docs/.github/workflows/build.yml@0123456789abcdef0123456789abcdef01234567\n    secrets: inherit\n";
    let all = findings(&repo(&[("docs.yml", target)]));
    assert_eq!(
        rules(&all),
        BTreeSet::from(["untrusted-secrets".to_owned()]),
        "{}",
        messages(&all)
    );
    let run = "on: workflow_run\npermissions: {}\njobs:\n  docs:\n    cache-mode: read\n    uses: org/docs/.github/workflows/build.yml@0123456789abcdef0123456789abcdef01234567\n    with:\n      sha: ${{ github.event.workflow_run.head_sha }}\n    secrets:\n      token: ${{ secrets.DOCS_TOKEN }}\n";
    let all = findings(&repo(&[("docs.yml", run)]));
    assert!(
        rules(&all).contains("untrusted-secrets"),
        "{}",
        messages(&all)
    );
}

#[test]
fn guards_and_event_contexts_are_evaluated() {
    // The PR head is empty under workflow_dispatch; pull_request is isolated.
    let head = "on: [pull_request, workflow_dispatch]\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n      - uses: actions/cache@v4\n        with: { path: t, key: k }\n";
    // A dispatch's inputs are the maintainer's.
    let input = "on:\n  workflow_dispatch:\n    inputs:\n      ref: { type: string }\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ inputs.ref }}\n      - uses: actions/cache@v4\n        with: { path: t, key: k }\n";
    // The guard keeps the job to pushes.
    let guarded = format!(
        "on: [push, workflow_run]\njobs:\n  a:\n    if: github.event_name == 'push'\n    runs-on: ubuntu-latest\n    steps:\n{POISON_STEPS}"
    );
    for text in [head, input, guarded.as_str()] {
        let all = findings(&repo(&[("w.yml", text)]));
        assert!(errors(&all).is_empty(), "{text}\n{}", messages(&all));
    }
    // A ref set through $GITHUB_ENV from trusted values (the diffusers form).
    let env_ref = "on: [push, workflow_dispatch]\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - env:\n          GITHUB_REF: ${{ github.ref }}\n          INPUT_REF: ${{ github.event.inputs.ref }}\n        run: |\n          echo \"CHECKOUT_REF=refs/tags/$INPUT_REF\" >> $GITHUB_ENV\n          echo \"CHECKOUT_REF=$GITHUB_REF\" >> $GITHUB_ENV\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ env.CHECKOUT_REF }}\n      - run: pip install .\n      - uses: actions/cache@v4\n        with: { path: t, key: k }\n";
    let all = findings(&repo(&[("w.yml", env_ref)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let pr_env = env_ref
        .replace("on: [push, workflow_dispatch]", "on: pull_request_target")
        .replace("$INPUT_REF", "${{ github.event.pull_request.head.sha }}");
    let all = findings(&repo(&[("w.yml", &pr_env)]));
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
    let unguarded = guarded.replace("    if: github.event_name == 'push'\n", "");
    let all = findings(&repo(&[("w.yml", &unguarded)]));
    assert!(rules(&all).contains("untrusted-cache-save"));
}

#[test]
fn git_commands_count_only_when_they_bring_in_what_a_pull_request_controls() {
    let job = |script: &str| {
        format!(
            "on: schedule\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: |\n{script}      - uses: actions/cache@v4\n        with: {{ path: t, key: k }}\n"
        )
    };
    for benign in [
        "          git checkout -b notes\n",
        "          git clone --depth 1 https://github.com/org/data data\n",
        "          git fetch origin gh-pages && git worktree list\n",
    ] {
        let all = findings(&repo(&[("w.yml", &job(benign))]));
        assert!(errors(&all).is_empty(), "{benign}\n{}", messages(&all));
    }
    let pr = "          git fetch origin pull/12/head\n          git checkout FETCH_HEAD\n";
    let all = findings(&repo(&[("w.yml", &job(pr))]));
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
}

#[test]
fn another_runs_artifact_read_as_data_is_not_code() {
    let consumer = |then: &str| {
        format!(
            "on: workflow_run\npermissions: {{ pull-requests: write }}\njobs:\n  comment:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/download-artifact@v4\n        with:\n          run-id: ${{{{ github.event.workflow_run.id }}}}\n          name: report\n      - run: {then}\n"
        )
    };
    let data = consumer("jq -r .summary report.json | gh pr comment 1 --body-file -");
    let all = findings(&repo(&[("comment.yml", &data)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let code = consumer("bash ./report/post.sh");
    let all = findings(&repo(&[("comment.yml", &code)]));
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
}

/// GreptimeTeam/greptimedb (holdout3), `query-regression-comment.yml`: a
/// fork's artifact unpacked into a directory of its own, then a
/// github-script that `require`s a script of the trusted checkout at `.`:
/// the artifact stays data. Loading a file from that directory, or from a
/// computed path, runs it.
#[test]
fn a_github_script_loading_a_trusted_file_beside_an_artifact_directory_runs_no_artifact() {
    let consumer = |script: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [Query Regression]\n    types: [completed]\npermissions: {{ contents: read, actions: read, pull-requests: write }}\njobs:\n  comment:\n    if: github.event.workflow_run.event == 'pull_request'\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.repository.default_branch }}}}\n          persist-credentials: false\n      - uses: actions/download-artifact@v4\n        with:\n          path: query-regression-comment\n          run-id: ${{{{ github.event.workflow_run.id }}}}\n          github-token: ${{{{ secrets.GITHUB_TOKEN }}}}\n          merge-multiple: true\n      - uses: actions/github-script@v7\n        with:\n          script: |\n            {script}\n"
        )
    };
    let trusted = consumer(
        "const validate = require('./.github/scripts/query-regression-comment.cjs'); await validate({ github, context, core });",
    );
    let all = findings(&repo(&[("comment.yml", &trusted)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    for script in [
        "const validate = require('./query-regression-comment/validate.cjs'); await validate({ github });",
        "const f = process.env.SCRIPT; require(f)({ github });",
        "require(`${process.env.GITHUB_WORKSPACE}/query-regression-comment/x.js`)({ github });",
    ] {
        let all = findings(&repo(&[("comment.yml", &consumer(script))]));
        assert!(
            rules(&all).contains("untrusted-cache-save"),
            "{script}: {}",
            messages(&all)
        );
    }
}

/// An attack on the rule above (a trusted `require` beside the pull
/// request's directory): each spelling that still runs the directory's
/// bytes is reported. Concatenated and escaped paths, a `chdir`, the
/// directory handed to the trusted script or to `exec`, `path: pr/.`, a
/// macOS runner's case-blind paths, and download-artifact 4.0.0 to 4.1.6,
/// which unpack `../x` outside `path:` (CVE-2024-42471).
#[test]
fn every_spelling_that_loads_the_pull_requests_directory_in_a_github_script_is_code() {
    let job = |runner: &str, download: &str, path: &str, script: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [ci]\n    types: [completed]\npermissions: {{ contents: write, pull-requests: write }}\njobs:\n  j:\n    runs-on: {runner}\n    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/download-artifact@{download}\n        with:\n          name: pr\n          path: {path}\n          run-id: ${{{{ github.event.workflow_run.id }}}}\n          github-token: ${{{{ secrets.GITHUB_TOKEN }}}}\n      - uses: actions/github-script@v7\n        with:\n          github-token: ${{{{ secrets.BOT_TOKEN }}}}\n          script: |\n            {script}\n"
        )
    };
    let trusted = "const m = require('./.github/scripts/x.cjs'); await m({github, context});";
    let quiet = findings(&repo(&[(
        "x.yml",
        &job("ubuntu-latest", "v4", "pr", trusted),
    )]));
    assert!(
        !rules(&quiet).contains("untrusted-cache-save"),
        "{}",
        messages(&quiet)
    );
    for (runner, download, path, script) in [
        (
            "ubuntu-latest",
            "v4",
            "pr",
            "const dir = 'pr'; const m = require('./' + dir + '/index.js'); await m({github, context});",
        ),
        (
            "ubuntu-latest",
            "v4",
            "pr",
            "const m = require('.' + '/pr/index.js'); await m({github});",
        ),
        (
            "ubuntu-latest",
            "v4",
            "pr",
            "const dir = 'pr'; await import('./' + dir + '/index.mjs');",
        ),
        (
            "ubuntu-latest",
            "v4",
            "pr",
            "process.chdir('pr'); const m = require('./index.js'); await m({github});",
        ),
        (
            "ubuntu-latest",
            "v4",
            "pr",
            "const run = require('./.github/scripts/x.cjs'); await run({github, context, dir: 'pr'});",
        ),
        (
            "ubuntu-latest",
            "v4",
            "pr",
            "await exec.exec('npm', ['test'], {cwd: 'pr'});",
        ),
        (
            "ubuntu-latest",
            "v4",
            "pr/.",
            "const m = require('./pr/index.js'); await m({github});",
        ),
        (
            "windows-latest",
            "v4",
            "pr",
            "const m = require('.\\\\pr\\\\index.js'); await m({github});",
        ),
        (
            "macos-latest",
            "v4",
            "pr",
            "const m = require('./PR/index.js'); await m({github});",
        ),
        ("ubuntu-latest", "v4.1.0", "pr", trusted),
        ("ubuntu-latest", "v4.0.0", "pr", trusted),
    ] {
        let all = findings(&repo(&[("x.yml", &job(runner, download, path, script))]));
        assert!(
            rules(&all).contains("untrusted-cache-save"),
            "{runner} {download} {path} {script}: {}",
            messages(&all)
        );
    }
    // 4.1.7 and the moving `v4` tag carry the fix.
    let fixed = findings(&repo(&[(
        "x.yml",
        &job("ubuntu-latest", "v4.1.7", "pr", trusted),
    )]));
    assert!(
        !rules(&fixed).contains("untrusted-cache-save"),
        "{}",
        messages(&fixed)
    );
}

#[test]
fn caches_outside_github_are_writes_cache_mode_cannot_stop() {
    let consumer = "on: workflow_run\npermissions: {}\njobs:\n  b:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    env:\n      RUSTC_WRAPPER: sccache\n      SCCACHE_BUCKET: ci-cache\n      AWS_SECRET_ACCESS_KEY: ${{ secrets.CACHE_KEY }}\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n      - uses: runs-on/cache@v4\n        with: { path: t, key: k }\n      - uses: docker/build-push-action@v6\n        with:\n          cache-to: type=s3,region=us-east-1,bucket=layers\n      - run: cargo build\n";
    let all = findings(&repo(&[("consumer.yml", consumer)]));
    let saves: Vec<String> = errors(&all)
        .iter()
        .filter(|f| f["rule"] == "untrusted-cache-save")
        .map(|f| f["message"].as_str().unwrap().to_owned())
        .collect();
    let text = saves.join("\n");
    assert!(text.contains("S3 bucket of sccache"), "{text}");
    assert!(text.contains("secrets.CACHE_KEY"), "{text}");
    assert!(text.contains("RunsOn"), "{text}");
    assert!(text.contains("buildx `s3`"), "{text}");
    // On pull_request, a write with no secret (a runner's own role) is one a fork can make.
    let pr = "on: pull_request\npermissions: {}\njobs:\n  b:\n    runs-on: ubuntu-latest\n    env:\n      SCCACHE_BUCKET: ci-cache\n    steps:\n      - run: cargo build\n";
    let all = findings(&repo(&[("ci.yml", pr)]));
    assert!(messages(&all).contains("fork"), "{}", messages(&all));
}

#[test]
fn a_reusable_workflow_handed_a_self_hosted_runner_by_a_pull_request() {
    let call = "on: pull_request\njobs:\n  t:\n    uses: org/ci/.github/workflows/test.yml@0123456789abcdef0123456789abcdef01234567\n    with:\n      runner: gpu-box\n    secrets: inherit\n";
    let all = findings(&repo(&[("ci.yml", call)]));
    assert_eq!(
        rules(&all),
        BTreeSet::from(["persistent-runner".to_owned()]),
        "{}",
        messages(&all)
    );
    let hosted = call.replace("gpu-box", "ubuntu-latest");
    let all = findings(&repo(&[("ci.yml", &hosted)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
}

#[test]
fn a_publisher_on_a_self_hosted_gpu_runner_is_not_untrusted() {
    let publish = "on:\n  push:\n    branches: [main]\n  workflow_dispatch:\npermissions: {}\njobs:\n  publish:\n    if: github.ref == 'refs/heads/main'\n    runs-on: [self-hosted, gpu]\n    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/cache/save@v4\n        with: { path: t, key: k }\n";
    let fixture = repo(&[("publish.yml", publish)]);
    fixture.file(
        ".github/ci-trust.toml",
        "[publisher]\nworkflows = [\"publish.yml\"]\n[artifacts]\ntrusted-workflows = []\n",
    );
    // Trusted code: no cache, secret or credential rule, ephemeral or not.
    let all = findings(&fixture);
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    fixture.file(
        ".github/ci-trust.toml",
        "[publisher]\nworkflows = [\"publish.yml\"]\n[artifacts]\ntrusted-workflows = []\n[contracts]\nephemeral-labels = [\"gpu\"]\n",
    );
    let all = findings(&fixture);
    assert!(errors(&all).is_empty(), "{}", messages(&all));
}

#[test]
fn composite_action_inputs_resolve_before_the_cache_table_decides() {
    let action = "name: warm\ninputs:\n  save:\n    default: 'true'\nruns:\n  using: composite\n  steps:\n    - uses: Swatinem/rust-cache@v2\n      with:\n        save-if: ${{ inputs.save }}\n";
    let consumer = |save: &str| {
        format!(
            "on: workflow_run\npermissions: {{}}\njobs:\n  b:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.workflow_run.head_sha }}}}\n          persist-credentials: false\n      - uses: ./.github/actions/warm\n        with:\n          save: {save}\n"
        )
    };
    let off = consumer("'false'");
    let all = findings(&repo(&[
        (".github/actions/warm/action.yml", action),
        ("consumer.yml", &off),
    ]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let on = consumer("'true'");
    let all = findings(&repo(&[
        (".github/actions/warm/action.yml", action),
        ("consumer.yml", &on),
    ]));
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
}

#[test]
fn pull_request_bytes_only_read_by_git_are_not_code() {
    let job = |then: &str| {
        format!(
            "on: workflow_run\npermissions: {{}}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.workflow_run.head_sha }}}}\n          persist-credentials: false\n      - run: {then}\n"
        )
    };
    let read = job("git diff --stat HEAD~1 > changes.txt");
    let all = findings(&repo(&[("w.yml", &read)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let loaded = read.replace(
        "      - run: git diff --stat HEAD~1 > changes.txt\n",
        "      - uses: actions/github-script@v7\n        with:\n          script: require('./ci/label.js')(github)\n",
    );
    let all = findings(&repo(&[("w.yml", &loaded)]));
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
    let built = job("make test");
    let all = findings(&repo(&[("w.yml", &built)]));
    assert!(
        rules(&all).contains("untrusted-cache-save"),
        "{}",
        messages(&all)
    );
}

/// astral-sh/uv's rebase bot (the corpus): an untrusted-code job rebases a
/// pull request and uploads the result as a git bundle; the next job of the
/// same run downloads it into the runner's temp directory, verifies it and
/// pushes it with git. It never runs those bytes, so it is not an
/// untrusted-code job; the same download unpacked into the workspace, or
/// followed by running something, still is.
#[test]
fn same_run_artifact_only_pushed_with_git_is_data() {
    let run = |download: &str, then: &str| {
        format!(
            "on: workflow_dispatch\npermissions: {{}}\njobs:\n  rebase:\n    runs-on: ubuntu-latest\n    permissions: {{ contents: read }}\n    cache-mode: none\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: refs/pull/${{{{ inputs.pr }}}}/head\n          persist-credentials: false\n      - run: make rebase\n      - uses: actions/upload-artifact@v4\n        with: {{ name: rebased, path: rebased.bundle }}\n  push:\n    needs: rebase\n    runs-on: ubuntu-latest\n    permissions:\n      contents: read\n      id-token: write\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - uses: actions/download-artifact@v4\n        with:\n          name: rebased\n{download}      - env:\n          TOKEN: ${{{{ secrets.PUSH_TOKEN }}}}\n        run: |\n{then}"
        )
    };
    let to_temp = "          path: ${{ runner.temp }}/rebased\n";
    let push = "          git bundle verify \"$RUNNER_TEMP/rebased/rebased.bundle\"\n          git -c core.hooksPath=/dev/null fetch --no-tags \"$RUNNER_TEMP/rebased/rebased.bundle\" HEAD\n          git push \\\n            \"https://x-access-token:${TOKEN}@github.com/org/repo.git\" \\\n            \"FETCH_HEAD:refs/heads/feature\"\n";
    // The maintainer's dispatch names the pull request: the recovery path,
    // reported as a warning, never silence.
    let on_push = |all: &[Value]| -> Vec<String> {
        reported(all)
            .iter()
            .filter(|f| f["job"] == "push")
            .map(|f| format!("{}: {}", f["rule"], f["message"]))
            .collect()
    };
    let all = findings(&repo(&[("rebase.yml", &run(to_temp, push))]));
    assert!(on_push(&all).is_empty(), "{}", messages(&all));
    // Posted as a comment, or uploaded again: data too.
    let posted = run(to_temp, push).replace(
        "      - env:\n          TOKEN",
        "      - uses: marocchino/sticky-pull-request-comment@v3\n        with:\n          path: ${{ runner.temp }}/rebased/summary.md\n      - uses: actions/upload-artifact@v4\n        with:\n          name: again\n          path: ${{ runner.temp }}/rebased\n      - env:\n          TOKEN",
    );
    let all = findings(&repo(&[("rebase.yml", &posted)]));
    assert!(on_push(&all).is_empty(), "{}", messages(&all));
    // Unpacked into the workspace, where the next `git` reads a planted
    // `.git/config`: the bytes may run.
    let all = findings(&repo(&[("rebase.yml", &run("", push))]));
    let flagged = on_push(&all).join("\n");
    assert!(flagged.contains("untrusted-secrets"), "{flagged}");
    assert!(
        flagged.contains("downloads artifacts of this run"),
        "{flagged}"
    );
    // Run after the download: code.
    let runs = "          bash \"$RUNNER_TEMP/rebased/post-push.sh\"\n";
    let all = findings(&repo(&[("rebase.yml", &run(to_temp, runs))]));
    assert!(!on_push(&all).is_empty(), "{}", messages(&all));
    // Worked on inside the download's directory (git reads its config
    // there), or put on the search path: the bytes may run.
    for inside in [
        "          cd \"$RUNNER_TEMP/rebased\" && git status\n",
        "          git -C \"$RUNNER_TEMP/rebased\" status\n",
        "          echo \"$RUNNER_TEMP/rebased\" >> \"$GITHUB_PATH\"\n",
    ] {
        let all = findings(&repo(&[("rebase.yml", &run(to_temp, inside))]));
        assert!(!on_push(&all).is_empty(), "{inside}{}", messages(&all));
    }
    // huggingface/huggingface_hub's style bot: the directory named by a
    // variable of its own, the patch in it applied with git: data. The
    // same variable entered, or a loading variable pointed at it: code.
    let via_var = |env: &str, then: &str| {
        run(to_temp, then).replace(
            "      - env:\n          TOKEN: ${{ secrets.PUSH_TOKEN }}\n",
            &format!("      - env:\n          {env}: ${{{{ runner.temp }}}}/rebased\n          TOKEN: ${{{{ secrets.PUSH_TOKEN }}}}\n"),
        )
    };
    let apply = "          git apply --binary \"$OUT_DIR/style.patch\"\n          git commit -am style && git push\n";
    let all = findings(&repo(&[("rebase.yml", &via_var("OUT_DIR", apply))]));
    assert!(on_push(&all).is_empty(), "{}", messages(&all));
    for (env, then) in [
        ("OUT_DIR", "          cd \"$OUT_DIR\" && git status\n"),
        ("OUT_DIR", "          git -C \"${OUT_DIR}\" status\n"),
        ("HOME", "          git status\n"),
        ("GIT_DIR", "          git status\n"),
    ] {
        let all = findings(&repo(&[("rebase.yml", &via_var(env, then))]));
        assert!(!on_push(&all).is_empty(), "{env} {then}{}", messages(&all));
    }
    // Handed to an action that may build it.
    let build = run(to_temp, push).replace(
        "      - env:\n          TOKEN",
        "      - uses: docker/build-push-action@v6\n        with:\n          context: ${{ runner.temp }}/rebased\n      - env:\n          TOKEN",
    );
    let all = findings(&repo(&[("rebase.yml", &build)]));
    assert!(!on_push(&all).is_empty(), "{}", messages(&all));
}

/// Attack on the same-run data rule: the artifact directory reached through
/// a variable the rule did not follow (the job's `env:`, a script's own
/// assignment, `${{ env.OUT }}`), a loading variable set inside the script
/// (`GIT_DIR=… git`, `export HOME=…`), git's configuration pointed into it,
/// or its bytes copied into the workspace (a planted `.git/config` that the
/// next `git push` obeys) all make its bytes run where the push token is.
#[test]
fn same_run_artifact_reached_by_any_name_or_copied_out_is_code() {
    let run = |job_env: &str, extra: &str, step_env: &str, then: &str| {
        format!(
            "on: workflow_dispatch\npermissions: {{}}\njobs:\n  rebase:\n    runs-on: ubuntu-latest\n    permissions: {{ contents: read }}\n    cache-mode: none\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: refs/pull/${{{{ inputs.pr }}}}/head\n          persist-credentials: false\n      - run: make rebase\n      - uses: actions/upload-artifact@v4\n        with: {{ name: rebased, path: rebased.bundle }}\n  push:\n    needs: rebase\n    runs-on: ubuntu-latest\n{job_env}    permissions:\n      contents: read\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - uses: actions/download-artifact@v4\n        with:\n          name: rebased\n          path: ${{{{ runner.temp }}}}/rebased\n{extra}      - env:\n          TOKEN: ${{{{ secrets.PUSH_TOKEN }}}}\n{step_env}        run: |\n{then}"
        )
    };
    let on_push = |text: &str| -> Vec<String> {
        let all = findings(&repo(&[("rebase.yml", text)]));
        reported(&all)
            .iter()
            .filter(|f| f["job"] == "push")
            .map(|f| format!("{}: {}", f["rule"], f["message"]))
            .collect()
    };
    // Still data: a patch applied and pushed with git.
    let data = run(
        "",
        "",
        "          OUT: ${{ runner.temp }}/rebased\n",
        "          git apply \"$OUT/x.patch\"\n          git push\n",
    );
    assert!(on_push(&data).is_empty(), "{data}");
    let job_env = "    env:\n      OUT: ${{ runner.temp }}/rebased\n";
    let step_env = "          OUT: ${{ runner.temp }}/rebased\n";
    for (job_env, extra, step_env, then) in [
        (
            "",
            "",
            step_env,
            "          cd ${{ env.OUT }} && git push\n",
        ),
        (
            "",
            "      - working-directory: ${{ env.OUT }}\n        env:\n          OUT: ${{ runner.temp }}/rebased\n        run: git status\n",
            "",
            "          true\n",
        ),
        (job_env, "", "", "          cd \"$OUT\" && git push\n"),
        (job_env, "", "", "          git -C \"$OUT\" push\n"),
        (
            "",
            "",
            "",
            "          D=\"$RUNNER_TEMP/rebased\"\n          cd \"$D\" && git push\n",
        ),
        (
            "",
            "",
            "",
            "          GIT_DIR=\"$RUNNER_TEMP/rebased/.git\" git log\n",
        ),
        (
            "",
            "",
            "",
            "          export HOME=\"$RUNNER_TEMP/rebased\"\n          git push\n",
        ),
        (
            "",
            "",
            "",
            "          git config --global include.path \"$RUNNER_TEMP/rebased/cfg\"\n          git push\n",
        ),
        (
            "",
            "",
            "",
            "          git -c include.path=\"$RUNNER_TEMP/rebased/cfg\" push\n",
        ),
        (
            "",
            "",
            "",
            "          cp -r \"$RUNNER_TEMP/rebased/.\" .\n          git push\n",
        ),
        (
            "",
            "",
            "",
            "          tar -xf \"$RUNNER_TEMP/rebased/tree.tar\"\n          git push\n",
        ),
        (
            "",
            "",
            "",
            "          cat \"$RUNNER_TEMP/rebased/cfg\" >> .git/config\n          git push\n",
        ),
    ] {
        let text = run(job_env, extra, step_env, then);
        assert!(!on_push(&text).is_empty(), "silent:\n{text}");
    }
}

/// huggingface/diffusers' style and review bots (the corpus): a job that
/// runs a pull request's code to comment on it holds `pull-requests: write`
/// because commenting is its purpose. That scope posts, labels and edits
/// pull requests; it reaches code only through a gate that trusts labels or
/// reviews, so it is reported when the repository has one. Other write
/// scopes always are.
#[test]
fn conversation_scopes_matter_only_where_labels_or_reviews_open_a_gate() {
    let bot = "on: issue_comment\npermissions:\n  pull-requests: write\n  issues: write\n  contents: read\njobs:\n  style:\n    runs-on: ubuntu-latest\n    cache-mode: none\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: refs/pull/${{ github.event.issue.number }}/head\n          persist-credentials: false\n      - run: make style\n      - run: gh pr comment ${{ github.event.issue.number }} --body done\n";
    let all = findings(&repo(&[("bot.yml", bot)]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    // A label-gated GPU run elsewhere: the bot's token can label a pull
    // request into it.
    let gated = "on: pull_request_target\npermissions: {}\njobs:\n  gpu:\n    if: contains(github.event.pull_request.labels.*.name, 'safe to test')\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo gated\n";
    let all = findings(&repo(&[("bot.yml", bot), ("gpu.yml", gated)]));
    let text = messages(&all);
    assert_eq!(rules(&all).len(), 1, "{text}");
    assert!(text.contains("`pull-requests: write`"), "{text}");
    assert!(text.contains("`issues: write`"), "{text}");
    assert!(text.contains(".github/workflows/gpu.yml:5"), "{text}");
    // `contents: write` pushes: always a finding.
    let pushes = bot.replace("contents: read", "contents: write");
    let all = findings(&repo(&[("bot.yml", &pushes)]));
    let text: Vec<String> = errors(&all)
        .iter()
        .map(|f| f["message"].as_str().unwrap().to_owned())
        .collect();
    let text = text.join("\n");
    assert!(text.contains("`contents: write`"), "{text}");
    // Without a gate it could open, a conversation scope is a warning.
    assert!(!text.contains("`pull-requests: write`"), "{text}");
    assert!(
        reported(&all).iter().any(|f| f["severity"] == "warning"
            && f["message"]
                .as_str()
                .unwrap()
                .contains("`pull-requests: write`")),
        "{all:#?}"
    );
}

/// Without a policy file and without a publisher, `archive-names` is skipped
/// like the other publisher rules (the note lists it): the defaults'
/// `[[archive]]` entries are this repository's, not the checked one's.
#[test]
fn archive_names_are_skipped_without_a_publisher() {
    let caller = "on: push\npermissions: {}\njobs:\n  gpu:\n    uses: ./.github/workflows/pod.yml\n    with:\n      archives: models.tar.zst\n";
    let pod = "on:\n  workflow_call:\n    inputs:\n      archives: { type: string }\npermissions: {}\njobs:\n  run:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"$ARCHIVES\"\n        env:\n          ARCHIVES: ${{ inputs.archives }}\n";
    let fixture = repo(&[("ci.yml", caller), ("pod.yml", pod)]);
    let all = findings(&fixture);
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let notes: Vec<&Value> = all.iter().filter(|f| f["severity"] == "note").collect();
    assert!(
        notes
            .iter()
            .any(|n| n["message"].as_str().unwrap().contains("archive-names")),
        "{notes:?}"
    );
}

/// A reusable workflow's job reached through two callers, each granting it
/// the same write scope, leaving its `cache-mode` open and passing it a
/// branch name: one finding per rule for the job, naming both callers.
#[test]
fn every_rule_reports_a_job_of_several_callers_once_naming_them() {
    let callee = "on:\n  workflow_call:\n    inputs:\n      ref: { type: string }\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n          persist-credentials: false\n      - run: cargo build && echo ${{ inputs.ref }}\n        env:\n          TOKEN: ${{ secrets.DEPLOY_TOKEN }}\n";
    let caller = |name: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [{name}]\npermissions:\n  contents: write\njobs:\n  call:\n    uses: ./.github/workflows/build.yml\n    with:\n      ref: ${{{{ github.event.workflow_run.head_branch }}}}\n"
        )
    };
    let fixture = repo(&[
        ("build.yml", callee),
        ("a.yml", &caller("A")),
        ("b.yml", &caller("B")),
    ]);
    let all = findings(&fixture);
    let on_build: Vec<&Value> = errors(&all)
        .into_iter()
        .filter(|f| f["job"] == "build")
        .collect();
    let mut per_rule: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for f in &on_build {
        per_rule
            .entry(f["rule"].as_str().unwrap())
            .or_default()
            .push(f["message"].as_str().unwrap());
    }
    for rule in [
        "untrusted-cache-save",
        "untrusted-write-permissions",
        "privileged-injection",
    ] {
        let found = per_rule.get(rule).cloned().unwrap_or_default();
        assert_eq!(found.len(), 1, "{rule}: {found:#?}");
        assert!(
            found[0].contains("a.yml") && found[0].contains("b.yml"),
            "{rule} does not name both callers: {}",
            found[0]
        );
    }
    for (rule, found) in &per_rule {
        assert_eq!(found.len(), 1, "{rule}: {found:#?}");
    }
}

/// The same through a local action that calls another: the outer action's
/// `inputs.save`, passed on, resolves in the inner one.
#[test]
fn nested_composite_action_inputs_resolve_through_each_level() {
    let outer = "name: outer\ninputs:\n  save:\n    default: 'true'\nruns:\n  using: composite\n  steps:\n    - uses: ./.github/actions/inner\n      with:\n        save: ${{ inputs.save }}\n";
    let inner = "name: inner\ninputs:\n  save:\n    default: 'true'\nruns:\n  using: composite\n  steps:\n    - uses: Swatinem/rust-cache@v2\n      with:\n        save-if: ${{ inputs.save }}\n";
    let consumer = |save: &str| {
        format!(
            "on: workflow_run\npermissions: {{}}\njobs:\n  b:\n    runs-on: ubuntu-latest\n    cache-mode: read\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.workflow_run.head_sha }}}}\n          persist-credentials: false\n      - uses: ./.github/actions/outer\n        with:\n          save: {save}\n"
        )
    };
    let tree = |save: &str| {
        repo(&[
            (".github/actions/outer/action.yml", outer),
            (".github/actions/inner/action.yml", inner),
            ("consumer.yml", &consumer(save)),
        ])
    };
    let all = findings(&tree("'false'"));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    let all = findings(&tree("'true'"));
    let text = messages(&all);
    assert!(rules(&all).contains("untrusted-cache-save"), "{text}");
    assert!(text.contains("actions/inner/action.yml"), "{text}");
}

/// huggingface/diffusers' Claude review (the corpus): what runs after pull
/// request bytes arrive is read from the script as the shell reads it. A
/// message that names a path in quotes, a URL on a continued line, a
/// comment or a here-document is no command; `$(…)` inside quotes is. And
/// a branch made from a fetched pull request for the next action to check
/// out brings the pull request in.
#[test]
fn only_what_the_shell_runs_counts_after_pull_request_bytes() {
    let job = |script: &str, then: &str| {
        format!(
            "on: issue_comment\npermissions: {{}}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - run: |\n{script}{then}"
        )
    };
    // The branch comes from the pull request the comment is on.
    let switch = "          BRANCH=\"$(gh pr view ${{ github.event.issue.number }} --json headRefName --jq .headRefName)\"\n          git fetch origin \"$BRANCH\"\n          git switch -c new \"origin/$BRANCH\"\n";
    for data in [
        "          gh pr comment 1 --body \"see \\`.ai/\\` and \\`src/x/\\`: [run](${URL}/pull/1)\"\n",
        "          git push \\\n            \"https://x-access-token:${T}@github.com/o/r.git\" HEAD:new\n",
        "          # ./scripts/never-run.sh\n          cat <<EOF > note.md\n          ./not/a/command\n          EOF\n",
    ] {
        let all = findings(&repo(&[("w.yml", &job(switch, data))]));
        assert!(errors(&all).is_empty(), "{data}\n{}", messages(&all));
    }
    // A substitution inside double quotes runs: `$(…)`, and backquotes
    // that are not escaped.
    for runs in [
        "          echo \"$(./scripts/post.sh)\"\n",
        "          echo \"see `./scripts/post.sh`\"\n",
        "          \"$GITHUB_WORKSPACE/scripts/post.sh\" --all\n",
    ] {
        // Reported: with `permissions: {}` and no secret, only the cache
        // token is at stake, which GitHub makes read-only for `issue_comment`
        // runs by default, so it is a warning.
        let all = findings(&repo(&[("w.yml", &job(switch, runs))]));
        assert!(!reported(&all).is_empty(), "{runs}{}", messages(&all));
    }
    // A branch of the pull request, then an action that checks it out.
    let branch = "          git fetch origin \"refs/pull/${PR}/head\"\n          git branch -f -- review FETCH_HEAD\n";
    let action = "      - uses: org/review-action@0123456789abcdef0123456789abcdef01234567\n";
    let all = findings(&repo(&[("w.yml", &job(branch, action))]));
    let text = messages(&all);
    assert!(
        text.contains("git branch -f -- review FETCH_HEAD"),
        "{text}"
    );
    // Fetched only (to diff it), it is not brought in.
    let fetched = "          git fetch origin \"refs/pull/${PR}/head\"\n          git diff HEAD FETCH_HEAD --stat\n";
    let all = findings(&repo(&[("w.yml", &job(fetched, action))]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
}

/// tinygrad's line-count bot (the corpus): on `pull_request_target` the
/// pull request is checked out into `pr/` and only read by the default
/// branch's script, whose result a comment action posts. Nothing of `pr/`
/// runs. Handed to an installer, run from, worked in, copied out, searched
/// by a test runner or given to an action, it does.
#[test]
fn a_pull_request_in_a_subdirectory_read_by_trusted_scripts_is_not_code() {
    let bot = |count: &str, post: &str| {
        format!(
            "on: pull_request_target\njobs:\n  szdiff:\n    permissions:\n      contents: read\n      pull-requests: write\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: actions/checkout@v6\n        with:\n          repository: ${{{{ github.event.pull_request.head.repo.full_name }}}}\n          ref: ${{{{ github.event.pull_request.head.sha }}}}\n          path: pr\n          persist-credentials: false\n      - uses: actions/checkout@v6\n        with:\n          path: base\n          persist-credentials: false\n      - run: |\n          BASE=\"$GITHUB_WORKSPACE/base\"\n          PR=\"$GITHUB_WORKSPACE/pr\"\n{count}{post}"
        )
    };
    let reads = "          pip install tabulate $BASE\n          cp \"$BASE/sz.py\" .\n          python sz.py \"$BASE\" \"$PR\" > loc.txt\n          git -C pr log -1\n";
    let comment = "      - uses: marocchino/sticky-pull-request-comment@v3\n        with:\n          path: loc.txt\n";
    let all = findings(&repo(&[("szdiff.yml", &bot(reads, comment))]));
    assert!(errors(&all).is_empty(), "{}", messages(&all));
    for runs in [
        "          pip install ./pr\n",
        "          pip install \"$PR\"\n",
        "          python pr/setup.py build\n",
        "          cd pr && make\n",
        "          \"$PR/scripts/count.sh\"\n",
        "          cp \"$PR/count.sh\" . && ./count.sh\n",
        "          pytest\n",
        "          echo \"$PR/bin\" >> \"$GITHUB_PATH\"\n",
        "          PYTHONPATH=pr python sz.py\n",
    ] {
        let all = findings(&repo(&[("szdiff.yml", &bot(runs, comment))]));
        assert!(
            rules(&all).contains("untrusted-cache-save"),
            "{runs}{}",
            messages(&all)
        );
    }
    for action in [
        "      - uses: org/lint-action@v1\n        with:\n          path: pr\n",
        "      - uses: org/lint-action@v1\n",
        "      - run: python base/count.py\n        env:\n          PYTHONPATH: pr\n",
    ] {
        let all = findings(&repo(&[("szdiff.yml", &bot(reads, action))]));
        assert!(
            rules(&all).contains("untrusted-cache-save"),
            "{action}{}",
            messages(&all)
        );
    }
    // The job works in the pull request's directory by default.
    for default in [
        "    defaults:\n      run:\n        working-directory: pr\n",
        "    env:\n      PYTHONPATH: pr\n",
    ] {
        let text = bot("          npm ci\n", "").replace(
            "    runs-on: ubuntu-24.04\n",
            &format!("    runs-on: ubuntu-24.04\n{default}"),
        );
        let all = findings(&repo(&[("szdiff.yml", &text)]));
        assert!(
            rules(&all).contains("untrusted-cache-save"),
            "{default}{}",
            messages(&all)
        );
    }
}

/// A `pull_request_target` job runs the default branch's code with
/// secrets: on the runner where pull-request code ran before it, it is the
/// trusted job with something to lose.
#[test]
fn a_pull_request_target_job_sharing_the_runner_is_exposed() {
    let wf = "on: pull_request_target\npermissions: {}\njobs:\n  build:\n    runs-on: gpu-box\n    cache-mode: none\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n          persist-credentials: false\n      - run: cargo build\n  label:\n    runs-on: gpu-box\n    steps:\n      - run: ./label.sh\n        env:\n          TOKEN: ${{ secrets.LABEL_TOKEN }}\n";
    let all = findings(&repo(&[("gpu.yml", wf)]));
    let text = messages(&all);
    assert!(rules(&all).contains("persistent-runner"), "{text}");
    assert!(text.contains("`label` of gpu.yml"), "{text}");
}

/// A reusable workflow whose runner is `${{ inputs.runner }}`: the label
/// its callers pass is the runner, compared with the trusted jobs' labels
/// like a literal one (a runner named by an unresolved expression is not
/// reported).
#[test]
fn a_runner_passed_by_the_callers_is_compared_like_a_literal_label() {
    let callee = "on:\n  workflow_call:\n    inputs:\n      runner: { type: string }\npermissions: {}\njobs:\n  build:\n    runs-on: ${{ inputs.runner }}\n    cache-mode: none\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n          persist-credentials: false\n      - run: cargo build\n";
    let caller = |runner: &str| {
        format!(
            "on: pull_request_target\npermissions: {{}}\njobs:\n  call:\n    uses: ./.github/workflows/build.yml\n    with:\n      runner: {runner}\n  label:\n    runs-on: gpu-box\n    steps:\n      - run: ./label.sh\n        env:\n          TOKEN: ${{{{ secrets.LABEL_TOKEN }}}}\n"
        )
    };
    let all = findings(&repo(&[
        ("build.yml", callee),
        ("ci.yml", &caller("gpu-box")),
    ]));
    let text = messages(&all);
    assert!(rules(&all).contains("persistent-runner"), "{text}");
    assert!(text.contains("`label` of ci.yml"), "{text}");
    // Another machine: nothing shared.
    let all = findings(&repo(&[
        ("build.yml", callee),
        ("ci.yml", &caller("gpu-other")),
    ]));
    assert!(
        !rules(&all).contains("persistent-runner"),
        "{}",
        messages(&all)
    );
}

/// cupy's `flexci.yml` (held-out half 3), cut down: the pull request's
/// tree is checked out into `_pr_untrusted` as data, and a program of the
/// trusted checkout is handed it (by an environment variable of its own
/// name and in its arguments) with a secret. Whether that program runs
/// code from the directory is in the program, not in the workflow: a
/// warning that asks, not an error, and not silence. A variable through
/// which programs load code (`PYTHONPATH`), a program from the directory,
/// a build tool or an action given it stay errors.
#[test]
fn a_pull_requests_directory_handed_to_a_trusted_program_is_a_warning_that_asks() {
    let job = |env: &str, step: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [ci]\n    types: [completed]\npermissions: {{ contents: read }}\njobs:\n  dispatch:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.workflow_run.head_sha }}}}\n          path: _pr_untrusted\n          persist-credentials: false\n      - env:\n          HOOK_SECRET: ${{{{ secrets.HOOK_SECRET }}}}\n{env}\n{step}\n"
        )
    };
    let depends = |all: &[Value]| {
        reported(all).iter().any(|f| {
            f["severity"] == "warning"
                && f["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("depends on: does `")
        })
    };
    for (env, step) in [
        // cupy's own: a variable of the program's and an argument.
        (
            "          PROJECTS_ROOT_DIR: _pr_untrusted",
            "        run: ./.github/workflows/scripts/dispatcher.py --projects \"${PROJECTS_ROOT_DIR}/.pfnci/config.tags.json\"",
        ),
        // A trusted script run by an interpreter, handed a file of it
        // (silent before: taken for a trusted script reading data).
        (
            "          X: y",
            "        run: python .github/scripts/summarise.py _pr_untrusted/report.json",
        ),
        (
            "          X: y",
            "        run: bash ci/build.sh _pr_untrusted",
        ),
        // A third-party action not given the directory.
        (
            "          X: y",
            "        uses: some-org/notify@0123456789abcdef0123456789abcdef01234567",
        ),
    ] {
        let all = findings(&repo(&[("dispatch.yml", &job(env, step))]));
        assert!(errors(&all).is_empty(), "{step}: {}", messages(&all));
        assert!(depends(&all), "{step}: {}", messages(&all));
    }
    for (env, step) in [
        (
            "          PYTHONPATH: _pr_untrusted",
            "        run: python .github/scripts/summarise.py",
        ),
        ("          X: y", "        run: ./_pr_untrusted/setup.sh"),
        (
            "          X: y",
            "        run: npm --prefix _pr_untrusted install",
        ),
        ("          X: y", "        run: cd _pr_untrusted && make"),
        (
            "          X: y",
            "        working-directory: _pr_untrusted\n        run: ../.github/scripts/summarise.py",
        ),
        (
            "          X: y",
            "        uses: some-org/lint@0123456789abcdef0123456789abcdef01234567\n        with:\n          path: _pr_untrusted",
        ),
    ] {
        let all = findings(&repo(&[("dispatch.yml", &job(env, step))]));
        assert!(
            rules(&errors(&all).into_iter().cloned().collect::<Vec<_>>())
                .contains("untrusted-secrets"),
            "{step}: {}",
            messages(&all)
        );
    }
}

/// An attack on the rule above and on the `if $(gh api …)` gate (a
/// helper given the threat model, 2026-12-03), each reproduction kept
/// under `fixtures/contracts/attack-runs-from/caseN` with a README line:
/// an uncertain step first hiding a later certain one, variables programs
/// load through (`BUNDLE_GEMFILE`, `JAVA_TOOL_OPTIONS`, `MAKEFILES`, …), a
/// build tool's wrapper or an installed program by path, an interpreter's
/// options (`perl -Ipr`, `python -W ignore pr/x.py`), glued options
/// (`make -Cpr`), a local action run in the directory's environment, and
/// gates that let anyone through (`--silent`, `exit 1 | tee`, a function
/// shadowing `false`, `exit 256`, a trap). Every workflow of every case
/// is an error.
#[test]
fn every_attack_on_the_pull_request_directory_and_the_if_gate_is_an_error() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/attack-runs-from");
    let mut cases = 0;
    for case in std::fs::read_dir(&root).unwrap() {
        let case = case.unwrap().path();
        let output = crate::support::xtask_cmd(&[
            "check-contracts",
            "--format",
            "json",
            "--persona",
            "auditor",
            "--root",
        ])
        .arg(&case)
        .output()
        .unwrap();
        let all: Value = serde_json::from_str(&stdout(&output)).unwrap();
        let all = all.as_array().unwrap();
        let mut files = 0;
        for file in std::fs::read_dir(case.join(".github/workflows")).unwrap() {
            let name = file.unwrap().file_name().to_string_lossy().into_owned();
            files += 1;
            assert!(
                errors(all)
                    .iter()
                    .any(|f| f["file"].as_str().unwrap_or("").ends_with(&name)),
                "{}/{name}: {}",
                case.display(),
                messages(all)
            );
        }
        assert!(files > 0, "{}", case.display());
        cases += 1;
    }
    assert_eq!(cases, 22);
}

/// An attack on following a github-script's outputs through its
/// JavaScript (a helper given the threat model): rewriting `context` or
/// `String`, shadowing a variable, a second `setOutput` hidden behind an
/// alias, brackets, `.call`, a template or `new Function`, `eval`,
/// `defineProperty`. Each case (`fixtures/contracts/attack-script-outputs`)
/// sets output `n` from the comment's body and expands it into a `run:`
/// of a job that can write: a `privileged-injection` error every time.
#[test]
fn every_attack_on_following_a_scripts_outputs_is_still_an_injection() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/attack-script-outputs");
    let mut cases = 0;
    for case in std::fs::read_dir(&root).unwrap() {
        let case = case.unwrap().path();
        let output = crate::support::xtask_cmd(&[
            "check-contracts",
            "--format",
            "json",
            "--persona",
            "auditor",
            "--root",
        ])
        .arg(&case)
        .output()
        .unwrap();
        let all: Value = serde_json::from_str(&stdout(&output)).unwrap();
        let all = all.as_array().unwrap();
        assert!(
            errors(all)
                .iter()
                .any(|f| f["rule"] == "privileged-injection"),
            "{}: {}",
            case.display(),
            messages(all)
        );
        cases += 1;
    }
    assert_eq!(cases, 30);
}

/// `tj-actions/changed-files` (v41 on, `safe_output` on) escapes the file
/// names it outputs for a shell: expanded into a bash `run:` on Linux or
/// macOS that parses them once they are inert, and its booleans, counts
/// and own group names are no text anywhere. Everywhere else they are its
/// author's text, and an injection: an older or unknown version,
/// `safe_output: false` (in any case), JavaScript, pwsh, python, Windows
/// or a self-hosted runner that may be, a second parse (`eval`, `bash -c`,
/// `ssh`, `xargs sh -c`, a here-document, a shell that re-emitted them),
/// group names read from a file. `a11`…`a22` are an attack's
/// reproductions.
#[test]
fn changed_files_names_escaped_for_a_shell_are_inert_only_in_a_shell() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/changed-files");
    let mut seen = (0, 0);
    for (half, attack) in [("attack", true), ("benign", false)] {
        for case in std::fs::read_dir(root.join(half)).unwrap() {
            let case = case.unwrap().path();
            let (all, _) = auditor_findings(&case, &[]);
            let all = &all;
            let injection = errors(all)
                .iter()
                .any(|f| f["rule"] == "privileged-injection");
            assert_eq!(injection, attack, "{}: {}", case.display(), messages(all));
            if attack {
                seen.0 += 1;
            } else {
                assert!(
                    all.iter()
                        .all(|f| f["severity"] == "note" || f["rule"] == "unpinned-action"),
                    "{}: {}",
                    case.display(),
                    messages(all)
                );
                seen.1 += 1;
            }
        }
    }
    assert_eq!(seen, (22, 2));
}

/// Fields of `github.rest.pulls.get`'s answer typed by GitHub's schema (its
/// number, its head's SHA, a boolean made a string) carry no text into a
/// comment-started job's script; its title, branch or labels do
/// (`attack-script-outputs/a17`…`a22`).
#[test]
fn typed_fields_of_the_pull_request_apis_answer_are_no_injection() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/script-outputs-benign");
    let mut cases = 0;
    for case in std::fs::read_dir(&root).unwrap() {
        let case = case.unwrap().path();
        typed_fields_case(&case);
        cases += 1;
    }
    assert_eq!(cases, 5);
}

fn typed_fields_case(case: &std::path::Path) {
    let (all, status) = auditor_findings(case, &[]);
    let all = &all;
    assert!(
        all.iter().all(|f| f["severity"] == "note"),
        "{}: {}",
        case.display(),
        messages(all)
    );
    assert_eq!(status, Some(0), "{}", messages(all));
}

/// A `jq` (or `gh --jq`) filter whose every output is a boolean or a count
/// prints no text (holdout5: numba-cuda's `.title | contains("[no-ci]")`),
/// nor does the `node_id` of GitHub's answer (tt-forge's issue id); but
/// a filter that can print its input's text (`if … then . else … end`, a
/// `,`, a `//`, a filter from an expression, an interpolated string, a
/// field named `and`) is text, and any field of a file the pull request
/// wrote (`jq .number pr/meta.json`, `.base.ref`) is its author's. So is a
/// filter not read to its end (helper-47's attack, a9–a21): a `def` that
/// gives a builtin's name to `.title`, an `include` of a module (`-L`),
/// error text sent to the output (`2>&1`), the last of two `--jq` or an
/// attached `-q.title`, and options whose values look like the filter.
#[test]
fn a_jq_filter_that_prints_only_booleans_or_counts_carries_no_text() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/contracts/jq-typed");
    let mut seen = (0, 0);
    for (half, attack) in [("attack", true), ("benign", false)] {
        for case in std::fs::read_dir(root.join(half)).unwrap() {
            let case = case.unwrap().path();
            let (all, _) = auditor_findings(&case, &[]);
            let all = &all;
            let injection = errors(all)
                .iter()
                .any(|f| f["rule"] == "privileged-injection");
            assert_eq!(injection, attack, "{}: {}", case.display(), messages(all));
            if attack {
                seen.0 += 1;
            } else {
                seen.1 += 1;
            }
        }
    }
    assert_eq!(seen, (21, 6));
}

/// Pull-request bytes reach a privileged shell through spellings of a
/// file or an output the reader must follow (helper-47): a pull request's
/// file named by `$GITHUB_WORKSPACE/pr/…`, a file `cat` inside a grouped
/// `NAME<<EOF` output, and a filter's output line (`"title=" + .title`)
/// whose name only the filter knows.
#[test]
fn pull_request_bytes_reach_a_privileged_shell_through_files_and_outputs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/pr-bytes-reach-a-shell");
    let mut seen = 0;
    for case in std::fs::read_dir(&root).unwrap() {
        let case = case.unwrap().path();
        let (all, status) = auditor_findings(&case, &[]);
        let all = &all;
        let injection = errors(all)
            .iter()
            .any(|f| f["rule"] == "privileged-injection");
        assert!(injection, "{}: {}", case.display(), messages(all));
        assert_eq!(status, Some(1), "{}", messages(all));
        seen += 1;
    }
    assert_eq!(seen, 4);
}

/// `dawidd6/action-download-artifact` (v3 on) taking the newest run of a
/// workflow, forks' runs left out (its default), runs the bytes of whoever
/// can push a branch to that repository, which these workflows do not
/// show: a warning that asks. That holds for this repository's own
/// workflows too (holdout5: tt-torch's `fail-inspector.yml` installing
/// `on-push.yml`'s wheels, aibrix's coverage of `branch: main`, cuvs's ABI
/// baselines), pinned by commit with a version comment, or named by
/// default (the current workflow). Still errors: forks allowed (or maybe
/// allowed), an older or unknown version, a workflow this tree does not
/// have, and a workflow of this repository whose own runs build a pull
/// request's code under `pull_request_target`, in its own jobs or in a
/// workflow it calls (leaving forks' runs out does not leave those out).
/// Also errors (helper-47, e9–e15): a target workflow that an outsider's
/// event starts (a comment, `pull_request_target`, `workflow_run`), whose
/// runs are this repository's own; `workflow_search`, which takes any
/// workflow's run; and input names in another case (`Allow_Forks`,
/// `Repo:`), which the runner reads as the same inputs. `event: push`
/// asks only for the push runs (w5).
#[test]
fn another_repositorys_branch_artifacts_are_a_warning_that_asks() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/download-other-repository");
    let mut seen = (0, 0);
    for (half, error) in [("error", true), ("warning", false)] {
        for case in std::fs::read_dir(root.join(half)).unwrap() {
            let case = case.unwrap().path();
            let (all, _) = auditor_findings(&case, &["--repository", "me/mine"]);
            let all = &all;
            let secrets: Vec<&Value> = all
                .iter()
                .filter(|f| f["rule"] == "untrusted-secrets")
                .collect();
            assert!(!secrets.is_empty(), "{}: {}", case.display(), messages(all));
            for f in &secrets {
                let want = if error { "error" } else { "warning" };
                assert_eq!(f["severity"], want, "{}: {}", case.display(), messages(all));
            }
            let says = |text: &str| {
                all.iter()
                    .any(|f| f["message"].as_str().unwrap().contains(text))
            };
            let name = case.file_name().unwrap().to_str().unwrap();
            if !error {
                let whose = if name.starts_with("w1_") {
                    "push a branch to `other-org/other-repo`"
                } else {
                    "push a branch to this repository"
                };
                assert!(says(whose), "{}: {}", case.display(), messages(all));
            }
            if name.starts_with("e8_") {
                assert!(
                    says("leaving forks' runs out does not leave out that run"),
                    "{}: {}",
                    case.display(),
                    messages(all)
                );
            }
            if error {
                seen.0 += 1;
            } else {
                seen.1 += 1;
            }
        }
    }
    assert_eq!(seen, (15, 5));
}

/// A persistent self-hosted job that only pull requests start is its own
/// victim when it takes a secret: GitHub hands it to a member's pull
/// request from a branch of this repository, on the machine a fork's run
/// left state on (holdout6's R4, NVIDIA/NeMo-Skills). Without the secret
/// there is nothing to lose there.
#[test]
fn a_persistent_pull_request_job_with_a_secret_is_its_own_victim() {
    let case = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/persistent-runner-member-pull-request");
    let (all, _) = auditor_findings(&case, &[]);
    let all = &all;
    assert!(
        all.iter().any(|f| f["rule"] == "persistent-runner"
            && f["severity"] == "warning"
            && f["message"]
                .as_str()
                .unwrap()
                .contains("pull request from a branch of this repository")),
        "{}",
        messages(all)
    );
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap();
    let text = std::fs::read_to_string(case.join(".github/workflows/gpu_tests.yml")).unwrap();
    std::fs::write(
        wf.join("gpu_tests.yml"),
        text.replace("HF_TOKEN: ${{ secrets.HF_TOKEN }}", "MODE: fast"),
    )
    .unwrap();
    let (all, _) = auditor_findings(dir.path(), &[]);
    assert!(
        !all.iter().any(|f| f["rule"] == "persistent-runner"),
        "{}",
        messages(&all)
    );
}

/// A self-hosted job that pull requests and a trusted nightly both start is
/// its own next victim, even when it also runs bytes that make it untrusted
/// on every start (tenstorrent/tt-forge-fe's `run-tests`, holdout4's missed
/// R2): `persistent-runner` names the nightly's secret.
#[test]
fn a_self_hosted_job_started_by_pull_requests_and_a_nightly_is_its_own_victim() {
    let case = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/persistent-runner-itself");
    let (all, _) = auditor_findings(&case, &[]);
    let all = &all;
    assert!(
        all.iter().any(|f| f["rule"] == "persistent-runner"
            && f["message"].as_str().unwrap().contains("this job itself")
            && f["message"].as_str().unwrap().contains("HF_TOKEN")),
        "{}",
        messages(all)
    );
}

/// check-contracts' findings at every level on the fixture `case` (and its
/// exit code), with `extra` flags.
/// copy-pr-bot (holdout5's cuvs R5, holdout6's bionemo R5): with
/// `.github/copy-pr-bot.yaml`, a push to `pull-request/N` is a pull
/// request's own commit, workflow files included, run with the
/// repository's secrets once a maintainer comments `/ok to test`. One
/// warning at the configuration names the workflows that push starts and
/// what their jobs hold; a store outside GitHub's cache stays a per-job
/// warning, and so is a self-hosted runner that a trusted job uses later.
/// Their Actions cache is the `pull-request/N` branch's own, the
/// steps are the author's (no per-step rule speaks of them), and a job
/// guarded to `main`, or a workflow the mirror's branches do not start, is
/// not reached. Without the configuration (or with `enabled: false`) the
/// same pushes are members'.
#[test]
fn a_copy_pr_bot_mirror_push_runs_the_pull_requests_own_workflows() {
    let case = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/copy-pr-bot");
    let (all, code) = auditor_findings(&case, &["--repository", "acme/gpu"]);
    let real: Vec<&Value> = all.iter().filter(|f| f["severity"] != "note").collect();
    let summary: Vec<&&Value> = real
        .iter()
        .filter(|f| f["rule"] == "untrusted-secrets" && f["file"] == ".github/copy-pr-bot.yaml")
        .collect();
    assert_eq!(summary.len(), 1, "{}", messages(&all));
    let text = summary[0]["message"].as_str().unwrap();
    for needle in [
        "(`any-push.yaml`, `pr.yaml`)",
        "`HF_TOKEN` (`run-tests` of pr.yaml)",
        "`secrets: inherit` (`conda-cpp-build` of pr.yaml)",
        "`id-token: write` (`conda-cpp-build` of pr.yaml)",
        "`SCCACHE_AWS_KEY` (`sccache-build` of pr.yaml)",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
    // `build.yaml` is not started, but its runner is one the copy may pick.
    assert!(
        text.contains("the runner `[self-hosted, gpu]` (`upload` of build.yaml)"),
        "{text}"
    );
    for quiet in ["UPLOAD_TOKEN", "PUBLISH_TOKEN", "(`build.yaml`"] {
        assert!(!text.contains(quiet), "{quiet}\n{text}");
    }
    assert_eq!(summary[0]["severity"], "warning");
    let external: Vec<&&Value> = real
        .iter()
        .filter(|f| f["rule"] == "untrusted-cache-save")
        .collect();
    assert_eq!(external.len(), 1, "{}", messages(&all));
    assert!(
        external[0]["message"]
            .as_str()
            .unwrap()
            .contains("S3 bucket of sccache"),
        "{}",
        messages(&all)
    );
    // The mirror's pod job leaves its machine to `build.yaml`'s `upload`.
    assert!(
        real.iter().any(|f| f["rule"] == "persistent-runner"
            && f["severity"] == "warning"
            && f["message"]
                .as_str()
                .unwrap()
                .contains("`gpu-tests` of pr.yaml")
            && f["message"].as_str().unwrap().contains("`upload`")),
        "{}",
        messages(&all)
    );
    assert_eq!(real.len(), 3, "{}", messages(&all));
    assert_eq!(code, Some(0), "only warnings: the default persona passes");
    // The same workflows without the bot, or with it disabled: members' pushes.
    for config in [None, Some("enabled: false\n")] {
        let dir = tempfile::tempdir().unwrap();
        let wf = dir.path().join(".github/workflows");
        std::fs::create_dir_all(&wf).unwrap();
        for name in ["pr.yaml", "build.yaml", "any-push.yaml"] {
            std::fs::copy(case.join(".github/workflows").join(name), wf.join(name)).unwrap();
        }
        if let Some(config) = config {
            std::fs::write(dir.path().join(".github/copy-pr-bot.yaml"), config).unwrap();
        }
        let (all, _) = auditor_findings(dir.path(), &["--repository", "acme/gpu"]);
        assert!(
            !all.iter().any(|f| f["severity"] != "note"),
            "{config:?}\n{}",
            messages(&all)
        );
    }
    // Enabled, with no workflow its branches start: a workflow the pull
    // request adds still runs.
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::copy(
        case.join(".github/workflows/build.yaml"),
        wf.join("build.yaml"),
    )
    .unwrap();
    std::fs::copy(
        case.join(".github/copy-pr-bot.yaml"),
        dir.path().join(".github/copy-pr-bot.yaml"),
    )
    .unwrap();
    let (all, _) = auditor_findings(dir.path(), &["--repository", "acme/gpu"]);
    assert!(
        all.iter().any(|f| f["rule"] == "untrusted-secrets"
            && f["message"]
                .as_str()
                .unwrap()
                .contains("(no workflow of this tree)")),
        "{}",
        messages(&all)
    );
}

/// helper-51's attack on the copy-pr-bot model: each case under
/// `copy-pr-bot-attack/` is a path the first version of it lost (the
/// binary before it reported them), with the rule and the words a finding
/// must carry.
/// - `wr-guard-head-repo-*`: a `workflow_run` of a mirror's run is on a
///   branch of this repository, so a guard on the head repository (its
///   name, or `fork == false`) does not keep the fork's artifact out of the
///   default branch's cache and `DEPLOY_TOKEN`;
/// - `pr-runner-shared-with-mirror`: the bot copies a member's pull request
///   at once, so that run (with `NGC_API_KEY`) is the next job on the
///   machine a fork's `pull_request` run left state on;
/// - `mirror-dispatch-injection`, `own-copy-picks-runner`: the copy may
///   choose its runner and send a `repository_dispatch`, so the repository's
///   warning names the self-hosted runner a trusted job uses and the
///   dispatched workflow that holds a secret (missed by both binaries);
/// - `filter-five-digit-pr-numbers`: a filter for five-digit numbers is
///   tried with numbers of one to six digits;
/// - `config-enabled-false-inside-block-scalar`: `enabled:` is read as YAML
///   reads it, not line by line.
#[test]
fn copy_pr_bot_attacks_stay_reported() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "wr-guard-head-repo-full-name",
            "untrusted-cache-save",
            "`consume` of post.yml",
        ),
        (
            "wr-guard-head-repo-full-name",
            "untrusted-secrets",
            "`DEPLOY_TOKEN`",
        ),
        (
            "wr-guard-head-repo-fork-false",
            "untrusted-cache-save",
            "`consume` of post.yml",
        ),
        (
            "wr-guard-head-repo-fork-false",
            "untrusted-secrets",
            "`DEPLOY_TOKEN`",
        ),
        (
            "pr-runner-shared-with-mirror",
            "persistent-runner",
            "`gpu-tests` of gpu.yml, which receives `secrets.NGC_API_KEY`",
        ),
        (
            "mirror-dispatch-injection",
            "untrusted-secrets",
            "dispatch, `release.yml` by `repository_dispatch`",
        ),
        (
            "own-copy-picks-runner",
            "untrusted-secrets",
            "the runner `[self-hosted, gpu]` (`upload` of release.yml)",
        ),
        (
            "mirror-dispatch-injection-wfd",
            "untrusted-secrets",
            "dispatch, `release.yml` by `workflow_dispatch`",
        ),
        (
            "filter-five-digit-pr-numbers",
            "untrusted-cache-save",
            "S3 bucket of sccache",
        ),
        (
            "config-enabled-false-inside-block-scalar",
            "untrusted-cache-save",
            "S3 bucket of sccache",
        ),
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contracts/copy-pr-bot-attack");
    for (case, rule, needle) in cases {
        let (all, _) = auditor_findings(&root.join(case), &["--repository", "acme/gpu"]);
        assert!(
            all.iter()
                .any(|f| f["rule"] == *rule && f["message"].as_str().unwrap().contains(needle)),
            "{case}: {rule} with {needle}\n{}",
            messages(&all)
        );
    }
}

fn auditor_findings(case: &std::path::Path, extra: &[&str]) -> (Vec<Value>, Option<i32>) {
    let output = crate::support::xtask_cmd(&[
        "check-contracts",
        "--format",
        "json",
        "--persona",
        "auditor",
    ])
    .args(extra)
    .arg("--root")
    .arg(case)
    .output()
    .unwrap();
    let all: Value = serde_json::from_str(&stdout(&output)).unwrap();
    (all.as_array().unwrap().clone(), output.status.code())
}
