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

/// The files through which the runner takes a step's outputs, environment,
/// path, state and summary after the step has ended.
pub const RUNNER_FILE_VARS: &[&str] = &[
    "GITHUB_OUTPUT",
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
];

/// The largest output file [`write_step_outputs`] reads back. The runner
/// has no such limit, but a step whose only writer is this program never
/// comes near it: a bigger file was written by someone else.
const MAX_OUTPUT_FILE_BYTES: u64 = 16 << 20;

/// The state of the runner's file-command files ([`RUNNER_FILE_VARS`]) at
/// one moment, to tell whether anything wrote to them since.
///
/// A build runs as the same user as the step and can find these files
/// (through `/proc/<ancestor>/environ` or the runner's file-command
/// directory) although its environment does not name them. Nothing the
/// build runs has a reason to touch them; a change between a capture before
/// the build and one after it is a forgery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerFiles {
    files: Vec<(&'static str, FileState)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum FileState {
    /// The variable is not set.
    Unset,
    Missing,
    /// Anything but a regular file (a FIFO would make a reader wait for
    /// ever, a link would send a writer elsewhere).
    NotAFile(String),
    File {
        device: u64,
        inode: u64,
        len: u64,
        sha256: [u8; 32],
    },
    Unreadable(String),
}

impl RunnerFiles {
    /// Records every runner file the environment names.
    pub fn capture() -> RunnerFiles {
        RunnerFiles {
            files: RUNNER_FILE_VARS
                .iter()
                .map(|var| (*var, file_state(std::env::var_os(var))))
                .collect(),
        }
    }

    /// The variables whose files changed since `self` was captured, each
    /// with what it was and what it is.
    pub fn changed_since(&self) -> Vec<String> {
        self.files
            .iter()
            .filter_map(|(var, before)| {
                let now = file_state(std::env::var_os(var));
                (now != *before).then(|| format!("${var} ({})", describe_change(before, &now)))
            })
            .collect()
    }
}

fn describe_change(before: &FileState, now: &FileState) -> String {
    match (before, now) {
        (FileState::File { len: a, .. }, FileState::File { len: b, .. }) if a != b => {
            format!("{a} bytes before the build, {b} after")
        }
        (FileState::File { inode: a, .. }, FileState::File { inode: b, .. }) if a != b => {
            "replaced by another file".to_owned()
        }
        (FileState::File { .. }, FileState::File { .. }) => "rewritten in place".to_owned(),
        (_, FileState::Missing) => "deleted".to_owned(),
        (_, FileState::NotAFile(kind)) => format!("now {kind}"),
        (_, FileState::Unreadable(err)) => format!("now unreadable: {err}"),
        (_, FileState::Unset) => "the variable is gone".to_owned(),
        (FileState::Missing | FileState::Unset, FileState::File { .. }) => "created".to_owned(),
        _ => "changed".to_owned(),
    }
}

fn file_state(path: Option<std::ffi::OsString>) -> FileState {
    use sha2::{Digest, Sha256};
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return FileState::Unset;
    };
    let file = match open_runner_file(std::path::Path::new(&path), false) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return FileState::Missing,
        Err(err) => return FileState::Unreadable(err.to_string()),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(err) => return FileState::Unreadable(err.to_string()),
    };
    if !meta.is_file() {
        return FileState::NotAFile(describe_file_type(&meta));
    }
    let mut hasher = Sha256::new();
    if let Err(err) = std::io::copy(&mut std::io::Read::take(&file, meta.len()), &mut hasher) {
        return FileState::Unreadable(err.to_string());
    }
    let (device, inode) = device_and_inode(&meta);
    FileState::File {
        device,
        inode,
        len: meta.len(),
        sha256: hasher.finalize().into(),
    }
}

#[cfg(unix)]
fn device_and_inode(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn device_and_inode(_meta: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

fn describe_file_type(meta: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO".to_owned();
        }
        if kind.is_socket() {
            return "a socket".to_owned();
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device".to_owned();
        }
    }
    if meta.is_dir() {
        "a directory".to_owned()
    } else {
        "not a regular file".to_owned()
    }
}

/// Opens a runner file without following a link in its last component and
/// without waiting on a FIFO; the caller checks that it is a regular file.
fn open_runner_file(path: &std::path::Path, write: bool) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if write {
        options.append(true).create(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Writes the step's outputs so that the runner reads exactly `pairs`, or
/// fails; a no-op when `$GITHUB_OUTPUT` is not set.
///
/// The file is read first and parsed as the runner parses it
/// ([`parse_runner_file`]). It is refused, and nothing is written, when it
/// is not a regular UTF-8 file, does not parse (an open heredoc would
/// swallow the lines written after it), or already names one of `pairs`'
/// outputs (the runner compares names without regard to case): in a step
/// whose only writer is this program, any of those is a forgery. Each value
/// then goes in a heredoc with its own random delimiter, starting on a
/// fresh line, and the file is read back: it must be what it was plus
/// exactly what was written, and parse to `pairs` as the last word on each
/// name.
pub fn write_step_outputs(pairs: &[(&str, &str)]) -> Result<()> {
    let Some(path) = std::env::var_os("GITHUB_OUTPUT").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    write_outputs_to(std::path::Path::new(&path), pairs)
}

/// [`write_step_outputs`] into the file at `path`.
pub fn write_outputs_to(path: &std::path::Path, pairs: &[(&str, &str)]) -> Result<()> {
    use std::io::{Read, Seek};
    for (name, value) in pairs {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            || value.contains(['\n', '\r'])
        {
            bail!("refusing to write a multi-line or malformed output {name:?}");
        }
    }
    let shown = path.display();
    let mut file = open_runner_file(path, true)
        .with_context(|| format!("cannot open the output file {shown}"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read the output file {shown}"))?;
    if !meta.is_file() {
        bail!(
            "the output file {shown} is {}, not the regular file the runner created: refusing to write the outputs",
            describe_file_type(&meta)
        );
    }
    let read_all = |file: &mut std::fs::File| -> Result<String> {
        file.seek(std::io::SeekFrom::Start(0))?;
        let mut bytes = Vec::new();
        file.take(MAX_OUTPUT_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read the output file {shown}"))?;
        if bytes.len() as u64 > MAX_OUTPUT_FILE_BYTES {
            bail!(
                "the output file {shown} holds more than {MAX_OUTPUT_FILE_BYTES} bytes that this program did not write: refusing to write the outputs"
            );
        }
        String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!(
                "the output file {shown} is not UTF-8 (the runner would read it in another encoding, or with replacement characters): refusing to write the outputs"
            )
        })
    };
    let before = read_all(&mut file)?;
    let existing = parse_runner_file(&before).map_err(|why| {
        anyhow::anyhow!(
            "the output file {shown} already fails to parse as the runner reads it ({why}); lines written after it could be swallowed or ignored, so something other than this program wrote to it: refusing to write the outputs"
        )
    })?;
    for (name, _) in &existing {
        if let Some((ours, _)) = pairs
            .iter()
            .find(|(ours, _)| ours.eq_ignore_ascii_case(name))
        {
            bail!(
                "the output file {shown} already sets the output {:?} (as {:?}) before this program wrote it: something else wrote this step's outputs; refusing to write them",
                ours,
                log_text(name, false)
            );
        }
    }
    let mut block = String::new();
    if !before.is_empty() && !before.ends_with('\n') {
        block.push('\n');
    }
    for (name, value) in pairs {
        let delimiter = format!("ghadelimiter_{}", random_token());
        block.push_str(&format!("{name}<<{delimiter}\n{value}\n{delimiter}\n"));
    }
    {
        let mut writer = &file;
        writer
            .write_all(block.as_bytes())
            .with_context(|| format!("cannot append to the output file {shown}"))?;
        writer
            .flush()
            .with_context(|| format!("cannot append to the output file {shown}"))?;
    }
    let after = read_all(&mut file)?;
    if after != format!("{before}{block}") {
        bail!(
            "the output file {shown} changed while the outputs were written ({} bytes, {} expected): refusing to trust it",
            after.len(),
            before.len() + block.len()
        );
    }
    let parsed = parse_runner_file(&after).map_err(|why| {
        anyhow::anyhow!(
            "the output file {shown} does not parse after the outputs were written ({why})"
        )
    })?;
    for (name, value) in pairs {
        let last = parsed
            .iter()
            .rev()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        if last != Some(*value) {
            bail!(
                "the output file {shown} does not read back as written: the runner would take {name}={:?}",
                last.map(|v| log_text(v, false))
            );
        }
    }
    Ok(())
}

/// The name/value pairs the runner takes from a file-command file, in
/// order, as `actions/runner` parses `$GITHUB_OUTPUT` and `$GITHUB_ENV`
/// (`EnvFileKeyValuePairs`): lines split at LF (and CRLF on Windows),
/// empty lines skipped, `NAME=VALUE` when `=` comes before any `<<`,
/// otherwise `NAME<<DELIMITER` and the lines up to one equal to the
/// delimiter. An error is what the runner would throw (it fails the step,
/// keeping the pairs before it).
pub fn parse_runner_file(text: &str) -> Result<Vec<(String, String)>, String> {
    // `File.ReadAllText` drops a UTF-8 byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut pairs = Vec::new();
    let mut index = 0;
    while let Some((line, _)) = read_runner_line(text, &mut index) {
        if line.is_empty() {
            continue;
        }
        let equals = line.find('=');
        let heredoc = line.find("<<");
        match (equals, heredoc) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                pairs.push((line[..e].to_owned(), line[e + 1..].to_owned()));
            }
            (_, Some(h)) => {
                let (name, delimiter) = (&line[..h], &line[h + 2..]);
                if name.is_empty() || delimiter.is_empty() {
                    return Err(format!(
                        "invalid format {:?}: name and delimiter must not be empty",
                        log_text(line, false)
                    ));
                }
                let start = index;
                let mut end = index;
                loop {
                    match read_runner_line(text, &mut index) {
                        None => {
                            return Err(format!(
                                "an open heredoc: no line closes {:?}",
                                log_text(line, false)
                            ));
                        }
                        Some((candidate, _)) if candidate == delimiter => break,
                        Some((_, None)) => {
                            return Err(format!(
                                "the heredoc {:?} runs to the end of the file without a newline",
                                log_text(line, false)
                            ));
                        }
                        Some((_, Some(newline))) => end = index - newline.len(),
                    }
                }
                let value = if end > start { &text[start..end] } else { "" };
                pairs.push((name.to_owned(), value.to_owned()));
            }
            _ => return Err(format!("invalid format {:?}", log_text(line, false))),
        }
    }
    Ok(pairs)
}

/// The runner's `ReadLine`: the next line and the newline that ended it
/// (`None` for the last line of a file that does not end in one).
fn read_runner_line<'a>(
    text: &'a str,
    index: &mut usize,
) -> Option<(&'a str, Option<&'static str>)> {
    if *index >= text.len() {
        return None;
    }
    let rest = &text[*index..];
    let start = *index;
    let Some(lf) = rest.find('\n') else {
        *index = text.len();
        return Some((rest, None));
    };
    if cfg!(windows)
        && let Some(crlf) = rest.find("\r\n")
        && crlf < lf
    {
        *index = start + crlf + 2;
        return Some((&rest[..crlf], Some("\r\n")));
    }
    *index = start + lf + 1;
    Some((&rest[..lf], Some("\n")))
}

/// `text` as a Markdown code span that stays one table cell: fenced by more
/// backticks than any run inside it, `|` escaped (GitHub splits table cells
/// before it reads code spans, and turns `\|` back into `|` inside them),
/// line breaks and every other hidden character ([`is_hidden`]) as spaces.
/// Nothing in a code span is markup: no link, autolink (`www.`, `a@b.c`,
/// `xmpp:`), image, emphasis, HTML, entity or mention, whatever the text.
///
/// Meant for table cells: in a paragraph a `|` would show as `\|`.
pub fn markdown_code(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| if is_hidden(c) { ' ' } else { c })
        .collect::<String>()
        .replace('|', "\\|");
    let longest_run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest_run + 1);
    // The renderer strips one space from each end of a span that starts and
    // ends with one; a span that starts or ends with a backtick needs that
    // space inside the fence. Padding both ends whenever either end is a
    // backtick or a space keeps the text exactly as it was.
    let padded = !text.trim_matches(' ').is_empty()
        && (text.starts_with(['`', ' ']) || text.ends_with(['`', ' ']));
    if text.is_empty() {
        "` `".to_owned()
    } else if padded {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

/// Whether `c` is a character that must not reach the log or the summary as
/// itself: every control character (C0, DEL, C1, which can move the cursor,
/// ring a bell, clear a terminal or end a line), the Unicode line and
/// paragraph separators, and the bidirectional formatting characters (which
/// reorder how the rest of a line is displayed).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'
                ..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `c` as the percent-encoded bytes of its UTF-8 form (`%1B`, `%E2%80%A8`).
fn push_percent(out: &mut String, c: char) {
    let mut buf = [0u8; 4];
    for byte in c.encode_utf8(&mut buf).bytes() {
        out.push_str(&format!("%{byte:02X}"));
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

/// Appends Markdown to the summary file `path`: a regular file, never
/// through a link in its last component, never waiting on a FIFO.
pub fn append_to_summary_file(path: &std::path::Path, markdown: &str) -> Result<()> {
    let mut file = open_runner_file(path, true)
        .with_context(|| format!("cannot open step summary {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot open step summary {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "the step summary {} is {}, not a regular file",
            path.display(),
            describe_file_type(&meta)
        );
    }
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
            end_open_lines();
            println!("::{token}::");
        }
    }
}

/// Ends the line the paused code may have left open on stdout and on
/// stderr, and waits (a second at most) until the runner has read both.
///
/// The runner reads each pipe a line at a time: a command the paused code
/// printed without its newline would be read when the next line ends it,
/// after the pause, and run; on stdout it would swallow the resume line,
/// which would leave commands paused for the rest of the job. Ended here,
/// and read before the resume is written, such a line is seen while
/// commands are still paused. (The two pipes are read apart, so having
/// written the newline first is not enough: the runner must have read it.)
fn end_open_lines() {
    let _ = std::io::stderr().write_all(b"\n");
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(b"\n");
    let _ = stdout.flush();
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while std::time::Instant::now() < until
            && (unread_bytes(std::io::stdout().as_fd()) > 0
                || unread_bytes(std::io::stderr().as_fd()) > 0)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Read is not yet acted on: a moment for the runner to queue the
        // lines it read before the resume line arrives.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The bytes written to `fd` that its reader has not read yet, when it is
/// a pipe (0 otherwise, or when it cannot be told).
#[cfg(unix)]
#[allow(unsafe_code)]
fn unread_bytes(fd: std::os::fd::BorrowedFd<'_>) -> u32 {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileTypeExt;
    let is_pipe = fd
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|file| file.metadata())
        .is_ok_and(|meta| meta.file_type().is_fifo());
    if !is_pipe {
        return 0;
    }
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one `c_int` through the valid pointer; the
    // descriptor is borrowed for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut unread) };
    if rc != 0 {
        return 0;
    }
    u32::try_from(unread).unwrap_or(0)
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
/// log, where the runner acts on any line that starts with `::`, and a
/// terminal or log viewer on escape sequences.
///
/// In Actions the text is encoded as workflow-command data (`%`, CR, LF), so
/// it stays on the one line the caller starts with its own prefix. Elsewhere
/// line breaks and tabs stay readable. Either way every other hidden character
/// ([`is_hidden`]: ESC, BEL, DEL, C1, U+2028, bidi overrides, …) is written
/// as the percent-encoded bytes of its UTF-8 form (`%1B`), a line that would
/// start with `::` (after the blanks the runner trims) has its first colon
/// encoded as `%3A`, and the older `##[` command prefix is encoded wherever
/// it appears.
pub fn log_text(text: &str, in_actions: bool) -> String {
    let text = if in_actions {
        escape_data(text)
    } else {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                // Lines stay lines; a tab in a file name shows as the
                // whitespace it is (rustc's dep-info keeps it as such).
                '\n' | '\t' => out.push(c),
                // A lone CR ends a line for the runner too.
                c if is_hidden(c) => push_percent(&mut out, c),
                c => out.push(c),
            }
        }
        out
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

/// Escapes text for the step summary (GitHub-flavoured Markdown with HTML)
/// as prose: no heading, list, link, image, table cell, emphasis or raw
/// HTML can be injected.
///
/// `<`, `>` and `&` become entities; every other ASCII punctuation character
/// is backslash-escaped; line breaks and other hidden characters become
/// spaces, so the text cannot start a new block. This does **not** stop
/// cmark-gfm's extended autolinks: escapes are resolved before it looks for
/// them, so `a\@b\.example` still renders as a `mailto:` link. Text an
/// attacker chooses belongs in [`markdown_code`], where nothing is markup.
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
            c if is_hidden(c) => out.push(' '),
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

/// Escapes a workflow-command message as the runner's toolkit does (`%`,
/// CR, LF, which the runner decodes again), and every other hidden
/// character ([`is_hidden`]) as its percent-encoded UTF-8 bytes, which the
/// runner shows as they are (`%1B`): no escape sequence, bell or line
/// separator of an API answer reaches the log as itself.
pub fn escape_data(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            c if is_hidden(c) => push_percent(&mut out, c),
            c => out.push(c),
        }
    }
    out
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

    /// Every hidden character reaches the log encoded, in Actions and out,
    /// in plain lines, warnings and annotations alike.
    #[test]
    fn hidden_characters_reach_the_log_encoded() {
        let hostile = "a\u{1b}[31mred\u{7}\u{0}\t\u{7f}\u{85}\u{9b}2J\u{2028}\u{2029}\u{202e}txt\u{2066}b\r\nc 50%";
        assert_eq!(
            log_text(hostile, true),
            "a%1B[31mred%07%00%09%7F%C2%85%C2%9B2J%E2%80%A8%E2%80%A9%E2%80%AEtxt%E2%81%A6b%0D%0Ac 50%25"
        );
        assert_eq!(
            log_text(hostile, false),
            "a%1B[31mred%07%00\t%7F%C2%85%C2%9B2J%E2%80%A8%E2%80%A9%E2%80%AEtxt%E2%81%A6b%0D\nc 50%"
        );
        for line in [
            log_text(hostile, true),
            log_text(hostile, false),
            warning_line(hostile, true),
            warning_line(hostile, false),
            error_line(hostile, true),
            log_block(hostile),
            annotation("error", &Location::default(), hostile, hostile),
        ] {
            assert!(
                !line.chars().any(|c| is_hidden(c) && c != '\n' && c != '\t'),
                "{line:?}"
            );
        }
        // Plain text is untouched.
        assert_eq!(
            log_text("artifact 7: ok (é, ü, 漢)", true),
            "artifact 7: ok (é, ü, 漢)"
        );
    }

    /// A code span holds any text as it is, whatever backticks, spaces or
    /// pipes it starts, ends or is made of.
    #[test]
    fn code_spans_fence_any_text() {
        assert_eq!(markdown_code("plain"), "`plain`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("`a`"), "`` `a` ``");
        assert_eq!(markdown_code(" a"), "`  a `");
        assert_eq!(markdown_code("a "), "` a  `");
        assert_eq!(markdown_code("   "), "`   `");
        assert_eq!(markdown_code(""), "` `");
        assert_eq!(markdown_code("a|b"), "`a\\|b`");
        assert_eq!(markdown_code("x\n# h\u{2028}y\u{1b}"), "` x # h y  `");
        assert_eq!(markdown_code("````"), "````` ```` `````");
    }

    /// The runner's parser, as `actions/runner` writes it: the forms it
    /// accepts, and what it throws on.
    #[test]
    fn runner_files_parse_as_the_runner_parses_them() {
        let pairs = |text: &str| parse_runner_file(text).unwrap();
        let own = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        };
        assert_eq!(pairs(""), own(&[]));
        assert_eq!(pairs("a=1\n\nb=x=y\n"), own(&[("a", "1"), ("b", "x=y")]));
        assert_eq!(pairs("a=1"), own(&[("a", "1")]));
        assert_eq!(pairs("a=<<x\n"), own(&[("a", "<<x")]));
        assert_eq!(
            pairs("a<<EOF\nline 1\nline 2\nEOF\nb<<D\nD\n"),
            own(&[("a", "line 1\nline 2"), ("b", "")])
        );
        assert_eq!(pairs("a<<x=y\nv\nx=y\n"), own(&[("a", "v")]));
        assert_eq!(pairs("\u{feff}a=1\n"), own(&[("a", "1")]));
        assert_eq!(pairs("=v\n"), own(&[("", "v")]));
        assert_eq!(pairs("a<<EOF\nv\nEOF"), own(&[("a", "v")]));
        for (text, error) in [
            ("junk\n", "invalid format"),
            ("a<<\nx\n", "must not be empty"),
            ("<<EOF\nx\nEOF\n", "must not be empty"),
            ("a<<EOF\nv\n", "an open heredoc"),
            ("a<<EOF\nv", "without a newline"),
            ("ok=1\nx<<EOF\n", "an open heredoc"),
        ] {
            let err = parse_runner_file(text).unwrap_err();
            assert!(err.contains(error), "{text:?}: {err}");
        }
    }

    fn read(path: &std::path::Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    /// Outputs go in heredocs with fresh delimiters, on a fresh line, and
    /// read back to exactly what was meant.
    #[test]
    fn outputs_are_written_as_heredocs_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output");
        // What the step's own script wrote before, without a final newline.
        std::fs::write(&path, "mine=1").unwrap();
        let pairs = [("key", "k-v1-0"), ("source", "build"), ("run_id", "")];
        write_outputs_to(&path, &pairs).unwrap();
        let text = read(&path);
        assert!(text.starts_with("mine=1\nkey<<ghadelimiter_"), "{text}");
        let parsed = parse_runner_file(&text).unwrap();
        assert_eq!(
            parsed,
            [
                ("mine", "1"),
                ("key", "k-v1-0"),
                ("source", "build"),
                ("run_id", "")
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        let delimiters: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("ghadelimiter_"))
            .collect();
        assert_eq!(delimiters.len(), 3, "a fresh delimiter per value: {text}");
        assert!(write_outputs_to(&path, &[("x", "a\nx=evil")]).is_err());
    }

    /// What a build that found the output file could leave in it is
    /// refused before anything is written: our names already set (in any
    /// case), an open heredoc, a line the runner throws on, bytes that are
    /// not UTF-8 or a byte order mark that makes the runner read UTF-16.
    #[test]
    fn a_forged_output_file_is_refused_before_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output");
        let pairs = [("key", "k"), ("source", "build")];
        for (forged, error) in [
            ("source=artifact\n", "already sets the output \"source\""),
            ("SOURCE=artifact\n", "already sets the output \"source\""),
            (
                "x=1\nKey<<E\nforged\nE\n",
                "already sets the output \"key\"",
            ),
            ("x<<build\n", "an open heredoc"),
            (
                "key=forged\nsource=artifact\nx<<ghadelimiter_guess\n",
                "an open heredoc",
            ),
            ("x<<", "must not be empty"),
            ("garbage", "invalid format"),
        ] {
            std::fs::write(&path, forged).unwrap();
            let err = format!("{:#}", write_outputs_to(&path, &pairs).unwrap_err());
            assert!(err.contains(error), "{forged:?}: {err}");
            assert_eq!(read(&path), forged, "written despite the refusal");
        }
        for bytes in [&b"a=\xff\n"[..], b"\xff\xfea\x00=\x001\x00\n\x00"] {
            std::fs::write(&path, bytes).unwrap();
            let err = format!("{:#}", write_outputs_to(&path, &pairs).unwrap_err());
            assert!(err.contains("is not UTF-8"), "{err}");
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
    }

    /// An output file swapped for a link or a FIFO is refused, without
    /// following the link or waiting on the FIFO.
    #[cfg(unix)]
    #[test]
    fn an_output_file_that_is_not_a_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(write_outputs_to(&link, &[("key", "k")]).is_err());
        assert_eq!(read(&elsewhere), "");
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
        assert_eq!(rc, 0);
        let err = format!(
            "{:#}",
            write_outputs_to(&fifo, &[("key", "k")]).unwrap_err()
        );
        assert!(err.contains("is a FIFO"), "{err}");
        // Nor is the summary written through a link, or to a FIFO (where
        // opening it would wait for a reader for ever).
        assert!(append_to_summary_file(&link, "x").is_err());
        assert_eq!(read(&elsewhere), "");
        assert!(append_to_summary_file(&fifo, "x").is_err());
        let summary = dir.path().join("summary");
        append_to_summary_file(&summary, "a").unwrap();
        append_to_summary_file(&summary, "b").unwrap();
        assert_eq!(read(&summary), "ab");
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
