//! The registry of registry-crate macros that make the compiler read files
//! (`PATH_MACROS`: `include_dir!`, `#[folder]`, `sqlx::migrate!`, …), one
//! entry each with what it reads, and recording a call or attribute of one.
//! A new macro is one entry here.

use std::path::{Path, PathBuf};

use super::source::{Range, inner, is_group};
use super::walker::TokenWalker;
use super::{Embed, EmbedTarget, Site};
use crate::key::lexer::{self, Delim, Kind};

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
];

pub(super) fn path_macro(name: &str, form: PathMacroForm) -> Option<&'static PathMacro> {
    PATH_MACROS
        .iter()
        .find(|m| m.name == name && m.form == form)
}

impl TokenWalker<'_, '_, '_> {
    /// Records what a macro of [`PATH_MACROS`] reads: `arg` is its string
    /// argument, `Some(None)` when it has none, `None` when it has another.
    pub(super) fn record_path_macro(
        &mut self,
        known: &PathMacro,
        arg: Option<Option<String>>,
        line: usize,
    ) {
        let label = match known.form {
            PathMacroForm::Call => format!("{}! ({})", known.name, known.krate),
            _ => format!("#[{}] ({})", known.name, known.krate),
        };
        let unresolved = |why: &str| EmbedTarget::Unresolved(format!("files {why}"));
        let target = match (known.reads, arg) {
            (PathReads::Declared, _) => {
                unresolved(&format!("by {} rules ci-key does not model", known.krate))
            }
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

    /// The body of an attribute `#[…]`: records a [`PATH_MACROS`] attribute.
    pub(super) fn record_attribute_forms(&mut self, body: Range) {
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
}
