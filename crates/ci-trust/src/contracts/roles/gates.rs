//! Gates written as steps: a step that fails the job unless GitHub says a
//! named user may act on this repository (a member of its organisation or
//! of a team of it, or a collaborator with write access). Every later step
//! that runs under the default `if: success()` runs only for that user, as
//! a job-level `if:` on `author_association` would decide.
//!
//! A gate counts only where it provably stops the job: a recognised call
//! of GitHub's authorisation API ([`AUTH_APIS`], one place) about a user
//! whose source is known (the run's actor, the commenter, the pull
//! request's author), against this repository or its owner, whose failure
//! (`throw`, `core.setFailed`, `process.exit(1)`, or the call's own error)
//! is reached on every path where the user is not authorised. Anything the
//! reader does not follow (a `try` whose `catch` swallows the error, a
//! condition with another operand, a `return` before the check, a user
//! from elsewhere, another organisation) is no gate: a gate the checker
//! cannot read silences nothing.
//!
//! A gate may also be written as an output flag ([`flag_gates`]): a `run:`
//! step reads the permission route's answer (`gh api …/permission --jq
//! .role_name` or `.permission`) into a variable and writes `F=true` to
//! `$GITHUB_OUTPUT` only on the arms of a `case` over it whose patterns are
//! all roles that can push (`role_name` or `permission`: `write` and up;
//! `triage` cannot push, and `starts.rs` holds slash-command-dispatch's
//! `permission: triage` open to anyone). Then `F` is `true` only where the check
//! passed, whatever else ran: a later step or job whose `if:` requires
//! `steps.X.outputs.F == 'true'` (or `needs.J.outputs.O == 'true'`, O being
//! that flag), or that runs after a step that always fails
//! ([`always_fails`]) under `!= 'true'` (or `== 'false'` where every other
//! run writes `false`), runs only for the user checked. The script is read
//! as data and fail-closed: a `true` written anywhere else (a default
//! before the check, a `*)` arm, a `;&` into the arm), an answer assigned
//! twice or in a subshell, a program other than `echo`/`exit`/`:`/`true`/
//! `false`, an output line that is not a literal `NAME=value`, a log line
//! with text of unknown source, `${{ }}` in the script, a function, a
//! `continue-on-error`: no gate. A check about the repository a comment
//! bot's dispatch names (`client_payload.github.payload.repository`) counts
//! only for that payload's commenter ([`Checked::PayloadCommenter`]): under
//! the bot's own dispatch both are this repository's comment, as `flow.rs`
//! reads the payload; under anyone else's the payload is theirs to write.
//!
//! Owns: [`AUTH_APIS`], [`step_gate`], [`flag_gates`], [`always_fails`]
//! and the small JavaScript reader they need. Must not: decide what a gate
//! means for a value or a start, or read the `if:`s that require a flag
//! (`flow.rs` does, through the same starts as `if:` guards).

use std::collections::{BTreeMap, BTreeSet};

use crate::contracts::shell::{Command, Part, RedirectOp, Word};
use crate::contracts::workflow::Step;

/// Whose standing a gate proves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Checked {
    /// The run's actor (`github.actor`, `context.actor`, the event's sender).
    Actor,
    /// The comment's author (`comment.user.login`): the actor on comment events.
    Commenter,
    /// The pull request's (or issue's) author.
    PrAuthor,
    /// The author of the comment a comment bot's `repository_dispatch`
    /// carries (`client_payload.github.payload.comment.user.login`): the
    /// person who starts the run where a workflow of this repository fired
    /// it for that comment.
    PayloadCommenter,
}

/// What a step's failure proves about the users it checks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    pub checked: BTreeSet<Checked>,
}

/// How an authorisation API answers for a user who is not authorised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// An error (404): the awaited call throws.
    Throws,
    /// A permission (`admin`, `write`, `read`, `none`) the script must compare.
    Permission,
}

/// What the call is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum About {
    /// `org`: this repository's owner.
    Org,
    /// `owner` and `repo`: this repository.
    Repo,
}

/// One of GitHub's authorisation APIs: its Octokit method (as
/// `github.rest.<method>`), its REST route (as `github.request(…)` or
/// `gh api` names it), and how it answers.
struct AuthApi {
    method: &'static str,
    route: &'static str,
    about: About,
    answer: Answer,
}

/// GitHub's APIs that say whether a user may act on a repository.
const AUTH_APIS: &[AuthApi] = &[
    AuthApi {
        method: "orgs.checkMembershipForUser",
        route: "/orgs/{org}/members/{username}",
        about: About::Org,
        answer: Answer::Throws,
    },
    AuthApi {
        method: "orgs.getMembershipForUser",
        route: "/orgs/{org}/memberships/{username}",
        about: About::Org,
        answer: Answer::Throws,
    },
    AuthApi {
        method: "orgs.getMembershipForUserInOrg",
        route: "",
        about: About::Org,
        answer: Answer::Throws,
    },
    AuthApi {
        method: "teams.getMembershipForUserInOrg",
        route: "/orgs/{org}/teams/{team_slug}/memberships/{username}",
        about: About::Org,
        answer: Answer::Throws,
    },
    AuthApi {
        method: "repos.checkCollaborator",
        route: "/repos/{owner}/{repo}/collaborators/{username}",
        about: About::Repo,
        answer: Answer::Throws,
    },
    AuthApi {
        method: "repos.getCollaboratorPermissionLevel",
        route: "/repos/{owner}/{repo}/collaborators/{username}/permission",
        about: About::Repo,
        answer: Answer::Permission,
    },
];

/// The permissions `getCollaboratorPermissionLevel` may answer, and those
/// that can push.
const PERMISSIONS: &[&str] = &["admin", "maintain", "write", "triage", "read", "none"];
const WRITE_PERMISSIONS: &[&str] = &["admin", "maintain", "write"];

/// The roles of `role_name` that can push: `admin`, `maintain`, `write`.
/// `triage` cannot push, and `starts.rs` counts slash-command-dispatch's
/// `permission: triage` as open to anyone, so a check that admits it
/// proves no more here. `read` is every account's on a public
/// repository, and a custom role's name says nothing known.
const GRANTED_ROLES: &[&str] = &["admin", "maintain", "write"];

/// The fields of a permission answer a `gh api --jq` may read, with the
/// values that say the user may act. (`permission` is the legacy field:
/// `maintain` reads `write`, `triage` reads `read`, as anyone's does.)
const PERMISSION_FIELDS: &[(&str, &[&str])] = &[
    (".permission", WRITE_PERMISSIONS),
    (".role_name", GRANTED_ROLES),
];

/// The gate `step` is, if any: `owners` are the names this repository's
/// owner is known by (a literal `org:` must be one of them); `shell` is
/// the shell its `run:` runs in (`None`: GitHub's default), `windows`
/// whether its runner may be Windows (whose default shell goes on after a
/// failing command).
pub fn step_gate(
    step: &Step,
    owners: &[String],
    shell: Option<&str>,
    windows: bool,
) -> Option<Gate> {
    let checked = if step.uses_action("actions/github-script") {
        let script = step.input("script")?;
        let tokens = tokenize(&script.value)?;
        if unsafe_names(&tokens) {
            return None;
        }
        let reader = Reader { t: &tokens, owners };
        let stmts = reader.block(0, tokens.len())?;
        let mut env = Env::default();
        reader.scan(&stmts, &mut env)
    } else if step.run.is_some() {
        run_gate(step, owners, shell, windows)?
    } else {
        return None;
    };
    (!checked.is_empty()).then_some(Gate { checked })
}

/// Names whose change may pass a step that failed, or fake GitHub's
/// objects: `process.exitCode = 0` (or `process['exitCode']`, or
/// `process.exit(0)`) after `core.setFailed`, an assignment to `github`,
/// `core`, `context` or `process` or to any property of them
/// (`core.setFailed = () => {}`), or a reflective way around that
/// (`Object.defineProperty`, `Reflect`, `globalThis`, `eval`). Read
/// fail-closed: `process` is safe only as `process.env.NAME` read, or as
/// `process.exit(N)` with `N` in 1..=255 (Node, like a shell, keeps the
/// low 8 bits: 256 exits 0).
fn unsafe_names(tokens: &[Token]) -> bool {
    let punct =
        |i: usize, p: &str| matches!(tokens.get(i).map(|t| &t.tok), Some(Tok::Punct(q)) if *q == p);
    let ident =
        |i: usize, w: &str| matches!(tokens.get(i).map(|t| &t.tok), Some(Tok::Ident(x)) if x == w);
    // Whether the member chain that starts at `i` (`.a`, `?.a`, `[…]`)
    // ends in an assignment.
    let assigned_after = |mut i: usize| -> bool {
        loop {
            if (punct(i, ".") || punct(i, "?."))
                && matches!(tokens.get(i + 1).map(|t| &t.tok), Some(Tok::Ident(_)))
            {
                i += 2;
                continue;
            }
            if punct(i, "[") {
                let mut depth = 0usize;
                while let Some(t) = tokens.get(i) {
                    match t.tok {
                        Tok::Punct("[") => depth += 1,
                        Tok::Punct("]") => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                if tokens.get(i).is_none() {
                    return true;
                }
                i += 1;
                continue;
            }
            break;
        }
        matches!(
            tokens.get(i).map(|t| &t.tok),
            Some(Tok::Punct(
                "=" | "+="
                    | "-="
                    | "*="
                    | "/="
                    | "%="
                    | "**="
                    | "<<="
                    | ">>="
                    | ">>>="
                    | "&="
                    | "|="
                    | "^="
                    | "&&="
                    | "||="
                    | "??="
                    | "++"
                    | "--"
            ))
        ) || punct(i.wrapping_sub(1), "++")
            || punct(i.wrapping_sub(1), "--")
    };
    tokens.iter().enumerate().any(|(i, t)| {
        let member = punct(i.wrapping_sub(1), ".") || punct(i.wrapping_sub(1), "?.");
        match &t.tok {
            Tok::Ident(w) if w == "exitCode" => true,
            Tok::Ident(w)
                if matches!(
                    w.as_str(),
                    "globalThis" | "global" | "eval" | "Function" | "Reflect" | "Proxy" | "defineProperty"
                        | "defineProperties" | "setPrototypeOf" | "__proto__" | "assign"
                ) =>
            {
                true
            }
            Tok::Ident(w) if w == "process" && !member => {
                let env_read = punct(i + 1, ".")
                    && ident(i + 2, "env")
                    && !assigned_after(i + 3)
                    && !punct(i + 3, "[");
                let exit = punct(i + 1, ".")
                    && ident(i + 2, "exit")
                    && punct(i + 3, "(")
                    && matches!(tokens.get(i + 4).map(|t| &t.tok), Some(Tok::Num(n)) if n.parse::<u32>().is_ok_and(|n| (1..=255).contains(&n)))
                    && punct(i + 5, ")");
                !(env_read || exit)
            }
            Tok::Ident(w) if matches!(w.as_str(), "github" | "core" | "context") && !member => {
                assigned_after(i + 1)
            }
            _ => false,
        }
    })
}

/// A `run:` script that stops at a failing `gh api` of an authorisation
/// route: GitHub runs `bash -e` (its default on Linux and macOS, and what
/// `shell: bash` and `sh` mean), so a command outside any condition, list
/// or pipeline that fails ends the step failed. The checks count up to the
/// first thing that could change that (`set +e`, a `trap`, an `exit` that
/// may succeed).
fn run_gate(
    step: &Step,
    owners: &[String],
    shell: Option<&str>,
    windows: bool,
) -> Option<BTreeSet<Checked>> {
    let stops = match shell.map(str::trim) {
        None => !windows,
        Some("bash" | "sh") => true,
        _ => false,
    };
    if !stops {
        return None;
    }
    if step
        .env
        .iter()
        .any(|(k, _)| SHELL_GATE_ENV.contains(&k.value.as_str()))
    {
        return None;
    }
    let text = &step.run.as_ref()?.value;
    let script = step.script()?;
    let assigned: BTreeSet<String> = script
        .assignments()
        .iter()
        .map(|(_, a)| a.name.clone())
        .collect();
    // A function named `gh` (or any function: what it shadows is its
    // name) runs instead of the program the check needs.
    if script.commands.iter().any(|c| c.in_function.is_some()) {
        return None;
    }
    let if_gates = if_gates(&script, text, owners, step, &assigned);
    let mut out = BTreeSet::new();
    for (index, command) in script.commands.iter().enumerate() {
        if let Some(&user) = if_gates.get(&index) {
            out.insert(user);
            continue;
        }
        let program = command.program().unwrap_or_default();
        let args = command.arg_texts();
        match program.as_str() {
            "trap" => return Some(out),
            "set"
                if args
                    .iter()
                    .any(|a| a.starts_with('+') && a.contains('e') || a == "errexit") =>
            {
                return Some(out);
            }
            "exit" | "return" => {
                let fails = args.first().is_some_and(|a| fails_with(a));
                if !fails {
                    return Some(out);
                }
                continue;
            }
            "gh" => {}
            _ => continue,
        }
        let before = text.get(..command.span.start).unwrap_or("");
        let after = text.get(command.span.end..).unwrap_or("");
        let listed = after.trim_start_matches([' ', '\t']).starts_with("||")
            || after.trim_start_matches([' ', '\t']).starts_with("&&")
            || before.trim_end_matches([' ', '\t']).ends_with('!');
        // `GH_HOST=… gh api …` asks another host.
        if !command.assignments.is_empty()
            || command.conditional
            || command.substituted
            || command.in_function.is_some()
            || command.pipe_len > 1
            || listed
        {
            continue;
        }
        let words: Vec<String> = command
            .args()
            .iter()
            .map(|w| unquote(text.get(w.span.clone()).unwrap_or("")))
            .collect();
        if let Some((api, user, _)) = gh_api_call(&words, owners, step, &assigned) {
            if api.answer == Answer::Throws {
                out.insert(user);
            }
        }
    }
    Some(out)
}

/// The fields of a permission answer that `--jq` reads as `true` or
/// `false` (`user.permissions`), each `true` only for a user who may act.
const BOOLEAN_PERMISSION_FIELDS: &[&str] = &[
    ".user.permissions.push",
    ".user.permissions.maintain",
    ".user.permissions.admin",
];

/// `if $(gh api …/collaborators/USER/permission --jq
/// .user.permissions.push); then …; else …; exit 1; fi`: the answer,
/// `true` or `false`, is run as the condition's command (`false`, or a
/// `null` that is no command, or a failed call's empty output, all fail
/// it), so the script goes past the `if` only for a user who may push.
/// Read fail-closed: a top-level `if` with no `elif`, whose condition is
/// that one word and nothing else (no `!`), and whose `else` always ends
/// in a failing `exit` (and holds no other `exit` or `return`). Returns
/// the index of the condition's command with the user it checks.
fn if_gates(
    script: &crate::contracts::shell::Script,
    text: &str,
    owners: &[String],
    step: &Step,
    assigned: &BTreeSet<String>,
) -> BTreeMap<usize, Checked> {
    let mut out = BTreeMap::new();
    // A function may shadow what the condition runs (`false() { :; }`) or
    // the `exit` of the `else`; a trap may reset the status the step
    // ends with (`trap 'exit 0' EXIT`).
    let shadowed = script
        .commands
        .iter()
        .any(|c| c.in_function.is_some() || c.program().as_deref() == Some("trap"));
    if shadowed {
        return out;
    }
    for gate in &script.ifs {
        if !gate.top_level || !gate.closed || gate.elif {
            continue;
        }
        let Some(else_branch) = &gate.else_branch else {
            continue;
        };
        let exits = |i: &usize| {
            let c = &script.commands[*i];
            matches!(c.program().as_deref(), Some("exit" | "return"))
        };
        // `exit N` on its own (not in a pipeline's subshell, `exit 1 |
        // tee`), N from 1 to 255 (the shell keeps N mod 256: `exit 256`
        // succeeds).
        let fails = |i: &usize| {
            let c = &script.commands[*i];
            !c.subshell
                && c.pipe_len <= 1
                && c.program_index() == Some(0)
                && c.program().as_deref() == Some("exit")
                && matches!(c.arg_texts().as_slice(), [a] if fails_with(a))
        };
        let always_fails = gate.else_unconditional.iter().any(fails)
            && else_branch.clone().filter(exits).all(|i| fails(&i));
        if !always_fails {
            continue;
        }
        // The condition: `gh api …` inside `$( )`, the host word alone.
        let condition = gate.condition.clone();
        if condition.len() != 2 {
            continue;
        }
        let (gh, host) = (condition.start, condition.start + 1);
        let (call, word) = (&script.commands[gh], &script.commands[host]);
        let sole = match word.words.as_slice() {
            [w] => matches!(w.parts.as_slice(),
                [Part::Substitution { commands }] if *commands == (gh..gh + 1)),
            _ => false,
        };
        let between = text.get(gate.start..word.span.start).unwrap_or("");
        if !sole
            || between.trim() != "if"
            || !word.assignments.is_empty()
            || !word.redirects.is_empty()
            || call.program().as_deref() != Some("gh")
            || !call.assignments.is_empty()
            || call.pipe_len > 1
            || word.pipe_len > 1
        {
            continue;
        }
        let words: Vec<String> = call
            .args()
            .iter()
            .map(|w| unquote(text.get(w.span.clone()).unwrap_or("")))
            .collect();
        // The answer must be what the condition runs: `--silent` prints
        // nothing (the call's own success decides), `--include` prints
        // the headers first.
        if words
            .iter()
            .any(|w| matches!(w.as_str(), "--silent" | "-i" | "--include"))
        {
            continue;
        }
        let Some((api, user, Some(jq))) = gh_api_call(&words, owners, step, assigned) else {
            continue;
        };
        let jq = jq.trim_matches(|c| c == '\'' || c == '"');
        if api.answer == Answer::Permission && BOOLEAN_PERMISSION_FIELDS.contains(&jq) {
            out.insert(host, user);
        }
    }
    out
}

/// A gate written as an output flag: the step's output `output` is
/// `true` only where GitHub's authorisation API said the users in `gate`
/// may act (it is written so only on the arms of a `case` over the API's
/// answer that the answer reaches only for them). A later step or job
/// that runs only when the flag is `true`, or after a failing step that
/// runs when it is not, runs only for them (`flow.rs` reads those `if:`s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagGate {
    pub output: String,
    pub gate: Gate,
    /// Every run of the step that ends successfully without the check
    /// passing writes the flag `false`: a failing step under `if: … ==
    /// 'false'` then catches all of them (one under `!= 'true'` needs
    /// nothing of this, and catches a skipped step too).
    pub false_otherwise: bool,
}

/// The output flags `step` writes as gates: `shell` and `windows` as for
/// [`step_gate`]; `overridden`: a job or workflow `env:` sets what the
/// check reads ([`SHELL_GATE_ENV`]).
///
/// Read fail-closed, as data: the script may run only `echo`, `exit`,
/// `:`, `true`, `false` and the `gh api` calls that answer; the
/// answer is a variable assigned once, unconditionally, from one `gh api`
/// of the permission route (`--jq .permission` or `.role_name`) about a
/// user of known source and this repository; every write of the flag that
/// may say `true` lies in a `case` arm over that variable whose patterns
/// are all authorised values (and no arm falls into it through `;&`);
/// every write to `$GITHUB_OUTPUT` is an `echo` of a literal `NAME=value`;
/// no `${{ }}`, no `${…:=…}`, no functions, no `continue-on-error`.
pub fn flag_gates(
    step: &Step,
    owners: &[String],
    shell: Option<&str>,
    windows: bool,
    overridden: bool,
) -> Vec<FlagGate> {
    flag_gates_of(step, owners, shell, windows, overridden).unwrap_or_default()
}

fn flag_gates_of(
    step: &Step,
    owners: &[String],
    shell: Option<&str>,
    windows: bool,
    overridden: bool,
) -> Option<Vec<FlagGate>> {
    if !posix_shell(shell, windows) || overridden || step.uses.is_some() {
        return None;
    }
    if step
        .continue_on_error
        .as_ref()
        .is_some_and(|v| v.value.trim() != "false")
        || step
            .env
            .iter()
            .any(|(k, _)| SHELL_GATE_ENV.contains(&k.value.as_str()))
    {
        return None;
    }
    let text = &step.run.as_ref()?.value;
    // What GitHub substitutes before the shell runs may be any text; a
    // default-assigning or arithmetic expansion may set the answer.
    if text.contains("${{") || text.contains("$((") || has_assigning_expansion(text) {
        return None;
    }
    let script = step.script()?;
    let all_assignments = script.assignments();
    let assigned: BTreeSet<String> = all_assignments
        .iter()
        .map(|(_, a)| a.name.clone())
        .collect();
    if assigned.contains("GITHUB_OUTPUT") {
        return None;
    }
    // The answers: `VAR=$(gh api …)`, the variable assigned nowhere else.
    // Each is the field it reads, the user it is about and the values that
    // say the user may act.
    let mut answers: BTreeMap<String, (Checked, &'static [&'static str])> = BTreeMap::new();
    let mut succeeds = false;
    for (i, command) in script.commands.iter().enumerate() {
        if command.in_function.is_some() {
            return None;
        }
        let program = command.program();
        if program.is_none() {
            continue;
        }
        if !command.assignments.is_empty() || command.program_index() != Some(0) {
            return None;
        }
        match program.as_deref() {
            Some("echo" | ":" | "true" | "false") => {}
            // `set -e`, `set -euo pipefail`: options that leave what runs alone.
            Some("set") if safe_set(&command.arg_texts()) && !command.subshell => {}
            Some("exit") => {
                let fails = command.arg_texts().first().is_some_and(|a| fails_with(a));
                // `exit` in a subshell ends only that: the script goes on.
                succeeds |= !fails || command.subshell;
            }
            Some("gh") => {
                // Only as the whole value of an answer's assignment.
                let host = script.commands.iter().find(|c| {
                    c.program().is_none()
                        && c.assignments.len() == 1
                        && matches!(c.assignments[0].value.parts.as_slice(),
                            [Part::Substitution { commands }] if *commands == (i..i + 1))
                })?;
                let name = &host.assignments[0].name;
                let once = all_assignments
                    .iter()
                    .filter(|(_, a)| &a.name == name)
                    .count()
                    == 1;
                if !once
                    || host.conditional
                    || host.subshell
                    || host.substituted
                    || command.pipe_len > 1
                    || host.pipe_len > 1
                {
                    return None;
                }
                let words: Vec<String> = command
                    .args()
                    .iter()
                    .map(|w| unquote(text.get(w.span.clone()).unwrap_or("")))
                    .collect();
                let (api, user, jq) = gh_api_call(&words, owners, step, &assigned)?;
                if api.answer != Answer::Permission {
                    return None;
                }
                let jq = jq?;
                let jq = jq.trim_matches(|c| c == '\'' || c == '"');
                let &(_, granted) = PERMISSION_FIELDS.iter().find(|(f, _)| *f == jq)?;
                answers.insert(name.clone(), (user, granted));
            }
            _ => return None,
        }
    }
    // Where each command may run only for an authorised answer: inside an
    // arm of a `case` over the answer, after the answer is read, whose
    // patterns are all authorised values, and that no arm falls into.
    let mut authorised: BTreeMap<usize, BTreeSet<Checked>> = BTreeMap::new();
    let mut over_answer = Vec::new();
    for case in &script.cases {
        let Some(name) = sole_variable(&case.subject) else {
            continue;
        };
        let Some(&(user, granted)) = answers.get(&name) else {
            continue;
        };
        let read_before = script.commands.iter().any(|c| {
            c.assignments.first().is_some_and(|a| a.name == name) && c.span.end <= case.start
        });
        if !read_before {
            continue;
        }
        let mut falls_in = false;
        let mut only = Vec::new();
        for arm in &case.arms {
            let only_granted = !falls_in
                && !arm.patterns.is_empty()
                && arm.patterns.iter().all(|p| {
                    matches!(p.parts.as_slice(), [Part::Literal { text, .. }] if granted.contains(&text.as_str()))
                });
            if only_granted {
                for i in arm.commands.clone() {
                    authorised.entry(i).or_default().insert(user);
                }
            }
            only.push(only_granted);
            // `;&` runs the next arm's commands without testing its
            // patterns: for any answer that reached this one.
            falls_in = arm.terminator == ";&" && !only_granted;
        }
        over_answer.push((case, only));
    }
    // Every write to `$GITHUB_OUTPUT`: a literal `NAME=value`, appended
    // from stdout alone (`>>`, `1>>`). Any other redirection that writes
    // goes to `/dev/null` or `/dev/stderr`: another file may be the
    // runner's own file-command file (`_runner_file_commands/…`, a glob, a
    // variable), and `>&FILE`, `&>`, `&>>`, `>|` are not read. A
    // here-document whose body the shell expands runs what it holds.
    // Output names are compared ignoring case, as the runner keeps them.
    if text.contains("&>") {
        return None;
    }
    let mut writes: Vec<(usize, String, String)> = Vec::new();
    for (i, command) in script.commands.iter().enumerate() {
        for r in &command.redirects {
            match r.op {
                RedirectOp::Read => continue,
                RedirectOp::HereDoc | RedirectOp::HereString => {
                    let expands = r.heredoc.as_ref().is_some_and(|h| {
                        h.parts.iter().any(|p| !matches!(p, Part::Literal { .. }))
                    });
                    if expands
                        || r.target
                            .parts
                            .iter()
                            .any(|p| !matches!(p, Part::Literal { .. }))
                    {
                        return None;
                    }
                    continue;
                }
                RedirectOp::Duplicate => {
                    // `>&2`, `2>&1`, `>&-`: another descriptor, not a file.
                    let fd_like = r.target.literal().is_some_and(|t| {
                        t == "-" || !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
                    });
                    if !fd_like {
                        return None;
                    }
                    continue;
                }
                RedirectOp::Write | RedirectOp::Append | RedirectOp::ReadWrite => {}
            }
            if !r.target.is_variable("GITHUB_OUTPUT") {
                match r.target.literal().as_deref() {
                    Some("/dev/null" | "/dev/stderr") => continue,
                    _ => return None,
                }
            }
            if !matches!(r.op, RedirectOp::Append) || r.fd.is_some_and(|fd| fd != 1) {
                return None;
            }
            let (name, value) = output_line(command)?;
            writes.push((i, name.to_ascii_lowercase(), value));
        }
        if command
            .redirects
            .iter()
            .all(|r| !r.target.is_variable("GITHUB_OUTPUT"))
            && !stdout_safe(command, &answers, step)
        {
            return None;
        }
    }
    let mut out = Vec::new();
    let names: BTreeSet<&String> = writes.iter().map(|(_, n, _)| n).collect();
    for name in names {
        let mine: Vec<&(usize, String, String)> =
            writes.iter().filter(|(_, n, _)| n == name).collect();
        let trues: Vec<usize> = mine
            .iter()
            .filter(|(_, _, v)| v.eq_ignore_ascii_case("true"))
            .map(|(i, _, _)| *i)
            .collect();
        if trues.is_empty() {
            continue;
        }
        // The users every `true` is written only for.
        let mut checked: Option<BTreeSet<Checked>> = None;
        for i in &trues {
            let users = authorised.get(i).cloned().unwrap_or_default();
            checked = Some(match checked {
                None => users,
                Some(c) => c.intersection(&users).copied().collect(),
            });
        }
        let checked = checked.unwrap_or_default();
        if checked.is_empty() {
            continue;
        }
        // `false` on every other path: one top-level `case` over the
        // answer, with a `*` arm, each arm not authorised writing
        // `NAME=false` whenever it runs, no other value written where the
        // check did not pass, and no way to end the step successfully.
        let false_otherwise = !succeeds
            && mine
                .iter()
                .all(|(i, _, v)| authorised.contains_key(i) || v.eq_ignore_ascii_case("false"))
            && over_answer.len() == 1
            && over_answer.iter().all(|(case, only)| {
                case.top_level
                    && case.arms.iter().any(|a| {
                        a.patterns.iter().any(|p| {
                            matches!(p.parts.as_slice(), [Part::Literal { text, quoted: false }] if text == "*")
                        })
                    })
                    && case.arms.iter().zip(only).all(|(a, &only)| {
                        only || a.unconditional.iter().any(|i| {
                            mine.iter().any(|(j, _, v)| j == i && v.eq_ignore_ascii_case("false"))
                        })
                    })
            });
        out.push(FlagGate {
            output: name.clone(),
            gate: Gate { checked },
            false_otherwise,
        });
    }
    Some(out)
}

/// A step's shell that is bash or sh: GitHub's default on Linux and macOS,
/// `bash`, `sh`, or a command line of either (`bash -el {0}`, `bash
/// --noprofile --norc -eo pipefail {0}`) whose options are only those
/// that leave execution and `errexit` alone: the letters `e l o u x`, `-o
/// pipefail`, `--noprofile`, `--norc`, then `{0}` last. Anything else
/// (`-n`, `+e`, `-c`, `-i`, `-s`, another `-o`) is not read.
fn posix_shell(shell: Option<&str>, windows: bool) -> bool {
    match shell.map(str::trim) {
        None => !windows,
        Some(s) => {
            let words: Vec<&str> = s.split_whitespace().collect();
            let Some((first, rest)) = words.split_first() else {
                return false;
            };
            if !matches!(*first, "bash" | "sh") {
                return false;
            }
            let (options, last) = match rest.split_last() {
                Some((&"{0}", options)) => (options, true),
                Some(_) => (rest, false),
                None => (rest, false),
            };
            if !last && !rest.is_empty() {
                return false;
            }
            let mut wants_option_name = false;
            for w in options {
                if wants_option_name {
                    if *w != "pipefail" {
                        return false;
                    }
                    wants_option_name = false;
                    continue;
                }
                match *w {
                    "--noprofile" | "--norc" => {}
                    _ => {
                        let Some(letters) = w.strip_prefix('-') else {
                            return false;
                        };
                        if letters.is_empty() || letters.starts_with('-') {
                            return false;
                        }
                        if !letters.bytes().all(|b| b"elouxo".contains(&b)) {
                            return false;
                        }
                        // `-o` takes the next word: only `pipefail`; at most
                        // one `o`, and last in its group.
                        match letters.matches('o').count() {
                            0 => {}
                            1 if letters.ends_with('o') => wants_option_name = true,
                            _ => return false,
                        }
                    }
                }
            }
            !wants_option_name
        }
    }
}

/// `set` arguments that only make the script stricter or louder: `-e`,
/// `-u`, `-x`, `-o pipefail` (or `errexit`, `nounset`, `xtrace`), grouped
/// as `-euo pipefail`. No `+`, no positional words.
fn safe_set(args: &[String]) -> bool {
    let mut wants_name = false;
    for a in args {
        if wants_name {
            if !matches!(a.as_str(), "pipefail" | "errexit" | "nounset" | "xtrace") {
                return false;
            }
            wants_name = false;
            continue;
        }
        let Some(letters) = a.strip_prefix('-') else {
            return false;
        };
        if letters.is_empty() || !letters.bytes().all(|b| b"euxo".contains(&b)) {
            return false;
        }
        match letters.matches('o').count() {
            0 => {}
            1 if letters.ends_with('o') => wants_name = true,
            _ => return false,
        }
    }
    !wants_name && !args.is_empty()
}

/// An `exit` status that fails: a decimal 1..=255 (the shell and Node keep
/// the low 8 bits, so 256 exits 0; anything else is not read).
fn fails_with(n: &str) -> bool {
    n.bytes().all(|b| b.is_ascii_digit()) && n.parse::<u32>().is_ok_and(|n| (1..=255).contains(&n))
}

/// `${NAME:=…}`, `${NAME=…}`: an expansion that assigns.
fn has_assigning_expansion(text: &str) -> bool {
    text.match_indices("${").any(|(at, _)| {
        let rest = &text[at + 2..];
        let inner = rest.split('}').next().unwrap_or(rest);
        inner.contains('=')
    })
}

/// The variable a word is, alone (`$V`, `"${V}"`).
fn sole_variable(word: &Word) -> Option<String> {
    let mut parts = word
        .parts
        .iter()
        .filter(|p| !matches!(p, Part::Literal { text, .. } if text.is_empty()));
    match (parts.next(), parts.next()) {
        (Some(Part::Variable { name, .. }), None) => Some(name.clone()),
        _ => None,
    }
}

/// `echo "NAME=value"` with a literal line: its name and value.
fn output_line(command: &Command) -> Option<(String, String)> {
    if command.program().as_deref() != Some("echo") {
        return None;
    }
    let [word] = command.args() else {
        return None;
    };
    let line = word.literal()?;
    if line.starts_with('-') || line.contains(['\n', '\r', '\\']) {
        return None;
    }
    let (name, value) = line.split_once('=')?;
    let is_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    is_name.then(|| (name.to_owned(), value.to_owned()))
}

/// A command writing to the log, not to `$GITHUB_OUTPUT`, that cannot
/// write a workflow command (`::set-output …`): its words are literals
/// and the variables of known, tame values (the answer; a user's login or
/// a repository's name from the step's `env:`).
fn stdout_safe(
    command: &Command,
    answers: &BTreeMap<String, (Checked, &'static [&'static str])>,
    step: &Step,
) -> bool {
    let tame = |name: &str| {
        answers.contains_key(name)
            || step.env.iter().any(|(k, v)| {
                k.value == name
                    && (matches!(expression_user(&v.value), Some(User::Known(_)))
                        || matches!(
                            expression_path(&v.value).as_deref(),
                            Some("github.repository" | PAYLOAD_REPOSITORY)
                        ))
            })
    };
    // The runner reads a line that starts `::` as a workflow command, its
    // name ignoring case (`::SET-OUTPUT`, `::Save-State`): one is safe
    // only when its name is a log command's (`::error::…`).
    // Each word is read as if it began the line (`echo -n`, `echo ""`).
    let log_command = |text: &str| match text.trim_start().strip_prefix("::") {
        None => !text.contains("::"),
        Some(rest) => {
            let name = rest
                .split([' ', ':'])
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            matches!(
                name.as_str(),
                "error" | "warning" | "notice" | "debug" | "group" | "endgroup" | "add-mask"
            )
        }
    };
    if !command.args().iter().all(|w| log_command(&w.text())) {
        return false;
    }
    command.words.iter().all(|w| {
        !w.text().to_ascii_lowercase().contains("set-output")
            && !w.text().to_ascii_lowercase().contains("save-state")
            && !w.text().contains('\\')
            && w.parts.iter().all(|p| match p {
                Part::Literal { .. } => true,
                Part::Variable { name, .. } => tame(name),
                // The answer's own `gh api`.
                Part::Substitution { .. } => command.program().is_none(),
                _ => false,
            })
    })
}

/// A step that fails whenever it runs: a `run:` of one unconditional
/// `exit N` (N not 0) in a shell where that fails the step, or a
/// `github-script` that fails before anything may end it.
pub fn always_fails(step: &Step, shell: Option<&str>, windows: bool) -> bool {
    if step.uses_action("actions/github-script") {
        let Some(script) = step.input("script") else {
            return false;
        };
        let Some(tokens) = tokenize(&script.value) else {
            return false;
        };
        if unsafe_names(&tokens) {
            return false;
        }
        let reader = Reader {
            t: &tokens,
            owners: &[],
        };
        return reader
            .block(0, tokens.len())
            .is_some_and(|b| reader.fails(&b));
    }
    if step.uses.is_some() || !posix_shell(shell, windows) {
        return false;
    }
    let Some(run) = &step.run else {
        return false;
    };
    if run.value.contains("${{") {
        return false;
    }
    let Some(script) = step.script() else {
        return false;
    };
    let [command] = script.commands.as_slice() else {
        return false;
    };
    command.program().as_deref() == Some("exit")
        && command.program_index() == Some(0)
        && command.assignments.is_empty()
        && !command.conditional
        && !command.subshell
        && command.pipe_len <= 1
        && matches!(command.arg_texts().as_slice(), [n] if fails_with(n))
}

/// A word's text without its quotes: one quoted whole, or double quotes
/// around its parts (`/repos/"$REPO"/collaborators/"$USER"/permission`),
/// which change how the shell splits it, not what it says, where the word
/// holds no escape, single quote or substitution that quoting would change.
fn unquote(word: &str) -> String {
    let w = word.trim();
    for q in ['"', '\''] {
        if let Some(inner) = w.strip_prefix(q).and_then(|w| w.strip_suffix(q)) {
            if !inner.contains(q) {
                return inner.to_owned();
            }
        }
    }
    if w.contains('"') && !w.contains(['\\', '\'', '`']) && !w.contains("$(") {
        return w.replace('"', "");
    }
    w.to_owned()
}

/// `gh api [flags] ROUTE` of an authorisation route with a GET: the API,
/// the user it asks about, and what its `--jq` reads of the answer.
fn gh_api_call(
    words: &[String],
    owners: &[String],
    step: &Step,
    assigned: &BTreeSet<String>,
) -> Option<(&'static AuthApi, Checked, Option<String>)> {
    if words.first().map(String::as_str) != Some("api") {
        return None;
    }
    let mut route = None;
    let mut jq = None;
    let mut i = 1;
    while i < words.len() {
        let w = words[i].as_str();
        match w {
            "-X" | "--method" => {
                if !words
                    .get(i + 1)
                    .is_some_and(|m| m.eq_ignore_ascii_case("GET"))
                {
                    return None;
                }
                i += 2;
            }
            "-q" | "--jq" => {
                if jq.replace(words.get(i + 1)?.trim().to_owned()).is_some() {
                    return None;
                }
                i += 2;
            }
            "-H" | "--header" => i += 2,
            "--silent" | "-i" | "--include" => i += 1,
            _ if w.eq_ignore_ascii_case("--method=GET") => i += 1,
            _ if w.starts_with('-') => return None,
            _ => {
                if route.replace(w).is_some() {
                    return None;
                }
                i += 1;
            }
        }
    }
    let route = route?;
    let segments: Vec<&str> = route.trim_start_matches('/').split('/').collect();
    // What a step `env:` variable the script does not assign holds.
    let env_value = |seg: &str| -> Option<&str> {
        let name = seg.strip_prefix('$')?;
        let name = name
            .strip_prefix('{')
            .and_then(|n| n.strip_suffix('}'))
            .unwrap_or(name);
        if assigned.contains(name) {
            return None;
        }
        let value = step.env.iter().find(|(k, _)| k.value == name)?;
        Some(value.1.value.as_str())
    };
    let user_of = |seg: &str| -> Option<Checked> {
        if !assigned.contains("GITHUB_ACTOR") && matches!(seg, "$GITHUB_ACTOR" | "${GITHUB_ACTOR}")
        {
            return Some(Checked::Actor);
        }
        match expression_user(env_value(seg).unwrap_or(seg))? {
            User::Known(c) => Some(c),
            User::Param(_) => None,
        }
    };
    let is_owner = |seg: &str| {
        owners.iter().any(|o| o.eq_ignore_ascii_case(seg))
            || expression_path(seg).as_deref() == Some("github.repository_owner")
            || matches!(
                seg,
                "$GITHUB_REPOSITORY_OWNER" | "${GITHUB_REPOSITORY_OWNER}"
            )
    };
    // This repository, or the one a dispatched comment was made on (see
    // [`PAYLOAD_REPOSITORY`]).
    let repository = |seg: &str| -> Option<bool> {
        if matches!(seg, "$GITHUB_REPOSITORY" | "${GITHUB_REPOSITORY}") {
            return Some(false);
        }
        match expression_path(env_value(seg).unwrap_or(seg))?.as_str() {
            "github.repository" => Some(false),
            PAYLOAD_REPOSITORY => Some(true),
            _ => None,
        }
    };
    for api in AUTH_APIS.iter().filter(|a| !a.route.is_empty()) {
        let pattern: Vec<&str> = api.route.trim_start_matches('/').split('/').collect();
        // `{owner}/{repo}` may be one `${{ github.repository }}`.
        let patterns: Vec<Vec<&str>> = if api.about == About::Repo {
            let joined: Vec<&str> = pattern
                .iter()
                .copied()
                .filter(|p| *p != "{repo}")
                .map(|p| if p == "{owner}" { "{repository}" } else { p })
                .collect();
            vec![pattern.clone(), joined]
        } else {
            vec![pattern.clone()]
        };
        for pattern in patterns {
            if pattern.len() != segments.len() {
                continue;
            }
            let mut user = None;
            let mut payload = false;
            let ok = pattern.iter().zip(&segments).all(|(p, s)| match *p {
                "{org}" | "{owner}" => is_owner(s),
                "{repository}" => repository(s).inspect(|&p| payload = p).is_some(),
                // A repository named by a literal is not known to be this one.
                "{repo}" => expression_path(s).as_deref() == Some("github.event.repository.name"),
                "{team_slug}" => !s.is_empty() && !s.contains('$'),
                "{username}" => {
                    user = user_of(s);
                    user.is_some()
                }
                literal => literal == *s,
            });
            // The payload's repository is this one only where the payload
            // is a comment bot's, whose commenter the gate must then check.
            if ok && (!payload || user == Some(Checked::PayloadCommenter)) {
                return Some((api, user?, jq));
            }
        }
    }
    None
}

/// The repository a comment bot's dispatch names
/// (`client_payload.github.payload.repository.full_name`). Where a
/// workflow of this repository fired the dispatch for a comment, that
/// comment's event is this repository's (`flow.rs` reads the payload so);
/// where anyone else dispatched, the payload is theirs to write. So a check
/// about it counts only for [`Checked::PayloadCommenter`], which holds
/// only under the first.
const PAYLOAD_REPOSITORY: &str = "github.event.client_payload.github.payload.repository.full_name";

/// The path of a string that is one `${{ }}` expression (`github.actor`).
fn expression_path(s: &str) -> Option<String> {
    let inner = s.trim().strip_prefix("${{")?.strip_suffix("}}")?.trim();
    Some(inner.to_owned())
}

// --- A small JavaScript tokenizer -----------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// A template literal with substitutions (its raw text).
    Template(String),
    Num(String),
    Punct(&'static str),
    Regex,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    /// A line break comes before it.
    newline: bool,
}

const PUNCTS: &[&str] = &[
    ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=", "=>", "==", "!=",
    "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
    "**", "<<", ">>", "{", "}", "(", ")", "[", "]", ";", ",", "<", ">", "+", "-", "*", "/", "%",
    "&", "|", "^", "!", "~", "?", ":", "=", ".", "@", "#",
];

/// Splits a script into tokens; `None` when it does not tokenize (an
/// unterminated string or comment).
fn tokenize(src: &str) -> Option<Vec<Token>> {
    let b = src.as_bytes();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    let mut newline = false;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            newline = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if src[i..].starts_with("/*") {
            let end = src[i + 2..].find("*/")?;
            if src[i..i + 2 + end].contains('\n') {
                newline = true;
            }
            i += end + 4;
            continue;
        }
        let tok = if c == b'\'' || c == b'"' {
            let (text, next) = string(src, i, c)?;
            i = next;
            Tok::Str(text)
        } else if c == b'`' {
            let start = i;
            i += 1;
            let mut subst = false;
            let mut depth = 0usize;
            loop {
                let &ch = b.get(i)?;
                match ch {
                    b'\\' => i += 2,
                    b'`' if depth == 0 => {
                        i += 1;
                        break;
                    }
                    b'$' if b.get(i + 1) == Some(&b'{') && b.get(i + 2) != Some(&b'{') => {
                        subst = true;
                        depth += 1;
                        i += 2;
                    }
                    b'{' if depth > 0 => {
                        depth += 1;
                        i += 1;
                    }
                    b'}' if depth > 0 => {
                        depth -= 1;
                        i += 1;
                    }
                    _ => i += 1,
                }
            }
            let raw = &src[start + 1..i - 1];
            if subst {
                Tok::Template(raw.to_owned())
            } else {
                Tok::Str(raw.to_owned())
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                i += 1;
            }
            Tok::Num(src[start..i].to_owned())
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'$') || b[i] >= 0x80)
            {
                i += 1;
            }
            Tok::Ident(src[start..i].to_owned())
        } else if c == b'/' && regex_allowed(out.last()) {
            i += 1;
            let mut class = false;
            loop {
                let &ch = b.get(i)?;
                match ch {
                    b'\\' => i += 2,
                    b'[' => {
                        class = true;
                        i += 1;
                    }
                    b']' => {
                        class = false;
                        i += 1;
                    }
                    b'/' if !class => {
                        i += 1;
                        break;
                    }
                    b'\n' => return None,
                    _ => i += 1,
                }
            }
            while i < b.len() && b[i].is_ascii_alphabetic() {
                i += 1;
            }
            Tok::Regex
        } else {
            let p = PUNCTS.iter().find(|p| src[i..].starts_with(**p))?;
            i += p.len();
            Tok::Punct(p)
        };
        out.push(Token { tok, newline });
        newline = false;
    }
    Some(out)
}

fn string(src: &str, start: usize, quote: u8) -> Option<(String, usize)> {
    let b = src.as_bytes();
    let mut i = start + 1;
    let mut text = String::new();
    loop {
        let &ch = b.get(i)?;
        if ch == quote {
            return Some((text, i + 1));
        }
        if ch == b'\n' {
            return None;
        }
        if ch == b'\\' {
            let &next = b.get(i + 1)?;
            text.push(next as char);
            i += 2;
            continue;
        }
        let len = src[i..].chars().next()?.len_utf8();
        text.push_str(&src[i..i + len]);
        i += len;
    }
}

/// A `/` starts a regular expression where a value is expected.
fn regex_allowed(prev: Option<&Token>) -> bool {
    match prev.map(|t| &t.tok) {
        None => true,
        Some(Tok::Punct(p)) => !matches!(*p, ")" | "]" | "}"),
        Some(Tok::Ident(w)) => matches!(
            w.as_str(),
            "return"
                | "typeof"
                | "case"
                | "do"
                | "else"
                | "in"
                | "of"
                | "new"
                | "delete"
                | "void"
                | "throw"
                | "await"
                | "yield"
        ),
        _ => false,
    }
}

// --- Statements ---------------------------------------------------------

/// A statement, by token ranges.
#[derive(Clone, Debug)]
enum Stmt {
    If {
        cond: (usize, usize),
        then: Vec<Stmt>,
        otherwise: Option<Vec<Stmt>>,
    },
    Try {
        body: Vec<Stmt>,
        catch: Option<Vec<Stmt>>,
        finally: Option<Vec<Stmt>>,
    },
    Block(Vec<Stmt>),
    /// `async function NAME(PARAM) { BODY }`.
    Function {
        name: String,
        params: Vec<String>,
        body: Vec<Stmt>,
    },
    /// Anything else, as written (`for`, `while` and `switch` included).
    Simple(usize, usize),
}

/// What a name is bound to in the script.
#[derive(Clone, Debug)]
enum Bound {
    User(User),
    /// The pull request of the event (`pulls.get` with the event's number).
    PullRequest,
    /// An API answer, or its `data`, about a user's permission.
    PermissionAnswer(User, u8),
    Permission(User),
    /// True only when the user is authorised.
    Authorised(User),
    Repo,
    Owner,
    /// A string literal (`const org = 'x'`).
    Literal(String),
    /// A list of string literals.
    Literals(Vec<String>),
    /// `async (user) => { … }` that returns truthy only when `user` is authorised.
    Predicate,
}

/// Whose login a value is (a parameter stands for its caller's argument).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum User {
    Known(Checked),
    Param(String),
}

#[derive(Clone, Debug, Default)]
struct Env {
    names: BTreeMap<String, Bound>,
}

struct Reader<'a> {
    t: &'a [Token],
    owners: &'a [String],
}

impl Reader<'_> {
    fn ident(&self, i: usize) -> Option<&str> {
        match self.t.get(i).map(|t| &t.tok) {
            Some(Tok::Ident(s)) => Some(s),
            _ => None,
        }
    }

    fn punct(&self, i: usize, p: &str) -> bool {
        matches!(self.t.get(i).map(|t| &t.tok), Some(Tok::Punct(q)) if *q == p)
    }

    fn is_ident(&self, i: usize, w: &str) -> bool {
        self.ident(i) == Some(w)
    }

    /// The index after the group that opens at `open` (`(`, `[`, `{`).
    fn close(&self, open: usize, end: usize) -> Option<usize> {
        let mut depth = 0usize;
        let mut i = open;
        while i < end {
            if let Tok::Punct(p) = &self.t[i].tok {
                match *p {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        None
    }

    /// The statements of tokens `start..end`.
    fn block(&self, start: usize, end: usize) -> Option<Vec<Stmt>> {
        let mut out = Vec::new();
        let mut i = start;
        while i < end {
            if self.punct(i, ";") {
                i += 1;
                continue;
            }
            let (stmt, next) = self.statement(i, end)?;
            out.push(stmt);
            i = next;
        }
        Some(out)
    }

    /// A statement or a `{ … }` block as the body of `if`/`else`.
    fn body(&self, i: usize, end: usize) -> Option<(Vec<Stmt>, usize)> {
        if self.punct(i, "{") {
            let close = self.close(i, end)?;
            return Some((self.block(i + 1, close - 1)?, close));
        }
        let (stmt, next) = self.statement(i, end)?;
        Some((vec![stmt], next))
    }

    fn statement(&self, i: usize, end: usize) -> Option<(Stmt, usize)> {
        if self.punct(i, "{") {
            let close = self.close(i, end)?;
            return Some((Stmt::Block(self.block(i + 1, close - 1)?), close));
        }
        if self.is_ident(i, "if") && self.punct(i + 1, "(") {
            let close = self.close(i + 1, end)?;
            let (then, mut next) = self.body(close, end)?;
            let mut otherwise = None;
            if self.is_ident(next, "else") {
                let (e, after) = self.body(next + 1, end)?;
                otherwise = Some(e);
                next = after;
            }
            return Some((
                Stmt::If {
                    cond: (i + 2, close - 1),
                    then,
                    otherwise,
                },
                next,
            ));
        }
        if self.is_ident(i, "try") && self.punct(i + 1, "{") {
            let close = self.close(i + 1, end)?;
            let body = self.block(i + 2, close - 1)?;
            let mut next = close;
            let mut catch = None;
            let mut finally = None;
            if self.is_ident(next, "catch") {
                next += 1;
                if self.punct(next, "(") {
                    next = self.close(next, end)?;
                }
                if !self.punct(next, "{") {
                    return None;
                }
                let c = self.close(next, end)?;
                catch = Some(self.block(next + 1, c - 1)?);
                next = c;
            }
            if self.is_ident(next, "finally") && self.punct(next + 1, "{") {
                let c = self.close(next + 1, end)?;
                finally = Some(self.block(next + 2, c - 1)?);
                next = c;
            }
            return Some((
                Stmt::Try {
                    body,
                    catch,
                    finally,
                },
                next,
            ));
        }
        let f = if self.is_ident(i, "async") { i + 1 } else { i };
        if self.is_ident(f, "function") {
            if let Some(name) = self.ident(f + 1) {
                if self.punct(f + 2, "(") {
                    let close = self.close(f + 2, end)?;
                    let params = self.params(f + 3, close - 1);
                    if self.punct(close, "{") {
                        let c = self.close(close, end)?;
                        let body = self.block(close + 1, c - 1)?;
                        return Some((
                            Stmt::Function {
                                name: name.to_owned(),
                                params,
                                body,
                            },
                            c,
                        ));
                    }
                }
            }
        }
        // A control statement with a head and a body (`for (…) { … }`).
        if matches!(self.ident(i), Some("for" | "while" | "switch" | "with"))
            && self.punct(i + 1, "(")
        {
            let close = self.close(i + 1, end)?;
            let (_, next) = self.body(close, end)?;
            return Some((Stmt::Simple(i, next), next));
        }
        if self.is_ident(i, "do") {
            let (_, next) = self.body(i + 1, end)?;
            if self.is_ident(next, "while") && self.punct(next + 1, "(") {
                let close = self.close(next + 1, end)?;
                return Some((Stmt::Simple(i, close), close));
            }
            return None;
        }
        // A simple statement: up to `;`, or a line break where the
        // statement can end.
        let mut j = i;
        while j < end {
            if let Tok::Punct(p) = &self.t[j].tok {
                match *p {
                    "(" | "[" | "{" => {
                        j = self.close(j, end)?;
                        continue;
                    }
                    ";" => return Some((Stmt::Simple(i, j), j + 1)),
                    ")" | "]" | "}" => return None,
                    _ => {}
                }
            }
            j += 1;
            if j < end && self.t[j].newline && self.can_end(j - 1) && self.starts_statement(j) {
                return Some((Stmt::Simple(i, j), j));
            }
        }
        Some((Stmt::Simple(i, end), end))
    }

    /// Whether a statement may end after token `i`.
    fn can_end(&self, i: usize) -> bool {
        match &self.t[i].tok {
            Tok::Punct(p) => matches!(*p, ")" | "]" | "}" | "++" | "--"),
            _ => true,
        }
    }

    /// Whether token `i` can begin a new statement (not continue one).
    fn starts_statement(&self, i: usize) -> bool {
        match &self.t[i].tok {
            Tok::Punct(p) => matches!(*p, "{" | "!" | "++" | "--" | "~"),
            Tok::Ident(w) => !matches!(w.as_str(), "in" | "of" | "instanceof"),
            _ => true,
        }
    }

    fn params(&self, start: usize, end: usize) -> Vec<String> {
        (start..end)
            .filter_map(|k| self.ident(k).map(str::to_owned))
            .collect()
    }

    // --- Reading for gates ----------------------------------------------

    /// The users whose authorisation every path through `stmts` that does
    /// not fail the step has proved, in order, until a statement that may
    /// end the script without failing it.
    fn scan(&self, stmts: &[Stmt], env: &mut Env) -> BTreeSet<Checked> {
        let mut out = BTreeSet::new();
        for stmt in stmts {
            match stmt {
                Stmt::Function { name, params, body } => {
                    if params.len() == 1 && self.predicate(body, &params[0], env) {
                        env.names.insert(name.clone(), Bound::Predicate);
                    }
                    continue;
                }
                Stmt::Simple(a, b) => {
                    if let Some(user) = self.throwing_check(*a, *b, env) {
                        out.extend(known(&user));
                    }
                    self.bind(*a, *b, env);
                    if self.may_end(*a, *b) {
                        return out;
                    }
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    if self.fails(then) {
                        out.extend(self.failing_condition(cond.0, cond.1, env));
                    }
                    let ends = self.branch_may_end(then)
                        || otherwise.as_ref().is_some_and(|o| self.branch_may_end(o));
                    if ends {
                        return out;
                    }
                }
                Stmt::Try {
                    body,
                    catch,
                    finally,
                } => {
                    // Inside the `try`, a thrown error fails the step only
                    // when the `catch` fails it on every path.
                    let rethrows =
                        finally.is_none() && catch.as_ref().is_some_and(|c| self.fails(c));
                    if rethrows {
                        let mut inner = env.clone();
                        out.extend(self.scan(body, &mut inner));
                    }
                    let ends = self.stmts_may_end(body)
                        || catch.as_ref().is_some_and(|c| self.stmts_may_end(c))
                        || finally.as_ref().is_some_and(|f| self.stmts_may_end(f));
                    if ends {
                        return out;
                    }
                }
                Stmt::Block(inner) => {
                    let mut scoped = env.clone();
                    out.extend(self.scan(inner, &mut scoped));
                    if self.stmts_may_end(inner) {
                        return out;
                    }
                }
            }
        }
        out
    }

    /// True when the statements fail the step before anything can end
    /// the script otherwise: a `core.setFailed(…)`, `throw`, or
    /// `process.exit(N)` with `N` not 0, at their own level.
    fn fails(&self, stmts: &[Stmt]) -> bool {
        for stmt in stmts {
            match stmt {
                Stmt::Simple(a, b) => {
                    if self.is_failure(*a, *b) {
                        return true;
                    }
                    if self.may_end(*a, *b) {
                        return false;
                    }
                }
                Stmt::Block(inner) => {
                    if self.fails(inner) {
                        return true;
                    }
                    if self.stmts_may_end(inner) {
                        return false;
                    }
                }
                other => {
                    if self.stmts_may_end(std::slice::from_ref(other)) {
                        return false;
                    }
                }
            }
        }
        false
    }

    fn is_failure(&self, a: usize, b: usize) -> bool {
        if self.is_ident(a, "throw") {
            return true;
        }
        let setfailed = self.is_ident(a, "core")
            && self.punct(a + 1, ".")
            && self.is_ident(a + 2, "setFailed")
            && self.punct(a + 3, "(");
        let exit = self.is_ident(a, "process")
            && self.punct(a + 1, ".")
            && self.is_ident(a + 2, "exit")
            && self.punct(a + 3, "(")
            && matches!(self.t.get(a + 4).map(|t| &t.tok), Some(Tok::Num(n)) if fails_with(n))
            && self.punct(a + 5, ")");
        (setfailed || exit) && a + 4 <= b
    }

    /// Whether a branch may end the script without failing the step (one
    /// that fails before it returns ends it failed).
    fn branch_may_end(&self, stmts: &[Stmt]) -> bool {
        !self.fails(stmts) && self.stmts_may_end(stmts)
    }

    fn stmts_may_end(&self, stmts: &[Stmt]) -> bool {
        stmts.iter().any(|s| match s {
            Stmt::Simple(a, b) => self.may_end(*a, *b),
            Stmt::If {
                then, otherwise, ..
            } => {
                self.branch_may_end(then)
                    || otherwise.as_ref().is_some_and(|o| self.branch_may_end(o))
            }
            Stmt::Try {
                body,
                catch,
                finally,
            } => {
                self.stmts_may_end(body)
                    || catch.as_ref().is_some_and(|c| self.stmts_may_end(c))
                    || finally.as_ref().is_some_and(|f| self.stmts_may_end(f))
            }
            Stmt::Block(inner) => self.stmts_may_end(inner),
            Stmt::Function { .. } => false,
        })
    }

    /// True when tokens `a..b` may end the script without failing it: a
    /// `return` outside a nested function, or `process.exit`.
    fn may_end(&self, a: usize, b: usize) -> bool {
        let mut i = a;
        while i < b {
            match &self.t[i].tok {
                Tok::Ident(w) if w == "return" => return true,
                Tok::Ident(w)
                    if w == "process" && self.punct(i + 1, ".") && self.is_ident(i + 2, "exit") =>
                {
                    return !self.is_failure(i, b);
                }
                Tok::Punct("{") if self.function_body(i) => match self.close(i, b) {
                    Some(c) => {
                        i = c;
                        continue;
                    }
                    None => return true,
                },
                _ => {}
            }
            i += 1;
        }
        false
    }

    /// Whether the `{` at `i` opens a function's body.
    fn function_body(&self, i: usize) -> bool {
        if i == 0 {
            return false;
        }
        if self.punct(i - 1, "=>") {
            return true;
        }
        if !self.punct(i - 1, ")") {
            return false;
        }
        // Find the `(` that the `)` closes.
        let mut depth = 0usize;
        let mut k = i - 1;
        loop {
            if let Tok::Punct(p) = &self.t[k].tok {
                match *p {
                    ")" | "]" | "}" => depth += 1,
                    "(" | "[" | "{" => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            if k == 0 {
                return false;
            }
            k -= 1;
        }
        !(k > 0
            && matches!(
                self.ident(k - 1),
                Some("if" | "while" | "for" | "switch" | "catch" | "with")
            ))
    }

    /// `await <api>(…)` of a throwing API, as a whole statement (or the
    /// value of a declaration): the user it checks.
    fn throwing_check(&self, a: usize, b: usize, env: &Env) -> Option<User> {
        let mut i = a;
        if matches!(self.ident(i), Some("const" | "let" | "var")) {
            i += 1;
            i = if self.punct(i, "{") || self.punct(i, "[") {
                self.close(i, b)?
            } else {
                self.ident(i)?;
                i + 1
            };
            if !self.punct(i, "=") {
                return None;
            }
            i += 1;
        }
        let (api, user, next) = self.auth_call(i, b, env)?;
        if api.answer != Answer::Throws {
            return None;
        }
        // Only property reads may follow (`.data`), no `.catch(…)`.
        let mut k = next;
        while k < b {
            if self.punct(k, ".")
                && self
                    .ident(k + 1)
                    .is_some_and(|w| !matches!(w, "catch" | "then" | "finally"))
            {
                k += 2;
                continue;
            }
            return None;
        }
        Some(user)
    }

    /// `await github.rest.X.Y({…})` or `await github.request('GET …', {…})`
    /// at `i`: the API, the user it asks about, and the index after the call.
    fn auth_call(&self, i: usize, b: usize, env: &Env) -> Option<(&'static AuthApi, User, usize)> {
        if !self.is_ident(i, "await") {
            return None;
        }
        let mut k = i + 1;
        // A parenthesised call: `(await x(…)).data` is read by the caller.
        if !self.is_ident(k, "github") {
            return None;
        }
        k += 1;
        let mut path = Vec::new();
        while self.punct(k, ".") {
            path.push(self.ident(k + 1)?.to_owned());
            k += 2;
        }
        if !self.punct(k, "(") {
            return None;
        }
        let close = self.close(k, b)?;
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        let (api, args_at) = match path.as_slice() {
            ["request"] => {
                let Some(Tok::Str(route)) = self.t.get(k + 1).map(|t| &t.tok) else {
                    return None;
                };
                let route = route.trim();
                let route = route.strip_prefix("GET ").unwrap_or(route).trim();
                let api = AUTH_APIS
                    .iter()
                    .find(|a| !a.route.is_empty() && a.route == route)?;
                if !self.punct(k + 2, ",") {
                    return None;
                }
                (api, k + 3)
            }
            [.., ns, method] => {
                if path.len() > 3 || path.len() == 3 && path[0] != "rest" {
                    return None;
                }
                let name = format!("{ns}.{method}");
                (AUTH_APIS.iter().find(|a| a.method == name)?, k + 1)
            }
            _ => return None,
        };
        if !self.punct(args_at, "{") {
            return None;
        }
        let args_end = self.close(args_at, close)?;
        if args_end != close - 1 {
            return None;
        }
        let props = self.object(args_at, args_end, env)?;
        // Only the route's own parameters: `baseUrl`, `request` and the
        // like send the question elsewhere.
        if self.object_keys(args_at, args_end).iter().any(|k| {
            !matches!(
                k.as_str(),
                "org" | "owner" | "repo" | "username" | "team_slug" | "headers" | "..."
            )
        }) {
            return None;
        }
        let user = match props.get("username") {
            Some(Bound::User(u)) => u.clone(),
            _ => return None,
        };
        let about = match api.about {
            About::Org => {
                matches!(props.get("org"), Some(Bound::Owner))
                    || matches!(props.get("org"), Some(Bound::Literal(l)) if self.owners.iter().any(|o| o.eq_ignore_ascii_case(l)))
            }
            About::Repo => {
                let owner = matches!(props.get("owner"), Some(Bound::Owner))
                    || matches!(props.get("owner"), Some(Bound::Literal(l)) if self.owners.iter().any(|o| o.eq_ignore_ascii_case(l)));
                owner && matches!(props.get("repo"), Some(Bound::Repo))
            }
        };
        if !about {
            return None;
        }
        Some((api, user, close))
    }

    /// An object literal's properties that the reader knows (`{ org,
    /// username: x, ...context.repo }`); `None` when a key is repeated or
    /// computed (a later one would win).
    fn object(&self, open: usize, end: usize, env: &Env) -> Option<BTreeMap<String, Bound>> {
        let mut props: BTreeMap<String, Bound> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        let mut i = open + 1;
        let last = end - 1;
        while i < last {
            // One property: up to the next `,` at this level.
            let mut j = i;
            while j < last && !self.punct(j, ",") {
                j = if matches!(&self.t[j].tok, Tok::Punct("(" | "[" | "{")) {
                    self.close(j, last)?
                } else {
                    j + 1
                };
            }
            if self.punct(i, "...") {
                // `...context.repo`: owner and repo of this repository.
                if self.path_is(i + 1, j, &["context", "repo"]) {
                    for k in ["owner", "repo"] {
                        if !seen.insert(k.to_owned()) {
                            return None;
                        }
                    }
                    props.insert("owner".into(), Bound::Owner);
                    props.insert("repo".into(), Bound::Repo);
                } else {
                    return None;
                }
            } else {
                let key = match &self.t[i].tok {
                    Tok::Ident(k) | Tok::Str(k) => k.clone(),
                    _ => return None,
                };
                if !seen.insert(key.clone()) {
                    return None;
                }
                let value = if j == i + 1 {
                    env.names
                        .get(&key)
                        .cloned()
                        .or_else(|| self.value(i, j, env))
                } else if self.punct(i + 1, ":") {
                    self.value(i + 2, j, env)
                } else {
                    return None;
                };
                if let Some(v) = value {
                    props.insert(key, v);
                }
            }
            i = j + 1;
        }
        Some(props)
    }

    /// The keys an object literal names (`...` for a spread).
    fn object_keys(&self, open: usize, end: usize) -> Vec<String> {
        let mut keys = Vec::new();
        let mut i = open + 1;
        let mut at_key = true;
        while i < end - 1 {
            match &self.t[i].tok {
                Tok::Punct("(" | "[" | "{") => {
                    i = self.close(i, end).unwrap_or(end);
                    continue;
                }
                Tok::Punct(",") => at_key = true,
                Tok::Punct("...") if at_key => {
                    keys.push("...".to_owned());
                    at_key = false;
                }
                Tok::Ident(k) | Tok::Str(k) if at_key => {
                    keys.push(k.clone());
                    at_key = false;
                }
                _ if at_key => {
                    keys.push(String::new());
                    at_key = false;
                }
                _ => {}
            }
            i += 1;
        }
        keys
    }

    fn path_is(&self, a: usize, b: usize, path: &[&str]) -> bool {
        b - a == path.len() * 2 - 1
            && path.iter().enumerate().all(|(n, p)| {
                self.is_ident(a + 2 * n, p) && (n == 0 || self.punct(a + 2 * n - 1, "."))
            })
    }

    /// A dotted path at `a..b` (`context.payload.comment.user.login`).
    fn dotted(&self, a: usize, b: usize) -> Option<Vec<&str>> {
        let mut out = vec![self.ident(a)?];
        let mut i = a + 1;
        while i < b {
            if !(self.punct(i, ".") || self.punct(i, "?.")) {
                return None;
            }
            out.push(self.ident(i + 1)?);
            i += 2;
        }
        Some(out)
    }

    /// What the expression `a..b` is, where the reader knows.
    fn value(&self, a: usize, b: usize, env: &Env) -> Option<Bound> {
        if b == a + 1 {
            match &self.t[a].tok {
                Tok::Str(s) => {
                    return Some(
                        expression_user(s).map_or_else(|| Bound::Literal(s.clone()), Bound::User),
                    );
                }
                Tok::Ident(name) => return env.names.get(name).cloned(),
                _ => return None,
            }
        }
        if self.punct(a, "[") && self.close(a, b) == Some(b) {
            let mut items = Vec::new();
            let mut i = a + 1;
            while i < b - 1 {
                match &self.t[i].tok {
                    Tok::Str(s) => items.push(s.clone()),
                    _ => return None,
                }
                i += 1;
                if self.punct(i, ",") {
                    i += 1;
                }
            }
            return Some(Bound::Literals(items));
        }
        if let Some(path) = self.dotted(a, b) {
            return path_value(&path, env);
        }
        None
    }

    /// Records what a declaration binds (`const x = …`, `const { data } = …`).
    fn bind(&self, a: usize, b: usize, env: &mut Env) {
        let kind = match self.ident(a) {
            Some(k @ ("const" | "let" | "var")) => k,
            _ => return,
        };
        let rebindable = kind != "const";
        let target = a + 1;
        let after = if self.punct(target, "{") {
            match self.close(target, b) {
                Some(c) => c,
                None => return,
            }
        } else {
            target + 1
        };
        if !self.punct(after, "=") {
            return;
        }
        let rhs = (after + 1, b);
        // A name `let`/`var` binds may be assigned again: only a `const`
        // stands for its value.
        let bound = self.rhs(rhs.0, rhs.1, env);
        let names: Vec<(String, Vec<String>)> = if self.punct(target, "{") {
            self.pattern(target, after)
        } else if let Some(n) = self.ident(target) {
            vec![(n.to_owned(), Vec::new())]
        } else {
            Vec::new()
        };
        for (name, fields) in names {
            env.names.remove(&name);
            if rebindable && self.assigned_again(&name) {
                continue;
            }
            let Some(b) = bound.clone() else { continue };
            if let Some(v) = project(b, &fields) {
                env.names.insert(name, v);
            }
        }
    }

    /// A name assigned outside its declaration anywhere in the script.
    fn assigned_again(&self, name: &str) -> bool {
        let mut count = 0;
        for i in 0..self.t.len() {
            if self.is_ident(i, name)
                && matches!(&self.t.get(i + 1).map(|t| &t.tok), Some(Tok::Punct(p)) if p.ends_with('=') && !matches!(*p, "==" | "===" | "!=" | "!==" | "<=" | ">=" | "=>"))
            {
                count += 1;
            }
        }
        count > 1
    }

    /// `{ data }`, `{ data: pr }`, `{ data: { permission } }`: each bound
    /// name with the fields it reads.
    fn pattern(&self, open: usize, close: usize) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        let mut i = open + 1;
        let end = close - 1;
        while i < end {
            let Some(key) = self.ident(i) else {
                return Vec::new();
            };
            if self.punct(i + 1, ":") {
                if self.punct(i + 2, "{") {
                    let Some(c) = self.close(i + 2, end) else {
                        return Vec::new();
                    };
                    for (n, mut f) in self.pattern(i + 2, c) {
                        f.insert(0, key.to_owned());
                        out.push((n, f));
                    }
                    i = c;
                } else if let Some(n) = self.ident(i + 2) {
                    out.push((n.to_owned(), vec![key.to_owned()]));
                    i += 3;
                } else {
                    return Vec::new();
                }
            } else {
                out.push((key.to_owned(), vec![key.to_owned()]));
                i += 1;
            }
            if self.punct(i, ",") {
                i += 1;
            } else if i < end {
                return Vec::new();
            }
        }
        out
    }

    /// The value of a declaration's right-hand side.
    fn rhs(&self, a: usize, b: usize, env: &Env) -> Option<Bound> {
        // A predicate helper: `async (user) => { … }`.
        if self.is_ident(a, "async") {
            let (params, arrow) = if self.punct(a + 1, "(") {
                let c = self.close(a + 1, b)?;
                (self.params(a + 2, c - 1), c)
            } else {
                (vec![self.ident(a + 1)?.to_owned()], a + 2)
            };
            if params.len() == 1
                && self.punct(arrow, "=>")
                && self.punct(arrow + 1, "{")
                && self.close(arrow + 1, b) == Some(b)
            {
                let body = self.block(arrow + 2, b - 1)?;
                return self
                    .predicate(&body, &params[0], env)
                    .then_some(Bound::Predicate);
            }
            return None;
        }
        if let Some((api, user, next)) = self.auth_call(a, b, env) {
            if next != b {
                return None;
            }
            return Some(match api.answer {
                Answer::Throws => Bound::Authorised(user),
                Answer::Permission => Bound::PermissionAnswer(user, 0),
            });
        }
        // `await github.rest.pulls.get({ …, pull_number: <the event's> })`.
        if self.is_ident(a, "await")
            && self.path_is(a + 1, a + 8, &["github", "rest", "pulls", "get"])
            && self.punct(a + 8, "(")
        {
            let close = self.close(a + 8, b)?;
            if close != b || !self.punct(a + 9, "{") {
                return None;
            }
            let props = self.object(a + 9, close - 1, env)?;
            let event_number =
                matches!(props.get("pull_number"), Some(Bound::Literal(l)) if l == "event-number");
            let here = matches!(props.get("owner"), Some(Bound::Owner))
                && matches!(props.get("repo"), Some(Bound::Repo));
            return (event_number && here).then_some(Bound::PullRequest);
        }
        // `await helper(user)`.
        if self.is_ident(a, "await") {
            if let (Some(name), true) = (self.ident(a + 1), self.punct(a + 2, "(")) {
                if matches!(env.names.get(name), Some(Bound::Predicate))
                    && self.close(a + 2, b) == Some(b)
                {
                    if let Some(Bound::User(u)) = self.value(a + 3, b - 1, env) {
                        return Some(Bound::Authorised(u));
                    }
                }
            }
        }
        self.value(a, b, env)
    }

    /// Whether `body` (of a function of `param`) returns a truthy value
    /// only after an authorisation of `param` succeeded.
    fn predicate(&self, body: &[Stmt], param: &str, outer: &Env) -> bool {
        let mut env = outer.clone();
        env.names
            .insert(param.to_owned(), Bound::User(User::Param(param.to_owned())));
        self.predicate_in(body, &mut env, false)
    }

    fn predicate_in(&self, body: &[Stmt], env: &mut Env, mut authorised: bool) -> bool {
        for stmt in body {
            match stmt {
                Stmt::Simple(a, b) => {
                    if self.is_ident(*a, "return") {
                        if authorised || self.falsy(*a + 1, *b) {
                            continue;
                        }
                        if self.permission_return(*a + 1, *b, env) {
                            continue;
                        }
                        return false;
                    }
                    if self.may_end(*a, *b) {
                        return false;
                    }
                    if let Some(User::Param(_)) = self.throwing_check(*a, *b, env) {
                        authorised = true;
                    }
                    self.bind(*a, *b, env);
                }
                Stmt::Try {
                    body,
                    catch,
                    finally: None,
                } => {
                    let mut inner = env.clone();
                    if !self.predicate_in(body, &mut inner, authorised) {
                        return false;
                    }
                    if let Some(c) = catch {
                        if !self.predicate_in(c, &mut env.clone(), authorised) {
                            return false;
                        }
                    }
                }
                _ => return false,
            }
        }
        true
    }

    fn falsy(&self, a: usize, b: usize) -> bool {
        b == a
            || b == a + 1
                && match &self.t[a].tok {
                    Tok::Ident(w) => matches!(w.as_str(), "false" | "null" | "undefined"),
                    Tok::Num(n) => n == "0",
                    Tok::Str(s) => s.is_empty(),
                    _ => false,
                }
    }

    /// `return <condition on the permission>` truthy only for write access.
    fn permission_return(&self, a: usize, b: usize, env: &Env) -> bool {
        let Some(atoms) = self.atoms(a, b, env) else {
            return false;
        };
        if atoms.len() != 1 || !matches!(atoms[0].1, Atom::Permission) {
            return false;
        }
        (0..PERMISSIONS.len()).all(|v| {
            let truthy = self.truth(a, b, env, &atoms, &[v]);
            match truthy {
                Some(true) => WRITE_PERMISSIONS.contains(&PERMISSIONS[v]),
                Some(false) => true,
                None => false,
            }
        })
    }

    /// The users a condition proves authorised when it is false: the
    /// condition of an `if` whose body fails the step.
    fn failing_condition(&self, a: usize, b: usize, env: &Env) -> BTreeSet<Checked> {
        let Some(atoms) = self.atoms(a, b, env) else {
            return BTreeSet::new();
        };
        if atoms.is_empty() || atoms.len() > 4 {
            return BTreeSet::new();
        }
        // Every assignment of the atoms under which the condition is false
        // (the step goes on): an atom authorised in all of them is proved.
        let sizes: Vec<usize> = atoms
            .iter()
            .map(|(_, k)| match k {
                Atom::Authorised => 2,
                Atom::Permission => PERMISSIONS.len(),
            })
            .collect();
        let mut proved: Vec<bool> = vec![true; atoms.len()];
        let mut any_pass = false;
        let mut values = vec![0usize; atoms.len()];
        loop {
            match self.truth(a, b, env, &atoms, &values) {
                None => return BTreeSet::new(),
                Some(false) => {
                    any_pass = true;
                    for (n, (_, kind)) in atoms.iter().enumerate() {
                        let ok = match kind {
                            Atom::Authorised => values[n] == 1,
                            Atom::Permission => WRITE_PERMISSIONS.contains(&PERMISSIONS[values[n]]),
                        };
                        if !ok {
                            proved[n] = false;
                        }
                    }
                }
                Some(true) => {}
            }
            // Next assignment.
            let mut n = 0;
            loop {
                if n == values.len() {
                    let mut out = BTreeSet::new();
                    if any_pass {
                        for (k, (user, _)) in atoms.iter().enumerate() {
                            if proved[k] {
                                out.extend(known(user));
                            }
                        }
                    }
                    return out;
                }
                values[n] += 1;
                if values[n] < sizes[n] {
                    break;
                }
                values[n] = 0;
                n += 1;
            }
        }
    }

    /// The atoms of a condition: each name or call that says whether a
    /// user is authorised, or what permission they have. `None` when the
    /// condition has anything else that is not a literal.
    fn atoms(&self, a: usize, b: usize, env: &Env) -> Option<Vec<(User, Atom)>> {
        let mut atoms: Vec<(User, Atom)> = Vec::new();
        let mut i = a;
        while i < b {
            let (atom, next) = self.operand(i, b, env)?;
            if let Some(atom) = atom {
                if !atoms.contains(&atom) {
                    atoms.push(atom);
                }
            }
            i = next;
        }
        Some(atoms)
    }

    /// One operand or operator at `i`: the atom it is, if any, and the
    /// index after it. `None` for anything the reader does not know.
    fn operand(&self, i: usize, b: usize, env: &Env) -> Option<(Option<(User, Atom)>, usize)> {
        match &self.t[i].tok {
            Tok::Punct("!" | "(" | ")" | "&&" | "||" | "===" | "!==" | "==" | "!=") => {
                Some((None, i + 1))
            }
            Tok::Str(_) => Some((None, i + 1)),
            Tok::Ident(w) if matches!(w.as_str(), "true" | "false") => Some((None, i + 1)),
            Tok::Punct("[") => {
                // `['admin', 'write'].includes(<permission>)`.
                let close = self.close(i, b)?;
                let Some(Bound::Literals(_)) = self.value(i, close, env) else {
                    return None;
                };
                self.includes(close, b, env)
            }
            Tok::Ident(w) if w == "await" => {
                let name = self.ident(i + 1)?;
                if !matches!(env.names.get(name), Some(Bound::Predicate)) || !self.punct(i + 2, "(")
                {
                    return None;
                }
                let close = self.close(i + 2, b)?;
                match self.value(i + 3, close - 1, env) {
                    Some(Bound::User(u)) => Some((Some((u, Atom::Authorised)), close)),
                    _ => None,
                }
            }
            Tok::Ident(_) => {
                // A dotted name, possibly `.includes(…)` of a list of literals.
                let mut j = i + 1;
                while self.punct(j, ".") && self.ident(j + 1).is_some_and(|w| w != "includes") {
                    j += 2;
                }
                let value = self.value(i, j, env)?;
                match value {
                    Bound::Authorised(u) => Some((Some((u, Atom::Authorised)), j)),
                    Bound::Permission(u) => Some((Some((u, Atom::Permission)), j)),
                    Bound::Literals(_) => self.includes(j, b, env),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `.includes(<permission>)` at `i`.
    fn includes(&self, i: usize, b: usize, env: &Env) -> Option<(Option<(User, Atom)>, usize)> {
        if !(self.punct(i, ".") && self.is_ident(i + 1, "includes") && self.punct(i + 2, "(")) {
            return None;
        }
        let close = self.close(i + 2, b)?;
        match self.value(i + 3, close - 1, env) {
            Some(Bound::Permission(u)) => Some((Some((u, Atom::Permission)), close)),
            _ => None,
        }
    }

    /// The truth of the condition `a..b` with each atom given a value
    /// (`values[n]`: 0/1 for an authorisation, an index of [`PERMISSIONS`]).
    fn truth(
        &self,
        a: usize,
        b: usize,
        env: &Env,
        atoms: &[(User, Atom)],
        values: &[usize],
    ) -> Option<bool> {
        let mut p = Pratt {
            r: self,
            env,
            atoms,
            values,
            i: a,
            end: b,
        };
        let v = p.or()?;
        (p.i == b).then(|| v.truthy())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Atom {
    Authorised,
    Permission,
}

/// A value while a condition is evaluated.
#[derive(Clone, Debug, PartialEq)]
enum Cv {
    Bool(bool),
    Str(String),
}

impl Cv {
    fn truthy(&self) -> bool {
        match self {
            Cv::Bool(b) => *b,
            Cv::Str(s) => !s.is_empty(),
        }
    }
}

/// Evaluates a condition of `!`, `&&`, `||`, `===`/`!==`, literals and
/// atoms, as JavaScript does.
struct Pratt<'r, 'a> {
    r: &'r Reader<'a>,
    env: &'r Env,
    atoms: &'r [(User, Atom)],
    values: &'r [usize],
    i: usize,
    end: usize,
}

impl Pratt<'_, '_> {
    fn or(&mut self) -> Option<Cv> {
        let mut left = self.and()?;
        while self.i < self.end && self.r.punct(self.i, "||") {
            self.i += 1;
            let right = self.and()?;
            left = if left.truthy() { left } else { right };
        }
        Some(left)
    }

    fn and(&mut self) -> Option<Cv> {
        let mut left = self.eq()?;
        while self.i < self.end && self.r.punct(self.i, "&&") {
            self.i += 1;
            let right = self.eq()?;
            left = if left.truthy() { right } else { left };
        }
        Some(left)
    }

    fn eq(&mut self) -> Option<Cv> {
        let left = self.unary()?;
        for (op, negate) in [("===", false), ("==", false), ("!==", true), ("!=", true)] {
            if self.i < self.end && self.r.punct(self.i, op) {
                self.i += 1;
                let right = self.unary()?;
                return Some(Cv::Bool((left == right) != negate));
            }
        }
        Some(left)
    }

    fn unary(&mut self) -> Option<Cv> {
        if self.r.punct(self.i, "!") {
            self.i += 1;
            return Some(Cv::Bool(!self.unary()?.truthy()));
        }
        self.primary()
    }

    fn primary(&mut self) -> Option<Cv> {
        if self.i >= self.end {
            return None;
        }
        if self.r.punct(self.i, "(") {
            let close = self.r.close(self.i, self.end)?;
            let mut inner = Pratt {
                end: close - 1,
                i: self.i + 1,
                ..*self
            };
            let v = inner.or()?;
            if inner.i != close - 1 {
                return None;
            }
            self.i = close;
            return Some(v);
        }
        match &self.r.t[self.i].tok {
            Tok::Str(s) => {
                self.i += 1;
                return Some(Cv::Str(s.clone()));
            }
            Tok::Ident(w) if w == "true" || w == "false" => {
                self.i += 1;
                return Some(Cv::Bool(w == "true"));
            }
            _ => {}
        }
        let (atom, next) = self.r.operand(self.i, self.end, self.env)?;
        let start = self.i;
        self.i = next;
        let atom = atom?;
        let n = self.atoms.iter().position(|a| *a == atom)?;
        let v = self.values[n];
        // `[…].includes(x)` or `list.includes(x)`: membership of the value.
        let is_includes = (start..next).any(|k| self.r.is_ident(k, "includes"));
        if is_includes {
            let list_end = (start..next)
                .find(|&k| self.r.punct(k, ".") && self.r.is_ident(k + 1, "includes"))?;
            let Some(Bound::Literals(items)) = self.r.value(start, list_end, self.env) else {
                return None;
            };
            return Some(Cv::Bool(items.iter().any(|i| i == PERMISSIONS[v])));
        }
        Some(match atom.1 {
            Atom::Authorised => Cv::Bool(v == 1),
            Atom::Permission => Cv::Str(PERMISSIONS[v].to_owned()),
        })
    }
}

/// The checked users a user stands for (a parameter stands for none).
fn known(user: &User) -> Vec<Checked> {
    match user {
        User::Known(c) => vec![*c],
        User::Param(_) => Vec::new(),
    }
}

/// The user a string is when it is one `${{ }}` expression naming one.
fn expression_user(s: &str) -> Option<User> {
    let inner = expression_path(s)?;
    let path: Vec<&str> = inner.split('.').collect();
    match path.as_slice() {
        ["github", "actor"] | ["github", "event", "sender", "login"] => {
            Some(User::Known(Checked::Actor))
        }
        ["github", "event", "comment", "user", "login"] => Some(User::Known(Checked::Commenter)),
        ["github", "event", "pull_request" | "issue", "user", "login"] => {
            Some(User::Known(Checked::PrAuthor))
        }
        [
            "github",
            "event",
            "client_payload",
            "github",
            "payload",
            "comment",
            "user",
            "login",
        ] => Some(User::Known(Checked::PayloadCommenter)),
        _ => None,
    }
}

/// What a dotted path names (`context.actor`, `pr.user.login`).
fn path_value(path: &[&str], env: &Env) -> Option<Bound> {
    Some(match path {
        ["context", "actor"]
        | ["context", "payload", "sender", "login"]
        | ["process", "env", "GITHUB_ACTOR"] => Bound::User(User::Known(Checked::Actor)),
        ["context", "payload", "comment", "user", "login"] => {
            Bound::User(User::Known(Checked::Commenter))
        }
        [
            "context",
            "payload",
            "pull_request" | "issue",
            "user",
            "login",
        ] => Bound::User(User::Known(Checked::PrAuthor)),
        [
            "context",
            "payload",
            "client_payload",
            "github",
            "payload",
            "comment",
            "user",
            "login",
        ] => Bound::User(User::Known(Checked::PayloadCommenter)),
        ["context", "repo", "owner"] | ["context", "payload", "repository", "owner", "login"] => {
            Bound::Owner
        }
        ["context", "repo", "repo"] | ["context", "payload", "repository", "name"] => Bound::Repo,
        ["context", "issue", "number"]
        | ["context", "payload", "issue" | "pull_request", "number"]
        | ["context", "payload", "number"] => Bound::Literal("event-number".to_owned()),
        [name, rest @ ..] => {
            let bound = env.names.get(*name)?.clone();
            project(
                bound,
                &rest.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
            )?
        }
        [] => return None,
    })
}

/// A bound value's field (`pr.user.login`, `answer.data.permission`).
fn project(bound: Bound, fields: &[String]) -> Option<Bound> {
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    match (bound, fields.as_slice()) {
        (b, []) => Some(b),
        (Bound::PullRequest, ["data"]) => Some(Bound::PullRequest),
        (Bound::PullRequest, ["data", "user", "login"] | ["user", "login"]) => {
            Some(Bound::User(User::Known(Checked::PrAuthor)))
        }
        (Bound::PermissionAnswer(u, 0), ["data"]) => Some(Bound::PermissionAnswer(u, 1)),
        (Bound::PermissionAnswer(u, 0), ["data", "permission"])
        | (Bound::PermissionAnswer(u, 1), ["permission"]) => Some(Bound::Permission(u)),
        _ => None,
    }
}

/// What a shell gate's check reads from the environment (who acts, on which
/// repository, through which host): an `env:` setting one leaves no gate.
pub(super) const SHELL_GATE_ENV: &[&str] = &[
    "GITHUB_ACTOR",
    "GITHUB_REPOSITORY",
    "GITHUB_REPOSITORY_OWNER",
    "GH_HOST",
    "GH_REPO",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::workflow::Workflow;

    /// vllm-ascend's `pr_nightly_command.yml` check, its arm narrowed to
    /// the roles that can push (as written it admits `triage`, which is no
    /// gate: `a_check_that_admits_triage_is_no_gate`).
    const REAL: &str = r#"ROLE_NAME=$(gh api "repos/$REPO/collaborators/$ACTOR/permission" --jq '.role_name')
case "$ROLE_NAME" in
  write|maintain|admin)
    echo "User $ACTOR has $ROLE_NAME role, authorized."
    echo "is_authorized=true" >> "$GITHUB_OUTPUT"
    ;;
  *)
    echo "::error::User $ACTOR does not have triage+ permission and is not authorized to trigger nightly tests."
    echo "is_authorized=false" >> "$GITHUB_OUTPUT"
    ;;
esac
"#;

    const PAYLOAD_ENV: &str = "ACTOR: ${{ github.event.client_payload.github.payload.comment.user.login }}\n          REPO: ${{ github.event.client_payload.github.payload.repository.full_name }}";

    /// The flag gates of one `run:` step with `env` and `extra` keys.
    fn flags_with(script: &str, env: &str, extra: &str, shell: Option<&str>) -> Vec<FlagGate> {
        let run: String = script.lines().map(|l| format!("          {l}\n")).collect();
        let text = format!(
            "on: repository_dispatch\njobs:\n  authorize:\n    runs-on: ubuntu-latest\n    steps:\n      - id: auth\n{extra}        env:\n          GH_TOKEN: ${{{{ secrets.PAT }}}}\n          {env}\n        run: |\n{run}"
        );
        let wf = Workflow::parse(".github/workflows/n.yml", &text).unwrap();
        let step = &wf.jobs[0].steps[0];
        flag_gates(step, &["acme".to_owned()], shell, false, false)
    }

    fn flags(script: &str) -> Vec<FlagGate> {
        flags_with(script, PAYLOAD_ENV, "", None)
    }

    fn gate(checked: Checked, false_otherwise: bool) -> Vec<FlagGate> {
        vec![FlagGate {
            output: "is_authorized".to_owned(),
            gate: Gate {
                checked: [checked].into(),
            },
            false_otherwise,
        }]
    }

    #[test]
    fn a_role_written_as_an_output_flag_is_a_gate_on_the_user_it_asks_about() {
        assert_eq!(flags(REAL), gate(Checked::PayloadCommenter, true));
        // This repository and the run's actor; `bash -el {0}`.
        let env = "ACTOR: ${{ github.actor }}\n          REPO: ${{ github.repository }}";
        assert_eq!(
            flags_with(REAL, env, "", Some("bash -el {0}")),
            gate(Checked::Actor, true)
        );
        // The legacy `permission` field, compared with the write levels.
        let legacy = REAL
            .replace(".role_name", ".permission")
            .replace("write|maintain|admin", "write|admin");
        assert_eq!(flags(&legacy), gate(Checked::PayloadCommenter, true));
        // Without a `*)` arm writing `false`, an unmatched answer writes
        // nothing: still a gate for `== 'true'` and `!= 'true'`, not for
        // `== 'false'`.
        let no_default = REAL.replace("  *)", "  read|none)");
        assert_eq!(flags(&no_default), gate(Checked::PayloadCommenter, false));
        let exit_zero = REAL.replace("esac\n", "esac\nexit 0\n");
        assert_eq!(flags(&exit_zero), gate(Checked::PayloadCommenter, false));
        let silent_arm = REAL.replace(
            "    echo \"is_authorized=false\" >> \"$GITHUB_OUTPUT\"\n",
            "    true && echo \"is_authorized=false\" >> \"$GITHUB_OUTPUT\"\n",
        );
        assert_eq!(flags(&silent_arm), gate(Checked::PayloadCommenter, false));
    }

    /// Each way the flag could say `true` for someone the API did not
    /// authorise, or the check could be about someone or somewhere else:
    /// no gate.
    #[test]
    fn a_flag_that_may_be_true_on_another_path_is_no_gate() {
        let none = |what: &str, script: &str| {
            assert_eq!(flags(script), [], "{what}");
        };
        none(
            "true before the check",
            &format!("echo \"is_authorized=true\" >> \"$GITHUB_OUTPUT\"\n{REAL}"),
        );
        none(
            "true after it",
            &format!("{REAL}echo \"is_authorized=true\" >> \"$GITHUB_OUTPUT\"\n"),
        );
        none(
            "true on the `*)` arm",
            &REAL.replace("is_authorized=false", "is_authorized=TRUE"),
        );
        none(
            "an arm with a role anyone has",
            &REAL.replace("write|maintain", "read|write|maintain"),
        );
        none("a glob", &REAL.replace("write|maintain|admin", "*write*"));
        none(
            "vllm-ascend's check as written: `triage` cannot push",
            &REAL.replace("write|maintain|admin", "triage|write|maintain|admin"),
        );
        none(
            "`triage` alone",
            &REAL.replace("write|maintain|admin", "triage"),
        );
        none(
            "`>&FILE` into the output (bash's `&>`)",
            &format!("{REAL}echo \"is_authorized=true\" >&\"$GITHUB_OUTPUT\"\n"),
        );
        none(
            "the runner's own file-command file",
            &format!(
                "{REAL}echo \"is_authorized=true\" >> /home/runner/work/_temp/_runner_file_commands/set_output_*\n"
            ),
        );
        none(
            "a workflow command in upper case",
            &format!("{REAL}echo \"::SET-OUTPUT name=is_authorized::true\"\n"),
        );
        none(
            "the flag's name in another case",
            &format!("{REAL}echo \"IS_AUTHORIZED=true\" >> \"$GITHUB_OUTPUT\"\n"),
        );
        none(
            "a here-document that runs a command",
            &format!("{REAL}: <<EOF\n$(echo \"is_authorized=true\" >> \"$GITHUB_OUTPUT\")\nEOF\n"),
        );
        none(
            "`triage` in the legacy field, which says `read` for it",
            &REAL
                .replace(".role_name", ".permission")
                .replace("write|maintain|admin", "triage|write|maintain|admin"),
        );
        none(
            "`;&` falls from the `read` arm into the authorised one",
            &REAL.replace(
                "case \"$ROLE_NAME\" in\n",
                "case \"$ROLE_NAME\" in\n  read)\n    echo reader\n    ;&\n",
            ),
        );
        none(
            "a second assignment of the answer",
            &REAL.replace("case", "false || ROLE_NAME=admin\ncase"),
        );
        none(
            "the answer read in a subshell",
            &REAL
                .replacen("ROLE_NAME=$(gh", "( ROLE_NAME=$(gh", 1)
                .replacen("'.role_name')\n", "'.role_name') )\n", 1),
        );
        none(
            "a default that assigns",
            &REAL.replace("case \"$ROLE_NAME\"", "case \"${ROLE_NAME:=admin}\""),
        );
        none(
            "no `--jq` (the answer is JSON)",
            &REAL.replace(" --jq '.role_name'", ""),
        );
        none(
            "the answer's call may fail into a default",
            &REAL.replace("--jq '.role_name')", "--jq '.role_name' || echo admin)"),
        );
        none("the user reassigned", &format!("ACTOR=someone\n{REAL}"));
        none(
            "another program (which may write the output file)",
            &format!("{REAL}python3 finish.py\n"),
        );
        none(
            "a value GitHub substitutes",
            &REAL.replace(
                "authorized.\"",
                "authorized ${{ github.event.comment.body }}\"",
            ),
        );
        none(
            "a line of someone's text to the log (`::set-output`)",
            &REAL.replace("authorized.\"", "authorized $BODY\""),
        );
        none(
            "a non-literal output line",
            &REAL.replace("is_authorized=false", "is_authorized=$VERDICT"),
        );
        none(
            "the output file by another name",
            &format!("OUT=\"$GITHUB_OUTPUT\"\necho \"is_authorized=true\" >> \"$OUT\"\n{REAL}"),
        );
        none(
            "a function (which may shadow `echo`)",
            &format!("echo() {{ builtin echo \"$@\"; }}\n{REAL}"),
        );
        // The user from a source the reader does not know, another
        // repository, the payload's repository with the run's actor.
        for env in [
            "ACTOR: ${{ github.event.client_payload.user }}\n          REPO: ${{ github.repository }}",
            "ACTOR: ${{ github.actor }}\n          REPO: acme/other",
            "ACTOR: ${{ github.actor }}\n          REPO: ${{ github.event.client_payload.repository }}",
            "ACTOR: ${{ github.actor }}\n          REPO: ${{ github.event.client_payload.github.payload.repository.full_name }}",
            "ACTOR: ${{ github.actor }}\n          REPO: ${{ github.repository }}\n          GH_HOST: example.com",
        ] {
            assert_eq!(flags_with(REAL, env, "", None), [], "{env}");
        }
        // A step that may go on after an error; a shell that is not sh.
        assert_eq!(
            flags_with(REAL, PAYLOAD_ENV, "        continue-on-error: true\n", None),
            []
        );
        assert_eq!(flags_with(REAL, PAYLOAD_ENV, "", Some("pwsh")), []);
        assert_eq!(flags_with(REAL, PAYLOAD_ENV, "", Some("python {0}")), []);
    }

    #[test]
    fn a_step_that_always_fails_is_one_unconditional_failing_exit() {
        let fails = |step: &str| {
            let text =
                format!("on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n{step}");
            let wf = Workflow::parse(".github/workflows/n.yml", &text).unwrap();
            always_fails(&wf.jobs[0].steps[0], None, false)
        };
        assert!(fails("      - run: exit 1\n"));
        assert!(fails(
            "      - uses: actions/github-script@v7\n        with:\n          script: core.setFailed('no')\n"
        ));
        for step in [
            "      - run: exit 0\n",
            "      - run: exit\n",
            "      - run: exit 1 &\n",
            "      - run: exit $CODE\n",
            "      - run: \"[ -n \\\"$X\\\" ] && exit 1\"\n",
            "      - run: exit ${{ inputs.code }}\n",
            "      - uses: actions/github-script@v7\n        with:\n          script: \"core.setFailed('no'); process.exitCode = 0\"\n",
        ] {
            assert!(!fails(step), "{step}");
        }
    }
}

#[cfg(test)]
mod if_gate_tests {
    use super::*;
    use crate::contracts::workflow::Workflow;

    /// meilisearch's `bench-pr.yml` check, as written.
    const REAL: &str = r#"PR_REPOSITORY=$(gh api /repos/"$REPOSITORY"/pulls/"$PR_ID" --jq .head.repo.full_name)
if $(gh api /repos/"$REPOSITORY"/collaborators/"$PR_AUTHOR"/permission --jq .user.permissions.push)
then
  echo "::notice title=Authentication success::PR author authenticated"
else
  echo "::error title=Authentication error::PR author doesn't have push permission on this repository"
  exit 1
fi
if $(gh api /repos/"$REPOSITORY"/collaborators/"$COMMENT_AUTHOR"/permission --jq .user.permissions.push)
then
  echo "::notice title=Authentication success::Comment author authenticated"
else
  echo "::error title=Authentication error::Comment author doesn't have push permission on this repository"
  exit 1
fi
if [ "$PR_REPOSITORY" = "$REPOSITORY" ]
then
  echo "::notice title=Authentication success::PR started from main repository"
else
  echo "::error title=Authentication error::PR started from a fork"
  exit 1
fi
"#;

    /// The users the `run:` gate of one step checks.
    fn checked(script: &str) -> BTreeSet<Checked> {
        let run: String = script.lines().map(|l| format!("          {l}\n")).collect();
        let text = format!(
            "on: issue_comment\njobs:\n  bench:\n    runs-on: ubuntu-latest\n    steps:\n      - id: permission\n        env:\n          PR_AUTHOR: ${{{{github.event.issue.user.login }}}}\n          COMMENT_AUTHOR: ${{{{github.event.comment.user.login }}}}\n          REPOSITORY: ${{{{github.repository}}}}\n          PR_ID: ${{{{github.event.issue.number}}}}\n        run: |\n{run}"
        );
        let wf = Workflow::parse(".github/workflows/b.yml", &text).unwrap();
        step_gate(&wf.jobs[0].steps[0], &["acme".to_owned()], None, false)
            .map(|g| g.checked)
            .unwrap_or_default()
    }

    #[test]
    fn an_answer_run_as_the_condition_of_an_if_whose_else_exits_is_a_gate() {
        assert_eq!(
            checked(REAL),
            BTreeSet::from([Checked::Commenter, Checked::PrAuthor])
        );
    }

    #[test]
    fn only_statuses_1_to_255_fail_and_only_plain_bash_options_are_read() {
        for n in ["1", "2", "255"] {
            assert!(fails_with(n), "{n}");
        }
        for n in ["0", "256", "512", "-1", "0x1", "+1", "1.0", ""] {
            assert!(!fails_with(n), "{n}");
        }
        for shell in [
            "bash",
            "sh",
            "bash -e {0}",
            "bash -el {0}",
            "bash --noprofile --norc -eo pipefail {0}",
            "bash -x {0}",
        ] {
            assert!(posix_shell(Some(shell), false), "{shell}");
        }
        for shell in [
            "bash -n {0}",
            "bash +e {0}",
            "bash -c {0}",
            "bash -en {0}",
            "bash -o noexec {0}",
            "bash -eo {0}",
            "bash -s {0}",
            "bash -i {0}",
            "bash {0} -n",
            "bash --posix {0}",
            "bash -e",
            "pwsh",
        ] {
            assert!(!posix_shell(Some(shell), false), "{shell}");
        }
        assert!(safe_set(&["-euo".to_owned(), "pipefail".to_owned()]));
        assert!(!safe_set(&["+e".to_owned()]));
        assert!(!safe_set(&["-o".to_owned(), "noexec".to_owned()]));
        assert!(!safe_set(&["--".to_owned(), "x".to_owned()]));
    }

    /// A github-script step that undoes `core.setFailed` (or replaces it,
    /// or ends the script with 0) neither always fails nor gates.
    #[test]
    fn a_github_script_that_may_pass_is_neither_failing_nor_a_gate() {
        let step = |script: &str| {
            let text = format!(
                "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/github-script@v7\n        with:\n          script: {script:?}\n"
            );
            let wf = Workflow::parse(".github/workflows/n.yml", &text).unwrap();
            wf.jobs[0].steps[0].clone()
        };
        for script in [
            "core.setFailed('no'); process.exit(0)",
            "core.setFailed('no'); process.exit()",
            "core.setFailed('no'); process['exitCode'] = 0",
            "core.setFailed('no'); const p = process; p.exitCode = 0",
            "core.setFailed = () => {}; core.setFailed('no')",
            "core['setFailed'] = () => {}; core.setFailed('no')",
            "core.setFailed.call = 1; core.setFailed('no')",
            "Object.defineProperty(core, 'setFailed', { value: () => {} }); core.setFailed('no')",
            "globalThis.core = {}; core.setFailed('no')",
            "process.exit(256)",
        ] {
            assert!(!always_fails(&step(script), None, false), "{script}");
        }
        for script in [
            "core.setFailed('no')",
            "process.exit(1)",
            "throw new Error('no')",
        ] {
            assert!(always_fails(&step(script), None, false), "{script}");
        }
        // The older step gate reads the same names.
        let gate = "const { data } = await github.rest.repos.getCollaboratorPermissionLevel({ owner: context.repo.owner, repo: context.repo.repo, username: context.actor }); if (data.permission !== 'admin' && data.permission !== 'write') { core.setFailed('no'); }";
        assert!(step_gate(&step(gate), &[], None, false).is_some());
        for undo in [
            "process['exitCode'] = 0",
            "process.exit(0)",
            "core.setFailed = () => {}",
            "context.actor = 'admin'",
            "context.repo.owner = 'acme'",
        ] {
            assert!(
                step_gate(&step(&format!("{undo}; {gate}")), &[], None, false).is_none(),
                "{undo}"
            );
        }
    }
}

/// Where a github-script's output `name` comes from, when the script can
/// be followed: the `context.…` paths its value is made of (literals,
/// numbers and the results of comparisons add none). `None` when it
/// cannot be followed: the output is set with a computed name or more than
/// by `core.setOutput('name', …)`, or its value holds a call other than
/// `String`/`Number`/`parseInt`/`Boolean`, an object, a template with
/// substitutions, a `${{ }}`, or a variable assigned more than once or not
/// by `const`/`let`/`var`.
pub fn script_output_sources(script: &str, name: &str) -> Option<BTreeSet<String>> {
    let t = tokenize(script)?;
    let is = |i: usize, p: &str| matches!(t.get(i).map(|x| &x.tok), Some(Tok::Punct(q)) if *q == p);
    let ident = |i: usize| match t.get(i).map(|x| &x.tok) {
        Some(Tok::Ident(w)) => Some(w.as_str()),
        _ => None,
    };
    // Outputs written any other way make the reading incomplete, and code
    // that can rewrite what the reading trusts (`context`, `String`, the
    // calls it follows) or run text as code leaves nothing to follow.
    const UNFOLLOWABLE: &[&str] = &[
        "exportVariable",
        "GITHUB_OUTPUT",
        "eval",
        "Function",
        "defineProperty",
        "defineProperties",
        "assign",
        "Reflect",
        "globalThis",
        "setPrototypeOf",
        "__proto__",
        "prototype",
        "require",
        "call",
        "apply",
        "bind",
        "with",
        "Proxy",
        // `github.hook.after(…)` rewrites the API's answers.
        "hook",
    ];
    if t.iter().any(|x| match &x.tok {
        Tok::Ident(w) => UNFOLLOWABLE.contains(&w.as_str()),
        Tok::Str(w) | Tok::Template(w) => w.contains("setOutput"),
        _ => false,
    }) {
        return None;
    }
    const TRUSTED_NAMES: &[&str] = &[
        "context", "core", "github", "String", "Number", "parseInt", "Boolean",
    ];
    for (k, x) in t.iter().enumerate() {
        let Tok::Punct(p) = &x.tok else { continue };
        if !assigns(p) {
            continue;
        }
        // The left side's first name: `context.payload.issue.number = …`.
        let mut j = k;
        let mut level = 0usize;
        while j > 0 {
            j -= 1;
            match &t[j].tok {
                Tok::Punct("]" | ")") => level += 1,
                Tok::Punct("[" | "(") if level > 0 => level -= 1,
                _ if level > 0 => {}
                Tok::Punct("." | "?.") | Tok::Ident(_) => {}
                _ => {
                    j += 1;
                    break;
                }
            }
        }
        if matches!(&t[j].tok, Tok::Ident(w) if TRUSTED_NAMES.contains(&w.as_str())) {
            return None;
        }
    }
    for (i, x) in t.iter().enumerate() {
        let Tok::Ident(w) = &x.tok else { continue };
        let before = i.checked_sub(1).map(|k| &t[k].tok);
        // `github` the client is only ever `github.…`: as a parameter, a
        // `catch` binding or a destructured name it is another value.
        if w == "github"
            && !matches!(before, Some(Tok::Punct("." | "?.")))
            && !matches!(t.get(i + 1).map(|x| &x.tok), Some(Tok::Punct(".")))
        {
            return None;
        }
        // Declared, or a parameter: not the global the reading trusts.
        if TRUSTED_NAMES.contains(&w.as_str())
            && matches!(before, Some(Tok::Ident(k)) if matches!(k.as_str(), "const" | "let" | "var" | "function"))
        {
            return None;
        }
        let direct = matches!(before, Some(Tok::Punct(".")))
            && matches!(i.checked_sub(2).map(|k| &t[k].tok), Some(Tok::Ident(c)) if c == "core")
            && matches!(t.get(i + 1).map(|x| &x.tok), Some(Tok::Punct("(")));
        if w == "setOutput" && !direct {
            return None;
        }
    }
    let mut values: Vec<(usize, usize)> = Vec::new();
    for i in 0..t.len() {
        if ident(i) == Some("setOutput") && is(i + 1, "(") {
            if !(is(i.wrapping_sub(1), ".") && ident(i.wrapping_sub(2)) == Some("core")) {
                return None;
            }
            let Some(Tok::Str(n)) = t.get(i + 2).map(|x| &x.tok) else {
                return None;
            };
            if !is(i + 3, ",") {
                return None;
            }
            if !n.eq_ignore_ascii_case(name) {
                continue;
            }
            let end = closing(&t, i + 1)?;
            values.push((i + 4, end));
        }
    }
    if values.is_empty() {
        return None;
    }
    // Every `core.setOutput` value, whatever its name: where an API
    // answer may be read (see [`sources_of`]).
    let mut reads: Vec<(usize, usize)> = Vec::new();
    for i in 0..t.len() {
        if ident(i) == Some("setOutput") && is(i + 1, "(") {
            reads.push((i + 2, closing(&t, i + 1)?));
        }
    }
    let reads = &reads[..];
    let mut out = BTreeSet::new();
    for (from, to) in values {
        sources_of(&t, reads, from, to, 0, &mut out)?;
    }
    Some(out)
}

/// The index of the `)`, `]` or `}` that closes the bracket at `open`.
fn closing(t: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, x) in t.iter().enumerate().skip(open) {
        match &x.tok {
            Tok::Punct("(" | "[" | "{") => depth += 1,
            Tok::Punct(")" | "]" | "}") => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Adds the `context.…` paths the expression `t[from..to]` is made of.
fn sources_of(
    t: &[Token],
    reads: &[(usize, usize)],
    from: usize,
    to: usize,
    depth: usize,
    out: &mut BTreeSet<String>,
) -> Option<()> {
    if depth > 8 || from >= to {
        return None;
    }
    // Top-level operators: a comparison or a negation makes a boolean;
    // `?`/`:`, `||`, `&&`, `??`, `+` pass their operands' values on.
    let mut level = 0usize;
    let mut splits = vec![from];
    let mut boolean = false;
    for (i, x) in t.iter().enumerate().take(to).skip(from) {
        match &x.tok {
            Tok::Punct("(" | "[") => level += 1,
            Tok::Punct(")" | "]") => level = level.checked_sub(1)?,
            Tok::Punct("{" | "}" | "=" | "=>" | ";" | ",") => return None,
            Tok::Punct("===" | "!==" | "==" | "!=" | "<" | ">" | "<=" | ">=") if level == 0 => {
                boolean = true;
            }
            Tok::Punct("?" | ":" | "||" | "&&" | "??" | "+") if level == 0 => {
                splits.push(i);
                splits.push(i + 1);
            }
            Tok::Template(_) | Tok::Regex => return None,
            _ => {}
        }
    }
    if level != 0 {
        return None;
    }
    splits.push(to);
    if splits.len() > 2 {
        // `c ? a : b`: the condition adds nothing when the operands are
        // all booleans; taking every part is the safe reading either way.
        for pair in splits.chunks(2) {
            let (a, b) = (pair[0], pair[1]);
            if a < b {
                sources_of(t, reads, a, b, depth + 1, out)?;
            }
        }
        return Some(());
    }
    if boolean || matches!(t[from].tok, Tok::Punct("!")) {
        return Some(());
    }
    match &t[from].tok {
        Tok::Str(_) | Tok::Num(_) if to == from + 1 => Some(()),
        Tok::Ident(w)
            if to == from + 1 && matches!(w.as_str(), "true" | "false" | "null" | "undefined") =>
        {
            Some(())
        }
        Tok::Punct("(") => {
            let end = closing(t, from)?;
            if end + 1 != to {
                return None;
            }
            sources_of(t, reads, from + 1, end, depth + 1, out)
        }
        Tok::Ident(f)
            if matches!(f.as_str(), "String" | "Number" | "parseInt" | "Boolean")
                && matches!(t.get(from + 1).map(|x| &x.tok), Some(Tok::Punct("("))) =>
        {
            let end = closing(t, from + 1)?;
            if end + 1 != to {
                return None;
            }
            if f == "Boolean" {
                return Some(());
            }
            // `parseInt(x, 10)`: the radix is a literal.
            let args_end = (from + 2..end)
                .find(|&i| matches!(t[i].tok, Tok::Punct(",")))
                .unwrap_or(end);
            sources_of(t, reads, from + 2, args_end, depth + 1, out)
        }
        Tok::Ident(first) => {
            // A member chain `a.b?.c`, nothing else.
            let mut path = vec![first.clone()];
            let mut i = from + 1;
            while i < to {
                match (&t[i].tok, t.get(i + 1).map(|x| &x.tok)) {
                    (Tok::Punct("." | "?."), Some(Tok::Ident(w))) if i + 1 < to => {
                        path.push(w.clone());
                        i += 2;
                    }
                    _ => return None,
                }
            }
            if first == "context" {
                out.insert(path.join("."));
                return Some(());
            }
            let (start, end) = definition(t, first, from)?;
            if path.len() > 1 {
                // `pr.data.head.sha` of `const pr = await
                // github.rest.pulls.get({…})`: a field of the API's answer.
                let api = api_answer(t, start, end)?;
                // Read only inside `core.setOutput` values, which take no
                // assignment: an alias (`const d = pr.data`), a
                // destructuring or a loop target elsewhere could rewrite
                // what the answer holds.
                let declared_at = start.checked_sub(2)?;
                let only_read = t.iter().enumerate().all(|(j, x)| {
                    !matches!(&x.tok, Tok::Ident(w) if w == first)
                        || j == declared_at
                        || matches!(
                            j.checked_sub(1).map(|k| &t[k].tok),
                            Some(Tok::Punct("." | "?."))
                        )
                        || reads.iter().any(|&(a, b)| a <= j && j < b)
                });
                if !only_read {
                    return None;
                }
                if path.get(1).map(String::as_str) != Some("data") || path.len() < 3 {
                    return None;
                }
                out.insert(format!("api.{api}.{}", path[2..].join(".")));
                return Some(());
            }
            sources_of(t, reads, start, end, depth + 1, out)
        }
        _ => None,
    }
}

/// The tokens `start..end` of the one `const`/`let`/`var` initialiser of the
/// variable `first` (used at `from`), when nothing else assigns,
/// destructures or binds that name.
fn definition(t: &[Token], first: &str, from: usize) -> Option<(usize, usize)> {
    let mut definition = None;
    for (j, x) in t.iter().enumerate() {
        if !matches!(&x.tok, Tok::Ident(w) if w == first) {
            continue;
        }
        let before = j.checked_sub(1).map(|k| &t[k].tok);
        let after = t.get(j + 1).map(|x| &x.tok);
        let declared =
            matches!(before, Some(Tok::Ident(k)) if matches!(k.as_str(), "const" | "let" | "var"));
        let assigned = matches!(after, Some(Tok::Punct(p)) if assigns(p));
        let member = matches!(before, Some(Tok::Punct("." | "?.")));
        if member {
            continue;
        }
        if matches!(after, Some(Tok::Punct("=>"))) {
            return None;
        }
        // `pr.data.number = …`: a field of the value rewritten.
        let mut k = j + 1;
        while matches!(t.get(k).map(|x| &x.tok), Some(Tok::Punct("." | "?.")))
            && matches!(t.get(k + 1).map(|x| &x.tok), Some(Tok::Ident(_)))
        {
            k += 2;
        }
        if k > j + 1
            && matches!(t.get(k).map(|x| &x.tok), Some(Tok::Punct(p)) if assigns(p) || *p == "[")
        {
            return None;
        }
        if declared && matches!(after, Some(Tok::Punct("="))) {
            if definition.replace(j + 2).is_some() {
                return None;
            }
        } else if declared
            || assigned
            || matches!(before, Some(Tok::Punct(":")))
            || matches!(before, Some(Tok::Punct("," | "{" | "[" | "(")))
                && matches!(after, Some(Tok::Punct("," | "}" | "]" | ")" | ":")))
                && j < from
        {
            // An assignment, or a destructured name or a parameter
            // (`({ a }) =>`, `function f(a)`) before the use.
            return None;
        }
    }
    let start = definition?;
    // The initialiser runs to the `;`, `,` or line end at its level.
    let mut level = 0usize;
    let mut end = start;
    while end < t.len() {
        match &t[end].tok {
            Tok::Punct("(" | "[" | "{") => level += 1,
            Tok::Punct(")" | "]" | "}") if level > 0 => level -= 1,
            Tok::Punct(")" | "]" | "}") => break,
            Tok::Punct(";" | ",") if level == 0 => break,
            _ if end > start && level == 0 && t[end].newline => break,
            _ => {}
        }
        end += 1;
    }
    // Cut at a line break inside an expression that goes on
    // (`const x = a\n  ? b : c`): not followed.
    if t.get(end).is_some_and(
        |x| matches!(x.tok, Tok::Punct(p) if !matches!(p, ";" | "," | ")" | "]" | "}")),
    ) {
        return None;
    }
    Some((start, end))
}

/// True for an operator that assigns (`=`, `+=`, `??=`, `++`, `--`), not
/// one that compares.
fn assigns(p: &str) -> bool {
    p.ends_with('=') && !matches!(p, "==" | "===" | "!=" | "!==" | "<=" | ">=")
        || matches!(p, "++" | "--")
}

/// The pull-request API call `t[start..end]` is, when it is exactly one
/// (`[await] github[.rest].pulls.get({…})`): its answer's fields are the
/// pull request's, which [`super::flow`] types field by field.
fn api_answer(t: &[Token], start: usize, end: usize) -> Option<&'static str> {
    let mut i = start;
    let ident =
        |i: usize, w: &str| matches!(t.get(i).map(|x| &x.tok), Some(Tok::Ident(v)) if v == w);
    let dot = |i: usize| matches!(t.get(i).map(|x| &x.tok), Some(Tok::Punct(".")));
    if ident(i, "await") {
        i += 1;
    }
    if !(ident(i, "github") && dot(i + 1)) {
        return None;
    }
    i += 2;
    if ident(i, "rest") && dot(i + 1) {
        i += 2;
    }
    if !(ident(i, "pulls") && dot(i + 1) && ident(i + 2, "get")) {
        return None;
    }
    i += 3;
    if !matches!(t.get(i).map(|x| &x.tok), Some(Tok::Punct("("))) {
        return None;
    }
    (closing(t, i)? + 1 == end).then_some("pulls.get")
}

#[cfg(test)]
mod output_source_tests {
    use super::script_output_sources as sources;

    /// intel/torch-xpu-ops `bot.yml`'s parse step, cut down.
    const REAL: &str = "const body = context.payload.comment.body;\nconst actor = context.payload.comment.user.login;\nconst issueNumber = context.payload.issue.number;\nconst isPR = !!context.payload.issue.pull_request;\nconst prNumber = isPR ? issueNumber : '';\ncore.setOutput('issue_number', String(issueNumber));\ncore.setOutput('pr_number', prNumber === '' ? '' : String(prNumber));\ncore.setOutput('is_pr', String(isPR));\ncore.setOutput('actor', actor);\ncore.setOutput('command', body.split(' ')[0]);\n";

    fn set(paths: &[&str]) -> Option<std::collections::BTreeSet<String>> {
        Some(paths.iter().map(|p| (*p).to_owned()).collect())
    }

    #[test]
    fn an_output_is_followed_to_the_context_values_it_is_made_of() {
        assert_eq!(
            sources(REAL, "pr_number"),
            set(&["context.payload.issue.number"])
        );
        assert_eq!(
            sources(REAL, "issue_number"),
            set(&["context.payload.issue.number"])
        );
        assert_eq!(sources(REAL, "is_pr"), set(&[]));
        assert_eq!(
            sources(REAL, "actor"),
            set(&["context.payload.comment.user.login"])
        );
        // A method call on the body is not followed.
        assert_eq!(sources(REAL, "command"), None);
    }

    #[test]
    fn what_cannot_be_followed_is_not_followed() {
        for script in [
            // The name computed, or written another way too.
            "const n = 'pr_number'; core.setOutput(n, context.payload.issue.number);",
            "core.setOutput('pr_number', context.payload.issue.number); core.exportVariable('X', 1);",
            // Reassigned, destructured, a parameter, a loop variable.
            "let n = context.payload.issue.number; n = context.payload.comment.body; core.setOutput('pr_number', n);",
            "let n = context.payload.issue.number; n += context.payload.comment.body; core.setOutput('pr_number', n);",
            "const { n } = context.payload; core.setOutput('pr_number', n);",
            "[1].forEach((n) => core.setOutput('pr_number', n));",
            "for (const n of context.payload.comment.body.split(' ')) core.setOutput('pr_number', n);",
            // A line that goes on after the break.
            "const n = context.payload.issue.number\n  + context.payload.comment.body;\ncore.setOutput('pr_number', n);",
            // A call's result, a template, an object, a GitHub expression.
            "const { data: pr } = await github.rest.pulls.get({}); core.setOutput('pr_number', pr.head.ref);",
            "core.setOutput('pr_number', `${context.payload.comment.body}`);",
            "core.setOutput('pr_number', JSON.stringify({ a: 1 }));",
            "core.setOutput('pr_number', ${{ github.event.comment.body }});",
            // Defined twice.
            "if (x) { const n = 1; } else { const n = context.payload.comment.body; } core.setOutput('pr_number', n);",
        ] {
            let got = sources(script, "pr_number");
            assert!(
                got.as_ref()
                    .is_none_or(|s| s.iter().any(|p| !p.ends_with("number"))),
                "{script}: {got:?}"
            );
        }
        // Text flows through `+`, `||` and ternaries.
        assert_eq!(
            sources(
                "const n = context.payload.issue.number || context.payload.comment.body; core.setOutput('pr_number', n);",
                "pr_number"
            ),
            set(&[
                "context.payload.comment.body",
                "context.payload.issue.number"
            ])
        );
    }
}
