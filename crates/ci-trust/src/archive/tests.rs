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
    zip_of(&[
        ("cuda-tests.tar.zst", nextest_archive()),
        ("cuda-tutorial.tar.zst", tutorial_archive()),
    ])
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
    let github = github::Github::new(api.env(), Duration::from_secs(1)).unwrap();
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
fn short_body_fails_over_on_its_digest() {
    let api = Api::new();
    let zip = good_zip();
    api.listing(vec![artifact(7, 100, &zip)]);
    api.run(good_run(100));
    api.zip(7, zip[..zip.len() / 2].to_vec());
    expect_failure(&api, "does not match the artifact digest");
}

#[test]
fn truncated_zip_without_a_digest_fails_over() {
    let api = Api::new();
    let zip = good_zip();
    let cut = zip[..zip.len() - 30].to_vec();
    let mut a = artifact(7, 100, &cut);
    a["digest"] = json!(null);
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
    expect_failure(&api, "the download stalled");
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
    expect_failure(&api, "over artifacts.max-download-bytes");
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
    expect_failure(&api, "the download passed artifacts.max-download-bytes");
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
    assert_eq!(
        trust::tally(&[
            trust::Skipped {
                artifact: "1".into(),
                rejection: trust::Rejection::CurrentRun
            },
            trust::Skipped {
                artifact: "2".into(),
                rejection: trust::Rejection::Expired { at: None }
            },
            trust::Skipped {
                artifact: "3".into(),
                rejection: trust::Rejection::Expired { at: None }
            },
        ]),
        "unexpired 2, not-current-run 1"
    );
}

/// The step summary shows hostile run, branch and artifact names as text:
/// no heading, link, image, HTML or table cell can be injected.
#[test]
fn the_step_summary_escapes_attacker_text() {
    let hostile = "x\n# Pwned <img src=x onerror=alert(1)> [link](https://evil.example) ![i](https://evil.example/i.png) | cell | www.evil.example a@evil.example `code` *em* ::add-mask::secret";
    let source = super::Source::Build {
        reason: format!("no trusted artifact named n (1 skipped: artifact 9: its run {hostile})"),
    };
    let markdown = super::summary_markdown(
        &source,
        "k-v1-0",
        "ci-trust.toml (--trust-policy)",
        "",
        "1.0 MiB",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("summary");
    crate::gha::append_to_summary_file(&file, &markdown).unwrap();
    let written = std::fs::read_to_string(&file).unwrap();
    let source_line = written.lines().find(|l| l.starts_with("Source: ")).unwrap();
    assert_eq!(
        source_line,
        r#"Source: fresh build \(no trusted artifact named n \(1 skipped\: artifact 9\: its run x \# Pwned &lt;img src\=x onerror\=alert\(1\)&gt; \[link\]\(https\:\/\/evil\.example\) \!\[i\]\(https\:\/\/evil\.example\/i\.png\) \| cell \| www\.evil\.example a\@evil\.example \`code\` \*em\* \:\:add\-mask\:\:secret\)\)"#
    );
    // Only this program's own heading and table rows start a block.
    for line in written.lines() {
        assert!(
            !line.starts_with('#') || line == "### GPU archives",
            "{line}"
        );
        assert!(!line.starts_with('|') || line.starts_with("| archive") || line == "|---|---|");
    }
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
