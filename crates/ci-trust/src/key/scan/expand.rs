//! Expanding calls of the workspace's `macro_rules!` to find the includes
//! they reach: an include whose argument calls a workspace macro
//! (`include!(crate::autogen_output!("errors.rs"))`, where
//! `autogen_output!` gives `concat!(env!("CARGO_MANIFEST_DIR"), "/gen/", $f)`),
//! and a call of a wrapper whose body includes a path built from its
//! arguments (`embedded_asset!(app, "x.wgsl")`, `ext_test_case!(name)` with
//! `include_bytes!(concat!("../testdata/", stringify!($name), ".bin"))`).
//! Matching and transcribing is [`super::mbe`]'s, as rustc runs it; each
//! include reached is evaluated like any include argument, where the
//! outermost call stands. Must not: touch the file system.

use super::includes::{STD_MACROS, TOKEN_OUTPUT_MACROS};
use super::mbe::{self, LeafKind, Tt};
use super::path_expr::evaluate_path;
use super::path_macros::{PathMacroForm, path_macro};
use super::source::{Range, Source, inner, is_group};
use super::walker::TokenWalker;
use super::{EmbedTarget, FileContext};
use crate::key::lexer::Delim;

/// A `macro_rules!` as written: its name and, per rule, the text inside
/// the matcher's and the transcriber's delimiters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacroDefinition {
    pub name: String,
    pub rules: Vec<(String, String)>,
    /// Why its rules were not kept (a body too large, a shape this reading
    /// does not know): a call of it does not expand, rather than expanding
    /// by the other definitions of the name alone.
    pub unreadable: Option<String>,
    /// The names its body's `use` declarations may give to a macro ci-key
    /// does not see, read whole however large ([`names_a_use_may_rename`]);
    /// `None`: any name.
    pub may_rename: Option<Vec<String>>,
}

impl MacroDefinition {
    /// Whether a transcriber may emit tokens the call hands it: it holds a
    /// `$` that is not `$crate` (a metavariable, a repetition), or the body
    /// was not read. A macro none of whose transcribers does emits only
    /// its own tokens, so nothing handed to it is ever called or assembled
    /// into a call (biome's generated `T![include]`, `T![!]`).
    pub fn transcribes_input(&self) -> bool {
        self.unreadable.is_some()
            || self
                .rules
                .iter()
                .any(|(_, transcriber)| has_metavariable(transcriber))
    }
}

/// Whether `text` holds a `$` other than `$crate` (`$ crate` as quote!
/// spaces it). A `$` in a string or comment counts too: erring that way
/// only keeps a refusal.
fn has_metavariable(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(at, &b)| {
        if b != b'$' {
            return false;
        }
        let rest = text[at + 1..].trim_start();
        let after = rest.strip_prefix("crate");
        !after.is_some_and(|after| {
            !after
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

/// The names a macro body's `use` declarations may give to something
/// ci-key does not see: a `use` whose path holds a metavariable other than
/// `$crate` names what it imports by its last segment or its `as` rename;
/// `None` when that name is itself a metavariable or a group (`use $a as
/// $b;`, `use $m::{…};`: any name), or the body does not tokenise. Read as
/// tokens: a `use` in a string or comment is none.
pub fn names_a_use_may_rename(body: &str) -> Option<Vec<String>> {
    use crate::key::lexer::{Kind, Lexer};
    let mut names = Vec::new();
    if memchr::memmem::find(body.as_bytes(), b"use").is_none() {
        return Some(names);
    }
    let mut lexer = Lexer::new(body, 0, body.len());
    // The tokens of the `use` being read: (kind, text).
    let mut statement: Option<Vec<(Kind, &str)>> = None;
    loop {
        let token = lexer.next_token().ok()?;
        let Some(token) = token else {
            return Some(names);
        };
        let word = &body[token.start..token.end];
        match &mut statement {
            None if token.kind == Kind::Ident && word == "use" => statement = Some(Vec::new()),
            None => {}
            Some(tokens) if token.kind == Kind::Punct && word == ";" => {
                let tokens = std::mem::take(tokens);
                statement = None;
                let metavariable = tokens
                    .windows(2)
                    .any(|pair| pair[0] == (Kind::Punct, "$") && pair[1] != (Kind::Ident, "crate"));
                if !metavariable {
                    continue;
                }
                match tokens.as_slice() {
                    [.., (Kind::Punct, "$"), _] => return None,
                    [.., (Kind::Ident, name)] | [.., (Kind::RawIdent, name)] => {
                        names.push(name.trim_start_matches("r#").to_owned());
                    }
                    _ => return None,
                }
            }
            Some(tokens) => tokens.push((token.kind, word)),
        }
    }
}

/// The longest body kept for expansion: path macros are short.
const MAX_BODY_BYTES: usize = 64 * 1024;

impl TokenWalker<'_, '_, '_> {
    /// Keeps the rules of `macro_rules! name { body }` for expansion.
    pub(super) fn record_macro_definition(&mut self, name: &str, body: Range) {
        let may_rename = names_a_use_may_rename(&self.src.text[body.0..body.1]);
        let unreadable = |why: String| MacroDefinition {
            name: name.to_owned(),
            rules: Vec::new(),
            unreadable: Some(why),
            may_rename: may_rename.clone(),
        };
        if body.1 - body.0 > MAX_BODY_BYTES {
            let why =
                format!("a body of more than {MAX_BODY_BYTES} bytes, which ci-key does not read");
            self.scan.macro_definitions.push(unreadable(why));
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
                let why = "a body whose rules ci-key cannot tell apart".to_owned();
                self.scan.macro_definitions.push(unreadable(why));
                return;
            };
            let (m, t) = (inner(matcher), inner(transcriber));
            rules.push((src.text[m.0..m.1].to_owned(), src.text[t.0..t.1].to_owned()));
            cursor.advance(4);
        }
        self.scan.macro_definitions.push(MacroDefinition {
            name: name.to_owned(),
            rules,
            unreadable: None,
            may_rename,
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
    let rules = parse_rules(definition)?;
    let Some(trees) = mbe::expand(&rules, &mbe::parse_call_arguments(args)?)? else {
        return Err(format!(
            "no rule of macro_rules! {} matches `{}`",
            definition.name,
            args.trim()
        ));
    };
    let text = strip_block(&mbe::render(&trees));
    let src = Source::index(&text, 0).map_err(|(_, why)| why)?;
    Ok(evaluate_path(&src, (0, text.len()), ctx).0)
}

fn parse_rules(definition: &MacroDefinition) -> Result<Vec<mbe::Rule>, String> {
    if let Some(why) = &definition.unreadable {
        return Err(format!("macro_rules! {}: {why}", definition.name));
    }
    definition
        .rules
        .iter()
        .map(|(matcher, transcriber)| mbe::Rule::parse(matcher, transcriber))
        .collect::<Result<_, _>>()
        .map_err(|why| format!("macro_rules! {}: {why}", definition.name))
}

/// An include that expanding a call reaches, and what its argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReachedInclude {
    pub macro_name: String,
    pub target: EmbedTarget,
}

/// How deep calls of workspace macros nest in one expansion, and how many
/// are expanded, before this reading gives up.
const MAX_CALL_DEPTH: usize = 128;
const MAX_EXPANDED_CALLS: usize = 4096;

/// The definitions of a macro name that a call may invoke.
pub type DefinitionsOf<'d> = dyn Fn(&str) -> Vec<&'d MacroDefinition> + 'd;

/// Every include that the call `name!(args)`, standing in `ctx`'s file,
/// expands to, as rustc expands it: the first matching rule of each
/// definition of `name` is transcribed, the calls of workspace macros in
/// the transcription are expanded in turn, and each include's argument is
/// evaluated where the outermost call stands. `Err` says why the
/// expansion cannot be known here (no definition or no rule matches, a
/// form this reading does not model, a path macro or an include handed
/// over as a token in the expansion).
pub fn expand_call_includes<'d>(
    name: &str,
    args: &str,
    definitions: &DefinitionsOf<'d>,
    ctx: &FileContext<'_>,
) -> Result<Vec<ReachedInclude>, String> {
    let args = mbe::parse_call_arguments(args)?;
    let mut expansion = CallExpansion {
        definitions,
        ctx,
        calls: 0,
        reached: Vec::new(),
        foreign: None,
    };
    expansion.call(name, &args, 0)?;
    Ok(expansion.reached)
}

struct CallExpansion<'a, 'd, 'c> {
    definitions: &'a DefinitionsOf<'d>,
    ctx: &'a FileContext<'c>,
    calls: usize,
    reached: Vec<ReachedInclude>,
    /// The macro of no workspace crate whose arguments are being read:
    /// it may rewrite the workspace calls among them before they expand.
    foreign: Option<String>,
}

impl CallExpansion<'_, '_, '_> {
    fn call(&mut self, name: &str, args: &[Tt], depth: usize) -> Result<(), String> {
        self.calls += 1;
        if depth > MAX_CALL_DEPTH || self.calls > MAX_EXPANDED_CALLS {
            return Err(format!(
                "macro calls nested more than {MAX_CALL_DEPTH} deep or more than {MAX_EXPANDED_CALLS} in one expansion"
            ));
        }
        let definitions = (self.definitions)(name);
        if definitions.is_empty() {
            return Err(format!("no macro_rules! {name} of the workspace to expand"));
        }
        // `paste! { asset!([<pr od>]) }`: what rustc expands is the call
        // the foreign macro makes of it, which this reading does not know.
        if let Some(foreign) = &self.foreign {
            return Err(format!(
                "`{name}!` among the arguments of `{foreign}!`, a macro of no workspace crate (a proc macro such as `paste!` or `seq!`) that may rewrite the call before it expands"
            ));
        }
        // Several definitions of the name: each may be the one in scope.
        let mut matched = false;
        for definition in definitions {
            if let Some(trees) = mbe::expand(&parse_rules(definition)?, args)? {
                matched = true;
                self.read(&trees, depth)?;
            }
        }
        if !matched {
            return Err(format!(
                "no rule of macro_rules! {name} matches `{}`",
                mbe::render(args)
            ));
        }
        Ok(())
    }

    /// The includes and workspace macro calls in `trees`.
    fn read(&mut self, trees: &[Tt], depth: usize) -> Result<(), String> {
        let mut i = 0;
        while i < trees.len() {
            let name = match &trees[i] {
                Tt::Group(_, inner) | Tt::Opaque(_, inner) => {
                    self.read(inner, depth)?;
                    i += 1;
                    continue;
                }
                Tt::Leaf(leaf) if leaf.kind == LeafKind::Ident => {
                    leaf.text.trim_start_matches("r#")
                }
                Tt::Leaf(_) => {
                    i += 1;
                    continue;
                }
            };
            let bang = matches!(trees.get(i + 1), Some(Tt::Leaf(l)) if l.kind == LeafKind::Punct && l.text == "!");
            // A macro the expansion defines is called where its own calls
            // stand, which this reading does not follow.
            if bang && name == "macro_rules" {
                return Err("a macro expansion that defines a macro_rules!".into());
            }
            let (true, Some(Tt::Group(_, args))) = (bang, trees.get(i + 2)) else {
                if name == "include_str" || name == "include_bytes" {
                    return Err(format!(
                        "`{name}` handed over as a token in a macro expansion"
                    ));
                }
                i += 1;
                continue;
            };
            // An include, or an alias of one (`use std::include_str as inc;`).
            if let Some(include) = self.ctx.include_macro(name) {
                let target = self.include_target(args)?;
                self.reached.push(ReachedInclude {
                    macro_name: format!("{include}!"),
                    target,
                });
            } else if !(self.definitions)(name).is_empty() {
                self.call(name, args, depth + 1)?;
                // A workspace macro named like a standard one (`vec!`) may
                // not be the one in scope here: the standard macro's
                // arguments are read as code too.
                let foreign_path = i >= 2
                    && matches!(&trees[i - 1], Tt::Leaf(l) if l.text == "::")
                    && matches!(&trees[i - 2], Tt::Leaf(l) if l.kind == LeafKind::Ident
                        && !matches!(l.text.as_str(), "$crate" | "crate" | "self" | "super"));
                if STD_MACROS.contains(&name) || foreign_path {
                    self.read(args, depth)?;
                }
            } else if path_macro(name, PathMacroForm::Call).is_some() {
                return Err(format!(
                    "`{name}!`, a macro that reads files, in a macro expansion"
                ));
            } else if !TOKEN_OUTPUT_MACROS.iter().any(|(n, _)| *n == name) {
                // A standard or registry macro: its arguments may be
                // expanded as code (`format!("{}", include_str!(…))`); a
                // registry one may rewrite them first.
                let outer = self.foreign.clone();
                if !STD_MACROS.contains(&name) && outer.is_none() {
                    self.foreign = Some(name.to_owned());
                }
                let read = self.read(args, depth);
                self.foreign = outer;
                read?;
            }
            i += 3;
        }
        Ok(())
    }

    /// What an include's arguments name, where the outermost call stands.
    fn include_target(&mut self, args: &[Tt]) -> Result<EmbedTarget, String> {
        // `concat!` expands the macro calls among its pieces first, as
        // rustc does: `concat!($crate::root_dir!("js"), "/", "a.js")`.
        let args = self.expand_pieces(args, 0)?;
        let text = mbe::render(&args);
        let src = Source::index(&text, 0).map_err(|(_, why)| why)?;
        let mut target = evaluate_path(&src, (0, text.len()), self.ctx).0;
        let mut hops = 0;
        while let EmbedTarget::Expand { name, args, .. } = &target {
            hops += 1;
            let definitions = (self.definitions)(name);
            let [definition] = definitions.as_slice() else {
                return Err(format!(
                    "`{name}!({args})` in an include's argument, with {} definitions in the workspace",
                    definitions.len()
                ));
            };
            if hops > MAX_CALL_DEPTH {
                return Err("include arguments nested too deep in macro calls".into());
            }
            target = expand_include_argument(definition, args, self.ctx)?;
        }
        match target {
            EmbedTarget::File(_) | EmbedTarget::OutDir => Ok(target),
            EmbedTarget::Unresolved(why) => Err(why),
            other => Err(format!(
                "an include whose expanded argument gives {other:?}"
            )),
        }
    }
}

impl CallExpansion<'_, '_, '_> {
    /// `trees` with every call of a workspace macro replaced by what it
    /// transcribes (a lone block by its contents), the path before the
    /// name (`$crate::`) dropped.
    fn expand_pieces(&mut self, trees: &[Tt], depth: usize) -> Result<Vec<Tt>, String> {
        let mut out: Vec<Tt> = Vec::new();
        let mut i = 0;
        while i < trees.len() {
            let call = match (&trees[i], trees.get(i + 1), trees.get(i + 2)) {
                (Tt::Leaf(name), Some(Tt::Leaf(bang)), Some(Tt::Group(_, args)))
                    if name.kind == LeafKind::Ident && bang.text == "!" =>
                {
                    let name = name.text.trim_start_matches("r#");
                    let definitions = (self.definitions)(name);
                    (!definitions.is_empty()).then_some((name, definitions, args))
                }
                _ => None,
            };
            let Some((name, definitions, args)) = call else {
                out.push(match &trees[i] {
                    Tt::Group(delim, inner) => Tt::Group(*delim, self.expand_pieces(inner, depth)?),
                    Tt::Opaque(fragment, inner) => {
                        Tt::Opaque(*fragment, self.expand_pieces(inner, depth)?)
                    }
                    leaf => leaf.clone(),
                });
                i += 1;
                continue;
            };
            self.calls += 1;
            if depth > MAX_CALL_DEPTH || self.calls > MAX_EXPANDED_CALLS {
                return Err(format!(
                    "macro calls nested more than {MAX_CALL_DEPTH} deep or more than {MAX_EXPANDED_CALLS} in one expansion"
                ));
            }
            // The path before the name: `::`-separated segments.
            while matches!(out.last(), Some(Tt::Leaf(l)) if l.text == "::") {
                out.pop();
                if matches!(out.last(), Some(Tt::Leaf(l)) if l.kind == LeafKind::Ident) {
                    out.pop();
                }
            }
            let mut expansions = Vec::new();
            for definition in &definitions {
                if let Some(trees) = mbe::expand(&parse_rules(definition)?, args)? {
                    expansions.push(trees);
                }
            }
            let expansion = match expansions.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(format!(
                        "no rule of macro_rules! {name} matches `{}`",
                        mbe::render(args)
                    ));
                }
                _ => {
                    return Err(format!(
                        "`{name}!`, with several definitions in the workspace, among an include's pieces"
                    ));
                }
            };
            let expansion = match expansion.as_slice() {
                [Tt::Group(Delim::Brace, inner)] => inner.clone(),
                _ => expansion,
            };
            out.extend(self.expand_pieces(&expansion, depth + 1)?);
            i += 3;
        }
        Ok(out)
    }
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
