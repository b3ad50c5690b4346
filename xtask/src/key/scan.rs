//! Reading one Rust source file for what makes the compiler read other files:
//! file modules (`mod x;`, `#[path]`) and embeds (`include_str!`,
//! `include_bytes!`, `include!`), plus string literals that a build script
//! prints as `cargo:rerun-if-changed=`.
//!
//! The file is read as a token stream (`proc-macro2`'s lexer, the same
//! token rules as rustc's), never as a syntax tree: `mod x;`, attributes and
//! macro calls are all visible at the token level, including embeds inside
//! other macros (`println!("{}", include_str!(…))`, `macro_rules!` bodies).
//! Text in string literals and comments is never mistaken for a macro call,
//! because the lexer has already made it a literal or dropped it. The walk
//! recurses once per group level, after an iterative check that the file
//! nests no deeper than [`MAX_NESTING`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::ext::IdentExt;

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
    /// A path this reading cannot compute; the text says what it was.
    Unresolved(String),
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
    /// The files this declaration loads when `macro_rules!` is called at the
    /// top level of `caller`, whose child modules live in `module_dir`.
    /// `None` for `mod $m;`: the caller lists the names it may take.
    pub fn decl(&self, caller: &Path, module_dir: &Path, package_dir: &Path) -> Option<ModuleDecl> {
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
            0,
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
    /// String literals that contain `rerun-if-changed`, with their lines.
    pub rerun_literals: Vec<(String, usize)>,
    /// Every `A as B` of a `use` declaration: a rename that may make `B!`
    /// an include macro, anywhere in the crate (`crate::B!`, `use super::*`).
    pub use_renames: Vec<(String, String)>,
    /// `mod x;` declarations in `macro_rules!` bodies, loaded where called.
    pub macro_modules: Vec<MacroModule>,
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
/// rustc reads for that attribute.
pub fn may_reference_files(text: &[u8]) -> bool {
    contains(text, b"include")
        || contains(text, b"rerun-if-changed")
        || contains(text, b"debugger_visualizer")
        || has_file_module_decl(text)
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

/// How deeply groups (`{}`, `()`, `[]`) may nest in a scanned file. The
/// token walk recurses once per level; real code stays far below this, and
/// a hostile file nested thousands deep gets a clear refusal instead of a
/// stack overflow.
pub const MAX_NESTING: usize = 256;

/// Reads one file. Never fails: a file that cannot be tokenised, or nests
/// deeper than [`MAX_NESTING`], is reported through `refused`, with no
/// findings, and the caller refuses the key.
///
/// The file is read as tokens, never as a syntax tree: every form that
/// loads a file (`mod x;`, attributes, macro calls) is visible at the token
/// level, a token walk needs no more memory than the tokens, recursion is
/// bounded by the group depth checked first, and syntax newer than any
/// parser this tool links is no obstacle.
pub fn scan_file(text: &str, ctx: &FileContext<'_>) -> FileScan {
    let mut scan = FileScan::default();
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match TokenStream::from_str(text) {
        Ok(tokens) => {
            // Owned once: the depth check borrows the top level and copies
            // only the children of the groups it is inside.
            let tokens: Vec<TokenTree> = tokens.into_iter().collect();
            match deepest_group(&tokens) {
                Some((depth, line)) if depth > MAX_NESTING => {
                    scan.refused = Some((
                        line,
                        format!(
                            "brackets nest more than {MAX_NESTING} deep here; ci-key refuses to read a file nested this deeply (flatten the nesting, or split the file)"
                        ),
                    ));
                }
                _ => {
                    let mut walker = TokenWalker {
                        ctx,
                        scan: &mut scan,
                        in_macro_rules: None,
                        in_alternative: false,
                    };
                    walker.walk_items(tokens.into_iter().collect(), ctx.module_dir, 0);
                }
            }
        }
        Err(lex) => {
            scan.refused = Some((
                lex.span().start().line,
                format!("cannot tokenise it ({lex}), so neither can rustc"),
            ));
        }
    }
    // The span source map keeps a copy of every file read on this thread;
    // no span of this file outlives this call, so release it.
    proc_macro2::extra::invalidate_current_thread_spans();
    scan
}

/// The deepest group nesting of `tokens`, with the line where it is first
/// reached; `None` for a stream without groups. Iterative, so it cannot
/// overflow the stack it guards.
fn deepest_group(tokens: &[TokenTree]) -> Option<(usize, usize)> {
    let mut deepest: Option<(usize, usize)> = None;
    for token in tokens {
        let TokenTree::Group(top) = token else {
            continue;
        };
        if deepest.is_none() {
            deepest = Some((1, top.span_open().start().line));
        }
        let mut stack = vec![top.stream().into_iter()];
        while let Some(top) = stack.last_mut() {
            match top.next() {
                Some(TokenTree::Group(group)) => {
                    let depth = stack.len() + 1;
                    if deepest.is_none_or(|(d, _)| depth > d) {
                        deepest = Some((depth, group.span_open().start().line));
                    }
                    if depth > MAX_NESTING {
                        return deepest;
                    }
                    stack.push(group.stream().into_iter());
                }
                Some(_) => {}
                None => {
                    stack.pop();
                }
            }
        }
    }
    deepest
}

/// The macros that make rustc read a file named by their argument.
pub const INCLUDE_MACROS: &[&str] = &["include_str", "include_bytes", "include"];

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

/// The `path = "…"` values of a `cfg_attr(predicate, attr, …)` argument list,
/// nested `cfg_attr`s included.
fn cfg_attr_paths(tokens: TokenStream) -> Vec<String> {
    let mut paths = Vec::new();
    for part in split_commas(tokens).into_iter().skip(1) {
        if let Some(path) = lexical_path_attribute(part.clone()) {
            paths.push(path);
            continue;
        }
        let part: Vec<TokenTree> = part.into_iter().collect();
        if let [TokenTree::Ident(name), TokenTree::Group(group)] = part.as_slice() {
            if name == "cfg_attr" && group.delimiter() == Delimiter::Parenthesis {
                paths.extend(cfg_attr_paths(group.stream()));
            }
        }
    }
    paths
}

/// Whether a bracketed attribute body is `doc = "…"` (a doc comment).
fn is_doc_text(tokens: &TokenStream) -> bool {
    let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
    matches!(
        tokens.as_slice(),
        [TokenTree::Ident(name), TokenTree::Punct(eq), TokenTree::Literal(_)]
            if name == "doc" && eq.as_char() == '='
    )
}

struct TokenWalker<'a, 'b> {
    ctx: &'a FileContext<'a>,
    scan: &'b mut FileScan,
    /// The `macro_rules!` whose body is being walked, if any.
    in_macro_rules: Option<String>,
    /// Inside an inline module with `cfg_attr(…, path = …)` directories,
    /// where a module file's absence in one of them is expected.
    in_alternative: bool,
}

impl TokenWalker<'_, '_> {
    /// Finds `include_*!(…)` anywhere in a token stream, including nested groups.
    fn walk_for_embeds(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            self.record_use_renames(&tokens, i);
            self.record_debugger_visualizers(&tokens, i);
            if self.record_embed_at(&tokens, i) {
                i += 3;
                continue;
            }
            match &tokens[i] {
                // Doc comments in macro bodies are text, never printed.
                TokenTree::Group(group)
                    if group.delimiter() == Delimiter::Bracket && is_doc_text(&group.stream()) => {}
                TokenTree::Group(group) => self.walk_for_embeds(group.stream()),
                TokenTree::Literal(lit) => self.record_literal(lit),
                _ => {}
            }
            i += 1;
        }
    }

    /// The token-only reading of a whole file or inline module body: embeds
    /// and literals everywhere, plus `[#[path = "…"]] [pub…] mod name ;|{…}`.
    fn walk_items(&mut self, tokens: TokenStream, scope: &Path, inline_depth: usize) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut path_attr: Option<String> = None;
        let mut cfg_paths: Vec<String> = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            self.record_use_renames(&tokens, i);
            self.record_debugger_visualizers(&tokens, i);
            if self.record_embed_at(&tokens, i) {
                i += 3;
                continue;
            }
            match &tokens[i] {
                TokenTree::Punct(p) if p.as_char() == '#' => {
                    // `#[…]`, or an inner attribute `#![…]`.
                    let bang = matches!(tokens.get(i + 1), Some(TokenTree::Punct(b)) if b.as_char() == '!');
                    let at = i + 1 + usize::from(bang);
                    if let Some(TokenTree::Group(g)) = tokens.get(at) {
                        if g.delimiter() == Delimiter::Bracket {
                            if let Some(path) = lexical_path_attribute(g.stream()) {
                                path_attr = Some(path);
                            } else if is_doc_text(&g.stream()) {
                                // Documentation text is never printed.
                            } else {
                                let body: Vec<TokenTree> = g.stream().into_iter().collect();
                                if let [TokenTree::Ident(name), TokenTree::Group(args)] =
                                    body.as_slice()
                                {
                                    if name == "cfg_attr" {
                                        cfg_paths.extend(cfg_attr_paths(args.stream()));
                                    }
                                }
                                self.walk_for_embeds(g.stream());
                            }
                            i = at + 1;
                            continue;
                        }
                    }
                }
                TokenTree::Ident(ident) if ident == "macro_rules" => {
                    // The body's `mod x;` declarations load files where the
                    // macro is invoked (see `MacroModule`); its embeds are
                    // resolved here and from its callers.
                    if let (
                        Some(TokenTree::Punct(bang)),
                        Some(TokenTree::Ident(name)),
                        Some(TokenTree::Group(body)),
                    ) = (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3))
                    {
                        if bang.as_char() == '!' {
                            let outer = self.in_macro_rules.replace(name.to_string());
                            self.walk_for_embeds(body.stream());
                            self.in_macro_rules = outer;
                            self.record_macro_modules(&name.to_string(), body.stream());
                            i += 4;
                            continue;
                        }
                    }
                }
                TokenTree::Ident(ident) if ident == "mod" => {
                    if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                        let line = name.span().start().line;
                        let name = name.unraw().to_string();
                        match tokens.get(i + 2) {
                            Some(TokenTree::Punct(p)) if p.as_char() == ';' => {
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
                                i += 3;
                                continue;
                            }
                            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
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
                                self.walk_items(g.stream(), &default, inline_depth + 1);
                                for path in alternatives {
                                    let inner = inline_scope(
                                        self.ctx,
                                        scope,
                                        inline_depth,
                                        &name,
                                        Some(path),
                                    );
                                    if inner != default {
                                        self.walk_items(g.stream(), &inner, inline_depth + 1);
                                    }
                                }
                                self.in_alternative = outer;
                                i += 3;
                                continue;
                            }
                            _ => {}
                        }
                    }
                }
                // Visibility and `unsafe` may stand between an attribute and `mod`.
                TokenTree::Ident(ident) if ident == "pub" || ident == "unsafe" => {
                    i += 1;
                    continue;
                }
                TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis => {
                    self.walk_for_embeds(g.stream());
                    i += 1;
                    continue;
                }
                TokenTree::Group(g) => self.walk_items(g.stream(), scope, inline_depth),
                TokenTree::Literal(lit) => self.record_literal(lit),
                _ => {}
            }
            path_attr = None;
            cfg_paths.clear();
            i += 1;
        }
    }

    /// The `[#[path = "…"]] mod name;` declarations anywhere in a
    /// `macro_rules!` body. One whose file a metavariable chooses (`mod $m;`,
    /// `#[path = $p]`) is refused: each caller picks another file.
    fn record_macro_modules(&mut self, macro_rules: &str, body: TokenStream) {
        let mut pending = vec![body];
        while let Some(stream) = pending.pop() {
            let tokens: Vec<TokenTree> = stream.into_iter().collect();
            let mut path_attr: Option<Result<String, ()>> = None;
            for (i, token) in tokens.iter().enumerate() {
                match token {
                    TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket => {
                        let body: Vec<TokenTree> = g.stream().into_iter().collect();
                        if matches!(body.first(), Some(TokenTree::Ident(p)) if p == "path") {
                            path_attr = Some(lexical_path_attribute(g.stream()).ok_or(()));
                        }
                        pending.push(g.stream());
                        continue;
                    }
                    TokenTree::Group(g) => pending.push(g.stream()),
                    TokenTree::Ident(m) if m == "mod" => {
                        let line = m.span().start().line;
                        let (name, after) = match (tokens.get(i + 1), tokens.get(i + 2)) {
                            (Some(TokenTree::Ident(name)), after) => {
                                (Some(name.unraw().to_string()), after)
                            }
                            (Some(TokenTree::Punct(d)), Some(TokenTree::Ident(_)))
                                if d.as_char() == '$' =>
                            {
                                (None, tokens.get(i + 3))
                            }
                            _ => (None, None),
                        };
                        if !matches!(after, Some(TokenTree::Punct(p)) if p.as_char() == ';') {
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
                    TokenTree::Punct(p) if p.as_char() == '#' => continue,
                    TokenTree::Ident(v) if v == "pub" => continue,
                    _ => {}
                }
                path_attr = None;
            }
        }
    }

    /// At `debugger_visualizer(…)` (`tokens[i]`, an attribute, perhaps
    /// inside `cfg_attr`): records the `natvis_file` / `gdb_script_file`
    /// rustc reads, relative to the directory of this file (checked with
    /// rustc 1.95's dep-info: not the module directory).
    fn record_debugger_visualizers(&mut self, tokens: &[TokenTree], i: usize) {
        let (Some(TokenTree::Ident(name)), Some(TokenTree::Group(args))) =
            (tokens.get(i), tokens.get(i + 1))
        else {
            return;
        };
        if name != "debugger_visualizer" || args.delimiter() != Delimiter::Parenthesis {
            return;
        }
        let line = name.span().start().line;
        for part in split_commas(args.stream()) {
            let part: Vec<TokenTree> = part.into_iter().collect();
            let target = match part.as_slice() {
                [
                    TokenTree::Ident(key),
                    TokenTree::Punct(eq),
                    TokenTree::Literal(lit),
                ] if eq.as_char() == '=' => match literal_str(lit) {
                    Some(text) => EmbedTarget::File(
                        self.ctx.file.parent().unwrap_or(Path::new("/")).join(text),
                    ),
                    None => EmbedTarget::Unresolved(format!("{key} = {lit}")),
                },
                other => {
                    let text: TokenStream = other.iter().cloned().collect();
                    EmbedTarget::Unresolved(format!("`{text}`"))
                }
            };
            self.scan.embeds.push(Embed {
                macro_name: "#[debugger_visualizer]".into(),
                target,
                site: Site {
                    file: self.ctx.file.to_path_buf(),
                    line,
                },
                caller_relative: None,
            });
        }
    }

    /// At `use` (`tokens[i]`): records every `A as B` up to its `;`,
    /// nested groups (`use std::{include_str as s}`) included.
    fn record_use_renames(&mut self, tokens: &[TokenTree], i: usize) {
        if !matches!(&tokens[i], TokenTree::Ident(u) if u == "use") {
            return;
        }
        let end = tokens[i..]
            .iter()
            .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'))
            .map_or(tokens.len(), |n| i + n);
        let mut pending: Vec<TokenStream> = vec![tokens[i + 1..end].iter().cloned().collect()];
        while let Some(stream) = pending.pop() {
            let tree: Vec<TokenTree> = stream.into_iter().collect();
            for (at, token) in tree.iter().enumerate() {
                match token {
                    TokenTree::Group(g) => pending.push(g.stream()),
                    TokenTree::Ident(r#as) if r#as == "as" && at > 0 => {
                        if let (TokenTree::Ident(from), Some(TokenTree::Ident(to))) =
                            (&tree[at - 1], tree.get(at + 1))
                        {
                            self.scan
                                .use_renames
                                .push((from.unraw().to_string(), to.unraw().to_string()));
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Records `include_*!(…)` starting at `tokens[i]`; says whether there was one.
    fn record_embed_at(&mut self, tokens: &[TokenTree], i: usize) -> bool {
        match macro_call_at(tokens, i) {
            Some((name, args, line)) => match self.ctx.include_macro(&name) {
                Some(include) => {
                    self.record_embed(&include, args, line);
                    true
                }
                None => false,
            },
            _ => false,
        }
    }

    fn record_literal(&mut self, lit: &proc_macro2::Literal) {
        if let Some(value) = literal_str(lit) {
            if value.contains("rerun-if-changed") {
                self.scan
                    .rerun_literals
                    .push((value, lit.span().start().line));
            }
        }
    }

    fn record_embed(&mut self, macro_name: &str, args: TokenStream, line: usize) {
        let (target, relative) = evaluate_path(args, self.ctx);
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

/// `name ! (args)` at `tokens[i]`, with the line of `name`.
fn macro_call_at(tokens: &[TokenTree], i: usize) -> Option<(String, TokenStream, usize)> {
    let TokenTree::Ident(name) = tokens.get(i)? else {
        return None;
    };
    let TokenTree::Punct(bang) = tokens.get(i + 1)? else {
        return None;
    };
    if bang.as_char() != '!' {
        return None;
    }
    let TokenTree::Group(group) = tokens.get(i + 2)? else {
        return None;
    };
    Some((name.to_string(), group.stream(), name.span().start().line))
}

fn lexical_path_attribute(tokens: TokenStream) -> Option<String> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    match tokens.as_slice() {
        [
            TokenTree::Ident(name),
            TokenTree::Punct(eq),
            TokenTree::Literal(lit),
        ] if name == "path" && eq.as_char() == '=' => literal_str(lit),
        _ => None,
    }
}

/// The value of a string literal token (plain or raw), or `None` for any other literal.
fn literal_str(lit: &proc_macro2::Literal) -> Option<String> {
    let text = lit.to_string();
    if !(text.starts_with('"') || text.starts_with("r\"") || text.starts_with("r#")) {
        return None;
    }
    syn::parse_str::<syn::LitStr>(&text).ok().map(|s| s.value())
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
fn evaluate_path(args: TokenStream, ctx: &FileContext<'_>) -> (EmbedTarget, Option<String>) {
    let mut pieces = Vec::new();
    evaluate_into(args, &mut pieces);
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

fn evaluate_into(args: TokenStream, pieces: &mut Vec<Piece>) {
    let mut tokens: Vec<TokenTree> = args.into_iter().collect();
    // A trailing comma is allowed in macro arguments.
    if matches!(tokens.last(), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
        tokens.pop();
    }
    // `std::concat!`, `::core::env!` and friends name the same macros.
    let mut start = 0;
    while start + 2 < tokens.len() {
        match (&tokens[start], &tokens[start + 1]) {
            (TokenTree::Ident(i), TokenTree::Punct(p))
                if (i == "std" || i == "core") && p.as_char() == ':' =>
            {
                start += 3;
            }
            (TokenTree::Punct(p), TokenTree::Punct(q))
                if p.as_char() == ':' && q.as_char() == ':' =>
            {
                start += 2;
            }
            _ => break,
        }
    }
    let tokens = &tokens[start..];
    match tokens {
        [TokenTree::Literal(lit)] => match literal_str(lit) {
            Some(text) => pieces.push(Piece::Text(text)),
            None => pieces.push(Piece::Unknown(format!("the literal {lit}"))),
        },
        [TokenTree::Punct(dollar), TokenTree::Ident(_)] if dollar.as_char() == '$' => {
            pieces.push(Piece::MetaVariable);
        }
        [
            TokenTree::Ident(name),
            TokenTree::Punct(bang),
            TokenTree::Group(group),
        ] if bang.as_char() == '!' && name == "concat" => {
            for part in split_commas(group.stream()) {
                evaluate_into(part, pieces);
            }
        }
        [
            TokenTree::Ident(name),
            TokenTree::Punct(bang),
            TokenTree::Group(group),
        ] if bang.as_char() == '!' && name == "env" => {
            let var: Vec<TokenTree> = group.stream().into_iter().collect();
            match var.as_slice() {
                [TokenTree::Literal(lit)] | [TokenTree::Literal(lit), TokenTree::Punct(_)] => {
                    match literal_str(lit).as_deref() {
                        Some("CARGO_MANIFEST_DIR") => pieces.push(Piece::ManifestDir),
                        Some("OUT_DIR") => pieces.push(Piece::OutDir),
                        _ => pieces.push(Piece::Unknown(format!("env!({})", group.stream()))),
                    }
                }
                _ => pieces.push(Piece::Unknown(format!("env!({})", group.stream()))),
            }
        }
        other => {
            let text: TokenStream = other.iter().cloned().collect();
            pieces.push(Piece::Unknown(format!("`{text}`")));
        }
    }
}

fn split_commas(tokens: TokenStream) -> Vec<TokenStream> {
    let mut parts = vec![TokenStream::new()];
    for token in tokens {
        match &token {
            TokenTree::Punct(p) if p.as_char() == ',' => parts.push(TokenStream::new()),
            _ => parts.last_mut().expect("never empty").extend([token]),
        }
    }
    parts.retain(|p| !p.is_empty());
    parts
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
            // The token reading must agree with the syn reading.
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
    fn a_path_wholly_chosen_by_the_macro_caller_is_unresolved() {
        let text = "macro_rules! m { ($p:literal) => { include_str!($p) }; }
";
        let got = targets(&scan(text, "/ws/pkg/src/lib.rs"));
        assert!(
            matches!(&got[..], [EmbedTarget::Unresolved(t)] if t.contains("metavariable")),
            "{got:?}"
        );
    }

    /// Whether the walk finds anything that loads a file, or refuses.
    fn walk_finds_something(text: &str) -> bool {
        let scan = scan(text, "/ws/pkg/src/lib.rs");
        !scan.modules.is_empty()
            || !scan.embeds.is_empty()
            || !scan.macro_modules.is_empty()
            || !scan.rerun_literals.is_empty()
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
        assert_eq!(cases, 110);
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
    }
}
