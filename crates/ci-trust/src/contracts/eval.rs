//! GitHub Actions expressions, evaluated over what a run can know: the
//! parser of `${{ … }}` bodies and `if:` conditions, and an abstract
//! evaluator whose values say what they are when the workflow shows it
//! (`github.event_name` under a trigger, a literal, a matrix entry) and,
//! when it does not, where they may come from ([`Taint`]).
//!
//! Operators fold as GitHub folds them: `a && b` is `a` when `a` is falsy,
//! else `b`; `a || b` is `a` when `a` is truthy, else `b`; `==` compares
//! strings case-insensitively and coerces mismatched types to numbers. A
//! value the evaluator cannot decide is [`Val::Unknown`] (with its taint),
//! and a choice between values ([`Val::Any`]) keeps every alternative, so a
//! condition is false only when it is false for every value it can have.
//!
//! Owns: the expression grammar, the value domain and the functions GitHub
//! defines. Must not: know which context holds what (the caller's
//! [`Scope`] answers that), or decide a finding.

use std::fmt;

/// Where a value may come from, as a set of sources.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Taint(u8);

impl Taint {
    /// Names pull-request code: a head SHA, a head ref, `refs/pull/N/…`.
    pub const PR_REF: Taint = Taint(1);
    /// Text a pull request's (or issue's, comment's) author writes: a
    /// title, a body, a branch name, a commit message, a file name. Either
    /// as written ([`Taint::PR_TEXT_UNESCAPED`], which every value made
    /// with this constant carries) or escaped for a shell
    /// ([`Taint::PR_TEXT_SHELL_ESCAPED`]); every check but a shell's
    /// reads both.
    pub const PR_TEXT: Taint = Taint(2 | 32);
    /// Pull-request text as its author wrote it.
    pub const PR_TEXT_UNESCAPED: Taint = Taint(2);
    /// Pull-request text that the action which output it escaped for a
    /// shell (`tj-actions/changed-files`' `safe_output`, its default):
    /// inert where a shell parses the expression, text anywhere else
    /// (JavaScript, a file, a variable a shell has already unescaped).
    /// Only values made with this constant alone carry it alone, so a
    /// union with unescaped text stays unescaped.
    pub const PR_TEXT_SHELL_ESCAPED: Taint = Taint(32);
    /// Chosen by whoever dispatched the run (write access): a dispatch
    /// input, a `repository_dispatch` payload.
    pub const MAINTAINER: Taint = Taint(4);
    /// Comes from something the workflows do not show (a third-party
    /// action's output, a remote workflow, a file of another repository).
    pub const UNSEEN: Taint = Taint(8);
    /// A secret or a token.
    pub const SECRET: Taint = Taint(16);
    /// Marks pull-request text read from a file or artifact the pull request
    /// controls (it comes with [`Taint::PR_TEXT`]): bytes of any shape, so a
    /// field a filter selects from them has no type (`jq .number pr/x.json`
    /// may print anything), unlike a field of GitHub's own answer.
    pub const PR_FILE_BYTES: Taint = Taint(64);

    /// Either kind of pull-request content.
    pub const PR: Taint = Taint(1 | 2 | 32 | 64);

    pub const NONE: Taint = Taint(0);

    pub fn has(self, other: Taint) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Names or carries anything a pull request controls.
    pub fn pr(self) -> bool {
        self.has(Taint(Self::PR_REF.0 | Self::PR_TEXT.0))
    }

    /// What a shell makes of a value it parses: text escaped for a shell
    /// is text as its author wrote it again.
    pub fn parsed_by_shell(self) -> Taint {
        if self.has(Taint::PR_TEXT_SHELL_ESCAPED) {
            self | Taint::PR_TEXT_UNESCAPED
        } else {
            self
        }
    }

    pub fn without(self, other: Taint) -> Taint {
        Taint(self.0 & !other.0)
    }
}

impl std::ops::BitOr for Taint {
    type Output = Taint;
    fn bitor(self, rhs: Taint) -> Taint {
        Taint(self.0 | rhs.0)
    }
}

impl std::ops::BitAnd for Taint {
    type Output = Taint;
    fn bitand(self, rhs: Taint) -> Taint {
        Taint(self.0 & rhs.0)
    }
}

impl std::ops::BitOrAssign for Taint {
    fn bitor_assign(&mut self, rhs: Taint) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Taint::PR_REF, "pr-ref"),
            (Taint::PR_TEXT_UNESCAPED, "pr-text"),
            (Taint::PR_TEXT_SHELL_ESCAPED, "pr-text-shell-escaped"),
            (Taint::MAINTAINER, "maintainer"),
            (Taint::UNSEEN, "unseen"),
            (Taint::SECRET, "secret"),
            (Taint::PR_FILE_BYTES, "pr-file-bytes"),
        ];
        // Unescaped text carries the escaped bit too: name it once.
        let shown = if self.has(Taint::PR_TEXT_UNESCAPED) {
            self.without(Taint::PR_TEXT_SHELL_ESCAPED)
        } else {
            *self
        };
        let list: Vec<&str> = names
            .iter()
            .filter(|(t, _)| shown.has(*t))
            .map(|(_, n)| *n)
            .collect();
        write!(f, "[{}]", list.join(","))
    }
}

/// An abstract value.
#[derive(Clone, Debug)]
pub enum Val {
    Null,
    Bool(bool),
    Num(f64),
    /// A known string, with the taint of what it was made from.
    Str(String, Taint),
    /// A value known only by identity (`this repository`, `a fork`).
    Sym(&'static str),
    /// An identity whose names are known (this repository, as the policy,
    /// `--repository` or the git remotes say): equal to `Sym` of the same
    /// identity, and to a literal only as [`Names::matches`] decides.
    Named(&'static str, std::sync::Arc<Names>),
    /// A list (a matrix axis, `fromJSON('[…]')`, `labels.*.name`).
    List(Vec<Val>),
    /// Any value; it may be empty.
    Unknown(Taint),
    /// An object known to be there (a payload's `pull_request`), its
    /// contents unknown: truthy, never null.
    Obj(Taint),
    /// One of these.
    Any(Vec<Val>),
}

/// The names an identity is known by (`owner/name` of this repository, or
/// its owner), and whether they are all it can be called.
#[derive(Debug, PartialEq, Eq)]
pub struct Names {
    pub names: Vec<String>,
    /// Said by the policy or `--repository`: a literal that is none of the
    /// names names something else. Otherwise (git remotes) a literal with
    /// a known name's last part may be the upstream of a fork's clone.
    pub authoritative: bool,
}

impl Names {
    /// Whether the literal `lit` names this identity.
    pub fn matches(&self, lit: &str) -> Tri {
        let lit = lit.trim();
        let named = self.names.iter().any(|n| n.eq_ignore_ascii_case(lit));
        if self.authoritative {
            return bool_tri(named);
        }
        // The git remotes are evidence, not the name: a clone keeps a
        // renamed repository's old name (GitHub redirects it), a fork may
        // be renamed (`me/repo-fork` runs the workflows of `org/repo`), and
        // of several remotes only one is this repository. A literal none of
        // them names may still be it; one of several may not be.
        let one = self
            .names
            .iter()
            .all(|n| n.eq_ignore_ascii_case(&self.names[0]));
        if named && one { Tri::True } else { Tri::Maybe }
    }
}

/// Three-valued truth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tri {
    True,
    False,
    Maybe,
}

impl Tri {
    pub fn not(self) -> Tri {
        match self {
            Tri::True => Tri::False,
            Tri::False => Tri::True,
            Tri::Maybe => Tri::Maybe,
        }
    }

    pub fn may_be_true(self) -> bool {
        self != Tri::False
    }
}

/// How deeply values may nest (`Any` of `List` of …) before they are
/// flattened to `Unknown`.
const MAX_ALTERNATIVES: usize = 64;

impl Val {
    pub fn str(text: impl Into<String>) -> Val {
        Val::Str(text.into(), Taint::NONE)
    }

    /// Every source the value may come from.
    pub fn taint(&self) -> Taint {
        match self {
            Val::Null | Val::Bool(_) | Val::Num(_) | Val::Sym(_) | Val::Named(..) => Taint::NONE,
            Val::Str(_, t) | Val::Unknown(t) | Val::Obj(t) => *t,
            Val::List(items) | Val::Any(items) => {
                items.iter().fold(Taint::NONE, |t, v| t | v.taint())
            }
        }
    }

    /// The value with `extra` added to its taint.
    pub fn tainted(self, extra: Taint) -> Val {
        if extra.is_empty() {
            return self;
        }
        match self {
            Val::Str(s, t) => Val::Str(s, t | extra),
            Val::Unknown(t) => Val::Unknown(t | extra),
            Val::Obj(t) => Val::Obj(t | extra),
            Val::List(items) => Val::List(items.into_iter().map(|v| v.tainted(extra)).collect()),
            Val::Any(items) => Val::Any(items.into_iter().map(|v| v.tainted(extra)).collect()),
            other => other,
        }
    }

    /// The value with every taint in it mapped by `f`.
    pub fn map_taint(self, f: &dyn Fn(Taint) -> Taint) -> Val {
        match self {
            Val::Str(s, t) => Val::Str(s, f(t)),
            Val::Unknown(t) => Val::Unknown(f(t)),
            Val::Obj(t) => Val::Obj(f(t)),
            Val::List(items) => Val::List(items.into_iter().map(|v| v.map_taint(f)).collect()),
            Val::Any(items) => Val::Any(items.into_iter().map(|v| v.map_taint(f)).collect()),
            other => other,
        }
    }

    /// One of `values`, flattened; a single value stands for itself.
    pub fn any(values: Vec<Val>) -> Val {
        let mut flat = Vec::new();
        for v in values {
            match v {
                Val::Any(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        if flat.len() > MAX_ALTERNATIVES {
            let taint = flat.iter().fold(Taint::NONE, |t, v| t | v.taint());
            return Val::Unknown(taint);
        }
        match flat.len() {
            0 => Val::Null,
            1 => flat.pop().unwrap_or(Val::Null),
            _ => Val::Any(flat),
        }
    }

    /// The alternatives (itself when it is not a choice).
    pub fn alternatives(&self) -> Vec<&Val> {
        match self {
            Val::Any(items) => items.iter().collect(),
            other => vec![other],
        }
    }

    pub fn truthy(&self) -> Tri {
        match self {
            Val::Null => Tri::False,
            Val::Bool(b) => bool_tri(*b),
            Val::Num(n) => bool_tri(*n != 0.0 && !n.is_nan()),
            Val::Str(s, _) => bool_tri(!s.is_empty()),
            Val::Sym(_) | Val::Named(..) | Val::List(_) | Val::Obj(_) => Tri::True,
            Val::Unknown(_) => Tri::Maybe,
            Val::Any(items) => {
                let mut all_true = true;
                let mut all_false = true;
                for item in items {
                    match item.truthy() {
                        Tri::True => all_false = false,
                        Tri::False => all_true = false,
                        Tri::Maybe => {
                            all_true = false;
                            all_false = false;
                        }
                    }
                }
                if all_true {
                    Tri::True
                } else if all_false {
                    Tri::False
                } else {
                    Tri::Maybe
                }
            }
        }
    }

    /// The value as GitHub writes it into text (`format`, `${{ }}` in a
    /// string), when it is known.
    pub fn text(&self) -> Option<String> {
        match self {
            Val::Null => Some(String::new()),
            Val::Bool(b) => Some(b.to_string()),
            Val::Num(n) => Some(number_text(*n)),
            Val::Str(s, _) => Some(s.clone()),
            _ => None,
        }
    }

    /// The known strings this value may be (none when any is unknown).
    pub fn known_texts(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        for alt in self.alternatives() {
            out.push(alt.text()?);
        }
        Some(out)
    }
}

fn bool_tri(b: bool) -> Tri {
    if b { Tri::True } else { Tri::False }
}

fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        n.to_string()
    }
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    /// A context access: `github.event.pull_request.head.sha`,
    /// `matrix['os']`, `labels.*.name`.
    Path(String, Vec<Seg>),
    Call(String, Vec<Expr>),
    Not(Box<Expr>),
    Compare(CompareOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    /// A property or index of a computed value (`fromJSON(x).a`).
    Index(Box<Expr>, Vec<Seg>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Seg {
    Name(String),
    Index(Box<Expr>),
    Star,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Parses an expression body (`github.ref == 'refs/heads/main'`).
/// Malformed text is an error: its callers fail closed.
pub fn parse(body: &str) -> Result<Expr, String> {
    let tokens = tokenize(body)?;
    let mut parser = ExprParser {
        tokens: &tokens,
        at: 0,
        depth: 0,
    };
    let expr = parser.or()?;
    if parser.at != tokens.len() {
        return Err(format!("unexpected `{:?}` in `{body}`", tokens[parser.at]));
    }
    Ok(expr)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Dot,
    Star,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Not,
    And,
    Or,
    Cmp(CompareOp),
}

fn tokenize(body: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '\'' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("unterminated string in `{body}`")),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            s.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(c) => {
                            s.push(*c);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(s));
            }
            '.' if chars.get(i + 1).is_some_and(char::is_ascii_digit)
                && !matches!(
                    out.last(),
                    Some(Tok::Ident(_) | Tok::RBracket | Tok::RParen | Tok::Star)
                ) =>
            {
                let (n, len) = number(&chars[i..]);
                out.push(Tok::Num(n));
                i += len;
            }
            '.' => {
                out.push(Tok::Dot);
                i += 1;
            }
            '*' => {
                out.push(Tok::Star);
                i += 1;
            }
            '[' => {
                out.push(Tok::LBracket);
                i += 1;
            }
            ']' => {
                out.push(Tok::RBracket);
                i += 1;
            }
            '(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::Cmp(CompareOp::Ne));
                i += 2;
            }
            '!' => {
                out.push(Tok::Not);
                i += 1;
            }
            '=' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::Cmp(CompareOp::Eq));
                i += 2;
            }
            '<' | '>' => {
                let eq = chars.get(i + 1) == Some(&'=');
                out.push(Tok::Cmp(match (c, eq) {
                    ('<', true) => CompareOp::Le,
                    ('<', false) => CompareOp::Lt,
                    ('>', true) => CompareOp::Ge,
                    _ => CompareOp::Gt,
                }));
                i += if eq { 2 } else { 1 };
            }
            '&' if chars.get(i + 1) == Some(&'&') => {
                out.push(Tok::And);
                i += 2;
            }
            '|' if chars.get(i + 1) == Some(&'|') => {
                out.push(Tok::Or);
                i += 2;
            }
            _ if c.is_ascii_digit()
                || c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit) =>
            {
                let (n, len) = number(&chars[i..]);
                out.push(Tok::Num(n));
                i += len;
            }
            _ if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '-')
                {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            _ => return Err(format!("unexpected `{c}` in `{body}`")),
        }
    }
    Ok(out)
}

fn number(chars: &[char]) -> (f64, usize) {
    let mut len = 0;
    while len < chars.len()
        && (chars[len].is_ascii_alphanumeric()
            || matches!(chars[len], '.' | '-' | '+')
                && (len == 0 || matches!(chars[len], '.') || matches!(chars[len - 1], 'e' | 'E')))
    {
        len += 1;
    }
    let text: String = chars[..len].iter().collect();
    let n = if let Some(hex) = text.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).map_or(f64::NAN, |v| v as f64)
    } else {
        text.parse().unwrap_or(f64::NAN)
    };
    (n, len.max(1))
}

struct ExprParser<'t> {
    tokens: &'t [Tok],
    at: usize,
    depth: usize,
}

impl ExprParser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == Some(tok) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > 128 {
            return Err("the expression nests too deeply".to_owned());
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, String> {
        self.deeper()?;
        let mut left = self.and()?;
        while self.eat(&Tok::Or) {
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.equality()?;
        while self.eat(&Tok::And) {
            let right = self.equality()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Expr, String> {
        let mut left = self.comparison()?;
        while let Some(Tok::Cmp(op @ (CompareOp::Eq | CompareOp::Ne))) = self.peek().cloned() {
            self.at += 1;
            let right = self.comparison()?;
            left = Expr::Compare(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some(Tok::Cmp(
            op @ (CompareOp::Lt | CompareOp::Le | CompareOp::Gt | CompareOp::Ge),
        )) = self.peek().cloned()
        {
            self.at += 1;
            let right = self.unary()?;
            left = Expr::Compare(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(&Tok::Not) {
            self.deeper()?;
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner)));
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, String> {
        let primary = self.primary()?;
        let segs = self.segments()?;
        if segs.is_empty() {
            return Ok(primary);
        }
        Ok(match primary {
            Expr::Path(root, mut rest) => {
                rest.extend(segs);
                Expr::Path(root, rest)
            }
            other => Expr::Index(Box::new(other), segs),
        })
    }

    fn segments(&mut self) -> Result<Vec<Seg>, String> {
        let mut segs = Vec::new();
        loop {
            if self.eat(&Tok::Dot) {
                match self.peek().cloned() {
                    Some(Tok::Ident(name)) => {
                        self.at += 1;
                        segs.push(Seg::Name(name));
                    }
                    Some(Tok::Star) => {
                        self.at += 1;
                        segs.push(Seg::Star);
                    }
                    // `a.0` is not GitHub syntax, but be lenient.
                    Some(Tok::Num(n)) => {
                        self.at += 1;
                        segs.push(Seg::Name(number_text(n)));
                    }
                    other => return Err(format!("expected a property name, found {other:?}")),
                }
            } else if self.eat(&Tok::LBracket) {
                if self.eat(&Tok::Star) {
                    segs.push(Seg::Star);
                } else {
                    let index = self.or()?;
                    segs.push(Seg::Index(Box::new(index)));
                }
                if !self.eat(&Tok::RBracket) {
                    return Err("expected `]`".to_owned());
                }
            } else {
                return Ok(segs);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.peek().cloned() {
            Some(Tok::Str(s)) => {
                self.at += 1;
                Ok(Expr::Str(s))
            }
            Some(Tok::Num(n)) => {
                self.at += 1;
                Ok(Expr::Num(n))
            }
            Some(Tok::LParen) => {
                self.at += 1;
                let inner = self.or()?;
                if !self.eat(&Tok::RParen) {
                    return Err("expected `)`".to_owned());
                }
                Ok(inner)
            }
            Some(Tok::Ident(name)) => {
                self.at += 1;
                match name.as_str() {
                    "true" => return Ok(Expr::Bool(true)),
                    "false" => return Ok(Expr::Bool(false)),
                    "null" => return Ok(Expr::Null),
                    "NaN" => return Ok(Expr::Num(f64::NAN)),
                    "Infinity" => return Ok(Expr::Num(f64::INFINITY)),
                    _ => {}
                }
                if self.eat(&Tok::LParen) {
                    let mut args = Vec::new();
                    if !self.eat(&Tok::RParen) {
                        loop {
                            args.push(self.or()?);
                            if self.eat(&Tok::RParen) {
                                break;
                            }
                            if !self.eat(&Tok::Comma) {
                                return Err(format!("expected `,` or `)` in {name}(…)"));
                            }
                        }
                    }
                    return Ok(Expr::Call(name.to_ascii_lowercase(), args));
                }
                Ok(Expr::Path(name, Vec::new()))
            }
            other => Err(format!("expected a value, found {other:?}")),
        }
    }
}

/// What an expression can read: each context's values, and the status
/// functions' answers.
pub trait Scope {
    /// The value of a context path (`github.event_name`, `env.X`,
    /// `needs.build.outputs.sha`); `*` stands for every element.
    fn lookup(&self, path: &[String]) -> Val;

    /// `success()`, `always()`, `failure()`, `cancelled()`.
    fn status(&self, function: &str) -> Val {
        match function {
            "always" => Val::Bool(true),
            "cancelled" => Val::Bool(false),
            _ => Val::Unknown(Taint::NONE),
        }
    }
}

/// Evaluates `expr` in `scope`.
pub fn eval(expr: &Expr, scope: &dyn Scope) -> Val {
    Evaluator { scope, depth: 0 }.eval(expr)
}

/// Evaluates an expression body; a body that does not parse is an unknown
/// value carrying every taint its context names could (fail closed).
pub fn eval_body(body: &str, scope: &dyn Scope) -> Val {
    match parse(body) {
        Ok(expr) => eval(&expr, scope),
        Err(_) => Val::Unknown(Taint::UNSEEN),
    }
}

/// A `run:`, `with:` or `ref:` value: literal text with `${{ … }}` inside.
/// Its value is the text when every expression's value is known.
pub fn eval_template(text: &str, scope: &dyn Scope) -> Val {
    let mut pieces: Vec<Val> = Vec::new();
    let mut rest = text;
    let mut literal_only = true;
    // A ref under `refs/pull/` (`pull/N/head`) names a pull request's code.
    let literal = |text: &str| {
        let taint = if text.contains("pull/") {
            Taint::PR_REF
        } else {
            Taint::NONE
        };
        Val::Str(text.to_owned(), taint)
    };
    while let Some(start) = rest.find("${{") {
        literal_only = false;
        if start > 0 {
            pieces.push(literal(&rest[..start]));
        }
        let after = &rest[start + 3..];
        let Some(end) = after.find("}}") else {
            pieces.push(Val::Unknown(Taint::UNSEEN));
            rest = "";
            break;
        };
        pieces.push(eval_body(after[..end].trim(), scope));
        rest = &after[end + 2..];
    }
    if literal_only {
        return literal(text);
    }
    if !rest.is_empty() {
        pieces.push(literal(rest));
    }
    // A whole-value expression keeps its type (`${{ matrix.os }}` may be a list).
    if pieces.len() == 1 {
        return pieces.pop().unwrap_or(Val::Null);
    }
    concat(&pieces)
}

/// The concatenation of values as text.
pub fn concat(pieces: &[Val]) -> Val {
    let taint = pieces.iter().fold(Taint::NONE, |t, v| t | v.taint());
    let mut text = String::new();
    for piece in pieces {
        match piece.known_texts().as_deref() {
            Some([one]) => text.push_str(one),
            _ => return Val::Unknown(taint),
        }
    }
    Val::Str(text, taint)
}

struct Evaluator<'s> {
    scope: &'s dyn Scope,
    depth: usize,
}

impl Evaluator<'_> {
    fn eval(&mut self, expr: &Expr) -> Val {
        self.depth += 1;
        let v = if self.depth > 256 {
            Val::Unknown(Taint::UNSEEN)
        } else {
            self.eval_inner(expr)
        };
        self.depth -= 1;
        v
    }

    fn eval_inner(&mut self, expr: &Expr) -> Val {
        match expr {
            Expr::Null => Val::Null,
            Expr::Bool(b) => Val::Bool(*b),
            Expr::Num(n) => Val::Num(*n),
            Expr::Str(s) => Val::str(s.clone()),
            Expr::Path(root, segs) => {
                let mut path = vec![root.clone()];
                for seg in segs {
                    match seg {
                        Seg::Name(n) => path.push(n.clone()),
                        Seg::Star => path.push("*".to_owned()),
                        Seg::Index(index) => {
                            let index = self.eval(index);
                            match index.known_texts().as_deref() {
                                Some([one]) => path.push(one.clone()),
                                // An index not known: any property, with the index's taint.
                                _ => {
                                    let taint = index.taint();
                                    return self.lookup_any(&path).tainted(taint);
                                }
                            }
                        }
                    }
                }
                self.scope.lookup(&path)
            }
            Expr::Index(base, segs) => {
                let base = self.eval(base);
                let mut v = base;
                for seg in segs {
                    v = match seg {
                        Seg::Name(n) => property(&v, n),
                        Seg::Star => v,
                        Seg::Index(index) => {
                            let index = self.eval(index);
                            match index.known_texts().as_deref() {
                                Some([one]) => property(&v, one),
                                _ => Val::Unknown(v.taint() | index.taint()),
                            }
                        }
                    };
                }
                v
            }
            Expr::Not(inner) => match self.eval(inner).truthy() {
                Tri::True => Val::Bool(false),
                Tri::False => Val::Bool(true),
                Tri::Maybe => Val::Any(vec![Val::Bool(true), Val::Bool(false)]),
            },
            Expr::And(a, b) => {
                let left = self.eval(a);
                match left.truthy() {
                    Tri::False => left,
                    Tri::True => self.eval(b),
                    Tri::Maybe => {
                        let right = self.eval(b);
                        Val::any(vec![falsy_part(&left), right])
                    }
                }
            }
            Expr::Or(a, b) => {
                let left = self.eval(a);
                match left.truthy() {
                    Tri::True => left,
                    Tri::False => self.eval(b),
                    Tri::Maybe => {
                        let right = self.eval(b);
                        Val::any(vec![truthy_part(&left), right])
                    }
                }
            }
            Expr::Compare(op, a, b) => {
                let (a, b) = (self.eval(a), self.eval(b));
                tri_val(compare(*op, &a, &b))
            }
            Expr::Call(name, args) => self.call(name, args),
        }
    }

    /// Any property below `path` (an index that is not known).
    fn lookup_any(&self, path: &[String]) -> Val {
        let mut star = path.to_vec();
        star.push("*".to_owned());
        match self.scope.lookup(&star) {
            Val::List(items) => Val::any(items),
            other => other,
        }
    }

    fn call(&mut self, name: &str, args: &[Expr]) -> Val {
        let values: Vec<Val> = match name {
            // Status functions take no arguments worth evaluating.
            "success" | "always" | "failure" | "cancelled" => {
                return self.scope.status(name);
            }
            _ => args.iter().map(|a| self.eval(a)).collect(),
        };
        let taint = values.iter().fold(Taint::NONE, |t, v| t | v.taint());
        match (name, values.as_slice()) {
            ("contains", [hay, needle]) => tri_val(contains(hay, needle)),
            ("startswith", [s, p]) => tri_val(string_test(s, p, |s, p| s.starts_with(p))),
            ("endswith", [s, p]) => tri_val(string_test(s, p, |s, p| s.ends_with(p))),
            ("format", [format, rest @ ..]) => format_fn(format, rest).tainted(taint),
            ("join", [list, ..]) => match list {
                Val::List(items) => {
                    let sep = values
                        .get(1)
                        .and_then(Val::text)
                        .unwrap_or_else(|| ",".to_owned());
                    concat_with(items, &sep)
                }
                other => other.clone(),
            },
            ("tojson", [v]) => match v.text() {
                Some(t) => Val::Str(serde_json::Value::String(t).to_string(), v.taint()),
                None => Val::Unknown(taint),
            },
            ("fromjson", [v]) => match v.known_texts().as_deref() {
                Some([text]) => match serde_json::from_str::<serde_json::Value>(text) {
                    Ok(json) => from_json(&json, v.taint()),
                    Err(_) => Val::Unknown(taint),
                },
                _ => Val::Unknown(taint),
            },
            // A digest of files: text no one chose.
            ("hashfiles", _) => Val::Unknown(Taint::NONE),
            _ => Val::Unknown(taint),
        }
    }
}

/// The value's alternatives that may be truthy (for `a || b` when `a` may be either).
fn truthy_part(v: &Val) -> Val {
    Val::any(
        v.alternatives()
            .into_iter()
            .filter(|a| a.truthy().may_be_true())
            .cloned()
            .collect(),
    )
}

/// The value's alternatives that may be falsy.
fn falsy_part(v: &Val) -> Val {
    Val::any(
        v.alternatives()
            .into_iter()
            .filter(|a| a.truthy() != Tri::True)
            .cloned()
            .collect(),
    )
}

fn tri_val(t: Tri) -> Val {
    match t {
        Tri::True => Val::Bool(true),
        Tri::False => Val::Bool(false),
        Tri::Maybe => Val::Any(vec![Val::Bool(true), Val::Bool(false)]),
    }
}

/// A property of a computed value.
fn property(v: &Val, name: &str) -> Val {
    match v {
        Val::List(items) => match name.parse::<usize>() {
            Ok(i) => items.get(i).cloned().unwrap_or(Val::Null),
            Err(_) => Val::List(items.iter().map(|i| property(i, name)).collect()),
        },
        Val::Any(items) => Val::any(items.iter().map(|i| property(i, name)).collect()),
        Val::Unknown(t) | Val::Obj(t) => Val::Unknown(*t),
        Val::Str(_, t) => Val::Unknown(*t),
        _ => Val::Null,
    }
}

fn from_json(json: &serde_json::Value, taint: Taint) -> Val {
    match json {
        serde_json::Value::Null => Val::Null,
        serde_json::Value::Bool(b) => Val::Bool(*b),
        serde_json::Value::Number(n) => Val::Num(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Val::Str(s.clone(), taint),
        serde_json::Value::Array(items) => {
            Val::List(items.iter().map(|i| from_json(i, taint)).collect())
        }
        // Objects are read by property through the scope; as a value, unknown.
        serde_json::Value::Object(_) => Val::Unknown(taint),
    }
}

fn concat_with(items: &[Val], sep: &str) -> Val {
    let mut pieces = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            pieces.push(Val::str(sep));
        }
        pieces.push(item.clone());
    }
    concat(&pieces)
}

fn format_fn(format: &Val, args: &[Val]) -> Val {
    let Some(texts) = format.known_texts() else {
        return Val::Unknown(format.taint());
    };
    let mut results = Vec::new();
    for text in texts {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '{' if chars.get(i + 1) == Some(&'{') => {
                    literal.push('{');
                    i += 2;
                }
                '}' if chars.get(i + 1) == Some(&'}') => {
                    literal.push('}');
                    i += 2;
                }
                '{' => {
                    let close = chars[i..].iter().position(|c| *c == '}').map(|p| i + p);
                    let index: Option<usize> =
                        close.and_then(|c| chars[i + 1..c].iter().collect::<String>().parse().ok());
                    match (close, index) {
                        (Some(c), Some(n)) => {
                            pieces.push(Val::str(std::mem::take(&mut literal)));
                            pieces.push(args.get(n).cloned().unwrap_or(Val::Null));
                            i = c + 1;
                        }
                        _ => {
                            literal.push('{');
                            i += 1;
                        }
                    }
                }
                c => {
                    literal.push(c);
                    i += 1;
                }
            }
        }
        pieces.push(Val::str(literal));
        results.push(concat(&pieces));
    }
    Val::any(results)
}

fn contains(hay: &Val, needle: &Val) -> Tri {
    let mut result: Option<Tri> = None;
    let mut join = |t: Tri| {
        result = Some(match (result, t) {
            (None, t) => t,
            (Some(a), b) if a == b => a,
            _ => Tri::Maybe,
        });
    };
    for h in hay.alternatives() {
        for n in needle.alternatives() {
            join(match h {
                Val::List(items) => {
                    let mut any_maybe = false;
                    let mut found = false;
                    for item in items {
                        match loose_eq(item, n) {
                            Tri::True => found = true,
                            Tri::Maybe => any_maybe = true,
                            Tri::False => {}
                        }
                    }
                    if found {
                        Tri::True
                    } else if any_maybe {
                        Tri::Maybe
                    } else {
                        Tri::False
                    }
                }
                _ => string_test(h, n, |s, p| s.contains(p)),
            });
        }
    }
    result.unwrap_or(Tri::Maybe)
}

fn string_test(s: &Val, p: &Val, test: impl Fn(&str, &str) -> bool) -> Tri {
    let mut result: Option<Tri> = None;
    for a in s.alternatives() {
        for b in p.alternatives() {
            let t = match (a.text(), b.text()) {
                (Some(x), Some(y)) => bool_tri(test(&x.to_lowercase(), &y.to_lowercase())),
                _ => Tri::Maybe,
            };
            result = Some(match (result, t) {
                (None, t) => t,
                (Some(x), y) if x == y => x,
                _ => Tri::Maybe,
            });
        }
    }
    result.unwrap_or(Tri::Maybe)
}

fn compare(op: CompareOp, a: &Val, b: &Val) -> Tri {
    let mut result: Option<Tri> = None;
    for x in a.alternatives() {
        for y in b.alternatives() {
            let t = match op {
                CompareOp::Eq => loose_eq(x, y),
                CompareOp::Ne => loose_eq(x, y).not(),
                _ => match (as_number(x), as_number(y)) {
                    (Some(m), Some(n)) => bool_tri(match op {
                        CompareOp::Lt => m < n,
                        CompareOp::Le => m <= n,
                        CompareOp::Gt => m > n,
                        _ => m >= n,
                    }),
                    _ => Tri::Maybe,
                },
            };
            result = Some(match (result, t) {
                (None, t) => t,
                (Some(p), q) if p == q => p,
                _ => Tri::Maybe,
            });
        }
    }
    result.unwrap_or(Tri::Maybe)
}

/// GitHub's `==`: strings compare case-insensitively; mismatched types
/// compare as numbers; identities compare by identity.
fn loose_eq(a: &Val, b: &Val) -> Tri {
    match (a, b) {
        (Val::Unknown(_), _) | (_, Val::Unknown(_)) => Tri::Maybe,
        (Val::Obj(_), Val::Obj(_)) => Tri::Maybe,
        (Val::Obj(_), _) | (_, Val::Obj(_)) => Tri::False,
        (Val::Any(_), _) | (_, Val::Any(_)) => compare(CompareOp::Eq, a, b),
        (Val::Sym(x) | Val::Named(x, _), Val::Sym(y) | Val::Named(y, _)) => bool_tri(x == y),
        (Val::Named(_, names), Val::Str(lit, _)) | (Val::Str(lit, _), Val::Named(_, names)) => {
            names.matches(lit)
        }
        // An identity against a literal: the literal may name it.
        (Val::Sym(_) | Val::Named(..), _) | (_, Val::Sym(_) | Val::Named(..)) => Tri::Maybe,
        (Val::Str(x, _), Val::Str(y, _)) => bool_tri(x.to_lowercase() == y.to_lowercase()),
        (Val::Null, Val::Null) => Tri::True,
        (Val::Bool(x), Val::Bool(y)) => bool_tri(x == y),
        (Val::List(_), _) | (_, Val::List(_)) => Tri::False,
        _ => match (as_number(a), as_number(b)) {
            (Some(m), Some(n)) => bool_tri(m == n),
            _ => Tri::False,
        },
    }
}

fn as_number(v: &Val) -> Option<f64> {
    match v {
        Val::Null => Some(0.0),
        Val::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Val::Num(n) => Some(*n),
        Val::Str(s, _) => {
            let t = s.trim();
            if t.is_empty() {
                Some(0.0)
            } else if let Some(hex) = t.strip_prefix("0x") {
                i64::from_str_radix(hex, 16).ok().map(|v| v as f64)
            } else {
                Some(t.parse().unwrap_or(f64::NAN))
            }
        }
        _ => None,
    }
}

/// A condition (`if:` value, with or without `${{ }}`) in `scope`.
pub fn condition(text: &str, scope: &dyn Scope) -> Tri {
    let body = text.trim();
    let body = match body.strip_prefix("${{").and_then(|b| b.strip_suffix("}}")) {
        Some(inner) if !inner.contains("${{") => inner.trim().to_owned(),
        // Text around expressions: GitHub evaluates the whole as a string.
        _ if body.contains("${{") => return eval_template(body, scope).truthy(),
        _ => body.to_owned(),
    };
    if body.is_empty() {
        return Tri::True;
    }
    match parse(&body) {
        Ok(expr) => eval(&expr, scope).truthy(),
        Err(_) => Tri::Maybe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Map(BTreeMap<String, Val>);

    impl Scope for Map {
        fn lookup(&self, path: &[String]) -> Val {
            self.0.get(&path.join(".")).cloned().unwrap_or(Val::Null)
        }
    }

    fn scope(entries: &[(&str, Val)]) -> Map {
        Map(entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect())
    }

    #[test]
    fn parses_githubs_grammar() {
        for ok in [
            "github.event_name == 'push' && !contains(github.event.pull_request.labels.*.name, 'x')",
            "matrix['os'] || 'ubuntu-latest'",
            "fromJSON('[\"a\",\"b\"]')[0]",
            "(a || b) && c",
            "steps.x.outputs.cache-hit != 'true'",
            "1 < 2.5 && -3 >= -4 && 0xff == 255",
            "format('{0}-{{x}}', github.sha)",
            "inputs.n > 0",
        ] {
            parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["a ==", "'open", "a.(b)", "f(a,", "a ? b : c"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        // Deep nesting is an error, not a stack overflow.
        let deep = "(".repeat(10_000) + "a" + &")".repeat(10_000);
        assert!(parse(&deep).is_err());
        let deep = "!".repeat(10_000) + "a";
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn and_or_fold_as_github_does() {
        let pr = Val::Unknown(Taint::PR_REF);
        let s = scope(&[
            ("github.sha", Val::str("abc")),
            ("github.event.pull_request.head.sha", pr.clone()),
            ("github.event_name", Val::str("workflow_dispatch")),
        ]);
        // The PR's head under a dispatch is empty: the sha is the fallback.
        let v = eval_body("github.event.pull_request.head.sha || github.sha", &s);
        let s2 = scope(&[
            ("github.sha", Val::str("abc")),
            ("github.event.pull_request.head.sha", Val::Null),
        ]);
        let v2 = eval_body("github.event.pull_request.head.sha || github.sha", &s2);
        assert!(v.taint().has(Taint::PR_REF));
        assert_eq!(v2.text().as_deref(), Some("abc"));
        // `cond && 'a' || 'b'`
        let v = eval_body("github.event_name == 'push' && 'x' || 'y'", &s);
        assert_eq!(v.text().as_deref(), Some("y"));
        let v = eval_body("github.event_name == 'workflow_dispatch' && 'x' || 'y'", &s);
        assert_eq!(v.text().as_deref(), Some("x"));
        // Case-insensitive string equality, number coercion.
        assert_eq!(
            condition("github.event_name == 'WORKFLOW_DISPATCH'", &s),
            Tri::True
        );
        assert_eq!(condition("'' == 0 && null == 0", &s), Tri::True);
        assert_eq!(
            condition("${{ github.event_name != 'push' }}", &s),
            Tri::True
        );
    }

    #[test]
    fn unknowns_keep_their_taint_through_functions() {
        let s = scope(&[
            (
                "github.event.pull_request.title",
                Val::Unknown(Taint::PR_TEXT),
            ),
            ("inputs.pr", Val::Unknown(Taint::MAINTAINER)),
        ]);
        let v = eval_template("refs/pull/${{ inputs.pr }}/head", &s);
        assert!(v.taint().has(Taint::MAINTAINER));
        let v = eval_body("format('pr-{0}', github.event.pull_request.title)", &s);
        assert!(v.taint().has(Taint::PR_TEXT));
        assert_eq!(
            condition("contains(fromJSON('[\"OWNER\",\"MEMBER\"]'), 'member')", &s),
            Tri::True
        );
        assert_eq!(
            condition("startsWith(github.event.pull_request.title, '[x]')", &s),
            Tri::Maybe
        );
        assert_eq!(eval_template("plain", &s).text().as_deref(), Some("plain"));
    }

    #[test]
    fn identities_compare_by_identity() {
        let s = scope(&[
            ("github.repository", Val::Sym("repo:self")),
            (
                "github.event.pull_request.head.repo.full_name",
                Val::Sym("repo:fork"),
            ),
        ]);
        assert_eq!(
            condition(
                "github.event.pull_request.head.repo.full_name == github.repository",
                &s
            ),
            Tri::False
        );
        assert_eq!(condition("github.repository == 'o/r'", &s), Tri::Maybe);
    }
}
