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

/// True for a 40-hex-digit commit SHA.
pub fn is_full_sha(reference: &str) -> bool {
    reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
