//! File modules: rustc's rules for where `mod name;` is loaded from
//! (`#[path]`, inline modules, `cfg_attr` alternatives), and the `mod`
//! declarations of `macro_rules!` bodies, loaded where the macro is called.

use std::path::{Path, PathBuf};

use super::source::{Range, inner};
use super::walker::TokenWalker;
use super::{FileContext, MacroModule, ModuleDecl, Site};
use crate::key::lexer::{Delim, Kind};

/// The directory a `#[path]` attribute is relative to: outside inline
/// modules the directory of the file itself, inside them the scope's module
/// directory.
pub(super) fn path_attribute_base(
    ctx: &FileContext<'_>,
    scope: &Path,
    inline_depth: usize,
) -> PathBuf {
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
pub(super) fn inline_scope(
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
pub(super) fn module_decls(
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
pub(super) fn module_decl(
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

impl TokenWalker<'_, '_, '_> {
    /// The `[#[path = "…"]] mod name;` declarations anywhere in a
    /// `macro_rules!` body. One whose file a metavariable chooses (`mod $m;`,
    /// `#[path = $p]`) is refused: each caller picks another file.
    pub(super) fn record_macro_modules(&mut self, macro_rules: &str, body: Range) {
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
}
