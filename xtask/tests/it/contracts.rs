//! `cargo xtask check-contracts` on real workflow trees: the realistic set
//! modelled on the seed's five workflows must be clean, and each single-edit
//! regression of it must be caught by the right rule (and only that rule).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::support::{Fixture, stderr, stdout};

const GOOD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/contracts/good");

/// A copy of the files under `dir` in a temporary directory.
pub(crate) fn good_from(dir: &str) -> Fixture {
    let fixture = Fixture::new();
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(dir).unwrap();
            let text = std::fs::read_to_string(entry.path()).unwrap();
            fixture.file(&rel.to_string_lossy(), &text);
        }
    }
    fixture
}

/// A copy of the realistic fixture set in a temporary directory.
fn good() -> Fixture {
    good_from(GOOD)
}

/// The repository-relative path of a workflow file name, or of the policy.
pub(crate) fn workflow(name: &str) -> String {
    if name.ends_with(".toml") {
        format!(".github/{name}")
    } else {
        format!(".github/workflows/{name}")
    }
}

/// Replaces `from` (which must occur exactly once) by `to` in `file`.
pub(crate) fn edit(fixture: &Fixture, file: &str, from: &str, to: &str) {
    let path = fixture.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.matches(from).count(),
        1,
        "the edit anchor {from:?} must occur once in {file}"
    );
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// Runs the check with JSON output; returns the exit code and the findings.
pub(crate) fn check(fixture: &Fixture) -> (i32, Vec<Value>) {
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
    let findings: Value = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|err| panic!("JSON output: {err}\n{}", stdout(&output)));
    (code, findings.as_array().unwrap().clone())
}

pub(crate) fn failing_rules(findings: &[Value]) -> BTreeSet<String> {
    findings
        .iter()
        .filter(|f| f["severity"] != "note" && f["suppressed"] == false)
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn realistic_workflow_set_is_clean() {
    let fixture = good();
    let (code, findings) = check(&fixture);
    assert_eq!(findings, Vec::<Value>::new());
    assert_eq!(code, 0);
    let human = fixture.xtask(&["check-contracts"]);
    assert_eq!(human.status.code(), Some(0));
    assert!(
        stdout(&human).contains("0 finding(s)"),
        "{}",
        stdout(&human)
    );
}

/// One regression: a set of textual replacements and the rules that must
/// fire, exactly.
struct Regression {
    what: &'static str,
    file: &'static str,
    edits: &'static [(&'static str, &'static str)],
    rules: &'static [&'static str],
}

const TEST: &str = "runpod-gpu-test.yml";
const EXECUTE: &str = "runpod-gpu-execute.yml";
const PUBLISH: &str = "ci-cache-publish.yml";
const CI: &str = "ci.yml";
const REAPER: &str = "runpod-reaper.yml";
const POLICY: &str = "ci-trust.toml";

const REGRESSIONS: &[Regression] = &[
    Regression {
        what: "the pod runs an archive the policy does not build",
        file: TEST,
        edits: &[(
            "      artifact_name: ${{ needs.cuda-archive.outputs.artifact_name }}\n",
            "      artifact_name: ${{ needs.cuda-archive.outputs.artifact_name }}\n      archives: cuda-test.tar.zst\n",
        )],
        rules: &["archive-names"],
    },
    Regression {
        what: "archive job restores with actions/cache (restore + save)",
        file: TEST,
        edits: &[("uses: actions/cache/restore@v4", "uses: actions/cache@v4")],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "rust-cache save-if becomes an expression",
        file: TEST,
        edits: &[(
            "save-if: false",
            "save-if: ${{ github.ref == 'refs/heads/main' }}",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "rust-cache save-if removed",
        file: TEST,
        edits: &[("          save-if: false\n", "")],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job gains an actions/cache/save step",
        file: TEST,
        edits: &[(
            "      - uses: actions/upload-artifact@v4\n",
            "      - uses: actions/cache/save@v4\n        with:\n          path: trusted/target/gpu-archive\n          key: gpu-archive-${{ steps.archive_key.outputs.key }}\n      - uses: actions/upload-artifact@v4\n",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job declares cache-mode: write",
        file: TEST,
        edits: &[("    cache-mode: read\n", "    cache-mode: write\n")],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job drops its cache-mode, so PR code holds a cache-writing token",
        file: TEST,
        edits: &[("    cache-mode: read\n", "")],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "pod job's cache-mode becomes an expression",
        file: EXECUTE,
        edits: &[(
            "    cache-mode: read\n",
            "    cache-mode: ${{ inputs.mode }}\n",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job turns on sccache's GHA backend",
        file: TEST,
        edits: &[(
            "          GITHUB_TOKEN: ${{ github.token }}\n",
            "          GITHUB_TOKEN: ${{ github.token }}\n          SCCACHE_GHA_ENABLED: \"true\"\n",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "pod job sets up Go with its default caching",
        file: EXECUTE,
        edits: &[(
            "      - uses: actions/download-artifact@v4\n",
            "      - uses: actions/setup-go@v5\n      - uses: actions/download-artifact@v4\n",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job's actions scope becomes write",
        file: TEST,
        edits: &[("      actions: read\n", "      actions: write\n")],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "archive job loses its permissions and the workflow grants write-all",
        file: TEST,
        edits: &[
            (
                "    permissions:\n      contents: read\n      actions: read\n",
                "",
            ),
            (
                "permissions:\n  contents: read\n\nconcurrency",
                "permissions: write-all\n\nconcurrency",
            ),
        ],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "archive job asks for a read scope the policy does not grant",
        file: TEST,
        edits: &[(
            "      actions: read\n",
            "      actions: read\n      packages: read\n",
        )],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "the policy no longer grants the archive job actions: read",
        file: POLICY,
        edits: &[("read-scopes = [\"actions\"]", "read-scopes = []")],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "pod job gets contents: write",
        file: EXECUTE,
        edits: &[(
            "    timeout-minutes: 60\n",
            "    timeout-minutes: 60\n    permissions:\n      contents: write\n",
        )],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "callee drops its permissions, so the pod job inherits the caller's actions: write",
        file: EXECUTE,
        edits: &[("permissions:\n  contents: read\n\njobs:", "jobs:")],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "archive build receives the RunPod key",
        file: TEST,
        edits: &[(
            "          GITHUB_TOKEN: ${{ github.token }}\n",
            "          GITHUB_TOKEN: ${{ github.token }}\n          RUNPOD_API_KEY: ${{ secrets.RUNPOD_API_KEY }}\n",
        )],
        rules: &["untrusted-secrets"],
    },
    Regression {
        what: "pod job receives a secret",
        file: EXECUTE,
        edits: &[(
            "      - run: cargo nextest run",
            "      - env:\n          HF_TOKEN: ${{ secrets.HF_TOKEN }}\n        run: cargo nextest run",
        )],
        rules: &["untrusted-secrets"],
    },
    Regression {
        what: "the caller hands every secret to the pod workflow",
        file: TEST,
        edits: &[(
            "    secrets:\n      RUNPOD_API_KEY: ${{ secrets.RUNPOD_API_KEY }}\n",
            "    secrets: inherit\n",
        )],
        rules: &["untrusted-secrets"],
    },
    Regression {
        what: "publisher also runs on pull_request",
        file: PUBLISH,
        edits: &[("on:\n  push:", "on:\n  pull_request:\n  push:")],
        rules: &["publisher-trigger"],
    },
    Regression {
        what: "publisher runs on release branches too",
        file: PUBLISH,
        edits: &[("branches: [main]", "branches: [main, 'release/**']")],
        rules: &["publisher-trigger"],
    },
    Regression {
        what: "publisher starts on workflow_run",
        file: PUBLISH,
        edits: &[(
            "  workflow_dispatch:\n",
            "  workflow_dispatch:\n  workflow_run:\n    workflows: [CI]\n",
        )],
        rules: &["publisher-trigger"],
    },
    Regression {
        what: "publisher job loses its branch guard",
        file: PUBLISH,
        edits: &[("    if: github.ref == 'refs/heads/main'\n", "")],
        rules: &["publisher-guard"],
    },
    Regression {
        what: "publisher guard weakened with ||",
        file: PUBLISH,
        edits: &[(
            "if: github.ref == 'refs/heads/main'",
            "if: github.ref == 'refs/heads/main' || github.event_name == 'workflow_dispatch'",
        )],
        rules: &["publisher-guard"],
    },
    Regression {
        what: "publisher checks out a dispatch input",
        file: PUBLISH,
        edits: &[(
            "          path: pr\n",
            "          path: pr\n          ref: ${{ inputs.ref }}\n",
        )],
        // A dispatch's inputs are a maintainer's choice: the publisher
        // builds only the commit it runs for, and the cache it then holds a
        // writing token for is the recovery path's warning.
        rules: &["publisher-untrusted-ref", "untrusted-cache-save"],
    },
    Regression {
        what: "publisher fetches a pull request",
        file: PUBLISH,
        edits: &[(
            "      - id: archive_key\n",
            "      - working-directory: pr\n        run: |\n          git fetch origin pull/1/head\n          git checkout FETCH_HEAD\n      - id: archive_key\n",
        )],
        rules: &["publisher-untrusted-ref", "untrusted-cache-save"],
    },
    Regression {
        what: "reader adds a flag to its key invocation",
        file: TEST,
        edits: &[(
            "run: cargo xtask ci-key --root ../pr --github-output",
            "run: cargo xtask ci-key --root ../pr --github-output --explain",
        )],
        rules: &["key-mismatch"],
    },
    Regression {
        what: "publisher changes its key invocation",
        file: PUBLISH,
        edits: &[(
            "run: cargo xtask ci-key --root ../pr --github-output",
            "run: cargo xtask ci-key --root . --github-output",
        )],
        rules: &["key-mismatch"],
    },
    Regression {
        what: "reader runs the key from the PR checkout",
        file: TEST,
        edits: &[(
            "        working-directory: trusted\n        run: cargo xtask ci-key",
            "        working-directory: pr\n        run: cargo xtask ci-key",
        )],
        rules: &["key-mismatch", "key-xtask-checkout"],
    },
    Regression {
        what: "trusted tooling checkout points at the PR head",
        file: TEST,
        edits: &[(
            "          ref: ${{ github.workflow_sha }}\n          path: trusted",
            "          ref: ${{ github.event.workflow_run.head_sha }}\n          path: trusted",
        )],
        rules: &["key-xtask-checkout", "trusted-step-environment"],
    },
    Regression {
        what: "reader bumps its archive key version alone",
        file: TEST,
        edits: &[(
            "key: gpu-archive-${{ steps.archive_key.outputs.key }}",
            "key: gpu-archive-v2-${{ steps.archive_key.outputs.key }}",
        )],
        rules: &["key-shape"],
    },
    Regression {
        what: "publisher bumps its saved key version alone",
        file: PUBLISH,
        edits: &[
            (
                "          lookup-only: true\n",
                "          lookup-only: true\n      - run: echo bumped\n",
            ),
            (
                "        uses: actions/cache/save@v4\n        with:\n          path: trusted/target/gpu-archive\n          key: gpu-archive-${{",
                "        uses: actions/cache/save@v4\n        with:\n          path: trusted/target/gpu-archive\n          key: gpu-archive-v2-${{",
            ),
        ],
        rules: &["key-shape"],
    },
    Regression {
        what: "reader restores with a prefix fallback",
        file: TEST,
        edits: &[(
            "          key: gpu-archive-${{ steps.archive_key.outputs.key }}\n",
            "          key: gpu-archive-${{ steps.archive_key.outputs.key }}\n          restore-keys: gpu-archive-\n",
        )],
        rules: &["restore-keys"],
    },
    Regression {
        what: "reader's rust-cache shared key drifts from the publisher's",
        file: TEST,
        edits: &[("shared-key: gpu-v3", "shared-key: gpu-v4")],
        rules: &["key-shape"],
    },
    Regression {
        what: "archive uploaded under a run-specific name",
        file: TEST,
        edits: &[(
            "          name: ${{ steps.archive_key.outputs.artifact_name }}\n",
            "          name: cuda-archive-${{ github.run_id }}\n",
        )],
        rules: &["artifact-key"],
    },
    Regression {
        what: "PR code is built before the key is computed",
        file: TEST,
        edits: &[(
            "      - id: archive_key\n",
            "      - working-directory: pr\n        run: cargo fetch --locked\n      - id: archive_key\n",
        )],
        rules: &["artifact-key"],
    },
    Regression {
        what: "reaper keeps its credentials",
        file: REAPER,
        edits: &[("persist-credentials: false", "persist-credentials: true")],
        rules: &["lifecycle-job"],
    },
    Regression {
        what: "reaper checks out github.sha instead of the workflow's commit",
        file: REAPER,
        edits: &[("ref: ${{ github.workflow_sha }}", "ref: ${{ github.sha }}")],
        rules: &["lifecycle-job"],
    },
    Regression {
        what: "reaper builds with cargo",
        file: REAPER,
        edits: &[(
            "run: uv run scripts/ci/reap_orphans.py --max-age 3h",
            "run: cargo run -p reaper -- --max-age 3h",
        )],
        rules: &["lifecycle-job"],
    },
    Regression {
        what: "lifecycle watcher saves a cache",
        file: EXECUTE,
        edits: &[(
            "      - name: Delete the pod and cancel obsolete runs\n",
            "      - uses: actions/cache@v4\n        with:\n          path: ~/.cache/pip\n          key: pip-${{ runner.os }}\n      - name: Delete the pod and cancel obsolete runs\n",
        )],
        rules: &["lifecycle-job"],
    },
    Regression {
        what: "reaper's third-party action moves to a tag",
        file: REAPER,
        edits: &[(
            "astral-sh/setup-uv@bd01e18f51369d5a26f1651c3cb451d3417e3bba # v6.3.1",
            "astral-sh/setup-uv@v6",
        )],
        rules: &["unpinned-action"],
    },
    Regression {
        what: "archive job's rust-cache moves to a tag",
        file: TEST,
        edits: &[(
            "Swatinem/rust-cache@9d47c6ad4b02e050fd481d890b2ea34778fd09d6 # v2.7.8",
            "Swatinem/rust-cache@v2",
        )],
        rules: &["unpinned-action"],
    },
    Regression {
        what: "publisher's rust-cache moves to a tag",
        file: PUBLISH,
        edits: &[(
            "Swatinem/rust-cache@9d47c6ad4b02e050fd481d890b2ea34778fd09d6 # v2.7.8",
            "Swatinem/rust-cache@v2",
        )],
        rules: &["unpinned-action"],
    },
    Regression {
        what: "CPU CI moves to pull_request_target and checks out the PR head",
        file: CI,
        edits: &[
            ("on:\n  pull_request:\n", "on:\n  pull_request_target:\n"),
            (
                "    steps:\n      - uses: actions/checkout@v4\n      - uses: dtolnay",
                "    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n      - uses: dtolnay",
            ),
        ],
        rules: &[
            "untrusted-cache-save",
            "unpinned-action",
            "key-shape",
            "untrusted-persist-credentials",
        ],
    },
    Regression {
        what: "CPU CI moves to a self-hosted runner in the matrix",
        file: CI,
        edits: &[(
            "os: [ubuntu-24.04, windows-2022]",
            "os: [ubuntu-24.04, gpu-box]",
        )],
        // A `pull_request` job's cache token is the PR's own scope; on a
        // persistent self-hosted runner its state is what leaks.
        rules: &["persistent-runner"],
    },
    Regression {
        what: "archive job installs CUDA with an action that caches its installer by default",
        file: TEST,
        edits: &[(
            "      - uses: Swatinem/rust-cache@",
            "      - uses: Jimver/cuda-toolkit@b6fc3a8f3a2e1a8b4a0c36ab0b6a7b4b4f10b8e1 # v0.2.24\n      - uses: Swatinem/rust-cache@",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job sets up sccache, whose action exports the cache token to PR code",
        file: TEST,
        edits: &[(
            "      - uses: Swatinem/rust-cache@",
            "      - uses: mozilla-actions/sccache-action@7d986dd989559c6ecdb630a3fd2557667be217ad # v0.0.9\n      - uses: Swatinem/rust-cache@",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "CPU CI moves to pull_request_target and switches to the PR head with `git -C`",
        file: CI,
        edits: &[
            ("on:\n  pull_request:\n", "on:\n  pull_request_target:\n"),
            (
                "      - run: cargo test --workspace",
                "      - run: |\n          git -C . fetch origin \"$HEAD\"\n          git -c advice.detachedHead=false checkout FETCH_HEAD\n      - run: cargo test --workspace",
            ),
        ],
        rules: &[
            "untrusted-cache-save",
            "unpinned-action",
            "key-shape",
            "untrusted-persist-credentials",
        ],
    },
    Regression {
        what: "a workflow_run job unpacks the PR run's artifacts and saves a cache",
        file: CI,
        edits: &[
            (
                "on:\n  pull_request:\n  push:\n    branches: [main]\n",
                "on:\n  workflow_run:\n    workflows: [Build]\n",
            ),
            (
                "      - run: cargo fmt --all --check",
                "      - uses: actions/download-artifact@v4\n        with:\n          run-id: ${{ github.event.workflow_run.id }}\n          github-token: ${{ github.token }}\n      - uses: actions/cache@v4\n        with:\n          path: out\n          key: out-${{ github.sha }}",
            ),
        ],
        rules: &[
            "untrusted-cache-save",
            "key-shape",
            "untrusted-persist-credentials",
        ],
    },
    Regression {
        what: "the caller passes a secret to the pod job as a `with:` input",
        file: TEST,
        edits: &[(
            "      artifact_name: ${{ needs.cuda-archive.outputs.artifact_name }}\n    secrets:",
            "      artifact_name: ${{ needs.cuda-archive.outputs.artifact_name }}${{ secrets.RUNPOD_API_KEY }}\n    secrets:",
        )],
        rules: &["untrusted-secrets"],
    },
    Regression {
        what: "publisher publishes the archive another run uploaded instead of building it",
        file: PUBLISH,
        edits: &[(
            "      - if: steps.restore.outputs.cache-hit != 'true'\n        working-directory: trusted\n",
            "      - uses: actions/download-artifact@v4\n        with:\n          run-id: ${{ inputs.run }}\n          path: trusted/target/gpu-archive\n      - if: steps.restore.outputs.cache-hit != 'true'\n        working-directory: trusted\n",
        )],
        // Its `workflow_dispatch` trigger makes the job an untrusted-code job too.
        rules: &["publisher-untrusted-ref", "untrusted-cache-save"],
    },
    Regression {
        what: "CPU CI becomes a nightly run that checks out a pull request",
        file: CI,
        edits: &[
            (
                "on:\n  pull_request:\n  push:\n    branches: [main]\n",
                "on:\n  schedule:\n    - cron: \"0 3 * * *\"\n",
            ),
            (
                "      - run: cargo test --workspace",
                "      - run: gh pr checkout \"$PR\"\n      - run: cargo test --workspace",
            ),
        ],
        rules: &[
            "untrusted-cache-save",
            "unpinned-action",
            "key-shape",
            "untrusted-persist-credentials",
        ],
    },
    Regression {
        what: "CPU CI's matrix gains a self-hosted runner written as a label list",
        file: CI,
        edits: &[(
            "os: [ubuntu-24.04, windows-2022]",
            "os: [ubuntu-24.04, [self-hosted, gpu]]",
        )],
        // A `pull_request` job's cache token is the PR's own scope; on a
        // persistent self-hosted runner its state is what leaks.
        rules: &["persistent-runner"],
    },
    Regression {
        what: "the pull request is checked out at the workspace root after the trusted tooling",
        file: TEST,
        edits: &[(
            "          path: pr\n          persist-credentials: false\n      - id: archive_key",
            "          persist-credentials: false\n      - id: archive_key",
        )],
        rules: &["key-xtask-checkout", "trusted-step-environment"],
    },
    Regression {
        what: "the pull request is checked out into the trusted xtask's own directory",
        file: TEST,
        edits: &[(
            "          path: pr\n          persist-credentials: false\n      - id: archive_key",
            "          path: trusted/xtask\n          persist-credentials: false\n      - id: archive_key",
        )],
        rules: &["key-xtask-checkout", "trusted-step-environment"],
    },
    Regression {
        what: "a workflow_run job hands the PR head and every secret to a remote reusable workflow",
        file: CI,
        edits: &[
            (
                "on:\n  pull_request:\n  push:\n    branches: [main]\n",
                "on:\n  workflow_run:\n    workflows: [Build]\n",
            ),
            (
                "      - run: cargo fmt --all --check",
                "      - run: cargo fmt --all --check\n\n  gpu:\n    uses: example/gpu/.github/workflows/test.yml@0123456789abcdef0123456789abcdef01234567\n    with:\n      ref: ${{ github.event.workflow_run.head_sha }}\n    secrets: inherit",
            ),
        ],
        rules: &["untrusted-secrets", "untrusted-cache-save"],
    },
    Regression {
        what: "a second job caches what the archive job built, passed as an artifact of the same run",
        file: TEST,
        edits: &[(
            "  gpu-tests:\n",
            "  warm:\n    needs: cuda-archive\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: actions/download-artifact@v4\n        with:\n          name: ${{ needs.cuda-archive.outputs.artifact_name }}\n          path: target\n      - uses: actions/cache/save@v4\n        with:\n          path: target\n          key: warm-${{ github.sha }}\n\n  gpu-tests:\n",
        )],
        rules: &["untrusted-cache-save"],
    },
    Regression {
        what: "archive job's permissions are left empty instead of `{}`",
        file: TEST,
        edits: &[(
            "    permissions:\n      contents: read\n      actions: read\n",
            "    permissions:\n",
        )],
        rules: &["untrusted-write-permissions"],
    },
    Regression {
        what: "CPU CI moves to a custom runner label that merely starts with ubuntu-",
        file: CI,
        edits: &[(
            "os: [ubuntu-24.04, windows-2022]",
            "os: [ubuntu-24.04, ubuntu-gpu]",
        )],
        // A `pull_request` job's cache token is the PR's own scope; on a
        // persistent self-hosted runner its state is what leaks.
        rules: &["persistent-runner"],
    },
    Regression {
        what: "archive job reuses artifacts without binding them to its head commit",
        file: TEST,
        edits: &[(" --reuse --head-sha \"$HEAD_SHA\"", " --reuse")],
        rules: &["artifact-binding"],
    },
    Regression {
        what: "archive job lets the pull request's policy choose the trusted runs",
        file: TEST,
        edits: &[("            --trust-policy .github/ci-trust.toml \\\n", "")],
        rules: &["artifact-binding"],
    },
    Regression {
        what: "consumer run-name states another commit beside its head commit",
        file: TEST,
        edits: &[(
            "run-name: GPU tests for ${{",
            "run-name: GPU tests for ${{ github.event.workflow_run.head_commit.id }} ${{",
        )],
        rules: &["artifact-binding"],
    },
    Regression {
        what: "consumer loses the run-name that states its head commit",
        file: TEST,
        edits: &[(
            "run-name: GPU tests for ${{ github.event.workflow_run.head_sha || format('pr-{0}', inputs.pr_number) }}\n",
            "",
        )],
        rules: &["artifact-binding"],
    },
];

/// With `CHECK_CONTRACTS_EXPORT=DIR`, each regressed tree is also copied to
/// `DIR/NN/` (with `what.txt` and `rules.txt`) so that other checkers can be
/// run on exactly the same files; docs/contracts.md records zizmor's results.
fn export(index: usize, regression: &Regression, fixture: &Fixture) {
    let Some(dir) = std::env::var_os("CHECK_CONTRACTS_EXPORT") else {
        return;
    };
    let out = Path::new(&dir).join(format!("{:02}", index + 1));
    for entry in walkdir::WalkDir::new(fixture.path()) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(fixture.path()).unwrap();
        if entry.file_type().is_file() {
            std::fs::create_dir_all(out.join(rel).parent().unwrap()).unwrap();
            std::fs::copy(entry.path(), out.join(rel)).unwrap();
        }
    }
    std::fs::write(
        out.join("what.txt"),
        format!("{} ({})\n", regression.what, regression.file),
    )
    .unwrap();
    std::fs::write(out.join("rules.txt"), regression.rules.join(",") + "\n").unwrap();
}

#[test]
fn every_single_edit_regression_is_caught_by_its_rule() {
    let mut failures = Vec::new();
    for (index, regression) in REGRESSIONS.iter().enumerate() {
        let fixture = good();
        for (from, to) in regression.edits {
            edit(&fixture, &workflow(regression.file), from, to);
        }
        export(index, regression, &fixture);
        let (code, findings) = check(&fixture);
        let got = failing_rules(&findings);
        let want: BTreeSet<String> = regression.rules.iter().map(|r| r.to_string()).collect();
        // Exit 1 when something fails the check; a path that depends on
        // what the repository does not show is a warning, exit 0.
        let fails = findings
            .iter()
            .any(|f| f["severity"] == "error" && f["suppressed"] == false);
        if got != want || code != i32::from(fails) || want.is_empty() {
            failures.push(format!(
                "{} ({}): want {want:?} exit 1, got {got:?} exit {code}: {findings:#?}",
                regression.what, regression.file
            ));
        }
        // Every finding points at the edited file or at a file the edit changes the meaning of.
        for f in &findings {
            assert!(f["line"].as_u64().unwrap() >= 1, "{f}");
            assert!(f["column"].as_u64().unwrap() >= 1, "{f}");
        }
    }
    assert!(REGRESSIONS.len() >= 25);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_rule_has_a_regression() {
    let covered: BTreeSet<&str> = REGRESSIONS
        .iter()
        .flat_map(|r| r.rules.iter().copied())
        .chain(
            crate::contracts_own::OWN_REGRESSIONS
                .iter()
                .flat_map(|r| r.rules.iter().copied()),
        )
        .collect();
    let output = Fixture::new()
        .file(".github/workflows/x.yml", "on: push\njobs: {}\n")
        .file(
            ".github/ci-trust.toml",
            "[publisher]\nworkflows = [\"x.yml\"]\n[artifacts]\ntrusted-workflows = [\"x.yml\"]\n[[allow]]\nrule = \"no-such-rule\"\nworkflow = \"x.yml\"\nreason = \"r\"\n",
        )
        .xtask(&["check-contracts"]);
    // The error lists every rule id.
    let err = stderr(&output);
    let listed = err.split("rules are: ").nth(1).expect("rule list");
    for id in listed.trim().split(", ") {
        // parse-error has its own test (a_workflow_github_would_refuse_is_one_finding).
        if id != "key-coverage" && id != "parse-error" {
            assert!(covered.contains(id), "no regression for {id}");
        }
    }
}

#[test]
fn human_output_points_at_the_line_with_a_hint() {
    let fixture = good();
    edit(
        &fixture,
        &workflow(TEST),
        "uses: actions/cache/restore@v4",
        "uses: actions/cache@v4",
    );
    let output = fixture.xtask(&["check-contracts"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let line = std::fs::read_to_string(fixture.join(&workflow(TEST)))
        .unwrap()
        .lines()
        .position(|l| l.contains("uses: actions/cache@v4"))
        .unwrap()
        + 1;
    let col = "        uses: ".len() + 1;
    let head =
        format!(".github/workflows/runpod-gpu-test.yml:{line}:{col}: untrusted-cache-save: ");
    assert!(text.contains(&head), "{text}");
    assert!(
        text.contains(&format!("{line} |         uses: actions/cache@v4")),
        "{text}"
    );
    assert!(text.contains("= hint: use actions/cache/restore"), "{text}");
    assert!(
        text.contains("= see docs/contracts.md#untrusted-cache-save"),
        "{text}"
    );
}

#[test]
fn github_and_sarif_formats() {
    let fixture = good();
    edit(
        &fixture,
        &workflow(REAPER),
        "persist-credentials: false",
        "persist-credentials: true",
    );
    let github = fixture.xtask(&["check-contracts", "--format", "github"]);
    assert_eq!(github.status.code(), Some(1));
    let text = stdout(&github);
    assert!(
        text.starts_with(
            "::error file=.github/workflows/runpod-reaper.yml,line=23,col=32,title=lifecycle-job::"
        ),
        "{text}"
    );
    let sarif = fixture.xtask(&["check-contracts", "--format", "sarif"]);
    assert_eq!(sarif.status.code(), Some(1));
    let sarif: Value = serde_json::from_str(&stdout(&sarif)).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules.len() >= 9);
    let result = &run["results"][0];
    assert_eq!(result["ruleId"], "lifecycle-job");
    assert_eq!(result["level"], "error");
    let index = result["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[index]["id"], "lifecycle-job");
    let region = &result["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], 23);
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        ".github/workflows/runpod-reaper.yml"
    );
}

#[test]
fn the_actions_step_summary_gets_a_table() {
    let fixture = good();
    edit(
        &fixture,
        &workflow(REAPER),
        "persist-credentials: false",
        "persist-credentials: true",
    );
    let summary = fixture.join("summary.md");
    let output = crate::support::xtask_cmd(&["check-contracts", "--format", "github"])
        .arg("--root")
        .arg(fixture.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(
        text.starts_with("### check-contracts: 1 finding(s)"),
        "{text}"
    );
    assert!(
        text.contains("| [`lifecycle-job`](docs/contracts.md#lifecycle-job) | `.github/workflows/runpod-reaper.yml:23:32` |"),
        "{text}"
    );
}

#[test]
fn reviewed_exceptions_are_listed_as_suppressed() {
    // An [[allow]] entry in the policy.
    let fixture = good();
    edit(
        &fixture,
        &workflow(REAPER),
        "persist-credentials: false",
        "persist-credentials: true",
    );
    let policy = std::fs::read_to_string(fixture.join(".github/ci-trust.toml")).unwrap();
    fixture.file(
        ".github/ci-trust.toml",
        &format!("{policy}\n[[allow]]\nrule = \"lifecycle-job\"\nworkflow = \"runpod-reaper.yml\"\njob = \"reap\"\nreason = \"pushes the reaper's state branch; reviewed\"\n"),
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0, "{findings:#?}");
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0]["suppressed"], true);
    assert!(
        findings[0]["suppression"]
            .as_str()
            .unwrap()
            .contains("reviewed")
    );
    let human = stdout(&fixture.xtask(&["check-contracts"]));
    assert!(
        human.contains("suppressed (reviewed exceptions):"),
        "{human}"
    );

    // An inline comment, which needs a reason to count.
    let fixture = good();
    edit(
        &fixture,
        &workflow(REAPER),
        "      - uses: astral-sh/setup-uv@bd01e18f51369d5a26f1651c3cb451d3417e3bba # v6.3.1\n",
        "      # ci-trust: allow[unpinned-action] GitHub-verified creator, tag protected\n      - uses: astral-sh/setup-uv@v6\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0, "{findings:#?}");
    assert_eq!(
        findings[0]["suppression"],
        "inline allow: GitHub-verified creator, tag protected"
    );
    edit(
        &fixture,
        &workflow(REAPER),
        " GitHub-verified creator, tag protected",
        "",
    );
    // Unsuppressed again; an unpinned third-party action outside the
    // publisher is a warning (exit 0).
    let (code, findings) = check(&fixture);
    assert_eq!((code, &findings[0]["suppressed"]), (0, &Value::Bool(false)));
    assert_eq!(findings[0]["severity"], "warning");
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("has no reason")
    );
}

#[test]
fn unused_allow_entries_are_noted() {
    let fixture = good();
    let policy = std::fs::read_to_string(fixture.join(".github/ci-trust.toml")).unwrap();
    fixture.file(
        ".github/ci-trust.toml",
        &format!("{policy}\n[[allow]]\nrule = \"unpinned-action\"\nworkflow = \"ci.yml\"\nreason = \"old\"\n"),
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0);
    assert_eq!(findings[0]["severity"], "note");
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("matches no finding")
    );
}

#[test]
fn input_errors_exit_2_with_a_location() {
    let cases: &[(&str, &str, &str)] = &[
        (
            ".github/ci-trust.toml",
            "default-branch = \"main\"\n[key]\nstep = \"x\"\n",
            "line 3",
        ),
        (
            ".github/ci-trust.toml",
            "[publisher]\nworkflows = [\"publish.yml\"]\n",
            "ci-trust.toml:2: publisher.workflows names \"publish.yml\"",
        ),
        (
            ".github/ci-trust.toml",
            "[[contracts.job]]\nworkflow = \"ci-cache-publish.yml\"\njob = \"nope\"\n",
            "names the job \"nope\"",
        ),
        (
            ".github/ci-trust.toml",
            "[artifacts]\ntrusted-workflows = [\"ci-cache-publish.yml\", \"gpu.yml\"]\n",
            "ci-trust.toml:2: artifacts.trusted-workflows names \"gpu.yml\"",
        ),
        (
            ".github/ci-trust.toml",
            "[[allow]]\nrule = \"key-shape\"\nworkflow = \"old.yml\"\nreason = \"r\"\n",
            "[[allow]] names the workflow \"old.yml\"",
        ),
        (
            ".github/ci-trust.toml",
            "[artifacts]\ntrusted-events = [\"push\", \"pull_request_target\"]\n",
            "pull request controls",
        ),
    ];
    for (file, text, needle) in cases {
        let fixture = good();
        fixture.file(file, text);
        let output = fixture.xtask(&["check-contracts"]);
        assert_eq!(output.status.code(), Some(2), "{file}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(needle),
            "{file}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).contains("panicked"));
    }
    let empty = Fixture::new();
    let output = empty.xtask(&["check-contracts"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains(".github/workflows does not exist"));
    // Never pass on nothing: no workflow file, or workflows without a job,
    // is an error, not a clean report.
    empty.file(".github/workflows/README.md", "not a workflow\n");
    let output = empty.xtask(&["check-contracts"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("holds no workflow file"),
        "{}",
        stderr(&output)
    );
    empty.file(
        ".github/workflows/empty.yml",
        "name: x\non: push\njobs: {}\n",
    );
    let output = empty.xtask(&["check-contracts"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("define no job"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn works_without_a_cargo_workspace_and_notes_skipped_coverage() {
    // Only `.github/`: the ci-key form needs no sources; a hashFiles key
    // cannot be checked for coverage, which is a note, not a failure.
    let fixture = good();
    assert!(!fixture.join("Cargo.toml").exists());
    for file in [TEST, PUBLISH] {
        edit(
            &fixture,
            &workflow(file),
            "run: cargo xtask ci-key --root ../pr --github-output",
            "run: echo \"key=gpu-${{ hashFiles('pr/Cargo.lock', 'pr/**/Cargo.toml', 'pr/src/**') }}\" >> \"$GITHUB_OUTPUT\"",
        );
    }
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0, "{findings:#?}");
    assert!(!findings.is_empty());
    for f in &findings {
        assert_eq!(f["severity"], "note");
        assert_eq!(f["rule"], "key-coverage");
        assert!(f["message"].as_str().unwrap().contains("skipped"));
    }
}

#[test]
fn hash_files_keys_must_not_hash_workflows() {
    let fixture = good();
    for file in [TEST, PUBLISH] {
        edit(
            &fixture,
            &workflow(file),
            "run: cargo xtask ci-key --root ../pr --github-output",
            "run: echo \"key=gpu-${{ hashFiles('pr/**') }}\" >> \"$GITHUB_OUTPUT\"",
        );
    }
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from(["key-coverage".to_owned()])
    );
    assert!(findings.iter().any(|f| {
        f["message"]
            .as_str()
            .unwrap()
            .contains("workflow files must not be key inputs")
    }));
}

/// The realistic set plus a small Cargo workspace at the root, with its
/// archive key switched to `hashFiles(PATTERNS)` on both sides.
fn with_workspace_and_hash_files(patterns: &str) -> Fixture {
    let fixture = good();
    fixture
        .file(
            "Cargo.toml",
            "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .file("Cargo.lock", "version = 4\n")
        .file("build.rs", "fn main() {}\n")
        .file(
            "src/lib.rs",
            "pub const GUIDE: &str = include_str!(\"../docs/guide.md\");\n",
        )
        .file("docs/guide.md", "# Guide\n")
        .file("scripts/ci/install.sh", "echo install\n");
    for file in [TEST, PUBLISH] {
        edit(
            &fixture,
            &workflow(file),
            "run: cargo xtask ci-key --root ../pr --github-output",
            &format!(
                "run: echo \"key=gpu-${{{{ hashFiles({patterns}) }}}}\" >> \"$GITHUB_OUTPUT\""
            ),
        );
    }
    fixture
}

#[test]
fn hash_files_keys_must_cover_every_ci_key_input() {
    // Everything ci-key hashes, written relative to the `pr` checkout.
    let complete = "'pr/Cargo.lock', 'pr/**/Cargo.toml', 'pr/build.rs', 'pr/src/**', 'pr/docs/guide.md', 'pr/scripts/ci/**', 'pr/.github/ci-trust.toml'";
    let (code, findings) = check(&with_workspace_and_hash_files(complete));
    assert_eq!(code, 0, "{findings:#?}");
    assert!(findings.is_empty(), "{findings:#?}");

    // The embedded guide and the CI script are missed: both sides are told.
    let partial = "'pr/Cargo.lock', 'pr/**/Cargo.toml', 'pr/build.rs', 'pr/src/**'";
    let (code, findings) = check(&with_workspace_and_hash_files(partial));
    assert_eq!(code, 1);
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from(["key-coverage".to_owned()])
    );
    assert_eq!(findings.len(), 2, "{findings:#?}");
    for f in &findings {
        let message = f["message"].as_str().unwrap();
        assert!(message.contains("docs/guide.md"), "{message}");
        assert!(message.contains("scripts/ci/install.sh"), "{message}");
    }

    // Patterns written against the workspace root, not the checkout path, cover nothing.
    let unprefixed =
        "'Cargo.lock', '**/Cargo.toml', 'build.rs', 'src/**', 'docs/guide.md', 'scripts/ci/**'";
    let (code, findings) = check(&with_workspace_and_hash_files(unprefixed));
    assert_eq!(code, 1, "{findings:#?}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.contains("miss 7 input(s)"), "{message}");
}

#[test]
fn policy_grants_let_reviewed_scopes_through_but_never_secrets_to_pr_code() {
    let fixture = good();
    edit(
        &fixture,
        &workflow(EXECUTE),
        "      - run: cargo nextest run",
        "      - env:\n          HF_TOKEN: ${{ secrets.HF_TOKEN }}\n        run: cargo nextest run",
    );
    edit(
        &fixture,
        &workflow(EXECUTE),
        "    timeout-minutes: 60\n",
        "    timeout-minutes: 60\n    permissions:\n      contents: read\n      packages: read\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from([
            "untrusted-secrets".to_owned(),
            "untrusted-write-permissions".to_owned()
        ])
    );
    assert_eq!(code, 1);
    let policy = std::fs::read_to_string(fixture.join(".github/ci-trust.toml")).unwrap();
    fixture.file(
        ".github/ci-trust.toml",
        &format!("{policy}\n[[contracts.job]]\nworkflow = \"runpod-gpu-execute.yml\"\njob = \"run-gpu-tests\"\nread-scopes = [\"packages\"]\nsecrets = [\"HF_TOKEN\"]\n"),
    );
    // The read scope is granted; the secret is not, whatever the policy
    // says: the pod job of a workflow_run run executes the pull request's
    // archive, and a grant does not make that code trusted.
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1, "{findings:#?}");
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from(["untrusted-secrets".to_owned()])
    );
    let refused = findings
        .iter()
        .find(|f| f["rule"] == "untrusted-secrets")
        .unwrap();
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("a grant does not make that code trusted"),
        "{refused}"
    );
    // Without the secret, the reviewed read scope passes.
    edit(
        &fixture,
        &workflow(EXECUTE),
        "      - env:\n          HF_TOKEN: ${{ secrets.HF_TOKEN }}\n        run: cargo nextest run",
        "      - run: cargo nextest run",
    );
    let policy = std::fs::read_to_string(fixture.join(".github/ci-trust.toml")).unwrap();
    fixture.file(
        ".github/ci-trust.toml",
        &policy.replace("secrets = [\"HF_TOKEN\"]\n", ""),
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0, "{findings:#?}");
    // A grant never turns a write into a read.
    edit(
        &fixture,
        &workflow(EXECUTE),
        "      packages: read\n",
        "      packages: write\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from(["untrusted-write-permissions".to_owned()])
    );
}

#[test]
fn a_directory_with_only_github_and_the_default_policy() {
    // No policy file: the defaults name ci-cache-publish.yml and runpod-gpu-test.yml.
    let fixture = Fixture::new();
    for name in [TEST, EXECUTE, PUBLISH, CI, REAPER] {
        let text = std::fs::read_to_string(format!("{GOOD}/.github/workflows/{name}")).unwrap();
        fixture.file(&workflow(name), &text);
    }
    let (code, findings) = check(&fixture);
    // The defaults' publisher exists, so every rule family runs; without a
    // policy file, read scopes need no grant (the archive job's `actions: read`).
    assert_eq!(code, 0, "{findings:#?}");
    assert_eq!(findings, Vec::<Value>::new());
    // With a policy file, the same read scope is a reviewed grant.
    fixture.file(
        ".github/ci-trust.toml",
        "[publisher]\nworkflows = [\"ci-cache-publish.yml\"]\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from(["untrusted-write-permissions".to_owned()])
    );
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("actions: read")
    );
}

#[test]
fn truncated_or_reindented_workflows_never_crash_the_checker() {
    // Every prefix of every workflow (cut at a line boundary), and every
    // workflow with one line's indentation removed: each run must end in
    // 0, 1 or 2 with a message, never in a panic.
    let fixture = good();
    for name in [TEST, EXECUTE, PUBLISH, CI, REAPER] {
        let path = workflow(name);
        let original = std::fs::read_to_string(fixture.join(&path)).unwrap();
        let lines: Vec<&str> = original.lines().collect();
        let mut variants = Vec::new();
        for cut in 0..lines.len() {
            variants.push(lines[..cut].join("\n") + "\n");
            let mut dedented = lines.clone();
            dedented[cut] = dedented[cut].trim_start();
            variants.push(dedented.join("\n") + "\n");
        }
        for variant in variants {
            fixture.file(&path, &variant);
            let output = fixture.xtask(&[
                "check-contracts",
                "--format",
                "json",
                "--persona",
                "auditor",
            ]);
            let code = output.status.code();
            assert!(
                matches!(code, Some(0..=2)),
                "{name} variant ended with {code:?}:\n{variant}\n{}",
                stderr(&output)
            );
            assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
            if code == Some(2) {
                assert!(
                    stderr(&output).starts_with("error: "),
                    "{}",
                    stderr(&output)
                );
            }
        }
        fixture.file(&path, &original);
    }
}

#[test]
fn local_composite_actions_are_checked_for_saves() {
    // A composite action that only restores is fine in the archive job.
    let fixture = good();
    let action = ".github/actions/warm/action.yml";
    fixture.file(
        action,
        "name: warm\nruns:\n  using: composite\n  steps:\n    - uses: actions/cache/restore@v4\n      with: { path: x, key: warm }\n    - run: echo warm\n      shell: bash\n",
    );
    edit(
        &fixture,
        &workflow(TEST),
        "      - name: Build or reuse the archive\n",
        "      - uses: ./.github/actions/warm\n      - name: Build or reuse the archive\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!((code, findings), (0, Vec::new()));

    // One that hides `actions/cache` (restore + save) one level down is a save.
    fixture.file(
        ".github/actions/inner/action.yaml",
        "name: inner\nruns:\n  using: composite\n  steps:\n    - uses: actions/cache@v4\n      with: { path: x, key: warm }\n",
    );
    fixture.file(
        action,
        "name: warm\nruns:\n  using: composite\n  steps:\n    - run: echo warm\n      shell: bash\n    - uses: ./.github/actions/inner/\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert_eq!(
        failing_rules(&findings),
        BTreeSet::from(["untrusted-cache-save".to_owned()])
    );
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("in .github/actions/inner/action.yaml, line 5"),
        "{message}"
    );

    // `uses: ./` is the action.yml at the root (not `/action.yml`).
    fixture.file(
        "action.yml",
        "name: root\nruns:\n  using: composite\n  steps:\n    - uses: actions/cache/save@v4\n      with: { path: x, key: warm }\n",
    );
    fixture.file(
        action,
        "name: warm\nruns:\n  using: composite\n  steps:\n    - uses: ./\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.contains("in action.yml, line 5"), "{message}");

    // An action the tree does not have cannot be checked: fail closed.
    std::fs::remove_file(fixture.join(action)).unwrap();
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("has no action.yml"),
        "{findings:#?}"
    );

    // A broken action file is an input error with its location.
    fixture.file(action, "runs: [\n");
    let output = fixture.xtask(&["check-contracts"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(".github/actions/warm/action.yml:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_callers_cache_mode_caps_its_callees_jobs() {
    // The pod job sets no cache-mode; its caller's `cache-mode: read` is the ceiling.
    let fixture = good();
    edit(&fixture, &workflow(EXECUTE), "    cache-mode: read\n", "");
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("at its caller `gpu-tests` of runpod-gpu-test.yml"),
        "{message}"
    );
    edit(
        &fixture,
        &workflow(TEST),
        "    uses: ./.github/workflows/runpod-gpu-execute.yml\n",
        "    cache-mode: read\n    uses: ./.github/workflows/runpod-gpu-execute.yml\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!((code, findings), (0, Vec::new()));

    // A caller's explicit write is the callee's ceiling too.
    edit(
        &fixture,
        &workflow(TEST),
        "    cache-mode: read\n    uses:",
        "    cache-mode: write\n    uses:",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("`cache-mode: write` lets it write, at its caller `gpu-tests`"),
        "{message}"
    );
}

#[test]
fn local_composite_actions_that_check_out_other_code_make_the_job_untrusted() {
    let fixture = good();
    edit(
        &fixture,
        &workflow(CI),
        "on:\n  pull_request:\n  push:\n    branches: [main]\n",
        "on:\n  workflow_run:\n    workflows: [Build]\n",
    );
    let action = ".github/actions/co/action.yml";
    fixture.file(
        action,
        "name: co\ninputs:\n  ref:\n    default: ${{ github.sha }}\nruns:\n  using: composite\n  steps:\n    - uses: actions/checkout@v4\n      with:\n        ref: ${{ inputs.ref }}\n",
    );
    edit(
        &fixture,
        &workflow(CI),
        "      - uses: actions/checkout@v4\n      - uses: dtolnay",
        "      - uses: ./.github/actions/co\n      - uses: dtolnay",
    );
    // The default input checks out the run's own commit: nothing to report.
    let (code, findings) = check(&fixture);
    assert_eq!((code, findings), (0, Vec::new()));

    // The caller hands it the pull request's head: the job runs other code.
    edit(
        &fixture,
        &workflow(CI),
        "      - uses: ./.github/actions/co\n",
        "      - uses: ./.github/actions/co\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert!(failing_rules(&findings).contains("untrusted-cache-save"));
    let message = findings
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .find(|m| m.contains("untrusted-code job `test`"))
        .unwrap();
    assert!(
        message.contains("checks out `${{ github.event.workflow_run.head_sha }}` (in .github/actions/co/action.yml, line 10)"),
        "{message}"
    );

    // An action the default branch's tree lacks comes from a run-time checkout.
    std::fs::remove_file(fixture.join(action)).unwrap();
    let (code, findings) = check(&fixture);
    assert_eq!(code, 1);
    assert!(
        findings.iter().any(|f| f["message"]
            .as_str()
            .unwrap()
            .contains("does not have (so it comes from a checkout made during the run)")),
        "{findings:#?}"
    );
}

#[test]
fn a_wide_or_cyclic_tree_of_local_actions_ends_in_a_finding() {
    // Ten self-references per level would be 10^8 expansions unbounded.
    let fixture = good();
    let action = ".github/actions/loop/action.yml";
    let steps = "    - uses: ./.github/actions/loop\n".repeat(10);
    fixture.file(
        action,
        &format!("name: loop\nruns:\n  using: composite\n  steps:\n{steps}"),
    );
    edit(
        &fixture,
        &workflow(TEST),
        "      - name: Build or reuse the archive\n",
        "      - uses: ./.github/actions/loop\n      - name: Build or reuse the archive\n",
    );
    let started = std::time::Instant::now();
    let (code, findings) = check(&fixture);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(code, 1);
    assert!(
        findings.iter().any(|f| f["message"]
            .as_str()
            .unwrap()
            .contains("expands more than 64 local actions")),
        "{findings:#?}"
    );
}
