//! Gates written as steps (issue 19, held-out half 2): a step that fails
//! the job unless GitHub says a named user may act on the repository gates
//! every later step that runs under `success()`, and the jobs that need
//! it, as an `if:` on `author_association` would. Each attack on that
//! reading (a user the attacker names, a swallowed failure, a step that
//! runs anyway, another organisation) is kept here as a reproduction that
//! must stay an error. Also: a push's pusher is an account with write
//! access, not a pull request's author.

use serde_json::Value;

use crate::contracts::check;
use crate::support::Fixture;

const NAMED: &str = "[contracts]\nrepository = \"acme/widgets\"\n";
const NAMED_TRUSTING: &str =
    "[contracts]\nrepository = \"acme/widgets\"\nsame-repository-pull-requests = \"trusted\"\n";

fn repo(workflow: &str, policy: &str) -> Fixture {
    let fixture = Fixture::new();
    fixture.file(".github/workflows/bench.yml", workflow);
    fixture.file(".github/ci-trust.toml", policy);
    fixture
}

/// The unsuppressed findings of `rule` at `severity`, as `job` names.
fn jobs(findings: &[Value], severity: &str, rule: &str) -> Vec<String> {
    let mut out: Vec<String> = findings
        .iter()
        .filter(|f| f["severity"] == severity && f["rule"] == rule && f["suppressed"] == false)
        .map(|f| f["job"].as_str().unwrap_or("").to_owned())
        .collect();
    out.sort();
    out.dedup();
    out
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

/// reth's `bench.yml`, cut down: a member's `bench …` comment is parsed by
/// a script and its arguments spliced into `run:` scripts of this job and
/// of a job that needs it, both holding secrets. `GATE` is the gate step.
const BENCH: &str = r#"on:
  issue_comment:
    types: [created]
permissions: {}
jobs:
  ack:
    if: github.event.issue.pull_request && startsWith(github.event.comment.body, 'bench')
    runs-on: ubuntu-latest
    permissions:
      pull-requests: write
    outputs:
      blocks: ${{ steps.args.outputs.blocks }}
    steps:
GATE
      - name: Parse arguments
        id: args
        uses: actions/github-script@v7
        with:
          script: |
            const body = context.payload.comment.body.trim();
            const { data: pr } = await github.rest.pulls.get({ ...context.repo, pull_number: context.issue.number });
            core.setOutput('blocks', body.split(' ')[1]);
            core.setOutput('head', pr.head.ref);
      - name: Report
        IF
        run: echo "blocks ${{ steps.args.outputs.blocks }} for ${{ github.event.comment.body }}"
        env:
          TOKEN: ${{ secrets.BENCH_TOKEN }}
  bench:
    needs: ack
    NEEDS_IF
    runs-on: ubuntu-latest
    steps:
      - run: ./bench --blocks ${{ needs.ack.outputs.blocks }} --note "${{ github.event.comment.body }}"
        env:
          TOKEN: ${{ secrets.BENCH_TOKEN }}
"#;

/// reth's gate: a helper that asks `orgs.checkMembershipForUser` and
/// answers false on its error, for the commenter and for the author of the
/// pull request the event names.
const RETH_GATE: &str = r#"      - name: Check org membership
        if: github.event_name == 'issue_comment'
        uses: actions/github-script@v7
        with:
          github-token: ${{ secrets.ORG_READ_TOKEN }}
          script: |
            const org = 'acme';
            const checkMembership = async (username) => {
              try {
                const { status } = await github.rest.orgs.checkMembershipForUser({ org, username });
                return status === 204 || status === 302;
              } catch {
                return false;
              }
            };

            const commenter = context.payload.comment.user.login;
            if (!await checkMembership(commenter)) {
              core.setFailed(`@${commenter} is not a member of ${org}`);
              return;
            }

            const { data: pr } = await github.rest.pulls.get({
              owner: context.repo.owner,
              repo: context.repo.repo,
              pull_number: context.issue.number,
            });
            const prAuthor = pr.user.login;
            if (!await checkMembership(prAuthor)) {
              core.setFailed(`PR author @${prAuthor} is not a member of ${org}`);
            }"#;

fn bench(gate: &str, step_if: &str, needs_if: &str) -> String {
    BENCH
        .replace("GATE", gate)
        .replace("        IF\n", step_if)
        .replace("    NEEDS_IF\n", needs_if)
}

fn injection_errors(workflow: &str) -> (Vec<String>, String) {
    let (_, findings) = check(&repo(workflow, NAMED));
    (
        jobs(&findings, "error", "privileged-injection"),
        show(&findings),
    )
}

const NO_GATE: &str = "      - run: echo no gate";

/// Without a gate anyone's comment is spliced into both jobs: errors. With
/// reth's gate, every byte after it is a member's: no error, in this job or
/// the one that needs it; what the member's run takes from the pull
/// request stays the recovery path's warning.
#[test]
fn a_member_gate_written_as_a_script_gates_the_later_steps_and_the_jobs_that_need_it() {
    let (errors, all) = injection_errors(&bench(NO_GATE, "", ""));
    assert_eq!(errors, ["ack", "bench"], "{all}");
    let (errors, all) = injection_errors(&bench(RETH_GATE, "", ""));
    assert!(errors.is_empty(), "{all}");
}

/// The same gate in the other forms GitHub's API allows: a permission
/// compared with the write levels, a membership call whose error ends the
/// script, `github.request` of the REST route, a `catch` that fails.
#[test]
fn each_authorisation_api_in_the_registry_gates_when_its_failure_stops_the_job() {
    let forms = [
        // getCollaboratorPermissionLevel, compared with the write levels.
        r#"const { data } = await github.rest.repos.getCollaboratorPermissionLevel({ ...context.repo, username: context.actor });
            if (!['admin', 'maintain', 'write'].includes(data.permission)) {
              core.setFailed('no write access');
            }"#,
        // A permission compared by `!==`, thrown.
        r#"const res = await github.rest.repos.getCollaboratorPermissionLevel({ owner: context.repo.owner, repo: context.repo.repo, username: context.payload.comment.user.login });
            const permission = res.data.permission;
            if (permission !== 'admin' && permission !== 'write') {
              throw new Error('not allowed');
            }"#,
        // A membership call whose 404 ends the script.
        "await github.rest.orgs.checkMembershipForUser({ org: context.repo.owner, username: context.actor });",
        // The REST route, through github.request.
        "await github.request('GET /orgs/{org}/members/{username}', { org: 'acme', username: '${{ github.actor }}' });",
        // A team, with a catch that fails the step.
        r#"try {
              await github.rest.teams.getMembershipForUserInOrg({ org: 'acme', team_slug: 'core', username: context.actor });
            } catch (e) {
              core.setFailed(`not in the team: ${e.message}`);
            }"#,
    ];
    for form in forms {
        let gate = format!(
            "      - uses: actions/github-script@v7\n        with:\n          script: |\n            {form}"
        );
        let (errors, all) = injection_errors(&bench(&gate, "", ""));
        assert!(errors.is_empty(), "{form}\n{all}");
    }
}

/// Attacks on the gate reading: each leaves a path where the comment's
/// bytes run while the step gate does not hold, so each stays an error.
/// (A step or job that runs `always()` still sees only gated outputs of
/// the steps that ran behind the gate; what it reads from the event itself
/// is the commenter's.)
#[test]
fn a_gate_that_does_not_provably_stop_the_job_silences_nothing() {
    let script = |body: &str| {
        format!(
            "      - uses: actions/github-script@v7\n        with:\n          script: |\n            {body}"
        )
    };
    let member_check =
        "await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: context.actor });";
    let attacks: Vec<(&str, String, &str, &str)> = vec![
        (
            "a user the commenter names",
            script(
                "await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: context.payload.comment.body.split(' ')[1] });",
            ),
            "",
            "",
        ),
        (
            "a literal user",
            script(
                "await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: 'octocat' });",
            ),
            "",
            "",
        ),
        (
            "the fork owner's organisation",
            script(
                "await github.rest.orgs.checkMembershipForUser({ org: context.payload.comment.user.login, username: context.actor });",
            ),
            "",
            "",
        ),
        (
            "another organisation",
            script(
                "await github.rest.orgs.checkMembershipForUser({ org: 'some-open-org', username: context.actor });",
            ),
            "",
            "",
        ),
        (
            "continue-on-error on the gate",
            format!(
                "      - continue-on-error: true\n        uses: actions/github-script@v7\n        with:\n          script: |\n            {member_check}"
            ),
            "",
            "",
        ),
        (
            "a later step that runs always",
            script(member_check),
            "        if: always()\n",
            "",
        ),
        (
            "a later step that runs unless cancelled",
            script(member_check),
            "        if: ${{ !cancelled() }}\n",
            "",
        ),
        (
            "a needing job that runs always",
            script(member_check),
            "",
            "    if: always()\n",
        ),
        (
            "a catch that swallows the error",
            script(&format!(
                "try {{\n              {member_check}\n            }} catch (e) {{\n              core.info('not a member');\n            }}"
            )),
            "",
            "",
        ),
        (
            "the call's error caught on the promise",
            script(
                "await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: context.actor }).catch(() => null);",
            ),
            "",
            "",
        ),
        (
            "a helper that answers true whatever the call says",
            script(
                "const isMember = async (u) => {\n              try { await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: u }); } catch {}\n              return true;\n            };\n            if (!await isMember(context.actor)) { core.setFailed('no'); }",
            ),
            "",
            "",
        ),
        (
            "a setFailed in a branch that is never taken",
            script(
                "const isMember = async (u) => {\n              try { await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: u }); return true; } catch { return false; }\n            };\n            const ok = await isMember(context.actor);\n            if (false && !ok) { core.setFailed('no'); }",
            ),
            "",
            "",
        ),
        (
            "a condition with another operand",
            script(
                "const isMember = async (u) => {\n              try { await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: u }); return true; } catch { return false; }\n            };\n            if (!await isMember(context.actor) && context.payload.comment.body.includes('strict')) { core.setFailed('no'); }",
            ),
            "",
            "",
        ),
        (
            "a return before the check",
            script(&format!(
                "if (context.payload.comment.body.includes('fast')) {{\n              return;\n            }}\n            {member_check}"
            )),
            "",
            "",
        ),
        (
            "a permission whose answer is ignored",
            script(
                "await github.rest.repos.getCollaboratorPermissionLevel({ ...context.repo, username: context.actor });",
            ),
            "",
            "",
        ),
        (
            "read access counted as enough",
            script(
                "const { data } = await github.rest.repos.getCollaboratorPermissionLevel({ ...context.repo, username: context.actor });\n            if (!['admin', 'write', 'read'].includes(data.permission)) { core.setFailed('no'); }",
            ),
            "",
            "",
        ),
        (
            "a gate step whose own condition the comment decides",
            format!(
                "      - if: contains(github.event.comment.body, 'check')\n        uses: actions/github-script@v7\n        with:\n          script: |\n            {member_check}"
            ),
            "",
            "",
        ),
        (
            "a fail call after a return in its branch",
            script(
                "const isMember = async (u) => {\n              try { await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: u }); return true; } catch { return false; }\n            };\n            if (!await isMember(context.actor)) { return; core.setFailed('no'); }",
            ),
            "",
            "",
        ),
        (
            "the exit code reset after the failure",
            script(&format!(
                "try {{\n              {member_check}\n            }} catch (e) {{\n              core.setFailed('no');\n            }}\n            process.exitCode = 0;"
            )),
            "",
            "",
        ),
        (
            "the question sent to another host",
            script(
                "await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: context.actor, baseUrl: 'https://members.example' });",
            ),
            "",
            "",
        ),
        (
            "a let reassigned after the check",
            script(
                "const isMember = async (u) => {\n              try { await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: u }); return true; } catch { return false; }\n            };\n            let ok = await isMember(context.actor);\n            ok = true;\n            if (!ok) { core.setFailed('no'); }",
            ),
            "",
            "",
        ),
    ];
    for (what, gate, step_if, needs_if) in attacks {
        let workflow = bench(&gate, step_if, needs_if);
        let (errors, all) = injection_errors(&workflow);
        let expected: &[&str] = match (step_if.is_empty(), needs_if.is_empty()) {
            (false, _) => &["ack"],
            (_, false) => &["bench"],
            _ => &["ack", "bench"],
        };
        for job in expected {
            assert!(
                errors.iter().any(|e| e == job),
                "{what}: `{job}` must stay an error\n{workflow}\n{all}"
            );
        }
    }
}

/// A pull request's head checked out and built behind a gate on the
/// commenter alone is a member's run of someone else's code: the recovery
/// path's warning, not an error and not silence, whatever else the gate
/// checks.
const BUILD: &str = r#"on:
  issue_comment:
    types: [created]
permissions:
  contents: read
jobs:
  test:
    if: github.event.issue.pull_request
    runs-on: ubuntu-latest
    steps:
GATE
      - uses: actions/checkout@v4
        with:
          ref: refs/pull/${{ github.event.issue.number }}/head
          persist-credentials: false
      - run: make test
        env:
          TOKEN: ${{ secrets.GPU_TOKEN }}
"#;

#[test]
fn who_the_gate_checks_decides_whose_code_the_run_is() {
    let commenter = "      - uses: actions/github-script@v7\n        with:\n          script: |\n            await github.rest.orgs.checkMembershipForUser({ org: 'acme', username: context.payload.comment.user.login });";
    let both = format!(
        "{commenter}\n            await github.rest.orgs.checkMembershipForUser({{ org: 'acme', username: context.payload.issue.user.login }});"
    );
    let secrets = |gate: &str, policy: &str| {
        let (_, findings) = check(&repo(&BUILD.replace("GATE", gate), policy));
        (
            jobs(&findings, "error", "untrusted-secrets"),
            jobs(&findings, "warning", "untrusted-secrets"),
            show(&findings),
        )
    };
    let (errors, _, all) = secrets(NO_GATE, NAMED);
    assert_eq!(errors, ["test"], "{all}");
    let (errors, warnings, all) = secrets(commenter, NAMED);
    assert!(errors.is_empty(), "{all}");
    assert_eq!(
        warnings,
        ["test"],
        "the recovery path is never silence\n{all}"
    );
    // The commenter alone, even where members' pull requests are trusted:
    // the code may be a fork's.
    let (errors, warnings, all) = secrets(commenter, NAMED_TRUSTING);
    assert!(errors.is_empty(), "{all}");
    assert_eq!(warnings, ["test"], "{all}");
    // Its author too: still the member's choice to run it, and the code
    // need not be that pull request's (a comment may name another), so a
    // policy that trusts members' pull requests does not silence it.
    for policy in [NAMED, NAMED_TRUSTING] {
        let (errors, warnings, all) = secrets(&both, policy);
        assert!(errors.is_empty(), "{all}");
        assert_eq!(warnings, ["test"], "{all}");
        let named = BUILD.replace("GATE", &both).replace(
            "refs/pull/${{ github.event.issue.number }}/head",
            "refs/pull/${{ steps.which.outputs.number }}/head",
        );
        let named = named.replace(
            "      - uses: actions/checkout@v4",
            "      - id: which\n        run: echo \"number=$(jq -r .comment.body \"$GITHUB_EVENT_PATH\" | cut -d' ' -f2)\" >> \"$GITHUB_OUTPUT\"\n      - uses: actions/checkout@v4",
        );
        let (_, findings) = check(&repo(&named, policy));
        assert!(
            jobs(&findings, "warning", "untrusted-secrets") == ["test"]
                || jobs(&findings, "error", "untrusted-secrets") == ["test"],
            "a pull request the comment names is never trusted by the gate\n{named}\n{}",
            show(&findings)
        );
    }
}

/// tauri's `covector-version-or-publish.yml`: on a push, the pusher is the
/// account that pushed or merged (write access), not a pull request's
/// author; the pushed commit's message stays its author's text.
#[test]
fn a_pushs_pusher_is_an_account_with_write_access() {
    let workflow = |line: &str| {
        format!(
            "on:\n  push:\n    branches: [dev]\npermissions:\n  contents: write\njobs:\n  publish:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: |\n          {line}\n          cargo publish\n        env:\n          CARGO_REGISTRY_TOKEN: ${{{{ secrets.CRATES_TOKEN }}}}\n"
        )
    };
    for line in [
        r#"git config --global user.name "${{ github.event.pusher.name }}""#,
        r#"git config --global user.email "${{ github.event.pusher.email }}""#,
        r#"echo "by ${{ github.event.sender.login }}""#,
    ] {
        let (errors, all) = injection_errors(&workflow(line));
        assert!(errors.is_empty(), "{line}\n{all}");
    }
    let (errors, all) = injection_errors(&workflow(
        r#"echo "${{ github.event.head_commit.message }}""#,
    ));
    assert_eq!(errors, ["publish"], "{all}");
}

/// The same gate in a `run:` script: `gh api` of an authorisation route
/// fails the step (and so the job) under GitHub's `bash -e`, unless the
/// script says otherwise.
#[test]
fn a_gh_api_check_in_a_run_script_gates_only_where_its_failure_ends_the_step() {
    let run = |body: &str, extra: &str| {
        format!(
            "      - {extra}env:\n          GH_TOKEN: ${{{{ secrets.ORG_READ_TOKEN }}}}\n          COMMENTER: ${{{{ github.event.comment.user.login }}}}\n          BODY: ${{{{ github.event.comment.body }}}}\n        run: |\n          {body}"
        )
    };
    for (gate, extra) in [
        ("gh api orgs/acme/members/${{ github.actor }}", ""),
        (
            "gh api \"/orgs/${{ github.repository_owner }}/members/$COMMENTER\" --silent",
            "",
        ),
        (
            "gh api repos/${{ github.repository }}/collaborators/$GITHUB_ACTOR",
            "",
        ),
        (
            "gh api -X GET orgs/acme/teams/core/memberships/$GITHUB_ACTOR",
            "shell: bash\n        ",
        ),
    ] {
        let (errors, all) = injection_errors(&bench(&run(gate, extra), "", ""));
        assert!(errors.is_empty(), "{gate}\n{all}");
    }
    for (what, gate, extra) in [
        (
            "a failure let through",
            "gh api orgs/acme/members/$GITHUB_ACTOR || true",
            "",
        ),
        (
            "errexit turned off",
            "set +e\n          gh api orgs/acme/members/$GITHUB_ACTOR",
            "",
        ),
        (
            "a check inside a condition",
            "if gh api orgs/acme/members/$GITHUB_ACTOR; then echo member; fi",
            "",
        ),
        (
            "an exit before the check",
            "[ -n \"$BODY\" ] && exit 0\n          gh api orgs/acme/members/$GITHUB_ACTOR",
            "",
        ),
        (
            "a trap that hides the failure",
            "trap 'exit 0' EXIT\n          gh api orgs/acme/members/$GITHUB_ACTOR",
            "",
        ),
        (
            "a shell that goes on",
            "gh api orgs/acme/members/$GITHUB_ACTOR",
            "shell: pwsh\n        ",
        ),
        (
            "a POST (a field makes gh post)",
            "gh api orgs/acme/members/$GITHUB_ACTOR -f x=y",
            "",
        ),
        (
            "a user the comment names",
            "gh api orgs/acme/members/$(echo \"$BODY\" | cut -d' ' -f2)",
            "",
        ),
        (
            "a user variable reassigned",
            "COMMENTER=\"$BODY\"\n          gh api orgs/acme/members/$COMMENTER",
            "",
        ),
        (
            "another organisation",
            "gh api orgs/open-org/members/$GITHUB_ACTOR",
            "",
        ),
        (
            "a pipeline",
            "gh api orgs/acme/members/$GITHUB_ACTOR | cat",
            "",
        ),
        (
            "another host for gh",
            "GH_HOST=members.example gh api orgs/acme/members/$GITHUB_ACTOR",
            "",
        ),
    ] {
        let workflow = bench(&run(gate, extra), "", "");
        let (errors, all) = injection_errors(&workflow);
        assert_eq!(errors, ["ack", "bench"], "{what}\n{workflow}\n{all}");
    }
}

/// On a comment event the start's actor is the commenter: a guard on the
/// issue's (the pull request's) author says nothing of who wrote the
/// comment, so the comment stays anyone's text.
#[test]
fn a_guard_on_the_pull_requests_author_does_not_make_the_comment_a_members() {
    let workflow = "on:\n  issue_comment:\n    types: [created]\npermissions:\n  contents: read\njobs:\n  echo:\n    if: github.event.issue.author_association == 'MEMBER'\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"${{ github.event.comment.body }}\"\n        env:\n          TOKEN: ${{ secrets.TOKEN }}\n";
    let (errors, all) = injection_errors(workflow);
    assert_eq!(errors, ["echo"], "{all}");
    // On the comment's own author: the comment is a member's.
    let guarded = workflow.replace(
        "github.event.issue.author_association",
        "github.event.comment.author_association",
    );
    let (errors, all) = injection_errors(&guarded);
    assert!(errors.is_empty(), "{all}");
}

/// vllm-ascend's `/e2e` chain: slash-command-dispatch with `permission:
/// none` turns anyone's comment into a `repository_dispatch`; the handler
/// checks the pull request out and runs it with a secret. The dispatch is
/// started by whoever can start the firing job, as far as the firing step
/// lets them: anyone here (an error), a commenter with write access under
/// the action's default (the recovery path), a maintainer's when no
/// workflow of the repository fires it (as before).
#[test]
fn a_comment_bots_dispatch_is_started_by_whoever_can_comment() {
    let bot = |permission: &str| {
        format!(
            "on:\n  issue_comment:\n    types: [created]\njobs:\n  dispatch:\n    if: github.event.issue.pull_request\n    runs-on: ubuntu-latest\n    steps:\n      - uses: peter-evans/slash-command-dispatch@v5\n        with:\n          token: ${{{{ secrets.PAT }}}}\n          commands: |\n            e2e\n            rerun\n{permission}"
        )
    };
    let handler = "on:\n  repository_dispatch:\n    types: [e2e-command]\npermissions:\n  contents: read\njobs:\n  e2e:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ github.event.client_payload.pull_request.head.sha }}\n          persist-credentials: false\n      - run: make e2e\n        env:\n          TOKEN: ${{ secrets.E2E_TOKEN }}\n";
    let secrets = |files: &[(&str, String)]| {
        let fixture = Fixture::new();
        for (name, text) in files {
            fixture.file(&format!(".github/workflows/{name}"), text);
        }
        fixture.file(".github/ci-trust.toml", NAMED);
        let (_, findings) = check(&fixture);
        (
            jobs(&findings, "error", "untrusted-secrets"),
            jobs(&findings, "warning", "untrusted-secrets"),
            show(&findings),
        )
    };
    let open = [
        ("bot.yml", bot("          permission: none\n")),
        ("e2e.yml", handler.to_owned()),
    ];
    let (errors, _, all) = secrets(&open);
    assert_eq!(errors, ["e2e"], "{all}");
    // Per command, in `config:`.
    let config = [
        (
            "bot.yml",
            bot(
                "          config: >\n            [{\"command\": \"e2e\", \"permission\": \"none\"}]\n",
            ),
        ),
        ("e2e.yml", handler.to_owned()),
    ];
    let (errors, _, all) = secrets(&config);
    assert_eq!(errors, ["e2e"], "{all}");
    for files in [
        vec![("bot.yml", bot("")), ("e2e.yml", handler.to_owned())],
        vec![("e2e.yml", handler.to_owned())],
        // A command of another name fires another type.
        vec![
            (
                "bot.yml",
                bot("          permission: none\n").replace("e2e\n", "lint\n"),
            ),
            ("e2e.yml", handler.to_owned()),
        ],
    ] {
        let (errors, warnings, all) = secrets(&files);
        assert!(errors.is_empty(), "{all}");
        assert_eq!(warnings, ["e2e"], "{all}");
    }
}

/// A reusable workflow's `boolean` input is a boolean: a job guarded by
/// `if: inputs.flag` whose callers leave its `default: false` does not run
/// (vllm-ascend's coverage upload under `/e2e`); passed `true`, it does.
#[test]
fn a_boolean_inputs_false_default_is_false() {
    let callee = "on:\n  workflow_call:\n    inputs:\n      flag:\n        type: boolean\n        default: false\n      ref:\n        type: string\npermissions:\n  contents: read\njobs:\n  upload:\n    if: ${{ !cancelled() && inputs.flag }}\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: ${{ inputs.ref }}\n          persist-credentials: false\n      - run: python3 scripts/upload.py\n        env:\n          KEY: ${{ secrets.UPLOAD_KEY }}\n";
    let caller = |with: &str| {
        format!(
            "on:\n  pull_request_target:\npermissions:\n  contents: read\njobs:\n  call:\n    uses: ./.github/workflows/callee.yml\n    secrets: inherit\n    with:\n      ref: ${{{{ github.event.pull_request.head.sha }}}}\n{with}"
        )
    };
    let secrets = |with: &str| {
        let fixture = Fixture::new();
        fixture.file(".github/workflows/callee.yml", callee);
        fixture.file(".github/workflows/caller.yml", &caller(with));
        fixture.file(".github/ci-trust.toml", NAMED);
        let (_, findings) = check(&fixture);
        (
            jobs(&findings, "error", "untrusted-secrets"),
            show(&findings),
        )
    };
    let (errors, all) = secrets("");
    assert!(errors.is_empty(), "{all}");
    let (errors, all) = secrets("      flag: true\n");
    assert!(errors.iter().any(|j| j == "upload"), "{all}");
}

/// mosaicml/llm-foundry's and databricks/megablocks' `pr-gpu.yaml`
/// (held-out half 2's real paths 2 and 3): on `pull_request_target` a
/// remote action is handed `MCLOUD_API_KEY` and submits the pull request's
/// tests to the organisation's cloud account. What the action does is what
/// the repository does not show: a warning with that question. Not on
/// `pull_request` (no secrets), not for GitHub's own actions or the
/// workflow token alone, and not where only a maintainer starts the run.
#[test]
fn a_secret_handed_to_a_remote_action_on_a_run_an_outsider_starts_is_asked_about() {
    let workflow = |on: &str, uses: &str, secret: &str| {
        format!(
            "on:\n  {on}:\npermissions: {{}}\njobs:\n  pytest-gpu:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: {uses}\n        with:\n          mcloud_api_key: ${{{{ secrets.{secret} }}}}\n"
        )
    };
    let remote = "mosaicml/ci-testing/.github/actions/pytest-gpu@v0.3.5";
    let (_, findings) = check(&repo(
        &workflow("pull_request_target", remote, "MCLOUD_API_KEY"),
        NAMED,
    ));
    let warned: Vec<&Value> = findings
        .iter()
        .filter(|f| {
            f["rule"] == "remote-script"
                && f["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("MCLOUD_API_KEY")
        })
        .collect();
    assert_eq!(warned.len(), 1, "{}", show(&findings));
    assert_eq!(warned[0]["severity"], "warning");
    assert!(
        warned[0]["question"]
            .as_str()
            .unwrap_or("")
            .contains("run the pull request's code"),
        "{}",
        show(&findings)
    );
    for (on, uses, secret) in [
        ("pull_request", remote, "MCLOUD_API_KEY"),
        ("workflow_dispatch", remote, "MCLOUD_API_KEY"),
        (
            "pull_request_target",
            "actions/labeler@v5",
            "MCLOUD_API_KEY",
        ),
        ("pull_request_target", remote, "GITHUB_TOKEN"),
    ] {
        let (_, findings) = check(&repo(&workflow(on, uses, secret), NAMED));
        assert!(
            !findings.iter().any(|f| f["rule"] == "remote-script"
                && f["message"].as_str().unwrap_or("").contains("hands")),
            "{on} {uses} {secret}: {}",
            show(&findings)
        );
    }
}

const FLAG_GATE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/contracts/flag-gate"
);

/// The `privileged-injection` errors of the flag-gate fixture after
/// `edits` (each `(from, to)` once in `pr_nightly_command.yml`), its
/// checks admitting only the roles that can push (`write|maintain|admin`;
/// the fixture, as vllm-ascend wrote it, admits `triage` too, which is no
/// gate: [`a_check_that_admits_triage_is_no_gate`]).
fn flag_gate_errors(edits: &[(&str, &str)]) -> (Vec<String>, String) {
    flag_gate_errors_of(edits, true)
}

fn flag_gate_errors_of(edits: &[(&str, &str)], pushers_only: bool) -> (Vec<String>, String) {
    let fixture = crate::contracts::good_from(FLAG_GATE);
    if pushers_only {
        let path = fixture.join(&crate::contracts::workflow("pr_nightly_command.yml"));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            text.replace("triage|write|maintain|admin)", "write|maintain|admin)"),
        )
        .unwrap();
    }
    for (from, to) in edits {
        crate::contracts::edit(
            &fixture,
            &crate::contracts::workflow("pr_nightly_command.yml"),
            from,
            to,
        );
    }
    let (_, findings) = check(&fixture);
    (
        jobs(&findings, "error", "privileged-injection"),
        show(&findings),
    )
}

/// vllm-ascend's `/nightly` (held-out half 2's 18 false errors), its check
/// narrowed to the roles that can push (vllm-ascend's own admits `triage`
/// and so is no gate: its errors are back): the
/// commenter's role, asked of GitHub in a `run:` script, is written as an
/// output flag, `true` only on the `case` arm of the roles that may act;
/// a step under `== 'false'` fails the job, and later steps and jobs run
/// under `== 'true'`. The comment's words are then a collaborator's: no
/// error in `dispatch-a2`. `authorize-twin` writes the flag `true` before
/// the check: no gate, and `dispatch-twin` keeps its error.
#[test]
fn an_authorisation_written_as_an_output_flag_gates_what_requires_it() {
    let (errors, all) = flag_gate_errors(&[]);
    assert_eq!(errors, ["dispatch-twin"], "{all}");
    // Each of the three readings holds alone.
    let job_if = "    if: needs.authorize.outputs.is_authorized == 'true'\n";
    let resolve_if = "        if: steps.auth.outputs.is_authorized == 'true'\n        env:\n          ALL_ARGS: ${{ github.event.client_payload.slash_command.args.all }}\n        run: |\n          TEST_CASES=$(echo \"$ALL_ARGS\" | xargs)\n          echo \"test_cases=$TEST_CASES\" >> \"$GITHUB_OUTPUT\"\n\n  dispatch-a2:";
    let resolve_plain = "        env:\n          ALL_ARGS: ${{ github.event.client_payload.slash_command.args.all }}\n        run: |\n          TEST_CASES=$(echo \"$ALL_ARGS\" | xargs)\n          echo \"test_cases=$TEST_CASES\" >> \"$GITHUB_OUTPUT\"\n\n  dispatch-a2:";
    let fail = "      - name: Fail if unauthorized\n        if: steps.auth.outputs.is_authorized == 'false'\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        if: steps.auth.outputs.is_authorized == 'true'\n        env:\n          ALL_ARGS: ${{ github.event.client_payload.slash_command.args.all }}\n        run: |\n          TEST_CASES=$(echo \"$ALL_ARGS\" | xargs)\n          echo \"test_cases=$TEST_CASES\" >> \"$GITHUB_OUTPUT\"\n\n  dispatch-a2:";
    let no_fail = "      - name: Resolve test cases\n        id: resolve\n        if: steps.auth.outputs.is_authorized == 'true'\n        env:\n          ALL_ARGS: ${{ github.event.client_payload.slash_command.args.all }}\n        run: |\n          TEST_CASES=$(echo \"$ALL_ARGS\" | xargs)\n          echo \"test_cases=$TEST_CASES\" >> \"$GITHUB_OUTPUT\"\n\n  dispatch-a2:";
    // The failing step alone (`== 'false'`, `!= 'true'`).
    for fail_if in ["== 'false'", "!= 'true'"] {
        let (errors, all) = flag_gate_errors(&[
            (job_if, ""),
            (resolve_if, resolve_plain),
            (
                "        if: steps.auth.outputs.is_authorized == 'false'\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        env:",
                &format!(
                    "        if: steps.auth.outputs.is_authorized {fail_if}\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        env:"
                ),
            ),
        ]);
        assert_eq!(errors, ["dispatch-twin"], "{fail_if}: {all}");
    }
    // The step's own `if:` alone (the job then needs a flagless job's
    // outputs only through the step it guards).
    let (errors, all) = flag_gate_errors(&[(job_if, ""), (fail, no_fail)]);
    assert_eq!(errors, ["dispatch-twin"], "{all}");
    // The job's `if:` alone, `always()` or not: the flag is the answer.
    for cond in [
        "needs.authorize.outputs.is_authorized == 'true'",
        "always() && needs.authorize.outputs.is_authorized == 'true'",
    ] {
        let (errors, all) = flag_gate_errors(&[
            (
                fail,
                &no_fail.replace(
                    "        if: steps.auth.outputs.is_authorized == 'true'\n",
                    "",
                ),
            ),
            (job_if, &format!("    if: {cond}\n")),
        ]);
        assert_eq!(errors, ["dispatch-twin"], "{cond}: {all}");
    }
    // With none of the three, or one that does not follow, the words are
    // anyone's.
    let bare = |extra: &[(&'static str, &'static str)]| {
        let stripped = no_fail.replace(
            "        if: steps.auth.outputs.is_authorized == 'true'\n",
            "",
        );
        let mut edits: Vec<(&str, String)> = vec![(fail, stripped), (job_if, String::new())];
        edits.extend(extra.iter().map(|(a, b)| (*a, (*b).to_owned())));
        let edits: Vec<(&str, &str)> = edits.iter().map(|(a, b)| (*a, b.as_str())).collect();
        flag_gate_errors(&edits)
    };
    let (errors, all) = bare(&[]);
    assert_eq!(errors, ["dispatch-a2", "dispatch-twin"], "{all}");
    for (what, from, to) in [
        // `always()` without the flag: runs after the failing step too.
        (
            "always()",
            "  dispatch-a2:\n    needs: [authorize]\n",
            "  dispatch-a2:\n    needs: [authorize]\n    if: always()\n",
        ),
        // A flag compared with something else.
        (
            "!= 'false'",
            "  dispatch-a2:\n    needs: [authorize]\n",
            "  dispatch-a2:\n    needs: [authorize]\n    if: needs.authorize.outputs.is_authorized != 'false'\n",
        ),
        // `||` makes the flag optional.
        (
            "||",
            "  dispatch-a2:\n    needs: [authorize]\n",
            "  dispatch-a2:\n    needs: [authorize]\n    if: needs.authorize.outputs.is_authorized == 'true' || github.event.action == 'nightly-command'\n",
        ),
    ] {
        let (errors, all) = bare(&[(from, to)]);
        assert!(errors.contains(&"dispatch-a2".to_owned()), "{what}: {all}");
    }
    // The failing step under `== 'false'` does not catch a flag step that
    // may be skipped (its flag then empty); under `!= 'true'` it does. A
    // flag step that may go on after an error is not read.
    let skippable = "        id: auth\n        if: github.event.action == 'nightly-command'\n";
    for (what, edit, fail_if, gated) in [
        ("if:", skippable, "== 'false'", false),
        ("if:", skippable, "!= 'true'", true),
        (
            "continue-on-error",
            "        id: auth\n        continue-on-error: true\n",
            "!= 'true'",
            false,
        ),
    ] {
        let (errors, all) = flag_gate_errors(&[
            (job_if, ""),
            (resolve_if, resolve_plain),
            (
                "        if: steps.auth.outputs.is_authorized == 'false'\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        env:",
                &format!(
                    "        if: steps.auth.outputs.is_authorized {fail_if}\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        env:"
                ),
            ),
            (
                "      - name: Check user authorization\n        id: auth\n        env:\n          GH_TOKEN: ${{ secrets.PAT_TOKEN }}\n          ACTOR: ${{ github.event.client_payload.github.payload.comment.user.login }}\n          REPO: ${{ github.event.client_payload.github.payload.repository.full_name }}\n        run: |\n          ROLE_NAME",
                &format!(
                    "      - name: Check user authorization\n{edit}        env:\n          GH_TOKEN: ${{{{ secrets.PAT_TOKEN }}}}\n          ACTOR: ${{{{ github.event.client_payload.github.payload.comment.user.login }}}}\n          REPO: ${{{{ github.event.client_payload.github.payload.repository.full_name }}}}\n        run: |\n          ROLE_NAME"
                ),
            ),
        ]);
        assert_eq!(
            errors.contains(&"dispatch-a2".to_owned()),
            !gated,
            "{what} {fail_if}: {all}"
        );
    }
    // The failing step may go on.
    let (errors, all) = flag_gate_errors(&[
        (job_if, ""),
        (resolve_if, resolve_plain),
        (
            "        if: steps.auth.outputs.is_authorized == 'false'\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        env:",
            "        if: steps.auth.outputs.is_authorized == 'false'\n        continue-on-error: true\n        run: exit 1\n\n      - name: Resolve test cases\n        id: resolve\n        env:",
        ),
    ]);
    assert!(errors.contains(&"dispatch-a2".to_owned()), "{all}");
}

/// meilisearch's `bench-pr.yml` (held-out half 3), cut down: the API's
/// `true`/`false` for `.user.permissions.push` is run as an `if`'s command,
/// and the `else` exits, for the pull request's author and then for the
/// commenter; the job then checks the pull request's branch out and runs
/// its xtask with secrets on a self-hosted runner. `CHECK` is the check of
/// the commenter.
const RUN_AS_CONDITION: &str = r#"on:
  issue_comment:
    types: [created]
permissions:
  issues: write
jobs:
  bench:
    if: startsWith(github.event.comment.body, '/bench')
    runs-on: benchmarks
    steps:
      - name: Check permissions
        env:
          COMMENT_AUTHOR: ${{ github.event.comment.user.login }}
          BODY_USER: ${{ github.event.comment.body }}
          REPOSITORY: ${{ github.repository }}
        run: |
CHECK
      - uses: xt0rted/pull-request-comment-branch@e8b8daa837e8ea7331c0003c9c316a64c6d8b0b1
        id: comment-branch
      - uses: actions/checkout@v4
        with:
          ref: ${{ steps.comment-branch.outputs.head_ref }}
      - run: cargo xtask bench --api-key "${{ secrets.BENCHMARK_API_KEY }}"
"#;

#[test]
fn an_api_answer_run_as_an_ifs_condition_whose_else_exits_gates_the_commenter() {
    let with = |check: &str| {
        let check: String = check.lines().map(|l| format!("          {l}\n")).collect();
        RUN_AS_CONDITION.replace("CHECK\n", &check)
    };
    let gate = "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo \"::notice::authenticated\"\nelse\n  echo \"::error::no push permission\"\n  exit 1\nfi";
    let (_, found) = check(&repo(&with(gate), NAMED));
    let errors: Vec<&Value> = found.iter().filter(|f| f["severity"] == "error").collect();
    assert!(errors.is_empty(), "{}", show(&found));
    assert_eq!(
        jobs(&found, "warning", "untrusted-secrets"),
        ["bench"],
        "{}",
        show(&found)
    );
    // Each of these lets someone without push access through, or reads
    // an answer the shell does not run as the condition: no gate.
    for not_a_gate in [
        // No check at all.
        "echo checking",
        // Inverted: only those without push go on.
        "if ! $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  exit 1\nfi",
        // The else goes on.
        "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  echo \"::warning::no push permission\"\nfi",
        // The else ends the step successfully.
        "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  exit 0\nfi",
        // An `elif` whose branch goes on.
        "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelif true\nthen\n  echo also\nelse\n  exit 1\nfi",
        // A user the comment's text names.
        "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$BODY_USER\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  exit 1\nfi",
        // A field that is no boolean (`write`, `read`: not commands, so
        // everyone fails; and `pull` is true for everyone on a public
        // repository).
        "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.pull)\nthen\n  echo ok\nelse\n  exit 1\nfi",
        // Another repository.
        "if $(gh api /repos/other/place/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  exit 1\nfi",
        // Behind `&&`: the `if` may never run.
        "false && if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  exit 1\nfi",
        // Its failure is caught in a subshell.
        "( if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push)\nthen\n  echo ok\nelse\n  exit 1\nfi )",
        // The answer piped on is not what the condition runs.
        "if $(gh api /repos/\"$REPOSITORY\"/collaborators/\"$COMMENT_AUTHOR\"/permission --jq .user.permissions.push) | cat\nthen\n  echo ok\nelse\n  exit 1\nfi",
    ] {
        let (_, found) = check(&repo(&with(not_a_gate), NAMED));
        assert_eq!(
            jobs(&found, "error", "untrusted-secrets"),
            ["bench"],
            "{not_a_gate}\n{}",
            show(&found)
        );
    }
}

/// The flag-gate fixture with its check admitting only the roles that can
/// push (`write|maintain|admin`: `triage` cannot, see
/// [`a_check_that_admits_triage_is_no_gate`]), after `edits` of the
/// `authorize` job (each `(from, to)` once in the text before
/// `authorize-twin`) and `dispatch` edits of `slash_command_dispatch.yml`.
/// Returns the jobs with an unsuppressed error of any rule.
fn pushers_gate_errors(edits: &[(&str, &str)], dispatch: &[(&str, &str)]) -> (Vec<String>, String) {
    let fixture = crate::contracts::good_from(FLAG_GATE);
    let path = fixture.join(&crate::contracts::workflow("pr_nightly_command.yml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("triage|write|maintain|admin)", "write|maintain|admin)");
    let at = text.find("  authorize-twin:").unwrap();
    let (mut head, tail) = (text[..at].to_owned(), text[at..].to_owned());
    for (from, to) in edits {
        assert_eq!(
            head.matches(from).count(),
            1,
            "the anchor {from:?} must occur once"
        );
        head = head.replacen(from, to, 1);
    }
    std::fs::write(&path, format!("{head}{tail}")).unwrap();
    for (from, to) in dispatch {
        crate::contracts::edit(
            &fixture,
            &crate::contracts::workflow("slash_command_dispatch.yml"),
            from,
            to,
        );
    }
    let (_, findings) = check(&fixture);
    let mut errors: Vec<String> = findings
        .iter()
        .filter(|f| f["severity"] == "error" && f["suppressed"] == false)
        .map(|f| f["job"].as_str().unwrap_or("").to_owned())
        .collect();
    errors.sort();
    errors.dedup();
    (errors, show(&findings))
}

const ESAC: &str = "          esac\n";
const FAIL_STEP: &str =
    "        if: steps.auth.outputs.is_authorized == 'false'\n        run: exit 1\n";
const RESOLVE_IF: &str =
    "        id: resolve\n        if: steps.auth.outputs.is_authorized == 'true'\n";
const JOB_IF: &str = "    if: needs.authorize.outputs.is_authorized == 'true'\n";

/// With the check admitting only pushers the fixture's gate holds: the
/// base every attack below starts from.
#[test]
fn a_flag_gate_admitting_only_pushers_holds() {
    let (errors, all) = pushers_gate_errors(&[], &[]);
    assert_eq!(errors, ["dispatch-twin"], "{all}");
    // `set -e` before the check changes nothing it reads.
    for set in ["set -e", "set -euo pipefail", "set -eux -o pipefail"] {
        let (errors, all) = pushers_gate_errors(
            &[(
                "        run: |\n          ROLE_NAME",
                &format!("        run: |\n          {set}\n          ROLE_NAME"),
            )],
            &[],
        );
        assert_eq!(errors, ["dispatch-twin"], "{set}: {all}");
    }
    // GitHub's contexts ignore case: `needs.AUTHORIZE.outputs.IS_AUTHORIZED`.
    let (errors, all) = pushers_gate_errors(
        &[
            (FAIL_STEP, ""),
            (
                RESOLVE_IF,
                "        id: resolve\n        if: steps.AUTH.outputs.IS_AUTHORIZED == 'true'\n",
            ),
            (
                JOB_IF,
                "    if: needs.AUTHORIZE.outputs.IS_AUTHORIZED == 'true'\n",
            ),
        ],
        &[],
    );
    assert_eq!(errors, ["dispatch-twin"], "{all}");
    // `set +e` is no option the reader accepts.
    let (errors, all) = pushers_gate_errors(
        &[(
            "        run: |\n          ROLE_NAME",
            "        run: |\n          set +e\n          ROLE_NAME",
        )],
        &[],
    );
    assert!(errors.contains(&"dispatch-a2".to_owned()), "{all}");
}

/// The attack on output-flag gates (case1, case2, case3, case10, case11):
/// a line after the `case` that sets the flag `true` in a way the reader
/// did not see (`>&FILE`, `&>`, `>|`, `1>`, a workflow command in another
/// case, the name in another case, a here-document that runs a command,
/// the runner's own file-command file, any file but `/dev/null`).
#[test]
fn a_flag_written_true_around_the_case_is_no_gate() {
    for line in [
        "echo \"is_authorized=true\" >&\"$GITHUB_OUTPUT\"",
        "echo \"is_authorized=true\" &>\"$GITHUB_OUTPUT\"",
        "echo \"is_authorized=true\" &>>\"$GITHUB_OUTPUT\"",
        "echo \"is_authorized=true\" >|\"$GITHUB_OUTPUT\"",
        "echo \"is_authorized=true\" 1>\"$GITHUB_OUTPUT\"",
        "echo \"is_authorized=true\" > \"$GITHUB_OUTPUT\"",
        "echo \"::SET-OUTPUT name=is_authorized::true\"",
        "echo \"::Set-Output name=is_authorized::true\"",
        "echo \"::Save-State name=x::true\"",
        "echo -n \"::set-env name=X::y\"",
        "echo \"IS_AUTHORIZED=true\" >> \"$GITHUB_OUTPUT\"",
        "echo \"Is_Authorized=true\" >> \"$GITHUB_OUTPUT\"",
        ": <<EOF\n          $(echo \"is_authorized=true\" >> \"$GITHUB_OUTPUT\")\n          EOF",
        ": <<EOF\n          `echo \"is_authorized=true\" >> \"$GITHUB_OUTPUT\"`\n          EOF",
        "echo \"is_authorized=true\" >> /home/runner/work/_temp/_runner_file_commands/set_output_*",
        "echo \"is_authorized=true\" >> \"$RUNNER_TEMP/_runner_file_commands/x\"",
        "echo \"is_authorized=true\" >> out.txt",
    ] {
        let (errors, all) =
            pushers_gate_errors(&[(ESAC, &format!("{ESAC}          {line}\n"))], &[]);
        assert!(errors.contains(&"dispatch-a2".to_owned()), "{line}: {all}");
    }
    // Logging to stderr or /dev/null is fine.
    for line in [
        "echo done >&2",
        "echo done > /dev/null",
        "echo \"::notice::done\"",
    ] {
        let (errors, all) =
            pushers_gate_errors(&[(ESAC, &format!("{ESAC}          {line}\n"))], &[]);
        assert_eq!(errors, ["dispatch-twin"], "{line}: {all}");
    }
}

/// case4: a check on `github.actor` under a bot's `repository_dispatch`
/// asks about the token's owner, not the commenter.
#[test]
fn a_check_on_the_actor_under_a_bot_dispatch_is_no_gate() {
    let (errors, all) = pushers_gate_errors(
        &[(
            "          ACTOR: ${{ github.event.client_payload.github.payload.comment.user.login }}\n          REPO: ${{ github.event.client_payload.github.payload.repository.full_name }}\n",
            "          ACTOR: ${{ github.actor }}\n          REPO: ${{ github.repository }}\n",
        )],
        &[],
    );
    assert!(errors.contains(&"dispatch-a2".to_owned()), "{all}");
}

/// case5, case5b: a dispatcher whose `client-payload` the workflow writes
/// (peter-evans/repository-dispatch) carries whatever commenter the
/// comment names: no check on the payload's commenter holds.
#[test]
fn a_payload_the_workflow_writes_names_no_commenter() {
    let bot = "      - name: Slash Command Dispatch\n        uses: peter-evans/slash-command-dispatch@v5\n        with:\n          token: ${{ secrets.PAT_TOKEN }}\n          reaction-token: ${{ secrets.GITHUB_TOKEN }}\n          commands: |\n            nightly\n            twin\n          permission: none\n          issue-type: both\n          dispatch-type: repository\n";
    for payload in [
        "          client-payload: ${{ github.event.comment.body }}\n",
        "          client-payload: >-\n            {\"github\": {\"payload\": ${{ toJSON(github.event) }}},\n             \"slash_command\": {\"args\": {\"all\": \"${{ github.event.comment.body }}\"}}}\n",
    ] {
        let dispatcher = format!(
            "      - uses: peter-evans/repository-dispatch@v3\n        with:\n          token: ${{{{ secrets.PAT_TOKEN }}}}\n          event-type: nightly-command\n{payload}"
        );
        let (errors, all) = pushers_gate_errors(&[], &[(bot, &dispatcher)]);
        assert!(
            errors.contains(&"dispatch-a2".to_owned()),
            "{payload}: {all}"
        );
    }
}

/// case6, case13: a failing step that does not fail (`exit 256` exits 0;
/// `bash -n` runs nothing; `+e`, `-c`) catches nothing.
#[test]
fn a_failing_step_that_may_pass_catches_nothing() {
    let ungate = [
        (RESOLVE_IF, "        id: resolve\n        if: success()\n"),
        (JOB_IF, "    if: success()\n"),
    ];
    // The base: `!= 'true'` and `exit 1` gate alone.
    let mut edits: Vec<(&str, String)> =
        ungate.iter().map(|(a, b)| (*a, (*b).to_owned())).collect();
    edits.push((
        FAIL_STEP,
        "        if: steps.auth.outputs.is_authorized != 'true'\n        run: exit 1\n".to_owned(),
    ));
    let e: Vec<(&str, &str)> = edits.iter().map(|(a, b)| (*a, b.as_str())).collect();
    let (errors, all) = pushers_gate_errors(&e, &[]);
    assert_eq!(errors, ["dispatch-twin"], "{all}");
    for fail in [
        "        run: exit 256\n",
        "        run: exit 512\n",
        "        run: exit 0x1\n",
        "        shell: bash -n {0}\n        run: exit 1\n",
        "        shell: bash +e {0}\n        run: exit 1\n",
        "        shell: bash -c {0}\n        run: exit 1\n",
        "        shell: bash -o noexec {0}\n        run: exit 1\n",
        "        shell: bash -en {0}\n        run: exit 1\n",
    ] {
        let mut edits: Vec<(&str, String)> =
            ungate.iter().map(|(a, b)| (*a, (*b).to_owned())).collect();
        edits.push((
            FAIL_STEP,
            format!("        if: steps.auth.outputs.is_authorized != 'true'\n{fail}"),
        ));
        let e: Vec<(&str, &str)> = edits.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let (errors, all) = pushers_gate_errors(&e, &[]);
        assert!(errors.contains(&"dispatch-a2".to_owned()), "{fail}: {all}");
    }
}

/// case9a, case9b, case9c: a github-script failing step that ends the
/// script successfully after `core.setFailed`, or replaces it.
#[test]
fn a_github_script_that_undoes_its_failure_catches_nothing() {
    for script in [
        "core.setFailed('unauthorized'); process.exit(0)",
        "core.setFailed('unauthorized'); process.exit()",
        "core.setFailed('unauthorized'); process['exitCode'] = 0",
        "core.setFailed('unauthorized'); const p = process; p.exitCode = 0",
        "core.setFailed = () => {}; core.setFailed('unauthorized')",
        "core['setFailed'] = () => {}; core.setFailed('unauthorized')",
        "Object.defineProperty(core, 'setFailed', { value: () => {} }); core.setFailed('no')",
        "process.exit(256)",
    ] {
        let (errors, all) = pushers_gate_errors(
            &[
                (RESOLVE_IF, "        id: resolve\n        if: success()\n"),
                (JOB_IF, "    if: success()\n"),
                (
                    FAIL_STEP,
                    &format!(
                        "        if: steps.auth.outputs.is_authorized != 'true'\n        uses: actions/github-script@v7\n        with:\n          script: {script:?}\n"
                    ),
                ),
            ],
            &[],
        );
        assert!(
            errors.contains(&"dispatch-a2".to_owned()),
            "{script}: {all}"
        );
    }
    // `core.setFailed` alone, or `process.exit(1)`, fails the step.
    for script in ["core.setFailed('unauthorized')", "process.exit(1)"] {
        let (errors, all) = pushers_gate_errors(
            &[
                (RESOLVE_IF, "        id: resolve\n        if: success()\n"),
                (JOB_IF, "    if: success()\n"),
                (
                    FAIL_STEP,
                    &format!(
                        "        if: steps.auth.outputs.is_authorized != 'true'\n        uses: actions/github-script@v7\n        with:\n          script: {script:?}\n"
                    ),
                ),
            ],
            &[],
        );
        assert_eq!(errors, ["dispatch-twin"], "{script}: {all}");
    }
}

/// case7, case7b: a step or job whose `if:` may be true after the failing
/// step fired (`!success()`, `success() || …`) is not behind it.
#[test]
fn a_step_or_job_that_runs_after_the_failure_is_not_gated() {
    for cond in [
        "${{ !success() }}",
        "${{ success() || github.event.action == 'nightly-command' }}",
        "${{ !cancelled() }}",
    ] {
        let report = format!(
            "        if: steps.auth.outputs.is_authorized != 'true'\n        run: exit 1\n\n      - name: Report\n        if: {cond}\n        env:\n          GH_TOKEN: ${{{{ secrets.PAT_TOKEN }}}}\n        run: |\n          gh pr comment 1 --repo acme/widgets --body \"nightly for: ${{{{ github.event.client_payload.slash_command.args.all }}}}\"\n"
        );
        let (errors, all) = pushers_gate_errors(&[(FAIL_STEP, &report)], &[]);
        assert!(
            errors.contains(&"authorize".to_owned()),
            "step {cond}: {all}"
        );
        let job = format!(
            "  report:\n    needs: [authorize]\n    if: {cond}\n    runs-on: ubuntu-latest\n    steps:\n      - env:\n          GH_TOKEN: ${{{{ secrets.PAT_TOKEN }}}}\n        run: |\n          gh pr comment 1 --repo acme/widgets --body \"'${{{{ github.event.client_payload.slash_command.args.all }}}}' did not start\"\n\n  dispatch-a2:\n"
        );
        let (errors, all) = pushers_gate_errors(
            &[
                (
                    FAIL_STEP,
                    "        if: steps.auth.outputs.is_authorized != 'true'\n        run: exit 1\n",
                ),
                ("  dispatch-a2:\n", &job),
            ],
            &[],
        );
        assert!(errors.contains(&"report".to_owned()), "job {cond}: {all}");
    }
    // `success() && …` still requires success.
    let report = "        if: steps.auth.outputs.is_authorized != 'true'\n        run: exit 1\n\n      - name: Report\n        if: ${{ success() && github.event.action == 'nightly-command' }}\n        env:\n          GH_TOKEN: ${{ secrets.PAT_TOKEN }}\n        run: |\n          gh pr comment 1 --repo acme/widgets --body \"nightly for: ${{ github.event.client_payload.slash_command.args.all }}\"\n";
    let (errors, all) = pushers_gate_errors(&[(FAIL_STEP, report)], &[]);
    assert_eq!(errors, ["dispatch-twin"], "{all}");
}

/// case8: the flag's own job ran the pull request's code before the
/// check (a checkout of its head, then a script of it): that code may set
/// the flag, plant a `bash`, a `~/.bash_profile`, a `$GITHUB_PATH`. So may
/// a `$GITHUB_ENV` write of the comment's words.
#[test]
fn a_flag_after_the_pull_requests_code_ran_is_no_gate() {
    let nightly = "  dispatch-a2:\n    needs: [authorize]\n    if: needs.authorize.outputs.is_authorized == 'true'\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with:\n          ref: refs/pull/${{ github.event.client_payload.github.payload.issue.number }}/head\n          persist-credentials: false\n      - name: Run nightly suite\n        env:\n          HF_TOKEN: ${{ secrets.HF_TOKEN }}\n        run: ./tests/run_nightly.sh\n\n  dispatch-a3:\n";
    let check = "    steps:\n      - name: Check user authorization\n";
    // The base: the nightly job behind the gate holds no error.
    let (errors, all) = pushers_gate_errors(&[("  dispatch-a2:\n", nightly)], &[]);
    assert!(!errors.contains(&"dispatch-a2".to_owned()), "{all}");
    for before in [
        "      - uses: actions/checkout@v4\n        with:\n          ref: refs/pull/${{ github.event.client_payload.github.payload.issue.number }}/head\n          persist-credentials: false\n      - name: Prepare test list\n        run: ./ci/prepare_nightly.sh\n",
        "      - name: Record the request\n        env:\n          ARGS: ${{ github.event.client_payload.slash_command.args.all }}\n        run: echo \"NIGHTLY_ARGS=$ARGS\" >> \"$GITHUB_ENV\"\n",
    ] {
        let (errors, all) = pushers_gate_errors(
            &[
                ("  dispatch-a2:\n", nightly),
                (
                    check,
                    &format!("    steps:\n{before}      - name: Check user authorization\n"),
                ),
            ],
            &[],
        );
        assert!(
            errors.contains(&"dispatch-a2".to_owned()),
            "{before}: {all}"
        );
    }
}

/// case12: `triage` cannot push, and a slash-command-dispatch `permission:
/// triage` is open to anyone; a check whose `true` arm admits `triage` is
/// no gate either. vllm-ascend's real check (`triage|write|maintain|admin`)
/// is therefore no gate: its `dispatch-a2` error comes back.
#[test]
fn a_check_that_admits_triage_is_no_gate() {
    let (errors, all) = pushers_gate_errors(
        &[(
            "            write|maintain|admin)\n",
            "            triage)\n",
        )],
        &[],
    );
    assert!(errors.contains(&"dispatch-a2".to_owned()), "{all}");
    let (errors, all) = flag_gate_errors_of(&[], false);
    assert_eq!(errors, ["dispatch-a2", "dispatch-twin"], "{all}");
}

/// slash-command-dispatch's `event-type-suffix`: with `""` the command
/// `nightly` dispatches the type `nightly`, which an outsider's comment
/// then starts.
#[test]
fn a_slash_command_event_type_suffix_is_read() {
    let ungated = (
        "        run: |\n          ROLE_NAME",
        "        run: |\n          echo \"is_authorized=true\" >> \"$GITHUB_OUTPUT\"\n          ROLE_NAME",
    );
    let types = (
        "    types: [nightly-command, twin-command]\n",
        "    types: [nightly]\n",
    );
    let suffix = (
        "          dispatch-type: repository\n",
        "          dispatch-type: repository\n          event-type-suffix: \"\"\n",
    );
    let (errors, all) = pushers_gate_errors(&[ungated, types], &[suffix]);
    assert!(errors.contains(&"dispatch-a2".to_owned()), "{all}");
    // Without the suffix, `nightly` is dispatched as `nightly-command`,
    // which this workflow no longer takes.
    let (errors, all) = pushers_gate_errors(&[ungated, types], &[]);
    assert!(!errors.contains(&"dispatch-a2".to_owned()), "{all}");
}
