//! Macro by example, as rustc runs it: a `macro_rules!` rule's matcher is
//! matched against a call's tokens (repetitions, separators and the
//! fragment specifiers included), the first rule that matches is
//! transcribed, and a captured fragment other than `tt`, `ident` and
//! `lifetime` is passed on as one opaque token, which a nested macro's
//! plain tokens cannot match. Where this reading cannot tell what rustc
//! does (where an `item` ends, an expression with a bare `<`, a forwarded
//! fragment against another specifier), it says so (`Err`) rather than
//! guess: the caller then refuses or falls back. Must not: touch the file
//! system, or evaluate what it transcribes (that is `expand`).

use std::collections::HashMap;
use std::rc::Rc;

use crate::key::lexer::{Delim, Kind, Lexer};

/// One token tree of a call's arguments or a transcription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tt {
    Leaf(Leaf),
    Group(Delim, Vec<Tt>),
    /// A captured fragment passed on whole (an `expr`, a `ty`, …): rustc
    /// wraps it in invisible delimiters.
    Opaque(Fragment, Vec<Tt>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Leaf {
    pub(super) kind: LeafKind,
    pub(super) text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeafKind {
    Ident,
    Lifetime,
    Literal,
    Punct,
}

/// A fragment specifier (`$x:expr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fragment {
    Ident,
    Lifetime,
    Literal,
    Tt,
    Block,
    Expr,
    Ty,
    Path,
    Pat,
    PatParam,
    Stmt,
    Vis,
    Item,
    Meta,
}

impl Fragment {
    fn named(name: &str) -> Option<Fragment> {
        Some(match name {
            "ident" => Fragment::Ident,
            "lifetime" => Fragment::Lifetime,
            "literal" => Fragment::Literal,
            "tt" => Fragment::Tt,
            "block" => Fragment::Block,
            "expr" | "expr_2021" => Fragment::Expr,
            "ty" => Fragment::Ty,
            "path" => Fragment::Path,
            "pat" => Fragment::Pat,
            "pat_param" => Fragment::PatParam,
            "stmt" => Fragment::Stmt,
            "vis" => Fragment::Vis,
            "item" => Fragment::Item,
            "meta" => Fragment::Meta,
            _ => return None,
        })
    }

    /// `tt`, `ident` and `lifetime` captures are passed on as the tokens
    /// themselves; every other capture as one opaque token.
    fn is_transparent(self) -> bool {
        matches!(self, Fragment::Tt | Fragment::Ident | Fragment::Lifetime)
    }
}

/// rustc's multi-character punctuation, longest first: adjacent punctuation
/// is glued into these before matching, as rustc's token trees are.
const COMPOUND_PUNCT: &[&str] = &[
    "<<=", ">>=", "...", "..=", "::", "->", "=>", "==", "!=", "<=", ">=", "&&", "||", "+=", "-=",
    "*=", "/=", "%=", "^=", "&=", "|=", "<<", ">>", "..",
];

/// The most token trees one expansion may hold, and the most matcher
/// alternatives one call may explore: beyond them this reading gives up.
const MAX_TREES: usize = 200_000;
const MAX_ALTERNATIVES: usize = 200_000;

/// Lexes `text` into token trees, punctuation glued as rustc glues it.
pub(super) fn parse(text: &str) -> Result<Vec<Tt>, String> {
    let mut lexer = Lexer::new(text, 0, text.len());
    let mut stack: Vec<(Option<Delim>, Vec<Tt>)> = vec![(None, Vec::new())];
    // The end of the last punctuation token, to glue the next to it.
    let mut punct_end: Option<usize> = None;
    let mut count = 0usize;
    // The end of the last token: what lies between two tokens is trivia,
    // whose doc comments rustc turns into `#[doc = "…"]` tokens.
    let mut trivia_from = 0usize;
    while let Some(token) = lexer.next_token().map_err(|e| e.what.to_string())? {
        count += 1;
        if count > MAX_TREES {
            return Err("a macro expansion too large to read".into());
        }
        let top = &mut stack.last_mut().ok_or("unbalanced delimiters")?.1;
        top.extend(doc_attributes(&text[trivia_from..token.start]));
        trivia_from = token.end;
        let piece = &text[token.start..token.end];
        let leaf = |kind| {
            Tt::Leaf(Leaf {
                kind,
                text: piece.to_owned(),
            })
        };
        let glued = punct_end == Some(token.start);
        punct_end = None;
        if let Kind::Open(delim) = token.kind {
            stack.push((Some(delim), Vec::new()));
            continue;
        }
        if let Kind::Close(delim) = token.kind {
            let (opened, trees) = stack.pop().ok_or("unbalanced delimiters")?;
            if opened != Some(delim) {
                return Err("unbalanced delimiters".into());
            }
            stack
                .last_mut()
                .ok_or("unbalanced delimiters")?
                .1
                .push(Tt::Group(delim, trees));
            continue;
        }
        let top = &mut stack.last_mut().ok_or("unbalanced delimiters")?.1;
        match token.kind {
            Kind::Open(_) | Kind::Close(_) => {}
            Kind::Punct => {
                punct_end = Some(token.end);
                if glued
                    && let Some(Tt::Leaf(last)) = top.last_mut()
                    && last.kind == LeafKind::Punct
                {
                    let joined = format!("{}{piece}", last.text);
                    if COMPOUND_PUNCT.contains(&joined.as_str()) {
                        last.text = joined;
                        continue;
                    }
                }
                top.push(leaf(LeafKind::Punct));
            }
            Kind::Ident | Kind::RawIdent => top.push(leaf(LeafKind::Ident)),
            Kind::Lifetime => top.push(leaf(LeafKind::Lifetime)),
            Kind::Literal => top.push(leaf(LeafKind::Literal)),
        }
    }
    match stack.pop() {
        Some((None, mut trees)) if stack.is_empty() => {
            trees.extend(doc_attributes(&text[trivia_from..]));
            Ok(trees)
        }
        _ => Err("unbalanced delimiters".into()),
    }
}

/// The doc comments of `trivia` (white space and comments only) as the
/// tokens rustc makes of them: `/// x` is `#[doc = " x"]`, `//! x` is
/// `#![doc = " x"]`, and `/** x */`, `/*! x */` alike. A matcher sees them
/// (`$(#[$m:meta])*`), so dropping them would match another rule.
fn doc_attributes(trivia: &str) -> Vec<Tt> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < trivia.len() {
        let rest = &trivia[i..];
        let (comment, len) = if rest.starts_with("//") {
            let len = rest.find('\n').unwrap_or(rest.len());
            (&rest[..len], len)
        } else if rest.starts_with("/*") {
            let mut depth = 0usize;
            let mut j = 0;
            let bytes = rest.as_bytes();
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            (&rest[..j], j)
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        };
        i += len.max(1);
        let doc = if (comment.starts_with("///") && !comment.starts_with("////"))
            || comment.starts_with("//!")
        {
            Some((comment.starts_with("//!"), &comment[3..]))
        } else if (comment.starts_with("/**") && !comment.starts_with("/***") && comment != "/**/")
            || comment.starts_with("/*!")
        {
            let body = comment
                .get(3..comment.len().saturating_sub(2))
                .unwrap_or("");
            Some((comment.starts_with("/*!"), body))
        } else {
            None
        };
        let Some((inner, body)) = doc else {
            continue;
        };
        let leaf = |kind, text: &str| {
            Tt::Leaf(Leaf {
                kind,
                text: text.to_owned(),
            })
        };
        out.push(leaf(LeafKind::Punct, "#"));
        if inner {
            out.push(leaf(LeafKind::Punct, "!"));
        }
        out.push(Tt::Group(
            Delim::Bracket,
            vec![
                leaf(LeafKind::Ident, "doc"),
                leaf(LeafKind::Punct, "="),
                leaf(LeafKind::Literal, &format!("{body:?}")),
            ],
        ));
    }
    out
}

/// A call's arguments as token trees, its doc comments the `#[doc = "…"]`
/// attributes rustc passes on (see [`parse`]).
pub(super) fn parse_call_arguments(text: &str) -> Result<Vec<Tt>, String> {
    parse(text)
}

/// Token trees as text, one space between tokens (so that re-lexing
/// glues nothing that was apart); an opaque fragment as its tokens.
pub(super) fn render(trees: &[Tt]) -> String {
    let mut out = String::new();
    render_into(trees, &mut out);
    out
}

fn render_into(trees: &[Tt], out: &mut String) {
    for (index, tree) in trees.iter().enumerate() {
        if index > 0 {
            out.push(' ');
        }
        match tree {
            Tt::Leaf(leaf) => out.push_str(&leaf.text),
            Tt::Group(delim, inner) => {
                let (open, close) = match delim {
                    Delim::Paren => ('(', ')'),
                    Delim::Brace => ('{', '}'),
                    Delim::Bracket => ('[', ']'),
                };
                out.push(open);
                render_into(inner, out);
                out.push(close);
            }
            Tt::Opaque(_, inner) => render_into(inner, out),
        }
    }
}

/// One element of a rule's matcher.
#[derive(Debug, Clone)]
enum Pat {
    Leaf(Leaf),
    Group(Delim, Vec<Pat>),
    Var(String, Fragment),
    Rep(Vec<Pat>, Option<Leaf>, RepOp),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepOp {
    Star,
    Plus,
    Question,
}

/// One element of a rule's transcriber.
#[derive(Debug, Clone)]
enum Tr {
    Tree(Tt),
    Group(Delim, Vec<Tr>),
    Var(String),
    Rep(Vec<Tr>, Option<Leaf>),
}

/// What a matcher variable bound: one capture, or one per repetition.
#[derive(Debug, Clone)]
enum Bound {
    One(Fragment, Vec<Tt>),
    Seq(Vec<Bound>),
}

type Bindings = HashMap<String, Bound>;

fn is_punct(tree: Option<&Tt>, text: &str) -> bool {
    matches!(tree, Some(Tt::Leaf(l)) if l.kind == LeafKind::Punct && l.text == text)
}

fn is_ident(tree: Option<&Tt>, text: &str) -> bool {
    matches!(tree, Some(Tt::Leaf(l)) if l.kind == LeafKind::Ident && l.text == text)
}

fn ident_text(tree: Option<&Tt>) -> Option<&str> {
    match tree {
        Some(Tt::Leaf(l)) if l.kind == LeafKind::Ident => Some(&l.text),
        _ => None,
    }
}

fn rep_op(tree: Option<&Tt>) -> Option<RepOp> {
    match tree {
        Some(t) if is_punct(Some(t), "*") => Some(RepOp::Star),
        Some(t) if is_punct(Some(t), "+") => Some(RepOp::Plus),
        Some(t) if is_punct(Some(t), "?") => Some(RepOp::Question),
        _ => None,
    }
}

/// A repetition's separator and operator after `$( … )`: how many trees
/// they take.
fn separator_and_op(trees: &[Tt]) -> Result<(Option<Leaf>, RepOp, usize), String> {
    if let Some(op) = rep_op(trees.first()) {
        return Ok((None, op, 1));
    }
    match (trees.first(), rep_op(trees.get(1))) {
        (Some(Tt::Leaf(sep)), Some(op)) if op != RepOp::Question => Ok((Some(sep.clone()), op, 2)),
        _ => Err("a repetition without `*`, `+` or `?`".into()),
    }
}

fn parse_matcher(trees: &[Tt]) -> Result<Vec<Pat>, String> {
    let mut pats = Vec::new();
    let mut i = 0;
    while i < trees.len() {
        let tree = &trees[i];
        if !is_punct(Some(tree), "$") {
            pats.push(match tree {
                Tt::Leaf(leaf) => Pat::Leaf(leaf.clone()),
                Tt::Group(delim, inner) => Pat::Group(*delim, parse_matcher(inner)?),
                Tt::Opaque(..) => return Err("a matcher holding a captured fragment".into()),
            });
            i += 1;
            continue;
        }
        match trees.get(i + 1) {
            Some(Tt::Group(Delim::Paren, inner)) => {
                let (sep, op, taken) = separator_and_op(&trees[i + 2..])?;
                pats.push(Pat::Rep(parse_matcher(inner)?, sep, op));
                i += 2 + taken;
            }
            Some(name) if ident_text(Some(name)).is_some_and(|n| n != "crate") => {
                let name = ident_text(Some(name)).unwrap_or_default();
                let fragment = match (trees.get(i + 2), ident_text(trees.get(i + 3))) {
                    (colon, Some(kind)) if is_punct(colon, ":") => Fragment::named(kind)
                        .ok_or_else(|| format!("a `${name}:{kind}` fragment"))?,
                    _ => return Err(format!("`${name}` without a fragment specifier")),
                };
                pats.push(Pat::Var(name.trim_start_matches("r#").to_owned(), fragment));
                i += 4;
            }
            _ => return Err("a `$` in a matcher that is no variable or repetition".into()),
        }
    }
    Ok(pats)
}

fn parse_transcriber(trees: &[Tt]) -> Result<Vec<Tr>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < trees.len() {
        let tree = &trees[i];
        if !is_punct(Some(tree), "$") {
            out.push(match tree {
                Tt::Group(delim, inner) => Tr::Group(*delim, parse_transcriber(inner)?),
                other => Tr::Tree(other.clone()),
            });
            i += 1;
            continue;
        }
        match trees.get(i + 1) {
            Some(Tt::Group(Delim::Paren, inner)) => {
                let (sep, _, taken) = separator_and_op(&trees[i + 2..])?;
                out.push(Tr::Rep(parse_transcriber(inner)?, sep));
                i += 2 + taken;
            }
            Some(name) if ident_text(Some(name)).is_some() => {
                let name = ident_text(Some(name)).unwrap_or_default();
                if name == "crate" {
                    out.push(Tr::Tree(Tt::Leaf(Leaf {
                        kind: LeafKind::Ident,
                        text: "$crate".into(),
                    })));
                } else {
                    out.push(Tr::Var(name.trim_start_matches("r#").to_owned()));
                }
                i += 2;
            }
            // A lone `$` is transcribed as itself.
            _ => {
                out.push(Tr::Tree(tree.clone()));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Where a fragment that runs to a follow token ends, from `start`:
/// `Ok(None)` when it cannot start there.
fn fragment_end(fragment: Fragment, trees: &[Tt], start: usize) -> Result<Option<usize>, String> {
    let words = matches!(
        fragment,
        Fragment::Ty | Fragment::Path | Fragment::Pat | Fragment::PatParam
    );
    if !words {
        return fragment_run(fragment, trees, start);
    }
    // A token no type, path or pattern starts with fails the rule, as in
    // rustc (`@inner` after a `$t:ty` rule).
    if let Some(Tt::Leaf(l)) = trees.get(start) {
        let cannot = match l.kind {
            LeafKind::Ident => {
                NOT_WORD_FRAGMENT_STARTS.contains(&l.text.as_str())
                    || (fragment == Fragment::Ty && NOT_TYPE_STARTS.contains(&l.text.as_str()))
            }
            LeafKind::Literal => !matches!(fragment, Fragment::Pat | Fragment::PatParam),
            LeafKind::Lifetime => true,
            LeafKind::Punct => {
                let starts: &[&str] = match fragment {
                    Fragment::Path => &["::", "<"],
                    Fragment::Ty => &["::", "<", "&", "&&", "*", "!", "?"],
                    _ => &["::", "<", "&", "&&", "-", "..", "..=", "|"],
                };
                !starts.contains(&l.text.as_str())
            }
        };
        if cannot {
            return Ok(None);
        }
    }
    let end = fragment_run(fragment, trees, start)?;
    // Punctuation after a word that goes on no type, path or pattern
    // (`u8 & x`, `a . b`): rustc's parser ends the fragment there, this
    // reading does not say where.
    let after_word: &[&str] = match fragment {
        Fragment::Path => &["::", "<", ">", ">>", ",", "=", "->"],
        Fragment::Ty => &["::", "<", ">", ">>", ",", "=", "->", "+"],
        _ => &["::", "<", ">", ">>", ",", "@", "..", "..=", "...", "|"],
    };
    if let Some(end) = end {
        for pair in trees[start..end].windows(2) {
            let prev_word = match &pair[0] {
                Tt::Leaf(l) => match l.kind {
                    LeafKind::Ident => !TYPE_PREFIX_KEYWORDS.contains(&l.text.as_str()),
                    LeafKind::Literal => true,
                    LeafKind::Lifetime | LeafKind::Punct => false,
                },
                Tt::Group(..) | Tt::Opaque(..) => true,
            };
            if let (true, Tt::Leaf(l)) = (prev_word, &pair[1])
                && l.kind == LeafKind::Punct
                && !after_word.contains(&l.text.as_str())
            {
                return Err(format!(
                    "a `{fragment:?}` fragment where `{}` follows `{}`, where rustc's parser may end it",
                    l.text,
                    render(&pair[..1])
                ));
            }
        }
    }
    Ok(end)
}

/// Keywords no type, path or pattern starts with.
const NOT_WORD_FRAGMENT_STARTS: &[&str] = &[
    "as", "enum", "in", "let", "match", "mod", "pub", "struct", "trait", "type", "use", "where",
    "if", "else", "while", "loop", "return", "break", "continue",
];

/// The other reserved words no type starts with (rustc's
/// `ident_can_begin_type`: a reserved word begins a type only if it is a
/// path segment, `_`, `for`, `impl`, `fn`, `unsafe`, `extern` or `dyn`):
/// `asset!(true)` after a `$t:ty` rule takes the next rule.
const NOT_TYPE_STARTS: &[&str] = &[
    "true", "false", "const", "static", "move", "mut", "ref", "box", "async", "await", "do",
    "yield", "try", "abstract", "become", "final", "macro", "override", "priv", "unsized",
    "virtual",
];

fn fragment_run(fragment: Fragment, trees: &[Tt], start: usize) -> Result<Option<usize>, String> {
    let first = trees.get(start);
    let one = |ok: bool| Ok(ok.then_some(start + 1));
    match fragment {
        Fragment::Tt => one(first.is_some()),
        Fragment::Ident => one(ident_text(first).is_some_and(|n| n != "_")),
        Fragment::Lifetime => {
            one(matches!(first, Some(Tt::Leaf(l)) if l.kind == LeafKind::Lifetime))
        }
        Fragment::Literal => {
            let at = start + usize::from(is_punct(first, "-"));
            let ok = match trees.get(at) {
                Some(Tt::Leaf(l)) => {
                    l.kind == LeafKind::Literal
                        || (at == start
                            && l.kind == LeafKind::Ident
                            && matches!(l.text.as_str(), "true" | "false"))
                }
                _ => false,
            };
            Ok(ok.then_some(at + 1))
        }
        Fragment::Block => one(matches!(first, Some(Tt::Group(Delim::Brace, _)))),
        Fragment::Vis => {
            if !is_ident(first, "pub") {
                return Ok(Some(start));
            }
            let restricted = matches!(trees.get(start + 1), Some(Tt::Group(Delim::Paren, inner))
                if ["crate", "self", "super", "in"].iter().any(|k| is_ident(inner.first(), k)));
            Ok(Some(start + 1 + usize::from(restricted)))
        }
        // rustc's `expr` never starts at `let` (a rule kept for backward
        // compatibility): the rule fails and the next is tried.
        Fragment::Expr if is_ident(first, "let") => Ok(None),
        Fragment::Expr => run_end(trees, start, &[",", ";", "=>"], true),
        // A `stmt` starts at anything but a closing delimiter: one that no
        // expression starts with is an item (`fn f() {}`, `struct S;`) to
        // rustc, whose end this reading does not find.
        Fragment::Stmt => match first {
            Some(tree) if !may_begin_expression(tree) => Err(format!(
                "a statement fragment starting with `{}`, an item to rustc, whose end this reading does not find",
                render(std::slice::from_ref(tree))
            )),
            _ => run_end(trees, start, &[",", ";", "=>"], true),
        },
        Fragment::Pat => {
            let end = run_end(trees, start, &["=>", ",", "=", "if", "in"], false)?;
            // A top-level `|` is part of a `pat` from edition 2021 on and
            // ends it before.
            if let Some(end) = end
                && trees[start..end].iter().any(|t| is_punct(Some(t), "|"))
            {
                return Err(
                    "a pattern fragment with a top-level `|`, which ends it in editions before 2021"
                        .into(),
                );
            }
            Ok(end)
        }
        Fragment::PatParam => run_end(trees, start, &["=>", ",", "=", "|", "if", "in"], false),
        Fragment::Ty | Fragment::Path => run_end(
            trees,
            start,
            &["=>", ",", "=", "|", ";", ":", ">", ">>", "as", "where"],
            false,
        ),
        // An attribute's inside: a simple path, then a delimited group or
        // `= expression`, or nothing (`doc = " x"`, `cfg(test)`, `inline`).
        Fragment::Meta => {
            let mut i = start;
            if is_punct(trees.get(i), "::") {
                i += 1;
            }
            loop {
                let Some(name) = ident_text(trees.get(i)) else {
                    return Ok(None);
                };
                if name == "_" {
                    return Ok(None);
                }
                i += 1;
                if is_punct(trees.get(i), "::") {
                    i += 1;
                } else {
                    break;
                }
            }
            match trees.get(i) {
                Some(Tt::Group(..)) => Ok(Some(i + 1)),
                Some(t) if is_punct(Some(t), "=") => {
                    match run_end(trees, i + 1, &[",", ";", "=>"], true)? {
                        Some(end) => Ok(Some(end)),
                        None => Ok(None),
                    }
                }
                _ => Ok(Some(i)),
            }
        }
        Fragment::Item => Err(format!(
            "a `{fragment:?}` fragment, whose end this reading does not find"
        )),
    }
}

/// The end of a fragment that runs until one of `stops` at the top level
/// (outside groups and `<…>` generics). An expression's `|…|` closure
/// parameters and `::<…>` turbofish are stepped over; any other `<` in an
/// expression is refused, since a comparison and generics read alike here.
fn run_end(
    trees: &[Tt],
    start: usize,
    stops: &[&str],
    expression: bool,
) -> Result<Option<usize>, String> {
    let mut i = start;
    let mut angle = 0usize;
    let mut awaiting_block = false;
    while i < trees.len() {
        let tree = &trees[i];
        let text = match tree {
            Tt::Leaf(l) => l.text.as_str(),
            Tt::Group(Delim::Brace, _) if !expression && i > start => {
                return Err(
                    "a type or path followed by a block, whose end this reading does not find"
                        .into(),
                );
            }
            _ => "",
        };
        if angle == 0
            && stops.contains(&text)
            && !matches!(tree, Tt::Leaf(l) if l.kind == LeafKind::Literal)
        {
            break;
        }
        if i == start && expression && !may_begin_expression(tree) {
            return Ok(None);
        }
        // `_` and `const { … }` are expressions to edition 2024's `expr`
        // and not to `expr_2021` or earlier editions' `expr`.
        if i == start && expression && (is_ident(Some(tree), "_") || is_ident(Some(tree), "const"))
        {
            return Err(format!(
                "an expression fragment starting with `{}`, which it matches in some editions only",
                render(std::slice::from_ref(tree))
            ));
        }
        // `if`, `while`, `match`, `for … in`: their condition or
        // scrutinee ends at the first block (no struct literal there).
        if expression
            && ["if", "while", "match", "for"]
                .iter()
                .any(|k| is_ident(Some(tree), k))
        {
            awaiting_block = true;
        }
        let is_keyword_block = awaiting_block && matches!(tree, Tt::Group(Delim::Brace, _));
        if is_keyword_block {
            awaiting_block = false;
        }
        if i > start && !is_keyword_block && runs_on(&trees[i - 1], tree, expression) {
            return Err(format!(
                "a fragment where `{}` follows `{}`, where rustc's parser may end it",
                render(std::slice::from_ref(tree)),
                render(&trees[i - 1..i])
            ));
        }
        if expression {
            let starts_operand = i == start
                || matches!(&trees[i - 1], Tt::Leaf(l) if l.kind == LeafKind::Punct && l.text != ")")
                || is_ident(trees.get(i - 1), "move");
            if (text == "|" && starts_operand) || text == "||" {
                if text == "|" {
                    // Closure parameters, to the next `|`.
                    let close = trees[i + 1..].iter().position(|t| is_punct(Some(t), "|"));
                    match close {
                        Some(offset) => i += offset + 2,
                        None => return Err("an unclosed closure parameter list".into()),
                    }
                } else {
                    i += 1;
                }
                continue;
            }
            if text == "<" && is_punct(i.checked_sub(1).and_then(|p| trees.get(p)), "::") {
                angle += 1;
            } else if text == "<" || text == "<<" || (text == ">" || text == ">>") && angle == 0 {
                return Err(
                    "an expression with `<` or `>`, whose end this reading does not find".into(),
                );
            } else if text == ">" {
                angle -= 1;
            } else if text == ">>" {
                angle = angle.saturating_sub(2);
            }
        } else if text == "<" {
            angle += 1;
        } else if text == "<<" {
            angle += 2;
        } else if text == ">" && angle > 0 {
            angle -= 1;
        } else if text == ">>" && angle > 0 {
            angle = angle.saturating_sub(2);
        }
        i += 1;
    }
    Ok((i > start).then_some(i))
}

/// Keywords that no expression starts with: a rule whose `$e:expr` stands
/// there does not match (rustc tries the next rule). rustc's
/// `ident_can_begin_expr`: every reserved word but the few that lead an
/// expression, the reserved-for-later ones (`priv`, `typeof`) included.
const NOT_EXPRESSION_STARTS: &[&str] = &[
    "as", "dyn", "else", "enum", "extern", "fn", "impl", "in", "mod", "pub", "ref", "struct",
    "trait", "type", "use", "where", "mut", "abstract", "become", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual",
];

/// Whether an expression may start with `tree`, as rustc's
/// `can_begin_expr` tells (conservatively: what it lets through is parsed
/// and checked by [`runs_on`]).
fn may_begin_expression(tree: &Tt) -> bool {
    match tree {
        Tt::Leaf(l) => match l.kind {
            LeafKind::Ident => !NOT_EXPRESSION_STARTS.contains(&l.text.as_str()),
            LeafKind::Literal | LeafKind::Lifetime => true,
            LeafKind::Punct => matches!(
                l.text.as_str(),
                "-" | "!" | "*" | "&" | "&&" | "|" | "||" | ".." | "..=" | "<" | "<<" | "::" | "#"
            ),
        },
        Tt::Group(..) | Tt::Opaque(..) => true,
    }
}

/// Keywords after which a type or pattern goes on with another word
/// (`dyn Trait`, `&mut T`, `ref mut x`, `extern "C" fn`).
const TYPE_PREFIX_KEYWORDS: &[&str] = &[
    "dyn", "impl", "mut", "const", "unsafe", "extern", "fn", "ref", "box", "for",
];

/// Whether `tree` after `prev` is where rustc's parser ends the fragment
/// (two operands side by side, `file "x"`, `a b`), or may: this reading runs
/// to the next follow token, so it cannot say where the fragment ends.
fn runs_on(prev: &Tt, tree: &Tt, expression: bool) -> bool {
    let prev_ident = matches!(prev, Tt::Leaf(l) if l.kind == LeafKind::Ident);
    if expression {
        let prev_operand = match prev {
            Tt::Leaf(l) => match l.kind {
                // A word an operand follows: `&mut x`, `move || x`,
                // `return x`, `&raw const x`, and the keywords that lead an
                // expression (`match x { … }`, `if c { … } else { … }`,
                // `for p in it { … }`, `while let Some(x) = y { … }`).
                LeafKind::Ident => !matches!(
                    l.text.as_str(),
                    "as" | "move"
                        | "mut"
                        | "box"
                        | "async"
                        | "const"
                        | "static"
                        | "raw"
                        | "return"
                        | "break"
                        | "yield"
                        | "match"
                        | "if"
                        | "while"
                        | "for"
                        | "in"
                        | "let"
                        | "else"
                        | "loop"
                        | "unsafe"
                ),
                LeafKind::Literal | LeafKind::Lifetime => true,
                LeafKind::Punct => l.text == "?",
            },
            Tt::Group(..) | Tt::Opaque(..) => true,
        };
        let operand = match tree {
            Tt::Leaf(l) => match l.kind {
                // A keyword that goes on an expression (`x as T`,
                // `for p in it`, `} else {`) is no operand.
                LeafKind::Ident => {
                    l.text != "else" && !NOT_EXPRESSION_STARTS.contains(&l.text.as_str())
                }
                LeafKind::Literal | LeafKind::Lifetime => true,
                LeafKind::Punct => false,
            },
            // A call, an index; a struct literal or a keyword's block.
            Tt::Group(Delim::Paren | Delim::Bracket, _) => false,
            Tt::Group(Delim::Brace, _) => !prev_ident,
            Tt::Opaque(..) => true,
        };
        return prev_operand && operand;
    }
    let prev_word = match prev {
        Tt::Leaf(l) => match l.kind {
            LeafKind::Ident => !TYPE_PREFIX_KEYWORDS.contains(&l.text.as_str()),
            LeafKind::Literal => true,
            LeafKind::Lifetime | LeafKind::Punct => false,
        },
        Tt::Group(..) | Tt::Opaque(..) => true,
    };
    let word = match tree {
        Tt::Leaf(l) => l.kind != LeafKind::Punct,
        Tt::Group(Delim::Paren, _) => !prev_ident,
        Tt::Group(..) | Tt::Opaque(..) => true,
    };
    prev_word && word
}

/// The variables a matcher binds, at any depth.
fn variables(pats: &[Pat], out: &mut Vec<String>) {
    for pat in pats {
        match pat {
            Pat::Var(name, _) => out.push(name.clone()),
            Pat::Group(_, inner) | Pat::Rep(inner, _, _) => variables(inner, out),
            Pat::Leaf(_) => {}
        }
    }
}

/// The ways `pats` can match a prefix of `trees[start..]`: each end and
/// its bindings.
struct Matcher {
    explored: usize,
}

impl Matcher {
    fn budget(&mut self, more: usize) -> Result<(), String> {
        self.explored += more;
        if self.explored > MAX_ALTERNATIVES {
            return Err("a macro call whose matching explores too many alternatives".into());
        }
        Ok(())
    }

    /// The ways `pats` match `trees` from `start`: to the end when `full`,
    /// else to any point.
    fn sequence(
        &mut self,
        pats: &[Pat],
        trees: &[Tt],
        start: usize,
        full: bool,
    ) -> Result<Vec<(usize, Bindings)>, String> {
        let mut states = vec![(start, Bindings::new())];
        for (index, pat) in pats.iter().enumerate() {
            let follow = match pats.get(index + 1) {
                Some(next) => Follow::Pat(next),
                None if full => Follow::End,
                None => Follow::Any,
            };
            let mut next = Vec::new();
            for (at, bindings) in states {
                for (end, more) in self.one(pat, trees, at, follow)? {
                    let mut merged = bindings.clone();
                    merged.extend(more);
                    next.push((end, merged));
                }
            }
            self.budget(next.len())?;
            if next.is_empty() {
                return Ok(next);
            }
            states = next;
        }
        if full {
            states.retain(|(end, _)| *end == trees.len());
        }
        Ok(states)
    }

    fn one(
        &mut self,
        pat: &Pat,
        trees: &[Tt],
        at: usize,
        follow: Follow<'_>,
    ) -> Result<Vec<(usize, Bindings)>, String> {
        match pat {
            Pat::Leaf(leaf) => Ok(match trees.get(at) {
                Some(Tt::Leaf(got)) if got == leaf => vec![(at + 1, Bindings::new())],
                _ => Vec::new(),
            }),
            Pat::Group(delim, inner) => match trees.get(at) {
                Some(Tt::Group(got, inside)) if got == delim => Ok(self
                    .sequence(inner, inside, 0, true)?
                    .into_iter()
                    .map(|(_, b)| (at + 1, b))
                    .collect()),
                _ => Ok(Vec::new()),
            },
            Pat::Var(name, fragment) => {
                let end = match trees.get(at) {
                    Some(Tt::Opaque(captured, _)) => {
                        let accepts = *fragment == Fragment::Tt
                            || captured == fragment
                            || (*fragment == Fragment::Expr && *captured == Fragment::Literal);
                        if !accepts {
                            return Err(format!(
                                "a `{captured:?}` fragment passed on to `${name}:{fragment:?}`, which this reading cannot match as rustc does"
                            ));
                        }
                        // `$e + 1` passed on is one expression, which runs
                        // past the captured fragment.
                        let stops: &[&str] = match fragment {
                            Fragment::Expr | Fragment::Stmt => &[",", ";", "=>"],
                            Fragment::Ty | Fragment::Path => {
                                &["=>", ",", "=", "|", ";", ":", ">", ">>", "as", "where"]
                            }
                            Fragment::Pat => &["=>", ",", "=", "if", "in"],
                            Fragment::PatParam => &["=>", ",", "=", "|", "if", "in"],
                            // One token, whatever follows.
                            _ => &[],
                        };
                        let alone = stops.is_empty()
                            || match trees.get(at + 1) {
                                None => true,
                                Some(Tt::Leaf(l)) => {
                                    l.kind != LeafKind::Literal && stops.contains(&l.text.as_str())
                                }
                                Some(Tt::Group(delim, _)) => {
                                    matches!(fragment, Fragment::Ty | Fragment::Path)
                                        && *delim != Delim::Paren
                                }
                                Some(Tt::Opaque(..)) => false,
                            };
                        if alone {
                            Some(at + 1)
                        } else if matches!(fragment, Fragment::Expr | Fragment::Stmt) {
                            fragment_end(*fragment, trees, at)?
                        } else {
                            return Err(format!(
                                "a `{captured:?}` fragment passed on with more tokens after it to `${name}:{fragment:?}`, whose end this reading does not find"
                            ));
                        }
                    }
                    _ => fragment_end(*fragment, trees, at)?,
                };
                Ok(end
                    .map(|end| {
                        let bound = Bound::One(*fragment, trees[at..end].to_vec());
                        (end, Bindings::from([(name.clone(), bound)]))
                    })
                    .into_iter()
                    .collect())
            }
            Pat::Rep(body, sep, op) => self.repetition(body, sep.as_ref(), *op, trees, at, follow),
        }
    }

    /// `$( body ) sep op` from `at`: every number of iterations after
    /// which what follows can go on, each with its bindings.
    fn repetition(
        &mut self,
        body: &[Pat],
        sep: Option<&Leaf>,
        op: RepOp,
        trees: &[Tt],
        at: usize,
        follow: Follow<'_>,
    ) -> Result<Vec<(usize, Bindings)>, String> {
        let mut names = Vec::new();
        variables(body, &mut names);
        // (position, iterations so far, their bindings newest first): a
        // shared list, so that a long repetition costs linear time.
        let mut frontier: Vec<(usize, usize, Option<Rc<Iteration>>)> = vec![(at, 0, None)];
        let mut done = Vec::new();
        while let Some((pos, count, iterations)) = frontier.pop() {
            self.budget(1)?;
            if (op != RepOp::Plus || count > 0) && follow.may_go_on(trees, pos) {
                done.push((pos, iterations.clone()));
            }
            if op == RepOp::Question && count > 0 {
                continue;
            }
            let from = match (sep, count) {
                (Some(sep), 1..) => match trees.get(pos) {
                    Some(Tt::Leaf(got)) if got == sep => pos + 1,
                    _ => continue,
                },
                _ => pos,
            };
            for (end, bindings) in self.sequence(body, trees, from, false)? {
                // An iteration that consumes nothing would repeat forever.
                if end > pos {
                    let next = Rc::new(Iteration {
                        bindings,
                        previous: iterations.clone(),
                    });
                    frontier.push((end, count + 1, Some(next)));
                }
            }
        }
        Ok(done
            .into_iter()
            .map(|(end, iterations)| {
                let mut each = Vec::new();
                let mut node = iterations.as_deref();
                while let Some(iteration) = node {
                    each.push(&iteration.bindings);
                    node = iteration.previous.as_deref();
                }
                each.reverse();
                let mut bindings = Bindings::new();
                for name in &names {
                    let seq = each.iter().filter_map(|b| b.get(name).cloned()).collect();
                    bindings.insert(name.clone(), Bound::Seq(seq));
                }
                (end, bindings)
            })
            .collect())
    }
}

/// One iteration of a repetition, and the one before it.
struct Iteration {
    bindings: Bindings,
    previous: Option<Rc<Iteration>>,
}

/// What must come after a matcher element: the next element, the end of
/// the tokens, or anything (inside a repetition's body).
#[derive(Clone, Copy)]
enum Follow<'p> {
    Pat(&'p Pat),
    End,
    Any,
}

impl Follow<'_> {
    /// Whether matching can go on at `pos`: a cheap test that prunes the
    /// iteration counts of a repetition to those the rest can follow.
    fn may_go_on(self, trees: &[Tt], pos: usize) -> bool {
        match self {
            Follow::End => pos == trees.len(),
            Follow::Any | Follow::Pat(Pat::Rep(..) | Pat::Var(..)) => true,
            Follow::Pat(Pat::Leaf(leaf)) => {
                matches!(trees.get(pos), Some(Tt::Leaf(got)) if got == leaf)
            }
            Follow::Pat(Pat::Group(delim, _)) => {
                matches!(trees.get(pos), Some(Tt::Group(got, _)) if got == delim)
            }
        }
    }
}

/// A `macro_rules!` rule, parsed.
pub(super) struct Rule {
    matcher: Vec<Pat>,
    transcriber: Vec<Tr>,
}

impl Rule {
    pub(super) fn parse(matcher: &str, transcriber: &str) -> Result<Rule, String> {
        Ok(Rule {
            matcher: parse_matcher(&parse(matcher)?)?,
            transcriber: parse_transcriber(&parse(transcriber)?)?,
        })
    }
}

/// What the first of `rules` that matches `args` transcribes; `Ok(None)`
/// when none matches.
pub(super) fn expand(rules: &[Rule], args: &[Tt]) -> Result<Option<Vec<Tt>>, String> {
    for rule in rules {
        let mut matcher = Matcher { explored: 0 };
        let complete = matcher
            .sequence(&rule.matcher, args, 0, true)?
            .into_iter()
            .next();
        if let Some((_, bindings)) = complete {
            let mut out = Vec::new();
            transcribe(&rule.transcriber, &bindings, &mut Vec::new(), &mut out)?;
            return Ok(Some(out));
        }
    }
    Ok(None)
}

/// `bound` at the repetition indices `at` (outermost first), as deep as it
/// repeats.
fn lookup<'b>(mut bound: &'b Bound, at: &[usize]) -> Result<&'b Bound, String> {
    for &index in at {
        match bound {
            Bound::Seq(items) => {
                bound = items
                    .get(index)
                    .ok_or("a repetition whose variables repeat a different number of times")?;
            }
            Bound::One(..) => break,
        }
    }
    Ok(bound)
}

/// How many times the variables in `body` repeat at `at`, if any does.
fn repeat_count(body: &[Tr], bindings: &Bindings, at: &[usize]) -> Result<Option<usize>, String> {
    let mut count = None;
    for tr in body {
        let found = match tr {
            Tr::Var(name) => match bindings.get(name) {
                Some(bound) => match lookup(bound, at)? {
                    Bound::Seq(items) => Some(items.len()),
                    Bound::One(..) => None,
                },
                None => None,
            },
            Tr::Group(_, inner) | Tr::Rep(inner, _) => repeat_count(inner, bindings, at)?,
            Tr::Tree(_) => None,
        };
        match (count, found) {
            (Some(a), Some(b)) if a != b => {
                return Err(
                    "a repetition whose variables repeat a different number of times".into(),
                );
            }
            (None, found) => count = found,
            _ => {}
        }
    }
    Ok(count)
}

fn transcribe(
    trs: &[Tr],
    bindings: &Bindings,
    at: &mut Vec<usize>,
    out: &mut Vec<Tt>,
) -> Result<(), String> {
    if out.len() > MAX_TREES {
        return Err("a macro expansion too large to read".into());
    }
    for tr in trs {
        match tr {
            Tr::Tree(tree) => out.push(tree.clone()),
            Tr::Group(delim, inner) => {
                let mut trees = Vec::new();
                transcribe(inner, bindings, at, &mut trees)?;
                out.push(Tt::Group(*delim, trees));
            }
            Tr::Var(name) => match bindings.get(name) {
                // Not a variable of the matcher: rustc emits `$name` as
                // it stands (a nested macro_rules! of the expansion).
                None => {
                    out.push(Tt::Leaf(Leaf {
                        kind: LeafKind::Punct,
                        text: "$".into(),
                    }));
                    out.push(Tt::Leaf(Leaf {
                        kind: LeafKind::Ident,
                        text: name.clone(),
                    }));
                }
                Some(bound) => match lookup(bound, at)? {
                    Bound::One(fragment, trees) if fragment.is_transparent() => {
                        out.extend(trees.iter().cloned());
                    }
                    Bound::One(fragment, trees) => out.push(Tt::Opaque(*fragment, trees.clone())),
                    Bound::Seq(_) => {
                        return Err(format!(
                            "`${name}`, still repeating where it is transcribed"
                        ));
                    }
                },
            },
            Tr::Rep(body, sep) => {
                let Some(count) = repeat_count(body, bindings, at)? else {
                    return Err(
                        "a repetition in a transcriber with no variable that repeats".into(),
                    );
                };
                for index in 0..count {
                    if index > 0
                        && let Some(sep) = sep
                    {
                        out.push(Tt::Leaf(sep.clone()));
                    }
                    at.push(index);
                    let result = transcribe(body, bindings, at, out);
                    at.pop();
                    result?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_text(rules: &[(&str, &str)], args: &str) -> Result<Option<String>, String> {
        let rules: Vec<Rule> = rules
            .iter()
            .map(|(m, t)| Rule::parse(m, t))
            .collect::<Result<_, _>>()?;
        Ok(expand(&rules, &parse(args)?)?.map(|t| render(&t)))
    }

    #[test]
    fn the_first_matching_rule_is_transcribed_with_its_bindings() {
        // bevy's embedded_asset!: two arguments forward to three.
        let rules = [
            (
                "$app: expr, $path: expr",
                "{ $crate::embedded_asset!($app, \"src\", $path) }",
            ),
            (
                "$app: expr, $source: expr, $path: expr",
                "{ include_bytes!($path) }",
            ),
        ];
        assert_eq!(
            expand_text(&rules, "app, \"x.wgsl\"").unwrap().unwrap(),
            "{$crate :: embedded_asset ! (app , \"src\" , \"x.wgsl\")}"
        );
        assert_eq!(
            expand_text(&rules, "app, \"src\", \"x.wgsl\"")
                .unwrap()
                .unwrap(),
            "{include_bytes ! (\"x.wgsl\")}"
        );
        assert_eq!(expand_text(&rules, "").unwrap(), None);
    }

    #[test]
    fn repetitions_bind_and_transcribe_per_iteration() {
        // deno's test_file!: `$($file:literal),*`.
        let rules = [(
            "$($file:literal),*",
            "$(include_str!(concat!(\"js/\", $file));)*",
        )];
        assert_eq!(
            expand_text(&rules, "\"a.js\", \"b.js\"").unwrap().unwrap(),
            "include_str ! (concat ! (\"js/\" , \"a.js\")) ; include_str ! (concat ! (\"js/\" , \"b.js\")) ;"
        );
        // An optional trailing group and a nested repetition.
        let rules = [(
            "$name:ident $(, deps = [ $( $dep:ident ),* ])?",
            "$( $( use $dep; )* )?",
        )];
        assert_eq!(
            expand_text(&rules, "ext, deps = [a, b]").unwrap().unwrap(),
            "use a ; use b ;"
        );
        assert_eq!(expand_text(&rules, "ext").unwrap().unwrap(), "");
    }

    #[test]
    fn a_repetition_may_end_where_the_rest_of_the_matcher_begins() {
        // Greedy matching would eat the last `a` and fail; rustc does not.
        let rules = [("$(a)* a b", "ok")];
        assert_eq!(expand_text(&rules, "a a a b").unwrap().unwrap(), "ok");
    }

    #[test]
    fn expressions_end_at_their_follow_tokens_and_closures_are_stepped_over() {
        let rules = [("$a:expr, $p:literal $(, $s:expr)?", "$p")];
        assert_eq!(
            expand_text(&rules, "app, \"x.wesl\", |s| { vec![s, 1] }")
                .unwrap()
                .unwrap(),
            "\"x.wesl\""
        );
        assert_eq!(
            expand_text(&rules, "f::<A, B>(x), \"y\"").unwrap().unwrap(),
            "\"y\""
        );
        let err = expand_text(&rules, "a < b, \"y\"").unwrap_err();
        assert!(err.contains("`<`"), "{err}");
    }

    #[test]
    fn a_forwarded_expression_is_one_opaque_token() {
        // A captured expr cannot match plain tokens of a nested matcher.
        let inner = [("\"x\"", "literal_rule"), ("$e:expr", "expr_rule")];
        let rules: Vec<Rule> = inner
            .iter()
            .map(|(m, t)| Rule::parse(m, t).unwrap())
            .collect();
        let forwarded = vec![Tt::Opaque(Fragment::Expr, parse("\"x\"").unwrap())];
        assert_eq!(
            render(&expand(&rules, &forwarded).unwrap().unwrap()),
            "expr_rule"
        );
        // …and a literal specifier cannot be told apart: refused.
        let rules = vec![Rule::parse("$l:literal", "l").unwrap()];
        assert!(expand(&rules, &forwarded).is_err());
    }

    #[test]
    fn a_rule_rustc_leaves_is_not_taken() {
        // `@` begins no expression: rustc tries the next rule.
        let rules = [("$e:expr", "expr"), ("@raw $p:literal", "raw")];
        assert_eq!(expand_text(&rules, "@raw \"x\"").unwrap().unwrap(), "raw");
        // rustc's expression is `file`, then the rule fails on the
        // literal; where that is, this reading does not guess.
        let rules = [("$e:expr", "expr"), ("file $p:literal", "file")];
        let err = expand_text(&rules, "file \"x\"").unwrap_err();
        assert!(err.contains("where rustc's parser may end it"), "{err}");
        assert_eq!(expand_text(&rules, "&mut x").unwrap().unwrap(), "expr");
        // Edition-dependent fragments are refused, not guessed.
        assert!(expand_text(&rules, "_").is_err());
        let rules = [("$a:pat | $b:ident", "two"), ("$($t:tt)*", "any")];
        assert!(expand_text(&rules, "_ | x").is_err());
    }

    #[test]
    fn an_expression_never_starts_at_let_or_else_and_an_item_statement_is_refused() {
        // rustc's `expr` does not start at `let` (nor `else`, nor a
        // reserved word): the next rule is taken.
        let rules = [("$e:expr", "expr"), ("let $n:ident = $v:expr", "let")];
        assert_eq!(expand_text(&rules, "let a = 1").unwrap().unwrap(), "let");
        let rules = [("$e:expr", "expr"), ("else $n:ident", "else")];
        assert_eq!(expand_text(&rules, "else a").unwrap().unwrap(), "else");
        // A `stmt` is `let` too, and an item, whose end is not found here.
        let rules = [("$s:stmt", "stmt"), ("$($t:tt)*", "any")];
        assert_eq!(expand_text(&rules, "let a = 1").unwrap().unwrap(), "stmt");
        let err = expand_text(&rules, "fn f() {}").unwrap_err();
        assert!(err.contains("an item to rustc"), "{err}");
    }

    #[test]
    fn a_type_path_or_pattern_rustc_does_not_start_fails_the_rule() {
        let rules = [("$t:ty", "ty"), ("$b:literal", "literal")];
        assert_eq!(expand_text(&rules, "true").unwrap().unwrap(), "literal");
        assert_eq!(expand_text(&rules, "bool").unwrap().unwrap(), "ty");
        let rules = [("$t:ty", "ty"), ("@ $n:ident", "at")];
        assert_eq!(expand_text(&rules, "@prod").unwrap().unwrap(), "at");
        let rules = [("$p:path", "path"), ("& $n:ident", "and")];
        assert_eq!(expand_text(&rules, "&prod").unwrap().unwrap(), "and");
        assert_eq!(expand_text(&rules, "a::b<C>").unwrap().unwrap(), "path");
        assert!(expand_text(&rules, "a & b").is_err());
        let rules = [("$t:ty", "ty")];
        for ty in [
            "&'a mut Vec<u8>",
            "Box<dyn Fn(u8) -> u8 + Send>",
            "[u8; 4]",
            "*const T",
        ] {
            assert_eq!(expand_text(&rules, ty).unwrap().unwrap(), "ty", "{ty}");
        }
    }

    #[test]
    fn doc_comments_are_the_attributes_rustc_makes_of_them() {
        let rules = [
            ("$n:ident", "bare"),
            ("$(#[$($a:tt)*])* $n:ident", "$($($a)*)*"),
        ];
        assert_eq!(
            expand_text(&rules, "/// a\n/** b */ // no\n/* no */ x")
                .unwrap()
                .unwrap(),
            "doc = \" a\" doc = \" b \""
        );
        assert_eq!(expand_text(&rules, "//// no\n x").unwrap().unwrap(), "bare");
        // `$(#[$m:meta])*`, as most item-making macros take attributes.
        let rules = [
            ("$n:ident", "bare"),
            ("$(#[$m:meta])* $n:ident", "$(#[$m])* $n"),
        ];
        assert_eq!(
            expand_text(&rules, "/// a\n#[cfg(test)] #[inline] x")
                .unwrap()
                .unwrap(),
            "# [doc = \" a\"] # [cfg (test)] # [inline] x"
        );
    }

    #[test]
    fn a_doc_comment_in_call_arguments_is_an_attribute_not_dropped() {
        let doc = |text: &str| render(&parse_call_arguments(text).unwrap());
        assert_eq!(doc("/// docs\n\"a.txt\""), "# [doc = \" docs\"] \"a.txt\"");
        assert_eq!(
            doc("/** docs */ \"a.txt\""),
            "# [doc = \" docs \"] \"a.txt\""
        );
        assert_eq!(
            doc("//! docs\n\"a.txt\""),
            "# ! [doc = \" docs\"] \"a.txt\""
        );
        // Plain comments are white space to rustc too.
        assert_eq!(
            doc("// note\n//// rule\n/* c */ /**/ \"a.txt\""),
            "\"a.txt\""
        );
        // Inside a literal it is text.
        assert_eq!(doc("\"/// not a comment\""), "\"/// not a comment\"");
    }

    #[test]
    fn keyword_led_expressions_run_to_their_follow_token() {
        // deno's `extension!(…, middleware = |op| match op.name { … }, …)`.
        let rules = [("$a:expr, $b:expr", "$b")];
        for args in [
            "|op| match op.name { \"x\" => 1, _ => 2 }, \"p\"",
            "if c { 1 } else { 2 }, \"p\"",
            "for x in it { f(x) }, \"p\"",
            "while let Some(x) = y.next() { f(x) }, \"p\"",
            "loop { break 1 }, \"p\"",
            "x as u8, \"p\"",
        ] {
            assert_eq!(
                expand_text(&rules, args).unwrap().unwrap(),
                "\"p\"",
                "{args}"
            );
        }
        // Two operands side by side still end where rustc may end them.
        assert!(expand_text(&rules, "file prod, \"p\"").is_err());
    }

    #[test]
    fn punctuation_is_glued_as_rustc_glues_it() {
        let rules = [("$a:tt $b:tt", "$b")];
        assert_eq!(expand_text(&rules, "=> x").unwrap().unwrap(), "x");
        assert_eq!(expand_text(&rules, "= >").unwrap().unwrap(), ">");
    }
}
