//! An assembler template that a `macro_rules!` body builds from what its
//! callers pass (`concat!("call ", stringify!($n))`,
//! `include_str!(concat!("../", $dir, "/", $path))`): what its text can be
//! made of, and whether that can spell a directive that reads a file.
//!
//! The assembler reads files only for `.incbin` and `.include`
//! ([`super::asm_directives`]). A template's text is a concatenation of
//! pieces, each a literal, the text of a token (`stringify!`), what a
//! caller passes for a metavariable, what a workspace `macro_rules!` it
//! calls transcribes, or the text of an `include_str!`d file. Every such
//! piece is drawn from a finite set of byte strings ("atoms"): the tokens
//! and literal values of the template, of the macros it calls and of every
//! call's arguments, and the first and last bytes of each file the template
//! may include (a directive wholly inside such a file is read from the file
//! itself, exactly). [`may_spell_directive`] decides, exactly for that set,
//! whether any concatenation of atoms, in any order and number, contains
//! `.incbin` or `.include` in any case: when none can, no expansion of the
//! template reads a file, whatever the callers pass. Must not: touch the
//! file system or decide refusals (that is `sources.rs`).

use std::path::PathBuf;

use super::Site;
use super::path_expr::evaluate_path;
use super::source::{Range, Source};
use super::{EmbedTarget, FileContext};
use crate::key::lexer::{self, Kind, Lexer};

/// The directives that make the assembler read a file, lower case, and
/// those that start the assembler's macro language, whose `\name` and
/// `\()` substitution can paste a directive from pieces that spell none
/// ([`super::asm_directives`] refuses them where they can).
const DIRECTIVES: [&[u8]; 5] = [b".incbin", b".include", b".macro", b".irp", b".altmacro"];

/// How many bytes of an included file can take part in a directive that
/// crosses its edge: one byte short of the longest directive.
pub const FILE_EDGE_BYTES: usize = 8;

/// How many tokens one piece of a template (a transcriber, a call's
/// arguments) may hold before it is not bounded.
const MAX_PIECE_TOKENS: usize = 65_536;

/// An assembler template in a `macro_rules!` body that is not known until
/// the macro is called, with what it can be made of.
#[derive(Debug, Clone)]
pub struct AssemblerBound {
    /// `asm!`, `global_asm!`, `naked_asm!`.
    pub macro_name: String,
    /// The `macro_rules!` whose body holds it.
    pub macro_rules: String,
    /// The template as written, for messages.
    pub template: String,
    pub site: Site,
    /// The pieces read where the template stands.
    pub pieces: Pieces,
    /// `include_str!`d files the template is made of: an absolute path,
    /// or a glob (`*` for each metavariable) with, when it is relative to
    /// the file, its text, resolved again from each calling file.
    pub files: Vec<(PathBuf, bool, Option<String>)>,
}

/// What a token stream can contribute to a template's text.
#[derive(Debug, Clone, Default)]
pub struct Pieces {
    /// Every token's text, and every literal's value.
    pub atoms: Vec<Vec<u8>>,
    /// The macros it calls other than `concat!` and `stringify!`, by name:
    /// their output is part of the text.
    pub calls: Vec<String>,
    /// A `$name` or `$(…)` stands in it: the callers' arguments are part
    /// of the text.
    pub metavariables: bool,
    /// The argument ranges of the `include_str!` calls in it (only where
    /// it was read from a [`Source`]).
    pub includes: Vec<Range>,
    /// Why it cannot be bounded (another include macro, too many tokens).
    pub opaque: Option<String>,
}

/// The pieces of `text[range]`. `include_str` names the macros that are
/// rustc's `include_str!` (by name or alias); `include!`, `include_bytes!`
/// and `env!` there leave the text unbounded.
pub fn pieces_of(text: &str, range: Range, include_str: &dyn Fn(&str) -> bool) -> Pieces {
    let mut pieces = Pieces::default();
    let mut lexer = Lexer::new(text, range.0, range.1);
    let mut tokens = Vec::new();
    loop {
        match lexer.next_token() {
            Ok(Some(token)) if tokens.len() < MAX_PIECE_TOKENS => tokens.push(token),
            Ok(Some(_)) => {
                pieces.opaque = Some(format!("more than {MAX_PIECE_TOKENS} tokens"));
                return pieces;
            }
            Ok(None) => break,
            Err(err) => {
                pieces.opaque = Some(format!("text that does not tokenise ({})", err.what));
                return pieces;
            }
        }
    }
    let text_of = |i: usize| &text[tokens[i].start..tokens[i].end];
    let is_punct = |i: usize, p: &str| {
        tokens
            .get(i)
            .is_some_and(|t| t.kind == Kind::Punct && &text[t.start..t.end] == p)
    };
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        if is_punct(i, "$") {
            pieces.metavariables = true;
            // `$name` is replaced whole; `$(…)` repeats what it holds.
            if tokens
                .get(i + 1)
                .is_some_and(|t| matches!(t.kind, Kind::Ident | Kind::RawIdent))
                && text_of(i + 1) != "crate"
            {
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        let is_call = matches!(token.kind, Kind::Ident | Kind::RawIdent)
            && is_punct(i + 1, "!")
            && tokens
                .get(i + 2)
                .is_some_and(|t| matches!(t.kind, Kind::Open(_)));
        if is_call {
            let name = text_of(i).trim_start_matches("r#");
            if include_str(name) {
                // Its argument names a file; the text is the file's.
                let mut depth = 0usize;
                let mut close = i + 2;
                while close < tokens.len() {
                    match tokens[close].kind {
                        Kind::Open(_) => depth += 1,
                        Kind::Close(_) => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    close += 1;
                }
                let Some(end) = tokens.get(close) else {
                    pieces.opaque = Some(format!("`{name}!` with no closing delimiter"));
                    return pieces;
                };
                pieces.includes.push((tokens[i + 2].end, end.start));
                i = close + 1;
                continue;
            }
            match name {
                "concat" | "stringify" => {}
                "include" | "include_bytes" | "include_str" | "env" | "option_env" => {
                    pieces.opaque = Some(format!("`{name}!`, whose text ci-key does not bound"));
                    return pieces;
                }
                _ => pieces.calls.push(name.to_owned()),
            }
            // The arguments' tokens are atoms: a macro_rules! outputs only
            // its transcriber's tokens and what it is handed.
            i += 2;
            continue;
        }
        let raw = text_of(i);
        pieces.atoms.push(raw.as_bytes().to_vec());
        if token.kind == Kind::Literal {
            // `concat!` takes a char literal's value too: `'\x2e'` is `.`.
            let value = match raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
                Some("\"") => Some("\"".to_owned()),
                Some(inner) => lexer::string_value(&format!("\"{inner}\"")),
                None => lexer::string_value(raw),
            };
            match value {
                Some(value) => pieces.atoms.push(value.into_bytes()),
                None if raw.starts_with('\'') => {
                    pieces.opaque = Some(format!(
                        "the char literal {raw}, whose value ci-key cannot read"
                    ));
                    return pieces;
                }
                None => {}
            }
        }
        i += 1;
    }
    pieces
}

/// Whether some concatenation of `atoms` and `files` (any order, any
/// repetition) contains `.incbin` or `.include`, ASCII case ignored. Exact
/// for that language: a search over the states of each directive's
/// matching automaton (how much of a directive the text read ends with).
/// A directive wholly inside one of `files` is that file's own, read from
/// it exactly, so only one that crosses a file's edge counts there; only a
/// file's first and last [`FILE_EDGE_BYTES`] bytes can take part in one.
pub fn may_spell_directive<'a>(atoms: impl IntoIterator<Item = &'a [u8]>, files: &[&[u8]]) -> bool {
    let atoms: Vec<&[u8]> = atoms.into_iter().collect();
    DIRECTIVES.iter().any(|directive| {
        let len = directive.len();
        // next[state][byte]: the longest prefix of the directive that ends
        // the text read so far plus `byte`.
        let next: Vec<[u8; 256]> = (0..len)
            .map(|state| {
                let mut row = [0u8; 256];
                for byte in 0..=255u8 {
                    let mut read = directive[..state].to_vec();
                    read.push(byte.to_ascii_lowercase());
                    let k = (0..=read.len().min(len))
                        .rev()
                        .find(|&k| read[read.len() - k..] == directive[..k])
                        .unwrap_or(0);
                    row[usize::from(byte)] = u8::try_from(k).unwrap_or(0);
                }
                row
            })
            .collect();
        // Reads `bytes` from `state`: `None` when a directive completes
        // that began before `bytes` (or anywhere, unless `interior_known`);
        // a directive wholly inside starts the search afresh (no directive
        // begins inside itself: `.` only starts one).
        let run = |bytes: &[u8], mut state: usize, interior_known: bool| -> Option<usize> {
            for (at, &byte) in bytes.iter().enumerate() {
                state = usize::from(next[state][usize::from(byte)]);
                if state == len {
                    if !interior_known || at + 1 < len {
                        return None;
                    }
                    state = 0;
                }
            }
            Some(state)
        };
        let file_step = |file: &[u8], state: usize| -> Option<usize> {
            if file.len() <= 2 * FILE_EDGE_BYTES {
                return run(file, state, true);
            }
            run(&file[..FILE_EDGE_BYTES], state, true)?;
            run(&file[file.len() - FILE_EDGE_BYTES..], 0, true)
        };
        let mut seen = vec![false; len];
        let mut pending = vec![0usize];
        seen[0] = true;
        while let Some(state) = pending.pop() {
            let reached = atoms
                .iter()
                .map(|atom| run(atom, state, false))
                .chain(files.iter().map(|file| file_step(file, state)));
            for at in reached {
                let Some(at) = at else {
                    return true;
                };
                if !seen[at] {
                    seen[at] = true;
                    pending.push(at);
                }
            }
        }
        false
    })
}

/// The files `includes` name, evaluated in `ctx`; `Err` when one is not a
/// file or a pattern ci-key can list.
pub(super) fn included_files(
    src: &Source<'_>,
    includes: &[Range],
    ctx: &FileContext<'_>,
) -> Result<Vec<(PathBuf, bool, Option<String>)>, String> {
    includes
        .iter()
        .map(|&args| match evaluate_path(src, args, ctx) {
            (EmbedTarget::File(path), relative) => Ok((path, false, relative)),
            (EmbedTarget::Pattern(path), relative) => Ok((path, true, relative)),
            (EmbedTarget::OutDir, _) => {
                Err("an assembler source the build script generates".to_owned())
            }
            (EmbedTarget::Unresolved(what), _) => Err(what),
            _ => Err(format!("`include_str!({})`", src.snippet(args))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spells(atoms: &[&str]) -> bool {
        may_spell_directive(atoms.iter().map(|a| a.as_bytes()), &[])
    }

    #[test]
    fn a_directive_is_found_across_atoms_in_any_case_and_order() {
        assert!(spells(&[".incbin \"x\""]));
        assert!(spells(&["bin", ".inc"]));
        assert!(spells(&["x.", "INC", "lude"]));
        assert!(spells(&["i", "n", "c", "b", ".", "l", "u", "d", "e"]));
        // A failed partial match falls back correctly.
        assert!(spells(&["..inc", "bin"]));
        assert!(spells(&[".i.incbin"]));
        assert!(spells(&[".inc.inc", "lude"]));
    }

    #[test]
    fn pieces_that_cannot_meet_are_no_directive() {
        // Rust-CUDA's optix call: literals and a stringified number.
        assert!(!spells(&[
            "call ({}), _optix_report_intersection_",
            "stringify",
            "N",
            "0",
            " ",
            "\n",
            ".",
            "ld.",
        ]));
        assert!(!spells(&[".inc", "bi"]));
        // The assembler's macro language could paste one.
        assert!(spells(&["x.", "MACRO"]));
        assert!(spells(&[".ir", "p"]));
        assert!(!spells(&[]));
    }

    #[test]
    fn a_file_counts_only_for_a_directive_across_its_edges() {
        let inside = b".incbin \"a\"\n nop\n nop\n nop\n";
        assert!(!may_spell_directive([], &[inside]));
        assert!(!may_spell_directive([b".".as_slice()], &[b".incbin \"a\""]));
        // Its tail `.inc` meets a following `bin`, its head `lude` a `.inc`.
        let tail = b"nop\nnop\nnop\nnop\n.inc";
        assert!(may_spell_directive([b"bin".as_slice()], &[tail]));
        let head = b"lude \"x\"\nnop\nnop\nnop\n";
        assert!(may_spell_directive([b"x.inc".as_slice()], &[head]));
        assert!(!may_spell_directive([b"x.inc".as_slice()], &[tail]));
    }
}
