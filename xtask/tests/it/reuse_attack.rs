//! `gpu-archive` against a hostile API, a hostile blob host and a hostile
//! build, through the real binary (issue 21): a token the HTTP client would
//! panic on, a stalling API, escape bytes and links in API text, a build
//! that forges the step's outputs, a symlinked `--out`. Each test is one of
//! the breaks the issue found, or an attack on the fix, and fails on the
//! binary before the fix. The bounds in time and bytes of the transfer
//! itself, against a hand-written blob host that trickles, stalls and lies
//! about lengths, are tested in `crates/ci-trust/src/archive/tests.rs`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::archive::{Shims, artifact_name, artifact_zip, gpu_workspace};
use crate::support::{Fixture, stderr, stdout, tool_available, xtask_cmd};

const TOKEN: &str = "ghs_secret";
const RUN_HEAD: &str = "5555555555555555555555555555555555555555";
const MAIN_HEAD: &str = "6666666666666666666666666666666666666666";

/// A GitHub API on 127.0.0.1 that lists one trusted artifact (5, of run
/// 500) named `name`, serving `zip`; `edit_run` changes the run first.
struct Github {
    rt: tokio::runtime::Runtime,
    server: MockServer,
}

impl Github {
    fn trusted(name: &str, zip: Vec<u8>, edit_run: impl FnOnce(&mut Value)) -> Github {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(MockServer::start());
        let digest: String = Sha256::digest(&zip)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut run = json!({
            "id": 500, "event": "schedule", "head_branch": "main", "head_sha": RUN_HEAD,
            "path": ".github/workflows/ci-cache-publish.yml",
            "created_at": "2026-11-30T03:00:00Z",
            "repository": {"id": 42, "full_name": "o/r"},
            "head_repository": {"id": 42, "full_name": "o/r"}
        });
        edit_run(&mut run);
        let github = Github { rt, server };
        github.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r"))
                .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 42}))),
        );
        github.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/actions/artifacts"))
                .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                    "artifacts": [{
                        "id": 5, "name": name, "size_in_bytes": zip.len(), "expired": false,
                        "digest": format!("sha256:{digest}"),
                        "workflow_run": {"id": 500, "repository_id": 42, "head_repository_id": 42}
                    }]
                }))),
        );
        github.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/actions/runs/500"))
                .respond_with(ResponseTemplate::new(200).set_body_json(run)),
        );
        github.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/branches/main"))
                .respond_with(
                    ResponseTemplate::new(200)
                        .set_body_json(json!({"name": "main", "commit": {"sha": MAIN_HEAD}})),
                ),
        );
        github.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/compare/{MAIN_HEAD}...{RUN_HEAD}")))
                .respond_with(
                    ResponseTemplate::new(200).set_body_json(json!({"status": "behind"})),
                ),
        );
        let blob = format!("{}/blob/5", github.server.uri());
        github.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/actions/artifacts/5/zip"))
                .respond_with(ResponseTemplate::new(302).insert_header("location", blob)),
        );
        github.mount(
            Mock::given(method("GET"))
                .and(path("/blob/5"))
                .respond_with(ResponseTemplate::new(200).set_body_bytes(zip)),
        );
        github
    }

    fn mount(&self, mock: Mock) {
        self.rt.block_on(mock.mount(&self.server));
    }

    fn uri(&self) -> String {
        self.server.uri()
    }

    fn requests(&self) -> Vec<wiremock::Request> {
        self.rt
            .block_on(self.server.received_requests())
            .unwrap_or_default()
    }
}

/// A trust policy outside the tree, with `extra` lines.
fn trust_policy(scratch: &Fixture, extra: &str) -> PathBuf {
    let file = scratch.join("trusted-ci-trust.toml");
    std::fs::write(&file, format!("default-branch = \"main\"\n{extra}")).unwrap();
    file
}

/// `gpu-archive --reuse` of `ws` into `out` against `api`, under the shims
/// (so that a fallback build is refused, and shows in their log), with the
/// Actions environment and `env` on top of it.
fn reuse(
    ws: &Fixture,
    shims: &Shims,
    api: &str,
    trust: &Path,
    out: Option<&Path>,
    env: &[(&str, OsString)],
) -> Output {
    let mut cmd = xtask_cmd(&["gpu-archive", "--reuse", "--trust-policy"]);
    cmd.arg(trust).arg("--root").arg(ws.path());
    if let Some(out) = out {
        cmd.arg("--out").arg(out);
    }
    cmd.env("GITHUB_API_URL", api)
        .env("GITHUB_REPOSITORY", "o/r")
        .env("GITHUB_RUN_ID", "900")
        .env("GITHUB_TOKEN", TOKEN);
    for (name, value) in env {
        cmd.env(name, value);
    }
    shims.apply(&mut cmd);
    cmd.output().unwrap()
}

/// What the runner takes from an output file: each name's last value.
pub fn runner_outputs(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    ci_trust::gha::parse_runner_file(&text)
        .unwrap_or_else(|err| panic!("the runner would fail the step: {err}\n{text}"))
        .into_iter()
        .collect()
}

/// No character that moves a terminal's cursor, rings, or ends a line
/// other than LF, anywhere in `text`.
fn assert_no_hidden(text: &str) {
    for (index, line) in text.lines().enumerate() {
        assert!(
            !line
                .chars()
                .any(|c| ci_trust::gha::is_hidden(c) && c != '\t'),
            "line {index} holds a hidden character: {line:?}"
        );
    }
}

/// A `GITHUB_TOKEN` pasted with a trailing newline made the HTTP client
/// panic building its header (exit 101, no fallback, no outputs). It is
/// used without the newline, with a warning.
#[test]
fn a_token_ending_in_a_newline_is_used_without_it() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    let scratch = Fixture::new();
    let outputs = scratch.join("github_output");
    std::fs::write(&outputs, "").unwrap();
    let trust = trust_policy(&scratch, "");
    let result = reuse(
        &ws,
        &shims,
        &api.uri(),
        &trust,
        Some(&scratch.join("out")),
        &[
            ("GITHUB_TOKEN", format!("{TOKEN}\n").into()),
            ("GITHUB_ACTIONS", "true".into()),
            ("GITHUB_OUTPUT", outputs.clone().into()),
        ],
    );
    let text = format!("{}{}", stdout(&result), stderr(&result));
    assert_eq!(result.status.code(), Some(0), "{text}");
    assert!(
        text.contains("::warning::GITHUB_TOKEN ends in a newline"),
        "{text}"
    );
    assert!(
        text.contains("archive source: reused artifact 5 from run 500"),
        "{text}"
    );
    for request in api.requests() {
        if !request.url.path().starts_with("/repos/") {
            continue; // the blob download carries no credential at all
        }
        assert_eq!(
            request.headers.get("authorization").unwrap(),
            &format!("Bearer {TOKEN}")
        );
    }
    assert_eq!(runner_outputs(&outputs)["source"], "artifact");
}

/// Hostile bytes in every variable the reuse path reads (a control byte or
/// bytes that are not UTF-8 in the token, a broken API URL, an escape
/// sequence in the repository, an overflowing run id) are a reason to
/// build, never a panic: the fallback build starts (the shims refuse it, so
/// the exit is 2), and the reason reaches the log encoded.
#[test]
fn hostile_environment_values_fall_back_to_the_build() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    let cases: Vec<(&str, OsString, &str)> = vec![
        (
            "GITHUB_TOKEN",
            "ghs\u{7}secret".into(),
            "GITHUB_TOKEN holds a character that cannot be sent in an HTTP header (U+0007)",
        ),
        (
            "GITHUB_TOKEN",
            "ghs\r\nX-Evil: 1".into(),
            "GITHUB_TOKEN holds a character that cannot be sent",
        ),
        (
            "GITHUB_TOKEN",
            OsString::from_vec(b"ghs\xffsecret".to_vec()),
            "GITHUB_TOKEN holds a character that cannot be sent in an HTTP header (U+FFFD)",
        ),
        ("GITHUB_TOKEN", "ghs secret".into(), "U+0020"),
        (
            "GITHUB_API_URL",
            format!("{}\n", api.uri()).into(),
            "GITHUB_API_URL=",
        ),
        (
            "GITHUB_API_URL",
            "http://[::1".into(),
            "GITHUB_API_URL=\"http://[::1\" is not a URL",
        ),
        (
            "GITHUB_API_URL",
            "http://user:pw@127.0.0.1:1".into(),
            "must name a host and no credentials",
        ),
        (
            "GITHUB_REPOSITORY",
            "o/r\u{1b}[2J".into(),
            "GITHUB_REPOSITORY=\"o/r%1B[2J\" is not `owner/name`",
        ),
        ("GITHUB_RUN_ID", "9".repeat(30).into(), "GITHUB_RUN_ID="),
    ];
    for (var, value, reason) in cases {
        let out = scratch.join("out");
        let result = reuse(
            &ws,
            &shims,
            &api.uri(),
            &trust,
            Some(&out),
            &[(var, value.clone())],
        );
        let text = stderr(&result);
        assert_ne!(
            result.status.code(),
            Some(101),
            "{var}={value:?} panicked:\n{text}"
        );
        assert_eq!(result.status.code(), Some(2), "{var}={value:?}:\n{text}");
        assert!(
            text.contains("artifact reuse needs the Actions environment:")
                && text.contains(reason)
                && text.contains("; building instead"),
            "{var}={value:?}: {reason:?} not in\n{text}"
        );
        assert!(!text.contains("panicked"), "{text}");
        assert!(
            shims.log().contains("cargo nextest archive"),
            "{var}={value:?}: the fallback build did not start:\n{}",
            shims.log()
        );
        assert_no_hidden(&text);
    }
}

/// ESC, BEL, C1 controls, line separators and bidi overrides in API error
/// text reached the log raw (only `%`, CR and LF were encoded). Every one
/// is encoded now, in Actions and outside it.
#[test]
fn escape_bytes_in_api_text_reach_the_log_encoded() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    let hostile = "gone \u{1b}[2J\u{1b}]0;owned\u{7}\u{85}\u{9b}31m\u{2028}next\u{202e}txt";
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/runs/500"))
            .respond_with(ResponseTemplate::new(404).set_body_json(json!({"message": hostile})))
            .with_priority(1),
    );
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    for in_actions in ["true", "false"] {
        let result = reuse(
            &ws,
            &shims,
            &api.uri(),
            &trust,
            Some(&scratch.join("out")),
            &[("GITHUB_ACTIONS", in_actions.into())],
        );
        let (out, err) = (stdout(&result), stderr(&result));
        assert_eq!(result.status.code(), Some(2), "{err}");
        assert!(
            err.contains("gone %1B[2J%1B]0;owned%07%C2%85%C2%9B31m%E2%80%A8next%E2%80%AEtxt"),
            "{err}"
        );
        assert_no_hidden(&out);
        assert_no_hidden(&err);
    }
}

/// Runs `render` on the Markdown at `path` with GitHub's renderer
/// (`cmarkgfm`); None, with a `SKIPPED` line, when it is not installed.
fn render_gfm(markdown: &str) -> Option<String> {
    if !tool_available(
        "cmarkgfm",
        Command::new("python3").args(["-c", "import cmarkgfm"]),
        "`pip install cmarkgfm` (GitHub's cmark-gfm)",
    ) {
        return None;
    }
    let script = "import sys, cmarkgfm\nfrom cmarkgfm.cmark import Options\nsys.stdout.write(cmarkgfm.github_flavored_markdown_to_html(sys.stdin.read(), options=Options.CMARK_OPT_UNSAFE))\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), markdown.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    Some(String::from_utf8(output.stdout).unwrap())
}

/// `foo\@evil\.example` (escaped prose) still rendered as a `mailto:` link
/// under cmark-gfm, and so did `xmpp:` and a branch named like an e-mail
/// address. The summary the binary writes, with attacker text from the API
/// in it (the accepted run's `created_at`), renders no link, image, mention
/// or HTML under GitHub's own renderer: the text stays in code spans.
#[test]
fn attacker_text_in_the_step_summary_renders_no_link() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let hostile = "fix@evil.example foo\\@evil\\.example xmpp:a@evil.example mailto:b@evil.example www.evil.example https://evil.example <img src=x> @octocat ` | x";
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |run| {
        run["created_at"] = json!(hostile);
    });
    let scratch = Fixture::new();
    let summary = scratch.join("summary.md");
    let trust = trust_policy(&scratch, "");
    let result = reuse(
        &ws,
        &shims,
        &api.uri(),
        &trust,
        Some(&scratch.join("out")),
        &[("GITHUB_STEP_SUMMARY", summary.clone().into())],
    );
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let markdown = std::fs::read_to_string(&summary).unwrap();
    assert!(markdown.contains("evil.example"), "{markdown}");
    let Some(html) = render_gfm(&markdown) else {
        return;
    };
    assert!(!html.contains("<a ") && !html.contains("<img"), "{html}");
    // Outside the code elements, no trace of the hostile text.
    let mut outside = html.clone();
    while let Some(start) = outside.find("<code>") {
        let end = outside[start..].find("</code>").unwrap() + start + "</code>".len();
        outside.replace_range(start..end, "");
    }
    for marker in ["evil", "@", "octocat", "xmpp", "mailto", "&lt;img"] {
        assert!(
            !outside.contains(marker),
            "{marker:?} outside code:\n{html}"
        );
    }
    assert!(html.contains("evil.example"), "{html}");
}

/// The reuse path's worst case against an API that stalls every run lookup
/// just under the per-request timeout: it falls back once the trust
/// policy's deadline has passed, not after 20 timeouts (38 s here before).
#[test]
fn a_stalling_api_falls_back_within_the_deadline() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let name = artifact_name(&ws, &shims);
    let api = Github::trusted(&name, artifact_zip(), |_| {});
    let mut listing = Vec::new();
    for index in 0..20u64 {
        listing.push(json!({
            "id": 100 + index, "name": name, "size_in_bytes": 10, "expired": false,
            "workflow_run": {"id": 1000 + index, "repository_id": 42, "head_repository_id": 42}
        }));
        api.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/actions/runs/{}", 1000 + index)))
                .respond_with(
                    ResponseTemplate::new(200)
                        .set_delay(Duration::from_millis(1900))
                        .set_body_json(json!({"id": 1000 + index})),
                ),
        );
    }
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"artifacts": listing})))
            .with_priority(1),
    );
    let scratch = Fixture::new();
    let trust = trust_policy(
        &scratch,
        "[artifacts]\ntimeout-secs = 2\nreuse-deadline-secs = 4\n",
    );
    let started = Instant::now();
    let result = reuse(
        &ws,
        &shims,
        &api.uri(),
        &trust,
        Some(&scratch.join("out")),
        &[],
    );
    let took = started.elapsed();
    let text = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "artifact reuse failed: the reuse path passed its deadline of 4 s (artifacts.reuse-deadline-secs)"
        ),
        "{text}"
    );
    // The deadline plus 5 s, with room for the key and the refused build.
    assert!(
        took < Duration::from_secs(4 + 5 + 4),
        "took {took:?}\n{text}"
    );
}

/// The one-package workspace the output-forging attacks build: `app`, a
/// binary whose build script is `build_rs`, and the policy `policy`.
fn app_workspace(build_rs: &str, policy: &str) -> Fixture {
    let f = Fixture::new();
    f.file(
        "Cargo.toml",
        "[workspace]\nmembers = [\"app\"]\nresolver = \"2\"\n",
    )
    .file(
        "Cargo.lock",
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\n",
    )
    .file(
        "app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .file("app/src/main.rs", "fn main() { println!(\"app ran\"); }\n")
    .file("app/build.rs", build_rs)
    .file(".github/ci-trust.toml", policy);
    f
}

/// Build-script source, spliced into the scripts below: the
/// nearest ancestor process whose environment holds `name`, as a hostile
/// build script finds the runner's files.
const FROM_ANCESTORS: &str = r#"/// The value of `name` in the environment of the nearest ancestor that has it.
fn from_ancestors(name: &str) -> Option<(u32, String)> {
    let mut pid = std::process::id();
    for _ in 0..64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let ppid: u32 = stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()?;
        if let Ok(environ) = std::fs::read(format!("/proc/{ppid}/environ")) {
            for var in environ.split(|b| *b == 0) {
                if let Some(value) = var.strip_prefix(format!("{name}=").as_bytes()) {
                    return Some((ppid, String::from_utf8_lossy(value).into_owned()));
                }
            }
        }
        if ppid <= 1 { return None; }
        pid = ppid;
    }
    None
}
"#;

/// A workspace whose build script does what a hostile one would: find
/// `$GITHUB_OUTPUT` in an ancestor's `/proc/<pid>/environ`, report where
/// (to `probe`), and run `attack` (Rust statements, with `path` the output
/// file). One `build` archive, so no cargo-nextest is needed.
fn forging_workspace(probe: &Path, attack: &str) -> Fixture {
    app_workspace(
        &format!(
            r#"use std::io::Write;
{FROM_ANCESTORS}
fn main() {{
    println!("cargo:rerun-if-changed=build.rs");
    let found = from_ancestors("GITHUB_OUTPUT");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let no_new_privs = status.lines().find(|l| l.starts_with("NoNewPrivs:")).unwrap_or("");
    std::fs::write({probe:?}, format!("{{found:?}}\n{{no_new_privs}}\n")).unwrap();
    let Some((_, path)) = found else {{ return }};
    let _ = &path;
    {attack}
}}
"#
        ),
        // In the checkout: in the key tree the build sees no ancestor's
        // environment (key_tree::a_build_in_the_key_tree_cannot_reach_the_checkout).
        "[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"-p\", \"app\"]\nbinaries = [\"app\"]\n[verify]\nkey-tree = \"off\"\n",
    )
}

/// Runs `gpu-archive` for `ws` under a shell that keeps `$GITHUB_OUTPUT`
/// in its environment, as the step's shell does (`bash -e {0}` runs
/// `cargo xtask …`, which does not `exec`).
fn build_under_a_step_shell(
    ws: &Fixture,
    scratch: &Fixture,
    outputs: &Path,
    path: Option<&Path>,
) -> Output {
    let binary = std::env::var_os("NEXTEST_BIN_EXE_xtask")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_xtask").into());
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "\"$@\"; exit $?", "sh"])
        .arg(binary)
        .args(["gpu-archive", "--out"])
        .arg(scratch.join("out"))
        .arg("--root")
        .arg(ws.path());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("GITHUB_") || name.starts_with("ACTIONS_") {
            cmd.env_remove(name);
        }
    }
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", outputs)
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .output()
        .unwrap()
}

/// A `PATH` with what a build and the daemon below need, and no strace:
/// with `[verify] tracer = "strace"` the fresh build then runs untraced
/// (with a warning), so that neither tracer's own handling of the build's
/// processes (strace waits for them, fanotify kills them) hides
/// gpu-archive's.
fn path_without_tracers() -> Fixture {
    let bin = Fixture::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in ["cargo", "rustc", "rustup", "cc", "sh", "sleep", "printf"] {
        if let Some(found) = std::env::split_paths(&path)
            .map(|dir| dir.join(tool))
            .find(|candidate| candidate.is_file())
        {
            std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
        }
    }
    bin
}

/// A build script found `$GITHUB_OUTPUT` through `/proc/<ancestor>/environ`
/// and appended `key=…`, `source=artifact` and an open heredoc, which
/// swallowed gpu-archive's own lines: the runner read the attacker's
/// values. Now the change to the runner's file fails the step, nothing is
/// written after it, and `--out` is emptied.
#[test]
fn a_build_that_forges_the_outputs_fails_the_step() {
    let scratch = Fixture::new();
    let probe = scratch.join("probe");
    let ws = forging_workspace(
        &probe,
        r#"let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    write!(file, "key=forged\nsource=artifact\nartifact_id=1\nrun_id=2\nswallow<<EOF\n").unwrap();"#,
    );
    let outputs = scratch.join("github_output");
    std::fs::write(&outputs, "").unwrap();
    let result = build_under_a_step_shell(&ws, &scratch, &outputs, None);
    let text = format!("{}{}", stdout(&result), stderr(&result));
    let found = std::fs::read_to_string(&probe).unwrap_or_default();
    assert!(
        found.starts_with("Some("),
        "the build script did not find $GITHUB_OUTPUT, so this test proves nothing: {found:?}\n{text}"
    );
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the runner's files changed while gpu-archive ran")
            && text.contains("$GITHUB_OUTPUT"),
        "{text}"
    );
    // Nothing of ours was written after the forgery, and nothing stays in --out.
    assert_eq!(
        std::fs::read_to_string(&outputs).unwrap(),
        "key=forged\nsource=artifact\nartifact_id=1\nrun_id=2\nswallow<<EOF\n"
    );
    let left: Vec<_> = std::fs::read_dir(scratch.join("out"))
        .map(|entries| entries.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// A daemon the build script leaves behind (a double fork) waits for the
/// build to end, then appends `source=artifact` after gpu-archive's lines,
/// where the last word wins. Every process the build left is killed before
/// the outputs are written: a successful step's outputs stay ours. The
/// build runs untraced here, the case where no tracer stood in the way.
#[test]
fn a_daemon_the_build_leaves_cannot_append_to_the_outputs() {
    let scratch = Fixture::new();
    let probe = scratch.join("probe");
    let ws = forging_workspace(
        &probe,
        r#"std::process::Command::new("sh")
        .args(["-c", "( sleep 6; printf 'source=artifact\\nkey=forged\\n' >> \"$1\" ) >/dev/null 2>&1 </dev/null &", "sh", &path])
        .status()
        .unwrap();"#,
    );
    ws.file(
        ".github/ci-trust.toml",
        "[verify]\ntracer = \"strace\"\nkey-tree = \"off\"\n[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"-p\", \"app\"]\nbinaries = [\"app\"]\n",
    );
    let outputs = scratch.join("github_output");
    std::fs::write(&outputs, "").unwrap();
    let bin = path_without_tracers();
    let result = build_under_a_step_shell(&ws, &scratch, &outputs, Some(bin.path()));
    let text = format!("{}{}", stdout(&result), stderr(&result));
    assert!(text.contains("the fresh build is NOT traced"), "{text}");
    let found = std::fs::read_to_string(&probe).unwrap_or_default();
    assert!(
        found.starts_with("Some("),
        "the build script did not find $GITHUB_OUTPUT:\n{text}"
    );
    // Nor could it have gained privileges (sudo on a hosted runner).
    assert!(found.contains("NoNewPrivs:\t1"), "{found}");
    // Past the daemon's time.
    let written = std::fs::metadata(&probe).unwrap().modified().unwrap();
    while written.elapsed().unwrap_or_default() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(200));
    }
    match result.status.code() {
        // The usual case: the daemon was killed before it woke.
        Some(0) => {
            assert!(
                text.contains("::warning::killed ")
                    && text.contains(" process(es) the build left running"),
                "{text}"
            );
            let parsed = runner_outputs(&outputs);
            assert_eq!(parsed["source"], "build", "{parsed:?}");
            assert!(parsed["key"].starts_with("gpu-archive-v1-"), "{parsed:?}");
        }
        // A build slower than the daemon's sleep: its write is caught.
        Some(2) => assert!(
            text.contains("the runner's files changed while gpu-archive ran"),
            "{text}"
        ),
        other => panic!("exit {other:?}:\n{text}"),
    }
}

/// A committed `target/gpu-archive` symlink sent the reused archives (and
/// the cleanup of a damaged restore) where the pull request chose. An
/// `--out` that is, or lies under, a link inside the tree is refused before
/// anything is looked up or written.
#[test]
fn an_out_through_a_link_inside_the_tree_is_refused() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    let scratch = Fixture::new();
    let elsewhere = scratch.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join("target/gpu-archive")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join("linked")).unwrap();
    let trust = trust_policy(&scratch, "");
    for (out, link) in [
        (None, ws.join("target/gpu-archive")),
        (Some(ws.join("linked/out")), ws.join("linked")),
        (
            Some(ws.join("target/gpu-archive")),
            ws.join("target/gpu-archive"),
        ),
    ] {
        let result = reuse(&ws, &shims, &api.uri(), &trust, out.as_deref(), &[]);
        let text = stderr(&result);
        assert_eq!(result.status.code(), Some(2), "{text}");
        assert!(
            text.contains(&format!(
                "goes through the symbolic link {}, which lies inside the tree being keyed",
                std::fs::canonicalize(ws.path())
                    .unwrap()
                    .join(link.strip_prefix(ws.path()).unwrap())
                    .display()
            )) || text.contains(&format!(
                "goes through the symbolic link {}",
                link.display()
            )),
            "{text}"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
    assert!(api.requests().is_empty(), "looked up before refusing");
}

/// A blob host written by hand (a mock framework will not trickle or lie
/// about lengths): to each connection it sends a 200 without a
/// `Content-Length`, then `body`, then `chunk` bytes every `every` until
/// `total` has passed. Returns its URL.
fn hand_written_blob_host(body: Vec<u8>, chunk: usize, every: Duration, total: Duration) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let head =
                    "HTTP/1.1 200 OK\r\ncontent-type: application/zip\r\nconnection: close\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() || stream.write_all(&body).is_err() {
                    return;
                }
                let started = Instant::now();
                while started.elapsed() < total {
                    if stream.write_all(&vec![0u8; chunk]).is_err() {
                        return;
                    }
                    std::thread::sleep(every);
                }
            });
        }
    });
    format!("http://127.0.0.1:{port}/blob")
}

/// The trusted artifact's download goes to `location`, and the listing
/// says it is `size` bytes with the SHA-256 `digest` (hex), or none.
fn redirect_download(api: &Github, name: &str, size: u64, digest: Option<&str>, location: &str) {
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "artifacts": [{
                    "id": 5, "name": name, "size_in_bytes": size, "expired": false,
                    "digest": digest.map(|hex| format!("sha256:{hex}")),
                    "workflow_run": {"id": 500, "repository_id": 42, "head_repository_id": 42}
                }]
            })))
            .with_priority(1),
    );
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/5/zip"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", location))
            .with_priority(1),
    );
}

/// A blob host sending 64 bytes at a time kept a download alive as long as
/// it liked: the timeout was per chunk. The minimum rate over a window of
/// `timeout-secs` ends it (here after 2 s), and the deadline bounds it.
#[test]
fn a_trickling_blob_host_falls_back_within_the_bound() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let name = artifact_name(&ws, &shims);
    let api = Github::trusted(&name, artifact_zip(), |_| {});
    let host = hand_written_blob_host(
        Vec::new(),
        64,
        Duration::from_millis(300),
        Duration::from_secs(60),
    );
    // A digest the trickle never gets to be compared with.
    redirect_download(&api, &name, 3_000_000, Some(&"0".repeat(64)), &host);
    let scratch = Fixture::new();
    let trust = trust_policy(
        &scratch,
        "[artifacts]\ntimeout-secs = 2\nreuse-deadline-secs = 6\n",
    );
    let started = Instant::now();
    let result = reuse(
        &ws,
        &shims,
        &api.uri(),
        &trust,
        Some(&scratch.join("out")),
        &[],
    );
    let took = started.elapsed();
    let text = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the download is too slow:")
            && text.contains("under the minimum of 65536 bytes/s; building instead"),
        "{text}"
    );
    assert!(took < Duration::from_secs(6 + 5 + 4), "took {took:?}");
}

/// A response without `Content-Length` was not cut off at the listing's
/// `size_in_bytes` (only at `max-download-bytes`): it is now, as soon as it
/// passes it.
#[test]
fn an_unannounced_body_is_cut_off_at_the_listed_size() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let name = artifact_name(&ws, &shims);
    let zip = artifact_zip();
    let api = Github::trusted(&name, zip.clone(), |_| {});
    let host = hand_written_blob_host(
        zip.clone(),
        1 << 16,
        Duration::from_millis(1),
        Duration::from_secs(20),
    );
    let digest: String = Sha256::digest(&zip)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    redirect_download(&api, &name, zip.len() as u64, Some(&digest), &host);
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    let result = reuse(
        &ws,
        &shims,
        &api.uri(),
        &trust,
        Some(&scratch.join("out")),
        &[],
    );
    let text = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!(
            "the download is longer than the listing's size_in_bytes ({}): cut off at",
            zip.len()
        )),
        "{text}"
    );
}

/// `compare` was asked again for every candidate: candidates from runs of
/// one commit now cost one comparison.
#[test]
fn compare_is_asked_once_per_commit_within_a_run() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let name = artifact_name(&ws, &shims);
    let api = Github::trusted(&name, artifact_zip(), |_| {});
    let mut listing = Vec::new();
    for index in 0..6u64 {
        listing.push(json!({
            "id": 100 + index, "name": name, "size_in_bytes": 10, "expired": false,
            "workflow_run": {"id": 1000 + index, "repository_id": 42, "head_repository_id": 42}
        }));
        api.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/actions/runs/{}", 1000 + index)))
                .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                    "id": 1000 + index, "event": "push", "head_branch": "main", "head_sha": RUN_HEAD,
                    "path": ".github/workflows/ci-cache-publish.yml",
                    "repository": {"id": 42, "full_name": "o/r"},
                    "head_repository": {"id": 42, "full_name": "o/r"}
                }))),
        );
    }
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"artifacts": listing})))
            .with_priority(1),
    );
    api.mount(
        Mock::given(method("GET"))
            .and(path(format!("/repos/o/r/compare/{MAIN_HEAD}...{RUN_HEAD}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "diverged"})))
            .with_priority(1),
    );
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    let result = reuse(
        &ws,
        &shims,
        &api.uri(),
        &trust,
        Some(&scratch.join("out")),
        &[],
    );
    let text = stderr(&result);
    assert!(text.contains("(6 skipped:"), "{text}");
    let compares = api
        .requests()
        .iter()
        .filter(|r| r.url.path().starts_with("/repos/o/r/compare/"))
        .count();
    assert_eq!(compares, 1, "{text}");
}

/// A zstd frame declaring a tar member of 128 GiB in 4 MB: RLE blocks of
/// zeros, 4 bytes each for 128 KiB.
fn zstd_bomb() -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header
        .set_path("target/nextest/binaries-metadata.json")
        .unwrap();
    header.set_size(1 << 37);
    header.set_mode(0o644);
    header.set_cksum();
    let block = |last: bool, kind: u32, size: u32| {
        (u32::from(last) | (kind << 1) | (size << 3)).to_le_bytes()[..3].to_vec()
    };
    let mut frame = 0xFD2F_B528u32.to_le_bytes().to_vec();
    frame.extend([0x00, 7 << 3]);
    frame.extend(block(false, 0, 512));
    frame.extend(header.as_bytes());
    for _ in 0..1_000_000 {
        frame.extend(block(false, 1, 128 << 10));
        frame.push(0);
    }
    frame.extend(block(true, 1, 128 << 10));
    frame.push(0);
    frame
}

/// A pull request can save a cache in its own scope, and its consumer run
/// restores it on an exact hit: a zstd bomb there held the step until the
/// job's timeout. The restore is verified within the same deadline.
#[test]
fn a_cache_restore_that_decodes_for_ever_is_cut_off_at_the_deadline() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let scratch = Fixture::new();
    let out = scratch.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("cuda-tests.tar.zst"), zstd_bomb()).unwrap();
    std::fs::write(
        out.join("cuda-tutorial.tar.zst"),
        crate::archive::zstd_tar(&[("cuda_tutorial", b"\x7fELF")]),
    )
    .unwrap();
    let trust = trust_policy(&scratch, "[artifacts]\nreuse-deadline-secs = 3\n");
    let mut cmd = xtask_cmd(&["gpu-archive", "--cache-hit", "--trust-policy"]);
    cmd.arg(&trust)
        .arg("--out")
        .arg(&out)
        .arg("--root")
        .arg(ws.path());
    shims.apply(&mut cmd);
    let started = Instant::now();
    let result = cmd.output().unwrap();
    let took = started.elapsed();
    let text = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the restored cache is damaged: the reuse path passed its deadline of 3 s")
            && text.contains("while verifying the archives; not using it"),
        "{text}"
    );
    assert!(took < Duration::from_secs(3 + 5 + 4), "took {took:?}");
    assert!(!out.join("cuda-tests.tar.zst").exists());
}

/// Output and summary files that are not regular files (a FIFO, where a
/// plain open would wait for a reader for ever; a directory; a link) are
/// refused with the reason, without hanging and without a panic.
#[test]
fn runner_files_that_are_not_regular_files_are_refused() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    let fifo = scratch.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let dir = scratch.join("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let target = scratch.join("target-file");
    std::fs::write(&target, "").unwrap();
    let link = scratch.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    for var in ["GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"] {
        for (file, why) in [
            (&fifo, "is a FIFO"),
            (&dir, "cannot open"),
            (&link, "cannot open"),
        ] {
            let started = Instant::now();
            let result = reuse(
                &ws,
                &shims,
                &api.uri(),
                &trust,
                Some(&scratch.join("out")),
                &[(var, file.clone().into())],
            );
            let text = stderr(&result);
            assert_eq!(
                result.status.code(),
                Some(2),
                "{var}={}:\n{text}",
                file.display()
            );
            assert!(
                text.contains(why),
                "{var}={}: {why:?} not in\n{text}",
                file.display()
            );
            assert!(started.elapsed() < Duration::from_secs(20));
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
        }
    }
}

/// A workspace whose build script leaves a daemon whose main thread has
/// exited on its own (`SYS_exit`, not `exit_group`) while another thread
/// runs on: `/proc/<pid>/stat` then says `Z`, as for a dead process, and
/// the process has no other entry in `/proc`. Once `$GITHUB_OUTPUT` holds
/// gpu-archive's lines, the thread appends `source=artifact` and
/// `key=forged`, where the last word wins.
fn zombie_leader_workspace(probe: &Path) -> Fixture {
    app_workspace(
        &format!(
            r#"use std::io::Write;
{FROM_ANCESTORS}
/// Ends the calling thread only; the process lives on in its other threads.
fn exit_this_thread() -> ! {{
    #[cfg(target_arch = "x86_64")]
    unsafe {{ std::arch::asm!("syscall", in("rax") 60usize, in("rdi") 0usize, options(noreturn)) }}
    #[cfg(target_arch = "aarch64")]
    unsafe {{ std::arch::asm!("svc 0", in("x8") 93usize, in("x0") 0usize, options(noreturn)) }}
}}
fn main() {{
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(path) = std::env::var("FORGE_OUTPUT") {{
        std::thread::spawn(move || {{
            for _ in 0..400 {{
                std::thread::sleep(std::time::Duration::from_millis(25));
                if std::fs::read_to_string(&path).unwrap_or_default().contains("run_id<<") {{
                    std::thread::sleep(std::time::Duration::from_millis(300));
                    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
                    file.write_all(b"source=artifact\nkey=forged\n").unwrap();
                    break;
                }}
            }}
            std::process::exit(0);
        }});
        exit_this_thread();
    }}
    let found = from_ancestors("GITHUB_OUTPUT");
    std::fs::write({probe:?}, format!("{{found:?}}\n")).unwrap();
    let Some((_, path)) = found else {{ return }};
    std::process::Command::new(std::env::current_exe().unwrap())
        .env("FORGE_OUTPUT", &path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
}}
"#
        ),
        "[verify]\ntracer = \"strace\"\n# The checkout build: the key tree would hide the runner files it attacks.\nkey-tree = \"off\"\n[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"-p\", \"app\"]\nbinaries = [\"app\"]\n",
    )
}

/// A daemon whose main thread has exited while another runs on looks dead
/// in `/proc/<pid>/stat` (state `Z`), so it was not killed: after
/// gpu-archive had written and read back its outputs, it appended
/// `source=artifact` (the runner takes the last value). Such a process is
/// live, and is killed with the rest.
#[test]
fn a_daemon_whose_main_thread_exited_is_killed_too() {
    let scratch = Fixture::new();
    let probe = scratch.join("probe");
    let ws = zombie_leader_workspace(&probe);
    let outputs = scratch.join("github_output");
    std::fs::write(&outputs, "").unwrap();
    let bin = path_without_tracers();
    let result = build_under_a_step_shell(&ws, &scratch, &outputs, Some(bin.path()));
    let text = format!("{}{}", stdout(&result), stderr(&result));
    let found = std::fs::read_to_string(&probe).unwrap_or_default();
    assert!(
        found.starts_with("Some("),
        "the build script did not find $GITHUB_OUTPUT:\n{text}"
    );
    assert_eq!(result.status.code(), Some(0), "{text}");
    // Past the daemon's time: it acts within about a second of the outputs.
    std::thread::sleep(Duration::from_secs(3));
    let parsed = runner_outputs(&outputs);
    assert_eq!(parsed["source"], "build", "{parsed:?}");
    assert!(parsed["key"].starts_with("gpu-archive-v1-"), "{parsed:?}");
    assert!(
        text.contains("::warning::killed ") && text.contains(" process(es) the build left running"),
        "{text}"
    );
}

/// `cmd` run under strace, every `fsync`/`fdatasync` of it and its children
/// held for `delay` before it returns: a disk that takes that long to write
/// back what the download left in the page cache (a 4 GiB artifact on a
/// hosted runner's disk takes tens of seconds).
fn under_slow_fsync(cmd: &Command, delay: &str) -> Command {
    let mut wrapped = Command::new("strace");
    wrapped
        .args(["-f", "--seccomp-bpf", "-qq", "-o", "/dev/null"])
        .args(["-e", "trace=fsync,fdatasync"])
        .arg("-e")
        .arg(format!("inject=fsync,fdatasync:delay_exit={delay}"))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (name, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    wrapped
}

/// The download and each extracted archive were `fsync`ed, and a sync
/// cannot be cut off: with the artifact's bytes arriving just before the
/// deadline, writing them back held the reuse path for as long as the disk
/// took, past the deadline. Nothing on the reuse path waits for the disk
/// now (the archives are read back and verified; durability across a
/// crash of the runner is not needed), so a slow disk costs nothing.
#[test]
fn a_slow_disk_does_not_hold_the_reuse_path_past_its_deadline() {
    if !tool_available(
        "strace",
        Command::new("strace").arg("-V"),
        "your package manager (`apt-get install strace`)",
    ) {
        return;
    }
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "[artifacts]\nreuse-deadline-secs = 3\n");
    let mut cmd = xtask_cmd(&["gpu-archive", "--reuse", "--trust-policy"]);
    cmd.arg(&trust)
        .arg("--root")
        .arg(ws.path())
        .arg("--out")
        .arg(scratch.join("out"))
        .env("GITHUB_API_URL", api.uri())
        .env("GITHUB_REPOSITORY", "o/r")
        .env("GITHUB_RUN_ID", "900")
        .env("GITHUB_TOKEN", TOKEN);
    shims.apply(&mut cmd);
    let started = Instant::now();
    let result = under_slow_fsync(&cmd, "20s").output().unwrap();
    let took = started.elapsed();
    let text = stderr(&result);
    assert!(
        took < Duration::from_secs(3 + 5 + 4),
        "took {took:?}\n{text}"
    );
    assert_eq!(result.status.code(), Some(0), "{text}");
    assert!(
        stdout(&result).contains("archive source: reused artifact 5 from run 500"),
        "{text}"
    );
}

/// A zip whose central directory lists `entries` distinct empty files and
/// nothing else (zip64 end records, since there are more than 65535):
/// 52 bytes an entry, all of them read before any name can be checked.
fn zip_with_entries(entries: u32) -> Vec<u8> {
    let mut zip = Vec::with_capacity(entries as usize * 52 + 100);
    for index in 0..entries {
        zip.extend(0x0201_4b50u32.to_le_bytes());
        zip.extend([20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        zip.extend([0u8; 12]); // crc, compressed and uncompressed sizes
        zip.extend(6u16.to_le_bytes()); // name length
        zip.extend([0u8; 16]); // extra, comment, disk, attributes, offset
        zip.extend(format!("{index:06x}").bytes());
    }
    let directory_size = zip.len() as u64;
    let eocd64_at = zip.len() as u64;
    zip.extend(0x0606_4b50u32.to_le_bytes());
    zip.extend(44u64.to_le_bytes());
    zip.extend([45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    zip.extend(u64::from(entries).to_le_bytes());
    zip.extend(u64::from(entries).to_le_bytes());
    zip.extend(directory_size.to_le_bytes());
    zip.extend(0u64.to_le_bytes());
    zip.extend(0x0706_4b50u32.to_le_bytes());
    zip.extend(0u32.to_le_bytes());
    zip.extend(eocd64_at.to_le_bytes());
    zip.extend(1u32.to_le_bytes());
    zip.extend(0x0605_4b50u32.to_le_bytes());
    zip.extend([0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    zip.extend([0xff; 8]);
    zip.extend([0, 0]);
    zip
}

/// Runs `cmd` to its end; its output and its peak resident set (from
/// `wait4`: the largest of it and the children it waited for, and no other
/// process of the test run).
#[allow(unsafe_code, clippy::zombie_processes)] // reaped by `wait4`
fn output_and_peak_rss(cmd: &mut Command) -> (Output, u64) {
    let scratch = Fixture::new();
    let (out, err) = (scratch.join("stdout"), scratch.join("stderr"));
    let child = cmd
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: all-zero is a valid `rusage`; both pointers are valid for
    // the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `pid` is this test's own child, not yet waited for.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: std::fs::read(&out).unwrap(),
        stderr: std::fs::read(&err).unwrap(),
    };
    (output, u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024)
}

/// The zip reader indexes the whole central directory before a single
/// name can be checked, so memory grew with the entry count the artifact
/// chose: within a `max-download-bytes` of 4 GiB, tens of millions of
/// entries and an out-of-memory kill, not a fallback (here: a 52 MB zip
/// of a million entries cost 223 MiB). Reading the directory has a
/// small budget of its own; past it the artifact is refused.
#[test]
fn a_zip_of_a_million_entries_is_refused_in_bounded_memory() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(
        &artifact_name(&ws, &shims),
        zip_with_entries(1_000_000),
        |_| {},
    );
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    let mut cmd = xtask_cmd(&["gpu-archive", "--reuse", "--trust-policy"]);
    cmd.arg(&trust)
        .arg("--root")
        .arg(ws.path())
        .arg("--out")
        .arg(scratch.join("out"))
        .env("GITHUB_API_URL", api.uri())
        .env("GITHUB_REPOSITORY", "o/r")
        .env("GITHUB_RUN_ID", "900")
        .env("GITHUB_TOKEN", TOKEN);
    shims.apply(&mut cmd);
    let (result, peak) = output_and_peak_rss(&mut cmd);
    let text = stderr(&result);
    // The fallback build starts (and the shims refuse it).
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains("artifact reuse failed: artifact 5 from run 500: the artifact's zip directory is more than 1024 KiB to read")
            && text.contains("; building instead"),
        "{text}"
    );
    // The peak `wait4` reports includes the children gpu-archive waited
    // for (`cargo metadata` is the largest, about 56 MiB here); the index
    // of a million entries alone was 223 MiB.
    assert!(peak < 128 << 20, "peak RSS {} MiB\n{text}", peak >> 20);
}

/// With `--cache-hit --reuse`, the restore's verification and the reuse
/// each had a deadline of their own: a zstd bomb in the restore (the pull
/// request's own cache scope) and then an API that never answers held the
/// step for twice `reuse-deadline-secs` before the build. One deadline
/// covers everything before the build.
#[test]
fn a_cache_bomb_and_a_stalling_api_share_one_deadline() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let api = Github::trusted(&artifact_name(&ws, &shims), artifact_zip(), |_| {});
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_delay(Duration::from_secs(60))
                    .set_body_json(json!({"id": 42})),
            )
            .with_priority(1),
    );
    let scratch = Fixture::new();
    let out = scratch.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("cuda-tests.tar.zst"), zstd_bomb()).unwrap();
    std::fs::write(
        out.join("cuda-tutorial.tar.zst"),
        crate::archive::zstd_tar(&[("cuda_tutorial", b"\x7fELF")]),
    )
    .unwrap();
    let deadline = 10;
    let trust = trust_policy(
        &scratch,
        &format!("[artifacts]\ntimeout-secs = 60\nreuse-deadline-secs = {deadline}\n"),
    );
    let mut cmd = xtask_cmd(&["gpu-archive", "--cache-hit", "--reuse", "--trust-policy"]);
    cmd.arg(&trust)
        .arg("--out")
        .arg(&out)
        .arg("--root")
        .arg(ws.path())
        .env("GITHUB_API_URL", api.uri())
        .env("GITHUB_REPOSITORY", "o/r")
        .env("GITHUB_RUN_ID", "900")
        .env("GITHUB_TOKEN", TOKEN);
    shims.apply(&mut cmd);
    let started = Instant::now();
    let result = cmd.output().unwrap();
    let took = started.elapsed();
    let text = stderr(&result);
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the restored cache is damaged: the reuse path passed its deadline of 10 s"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with("warning: artifact reuse failed:")
                && line.contains("passed its deadline of 10 s")),
        "{text}"
    );
    // The deadline plus 5 s, with room for the key and the refused build;
    // two deadlines (20 s) do not fit.
    assert!(
        took < Duration::from_secs(deadline + 5 + 3),
        "took {took:?}\n{text}"
    );
}

/// What the runner executes of a step's log: each pipe read line by line
/// as the lines arrive (the last one at end of file even without a
/// newline, as `StreamReader.ReadLine` returns it), and the lines handled
/// in arrival order with the runner's `::stop-commands::` state
/// (`ActionCommandManager`). Returns the command lines run while commands
/// were not paused (the pause and resume lines themselves left out).
fn commands_the_runner_runs(cmd: &mut Command) -> (Output, Vec<String>) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (send, lines) = std::sync::mpsc::channel::<(bool, Vec<u8>)>();
    let readers: Vec<_> = [
        (
            false,
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        ),
        (true, Box::new(child.stderr.take().unwrap())),
    ]
    .into_iter()
    .map(|(is_stderr, pipe)| {
        let send = send.clone();
        std::thread::spawn(move || {
            let mut pipe = std::io::BufReader::new(pipe);
            loop {
                let mut line = Vec::new();
                if pipe.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                    return;
                }
                if send.send((is_stderr, line)).is_err() {
                    return;
                }
            }
        })
    })
    .collect();
    drop(send);
    let (mut stdout, mut stderr, mut run) = (Vec::new(), Vec::new(), Vec::new());
    let mut stop_token: Option<String> = None;
    for (is_stderr, line) in lines {
        if is_stderr { &mut stderr } else { &mut stdout }.extend_from_slice(&line);
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']).trim_start();
        let Some(rest) = text.strip_prefix("::") else {
            continue;
        };
        let Some((head, data)) = rest.split_once("::") else {
            continue;
        };
        let name = head.split(' ').next().unwrap_or("");
        match &stop_token {
            Some(token) if name.eq_ignore_ascii_case(token) => stop_token = None,
            Some(_) => {}
            None if name.eq_ignore_ascii_case("stop-commands") => {
                stop_token = Some(data.to_owned());
            }
            None => run.push(text.to_owned()),
        }
    }
    for reader in readers {
        reader.join().unwrap();
    }
    let status = child.wait().unwrap();
    (
        Output {
            status,
            stdout,
            stderr,
        },
        run,
    )
}

/// A workspace whose build script leaves a daemon that starts a workflow
/// command on the step's stderr (an ancestor's `/proc/<pid>/fd/2`) once
/// the archive is in `--out`, after every line gpu-archive prints while
/// commands are paused, without ending the line, and exits before it can
/// be killed (the 20,000 files it left in the staging directory slow its
/// removal). The runner reads the line when something ends it: the
/// output gpu-archive prints after the pause, or the end of the step.
fn partial_line_workspace(probe: &Path) -> Fixture {
    app_workspace(
        &format!(
            r#"use std::io::Write;
use std::path::PathBuf;
/// The ancestors of this process, nearest first: pid, ppid.
fn ancestors() -> Vec<u32> {{
    let mut out = Vec::new();
    let mut pid = std::process::id();
    for _ in 0..64 {{
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{{pid}}/stat")) else {{ break }};
        let Some(ppid) = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().nth(1)).and_then(|p| p.parse::<u32>().ok()) else {{ break }};
        if ppid <= 1 {{ break }}
        out.push(ppid);
        pid = ppid;
    }}
    out
}}
fn main() {{
    println!("cargo:rerun-if-changed=build.rs");
    if let (Ok(out), Ok(shell)) = (std::env::var("FORGE_OUT"), std::env::var("FORGE_SHELL")) {{
        let out = PathBuf::from(out);
        let archive = out.join("app.tar.zst");
        while !archive.exists() {{
            std::thread::sleep(std::time::Duration::from_micros(200));
        }}
        let mut log = std::fs::OpenOptions::new().append(true).open(format!("/proc/{{shell}}/fd/2")).unwrap();
        log.write_all(b"::set-output name=forged::by the build").unwrap();
        return;
    }}
    let ancestors = ancestors();
    // gpu-archive's command line names --out (its environment is closed),
    // and its parent, the step's shell, has the step's stderr.
    let found = ancestors.iter().enumerate().find_map(|(index, pid)| {{
        let cmdline = std::fs::read(format!("/proc/{{pid}}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let at = args.iter().position(|a| *a == b"--out")?;
        let out = PathBuf::from(String::from_utf8_lossy(args.get(at + 1)?).into_owned());
        Some((out, *ancestors.get(index + 1)?))
    }});
    let (out, shell) = match found {{
        Some((out, shell)) => (Some(out), Some(shell)),
        None => (None, None),
    }};
    std::fs::write({probe:?}, format!("{{out:?}} {{shell:?}}\n")).unwrap();
    let (Some(out), Some(shell)) = (out, shell) else {{ return }};
    if let Ok(entries) = std::fs::read_dir(out.parent().unwrap()) {{
        for entry in entries.flatten() {{
            if entry.file_name().to_string_lossy().starts_with(".gpu-archive-staging-") {{
                for index in 0..20000 {{
                    let _ = std::fs::write(entry.path().join(format!("slow-{{index}}")), "");
                }}
            }}
        }}
    }}
    std::process::Command::new(std::env::current_exe().unwrap())
        .env("FORGE_OUT", &out)
        .env("FORGE_SHELL", shell.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
}}
"#
        ),
        "[verify]\ntracer = \"strace\"\nkey-tree = \"off\"\n[[archive]]\nfile = \"app.tar.zst\"\nbuild = [\"-p\", \"app\"]\nbinaries = [\"app\"]\n",
    )
}

/// A workflow command the build started on stderr while commands were
/// paused, and left without its newline, was ended by gpu-archive's own
/// next line (or the end of the step) after the pause: the runner read it
/// then, and ran it. Before commands resume, each stream is ended with a
/// newline and read by the runner.
#[test]
fn a_command_left_open_during_the_pause_is_not_run_after_it() {
    let scratch = Fixture::new();
    let probe = scratch.join("probe");
    let ws = partial_line_workspace(&probe);
    let outputs = scratch.join("github_output");
    std::fs::write(&outputs, "").unwrap();
    let bin = path_without_tracers();
    let binary = std::env::var_os("NEXTEST_BIN_EXE_xtask")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_xtask").into());
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "\"$@\"; exit $?", "sh"])
        .arg(binary)
        .args(["gpu-archive", "--out"])
        .arg(scratch.join("out"))
        .arg("--root")
        .arg(ws.path());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("GITHUB_") || name.starts_with("ACTIONS_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("PATH", bin.path())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &outputs)
        .env("CARGO_TARGET_DIR", scratch.join("target"));
    let (result, run) = commands_the_runner_runs(&mut cmd);
    let text = format!("{}{}", stdout(&result), stderr(&result));
    let found = std::fs::read_to_string(&probe).unwrap_or_default();
    assert!(
        found.starts_with("Some("),
        "the build script did not find --out and the shell:\n{found}\n{text}"
    );
    assert!(
        text.contains("::set-output name=forged::by the build"),
        "the daemon did not write its line, so this test proves nothing ({found}):\n{text}"
    );
    assert!(
        run.iter().all(|line| !line.contains("forged")),
        "the runner would run {run:?}\n{text}"
    );
    assert_eq!(result.status.code(), Some(0), "{text}");
}

/// When the listing gave no `digest`, nothing tied the bytes of the blob
/// host (which the threat model does not trust, and where plain `http` is
/// allowed when the API is `http`) to what the trusted run uploaded: a blob
/// host serving archives of its own had them installed as the trusted
/// artifact. Without a digest to compare with, the artifact is not
/// downloaded (`actions/upload-artifact` v4 and later always give one).
#[test]
fn an_artifact_without_a_digest_is_not_taken_on_the_blob_host_word() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let name = artifact_name(&ws, &shims);
    let api = Github::trusted(&name, artifact_zip(), |_| {});
    let forged = {
        use std::io::Write as _;
        let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default();
        for (file, member, content) in [
            (
                "cuda-tests.tar.zst",
                "target/nextest/binaries-metadata.json",
                &b"{}"[..],
            ),
            (
                "cuda-tutorial.tar.zst",
                "cuda_tutorial",
                b"#!/bin/sh\necho owned\n",
            ),
        ] {
            writer.start_file(file, options).unwrap();
            writer
                .write_all(&crate::archive::zstd_tar(&[(member, content)]))
                .unwrap();
        }
        writer.finish().unwrap().into_inner()
    };
    api.mount(
        Mock::given(method("GET"))
            .and(path("/blob/forged"))
            .respond_with(ResponseTemplate::new(200).set_body_bytes(forged.clone())),
    );
    redirect_download(
        &api,
        &name,
        forged.len() as u64,
        None,
        &format!("{}/blob/forged", api.uri()),
    );
    let scratch = Fixture::new();
    let out = scratch.join("out");
    let trust = trust_policy(&scratch, "");
    let result = reuse(&ws, &shims, &api.uri(), &trust, Some(&out), &[]);
    let text = stderr(&result);
    assert!(
        !stdout(&result).contains("archive source: reused artifact"),
        "the blob host's own archives were installed:\n{text}"
    );
    assert!(!out.join("cuda-tutorial.tar.zst").exists(), "{text}");
    assert_eq!(result.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "artifact reuse failed: artifact 5 from run 500: the listing gives no digest"
        ),
        "{text}"
    );
}

/// API text reached the log whole wherever it ended the search: serde's
/// message for a mistyped field quotes the string it got, and the refusals
/// of a next-page link and of a redirect quote the header, and a damaged
/// archive's error its member's name (up to 1 MiB). One answer of 16 MiB
/// made a line of 16 MiB in the warning and again in the source line.
/// Every attacker string is shown at most 200 characters long.
#[test]
fn api_text_that_ends_the_search_is_clipped_in_the_log() {
    let ws = gpu_workspace();
    let shims = Shims::new();
    let name = artifact_name(&ws, &shims);
    let long = "A".repeat(300_000);
    let scratch = Fixture::new();
    let trust = trust_policy(&scratch, "");
    type Hostile<'a> = Box<dyn Fn(&Github) + 'a>;
    let cases: Vec<(&str, Hostile)> = vec![
        (
            "a mistyped repository id",
            Box::new(|api: &Github| {
                api.mount(
                    Mock::given(method("GET"))
                        .and(path("/repos/o/r"))
                        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": long})))
                        .with_priority(1),
                );
            }),
        ),
        (
            "a next-page link to another host",
            Box::new(|api: &Github| {
                api.mount(
                    Mock::given(method("GET"))
                        .and(path("/repos/o/r/actions/artifacts"))
                        .respond_with(
                            ResponseTemplate::new(200)
                                .insert_header(
                                    "link",
                                    format!(
                                        "<http://evil.example/{}>; rel=\"next\"",
                                        &long[..60_000]
                                    ),
                                )
                                .set_body_json(json!({"artifacts": []})),
                        )
                        .with_priority(1),
                );
            }),
        ),
        (
            "a redirect to a URL that is not one",
            Box::new(|api: &Github| {
                api.mount(
                    Mock::given(method("GET"))
                        .and(path("/repos/o/r/actions/artifacts/5/zip"))
                        .respond_with(
                            ResponseTemplate::new(302)
                                .insert_header("location", format!("ftp://x/{}", &long[..60_000])),
                        )
                        .with_priority(1),
                );
            }),
        ),
    ];
    for (what, hostile) in cases {
        let api = Github::trusted(&name, artifact_zip(), |_| {});
        hostile(&api);
        let result = reuse(
            &ws,
            &shims,
            &api.uri(),
            &trust,
            Some(&scratch.join("out")),
            &[],
        );
        let (out, err) = (stdout(&result), stderr(&result));
        assert_eq!(
            result.status.code(),
            Some(2),
            "{what}: {}",
            &err[..err.len().min(3000)]
        );
        assert!(err.contains("; building instead"), "{what}");
        for line in out.lines().chain(err.lines()) {
            assert!(
                line.len() < 2000,
                "{what}: a line of {} bytes: {}…",
                line.len(),
                &line[..300]
            );
        }
    }
    // And a member name of the archive (a cache restore whose member is
    // cut short; the artifact's archives are read the same way).
    let mut noise = Vec::with_capacity(4_000_000);
    let mut state = 0x9e37_79b9_u32;
    for _ in 0..4_000_000 {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        noise.push((state >> 24) as u8);
    }
    let mut damaged = crate::archive::zstd_tar(&[(&long[..100_000], &noise)]);
    damaged.truncate(damaged.len() * 9 / 10);
    let out = scratch.join("cache-out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("cuda-tests.tar.zst"), damaged).unwrap();
    let mut cmd = xtask_cmd(&["gpu-archive", "--cache-hit", "--trust-policy"]);
    cmd.arg(&trust)
        .arg("--out")
        .arg(&out)
        .arg("--root")
        .arg(ws.path());
    shims.apply(&mut cmd);
    let result = cmd.output().unwrap();
    let err = stderr(&result);
    assert!(
        err.contains("the restored cache is damaged"),
        "{}",
        &err[..err.len().min(3000)]
    );
    for line in stdout(&result).lines().chain(err.lines()) {
        assert!(
            line.len() < 2000,
            "a member name: a line of {} bytes: {}…",
            line.len(),
            &line[..300]
        );
    }
}
