//! The GitHub Actions environment: step outputs, annotations and the step summary.
//!
//! Every command talks to the runner through this module only, so the
//! escaping rules of the workflow-command protocol live in one place. Outside
//! Actions (no `GITHUB_ACTIONS=true`) annotations become plain `warning:` /
//! `error:` lines on stderr and outputs are skipped unless a file is named.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// True when running inside a GitHub Actions job.
pub fn in_actions() -> bool {
    std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// The environment variables through which the runner hands a step its
/// outputs, its token and its cache service. Built code must never see them.
pub const RUNNER_CONTROL_VARS: &[&str] = &[
    "GITHUB_OUTPUT",
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
    "GITHUB_TOKEN",
];

/// True for a variable that must be removed from a build's environment:
/// the runner's control files, the token and every `ACTIONS_*` variable
/// (the cache and results credentials, and the OIDC
/// `ACTIONS_ID_TOKEN_REQUEST_*` pair that mints cloud credentials).
///
/// `RUNNER_*` and the descriptive `GITHUB_*` variables stay: none is a
/// credential or a command channel, and build tooling reads some of them
/// (`RUNNER_TEMP`, `RUNNER_OS`). Removing a variable hides it from code that
/// looks for it, not from a hostile build running as the same user, which
/// can read its ancestors' `/proc/<pid>/environ`; the job's read-only token
/// is the real boundary (see `docs/gpu-archive.md`).
pub fn is_runner_control_var(name: &str) -> bool {
    RUNNER_CONTROL_VARS.contains(&name) || name.starts_with("ACTIONS_")
}

/// Appends `name=value` to the file named by `$GITHUB_OUTPUT`.
///
/// Errors when the variable is unset: a caller that asked for outputs and gets
/// none would make the workflow continue with an empty key.
pub fn set_outputs(pairs: &[(&str, &str)]) -> Result<()> {
    let path = env_file("GITHUB_OUTPUT")?;
    append_lines(&path, pairs)
}

/// Like [`set_outputs`], but a no-op outside Actions.
pub fn set_outputs_if_in_actions(pairs: &[(&str, &str)]) -> Result<()> {
    if std::env::var_os("GITHUB_OUTPUT").is_none() {
        return Ok(());
    }
    set_outputs(pairs)
}

fn env_file(var: &str) -> Result<PathBuf> {
    match std::env::var_os(var) {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => bail!("${var} is not set; this flag only works inside a GitHub Actions step"),
    }
}

fn append_lines(path: &PathBuf, pairs: &[(&str, &str)]) -> Result<()> {
    let mut text = String::new();
    for (name, value) in pairs {
        if name.contains(['=', '\n', '\r']) || value.contains(['\n', '\r']) {
            bail!("refusing to write a multi-line or malformed output {name:?}");
        }
        text.push_str(&format!("{name}={value}\n"));
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open {} for appending", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot append to {}", path.display()))
}

/// `text` as a Markdown code span that stays one table cell: fenced by more
/// backticks than any run inside it, `|` escaped (GitHub splits table cells
/// before it reads code spans), line breaks and control characters as spaces.
/// Nothing in a code span is markup, so nothing can be injected.
pub fn markdown_code(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .replace('|', "\\|");
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run + 1);
    // A span that starts or ends with a backtick needs a space inside the
    // fence; one space each side is stripped again by the renderer.
    if text.starts_with('`') || text.ends_with('`') {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// Appends Markdown to `$GITHUB_STEP_SUMMARY`; a no-op outside Actions.
///
/// Every attacker-controlled part of `markdown` must have gone through
/// [`escape_markdown`].
pub fn append_step_summary(markdown: &str) -> Result<()> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    append_to_summary_file(std::path::Path::new(&path), markdown)
}

/// Appends Markdown to the summary file `path`.
pub fn append_to_summary_file(path: &std::path::Path, markdown: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot open step summary {}", path.display()))?;
    file.write_all(markdown.as_bytes())
        .context("cannot append to the step summary")
}

/// While alive, the runner ignores workflow commands in the log (inside
/// Actions; elsewhere it does nothing).
///
/// Code that a pull request controls (build scripts, proc macros) can print
/// to the step's log, and the runner acts on a line such as
/// `::set-output name=run_id::1` or `::add-mask::…` whoever printed it.
/// `::stop-commands::<token>` turns that off until `::<token>::` is printed;
/// the token is random, so the paused code cannot print it.
pub struct CommandsPaused {
    token: Option<String>,
}

impl CommandsPaused {
    pub fn start() -> CommandsPaused {
        if !in_actions() {
            return CommandsPaused { token: None };
        }
        let token = random_token();
        println!("::stop-commands::{token}");
        CommandsPaused { token: Some(token) }
    }
}

impl Drop for CommandsPaused {
    fn drop(&mut self) {
        if let Some(token) = &self.token {
            println!("::{token}::");
        }
    }
}

/// 128 random bits as hex, from the kernel; the standard library's per-process
/// hash keys stand in if `/dev/urandom` cannot be read.
fn random_token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let from_kernel = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !from_kernel {
        use std::hash::{BuildHasher, Hasher};
        for half in bytes.chunks_mut(8) {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            half.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where an annotation points.
#[derive(Debug, Clone, Default)]
pub struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
}

/// Prints a warning: a `::warning::` workflow command in Actions, a
/// `warning:` line elsewhere. Always on stderr, so stdout stays machine-readable.
pub fn warning(message: &str) {
    eprintln!("{}", warning_line(message, in_actions()));
}

/// The line [`warning`] prints.
pub fn warning_line(message: &str, in_actions: bool) -> String {
    if in_actions {
        format!("::warning::{}", escape_data(message))
    } else {
        format!("warning: {}", log_text(message, false))
    }
}

/// The last line of a failed command (`main.rs`): `error: <chain>`, where the
/// chain can carry file names of the checkout and API text, so it is encoded
/// like every other log line.
pub fn error_line(message: &str, in_actions: bool) -> String {
    format!("error: {}", log_text(message, in_actions))
}

/// A multi-line report for the log (`--explain`, `verify-key`'s listing):
/// its lines stay lines, and none can start a workflow command, whatever
/// the file names in it hold.
pub fn log_block(text: &str) -> String {
    log_text(text, false)
}

/// Prints a progress line on stderr, encoded by [`log_text`].
pub fn log(text: &str) {
    eprintln!("{}", log_text(text, in_actions()));
}

/// Makes text that may hold attacker-controlled parts (file names of the
/// checkout, run and branch names, API error text) safe to print in the job
/// log, where the runner acts on any line that starts with `::`.
///
/// In Actions the text is encoded as workflow-command data (`%`, CR, LF), so
/// it stays on the one line the caller starts with its own prefix. Elsewhere
/// line breaks stay readable. Either way a line that would start with `::`
/// (after the blanks the runner trims) has its first colon encoded as `%3A`,
/// and the older `##[` command prefix is encoded wherever it appears.
pub fn log_text(text: &str, in_actions: bool) -> String {
    let text = if in_actions {
        escape_data(text)
    } else {
        // A lone CR ends a line for the runner too.
        text.replace('\r', "%0D")
    };
    // The runner's older command syntax, `##[name]data`, is looked for
    // anywhere in a line.
    let text = text.replace("##[", "##%5B");
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let body = line.trim_start();
        if body.starts_with("::") {
            out.push_str(&line[..line.len() - body.len()]);
            out.push_str("%3A");
            out.push_str(&body[1..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Escapes text for the step summary (GitHub-flavoured Markdown with HTML),
/// so that a run name, a branch name, an artifact name or API error text
/// shows as the characters it is and can inject no heading, list, link,
/// autolink, image, table cell, emphasis or raw HTML.
///
/// `<`, `>` and `&` become entities; every other ASCII punctuation character
/// is backslash-escaped (CommonMark allows it for all of them, and an escaped
/// `:`, `.` or `@` cannot complete an autolink); line breaks and other
/// control characters become spaces, so the text cannot start a new block.
pub fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Formats an `::error …::` or `::warning …::` command for a location.
pub fn annotation(level: &str, location: &Location, title: &str, message: &str) -> String {
    format!(
        "::{level} file={},line={},col={},title={}::{}",
        escape_property(&location.file),
        location.line,
        location.column,
        escape_property(title),
        escape_data(message)
    )
}

/// Escapes a workflow-command message, as the runner's toolkit does.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property value, as the runner's toolkit does.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_escapes_what_would_break_the_protocol() {
        let location = Location {
            file: "a,b:c.yml".into(),
            line: 3,
            column: 7,
        };
        let text = annotation("error", &location, "rule", "50% done\nnext");
        assert_eq!(
            text,
            "::error file=a%2Cb%3Ac.yml,line=3,col=7,title=rule::50%25 done%0Anext"
        );
    }

    /// A file name or API text with line breaks and `::add-mask::` cannot
    /// start a workflow command on any line.
    #[test]
    fn log_lines_cannot_start_a_workflow_command() {
        let hostile = "src/x\n::add-mask::secret\r::error::boom 50%\n  ::warning::w";
        assert_eq!(
            error_line(hostile, true),
            "error: src/x%0A::add-mask::secret%0D::error::boom 50%25%0A  ::warning::w"
        );
        assert_eq!(
            warning_line(hostile, true),
            "::warning::src/x%0A::add-mask::secret%0D::error::boom 50%25%0A  ::warning::w"
        );
        // Outside Actions the lines stay lines, but none starts a command.
        assert_eq!(
            error_line(hostile, false),
            "error: src/x\n%3A:add-mask::secret%0D::error::boom 50%\n  %3A:warning::w"
        );
        assert_eq!(
            log_text("::set-output name=a::b", true),
            "%3A:set-output name=a::b"
        );
        for inside in [true, false] {
            for line in error_line(hostile, inside).lines() {
                assert!(!line.trim_start().starts_with("::"), "{line}");
            }
        }
    }

    #[test]
    fn markdown_escaping_leaves_no_markup() {
        assert_eq!(
            escape_markdown("# h\n<b>&amp;</b> [a](b) | c"),
            "\\# h &lt;b&gt;&amp;amp\\;&lt;\\/b&gt; \\[a\\]\\(b\\) \\| c"
        );
        assert_eq!(escape_markdown("plain text 42"), "plain text 42");
        assert_eq!(markdown_code("a.yml:3:1"), "`a.yml:3:1`");
        assert_eq!(markdown_code("x``y|<img>\n# h"), "```x``y\\|<img> # h```");
        assert_eq!(markdown_code("`a"), "`` `a ``");
    }

    #[test]
    fn outputs_are_appended_and_multiline_values_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        append_lines(&path, &[("key", "a"), ("artifact_name", "b")]).unwrap();
        append_lines(&path, &[("source", "build")]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "key=a\nartifact_name=b\nsource=build\n"
        );
        assert!(append_lines(&path, &[("key", "a\nkey=evil")]).is_err());
    }

    #[test]
    fn pause_tokens_are_long_and_fresh() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn runner_control_vars_include_every_actions_credential() {
        assert!(is_runner_control_var("ACTIONS_RUNTIME_TOKEN"));
        assert!(is_runner_control_var("ACTIONS_CACHE_URL"));
        assert!(is_runner_control_var("GITHUB_TOKEN"));
        assert!(is_runner_control_var("ACTIONS_ID_TOKEN_REQUEST_TOKEN"));
        assert!(is_runner_control_var("ACTIONS_ID_TOKEN_REQUEST_URL"));
        assert!(!is_runner_control_var("GITHUB_SHA"));
        assert!(!is_runner_control_var("RUNNER_TEMP"));
    }
}
