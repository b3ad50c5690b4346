//! The registry of registry-crate macros that make the compiler read files
//! (`PATH_MACROS`: `include_dir!`, `#[folder]`, `sqlx::migrate!`, …), one
//! entry each with what it reads, and recording a call or attribute of one.
//! A new macro is one entry here. The assembler macros (`global_asm!`,
//! `asm!`, `naked_asm!`) are entries too, read by one resolver of their
//! templates (`record_assembler_template`, [`asm_directives`]).

use std::path::{Path, PathBuf};

use super::asm_bound::{AssemblerBound, included_files, pieces_of};
use super::path_expr::{Piece, evaluate_into, evaluate_path};
use super::source::{Range, inner, is_group};
use super::walker::TokenWalker;
use super::{CallerRelative, Embed, EmbedTarget, MAX_SHAPE_TOKENS, Site};
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
    /// A file, the first that exists of the argument below each of `dirs`
    /// of `CARGO_MANIFEST_DIR`, in order: every candidate is an input,
    /// present or absent, so that adding an earlier one moves the key.
    ManifestDirFirst { dirs: &'static [&'static str] },
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
        // pest_generator: `CARGO_MANIFEST_DIR/<path>` when it exists, else
        // `CARGO_MANIFEST_DIR/src/<path>` (pest 2 grammars import nothing).
        reads: PathReads::ManifestDirFirst { dirs: &["", "src"] },
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

/// How a call or attribute of `known` is named in messages.
fn path_macro_label(known: &PathMacro) -> String {
    match known.form {
        PathMacroForm::Call => format!("{}! ({})", known.name, known.krate),
        _ => format!("#[{}] ({})", known.name, known.krate),
    }
}

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
    // The assembler's macro language pastes text: `.\a\b` with `a`, `b`
    // = `inc`, `bin`, or `.inc\()bin`, is `.incbin` that no substring
    // spells. A macro or repetition is read only when it cannot paste: no
    // `\` substitution, no Darwin `$n`, not left open for a later block.
    let starts = |word: &str| {
        memchr::memmem::find_iter(bytes, word.as_bytes()).any(|at| {
            !at.checked_sub(1).is_some_and(|i| {
                bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'$' | b'.')
            })
        })
    };
    if starts(".altmacro") {
        found.push(Err(
            "an `.altmacro` block, whose macros substitute names ci-key does not expand".to_owned(),
        ));
    } else if (starts(".macro") || starts(".irp"))
        && (text.contains(['\\', '$']) || !(starts(".endm") || starts(".endr")))
    {
        found.push(Err(
            "an assembler `.macro`/`.irp` whose substitution can paste a directive ci-key does not expand".to_owned(),
        ));
    }
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

pub(super) fn path_macro(name: &str, form: PathMacroForm) -> Option<&'static PathMacro> {
    PATH_MACROS
        .iter()
        .find(|m| m.name == name && m.form == form)
}

impl TokenWalker<'_, '_, '_> {
    /// Records what a macro of [`PATH_MACROS`] reads: `arg` is its string
    /// argument, `Some(None)` when it has none, `None` when it has another.
    /// A call `name!(…)` of a macro of [`PATH_MACROS`]. In a `macro_rules!`
    /// body it reads what the outermost call passes (`migrate!($dir)`, a
    /// wrapper), from the calling crate; a path relative to
    /// `CARGO_MANIFEST_DIR` there is the calling crate's too.
    pub(super) fn record_path_macro_call(
        &mut self,
        known: &PathMacro,
        args: Range,
        arg: Option<Option<String>>,
        line: usize,
    ) {
        let in_body = self
            .in_macro_rules
            .clone()
            .filter(|_| !self.in_generated_macro);
        let Some(macro_rules) = in_body.filter(|_| known.reads != PathReads::Declared) else {
            self.record_path_macro(known, arg, line);
            return;
        };
        let caller_relative = |text: String| CallerRelative {
            macro_rules: macro_rules.clone(),
            text,
            is_pattern: false,
            reads: Some(known.reads),
        };
        if arg.is_none() && evaluate_path(self.src, args, self.ctx).0 == EmbedTarget::FromCallers {
            self.scan.embeds.push(Embed {
                macro_name: path_macro_label(known),
                target: EmbedTarget::FromCallers,
                site: Site {
                    file: self.ctx.file.to_path_buf(),
                    line,
                },
                caller_relative: Some(caller_relative(String::new())),
            });
            return;
        }
        self.record_path_macro(known, arg.clone(), line);
        let text = match (known.reads, arg) {
            (PathReads::ManifestDirTree { default }, Some(path)) => {
                path.or(default.map(str::to_owned))
            }
            (PathReads::ManifestDirFirst { .. }, Some(path)) => path,
            _ => None,
        };
        let text = text.map(|t| match t.strip_prefix("$CARGO_MANIFEST_DIR") {
            Some(rest) => rest.trim_start_matches('/').to_owned(),
            None => t,
        });
        if let Some(text) = text.filter(|t| !t.contains('$') && !Path::new(t).is_absolute()) {
            if let Some(embed) = self.scan.embeds.last_mut() {
                embed.caller_relative = Some(caller_relative(text));
            }
        }
    }

    pub(super) fn record_path_macro(
        &mut self,
        known: &PathMacro,
        arg: Option<Option<String>>,
        line: usize,
    ) {
        let label = path_macro_label(known);
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
            (PathReads::ManifestDirFirst { .. }, Some(None)) => unresolved("with no path argument"),
            (PathReads::ManifestDirFirst { dirs }, Some(Some(path))) => {
                if Path::new(&path).is_absolute() {
                    EmbedTarget::File(PathBuf::from(path))
                } else {
                    EmbedTarget::Candidates(
                        dirs.iter()
                            .map(|dir| self.ctx.package_dir.join(dir).join(&path))
                            .collect(),
                    )
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
    pub(super) fn record_assembler_template(
        &mut self,
        known: &PathMacro,
        args: Range,
        line: usize,
    ) {
        let src = self.src;
        let ctx = self.ctx;
        let mut targets = Vec::new();
        // Parts a caller completes, in a body whose callers can be found.
        let in_body = self
            .in_macro_rules
            .clone()
            .filter(|_| !self.in_generated_macro);
        let mut from_callers = Vec::new();
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
                Err(_) if in_body.is_some() => from_callers.push(part),
                Err(what) => targets.push(EmbedTarget::Unresolved(format!(
                    "{what} (the assembler reads the files its `.incbin`/`.include` directives name)"
                ))),
            }
        });
        if let Some(macro_rules) = in_body {
            let include_str =
                |name: &str| ctx.include_macro(name).as_deref() == Some("include_str");
            for part in from_callers {
                let pieces = pieces_of(src.text, part, &include_str);
                let files = match included_files(src, &pieces.includes, ctx) {
                    Ok(files) => files,
                    Err(what) => {
                        targets.push(EmbedTarget::Unresolved(format!(
                            "the template `{}`, which includes {what} (the assembler reads the files its `.incbin`/`.include` directives name)",
                            src.snippet(part)
                        )));
                        continue;
                    }
                };
                self.scan.assembler_bounds.push(AssemblerBound {
                    macro_name: format!("{}!", known.name),
                    macro_rules: macro_rules.clone(),
                    template: src.snippet(part),
                    site: Site {
                        file: ctx.file.to_path_buf(),
                        line,
                    },
                    pieces,
                    files,
                });
            }
        }
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
    pub(super) fn record_attribute_forms(&mut self, body: Range) {
        let src = self.src;
        let Some(first) = src.cursor(body).peek(0) else {
            return;
        };
        let Some(name) = src.ident_name(Some(first)) else {
            return;
        };
        let line = src.line(first.start);
        // `#[cfg_attr(pred, folder = "…", …)]`: each attribute after the
        // predicate is one, whichever `cfg` holds.
        if name == "cfg_attr" {
            if let Some(&[_, args]) = src.shape(body, 2).as_deref() {
                if is_group(Some(args), Some(Delim::Paren)) {
                    let mut parts = Vec::new();
                    src.for_each_part(inner(args), 0, |part, _| parts.push(part));
                    for part in parts.into_iter().skip(1) {
                        self.record_attribute_forms(part);
                    }
                }
            }
            return;
        }
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
