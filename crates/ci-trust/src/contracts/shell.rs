//! The one reader of `run:` scripts: what the shell (bash, as the runner
//! starts it) would see as commands, words, quoting, comments,
//! here-documents, pipelines, variable references, command substitutions,
//! assignments and redirections (`>> "$GITHUB_OUTPUT"`, `>> $GITHUB_ENV`).
//!
//! Every rule and recogniser that reads a script reads it through
//! [`Script`]; none splits words itself. `${{ … }}` expressions, which GitHub
//! substitutes before the shell runs, are kept as [`Part::Expression`].
//!
//! The reader is total: any text parses (an unbalanced quote runs to the
//! end, an unknown construct is read as words), nothing panics, and
//! nesting deeper than [`MAX_DEPTH`] is read as plain words, so an input
//! cannot overflow the stack. Offsets are byte offsets into the script and
//! always fall on character boundaries.
//!
//! Owns: the shell's grammar as far as the contracts need it. Must not:
//! give commands a meaning (what runs code, what fetches a pull request:
//! the roles and rules decide that from these commands).

use std::ops::Range;

/// How deeply groups, compound commands and substitutions may nest before
/// the rest is read as plain words.
pub const MAX_DEPTH: usize = 48;

/// A parsed script.
#[derive(Debug, Default, Clone)]
pub struct Script {
    /// Every simple command, in the order the shell meets them; a command
    /// inside a substitution comes before the command whose word holds it.
    pub commands: Vec<Command>,
    /// Every `case` of the script's own text (not those inside a
    /// substitution), in the order the shell meets them.
    pub cases: Vec<Case>,
    /// Every `if` of the script's own text (not those inside a
    /// substitution), in the order the shell meets them.
    pub ifs: Vec<If>,
}

/// `if LIST; then LIST; [elif …;] [else LIST;] fi`, as command ranges.
#[derive(Debug, Clone, Default)]
pub struct If {
    /// Byte offset of the `if` word.
    pub start: usize,
    /// The condition's commands, as indices into [`Script::commands`].
    pub condition: Range<usize>,
    pub then_branch: Range<usize>,
    /// It has an `elif` (whose commands are in neither branch).
    pub elif: bool,
    pub else_branch: Option<Range<usize>>,
    /// The `else` branch's commands that run whenever it does.
    pub else_unconditional: Vec<usize>,
    /// Runs wherever the script gets to it (as [`Case::top_level`]).
    pub top_level: bool,
    /// Ends with `fi` (not cut off by the text's end).
    pub closed: bool,
}

/// `case WORD in PATTERN) LIST ;; … esac`.
#[derive(Debug, Clone, Default)]
pub struct Case {
    /// Byte offset of the `case` word.
    pub start: usize,
    pub subject: Word,
    pub arms: Vec<CaseArm>,
    /// Runs wherever the script gets to it: at the script's own level,
    /// not inside another compound command or behind `&&` or `||`.
    pub top_level: bool,
}

/// One arm of a [`Case`].
#[derive(Debug, Clone, Default)]
pub struct CaseArm {
    /// Its patterns (`triage`, `write`, `*`), as words.
    pub patterns: Vec<Word>,
    /// Its commands, as indices into [`Script::commands`].
    pub commands: Range<usize>,
    /// Those of them that run whenever the arm does: not behind `&&` or
    /// `||`, nor inside an `if`, a loop, a nested `case` or a function.
    pub unconditional: Vec<usize>,
    /// What ends it: `;;`, `;&` or `;;&` (both go on to the next arm's
    /// commands or patterns), `esac`, or nothing (the text ended).
    pub terminator: String,
}

/// One simple command: `NAME=value … word … redirections`.
#[derive(Debug, Clone, Default)]
pub struct Command {
    /// Byte range of the command in the script.
    pub span: Range<usize>,
    /// The assignments before the command name (`PYTHONPATH=pr python x`),
    /// or the whole command (`key=value`).
    pub assignments: Vec<Assignment>,
    /// The command name and its arguments, as the shell splits them.
    pub words: Vec<Word>,
    /// Its own redirections and those of the groups and compound commands
    /// around it (`{ echo a; echo b; } >> "$GITHUB_OUTPUT"`).
    pub redirects: Vec<Redirect>,
    /// The pipeline it is part of (an id shared by its members).
    pub pipeline: usize,
    /// Its place in that pipeline (0: reads no pipe).
    pub pipe_position: usize,
    /// How many members the pipeline has.
    pub pipe_len: usize,
    /// Inside a command substitution (`$(…)`, backquotes, `<(…)`): its
    /// output becomes a word of another command.
    pub substituted: bool,
    /// Part of a function body (run only where the function is called).
    pub in_function: Option<String>,
    /// Runs only on some paths: inside `if`, a loop, `case`, a function, or
    /// after `&&`/`||`.
    pub conditional: bool,
    /// Piped with `|&`: its standard error goes down the pipe too.
    pub pipes_stderr: bool,
    /// Runs in a subshell or in the background (`( … )`, `… &`): what it
    /// assigns does not reach the script's later commands, and its `exit`
    /// ends only that subshell.
    pub subshell: bool,
    /// [`Command::program_index`] and the program's file name, worked out once.
    program_at: Option<usize>,
    program_name: Option<String>,
}

/// `NAME=value` (also `export NAME=value`, `local NAME=value`, a `for NAME
/// in …` loop variable, `read NAME`).
#[derive(Debug, Clone)]
pub struct Assignment {
    pub name: String,
    pub value: Word,
}

/// A word: its span in the script and its parts after quote removal.
#[derive(Debug, Clone, Default)]
pub struct Word {
    pub span: Range<usize>,
    pub parts: Vec<Part>,
}

/// A piece of a word.
#[derive(Debug, Clone)]
pub enum Part {
    /// Text, quotes and escapes removed.
    Literal { text: String, quoted: bool },
    /// `$NAME`, `${NAME}`, `${NAME:-…}` (its default is read as further
    /// parts); `quoted` inside double quotes, where it is not split into
    /// words or globbed. `${!NAME}` (indirect) is named `!NAME`.
    Variable { name: String, quoted: bool },
    /// `$(…)`, backquotes, `<(…)`, `>(…)`: the commands (indices into
    /// [`Script::commands`]) whose output this part is.
    Substitution { commands: Range<usize> },
    /// `${{ … }}`, substituted by GitHub before the shell runs: its body.
    Expression(String),
    /// `$(( … ))`.
    Arithmetic(String),
}

/// A redirection: `[fd]OP target`.
#[derive(Debug, Clone)]
pub struct Redirect {
    pub fd: Option<u32>,
    pub op: RedirectOp,
    /// The file (or descriptor, or here-document delimiter).
    pub target: Word,
    /// A here-document's body.
    pub heredoc: Option<Heredoc>,
    /// `&>`, `&>>`: standard error goes there too.
    pub stderr_too: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectOp {
    /// `<`
    Read,
    /// `>`, `>|`, `&>`
    Write,
    /// `>>`, `&>>`
    Append,
    /// `<<`, `<<-`
    HereDoc,
    /// `<<<`
    HereString,
    /// `>&`, `<&`
    Duplicate,
    /// `<>`
    ReadWrite,
}

/// A here-document body. When its delimiter was not quoted the shell
/// expands variables and substitutions in it: `parts` holds them.
#[derive(Debug, Clone, Default)]
pub struct Heredoc {
    pub body: Range<usize>,
    pub parts: Vec<Part>,
}

impl Word {
    /// The word's text when it has no expansion (`None` for `$X`, `$(…)`, `${{ … }}`).
    pub fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal { text, .. } => out.push_str(text),
                _ => return None,
            }
        }
        Some(out)
    }

    /// The word with quotes removed and every expansion written as the
    /// shell would see it before expanding (`$NAME`, `$(…)`, `${{ body }}`):
    /// for comparisons and messages.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal { text, .. } => out.push_str(text),
                Part::Variable { name, .. } => {
                    out.push('$');
                    out.push_str(name);
                }
                Part::Substitution { .. } => out.push_str("$(…)"),
                Part::Expression(body) => {
                    out.push_str("${{ ");
                    out.push_str(body);
                    out.push_str(" }}");
                }
                Part::Arithmetic(text) => {
                    out.push_str("$((");
                    out.push_str(text);
                    out.push_str("))");
                }
            }
        }
        out
    }

    /// The variables the word expands outside double quotes, where the
    /// shell splits their values into words and globs them.
    pub fn unquoted_variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Variable {
                name,
                quoted: false,
            } => Some(name.as_str()),
            _ => None,
        })
    }

    /// The variables the word expands.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Variable { name, .. } => Some(name.as_str()),
            _ => None,
        })
    }

    /// The commands of the substitutions in the word.
    pub fn substitutions(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Substitution { commands, .. } => Some(commands.clone()),
            _ => None,
        })
    }

    /// True when the word is exactly one expansion of `name` (`$X`, `"${X}"`).
    pub fn is_variable(&self, name: &str) -> bool {
        let mut parts = self
            .parts
            .iter()
            .filter(|p| !matches!(p, Part::Literal { text, .. } if text.is_empty()));
        matches!(
            (parts.next(), parts.next()),
            (Some(Part::Variable { name: n, .. }), None) if n == name
        )
    }

    /// True when the word starts with `-` as written (an option).
    pub fn is_option(&self) -> bool {
        matches!(self.parts.first(), Some(Part::Literal { text, quoted: false }) if text.starts_with('-'))
    }
}

/// Programs that run the command given after them (after their options).
const WRAPPERS: &[&str] = &[
    "sudo", "exec", "env", "time", "nohup", "command", "builtin", "nice", "stdbuf", "timeout",
    "doas",
];

impl Command {
    /// The index in [`Command::words`] of the program that runs: the first
    /// word after wrappers such as `sudo -E`, `env X=1`, `exec` or
    /// `timeout 10`. `None` for a bare assignment.
    pub fn program_index(&self) -> Option<usize> {
        self.program_at
    }

    fn find_program(&self) -> Option<usize> {
        let mut i = 0;
        while i < self.words.len() {
            let word = &self.words[i];
            let name = word.literal();
            let base = name.as_deref().map(basename);
            match base {
                Some(w) if WRAPPERS.contains(&w) => {
                    i += 1;
                    // Options of the wrapper, `env`'s assignments, `timeout`'s duration.
                    while i < self.words.len() {
                        let next = &self.words[i];
                        let text = next.text();
                        let takes_value = matches!(w, "sudo" | "doas")
                            && matches!(text.as_str(), "-u" | "-g" | "-C" | "-D" | "-h")
                            || w == "env" && matches!(text.as_str(), "-u" | "-C" | "-S")
                            || w == "stdbuf" && text.len() == 2;
                        if next.is_option() {
                            i += if takes_value { 2 } else { 1 };
                        } else if w == "env" && is_assignment_text(&text)
                            || matches!(w, "timeout" | "nice")
                                && text.starts_with(|c: char| c.is_ascii_digit())
                        {
                            i += 1;
                        } else {
                            break;
                        }
                    }
                }
                _ => return Some(i),
            }
        }
        None
    }

    /// The program's word.
    pub fn program_word(&self) -> Option<&Word> {
        self.program_index().map(|i| &self.words[i])
    }

    /// The program that runs, as written (`./scripts/x.sh`, `cargo`, `"$DIR/run"`).
    pub fn program_text(&self) -> Option<String> {
        self.program_word().map(Word::text)
    }

    /// The program's file name (`/usr/bin/git` → `git`), when it is literal.
    pub fn program(&self) -> Option<String> {
        self.program_name.clone()
    }

    /// True when its standard error may reach anything but the job's log:
    /// `2>&1`, `2>file`, `&>file`, `|&` (a filter's error message quotes
    /// its input). `2>/dev/null` discards it.
    pub fn stderr_is_captured(&self) -> bool {
        self.pipes_stderr
            || self.redirects.iter().any(|r| {
                r.stderr_too
                    || r.fd == Some(2) && r.target.literal().as_deref() != Some("/dev/null")
            })
    }

    /// The program's file name, borrowed.
    pub fn program_is(&self, name: &str) -> bool {
        self.program_name.as_deref() == Some(name)
    }

    /// The words after the program.
    pub fn args(&self) -> &[Word] {
        match self.program_index() {
            Some(i) => &self.words[i + 1..],
            None => &[],
        }
    }

    /// The literal texts of the arguments (expansions written as `text()`).
    pub fn arg_texts(&self) -> Vec<String> {
        self.args().iter().map(Word::text).collect()
    }

    /// True when the command's output (or input, with `read`) goes to the
    /// file in the variable `name` (`>> "$GITHUB_OUTPUT"`, `> ${GITHUB_ENV}`),
    /// or the command is `tee [-a] "$NAME"`.
    pub fn writes_to(&self, name: &str) -> bool {
        let redirected = self.redirects.iter().any(|r| {
            matches!(r.op, RedirectOp::Write | RedirectOp::Append)
                && r.fd.is_none_or(|fd| fd == 1)
                && names_variable_file(&r.target, name)
        });
        redirected
            || self.program().as_deref() == Some("tee")
                && self.args().iter().any(|a| names_variable_file(a, name))
    }

    /// The here-document or here-string the command reads, if any.
    pub fn stdin_text(&self) -> Option<&Redirect> {
        self.redirects
            .iter()
            .find(|r| matches!(r.op, RedirectOp::HereDoc | RedirectOp::HereString))
    }
}

/// True when `word` names the file held by the variable `name`: `$NAME`,
/// `"${NAME}"`, or `${{ env.NAME }}`-free spellings of it.
fn names_variable_file(word: &Word, name: &str) -> bool {
    word.is_variable(name)
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `NAME=…` or `NAME+=…` with a valid shell name.
fn is_assignment_text(text: &str) -> bool {
    assignment_split(text).is_some()
}

fn assignment_split(text: &str) -> Option<(&str, &str)> {
    let eq = text.find('=')?;
    // `NAME+=value` appends: the same variable.
    let name = text[..eq].strip_suffix('+').unwrap_or(&text[..eq]);
    let valid = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then_some((name, &text[eq + 1..]))
}

impl Script {
    /// [`Script::parse`], remembered per text for this thread: the rules
    /// read the same scripts many times.
    pub fn cached(text: &str) -> std::rc::Rc<Script> {
        thread_local! {
            static PARSED: std::cell::RefCell<std::collections::HashMap<String, std::rc::Rc<Script>>> =
                std::cell::RefCell::new(std::collections::HashMap::new());
        }
        PARSED.with(|parsed| {
            if let Some(known) = parsed.borrow().get(text) {
                return known.clone();
            }
            let script = std::rc::Rc::new(Script::parse(text));
            parsed.borrow_mut().insert(text.to_owned(), script.clone());
            script
        })
    }

    /// Reads `text` as the shell would. Never fails.
    pub fn parse(text: &str) -> Script {
        let mut commands = Vec::new();
        let mut heredocs = Vec::new();
        let (cases, ifs) = {
            let mut parser = Parser::new(text, 0, text.len(), &mut commands, 0, &mut heredocs);
            parser.record_cases = true;
            parser.parse_all();
            (
                std::mem::take(&mut parser.cases),
                std::mem::take(&mut parser.ifs),
            )
        };
        fill_heredocs(text, &mut commands, &heredocs);
        for command in &mut commands {
            command.program_at = command.find_program();
            command.program_name = command
                .program_at
                .and_then(|i| command.words[i].literal())
                .map(|w| basename(&w).to_owned());
        }
        Script {
            commands,
            cases,
            ifs,
        }
    }

    /// The commands that run at the script's own level or in its groups,
    /// loops and conditionals, and those inside substitutions.
    pub fn commands(&self) -> impl Iterator<Item = &Command> {
        self.commands.iter()
    }

    /// Every assignment of the script: prefixes, bare assignments, the
    /// operands of `export`/`local`/`declare`/`readonly`/`typeset`, `for`
    /// loop variables and `read` targets (whose value is the command's
    /// here-string or here-document, else unknown and empty).
    pub fn assignments(&self) -> Vec<(&Command, Assignment)> {
        let mut out = Vec::new();
        for command in &self.commands {
            for a in &command.assignments {
                out.push((command, a.clone()));
            }
            let Some(program) = command.program() else {
                continue;
            };
            match program.as_str() {
                "export" | "local" | "declare" | "readonly" | "typeset" => {
                    for word in command.args() {
                        if word.is_option() {
                            continue;
                        }
                        if let Some(a) = split_assignment(word) {
                            out.push((command, a));
                        }
                    }
                }
                "read" | "mapfile" | "readarray" => {
                    let value = command
                        .stdin_text()
                        .map(|r| match &r.heredoc {
                            Some(doc) => Word {
                                span: doc.body.clone(),
                                parts: doc.parts.clone(),
                            },
                            None => r.target.clone(),
                        })
                        .unwrap_or_default();
                    for word in command.args().iter().filter(|w| !w.is_option()) {
                        if let Some(name) = word.literal().filter(|n| is_name(n)) {
                            out.push((
                                command,
                                Assignment {
                                    name,
                                    value: value.clone(),
                                },
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }
}

fn is_name(text: &str) -> bool {
    text.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `NAME=value` as an assignment, splitting the word's first literal part.
fn split_assignment(word: &Word) -> Option<Assignment> {
    let Some(Part::Literal {
        text,
        quoted: false,
    }) = word.parts.first()
    else {
        return None;
    };
    let (name, rest) = assignment_split(text)?;
    let mut parts = Vec::new();
    if !rest.is_empty() {
        parts.push(Part::Literal {
            text: rest.to_owned(),
            quoted: false,
        });
    }
    parts.extend(word.parts[1..].iter().cloned());
    Some(Assignment {
        name: name.to_owned(),
        value: Word {
            span: word.span.clone(),
            parts,
        },
    })
}

/// A here-document waiting for its body: where its redirect is, its
/// delimiter, whether tabs are stripped and whether it expands.
#[derive(Debug)]
struct PendingHeredoc {
    command: usize,
    redirect: usize,
    delimiter: String,
    strip_tabs: bool,
    expands: bool,
    /// Filled when the body is read.
    body: Option<Range<usize>>,
}

/// Puts each here-document's body into its redirect (and into the redirects
/// a group handed down to the commands inside it).
fn fill_heredocs(text: &str, commands: &mut [Command], heredocs: &[PendingHeredoc]) {
    for doc in heredocs {
        let Some(body) = doc.body.clone() else {
            continue;
        };
        let parts = if doc.expands {
            let mut sink = Vec::new();
            let mut nested = Vec::new();
            let mut lexer = Parser::new(
                text,
                body.start,
                body.end,
                &mut sink,
                MAX_DEPTH,
                &mut nested,
            );
            lexer.heredoc_parts(body.clone())
        } else {
            vec![Part::Literal {
                text: text.get(body.clone()).unwrap_or_default().to_owned(),
                quoted: true,
            }]
        };
        if let Some(redirect) = commands
            .get_mut(doc.command)
            .and_then(|c| c.redirects.get_mut(doc.redirect))
        {
            redirect.heredoc = Some(Heredoc { body, parts });
        }
    }
}

/// Tokens of the shell's grammar.
#[derive(Debug, Clone)]
enum Token {
    /// Shared, so that peeking at a token does not copy its word.
    Word(std::rc::Rc<Word>),
    /// `&&`, `||`, `|`, `|&`, `;`, `;;`, `&`, `(`, `)`.
    Op(&'static str),
    Redirect(Option<u32>, RedirectOp, bool, usize),
    Newline,
    End,
}

struct Parser<'t, 's> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    end: usize,
    sink: &'s mut Vec<Command>,
    depth: usize,
    heredocs: &'s mut Vec<PendingHeredoc>,
    /// Here-documents whose bodies start after the next newline.
    waiting: Vec<usize>,
    peeked: Option<Token>,
    next_pipeline: usize,
    /// Whether to record [`Case`]s (the script's own parser does; those of
    /// substitutions do not).
    record_cases: bool,
    cases: Vec<Case>,
    ifs: Vec<If>,
    /// How many `&&`/`||` tails are being read.
    and_or_tail: usize,
}

impl<'t, 's> Parser<'t, 's> {
    fn new(
        text: &'t str,
        start: usize,
        end: usize,
        sink: &'s mut Vec<Command>,
        depth: usize,
        heredocs: &'s mut Vec<PendingHeredoc>,
    ) -> Parser<'t, 's> {
        let base = sink.len() * 1000 + depth;
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: start,
            end: end.min(text.len()),
            sink,
            depth,
            heredocs,
            waiting: Vec::new(),
            peeked: None,
            next_pipeline: base * 1_000_003 % 1_000_000_007,
            record_cases: false,
            cases: Vec::new(),
            ifs: Vec::new(),
            and_or_tail: 0,
        }
    }

    fn parse_all(&mut self) {
        let mut guard = 0;
        loop {
            let before = self.pos;
            let stop = self.parse_list(&[], None);
            match self.peek() {
                Token::End => break,
                _ => {
                    // A stray terminator (`fi`, `)`, `done`): skip it.
                    self.next();
                }
            }
            let _ = stop;
            guard += 1;
            if self.pos == before && guard > 4 {
                break;
            }
        }
    }

    // ---- tokens -------------------------------------------------------

    fn peek(&mut self) -> Token {
        if self.peeked.is_none() {
            let token = self.lex();
            self.peeked = Some(token);
        }
        self.peeked.clone().unwrap_or(Token::End)
    }

    fn next(&mut self) -> Token {
        let token = self.peek();
        self.peeked = None;
        token
    }

    fn byte(&self, at: usize) -> Option<u8> {
        (at < self.end).then(|| self.bytes[at])
    }

    fn starts(&self, at: usize, s: &str) -> bool {
        at + s.len() <= self.end && &self.bytes[at..at + s.len()] == s.as_bytes()
    }

    fn lex(&mut self) -> Token {
        // Blanks, line continuations and comments.
        loop {
            match self.byte(self.pos) {
                Some(b' ' | b'\t' | b'\r') => self.pos += 1,
                Some(b'\\') if self.byte(self.pos + 1) == Some(b'\n') => self.pos += 2,
                Some(b'#') => {
                    while let Some(b) = self.byte(self.pos) {
                        if b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let start = self.pos;
        let Some(b) = self.byte(start) else {
            return Token::End;
        };
        if b == b'\n' {
            self.pos += 1;
            self.read_heredoc_bodies();
            return Token::Newline;
        }
        for op in ["&&", "||", "|&", ";;&", ";;", ";&", "|", ";", "&", ")"] {
            // `&>` and `&>>` are redirections.
            if op == "&" && self.starts(start, "&>") {
                continue;
            }
            if self.starts(start, op) {
                self.pos += op.len();
                return Token::Op(op);
            }
        }
        if b == b'(' {
            self.pos += 1;
            return Token::Op("(");
        }
        // An IO number directly before a redirection.
        let mut fd = None;
        let mut at = start;
        while self.byte(at).is_some_and(|b| b.is_ascii_digit()) {
            at += 1;
        }
        if at > start && matches!(self.byte(at), Some(b'<' | b'>')) {
            fd = self.text[start..at].parse().ok();
        } else {
            at = start;
        }
        if let Some((op, len, strip)) = self.redirect_at(at) {
            self.pos = at + len;
            return Token::Redirect(fd, op, strip, start);
        }
        Token::Word(std::rc::Rc::new(self.word()))
    }

    /// The redirection operator at `at` (process substitution excluded).
    fn redirect_at(&self, at: usize) -> Option<(RedirectOp, usize, bool)> {
        let table: &[(&str, RedirectOp, bool)] = &[
            ("&>>", RedirectOp::Append, false),
            ("&>", RedirectOp::Write, false),
            ("<<<", RedirectOp::HereString, false),
            ("<<-", RedirectOp::HereDoc, true),
            ("<<", RedirectOp::HereDoc, false),
            (">>", RedirectOp::Append, false),
            (">|", RedirectOp::Write, false),
            (">&", RedirectOp::Duplicate, false),
            ("<&", RedirectOp::Duplicate, false),
            ("<>", RedirectOp::ReadWrite, false),
            (">", RedirectOp::Write, false),
            ("<", RedirectOp::Read, false),
        ];
        if self.starts(at, "<(") || self.starts(at, ">(") {
            return None;
        }
        table
            .iter()
            .find(|(op, _, _)| self.starts(at, op))
            .map(|(op, kind, strip)| (*kind, op.len(), *strip))
    }

    /// A word: everything up to an unquoted blank or operator.
    fn word(&mut self) -> Word {
        let start = self.pos;
        let mut parts = Vec::new();
        let mut literal = String::new();
        while let Some(b) = self.byte(self.pos) {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' | b';' | b'&' | b'|' | b')' => break,
                b'(' if self.pos > start => {
                    // `name()` (a function) or an array `a=(…)`: keep the
                    // parentheses in the word when they close on this word.
                    if self.starts(self.pos, "()") {
                        break;
                    }
                    let close = self.matching(self.pos, b'(', b')');
                    literal.push_str(&self.text[self.pos..close]);
                    self.pos = close;
                }
                b'(' => break,
                b'<' | b'>' if self.starts(self.pos, "<(") || self.starts(self.pos, ">(") => {
                    flush(&mut literal, &mut parts, false);
                    let commands = self.substitution(self.pos + 2, b'(', b')');
                    parts.push(Part::Substitution { commands });
                }
                b'<' | b'>' => break,
                b'\\' => {
                    let len = char_len(self.text, self.pos + 1);
                    if self.byte(self.pos + 1) == Some(b'\n') {
                        self.pos += 2;
                        continue;
                    }
                    if let Some(c) = self.text.get(self.pos + 1..self.pos + 1 + len) {
                        literal.push_str(c);
                    }
                    self.pos += 1 + len;
                }
                b'\'' => {
                    flush(&mut literal, &mut parts, false);
                    let close = self.find_byte(self.pos + 1, b'\'');
                    parts.push(Part::Literal {
                        text: self.text[self.pos + 1..close].to_owned(),
                        quoted: true,
                    });
                    self.pos = (close + 1).min(self.end);
                }
                b'"' => {
                    flush(&mut literal, &mut parts, false);
                    self.pos += 1;
                    self.double_quoted(&mut parts);
                }
                b'`' => {
                    flush(&mut literal, &mut parts, false);
                    let commands = self.backquoted();
                    parts.push(Part::Substitution { commands });
                }
                b'$' => {
                    if self.starts(self.pos, "$'") {
                        flush(&mut literal, &mut parts, false);
                        let close = self.find_ansi_close(self.pos + 2);
                        parts.push(Part::Literal {
                            text: self.text[self.pos + 2..close].replace("\\'", "'"),
                            quoted: true,
                        });
                        self.pos = (close + 1).min(self.end);
                    } else if self.starts(self.pos, "$\"") {
                        flush(&mut literal, &mut parts, false);
                        self.pos += 2;
                        self.double_quoted(&mut parts);
                    } else if !self.dollar(&mut literal, &mut parts, false) {
                        literal.push('$');
                        self.pos += 1;
                    }
                }
                _ => {
                    let len = char_len(self.text, self.pos);
                    literal.push_str(&self.text[self.pos..self.pos + len]);
                    self.pos += len;
                }
            }
        }
        flush(&mut literal, &mut parts, false);
        self.pos = self.pos.min(self.end);
        // Never return an empty word that consumed nothing.
        if self.pos == start {
            let len = char_len(self.text, self.pos).max(1);
            self.pos = (self.pos + len).min(self.end);
            parts.push(Part::Literal {
                text: self
                    .text
                    .get(start..self.pos)
                    .unwrap_or_default()
                    .to_owned(),
                quoted: false,
            });
        }
        Word {
            span: start..self.pos,
            parts,
        }
    }

    /// The inside of double quotes (the opening quote consumed).
    fn double_quoted(&mut self, parts: &mut Vec<Part>) {
        let before = parts.len();
        let mut literal = String::new();
        while let Some(b) = self.byte(self.pos) {
            match b {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    let next = self.byte(self.pos + 1);
                    if matches!(next, Some(b'$' | b'`' | b'"' | b'\\')) {
                        literal.push(char::from(next.unwrap_or(b'\\')));
                        self.pos += 2;
                    } else if next == Some(b'\n') {
                        self.pos += 2;
                    } else {
                        literal.push('\\');
                        self.pos += 1;
                    }
                }
                b'`' => {
                    flush(&mut literal, parts, true);
                    let commands = self.backquoted();
                    parts.push(Part::Substitution { commands });
                }
                b'$' => {
                    if !self.dollar(&mut literal, parts, true) {
                        literal.push('$');
                        self.pos += 1;
                    }
                }
                _ => {
                    let len = char_len(self.text, self.pos);
                    literal.push_str(&self.text[self.pos..self.pos + len]);
                    self.pos += len;
                }
            }
        }
        // `""` is a word (an empty argument).
        if !literal.is_empty() || parts.len() == before {
            parts.push(Part::Literal {
                text: literal,
                quoted: true,
            });
        }
    }

    /// The parts of an expanding here-document body.
    fn heredoc_parts(&mut self, body: Range<usize>) -> Vec<Part> {
        self.pos = body.start;
        self.end = body.end;
        let mut parts = Vec::new();
        let mut literal = String::new();
        while let Some(b) = self.byte(self.pos) {
            match b {
                b'\\' if matches!(self.byte(self.pos + 1), Some(b'$' | b'`' | b'\\')) => {
                    literal.push(char::from(self.bytes[self.pos + 1]));
                    self.pos += 2;
                }
                b'`' => {
                    flush(&mut literal, &mut parts, true);
                    let commands = self.backquoted();
                    parts.push(Part::Substitution { commands });
                }
                b'$' => {
                    if !self.dollar(&mut literal, &mut parts, true) {
                        literal.push('$');
                        self.pos += 1;
                    }
                }
                _ => {
                    let len = char_len(self.text, self.pos);
                    literal.push_str(&self.text[self.pos..self.pos + len]);
                    self.pos += len;
                }
            }
        }
        flush(&mut literal, &mut parts, true);
        parts
    }

    /// An expansion at `$`: `${{ … }}`, `$((…))`, `$(…)`, `${…}`, `$NAME`,
    /// `$1`, `$?`. False when the `$` is a plain character.
    fn dollar(&mut self, literal: &mut String, parts: &mut Vec<Part>, quoted: bool) -> bool {
        let at = self.pos;
        if self.starts(at, "${{") {
            flush(literal, parts, quoted);
            let close = self.text[at + 3..self.end]
                .find("}}")
                .map_or(self.end, |i| at + 3 + i);
            parts.push(Part::Expression(self.text[at + 3..close].trim().to_owned()));
            self.pos = (close + 2).min(self.end);
            return true;
        }
        if self.starts(at, "$((") {
            flush(literal, parts, quoted);
            let close = self.matching(at + 1, b'(', b')');
            let inner_end = if self.starts(close.saturating_sub(2), "))") {
                close - 2
            } else {
                close
            };
            let inner = self
                .text
                .get(at + 3..inner_end.max(at + 3))
                .unwrap_or_default();
            parts.push(Part::Arithmetic(inner.to_owned()));
            for name in dollar_names(inner) {
                parts.push(Part::Variable { name, quoted: true });
            }
            self.pos = close;
            return true;
        }
        if self.starts(at, "$(") {
            flush(literal, parts, quoted);
            let commands = self.substitution(at + 2, b'(', b')');
            parts.push(Part::Substitution { commands });
            return true;
        }
        if self.starts(at, "${") {
            flush(literal, parts, quoted);
            let close = self.matching(at + 1, b'{', b'}');
            let inner_end = if close > at + 2 && self.byte(close - 1) == Some(b'}') {
                close - 1
            } else {
                close
            };
            let inner = self
                .text
                .get(at + 2..inner_end.max(at + 2))
                .unwrap_or_default();
            let inner_start = at + 2;
            let trimmed = inner.trim_start_matches(['!', '#']);
            let offset = inner.len() - trimmed.len();
            let name_len = trimmed
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count()
                .max(usize::from(
                    trimmed.starts_with(['@', '*', '?', '$', '#', '-']),
                ));
            let name = &trimmed[..name_len];
            if !name.is_empty() {
                // `${!name}` expands the variable `name` names: any of them.
                let indirect = inner.starts_with('!');
                parts.push(Part::Variable {
                    name: if indirect {
                        format!("!{name}")
                    } else {
                        name.to_owned()
                    },
                    quoted,
                });
            }
            // A default, alternative or pattern (`${X:-$Y}`): its own words.
            let rest_start = inner_start + offset + name_len;
            let rest_end = inner_end.max(rest_start);
            if rest_end > rest_start {
                let saved = (self.pos, self.end);
                self.pos = rest_start;
                self.end = rest_end;
                let mut sub = String::new();
                while let Some(b) = self.byte(self.pos) {
                    match b {
                        b'$' => {
                            if !self.dollar(&mut sub, parts, true) {
                                sub.push('$');
                                self.pos += 1;
                            }
                        }
                        b'"' | b'\'' => self.pos += 1,
                        _ => {
                            let len = char_len(self.text, self.pos);
                            sub.push_str(&self.text[self.pos..self.pos + len]);
                            self.pos += len;
                        }
                    }
                }
                let sub = sub.trim_start_matches([':', '-', '=', '+', '?']).to_owned();
                if !sub.is_empty() {
                    parts.push(Part::Literal {
                        text: sub,
                        quoted: true,
                    });
                }
                (self.pos, self.end) = saved;
            }
            self.pos = close;
            return true;
        }
        let name_len = self.text[at + 1..self.end]
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let special = self
            .byte(at + 1)
            .is_some_and(|b| b"@*#?$!-0123456789".contains(&b));
        let len = if name_len > 0 && !self.bytes[at + 1].is_ascii_digit() {
            name_len
        } else if special {
            1
        } else {
            return false;
        };
        flush(literal, parts, quoted);
        parts.push(Part::Variable {
            name: self.text[at + 1..at + 1 + len].to_owned(),
            quoted,
        });
        self.pos = at + 1 + len;
        true
    }

    /// Parses `$(…)` / `<(…)` whose inside starts at `inner`: the commands
    /// go to the sink, marked as substituted.
    fn substitution(&mut self, inner: usize, open: u8, close: u8) -> Range<usize> {
        let end = self.matching(inner - 1, open, close);
        let inner_end = if end > inner && self.byte(end - 1) == Some(close) {
            end - 1
        } else {
            end
        };
        let first = self.sink.len();
        if self.depth < MAX_DEPTH {
            let mut nested = Parser::new(
                self.text,
                inner,
                inner_end,
                self.sink,
                self.depth + 1,
                self.heredocs,
            );
            nested.parse_all();
        }
        for command in &mut self.sink[first..] {
            command.substituted = true;
        }
        self.pos = end;
        first..self.sink.len()
    }

    /// Parses a backquoted command (the opening backquote at `pos`).
    fn backquoted(&mut self) -> Range<usize> {
        let inner = self.pos + 1;
        let mut at = inner;
        while let Some(b) = self.byte(at) {
            match b {
                b'\\' => at += 1 + char_len(self.text, at + 1),
                b'`' => break,
                _ => at += 1,
            }
        }
        let inner_end = at.min(self.end);
        let first = self.sink.len();
        if self.depth < MAX_DEPTH {
            let mut nested = Parser::new(
                self.text,
                inner,
                inner_end,
                self.sink,
                self.depth + 1,
                self.heredocs,
            );
            nested.parse_all();
        }
        for command in &mut self.sink[first..] {
            command.substituted = true;
        }
        self.pos = (inner_end + 1).min(self.end);
        first..self.sink.len()
    }

    /// The offset just past the `close` that matches the `open` at `at`,
    /// skipping quoted text (or the end).
    fn matching(&self, at: usize, open: u8, close: u8) -> usize {
        let mut depth = 0usize;
        let mut i = at;
        while let Some(b) = self.byte(i) {
            match b {
                b'\\' => {
                    i += 1 + char_len(self.text, i + 1);
                    continue;
                }
                b'\'' if open != b'{' || depth > 0 => {
                    i = self.find_byte(i + 1, b'\'') + 1;
                    continue;
                }
                b'"' => {
                    let mut j = i + 1;
                    while let Some(c) = self.byte(j) {
                        match c {
                            b'\\' => j += 2,
                            b'"' => break,
                            _ => j += 1,
                        }
                    }
                    i = j + 1;
                    continue;
                }
                b'#' if open == b'('
                    && i > 0
                    && matches!(self.bytes[i - 1], b' ' | b'\t' | b'\n') =>
                {
                    while self.byte(i).is_some_and(|c| c != b'\n') {
                        i += 1;
                    }
                    continue;
                }
                _ if b == open => depth += 1,
                _ if b == close => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return (i + 1).min(self.end);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        self.end
    }

    fn find_byte(&self, from: usize, needle: u8) -> usize {
        (from..self.end)
            .find(|&i| self.bytes[i] == needle)
            .unwrap_or(self.end)
    }

    fn find_ansi_close(&self, from: usize) -> usize {
        let mut i = from;
        while let Some(b) = self.byte(i) {
            match b {
                b'\\' => i += 2,
                b'\'' => return i,
                _ => i += 1,
            }
        }
        self.end
    }

    /// After a newline: the bodies of the here-documents opened on the line.
    fn read_heredoc_bodies(&mut self) {
        for index in std::mem::take(&mut self.waiting) {
            let start = self.pos.min(self.end);
            let (delimiter, strip) = {
                let doc = &self.heredocs[index];
                (doc.delimiter.clone(), doc.strip_tabs)
            };
            let mut at = start;
            let mut body_end = self.end;
            let mut next = self.end;
            while at < self.end {
                let line_end = self.text[at..self.end]
                    .find('\n')
                    .map_or(self.end, |i| at + i);
                let line = &self.text[at..line_end];
                let line = if strip {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line.trim_end() == delimiter || line.trim() == delimiter {
                    body_end = at;
                    next = (line_end + 1).min(self.end);
                    break;
                }
                at = line_end + 1;
            }
            self.heredocs[index].body = Some(start..body_end.max(start));
            self.pos = next.max(start);
        }
    }

    // ---- grammar ------------------------------------------------------

    /// Commands until one of `terms` (a reserved word at command position),
    /// `)` or the end. Returns the terminator word when one was met.
    fn parse_list(&mut self, terms: &[&str], closing: Option<&'static str>) -> Option<String> {
        let mut guard = 0usize;
        loop {
            guard += 1;
            if guard > 100_000 {
                return None;
            }
            match self.peek() {
                Token::End => return None,
                Token::Op(op @ (";;" | ";&" | ";;&")) if terms.contains(&";;") => {
                    return Some(op.to_owned());
                }
                Token::Newline | Token::Op(";" | "&" | ";&" | ";;&") => {
                    self.next();
                }
                Token::Op(op) if Some(op) == closing => return None,
                Token::Op(")") => return None,
                Token::Word(word) => {
                    if let Some(text) = reserved(&word) {
                        if terms.contains(&text.as_str()) {
                            return Some(text);
                        }
                        if is_terminator(&text) {
                            // Unbalanced: not ours, and no caller will take it.
                            if terms.is_empty() {
                                self.next();
                                continue;
                            }
                            return Some(text);
                        }
                    }
                    self.background_and_or(terms);
                }
                // A subshell: `( … )`.
                Token::Op("(") => self.background_and_or(terms),
                Token::Op(_) => {
                    // `&&`, `||`, `|` without a command before: skip.
                    self.next();
                }
                Token::Redirect(..) => self.background_and_or(terms),
            }
        }
    }

    /// An and-or list, run in the background when `&` ends it.
    fn background_and_or(&mut self, terms: &[&str]) {
        let first = self.sink.len();
        self.parse_and_or(terms);
        if let Token::Op("&") = self.peek() {
            for command in &mut self.sink[first..] {
                command.subshell = true;
            }
        }
    }

    fn parse_and_or(&mut self, terms: &[&str]) {
        self.parse_pipeline(terms);
        while let Token::Op("&&" | "||") = self.peek() {
            self.next();
            while let Token::Newline = self.peek() {
                self.next();
            }
            let first = self.sink.len();
            self.and_or_tail += 1;
            self.parse_pipeline(terms);
            self.and_or_tail -= 1;
            for command in &mut self.sink[first..] {
                command.conditional = true;
            }
        }
    }

    fn parse_pipeline(&mut self, terms: &[&str]) {
        let id = self.next_pipeline;
        self.next_pipeline += 1;
        let mut members: Vec<Range<usize>> = Vec::new();
        loop {
            let first = self.sink.len();
            self.parse_command(terms);
            // Only the commands that run in this pipeline's own elements,
            // not those inside their substitutions, take part in the pipe.
            members.push(first..self.sink.len());
            match self.peek() {
                Token::Op(op @ ("|" | "|&")) => {
                    if op == "|&" {
                        for command in &mut self.sink[first..] {
                            if !command.substituted {
                                command.pipes_stderr = true;
                            }
                        }
                    }
                    self.next();
                    while let Token::Newline = self.peek() {
                        self.next();
                    }
                }
                _ => break,
            }
        }
        let len = members.len();
        for (position, range) in members.into_iter().enumerate() {
            for command in &mut self.sink[range] {
                // A compound command alone (`if …; then a | b; fi`) leaves
                // the pipelines inside it as they are; piped, all of it is
                // an element of this one.
                let inner = command.pipe_len != 0 && len == 1;
                if !inner && (!command.substituted || command.pipe_len == 0) {
                    command.pipeline = id;
                    command.pipe_position = position;
                    command.pipe_len = len;
                }
            }
        }
    }

    fn parse_command(&mut self, terms: &[&str]) {
        let token = self.peek();
        let reserved_word = match &token {
            Token::Word(word) if self.depth < MAX_DEPTH => reserved(word),
            _ => None,
        };
        if let Token::Op("(") = token {
            if self.depth < MAX_DEPTH {
                self.next();
                let first = self.sink.len();
                self.depth += 1;
                self.parse_list(&[], Some(")"));
                self.depth -= 1;
                if let Token::Op(")") = self.peek() {
                    self.next();
                }
                for command in &mut self.sink[first..] {
                    command.subshell = true;
                }
                self.compound_redirects(first);
                return;
            }
            self.next();
            return;
        }
        let Some(word) = reserved_word else {
            self.simple_command();
            return;
        };
        let first = self.sink.len();
        self.depth += 1;
        match word.as_str() {
            "{" => {
                self.next();
                self.parse_list(&["}"], None);
                self.take_word("}");
            }
            "!" => {
                self.next();
                self.depth -= 1;
                self.parse_command(terms);
                return;
            }
            "if" => {
                let start = match self.next() {
                    Token::Word(w) => w.span.start,
                    _ => self.pos,
                };
                let mut record = If {
                    start,
                    top_level: self.depth == 1 && self.and_or_tail == 0,
                    ..If::default()
                };
                // Which part the list read next belongs to: the condition,
                // the first `then`, an `elif`'s, or the `else`.
                let mut part = 0u8;
                loop {
                    let from = self.sink.len();
                    let met = self.parse_list(&["then", "elif", "else", "fi"], None);
                    let read = from..self.sink.len();
                    match part {
                        0 => record.condition = read,
                        1 => record.then_branch = read,
                        2 => record.elif = true,
                        _ => {
                            record.else_unconditional = read
                                .clone()
                                .filter(|&i| {
                                    !self.sink[i].conditional && self.sink[i].in_function.is_none()
                                })
                                .collect();
                            record.else_branch = Some(read);
                        }
                    }
                    part = match (part, met.as_deref()) {
                        (0, Some("then")) => 1,
                        (_, Some("else")) => 3,
                        (_, Some("elif")) => 2,
                        (2, Some("then")) => 2,
                        (p, _) => p,
                    };
                    match met.as_deref() {
                        Some("fi") => {
                            self.next();
                            record.closed = true;
                            break;
                        }
                        Some(_) => {
                            self.next();
                        }
                        None => break,
                    }
                }
                if self.record_cases {
                    self.ifs.push(record);
                }
            }
            "while" | "until" => {
                self.next();
                self.parse_list(&["do"], None);
                self.take_word("do");
                self.parse_list(&["done"], None);
                self.take_word("done");
            }
            "for" | "select" => {
                self.next();
                self.for_header();
                self.parse_list(&["do"], None);
                self.take_word("do");
                self.parse_list(&["done"], None);
                self.take_word("done");
            }
            "case" => {
                let start = match self.next() {
                    Token::Word(w) => w.span.start,
                    _ => self.pos,
                };
                self.case_body(start);
            }
            "function" => {
                self.next();
                let name = match self.next() {
                    Token::Word(w) => w.text(),
                    _ => String::new(),
                };
                if let Token::Op("(") = self.peek() {
                    self.next();
                    if let Token::Op(")") = self.peek() {
                        self.next();
                    }
                }
                self.function_body(&name);
            }
            "then" | "do" | "else" | "elif" | "fi" | "done" | "esac" | "}" | "in" => {
                // A terminator where a command belongs: not ours to consume
                // unless no caller is waiting for it.
                self.depth -= 1;
                if !terms.contains(&word.as_str()) {
                    self.next();
                }
                return;
            }
            _ => {}
        }
        self.depth -= 1;
        if word != "{" {
            for command in &mut self.sink[first..] {
                command.conditional = true;
            }
        }
        self.compound_redirects(first);
    }

    /// `for NAME [in WORDS]` up to the separator before `do`: the loop
    /// variable becomes an assignment of each word.
    fn for_header(&mut self) {
        let name = match self.peek() {
            Token::Word(w) => {
                self.next();
                w.literal()
            }
            _ => None,
        };
        // `for ((i=0; …))`
        if name.is_none() {
            while !matches!(self.peek(), Token::End | Token::Newline) {
                if let Token::Word(w) = self.peek() {
                    if w.literal().as_deref() == Some("do") {
                        return;
                    }
                }
                self.next();
            }
            return;
        }
        let mut values = Vec::new();
        if let Token::Word(w) = self.peek() {
            if w.literal().as_deref() == Some("in") {
                self.next();
                while let Token::Word(w) = self.peek() {
                    if w.literal().as_deref() == Some("do") {
                        break;
                    }
                    self.next();
                    values.push(std::rc::Rc::unwrap_or_clone(w));
                }
            }
        }
        let name = name.unwrap_or_default();
        if is_name(&name) {
            let start = values.first().map_or(self.pos, |w| w.span.start);
            let assignments = if values.is_empty() {
                vec![Assignment {
                    name: name.clone(),
                    value: Word::default(),
                }]
            } else {
                values
                    .into_iter()
                    .map(|value| Assignment {
                        name: name.clone(),
                        value,
                    })
                    .collect()
            };
            self.sink.push(Command {
                span: start..self.pos,
                assignments,
                ..Command::default()
            });
        }
    }

    /// `case WORD in PATTERN) LIST ;; … esac`.
    fn case_body(&mut self, start: usize) {
        let mut case = Case {
            start,
            top_level: self.depth == 1 && self.and_or_tail == 0,
            ..Case::default()
        };
        self.case_arms(&mut case);
        if self.record_cases {
            self.cases.push(case);
        }
    }

    fn case_arms(&mut self, case: &mut Case) {
        // The subject, then `in`.
        if let Token::Word(w) = self.peek() {
            self.next();
            case.subject = std::rc::Rc::unwrap_or_clone(w);
        }
        while let Token::Newline = self.peek() {
            self.next();
        }
        if let Token::Word(w) = self.peek() {
            if w.literal().as_deref() == Some("in") {
                self.next();
            }
        }
        let mut guard = 0usize;
        loop {
            guard += 1;
            if guard > 10_000 {
                return;
            }
            // Patterns up to `)`.
            let mut arm = CaseArm::default();
            loop {
                match self.peek() {
                    Token::End => return,
                    Token::Word(w) if w.literal().as_deref() == Some("esac") => {
                        self.next();
                        return;
                    }
                    Token::Op(")") => {
                        self.next();
                        break;
                    }
                    Token::Word(w) => {
                        self.next();
                        arm.patterns.push(std::rc::Rc::unwrap_or_clone(w));
                    }
                    _ => {
                        self.next();
                    }
                }
            }
            let first = self.sink.len();
            let met = self.parse_list(&[";;", "esac"], None);
            arm.commands = first..self.sink.len();
            // Still unmarked: nothing in the arm made them conditional.
            arm.unconditional = arm
                .commands
                .clone()
                .filter(|&i| !self.sink[i].conditional && self.sink[i].in_function.is_none())
                .collect();
            arm.terminator = met.clone().unwrap_or_default();
            case.arms.push(arm);
            match met.as_deref() {
                Some(";;" | ";&" | ";;&") => {
                    self.next();
                }
                Some("esac") => {
                    self.next();
                    return;
                }
                _ => {
                    // `;&` continues; anything else ends the case.
                    if let Token::Op(")") = self.peek() {
                        self.next();
                    } else {
                        return;
                    }
                }
            }
        }
    }

    /// A function body (a group or a compound command): its commands are
    /// marked as belonging to the function.
    fn function_body(&mut self, name: &str) {
        while let Token::Newline = self.peek() {
            self.next();
        }
        let first = self.sink.len();
        self.parse_command(&[]);
        for command in &mut self.sink[first..] {
            command.in_function.get_or_insert_with(|| name.to_owned());
            command.conditional = true;
        }
    }

    fn take_word(&mut self, expected: &str) {
        if let Token::Word(w) = self.peek() {
            if w.literal().as_deref() == Some(expected) {
                self.next();
            }
        }
    }

    /// Redirections after a compound command apply to every command in it.
    fn compound_redirects(&mut self, first: usize) {
        let mut redirects = Vec::new();
        while let Token::Redirect(fd, op, strip, at) = self.peek() {
            self.next();
            if let Some(r) = self.redirect_target(fd, op, strip, at, None) {
                redirects.push(r);
            }
        }
        if redirects.is_empty() {
            return;
        }
        for command in &mut self.sink[first..] {
            if !command.substituted {
                command.redirects.extend(redirects.iter().cloned());
            }
        }
    }

    /// The target word of a redirection; a here-document is registered and
    /// gets its body at the next newline.
    fn redirect_target(
        &mut self,
        fd: Option<u32>,
        op: RedirectOp,
        strip: bool,
        at: usize,
        command: Option<(usize, usize)>,
    ) -> Option<Redirect> {
        let Token::Word(target) = self.peek() else {
            return None;
        };
        self.next();
        if op == RedirectOp::HereDoc {
            let quoted = target
                .parts
                .iter()
                .any(|p| matches!(p, Part::Literal { quoted: true, .. }))
                || self.text[target.span.clone()].contains('\\');
            let delimiter = target.literal().unwrap_or_else(|| target.text());
            if let Some((command, redirect)) = command {
                self.heredocs.push(PendingHeredoc {
                    command,
                    redirect,
                    delimiter,
                    strip_tabs: strip,
                    expands: !quoted,
                    body: None,
                });
                self.waiting.push(self.heredocs.len() - 1);
            } else {
                // A here-document on a compound command: its body is skipped.
                self.heredocs.push(PendingHeredoc {
                    command: usize::MAX,
                    redirect: 0,
                    delimiter,
                    strip_tabs: strip,
                    expands: false,
                    body: None,
                });
                self.waiting.push(self.heredocs.len() - 1);
            }
        }
        Some(Redirect {
            fd,
            op,
            target: std::rc::Rc::unwrap_or_clone(target),
            heredoc: None,
            stderr_too: self.text[at..].starts_with("&>"),
        })
    }

    fn simple_command(&mut self) {
        let start = match self.peek() {
            Token::Word(w) => w.span.start,
            Token::Redirect(_, _, _, at) => at,
            _ => self.pos,
        };
        let mut command = Command {
            span: start..start,
            ..Command::default()
        };
        // Substitutions in the words are parsed into the sink first, so the
        // command comes after them; its own here-documents name it once it
        // has its index.
        let first_doc = self.heredocs.len();
        loop {
            match self.peek() {
                Token::Word(word) => {
                    self.next();
                    if command.words.is_empty() {
                        if let Some(a) = split_assignment(&word) {
                            command.span.end = word.span.end;
                            command.assignments.push(a);
                            continue;
                        }
                    }
                    // `name ()` or `name()`: a function definition.
                    if command.words.is_empty() && command.assignments.is_empty() {
                        let literal = word.literal();
                        if let Some(name) = literal
                            .as_deref()
                            .and_then(|n| n.strip_suffix("()"))
                            .filter(|n| is_name(n))
                        {
                            self.function_body(name);
                            return;
                        }
                        if let Token::Op("(") = self.peek() {
                            // The lexer stands just after the `(`.
                            let rest = &self.text[self.pos..self.end];
                            let blank = rest.len() - rest.trim_start_matches([' ', '\t']).len();
                            if rest[blank..].starts_with(')') {
                                self.peeked = None;
                                self.pos += blank + 1;
                                self.function_body(&word.text());
                                return;
                            }
                        }
                    }
                    command.span.end = word.span.end;
                    command.words.push(std::rc::Rc::unwrap_or_clone(word));
                }
                Token::Redirect(fd, op, strip, at) => {
                    self.next();
                    let position = command.redirects.len();
                    if let Some(r) =
                        self.redirect_target(fd, op, strip, at, Some((PENDING, position)))
                    {
                        command.span.end = r.target.span.end;
                        command.redirects.push(r);
                    }
                }
                _ => break,
            }
        }
        if command.words.is_empty()
            && command.assignments.is_empty()
            && command.redirects.is_empty()
        {
            return;
        }
        let index = self.sink.len();
        for doc in &mut self.heredocs[first_doc..] {
            if doc.command == PENDING {
                doc.command = index;
            }
        }
        self.sink.push(command);
    }
}

/// The command index of a here-document whose command is still being read.
const PENDING: usize = usize::MAX - 1;

/// A word that is a reserved word of the grammar at command position.
fn reserved(word: &Word) -> Option<String> {
    let [
        Part::Literal {
            text,
            quoted: false,
        },
    ] = word.parts.as_slice()
    else {
        return None;
    };
    matches!(
        text.as_str(),
        "{" | "}"
            | "!"
            | "if"
            | "then"
            | "elif"
            | "else"
            | "fi"
            | "while"
            | "until"
            | "for"
            | "select"
            | "do"
            | "done"
            | "case"
            | "esac"
            | "function"
            | "in"
    )
    .then(|| text.clone())
}

fn is_terminator(word: &str) -> bool {
    matches!(
        word,
        "then" | "elif" | "else" | "fi" | "do" | "done" | "esac" | "}" | "in"
    )
}

fn flush(literal: &mut String, parts: &mut Vec<Part>, quoted: bool) {
    if !literal.is_empty() {
        parts.push(Part::Literal {
            text: std::mem::take(literal),
            quoted,
        });
    }
}

/// The byte length of the character at `at` (1 past the end, so that a
/// trailing backslash is consumed).
fn char_len(text: &str, at: usize) -> usize {
    text.get(at..)
        .and_then(|rest| rest.chars().next())
        .map_or(1, char::len_utf8)
}

/// `$NAME` references in arithmetic or other raw text.
fn dollar_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' {
            let rest = text[i + 1..].trim_start_matches('{');
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn programs(script: &Script) -> Vec<String> {
        script.commands().filter_map(|c| c.program_text()).collect()
    }

    #[test]
    fn words_quotes_and_comments() {
        let s = Script::parse(
            "echo \"a b\" 'c d' e\\ f # not ./run.sh\ngit -C pr checkout \"$SHA\" && ./x.sh\n",
        );
        let texts: Vec<Vec<String>> = s
            .commands()
            .map(|c| c.words.iter().map(Word::text).collect())
            .collect();
        assert_eq!(
            texts,
            [
                vec!["echo", "a b", "c d", "e f"],
                vec!["git", "-C", "pr", "checkout", "$SHA"],
                vec!["./x.sh"]
            ]
        );
        assert_eq!(
            s.commands[1].args()[3].variables().collect::<Vec<_>>(),
            ["SHA"]
        );
    }

    #[test]
    fn pipelines_wrappers_and_substitutions() {
        let s = Script::parse(
            "curl -fsSL https://x/i.sh | sudo -E bash -s -- -y\nX=1 env -u Y Z=2 python3 t.py\nv=\"$(gh api \"repos/$R/pulls/$N\" --jq .head.sha)\"\n",
        );
        let bash = s
            .commands()
            .find(|c| c.program().as_deref() == Some("bash"))
            .unwrap();
        assert_eq!((bash.pipe_position, bash.pipe_len), (1, 2));
        let py = s
            .commands()
            .find(|c| c.program().as_deref() == Some("python3"))
            .unwrap();
        assert_eq!(py.assignments[0].name, "X");
        assert_eq!(py.arg_texts(), ["t.py"]);
        let assign = s.assignments();
        let (_, v) = assign.iter().find(|(_, a)| a.name == "v").unwrap();
        let inner: Vec<_> = v.value.substitutions().collect();
        assert_eq!(inner.len(), 1);
        let gh = &s.commands[inner[0].start];
        assert!(gh.substituted);
        assert_eq!(gh.program().as_deref(), Some("gh"));
        assert_eq!(gh.args()[1].text(), "repos/$R/pulls/$N");
    }

    #[test]
    fn groups_hand_their_redirections_to_their_commands() {
        let s = Script::parse(
            "{\n  echo \"key=${key}\"\n  echo \"name=$n\"\n} >> \"${GITHUB_OUTPUT}\"\necho x >> $GITHUB_ENV\necho y | tee -a \"$GITHUB_PATH\"\nif true; then echo z; fi > \"$GITHUB_OUTPUT\"\n",
        );
        let to_output: Vec<String> = s
            .commands()
            .filter(|c| c.writes_to("GITHUB_OUTPUT") && c.program().as_deref() == Some("echo"))
            .map(|c| {
                c.args()
                    .iter()
                    .map(Word::text)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        assert_eq!(to_output, ["key=$key", "name=$n", "z"]);
        assert!(s.commands().any(|c| c.writes_to("GITHUB_ENV")));
        assert!(s.commands().any(|c| c.writes_to("GITHUB_PATH")));
    }

    #[test]
    fn variables_know_whether_double_quotes_keep_them_whole() {
        let s = Script::parse(
            "gh api /repos/o/r/issues/$PR/comments \"$QUOTED\" ${BRACED} \"a${IN}b\" '$SINGLE'\n",
        );
        let unquoted: Vec<&str> = s.commands[0]
            .words
            .iter()
            .flat_map(|w| w.unquoted_variables())
            .collect();
        assert_eq!(unquoted, ["PR", "BRACED"]);
    }

    #[test]
    fn here_documents_are_not_commands_and_expand_when_unquoted() {
        let s = Script::parse(
            "cat > /tmp/x.sh <<'EOS'\n./not-run\nEOS\ncat >> \"$GITHUB_ENV\" <<EOF\nA=$B\nEOF\n./after\n",
        );
        assert_eq!(programs(&s), ["cat", "cat", "./after"]);
        let env = s.commands().find(|c| c.writes_to("GITHUB_ENV")).unwrap();
        let doc = env.stdin_text().unwrap().heredoc.as_ref().unwrap();
        assert!(
            doc.parts
                .iter()
                .any(|p| matches!(p, Part::Variable { name, .. } if name == "B"))
        );
        let quoted = s.commands[0]
            .stdin_text()
            .unwrap()
            .heredoc
            .as_ref()
            .unwrap();
        assert!(
            !quoted
                .parts
                .iter()
                .any(|p| matches!(p, Part::Variable { .. }))
        );
    }

    #[test]
    fn compound_commands_functions_and_loops() {
        let s = Script::parse(
            "set -e\nf() {\n  gh pr checkout \"$1\"\n}\nfor sha in $(git rev-list HEAD); do\n  case \"$sha\" in\n    a*|b*) echo one ;;\n    *) git checkout \"$sha\" ;;\n  esac\ndone\nwhile read -r line; do echo \"$line\"; done < list\n",
        );
        let progs = programs(&s);
        assert!(
            progs.contains(&"gh".to_owned()) && progs.contains(&"git".to_owned()),
            "{progs:?}"
        );
        let gh = s
            .commands()
            .find(|c| c.program().as_deref() == Some("gh"))
            .unwrap();
        assert_eq!(gh.in_function.as_deref(), Some("f"));
        assert!(s.assignments().iter().any(|(_, a)| a.name == "sha"));
        assert!(s.assignments().iter().any(|(_, a)| a.name == "line"));
        assert_eq!(
            s.commands()
                .filter(|c| c.program().as_deref() == Some("echo"))
                .count(),
            2
        );
    }

    #[test]
    fn expressions_and_parameter_defaults() {
        let s = Script::parse(
            "git checkout ${{ github.event.pull_request.head.sha }}\nref=\"${MANUAL_REF:-main}\"\necho $(( N << 2 ))\n./next\n",
        );
        assert!(matches!(
            s.commands[0].args()[1].parts.as_slice(),
            [Part::Expression(body)] if body == "github.event.pull_request.head.sha"
        ));
        let (_, r) = &s.assignments()[0];
        assert_eq!(r.value.variables().collect::<Vec<_>>(), ["MANUAL_REF"]);
        assert_eq!(programs(&s).last().map(String::as_str), Some("./next"));
    }

    #[test]
    fn odd_inputs_keep_spans_in_bounds() {
        for script in [
            ")&\n)a/b{${EOF#;;x=x=>>}é##'${`{sudo\" <<;;'\\",
            "a\\",
            "x=$'a\\",
        ] {
            let parsed = Script::parse(script);
            for command in parsed.commands() {
                assert!(
                    script.get(command.span.clone()).is_some(),
                    "{script:?} {command:?}"
                );
                for word in &command.words {
                    assert!(
                        script.get(word.span.clone()).is_some(),
                        "{script:?} {word:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_case_keeps_its_subject_arms_and_what_ends_each() {
        let text = "R=$(gh api x)\ncase \"$R\" in\n  a|b) echo one; false && echo two ;;\n  c) echo three ;&\n  *) echo four ;;\nesac\nif x; then case y in z) echo five ;; esac; fi\n( A=1 )\nB=2 &\n";
        let script = Script::parse(text);
        assert_eq!(script.cases.len(), 2);
        let case = &script.cases[0];
        assert!(case.top_level);
        assert!(!script.cases[1].top_level);
        assert!(case.subject.is_variable("R"));
        let patterns: Vec<Vec<String>> = case
            .arms
            .iter()
            .map(|a| a.patterns.iter().map(Word::text).collect())
            .collect();
        assert_eq!(patterns, [vec!["a", "b"], vec!["c"], vec!["*"]]);
        let terminators: Vec<&str> = case.arms.iter().map(|a| a.terminator.as_str()).collect();
        assert_eq!(terminators, [";;", ";&", ";;"]);
        let words = |i: usize| script.commands[i].arg_texts().join(" ");
        let first = &case.arms[0];
        let all: Vec<String> = first.commands.clone().map(words).collect();
        assert_eq!(all, ["one", "", "two"]);
        let always: Vec<String> = first.unconditional.iter().map(|&i| words(i)).collect();
        assert_eq!(always, ["one", ""]);
        let sub = |name: &str| {
            script
                .commands
                .iter()
                .find(|c| c.assignments.first().is_some_and(|a| a.name == name))
                .unwrap()
                .subshell
        };
        assert!(!sub("R"));
        assert!(sub("A"));
        assert!(sub("B"));
    }

    #[test]
    fn any_text_parses_without_panicking() {
        let pieces = [
            "\"", "'", "\\", "$(", ")", "`", "#", "<<", "EOF", "\n", " ", "é", "a/b", ";", "|",
            "&", "(", "-", "sudo", "x=", "${", "}", "{", "if", "fi", "case", "in", "esac", ";;",
            "$((", "<(", "for", "do", "done", "f()", ">>", "2>&1", "$'", "${{",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..3000 {
            let mut script = String::new();
            for _ in 0..28 {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let index = usize::try_from(state >> 58).unwrap_or(0) % pieces.len();
                script.push_str(pieces[index]);
            }
            let parsed = Script::parse(&script);
            for command in parsed.commands() {
                assert!(command.span.start <= command.span.end, "{script:?}");
                assert!(script.get(command.span.clone()).is_some(), "{script:?}");
                for word in &command.words {
                    assert!(script.get(word.span.clone()).is_some(), "{script:?}");
                    for range in word.substitutions() {
                        assert!(range.end <= parsed.commands.len(), "{script:?}");
                    }
                }
            }
        }
        // Deep nesting is read, not recursed into without end.
        let deep = "$(".repeat(5000) + &")".repeat(5000);
        let _ = Script::parse(&deep);
        let deep = "{ ".repeat(5000);
        let _ = Script::parse(&deep);
    }
}
