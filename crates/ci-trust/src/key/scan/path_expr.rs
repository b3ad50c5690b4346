//! What an include macro's argument evaluates to: string literals,
//! `concat!`, `env!("CARGO_MANIFEST_DIR")` / `env!("OUT_DIR")` and
//! `macro_rules!` metavariables, nothing else (no other macro is expanded).

use std::path::Path;

use super::source::{Range, Source, inner, is_group};
use super::{EmbedTarget, FileContext, MAX_PATH_PIECES, MAX_SHAPE_TOKENS};
use crate::key::lexer::{self, Kind, Token};

/// One piece of a path expression.
pub(super) enum Piece {
    Text(String),
    ManifestDir,
    OutDir,
    MetaVariable,
    Unknown(String),
}

/// Computes the path an include macro's argument names, as far as it can be
/// known without expanding anything but `concat!` and `env!` of
/// `CARGO_MANIFEST_DIR` / `OUT_DIR`; with it, the path text (`*` for each
/// metavariable) when the path is relative to the file.
pub(super) fn evaluate_path(
    src: &Source<'_>,
    args: Range,
    ctx: &FileContext<'_>,
) -> (EmbedTarget, Option<String>) {
    let mut pieces = Vec::new();
    evaluate_into(src, args, &mut pieces);
    let mut text = String::new();
    let mut starts_at_manifest_dir = false;
    let mut has_metavariable = false;
    for (index, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::OutDir => return (EmbedTarget::OutDir, None),
            Piece::Unknown(what) => return (EmbedTarget::Unresolved(what.clone()), None),
            Piece::ManifestDir if index == 0 => starts_at_manifest_dir = true,
            Piece::ManifestDir => {
                return (
                    EmbedTarget::Unresolved(
                        "`env!(\"CARGO_MANIFEST_DIR\")` after the start of the path".into(),
                    ),
                    None,
                );
            }
            Piece::MetaVariable => {
                has_metavariable = true;
                text.push('*');
            }
            Piece::Text(t) => text.push_str(t),
        }
    }
    if pieces.is_empty() {
        return (EmbedTarget::Unresolved("an empty argument".into()), None);
    }
    // A path that starts with a metavariable is wholly the caller's: it may
    // climb out of any directory a glob could name (`m!("../../data/x")`).
    if matches!(pieces.as_slice(), [Piece::MetaVariable]) {
        return (EmbedTarget::FromCallers, Some(String::new()));
    }
    if matches!(pieces.first(), Some(Piece::MetaVariable)) {
        return (
            EmbedTarget::Unresolved(
                "a path that starts with a macro_rules! metavariable, so each caller chooses it"
                    .into(),
            ),
            None,
        );
    }
    let path = if starts_at_manifest_dir {
        ctx.package_dir.join(text.trim_start_matches('/'))
    } else {
        ctx.file.parent().unwrap_or(Path::new("/")).join(&text)
    };
    let relative = (!starts_at_manifest_dir).then(|| text.clone());
    if has_metavariable {
        if text.contains(['[', ']', '{', '}', '?']) {
            return (
                EmbedTarget::Unresolved(format!("a pattern {text:?} with glob characters")),
                None,
            );
        }
        (EmbedTarget::Pattern(path), relative)
    } else {
        (EmbedTarget::File(path), relative)
    }
}

pub(super) fn evaluate_into(src: &Source<'_>, args: Range, pieces: &mut Vec<Piece>) {
    if pieces.len() >= MAX_PATH_PIECES {
        pieces.push(Piece::Unknown(format!(
            "a path built from more than {MAX_PATH_PIECES} pieces"
        )));
        return;
    }
    let Some(mut tokens) = src.shape(args, MAX_SHAPE_TOKENS) else {
        pieces.push(Piece::Unknown(format!("`{}`", src.snippet(args))));
        return;
    };
    // A trailing comma is allowed in macro arguments.
    if src.is_punct(tokens.last().copied(), b',') {
        tokens.pop();
    }
    // `std::concat!`, `::core::env!` and friends name the same macros.
    let mut start = 0;
    while start + 2 < tokens.len() {
        let (first, second) = (Some(tokens[start]), Some(tokens[start + 1]));
        if (src.is_name(first, "std") || src.is_name(first, "core")) && src.is_punct(second, b':') {
            start += 3;
        } else if src.is_punct(first, b':') && src.is_punct(second, b':') {
            start += 2;
        } else {
            break;
        }
    }
    let tokens = &tokens[start..];
    let text_of = |tokens: &[Token]| match (tokens.first(), tokens.last()) {
        (Some(first), Some(last)) => src.snippet((first.start, last.end)),
        _ => String::new(),
    };
    match *tokens {
        [lit] if lit.kind == Kind::Literal => match lexer::string_value(src.text(lit)) {
            Some(text) => pieces.push(Piece::Text(text)),
            None => pieces.push(Piece::Unknown(format!("the literal {}", src.text(lit)))),
        },
        [dollar, name]
            if src.is_punct(Some(dollar), b'$') && src.ident_name(Some(name)).is_some() =>
        {
            pieces.push(Piece::MetaVariable);
        }
        [name, bang, group]
            if src.is_name(Some(name), "concat")
                && src.is_punct(Some(bang), b'!')
                && is_group(Some(group), None) =>
        {
            src.for_each_part(inner(group), 0, |part, _| evaluate_into(src, part, pieces));
        }
        [name, bang, group]
            if src.is_name(Some(name), "env")
                && src.is_punct(Some(bang), b'!')
                && is_group(Some(group), None) =>
        {
            let var = src.shape(inner(group), 2).unwrap_or_default();
            let value = match var.as_slice() {
                [lit] | [lit, _] if lit.kind == Kind::Literal => {
                    lexer::string_value(src.text(*lit))
                }
                _ => None,
            };
            match value.as_deref() {
                Some("CARGO_MANIFEST_DIR") => pieces.push(Piece::ManifestDir),
                Some("OUT_DIR") => pieces.push(Piece::OutDir),
                _ => pieces.push(Piece::Unknown(format!(
                    "env!({})",
                    src.snippet(inner(group))
                ))),
            }
        }
        _ => pieces.push(Piece::Unknown(format!("`{}`", text_of(tokens)))),
    }
}
