//! Rust's token rules, over borrowed text, without allocating.
//!
//! A port of the rules of `rustc_lexer` (comments, nested block comments,
//! strings, raw strings with `#` guards, byte and C strings, char literals
//! against lifetimes, numbers with exponents and suffixes, raw identifiers,
//! Unicode identifiers and Pattern_White_Space). A token is a kind and a
//! byte range into the text, so a lexed file costs no memory beyond the
//! text itself. Doc comments are trivia here: the scanner ignores
//! documentation text.
//!
//! Owns tokenisation only; what tokens mean to the key is `scan`'s. Where
//! this lexer and rustc could disagree, it refuses (an error), never guesses:
//! text read as a comment or literal that rustc reads as code would hide a
//! `mod` or an include from the key.

/// What a token is. Groups are not tokens here: `Open` and `Close` are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ident,
    /// `r#name`; its text includes the `r#`.
    RawIdent,
    Lifetime,
    Literal,
    Punct,
    Open(Delim),
    Close(Delim),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delim {
    Paren,
    Brace,
    Bracket,
}

/// A token: its kind and the byte range of its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// Text rustc cannot tokenise either: the byte offset and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    pub offset: usize,
    pub what: &'static str,
}

/// Lexes `text[start..end]`.
pub struct Lexer<'s> {
    text: &'s str,
    bytes: &'s [u8],
    pos: usize,
    end: usize,
}

/// rustc's `is_whitespace`: Unicode Pattern_White_Space.
pub fn is_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n'
            | '\u{000B}'
            | '\u{000C}'
            | '\r'
            | ' '
            | '\u{0085}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// The length of the UTF-8 sequence a byte starts (1 for a stray byte).
fn utf8_len(b: u8) -> usize {
    match b {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

pub fn is_id_start(c: char) -> bool {
    c == '_' || unicode_ident::is_xid_start(c)
}

pub fn is_id_continue(c: char) -> bool {
    unicode_ident::is_xid_continue(c)
}

impl<'s> Lexer<'s> {
    pub fn new(text: &'s str, start: usize, end: usize) -> Self {
        Lexer {
            text,
            bytes: text.as_bytes(),
            pos: start,
            end,
        }
    }

    /// Moves to `pos`, which must be a token boundary inside the range.
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// The char `n` chars ahead of the position, or `'\0'` at the end.
    /// ASCII, nearly all of any source, is read without decoding.
    #[inline]
    fn peek_char(&self, n: usize) -> char {
        let mut at = self.pos;
        for _ in 0..n {
            match self.bytes.get(at) {
                Some(&b) if at < self.end => at += utf8_len(b),
                _ => return '\0',
            }
        }
        self.char_at(at)
    }

    #[inline]
    fn char_at(&self, at: usize) -> char {
        match self.bytes.get(at) {
            Some(&b) if at < self.end && b < 0x80 => char::from(b),
            Some(_) if at < self.end => self
                .text
                .get(at..self.end)
                .and_then(|rest| rest.chars().next())
                .unwrap_or('\0'),
            _ => '\0',
        }
    }

    #[inline]
    fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    #[inline]
    fn bump(&mut self) -> Option<char> {
        if self.at_end() {
            return None;
        }
        let c = self.char_at(self.pos);
        self.pos += c.len_utf8();
        Some(c)
    }

    fn eat_while(&mut self, mut keep: impl FnMut(char) -> bool) {
        while self.pos < self.end {
            let b = self.bytes[self.pos];
            let c = if b < 0x80 {
                char::from(b)
            } else {
                self.char_at(self.pos)
            };
            if !keep(c) {
                return;
            }
            self.pos += c.len_utf8();
        }
    }

    /// Identifier characters; ASCII without a table look-up.
    #[inline]
    fn eat_ident_continue(&mut self) {
        while self.pos < self.end {
            let b = self.bytes[self.pos];
            if b.is_ascii_alphanumeric() || b == b'_' {
                self.pos += 1;
            } else if b < 0x80 {
                return;
            } else {
                let c = self.char_at(self.pos);
                if !is_id_continue(c) {
                    return;
                }
                self.pos += c.len_utf8();
            }
        }
    }

    /// Skips white space and comments (doc comments included).
    #[inline]
    fn skip_trivia(&mut self) -> Result<(), LexError> {
        loop {
            if self.at_end() {
                return Ok(());
            }
            let b = self.bytes[self.pos];
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C => self.pos += 1,
                b'/' if self.bytes.get(self.pos + 1) == Some(&b'/') && self.pos + 1 < self.end => {
                    self.pos = memchr::memchr(b'\n', &self.bytes[self.pos..self.end])
                        .map_or(self.end, |n| self.pos + n);
                }
                b'/' if self.bytes.get(self.pos + 1) == Some(&b'*') && self.pos + 1 < self.end => {
                    self.block_comment()?;
                }
                _ if b >= 0x80 && is_whitespace(self.peek_char(0)) => {
                    self.pos += self.peek_char(0).len_utf8();
                }
                _ => return Ok(()),
            }
        }
    }

    fn block_comment(&mut self) -> Result<(), LexError> {
        let start = self.pos;
        self.pos += 2;
        let mut depth = 1usize;
        while self.pos < self.end {
            let Some(n) = memchr::memchr2(b'/', b'*', &self.bytes[self.pos..self.end]) else {
                break;
            };
            self.pos += n;
            let next = self
                .bytes
                .get(self.pos + 1)
                .filter(|_| self.pos + 1 < self.end);
            match (self.bytes[self.pos], next) {
                (b'/', Some(b'*')) => {
                    depth += 1;
                    self.pos += 2;
                }
                (b'*', Some(b'/')) => {
                    depth -= 1;
                    self.pos += 2;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => self.pos += 1,
            }
        }
        Err(LexError {
            offset: start,
            what: "an unterminated block comment",
        })
    }

    /// The next token, or `None` at the end of the range.
    #[inline]
    pub fn next_token(&mut self) -> Result<Option<Token>, LexError> {
        self.skip_trivia()?;
        if self.at_end() {
            return Ok(None);
        }
        let start = self.pos;
        let first = self.bump().unwrap_or('\0');
        let kind = match first {
            'r' => match (self.peek_char(0), self.peek_char(1)) {
                ('#', c) if is_id_start(c) => {
                    self.pos += 1;
                    self.eat_ident_continue();
                    Kind::RawIdent
                }
                ('#' | '"', _) => {
                    self.raw_string(start)?;
                    self.suffix();
                    Kind::Literal
                }
                _ => self.ident(),
            },
            'b' | 'c' => match (self.peek_char(0), self.peek_char(1)) {
                ('\'', _) if first == 'b' => {
                    self.pos += 1;
                    self.single_quoted(start)?;
                    self.suffix();
                    Kind::Literal
                }
                ('"', _) => {
                    self.pos += 1;
                    self.double_quoted(start)?;
                    self.suffix();
                    Kind::Literal
                }
                ('r', '"' | '#') => {
                    self.pos += 1;
                    self.raw_string(start)?;
                    self.suffix();
                    Kind::Literal
                }
                _ => self.ident(),
            },
            'a'..='z' | 'A'..='Z' | '_' => self.ident(),
            c if !c.is_ascii() && is_id_start(c) => self.ident(),
            '0'..='9' => {
                self.number(first);
                self.suffix();
                Kind::Literal
            }
            ';' | ',' | '.' | '@' | '#' | '~' | '?' | ':' | '$' | '=' | '!' | '<' | '>' | '-'
            | '&' | '|' | '+' | '*' | '/' | '^' | '%' => Kind::Punct,
            '(' => Kind::Open(Delim::Paren),
            '{' => Kind::Open(Delim::Brace),
            '[' => Kind::Open(Delim::Bracket),
            ')' => Kind::Close(Delim::Paren),
            '}' => Kind::Close(Delim::Brace),
            ']' => Kind::Close(Delim::Bracket),
            '\'' => self.lifetime_or_char(start)?,
            '"' => {
                self.double_quoted(start)?;
                self.suffix();
                Kind::Literal
            }
            _ => {
                return Err(LexError {
                    offset: start,
                    what: "a character that is not part of any Rust token",
                });
            }
        };
        Ok(Some(Token {
            kind,
            start,
            end: self.pos,
        }))
    }

    #[inline]
    fn ident(&mut self) -> Kind {
        self.eat_ident_continue();
        Kind::Ident
    }

    fn suffix(&mut self) {
        if is_id_start(self.peek_char(0)) {
            self.bump();
            self.eat_ident_continue();
        }
    }

    /// After the opening `"`: to the closing one; `\` escapes `\` and `"`.
    fn double_quoted(&mut self, start: usize) -> Result<(), LexError> {
        while self.pos < self.end {
            let Some(n) = memchr::memchr2(b'"', b'\\', &self.bytes[self.pos..self.end]) else {
                break;
            };
            self.pos += n;
            if self.bytes[self.pos] == b'"' {
                self.pos += 1;
                return Ok(());
            }
            // A backslash: it escapes the next character, whatever it is.
            self.pos += 1;
            if self.pos < self.end {
                self.bump();
            }
        }
        Err(LexError {
            offset: start,
            what: "an unterminated string literal",
        })
    }

    /// At the `#`s or `"` after `r`: `r#…#"…"#…#`.
    fn raw_string(&mut self, start: usize) -> Result<(), LexError> {
        let hashes_start = self.pos;
        self.eat_while(|c| c == '#');
        let hashes = self.pos - hashes_start;
        if hashes > 255 {
            return Err(LexError {
                offset: start,
                what: "a raw string with more than 255 `#`",
            });
        }
        if self.bump() != Some('"') {
            return Err(LexError {
                offset: start,
                what: "a raw string prefix without its opening quote",
            });
        }
        while self.pos < self.end {
            let Some(n) = memchr::memchr(b'"', &self.bytes[self.pos..self.end]) else {
                break;
            };
            self.pos += n + 1;
            let closing = &self.bytes[self.pos..self.end];
            if closing.len() >= hashes && closing[..hashes].iter().all(|&b| b == b'#') {
                self.pos += hashes;
                return Ok(());
            }
        }
        Err(LexError {
            offset: start,
            what: "an unterminated raw string literal",
        })
    }

    /// After the opening `'` of a char or byte literal (rustc's
    /// `single_quoted_string`).
    fn single_quoted(&mut self, start: usize) -> Result<(), LexError> {
        if self.peek_char(1) == '\'' && self.peek_char(0) != '\\' {
            self.bump();
            self.bump();
            return Ok(());
        }
        loop {
            match self.peek_char(0) {
                '\'' => {
                    self.bump();
                    return Ok(());
                }
                '/' => break,
                '\n' if self.peek_char(1) != '\'' => break,
                '\0' if self.at_end() => break,
                '\\' => {
                    self.bump();
                    self.bump();
                }
                _ => {
                    self.bump();
                }
            }
        }
        Err(LexError {
            offset: start,
            what: "an unterminated character literal",
        })
    }

    fn lifetime_or_char(&mut self, start: usize) -> Result<Kind, LexError> {
        let can_be_lifetime = if self.peek_char(1) == '\'' {
            false
        } else {
            is_id_start(self.peek_char(0)) || self.peek_char(0).is_ascii_digit()
        };
        if !can_be_lifetime {
            self.single_quoted(start)?;
            self.suffix();
            return Ok(Kind::Literal);
        }
        if self.peek_char(0) == 'r' && self.peek_char(1) == '#' && is_id_start(self.peek_char(2)) {
            self.pos += 2;
            self.eat_ident_continue();
            return Ok(Kind::Lifetime);
        }
        self.bump();
        self.eat_ident_continue();
        if self.peek_char(0) == '\'' {
            self.bump();
            self.suffix();
            return Ok(Kind::Literal);
        }
        Ok(Kind::Lifetime)
    }

    fn eat_decimal_digits(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.peek_char(0) {
                '_' => {
                    self.bump();
                }
                '0'..='9' => {
                    any = true;
                    self.bump();
                }
                _ => return any,
            }
        }
    }

    fn eat_hexadecimal_digits(&mut self) -> bool {
        let mut any = false;
        loop {
            match self.peek_char(0) {
                '_' => {
                    self.bump();
                }
                '0'..='9' | 'a'..='f' | 'A'..='F' => {
                    any = true;
                    self.bump();
                }
                _ => return any,
            }
        }
    }

    fn eat_float_exponent(&mut self) {
        if matches!(self.peek_char(0), '-' | '+') {
            self.bump();
        }
        self.eat_decimal_digits();
    }

    fn number(&mut self, first: char) {
        if first == '0' {
            match self.peek_char(0) {
                'b' | 'o' => {
                    self.bump();
                    if !self.eat_decimal_digits() {
                        return;
                    }
                }
                'x' => {
                    self.bump();
                    if !self.eat_hexadecimal_digits() {
                        return;
                    }
                }
                '0'..='9' | '_' => {
                    self.eat_decimal_digits();
                }
                '.' | 'e' | 'E' => {}
                _ => return,
            }
        } else {
            self.eat_decimal_digits();
        }
        match self.peek_char(0) {
            '.' if self.peek_char(1) != '.' && !is_id_start(self.peek_char(1)) => {
                self.bump();
                if self.peek_char(0).is_ascii_digit() {
                    self.eat_decimal_digits();
                    if matches!(self.peek_char(0), 'e' | 'E') {
                        self.bump();
                        self.eat_float_exponent();
                    }
                }
            }
            'e' | 'E' => {
                self.bump();
                self.eat_float_exponent();
            }
            _ => {}
        }
    }
}

/// The value of a string literal's text (`"…"` or `r#"…"#`, any suffix
/// ignored), with rustc's escapes; `None` for any other literal or an
/// escape rustc would reject.
pub fn string_value(text: &str) -> Option<String> {
    if let Some(raw) = text.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        let body = raw[hashes..].strip_prefix('"')?;
        let close = body.rfind(&format!("\"{}", "#".repeat(hashes)))?;
        return Some(body[..close].replace("\r\n", "\n"));
    }
    let body = text.strip_prefix('"')?;
    let mut value = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                'r' => value.push('\r'),
                't' => value.push('\t'),
                '\\' => value.push('\\'),
                '0' => value.push('\0'),
                '\'' => value.push('\''),
                '"' => value.push('"'),
                'x' => {
                    let hex: String = [chars.next()?, chars.next()?].iter().collect();
                    let byte = u8::from_str_radix(&hex, 16).ok().filter(|b| *b < 0x80)?;
                    value.push(char::from(byte));
                }
                'u' => {
                    if chars.next()? != '{' {
                        return None;
                    }
                    let mut hex = String::new();
                    loop {
                        match chars.next()? {
                            '}' => break,
                            '_' => {}
                            h => hex.push(h),
                        }
                    }
                    if hex.is_empty() || hex.len() > 6 {
                        return None;
                    }
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                '\n' | '\r' => {
                    while chars
                        .peek()
                        .is_some_and(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
                    {
                        chars.next();
                    }
                }
                _ => return None,
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(Kind, &str)> {
        let mut lexer = Lexer::new(text, 0, text.len());
        let mut out = Vec::new();
        while let Some(t) = lexer.next_token().expect("lexes") {
            out.push((t.kind, &text[t.start..t.end]));
        }
        out
    }

    #[test]
    fn tokens_follow_rustc_rules() {
        use Kind::*;
        assert_eq!(
            kinds(
                r###"r#mod r#"a"b"# 'a' 'a b'\'' '\\' b'x' br"q" c"z" 1.foo 1..2 1e-5f32 0x1F_u8 "s"sfx"###
            ),
            vec![
                (RawIdent, "r#mod"),
                (Literal, r##"r#"a"b"#"##),
                (Literal, "'a'"),
                (Lifetime, "'a"),
                (Literal, "b'\\''"),
                (Literal, "'\\\\'"),
                (Literal, "b'x'"),
                (Literal, "br\"q\""),
                (Literal, "c\"z\""),
                (Literal, "1"),
                (Punct, "."),
                (Ident, "foo"),
                (Literal, "1"),
                (Punct, "."),
                (Punct, "."),
                (Literal, "2"),
                (Literal, "1e-5f32"),
                (Literal, "0x1F_u8"),
                (Literal, "\"s\"sfx"),
            ]
        );
        assert_eq!(
            kinds("/* a /* nested */ mod x; */ mod\u{2028}y; // mod z;\n/// mod d;\n"),
            vec![(Ident, "mod"), (Ident, "y"), (Punct, ";")]
        );
        assert_eq!(
            kinds("\"a\\\"mod\" 'x"),
            vec![(Literal, "\"a\\\"mod\""), (Lifetime, "'x")]
        );
    }

    #[test]
    fn what_rustc_cannot_lex_is_an_error() {
        for bad in ["/* open", "\"open", "r#\"open\"", "r##x", "€", "' x"] {
            let mut lexer = Lexer::new(bad, 0, bad.len());
            let mut result = Ok(None);
            for _ in 0..10 {
                result = lexer.next_token();
                if !matches!(result, Ok(Some(_))) {
                    break;
                }
            }
            assert!(result.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn string_values_unescape_like_rustc() {
        assert_eq!(
            string_value(r#""a\x41\u{4_2}\n""#).as_deref(),
            Some("aAB\n")
        );
        assert_eq!(string_value("\"a\\\n   b\"").as_deref(), Some("ab"));
        assert_eq!(string_value(r###"r##"a"#b"##"###).as_deref(), Some("a\"#b"));
        assert_eq!(string_value(r#""x"suffix"#).as_deref(), Some("x"));
        assert_eq!(string_value("b\"x\""), None);
        assert_eq!(string_value(r#""\q""#), None);
    }
}
