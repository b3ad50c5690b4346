//! rustc's own include forms: `include_str!`, `include_bytes!`, `include!`
//! called by name, by path or through a `use … as` alias, handed to a macro
//! as a token, or followed by a metavariable in a macro body; and the files
//! of `#[debugger_visualizer]`. Must not: decide what a path argument
//! evaluates to (that is `path_expr.rs`).

use std::path::Path;

use super::path_expr::evaluate_path;
use super::path_macros::{PathMacroForm, PathReads, path_macro};
use super::source::{Cursor, Range, Source, inner, is_group};
use super::walker::TokenWalker;
use super::{CallerRelative, Embed, EmbedTarget, FileContext, Site};
use crate::key::lexer::{self, Delim, Kind, Lexer, Token};

/// The macros that make rustc read a file named by their argument.
pub const INCLUDE_MACROS: &[&str] = &["include_str", "include_bytes", "include"];

/// The standard library's macros that take tokens and never invoke one
/// they are handed as a macro (formatting, assertions, `vec!`,
/// `matches!`): `write!(f, "{include}", include = x)` hands over nothing.
/// A `macro_rules!` of the workspace with one of these names is the
/// workspace's, and judged as such.
pub const STD_MACROS: &[&str] = &[
    "print",
    "println",
    "eprint",
    "eprintln",
    "format",
    "format_args",
    "write",
    "writeln",
    "panic",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "unreachable",
    "unimplemented",
    "todo",
    "vec",
    "matches",
    "dbg",
    "stringify",
    "concat",
    "cfg",
    "compile_error",
    "env",
    "option_env",
    "line",
    "column",
    "file",
    "module_path",
];

/// Macros whose arguments are the tokens they emit: the quote crate's
/// `quote!`/`quote_spanned!` and syn's `parse_quote!`/`parse_quote_spanned!`,
/// with the crate that defines each. A proc macro writes
/// `quote! { include_str!(#path) }` to make *its caller* include a file;
/// compiling the proc macro reads nothing.
pub const TOKEN_OUTPUT_MACROS: &[(&str, &str)] = &[
    ("quote", "quote"),
    ("quote_spanned", "quote"),
    ("parse_quote", "syn"),
    ("parse_quote_spanned", "syn"),
];

impl FileContext<'_> {
    /// The include macro a call of `name!` is, if any.
    pub(super) fn include_macro(&self, name: &str) -> Option<String> {
        if INCLUDE_MACROS.contains(&name) {
            return Some(name.to_owned());
        }
        self.aliases.get(name).cloned()
    }
}

/// Whether `text` may rename something to one of `names`: the word `as`
/// followed by one of them (`r#` allowed), or by a comment, which the
/// tokens would skip. A byte test before [`use_renames`] lexes the file.
pub fn may_rename_to(text: &str, names: &[&str]) -> bool {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    memchr::memmem::find_iter(bytes, b"as").any(|at| {
        if at.checked_sub(1).is_some_and(|i| is_ident(bytes[i])) {
            return false;
        }
        let rest = &bytes[at + 2..];
        let after = rest.trim_ascii_start();
        if after.len() == rest.len() && after.first().is_some_and(|b| *b != b'/') {
            return false;
        }
        if after.starts_with(b"/") {
            return true;
        }
        let after = after.strip_prefix(b"r#").unwrap_or(after);
        let end = after
            .iter()
            .position(|b| !is_ident(*b))
            .unwrap_or(after.len());
        names.iter().any(|name| name.as_bytes() == &after[..end])
    })
}

/// Every `A as B` of the `use` declarations of `text` (flat: a use tree's
/// braces hold no `;`). Empty when the text does not tokenise.
pub fn use_renames(text: &str) -> Vec<(String, String)> {
    let mut lexer = Lexer::new(text, 0, text.len());
    let mut window: [Option<Token>; 3] = [None; 3];
    let mut in_use = false;
    let mut renames = Vec::new();
    let name = |token: Option<Token>| -> Option<&str> {
        let token = token?;
        match token.kind {
            Kind::Ident => Some(&text[token.start..token.end]),
            Kind::RawIdent => Some(&text[token.start + 2..token.end]),
            _ => None,
        }
    };
    while let Ok(Some(token)) = lexer.next_token() {
        window = [window[1], window[2], Some(token)];
        let word = &text[token.start..token.end];
        match token.kind {
            Kind::Ident if word == "use" => in_use = true,
            Kind::Punct if word == ";" => in_use = false,
            _ => {}
        }
        if in_use
            && name(window[1]) == Some("as")
            && window[1].is_some_and(|t| t.kind == Kind::Ident)
        {
            if let (Some(from), Some(to)) = (name(window[0]), name(window[2])) {
                renames.push((from.to_owned(), to.to_owned()));
            }
        }
    }
    renames
}

impl TokenWalker<'_, '_, '_> {
    /// Follows `use … ;` statements at one level: `in_use` says whether the
    /// cursor is inside one; returns whether it still is. Every `A as B`
    /// of the statement is recorded, nested groups (`use std::{include_str
    /// as s}`) included.
    pub(super) fn track_use(&mut self, cursor: &mut Cursor<'_, '_>, in_use: bool) -> bool {
        let src = self.src;
        let token = cursor.peek(0);
        if src.is_ident(token, "use") {
            return true;
        }
        if !in_use {
            return false;
        }
        if src.is_punct(token, b';') {
            return false;
        }
        if let Some(group) = token.filter(|t| is_group(Some(*t), None)) {
            self.record_use_renames(inner(group));
        }
        self.record_rename_at(cursor);
        true
    }

    /// Every `A as B` in a group of a `use` statement.
    pub(super) fn record_use_renames(&mut self, range: Range) {
        let mut cursor = self.src.cursor(range);
        while let Some(token) = cursor.peek(0) {
            if is_group(Some(token), None) {
                self.record_use_renames(inner(token));
            }
            self.record_rename_at(&mut cursor);
            cursor.advance(1);
        }
    }

    pub(super) fn record_rename_at(&mut self, cursor: &mut Cursor<'_, '_>) {
        let src = self.src;
        if let (Some(from), true, Some(to)) = (
            src.ident_name(cursor.peek(0)),
            src.is_ident(cursor.peek(1), "as"),
            src.ident_name(cursor.peek(2)),
        ) {
            self.scan.use_renames.push((from.to_owned(), to.to_owned()));
        }
    }

    /// At `debugger_visualizer(…)` (an attribute, perhaps inside
    /// `cfg_attr`): records the `natvis_file` / `gdb_script_file` rustc
    /// reads, relative to the directory of this file (checked with rustc
    /// 1.95's dep-info: not the module directory).
    pub(super) fn record_debugger_visualizers(&mut self, cursor: &mut Cursor<'_, '_>) {
        let src = self.src;
        let (Some(name), Some(args)) = (cursor.peek(0), cursor.peek(1)) else {
            return;
        };
        if src.ident_name(Some(name)) != Some("debugger_visualizer")
            || !is_group(Some(args), Some(Delim::Paren))
        {
            return;
        }
        let line = src.line(name.start);
        let file = self.ctx.file;
        let mut embeds = Vec::new();
        src.for_each_part(inner(args), 3, |part, tokens| {
            let target = match tokens {
                Some(&[key, eq, lit])
                    if src.is_punct(Some(eq), b'=') && lit.kind == Kind::Literal =>
                {
                    match lexer::string_value(src.text(lit)) {
                        Some(text) => {
                            EmbedTarget::File(file.parent().unwrap_or(Path::new("/")).join(text))
                        }
                        None => EmbedTarget::Unresolved(format!(
                            "{} = {}",
                            src.text(key),
                            src.text(lit)
                        )),
                    }
                }
                _ => EmbedTarget::Unresolved(format!("`{}`", src.snippet(part))),
            };
            embeds.push(Embed {
                macro_name: "#[debugger_visualizer]".into(),
                target,
                site: Site {
                    file: file.to_path_buf(),
                    line,
                },
                caller_relative: None,
            });
        });
        self.scan.embeds.extend(embeds);
    }

    /// `include_str $b (…)` in a `macro_rules!` body: the caller may pass
    /// the `!` (`m!(!)`), making it a call with a path no reading shows.
    pub(super) fn record_bang_from_caller(&mut self, token: Token) {
        let src = self.src;
        let Some(name) = src.ident_name(Some(token)) else {
            return;
        };
        let Some(include) = self.ctx.include_macro(name) else {
            return;
        };
        let macro_rules = self.in_macro_rules.clone().unwrap_or_default();
        self.scan.embeds.push(Embed {
            macro_name: format!("{include}!"),
            target: EmbedTarget::Unresolved(format!(
                "a path chosen where `{name}` is followed by a metavariable in macro_rules! {macro_rules}, whose caller may pass the `!` (write {include}! in the body)"
            )),
            site: Site {
                file: self.ctx.file.to_path_buf(),
                line: src.line(token.start),
            },
            caller_relative: None,
        });
    }

    /// An include macro's name handed to a macro as a token
    /// (`call!(include_str, "x")`): a `macro_rules!` may call it as
    /// `$m!(…)`, with a path no reading of the definition shows. Whether
    /// `handed_to` may is decided once the workspace's macros are known.
    pub(super) fn record_passed_include(
        &mut self,
        cursor: &mut Cursor<'_, '_>,
        token: Token,
        handed_to: String,
    ) {
        let src = self.src;
        let Some(name) = src.ident_name(Some(token)) else {
            return;
        };
        let Some(include) = self.ctx.include_macro(name) else {
            return;
        };
        // A macro's matcher may take any tokens around it (`$m:ident :`,
        // `x . $m`), so only a direct call (recorded already) is no
        // hand-over; `include_str !` with no arguments after it is one.
        if src.is_punct(cursor.peek(1), b'!') && is_group(cursor.peek(2), None) {
            return;
        }
        let embed = Embed {
            macro_name: format!("{include}!"),
            target: EmbedTarget::Unresolved(format!(
                "a path chosen where `{name}` is handed to {handed_to}! as a token, which may call it as `$m!(…)` with a path no reading shows (call {include}! directly)"
            )),
            site: Site {
                file: self.ctx.file.to_path_buf(),
                line: src.line(token.start),
            },
            caller_relative: None,
        };
        self.scan.passed_include.push(super::PassedInclude {
            embed,
            include,
            handed_to,
        });
    }

    /// Records `include_*!(…)` at the cursor; says whether there was one.
    pub(super) fn record_embed_at(&mut self, cursor: &mut Cursor<'_, '_>) -> bool {
        let Some((name, args, line)) = self.src.macro_call_at(cursor) else {
            return false;
        };
        match self.ctx.include_macro(name) {
            Some(include) => {
                self.record_embed(&include, args, line);
                true
            }
            None => {
                if let Some(definer) = &self.in_macro_rules {
                    self.scan
                        .macro_rules_calls
                        .push((definer.clone(), name.to_owned()));
                }
                if let Some(known) = path_macro(name, PathMacroForm::Call)
                    && known.reads == PathReads::AssemblerTemplate
                {
                    self.record_assembler_template(known, args, line);
                } else if let Some(known) = path_macro(name, PathMacroForm::Call) {
                    // Its arguments are still walked for embeds.
                    let arg = self.src.shape(args, 2).and_then(|tokens| match *tokens {
                        [] => Some(None),
                        [lit] | [lit, _] if lit.kind == Kind::Literal => {
                            lexer::string_value(self.src.text(lit)).map(Some)
                        }
                        _ => None,
                    });
                    self.record_path_macro_call(known, args, arg, line);
                }
                false
            }
        }
    }

    pub(super) fn record_embed(&mut self, macro_name: &str, args: Range, line: usize) {
        let (mut target, mut relative) = evaluate_path(self.src, args, self.ctx);
        if self.in_generated_macro && (relative.is_some() || target == EmbedTarget::FromCallers) {
            target = EmbedTarget::Unresolved(
                "a path read from the callers of a macro_rules! that another macro defines under a name its caller chooses (`macro_rules! $name`), whose callers ci-key cannot find".into(),
            );
            relative = None;
        }
        // In a macro body, a path built from the caller's tokens in a way
        // plain reading cannot follow is left to each call's expansion.
        if let (EmbedTarget::Unresolved(what), Some(_), false) =
            (&target, &self.in_macro_rules, self.in_generated_macro)
            && mentions_metavariable(self.src, args)
        {
            target = EmbedTarget::AtCalls(what.clone());
            relative = Some(String::new());
        }
        if target == EmbedTarget::FromCallers && self.in_macro_rules.is_none() {
            target = EmbedTarget::Unresolved(
                "a metavariable outside any macro_rules!, so ci-key cannot find its callers".into(),
            );
        }
        let caller_relative = match (&self.in_macro_rules, relative) {
            (Some(name), Some(text)) => Some(CallerRelative {
                macro_rules: name.clone(),
                text,
                is_pattern: matches!(target, EmbedTarget::Pattern(_)),
                reads: None,
            }),
            _ => None,
        };
        self.scan.embeds.push(Embed {
            macro_name: format!("{macro_name}!"),
            target,
            site: Site {
                file: self.ctx.file.to_path_buf(),
                line,
            },
            caller_relative,
        });
    }
}

/// Whether `range` holds a `macro_rules!` metavariable (`$name`).
fn mentions_metavariable(src: &Source<'_>, range: Range) -> bool {
    let mut lexer = Lexer::new(src.text, range.0, range.1);
    let mut after_dollar = false;
    while let Ok(Some(token)) = lexer.next_token() {
        if after_dollar && matches!(token.kind, Kind::Ident | Kind::RawIdent) {
            return true;
        }
        after_dollar = token.kind == Kind::Punct && src.text(token) == "$";
    }
    false
}
