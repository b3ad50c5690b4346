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
//!
//! The reading is split by job: [`prefilter`] (the byte test that skips a
//! file), [`source`] (the group index and the cursor over tokens),
//! [`walker`] (the walk over items and groups), [`modules`] (`mod x;` and
//! rustc's path rules), [`includes`] (`include_*!`, their aliases and
//! `#[debugger_visualizer]`), [`macro_rules`] (macro bodies and their call
//! sites), [`path_macros`] (the registry of registry-crate macros that read
//! files), [`asm_bound`] (an assembler template a macro body builds from its
//! callers' tokens, and whether it can spell a file-reading directive), [`path_expr`] (what an include's argument evaluates to),
//! [`expand`] (a workspace `macro_rules!` that gives an include's path) and
//! [`rerun`] (build-script directive literals).

mod asm_bound;
mod expand;
mod includes;
mod macro_rules;
mod mbe;
mod modules;
mod path_expr;
mod path_macros;
mod prefilter;
mod rerun;
mod source;
#[cfg(test)]
mod tests;
mod walker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use asm_bound::{AssemblerBound, may_spell_directive, pieces_of};
pub use expand::{MacroDefinition, ReachedInclude, expand_call_includes, expand_include_argument};
pub use includes::{INCLUDE_MACROS, STD_MACROS, TOKEN_OUTPUT_MACROS, may_rename_to, use_renames};
pub use macro_rules::{CallSite, call_sites};
pub use path_macros::{PATH_MACROS, PathReads, asm_directives};
pub use prefilter::may_reference_files;
use source::{Source, line_at, shebang_end};
use walker::TokenWalker;

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
    /// The first existing file of several (absolute paths, in order), read
    /// by a macro of [`PATH_MACROS`]: each is hashed, present or absent.
    Candidates(Vec<PathBuf>),
    /// A directory read whole (an absolute path), by a macro of
    /// [`PATH_MACROS`]; its absence is hashed when it does not exist.
    Tree(PathBuf),
    /// A path that a macro call gives (`crate::autogen_output!("x.rs")`):
    /// resolved by expanding the workspace's `macro_rules!` of that name,
    /// once every definition is known. `path` is what stands before the
    /// name (`crate::`), `args` the text inside the call's delimiters.
    Expand {
        name: String,
        path: String,
        args: String,
    },
    /// A path inside a `macro_rules!` body that plain reading cannot
    /// compute but each call's expansion may
    /// (`concat!("../testdata/", stringify!($name), ".bin")`): resolved by
    /// expanding every outermost call, refused at a call that does not
    /// expand. The text says what the body's argument was.
    AtCalls(String),
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
    /// For a macro of [`PATH_MACROS`]: what it reads, relative to the
    /// calling crate's manifest directory (`CARGO_MANIFEST_DIR` is the
    /// crate being compiled, where the outermost call stands).
    pub reads: Option<PathReads>,
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
            token_output: &[],
            cargo_readme: None,
        };
        Some(modules::module_decl(
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
    /// The `macro_rules!` whose bodies call a metavariable as a macro
    /// (`$m!(…)`, `$($m)*!(…)`): an identifier handed to one of them (or to
    /// a macro whose body calls one of them) may be invoked as a macro.
    pub metavariable_callers: Vec<String>,
    /// The macros handed a `!` on its own (`m!(!)`): a `macro_rules!` of the
    /// workspace may assemble a call from it (`$m $b (…)`).
    pub bare_bang_to: Vec<String>,
    /// Every `macro_rules!` this file defines, by name.
    pub macro_rules_defined: Vec<String>,
    /// The names of the `macro NAME` items (macros 2.0) this file defines,
    /// anywhere in it: ci-key does not read their rules, so such a name is
    /// never known to emit only its own tokens.
    pub macro_items: Vec<String>,
    /// The rules of the `macro_rules!` this file defines, for expanding a
    /// call that gives an include's path.
    pub macro_definitions: Vec<MacroDefinition>,
    /// An include macro's name handed to a macro as a token
    /// (`call!(include_str, "x")`), each with the macro it is handed to:
    /// an include only where that macro may invoke it (`sources.rs`
    /// decides, once every `macro_rules!` of the workspace is known).
    pub passed_include: Vec<PassedInclude>,
    /// (macro_rules!, macro it calls) for every macro call in a
    /// `macro_rules!` body: a macro that calls an including macro includes
    /// from *its* callers' files.
    pub macro_rules_calls: Vec<(String, String)>,
    /// Assembler templates in `macro_rules!` bodies that their callers
    /// complete: bounded once every call and definition is known.
    pub assembler_bounds: Vec<AssemblerBound>,
    /// Set when the file cannot be read faithfully: the line and why. The
    /// key is refused.
    pub refused: Option<(usize, String)>,
}

/// An include macro's name handed to another macro as a token.
#[derive(Debug, Clone)]
pub struct PassedInclude {
    /// The unresolved embed it would be, were it invoked.
    pub embed: Embed,
    /// The include macro it names (`include_str`, also through an alias).
    pub include: String,
    /// The macro whose arguments hold it (the last segment of its path).
    pub handed_to: String,
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
    /// The macros whose arguments are token output of this package's code
    /// (`quote!` when the package depends on the quote crate by that name,
    /// and no `macro_rules!` or alias of the workspace takes the name): an
    /// include written there is text the macro emits, not one rustc
    /// expands while compiling this crate, so their arguments are not read.
    pub token_output: &'a [&'a str],
    /// What cargo sets `CARGO_PKG_README` to for the package (the
    /// manifest's `readme` or the README it found, `""` for none); `None`
    /// where the package is not known.
    pub cargo_readme: Option<&'a str>,
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
    scan_file_with(text, ctx, true)
}

/// [`scan_file`], skipping groups the byte prefilter says hold nothing
/// (`skip_quiet`) or reading every one (the tests' reference).
fn scan_file_with(text: &str, ctx: &FileContext<'_>, skip_quiet: bool) -> FileScan {
    let mut scan = FileScan::default();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if u32::try_from(text.len()).is_err() {
        scan.refused = Some((
            1,
            "larger than 4 GiB; ci-key refuses to read a source this large (split the file)".into(),
        ));
        return scan;
    }
    scan.macro_items = macro_item_names(text);
    let start = shebang_end(text);
    match Source::index(text, start) {
        Ok(source) => {
            let mut walker = TokenWalker {
                ctx,
                src: &source,
                scan: &mut scan,
                in_macro_rules: None,
                in_alternative: false,
                macro_args: Vec::new(),
                in_generated_macro: false,
                skip_quiet,
            };
            walker.walk_items((start, text.len()), ctx.module_dir, 0);
        }
        Err((offset, why)) => {
            scan.refused = Some((line_at(text, offset), why));
        }
    }
    scan
}

/// The names `macro NAME` items define in `text` (the keyword followed by
/// an identifier, at the token level: not in strings or comments, and not
/// `r#macro`, an identifier). Every group is read, whatever the prefilter
/// says of it. Empty when the text does not tokenise (the walk refuses
/// such a file anyway).
pub fn macro_item_names(text: &str) -> Vec<String> {
    use crate::key::lexer::{Kind, Lexer};
    if !prefilter::has_macro_item(text.as_bytes()) {
        return Vec::new();
    }
    let mut lexer = Lexer::new(text, shebang_end(text), text.len());
    let mut after_macro = false;
    let mut names = Vec::new();
    while let Ok(Some(token)) = lexer.next_token() {
        let word = &text[token.start..token.end];
        match token.kind {
            Kind::Ident if after_macro => names.push(word.to_owned()),
            Kind::RawIdent if after_macro => names.push(word[2..].to_owned()),
            _ => {}
        }
        after_macro = token.kind == Kind::Ident && word == "macro";
    }
    names
}

/// Whether `text` holds the tokens `fn NAME` (a proc macro's function may
/// be the macro `NAME!` is). Loosely, at the byte level: a mention in a
/// string or comment counts too, which only keeps a refusal.
pub fn defines_fn(text: &str, name: &str) -> bool {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    memchr::memmem::find_iter(bytes, name.as_bytes()).any(|at| {
        let end = at + name.len();
        if bytes.get(end).copied().is_some_and(is_ident) {
            return false;
        }
        let head = bytes[..at].trim_ascii_end();
        let head = head.strip_suffix(b"r#").unwrap_or(head).trim_ascii_end();
        head.ends_with(b"fn") && !head[..head.len() - 2].last().copied().is_some_and(is_ident)
    })
}
