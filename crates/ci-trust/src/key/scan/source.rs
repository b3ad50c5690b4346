//! A file's text as tokens: the one lexing pass that checks it and indexes
//! every group ([`Source::index`]), the cursor that lexes one level on
//! demand with a few tokens of lookahead, and the small shape readers
//! (attribute bodies, comma-separated parts, `name ! (…)`) the walk uses.
//! Must not: give a construct a meaning beyond its shape.

use std::cell::Cell;

use super::MAX_NESTING;
use crate::key::lexer::{self, Delim, Kind, Lexer, Token};

/// Where tokens start: after a `#!` first line that is not an inner
/// attribute (rustc's `strip_shebang`).
pub(super) fn shebang_end(text: &str) -> usize {
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
pub(super) fn line_at(text: &str, offset: usize) -> usize {
    1 + memchr::memchr_iter(b'\n', &text.as_bytes()[..offset.min(text.len())]).count()
}

/// A byte range of the text: a whole file, or the inside of a group.
pub(super) type Range = (usize, usize);

/// A file's text and where each of its groups closes.
pub(super) struct Source<'s> {
    pub(super) text: &'s str,
    /// (open offset, close offset) of every group, by open offset.
    pub(super) groups: Vec<(u32, u32)>,
    /// The last offset whose line was asked for, with that line: lines are
    /// mostly asked for in order, so counting goes on from there.
    pub(super) line_cache: Cell<(usize, usize)>,
}

impl<'s> Source<'s> {
    /// Lexes the whole text once: every token must be one rustc accepts,
    /// every bracket must match, and nesting is limited. Errors give the
    /// offset and the reason.
    pub(super) fn index(text: &'s str, start: usize) -> Result<Self, (usize, String)> {
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
    pub(super) fn close_of(&self, open: usize) -> Option<usize> {
        let at = u32::try_from(open).ok()?;
        let index = self.groups.binary_search_by_key(&at, |g| g.0).ok()?;
        Some(self.groups[index].1 as usize)
    }

    pub(super) fn line(&self, offset: usize) -> usize {
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

    pub(super) fn cursor(&self, range: Range) -> Cursor<'_, 's> {
        Cursor {
            src: self,
            lexer: Lexer::new(self.text, range.0, range.1),
            ahead: [NO_TOKEN; LOOKAHEAD],
            head: 0,
            len: 0,
            behind: [None, None],
        }
    }

    pub(super) fn text(&self, token: Token) -> &'s str {
        &self.text[token.start..token.end]
    }

    /// Whether `token` is the plain (not raw) identifier `name`.
    pub(super) fn is_ident(&self, token: Option<Token>, name: &str) -> bool {
        token.is_some_and(|t| t.kind == Kind::Ident && self.text(t) == name)
    }

    /// Whether `token` is the identifier `name`, raw or not: `r#path` is
    /// `path` to rustc wherever a name is not a keyword (attributes,
    /// macros, path segments).
    pub(super) fn is_name(&self, token: Option<Token>, name: &str) -> bool {
        self.ident_name(token) == Some(name)
    }

    /// The name of an identifier, raw or not, without its `r#`.
    pub(super) fn ident_name(&self, token: Option<Token>) -> Option<&'s str> {
        let token = token?;
        match token.kind {
            Kind::Ident => Some(self.text(token)),
            Kind::RawIdent => Some(&self.text(token)[2..]),
            _ => None,
        }
    }

    pub(super) fn is_punct(&self, token: Option<Token>, c: u8) -> bool {
        token.is_some_and(|t| t.kind == Kind::Punct && self.text.as_bytes()[t.start] == c)
    }

    /// The text of a range for a message: white space collapsed, shortened.
    pub(super) fn snippet(&self, range: Range) -> String {
        let text = self.text[range.0..range.1]
            .split_whitespace()
            .collect::<Vec<_>>();
        let text = text.join(" ");
        match text.char_indices().nth(80) {
            Some((at, _)) => format!("{} …", &text[..at]),
            None => text,
        }
    }

    /// Where the first `=>` of a range's top level starts.
    pub(super) fn fat_arrow(&self, range: Range) -> Option<usize> {
        let mut cursor = self.cursor(range);
        while let Some(token) = cursor.peek(0) {
            if self.is_punct(Some(token), b'=') && self.is_punct(cursor.peek(1), b'>') {
                return Some(token.start);
            }
            cursor.advance(1);
        }
        None
    }

    /// The tokens of `range`, or `None` when it holds more than `max`.
    pub(super) fn shape(&self, range: Range, max: usize) -> Option<Vec<Token>> {
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
    pub(super) fn for_each_part(
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
pub(super) fn inner(group: Token) -> Range {
    (group.start + 1, group.end - 1)
}

pub(super) fn is_group(token: Option<Token>, delim: Option<Delim>) -> bool {
    match token.map(|t| t.kind) {
        Some(Kind::Open(d)) => delim.is_none_or(|want| want == d),
        _ => false,
    }
}

/// Whether the bracket group at the cursor is an attribute's body: it
/// follows `#` or `#!`.
pub(super) fn is_attribute(src: &Source<'_>, cursor: &Cursor<'_, '_>) -> bool {
    src.is_punct(cursor.behind[0], b'#')
        || (src.is_punct(cursor.behind[0], b'!') && src.is_punct(cursor.behind[1], b'#'))
}

/// How many tokens a [`Cursor`] may look ahead: more than any shape the
/// walk looks for (`macro_rules ! name {…}` is the longest, five).
const LOOKAHEAD: usize = 8;

/// A slot of the lookahead ring not yet filled.
const NO_TOKEN: Token = Token {
    kind: Kind::Punct,
    start: 0,
    end: 0,
};

/// Tokens of one level of a range, a group being one token (kind `Open`,
/// spanning its brackets), lexed on demand with a few tokens of lookahead.
pub(super) struct Cursor<'a, 's> {
    pub(super) src: &'a Source<'s>,
    pub(super) lexer: Lexer<'s>,
    /// The tokens looked ahead at, a ring of [`LOOKAHEAD`] from `head`.
    ahead: [Token; LOOKAHEAD],
    head: usize,
    len: usize,
    /// The last two tokens stepped over, the latest first.
    pub(super) behind: [Option<Token>; 2],
}

impl<'s> Cursor<'_, 's> {
    /// The token `n` ahead at this level; `n` is below [`LOOKAHEAD`] (every
    /// caller passes a constant: a shape of the walk).
    #[inline]
    pub(super) fn peek(&mut self, n: usize) -> Option<Token> {
        // Not input-dependent: a caller looking further than the ring holds
        // is a bug to see at once, never a token silently reported absent.
        assert!(
            n < LOOKAHEAD,
            "Cursor::peek({n}) looks past the lookahead ring"
        );
        while self.len <= n {
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
            self.ahead[(self.head + self.len) % LOOKAHEAD] = token;
            self.len += 1;
        }
        Some(self.ahead[(self.head + n) % LOOKAHEAD])
    }

    #[inline]
    pub(super) fn advance(&mut self, n: usize) {
        for _ in 0..n {
            if self.len == 0 && self.peek(0).is_none() {
                return;
            }
            let token = self.ahead[self.head];
            self.head = (self.head + 1) % LOOKAHEAD;
            self.len -= 1;
            self.behind = [Some(token), self.behind[0]];
        }
    }

    /// The name of the macro whose arguments the group at the cursor holds
    /// (`name ! (…)`, the last segment of a path: `quote` for `quote::quote!`).
    pub(super) fn macro_behind(&self) -> Option<&'s str> {
        if !self.src.is_punct(self.behind[0], b'!') {
            return None;
        }
        self.src.ident_name(self.behind[1])
    }
}

impl Source<'_> {
    /// The `path = "…"` values of a `cfg_attr(predicate, attr, …)` argument
    /// list, nested `cfg_attr`s included.
    pub(super) fn cfg_attr_paths(&self, args: Range) -> Vec<String> {
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
    pub(super) fn is_doc_text(&self, body: Range) -> bool {
        matches!(
            self.shape(body, 3).as_deref(),
            Some(&[name, eq, lit]) if self.is_name(Some(name), "doc")
                && self.is_punct(Some(eq), b'=') && lit.kind == Kind::Literal
        )
    }

    /// `path = "…"`: the path.
    pub(super) fn lexical_path_attribute(&self, body: Range) -> Option<String> {
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
    pub(super) fn macro_call_at(
        &self,
        cursor: &mut Cursor<'_, '_>,
    ) -> Option<(&str, Range, usize)> {
        let name = self.ident_name(cursor.peek(0))?;
        if !self.is_punct(cursor.peek(1), b'!') || !is_group(cursor.peek(2), None) {
            return None;
        }
        let line = self.line(cursor.peek(0)?.start);
        Some((name, inner(cursor.peek(2)?), line))
    }
}
