//! The walk over one file's tokens: items (attributes, `mod`, `macro_rules!`,
//! visibility) at each level of a file or inline module, and every group
//! below them for embeds; the forms themselves are recorded by the sibling
//! modules. Must not: touch the file system.

use std::path::Path;

use super::macro_rules::calls_metavariable;
use super::modules::{inline_scope, module_decls};
use super::prefilter::group_may_reference_files;
use super::source::{Cursor, Range, Source, inner, is_attribute, is_group};
use super::{FileContext, FileScan};
use crate::key::lexer::{Delim, Kind, Token};

/// The smallest group [`TokenWalker::is_quiet`] searches before walking.
/// The byte search runs at gigabytes a second, the lexer at about 300 MB/s,
/// so searching pays down to groups a few dozen bytes long, where the
/// search's fixed cost catches up: at 256, every function body of the
/// `bench-key` workspace (about 200 bytes each) was lexed, and `scan_file`
/// on its files took twice as long as at 32.
const QUIET_MIN_BYTES: usize = 32;

pub(super) struct TokenWalker<'a, 'b, 's> {
    pub(super) ctx: &'a FileContext<'a>,
    pub(super) src: &'a Source<'s>,
    pub(super) scan: &'b mut FileScan,
    /// The `macro_rules!` whose body is being walked, if any.
    pub(super) in_macro_rules: Option<String>,
    /// Inside an inline module with `cfg_attr(…, path = …)` directories,
    /// where a module file's absence in one of them is expected.
    pub(super) in_alternative: bool,
    /// The macros whose arguments the walk is inside, innermost last.
    pub(super) macro_args: Vec<String>,
    /// Inside a `macro_rules! $name` that a macro body defines: its callers
    /// cannot be found by name.
    pub(super) in_generated_macro: bool,
    /// Whether groups the byte prefilter finds nothing in are skipped.
    pub(super) skip_quiet: bool,
}

impl TokenWalker<'_, '_, '_> {
    /// Finds `include_*!(…)` anywhere in a range, including nested groups.
    pub(super) fn walk_for_embeds(&mut self, range: Range) {
        let src = self.src;
        let mut cursor = src.cursor(range);
        let mut in_use = false;
        while let Some(token) = cursor.peek(0) {
            in_use = self.track_use(&mut cursor, in_use);
            if let Some(step) = self.walk_nested_macro_rules(&mut cursor, token) {
                cursor.advance(step);
                continue;
            }
            if self.record_ident_forms(&mut cursor, token) {
                cursor.advance(3);
                continue;
            }
            match token.kind {
                // Doc attributes in macro bodies are text, never printed.
                Kind::Open(Delim::Bracket) if src.is_doc_text(inner(token)) => {}
                Kind::Open(delim) => {
                    // An attribute is an attribute: `#[folder = "…"]`, never
                    // an array or index holding `folder(…)`.
                    if delim == Delim::Bracket && is_attribute(src, &cursor) {
                        self.record_attribute_forms(inner(token));
                    }
                    self.walk_group(&cursor, inner(token), |walker, range| {
                        walker.walk_for_embeds(range);
                    });
                }
                Kind::Literal => self.record_literal(token),
                Kind::Punct
                    if self.in_macro_rules.is_some()
                        && src.is_punct(Some(token), b'$')
                        && calls_metavariable(src, &mut cursor) =>
                {
                    let definer = self.in_macro_rules.clone().unwrap_or_default();
                    if !self.scan.metavariable_callers.contains(&definer) {
                        self.scan.metavariable_callers.push(definer);
                    }
                }
                _ => {}
            }
            cursor.advance(1);
        }
    }

    /// The token-only reading of a whole file or inline module body: embeds
    /// and literals everywhere, plus `[#[path = "…"]] [pub…] mod name ;|{…}`.
    pub(super) fn walk_items(&mut self, range: Range, scope: &Path, inline_depth: usize) {
        let src = self.src;
        let mut cursor = src.cursor(range);
        let mut path_attr: Option<String> = None;
        let mut cfg_paths: Vec<String> = Vec::new();
        let mut in_use = false;
        while let Some(token) = cursor.peek(0) {
            in_use = self.track_use(&mut cursor, in_use);
            if self.record_ident_forms(&mut cursor, token) {
                cursor.advance(3);
                continue;
            }
            match token.kind {
                Kind::Punct if src.is_punct(Some(token), b'#') => {
                    // `#[…]`, or an inner attribute `#![…]`.
                    let at = 1 + usize::from(src.is_punct(cursor.peek(1), b'!'));
                    if let Some(group) = cursor
                        .peek(at)
                        .filter(|g| is_group(Some(*g), Some(Delim::Bracket)))
                    {
                        let body = inner(group);
                        if let Some(path) = src.lexical_path_attribute(body) {
                            // rustc obeys the first `#[path]` (a later one is
                            // an "unused attribute"); the others are read too.
                            if path_attr.is_none() {
                                path_attr = Some(path);
                            } else {
                                cfg_paths.push(path);
                            }
                        } else if src.is_doc_text(body) {
                            // Documentation text is never printed.
                        } else {
                            self.record_attribute_forms(body);
                            if let Some(&[name, args]) = src.shape(body, 2).as_deref() {
                                if src.is_name(Some(name), "cfg_attr") && is_group(Some(args), None)
                                {
                                    cfg_paths.extend(src.cfg_attr_paths(inner(args)));
                                }
                            }
                            self.walk_for_embeds(body);
                        }
                        cursor.advance(at + 1);
                        continue;
                    }
                }
                // The body's `mod x;` declarations load files where the
                // macro is invoked (see `MacroModule`); its embeds are
                // resolved here and from its callers.
                Kind::Ident
                    if src.text(token) == "macro_rules"
                        && src.is_punct(cursor.peek(1), b'!')
                        && is_group(cursor.peek(3), None) =>
                {
                    if let (Some(name), Some(body)) =
                        (src.ident_name(cursor.peek(2)), cursor.peek(3))
                    {
                        self.scan.macro_rules_defined.push(name.to_owned());
                        self.record_macro_definition(name, inner(body));
                        let outer = self.in_macro_rules.replace(name.to_owned());
                        self.walk_for_embeds(inner(body));
                        self.in_macro_rules = outer;
                        self.record_macro_modules(name, inner(body));
                        cursor.advance(4);
                        continue;
                    }
                }
                Kind::Ident if src.text(token) == "mod" => {
                    if let (Some(name), Some(name_token)) =
                        (src.ident_name(cursor.peek(1)), cursor.peek(1))
                    {
                        let line = src.line(name_token.start);
                        let name = name.to_owned();
                        let after = cursor.peek(2);
                        if src.is_punct(after, b';') {
                            let decls = module_decls(
                                self.ctx,
                                scope,
                                inline_depth,
                                name,
                                path_attr.take(),
                                std::mem::take(&mut cfg_paths),
                                line,
                            );
                            let in_alternative = self.in_alternative;
                            self.scan.modules.extend(decls.into_iter().map(|mut d| {
                                d.has_alternatives |= in_alternative;
                                d
                            }));
                            cursor.advance(3);
                            continue;
                        }
                        if let Some(body) = after.filter(|g| is_group(Some(*g), Some(Delim::Brace)))
                        {
                            // `#[cfg_attr(unix, path = "sys")] mod m { mod c; }`
                            // moves where `c` is loaded from when the cfg
                            // holds: the body is read once per directory.
                            let alternatives = std::mem::take(&mut cfg_paths);
                            let default = inline_scope(
                                self.ctx,
                                scope,
                                inline_depth,
                                &name,
                                path_attr.take(),
                            );
                            let outer = self.in_alternative;
                            self.in_alternative = outer || !alternatives.is_empty();
                            self.walk_items(inner(body), &default, inline_depth + 1);
                            for path in alternatives {
                                let alternative =
                                    inline_scope(self.ctx, scope, inline_depth, &name, Some(path));
                                if alternative != default {
                                    self.walk_items(inner(body), &alternative, inline_depth + 1);
                                }
                            }
                            self.in_alternative = outer;
                            cursor.advance(3);
                            continue;
                        }
                    }
                }
                // Visibility and `unsafe` may stand between an attribute and `mod`.
                Kind::Ident if matches!(src.text(token), "pub" | "unsafe") => {
                    cursor.advance(1);
                    continue;
                }
                // `pub(crate)`, and the arguments of an item macro:
                // `items!(mod a;)` loads `a.rs` as `items![mod a;]` and
                // `items! { mod a; }` do. (Nowhere else may a paren group
                // hold `mod`, so reading it as items finds nothing more.)
                Kind::Open(Delim::Paren) => {
                    self.walk_macro_args_or_items(&cursor, inner(token), scope, inline_depth);
                    cursor.advance(1);
                    continue;
                }
                Kind::Open(_) => {
                    self.walk_macro_args_or_items(&cursor, inner(token), scope, inline_depth);
                }
                Kind::Literal => self.record_literal(token),
                _ => {}
            }
            path_attr = None;
            cfg_paths.clear();
            cursor.advance(1);
        }
    }

    /// [`Self::walk_items`] on a group, counting whether it holds a macro
    /// call's arguments.
    pub(super) fn walk_macro_args_or_items(
        &mut self,
        cursor: &Cursor<'_, '_>,
        range: Range,
        scope: &Path,
        inline_depth: usize,
    ) {
        self.walk_group(cursor, range, |walker, range| {
            walker.walk_items(range, scope, inline_depth);
        });
    }

    /// Whether a group outside any `macro_rules!` body holds nothing the
    /// walk records: the byte prefilter that decides whether a file is
    /// read at all (`prefilter.rs`), applied to the group's bytes,
    /// with the include aliases and what a build script's directive
    /// literals may hold. (A `macro_rules!` body is always read: every call
    /// in it tells which macros call which.)
    fn is_quiet(&self, range: Range) -> bool {
        // A small group costs less to walk than to search.
        if !self.skip_quiet || self.in_macro_rules.is_some() || range.1 - range.0 < QUIET_MIN_BYTES
        {
            return false;
        }
        // With its delimiters: `m!(x, !)` is a `!` handed over because
        // of the `)` after it.
        let text = self.src.text.as_bytes();
        let bytes = &text[range.0.saturating_sub(1)..(range.1 + 1).min(text.len())];
        !(group_may_reference_files(bytes)
            || self
                .ctx
                .aliases
                .keys()
                .any(|alias| memchr::memmem::find(bytes, alias.as_bytes()).is_some()))
    }

    /// Walks a group with `walk`, knowing which macro's arguments it holds.
    /// The arguments of a token-output macro (`quote!`) are text the macro
    /// emits, never expanded in this crate: not read, except what
    /// `quote_spanned!` evaluates before its `=>` (the span expression).
    fn walk_group(
        &mut self,
        cursor: &Cursor<'_, '_>,
        range: Range,
        mut walk: impl FnMut(&mut Self, Range),
    ) {
        if self.is_quiet(range) {
            return;
        }
        let Some(name) = cursor.macro_behind() else {
            walk(self, range);
            return;
        };
        if self.ctx.token_output.contains(&name) {
            if name.ends_with("_spanned") {
                if let Some(arrow) = self.src.fat_arrow(range) {
                    walk(self, (range.0, arrow));
                }
            }
            return;
        }
        self.macro_args.push(name.to_owned());
        walk(self, range);
        self.macro_args.pop();
    }

    /// At an identifier: records a `debugger_visualizer(…)` and an
    /// `include_*!(…)` there; says whether it was an include (three tokens).
    pub(super) fn record_ident_forms(&mut self, cursor: &mut Cursor<'_, '_>, token: Token) -> bool {
        if !self.macro_args.is_empty() && self.src.is_punct(Some(token), b'!') {
            // A `!` handed to a macro on its own (`m!(!)`, `m!(x, !)`): the
            // macro may assemble a call from it.
            let next = cursor.peek(1);
            if next.is_none() || self.src.is_punct(next, b',') || self.src.is_punct(next, b';') {
                if let Some(to) = self.macro_args.last() {
                    self.scan.bare_bang_to.push(to.clone());
                }
            }
        }
        if !matches!(token.kind, Kind::Ident | Kind::RawIdent) {
            return false;
        }
        self.record_debugger_visualizers(cursor);
        if self.record_embed_at(cursor) {
            return true;
        }
        if let Some(handed_to) = self.macro_args.last().cloned() {
            self.record_passed_include(cursor, token, handed_to);
        } else if self.in_macro_rules.is_some() && self.src.is_punct(cursor.peek(1), b'$') {
            self.record_bang_from_caller(token);
        }
        false
    }
}
