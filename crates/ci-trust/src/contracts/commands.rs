//! What shell commands mean to the contracts: which ones build or run
//! code, which bring a pull request's bytes into a working tree, which
//! run an xtask subcommand. The registries of programs (`RUNNERS`,
//! `READ_ONLY`, `SCRIPT_INTERPRETERS`, `WORKSPACE_SEARCHES`) and of the
//! variables programs load through (`LOADING_ENV`) live here, one place each.
//!
//! Owns: the meaning of a command, read from [`super::shell::Script`].
//! Must not: split words itself (that is `shell.rs`), or decide a role or a
//! finding.

use std::collections::BTreeSet;

use super::eval::Taint;
use super::expr;
use super::shell::{Command, Part, Script, Word};

/// Programs that run project code when they run (build tools are
/// [`builds`]'s); a command given by path counts too.
pub const RUNNERS: &[&str] = &[
    "bash", "sh", "zsh", "source", ".", "eval", "python", "python3", "node", "npm", "npx", "pip",
    "pip3", "chmod", "docker", "uv", "uvx", "pnpm", "yarn", "bun", "deno", "go", "mvn", "gradle",
    "dotnet", "ruby", "bundle", "rake", "perl", "php", "composer", "java", "pytest", "tox", "nox",
    "just", "bazel", "bazelisk", "nix", "poetry", "hatch", "maturin", "xargs", "env", "make",
    "cmake", "ninja", "meson",
];

/// Environment variables through which programs load code or
/// configuration from a directory; any `…PATH`, `…_HOME`, `…_OPTS`,
/// `…FILE`, `…RC`, `GIT_…`, `LD_…`, `DYLD_…`, `PYTHON…`, `BUNDLE_…`,
/// `…CONFIG…`, `…PROFILE…` variable (and the other prefixes and suffixes
/// of [`loads_through`]) counts too. The one list.
pub const LOADING_ENV: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "HOME",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYLIB",
    "RUBYOPT",
    "CLASSPATH",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "CC",
    "CXX",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "GNUPGHOME",
    "ZDOTDIR",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
];

/// True when a variable named `var` can make a program load code or
/// configuration from where it points ([`LOADING_ENV`]).
pub fn loads_through(var: &str) -> bool {
    let upper = var.to_ascii_uppercase();
    LOADING_ENV.contains(&upper.as_str())
        || upper.ends_with("PATH")
        || upper.ends_with("_HOME")
        || upper.ends_with("_DIR") && upper.starts_with("XDG_")
        || [
            "GIT_",
            "LD_",
            "DYLD_",
            "NPM_",
            "PIP_",
            "CARGO_",
            "RUSTUP_",
            "PYTHON",
            "BUNDLE_",
            "GEM_",
            "PHP",
            "COMPOSER",
            "MAVEN",
            "GRADLE",
            "SBT_",
            "JAVA",
            "_JAVA",
            "JDK_",
            "DOTNET_",
            "NODE_",
            "MIX_",
            "R_",
            "TF_",
            "CMAKE_",
            "CCACHE_",
            "SCCACHE_",
            "MAKE",
            "UV_",
            "TOX_",
            "NOX_",
            "CONDA",
            "NIX_",
            "DOCKER_",
            "KUBE",
            "VIRTUAL_ENV",
        ]
        .iter()
        .any(|p| upper.starts_with(p))
        || [
            "_OPTS", "_OPTIONS", "_ARGS", "_FLAGS", "FILE", "FILES", "_HOOKS", "RC", "_INIT",
            "EDITOR", "PAGER",
        ]
        .iter()
        .any(|s| upper.ends_with(s))
        || upper.contains("CONFIG")
        || upper.contains("PROFILE")
}

/// Programs that only read the files they are given (or delete, or post).
pub const READ_ONLY: &[&str] = &[
    "git",
    "diff",
    "cmp",
    "wc",
    "cat",
    "head",
    "tail",
    "grep",
    "rg",
    "ls",
    "echo",
    "printf",
    "jq",
    "yq",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "du",
    "stat",
    "file",
    "cloc",
    "tokei",
    "scc",
    "test",
    "[",
    "[[",
    "true",
    "exit",
    "rm",
    "mkdir",
    "touch",
    "gh",
];

/// Shell builtins that run no program and read no file of a directory
/// their environment names (`set -e`, `export X=1`).
pub const INERT_BUILTINS: &[&str] = &[
    "set", "export", "unset", "shift", "local", "declare", "typeset", "readonly", "read", "exit",
    "return", "true", "false", ":", "echo", "printf", "test", "[", "[[", "cd", "pushd", "popd",
    "wait", "break", "continue",
];

/// Interpreters that run a script file named in their arguments.
pub const SCRIPT_INTERPRETERS: &[&str] = &[
    "python", "python3", "node", "ruby", "perl", "bash", "sh", "zsh", "php",
];

/// Tools that find and run files of the workspace by themselves.
pub const WORKSPACE_SEARCHES: &[&str] = &[
    "pytest",
    "py.test",
    "tox",
    "nox",
    "pre-commit",
    "go",
    "cargo",
    "bazel",
    "bazelisk",
    "find",
    "xargs",
    "eval",
    "source",
    ".",
];

/// Build tools: a command that compiles, and so runs, checked-out code.
const BUILDERS: &[&str] = &["cargo", "rustc", "make", "cmake", "nvcc"];

/// The line of `text` (the script as written) a command starts on.
pub fn line<'s>(text: &'s str, _script: &Script, command: &Command) -> &'s str {
    let at = command.span.start.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    &text[start..end]
}

/// The first command of `script` that invokes a build tool, other than
/// `cargo xtask ci-key` (the trusted key step).
pub fn builds(script: &Script) -> Option<&Command> {
    script.commands().find(|c| {
        let Some(program) = c.program() else {
            return false;
        };
        BUILDERS.contains(&program.as_str()) && !is_xtask(c, "ci-key")
    })
}

/// The first line of a script that builds, as written.
pub fn builds_line(text: &str) -> Option<&str> {
    let script = Script::cached(text);
    builds(&script).map(|c| line(text, &script, c))
}

/// True when `command` is `cargo xtask SUB …`.
pub fn is_xtask(command: &Command, sub: &str) -> bool {
    command.program().as_deref() == Some("cargo") && {
        let args = command.arg_texts();
        args.first().map(String::as_str) == Some("xtask")
            && args.get(1).map(String::as_str) == Some(sub)
    }
}

/// The commands of `script` that run `cargo xtask SUB`.
pub fn xtask<'a>(script: &'a Script, sub: &'a str) -> impl Iterator<Item = &'a Command> + 'a {
    script.commands().filter(move |c| is_xtask(c, sub))
}

/// True when the script runs any `cargo xtask …`.
pub fn runs_xtask(text: &str) -> bool {
    Script::cached(text).commands().any(|c| {
        c.program().as_deref() == Some("cargo")
            && c.arg_texts().first().map(String::as_str) == Some("xtask")
    })
}

/// Events whose payload names pull-request content (a head SHA, a head
/// branch, a fork): in a run started by one of them, a git ref the
/// workflow does not spell out may be the pull request's.
pub const PR_CARRYING_EVENTS: &[&str] = &["pull_request_target", "issue_comment", "workflow_run"];

/// The command of `script` that brings code a pull request controls into
/// the working tree, in a run started by one of `events`: `gh pr
/// checkout`, `gh run download`, or a git `checkout`/`switch`/`pull`/
/// `clone`/`worktree`/`reset --hard` (or a `branch` made for a later step
/// to check out) of a `pull/` ref, of an expression or environment
/// variable (`tainted_vars`) that carries the pull request's head, of what
/// an earlier command fetched from a pull request (`FETCH_HEAD`), or, in a
/// run whose event carries pull-request content (`pull_request_target`,
/// `issue_comment`, `workflow_run`), of any ref the script does not spell
/// out (`$VAR`), unless the script works in another repository it set up
/// itself (`git init`, `git remote add`). A `git fetch` counts itself only
/// when `fetch_counts` (the publisher must not even fetch); `git checkout
/// -b NAME`, or cloning a named repository, never.
pub fn fetches_pr_code<'s>(
    text: &'s str,
    events: &BTreeSet<String>,
    tainted_vars: &[String],
    fetch_counts: bool,
) -> Option<&'s str> {
    let script = Script::cached(text);
    let gits: Vec<(&Command, Vec<String>)> = script
        .commands()
        .filter(|c| c.program().as_deref() == Some("git"))
        .map(|c| (c, git_subcommand(c.args())))
        .collect();
    let other_repo = gits.iter().any(|(_, args)| {
        args.first().map(String::as_str) == Some("init")
            || args.first().map(String::as_str) == Some("remote")
                && args.get(1).map(String::as_str) == Some("add")
    });
    let strict = PR_CARRYING_EVENTS.iter().any(|e| events.contains(*e)) && !other_repo;
    let mut pr_fetched = false;
    for command in script.commands() {
        let raw = text.get(command.span.clone()).unwrap_or_default();
        let program = command.program();
        let args = command.arg_texts();
        if program.as_deref() == Some("gh") {
            let gh = args.first().map(String::as_str);
            if gh == Some("pr") && args.iter().any(|a| a == "checkout")
                || gh == Some("run") && args.iter().any(|a| a == "download")
            {
                return Some(line(text, &script, command));
            }
            continue;
        }
        if program.as_deref() != Some("git") {
            continue;
        }
        let tainted = command
            .words
            .iter()
            .any(|w| w.variables().any(|v| tainted_vars.iter().any(|t| t == v)));
        let named = raw.contains("pull/") || expr::carries_pr_content(raw, events) || tainted;
        let sub_words = git_subcommand_words(command.args());
        let Some((sub, rest)) = sub_words.split_first() else {
            continue;
        };
        let sub = sub.text();
        let unspelled = rest.iter().any(|a| {
            let t = a.text();
            t.contains("FETCH_HEAD") && pr_fetched
                || strict && (expands(a) || t.contains("FETCH_HEAD"))
        });
        let controlled = named || unspelled;
        let texts: Vec<String> = rest.iter().map(Word::text).collect();
        let foreign = match sub.as_str() {
            "checkout" | "switch" => {
                let creates = texts
                    .iter()
                    .any(|a| matches!(a.as_str(), "-b" | "-B" | "-c" | "-C" | "--orphan"));
                let targets = rest.iter().filter(|a| !a.is_option()).count();
                !(creates && targets <= 1) && (controlled || pr_fetched && targets > 0)
            }
            "pull" | "worktree" | "clone" => controlled,
            // A branch made from the pull request (`git branch -f NAME
            // FETCH_HEAD`) is prepared for a later step, typically an
            // action, to check out.
            "branch" => {
                let targets: Vec<&String> = texts.iter().filter(|a| !a.starts_with('-')).collect();
                targets.len() >= 2
                    && (controlled
                        || pr_fetched && targets[1..].iter().any(|a| a.contains("FETCH_HEAD")))
            }
            "fetch" => {
                // In a repository the script set up itself (`git init`,
                // `git remote add`), a fetch is from that remote unless it
                // names a pull request.
                pr_fetched |= controlled && (!other_repo || raw.contains("pull/"));
                fetch_counts && controlled
            }
            "reset" => {
                texts.iter().any(|a| a == "--hard")
                    && texts.iter().any(|a| !a.starts_with('-') && a != "HEAD")
                    && (controlled || pr_fetched)
            }
            _ => false,
        };
        if foreign {
            return Some(line(text, &script, command));
        }
    }
    None
}

/// As [`fetches_pr_code`], with the value of each word known: `taint_of`
/// says where a word's value comes from (`crate::contracts::roles`' flow).
/// A git command of a ref whose value a pull request (or a dispatcher, or
/// something unseen) chose brings that code into a tree; under a
/// pull-request-carrying event (`strict`) a ref the script does not spell
/// out and whose origin is not known counts as unseen. Returns the line and
/// the taint of what chose the code.
pub fn fetches_pr_code_with<'s>(
    text: &'s str,
    script: &Script,
    strict: bool,
    taint_of: &dyn Fn(&Word) -> Taint,
    fetch_counts: bool,
) -> Option<(&'s str, Taint)> {
    let gits: Vec<Vec<String>> = script
        .commands()
        .filter(|c| c.program().as_deref() == Some("git"))
        .map(|c| git_subcommand(c.args()))
        .collect();
    let other_repo = gits.iter().any(|args| {
        args.first().map(String::as_str) == Some("init")
            || args.first().map(String::as_str) == Some("remote")
                && args.get(1).map(String::as_str) == Some("add")
    });
    let strict = strict && !other_repo;
    let mut fetched = Taint::NONE;
    for command in script.commands() {
        let raw = text.get(command.span.clone()).unwrap_or_default();
        let program = command.program();
        let args = command.arg_texts();
        if program.as_deref() == Some("gh") {
            let gh = args.first().map(String::as_str);
            if gh == Some("pr") && args.iter().any(|a| a == "checkout") {
                let chosen = command
                    .args()
                    .iter()
                    .fold(Taint::NONE, |t, w| t | taint_of(w));
                return Some((line(text, script, command), Taint::PR_REF | chosen));
            }
            if gh == Some("run") && args.iter().any(|a| a == "download") {
                let chosen = command
                    .args()
                    .iter()
                    .fold(Taint::NONE, |t, w| t | taint_of(w));
                return Some((line(text, script, command), Taint::UNSEEN | chosen));
            }
            continue;
        }
        if program.as_deref() != Some("git") {
            continue;
        }
        let sub_words = git_subcommand_words(command.args());
        let Some((sub, rest)) = sub_words.split_first() else {
            continue;
        };
        let sub = sub.text();
        let named = rest.iter().fold(Taint::NONE, |t, w| t | taint_of(w))
            | if raw.contains("pull/") {
                Taint::PR_REF
            } else {
                Taint::NONE
            };
        let unspelled = rest.iter().any(|a| {
            let t = a.text();
            strict
                && (expands(a) && taint_of(a).is_empty()
                    || t.contains("FETCH_HEAD") && fetched.is_empty())
        });
        let chosen = named
            | if unspelled {
                Taint::UNSEEN
            } else {
                Taint::NONE
            };
        let chooses = chosen.pr() || chosen.has(Taint::MAINTAINER) || chosen.has(Taint::UNSEEN);
        let texts: Vec<String> = rest.iter().map(Word::text).collect();
        let from_fetch = texts.iter().any(|a| a.contains("FETCH_HEAD"));
        let brings = match sub.as_str() {
            "checkout" | "switch" => {
                let creates = texts
                    .iter()
                    .any(|a| matches!(a.as_str(), "-b" | "-B" | "-c" | "-C" | "--orphan"));
                let targets = rest.iter().filter(|a| !a.is_option()).count();
                if creates && targets <= 1 {
                    None
                } else if chooses {
                    Some(chosen)
                } else if !fetched.is_empty() && targets > 0 {
                    Some(fetched)
                } else {
                    None
                }
            }
            "pull" | "worktree" | "clone" => chooses.then_some(chosen),
            "branch" => {
                let targets: Vec<&String> = texts.iter().filter(|a| !a.starts_with('-')).collect();
                if targets.len() >= 2 && chooses {
                    Some(chosen)
                } else if targets.len() >= 2 && from_fetch && !fetched.is_empty() {
                    Some(fetched)
                } else {
                    None
                }
            }
            "fetch" => {
                // In a repository the script set up itself (`git init`,
                // `git remote add`), a fetch is from that remote unless it
                // names a pull request.
                if chooses && (!other_repo || raw.contains("pull/")) {
                    fetched |= chosen;
                }
                (fetch_counts && chooses).then_some(chosen)
            }
            "reset" => {
                let hard = texts.iter().any(|a| a == "--hard")
                    && texts.iter().any(|a| !a.starts_with('-') && a != "HEAD");
                if !hard {
                    None
                } else if chooses {
                    Some(chosen)
                } else if !fetched.is_empty() {
                    Some(fetched)
                } else {
                    None
                }
            }
            _ => None,
        };
        if let Some(taint) = brings {
            return Some((line(text, script, command), taint));
        }
    }
    None
}

/// True when a word expands something (a variable, a substitution or a
/// `${{ … }}`), so its value is not spelled out in the script.
fn expands(word: &Word) -> bool {
    word.literal().is_none()
}

/// A git command's subcommand and its arguments, after git's global options
/// (`git -C pr checkout`, `git -c k=v fetch`).
fn git_subcommand_words(args: &[Word]) -> &[Word] {
    let mut args = args;
    while let Some((first, rest)) = args.split_first() {
        let text = first.text();
        if !text.starts_with('-') {
            break;
        }
        let takes_value = matches!(
            text.as_str(),
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--exec-path"
                | "--config-env"
        );
        args = if takes_value {
            rest.get(1..).unwrap_or_default()
        } else {
            rest
        };
    }
    args
}

fn git_subcommand(args: &[Word]) -> Vec<String> {
    git_subcommand_words(args).iter().map(Word::text).collect()
}

/// What each command of a script says, comments left out: its
/// assignments (`NAME=value`), its words, its redirection targets and its
/// here-document body, joined by spaces, with every expansion as
/// [`Word::text`] writes it. Recognisers of a form that may appear anywhere
/// in a command (`--cache-to type=gha`, a variable's name) read this.
pub fn spoken<'s>(text: &str, script: &'s Script) -> Vec<(&'s Command, String)> {
    script
        .commands()
        .map(|command| {
            let mut said = String::new();
            for a in &command.assignments {
                said.push_str(&a.name);
                said.push('=');
                said.push_str(&a.value.text());
                said.push(' ');
            }
            for w in &command.words {
                said.push_str(&w.text());
                said.push(' ');
            }
            for r in &command.redirects {
                said.push_str(&r.target.text());
                said.push(' ');
                if let Some(doc) = &r.heredoc {
                    said.push('\n');
                    said.push_str(text.get(doc.body.clone()).unwrap_or_default());
                }
            }
            (command, said)
        })
        .collect()
}

/// What a script computes, as the shell reads it: each command's
/// assignments, words and redirections, one command a line, with comments,
/// blank lines, indentation, line continuations and quoting left out. Two
/// scripts that differ only in those compute the same.
pub fn canonical(text: &str, script: &Script) -> String {
    let mut lines = Vec::new();
    for command in script.commands().filter(|c| !c.substituted) {
        let mut words: Vec<String> = command
            .assignments
            .iter()
            .map(|a| format!("{}={}", a.name, canonical_word(script, &a.value)))
            .collect();
        words.extend(command.words.iter().map(|w| canonical_word(script, w)));
        for r in &command.redirects {
            words.push(format!("{:?}", r.op));
            words.push(canonical_word(script, &r.target));
            if let Some(doc) = &r.heredoc {
                words.push(
                    text.get(doc.body.clone())
                        .unwrap_or_default()
                        .trim()
                        .to_owned(),
                );
            }
        }
        lines.push(words.join(" "));
    }
    lines.join("\n")
}

/// A word with its substitutions written out (`$(rustc -V)`), quotes removed.
fn canonical_word(script: &Script, word: &Word) -> String {
    let mut out = String::new();
    for part in &word.parts {
        match part {
            Part::Substitution { commands } => {
                let inner: Vec<String> = script.commands[commands.clone()]
                    .iter()
                    .map(|c| {
                        c.words
                            .iter()
                            .map(|w| canonical_word(script, w))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                out.push_str(&format!("$({})", inner.join("; ")));
            }
            Part::Literal { text, .. } => out.push_str(text),
            other => out.push_str(
                &Word {
                    span: 0..0,
                    parts: vec![other.clone()],
                }
                .text(),
            ),
        }
    }
    out
}

/// One `NAME=value` line a script writes to the file in `$VAR`
/// (`GITHUB_OUTPUT`, `GITHUB_ENV`), with the value's parts (so that the
/// variables and substitutions it expands can be followed).
pub struct FileLine {
    /// Empty when the line is another program's output (`jq … >>
    /// "$GITHUB_OUTPUT"`): it may set any name.
    pub name: String,
    pub value: Word,
}

impl FileLine {
    /// True when this line may set `name`.
    pub fn may_set(&self, name: &str) -> bool {
        self.name.is_empty() || self.name == name
    }
}

/// The `NAME=value` lines `script` writes to the file in `$var`: `echo` and
/// `printf` redirected there (alone or in a group), `cat` of a
/// here-document, a pipe into `tee "$var"`, and the `NAME<<DELIM` multi-line
/// form (the lines up to DELIM are the value). Any other program's output
/// is a value (inside `NAME<<DELIM`) or a line of any name, which carries
/// what that program prints.
pub fn file_lines(script: &Script, var: &str) -> Vec<FileLine> {
    let mut out = Vec::new();
    let mut multiline: Option<(String, String, Vec<Part>, &Command)> = None;
    for (index, command) in script.commands.iter().enumerate() {
        if !command.writes_to(var) {
            continue;
        }
        // `echo x | tee -a "$GITHUB_ENV"`: the text comes from the pipe.
        let writer = if command.program().as_deref() == Some("tee") && command.pipe_position > 0 {
            script.commands[..index].iter().rev().find(|c| {
                c.pipeline == command.pipeline && c.pipe_position + 1 == command.pipe_position
            })
        } else {
            Some(command)
        };
        let Some(writer) = writer else { continue };
        let mut texts: Vec<Vec<Part>> = Vec::new();
        match writer.program().as_deref() {
            Some("echo") => {
                let args: Vec<&Word> = writer
                    .args()
                    .iter()
                    .skip_while(|w| {
                        matches!(
                            w.literal().as_deref(),
                            Some("-n" | "-e" | "-E" | "-ne" | "-en")
                        )
                    })
                    .collect();
                texts.push(join_words(&args));
            }
            Some("printf") => texts.push(printf_parts(writer.args())),
            Some("cat") if writer.stdin_text().is_some_and(|r| r.heredoc.is_some()) => {
                if let Some(doc) = writer.stdin_text().and_then(|r| r.heredoc.as_ref()) {
                    texts.extend(split_lines(&doc.parts));
                }
            }
            None | Some(":" | "true") => {}
            Some(_) => {
                let at = script
                    .commands
                    .iter()
                    .position(|c| std::ptr::eq(c, writer))
                    .unwrap_or(index);
                // What it prints, from the pipeline's start: it may pass on
                // what it reads (`echo "$v" | tee -a "$GITHUB_ENV" | tee -a
                // "$GITHUB_OUTPUT"`).
                let first = script.commands[..at]
                    .iter()
                    .rposition(|c| c.pipeline == writer.pipeline && c.pipe_position == 0)
                    .filter(|_| writer.pipe_position > 0)
                    .unwrap_or(at);
                let output = vec![Part::Substitution {
                    commands: first..at + 1,
                }];
                match &mut multiline {
                    Some((_, _, value, _)) => value.extend(output),
                    None => out.push(FileLine {
                        name: String::new(),
                        value: Word {
                            span: writer.span.clone(),
                            parts: output,
                        },
                    }),
                }
                continue;
            }
        }
        for parts in texts {
            for parts in split_lines(&parts) {
                if let Some((name, delimiter, value, by)) = &mut multiline {
                    if literal_text(&parts).is_some_and(|t| t.trim() == delimiter.as_str()) {
                        out.push(FileLine {
                            name: std::mem::take(name),
                            value: Word {
                                span: by.span.clone(),
                                parts: std::mem::take(value),
                            },
                        });
                        multiline = None;
                    } else {
                        value.extend(parts);
                    }
                    continue;
                }
                // A name the script computes (`echo "$k=$v"`) may be any.
                let Some((name, rest)) = split_key(&parts) else {
                    if literal_text(&parts).is_none() {
                        out.push(FileLine {
                            name: String::new(),
                            value: Word {
                                span: writer.span.clone(),
                                parts,
                            },
                        });
                    }
                    continue;
                };
                if let Some(delimiter) = name
                    .split_once("<<")
                    .map(|(n, d)| (n.to_owned(), d.to_owned()))
                {
                    multiline = Some((delimiter.0, delimiter.1.trim().to_owned(), rest, writer));
                    continue;
                }
                out.push(FileLine {
                    name,
                    value: Word {
                        span: writer.span.clone(),
                        parts: rest,
                    },
                });
            }
        }
    }
    out
}

/// The arguments of `echo`, joined by spaces as the shell prints them.
fn join_words(words: &[&Word]) -> Vec<Part> {
    let mut parts = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            parts.push(Part::Literal {
                text: " ".to_owned(),
                quoted: false,
            });
        }
        parts.extend(word.parts.iter().cloned());
    }
    parts
}

/// `printf FORMAT ARGS…` as the text it prints: each `%s`-like conversion
/// takes the next argument's parts; `\n` ends a line.
fn printf_parts(args: &[Word]) -> Vec<Part> {
    let Some((format, rest)) = args.split_first() else {
        return Vec::new();
    };
    let mut rest = rest.iter();
    let mut out = Vec::new();
    for part in &format.parts {
        let Part::Literal { text, quoted } = part else {
            out.push(part.clone());
            continue;
        };
        let text = text.replace("\\n", "\n");
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '%' {
                match chars.next() {
                    Some('%') => literal.push('%'),
                    Some(_) => {
                        // Flags and width before the conversion are skipped.
                        out.push(Part::Literal {
                            text: std::mem::take(&mut literal),
                            quoted: *quoted,
                        });
                        if let Some(arg) = rest.next() {
                            out.extend(arg.parts.iter().cloned());
                        }
                    }
                    None => literal.push('%'),
                }
            } else {
                literal.push(c);
            }
        }
        out.push(Part::Literal {
            text: literal,
            quoted: *quoted,
        });
    }
    out
}

/// Splits parts at the newlines of their literal text.
fn split_lines(parts: &[Part]) -> Vec<Vec<Part>> {
    let mut lines = vec![Vec::new()];
    for part in parts {
        match part {
            Part::Literal { text, quoted } if text.contains('\n') => {
                let mut pieces = text.split('\n');
                if let Some(first) = pieces.next() {
                    if !first.is_empty() {
                        if let Some(l) = lines.last_mut() {
                            l.push(Part::Literal {
                                text: first.to_owned(),
                                quoted: *quoted,
                            });
                        }
                    }
                }
                for piece in pieces {
                    lines.push(Vec::new());
                    if !piece.is_empty() {
                        if let Some(l) = lines.last_mut() {
                            l.push(Part::Literal {
                                text: piece.to_owned(),
                                quoted: *quoted,
                            });
                        }
                    }
                }
            }
            _ => {
                if let Some(line) = lines.last_mut() {
                    line.push(part.clone());
                }
            }
        }
    }
    lines.retain(|l| !l.is_empty());
    lines
}

fn literal_text(parts: &[Part]) -> Option<String> {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Literal { text, .. } => out.push_str(text),
            _ => return None,
        }
    }
    Some(out)
}

/// `NAME=rest`: the literal name before the first `=`, and the parts after it.
fn split_key(parts: &[Part]) -> Option<(String, Vec<Part>)> {
    let mut name = String::new();
    for (i, part) in parts.iter().enumerate() {
        let Part::Literal { text, quoted } = part else {
            return None;
        };
        if let Some(eq) = text.find('=') {
            name.push_str(&text[..eq]);
            let name = name.trim().to_owned();
            let valid = name.split("<<").next().is_some_and(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            });
            if !valid {
                return None;
            }
            let mut rest = Vec::new();
            if eq + 1 < text.len() {
                rest.push(Part::Literal {
                    text: text[eq + 1..].to_owned(),
                    quoted: *quoted,
                });
            }
            rest.extend(parts[i + 1..].iter().cloned());
            return Some((name, rest));
        }
        // `NAME<<EOF` has no `=`.
        if let Some((n, d)) = text.split_once("<<") {
            if i + 1 == parts.len() && !n.is_empty() {
                return Some((format!("{}<<{}", n.trim(), d), Vec::new()));
            }
        }
        name.push_str(text);
    }
    None
}

/// A run's line that fetches code a pull request controls, under the
/// strictest reading (a `pull_request_target` run).
#[cfg(test)]
pub fn fetches_other_code(script: &str) -> Option<&str> {
    let events = BTreeSet::from(["pull_request_target".to_owned()]);
    fetches_pr_code(script, &events, &[], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_of(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn code_fetching_and_building_lines() {
        assert!(fetches_other_code("set -e\ngit fetch origin pull/1/head\n").is_some());
        assert!(fetches_other_code("gh pr checkout 12").is_some());
        assert!(fetches_other_code("echo git is fine").is_none());
        for other in [
            "git -C pr checkout \"$SHA\"",
            "git -c advice.detachedHead=false checkout FETCH_HEAD",
            "cd pr&&git --git-dir=.git switch -d \"$SHA\"",
            "/usr/bin/git pull origin \"$BRANCH\"",
            "git worktree add ../pr \"$SHA\"",
            "git clone --depth 1 \"https://github.com/$HEAD_REPO\" pr",
            "git fetch origin \"$SHA\" && git reset --hard FETCH_HEAD",
            "(git -C pr fetch origin refs/pull/7/head)",
            "gh run download \"$RUN_ID\" -n build",
        ] {
            assert!(fetches_other_code(other).is_some(), "{other}");
        }
        for benign in [
            "git status",
            "git -C pr log -1",
            "git reset --hard",
            "git reset --hard HEAD",
            "git fetch --tags",
            "echo checkout",
            "git checkout -b release-notes",
            "git clone --depth 1 https://github.com/org/data pr",
            "git pull origin gh-pages",
            "echo \"git checkout $SHA\"",
            "# git checkout \"$SHA\"",
        ] {
            assert!(fetches_other_code(benign).is_none(), "{benign}");
        }
        // Under a schedule or a dispatch, only what names a pull request counts.
        let nightly = events_of(&["schedule", "workflow_dispatch"]);
        for pr in [
            "git fetch origin pull/${{ inputs.pr }}/head && git checkout FETCH_HEAD",
            "gh pr checkout 12",
            "git checkout \"$PR_SHA\"",
        ] {
            assert!(
                fetches_pr_code(pr, &nightly, &["PR_SHA".to_owned()], false).is_some(),
                "{pr}"
            );
        }
        for benign in [
            "git checkout \"$SHA\"",
            "git checkout ${{ github.event.pull_request.head.sha }}",
            "git clone https://github.com/$OWNER/tool",
        ] {
            assert!(
                fetches_pr_code(benign, &nightly, &[], false).is_none(),
                "{benign}"
            );
        }
        // Fetching a pull request only to read it (a diff) is not running it;
        // checking out what was fetched is.
        let target = events_of(&["pull_request_target"]);
        let diff =
            "git fetch origin refs/pull/${{ github.event.number }}/merge:pr\ngit diff main..pr";
        assert!(fetches_pr_code(diff, &target, &[], false).is_none());
        assert!(fetches_pr_code(diff, &target, &[], true).is_some());
        let run = "git fetch origin pull/1/head\ngit checkout FETCH_HEAD";
        assert_eq!(
            fetches_pr_code(run, &nightly, &[], false),
            Some("git checkout FETCH_HEAD")
        );
        // A data branch of another repository the script set up itself.
        let data = "git init ctx\ncd ctx\ngit remote add origin https://github.com/o/data.git\ngit fetch origin \"refs/heads/$branch\"\ngit checkout FETCH_HEAD";
        assert!(fetches_pr_code(data, &events_of(&["issue_comment"]), &[], false).is_none());
        assert_eq!(
            builds_line("cargo xtask ci-key --github-output\ncargo nextest archive"),
            Some("cargo nextest archive")
        );
        assert!(builds_line("cargo xtask ci-key --root ../pr").is_none());
        assert!(builds_line("(cd pr && cargo build)").is_some());
        assert!(builds_line("echo \"run cargo build\"").is_none());
    }
}
