//! `action.yml`, the composite action that runs the pinned `ci-trust` binary:
//! GitHub's own parser accepts it and a workflow that uses it, its inputs
//! never become script text, no token reaches the install step, it never
//! saves a cache itself, and `check-contracts` follows it into a job (a
//! reader job that saves its binary is a finding).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Fixture, stderr, stdout, tool_available};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn action() -> String {
    std::fs::read_to_string(repo().join("action.yml")).unwrap()
}

/// The node_modules directory that holds `@actions/workflow-parser`
/// (`.ci/run` installs it there: `$CI_TOOLS_DIR/npm`), when node runs it.
fn workflow_parser() -> Option<PathBuf> {
    let dir = std::env::var_os("CI_TRUST_WORKFLOW_PARSER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let tools = std::env::var_os("CI_TOOLS_DIR").map_or_else(
                || {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".local/ci-tools")
                },
                PathBuf::from,
            );
            tools.join("npm/node_modules")
        });
    let probe = dir.join("@actions/workflow-parser/dist/actions/action-parser.js");
    tool_available(
        "@actions/workflow-parser",
        Command::new("node").arg("-e").arg(format!(
            "require('fs').accessSync({:?})",
            probe.display().to_string()
        )),
        "node 20 and `npm install --prefix $HOME/.local/ci-tools/npm @actions/workflow-parser@0.3.61` (.ci/run does it, and adds the JSON import attributes Node 20 needs)",
    )
    .then_some(dir)
}

fn parse(parser: &Path, kind: &str, files: &[&Path]) -> std::process::Output {
    Command::new("node")
        .arg(repo().join("xtask/tests/fixtures/action/parse.mjs"))
        .arg(parser)
        .arg(kind)
        .args(files)
        .output()
        .unwrap()
}

#[test]
fn githubs_own_parser_accepts_the_action_and_a_workflow_that_uses_it() {
    let Some(parser) = workflow_parser() else {
        return;
    };
    let out = parse(&parser, "action", &[&repo().join("action.yml")]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("parsed (action)"), "{}", stdout(&out));

    let f = Fixture::new();
    f.file(
        "uses.yml",
        "name: checks\non: pull_request\npermissions: {}\njobs:\n  contracts:\n    runs-on: ubuntu-24.04\n    permissions:\n      contents: read\n    timeout-minutes: 15\n    steps:\n      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          persist-credentials: false\n      - id: contracts\n        uses: ci-trust/ci-trust@0123456789abcdef0123456789abcdef01234567 # v0.1.0\n        with:\n          command: check-contracts\n          args: |\n            --format\n            github\n      - run: echo \"${{ steps.contracts.outputs.key }}\"\n",
    );
    let out = parse(&parser, "workflow", &[&f.join("uses.yml")]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));

    // The parser is not a rubber stamp: a step without `shell` fails.
    f.file(
        "action.yml",
        &action().replacen("      id: run\n      shell: bash\n", "      id: run\n", 1),
    );
    let out = parse(&parser, "action", &[&f.join("action.yml")]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("shell"), "{}", stdout(&out));
}

#[test]
fn inputs_are_data_and_no_token_reaches_the_install() {
    let doc = marked_yaml::parse_yaml(0, action()).unwrap();
    let steps = doc
        .as_mapping()
        .and_then(|m| m.get_mapping("runs"))
        .and_then(|r| r.get_sequence("steps"))
        .unwrap();
    let mut runs = 0;
    for step in steps.iter() {
        let step = step.as_mapping().unwrap();
        let Some(run) = step.get_scalar("run") else {
            continue;
        };
        runs += 1;
        assert!(
            !run.as_str().contains("${{"),
            "a run: script expands an expression, which would make an input script text:\n{}",
            run.as_str()
        );
        if run.as_str().contains("cargo install") {
            for var in [
                "GITHUB_TOKEN",
                "GH_TOKEN",
                "ACTIONS_RUNTIME_TOKEN",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            ] {
                assert!(
                    run.as_str().contains(&format!("-u {var}")),
                    "the install keeps {var}"
                );
            }
            assert!(run.as_str().contains("--locked"));
        }
    }
    assert!(runs >= 3, "{runs}");
    for step in steps.iter() {
        let uses = step.as_mapping().unwrap().get_scalar("uses");
        let uses = uses.map_or("", |u| u.as_str());
        assert!(
            uses.is_empty() || uses.starts_with("actions/cache/restore@"),
            "the action uses {uses}: it restores only, and only the publisher's own step saves"
        );
    }
}

#[test]
fn check_contracts_follows_the_action_into_the_job() {
    let good = repo().join("xtask/tests/fixtures/contracts/good");
    let consumer = ".github/workflows/runpod-gpu-test.yml";
    let with_action = |save: &str| {
        let f = Fixture::new();
        for entry in walkdir::WalkDir::new(&good) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let rel = entry.path().strip_prefix(&good).unwrap();
                f.file(
                    rel.to_str().unwrap(),
                    &std::fs::read_to_string(entry.path()).unwrap(),
                );
            }
        }
        f.file("action.yml", &action());
        let text = std::fs::read_to_string(good.join(consumer)).unwrap();
        let step = "      - name: Restore the published archive\n";
        assert!(text.contains(step));
        f.file(
            consumer,
            &text.replacen(
                step,
                &format!("      - name: The workflow contracts, by the action\n        id: ci_trust\n        uses: ./\n        with:\n          command: check-contracts\n{save}{step}"),
                1,
            ),
        );
        f.xtask(&["check-contracts"])
    };
    let reader = with_action("");
    assert_eq!(
        reader.status.code(),
        Some(0),
        "{}{}",
        stdout(&reader),
        stderr(&reader)
    );
    // The job builds pull-request code: saving the action's binary is a finding.
    let writer = with_action(
        "      - uses: actions/cache/save@5a3ec84eff668545956fd18022155c47e93e2684 # v4.2.3\n        with:\n          key: ${{ steps.ci_trust.outputs.bin-key }}\n          path: ${{ steps.ci_trust.outputs.bin-dir }}\n",
    );
    assert_eq!(
        writer.status.code(),
        Some(1),
        "{}{}",
        stdout(&writer),
        stderr(&writer)
    );
    assert!(
        stdout(&writer).contains("untrusted-cache-save"),
        "{}",
        stdout(&writer)
    );
}
