//! Expanding a workspace `macro_rules!` that an include's argument calls
//! (`include!(crate::autogen_output!("errors.rs"))`, where
//! `autogen_output!` gives `concat!(env!("CARGO_MANIFEST_DIR"), "/gen/", $f)`),
//! as rustc does for the forms a path macro takes: the first rule whose
//! matcher the call's tokens match is transcribed, and the result is
//! evaluated like any include argument. Only matchers of plain tokens and
//! `$name:fragment` are read; a repetition, or a rule this reading cannot
//! match before the one that applies, leaves the include unresolved.
//! Must not: touch the file system.

use std::collections::HashMap;

use super::path_expr::evaluate_path;
use super::source::{Range, Source, inner, is_group};
use super::walker::TokenWalker;
use super::{EmbedTarget, FileContext, MAX_SHAPE_TOKENS};
use crate::key::lexer::{Kind, Lexer, Token};

/// A `macro_rules!` as written: its name and, per rule, the text inside
/// the matcher's and the transcriber's delimiters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacroDefinition {
    pub name: String,
    pub rules: Vec<(String, String)>,
}

/// The longest body kept for expansion: path macros are short.
const MAX_BODY_BYTES: usize = 8 * 1024;

impl TokenWalker<'_, '_, '_> {
    /// Keeps the rules of `macro_rules! name { body }` for expansion.
    pub(super) fn record_macro_definition(&mut self, name: &str, body: Range) {
        if body.1 - body.0 > MAX_BODY_BYTES {
            return;
        }
        let src = self.src;
        let mut cursor = src.cursor(body);
        let mut rules = Vec::new();
        // `(matcher) => {transcriber}` separated by `;`.
        while let Some(matcher) = cursor.peek(0) {
            if src.is_punct(Some(matcher), b';') {
                cursor.advance(1);
                continue;
            }
            let (eq, gt, transcriber) = (cursor.peek(1), cursor.peek(2), cursor.peek(3));
            let (true, true, true, Some(transcriber)) = (
                is_group(Some(matcher), None),
                src.is_punct(eq, b'='),
                src.is_punct(gt, b'>'),
                transcriber.filter(|t| is_group(Some(*t), None)),
            ) else {
                return;
            };
            let (m, t) = (inner(matcher), inner(transcriber));
            rules.push((src.text[m.0..m.1].to_owned(), src.text[t.0..t.1].to_owned()));
            cursor.advance(4);
        }
        self.scan.macro_definitions.push(MacroDefinition {
            name: name.to_owned(),
            rules,
        });
    }
}

/// What `definition!(args)` gives as an include argument, evaluated in
/// `ctx` (the file of the include: `concat!` and `env!` expand where the
/// outermost call stands). `Err` says why it cannot be known.
pub fn expand_include_argument(
    definition: &MacroDefinition,
    args: &str,
    ctx: &FileContext<'_>,
) -> Result<EmbedTarget, String> {
    let args_src = Source::index(args, 0).map_err(|(_, why)| why)?;
    for (matcher, transcriber) in &definition.rules {
        let matcher_src = Source::index(matcher, 0).map_err(|(_, why)| why)?;
        let Some(bindings) = match_rule(&matcher_src, &args_src)? else {
            continue;
        };
        let text = transcribe(transcriber, &bindings)?;
        let text = strip_block(&text);
        let src = Source::index(&text, 0).map_err(|(_, why)| why)?;
        let (target, _) = evaluate_path(&src, (0, text.len()), ctx);
        return Ok(target);
    }
    Err(format!(
        "no rule of macro_rules! {} matches `{}`",
        definition.name,
        args.trim()
    ))
}

/// The bindings of the call's tokens to the matcher's metavariables;
/// `Ok(None)` when the rule does not match, `Err` when this reading
/// cannot tell (a repetition, a nested group, an unusual fragment).
fn match_rule(
    matcher: &Source<'_>,
    args: &Source<'_>,
) -> Result<Option<HashMap<String, String>>, String> {
    let too_long = || "a macro call too long to expand".to_owned();
    let m = matcher
        .shape((0, matcher.text.len()), MAX_SHAPE_TOKENS)
        .ok_or_else(too_long)?;
    let a = args
        .shape((0, args.text.len()), MAX_SHAPE_TOKENS)
        .ok_or_else(too_long)?;
    let mut bindings = HashMap::new();
    let (mut i, mut j) = (0, 0);
    while i < m.len() {
        if !matcher.is_punct(Some(m[i]), b'$') {
            if is_group(Some(m[i]), None) {
                return Err("a matcher with a nested group".into());
            }
            match a.get(j) {
                Some(&t) if args.text(t) == matcher.text(m[i]) => {}
                _ => return Ok(None),
            }
            i += 1;
            j += 1;
            continue;
        }
        let (Some(name), true, Some(fragment)) = (
            matcher.ident_name(m.get(i + 1).copied()),
            matcher.is_punct(m.get(i + 2).copied(), b':'),
            matcher.ident_name(m.get(i + 3).copied()),
        ) else {
            return Err("a matcher with a repetition".into());
        };
        i += 4;
        let start = j;
        match fragment {
            "literal" => {
                if args.is_punct(a.get(j).copied(), b'-') {
                    j += 1;
                }
                if a.get(j).is_none_or(|t| t.kind != Kind::Literal) {
                    return Ok(None);
                }
                j += 1;
            }
            "ident" => {
                if args.ident_name(a.get(j).copied()).is_none() {
                    return Ok(None);
                }
                j += 1;
            }
            "tt" => {
                if j >= a.len() {
                    return Ok(None);
                }
                j += 1;
            }
            "expr" | "ty" | "path" => {
                // Up to the matcher's next plain token, or the end.
                let stop = m.get(i).map(|&t| matcher.text(t));
                while j < a.len() && Some(args.text(a[j])) != stop {
                    j += 1;
                }
                if j == start {
                    return Ok(None);
                }
            }
            other => return Err(format!("a `${name}:{other}` fragment")),
        }
        let text = &args.text[a[start].start..a[j - 1].end];
        bindings.insert(name.to_owned(), text.to_owned());
    }
    Ok((j == a.len()).then_some(bindings))
}

/// The transcriber's text with each `$name` replaced by what it bound and
/// `$crate` by `crate`.
fn transcribe(transcriber: &str, bindings: &HashMap<String, String>) -> Result<String, String> {
    let mut lexer = Lexer::new(transcriber, 0, transcriber.len());
    let mut out = String::new();
    let mut copied = 0;
    let mut dollar: Option<Token> = None;
    while let Some(token) = lexer.next_token().map_err(|e| e.what.to_string())? {
        let text = &transcriber[token.start..token.end];
        if let Some(at) = dollar.take() {
            let name = text.strip_prefix("r#").unwrap_or(text);
            let value = match token.kind {
                Kind::Ident | Kind::RawIdent if name == "crate" => "crate",
                Kind::Ident | Kind::RawIdent => match bindings.get(name) {
                    Some(value) => value.as_str(),
                    None => return Err(format!("`${name}`, which the matcher does not bind")),
                },
                _ => return Err("a transcriber with a repetition".into()),
            };
            out.push_str(&transcriber[copied..at.start]);
            out.push_str(value);
            copied = token.end;
            continue;
        }
        if token.kind == Kind::Punct && text == "$" {
            dollar = Some(token);
        }
    }
    out.push_str(&transcriber[copied..]);
    Ok(out)
}

/// `{ concat!(…) }` (a block, as `=> {{ … }}` gives) is its expression.
fn strip_block(text: &str) -> String {
    let trimmed = text.trim();
    if let Some(body) = trimmed.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        if Source::index(body, 0).is_ok() {
            return strip_block(body);
        }
    }
    trimmed.to_owned()
}
