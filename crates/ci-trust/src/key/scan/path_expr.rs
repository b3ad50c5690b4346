//! What an include macro's argument evaluates to: string literals,
//! `concat!`, `stringify!` of one token, `env!("CARGO_MANIFEST_DIR")` /
//! `env!("OUT_DIR")` and `macro_rules!` metavariables, nothing else (no
//! other macro is expanded).

use std::path::Path;

use super::source::{Range, Source, inner, is_group};
use super::{EmbedTarget, FileContext, MAX_PATH_PIECES, MAX_SHAPE_TOKENS};
use crate::key::lexer::{self, Delim, Kind, Token};

/// Whether `rest` closes a repetition: its operator (`*`, `+`, `?`),
/// perhaps after one separator token.
fn is_repetition_end(src: &Source<'_>, rest: &[Token]) -> bool {
    let is_op = |t: Token| [b'*', b'+', b'?'].iter().any(|&c| src.is_punct(Some(t), c));
    match *rest {
        [op] => is_op(op),
        [sep, op] => !is_op(sep) && is_op(op),
        _ => false,
    }
}

/// Whether a repetition's body is metavariables only (`$t`, `$a $b`).
fn holds_only_metavariables(src: &Source<'_>, range: Range) -> bool {
    let Some(tokens) = src.shape(range, MAX_SHAPE_TOKENS) else {
        return false;
    };
    !tokens.is_empty()
        && tokens.len() % 2 == 0
        && tokens.chunks(2).all(|pair| {
            src.is_punct(Some(pair[0]), b'$') && src.ident_name(Some(pair[1])).is_some()
        })
}

/// Whether `tokens` are a macro path's segments before its name: `crate::`,
/// `$crate::`, `self::`, `super::`, `a::b::` (each segment an identifier
/// followed by `::`).
fn is_macro_path(src: &Source<'_>, tokens: &[Token]) -> bool {
    let tokens = match tokens.first() {
        Some(&t) if src.is_punct(Some(t), b'$') => &tokens[1..],
        _ => tokens,
    };
    tokens.len() % 3 == 0
        && tokens.chunks(3).all(|seg| {
            src.ident_name(Some(seg[0])).is_some()
                && src.is_punct(Some(seg[1]), b':')
                && src.is_punct(Some(seg[2]), b':')
        })
}

/// One piece of a path expression.
pub(super) enum Piece {
    Text(String),
    ManifestDir,
    OutDir,
    /// `env!("CARGO_PKG_README")`: what cargo sets it to for the package.
    PackageReadme,
    MetaVariable,
    /// A call of another macro: `(path before the name, name, arguments)`.
    Call(String, String, String),
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
            Piece::Call(path, name, args) if pieces.len() == 1 => {
                return (
                    EmbedTarget::Expand {
                        name: name.clone(),
                        path: path.clone(),
                        args: args.clone(),
                    },
                    None,
                );
            }
            Piece::Call(path, name, args) => {
                return (
                    EmbedTarget::Unresolved(format!("`{path}{name}!({args})` among other pieces")),
                    None,
                );
            }
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
            // Cargo's value, relative to the package (the manifest's
            // `readme`, rebased when inherited, or the README it found).
            Piece::PackageReadme => match ctx.cargo_readme {
                Some(readme) => text.push_str(readme),
                None => {
                    return (
                        EmbedTarget::Unresolved(
                            "`env!(\"CARGO_PKG_README\")` of a package this reading does not know"
                                .into(),
                        ),
                        None,
                    );
                }
            },
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
        // `$($t)*`, the whole of what the caller passed (`$($t:tt)*`): a
        // repetition of metavariables is the caller's, like `$t`.
        [dollar, group, ref rest @ ..]
            if src.is_punct(Some(dollar), b'$')
                && is_group(Some(group), Some(Delim::Paren))
                && is_repetition_end(src, rest)
                && holds_only_metavariables(src, inner(group)) =>
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
        // `stringify!(name)`: one token is its own text. Several tokens are
        // spaced as rustc's printer decides, which this reading does not.
        [name, bang, group]
            if src.is_name(Some(name), "stringify")
                && src.is_punct(Some(bang), b'!')
                && is_group(Some(group), None) =>
        {
            match src.shape(inner(group), 2).as_deref() {
                Some([token]) if !is_group(Some(*token), None) && token.kind != Kind::Punct => {
                    pieces.push(Piece::Text(src.text(*token).to_owned()));
                }
                Some([dollar, name])
                    if src.is_punct(Some(*dollar), b'$')
                        && src.ident_name(Some(*name)).is_some() =>
                {
                    pieces.push(Piece::Unknown(format!(
                        "`stringify!({})`, which each call of the macro completes",
                        src.snippet(inner(group))
                    )));
                }
                _ => pieces.push(Piece::Unknown(format!(
                    "`stringify!({})` of several tokens, which rustc's printer spaces",
                    src.snippet(inner(group))
                ))),
            }
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
                Some("CARGO_PKG_README") => pieces.push(Piece::PackageReadme),
                _ => pieces.push(Piece::Unknown(format!(
                    "env!({})",
                    src.snippet(inner(group))
                ))),
            }
        }
        // Another macro's call, perhaps by a path (`crate::gen!(…)`).
        [.., name, bang, group]
            if src.ident_name(Some(name)).is_some()
                && src.is_punct(Some(bang), b'!')
                && is_group(Some(group), None)
                && is_macro_path(src, &tokens[..tokens.len() - 3]) =>
        {
            let path = &tokens[..tokens.len() - 3];
            let path = match (path.first(), path.last()) {
                (Some(first), Some(last)) => src.text[first.start..last.end].to_owned(),
                _ => String::new(),
            };
            let args = inner(group);
            pieces.push(Piece::Call(
                path.split_whitespace().collect(),
                src.ident_name(Some(name)).unwrap_or_default().to_owned(),
                src.text[args.0..args.1].to_owned(),
            ));
        }
        _ => pieces.push(Piece::Unknown(format!("`{}`", text_of(tokens)))),
    }
}
