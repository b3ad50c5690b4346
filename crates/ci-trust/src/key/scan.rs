//! Reading one Rust source file for what makes the compiler read other files:
//! file modules (`mod x;`, `#[path]`) and embeds (`include_str!`,
//! `include_bytes!`, `include!`), plus string literals that a build script
//! prints as `cargo:rerun-if-changed=`.
//!
//! The file is read as a token stream ([`super::lexer`], rustc's token
//! rules), never as a syntax tree: `mod x;`, attributes and macro calls are
//! all visible at the token level, including embeds inside other macros
//! (`println!("{}", include_str!(…))`, `macro_rules!` bodies). Text in
//! string literals and comments is never mistaken for a macro call, because
//! the lexer has already made it a literal or dropped it.
//!
//! Memory stays O(file size) with a small constant whatever the file holds:
//! tokens are byte ranges into the text, never owned strings, and none is
//! kept. A first pass lexes the file once, checks that it nests no deeper
//! than [`MAX_NESTING`] and records where each group closes (8 bytes a
//! group); the walk then lexes each level lazily through a cursor with a
//! few tokens of lookahead, stepping over a group as one token and
//! recursing into it when it looks inside.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use super::lexer::{self, Delim, Kind, Lexer, Token};

/// Where a construct stands: the file and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub file: PathBuf,
    pub line: usize,
}

/// A `mod x;` that loads a file: the candidate files in the order rustc tries
/// them, each with the directory its own child modules live in.
#[derive(Debug, Clone)]
pub struct ModuleDecl {
    pub name: String,
    pub candidates: Vec<(PathBuf, PathBuf)>,
    pub site: Site,
    /// Set when `cfg_attr(…, path = …)` gives the module other files, so the
    /// default file's absence is expected rather than worth a warning.
    pub has_alternatives: bool,
}

/// What an include macro names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbedTarget {
    /// An absolute path (lexically normalised later).
    File(PathBuf),
    /// A path with `macro_rules!` metavariables, as a glob with `*` for each.
    Pattern(PathBuf),
    /// A path under `OUT_DIR`: build output, covered by its build script's inputs.
    OutDir,
    /// A path wholly a `macro_rules!` metavariable (`include_str!($p)`):
    /// each caller's argument is the path, read from the caller's file.
    FromCallers,
    /// A directory read whole (an absolute path), by a macro of
    /// [`PATH_MACROS`]; its absence is hashed when it does not exist.
    Tree(PathBuf),
    /// A path this reading cannot compute; the text says what it was.
    Unresolved(String),
    /// A file the assembler reads for an `asm!` template: `.incbin`
    /// (bytes) or `.include` (`source`: assembler text, read for its own
    /// directives), relative to rustc's working directory; or (absolute,
    /// `source`) an `include_str!`d file the template is made of.
    Assembler { path: PathBuf, source: bool },
}

#[derive(Debug, Clone)]
pub struct Embed {
    pub macro_name: String,
    pub target: EmbedTarget,
    pub site: Site,
    /// For an embed inside a `macro_rules!` body whose path is relative to
    /// the file: the macro's name, the path text (`*` for metavariables) and
    /// whether it holds one. rustc resolves such a path from the file that
    /// *calls* the macro, which may be another file than this one.
    pub caller_relative: Option<CallerRelative>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerRelative {
    pub macro_rules: String,
    pub text: String,
    pub is_pattern: bool,
}

/// A `[#[path = "…"]] mod name;` in a `macro_rules!` body: rustc loads it
/// when the macro is expanded, from the module of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacroModule {
    pub macro_rules: String,
    /// `None` for `mod $m;`, whose name each caller chooses.
    pub name: Option<String>,
    pub path: Option<String>,
    pub line: usize,
}

impl MacroModule {
    /// The files this declaration loads when `macro_rules!` is called in
    /// `caller`, in a module whose child modules live in `module_dir`
    /// (`inline_depth` inline modules deep). `None` for `mod $m;`: the
    /// caller lists the names it may take.
    pub fn decl(
        &self,
        caller: &Path,
        module_dir: &Path,
        inline_depth: usize,
        package_dir: &Path,
    ) -> Option<ModuleDecl> {
        let name = self.name.as_ref()?;
        let aliases = HashMap::new();
        let ctx = FileContext {
            file: caller,
            module_dir,
            package_dir,
            aliases: &aliases,
        };
        Some(module_decl(
            &ctx,
            module_dir,
            inline_depth,
            name.clone(),
            self.path.clone(),
            self.line,
        ))
    }
}

/// Everything one file contributes.
#[derive(Debug, Default)]
pub struct FileScan {
    pub modules: Vec<ModuleDecl>,
    pub embeds: Vec<Embed>,
    /// String literals that contain `rerun-if-changed` or `rustc-link-arg`
    /// (the build-script directives whose literal paths the key hashes),
    /// with their lines.
    pub rerun_literals: Vec<(String, usize)>,
    /// Every `A as B` of a `use` declaration: a rename that may make `B!`
    /// an include macro, anywhere in the crate (`crate::B!`, `use super::*`).
    pub use_renames: Vec<(String, String)>,
    /// `mod x;` declarations in `macro_rules!` bodies, loaded where called.
    pub macro_modules: Vec<MacroModule>,
    /// Whether a `macro_rules!` body calls a metavariable as a macro
    /// (`$m!(…)`): then any macro it is handed to may call it.
    pub metavariable_macro_call: bool,
    /// `include` handed to a macro as a token (`call!(include, "x.rs")`):
    /// refused only where some `macro_rules!` calls a metavariable, since
    /// `include` is a common word. (`include_str`, `include_bytes` and
    /// aliases handed over are in `embeds`, refused unless declared.)
    pub passed_include: Vec<Embed>,
    /// (macro_rules!, macro it calls) for every macro call in a
    /// `macro_rules!` body: a macro that calls an including macro includes
    /// from *its* callers' files.
    pub macro_rules_calls: Vec<(String, String)>,
    /// Set when the file cannot be read faithfully: the line and why. The
    /// key is refused.
    pub refused: Option<(usize, String)>,
}

/// The context a file is read in.
pub struct FileContext<'a> {
    pub file: &'a Path,
    /// The directory where this file's `mod x;` children live.
    pub module_dir: &'a Path,
    /// `CARGO_MANIFEST_DIR` of the package that compiles the file.
    pub package_dir: &'a Path,
    /// Names that `use … as …` gave the include macros (`embed` for
    /// `use std::include_str as embed;`), each with the macro it names.
    pub aliases: &'a HashMap<String, String>,
}

impl FileContext<'_> {
    /// The include macro a call of `name!` is, if any.
    fn include_macro(&self, name: &str) -> Option<String> {
        if INCLUDE_MACROS.contains(&name) {
            return Some(name.to_owned());
        }
        self.aliases.get(name).cloned()
    }
}

/// A cheap test, before any parsing, of whether a file can hold anything
/// this module looks for. Most files of a large workspace hold none.
///
/// It must never say no to a file the parser would find something in: it
/// over-approximates. `include` covers every include macro (aliases are
/// found by name later, see `sources`), `debugger_visualizer` the files
/// rustc reads for that attribute, the names of [`PATH_MACROS`] theirs.
pub fn may_reference_files(text: &[u8]) -> bool {
    contains(text, b"include")
        || contains(text, b"rerun-if-changed")
        || contains(text, LINK_ARG_DIRECTIVE.as_bytes())
        || contains(text, b"debugger_visualizer")
        || PATH_MACROS
            .iter()
            .any(|m| contains(text, m.name.as_bytes()))
        || has_file_module_decl(text)
        || has_metavariable_call(text)
}

/// Looks for `$name !` (a `macro_rules!` body calling a macro it was
/// handed), loosely: white space may stand before the `!`, and a comment
/// there lets the parser decide; or a repetition called so.
fn has_metavariable_call(text: &[u8]) -> bool {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    memchr::memchr_iter(b'$', text).any(|at| {
        let mut i = at + 1;
        let start = i;
        while i < text.len() && is_ident(text[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        // Vertical tab (0x0B) is Pattern_White_Space but not `is_ascii_whitespace`.
        while i < text.len()
            && (text[i].is_ascii_whitespace() || text[i] == 0x0B || text[i] >= 0x80)
        {
            i += 1;
        }
        matches!(
            (text.get(i), text.get(i + 1)),
            (Some(b'!'), _) | (Some(b'/'), Some(b'/' | b'*'))
        )
    }) || has_repetition_call(text)
        || has_bare_bang(text)
}

/// Looks for a `!` that ends a macro argument (`m!(!)`, `m!(x, !)`),
/// loosely: white space may follow, and a comment lets the parser decide.
fn has_bare_bang(text: &[u8]) -> bool {
    let is_space = |b: u8| b.is_ascii_whitespace() || b == 0x0B || b >= 0x80;
    memchr::memchr_iter(b'!', text).any(|at| {
        // `//!` and `/*!` open inner doc comments.
        if at > 0 && text[at - 1] == b'/' {
            return false;
        }
        let mut i = at + 1;
        while i < text.len() && is_space(text[i]) {
            i += 1;
        }
        matches!(
            (text.get(i), text.get(i + 1)),
            (Some(b')' | b']' | b'}' | b',' | b';'), _) | (Some(b'/'), Some(b'/' | b'*'))
        )
    })
}

/// Looks for `) * !` (a repetition called as a macro, `$($m)*!(…)`, with
/// `+` or `?`, and perhaps a separator: `$($m),+!`), loosely: white space
/// may stand between, and a comment before the `!` lets the parser decide.
fn has_repetition_call(text: &[u8]) -> bool {
    let is_space = |b: u8| b.is_ascii_whitespace() || b == 0x0B || b >= 0x80;
    let skip_space = |mut i: usize| {
        while i < text.len() && is_space(text[i]) {
            i += 1;
        }
        i
    };
    memchr::memchr_iter(b')', text).any(|at| {
        let mut i = skip_space(at + 1);
        // A separator: any token but a repetition operator (at most `=>`-long).
        for _ in 0..2 {
            if i < text.len() && !matches!(text[i], b'*' | b'+' | b'?') && !is_space(text[i]) {
                i += 1;
            }
        }
        i = skip_space(i);
        if !matches!(text.get(i), Some(b'*' | b'+' | b'?')) {
            return false;
        }
        let i = skip_space(i + 1);
        match (text.get(i), text.get(i + 1)) {
            // `!=` is a comparison (`f()? != x`).
            (Some(b'!'), next) => next != Some(&b'='),
            (Some(b'/'), Some(b'/' | b'*')) => true,
            _ => false,
        }
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

/// Looks for `mod <ident> ;`, the only form that loads a file, loosely:
/// after `mod` and a separator, any run of identifier bytes, white space,
/// `#` (`r#match`), `$` (`mod $name;` in a macro) and non-ASCII bytes
/// (Unicode identifiers, and rustc's Pattern_White_Space beyond ASCII:
/// U+0085, U+200E, U+200F, U+2028, U+2029) that ends in `;` or a comment.
fn has_file_module_decl(text: &[u8]) -> bool {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // Vertical tab (0x0B) is Pattern_White_Space but not `is_ascii_whitespace`.
    let is_space = |b: u8| b.is_ascii_whitespace() || b == 0x0B || b >= 0x80;
    let mut start = 0;
    while let Some(pos) = memchr::memmem::find(&text[start..], b"mod") {
        let at = start + pos;
        start = at + 3;
        // An ASCII byte of a longer identifier before `mod` (`model`); a
        // non-ASCII byte may be white space (U+0085 ends in 0x85), so it
        // does not skip.
        if at > 0 && is_ident(text[at - 1]) {
            continue;
        }
        let mut i = at + 3;
        match text.get(i) {
            // A comment may stand anywhere in `mod name;`; when one does,
            // let the parser decide rather than risk skipping a file module.
            Some(b'/') => return true,
            Some(&b) if is_space(b) => {}
            _ => continue,
        }
        while i < text.len()
            && (is_ident(text[i]) || is_space(text[i]) || matches!(text[i], b'#' | b'$'))
        {
            i += 1;
        }
        if matches!(text.get(i), Some(b';' | b'/')) {
            return true;
        }
        // Every `mod` inside the run just read ends where it ended: skip
        // them, so a hostile `mod mod mod …` stays linear.
        start = start.max(i);
    }
    false
}

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
    /// Why the arguments do not give the path by themselves: a macro call
    /// (`concat!`, `env!`, any other) or a metavariable among them.
    pub opaque: Option<String>,
    /// A macro call among the arguments.
    pub has_macro_call: bool,
    /// The name is handed to a macro as a token, not called.
    pub handed_over: bool,
    /// The inline modules (`mod a { … }`) the call stands in, outermost
    /// first: a `mod x;` it expands to loads from their directory.
    pub inline: Vec<String>,
    /// One of them is moved by `#[path]` or `cfg_attr`.
    pub inline_moved: bool,
}

/// Every call of one of `names` (`name!(…)`) in `text`, and every place one
/// of them is handed over as a token outside a `use` (`call!(m, "x")`).
/// `Err` when the text does not tokenise.
pub fn call_sites(
    text: &str,
    names: &std::collections::HashSet<String>,
) -> Result<Vec<CallSite>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let start = shebang_end(text);
    let source = Source::index(text, start).map_err(|(_, why)| why)?;
    let mut sites = Vec::new();
    let mut inline = Vec::new();
    let mut place = CallPlace {
        definer: None,
        inline: &mut inline,
        inline_moved: false,
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
}

fn collect_call_sites<'n>(
    src: &Source<'n>,
    range: Range,
    names: &std::collections::HashSet<String>,
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
                collect_call_sites(src, inner(body), names, place, sites);
                place.definer = outer;
                cursor.advance(4);
                continue;
            }
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
            let site = |handed_over: bool| CallSite {
                name: name.to_owned(),
                line,
                definer: place.definer.map(str::to_owned),
                literals: Vec::new(),
                opaque: None,
                has_macro_call: false,
                handed_over,
                inline: place.inline.clone(),
                inline_moved: place.inline_moved,
            };
            if src.is_punct(cursor.peek(1), b'!') {
                if let Some(args) = cursor.peek(2).filter(|g| is_group(Some(*g), None)) {
                    let mut call = site(false);
                    read_arguments(src, inner(args), &mut call);
                    sites.push(call);
                }
            } else if !in_use && !src.is_punct(cursor.behind[0], b'!') {
                // `macro_rules! name` defines it; anything else hands it over.
                sites.push(site(true));
            }
        }
        if is_group(Some(token), None) {
            collect_call_sites(src, inner(token), names, place, sites);
            if is_group(Some(token), Some(Delim::Brace)) {
                moving_attribute = false;
            }
        }
        cursor.advance(1);
    }
}

/// Fills in what a call's arguments say about the path they give.
fn read_arguments(src: &Source<'_>, range: Range, call: &mut CallSite) {
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

/// How deeply groups (`{}`, `()`, `[]`) may nest in a scanned file. The
/// token walk recurses once per level; real code stays far below this, and
/// a hostile file nested thousands deep gets a clear refusal instead of a
/// stack overflow.
pub const MAX_NESTING: usize = 256;

/// How many tokens a construct whose exact shape matters (an attribute
/// body, an include argument, one part of a `concat!`) may hold before it is
/// read as "something else": every shape looked for is shorter.
const MAX_SHAPE_TOKENS: usize = 64;

/// How many pieces a `concat!` path may have before it is unresolved.
const MAX_PATH_PIECES: usize = 4096;

/// Reads one file. Never fails: a file that cannot be tokenised, or nests
/// deeper than [`MAX_NESTING`], is reported through `refused`, with no
/// findings, and the caller refuses the key.
///
/// The file is read as tokens, never as a syntax tree: every form that
/// loads a file (`mod x;`, attributes, macro calls) is visible at the token
/// level, recursion is bounded by the group depth checked first, and syntax
/// newer than any parser is no obstacle.
pub fn scan_file(text: &str, ctx: &FileContext<'_>) -> FileScan {
    let mut scan = FileScan::default();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if u32::try_from(text.len()).is_err() {
        scan.refused = Some((
            1,
            "larger than 4 GiB; ci-key refuses to read a source this large (split the file)".into(),
        ));
        return scan;
    }
    let start = shebang_end(text);
    match Source::index(text, start) {
        Ok(source) => {
            let mut walker = TokenWalker {
                ctx,
                src: &source,
                scan: &mut scan,
                in_macro_rules: None,
                in_alternative: false,
                in_macro_args: 0,
                in_generated_macro: false,
            };
            walker.walk_items((start, text.len()), ctx.module_dir, 0);
        }
        Err((offset, why)) => {
            scan.refused = Some((line_at(text, offset), why));
        }
    }
    scan
}

/// Where tokens start: after a `#!` first line that is not an inner
/// attribute (rustc's `strip_shebang`).
fn shebang_end(text: &str) -> usize {
    let Some(tail) = text.strip_prefix("#!") else {
        return 0;
    };
    let next = Lexer::new(tail, 0, tail.len()).next_token();
    if matches!(
        next,
        Ok(Some(Token {
            kind: Kind::Open(Delim::Bracket),
            ..
        }))
    ) {
        return 0;
    }
    text.find('\n').unwrap_or(text.len())
}

/// The 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    1 + memchr::memchr_iter(b'\n', &text.as_bytes()[..offset.min(text.len())]).count()
}

/// A byte range of the text: a whole file, or the inside of a group.
type Range = (usize, usize);

/// A file's text and where each of its groups closes.
struct Source<'s> {
    text: &'s str,
    /// (open offset, close offset) of every group, by open offset.
    groups: Vec<(u32, u32)>,
    /// The last offset whose line was asked for, with that line: lines are
    /// mostly asked for in order, so counting goes on from there.
    line_cache: Cell<(usize, usize)>,
}

impl<'s> Source<'s> {
    /// Lexes the whole text once: every token must be one rustc accepts,
    /// every bracket must match, and nesting is limited. Errors give the
    /// offset and the reason.
    fn index(text: &'s str, start: usize) -> Result<Self, (usize, String)> {
        let mut lexer = Lexer::new(text, start, text.len());
        let mut groups: Vec<(u32, u32)> = Vec::new();
        let mut open: Vec<(Delim, usize)> = Vec::new();
        let offset = |at: usize| u32::try_from(at).unwrap_or(u32::MAX);
        loop {
            let token = match lexer.next_token() {
                Ok(Some(token)) => token,
                Ok(None) => break,
                Err(err) => {
                    return Err((
                        err.offset,
                        format!("cannot tokenise it ({}), so neither can rustc", err.what),
                    ));
                }
            };
            match token.kind {
                Kind::Open(delim) => {
                    open.push((delim, groups.len()));
                    groups.push((offset(token.start), u32::MAX));
                    if open.len() > MAX_NESTING {
                        return Err((
                            token.start,
                            format!(
                                "brackets nest more than {MAX_NESTING} deep here; ci-key refuses to read a file nested this deeply (flatten the nesting, or split the file)"
                            ),
                        ));
                    }
                }
                Kind::Close(delim) => match open.pop() {
                    Some((opened, index)) if opened == delim => {
                        groups[index].1 = offset(token.start);
                    }
                    _ => {
                        return Err((
                            token.start,
                            "cannot tokenise it (a closing delimiter that matches no opening one), so neither can rustc".into(),
                        ));
                    }
                },
                _ => {}
            }
        }
        if let Some(&(_, index)) = open.last() {
            return Err((
                groups[index].0 as usize,
                "cannot tokenise it (an unclosed delimiter), so neither can rustc".into(),
            ));
        }
        Ok(Source {
            text,
            groups,
            line_cache: Cell::new((0, 1)),
        })
    }

    /// The offset of the bracket that closes the group opened at `open`.
    fn close_of(&self, open: usize) -> Option<usize> {
        let at = u32::try_from(open).ok()?;
        let index = self.groups.binary_search_by_key(&at, |g| g.0).ok()?;
        Some(self.groups[index].1 as usize)
    }

    fn line(&self, offset: usize) -> usize {
        let (cached, line) = self.line_cache.get();
        let bytes = self.text.as_bytes();
        let line = if offset >= cached {
            line + memchr::memchr_iter(b'\n', &bytes[cached..offset]).count()
        } else {
            line - memchr::memchr_iter(b'\n', &bytes[offset..cached]).count()
        };
        self.line_cache.set((offset, line));
        line
    }

    fn cursor(&self, range: Range) -> Cursor<'_, 's> {
        Cursor {
            src: self,
            lexer: Lexer::new(self.text, range.0, range.1),
            ahead: VecDeque::new(),
            behind: [None, None],
        }
    }

    fn text(&self, token: Token) -> &'s str {
        &self.text[token.start..token.end]
    }

    /// Whether `token` is the plain (not raw) identifier `name`.
    fn is_ident(&self, token: Option<Token>, name: &str) -> bool {
        token.is_some_and(|t| t.kind == Kind::Ident && self.text(t) == name)
    }

    /// Whether `token` is the identifier `name`, raw or not: `r#path` is
    /// `path` to rustc wherever a name is not a keyword (attributes,
    /// macros, path segments).
    fn is_name(&self, token: Option<Token>, name: &str) -> bool {
        self.ident_name(token) == Some(name)
    }

    /// The name of an identifier, raw or not, without its `r#`.
    fn ident_name(&self, token: Option<Token>) -> Option<&'s str> {
        let token = token?;
        match token.kind {
            Kind::Ident => Some(self.text(token)),
            Kind::RawIdent => Some(&self.text(token)[2..]),
            _ => None,
        }
    }

    fn is_punct(&self, token: Option<Token>, c: u8) -> bool {
        token.is_some_and(|t| t.kind == Kind::Punct && self.text.as_bytes()[t.start] == c)
    }

    /// The text of a range for a message: white space collapsed, shortened.
    fn snippet(&self, range: Range) -> String {
        let text = self.text[range.0..range.1]
            .split_whitespace()
            .collect::<Vec<_>>();
        let text = text.join(" ");
        match text.char_indices().nth(80) {
            Some((at, _)) => format!("{} …", &text[..at]),
            None => text,
        }
    }

    /// The tokens of `range`, or `None` when it holds more than `max`.
    fn shape(&self, range: Range, max: usize) -> Option<Vec<Token>> {
        let mut cursor = self.cursor(range);
        let mut tokens = Vec::new();
        while let Some(token) = cursor.peek(0) {
            if tokens.len() == max {
                return None;
            }
            tokens.push(token);
            cursor.advance(1);
        }
        Some(tokens)
    }

    /// Calls `each` with every comma-separated part of `range` (empty parts
    /// skipped): its range, and its tokens when it has at most `max`.
    fn for_each_part(
        &self,
        range: Range,
        max: usize,
        mut each: impl FnMut(Range, Option<&[Token]>),
    ) {
        let mut cursor = self.cursor(range);
        let mut tokens: Vec<Token> = Vec::new();
        let mut part: Option<Range> = None;
        let mut long = false;
        let mut flush = |part: &mut Option<Range>, tokens: &mut Vec<Token>, long: &mut bool| {
            if let Some(range) = part.take() {
                each(range, (!*long).then_some(tokens.as_slice()));
            }
            tokens.clear();
            *long = false;
        };
        while let Some(token) = cursor.peek(0) {
            cursor.advance(1);
            if self.is_punct(Some(token), b',') {
                flush(&mut part, &mut tokens, &mut long);
                continue;
            }
            part = Some((part.map_or(token.start, |p| p.0), token.end));
            if tokens.len() < max {
                tokens.push(token);
            } else {
                long = true;
            }
        }
        flush(&mut part, &mut tokens, &mut long);
    }
}

/// The inside of a group token.
fn inner(group: Token) -> Range {
    (group.start + 1, group.end - 1)
}

fn is_group(token: Option<Token>, delim: Option<Delim>) -> bool {
    match token.map(|t| t.kind) {
        Some(Kind::Open(d)) => delim.is_none_or(|want| want == d),
        _ => false,
    }
}

/// Tokens of one level of a range, a group being one token (kind `Open`,
/// spanning its brackets), lexed on demand with a few tokens of lookahead.
struct Cursor<'a, 's> {
    src: &'a Source<'s>,
    lexer: Lexer<'s>,
    ahead: VecDeque<Token>,
    /// The last two tokens stepped over, the latest first.
    behind: [Option<Token>; 2],
}

impl Cursor<'_, '_> {
    fn peek(&mut self, n: usize) -> Option<Token> {
        while self.ahead.len() <= n {
            // The range was lexed whole by `Source::index`: the same text
            // lexes the same way again, and every group is known.
            let mut token = self.lexer.next_token().ok().flatten()?;
            match token.kind {
                Kind::Open(_) => {
                    let close = self.src.close_of(token.start)?;
                    token.end = close + 1;
                    self.lexer.seek(close + 1);
                }
                Kind::Close(_) => return None,
                _ => {}
            }
            self.ahead.push_back(token);
        }
        self.ahead.get(n).copied()
    }

    fn advance(&mut self, n: usize) {
        for _ in 0..n {
            if self.ahead.is_empty() {
                self.peek(0);
            }
            if let Some(token) = self.ahead.pop_front() {
                self.behind = [Some(token), self.behind[0]];
            }
        }
    }

    /// Whether the group at the cursor holds a macro call's arguments
    /// (`name ! (…)`).
    fn at_macro_args(&self) -> bool {
        self.src.is_punct(self.behind[0], b'!') && self.src.ident_name(self.behind[1]).is_some()
    }
}

/// What a build script prints to declare the files it reads.
const RERUN_DIRECTIVE: &str = "rerun-if-changed";

/// Whether a literal holds part of [`RERUN_DIRECTIVE`] cut where another
/// piece may complete it: it ends with a start of the word at least 5
/// characters long (`"cargo:rerun-if-"`), holds one just before a `{`
/// (`"cargo:rerun-if-{}"`), or begins with an end of it at least 10 long
/// (`"if-changed=data"`). Any two-piece split is one of these.
fn splits_rerun_directive(value: &str) -> bool {
    let word = RERUN_DIRECTIVE;
    (5..word.len()).any(|n| {
        let head = &word[..n];
        value.ends_with(head) || value.contains(&format!("{head}{{"))
    }) || (10..word.len()).any(|n| value.starts_with(&word[word.len() - n..]))
}

/// What the build-script directives that hand the linker arguments hold
/// (`rustc-link-arg`, `rustc-link-arg-bins`, …, `rustc-cdylib-link-arg`):
/// the files their literal values name are inputs.
pub const LINK_ARG_DIRECTIVE: &str = "link-arg";

/// The macros that make rustc read a file named by their argument.
pub const INCLUDE_MACROS: &[&str] = &["include_str", "include_bytes", "include"];

/// A macro of a registry crate that makes the compiler read files its
/// arguments name. `ci-key` cannot follow a proc macro's code, so each is
/// listed here, the one place that knows them, with what it reads.
pub struct PathMacro {
    pub name: &'static str,
    /// The crate that provides it, for messages.
    pub krate: &'static str,
    pub form: PathMacroForm,
    pub reads: PathReads,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathMacroForm {
    /// `name!(…)`, by its name whatever path it is called through.
    Call,
    /// `#[name = "…"]`.
    Attribute,
    /// `#[name(…, path = "…", …)]`.
    AttributeWithPath,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathReads {
    /// The literal argument, relative to the calling file, as `include_str!`
    /// (a `macro_rules!` wrapper around it).
    FileRelative,
    /// A directory below `CARGO_MANIFEST_DIR`, read whole; `$CARGO_MANIFEST_DIR`
    /// may start the text. `default` is read when there is no argument.
    ManifestDirTree { default: Option<&'static str> },
    /// Rules too varied to model (search paths, configuration files,
    /// settings): the key is refused until the policy declares the files
    /// with `[[key.dynamic-include]]`.
    Declared,
    /// An assembler template (`global_asm!`, `asm!`, `naked_asm!`): the
    /// files its `.incbin` and `.include` directives name ([`asm_directives`]).
    AssemblerTemplate,
}

/// The registry macros known to read files named in the source. A call of
/// one that cannot be resolved refuses the key, with the fix.
pub const PATH_MACROS: &[PathMacro] = &[
    PathMacro {
        name: "include_dir",
        krate: "include_dir",
        form: PathMacroForm::Call,
        reads: PathReads::ManifestDirTree { default: None },
    },
    PathMacro {
        name: "folder",
        krate: "rust-embed",
        form: PathMacroForm::Attribute,
        reads: PathReads::ManifestDirTree { default: None },
    },
    PathMacro {
        name: "migrate",
        krate: "sqlx",
        form: PathMacroForm::Call,
        reads: PathReads::ManifestDirTree {
            default: Some("migrations"),
        },
    },
    PathMacro {
        name: "embed_migrations",
        krate: "diesel_migrations or refinery",
        form: PathMacroForm::Call,
        reads: PathReads::ManifestDirTree {
            default: Some("migrations"),
        },
    },
    PathMacro {
        name: "i18n",
        krate: "rust-i18n",
        form: PathMacroForm::Call,
        reads: PathReads::ManifestDirTree {
            default: Some("locales"),
        },
    },
    PathMacro {
        name: "include_wgsl",
        krate: "wgpu",
        form: PathMacroForm::Call,
        reads: PathReads::FileRelative,
    },
    PathMacro {
        name: "include_spirv",
        krate: "wgpu or inline-spirv",
        form: PathMacroForm::Call,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "include_spirv_raw",
        krate: "wgpu",
        form: PathMacroForm::Call,
        reads: PathReads::FileRelative,
    },
    PathMacro {
        name: "flate",
        krate: "include-flate",
        form: PathMacroForm::Call,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "template",
        krate: "askama or rinja",
        form: PathMacroForm::AttributeWithPath,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "grammar",
        krate: "pest_derive",
        form: PathMacroForm::Attribute,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "dotenv",
        krate: "dotenv_codegen or dotenvy_macro",
        form: PathMacroForm::Call,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "import_types",
        krate: "typify",
        form: PathMacroForm::Call,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "generate_api",
        krate: "progenitor",
        form: PathMacroForm::Call,
        reads: PathReads::Declared,
    },
    PathMacro {
        name: "global_asm",
        krate: "core::arch",
        form: PathMacroForm::Call,
        reads: PathReads::AssemblerTemplate,
    },
    PathMacro {
        name: "asm",
        krate: "core::arch",
        form: PathMacroForm::Call,
        reads: PathReads::AssemblerTemplate,
    },
    PathMacro {
        name: "naked_asm",
        krate: "core::arch",
        form: PathMacroForm::Call,
        reads: PathReads::AssemblerTemplate,
    },
];

/// The files an assembler text names: `.incbin "file"` (read as bytes,
/// `false`) and `.include "file"` (read as assembler source, `true`), as
/// LLVM's integrated assembler reads them: directive names in any case,
/// the file a quoted string, resolved from the working directory (rustc
/// passes no include directory). Over-approximates (a directive in a
/// comment counts); a name it cannot read exactly (an escape, an `asm!`
/// `{…}` placeholder, a `.macro` argument, no quotes) is an `Err` saying so.
pub fn asm_directives(text: &str) -> Vec<Result<(String, bool), String>> {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut found = Vec::new();
    for (directive, source) in [(".incbin", false), (".include", true)] {
        for at in memchr::memmem::find_iter(bytes, directive.as_bytes()) {
            let before = at.checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(at + directive.len()).copied();
            let word = |b: Option<u8>| {
                b.is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
            };
            if word(before) || word(after) {
                continue;
            }
            let rest = text[at + directive.len()..].trim_start_matches([' ', '\t']);
            let Some(quoted) = rest.strip_prefix('"') else {
                found.push(Err(format!(
                    "a `{directive}` whose file is not a quoted string"
                )));
                continue;
            };
            let name = match quoted.find(['"', '\\', '\n']) {
                Some(end) if quoted.as_bytes()[end] == b'"' => &quoted[..end],
                _ => {
                    found.push(Err(format!(
                        "a `{directive}` whose file name holds an escape or no closing quote"
                    )));
                    continue;
                }
            };
            if name.contains(['{', '}']) || name.is_empty() {
                found.push(Err(format!(
                    "a `{directive} \"{name}\"` whose file an asm! operand chooses"
                )));
                continue;
            }
            found.push(Ok((name.to_owned(), source)));
        }
    }
    found
}

fn path_macro(name: &str, form: PathMacroForm) -> Option<&'static PathMacro> {
    PATH_MACROS
        .iter()
        .find(|m| m.name == name && m.form == form)
}

/// The directory a `#[path]` attribute is relative to: outside inline
/// modules the directory of the file itself, inside them the scope's module
/// directory.
fn path_attribute_base(ctx: &FileContext<'_>, scope: &Path, inline_depth: usize) -> PathBuf {
    if inline_depth == 0 {
        ctx.file.parent().unwrap_or(Path::new("/")).to_path_buf()
    } else {
        scope.to_path_buf()
    }
}

/// The module directory of an inline `mod name { … }`. A `#[path]` on it
/// names that directory, relative to the same base as a file module's
/// `#[path]`: in a non-mod-rs file `src/a.rs`, `#[path = "x"] mod m { mod c; }`
/// loads `src/x/c.rs`, not `src/a/x/c.rs`.
fn inline_scope(
    ctx: &FileContext<'_>,
    scope: &Path,
    inline_depth: usize,
    name: &str,
    path_attr: Option<String>,
) -> PathBuf {
    match path_attr {
        Some(path) => path_attribute_base(ctx, scope, inline_depth).join(path),
        None => scope.join(name),
    }
}

/// Every file `mod name;` may load: one declaration for the file rustc picks
/// without any `cfg`, and one for each `#[cfg_attr(…, path = "…")]`, since
/// which `cfg` holds is decided by the build, not by this reading.
fn module_decls(
    ctx: &FileContext<'_>,
    scope: &Path,
    inline_depth: usize,
    name: String,
    path_attr: Option<String>,
    cfg_paths: Vec<String>,
    line: usize,
) -> Vec<ModuleDecl> {
    let has_alternatives = !cfg_paths.is_empty();
    let mut decls: Vec<ModuleDecl> = cfg_paths
        .into_iter()
        .map(|path| {
            let mut decl = module_decl(ctx, scope, inline_depth, name.clone(), Some(path), line);
            decl.has_alternatives = true;
            decl
        })
        .collect();
    let mut default = module_decl(ctx, scope, inline_depth, name, path_attr, line);
    default.has_alternatives = has_alternatives;
    decls.insert(0, default);
    decls
}

/// Applies rustc's rules for where `mod name;` is loaded from.
///
/// Without `#[path]`, `name.rs` then `name/mod.rs` in the scope's module
/// directory. With `#[path]`, see [`path_attribute_base`]. A file loaded
/// through `#[path]` owns its own directory, like a `mod.rs`.
fn module_decl(
    ctx: &FileContext<'_>,
    scope: &Path,
    inline_depth: usize,
    name: String,
    path_attr: Option<String>,
    line: usize,
) -> ModuleDecl {
    let candidates = match path_attr {
        Some(path) => {
            let file = path_attribute_base(ctx, scope, inline_depth).join(path);
            let dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
            vec![(file, dir)]
        }
        None => vec![
            (scope.join(format!("{name}.rs")), scope.join(&name)),
            (scope.join(&name).join("mod.rs"), scope.join(&name)),
        ],
    };
    ModuleDecl {
        name,
        candidates,
        site: Site {
            file: ctx.file.to_path_buf(),
            line,
        },
        has_alternatives: false,
    }
}

impl Source<'_> {
    /// The `path = "…"` values of a `cfg_attr(predicate, attr, …)` argument
    /// list, nested `cfg_attr`s included.
    fn cfg_attr_paths(&self, args: Range) -> Vec<String> {
        let mut paths = Vec::new();
        let mut first = true;
        self.for_each_part(args, 3, |part, tokens| {
            if std::mem::take(&mut first) {
                return;
            }
            if let Some(path) = self.lexical_path_attribute(part) {
                paths.push(path);
            } else if let Some(&[name, group]) = tokens {
                if self.is_name(Some(name), "cfg_attr") && is_group(Some(group), Some(Delim::Paren))
                {
                    paths.extend(self.cfg_attr_paths(inner(group)));
                }
            }
        });
        paths
    }

    /// Whether a bracketed attribute body is `doc = "…"`.
    fn is_doc_text(&self, body: Range) -> bool {
        matches!(
            self.shape(body, 3).as_deref(),
            Some(&[name, eq, lit]) if self.is_name(Some(name), "doc")
                && self.is_punct(Some(eq), b'=') && lit.kind == Kind::Literal
        )
    }

    /// `path = "…"`: the path.
    fn lexical_path_attribute(&self, body: Range) -> Option<String> {
        match self.shape(body, 3)?.as_slice() {
            &[name, eq, lit]
                if self.is_name(Some(name), "path")
                    && self.is_punct(Some(eq), b'=')
                    && lit.kind == Kind::Literal =>
            {
                lexer::string_value(self.text(lit))
            }
            _ => None,
        }
    }

    /// `name ! (args)` at the cursor: the macro's name (without `r#`), its
    /// arguments and the line of the name.
    fn macro_call_at(&self, cursor: &mut Cursor<'_, '_>) -> Option<(&str, Range, usize)> {
        let name = self.ident_name(cursor.peek(0))?;
        if !self.is_punct(cursor.peek(1), b'!') || !is_group(cursor.peek(2), None) {
            return None;
        }
        let line = self.line(cursor.peek(0)?.start);
        Some((name, inner(cursor.peek(2)?), line))
    }
}

/// At `$` in a `macro_rules!` body: whether a metavariable or a
/// repetition is called as a macro (`$m!(…)`, `$($m)*!(…)`, `$($m),+!(…)`).
fn calls_metavariable(src: &Source<'_>, cursor: &mut Cursor<'_, '_>) -> bool {
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

struct TokenWalker<'a, 'b, 's> {
    ctx: &'a FileContext<'a>,
    src: &'a Source<'s>,
    scan: &'b mut FileScan,
    /// The `macro_rules!` whose body is being walked, if any.
    in_macro_rules: Option<String>,
    /// Inside an inline module with `cfg_attr(…, path = …)` directories,
    /// where a module file's absence in one of them is expected.
    in_alternative: bool,
    /// How many macro calls' arguments the walk is inside.
    in_macro_args: usize,
    /// Inside a `macro_rules! $name` that a macro body defines: its callers
    /// cannot be found by name.
    in_generated_macro: bool,
}

impl TokenWalker<'_, '_, '_> {
    /// Finds `include_*!(…)` anywhere in a range, including nested groups.
    fn walk_for_embeds(&mut self, range: Range) {
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
                    if delim == Delim::Bracket {
                        self.record_attribute_forms(inner(token));
                    }
                    let args = usize::from(cursor.at_macro_args());
                    self.in_macro_args += args;
                    self.walk_for_embeds(inner(token));
                    self.in_macro_args -= args;
                }
                Kind::Literal => self.record_literal(token),
                Kind::Punct
                    if self.in_macro_rules.is_some()
                        && src.is_punct(Some(token), b'$')
                        && calls_metavariable(src, &mut cursor) =>
                {
                    self.scan.metavariable_macro_call = true;
                }
                _ => {}
            }
            cursor.advance(1);
        }
    }

    /// A `macro_rules!` defined inside a macro body (at `token`): its body
    /// is walked as its own (`macro_rules! inner {…}`), or, when the caller
    /// names it (`macro_rules! $name {…}`), as one whose callers cannot be
    /// found: what it includes from its callers, or the modules it
    /// declares, refuse the key. Returns how many tokens it spans.
    fn walk_nested_macro_rules(
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

    /// The token-only reading of a whole file or inline module body: embeds
    /// and literals everywhere, plus `[#[path = "…"]] [pub…] mod name ;|{…}`.
    fn walk_items(&mut self, range: Range, scope: &Path, inline_depth: usize) {
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
    fn walk_macro_args_or_items(
        &mut self,
        cursor: &Cursor<'_, '_>,
        range: Range,
        scope: &Path,
        inline_depth: usize,
    ) {
        let args = usize::from(cursor.at_macro_args());
        self.in_macro_args += args;
        self.walk_items(range, scope, inline_depth);
        self.in_macro_args -= args;
    }

    /// Follows `use … ;` statements at one level: `in_use` says whether the
    /// cursor is inside one; returns whether it still is. Every `A as B`
    /// of the statement is recorded, nested groups (`use std::{include_str
    /// as s}`) included.
    fn track_use(&mut self, cursor: &mut Cursor<'_, '_>, in_use: bool) -> bool {
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
    fn record_use_renames(&mut self, range: Range) {
        let mut cursor = self.src.cursor(range);
        while let Some(token) = cursor.peek(0) {
            if is_group(Some(token), None) {
                self.record_use_renames(inner(token));
            }
            self.record_rename_at(&mut cursor);
            cursor.advance(1);
        }
    }

    fn record_rename_at(&mut self, cursor: &mut Cursor<'_, '_>) {
        let src = self.src;
        if let (Some(from), true, Some(to)) = (
            src.ident_name(cursor.peek(0)),
            src.is_ident(cursor.peek(1), "as"),
            src.ident_name(cursor.peek(2)),
        ) {
            self.scan.use_renames.push((from.to_owned(), to.to_owned()));
        }
    }

    /// The `[#[path = "…"]] mod name;` declarations anywhere in a
    /// `macro_rules!` body. One whose file a metavariable chooses (`mod $m;`,
    /// `#[path = $p]`) is refused: each caller picks another file.
    fn record_macro_modules(&mut self, macro_rules: &str, body: Range) {
        let src = self.src;
        let mut pending = vec![body];
        while let Some(range) = pending.pop() {
            let mut cursor = src.cursor(range);
            let mut path_attr: Option<Result<String, ()>> = None;
            while let Some(token) = cursor.peek(0) {
                cursor.advance(1);
                match token.kind {
                    Kind::Open(Delim::Bracket) => {
                        let body = inner(token);
                        let first = src.cursor(body).peek(0);
                        if src.is_name(first, "path") {
                            // The first `#[path]` is the one rustc obeys.
                            path_attr
                                .get_or_insert_with(|| src.lexical_path_attribute(body).ok_or(()));
                        }
                        pending.push(body);
                        continue;
                    }
                    Kind::Open(_) => pending.push(inner(token)),
                    Kind::Ident if src.text(token) == "mod" => {
                        let line = src.line(token.start);
                        let (name, after) = match (cursor.peek(0), cursor.peek(1)) {
                            (next, after) if src.ident_name(next).is_some() => {
                                (src.ident_name(next).map(str::to_owned), after)
                            }
                            (dollar, name)
                                if src.is_punct(dollar, b'$') && src.ident_name(name).is_some() =>
                            {
                                (None, cursor.peek(2))
                            }
                            _ => (None, None),
                        };
                        if !src.is_punct(after, b';') {
                            path_attr = None;
                            continue;
                        }
                        let path = match path_attr.take() {
                            Some(Ok(path)) => Some(path),
                            Some(Err(())) => {
                                self.scan.refused.get_or_insert((
                                    line,
                                    format!(
                                        "macro_rules! {macro_rules} declares a file module with `#[path = $…]`, so each caller loads another file and ci-key cannot know which; declare the module outside the macro, or give it a literal #[path]"
                                    ),
                                ));
                                continue;
                            }
                            None => None,
                        };
                        self.scan.macro_modules.push(MacroModule {
                            macro_rules: macro_rules.to_owned(),
                            // `mod $m;` without `#[path]`: each caller names
                            // the file, so every candidate is read.
                            name: match (&name, &path) {
                                (_, Some(_)) => Some(name.unwrap_or_default()),
                                (Some(_), None) => name,
                                (None, None) => None,
                            },
                            path,
                            line,
                        });
                        continue;
                    }
                    Kind::Punct if src.is_punct(Some(token), b'#') => continue,
                    Kind::Ident if src.text(token) == "pub" => continue,
                    _ => {}
                }
                path_attr = None;
            }
        }
    }

    /// At `debugger_visualizer(…)` (an attribute, perhaps inside
    /// `cfg_attr`): records the `natvis_file` / `gdb_script_file` rustc
    /// reads, relative to the directory of this file (checked with rustc
    /// 1.95's dep-info: not the module directory).
    fn record_debugger_visualizers(&mut self, cursor: &mut Cursor<'_, '_>) {
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

    /// Records what a macro of [`PATH_MACROS`] reads: `arg` is its string
    /// argument, `Some(None)` when it has none, `None` when it has another.
    fn record_path_macro(&mut self, known: &PathMacro, arg: Option<Option<String>>, line: usize) {
        let label = match known.form {
            PathMacroForm::Call => format!("{}! ({})", known.name, known.krate),
            _ => format!("#[{}] ({})", known.name, known.krate),
        };
        let unresolved = |why: &str| EmbedTarget::Unresolved(format!("files {why}"));
        let target = match (known.reads, arg) {
            (PathReads::Declared, _) => {
                unresolved(&format!("by {} rules ci-key does not model", known.krate))
            }
            // Read from its template (`record_assembler_template`), not one argument.
            (PathReads::AssemblerTemplate, _) => unresolved("of an assembler template"),
            (_, None) => unresolved("with an argument that is not a string literal"),
            (PathReads::FileRelative, Some(Some(path))) => {
                EmbedTarget::File(self.ctx.file.parent().unwrap_or(Path::new("/")).join(path))
            }
            (PathReads::FileRelative, Some(None)) => unresolved("with no path argument"),
            (PathReads::ManifestDirTree { default }, Some(path)) => {
                match path.as_deref().or(default) {
                    None => unresolved("with no path argument"),
                    Some(path) => {
                        let (from_manifest, rest) = match path.strip_prefix("$CARGO_MANIFEST_DIR") {
                            Some(rest) => (true, rest),
                            None => (false, path),
                        };
                        if rest.contains('$') {
                            unresolved(&format!(
                                "under {path:?}, which names an environment variable"
                            ))
                        } else if !from_manifest && Path::new(rest).is_absolute() {
                            // Read where it points: inside the checkout it
                            // is hashed, outside it is refused.
                            EmbedTarget::Tree(PathBuf::from(rest))
                        } else {
                            EmbedTarget::Tree(
                                self.ctx.package_dir.join(rest.trim_start_matches('/')),
                            )
                        }
                    }
                }
            }
        };
        self.scan.embeds.push(Embed {
            macro_name: label,
            target,
            site: Site {
                file: self.ctx.file.to_path_buf(),
                line,
            },
            caller_relative: None,
        });
    }

    /// `global_asm!`, `asm!`, `naked_asm!`: the files the assembler reads
    /// for the template, the leading string arguments (each one, or a
    /// `concat!` of literals) or an `include_str!`d assembler source (read
    /// for its directives where it is resolved). Operands end the template.
    /// A template this reading cannot see (another macro's output, a
    /// metavariable, a generated file) refuses the key until declared.
    fn record_assembler_template(&mut self, known: &PathMacro, args: Range, line: usize) {
        let src = self.src;
        let ctx = self.ctx;
        let mut targets = Vec::new();
        let mut templates = true;
        src.for_each_part(args, MAX_SHAPE_TOKENS, |part, tokens| {
            if !templates {
                return;
            }
            let Some(tokens) = tokens else {
                templates = false;
                return;
            };
            // `core::concat!`, `::std::arch::…`: the macro's own name.
            let call = match tokens {
                [.., name, bang, group]
                    if src.is_punct(Some(*bang), b'!') && is_group(Some(*group), None) =>
                {
                    src.ident_name(Some(*name)).map(|n| (n, inner(*group)))
                }
                _ => None,
            };
            let text = match (tokens, call) {
                ([lit], _) if lit.kind == Kind::Literal => lexer::string_value(src.text(*lit))
                    .ok_or_else(|| format!("the template {}", src.text(*lit))),
                (_, Some(("concat", group))) => {
                    let mut pieces = Vec::new();
                    src.for_each_part(group, 0, |piece, _| {
                        evaluate_into(src, piece, &mut pieces);
                    });
                    pieces
                        .iter()
                        .map(|piece| match piece {
                            Piece::Text(text) => Ok(text.as_str()),
                            _ => Err(format!("the template `{}`", src.snippet(part))),
                        })
                        .collect::<Result<String, _>>()
                }
                (_, Some((name, group))) if ctx.include_macro(name).as_deref() == Some("include_str") => {
                    match evaluate_path(src, group, ctx).0 {
                        EmbedTarget::File(path) => {
                            targets.push(EmbedTarget::Assembler { path, source: true });
                            return;
                        }
                        EmbedTarget::OutDir => Err(
                            "the directives of an assembler source the build script generates".to_owned(),
                        ),
                        _ => Err(format!("the template `{}`", src.snippet(part))),
                    }
                }
                (_, Some(_)) => Err(format!("the template `{}`, which another macro makes", src.snippet(part))),
                ([dollar, ..], None) if src.is_punct(Some(*dollar), b'$') => Err(format!(
                    "the template `{}`, which a macro_rules! caller chooses",
                    src.snippet(part)
                )),
                _ => {
                    templates = false;
                    return;
                }
            };
            match text {
                Ok(text) => {
                    for directive in asm_directives(&text) {
                        targets.push(match directive {
                            Ok((path, source)) => EmbedTarget::Assembler {
                                path: PathBuf::from(path),
                                source,
                            },
                            Err(why) => EmbedTarget::Unresolved(why),
                        });
                    }
                }
                Err(what) => targets.push(EmbedTarget::Unresolved(format!(
                    "{what} (the assembler reads the files its `.incbin`/`.include` directives name)"
                ))),
            }
        });
        for target in targets {
            self.scan.embeds.push(Embed {
                macro_name: format!("{}!", known.name),
                target,
                site: Site {
                    file: self.ctx.file.to_path_buf(),
                    line,
                },
                caller_relative: None,
            });
        }
    }

    /// The body of an attribute `#[…]`: records a [`PATH_MACROS`] attribute.
    fn record_attribute_forms(&mut self, body: Range) {
        let src = self.src;
        let Some(first) = src.cursor(body).peek(0) else {
            return;
        };
        let Some(name) = src.ident_name(Some(first)) else {
            return;
        };
        let line = src.line(first.start);
        if let Some(known) = path_macro(name, PathMacroForm::Attribute) {
            let arg = match src.shape(body, 3).as_deref() {
                Some(&[_, eq, lit])
                    if src.is_punct(Some(eq), b'=') && lit.kind == Kind::Literal =>
                {
                    lexer::string_value(src.text(lit)).map(Some)
                }
                _ => None,
            };
            self.record_path_macro(known, arg, line);
        }
        if let Some(known) = path_macro(name, PathMacroForm::AttributeWithPath) {
            let Some(&[_, args]) = src.shape(body, 2).as_deref() else {
                return;
            };
            if !is_group(Some(args), Some(Delim::Paren)) {
                return;
            }
            let mut named = false;
            src.for_each_part(inner(args), 3, |part, _| {
                named |= src.is_name(src.cursor(part).peek(0), "path");
            });
            if named {
                self.record_path_macro(known, Some(None), line);
            }
        }
    }

    /// At an identifier: records a `debugger_visualizer(…)` and an
    /// `include_*!(…)` there; says whether it was an include (three tokens).
    fn record_ident_forms(&mut self, cursor: &mut Cursor<'_, '_>, token: Token) -> bool {
        if self.in_macro_args > 0 && self.src.is_punct(Some(token), b'!') {
            // A `!` handed to a macro on its own (`m!(!)`, `m!(x, !)`): the
            // macro may assemble a call from it.
            let next = cursor.peek(1);
            if next.is_none() || self.src.is_punct(next, b',') || self.src.is_punct(next, b';') {
                self.scan.metavariable_macro_call = true;
            }
        }
        if !matches!(token.kind, Kind::Ident | Kind::RawIdent) {
            return false;
        }
        self.record_debugger_visualizers(cursor);
        if self.record_embed_at(cursor) {
            return true;
        }
        if self.in_macro_args > 0 {
            self.record_passed_include(cursor, token);
        } else if self.in_macro_rules.is_some() && self.src.is_punct(cursor.peek(1), b'$') {
            self.record_bang_from_caller(token);
        }
        false
    }

    /// `include_str $b (…)` in a `macro_rules!` body: the caller may pass
    /// the `!` (`m!(!)`), making it a call with a path no reading shows.
    fn record_bang_from_caller(&mut self, token: Token) {
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
    /// `$m!(…)`, with a path no reading of the definition shows.
    fn record_passed_include(&mut self, cursor: &mut Cursor<'_, '_>, token: Token) {
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
                "a path chosen where `{name}` is handed to a macro as a token (a macro_rules! may call it as `$m!(…)`; call {include}! directly)"
            )),
            site: Site {
                file: self.ctx.file.to_path_buf(),
                line: src.line(token.start),
            },
            caller_relative: None,
        };
        if matches!(name, "include_str" | "include_bytes") {
            self.scan.embeds.push(embed);
        } else {
            self.scan.passed_include.push(embed);
        }
    }

    /// Records `include_*!(…)` at the cursor; says whether there was one.
    fn record_embed_at(&mut self, cursor: &mut Cursor<'_, '_>) -> bool {
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
                    self.record_path_macro(known, arg, line);
                }
                false
            }
        }
    }

    fn record_literal(&mut self, token: Token) {
        let text = self.src.text(token);
        // Only an escape can spell the words without holding them.
        if !text.contains("rerun")
            && !text.contains("if-changed")
            && !text.contains(LINK_ARG_DIRECTIVE)
            && !text.contains('\\')
        {
            return;
        }
        let Some(value) = lexer::string_value(text) else {
            return;
        };
        let line = self.src.line(token.start);
        if value.contains(RERUN_DIRECTIVE) || value.contains(LINK_ARG_DIRECTIVE) {
            self.scan.rerun_literals.push((value, line));
        } else if splits_rerun_directive(&value) {
            // Half of the directive: the script assembles the line at run
            // time (`concat!("cargo:rerun-if-", "changed=data")`), which
            // the build-script reading treats as watching the whole package.
            self.scan
                .rerun_literals
                .push((RERUN_DIRECTIVE.to_owned(), line));
        }
    }

    fn record_embed(&mut self, macro_name: &str, args: Range, line: usize) {
        let (mut target, mut relative) = evaluate_path(self.src, args, self.ctx);
        if self.in_generated_macro && (relative.is_some() || target == EmbedTarget::FromCallers) {
            target = EmbedTarget::Unresolved(
                "a path read from the callers of a macro_rules! that another macro defines under a name its caller chooses (`macro_rules! $name`), whose callers ci-key cannot find".into(),
            );
            relative = None;
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

/// One piece of a path expression.
enum Piece {
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
fn evaluate_path(
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

fn evaluate_into(src: &Source<'_>, args: Range, pieces: &mut Vec<Piece>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str, file: &str) -> FileScan {
        let file = Path::new(file);
        let module_dir = file.parent().unwrap();
        let ctx = FileContext {
            file,
            module_dir,
            package_dir: Path::new("/ws/pkg"),
            aliases: &HashMap::new(),
        };
        scan_file(text, &ctx)
    }

    fn targets(scan: &FileScan) -> Vec<EmbedTarget> {
        scan.embeds.iter().map(|e| e.target.clone()).collect()
    }

    #[test]
    fn finds_embeds_in_every_position_but_not_in_literals_or_comments() {
        let text = r##"
//! Crate docs.
#![doc = include_str!("../README.md")]
// include_str!("commented.txt")
const A: &str = include_str!("a.txt");
const B: &str = "include_str!(\"in_literal.txt\")";
/* include_bytes!("block_comment.bin") */
static C: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/c.bin"));
fn f() { println!("{}", include_str!(r#"nested/d.md"#)); }
include!(concat!(env!("OUT_DIR"), "/gen.rs"));
#[cfg_attr(feature = "docs", doc = include_str!("e.md"))]
struct S;
"##;
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        assert_eq!(
            targets(&scan),
            vec![
                EmbedTarget::File("/ws/pkg/src/../README.md".into()),
                EmbedTarget::File("/ws/pkg/src/a.txt".into()),
                EmbedTarget::File("/ws/pkg/data/c.bin".into()),
                EmbedTarget::File("/ws/pkg/src/nested/d.md".into()),
                EmbedTarget::OutDir,
                EmbedTarget::File("/ws/pkg/src/e.md".into()),
            ]
        );
        assert_eq!(scan.embeds[1].site.line, 5);
        assert!(scan.refused.is_none());
    }

    #[test]
    fn macro_rules_metavariables_become_patterns_and_other_arguments_are_unresolved() {
        let text = r#"
macro_rules! kernel { ($name:literal) => { include_bytes!(concat!("../kernels/", $name, ".ptx")) }; }
const P: &str = include_str!(PATH);
const Q: &str = include_str!(concat!(env!("HOME"), "/x"));
"#;
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        let got = targets(&scan);
        assert_eq!(
            got[0],
            EmbedTarget::Pattern("/ws/pkg/src/../kernels/*.ptx".into())
        );
        assert!(
            matches!(&got[1], EmbedTarget::Unresolved(t) if t.contains("PATH")),
            "{got:?}"
        );
        assert!(
            matches!(&got[2], EmbedTarget::Unresolved(t) if t.contains("HOME")),
            "{got:?}"
        );
        assert_eq!(scan.embeds[1].site.line, 3);
    }

    #[test]
    fn module_declarations_follow_rustc_path_rules() {
        let text = r#"
mod plain;
#[path = "elsewhere/x.rs"] mod moved;
#[cfg(feature = "cuda")] pub mod cuda;
mod inline { mod child; #[path = "p.rs"] mod pathed; }
mod tests { #[test] fn t() {} }
"#;
        let scan = scan(text, "/ws/pkg/src/foo.rs");
        let got: Vec<_> = scan
            .modules
            .iter()
            .map(|m| (m.name.clone(), m.candidates.clone()))
            .collect();
        let p = PathBuf::from;
        // The scope directory of a non-mod-rs file `src/foo.rs` is `src/foo/`;
        // the test passes the file's parent to keep the expectations short.
        assert_eq!(
            got[0].1,
            vec![
                (p("/ws/pkg/src/plain.rs"), p("/ws/pkg/src/plain")),
                (p("/ws/pkg/src/plain/mod.rs"), p("/ws/pkg/src/plain"))
            ]
        );
        assert_eq!(
            got[1].1,
            vec![(p("/ws/pkg/src/elsewhere/x.rs"), p("/ws/pkg/src/elsewhere"))]
        );
        assert_eq!(got[2].0, "cuda");
        assert_eq!(got[3].1[0].0, p("/ws/pkg/src/inline/child.rs"));
        assert_eq!(got[4].1[0].0, p("/ws/pkg/src/inline/p.rs"));
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn syntax_no_parser_knows_is_still_read() {
        // Not valid Rust (a missing comma stands in for syntax newer than
        // any parser), but it tokenises.
        let text = r#"
struct Future { a: u8 b: u8 }
mod kept;
const A: &str = include_str!("still_found.txt");
"#;
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        assert!(scan.refused.is_none());
        assert_eq!(scan.modules.len(), 1);
        assert_eq!(
            targets(&scan),
            vec![EmbedTarget::File("/ws/pkg/src/still_found.txt".into())]
        );
    }

    #[test]
    fn a_rerun_directive_split_across_literals_marks_an_assembled_line() {
        for (text, marked) in [
            (
                "println!(concat!(\"cargo:rerun-if-\", \"changed=data\"));",
                true,
            ),
            ("println!(\"cargo:rerun-if-{}\", \"changed=data\");", true),
            (
                "println!(\"{}{}\", \"cargo:rer\", \"un-if-changed=data\");",
                true,
            ),
            ("println!(\"cargo:rerun-if-env-changed=CUDA_PATH\");", false),
        ] {
            let scan = scan(&format!("fn main() {{ {text} }}\n"), "/ws/pkg/build.rs");
            let got = scan
                .rerun_literals
                .iter()
                .any(|(v, _)| v == RERUN_DIRECTIVE);
            assert_eq!(got, marked, "{text}: {:?}", scan.rerun_literals);
        }
    }

    #[test]
    fn assembler_templates_name_the_files_of_their_directives() {
        let text = r#"core::arch::global_asm!(".INCBIN \"a.bin\"", concat!(".inc", "lude \"b.s\""), include_str!("boot.s"));
fn f() { unsafe { std::arch::asm!("nop // .incbin \"c.bin\"", in(reg) 1, ".incbin \"not-a-template\"") } }
macro_rules! m { ($t:literal) => { core::arch::asm!($t) } }
core::arch::global_asm!(".incbin \"{}\"", const 1);
core::arch::global_asm!(my_template!());
"#;
        let found: Vec<String> = scan(text, "/ws/pkg/src/lib.rs")
            .embeds
            .iter()
            .filter(|e| e.macro_name.contains("asm"))
            .map(|e| format!("{}:{:?}", e.site.line, e.target))
            .collect();
        assert_eq!(found.len(), 7, "{found:#?}");
        for (line, needle) in [
            (1, r#"Assembler { path: "a.bin", source: false }"#),
            (1, r#"Assembler { path: "b.s", source: true }"#),
            (
                1,
                r#"Assembler { path: "/ws/pkg/src/boot.s", source: true }"#,
            ),
            (2, r#"Assembler { path: "c.bin", source: false }"#),
            (3, "a macro_rules! caller chooses"),
            (4, "an asm! operand chooses"),
            (5, "which another macro makes"),
        ] {
            assert!(
                found
                    .iter()
                    .any(|f| f.starts_with(&format!("{line}:")) && f.contains(needle)),
                "{line}: {needle}: {found:#?}"
            );
        }
        assert_eq!(
            asm_directives(
                ".incbin\t\"x\"\n.include \"es\\cape\"\n.includes \"no\"\nfoo.incbin \"no\"\n.incbin x"
            ),
            vec![
                Ok(("x".to_owned(), false)),
                Err("a `.incbin` whose file is not a quoted string".to_owned()),
                Err("a `.include` whose file name holds an escape or no closing quote".to_owned()),
            ]
        );
    }

    #[test]
    fn rerun_literals_are_collected() {
        let text = r#"fn main() {
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo::rerun-if-changed={}", dir);
}"#;
        let scan = scan(text, "/ws/pkg/build.rs");
        assert_eq!(
            scan.rerun_literals,
            vec![
                ("cargo:rerun-if-changed=kernels".to_owned(), 2),
                ("cargo::rerun-if-changed={}".to_owned(), 3)
            ]
        );
    }

    fn module_files(scan: &FileScan) -> Vec<PathBuf> {
        scan.modules
            .iter()
            .flat_map(|m| m.candidates.iter().map(|(file, _)| file.clone()))
            .collect()
    }

    #[test]
    fn modules_in_item_macros_and_cfg_attr_paths_are_followed() {
        let text = r#"
cfg_if::cfg_if! {
    if #[cfg(unix)] { mod unix_impl; } else { #[path = "other/win.rs"] mod win; }
}
macro_rules! prelude { () => { mod declared_by_the_caller; }; }
#[cfg_attr(target_os = "linux", path = "../gen/linux.rs")]
#[cfg_attr(windows, cfg_attr(all(), path = "windows.rs"))]
mod sys;
"#;
        for parse_fails in [false, true] {
            // Text no parser accepts is read the same way.
            let text = if parse_fails {
                format!(
                    "struct Broken {{ a: u8 b: u8 }}
{text}"
                )
            } else {
                text.to_owned()
            };
            let scan = scan(&text, "/ws/pkg/src/lib.rs");
            assert!(scan.refused.is_none());
            let p = PathBuf::from;
            assert_eq!(
                module_files(&scan),
                vec![
                    p("/ws/pkg/src/unix_impl.rs"),
                    p("/ws/pkg/src/unix_impl/mod.rs"),
                    p("/ws/pkg/src/other/win.rs"),
                    p("/ws/pkg/src/sys.rs"),
                    p("/ws/pkg/src/sys/mod.rs"),
                    p("/ws/pkg/src/../gen/linux.rs"),
                    p("/ws/pkg/src/windows.rs"),
                ],
                "parse fails: {parse_fails}"
            );
            let sys: Vec<bool> = scan
                .modules
                .iter()
                .filter(|m| m.name == "sys")
                .map(|m| m.has_alternatives)
                .collect();
            assert_eq!(sys, vec![true, true, true]);
        }
    }

    #[test]
    fn path_on_an_inline_module_is_relative_to_the_file_directory() {
        // rustc loads `src/x/child.rs` here (checked with rustc --emit=dep-info):
        // at file level a `#[path]` starts from the file's directory, even in a
        // non-mod-rs file whose own modules live in `src/a/`.
        let text = "#[path = \"x\"] mod inline { mod child; }\nmod plain { mod child2; }\n";
        for text in [
            text.to_owned(),
            format!(
                "struct B {{ a: u8 b: u8 }}
{text}"
            ),
        ] {
            let file = Path::new("/ws/pkg/src/a.rs");
            let ctx = FileContext {
                file,
                module_dir: Path::new("/ws/pkg/src/a"),
                package_dir: Path::new("/ws/pkg"),
                aliases: &HashMap::new(),
            };
            let scan = scan_file(&text, &ctx);
            let p = PathBuf::from;
            assert_eq!(
                module_files(&scan),
                vec![
                    p("/ws/pkg/src/x/child.rs"),
                    p("/ws/pkg/src/x/child/mod.rs"),
                    p("/ws/pkg/src/a/plain/child2.rs"),
                    p("/ws/pkg/src/a/plain/child2/mod.rs"),
                ]
            );
        }
    }

    #[test]
    fn doc_comments_are_not_rerun_declarations() {
        let text = r#"//! This script prints no cargo:rerun-if-changed=build.rs on purpose.
/// Mentions cargo:rerun-if-changed=build.rs too.
fn main() {
    #[doc = "cargo:rerun-if-changed=build.rs"]
    struct S;
    let _ = "cargo:rerun-if-changed=real.txt";
}
"#;
        for text in [
            text.to_owned(),
            format!(
                "{text}
struct B {{ a: u8 b: u8 }}
"
            ),
        ] {
            let scan = scan(&text, "/ws/pkg/build.rs");
            assert_eq!(
                scan.rerun_literals,
                vec![("cargo:rerun-if-changed=real.txt".to_owned(), 6)],
                "{:?}",
                scan.refused
            );
        }
    }

    #[test]
    fn a_path_wholly_chosen_by_the_macro_caller_is_resolved_at_its_callers() {
        let text = "macro_rules! m { ($p:literal) => { include_str!($p) }; }\n";
        let found = scan(text, "/ws/pkg/src/lib.rs");
        assert_eq!(targets(&found), vec![EmbedTarget::FromCallers]);
        assert_eq!(
            found.embeds[0]
                .caller_relative
                .as_ref()
                .unwrap()
                .macro_rules,
            "m"
        );
        // A path that only starts with one may climb anywhere: unresolved.
        let text = "macro_rules! m { ($d:literal) => { include_str!(concat!($d, \"/x\")) }; }\n";
        let got = targets(&scan(text, "/ws/pkg/src/lib.rs"));
        assert!(
            matches!(&got[..], [EmbedTarget::Unresolved(t)] if t.contains("metavariable")),
            "{got:?}"
        );
    }

    #[test]
    fn call_sites_give_literals_definers_and_hand_overs() {
        let names = std::collections::HashSet::from(["m".to_owned(), "k".to_owned()]);
        let text = r#"use crate::m as k;
const A: &str = m!("a.txt");
macro_rules! outer { ($p:literal) => { k!($p) } }
const B: &str = m /* c */ ! (concat!("b", ".txt"));
const C: () = call!(m, "c.txt");
"#;
        let sites = call_sites(text, &names).unwrap();
        let got: Vec<_> = sites
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.line,
                    s.definer.as_deref(),
                    s.literals.clone(),
                    s.has_macro_call,
                    s.handed_over,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("m", 2, None, vec!["a.txt".to_owned()], false, false),
                ("k", 3, Some("outer"), vec![], false, false),
                (
                    "m",
                    4,
                    None,
                    vec!["b".to_owned(), ".txt".to_owned()],
                    true,
                    false
                ),
                ("m", 5, None, vec![], false, true),
            ]
        );
        assert_eq!(use_renames(text), vec![("m".to_owned(), "k".to_owned())]);
    }

    /// Whether the walk finds anything that loads a file, or refuses.
    fn walk_finds_something(text: &str) -> bool {
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        !scan.modules.is_empty()
            || !scan.embeds.is_empty()
            || !scan.macro_modules.is_empty()
            || !scan.rerun_literals.is_empty()
            || scan.metavariable_macro_call
            || !scan.passed_include.is_empty()
            // Renames of aliases are found by the alias fixpoint in `sources`.
            || scan
                .use_renames
                .iter()
                .any(|(from, _)| INCLUDE_MACROS.contains(&from.as_str()))
            || scan.refused.is_some()
    }

    #[test]
    fn prefilter_never_skips_a_file_the_walk_finds_something_in() {
        // rustc's Pattern_White_Space.
        let spaces = [
            "\t", "\n", "\u{b}", "\u{c}", "\r", " ", "\u{85}", "\u{200e}", "\u{200f}", "\u{2028}",
            "\u{2029}",
        ];
        let mut cases = 0;
        for ws in spaces {
            for form in [
                "mod{ws}x;",
                "pub(crate){ws}mod{ws}x{ws};",
                "mod{ws}r#match{ws};",
                "mod{ws}café;",
                "#[path{ws}={ws}\"p.rs\"]{ws}mod{ws}m;",
                "mod/**/x;",
                "macro_rules!{ws}m{ws}{{(){ws}=>{ws}{{mod{ws}$x;}}}}",
                "#![debugger_visualizer(natvis_file{ws}={ws}\"a.natvis\")]",
                "const{ws}A:&str=include_str!(\"a\");",
                "const{ws}A:&str=core::include_str{ws}!{ws}(\"a\");",
                "#[folder{ws}={ws}\"public/\"]{ws}struct{ws}S;",
                "fn{ws}m(){ws}{{{ws}sqlx::migrate!{ws}();{ws}}}",
                "macro_rules!{ws}c{ws}{{($m:ident)=>{{$m{ws}!(\"x\")}}}}",
                "macro_rules!{ws}c{ws}{{($($m:ident)*)=>{{$($m)*{ws}!(\"x\")}}}}",
                "macro_rules!{ws}c{ws}{{($($m:ident),+)=>{{$($m),+{ws}!(\"x\")}}}}",
                "macro_rules!{ws}c{ws}{{($($m:ident)*)=>{{$($m)*/*{ws}*/!(\"x\")}}}}",
                "const{ws}A:&str=m!(x,{ws}!{ws});",
            ] {
                let text = format!("fn model() {{}}\n{}\n", form.replace("{ws}", ws));
                assert!(walk_finds_something(&text), "{text:?}");
                assert!(
                    may_reference_files(text.as_bytes()),
                    "prefilter skips {text:?}"
                );
                cases += 1;
            }
        }
        assert_eq!(cases, 187);
    }

    /// Run by hand on real material:
    /// `CI_KEY_CORPUS=~/.cargo/registry/src cargo test -p xtask --bin xtask prefilter_agrees -- --ignored`.
    #[test]
    #[ignore = "reads the directory CI_KEY_CORPUS names"]
    fn prefilter_agrees_with_the_walk_on_a_corpus() {
        let dir = std::env::var("CI_KEY_CORPUS").expect("set CI_KEY_CORPUS");
        let (mut files, mut skipped) = (0, 0);
        for entry in walkdir::WalkDir::new(dir)
            .into_iter()
            .filter_map(Result::ok)
        {
            if entry.path().extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(entry.path()) else {
                continue;
            };
            files += 1;
            if let Some((line, why)) = scan(&text, "/ws/pkg/src/lib.rs").refused {
                eprintln!("refused: {}:{line}: {why}", entry.path().display());
            }
            if !may_reference_files(text.as_bytes()) {
                skipped += 1;
                assert!(!walk_finds_something(&text), "{}", entry.path().display());
            }
        }
        eprintln!("{files} files, {skipped} skipped by the prefilter, none wrongly");
        assert!(files > 0, "no .rs file in the corpus");
    }

    #[test]
    fn path_macros_resolve_their_directories_or_are_unresolved() {
        let text = r#"
static A: Dir = include_dir::include_dir!("$CARGO_MANIFEST_DIR/assets");
#[folder = "/ws/pkg/abs"] struct E;
#[folder = "$OTHER/x"] struct F;
fn m() { sqlx::migrate!(); wgpu::include_wgsl!("k.wgsl"); }
diesel_migrations::embed_migrations!("db/migrations");
#[template(path = "t.html")] struct T;
#[template(source = "inline", ext = "txt")] struct I;
"#;
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        let got = targets(&scan);
        assert_eq!(got[0], EmbedTarget::Tree("/ws/pkg/assets".into()));
        // An absolute path is read where it points, not below the package.
        assert_eq!(got[1], EmbedTarget::Tree("/ws/pkg/abs".into()));
        assert!(
            matches!(&got[2], EmbedTarget::Unresolved(t) if t.contains("$OTHER")),
            "{got:?}"
        );
        assert_eq!(got[3], EmbedTarget::Tree("/ws/pkg/migrations".into()));
        assert_eq!(got[4], EmbedTarget::File("/ws/pkg/src/k.wgsl".into()));
        assert_eq!(got[5], EmbedTarget::Tree("/ws/pkg/db/migrations".into()));
        assert!(
            matches!(&got[6], EmbedTarget::Unresolved(t) if t.contains("askama")),
            "{got:?}"
        );
        // An inline template reads no file.
        assert_eq!(got.len(), 7, "{got:?}");
    }

    #[test]
    fn a_call_assembled_from_handed_tokens_is_unresolved() {
        // `!` handed over on its own lets a macro assemble a call.
        let found = scan("const A: &str = m!(include, !);\n", "/ws/pkg/src/lib.rs");
        assert!(found.metavariable_macro_call);
        assert_eq!(found.passed_include.len(), 1);
        // `include_str !` with nothing after it is no call but a hand-over.
        let got = targets(&scan(
            "const A: &str = m!(include_str !);\n",
            "/ws/pkg/src/lib.rs",
        ));
        assert!(
            matches!(&got[..], [EmbedTarget::Unresolved(t)] if t.contains("handed to a macro")),
            "{got:?}"
        );
        // Unary not is no bare `!`.
        let found = scan("fn f() { assert!(!x, \"y\"); }\n", "/ws/pkg/src/lib.rs");
        assert!(!found.metavariable_macro_call);
    }

    #[test]
    fn an_include_name_followed_by_a_metavariable_in_a_macro_body_is_unresolved() {
        let text = "macro_rules! m { ($b:tt) => { include_str $b (\"../data/a.txt\") } }\n";
        let got = targets(&scan(text, "/ws/pkg/src/lib.rs"));
        assert!(
            matches!(&got[..], [EmbedTarget::Unresolved(t)] if t.contains("may pass the `!`")),
            "{got:?}"
        );
    }

    #[test]
    fn an_include_macro_handed_over_in_any_position_is_unresolved() {
        for args in [
            "include_str, \"x\"",
            "include_str: \"x\"",
            "x . include_bytes",
            "include_str(\"x\")",
        ] {
            let text = format!("const A: &str = call!({args});\n");
            let got = targets(&scan(&text, "/ws/pkg/src/lib.rs"));
            assert!(
                matches!(&got[..], [EmbedTarget::Unresolved(t)] if t.contains("handed to a macro")),
                "{args}: {got:?}"
            );
        }
        // Outside macro arguments it is no hand-over; a direct call is an embed.
        let got = targets(&scan(
            "use std::include_str;\nconst A: &str = include_str!(\"a\");\n",
            "/ws/pkg/src/lib.rs",
        ));
        assert_eq!(got, vec![EmbedTarget::File("/ws/pkg/src/a".into())]);
        // Bare `include` is set aside: refused only where a macro_rules!
        // calls a metavariable (decided across the crate, in `sources`).
        let scan = scan(
            "fn f(include: &str) { println!(\"{}\", include); }\n",
            "/ws/pkg/src/lib.rs",
        );
        assert!(scan.embeds.is_empty());
        assert_eq!(scan.passed_include.len(), 1);
        assert!(!scan.metavariable_macro_call);
    }

    #[test]
    fn a_shebang_line_is_skipped_as_rustc_skips_it() {
        // The shebang's unterminated quote would swallow the file.
        let found = scan("#!/bin/sh -c \"x\nmod a;\n", "/ws/pkg/src/main.rs");
        assert!(found.refused.is_none(), "{:?}", found.refused);
        assert_eq!(module_files(&found)[0], PathBuf::from("/ws/pkg/src/a.rs"));
        assert_eq!(found.modules[0].site.line, 2);
        // `#![…]` is an inner attribute, not a shebang.
        let found = scan(
            "#![doc = include_str!(\"r.md\")]\nmod b;\n",
            "/ws/pkg/src/lib.rs",
        );
        assert_eq!(
            targets(&found),
            vec![EmbedTarget::File("/ws/pkg/src/r.md".into())]
        );
        assert_eq!(found.modules.len(), 1);
    }

    #[test]
    fn macro_calls_are_whole_identifiers_followed_by_a_bang() {
        let names = std::collections::HashSet::from(["ptx".to_owned()]);
        let calls = |text: &str| {
            call_sites(text, &names)
                .unwrap()
                .iter()
                .any(|s| !s.handed_over)
        };
        assert!(calls("static K: &[u8] = ptx!(\"k\");"));
        assert!(calls("const K: u8 = ptx ! (\"k\");"));
        assert!(calls("const K: u8 = ptx /* c */ !(\"k\");"));
        assert!(calls("const K: u8 = r#ptx!(\"k\");"));
        assert!(!calls("const K: u8 = my_ptx!(\"k\");"));
        assert!(!calls("const K: u8 = ptx_two!(\"k\");"));
        assert!(!calls("fn ptx() {}"));
        assert!(!calls("// ptx!(\"k\")\nconst S: &str = \"ptx!()\";"));
    }

    #[test]
    fn raw_module_names_load_the_plain_file_name() {
        let scan = scan("mod r#match;\n", "/ws/pkg/src/lib.rs");
        assert_eq!(
            module_files(&scan)[0],
            PathBuf::from("/ws/pkg/src/match.rs")
        );
    }

    #[test]
    fn include_macros_by_path_and_by_alias() {
        let text = r#"
use std::include_str as embed;
pub use core::{include_bytes as ib, include_str};
extern "C" { #[doc = include_str!("ext.md")] fn f(); }
impl S { const A: &str = ::std::include_str!("a.txt"); }
fn g() { let _ = [core::include_bytes!("b.bin")]; embed!("c.txt"); }
#[my_attribute(include_str!("attr.txt"))]
fn h() {}
"#;
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        assert_eq!(
            scan.use_renames,
            vec![
                ("include_str".to_owned(), "embed".to_owned()),
                ("include_bytes".to_owned(), "ib".to_owned())
            ]
        );
        let p = |f: &str| EmbedTarget::File(PathBuf::from("/ws/pkg/src").join(f));
        // Without knowing the alias, `embed!` is not an include ...
        assert_eq!(
            targets(&scan),
            vec![p("ext.md"), p("a.txt"), p("b.bin"), p("attr.txt")]
        );
        // ... and with it, it is (sources gathers aliases crate-wide).
        let aliases = HashMap::from([("embed".to_owned(), "include_str".to_owned())]);
        let ctx = FileContext {
            file: Path::new("/ws/pkg/src/lib.rs"),
            module_dir: Path::new("/ws/pkg/src"),
            package_dir: Path::new("/ws/pkg"),
            aliases: &aliases,
        };
        let scan = scan_file(text, &ctx);
        assert!(targets(&scan).contains(&p("c.txt")), "{:?}", targets(&scan));
    }

    #[test]
    fn nesting_is_limited_without_recursion() {
        let deep = |n: usize| format!("{}{}", "mod a { ".repeat(n), "}".repeat(n));
        assert!(
            scan(&deep(MAX_NESTING), "/ws/pkg/src/lib.rs")
                .refused
                .is_none()
        );
        let scan = scan(&deep(100_000), "/ws/pkg/src/lib.rs");
        assert!(scan.refused.unwrap().1.contains("nest more than"));
    }

    #[test]
    fn a_hostile_run_of_mod_keywords_stays_linear() {
        // Quadratic, this takes minutes; linear, milliseconds.
        let text = "mod ".repeat(2_000_000);
        assert!(!may_reference_files(text.as_bytes()));
    }

    #[test]
    fn prefilter_sees_file_modules_and_includes_only() {
        assert!(may_reference_files(b"mod x /* moved */;"));
        assert!(may_reference_files(b"mod /* moved */ x;"));
        assert!(may_reference_files(b"mod x // moved\n;"));
        assert!(may_reference_files(b"mod x;"));
        assert!(may_reference_files(b"pub(crate) mod\n  x\n ;"));
        assert!(may_reference_files(b"let s = include_str!(\"a\");"));
        assert!(!may_reference_files(
            b"mod tests { fn t() {} }\nfn model() {}"
        ));
        assert!(!may_reference_files(b"fn main() {}"));
        // A `?` before a comparison is no repetition called as a macro.
        assert!(!may_reference_files(
            b"fn f() -> Option<()> { if g()? != 1 {} None }"
        ));
        assert!(may_reference_files(b"($($m)* // c\n !(1))"));
    }
}
