//! Reading the small pieces of GitHub expression and shell text the rules
//! need: `${{ … }}` bodies, `secrets.NAME` references, `hashFiles(...)`
//! patterns, `if:` conjuncts and the git commands that fetch other code.
//!
//! These are deliberately narrow recognisers, not an expression evaluator:
//! each answers one question and fails closed (an unrecognised form is
//! treated as the risky one by its caller).

use std::collections::BTreeSet;

/// The body of a value that is exactly one `${{ … }}`, trimmed.
pub fn sole_expression(value: &str) -> Option<&str> {
    let body = value.trim().strip_prefix("${{")?.strip_suffix("}}")?;
    (!body.contains("${{")).then_some(body.trim())
}

/// The bodies of every `${{ … }}` in `text`, with their byte offsets.
pub fn expressions(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(start) = text[rest..].find("${{") {
        let start = rest + start;
        let Some(len) = text[start..].find("}}") else {
            break;
        };
        out.push((start, text[start + 3..start + len].trim()));
        rest = start + len + 2;
    }
    out
}

/// Replaces every `${{ … }}` by `${{}}` and collapses whitespace, so that two
/// keys compare by their literal parts (`gpu-archive-v3-${{}}`).
pub fn key_shape(key: &str) -> String {
    let mut shape = String::new();
    let mut rest = key;
    while let Some(start) = rest.find("${{") {
        shape.push_str(&rest[..start]);
        shape.push_str("${{}}");
        match rest[start..].find("}}") {
            Some(end) => rest = &rest[start + end + 2..],
            None => {
                rest = "";
            }
        }
    }
    shape.push_str(rest);
    shape.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True for the refs `ref:` may name and still check out trusted content:
/// `github.sha`, `github.workflow_sha`, `github.ref` or the default branch by name.
pub fn is_trusted_ref(value: &str, default_branch: &str) -> bool {
    if let Some(expr) = sole_expression(value) {
        return matches!(expr, "github.sha" | "github.workflow_sha" | "github.ref");
    }
    let value = value.trim();
    value == default_branch || value.strip_prefix("refs/heads/") == Some(default_branch)
}

/// True when `value` is `${{ github.workflow_sha }}`.
pub fn is_workflow_sha(value: &str) -> bool {
    sole_expression(value) == Some("github.workflow_sha")
}

/// A reference to a secret: its name, or `None` for a dynamic access
/// (`secrets[format(...)]`, `toJSON(secrets)`) that could read any.
#[derive(Debug, PartialEq, Eq)]
pub struct SecretRef {
    pub name: Option<String>,
    /// Byte offset of the reference in the scanned text.
    pub offset: usize,
}

/// Every secret an expression in `text` reads.
pub fn secret_refs(text: &str) -> Vec<SecretRef> {
    let mut refs = Vec::new();
    for (expr_offset, body) in expressions(text) {
        let bytes = body.as_bytes();
        let mut i = 0;
        while let Some(found) = body[i..].find("secrets") {
            let at = i + found;
            i = at + "secrets".len();
            let before_ok = at == 0 || !is_ident(bytes[at - 1]) && bytes[at - 1] != b'.';
            if !before_ok {
                continue;
            }
            let offset = expr_offset + text[expr_offset..].find(body).unwrap_or(0) + at;
            let rest = &body[i..];
            if let Some(name) = rest.strip_prefix('.') {
                let name: String = name
                    .bytes()
                    .take_while(|b| is_ident(*b))
                    .map(char::from)
                    .collect();
                refs.push(SecretRef {
                    name: (!name.is_empty()).then_some(name),
                    offset,
                });
            } else if let Some(index) = rest.strip_prefix('[') {
                let literal = index
                    .strip_prefix('\'')
                    .and_then(|s| s.split_once('\''))
                    .filter(|(_, after)| after.trim_start().starts_with(']'))
                    .map(|(name, _)| name.to_owned());
                refs.push(SecretRef {
                    name: literal,
                    offset,
                });
            } else if rest.trim_start().starts_with(')') || rest.trim_start().is_empty() {
                // `toJSON(secrets)` and friends hand over every secret.
                refs.push(SecretRef { name: None, offset });
            }
        }
    }
    refs
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// The string-literal arguments of every `hashFiles(...)` in `text`, in order.
/// `None` when an argument is not a literal (it could match anything).
pub fn hash_files_patterns(text: &str) -> Option<Vec<String>> {
    let mut patterns = Vec::new();
    for (_, body) in expressions(text) {
        let mut rest = body;
        while let Some(start) = find_call(rest, "hashFiles") {
            let mut args = rest[start..].trim_start();
            args = args.strip_prefix('(')?;
            loop {
                args = args.trim_start();
                if let Some(after) = args.strip_prefix(')') {
                    rest = after;
                    break;
                }
                let (literal, after) = single_quoted(args)?;
                patterns.push(literal);
                args = after.trim_start();
                args = args.strip_prefix(',').unwrap_or(args);
            }
        }
    }
    Some(patterns)
}

/// The offset just after `name` in `text` when it is called there.
fn find_call(text: &str, name: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(&name.to_ascii_lowercase())?;
    Some(at + name.len())
}

/// A GitHub expression string literal (`'…'`, `''` escapes a quote) and what follows.
fn single_quoted(text: &str) -> Option<(String, &str)> {
    let mut chars = text.strip_prefix('\'')?.char_indices().peekable();
    let body = &text[1..];
    let mut literal = String::new();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if chars.peek().map(|(_, c)| *c) == Some('\'') {
                chars.next();
                literal.push('\'');
                continue;
            }
            return Some((literal, &body[i + 1..]));
        }
        literal.push(c);
    }
    None
}

/// True when `cond` (an `if:` value, with or without `${{ }}`) requires
/// `github.ref == 'refs/heads/<branch>'` as one of its top-level `&&` conjuncts.
pub fn requires_ref(cond: &str, branch: &str) -> bool {
    let body = sole_expression(cond).unwrap_or(cond.trim());
    let wanted = format!("'refs/heads/{branch}'");
    top_level_conjuncts(body).is_some_and(|conjuncts| {
        conjuncts.iter().any(|c| {
            let c: String = strip_parens(c).split_whitespace().collect();
            c == format!("github.ref=={wanted}") || c == format!("{wanted}==github.ref")
        })
    })
}

/// Splits at top-level `&&`; `None` when a top-level `||` makes the
/// conjuncts optional.
fn top_level_conjuncts(body: &str) -> Option<Vec<&str>> {
    let bytes = body.as_bytes();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    let mut parts = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => quoted = !quoted,
            b'(' if !quoted => depth += 1,
            b')' if !quoted => depth -= 1,
            b'|' if !quoted && depth == 0 && bytes.get(i + 1) == Some(&b'|') => return None,
            b'&' if !quoted && depth == 0 && bytes.get(i + 1) == Some(&b'&') => {
                parts.push(&body[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&body[start..]);
    Some(parts)
}

fn strip_parens(text: &str) -> &str {
    let mut text = text.trim();
    while let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        text = inner.trim();
    }
    text
}

/// A `run:` line that fetches code a pull request controls, under the
/// strictest reading (a `pull_request_target` run): see [`fetches_pr_code`].
#[cfg(test)]
pub fn fetches_other_code(script: &str) -> Option<&str> {
    let events = BTreeSet::from(["pull_request_target".to_owned()]);
    fetches_pr_code(script, &events, &[], true)
}

/// Events whose payload names pull-request content (a head SHA, a head
/// branch, a fork): in a run started by one of them, a git ref the
/// workflow does not spell out may be the pull request's.
pub const PR_CARRYING_EVENTS: &[&str] = &["pull_request_target", "issue_comment", "workflow_run"];

/// The events under which an event-specific context has a value; under
/// any other event GitHub evaluates it to empty. `None`: not event-specific.
pub fn context_events(context: &str) -> Option<&'static [&'static str]> {
    const PR: &[&str] = &[
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
    ];
    let c = context.trim();
    let table: &[(&str, &'static [&'static str])] = &[
        ("github.event.pull_request", PR),
        ("github.head_ref", PR),
        ("github.base_ref", PR),
        ("github.event.number", PR),
        ("github.event.workflow_run", &["workflow_run"]),
        ("github.event.issue", &["issue_comment", "issues"]),
        (
            "github.event.comment",
            &["issue_comment", "pull_request_review_comment"],
        ),
        ("github.event.review", &["pull_request_review"]),
        ("github.event.client_payload", &["repository_dispatch"]),
        ("github.event.release", &["release"]),
        ("github.event.merge_group", &["merge_group"]),
        ("github.event.inputs", &["workflow_dispatch"]),
        ("inputs.", &["workflow_dispatch", "workflow_call"]),
    ];
    table
        .iter()
        .find(|(prefix, _)| {
            c.starts_with(prefix)
                && (prefix.ends_with('.')
                    || c.len() == prefix.len()
                    || matches!(c.as_bytes()[prefix.len()], b'.' | b'['))
        })
        .map(|(_, events)| *events)
}

/// The context names (`github.event.pull_request.head.sha`, `inputs.ref`)
/// an expression body reads.
pub fn contexts(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = body.as_bytes();
    let mut i = 0;
    let mut quoted = false;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\'' {
            quoted = !quoted;
            i += 1;
            continue;
        }
        if quoted || !(b.is_ascii_alphabetic() || b == b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len()
            && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'-' | b'.' | b'*'))
        {
            i += 1;
        }
        out.push(&body[start..i]);
    }
    out
}

/// True when `context` may hold pull-request content in a run started by
/// one of `events`: it is set by such an event and names PR-side data.
fn pr_context(context: &str, events: &BTreeSet<String>) -> bool {
    let pr_side = [
        "github.event.pull_request",
        "github.head_ref",
        "github.event.number",
        "github.event.workflow_run",
        "github.event.issue",
        "github.event.comment",
    ]
    .iter()
    .any(|p| context.starts_with(p));
    pr_side && context_events(context).is_some_and(|set| set.iter().any(|e| events.contains(*e)))
}

/// An input whose name says it carries a pull request (`inputs.head_sha`,
/// `inputs.pr_number`, `github.event.inputs.pull_request`): whoever
/// dispatches, the bytes it names are the pull request's.
pub fn names_pull_request_input(context: &str) -> bool {
    let Some(name) = context
        .strip_prefix("inputs.")
        .or_else(|| context.strip_prefix("github.event.inputs."))
    else {
        return false;
    };
    name.to_ascii_lowercase()
        .split(['_', '-', '.'])
        .any(|part| matches!(part, "head" | "pr" | "pull" | "fork" | "pullrequest"))
}

/// True when the expressions in `text` may carry pull-request content in a
/// run started by one of `events`.
pub fn carries_pr_content(text: &str, events: &BTreeSet<String>) -> bool {
    expressions(text).iter().any(|(_, body)| {
        contexts(body)
            .iter()
            .any(|c| pr_context(c, events) || names_pull_request_input(c))
    }) || (text.contains("GITHUB_HEAD_REF") && events.iter().any(|e| e.starts_with("pull_request")))
}

/// A checkout `ref:` that is trusted in every run started by one of
/// `events`: each `||` alternative is a trusted ref, the default branch,
/// an event-specific context that is empty under all of `events` (so the
/// checkout falls through to the next one, or to the triggering commit),
/// or an input when `inputs_trusted` (a maintainer-only dispatch).
#[cfg(test)]
pub fn is_trusted_ref_under(
    value: &str,
    default_branch: &str,
    events: &BTreeSet<String>,
    inputs_trusted: bool,
) -> bool {
    is_trusted_ref_in(value, default_branch, events, inputs_trusted, true)
}

/// As [`is_trusted_ref_under`]; `static_matrix`: the job's matrix is
/// written in the workflow (else `matrix.*` may carry anything).
pub fn is_trusted_ref_in(
    value: &str,
    default_branch: &str,
    events: &BTreeSet<String>,
    inputs_trusted: bool,
    static_matrix: bool,
) -> bool {
    if is_trusted_ref(value, default_branch) {
        return true;
    }
    let absent = |context: &str| {
        context_events(context).is_some_and(|set| !set.iter().any(|e| events.contains(*e)))
    };
    // A dispatch's inputs and a repository_dispatch's payload come from
    // someone holding write access (a token that can send the event).
    let inputs_ok = |context: &str| {
        // Matrix values are written in the workflow itself.
        static_matrix && context.starts_with("matrix.")
            || inputs_trusted
                && !names_pull_request_input(context)
                && (context.starts_with("inputs.")
                    || context.starts_with("github.event.inputs.")
                    || context.starts_with("github.event.client_payload."))
    };
    let Some(body) = sole_expression(value) else {
        // Text around expressions: trusted only when every expression in it
        // is empty under these events (the checkout then fails, it runs nothing foreign).
        let exprs = expressions(value);
        return !exprs.is_empty()
            && exprs
                .iter()
                .all(|(_, body)| contexts(body).iter().all(|c| absent(c) || inputs_ok(c)));
    };
    let Some(alternatives) = top_level_split(body, b'|') else {
        return false;
    };
    alternatives.iter().all(|alt| {
        let alt = strip_parens(alt);
        // The base of a pull request is this repository's own branch.
        if matches!(
            alt,
            "github.sha"
                | "github.workflow_sha"
                | "github.ref"
                | "github.base_ref"
                | "github.event.pull_request.base.sha"
                | "github.event.pull_request.base.ref"
                | "github.event.repository.default_branch"
        ) {
            return true;
        }
        if let Some(literal) = alt.strip_prefix('\'').and_then(|a| a.strip_suffix('\'')) {
            return is_trusted_ref(literal, default_branch) || literal.is_empty();
        }
        let found = contexts(alt);
        !found.is_empty() && found.iter().all(|c| absent(c) || inputs_ok(c))
    })
}

/// The top-level `op op`-separated parts (`||` for b'|', `&&` for b'&').
fn top_level_split(body: &str, op: u8) -> Option<Vec<&str>> {
    let bytes = body.as_bytes();
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    let mut parts = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => quoted = !quoted,
            b'(' if !quoted => depth += 1,
            b')' if !quoted => depth -= 1,
            c if c == op && !quoted && depth == 0 && bytes.get(i + 1) == Some(&op) => {
                parts.push(&body[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    (depth == 0 && !quoted).then(|| {
        parts.push(&body[start..]);
        parts
    })
}

/// The events a job's `if:` lets through, of those its workflow is started
/// by: a top-level `github.event_name == 'X'` keeps X only, `!= 'X'`
/// drops X, and `github.ref == 'refs/heads/…'` or `startsWith(github.ref,
/// 'refs/tags/')` drops `pull_request` (whose ref is `refs/pull/N/merge`).
/// Any other condition restricts nothing.
pub fn guard_events(cond: &str, events: &BTreeSet<String>) -> BTreeSet<String> {
    let body = sole_expression(cond).unwrap_or(cond.trim());
    let Some(conjuncts) = top_level_conjuncts(body) else {
        return events.clone();
    };
    let mut kept = events.clone();
    for conjunct in conjuncts {
        let c: String = strip_parens(conjunct).split_whitespace().collect();
        let compare = |op: &str| -> Option<String> {
            let (left, right) = c.split_once(op)?;
            let (name, literal) = if left == "github.event_name" {
                (left, right)
            } else if right == "github.event_name" {
                (right, left)
            } else {
                return None;
            };
            let _ = name;
            literal
                .strip_prefix('\'')
                .and_then(|l| l.strip_suffix('\''))
                .map(str::to_owned)
        };
        if let Some(event) = compare("==") {
            kept.retain(|e| *e == event);
        } else if let Some(event) = compare("!=") {
            kept.remove(&event);
        } else if c.starts_with("github.ref=='refs/heads/")
            || c.starts_with("github.ref=='refs/tags/")
            || c.starts_with("startsWith(github.ref,'refs/tags/')")
            || c.starts_with("startsWith(github.ref,'refs/heads/")
        {
            kept.remove("pull_request");
        }
    }
    kept
}

/// The line of `script` that brings code a pull request controls into the
/// working tree, in a run started by one of `events`: `gh pr checkout`,
/// `gh run download`, or a git `checkout`/`switch`/`pull`/`clone`/
/// `worktree`/`reset --hard` (or a `branch` made for a later step to check
/// out) of a `pull/` ref, of an expression or
/// environment variable (`tainted_vars`) that carries the pull request's
/// head, of what an earlier line fetched from a pull request
/// (`FETCH_HEAD`), or, in a run whose event carries pull-request content
/// (`pull_request_target`, `issue_comment`, `workflow_run`), of any ref the
/// script does not spell out (`$VAR`), unless the script works in another
/// repository it set up itself (`git init`, `git remote add`). A `git
/// fetch` counts itself only when `fetch_counts` (the publisher must not
/// even fetch); `git checkout -b NAME`, or cloning a named repository, never.
pub fn fetches_pr_code<'s>(
    script: &'s str,
    events: &BTreeSet<String>,
    tainted_vars: &[String],
    fetch_counts: bool,
) -> Option<&'s str> {
    let other_repo = script.contains("git init") || script.contains("git remote add");
    let strict = PR_CARRYING_EVENTS.iter().any(|e| events.contains(*e)) && !other_repo;
    let mut pr_fetched = false;
    script.lines().find(|line| {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '`'))
            .filter(|w| !w.is_empty())
            .collect();
        let has = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
        let tainted = tainted_vars
            .iter()
            .any(|v| line.contains(&format!("${v}")) || line.contains(&format!("${{{v}}}")));
        let named = line.contains("pull/") || carries_pr_content(line, events) || tainted;
        let mut foreign = false;
        for (i, w) in words.iter().enumerate() {
            if *w != "git" && !w.ends_with("/git") {
                continue;
            }
            let args = git_subcommand(&words[i + 1..]);
            let Some((sub, rest)) = args.split_first() else {
                continue;
            };
            let unspelled = |args: &[&str]| {
                args.iter().any(|a| {
                    a.contains("FETCH_HEAD") && pr_fetched
                        || strict && (a.contains('$') || a.contains("FETCH_HEAD"))
                })
            };
            let controlled = named || unspelled(rest);
            match *sub {
                "checkout" | "switch" => {
                    let creates = rest
                        .iter()
                        .any(|a| matches!(*a, "-b" | "-B" | "-c" | "-C" | "--orphan"));
                    let targets = rest.iter().filter(|a| !a.starts_with('-')).count();
                    foreign |=
                        !(creates && targets <= 1) && (controlled || pr_fetched && targets > 0);
                }
                "pull" | "worktree" | "clone" => foreign |= controlled,
                // A branch made from the pull request (`git branch -f NAME
                // FETCH_HEAD`) is prepared for a later step, typically an
                // action, to check out.
                "branch" => {
                    let targets: Vec<&&str> = rest.iter().filter(|a| !a.starts_with('-')).collect();
                    foreign |= targets.len() >= 2
                        && (controlled
                            || pr_fetched && targets[1..].iter().any(|a| a.contains("FETCH_HEAD")));
                }
                "fetch" => {
                    pr_fetched |= controlled;
                    foreign |= fetch_counts && controlled;
                }
                "reset" => {
                    foreign |= rest.contains(&"--hard")
                        && rest.iter().any(|a| !a.starts_with('-') && *a != "HEAD")
                        && (controlled || pr_fetched);
                }
                _ => {}
            }
        }
        foreign
            || (has("gh", "pr") && words.contains(&"checkout"))
            || has("gh", "run") && words.contains(&"download")
    })
}

fn git_subcommand<'w>(mut args: &'w [&'w str]) -> &'w [&'w str] {
    while let Some((first, rest)) = args.split_first() {
        if !first.starts_with('-') {
            break;
        }
        let takes_value = matches!(
            *first,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--exec-path"
                | "--config-env"
        );
        args = if takes_value {
            rest.get(1..).unwrap_or_default()
        } else {
            rest
        };
    }
    args
}

/// The first line of a script that invokes cargo (or rustc) other than
/// `cargo xtask ci-key`: a step that compiles, and so runs, checked-out code.
pub fn builds_code(script: &str) -> Option<&str> {
    script.lines().find(|line| {
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ';' || c == '(' || c == '&' || c == '|')
            .filter(|w| !w.is_empty())
            .collect();
        words.iter().enumerate().any(|(i, w)| {
            let is_tool = matches!(*w, "cargo" | "rustc" | "make" | "cmake" | "nvcc");
            let is_key = *w == "cargo"
                && words.get(i + 1) == Some(&"xtask")
                && words.get(i + 2) == Some(&"ci-key");
            is_tool && !is_key
        })
    })
}

/// `script` with everything the shell does not run as a command blanked
/// out: quoted text (except `$(…)` and backquoted substitutions inside
/// double quotes, which run), escaped characters, comments and here-document
/// bodies. A line ended by `\` is joined to the next. Every byte keeps its
/// offset (blanked bytes become spaces, newlines stay), so a line of the
/// result starts where the same line of `script` does.
pub fn shell_code(script: &str) -> String {
    enum Ctx {
        /// Commands: top level, or a `$(…)` (open parentheses counted) or a
        /// backquoted substitution inside double quotes.
        Code { parens: usize, backquote: bool },
        /// Inside double quotes; `keep` for a quoted command name
        /// (`"$DIR/run.sh" args`), whose text is what runs.
        Double { keep: bool },
    }
    let bytes = script.as_bytes();
    let mut out = bytes.to_vec();
    let mut stack = vec![Ctx::Code {
        parens: 0,
        backquote: false,
    }];
    let mut heredocs: Vec<String> = Vec::new();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(bytes.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let top_level = stack.len() == 1;
        match stack.last_mut() {
            Some(Ctx::Double { keep }) => match b {
                b'\\' => {
                    let end = i + 1 + escaped_len(script, i + 1);
                    blank(&mut out, i, end);
                    i = end;
                    continue;
                }
                b'"' => {
                    blank(&mut out, i, i + 1);
                    stack.pop();
                }
                b'$' if bytes.get(i + 1) == Some(&b'(') => {
                    stack.push(Ctx::Code {
                        parens: 1,
                        backquote: false,
                    });
                    i += 2;
                    continue;
                }
                b'`' => stack.push(Ctx::Code {
                    parens: 0,
                    backquote: true,
                }),
                _ if *keep => {}
                _ => blank(&mut out, i, i + 1),
            },
            Some(Ctx::Code { parens, backquote }) => match b {
                b'\\' => {
                    let end = i + 1 + escaped_len(script, i + 1);
                    blank(&mut out, i, end);
                    // A continued line: the next line's words are arguments.
                    if bytes.get(i + 1) == Some(&b'\n') {
                        out[i + 1] = b' ';
                    }
                    i = end;
                    continue;
                }
                b'\'' => {
                    let end = bytes[i + 1..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map_or(bytes.len(), |p| i + 1 + p + 1);
                    if command_position(&out, i) {
                        blank(&mut out, i, i + 1);
                        blank(&mut out, end - 1, end);
                    } else {
                        blank(&mut out, i, end);
                    }
                    i = end;
                    continue;
                }
                b'"' => {
                    let keep = command_position(&out, i);
                    blank(&mut out, i, i + 1);
                    stack.push(Ctx::Double { keep });
                }
                b'#' if i == 0
                    || bytes[i - 1].is_ascii_whitespace()
                    || b";&|(".contains(&bytes[i - 1]) =>
                {
                    let end = bytes[i..]
                        .iter()
                        .position(|&c| c == b'\n')
                        .map_or(bytes.len(), |p| i + p);
                    blank(&mut out, i, end);
                    i = end;
                    continue;
                }
                b'(' if *parens > 0 => *parens += 1,
                b')' if *parens > 0 => {
                    *parens -= 1;
                    if *parens == 0 {
                        stack.pop();
                    }
                }
                b'`' if *backquote => {
                    stack.pop();
                }
                b'<' if bytes.get(i + 1) == Some(&b'<') && bytes.get(i + 2) != Some(&b'<') => {
                    let rest = &script[i + 2..];
                    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
                    let word: String = rest
                        .trim_start_matches(['\'', '"'])
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    // A delimiter is a word (`$(( x << 2 ))` is a shift).
                    if word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                        heredocs.push(word);
                    }
                }
                b'\n' if top_level && !heredocs.is_empty() => {
                    // The bodies of the here-documents opened on this line.
                    let mut at = i + 1;
                    for word in std::mem::take(&mut heredocs) {
                        while at < bytes.len() {
                            let end = bytes[at..]
                                .iter()
                                .position(|&c| c == b'\n')
                                .map_or(bytes.len(), |p| at + p);
                            let done = script[at..end].trim() == word;
                            blank(&mut out, at, end);
                            at = end + 1;
                            if done {
                                break;
                            }
                        }
                    }
                    i = at;
                    continue;
                }
                _ => {}
            },
            None => break,
        }
        i += 1;
    }
    // Blanking keeps every character whole; should it not, the script as
    // written is read (more is taken for commands, never less).
    String::from_utf8(out).unwrap_or_else(|_| script.to_owned())
}

/// The length in bytes of the character at `at` of `text` (0 at the end),
/// so that an escaped character is blanked whole.
fn escaped_len(text: &str, at: usize) -> usize {
    text.get(at..)
        .and_then(|rest| rest.chars().next())
        .map_or(0, char::len_utf8)
}

/// True when a quote at `at` starts the command word of a shell command
/// (what `out`, the script read so far, has before it): at the start of a
/// line or after `;`, `&`, `|`, `(` or a backquote, or after a word that
/// leaves the command to come (`sudo`, `exec`, `env`, `then`, an
/// assignment, …). A quote inside a word (`X="…"`, `--body="…"`) is not.
fn command_position(out: &[u8], at: usize) -> bool {
    const LEADERS: &[&str] = &[
        "sudo", "exec", "env", "then", "do", "else", "time", "if", "while", "until", "!", "{",
        "command", "nohup",
    ];
    let before = &out[..at];
    if before
        .last()
        .is_some_and(|b| !b.is_ascii_whitespace() && !b";&|(`".contains(b))
    {
        return false;
    }
    let mut end = before.len();
    loop {
        let trimmed = before[..end]
            .iter()
            .rposition(|b| *b != b' ' && *b != b'\t')
            .map_or(&before[..0], |last| &before[..=last]);
        match trimmed.last() {
            None | Some(b'\n') => return true,
            Some(b) if b";&|(`".contains(b) => return true,
            Some(_) => {
                let start = trimmed
                    .iter()
                    .rposition(|b| b.is_ascii_whitespace() || b";&|(`".contains(b))
                    .map_or(0, |p| p + 1);
                let word = String::from_utf8_lossy(&trimmed[start..]);
                // Options between a leader and the command (`sudo -E`).
                if word.starts_with('-') {
                    end = start;
                    continue;
                }
                return LEADERS.contains(&word.as_ref()) || word.contains('=');
            }
        }
    }
}

/// True for a 40-hex-digit commit SHA.
pub fn is_full_sha(reference: &str) -> bool {
    reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_code_keeps_every_offset_on_any_input() {
        // Scripts made of the characters the reader treats specially.
        let pieces = [
            "\"", "'", "\\", "$(", ")", "`", "#", "<<", "EOF", "\n", " ", "é", "a/b", ";", "|",
            "&", "(", "-", "sudo", "x=",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let mut script = String::new();
            for _ in 0..24 {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let index = usize::try_from(state >> 59).unwrap_or(0) % pieces.len();
                script.push_str(pieces[index]);
            }
            let code = shell_code(&script);
            assert_eq!(code.len(), script.len(), "{script:?}");
            let lines = |t: &str| t.match_indices('\n').count();
            assert!(lines(&code) <= lines(&script), "{script:?}");
        }
    }

    #[test]
    fn shell_code_keeps_commands_and_blanks_what_is_not_run() {
        let script = "post \"see \\`.ai/\\` and [x](${URL}/pull/1)\"\ngit push \\\n  \"https://x/y.git\" 'a/b'\necho \"$(./run.sh)\" # ./not-run\ncat <<EOF\n./body\nEOF\n./after\n";
        let code = shell_code(script);
        assert_eq!(code.len(), script.len());
        let lines: Vec<&str> = code.lines().map(str::trim_end).collect();
        // The continued `git push` line absorbs its argument line.
        assert_eq!(
            lines,
            [
                "post",
                "git push",
                "echo  $(./run.sh)",
                "cat <<EOF",
                "",
                "",
                "./after"
            ]
        );
        // A quoted command name is what runs; a quoted argument is not.
        let code = shell_code(
            "\"$DIR/run.sh\" --x \"a/b\"\nsudo -E './bin/x'\nX=\"./no\" ./yes\necho -n \"./no\"\n",
        );
        let lines: Vec<&str> = code.lines().map(str::trim_end).collect();
        assert_eq!(
            lines,
            [
                " $DIR/run.sh  --x",
                "sudo -E  ./bin/x",
                "X=       ./yes",
                "echo -n"
            ]
        );
        // A shift is no here-document: the next line stays a command.
        let code = shell_code("n=$(( 1 << 2 ))\n./run.sh\n");
        assert_eq!(code.lines().nth(1), Some("./run.sh"));
        // An escaped multibyte character is blanked whole: the rest stays.
        let code = shell_code("echo \"\\é\" \\ü\n./run.sh\n");
        assert_eq!(code.lines().nth(1), Some("./run.sh"));
        // Unterminated quotes and odd input never panic.
        for odd in [
            "\"",
            "'",
            "\\",
            "$(",
            "\"$(",
            "<<",
            "a <<EOF\n",
            "\"`",
            "é'é\"é",
        ] {
            let _ = shell_code(odd);
        }
    }

    #[test]
    fn trusted_refs() {
        for ok in [
            "${{ github.sha }}",
            "${{github.workflow_sha}}",
            "${{ github.ref }}",
            "main",
            "refs/heads/main",
        ] {
            assert!(is_trusted_ref(ok, "main"), "{ok}");
        }
        for bad in [
            "${{ github.event.workflow_run.head_sha }}",
            "${{ inputs.ref }}",
            "refs/pull/${{ inputs.pr }}/head",
            "feature",
            "${{ github.sha }}-x",
        ] {
            assert!(!is_trusted_ref(bad, "main"), "{bad}");
        }
    }

    #[test]
    fn secret_references_are_found_with_names() {
        let refs = secret_refs(
            "a ${{ secrets.RUNPOD_API_KEY }} b ${{ secrets['X'] || github.token }} ${{ toJSON(secrets) }} ${{ mysecrets.no }}",
        );
        let names: Vec<_> = refs.iter().map(|r| r.name.as_deref()).collect();
        assert_eq!(names, [Some("RUNPOD_API_KEY"), Some("X"), None]);
        assert_eq!(
            &"a ${{ secrets.RUNPOD_API_KEY }}"[refs[0].offset..refs[0].offset + 7],
            "secrets"
        );
        assert_eq!(
            secret_refs("${{ secrets[format('{0}', 'A')] }}")[0].name,
            None
        );
        assert!(secret_refs("secrets.NOT_IN_AN_EXPRESSION").is_empty());
    }

    #[test]
    fn hash_files_patterns_are_read_in_order() {
        assert_eq!(
            hash_files_patterns(
                "k-${{ hashFiles('pr/Cargo.lock', 'pr/**/Cargo.toml') }}-${{ hashFiles('it''s') }}"
            )
            .unwrap(),
            ["pr/Cargo.lock", "pr/**/Cargo.toml", "it's"]
        );
        assert!(hash_files_patterns("${{ hashFiles(inputs.glob) }}").is_none());
        assert!(hash_files_patterns("no key here").unwrap().is_empty());
    }

    #[test]
    fn ref_guards_need_a_top_level_conjunct() {
        assert!(requires_ref("github.ref == 'refs/heads/main'", "main"));
        assert!(requires_ref(
            "${{ github.event_name != 'x' && (github.ref=='refs/heads/main') }}",
            "main"
        ));
        assert!(!requires_ref(
            "github.ref == 'refs/heads/main' || true",
            "main"
        ));
        assert!(!requires_ref("github.ref == 'refs/heads/dev'", "main"));
        assert!(!requires_ref("always()", "main"));
    }

    fn events_of(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn refs_are_judged_under_the_events_that_start_the_run() {
        let events = events_of;
        let dispatch = events(&["workflow_dispatch"]);
        let target = events(&["pull_request_target"]);
        let head = "${{ github.event.pull_request.head.sha || github.sha }}";
        assert!(is_trusted_ref_under(head, "main", &dispatch, false));
        assert!(!is_trusted_ref_under(head, "main", &target, false));
        assert!(is_trusted_ref_under(
            "${{ inputs.ref }}",
            "main",
            &dispatch,
            true
        ));
        assert!(!is_trusted_ref_under(
            "${{ inputs.ref }}",
            "main",
            &dispatch,
            false
        ));
        assert!(!is_trusted_ref_under(
            "${{ github.event.workflow_run.head_sha }}",
            "main",
            &events(&["workflow_run"]),
            true
        ));
        assert!(!is_trusted_ref_under(
            "${{ steps.x.outputs.sha }}",
            "main",
            &dispatch,
            true
        ));
        assert!(is_trusted_ref_under(
            "${{ github.head_ref || 'main' }}",
            "main",
            &dispatch,
            false
        ));
        let payload = "${{ github.event.client_payload.sha }}";
        let sent = events(&["repository_dispatch", "workflow_dispatch"]);
        assert!(is_trusted_ref_under(payload, "main", &sent, true));
        assert!(is_trusted_ref_under(
            "${{ github.event.pull_request.base.sha }}",
            "main",
            &target,
            false
        ));
    }

    #[test]
    fn job_guards_restrict_events() {
        let all: BTreeSet<String> = ["push", "pull_request", "workflow_dispatch"]
            .iter()
            .map(|e| (*e).to_owned())
            .collect();
        let kept = |cond| guard_events(cond, &all).into_iter().collect::<Vec<_>>();
        assert_eq!(kept("${{ github.event_name == 'push' }}"), ["push"]);
        assert_eq!(
            kept("github.event_name != 'pull_request' && always()"),
            ["push", "workflow_dispatch"]
        );
        assert_eq!(
            kept("github.ref == 'refs/heads/main'"),
            ["push", "workflow_dispatch"]
        );
        assert_eq!(kept("github.event_name == 'push' || true").len(), 3);
    }

    #[test]
    fn shapes_replace_expressions() {
        assert_eq!(
            key_shape("gpu-archive-v3-${{ steps.k.outputs.key }}"),
            key_shape("gpu-archive-v3-${{ hashFiles('x') }}")
        );
        assert_ne!(
            key_shape("gpu-archive-v3-${{ a }}"),
            key_shape("gpu-archive-v4-${{ a }}")
        );
    }

    #[test]
    fn code_fetching_and_building_lines() {
        assert!(fetches_other_code("set -e\ngit fetch origin pull/1/head\n").is_some());
        assert!(fetches_other_code("gh pr checkout 12").is_some());
        assert!(fetches_other_code("echo git is fine").is_none());
        for other in [
            "git -C pr checkout \"$SHA\"",
            "git -c advice.detachedHead=false checkout FETCH_HEAD",
            "cd pr&&git --git-dir=.git switch -d \"$SHA\"",
            "/usr/bin/git pull origin \"$BRANCH\"",
            "git worktree add ../pr \"$SHA\"",
            "git clone --depth 1 \"https://github.com/$HEAD_REPO\" pr",
            "git fetch origin \"$SHA\" && git reset --hard FETCH_HEAD",
            "(git -C pr fetch origin refs/pull/7/head)",
            "gh run download \"$RUN_ID\" -n build",
        ] {
            assert!(fetches_other_code(other).is_some(), "{other}");
        }
        for benign in [
            "git status",
            "git -C pr log -1",
            "git reset --hard",
            "git reset --hard HEAD",
            "git fetch --tags",
            "echo checkout",
            "git checkout -b release-notes",
            "git clone --depth 1 https://github.com/org/data pr",
            "git pull origin gh-pages",
        ] {
            assert!(fetches_other_code(benign).is_none(), "{benign}");
        }
        // Under a schedule or a dispatch, only what names a pull request counts.
        let nightly = BTreeSet::from(["schedule".to_owned(), "workflow_dispatch".to_owned()]);
        for pr in [
            "git fetch origin pull/${{ inputs.pr }}/head && git checkout FETCH_HEAD",
            "gh pr checkout 12",
            "git checkout \"$PR_SHA\"",
        ] {
            assert!(
                fetches_pr_code(pr, &nightly, &["PR_SHA".to_owned()], false).is_some(),
                "{pr}"
            );
        }
        for benign in [
            "git checkout \"$SHA\"",
            "git checkout ${{ github.event.pull_request.head.sha }}",
            "git clone https://github.com/$OWNER/tool",
        ] {
            assert!(
                fetches_pr_code(benign, &nightly, &[], false).is_none(),
                "{benign}"
            );
        }
        // Fetching a pull request only to read it (a diff) is not running it;
        // checking out what was fetched is.
        let target = BTreeSet::from(["pull_request_target".to_owned()]);
        let diff =
            "git fetch origin refs/pull/${{ github.event.number }}/merge:pr\ngit diff main..pr";
        assert!(fetches_pr_code(diff, &target, &[], false).is_none());
        assert!(fetches_pr_code(diff, &target, &[], true).is_some());
        let run = "git fetch origin pull/1/head\ngit checkout FETCH_HEAD";
        assert_eq!(
            fetches_pr_code(run, &nightly, &[], false),
            Some("git checkout FETCH_HEAD")
        );
        // A data branch of another repository the script set up itself.
        let data = "git init ctx\ncd ctx\ngit remote add origin https://github.com/o/data.git\ngit fetch origin \"refs/heads/$branch\"\ngit checkout FETCH_HEAD";
        assert!(fetches_pr_code(data, &events_of(&["issue_comment"]), &[], false).is_none());
        assert_eq!(
            builds_code("cargo xtask ci-key --github-output\ncargo nextest archive"),
            Some("cargo nextest archive")
        );
        assert!(builds_code("cargo xtask ci-key --root ../pr").is_none());
        assert!(builds_code("(cd pr && cargo build)").is_some());
    }
}
