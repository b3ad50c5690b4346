// Test helpers may unwrap and cast freely: a panic is a failure with its location.
#![allow(
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::needless_pass_by_value
)]

//! Tests of the reuse path against a real HTTP mock of the GitHub API on
//! 127.0.0.1, through the real octocrab client, and of the checks on their own.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::github::{self, GithubEnv, Run, RunRepository};
use super::trust::{self, TrustContext};
use super::{Request, Reuse, Reused, build, download, reuse_artifact, verify};
use crate::policy::{ArchiveSpec, Policy};

const NAME: &str = "gpu-archive-v1-0123abcd";
const REPO_ID: u64 = 42;
const CURRENT_RUN: u64 = 999;
const TOKEN: &str = "secret-token-value";

fn policy() -> Policy {
    Policy::parse(
        r#"
[artifacts]
timeout-secs = 1
max-download-bytes = 10_000_000
[[archive]]
file = "cuda-tests.tar.zst"
nextest = ["-p", "gpu-crate", "--features", "cuda"]
[[archive]]
file = "cuda-tutorial.tar.zst"
build = ["--bin", "cuda_tutorial"]
binaries = ["cuda_tutorial"]
"#,
    )
    .unwrap()
}

/// A zstd tar holding `members` (name, content), as the packer writes it.
fn zstd_tar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let mut list = Vec::new();
    for (index, (name, content)) in members.iter().enumerate() {
        let file = dir.path().join(format!("m{index}"));
        std::fs::write(&file, content).unwrap();
        list.push((name.to_string(), file));
    }
    let dest = dir.path().join("out.tar.zst");
    build::pack_zstd_tar(&list, &dest, dir.path()).unwrap();
    std::fs::read(dest).unwrap()
}

fn nextest_archive() -> Vec<u8> {
    zstd_tar(&[
        (verify::NEXTEST_METADATA_MEMBER, b"{\"binaries\":{}}"),
        ("target/debug/deps/gpu_crate-0123", &[7u8; 5000]),
    ])
}

fn tutorial_archive() -> Vec<u8> {
    zstd_tar(&[("cuda_tutorial", b"\x7fELF pretend binary")])
}

/// A deflate zip, as `actions/upload-artifact` writes them.
fn zip_of(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, content) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn good_zip() -> Vec<u8> {
    // Built once: compressing with the debug-profile zstd encoder is most
    // of what a mock-API test costs.
    static ZIP: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ZIP.get_or_init(|| {
        zip_of(&[
            ("cuda-tests.tar.zst", nextest_archive()),
            ("cuda-tutorial.tar.zst", tutorial_archive()),
        ])
    })
    .clone()
}

/// A stored zip written byte by byte, so that tests can hold what a zip
/// library refuses to write: duplicates, `..`, absolute names, symlinks.
fn raw_zip(entries: &[(&str, &[u8], bool)]) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data, symlink) in entries {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let header = |sig: u32, central: bool| {
            let mut h = Vec::new();
            h.extend(sig.to_le_bytes());
            if central {
                h.extend(0x031Eu16.to_le_bytes()); // made by: unix, 3.0
            }
            h.extend(20u16.to_le_bytes()); // version needed
            h.extend(0u16.to_le_bytes()); // flags
            h.extend(0u16.to_le_bytes()); // stored
            h.extend(0u32.to_le_bytes()); // time, date
            h.extend(crc.to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h.extend(0u16.to_le_bytes()); // extra
            if central {
                h.extend(0u16.to_le_bytes()); // comment
                h.extend(0u16.to_le_bytes()); // disk
                h.extend(0u16.to_le_bytes()); // internal attributes
                let mode: u32 = if *symlink { 0o120777 } else { 0o100644 };
                h.extend((mode << 16).to_le_bytes());
                h.extend(offset.to_le_bytes());
            }
            h.extend(name.as_bytes());
            h
        };
        out.extend(header(0x0403_4b50, false));
        out.extend(*data);
        central.extend(header(0x0201_4b50, true));
    }
    let central_offset = out.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(central_offset.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

fn sha256(bytes: &[u8]) -> String {
    download::hex(&Sha256::digest(bytes))
}

/// An artifact listing entry for `zip`.
fn artifact(id: u64, run_id: u64, zip: &[u8]) -> Value {
    json!({
        "id": id,
        "name": NAME,
        "size_in_bytes": zip.len(),
        "expired": false,
        "created_at": "2026-11-29T10:00:00Z",
        "expires_at": "2099-12-06T10:00:00Z",
        "digest": format!("sha256:{}", sha256(zip)),
        "workflow_run": {"id": run_id, "repository_id": REPO_ID, "head_repository_id": REPO_ID,
                         "head_branch": "main", "head_sha": "abc"}
    })
}

/// A producing run that passes every rule; tests break one thing at a time.
fn good_run(id: u64) -> Value {
    json!({
        "id": id,
        "name": "publish",
        "path": ".github/workflows/ci-cache-publish.yml",
        "event": "push",
        "head_branch": "main",
        "head_sha": commit(id),
        "created_at": "2026-11-29T09:58:00Z",
        "repository": {"id": REPO_ID, "full_name": "o/r"},
        "head_repository": {"id": REPO_ID, "full_name": "o/r"}
    })
}

/// The commit the branch `main` points to (`GET /branches/main`).
const MAIN_HEAD: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// The pull-request head commit the reuse path is asked about (`--head-sha`).
const PR_HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

/// The head commit of run `id` in [`good_run`].
fn commit(id: u64) -> String {
    format!("{id:040x}")
}

/// A GitHub API mock and a separate blob-storage mock (another port, so
/// another authority, as in production).
struct Api {
    rt: tokio::runtime::Runtime,
    api: MockServer,
    blob: MockServer,
}

impl Api {
    fn new() -> Api {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (api, blob) =
            rt.block_on(async { (MockServer::start().await, MockServer::start().await) });
        let mock = Api { rt, api, blob };
        mock.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r"))
                .respond_with(
                    ResponseTemplate::new(200)
                        .set_body_json(json!({"id": REPO_ID, "full_name": "o/r", "name": "r"})),
                ),
        );
        mock.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/branches/main"))
                .respond_with(ResponseTemplate::new(200).set_body_json(
                    json!({"name": "main", "commit": {"sha": MAIN_HEAD}, "protected": true}),
                )),
        );
        mock
    }

    fn env(&self) -> GithubEnv {
        GithubEnv {
            api_url: self.api.uri(),
            owner: "o".into(),
            repo: "r".into(),
            run_id: CURRENT_RUN,
            token: TOKEN.into(),
        }
    }

    fn mount(&self, mock: Mock) {
        self.rt.block_on(mock.mount(&self.api));
    }

    fn listing(&self, artifacts: Vec<Value>) {
        self.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/actions/artifacts"))
                .and(query_param("name", NAME))
                .respond_with(ResponseTemplate::new(200).set_body_json(
                    json!({"total_count": artifacts.len(), "artifacts": artifacts}),
                )),
        );
    }

    /// Serves `run`, and says its head commit is in `main`'s history.
    fn run(&self, run: Value) {
        let id = run["id"].as_u64().unwrap();
        if let Some(sha) = run["head_sha"].as_str() {
            self.compare(sha, "behind", 5);
        }
        self.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/actions/runs/{id}")))
                .respond_with(ResponseTemplate::new(200).set_body_json(run)),
        );
    }

    /// The answer to `compare/{MAIN_HEAD}...{sha}`; a lower `priority` wins.
    fn compare(&self, sha: &str, status: &str, priority: u8) {
        self.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/compare/{MAIN_HEAD}...{sha}")))
                .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": status})))
                .with_priority(priority),
        );
    }

    /// The download of artifact `id`: a 302 from the API to the blob server.
    fn zip(&self, id: u64, bytes: Vec<u8>) {
        let location = format!("{}/blob/{id}.zip?sig=abc", self.blob.uri());
        self.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/actions/artifacts/{id}/zip")))
                .respond_with(ResponseTemplate::new(302).insert_header("location", location)),
        );
        self.rt.block_on(
            Mock::given(method("GET"))
                .and(path(format!("/blob/{id}.zip")))
                .respond_with(ResponseTemplate::new(200).set_body_bytes(bytes))
                .mount(&self.blob),
        );
    }

    /// One trusted artifact `id` from run `run_id` serving `zip`.
    fn trusted(&self, id: u64, run_id: u64, zip: Vec<u8>) {
        self.listing(vec![artifact(id, run_id, &zip)]);
        self.run(good_run(run_id));
        self.zip(id, zip);
    }

    /// The reuse path with the test policy as both policies: the installed
    /// artifact, or the reason none was.
    fn reuse(&self, out: &Path) -> anyhow::Result<Result<Reused, String>> {
        self.reuse_with(out, &policy())
    }

    fn reuse_with(&self, out: &Path, trust: &Policy) -> anyhow::Result<Result<Reused, String>> {
        let policy = policy();
        let request = request(&policy, trust, out);
        Ok(match reuse_artifact(self.env(), &request)? {
            Reuse::Installed(reused) => Ok(reused),
            not_reused => Err(not_reused.to_string()),
        })
    }

    fn blob_requests(&self) -> Vec<wiremock::Request> {
        self.rt
            .block_on(self.blob.received_requests())
            .unwrap_or_default()
    }

    fn api_requests(&self) -> Vec<wiremock::Request> {
        self.rt
            .block_on(self.api.received_requests())
            .unwrap_or_default()
    }
}

/// A reuse request for `out` (`--reuse --head-sha PR_HEAD`).
fn request<'a>(policy: &'a Policy, trust: &'a Policy, out: &'a Path) -> Request<'a> {
    Request {
        root: Path::new("/nonexistent-root"),
        policy,
        trust,
        artifact_name: NAME,
        out,
        reuse: true,
        cache_hit: false,
        head_sha: Some(PR_HEAD),
    }
}

/// A scratch directory and the `--out` inside it.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// Nothing was left behind: no file in `--out`, no staging directory.
    fn assert_clean(&self) {
        let leftovers: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name != "out")
            .collect();
        assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
        if self.out().exists() {
            let files: Vec<_> = std::fs::read_dir(self.out()).unwrap().collect();
            assert!(files.is_empty(), "--out holds {files:?}");
        }
    }

    fn assert_installed(&self) {
        for spec in &policy().archive {
            verify::check_archive(&self.out().join(&spec.file), spec).unwrap();
        }
        let entries = std::fs::read_dir(self.dir.path()).unwrap().count();
        assert_eq!(entries, 1, "only --out remains beside the staging area");
    }
}

#[test]
fn trusted_artifact_is_installed_and_the_token_stays_on_the_api_host() {
    let api = Api::new();
    api.trusted(7, 100, good_zip());
    let scratch = Scratch::new();
    let reused = api.reuse(&scratch.out()).unwrap().unwrap();
    assert_eq!(
        reused,
        Reused {
            artifact_id: 7,
            run_id: 100,
            event: "push".into(),
            workflow: ".github/workflows/ci-cache-publish.yml".into(),
            created_at: "2026-11-29T09:58:00Z".into(),
        }
    );
    scratch.assert_installed();

    let blob = api.blob_requests();
    assert_eq!(blob.len(), 1, "the zip is fetched once from blob storage");
    assert!(
        blob.iter()
            .all(|r| !r.headers.contains_key("authorization")),
        "the token followed the redirect"
    );
    let api_requests = api.api_requests();
    assert!(
        api_requests.iter().all(|r| r
            .headers
            .get("authorization")
            .is_some_and(|v| v.to_str().unwrap() == format!("Bearer {TOKEN}"))),
        "every API request carries the token"
    );
}

#[test]
fn every_untrusted_candidate_is_skipped_and_the_good_one_on_page_two_is_taken() {
    let api = Api::new();
    let zip = good_zip();
    // Page 1: one candidate per rule, each of which must be passed over.
    let mut bad = Vec::new();
    let mut runs = Vec::new();
    let mut case = |id: u64, artifact_edit: &dyn Fn(&mut Value), run_edit: &dyn Fn(&mut Value)| {
        let mut a = artifact(id, id + 1000, &zip);
        artifact_edit(&mut a);
        bad.push(a);
        let mut r = good_run(id + 1000);
        run_edit(&mut r);
        runs.push(r);
    };
    let none = |_: &mut Value| {};
    case(1, &|a| a["workflow_run"]["id"] = json!(CURRENT_RUN), &none);
    // A fork that calls its branch `main`, with the same repository name.
    case(
        3,
        &|a| a["workflow_run"]["head_repository_id"] = json!(4242),
        &none,
    );
    case(4, &none, &|r| {
        r["head_repository"] = json!({"id": 4242, "full_name": "o/r"});
        r["head_branch"] = json!("main");
    });
    case(5, &none, &|r| r["path"] = json!(".github/workflows/ci.yml"));
    case(6, &none, &|r| {
        r["path"] = json!(".github/workflows/evil/ci-cache-publish.yml")
    });
    case(7, &none, &|r| r["event"] = json!("pull_request"));
    case(8, &none, &|r| r["event"] = json!("pull_request_target"));
    case(9, &none, &|r| {
        r["event"] = json!("workflow_dispatch");
        r["head_branch"] = json!("feature");
    });
    case(10, &none, &|r| r["head_branch"] = json!(null));
    case(11, &|a| a["expired"] = json!(true), &none);
    case(12, &|a| a["name"] = json!(format!("{NAME}-other")), &none);
    case(13, &|a| a["size_in_bytes"] = json!(20_000_000), &none);
    case(14, &none, &|r| {
        r["repository"] = json!({"id": 4242, "full_name": "evil/r"})
    });
    case(15, &|a| a["workflow_run"] = json!(null), &none);
    // The run of candidate 16 is missing (404): skipped, not fatal.
    bad.push(artifact(16, 1016, &zip));
    for run in runs {
        api.run(run);
    }
    let next = format!(
        "<{}/repos/o/r/actions/artifacts?name={NAME}&per_page=100&page=2>; rel=\"next\", <{}/repos/o/r/actions/artifacts?name={NAME}&per_page=100&page=2>; rel=\"last\"",
        api.api.uri(),
        api.api.uri()
    );
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .and(query_param("page", "2"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(
                    json!({"total_count": 18, "artifacts": [artifact(50, 1050, &zip)]}),
                ),
            )
            .with_priority(1),
    );
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .and(query_param("per_page", "100"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("link", next.as_str())
                    .set_body_json(json!({"total_count": 18, "artifacts": bad})),
            ),
    );
    // A trusted `workflow_run` run of the consumer for the same head commit:
    // its head branch is the PR's and that is fine; its path carries an
    // `@ref`, which is normalised away.
    let mut run = good_run(1050);
    run["event"] = json!("workflow_run");
    run["display_title"] = json!(format!("GPU tests for {PR_HEAD}"));
    run["head_branch"] = json!("contributor-branch");
    run["path"] = json!(".github/workflows/runpod-gpu-test.yml@refs/heads/main");
    api.run(run);
    api.zip(50, zip);

    let scratch = Scratch::new();
    let reused = api.reuse(&scratch.out()).unwrap().unwrap();
    assert_eq!((reused.artifact_id, reused.run_id), (50, 1050));
    assert_eq!(reused.event, "workflow_run");
    scratch.assert_installed();
    // Only the accepted candidate was downloaded.
    let blob = api.blob_requests();
    assert_eq!(blob.len(), 1);
    assert_eq!(blob[0].url.path(), "/blob/50.zip");
}

/// Runs the reuse path against a listing of one candidate and expects the
/// search to end without a trusted one, naming `needle`.
fn expect_skipped(edit_artifact: impl Fn(&mut Value), edit_run: impl Fn(&mut Value), needle: &str) {
    let api = Api::new();
    let zip = good_zip();
    let mut a = artifact(7, 100, &zip);
    edit_artifact(&mut a);
    let mut r = good_run(a["workflow_run"]["id"].as_u64().unwrap_or(100));
    edit_run(&mut r);
    api.listing(vec![a]);
    api.run(r);
    api.zip(7, zip);
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(reason.contains(needle), "{needle:?} not in {reason:?}");
    assert!(
        api.blob_requests().is_empty(),
        "an untrusted artifact was downloaded"
    );
    scratch.assert_clean();
}

#[test]
fn each_rejection_names_its_reason() {
    let none = |_: &mut Value| {};
    expect_skipped(
        |a| a["workflow_run"]["id"] = json!(CURRENT_RUN),
        none,
        "produced by the current run",
    );
    expect_skipped(
        none,
        |r| r["head_repository"] = json!({"id": 4242, "full_name": "o/r"}),
        "head repository is o/r (id 4242)",
    );
    expect_skipped(
        none,
        |r| r["path"] = json!(".github/workflows/ci.yml"),
        "is not one of artifacts.trusted-workflows",
    );
    expect_skipped(
        none,
        |r| r["event"] = json!("pull_request"),
        "event \"pull_request\"",
    );
    expect_skipped(
        none,
        |r| {
            r["event"] = json!("workflow_dispatch");
            r["head_branch"] = json!("release");
        },
        "on branch \"release\", not the default branch",
    );
    expect_skipped(
        none,
        |r| r["head_branch"] = json!(null),
        "has no head branch",
    );
    expect_skipped(
        none,
        |r| r["head_sha"] = json!(null),
        "names no head commit",
    );
    expect_skipped(|a| a["expired"] = json!(true), none, "expired");
    // The flag lags behind the time: a past `expires_at` is expired too.
    expect_skipped(
        |a| a["expires_at"] = json!("2020-01-01T00:00:00Z"),
        none,
        "it has expired (at 2020-01-01T00:00:00Z)",
    );
    expect_skipped(|a| a["name"] = json!("other"), none, "is not");
    expect_skipped(
        |a| a["workflow_run"]["id"] = json!(555),
        |r| r["id"] = json!(556),
        "run 555 cannot be read",
    );
}

/// A push of a *tag* called `main` (or a dispatch on one) reports `main` as
/// its head branch but runs the workflow file of whatever commit the tag
/// names. Only the commit's absence from `main`'s history gives it away.
#[test]
fn a_tag_named_like_the_default_branch_is_not_the_default_branch() {
    // The tag's commit may be off `main` altogether, or built on top of it.
    for (event, status) in [
        ("push", "diverged"),
        ("workflow_dispatch", "diverged"),
        ("push", "ahead"),
    ] {
        let api = Api::new();
        let zip = good_zip();
        api.listing(vec![artifact(7, 100, &zip)]);
        let mut run = good_run(100);
        run["event"] = json!(event);
        run["head_sha"] = json!("f".repeat(40));
        api.compare(&"f".repeat(40), status, 1);
        api.run(run);
        api.zip(7, zip);
        let scratch = Scratch::new();
        let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
        assert!(
            reason.contains("is not in the history of branch \"main\""),
            "{reason}"
        );
        assert!(
            api.blob_requests().is_empty(),
            "the artifact was downloaded"
        );
        scratch.assert_clean();
    }
    // A comparison that cannot be made skips the candidate too.
    let api = Api::new();
    let zip = good_zip();
    api.listing(vec![artifact(7, 100, &zip)]);
    api.mount(
        Mock::given(method("GET"))
            .and(path(format!(
                "/repos/o/r/compare/{MAIN_HEAD}...{}",
                commit(100)
            )))
            .respond_with(ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found"})))
            .with_priority(1),
    );
    api.run(good_run(100));
    api.zip(7, zip);
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(
        reason.contains("cannot tell whether its commit"),
        "{reason}"
    );
    assert!(api.blob_requests().is_empty());
}

/// Odd entries in the listing (missing, null or mistyped fields) are
/// skipped candidates; the search goes on to the good one after them.
#[test]
fn malformed_listing_entries_are_skipped_not_fatal() {
    let api = Api::new();
    let zip = good_zip();
    let mut odd = Vec::new();
    for (id, field, value) in [
        (1, "size_in_bytes", json!(null)),
        (2, "expired", json!("no")),
        (3, "name", json!(7)),
        (4, "id", json!("4")),
        (5, "workflow_run", json!({"id": "500"})),
        (6, "created_at", json!(12)),
    ] {
        let mut a = artifact(id, 1000 + id, &zip);
        a[field] = value;
        odd.push(a);
    }
    let mut missing = artifact(8, 1008, &zip);
    missing.as_object_mut().unwrap().remove("expired");
    odd.push(missing);
    odd.push(json!(null));
    odd.push(artifact(9, 100, &zip));
    api.listing(odd);
    api.run(good_run(100));
    api.zip(9, zip);
    let scratch = Scratch::new();
    let reused = api.reuse(&scratch.out()).unwrap().unwrap();
    assert_eq!((reused.artifact_id, reused.run_id), (9, 100));
    scratch.assert_installed();
}

/// A producing run whose JSON is odd cannot be judged: its candidate is
/// skipped and the search goes on.
#[test]
fn odd_run_json_is_a_skipped_candidate() {
    let api = Api::new();
    let zip = good_zip();
    let mut listing = Vec::new();
    for (id, field, value) in [
        (1, "event", json!(null)),
        (2, "repository", json!({"id": "42", "full_name": "o/r"})),
        (3, "head_repository", json!([])),
        (4, "path", json!(5)),
        (5, "head_branch", json!({"name": "main"})),
        (6, "id", json!(null)),
    ] {
        listing.push(artifact(id, 1000 + id, &zip));
        let mut run = good_run(1000 + id);
        run[field] = value;
        api.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/actions/runs/{}", 1000 + id)))
                .respond_with(ResponseTemplate::new(200).set_body_json(run)),
        );
    }
    listing.push(artifact(7, 1007, &zip));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/runs/1007"))
            .respond_with(ResponseTemplate::new(200).set_body_string("not json")),
    );
    listing.push(artifact(9, 100, &zip));
    api.listing(listing);
    api.run(good_run(100));
    api.zip(9, zip);
    let scratch = Scratch::new();
    let reused = api.reuse(&scratch.out()).unwrap().unwrap();
    assert_eq!((reused.artifact_id, reused.run_id), (9, 100));
    scratch.assert_installed();
}

#[test]
fn a_default_branch_that_cannot_be_put_in_a_route_is_refused() {
    let api = Api::new();
    // The client's worker is spawned on the runtime it is built in.
    let _runtime = api.rt.enter();
    let github = github::Github::new(
        api.env(),
        Duration::from_secs(1),
        github::Deadline::after(60),
    )
    .unwrap();
    for branch in ["", "x/../../../repos/evil/r", "a b", "main?x=1", "main#"] {
        let err = api.rt.block_on(github.branch_head(branch)).unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot be named"),
            "{branch}: {err:#}"
        );
    }
    assert!(
        api.api_requests()
            .iter()
            .all(|r| !r.url.path().contains("branches"))
    );
}

#[test]
fn empty_listing_is_a_miss() {
    let api = Api::new();
    api.listing(vec![]);
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert_eq!(reason, format!("no artifact named {NAME}"));
    scratch.assert_clean();
}

/// Runs the reuse path and expects it to fail (so the caller falls back to a
/// build) with `needle` in the error, leaving nothing behind.
fn expect_failure(api: &Api, needle: &str) {
    let scratch = Scratch::new();
    let err = match api.reuse(&scratch.out()) {
        Err(err) => format!("{err:#}"),
        Ok(other) => panic!("expected a failure naming {needle:?}, got {other:?}"),
    };
    assert!(err.contains(needle), "{needle:?} not in {err:?}");
    scratch.assert_clean();
}

#[test]
fn server_error_fails_over() {
    let api = Api::new();
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(ResponseTemplate::new(500).set_body_json(json!({"message": "boom"}))),
    );
    expect_failure(&api, "HTTP 500 Internal Server Error: boom");
}

#[test]
fn rate_limit_fails_over() {
    let api = Api::new();
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(
                ResponseTemplate::new(403)
                    .insert_header("x-ratelimit-remaining", "0")
                    .insert_header("x-ratelimit-reset", "1796000000")
                    .set_body_json(json!({"message": "API rate limit exceeded"})),
            ),
    );
    expect_failure(
        &api,
        "rate limited by the GitHub API (HTTP 403 Forbidden): API rate limit exceeded (the limit resets at Unix time 1796000000)",
    );
}

#[test]
fn stalled_api_fails_over_after_the_timeout() {
    let api = Api::new();
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_delay(Duration::from_secs(5))
                    .set_body_json(json!({"artifacts": []})),
            ),
    );
    let started = std::time::Instant::now();
    expect_failure(&api, "no answer within 1 s");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[test]
fn connection_refused_fails_over() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let env = GithubEnv {
        api_url: format!("http://127.0.0.1:{port}"),
        ..Api::new().env()
    };
    let scratch = Scratch::new();
    let (policy, out) = (policy(), scratch.out());
    let err = format!(
        "{:#}",
        reuse_artifact(env, &request(&policy, &policy, &out)).unwrap_err()
    );
    assert!(err.contains("cannot read this repository's id"), "{err}");
    assert!(err.to_lowercase().contains("connection refused"), "{err}");
    scratch.assert_clean();
}

#[test]
fn next_link_to_another_host_is_not_followed() {
    let api = Api::new();
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("link", "<https://evil.example/steal?page=2>; rel=\"next\"")
                    .set_body_json(json!({"artifacts": []})),
            ),
    );
    expect_failure(&api, "refusing to send the token there");
    // On the API host but another route (another repository's listing, a
    // path that merely starts like the API's): not a page of this listing.
    for link in [
        "/repos/evil/r/actions/artifacts?page=2",
        "/repos/o/r/actions/artifacts/../../../../repos/evil/r/actions/artifacts",
        "/repos/o/r/actions/artifactsX?page=2",
    ] {
        let api = Api::new();
        api.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/actions/artifacts"))
                .respond_with(
                    ResponseTemplate::new(200)
                        .insert_header("link", format!("<{}{link}>; rel=\"next\"", api.api.uri()))
                        .set_body_json(json!({"artifacts": []})),
                ),
        );
        expect_failure(&api, "is not a page of /repos/o/r/actions/artifacts");
        assert!(
            api.api_requests()
                .iter()
                .all(|r| !r.url.path().contains("evil") && !r.url.path().contains("artifactsX")),
            "{link} was followed"
        );
    }
}

/// A listing whose next-page link leads back to itself is read once, not
/// until the page cap.
#[test]
fn a_next_link_that_repeats_a_page_ends_the_search() {
    let api = Api::new();
    let zip = good_zip();
    let mut a = artifact(7, 100, &zip);
    a["name"] = json!("other");
    let myself = format!(
        "<{}/repos/o/r/actions/artifacts?name={NAME}&per_page=100>; rel=\"next\"",
        api.api.uri()
    );
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts"))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("link", myself.as_str())
                    .set_body_json(json!({"artifacts": [a]})),
            ),
    );
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(reason.contains("repeats an earlier page"), "{reason}");
    let listings = api
        .api_requests()
        .iter()
        .filter(|r| r.url.path() == "/repos/o/r/actions/artifacts")
        .count();
    assert_eq!(listings, 1);
    scratch.assert_clean();
}

/// A blob server for one request: it announces all of `body`, sends half of
/// it, then either closes the connection or goes quiet for longer than the
/// timeout. Returns its URL.
fn half_blob_server(body: Vec<u8>, stall: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/zip\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(&body[..body.len() / 2]);
            let _ = stream.flush();
            if stall {
                std::thread::sleep(Duration::from_secs(5));
            }
        }
    });
    format!("http://127.0.0.1:{port}/blob")
}

/// Serves artifact 7 of run 100 whose download redirects to `location`.
fn trusted_redirecting_to(api: &Api, zip: &[u8], location: &str) {
    api.listing(vec![artifact(7, 100, zip)]);
    api.run(good_run(100));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/7/zip"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", location)),
    );
}

#[test]
fn connection_closed_mid_download_fails_over() {
    let api = Api::new();
    let zip = good_zip();
    trusted_redirecting_to(&api, &zip, &half_blob_server(zip.clone(), false));
    expect_failure(&api, "the download broke off");
}

#[test]
fn a_short_body_fails_over_on_its_announced_length() {
    let api = Api::new();
    let zip = good_zip();
    api.listing(vec![artifact(7, 100, &zip)]);
    api.run(good_run(100));
    api.zip(7, zip[..zip.len() / 2].to_vec());
    expect_failure(
        &api,
        &format!(
            "the download announces {} bytes, but the listing's size_in_bytes is {}",
            zip.len() / 2,
            zip.len()
        ),
    );
}

/// A zip cut short whose digest matches its bytes (an upload that broke
/// off) is caught by the zip reader.
#[test]
fn truncated_zip_whose_digest_matches_fails_over() {
    let api = Api::new();
    let zip = good_zip();
    let cut = zip[..zip.len() - 30].to_vec();
    let a = artifact(7, 100, &cut);
    api.listing(vec![a]);
    api.run(good_run(100));
    api.zip(7, cut);
    expect_failure(&api, "not a readable zip");
}

#[test]
fn wrong_digest_fails_over() {
    let api = Api::new();
    let zip = good_zip();
    let mut a = artifact(7, 100, &zip);
    a["digest"] = json!(format!("sha256:{}", sha256(b"something else")));
    api.listing(vec![a]);
    api.run(good_run(100));
    api.zip(7, zip);
    expect_failure(&api, "does not match the artifact digest");
}

#[test]
fn download_error_status_fails_over() {
    let api = Api::new();
    let zip = good_zip();
    api.listing(vec![artifact(7, 100, &zip)]);
    api.run(good_run(100));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/7/zip"))
            .respond_with(ResponseTemplate::new(410)),
    );
    expect_failure(&api, "HTTP 410 Gone");
}

/// Serves one artifact whose zip is `zip` and expects the install to fail.
fn expect_bad_zip(zip: Vec<u8>, needle: &str) {
    let api = Api::new();
    api.trusted(7, 100, zip);
    expect_failure(&api, needle);
}

#[test]
fn hostile_or_incomplete_zips_fail_over() {
    let tests = nextest_archive();
    let tutorial = tutorial_archive();
    let good = [
        ("cuda-tests.tar.zst", tests.as_slice(), false),
        ("cuda-tutorial.tar.zst", tutorial.as_slice(), false),
    ];
    let with = |extra: (&'static str, &'static [u8], bool)| {
        let mut entries = good.to_vec();
        entries.insert(0, extra);
        raw_zip(&entries)
    };
    // The hand-written zip itself is valid: the good entries alone install.
    {
        let api = Api::new();
        api.trusted(7, 100, raw_zip(&good));
        let scratch = Scratch::new();
        api.reuse(&scratch.out()).unwrap().unwrap();
        scratch.assert_installed();
    }
    expect_bad_zip(
        with(("../cuda-tests.tar.zst", b"x", false)),
        "unexpected entry \"../cuda-tests.tar.zst\"",
    );
    expect_bad_zip(
        with(("/etc/cuda-tests.tar.zst", b"x", false)),
        "unexpected entry \"/etc/cuda-tests.tar.zst\"",
    );
    expect_bad_zip(with(("nested/x", b"x", false)), "unexpected entry");
    // Other spellings of an escape, or of an expected name, are other names.
    for name in [
        "..\\cuda-tests.tar.zst",
        "C:\\cuda-tests.tar.zst",
        "C:cuda-tests.tar.zst",
        "./cuda-tests.tar.zst",
        "cuda-tests.tar.zst/",
        "CUDA-TESTS.TAR.ZST",
        "cuda-tests.tar.zst\0",
    ] {
        let mut entries = good.to_vec();
        entries.push((name, b"x", false));
        expect_bad_zip(raw_zip(&entries), "unexpected entry");
    }
    // A small zip that inflates past the bound is cut off while inflating.
    expect_bad_zip(
        zip_of(&[
            ("cuda-tests.tar.zst", vec![0u8; 10_000_001]),
            ("cuda-tutorial.tar.zst", tutorial.clone()),
        ]),
        "expand past artifacts.max-download-bytes",
    );
    expect_bad_zip(
        with(("notes.txt", b"x", false)),
        "unexpected entry \"notes.txt\"",
    );
    expect_bad_zip(
        raw_zip(&[
            ("cuda-tests.tar.zst", b"/etc/passwd", true),
            ("cuda-tutorial.tar.zst", tutorial.as_slice(), false),
        ]),
        "not a regular file",
    );
    expect_bad_zip(
        raw_zip(&[
            ("cuda-tests.tar.zst", tests.as_slice(), false),
            ("cuda-tests.tar.zst", tests.as_slice(), false),
            ("cuda-tutorial.tar.zst", tutorial.as_slice(), false),
        ]),
        "two entries with the same name",
    );
    expect_bad_zip(
        zip_of(&[("cuda-tests.tar.zst", tests.clone())]),
        "lacks the archive \"cuda-tutorial.tar.zst\"",
    );
    expect_bad_zip(
        zip_of(&[
            ("cuda-tests.tar.zst", b"not zstd at all".to_vec()),
            ("cuda-tutorial.tar.zst", tutorial.clone()),
        ]),
        "not a readable zstd tar",
    );
    expect_bad_zip(
        zip_of(&[
            ("cuda-tests.tar.zst", tutorial.clone()),
            ("cuda-tutorial.tar.zst", tutorial.clone()),
        ]),
        "lacks the member \"target/nextest/binaries-metadata.json\"",
    );
}

#[test]
fn a_download_redirect_may_not_downgrade_to_plain_http() {
    let blob = "https://blob.example/a.zip?sig=x";
    assert!(github::redirect_target(blob, true).is_ok());
    assert!(github::redirect_target("http://blob.example/a.zip", false).is_ok());
    for (location, api_is_https, needle) in [
        (
            "http://blob.example/a.zip",
            true,
            "downgrades https to http",
        ),
        ("ftp://blob.example/a.zip", false, "not an http(s) URL"),
        ("/blob/a.zip", false, "not an http(s) URL"),
        ("file:///etc/passwd", true, "is not a"),
        ("https:///a.zip", true, "not a URL"),
    ] {
        let err = format!(
            "{:#}",
            github::redirect_target(location, api_is_https).unwrap_err()
        );
        assert!(err.contains(needle), "{location}: {err}");
    }
}

#[test]
fn digests_in_other_forms_are_compared_or_refused_never_skipped() {
    // Upper-case hex is the same digest.
    let api = Api::new();
    let zip = good_zip();
    let mut a = artifact(7, 100, &zip);
    a["digest"] = json!(format!("sha256:{}", sha256(&zip).to_uppercase()));
    api.listing(vec![a]);
    api.run(good_run(100));
    api.zip(7, zip.clone());
    let scratch = Scratch::new();
    api.reuse(&scratch.out()).unwrap().unwrap();
    scratch.assert_installed();
    // Another algorithm, or another spelling of the prefix, cannot be
    // checked, so the artifact is not used.
    for digest in [
        format!("sha512:{}", sha256(&zip)),
        format!("SHA256:{}", sha256(&zip)),
        sha256(&zip),
        String::new(),
    ] {
        let api = Api::new();
        let mut a = artifact(7, 100, &zip);
        a["digest"] = json!(digest);
        api.listing(vec![a]);
        api.run(good_run(100));
        api.zip(7, zip.clone());
        expect_failure(&api, "is not a sha256 digest");
    }
}

/// Every hop after the API's answer goes without the token, even a 307 back
/// to the API host; a second redirect is not followed at all.
#[test]
fn no_redirect_hop_carries_the_token() {
    let api = Api::new();
    let zip = good_zip();
    let back_home = format!("{}/download/7.zip", api.api.uri());
    api.listing(vec![artifact(7, 100, &zip)]);
    api.run(good_run(100));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/7/zip"))
            .respond_with(ResponseTemplate::new(307).insert_header("location", back_home.as_str())),
    );
    api.mount(
        Mock::given(method("GET"))
            .and(path("/download/7.zip"))
            .respond_with(ResponseTemplate::new(200).set_body_bytes(zip.clone())),
    );
    let scratch = Scratch::new();
    api.reuse(&scratch.out()).unwrap().unwrap();
    scratch.assert_installed();
    let hop = api
        .api_requests()
        .into_iter()
        .find(|r| r.url.path() == "/download/7.zip")
        .expect("the redirect was followed");
    assert!(
        !hop.headers.contains_key("authorization"),
        "the token went along to the redirect target"
    );

    // Blob storage redirecting again (308) is a failed download.
    let api = Api::new();
    let onward = format!("{}/elsewhere.zip", api.blob.uri());
    trusted_redirecting_to(&api, &zip, &format!("{}/blob/7.zip", api.blob.uri()));
    api.rt.block_on(
        Mock::given(method("GET"))
            .and(path("/blob/7.zip"))
            .respond_with(ResponseTemplate::new(308).insert_header("location", onward.as_str()))
            .mount(&api.blob),
    );
    expect_failure(&api, "HTTP 308");
    assert!(
        api.blob_requests()
            .iter()
            .all(|r| r.url.path() != "/elsewhere.zip")
    );
}

#[test]
fn stalled_blob_download_fails_over() {
    let api = Api::new();
    let zip = good_zip();
    trusted_redirecting_to(&api, &zip, &half_blob_server(zip.clone(), true));
    // Half the body arrives at once, then nothing: under the minimum rate
    // over the first window.
    expect_failure(
        &api,
        &format!("the download is too slow: {} bytes in 1 s", zip.len() / 2),
    );
}

#[test]
fn oversized_download_is_cut_off() {
    let api = Api::new();
    let zip = good_zip();
    // The listing understates the size; the announced length gives it away.
    let mut a = artifact(7, 100, &zip);
    a["size_in_bytes"] = json!(100);
    api.listing(vec![a]);
    api.run(good_run(100));
    let big = vec![0u8; 10_000_001];
    api.zip(7, big);
    expect_failure(
        &api,
        "the download announces 10000001 bytes, but the listing's size_in_bytes is 100",
    );
}

/// A body without a length that runs past the bound is cut off while it
/// streams: the bound is on the bytes, not on what the headers claim.
#[test]
fn unannounced_oversized_download_is_cut_off_while_streaming() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/zip\r\n\r\n"
            );
            let chunk = vec![0u8; 1 << 16];
            for _ in 0..200 {
                if stream.write_all(&chunk).is_err() {
                    break;
                }
            }
        }
    });
    let api = Api::new();
    let zip = good_zip();
    let mut a = artifact(7, 100, &zip);
    a["size_in_bytes"] = json!(100);
    api.listing(vec![a]);
    api.run(good_run(100));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/7/zip"))
            .respond_with(
                ResponseTemplate::new(302)
                    .insert_header("location", format!("http://127.0.0.1:{port}/blob")),
            ),
    );
    expect_failure(
        &api,
        "the download is longer than the listing's size_in_bytes (100): cut off at",
    );
}

#[test]
fn a_consumer_artifact_is_reused_only_for_its_own_head_commit() {
    let policy = policy();
    let ctx = |head_sha| TrustContext {
        repository_id: REPO_ID,
        full_name: "o/r".into(),
        current_run_id: CURRENT_RUN,
        trust: &policy,
        head_sha,
        now: chrono::Utc::now(),
    };
    let repo = || {
        Some(RunRepository {
            id: REPO_ID,
            full_name: "o/r".into(),
        })
    };
    let consumer = |title: Option<&str>| Run {
        id: 7,
        path: Some(".github/workflows/runpod-gpu-test.yml".into()),
        event: "workflow_run".into(),
        head_branch: Some("contributor".into()),
        head_sha: Some(commit(7)),
        created_at: None,
        display_title: title.map(str::to_owned),
        repository: repo(),
        head_repository: repo(),
    };
    let same = format!("GPU tests for {PR_HEAD}");
    let other = format!("GPU tests for {}", commit(99));
    // The run states the commit asked for: reused.
    assert_eq!(
        trust::judge_run(&consumer(Some(&same)), &ctx(Some(PR_HEAD))),
        Ok(None)
    );
    // Another pull request's run, whose build could have uploaded anything
    // under this name: refused, as is a run that states no commit.
    let refused = trust::judge_run(&consumer(Some(&other)), &ctx(Some(PR_HEAD)))
        .unwrap_err()
        .to_string();
    assert!(refused.contains("is not named exactly"), "{refused}");
    // The whole name must be the configured one: a name that states the
    // commit beside another (a second SHA, any other text) is refused.
    for title in [
        format!("GPU tests for {} {PR_HEAD}", commit(99)),
        format!("GPU tests for {PR_HEAD} {}", commit(99)),
        format!("GPU tests for {PR_HEAD} "),
        format!("gpu tests for {PR_HEAD}"),
        PR_HEAD.to_owned(),
    ] {
        let verdict = trust::judge_run(&consumer(Some(&title)), &ctx(Some(PR_HEAD)));
        assert!(
            matches!(verdict, Err(trust::Rejection::ConsumerRunName { .. })),
            "{title}: {verdict:?}"
        );
    }
    assert!(trust::judge_run(&consumer(None), &ctx(Some(PR_HEAD))).is_err());
    // A prefix of the commit inside a longer word is not the commit.
    let longer = format!("GPU tests for {PR_HEAD}ff");
    assert!(trust::judge_run(&consumer(Some(&longer)), &ctx(Some(PR_HEAD))).is_err());
    // Without --head-sha only publisher artifacts are trusted.
    let refused = trust::judge_run(&consumer(Some(&same)), &ctx(None))
        .unwrap_err()
        .to_string();
    assert!(refused.contains("only publisher artifacts"), "{refused}");
    // A publisher run needs no title, but it is bound to nothing else, so
    // even on `workflow_run` it must have built the default branch: a run
    // triggered from a contributor's branch built that branch's code.
    let mut publisher = consumer(None);
    publisher.path = Some(".github/workflows/ci-cache-publish.yml".into());
    assert!(
        matches!(
            trust::judge_run(&publisher, &ctx(None)),
            Err(trust::Rejection::OffDefaultBranch { .. })
        ),
        "a publisher's workflow_run run off the default branch was trusted"
    );
    publisher.head_branch = Some("main".into());
    assert_eq!(
        trust::judge_run(&publisher, &ctx(None)),
        Ok(Some(commit(7)))
    );
}

#[test]
fn rules_on_their_own() {
    let policy = policy();
    let ctx = TrustContext {
        repository_id: REPO_ID,
        full_name: "o/r".into(),
        current_run_id: CURRENT_RUN,
        trust: &policy,
        head_sha: Some(PR_HEAD),
        now: chrono::Utc::now(),
    };
    let repo = || {
        Some(RunRepository {
            id: REPO_ID,
            full_name: "o/r".into(),
        })
    };
    let run = |event: &str, branch: Option<&str>, path: &str| Run {
        id: 1,
        path: Some(path.into()),
        event: event.into(),
        head_branch: branch.map(str::to_owned),
        head_sha: Some(commit(1)),
        created_at: None,
        display_title: None,
        repository: repo(),
        head_repository: repo(),
    };
    let publish = ".github/workflows/ci-cache-publish.yml";
    for event in ["push", "schedule", "workflow_dispatch"] {
        // A direct event passes only once its commit is shown to be on `main`.
        assert_eq!(
            trust::judge_run(&run(event, Some("main"), publish), &ctx),
            Ok(Some(commit(1)))
        );
        assert!(trust::judge_run(&run(event, Some("dev"), publish), &ctx).is_err());
        assert!(trust::judge_run(&run(event, None, publish), &ctx).is_err());
    }
    // A publisher's `workflow_run` run gets the branch rules too.
    assert!(trust::judge_run(&run("workflow_run", None, publish), &ctx).is_err());
    assert_eq!(
        trust::judge_run(&run("workflow_run", Some("main"), publish), &ctx),
        Ok(Some(commit(1)))
    );
    // Events a pull request triggers or defines are never trusted, whatever
    // the trust policy lists (its validation refuses them too).
    let mut lax = policy.clone();
    lax.artifacts.trusted_events = [
        "pull_request_review",
        "pull_request_review_comment",
        "merge_group",
    ]
    .map(str::to_owned)
    .to_vec();
    let lax_ctx = TrustContext {
        trust: &lax,
        ..ctx.clone()
    };
    for event in [
        "pull_request_review",
        "pull_request_review_comment",
        "merge_group",
    ] {
        assert!(
            matches!(
                trust::judge_run(&run(event, Some("main"), publish), &lax_ctx),
                Err(trust::Rejection::UntrustedEvent { .. })
            ),
            "{event}"
        );
        let text = format!("[artifacts]\ntrusted-events = [\"{event}\"]\n");
        let err = format!("{:#}", Policy::parse(&text).unwrap_err());
        assert!(err.contains("pull request controls"), "{event}: {err}");
    }
    let mut no_commit = run("push", Some("main"), publish);
    no_commit.head_sha = None;
    assert!(trust::judge_run(&no_commit, &ctx).is_err());
    no_commit.head_sha = Some("../../evil".into());
    assert!(trust::judge_run(&no_commit, &ctx).is_err());
    assert!(trust::judge_run(&run("issue_comment", Some("main"), publish), &ctx).is_err());
    assert!(trust::judge_run(&run("push", Some("main"), "ci-cache-publish.yml"), &ctx).is_err());
    assert!(
        trust::judge_run(
            &run("push", Some("main"), &format!("{publish}@refs/heads/main")),
            &ctx
        )
        .is_ok()
    );
    // `@` is legal in a file name: only an `@ref` naming the default branch
    // is a ref suffix; anything else is another workflow file or another ref.
    for (suffix, trusted) in [
        ("@main", true),
        ("@refs/heads/main", true),
        ("@evil.yml", false),
        ("@refs/heads/main.yml", false),
        ("@refs/heads/feature", false),
        ("@refs/tags/main", false),
        ("@", false),
        ("x", false),
    ] {
        let verdict = trust::judge_run(
            &run("push", Some("main"), &format!("{publish}{suffix}")),
            &ctx,
        );
        assert_eq!(verdict.is_ok(), trusted, "{suffix}: {verdict:?}");
    }
    // Other spellings of the path are other files, or no file GitHub runs.
    for path in [
        "./.github/workflows/ci-cache-publish.yml",
        ".github/workflows/CI-cache-publish.yml",
        ".GITHUB/workflows/ci-cache-publish.yml",
        "x/.github/workflows/ci-cache-publish.yml",
        "o/r/.github/workflows/ci-cache-publish.yml@main",
        ".github/workflows//ci-cache-publish.yml",
        ".github/workflows/ci-cache-publish.yaml",
        "",
    ] {
        assert!(
            trust::judge_run(&run("push", Some("main"), path), &ctx).is_err(),
            "{path}"
        );
    }
    assert!(trust::judge_run(&run("PUSH", Some("main"), publish), &ctx).is_err());
    let mut renamed = run("push", Some("main"), publish);
    renamed.head_repository = Some(RunRepository {
        id: REPO_ID,
        full_name: "other/r".into(),
    });
    assert!(trust::judge_run(&renamed, &ctx).is_err());
    let mut current = run("push", Some("main"), publish);
    current.id = CURRENT_RUN;
    assert!(trust::judge_run(&current, &ctx).is_err());
    let mut deleted_fork = run("push", Some("main"), publish);
    deleted_fork.head_repository = None;
    assert!(trust::judge_run(&deleted_fork, &ctx).is_err());
}

#[test]
fn link_header_and_environment_parsing() {
    assert_eq!(
        github::next_link("<https://a/x?page=2>; rel=\"next\", <https://a/x?page=9>; rel=\"last\""),
        Some("https://a/x?page=2".to_owned())
    );
    assert_eq!(
        github::next_link("<https://a/x?page=1>; rel=\"prev\""),
        None
    );
    // A comma inside a target does not split it.
    assert_eq!(
        github::next_link(
            "<https://a/x?name=a,b&page=1>; rel=\"prev\", <https://a/x?name=a,b&page=3>; rel=\"next\""
        ),
        Some("https://a/x?name=a,b&page=3".to_owned())
    );
    // Several relations, any case, unquoted.
    assert_eq!(
        github::next_link("<https://a/x?page=3>; rel=\"last next\""),
        Some("https://a/x?page=3".to_owned())
    );
    assert_eq!(
        github::next_link("<https://a/x?page=3>; REL=Next"),
        Some("https://a/x?page=3".to_owned())
    );
    assert_eq!(
        github::next_link("<https://a/x?page=3>; rel=\"nextish\""),
        None
    );
    assert_eq!(github::next_link("<https://a/x?page=3; rel=\"next\""), None);
    assert_eq!(github::next_link(""), None);

    let env = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        GithubEnv::from_lookup(move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    };
    let err = env(&[]).unwrap_err();
    for needle in [
        "GITHUB_API_URL",
        "GITHUB_REPOSITORY",
        "GITHUB_RUN_ID",
        "GITHUB_TOKEN",
    ] {
        assert!(err.contains(needle), "{err}");
    }
    let err = env(&[
        ("GITHUB_API_URL", "https://api.github.com"),
        ("GITHUB_REPOSITORY", "o/../../x"),
        ("GITHUB_RUN_ID", "12"),
        ("GITHUB_TOKEN", "t"),
    ])
    .unwrap_err();
    assert!(err.contains("is not `owner/name`"), "{err}");
    let ok = env(&[
        ("GITHUB_API_URL", "https://ghe.example/api/v3/"),
        ("GITHUB_REPOSITORY", "o/r"),
        ("GITHUB_RUN_ID", "12"),
        ("GITHUB_TOKEN", "t"),
    ])
    .unwrap();
    assert_eq!(ok.api_url, "https://ghe.example/api/v3");
    assert_eq!(ok.run_id, 12);
    let debug = format!("{:?}", Api::new().env());
    assert!(
        !debug.contains(TOKEN) && debug.contains("<redacted>"),
        "{debug}"
    );
}

#[test]
#[cfg(unix)]
fn verification_rejects_damaged_archives() {
    let dir = tempfile::tempdir().unwrap();
    let spec: ArchiveSpec = policy().archive[0].clone();
    let good = dir.path().join("good.tar.zst");
    std::fs::write(&good, nextest_archive()).unwrap();
    let summary = verify::check_archive(&good, &spec).unwrap();
    assert_eq!(summary.members, 2);

    let bytes = nextest_archive();
    for (name, content, needle) in [
        ("empty", Vec::new(), "is empty"),
        (
            "truncated",
            bytes[..bytes.len() - 40].to_vec(),
            "not a readable zstd tar",
        ),
        (
            "garbage",
            b"\x28\xb5\x2f\xfd garbage".to_vec(),
            "not a readable zstd tar",
        ),
        (
            "trailing",
            [bytes.clone(), b"junk".to_vec()].concat(),
            "not a readable zstd tar",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let err = format!("{:#}", verify::check_archive(&path, &spec).unwrap_err());
        assert!(err.contains(needle), "{name}: {err}");
    }
    // Two frames back to back decode as one stream, as with the zstd tool.
    let split = dir.path().join("split");
    let tar = {
        let mut decoded = Vec::new();
        verify::ZstdFrames::new(std::io::BufReader::new(bytes.as_slice()))
            .read_to_end(&mut decoded)
            .unwrap();
        decoded
    };
    let (a, b) = tar.split_at(tar.len() / 2);
    let mut two = Vec::new();
    for half in [a, b] {
        ruzstd::encoding::compress(half, &mut two, ruzstd::encoding::CompressionLevel::Fastest);
    }
    std::fs::write(&split, two).unwrap();
    verify::check_archive(&split, &spec).unwrap();

    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let err = format!("{:#}", verify::check_archive(&link, &spec).unwrap_err());
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn a_damaged_cache_restore_is_replaced_by_a_trusted_artifact_without_building() {
    let api = Api::new();
    api.trusted(7, 100, good_zip());
    let scratch = Scratch::new();
    let out = scratch.out();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("cuda-tests.tar.zst"), nextest_archive()).unwrap();
    std::fs::write(out.join("cuda-tutorial.tar.zst"), b"damaged").unwrap();
    let policy = policy();
    // A root without a workspace: had the build run, it would have failed.
    let nowhere = scratch.dir.path().join("no-workspace");
    let request = super::Request {
        root: &nowhere,
        policy: &policy,
        trust: &policy,
        artifact_name: NAME,
        out: &out,
        reuse: true,
        cache_hit: true,
        head_sha: Some(PR_HEAD),
    };
    let source = super::obtain(&request, || Ok(api.env())).unwrap();
    assert_eq!(source.kind(), "artifact", "{source:?}");
    scratch.assert_installed();

    // Now the restore is whole: the cache is used and the API is not asked.
    let before = api.api_requests().len();
    let source = super::obtain(&request, || panic!("the cache hit needs no API")).unwrap();
    assert_eq!(source, super::Source::Cache);
    assert_eq!(api.api_requests().len(), before);
}

#[test]
fn missing_environment_falls_back_to_the_build_with_its_reason() {
    let scratch = Scratch::new();
    let policy = policy();
    let nowhere = scratch.dir.path().join("no-workspace");
    let request = super::Request {
        root: &nowhere,
        policy: &policy,
        trust: &policy,
        artifact_name: NAME,
        out: &scratch.out(),
        reuse: true,
        cache_hit: false,
        head_sha: Some(PR_HEAD),
    };
    // The build of a workspace that does not exist fails, which shows that
    // the missing environment led to the build rather than to an error.
    let err = super::obtain(&request, || Err("GITHUB_TOKEN is not set".into())).unwrap_err();
    assert!(
        format!("{err:#}").contains("cargo nextest archive"),
        "{err:#}"
    );
    scratch.assert_clean();
}

/// A tag called `main` wins over the branch in a bare-ref compare: GitHub
/// would answer `compare/main...{sha}` from the tag's history. The proof
/// must compare with the commit the *branch* points to.
#[test]
fn a_tag_and_a_branch_that_share_the_name_are_told_apart() {
    let api = Api::new();
    let zip = good_zip();
    let tagged = "f".repeat(40);
    api.listing(vec![artifact(7, 100, &zip)]);
    let mut run = good_run(100);
    run["head_sha"] = json!(tagged);
    // What the ambiguous ref resolves to (the tag `main`, whose history holds
    // the commit) and what the branch says (the commit is not in it).
    api.mount(
        Mock::given(method("GET"))
            .and(path(format!("/repos/o/r/compare/main...{tagged}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "behind"}))),
    );
    api.compare(&tagged, "diverged", 1);
    api.run(run);
    api.zip(7, zip);
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(
        reason.contains("is not in the history of branch \"main\""),
        "{reason}"
    );
    assert!(
        api.blob_requests().is_empty(),
        "the artifact was downloaded"
    );
    let paths: Vec<String> = api
        .api_requests()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert!(
        paths.contains(&"/repos/o/r/branches/main".to_owned()),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("/compare/main")),
        "a bare ref name was compared: {paths:?}"
    );
    scratch.assert_clean();

    // A branch head that cannot be read, or that is not a commit, proves
    // nothing: the candidate is skipped.
    for answer in [
        ResponseTemplate::new(404).set_body_json(json!({"message": "Branch not found"})),
        ResponseTemplate::new(200)
            .set_body_json(json!({"name": "main", "commit": {"sha": "main"}})),
        ResponseTemplate::new(200)
            .set_body_json(json!({"name": "other", "commit": {"sha": MAIN_HEAD}})),
    ] {
        let api = Api::new();
        let zip = good_zip();
        api.mount(
            Mock::given(method("GET"))
                .and(path("/repos/o/r/branches/main"))
                .respond_with(answer)
                .with_priority(1),
        );
        api.trusted(7, 100, zip);
        let scratch = Scratch::new();
        let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
        assert!(
            reason.contains("cannot tell whether its commit"),
            "{reason}"
        );
        assert!(api.blob_requests().is_empty());
    }
}

/// A consumer run whose name states the head commit beside another one is
/// not the run for that commit: only the whole configured name binds.
#[test]
fn a_consumer_run_named_with_two_commits_is_refused() {
    let consumer = |title: String| {
        move |r: &mut Value| {
            r["path"] = json!(".github/workflows/runpod-gpu-test.yml");
            r["event"] = json!("workflow_run");
            r["display_title"] = json!(title.clone());
        }
    };
    let none = |_: &mut Value| {};
    expect_skipped(
        none,
        consumer(format!("GPU tests for {} {PR_HEAD}", commit(5))),
        "is not named exactly \"GPU tests for 0123456789abcdef0123456789abcdef01234567\"",
    );
    // The configured format decides, not a hard-coded one.
    let api = Api::new();
    let zip = good_zip();
    api.listing(vec![artifact(7, 100, &zip)]);
    let mut run = good_run(100);
    consumer(format!("CUDA {PR_HEAD} on the pod"))(&mut run);
    api.run(run);
    api.zip(7, zip);
    let trust = Policy::parse(
        "[artifacts]\ntimeout-secs = 1\nconsumer-run-name = \"CUDA {head_sha} on the pod\"\n",
    )
    .unwrap();
    let scratch = Scratch::new();
    let reused = api.reuse_with(&scratch.out(), &trust).unwrap().unwrap();
    assert_eq!(reused.artifact_id, 7);
}

/// In the consumer the tree being keyed is the pull request's. Its policy
/// may name any workflow as trusted; only the trust policy decides.
#[test]
fn a_pull_request_policy_cannot_trust_its_own_workflow() {
    let hostile = Policy::parse(
        r#"
[publisher]
workflows = ["evil.yml"]
[artifacts]
trusted-workflows = ["evil.yml"]
trusted-events = ["push"]
timeout-secs = 1
[[archive]]
file = "cuda-tests.tar.zst"
nextest = ["-p", "gpu-crate", "--features", "cuda"]
[[archive]]
file = "cuda-tutorial.tar.zst"
build = ["--bin", "cuda_tutorial"]
binaries = ["cuda_tutorial"]
"#,
    )
    .unwrap();
    let serve = |api: &Api| {
        let zip = good_zip();
        api.listing(vec![artifact(7, 100, &zip)]);
        let mut run = good_run(100);
        run["path"] = json!(".github/workflows/evil.yml");
        api.run(run);
        api.zip(7, zip);
    };
    // The tree's policy as the `policy` of the request, the trusted
    // checkout's as its `trust`: refused.
    let api = Api::new();
    serve(&api);
    let scratch = Scratch::new();
    let out = scratch.out();
    let trusted = policy();
    let mut request = request(&hostile, &trusted, &out);
    let outcome = reuse_artifact(api.env(), &request).unwrap();
    let Reuse::Untrusted { skipped, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(skipped[0].rejection.check(), trust::Check::Workflow);
    assert!(api.blob_requests().is_empty());
    scratch.assert_clean();
    // Had the tree's policy decided (no --trust-policy), it would have been
    // reused: this is what the flag is for.
    let api = Api::new();
    serve(&api);
    request.trust = &hostile;
    let outcome = reuse_artifact(api.env(), &request).unwrap();
    assert!(matches!(outcome, Reuse::Installed(_)), "{outcome:?}");
}

/// More same-name artifacts than the old page cap, all of which the listing
/// alone rejects, in front of the trusted one: it is still found, and no
/// decoy cost a run lookup. Candidates are judged newest first, whatever
/// order the API lists them in.
#[test]
fn decoys_beyond_a_page_cap_do_not_hide_the_trusted_artifact() {
    const DECOY_PAGES: u64 = 51;
    let api = Api::new();
    let zip = good_zip();
    for page in 1..=DECOY_PAGES + 1 {
        let artifacts: Vec<Value> = if page <= DECOY_PAGES {
            (0..100)
                .map(|i| {
                    let id = 10_000 + page * 100 + i;
                    let mut a = artifact(id, id + 100_000, &zip);
                    match i % 3 {
                        0 => a["expired"] = json!(true),
                        1 => a["workflow_run"]["head_repository_id"] = json!(4242),
                        _ => a["expires_at"] = json!("2020-01-01T00:00:00Z"),
                    }
                    a
                })
                .collect()
        } else {
            // Listed last: an older trusted artifact, then a newer one.
            let mut older = artifact(8, 101, &zip);
            older["created_at"] = json!("2026-11-28T10:00:00Z");
            vec![older, artifact(9, 100, &zip)]
        };
        let mut answer = ResponseTemplate::new(200).set_body_json(json!({"artifacts": artifacts}));
        if page <= DECOY_PAGES {
            answer = answer.insert_header(
                "link",
                format!(
                    "<{}/repos/o/r/actions/artifacts?name={NAME}&per_page=100&page={}>; rel=\"next\"",
                    api.api.uri(),
                    page + 1
                )
                .as_str(),
            );
        }
        let mock = Mock::given(method("GET")).and(path("/repos/o/r/actions/artifacts"));
        api.mount(if page == 1 {
            mock.respond_with(answer).with_priority(10)
        } else {
            mock.and(query_param("page", page.to_string()))
                .respond_with(answer)
                .with_priority(1)
        });
    }
    api.run(good_run(100));
    api.run(good_run(101));
    api.zip(9, zip);
    let scratch = Scratch::new();
    let reused = api.reuse(&scratch.out()).unwrap().unwrap();
    assert_eq!((reused.artifact_id, reused.run_id), (9, 100));
    scratch.assert_installed();
    let run_lookups = api
        .api_requests()
        .iter()
        .filter(|r| r.url.path().starts_with("/repos/o/r/actions/runs/"))
        .count();
    assert_eq!(run_lookups, 1, "only the newest candidate's run was read");
    let mut skips = trust::Skips::default();
    assert_eq!(skips.tally(), "none");
    skips.push("1".into(), trust::Rejection::CurrentRun);
    skips.push("2".into(), trust::Rejection::Expired { at: None });
    skips.push("3".into(), trust::Rejection::Expired { at: None });
    assert_eq!(skips.tally(), "unexpired 2, not-current-run 1");
}

/// A listing of many odd entries is counted, not logged or kept one by one:
/// the first hundred skips keep their reasons, the rest are only counted.
#[test]
fn a_flood_of_odd_entries_is_counted_not_kept() {
    let api = Api::new();
    let entries: Vec<Value> = (0..20_000).map(|id| json!({"id": id})).collect();
    api.listing(entries);
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(
        reason.contains("(20000 skipped: artifact 0: its listing entry is malformed"),
        "{reason}"
    );
    assert!(reason.contains("; and 19995 more)"), "{reason}");
    let mut skips = trust::Skips::default();
    for id in 0..1000 {
        skips.push(id.to_string(), trust::Rejection::NoProducingRun);
    }
    assert_eq!((skips.len(), skips.total()), (trust::MAX_KEPT_SKIPS, 1000));
    assert_eq!(skips.tally(), "listing 1000");
}

/// The table of trust checks in `docs/gpu-archive.md` names the checks of
/// `trust.rs`, in their order.
#[test]
fn the_documented_checks_are_the_checks_in_their_order() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gpu-archive.md"),
    )
    .unwrap();
    let section = &doc[doc.find("## Trust checks").expect("the section")..];
    let documented: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with("| Check |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').nth(1).unwrap().trim().trim_matches('`'))
        .collect();
    let code: Vec<&str> = trust::CHECKS.iter().map(|c| c.name()).collect();
    assert_eq!(
        documented, code,
        "docs/gpu-archive.md's table and trust::CHECKS differ"
    );
}

/// A zstd tar written header by header, so that tests can hold extension
/// records (GNU long names, PAX headers) of any size and content.
fn zstd_tar_raw(entries: &[(tar::EntryType, &[u8], &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (kind, name, data) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(*kind);
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    let tar = builder.into_inner().unwrap();
    let mut out = Vec::new();
    ruzstd::encoding::compress(
        tar.as_slice(),
        &mut out,
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    out
}

/// The tar reader buffers a GNU long name or a PAX header whole, whatever
/// size its header declares, and a few bytes of zstd expand to gigabytes of
/// zeros: an artifact of a few KiB could make the check allocate until the
/// runner kills it, instead of falling back. Extension records are read
/// here, bounded; a member's name comes from them as the tar reader would
/// take it.
#[test]
fn an_oversized_tar_extension_record_is_refused_not_buffered() {
    use tar::EntryType;
    let dir = tempfile::tempdir().unwrap();
    let spec: ArchiveSpec = policy().archive[0].clone();
    let check = |name: &str, bytes: Vec<u8>| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        verify::check_archive(&path, &spec).map_err(|err| format!("{err:#}"))
    };
    let metadata = verify::NEXTEST_METADATA_MEMBER.as_bytes();
    let huge = vec![b'a'; (verify::MAX_EXTENSION_BYTES + 1) as usize];
    for kind in [
        EntryType::GNULongName,
        EntryType::GNULongLink,
        EntryType::XHeader,
        EntryType::XGlobalHeader,
    ] {
        let err = check(
            "huge",
            zstd_tar_raw(&[
                (kind, b"././@LongLink", &huge),
                (EntryType::Regular, metadata, b"{}"),
            ]),
        )
        .unwrap_err();
        assert!(err.contains("extension record"), "{kind:?}: {err}");
    }
    // A long name or a PAX path names the member after it, as in the tar
    // reader: the header's own name is not what an extractor would see.
    let long = format!("{}/{}", "d".repeat(150), "x");
    let renamed = check(
        "renamed",
        zstd_tar_raw(&[
            (EntryType::GNULongName, b"././@LongLink", long.as_bytes()),
            (EntryType::Regular, metadata, b"{}"),
        ]),
    )
    .unwrap_err();
    assert!(renamed.contains("lacks the member"), "{renamed}");
    let pax = format!(
        "{} path={}\n",
        6 + metadata.len() + 1,
        verify::NEXTEST_METADATA_MEMBER
    );
    let pax = format!("{} path={}\n", pax.len(), verify::NEXTEST_METADATA_MEMBER);
    let summary = check(
        "pax",
        zstd_tar_raw(&[
            (EntryType::XHeader, b"PaxHeaders/x", pax.as_bytes()),
            (EntryType::Regular, b"short-name", b"{}"),
            (
                EntryType::GNULongName,
                b"././@LongLink",
                format!("{long}\0").as_bytes(),
            ),
            (EntryType::Regular, b"cut", b"binary"),
        ]),
    )
    .unwrap();
    assert_eq!(summary.members, 2);
}

/// Attacks the checks already resist, each refused for its own reason.
#[test]
fn resisted_attacks_are_refused_for_their_reason() {
    use trust::Rejection as R;
    let none = |_: &mut Value| {};
    // A workflow path naming a pull request's merge ref, or spelled with
    // `..`, is not the trusted file at the default branch.
    for workflow in [
        ".github/workflows/ci-cache-publish.yml@refs/pull/1/merge",
        ".github/workflows/../workflows/ci-cache-publish.yml",
        ".github/workflows/ci-cache-publish.yml@refs/heads/main/../feature",
        ".github/workflows/ci-cache-publish.yml@MAIN",
    ] {
        expect_skipped(
            none,
            |r| r["path"] = json!(workflow),
            "is not one of artifacts.trusted-workflows",
        );
    }
    // A comparison answer other than exactly `identical` or `behind`.
    for status in ["Behind", "behind ", "ahead", "diverged", "", "unknown"] {
        let api = Api::new();
        api.compare(&commit(100), status, 1);
        api.trusted(7, 100, good_zip());
        let scratch = Scratch::new();
        let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
        assert!(
            reason.contains("is not in the history of branch"),
            "{status:?}: {reason}"
        );
        assert!(api.blob_requests().is_empty());
    }
    // A consumer run name with extra whitespace or look-alike characters.
    let policy = policy();
    let ctx = TrustContext {
        repository_id: REPO_ID,
        full_name: "o/r".into(),
        current_run_id: CURRENT_RUN,
        trust: &policy,
        head_sha: Some(PR_HEAD),
        now: chrono::Utc::now(),
    };
    for title in [
        format!("GPU tests for {PR_HEAD}\u{200b}"),
        format!("GPU\u{a0}tests for {PR_HEAD}"),
        format!("GPU tests for  {PR_HEAD}"),
        format!(" GPU tests for {PR_HEAD}"),
        format!("GPU tests for {PR_HEAD}\n"),
        format!("GPU tests for {}", PR_HEAD.to_uppercase()),
        format!("GPU tests f\u{043e}r {PR_HEAD}"),
    ] {
        let run = Run {
            id: 7,
            path: Some(".github/workflows/runpod-gpu-test.yml".into()),
            event: "workflow_run".into(),
            head_branch: Some("contributor".into()),
            head_sha: Some(PR_HEAD.into()),
            created_at: None,
            display_title: Some(title.clone()),
            repository: Some(RunRepository {
                id: REPO_ID,
                full_name: "o/r".into(),
            }),
            head_repository: Some(RunRepository {
                id: REPO_ID,
                full_name: "o/r".into(),
            }),
        };
        assert!(
            matches!(trust::judge_run(&run, &ctx), Err(R::ConsumerRunName { .. })),
            "{title:?}"
        );
    }
    // Same names, other repository ids (a deleted and recreated repository,
    // a fork renamed to this name): refused on the id.
    expect_skipped(
        none,
        |r| r["repository"] = json!({"id": 4242, "full_name": "o/r"}),
        "its run's repository is o/r (id 4242), not o/r (id 42)",
    );
    // An artifact that expires between the listing and the download: the
    // download fails, and the command falls back.
    let api = Api::new();
    let zip = good_zip();
    api.listing(vec![artifact(7, 100, &zip)]);
    api.run(good_run(100));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/7/zip"))
            .respond_with(
                ResponseTemplate::new(410)
                    .set_body_json(json!({"message": "Artifact has expired"})),
            ),
    );
    expect_failure(&api, "HTTP 410 Gone");
    // API error text with line breaks and a workflow command stays one
    // encoded line in the warning that reports it.
    let api = Api::new();
    api.listing(vec![artifact(7, 100, &zip)]);
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/runs/100"))
            .respond_with(ResponseTemplate::new(404).set_body_json(
                json!({"message": "Not Found\n::add-mask::x\r\n::set-output name=run_id::1"}),
            )),
    );
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(reason.contains("run 100 cannot be read"), "{reason}");
    let line = crate::gha::warning_line(&reason, true);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.contains("Not Found%0A::add-mask::x%0D%0A::set-output"),
        "{line}"
    );
}

// ---------------------------------------------------------------------------
// Bounds in time and bytes, and no panic, against a hostile API and a
// hostile blob host (issue 21).
// ---------------------------------------------------------------------------

/// The test policy with the reuse path's deadline set.
fn policy_with_deadline(secs: u64) -> Policy {
    let mut policy = policy();
    policy.artifacts.reuse_deadline_secs = secs;
    policy
}

/// What a hand-written blob host does with the one request it serves:
/// what a mock framework will not do (trickle, stall, lie about lengths).
#[derive(Clone)]
enum Blob {
    /// `chunk` bytes every `every` for at most `total`, with no
    /// `Content-Length` (the body ends when the connection closes).
    Trickle {
        chunk: usize,
        every: Duration,
        total: Duration,
    },
    /// `body`, announced with `content_length` (or not at all).
    Body {
        body: Vec<u8>,
        content_length: Option<u64>,
    },
    /// Accepts and reads the request, then says nothing for this long.
    Silent(Duration),
}

/// Serves `blob` to every connection on a port of 127.0.0.1; returns its
/// URL and a counter of the body bytes written.
fn hostile_blob(blob: Blob) -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::atomic::Ordering;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (blob, counter) = (blob.clone(), counter.clone());
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let head = |length: Option<u64>| {
                    let length = length
                        .map(|n| format!("content-length: {n}\r\n"))
                        .unwrap_or_else(|| "connection: close\r\n".to_owned());
                    format!("HTTP/1.1 200 OK\r\ncontent-type: application/zip\r\n{length}\r\n")
                };
                match blob {
                    Blob::Trickle {
                        chunk,
                        every,
                        total,
                    } => {
                        let _ = stream.write_all(head(None).as_bytes());
                        let started = std::time::Instant::now();
                        while started.elapsed() < total {
                            if stream.write_all(&vec![b'x'; chunk]).is_err() {
                                return;
                            }
                            counter.fetch_add(chunk as u64, Ordering::SeqCst);
                            std::thread::sleep(every);
                        }
                    }
                    Blob::Body {
                        body,
                        content_length,
                    } => {
                        let _ = stream.write_all(head(content_length).as_bytes());
                        for piece in body.chunks(1 << 14) {
                            if stream.write_all(piece).is_err() {
                                return;
                            }
                            counter.fetch_add(piece.len() as u64, Ordering::SeqCst);
                        }
                    }
                    Blob::Silent(how_long) => std::thread::sleep(how_long),
                }
            });
        }
    });
    (format!("http://127.0.0.1:{port}/blob"), sent)
}

/// A well-formed digest for a transfer that a bound ends before any
/// digest is compared (without one, nothing would be downloaded at all).
fn never_compared_digest() -> String {
    format!("sha256:{}", sha256(b"never compared"))
}

/// Artifact 7 of run 100, listed as `listed_size` bytes with `digest`
/// (none when `None`), whose download redirects to `location`.
fn trusted_at(api: &Api, listed_size: u64, digest: Option<String>, location: &str) {
    let mut entry = artifact(7, 100, b"");
    entry["size_in_bytes"] = json!(listed_size);
    entry["digest"] = json!(digest);
    api.listing(vec![entry]);
    api.run(good_run(100));
    api.mount(
        Mock::given(method("GET"))
            .and(path("/repos/o/r/actions/artifacts/7/zip"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", location)),
    );
}

/// The reuse path under `trust`, timed: its failure, and how long it took.
fn timed_failure(api: &Api, trust: &Policy) -> (String, Duration) {
    let scratch = Scratch::new();
    let started = std::time::Instant::now();
    let outcome = api.reuse_with(&scratch.out(), trust);
    let took = started.elapsed();
    let reason = match outcome {
        Err(err) => format!("{err:#}"),
        Ok(Err(reason)) => reason,
        Ok(Ok(reused)) => panic!("reused {reused:?}"),
    };
    scratch.assert_clean();
    (reason, took)
}

/// A blob host that sends 64 bytes at a time without a length keeps a
/// download alive for ever under a per-chunk timeout. It is cut off once a
/// window of `timeout-secs` (1 s here) brings less than the minimum rate.
#[test]
fn a_trickling_blob_host_is_cut_off_at_the_minimum_rate() {
    let api = Api::new();
    let (url, sent) = hostile_blob(Blob::Trickle {
        chunk: 64,
        every: Duration::from_millis(300),
        total: Duration::from_secs(30),
    });
    trusted_at(&api, 3_000_000, Some(never_compared_digest()), &url);
    let (reason, took) = timed_failure(&api, &policy());
    assert!(
        reason.contains("the download is too slow:")
            && reason.contains("under the minimum of 65536 bytes/s"),
        "{reason}"
    );
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert!(sent.load(std::sync::atomic::Ordering::SeqCst) < 1000);
}

/// A trickle just above the minimum rate passes every window, and ends at
/// the deadline instead, whatever stage the download is in.
#[test]
fn a_trickle_above_the_floor_ends_at_the_deadline() {
    let api = Api::new();
    let (url, _) = hostile_blob(Blob::Trickle {
        chunk: 16 << 10,
        every: Duration::from_millis(100),
        total: Duration::from_secs(60),
    });
    trusted_at(&api, 9_000_000, Some(never_compared_digest()), &url);
    let (reason, took) = timed_failure(&api, &policy_with_deadline(3));
    assert!(
        reason.contains(
            "the reuse path passed its deadline of 3 s (artifacts.reuse-deadline-secs) during the download, after"
        ),
        "{reason}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// The body may not pass the listing's `size_in_bytes`, announced or not:
/// a body without a length is cut off as soon as it passes it, and a
/// length other than the listing's is refused before the body is read.
#[test]
fn a_body_longer_than_the_listing_is_cut_off_whatever_the_headers_say() {
    use std::sync::atomic::Ordering;
    let zip = good_zip();
    let size = zip.len() as u64;
    let mut longer = zip.clone();
    longer.extend(vec![0u8; 5_000_000]);
    // No length: cut off while it streams, long before the 5 MB of junk.
    let api = Api::new();
    let (url, sent) = hostile_blob(Blob::Body {
        body: longer.clone(),
        content_length: None,
    });
    trusted_at(&api, size, Some(format!("sha256:{}", sha256(&zip))), &url);
    let (reason, _) = timed_failure(&api, &policy());
    assert!(
        reason.contains(&format!(
            "the download is longer than the listing's size_in_bytes ({size}): cut off at"
        )),
        "{reason}"
    );
    // The host may have written into socket buffers; it was not read.
    assert!(sent.load(Ordering::SeqCst) < 5_000_000, "the junk was read");
    // A length above the listing's, and one below it.
    for announced in [size + 1_000_000, size - 1] {
        let api = Api::new();
        let (url, _) = hostile_blob(Blob::Body {
            body: longer.clone(),
            content_length: Some(announced),
        });
        trusted_at(&api, size, Some(never_compared_digest()), &url);
        let (reason, _) = timed_failure(&api, &policy());
        assert!(
            reason.contains(&format!(
                "the download announces {announced} bytes, but the listing's size_in_bytes is {size}"
            )),
            "{reason}"
        );
    }
    // A correct length with more bytes after it: the client reads the
    // announced body only, which is the good zip.
    let api = Api::new();
    let (url, _) = hostile_blob(Blob::Body {
        body: longer,
        content_length: Some(size),
    });
    trusted_at(&api, size, Some(format!("sha256:{}", sha256(&zip))), &url);
    let scratch = Scratch::new();
    api.reuse(&scratch.out()).unwrap().unwrap();
    scratch.assert_installed();
}

/// A blob host that accepts the connection and never answers is bounded by
/// the per-request timeout.
#[test]
fn a_blob_host_that_never_answers_is_bounded() {
    let api = Api::new();
    let (url, _) = hostile_blob(Blob::Silent(Duration::from_secs(30)));
    trusted_at(&api, 1000, Some(never_compared_digest()), &url);
    let (reason, took) = timed_failure(&api, &policy());
    assert!(
        reason.contains("the download from 127.0.0.1:") && reason.contains("no answer within 1 s"),
        "{reason}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

/// Twenty run lookups that each stall just under the per-request timeout
/// took 19 s; the deadline ends the search, not the timeouts.
#[test]
fn stalling_run_lookups_end_at_the_deadline() {
    let api = Api::new();
    let zip = good_zip();
    let mut listing = Vec::new();
    for index in 0..20u64 {
        listing.push(artifact(100 + index, 1000 + index, &zip));
        api.mount(
            Mock::given(method("GET"))
                .and(path(format!("/repos/o/r/actions/runs/{}", 1000 + index)))
                .respond_with(
                    ResponseTemplate::new(200)
                        .set_delay(Duration::from_millis(900))
                        .set_body_json(good_run(1000 + index)),
                ),
        );
    }
    api.listing(listing);
    let (reason, took) = timed_failure(&api, &policy_with_deadline(3));
    assert!(
        reason
            .contains("the reuse path passed its deadline of 3 s (artifacts.reuse-deadline-secs)"),
        "{reason}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let lookups = api
        .api_requests()
        .iter()
        .filter(|r| r.url.path().starts_with("/repos/o/r/actions/runs/"))
        .count();
    assert!(lookups <= 5, "{lookups} run lookups after the deadline");
    assert!(api.blob_requests().is_empty());
}

/// Candidates from runs of one commit cost one comparison: the answer is
/// cached by commit within the run.
#[test]
fn compare_is_asked_once_per_commit() {
    let api = Api::new();
    let zip = good_zip();
    let shared = commit(4242);
    api.compare(&shared, "ahead", 1);
    let mut listing = Vec::new();
    for index in 0..5u64 {
        listing.push(artifact(100 + index, 1000 + index, &zip));
        let mut run = good_run(1000 + index);
        run["head_sha"] = json!(shared);
        api.run(run);
    }
    api.listing(listing);
    let scratch = Scratch::new();
    let reason = api.reuse(&scratch.out()).unwrap().unwrap_err();
    assert!(reason.contains("5 skipped"), "{reason}");
    let compares = api
        .api_requests()
        .iter()
        .filter(|r| r.url.path().starts_with("/repos/o/r/compare/"))
        .count();
    assert_eq!(compares, 1, "{reason}");
    let branches = api
        .api_requests()
        .iter()
        .filter(|r| r.url.path() == "/repos/o/r/branches/main")
        .count();
    assert_eq!(branches, 1);
}

/// API answers just under the per-response limit, page after page, hold
/// the job's memory and time: past the total budget the search stops.
#[test]
fn the_api_byte_budget_ends_the_search() {
    let api = Api::new();
    let padding = "p".repeat(200_000);
    for page in 1..=50u32 {
        let next = format!(
            "<{}/repos/o/r/actions/artifacts?name={NAME}&per_page=100&page={}>; rel=\"next\"",
            api.api.uri(),
            page + 1
        );
        let matcher = Mock::given(method("GET")).and(path("/repos/o/r/actions/artifacts"));
        let matcher = if page == 1 {
            matcher.and(query_param("per_page", "100"))
        } else {
            matcher.and(query_param("page", page.to_string()))
        };
        api.mount(
            matcher
                .respond_with(
                    ResponseTemplate::new(200)
                        .insert_header("link", next.as_str())
                        .set_body_json(json!({"artifacts": [], "padding": padding})),
                )
                .with_priority(if page == 1 { 5 } else { 1 }),
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let trust = policy();
    let err = rt.block_on(async {
        let github = github::Github::new(
            api.env(),
            Duration::from_secs(1),
            github::Deadline::after(60),
        )
        .unwrap();
        github.set_api_budget(1_000_000);
        format!(
            "{:#}",
            trust::find(&github, NAME, &trust, None).await.unwrap_err()
        )
    });
    assert!(
        err.contains("the API answers passed 128 MiB in total (the reuse path's bound)"),
        "{err}"
    );
    let pages = api
        .api_requests()
        .iter()
        .filter(|r| r.url.path() == "/repos/o/r/actions/artifacts")
        .count();
    assert!(pages <= 6, "{pages} pages read on a 1 MB budget");
}

/// A zstd stream that declares a tar member of 128 GB in 4 MB (RLE blocks
/// of zeros): decoding every byte is what proves an archive intact, so
/// only the deadline bounds it, during verification as during the download.
#[test]
fn a_zstd_bomb_is_cut_off_at_the_deadline() {
    // A tar header for a member of 2^37 bytes, as a raw zstd block, then
    // RLE blocks of 128 KiB each: 4 bytes of input each.
    let mut header = tar::Header::new_gnu();
    header.set_path(verify::NEXTEST_METADATA_MEMBER).unwrap();
    header.set_size(1 << 37);
    header.set_mode(0o644);
    header.set_cksum();
    let mut frame = Vec::new();
    frame.extend(0xFD2F_B528u32.to_le_bytes());
    // Frame header: no content size, no checksum, not single segment;
    // window 128 KiB (exponent 7).
    frame.push(0x00);
    frame.push(7 << 3);
    let block_header = |last: bool, kind: u32, size: u32| {
        let value = u32::from(last) | (kind << 1) | (size << 3);
        value.to_le_bytes()[..3].to_vec()
    };
    frame.extend(block_header(false, 0, 512));
    frame.extend(header.as_bytes());
    for _ in 0..1_000_000 {
        frame.extend(block_header(false, 1, 128 << 10));
        frame.push(0);
    }
    frame.extend(block_header(true, 1, 128 << 10));
    frame.push(0);
    let zip = zip_of(&[
        ("cuda-tests.tar.zst", frame),
        ("cuda-tutorial.tar.zst", tutorial_archive()),
    ]);
    let api = Api::new();
    api.trusted(7, 100, zip);
    let (reason, took) = timed_failure(&api, &policy_with_deadline(3));
    assert!(
        reason.contains("the reuse path passed its deadline of 3 s")
            && reason.contains("while verifying the archives"),
        "{reason}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// Strings, numbers and shapes a hostile API can put in any field.
fn hostile_values() -> Vec<Value> {
    let mut values = vec![
        json!(null),
        json!(true),
        json!(-1),
        json!(1.5),
        json!(u64::MAX),
        json!([]),
        json!({}),
        json!(""),
        json!("\u{0}"),
        json!("\r\n::add-mask::x\n::set-output name=source::artifact"),
        json!("\u{1b}[2J\u{1b}]8;;https://evil.example\u{7}link\u{7}\u{85}\u{9b}"),
        json!("\u{2028}\u{2029}\u{202e}\u{feff}💥"),
        json!("x".repeat(100_000)),
        json!("a@evil.example <img src=x> [l](https://evil.example) `"),
    ];
    values.push(serde_json::from_str("18446744073709551616").unwrap());
    values
}

/// Applies `value` at the `/`-separated `pointer` of `target` (creating it).
fn set_at(target: &mut Value, pointer: &str, value: &Value) {
    let mut current = target;
    let parts: Vec<&str> = pointer.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        current = &mut current[*part];
    }
    current[parts[parts.len() - 1]] = value.clone();
}

/// One hostile answer of the API: `value` in one field or header.
enum HostileAnswer {
    ArtifactField(&'static str, Value),
    RunField(&'static str, Value),
    /// `route` answers `body` with `status`.
    Route(String, Value, u16),
    Header(&'static str, http::HeaderValue),
}

impl HostileAnswer {
    /// Serves an otherwise trusted artifact with this answer in it, runs
    /// the reuse path, and checks that it ended without a panic: a reuse,
    /// or a failure with its reason, and nothing left behind.
    fn check(&self) {
        let api = Api::new();
        let zip = good_zip();
        let what = match self {
            HostileAnswer::ArtifactField(field, value) => {
                let mut entry = artifact(7, 100, &zip);
                set_at(&mut entry, field, value);
                api.listing(vec![entry]);
                api.run(good_run(100));
                format!("artifact {field} = {value}")
            }
            HostileAnswer::RunField(field, value) => {
                api.listing(vec![artifact(7, 100, &zip)]);
                let mut run = good_run(100);
                set_at(&mut run, field, value);
                if let Some(sha) = run["head_sha"].as_str() {
                    api.compare(sha, "behind", 5);
                }
                api.mount(
                    Mock::given(method("GET"))
                        .and(path("/repos/o/r/actions/runs/100"))
                        .respond_with(ResponseTemplate::new(200).set_body_json(run)),
                );
                format!("run {field} = {value}")
            }
            HostileAnswer::Route(route, body, status) => {
                api.listing(vec![artifact(7, 100, &zip)]);
                api.run(good_run(100));
                api.mount(
                    Mock::given(method("GET"))
                        .and(path(route.as_str()))
                        .respond_with(ResponseTemplate::new(*status).set_body_json(body))
                        .with_priority(1),
                );
                format!("{route} = {body}")
            }
            HostileAnswer::Header(header, value) => {
                api.listing(vec![artifact(7, 100, &zip)]);
                api.run(good_run(100));
                let (route, status) = match *header {
                    "link" => ("/repos/o/r/actions/artifacts", 200),
                    "x-ratelimit-reset" => ("/repos/o/r/actions/artifacts", 403),
                    _ => ("/repos/o/r/actions/artifacts/7/zip", 302),
                };
                let mut template =
                    ResponseTemplate::new(status).insert_header(*header, value.clone());
                if route == "/repos/o/r/actions/artifacts" {
                    template = template
                        .insert_header("x-ratelimit-remaining", "0")
                        .set_body_json(json!({"artifacts": [artifact(7, 100, &zip)]}));
                } else if *header == "content-length" {
                    template = template.insert_header(
                        "location",
                        format!("{}/blob/7.zip", api.blob.uri()).as_str(),
                    );
                }
                api.mount(
                    Mock::given(method("GET"))
                        .and(path(route))
                        .respond_with(template)
                        .with_priority(1),
                );
                format!("{header}: {value:?}")
            }
        };
        api.zip(7, zip);
        let scratch = Scratch::new();
        match api.reuse(&scratch.out()) {
            Ok(Ok(_)) => scratch.assert_installed(),
            Ok(Err(reason)) => {
                assert!(!reason.contains("unexpectedly"), "{what}: {reason}");
                scratch.assert_clean();
            }
            Err(err) => {
                let err = format!("{err:#}");
                assert!(!err.contains("unexpectedly"), "{what}: {err}");
                scratch.assert_clean();
            }
        }
    }
}

/// Nothing in the reuse path panics, whatever the API puts in a field it
/// reads: every answer is a fallback (or, for harmless text, a reuse),
/// never an abort with exit 101 and no outputs. (A panic would be caught
/// and reported as "failed unexpectedly"; the test refuses that too.)
#[test]
fn no_hostile_api_field_panics_the_reuse_path() {
    let artifact_fields = [
        "id",
        "name",
        "size_in_bytes",
        "expired",
        "created_at",
        "expires_at",
        "digest",
        "workflow_run",
        "workflow_run/id",
        "workflow_run/repository_id",
        "workflow_run/head_repository_id",
    ];
    let run_fields = [
        "id",
        "path",
        "event",
        "head_branch",
        "head_sha",
        "created_at",
        "display_title",
        "repository",
        "repository/id",
        "repository/full_name",
        "head_repository",
        "head_repository/full_name",
    ];
    let compare = format!("/repos/o/r/compare/{MAIN_HEAD}...{}", commit(100));
    let mut cases = Vec::new();
    for value in hostile_values() {
        for field in artifact_fields {
            cases.push(HostileAnswer::ArtifactField(field, value.clone()));
        }
        for field in run_fields {
            cases.push(HostileAnswer::RunField(field, value.clone()));
        }
        // The repository, the branch head, the comparison, the listing page
        // and an error message.
        for (route, body, status) in [
            ("/repos/o/r", json!({"id": value}), 200),
            (
                "/repos/o/r/branches/main",
                json!({"name": value, "commit": {"sha": MAIN_HEAD}}),
                200,
            ),
            (
                "/repos/o/r/branches/main",
                json!({"name": "main", "commit": {"sha": value}}),
                200,
            ),
            (compare.as_str(), json!({"status": value}), 200),
            (
                "/repos/o/r/actions/artifacts",
                json!({"artifacts": value}),
                200,
            ),
            (
                "/repos/o/r/actions/runs/100",
                json!({"message": value}),
                404,
            ),
        ] {
            cases.push(HostileAnswer::Route(route.to_owned(), body, status));
        }
    }
    // Headers: pagination links, redirects, lengths, rate limits, as text
    // and as bytes that are not text.
    for bytes in [
        &b"<>; rel=\"next\""[..],
        b"<http://[::1>; rel=\"next\"",
        b"<//evil.example/x>; rel=\"next\"",
        b"<\xff\xfe>; rel=\"next\"",
        b"\xff",
        b"99999999999999999999999",
        b"-1",
        b"http://",
        b"https://evil.example:99999/x",
        b"http://127.0.0.1:1/\xc3\xa9",
        &[b'a'; 60_000],
    ] {
        for header in ["link", "location", "content-length", "x-ratelimit-reset"] {
            let value = http::HeaderValue::from_bytes(bytes).unwrap();
            cases.push(HostileAnswer::Header(header, value));
        }
    }
    assert!(cases.len() > 400, "{} cases", cases.len());
    // Four at a time: each case has its own servers and runtime.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                while let Some(case) =
                    cases.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                {
                    case.check();
                }
            });
        }
    });
}

/// Nothing panics whatever the environment holds: every variable the reuse
/// path reads, with every hostile value, is read as an error (a fallback
/// with the reason) or as a value the clients accept.
#[test]
fn no_hostile_environment_value_panics_the_reuse_path() {
    let api = Api::new();
    api.trusted(7, 100, good_zip());
    let good = api.env();
    let hostile = [
        "",
        " ",
        "\n",
        "t\n",
        "t\r\n",
        "t\n\n",
        "\u{0}",
        "t\u{7}",
        "t\u{1b}",
        "t\u{7f}",
        "t\u{85}",
        "t\u{2028}",
        "t\u{fffd}",
        "t t",
        "t\tt",
        "é",
        "http://",
        "http://[::1",
        "http://127.0.0.1:99999",
        "http://user:pass@127.0.0.1:1",
        "http://127.0.0.1:1/?q#f",
        "ftp://127.0.0.1",
        "//127.0.0.1",
        "o/r/x",
        "../..",
        "-1",
        "99999999999999999999999",
        "12abc",
    ];
    let long = "x".repeat(100_000);
    let mut values: Vec<&str> = hostile.to_vec();
    values.push(&long);
    for var in [
        "GITHUB_API_URL",
        "GITHUB_REPOSITORY",
        "GITHUB_RUN_ID",
        "GITHUB_TOKEN",
    ] {
        for value in &values {
            let lookup = |name: &str| -> Option<String> {
                if name == var {
                    return Some((*value).to_owned());
                }
                Some(match name {
                    "GITHUB_API_URL" => good.api_url.clone(),
                    "GITHUB_REPOSITORY" => "o/r".to_owned(),
                    "GITHUB_RUN_ID" => CURRENT_RUN.to_string(),
                    "GITHUB_TOKEN" => TOKEN.to_owned(),
                    _ => return None,
                })
            };
            let env = match GithubEnv::from_lookup(lookup) {
                Ok(env) => env,
                Err(reason) => {
                    assert!(reason.contains(var), "{var}={value:?}: {reason}");
                    let encoded = crate::gha::warning_line(&reason, true);
                    assert!(
                        !encoded.chars().any(crate::gha::is_hidden),
                        "{var}={value:?}: {encoded:?}"
                    );
                    continue;
                }
            };
            let scratch = Scratch::new();
            let (policy, out) = (policy(), scratch.out());
            if let Err(err) = reuse_artifact(env, &request(&policy, &policy, &out)) {
                let err = format!("{err:#}");
                assert!(!err.contains("unexpectedly"), "{var}={value:?}: {err}");
            }
        }
    }
    // The token's one trailing newline is dropped; every other hidden or
    // non-ASCII character refuses it.
    assert_eq!(github::check_token("ghs_abc\n").unwrap(), "ghs_abc");
    assert_eq!(github::check_token("ghs_abc\r\n").unwrap(), "ghs_abc");
    for bad in [
        "ghs_abc\n\n",
        "ghs\nabc",
        "ghs\u{7}abc",
        "ghs abc",
        "ghs_é",
        "\n",
    ] {
        assert!(github::check_token(bad).is_err(), "{bad:?}");
    }
    // A hand-built environment gets the same checks as `from_env`.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for token in ["t\n\n", "t\u{7}"] {
            let env = GithubEnv {
                token: token.into(),
                ..api.env()
            };
            let built =
                github::Github::new(env, Duration::from_secs(1), github::Deadline::after(9));
            assert!(built.is_err(), "{token:?}");
        }
    });
}

/// GitHub's own Markdown renderer (cmark-gfm, through PyPI's `cmarkgfm`,
/// GitHub's fork with its extensions: tables, autolinks, tag filter), run
/// with raw HTML allowed, which is worse than GitHub's sanitiser: the HTML
/// of each document. None, with a `SKIPPED` line, when it is not installed
/// (under `CI=true`, which `.ci/run` sets after installing it, a failure).
pub(crate) fn render_gfm(documents: &[String]) -> Option<Vec<String>> {
    let script = "import sys, json, cmarkgfm\nfrom cmarkgfm.cmark import Options\njson.dump([cmarkgfm.github_flavored_markdown_to_html(d, options=Options.CMARK_OPT_UNSAFE) for d in json.load(sys.stdin)], sys.stdout)\n";
    let probe = std::process::Command::new("python3")
        .args(["-c", "import cmarkgfm"])
        .stdin(std::process::Stdio::null())
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        let test = std::thread::current()
            .name()
            .unwrap_or("this test")
            .to_owned();
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "{test} needs cmarkgfm, which is not installed, and CI=true skips nothing; install it with `pip install cmarkgfm`"
            );
        }
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: needs cmarkgfm, which is not installed; install it with `pip install cmarkgfm`"
        );
        return None;
    }
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(documents).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

/// The tags a rendered summary may hold: this program's table, heading and
/// paragraphs, and code spans. No link, image, or raw HTML.
const SUMMARY_TAGS: &[&str] = &[
    "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code",
];

/// Checks rendered HTML: only [`SUMMARY_TAGS`], no attribute at all, and
/// none of `markers` outside a `<code>` element. Returns the text of each
/// code element, entities decoded.
pub(crate) fn assert_inert(html: &str, markers: &[&str]) -> Vec<String> {
    let mut outside = String::new();
    let mut codes = Vec::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        outside.push_str(&rest[..open]);
        let close = rest[open..].find('>').expect("a closed tag") + open;
        let tag = &rest[open + 1..close];
        let name = tag.trim_start_matches('/');
        assert!(
            SUMMARY_TAGS.contains(&name),
            "the summary renders a <{tag}> element:\n{html}"
        );
        rest = &rest[close + 1..];
        if tag == "code" {
            let end = rest.find("</code>").expect("a closed code span");
            let text = rest[..end]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&amp;", "&");
            codes.push(text);
            rest = &rest[end + "</code>".len()..];
        }
    }
    outside.push_str(rest);
    for marker in markers {
        assert!(
            !outside.contains(marker),
            "{marker:?} is outside a code span:\n{html}"
        );
    }
    codes
}

/// Hostile text a run, branch or artifact name, or an API message, can hold.
const HOSTILE_SUMMARY_TEXT: &[&str] = &[
    "x\n# Pwned <img src=x onerror=alert(1)> [link](https://evil.example) ![i](https://evil.example/i.png) | cell |",
    "www.evil.example and https://evil.example/x",
    "foo@evil.example foo\\@evil\\.example fix@evil.example",
    "xmpp:foo@evil.example mailto:a@evil.example",
    "@octocat #1 o/r#2 GH-3 deadbeefdeadbeefdeadbeefdeadbeefdeadbeef",
    "<script>alert(1)</script> <a href=x>a</a> &lt;b&gt; &#64;",
    "`code` ``` *em* _em_ ~~s~~ [ ] \\",
    "trailing backslash \\",
    "`",
    " leading and trailing spaces ",
    "a\\|b | c",
    "\u{1b}[31m\u{7}\u{85}\u{2028}\u{2029}\u{202e}evil",
];

/// The summary shows hostile text as code spans: under GitHub's renderer no
/// link (URLs, `www.`, e-mail, `xmpp:`, `mailto:`), image, mention, HTML
/// or table cell survives, and each text shows as the characters it is.
#[test]
fn the_step_summary_renders_attacker_text_inert() {
    let documents: Vec<String> = HOSTILE_SUMMARY_TEXT
        .iter()
        .map(|hostile| {
            let source = super::Source::Build {
                reason: (*hostile).to_owned(),
                key_tree: (*hostile).to_owned(),
            };
            super::summary_markdown(
                &source,
                "k-v1-0",
                hostile,
                "| `a.tar.zst` | 1.0 MiB |\n",
                hostile,
            )
        })
        .collect();
    for (hostile, markdown) in HOSTILE_SUMMARY_TEXT.iter().zip(&documents) {
        // Only this program's own heading and table rows start a block.
        for line in markdown.lines() {
            assert!(
                line.is_empty()
                    || line == "### GPU archives"
                    || (line.starts_with("| ") && line.ends_with(" |"))
                    || line == "|---|---|",
                "{hostile:?}: {line:?}"
            );
        }
    }
    let Some(rendered) = render_gfm(&documents) else {
        return;
    };
    for (hostile, html) in HOSTILE_SUMMARY_TEXT.iter().zip(&rendered) {
        let codes = assert_inert(
            html,
            &["evil", "href", "src=", "octocat", "script", "@", "Pwned"],
        );
        // Each text shows whole, as itself (hidden characters as spaces).
        let shown: String = hostile
            .chars()
            .map(|c| if crate::gha::is_hidden(c) { ' ' } else { c })
            .collect();
        assert!(
            codes
                .iter()
                .any(|code| *code == format!("fresh build ({shown})")),
            "{hostile:?} does not show as itself: {codes:?}\n{html}"
        );
        assert!(codes.contains(&shown), "{codes:?}");
        // The tables keep their two columns: nothing split a cell.
        let rows = html.matches("<tr>").count();
        let cells = html.matches("<td>").count() + html.matches("<th>").count();
        assert_eq!(cells, rows * 2, "{html}");
    }
}

/// `--out` through a symbolic link inside the tree is found wherever the
/// link is on the way, and a link outside the tree is followed.
#[cfg(unix)]
#[test]
fn a_link_inside_the_tree_on_the_way_to_out_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("repo");
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir_all(root.join("real/sub")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("target")).unwrap();
    std::os::unix::fs::symlink("real", root.join("rel")).unwrap();
    std::os::unix::fs::symlink(&root, base.join("outside-link")).unwrap();
    let inside = |p: &Path| super::first_link_inside(p, &root).unwrap();
    assert_eq!(
        inside(&root.join("target/gpu-archive")),
        Some(root.join("target"))
    );
    assert_eq!(inside(&root.join("target")), Some(root.join("target")));
    assert_eq!(inside(&root.join("rel/sub/out")), Some(root.join("rel")));
    assert_eq!(
        inside(&root.join("real/../target/x")),
        Some(root.join("target"))
    );
    // Through a link outside the tree into it, then through one inside.
    assert_eq!(
        inside(&base.join("outside-link/target/x")),
        Some(root.join("target"))
    );
    assert_eq!(inside(&base.join("outside-link/real/new/out")), None);
    assert_eq!(inside(&root.join("real/sub/gpu-archive")), None);
    assert_eq!(inside(&elsewhere.join("x")), None);
    assert_eq!(inside(&root.join("does/not/exist")), None);
}
