//! `macro_rules!` bodies and their call sites: a body nested in another
//! macro's (`macro_rules! $name` included), whether a body calls a
//! metavariable as a macro, and [`call_sites`], which finds where a macro
//! is called or handed over in any file so that what its body reads is
//! resolved from each caller. Must not: resolve a path (the callers'
//! files are `sources.rs`'s).

use std::collections::HashSet;

use super::source::{Cursor, Range, Source, inner, is_group, shebang_end};
use super::walker::TokenWalker;
use crate::key::lexer::{self, Delim, Kind, Token};

/// A call of a macro in a file, as [`call_sites`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    pub name: String,
    pub line: usize,
    /// The `macro_rules!` whose body holds the call, if any: the path is
    /// then resolved at that macro's callers.
    pub definer: Option<String>,
    /// The string literals anywhere in the arguments.
    pub literals: Vec<String>,
    /// The arguments as written, inside the call's delimiters (empty for
    /// a name handed over).
    pub arguments: String,
    /// Why the arguments do not give the path by themselves: a macro call
    /// (`concat!`, `env!`, any other) or a metavariable among them.
    pub opaque: Option<String>,
    /// A macro call among the arguments.
    pub has_macro_call: bool,
    /// The name is handed to a macro as a token, not called.
    pub handed_over: bool,
    /// The macro whose arguments hold the name (the last segment of its
    /// path), when it is handed over.
    pub handed_to: Option<String>,
    /// The inline modules (`mod a { … }`) the call stands in, outermost
    /// first: a `mod x;` it expands to loads from their directory.
    pub inline: Vec<String>,
    /// One of them is moved by `#[path]` or `cfg_attr`.
    pub inline_moved: bool,
    /// The macro calls whose arguments hold the call (name, arguments as
    /// written), outermost first: rustc expands them first, and a
    /// workspace macro among them may rewrite the call.
    pub enclosing: Vec<(String, String)>,
    /// The call stands in the body of a `macro_rules! $name` that another
    /// macro defines under a name its caller chooses: its outermost calls
    /// cannot be found by name.
    pub in_generated: bool,
}

/// Every call of one of `names` (`name!(…)`) in `text`, and every place one
/// of them is handed to a macro as a token (`call!(m, "x")`). A name
/// anywhere else (a field, a `use`, a path) is never a call.
/// `Err` when the text does not tokenise.
pub fn call_sites(text: &str, names: &HashSet<String>) -> Result<Vec<CallSite>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let start = shebang_end(text);
    let source = Source::index(text, start).map_err(|(_, why)| why)?;
    let mut sites = Vec::new();
    let mut inline = Vec::new();
    let mut place = CallPlace {
        definer: None,
        inline: &mut inline,
        inline_moved: false,
        macro_args: None,
        enclosing: Vec::new(),
        in_generated: false,
    };
    collect_call_sites(&source, (start, text.len()), names, &mut place, &mut sites);
    Ok(sites)
}

/// Where [`collect_call_sites`] is: in which `macro_rules!` body and
/// inline modules.
struct CallPlace<'a, 'n> {
    definer: Option<&'n str>,
    inline: &'a mut Vec<String>,
    inline_moved: bool,
    /// The macro whose arguments the walk is in, innermost.
    macro_args: Option<&'n str>,
    /// The macro calls whose arguments the walk is in, outermost first.
    enclosing: Vec<(&'n str, Range)>,
    /// In the body of a `macro_rules! $name`.
    in_generated: bool,
}

fn collect_call_sites<'n>(
    src: &Source<'n>,
    range: Range,
    names: &HashSet<String>,
    place: &mut CallPlace<'_, 'n>,
    sites: &mut Vec<CallSite>,
) {
    let mut cursor = src.cursor(range);
    let mut in_use = false;
    // A `#[path …]` or `#[cfg_attr(…)]` since the last item ended.
    let mut moving_attribute = false;
    while let Some(token) = cursor.peek(0) {
        if src.is_ident(Some(token), "use") {
            in_use = true;
        } else if src.is_punct(Some(token), b';') {
            in_use = false;
            moving_attribute = false;
        }
        if src.is_punct(Some(token), b'#') {
            let at = 1 + usize::from(src.is_punct(cursor.peek(1), b'!'));
            if let Some(body) = cursor
                .peek(at)
                .filter(|g| is_group(Some(*g), Some(Delim::Bracket)))
            {
                let first = src.cursor(inner(body)).peek(0);
                moving_attribute |= src.is_name(first, "path") || src.is_name(first, "cfg_attr");
            }
        }
        if src.is_ident(Some(token), "macro_rules")
            && src.is_punct(cursor.peek(1), b'!')
            && is_group(cursor.peek(3), None)
        {
            if let (Some(name), Some(body)) = (src.ident_name(cursor.peek(2)), cursor.peek(3)) {
                let outer = place.definer.replace(name);
                let outer_args = place.macro_args.take();
                let outer_calls = std::mem::take(&mut place.enclosing);
                collect_call_sites(src, inner(body), names, place, sites);
                place.enclosing = outer_calls;
                place.macro_args = outer_args;
                place.definer = outer;
                cursor.advance(4);
                continue;
            }
        }
        // `macro_rules! $name { … }` in another macro's body.
        if src.is_ident(Some(token), "macro_rules")
            && src.is_punct(cursor.peek(1), b'!')
            && src.is_punct(cursor.peek(2), b'$')
            && src.ident_name(cursor.peek(3)).is_some()
            && is_group(cursor.peek(4), None)
            && let Some(body) = cursor.peek(4)
        {
            let outer = std::mem::replace(&mut place.in_generated, true);
            let outer_args = place.macro_args.take();
            collect_call_sites(src, inner(body), names, place, sites);
            place.macro_args = outer_args;
            place.in_generated = outer;
            cursor.advance(5);
            continue;
        }
        if src.is_ident(Some(token), "mod") && is_group(cursor.peek(2), Some(Delim::Brace)) {
            if let (Some(name), Some(body)) = (src.ident_name(cursor.peek(1)), cursor.peek(2)) {
                place.inline.push(name.to_owned());
                let outer = place.inline_moved;
                place.inline_moved |= moving_attribute;
                collect_call_sites(src, inner(body), names, place, sites);
                place.inline_moved = outer;
                place.inline.pop();
                moving_attribute = false;
                cursor.advance(3);
                continue;
            }
        }
        if let Some(name) = src.ident_name(Some(token)).filter(|n| names.contains(*n)) {
            let line = src.line(token.start);
            let site = |handed_to: Option<&str>| CallSite {
                name: name.to_owned(),
                line,
                definer: place.definer.map(str::to_owned),
                literals: Vec::new(),
                arguments: String::new(),
                opaque: None,
                has_macro_call: false,
                handed_over: handed_to.is_some(),
                handed_to: handed_to.map(str::to_owned),
                inline: place.inline.clone(),
                inline_moved: place.inline_moved,
                enclosing: place
                    .enclosing
                    .iter()
                    .map(|(name, args)| ((*name).to_owned(), src.text[args.0..args.1].to_owned()))
                    .collect(),
                in_generated: place.in_generated,
            };
            if src.is_punct(cursor.peek(1), b'!') {
                if let Some(args) = cursor.peek(2).filter(|g| is_group(Some(*g), None)) {
                    let mut call = site(None);
                    read_arguments(src, inner(args), &mut call);
                    sites.push(call);
                }
            } else if let Some(definer) =
                place.definer.filter(|_| src.is_punct(cursor.peek(1), b'$'))
            {
                // `my_include $b (…)` in a body: its caller may pass the
                // `!` (`m!(!)`), and the body then calls it.
                sites.push(site(Some(definer)));
            } else if let Some(handed_to) = place.macro_args.filter(|_| !in_use) {
                // A name among a macro's arguments is handed to it; one
                // anywhere else (a field, a path, a `use`) is never a call.
                sites.push(site(Some(handed_to)));
            }
        }
        if is_group(Some(token), None) {
            let outer = place.macro_args;
            let called = cursor.macro_behind();
            if let Some(called) = called {
                place.macro_args = Some(called);
                place.enclosing.push((called, inner(token)));
            }
            collect_call_sites(src, inner(token), names, place, sites);
            if called.is_some() {
                place.enclosing.pop();
            }
            place.macro_args = outer;
            if is_group(Some(token), Some(Delim::Brace)) {
                moving_attribute = false;
            }
        }
        cursor.advance(1);
    }
}

/// Fills in what a call's arguments say about the path they give.
fn read_arguments(src: &Source<'_>, range: Range, call: &mut CallSite) {
    call.arguments = src.text[range.0..range.1].to_owned();
    let mut pending = vec![range];
    while let Some(part) = pending.pop() {
        let mut cursor = src.cursor(part);
        while let Some(token) = cursor.peek(0) {
            match token.kind {
                Kind::Punct if src.is_punct(Some(token), b'!') => {
                    call.has_macro_call = true;
                    call.opaque = Some(format!("a macro call in `{}`", src.snippet(range)));
                }
                Kind::Punct if src.is_punct(Some(token), b'$') => {
                    call.opaque.get_or_insert_with(|| {
                        format!("a metavariable in `{}`", src.snippet(range))
                    });
                }
                Kind::Literal => {
                    if let Some(value) = lexer::string_value(src.text(token)) {
                        call.literals.push(value);
                    }
                }
                Kind::Open(_) => pending.push(inner(token)),
                _ => {}
            }
            cursor.advance(1);
        }
    }
}

/// At `$` in a `macro_rules!` body: whether a metavariable or a
/// repetition is called as a macro (`$m!(…)`, `$($m)*!(…)`, `$($m),+!(…)`).
pub(super) fn calls_metavariable(src: &Source<'_>, cursor: &mut Cursor<'_, '_>) -> bool {
    if src.ident_name(cursor.peek(1)).is_some() {
        return src.is_punct(cursor.peek(2), b'!');
    }
    if !is_group(cursor.peek(1), Some(Delim::Paren)) {
        return false;
    }
    let is_repeat = |t: Option<Token>| [b'*', b'+', b'?'].iter().any(|&c| src.is_punct(t, c));
    // `$(…)*!`, or with a separator token: `$(…),*!`.
    (is_repeat(cursor.peek(2)) && src.is_punct(cursor.peek(3), b'!'))
        || (is_repeat(cursor.peek(3)) && src.is_punct(cursor.peek(4), b'!'))
}

impl TokenWalker<'_, '_, '_> {
    /// A `macro_rules!` defined inside a macro body (at `token`): its body
    /// is walked as its own (`macro_rules! inner {…}`), or, when the caller
    /// names it (`macro_rules! $name {…}`), as one whose callers cannot be
    /// found: what it includes from its callers, or the modules it
    /// declares, refuse the key. Returns how many tokens it spans.
    pub(super) fn walk_nested_macro_rules(
        &mut self,
        cursor: &mut Cursor<'_, '_>,
        token: Token,
    ) -> Option<usize> {
        let src = self.src;
        if !src.is_ident(Some(token), "macro_rules") || !src.is_punct(cursor.peek(1), b'!') {
            return None;
        }
        let (name, body, step) = if src.is_punct(cursor.peek(2), b'$') {
            let name = src.ident_name(cursor.peek(3))?;
            (format!("${name}"), cursor.peek(4)?, 5)
        } else {
            (
                src.ident_name(cursor.peek(2))?.to_owned(),
                cursor.peek(3)?,
                4,
            )
        };
        if !is_group(Some(body), None) {
            return None;
        }
        let generated = step == 5;
        self.scan.macro_rules_defined.push(name.clone());
        if !generated {
            self.record_macro_definition(&name, inner(body));
        }
        let outer = self.in_macro_rules.replace(name.clone());
        let outer_generated = self.in_generated_macro;
        self.in_generated_macro |= generated;
        self.walk_for_embeds(inner(body));
        let modules = self.scan.macro_modules.len();
        self.record_macro_modules(&name, inner(body));
        if self.in_generated_macro && self.scan.macro_modules.len() > modules {
            let line = self.scan.macro_modules[modules].line;
            self.scan.macro_modules.truncate(modules);
            self.scan.refused.get_or_insert((
                line,
                format!(
                    "macro_rules! {name}, defined by another macro under a name its caller chooses, declares a file module; ci-key cannot find where it is called (define it with a literal name)"
                ),
            ));
        }
        self.in_generated_macro = outer_generated;
        self.in_macro_rules = outer;
        Some(step)
    }
}
