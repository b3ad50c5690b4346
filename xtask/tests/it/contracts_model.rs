//! The model of what a workflow does (issue 19): evaluated per trigger,
//! following data rather than names, knowing what code a job runs and who
//! can start it, with a severity and a confidence per finding. Each test is
//! a small tree written for it; `seed_weakenings` is shared with the
//! mutation test, which runs it on the seed project's real files.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::contracts::{check, edit, good_from};
use crate::mutation::{Tree, findings_of};
use crate::support::{Fixture, stdout};

/// A tree with the given files (bare names are workflows).
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

/// (rule, job) of the unsuppressed findings at `severity`.
fn at(findings: &[Value], severity: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = findings
        .iter()
        .filter(|f| f["severity"] == severity && f["suppressed"] == false)
        .map(|f| {
            (
                f["rule"].as_str().unwrap_or("").to_owned(),
                f["job"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn pair(rule: &str, job: &str) -> (String, String) {
    (rule.to_owned(), job.to_owned())
}

fn show(findings: &[Value]) -> String {
    findings
        .iter()
        .map(|f| {
            format!(
                "{} {} {}: {}",
                f["severity"], f["rule"], f["job"], f["message"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// Policies of only `[contracts]` settings (the defaults' workflow names,
// which these trees do not have, are dropped as without a policy file).
const TRUST_SAME_REPO: &str = "[contracts]\nsame-repository-pull-requests = \"trusted\"\n";
const NAMED: &str = "[contracts]\nrepository = \"acme/widgets\"\n";

const PRT_BUILD: &str = "on:\n  pull_request_target:\n  push:\n    branches: [main]\npermissions:\n  contents: read\njobs:\n  build:\n    IF\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n          persist-credentials: false\n      - run: make test\n        env:\n          TOKEN: ${{ secrets.DEPLOY_TOKEN }}\n";

/// A guard is evaluated per trigger, with the contexts that trigger has,
/// and `a && b || c` folds as GitHub folds it.
#[test]
fn guards_are_evaluated_per_trigger_with_each_triggers_contexts() {
    let cases = [
        ("", true),
        ("if: github.event_name == 'push'", false),
        (
            "if: github.event_name == 'push' && github.ref == 'refs/heads/main' || github.event_name == 'schedule'",
            false,
        ),
        // `||` binds looser than `&&`: the pull request half stands alone.
        (
            "if: github.event_name == 'push' && github.ref == 'refs/heads/main' || github.event_name == 'pull_request_target'",
            true,
        ),
        // Under pull_request_target, `github.event.pull_request` exists.
        ("if: github.event.pull_request == null", false),
        ("if: ${{ !github.event.pull_request }}", false),
        (
            "if: github.event.pull_request.head.repo.full_name != github.repository",
            true,
        ),
    ];
    for (guard, expected) in cases {
        let text = PRT_BUILD.replace(
            "IF",
            if guard.is_empty() {
                "name: build"
            } else {
                guard
            },
        );
        let fixture = repo(&[("build.yml", &text)]);
        let (_, findings) = check(&fixture);
        let errors = at(&findings, "error");
        assert_eq!(
            errors.contains(&pair("untrusted-secrets", "build")),
            expected,
            "guard {guard:?}:\n{}",
            show(&findings)
        );
    }
}

/// `github.repository == 'org/other'` is decided when the repository's
/// name is known (`--repository`, the policy, the git remotes): a job
/// guarded to another repository never runs here. Unknown, it may run.
#[test]
fn a_guard_naming_another_repository_is_decided_when_the_name_is_known() {
    let text = PRT_BUILD.replace("IF", "if: github.repository == 'acme/benchmarks'");
    let json = |extra: &[&str], fixture: &Fixture| {
        let mut args = vec![
            "check-contracts",
            "--format",
            "json",
            "--persona",
            "auditor",
        ];
        args.extend_from_slice(extra);
        let output = fixture.xtask(&args);
        serde_json::from_str::<Value>(&stdout(&output))
            .unwrap_or_else(|err| panic!("{err}: {}", stdout(&output)))
            .as_array()
            .unwrap()
            .clone()
    };
    let secrets = |findings: &[Value]| {
        findings
            .iter()
            .any(|f| f["rule"] == "untrusted-secrets" && f["suppressed"] == false)
    };

    // Nothing says which repository this is: the guard may hold.
    let fixture = repo(&[("build.yml", &text)]);
    assert!(secrets(&json(&[], &fixture)), "unknown name: may run");
    // Named by the flag: another repository's job.
    assert!(!secrets(&json(&["--repository", "acme/widgets"], &fixture)));
    assert!(secrets(&json(
        &["--repository", "acme/benchmarks"],
        &fixture
    )));
    // Named by the policy.
    let named = repo(&[("build.yml", &text), (".github/ci-trust.toml", NAMED)]);
    assert!(!secrets(&json(&[], &named)));
    // Named by a git remote, which is evidence, not the name: a clone of a
    // fork (`me/benchmarks`) runs the upstream's workflows, and a clone
    // made before `acme/widgets` was renamed `acme/benchmarks` keeps the
    // old name (GitHub redirects it). The guard stays undecided.
    for (remote, runs) in [
        ("https://github.com/acme/widgets.git", true),
        ("git@github.com:me/benchmarks.git", true),
        ("https://github.com/acme/benchmarks", true),
    ] {
        let clone = repo(&[
            ("build.yml", &text),
            (
                ".git/config",
                &format!("[remote \"origin\"]\n\turl = {remote}\n"),
            ),
        ]);
        assert_eq!(secrets(&json(&[], &clone)), runs, "remote {remote}");
    }
    // The owner guard too.
    let owner = repo(&[(
        "build.yml",
        &PRT_BUILD.replace("IF", "if: github.repository_owner == 'acme'"),
    )]);
    assert!(!secrets(&json(&["--repository", "other/widgets"], &owner)));
    assert!(secrets(&json(&["--repository", "acme/widgets"], &owner)));
    // A malformed name is refused, not guessed.
    let output = fixture.xtask(&["check-contracts", "--repository", "widgets"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
}

/// Attack on the remote-decided guards: a renamed repository's clone
/// (`url = …/acme/widgets`, now `acme/benchmarks`), a renamed fork's, or
/// one remote of several never decides that a guard naming another
/// repository is false, so the job that hands the secret to a pull
/// request's code is still reported.
#[test]
fn git_remotes_never_decide_that_a_job_does_not_run() {
    let secrets = |fixture: &Fixture| {
        let output = fixture.xtask(&[
            "check-contracts",
            "--format",
            "json",
            "--persona",
            "auditor",
        ]);
        serde_json::from_str::<Value>(&stdout(&output))
            .unwrap_or_else(|err| panic!("{err}: {}", stdout(&output)))
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "untrusted-secrets" && f["suppressed"] == false)
    };
    let config = |urls: &[&str]| {
        urls.iter()
            .enumerate()
            .map(|(i, url)| format!("[remote \"r{i}\"]\n\turl = {url}\n"))
            .collect::<String>()
    };
    for (guard, urls) in [
        // Renamed since the clone; a fork renamed at creation.
        (
            "if: github.repository == 'acme/benchmarks'",
            &["https://github.com/acme/widgets.git"][..],
        ),
        (
            "if: github.repository == 'acme/benchmarks'",
            &["git@github.com:me/benchmarks-fork.git"][..],
        ),
        // A fork's clone with its upstream: the fork's own jobs run there.
        (
            "if: github.repository != 'acme/benchmarks'",
            &[
                "git@github.com:me/benchmarks.git",
                "https://github.com/acme/benchmarks",
            ][..],
        ),
    ] {
        let clone = repo(&[
            ("build.yml", &PRT_BUILD.replace("IF", guard)),
            (".git/config", &config(urls)),
        ]);
        assert!(secrets(&clone), "{guard} with remotes {urls:?}");
    }
}

/// Attack on `--repository` and `[contracts] repository`: a name that
/// cannot be a repository's (a clone URL, a `.git` suffix, spaces inside)
/// would decide every guard false; it is refused instead.
#[test]
fn a_repository_name_that_cannot_be_one_is_refused() {
    let text = PRT_BUILD.replace("IF", "if: github.repository == 'acme/widgets'");
    let fixture = repo(&[("build.yml", &text)]);
    for name in ["acme/widgets.git", "acme / widgets", "acme/wid gets"] {
        let output = fixture.xtask(&["check-contracts", "--repository", name]);
        assert_eq!(output.status.code(), Some(2), "{name}: {}", stdout(&output));
    }
    let output = fixture.xtask(&["check-contracts", "--repository", " acme/widgets "]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    for name in ["https://github.com/acme/widgets", "acme/widgets.git"] {
        let named = repo(&[
            ("build.yml", &text),
            (
                ".github/ci-trust.toml",
                &format!("[contracts]\nrepository = \"{name}\"\n"),
            ),
        ]);
        let output = named.xtask(&["check-contracts"]);
        assert_eq!(output.status.code(), Some(2), "{name}: {}", stdout(&output));
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(err.contains("[contracts] repository"), "{err}");
    }
}

/// The token persisted in `.git/config` has the job's token scopes, and
/// `id-token: write` is none of them: a persisted read-only token is a
/// question (is the repository private?), the OIDC grant its own error.
#[test]
fn a_persisted_token_is_judged_by_its_own_scopes_not_the_oidc_grant() {
    let text = "on: pull_request_target\npermissions:\n  contents: read\n  id-token: write\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n      - run: make test\n";
    let (_, findings) = check(&repo(&[("test.yml", text)]));
    let errors = at(&findings, "error");
    assert!(
        errors.contains(&pair("untrusted-write-permissions", "test")),
        "{}",
        show(&findings)
    );
    assert!(
        !errors.contains(&pair("untrusted-persist-credentials", "test")),
        "{}",
        show(&findings)
    );
    assert!(
        at(&findings, "warning").contains(&pair("untrusted-persist-credentials", "test")),
        "{}",
        show(&findings)
    );
    // A write scope beside it makes the persisted token an error again.
    let text = text.replace("  contents: read\n", "  contents: write\n");
    let (_, findings) = check(&repo(&[("test.yml", &text)]));
    assert!(
        at(&findings, "error").contains(&pair("untrusted-persist-credentials", "test")),
        "{}",
        show(&findings)
    );
}

const DISPATCH: &str = "on:\n  workflow_dispatch:\n    inputs:\n      pr:\n        type: number\npermissions:\n  contents: read\njobs:\n  rerun:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: refs/pull/${{ inputs.pr }}/head\n          persist-credentials: false\n      - run: make gpu-test\n        env:\n          TOKEN: ${{ secrets.GPU_TOKEN }}\n";

/// A maintainer's dispatch that names a pull request is the recovery path:
/// its own warning, never silence, never an error.
#[test]
fn a_dispatch_that_names_a_pull_request_is_a_warning_not_silence() {
    let text = DISPATCH;
    let (code, findings) = check(&repo(&[("rerun.yml", text)]));
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
    assert!(
        at(&findings, "warning").contains(&pair("untrusted-secrets", "rerun")),
        "{}",
        show(&findings)
    );
    let warning = findings
        .iter()
        .find(|f| f["rule"] == "untrusted-secrets")
        .unwrap();
    assert!(
        warning["question"].as_str().is_some_and(|q| !q.is_empty()),
        "{warning}"
    );
    assert_eq!(code, 0, "warnings do not fail the check");
}

const WORKFLOW_RUN_BUILD: &str = "on:\n  workflow_run:\n    workflows: [CI]\n    types: [completed]\npermissions:\n  contents: read\njobs:\n  gpu:\n    if: github.event.workflow_run.head_repository.full_name == github.repository\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.workflow_run.head_sha }}\n          persist-credentials: false\n      - run: cargo test\n        env:\n          POD_KEY: ${{ secrets.POD_KEY }}\n";

/// Same-repository pull requests are untrusted unless the policy says
/// otherwise; fork pull requests are untrusted whatever it says.
#[test]
fn the_policy_chooses_whether_same_repository_pull_requests_are_trusted() {
    let untrusted = repo(&[("gpu.yml", WORKFLOW_RUN_BUILD)]);
    let (_, findings) = check(&untrusted);
    assert!(
        at(&findings, "error").contains(&pair("untrusted-secrets", "gpu")),
        "{}",
        show(&findings)
    );
    let trusted = repo(&[
        ("gpu.yml", WORKFLOW_RUN_BUILD),
        (".github/ci-trust.toml", TRUST_SAME_REPO),
    ]);
    let (_, findings) = check(&trusted);
    assert!(
        !at(&findings, "error").contains(&pair("untrusted-secrets", "gpu")),
        "{}",
        show(&findings)
    );
    // Without the same-repository guard, forks reach it: an error either way.
    let open = repo(&[
        (
            "gpu.yml",
            &WORKFLOW_RUN_BUILD.replace(
                "    if: github.event.workflow_run.head_repository.full_name == github.repository\n",
                "",
            ),
        ),
        (
            ".github/ci-trust.toml",
            TRUST_SAME_REPO,
        ),
    ]);
    let (_, findings) = check(&open);
    assert!(
        at(&findings, "error").contains(&pair("untrusted-secrets", "gpu")),
        "{}",
        show(&findings)
    );
}

/// The seed's shape: a script asks the API for the pull request's head and
/// writes `ref=` to `GITHUB_OUTPUT`; a later job checks out
/// `repository: ${{ env.REPO }}` (this repository's own name) at that ref
/// into a subdirectory and builds it while holding a cache-writing token.
const SEED_LIKE: &str = r#"on:
  workflow_run:
    workflows: [CI]
    types: [in_progress]
permissions:
  contents: read
env:
  REPO: acme/widgets
jobs:
  authorize:
    if: github.event.workflow_run.event == 'pull_request'
    runs-on: ubuntu-latest
    outputs:
      ref: ${{ steps.resolve.outputs.ref }}
    steps:
      - id: resolve
        env:
          GH_TOKEN: ${{ github.token }}
          PULLS: ${{ toJson(github.event.workflow_run.pull_requests) }}
        run: |
          number="$(jq -r '.[0].number' <<<"${PULLS}")"
          pr_json="$(gh api "repos/${GITHUB_REPOSITORY}/pulls/${number}")"
          head_sha="$(jq -r '.head.sha' <<<"${pr_json}")"
          echo "ref=${head_sha}" >> "${GITHUB_OUTPUT}"
  archive:
    needs: authorize
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          repository: ${{ env.REPO }}
          ref: ${{ needs.authorize.outputs.ref }}
          path: widgets
          persist-credentials: false
      - uses: actions/cache/restore@v4
        with:
          path: widgets/target
          key: build-${{ hashFiles('widgets/Cargo.lock') }}
      - run: cargo build --release
        working-directory: widgets
"#;

#[test]
fn a_ref_resolved_by_an_api_script_checked_out_from_this_repositorys_own_name_is_pull_request_code()
{
    let named = repo(&[("gpu.yml", SEED_LIKE), (".github/ci-trust.toml", NAMED)]);
    let (_, findings) = check(&named);
    assert!(
        at(&findings, "error").contains(&pair("untrusted-cache-save", "archive")),
        "{}",
        show(&findings)
    );
    // Without a policy, a guard that names the repository names it too.
    let guarded = repo(&[(
        "gpu.yml",
        &SEED_LIKE.replace(
            "    if: github.event.workflow_run.event == 'pull_request'\n",
            "    if: github.repository == 'acme/widgets' && github.event.workflow_run.event == 'pull_request'\n",
        ),
    )]);
    let (_, findings) = check(&guarded);
    assert!(
        at(&findings, "error").contains(&pair("untrusted-cache-save", "archive")),
        "{}",
        show(&findings)
    );
    // The cache-mode the platform enforces closes it.
    let closed = repo(&[
        (
            "gpu.yml",
            &SEED_LIKE.replace(
                "  archive:\n    needs: authorize\n",
                "  archive:\n    needs: authorize\n    cache-mode: read\n",
            ),
        ),
        (".github/ci-trust.toml", NAMED),
    ]);
    let (_, findings) = check(&closed);
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
    // Another repository at a ref this repository's pull request names is
    // still the pull request's choice of code; a fixed ref of another
    // repository is not.
    let other_fixed = repo(&[(
        "gpu.yml",
        &SEED_LIKE
            .replace("REPO: acme/widgets", "REPO: other/tools")
            .replace("ref: ${{ needs.authorize.outputs.ref }}", "ref: v1.2.3"),
    )]);
    let (_, findings) = check(&other_fixed);
    assert!(
        !at(&findings, "error").contains(&pair("untrusted-cache-save", "archive")),
        "{}",
        show(&findings)
    );
}

/// A call to a local reusable workflow that is not there is a finding on the
/// calling job, and every other file is still checked.
#[test]
fn a_missing_local_callee_is_a_finding_on_the_caller_and_the_rest_is_checked() {
    let caller = "on: pull_request\njobs:\n  call:\n    uses: ./.github/workflows/gone.yml\n";
    let other = PRT_BUILD.replace("IF", "name: build");
    let (code, findings) = check(&repo(&[("caller.yml", caller), ("build.yml", &other)]));
    let errors = at(&findings, "error");
    assert!(
        findings.iter().any(|f| f["job"] == "call"
            && f["workflow"] == "caller.yml"
            && f["severity"] != "note"),
        "{}",
        show(&findings)
    );
    assert!(
        errors.contains(&pair("untrusted-secrets", "build")),
        "{}",
        show(&findings)
    );
    assert_eq!(code, 1);
}

/// A workflow whose `on:` is commented out never runs (a note); an empty
/// one is a note too; neither fails the check or hides the others.
#[test]
fn disabled_and_empty_workflows_are_notes() {
    let disabled = "name: off\n# on:\n#   pull_request_target:\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.pull_request.head.sha }}\n      - run: make\n        env:\n          T: ${{ secrets.T }}\n";
    let (code, findings) = check(&repo(&[
        ("off.yml", disabled),
        ("empty.yml", "# nothing here yet\n"),
        (
            "ci.yml",
            "on: push\npermissions:\n  contents: read\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make test\n",
        ),
    ]));
    let notes: Vec<&str> = findings
        .iter()
        .filter(|f| f["severity"] == "note")
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(notes.contains(&"disabled-workflow"), "{}", show(&findings));
    assert!(notes.contains(&"empty-workflow"), "{}", show(&findings));
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
    assert_eq!(code, 0);
}

/// key-mismatch compares what the key step computes: comments, blank
/// lines and layout do not count; a different command does.
#[test]
fn key_mismatch_compares_the_computation_not_its_layout() {
    let fixture = good_from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/contracts/good"
    ));
    edit(
        &fixture,
        ".github/workflows/runpod-gpu-test.yml",
        "        run: cargo xtask ci-key --root ../pr --github-output\n",
        "        run: |\n          # the content key, as the publisher computes it\n\n          cargo   xtask ci-key \\\n            --root ../pr --github-output   # same flags\n",
    );
    let (code, findings) = check(&fixture);
    assert_eq!(code, 0, "{}", show(&findings));
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
    edit(
        &fixture,
        ".github/workflows/runpod-gpu-test.yml",
        "--root ../pr --github-output   # same flags",
        "--root ../pr --github-output --explain",
    );
    let (_, findings) = check(&fixture);
    assert!(
        at(&findings, "error")
            .iter()
            .any(|(rule, _)| rule == "key-mismatch"),
        "{}",
        show(&findings)
    );
}

/// The default persona shows errors and notes and its exit code follows
/// errors; the auditor sees warnings too, with their question.
#[test]
fn the_default_output_follows_errors_and_the_auditor_sees_everything() {
    // Only a warning: a maintainer's dispatch that names a pull request.
    let text = DISPATCH;
    let fixture = repo(&[("rerun.yml", text)]);
    let regular = fixture.xtask(&["check-contracts"]);
    assert_eq!(regular.status.code(), Some(0), "{}", stdout(&regular));
    assert!(
        !stdout(&regular).contains("warning: untrusted-secrets"),
        "{}",
        stdout(&regular)
    );
    let auditor = fixture.xtask(&["check-contracts", "--persona", "auditor"]);
    assert_eq!(auditor.status.code(), Some(0), "{}", stdout(&auditor));
    let out = stdout(&auditor);
    assert!(out.contains("warning: untrusted-secrets"), "{out}");
    assert!(out.contains("depends on:"), "{out}");
    let regular_json = fixture.xtask(&["check-contracts", "--format", "json"]);
    let all: Value = serde_json::from_str(&stdout(&regular_json)).unwrap();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "warning"),
        "{all}"
    );
    let (_, findings) = check(&fixture);
    let warning = findings
        .iter()
        .find(|f| f["rule"] == "untrusted-secrets")
        .unwrap_or_else(|| panic!("{}", show(&findings)));
    assert_eq!(warning["severity"], "warning");
    assert!(warning["confidence"].is_string(), "{warning}");
}

/// A local action runs from the checkout it lives in: inside a pull
/// request's checkout it is the pull request's code.
#[test]
fn a_local_action_resolves_inside_the_checkout_it_lives_in() {
    let job = |uses: &str| {
        format!(
            "on: pull_request_target\npermissions:\n  contents: read\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.pull_request.head.sha }}}}\n          path: pr\n          persist-credentials: false\n      - uses: {uses}\n        env:\n          TOKEN: ${{{{ secrets.LINT_TOKEN }}}}\n"
        )
    };
    let action = "runs:\n  using: composite\n  steps:\n    - shell: bash\n      run: ./lint.sh\n";
    let inside = repo(&[
        ("lint.yml", &job("./pr/.github/actions/lint")),
        (".github/actions/lint/action.yml", action),
    ]);
    let (_, findings) = check(&inside);
    assert!(
        at(&findings, "error").contains(&pair("untrusted-secrets", "lint")),
        "{}",
        show(&findings)
    );
    let base = repo(&[
        ("lint.yml", &job("./.github/actions/lint")),
        (
            ".github/actions/lint/action.yml",
            "runs:\n  using: composite\n  steps:\n    - shell: bash\n      run: echo base\n",
        ),
    ]);
    let (_, findings) = check(&base);
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
}

/// `GITHUB_ENV` written from a pull request's bytes sets the environment of
/// every later step of a privileged job.
#[test]
fn github_env_written_from_pull_request_bytes_is_an_injection() {
    let text = |line: &str| {
        format!(
            "on: pull_request_target\npermissions:\n  contents: read\njobs:\n  label:\n    runs-on: ubuntu-latest\n    env:\n      TOKEN: ${{{{ secrets.BOT_TOKEN }}}}\n    steps:\n      - run: {line}\n      - run: ./label.sh\n"
        )
    };
    for line in [
        "echo \"TITLE=${{ github.event.pull_request.title }}\" >> \"$GITHUB_ENV\"",
        "echo \"BRANCH=${{ github.head_ref }}\" >> $GITHUB_ENV",
    ] {
        let (_, findings) = check(&repo(&[("label.yml", &text(line))]));
        assert!(
            at(&findings, "error").contains(&pair("privileged-injection", "label")),
            "{line}:\n{}",
            show(&findings)
        );
    }
    // A number or a sha cannot carry a newline.
    let (_, findings) = check(&repo(&[(
        "label.yml",
        &text("echo \"PR=${{ github.event.pull_request.number }}\" >> \"$GITHUB_ENV\""),
    )]));
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
    // Through a local composite action: the title passed as an input, put
    // into the inner step's `env:`, piped into `$GITHUB_ENV`.
    let action = "name: label\ninputs:\n  value:\n    required: true\nruns:\n  using: composite\n  steps:\n    - shell: bash\n      env:\n        VALUE: ${{ inputs.value }}\n      run: |\n        echo \"LABEL=$VALUE\" | tee -a \"$GITHUB_ENV\"\n";
    let uses = "on: pull_request_target\npermissions:\n  contents: read\njobs:\n  label:\n    runs-on: ubuntu-latest\n    env:\n      TOKEN: ${{ secrets.BOT_TOKEN }}\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - uses: ./.github/actions/label\n        with:\n          value: VALUE\n      - run: ./label.sh\n";
    for (value, error) in [
        ("${{ github.event.pull_request.title }}", true),
        ("${{ github.event.pull_request.number }}", false),
    ] {
        let (_, findings) = check(&repo(&[
            ("label.yml", &uses.replace("VALUE", value)),
            (".github/actions/label/action.yml", action),
        ]));
        assert_eq!(
            at(&findings, "error").contains(&pair("privileged-injection", "label")),
            error,
            "{value}:\n{}",
            show(&findings)
        );
    }
}

/// An artifact from a pull request's run is data until something executes
/// it; executed in a job with a secret it is an error.
#[test]
fn a_downloaded_pull_request_artifact_that_is_executed_is_code() {
    let text = |use_it: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [CI]\n    types: [completed]\npermissions:\n  contents: read\njobs:\n  report:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/download-artifact@v4\n        with:\n          name: bench\n          path: bench\n          run-id: ${{{{ github.event.workflow_run.id }}}}\n          github-token: ${{{{ github.token }}}}\n      - run: {use_it}\n        env:\n          TOKEN: ${{{{ secrets.REPORT_TOKEN }}}}\n"
        )
    };
    let (_, findings) = check(&repo(&[("report.yml", &text("bash bench/report.sh"))]));
    assert!(
        at(&findings, "error").contains(&pair("untrusted-secrets", "report")),
        "{}",
        show(&findings)
    );
    let (_, findings) = check(&repo(&[("report.yml", &text("cat bench/results.txt"))]));
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
}

/// dawidd6/action-download-artifact names its run as download-artifact
/// does: a dispatcher's `run_id` is the recovery path (a warning), the
/// pull request's CI run after `workflow_run` an error, and the newest run
/// of a workflow (which may be a pull request's) is not trusted either.
#[test]
fn another_runs_artifacts_are_judged_by_who_names_the_run() {
    let text = |on: &str, with: &str| {
        format!(
            "on:\n{on}permissions:\n  contents: read\njobs:\n  release:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: dawidd6/action-download-artifact@b6e2e70617bc3265edd6dab6c906732b2f1ae151\n        with:\n          workflow: build.yml\n{with}      - run: pip install wheels/*.whl && python -m pytest\n        env:\n          TOKEN: ${{{{ secrets.RELEASE_TOKEN }}}}\n"
        )
    };
    let dispatch =
        "  workflow_dispatch:\n    inputs:\n      build_run_id:\n        required: true\n";
    let after_ci = "  workflow_run:\n    workflows: [CI]\n    types: [completed]\n";
    for (on, with, error, warning) in [
        (
            dispatch,
            "          run_id: ${{ github.event.inputs.build_run_id }}\n",
            false,
            true,
        ),
        (
            dispatch,
            "          run_id: ${{ inputs.build_run_id }}\n",
            false,
            true,
        ),
        (
            after_ci,
            "          run_id: ${{ github.event.workflow_run.id }}\n",
            true,
            false,
        ),
        (
            after_ci,
            "          pr: ${{ github.event.workflow_run.pull_requests[0].number }}\n",
            true,
            false,
        ),
        (dispatch, "          branch: main\n", true, false),
    ] {
        let (_, findings) = check(&repo(&[("release.yml", &text(on, with))]));
        let secrets = pair("untrusted-secrets", "release");
        assert_eq!(
            at(&findings, "error").contains(&secrets),
            error,
            "{with}{}",
            show(&findings)
        );
        assert_eq!(
            at(&findings, "warning").contains(&secrets),
            warning,
            "{with}{}",
            show(&findings)
        );
    }
}

/// bevyengine/bevy's comment bots: the triggering pull request run's
/// artifact, fetched by `actions/github-script` and unzipped into the
/// workspace, holds a file whose text becomes a shell variable. Expanded
/// unquoted into `gh` with a write token, it is split into arguments (a
/// warning: what extra arguments can do is the question); written to
/// `$GITHUB_ENV`, it sets later steps' environment (an error).
#[test]
fn a_pull_request_runs_artifact_text_is_followed_into_the_shell() {
    let text = |then: &str| {
        format!(
            "on:\n  workflow_run:\n    workflows: [CI]\n    types: [completed]\njobs:\n  comment:\n    permissions:\n      pull-requests: write\n    runs-on: ubuntu-latest\n    if: github.event.workflow_run.event == 'pull_request'\n    steps:\n      - uses: actions/github-script@v7\n        with:\n          script: |\n            var artifacts = await github.rest.actions.listWorkflowRunArtifacts({{ owner: context.repo.owner, repo: context.repo.repo, run_id: ${{{{ github.event.workflow_run.id }}}} }});\n            var download = await github.rest.actions.downloadArtifact({{ owner: context.repo.owner, repo: context.repo.repo, artifact_id: artifacts.data.artifacts[0].id, archive_format: 'zip' }});\n            require('fs').writeFileSync('${{{{ github.workspace }}}}/pr.zip', Buffer.from(download.data));\n      - run: unzip pr.zip\n      - env:\n          GH_TOKEN: ${{{{ github.token }}}}\n        run: |\n          PR=`cat ./NR`\n{then}"
        )
    };
    let injection = |findings: &[Value], severity: &str| {
        at(findings, severity).contains(&pair("privileged-injection", "comment"))
    };
    let (_, findings) = check(&repo(&[(
        "comment.yml",
        &text("          gh api /repos/o/r/issues/$PR/comments\n"),
    )]));
    assert!(injection(&findings, "warning"), "{}", show(&findings));
    assert!(!injection(&findings, "error"), "{}", show(&findings));
    // Quoted, and only compared: nothing to report.
    let (_, findings) = check(&repo(&[(
        "comment.yml",
        &text(
            "          gh api \"/repos/o/r/issues/$PR/comments\"\n          [ \"$PR\" = 1 ] && echo $PR\n",
        ),
    )]));
    assert!(
        !injection(&findings, "warning") && !injection(&findings, "error"),
        "{}",
        show(&findings)
    );
    // Into the environment of every later step.
    let (_, findings) = check(&repo(&[(
        "comment.yml",
        &text("          echo \"PR_NUMBER=$PR\" >> \"$GITHUB_ENV\"\n"),
    )]));
    assert!(injection(&findings, "error"), "{}", show(&findings));
}

/// The error keys of a run: (rule, workflow, job, message without digits),
/// counted, so that inserted lines do not make old findings look new.
fn error_census(findings: &[Value]) -> BTreeMap<(String, String, String, String), usize> {
    let mut out = BTreeMap::new();
    for f in findings {
        if f["severity"] != "error" || f["suppressed"] == true {
            continue;
        }
        let message: String = f["message"]
            .as_str()
            .unwrap_or("")
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect();
        *out.entry((
            f["rule"].as_str().unwrap_or("").to_owned(),
            f["workflow"].as_str().unwrap_or("").to_owned(),
            f["job"].as_str().unwrap_or("").to_owned(),
            message,
        ))
        .or_default() += 1;
    }
    out
}

/// One single-edit weakening of a cache role.
struct Weakening {
    what: &'static str,
    file: &'static str,
    from: &'static str,
    to: &'static str,
    /// Replace every occurrence (one edit in spirit: "restore becomes save").
    nth: Option<usize>,
    /// The job that must gain an untrusted-cache-save error.
    job: &'static str,
}

/// The seed's consumer jobs and the edits that would make them cache
/// writers. Anchors are the seed's own lines; a weakening whose anchor is
/// absent is reported as such (the seed changed).
const WEAKENINGS: &[Weakening] = &[
    Weakening {
        what: "archive restore becomes a save (1st)",
        file: "runpod-gpu-test.yml",
        from: "uses: actions/cache/restore@",
        to: "uses: actions/cache@",
        nth: Some(0),
        job: "cuda-archive",
    },
    Weakening {
        what: "toolkit restore becomes a save (2nd)",
        file: "runpod-gpu-test.yml",
        from: "uses: actions/cache/restore@",
        to: "uses: actions/cache@",
        nth: Some(1),
        job: "cuda-archive",
    },
    Weakening {
        what: "rust-cache saves",
        file: "runpod-gpu-test.yml",
        from: "          save-if: false\n",
        to: "          save-if: true\n",
        nth: None,
        job: "cuda-archive",
    },
    Weakening {
        what: "rust-cache save-if removed",
        file: "runpod-gpu-test.yml",
        from: "          save-if: false\n",
        to: "",
        nth: None,
        job: "cuda-archive",
    },
    Weakening {
        what: "rust-cache saves under workflow_run",
        file: "runpod-gpu-test.yml",
        from: "          save-if: false\n",
        to: "          save-if: ${{ github.event_name == 'workflow_run' }}\n",
        nth: None,
        job: "cuda-archive",
    },
    Weakening {
        what: "a save step after the build",
        file: "runpod-gpu-test.yml",
        from: "      - name: Verify CUDA/PJRT test archives\n",
        to: "      - uses: actions/cache/save@v4\n        with:\n          path: tenferro-rs/target\n          key: pr-build-${{ github.sha }}\n      - name: Verify CUDA/PJRT test archives\n",
        nth: None,
        job: "cuda-archive",
    },
    Weakening {
        what: "sccache on GitHub's cache for the build",
        file: "runpod-gpu-test.yml",
        from: "  CARGO_TERM_COLOR: always\n",
        to: "  CARGO_TERM_COLOR: always\n  SCCACHE_GHA_ENABLED: \"true\"\n  RUSTC_WRAPPER: sccache\n",
        nth: None,
        job: "cuda-archive",
    },
    Weakening {
        what: "setup-go with its default cache",
        file: "runpod-gpu-test.yml",
        from: "      - name: Verify CUDA/PJRT test archives\n",
        to: "      - uses: actions/setup-go@v5\n      - name: Verify CUDA/PJRT test archives\n",
        nth: None,
        job: "cuda-archive",
    },
    Weakening {
        what: "pod restore becomes a save (1st)",
        file: "runpod-gpu-execute.yml",
        from: "uses: actions/cache/restore@",
        to: "uses: actions/cache@",
        nth: Some(0),
        job: "run-gpu-tests",
    },
    Weakening {
        what: "pod restore becomes a save (2nd)",
        file: "runpod-gpu-execute.yml",
        from: "uses: actions/cache/restore@",
        to: "uses: actions/cache@",
        nth: Some(1),
        job: "run-gpu-tests",
    },
    Weakening {
        what: "pod restore becomes a save (3rd)",
        file: "runpod-gpu-execute.yml",
        from: "uses: actions/cache/restore@",
        to: "uses: actions/cache@",
        nth: Some(2),
        job: "run-gpu-tests",
    },
];

/// The seed's consumer roles once a job says `cache-mode: read`: adding
/// `cache-mode: write` back is a weakening too.
const MODE_WRITE: &[(&str, &str, &str)] = &[
    ("runpod-gpu-test.yml", "  cuda-archive:\n", "cuda-archive"),
    (
        "runpod-gpu-execute.yml",
        "  run-gpu-tests:\n",
        "run-gpu-tests",
    ),
];

/// Applies `from → to` at occurrence `nth` (or the only one).
fn apply(text: &str, from: &str, to: &str, nth: Option<usize>) -> Option<String> {
    let positions: Vec<usize> = text.match_indices(from).map(|(i, _)| i).collect();
    let index = match nth {
        Some(n) => *positions.get(n)?,
        None if positions.len() == 1 => positions[0],
        None => return None,
    };
    Some(format!(
        "{}{to}{}",
        &text[..index],
        &text[index + from.len()..]
    ))
}

/// The line after `header` with `line` inserted at the job's indentation.
fn insert_after(text: &str, header: &str, line: &str) -> Option<String> {
    let index = text.find(header)? + header.len();
    Some(format!("{}{line}{}", &text[..index], &text[index..]))
}

/// Checks the seed's real workflows (or the synthetic equivalent): the
/// unmodified tree's errors are the known real ones, and each single-edit
/// weakening of a cache role adds an untrusted-cache-save error on the job
/// it weakens. Returns what failed.
pub fn seed_weakenings(tree: &Tree) -> Vec<String> {
    let mut failures = Vec::new();
    let wf = |name: &str| format!(".github/workflows/{name}");
    let baseline = findings_of(tree);
    // The seed's consumers hold a cache-writing token (no `cache-mode:`)
    // under a same-repository pull request's workflow_run: the real save
    // the issue names. Nothing else is an error.
    for (rule, workflow, job, _) in error_census(&baseline).keys() {
        let known = rule == "untrusted-cache-save"
            && matches!(
                (workflow.as_str(), job.as_str()),
                ("runpod-gpu-test.yml", "cuda-archive")
                    | ("runpod-gpu-execute.yml", "run-gpu-tests")
            );
        if !known {
            failures.push(format!(
                "unmodified: unexpected error {rule} on {workflow}/{job}"
            ));
        }
    }
    let before = error_census(&baseline);
    let gained = |after: &[Value], file: &str, job: &str| {
        let after = error_census(after);
        after.iter().any(|(k, n)| {
            k.0 == "untrusted-cache-save"
                && k.1 == file
                && (job.is_empty() || k.2 == job)
                && before.get(k).is_none_or(|b| n > b)
        })
    };
    for w in WEAKENINGS {
        let path = wf(w.file);
        let Some(text) = tree.get(&path) else {
            failures.push(format!("{}: {} is not in the tree", w.what, w.file));
            continue;
        };
        let Some(weakened) = apply(text, w.from, w.to, w.nth) else {
            failures.push(format!("{}: anchor {:?} not found", w.what, w.from));
            continue;
        };
        let mut mutated = tree.clone();
        mutated.insert(path, weakened);
        let after = findings_of(&mutated);
        if !gained(&after, w.file, w.job) {
            failures.push(format!("{}: not caught\n{}", w.what, show(&after)));
        }
    }
    // `cache-mode: read` closes the consumers; `write` reopens them.
    for (file, header, job) in MODE_WRITE {
        let path = wf(file);
        let Some(text) = tree.get(&path) else {
            continue;
        };
        let Some(read) = insert_after(text, header, "    cache-mode: read\n") else {
            failures.push(format!("cache-mode on {job}: header not found"));
            continue;
        };
        let mut closed = tree.clone();
        closed.insert(path.clone(), read.clone());
        let closed_findings = findings_of(&closed);
        if error_census(&closed_findings)
            .keys()
            .any(|k| k.0 == "untrusted-cache-save" && k.2 == *job)
        {
            failures.push(format!(
                "cache-mode: read on {job} does not close it\n{}",
                show(&closed_findings)
            ));
        }
        let mut reopened = tree.clone();
        reopened.insert(
            path,
            read.replace("    cache-mode: read\n", "    cache-mode: write\n"),
        );
        let after = findings_of(&reopened);
        if !error_census(&after)
            .keys()
            .any(|k| k.0 == "untrusted-cache-save" && k.2 == *job)
        {
            failures.push(format!("cache-mode: write on {job}: not caught"));
        }
    }
    failures
}

/// Without a policy file the publisher is inferred, and holding it to the
/// one-writer design is a question (warnings); with the policy naming it,
/// the same finding is an error.
#[test]
fn an_inferred_publishers_design_rules_are_warnings_until_a_policy_names_it() {
    let publish = "on: [push, pull_request]\npermissions:\n  contents: read\njobs:\n  warm:\n    if: github.ref == 'refs/heads/main'\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          persist-credentials: false\n      - uses: actions/cache/save@v4\n        with: { path: target, key: k }\n";
    let (code, findings) = check(&repo(&[("warm.yml", publish)]));
    assert!(
        at(&findings, "warning")
            .iter()
            .any(|(r, _)| r == "publisher-trigger"),
        "{}",
        show(&findings)
    );
    assert!(at(&findings, "error").is_empty(), "{}", show(&findings));
    assert_eq!(code, 0);
    let named = repo(&[
        ("warm.yml", publish),
        (
            ".github/ci-trust.toml",
            "[publisher]\nworkflows = [\"warm.yml\"]\n[artifacts]\ntrusted-workflows = []\n",
        ),
    ]);
    let (_, findings) = check(&named);
    assert!(
        at(&findings, "error")
            .iter()
            .any(|(r, _)| r == "publisher-trigger"),
        "{}",
        show(&findings)
    );
}

/// `runs-on/cache` writes RunsOn's bucket on RunsOn's runners (which
/// `cache-mode:` does not govern) and GitHub's Actions cache elsewhere
/// (which `cache-mode: read` closes).
#[test]
fn a_drop_in_cache_action_is_judged_by_the_runner_it_runs_on() {
    let text = |runner: &str| {
        format!(
            "on: pull_request_target\npermissions:\n  contents: read\njobs:\n  build:\n    runs-on: {runner}\n    cache-mode: read\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{{{ github.event.pull_request.head.sha }}}}\n          persist-credentials: false\n      - run: cargo build\n      - uses: runs-on/cache@v4\n        with:\n          path: target\n          key: k\n"
        )
    };
    let (_, findings) = check(&repo(&[(
        "build.yml",
        &text("runs-on=${{ github.run_id }}/runner=2cpu-linux-x64"),
    )]));
    assert!(
        at(&findings, "error").contains(&pair("untrusted-cache-save", "build")),
        "{}",
        show(&findings)
    );
    let (_, findings) = check(&repo(&[("build.yml", &text("ubuntu-latest"))]));
    assert!(
        !at(&findings, "error").contains(&pair("untrusted-cache-save", "build")),
        "{}",
        show(&findings)
    );
}
