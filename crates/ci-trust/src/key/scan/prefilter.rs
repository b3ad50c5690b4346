//! The byte prefilter: a cheap test, before any tokenising, of whether a
//! file can hold anything the scan looks for. Must not: say no to a file
//! the walk would find something in (it over-approximates).

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

use super::path_macros::PATH_MACROS;

/// The words whose presence makes a file worth reading, searched for all
/// at once: `include` covers every include macro (aliases are found by name
/// later, see `sources`), `debugger_visualizer` the files rustc reads for
/// that attribute, the names of [`PATH_MACROS`] theirs; `quote`, since a
/// `macro_rules! quote` or `use … as quote` of the workspace makes
/// `quote!`'s arguments code to read (`sources::discover`); a build
/// script's `rustc-link-arg` directive, whose literal files are inputs;
/// `macro_rules`,
/// so that every `macro_rules!` of the workspace is known by name (a macro
/// handed an include macro is the workspace's or a registry's). A `macro`
/// item (macros 2.0, whose rules ci-key does not read) is found beside
/// them by [`has_macro_item`].
static WORDS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    let mut words = vec![
        "include",
        "quote",
        "macro_rules",
        "rerun-if-changed",
        super::rerun::LINK_ARG_DIRECTIVE,
        "debugger_visualizer",
    ];
    words.extend(PATH_MACROS.iter().map(|m| m.name));
    automaton(&words)
});

/// [`WORDS`] and what a build script's directive literals may hold (its
/// pieces, an escape spelling them): the walk's test of a group.
static GROUP_WORDS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    let mut words = vec![
        "include",
        "quote",
        "macro_rules",
        "rerun",
        "if-changed",
        super::rerun::LINK_ARG_DIRECTIVE,
        "\\",
        "debugger_visualizer",
    ];
    words.extend(PATH_MACROS.iter().map(|m| m.name));
    automaton(&words)
});

/// An automaton that finds any of `words`; leftmost-first, so that the
/// SIMD prefilter (Teddy) searches, not the automaton byte by byte.
fn automaton(words: &[&str]) -> AhoCorasick {
    AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        .build(words)
        .expect("the prefilter's words build an automaton")
}

/// A cheap test, before any parsing, of whether a file can hold anything
/// this module looks for. Most files of a large workspace hold none.
///
/// It must never say no to a file the parser would find something in: it
/// over-approximates: one of [`WORDS`], a file module declaration or a
/// metavariable called as a macro.
pub fn may_reference_files(text: &[u8]) -> bool {
    WORDS.is_match(text)
        || has_file_module_decl(text)
        || has_metavariable_call(text)
        || has_macro_item(text)
}

/// Looks for the keyword `macro` as a word (not `macro_rules`, not part of
/// an identifier) followed by white space or a comment: the start of a
/// `macro NAME` item, loosely (prose in a comment matches too, and the
/// tokens decide: [`super::macro_item_names`]). Such an item may define
/// any name, with rules that may transcribe what a call hands them, whether
/// or not a file names `decl_macro` (`-Zcrate-attr` can enable it).
pub(super) fn has_macro_item(text: &[u8]) -> bool {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    memchr::memmem::find_iter(text, b"macro").any(|at| {
        let before = at.checked_sub(1).map(|i| text[i]);
        let after = text.get(at + 5).copied();
        !before.is_some_and(is_ident)
            && after.is_some_and(|b| b.is_ascii_whitespace() || b == 0x0B || b == b'/' || b >= 0x80)
    })
}

/// [`may_reference_files`] for one group of a file the walk reads, also
/// true for what a build script's directive literals may hold.
pub(super) fn group_may_reference_files(bytes: &[u8]) -> bool {
    GROUP_WORDS.is_match(bytes) || has_file_module_decl(bytes) || has_metavariable_call(bytes)
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
    })
        // A repetition is `$(…)`: no `$`, no repetition to call.
        || (memchr::memchr(b'$', text).is_some() && has_repetition_call(text))
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

/// Looks for `mod <ident> ;`, the only form that loads a file, loosely:
/// after `mod` and a separator, any run of identifier bytes, white space,
/// `#` (`r#match`), `$` (`mod $name;` in a macro) and non-ASCII bytes
/// (Unicode identifiers, and rustc's Pattern_White_Space beyond ASCII:
/// U+0085, U+200E, U+200F, U+2028, U+2029) that ends in `;` or a comment.
fn has_file_module_decl(text: &[u8]) -> bool {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    // Vertical tab (0x0B) is Pattern_White_Space but not `is_ascii_whitespace`.
    let is_space = |b: u8| b.is_ascii_whitespace() || b == 0x0B || b >= 0x80;
    static MOD: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"mod"));
    let mut start = 0;
    while let Some(pos) = MOD.find(&text[start..]) {
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
