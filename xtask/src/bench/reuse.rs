//! `cargo xtask bench-reuse`: the artifact reuse path of `gpu-archive` end to
//! end (lookup, download, digest, extraction, zstd tar verification) against
//! `curl` + `unzip` of the same file, on a local server.
//!
//! The server is a small in-process HTTP/1.1 server that answers the GitHub
//! API calls the finder makes and redirects the download to a blob URL, as
//! GitHub does. The artifact holds one archive of about `--megabytes` MB: a
//! zstd tar of content shaped like compiled code (see [`Payload`]), zipped
//! with deflate like `actions/upload-artifact`. Each contender runs as a child process, so its
//! peak RSS is its own (`wait4`'s `ru_maxrss`); medians over `--runs` are
//! reported after one warm-up run each.
//!
//! Then the worst case: the reuse path as a child process against servers
//! that stall, trickle or never answer ([`Scenario`]), each run until it
//! gives up and falls back; the slowest must end within the deadline
//! (`--deadline-secs`) plus 5 s.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::flags;
use ci_trust::archive::{GithubEnv, Request, Reuse, reuse_artifact};
use ci_trust::policy::Policy;

const ARTIFACT_ID: u64 = 5;
const RUN_ID: u64 = 10;
/// The producing run's head commit, which the finder checks is on `main`.
const HEAD_SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const NAME: &str = "gpu-archive-v1-bench";
const ARCHIVE: &str = "cuda-tests.tar.zst";

/// The policy the measured child uses: the benchmark's own, or with `--root`
/// that repository's `[artifacts]` limits over the benchmark's archive.
fn bench_policy(flags: &flags::BenchReuse) -> Result<Policy> {
    let mut policy = Policy::parse(&format!(
        "[artifacts]\ntimeout-secs = 30\n[[archive]]\nfile = \"{ARCHIVE}\"\nnextest = [\"--workspace\"]\n"
    ))
    .expect("the benchmark policy is valid");
    if let Some(repository) = flags.common.load_policy()? {
        policy.artifacts = repository.artifacts;
    }
    Ok(policy)
}

impl flags::BenchReuse {
    pub fn run(&self) -> Result<ExitCode> {
        if let Some(out) = &self.child_out {
            return run_child(self, out);
        }
        if self.runs == 0 {
            bail!("--runs must be at least 1");
        }
        // Fail here, not in every child, on an unreadable policy.
        bench_policy(self)?;
        let mut root_args = Vec::new();
        if let Some(root) = &self.common.root {
            root_args.push("--root".into());
            root_args.push(std::path::absolute(root)?.into_os_string());
        }
        if let Some(policy) = &self.common.policy {
            root_args.push("--policy".into());
            root_args.push(std::path::absolute(policy)?.into_os_string());
        }
        let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
        let zip_path = scratch.path().join("artifact.zip");
        let started = Instant::now();
        let zip_bytes = generate_artifact(&zip_path, self.megabytes, scratch.path())?;
        let digest = sha256_file(&zip_path)?;
        eprintln!(
            "artifact: {:.1} MB zip generated in {:.1} s",
            zip_bytes as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        let server = Server::start(zip_path.clone(), zip_bytes, digest.clone())?;
        let exe = std::env::current_exe().context("cannot find the running xtask binary")?;

        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for run in 0..=self.runs {
            let out = scratch.path().join(format!("ours-{run}"));
            let measured = measure_child(
                Command::new(&exe)
                    .arg("bench-reuse")
                    .args(&root_args)
                    .arg("--child-out")
                    .arg(&out)
                    .arg("--child-api")
                    .arg(&server.url),
                &scratch.path().join("ours.log"),
            )
            .context("the reuse path failed")?;
            if !out.join(ARCHIVE).is_file() {
                bail!("the reuse path did not install {ARCHIVE}");
            }
            std::fs::remove_dir_all(&out).ok();

            let zip = scratch.path().join(format!("curl-{run}.zip"));
            let dir = scratch.path().join(format!("unzip-{run}"));
            let curl = measure_child(
                Command::new("curl")
                    .args(["-sSfL", "-H", "Authorization: Bearer bench", "-o"])
                    .arg(&zip)
                    .arg(format!(
                        "{}/repos/o/r/actions/artifacts/{ARTIFACT_ID}/zip",
                        server.url
                    )),
                &scratch.path().join("curl.log"),
            )
            .context("curl failed (is it installed? `apt-get install curl`)")?;
            let unzip = measure_child(
                Command::new("unzip")
                    .arg("-qo")
                    .arg(&zip)
                    .arg("-d")
                    .arg(&dir),
                &scratch.path().join("unzip.log"),
            )
            .context("unzip failed (is it installed? `apt-get install unzip`)")?;
            std::fs::remove_file(&zip).ok();
            std::fs::remove_dir_all(&dir).ok();
            // Run 0 warms the page cache and the binaries; it is not counted.
            if run > 0 {
                eprintln!(
                    "run {run}: gpu-archive reuse {:.2} s, {} KiB peak; curl {:.2} s, {} KiB; unzip {:.2} s, {} KiB",
                    measured.wall.as_secs_f64(),
                    measured.peak_rss_kib,
                    curl.wall.as_secs_f64(),
                    curl.peak_rss_kib,
                    unzip.wall.as_secs_f64(),
                    unzip.peak_rss_kib
                );
                ours.push(measured);
                theirs.push(Measured {
                    wall: curl.wall + unzip.wall,
                    peak_rss_kib: curl.peak_rss_kib.max(unzip.peak_rss_kib),
                });
            }
        }

        let ours = median(ours);
        let theirs = median(theirs);
        let mb = zip_bytes as f64 / 1e6;
        println!(
            "artifact: {mb:.1} MB zip holding a zstd tar of {:.0} MB of content; medians of {} runs",
            self.megabytes as f64 * 1.8,
            self.runs
        );
        println!("| contender | does | wall | throughput | peak RSS |\n|---|---|---|---|---|");
        for (name, does, m) in [
            (
                "gpu-archive --reuse path",
                "lookup + download + SHA-256 + extract + zstd tar verify",
                &ours,
            ),
            ("curl + unzip", "download + extract, no checks", &theirs),
        ] {
            println!(
                "| {name} | {does} | {:.2} s | {:.0} MB/s | {:.1} MB |",
                m.wall.as_secs_f64(),
                mb / m.wall.as_secs_f64(),
                m.peak_rss_kib as f64 / 1024.0
            );
        }
        println!(
            "ratio: {:.2}x curl + unzip (target: within 2x); peak RSS {:.1} MB (target: under 64 MB)",
            ours.wall.as_secs_f64() / theirs.wall.as_secs_f64(),
            ours.peak_rss_kib as f64 / 1024.0
        );
        drop(server);
        worst_case(
            self,
            &exe,
            &root_args,
            &zip_path,
            zip_bytes,
            &digest,
            scratch.path(),
        )
    }
}

/// A hostile server the worst case runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// Every run lookup of `CANDIDATES` candidates answers just before the
    /// per-request timeout.
    StallingRuns,
    /// The blob host sends 64 bytes every 1.5 s and no length (the attack
    /// that kept a download alive for a day).
    Trickle,
    /// The blob host sends a little faster than the minimum rate, for ever.
    AboveTheFloor,
    /// Every API request is accepted and never answered.
    Silent,
}

/// Candidates of [`Scenario::StallingRuns`]: the most the finder judges.
const CANDIDATES: usize = 500;

const SCENARIOS: &[Scenario] = &[
    Scenario::StallingRuns,
    Scenario::Trickle,
    Scenario::AboveTheFloor,
    Scenario::Silent,
];

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::StallingRuns => "stalling-runs",
            Scenario::Trickle => "trickle",
            Scenario::AboveTheFloor => "above-the-floor",
            Scenario::Silent => "silent",
        }
    }

    fn describe(self, timeout_secs: u64) -> String {
        match self {
            Scenario::StallingRuns => format!(
                "each of {CANDIDATES} run lookups answers after {:.1} s",
                timeout_secs as f64 - 0.1
            ),
            Scenario::Trickle => "blob: 64 bytes every 1.5 s, no Content-Length".to_owned(),
            Scenario::AboveTheFloor => format!(
                "blob: {} KiB/s (the floor is {} KiB/s), for ever",
                floor_beating_rate() >> 10,
                ci_trust::archive::MIN_TRANSFER_BYTES_PER_SEC >> 10
            ),
            Scenario::Silent => "API: accepts and never answers".to_owned(),
        }
    }

    fn from_name(name: &str) -> Result<Scenario> {
        SCENARIOS
            .iter()
            .copied()
            .find(|s| s.name() == name)
            .with_context(|| format!("no scenario {name:?}"))
    }
}

/// A rate just above the minimum transfer rate.
fn floor_beating_rate() -> u64 {
    ci_trust::archive::MIN_TRANSFER_BYTES_PER_SEC * 5 / 4
}

/// Runs every [`Scenario`] once as a child and prints how long each took
/// to give up; fails when the slowest passed the deadline plus 5 s.
fn worst_case(
    flags: &flags::BenchReuse,
    exe: &Path,
    root_args: &[std::ffi::OsString],
    zip_path: &Path,
    zip_bytes: u64,
    digest: &str,
    scratch: &Path,
) -> Result<ExitCode> {
    let (deadline, timeout) = (flags.deadline_secs, flags.timeout_secs);
    let bound = Duration::from_secs(deadline + 5);
    println!();
    println!(
        "worst case against hostile servers (artifacts.reuse-deadline-secs = {deadline}, timeout-secs = {timeout}; bound: deadline + 5 s = {} s)",
        bound.as_secs()
    );
    println!(
        "| hostile server | wall until the fallback | how the reuse path ended |\n|---|---|---|"
    );
    let mut worst = Duration::ZERO;
    for &scenario in SCENARIOS {
        let server = Server::start_hostile(
            zip_path.to_path_buf(),
            zip_bytes,
            digest.to_owned(),
            scenario,
            Duration::from_secs(timeout),
        )?;
        let out = scratch.join(format!("worst-{}", scenario.name()));
        let log = scratch.join(format!("worst-{}.log", scenario.name()));
        let measured = measure_child(
            Command::new(exe)
                .arg("bench-reuse")
                .args(root_args)
                .arg("--child-out")
                .arg(&out)
                .arg("--child-api")
                .arg(&server.url)
                .arg("--child-scenario")
                .arg(scenario.name())
                .arg("--deadline-secs")
                .arg(deadline.to_string())
                .arg("--timeout-secs")
                .arg(timeout.to_string()),
            &log,
        )
        .with_context(|| format!("the {} scenario", scenario.name()))?;
        let ended = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("fell back: ").map(str::to_owned))
            .unwrap_or_else(|| "?".to_owned());
        println!(
            "| {} | {:.1} s | {} |",
            scenario.describe(timeout),
            measured.wall.as_secs_f64(),
            ci_trust::gha::log_text(&ended, false).replace('|', "\\|")
        );
        worst = worst.max(measured.wall);
    }
    let within = worst < bound;
    println!(
        "worst: {:.1} s, {} the bound of {} s",
        worst.as_secs_f64(),
        if within { "within" } else { "OVER" },
        bound.as_secs()
    );
    if !within {
        bail!("the reuse path's worst case passed its deadline plus 5 s");
    }
    Ok(ExitCode::SUCCESS)
}

/// The measured child: one reuse from the benchmark server into `out`;
/// with `--child-scenario`, one that must fall back.
fn run_child(flags: &flags::BenchReuse, out: &Path) -> Result<ExitCode> {
    let api_url = flags
        .child_api
        .clone()
        .context("--child-out goes with --child-api")?;
    let env = GithubEnv {
        api_url,
        owner: "o".into(),
        repo: "r".into(),
        run_id: RUN_ID + 1,
        token: "bench".into(),
    };
    let mut policy = bench_policy(flags)?;
    let scenario = flags
        .child_scenario
        .as_deref()
        .map(Scenario::from_name)
        .transpose()?;
    if scenario.is_some() {
        policy.artifacts.reuse_deadline_secs = flags.deadline_secs;
        policy.artifacts.timeout_secs = flags.timeout_secs;
    }
    let request = Request {
        root: out,
        policy: &policy,
        trust: &policy,
        artifact_name: NAME,
        out,
        reuse: true,
        cache_hit: false,
        head_sha: None,
    };
    let outcome = reuse_artifact(env, &request);
    if let Some(scenario) = scenario {
        return match outcome {
            Ok(Reuse::Installed(_)) => {
                bail!("the {} scenario reused an artifact", scenario.name())
            }
            Ok(other) => {
                eprintln!("fell back: {other}");
                Ok(ExitCode::SUCCESS)
            }
            Err(err) => {
                eprintln!("fell back: {err:#}");
                Ok(ExitCode::SUCCESS)
            }
        };
    }
    match outcome? {
        Reuse::Installed(reused) => {
            eprintln!("reused artifact {}", reused.artifact_id);
            Ok(ExitCode::SUCCESS)
        }
        not_reused => bail!("the benchmark artifact was not reused: {not_reused}"),
    }
}

#[derive(Debug, Clone, Copy)]
struct Measured {
    wall: Duration,
    peak_rss_kib: u64,
}

fn median(mut runs: Vec<Measured>) -> Measured {
    runs.sort_by_key(|m| m.wall);
    let wall = runs[runs.len() / 2].wall;
    let peak_rss_kib = runs.iter().map(|m| m.peak_rss_kib).max().unwrap_or(0);
    Measured { wall, peak_rss_kib }
}

/// Runs `command` to completion and returns its wall time; peak RSS is not
/// measured off Unix (reported as 0).
#[cfg(not(unix))]
fn measure_child(command: &mut Command, log: &Path) -> Result<Measured> {
    let log_file = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let started = Instant::now();
    let status = command
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .status()
        .with_context(|| format!("cannot start {:?}", command.get_program()))?;
    let wall = started.elapsed();
    if !status.success() {
        bail!("{:?} failed ({status})", command.get_program());
    }
    Ok(Measured {
        wall,
        peak_rss_kib: 0,
    })
}

/// Runs `command` to completion and returns its wall time and peak RSS, read
/// from `wait4` so that it is the child's own. Output goes to `log`.
#[cfg(unix)]
#[allow(unsafe_code)]
fn measure_child(command: &mut Command, log: &Path) -> Result<Measured> {
    let log_file = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let started = Instant::now();
    let child = command
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("cannot start {:?}", command.get_program()))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: zeroed `rusage` is a valid value; the pointers are valid for the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    if rc != pid {
        bail!("wait4 failed: {}", io::Error::last_os_error());
    }
    // `child` was reaped by wait4 above; dropping it does not wait again.
    drop(child);
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        bail!(
            "{:?} failed (wait status {status}):\n{}",
            command.get_program(),
            text.lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(Measured {
        wall,
        // Linux reports kilobytes.
        peak_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

/// Writes the artifact zip to `zip_path` and returns its size.
///
/// The tar holds the nextest metadata member and a [`Payload`] of
/// `1.8 * megabytes` MB. It is compressed with ruzstd and
/// zipped with deflate, streaming through files only.
fn generate_artifact(zip_path: &Path, megabytes: u64, scratch: &Path) -> Result<u64> {
    let tar_path = scratch.join("payload.tar");
    {
        let mut builder = tar::Builder::new(BufWriter::new(File::create(&tar_path)?));
        let metadata = b"{\"rust-build-meta\":{}}";
        let mut header = tar::Header::new_gnu();
        header.set_size(metadata.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(
            &mut header,
            "target/nextest/binaries-metadata.json",
            &metadata[..],
        )?;
        // The payload compresses about 1.8:1 (and deflate gains nothing on
        // zstd output), so this gives a zip of about the requested size.
        let size = megabytes * 1_800_000;
        let mut header = tar::Header::new_gnu();
        header.set_size(size);
        header.set_mode(0o755);
        header.set_cksum();
        builder.append_data(
            &mut header,
            "target/debug/deps/gpu_tests-0123456789abcdef",
            Payload::new(size),
        )?;
        builder.into_inner()?.flush()?;
    }
    let zst_path = scratch.join("payload.tar.zst");
    {
        let source = BufReader::new(File::open(&tar_path)?);
        let mut target = BufWriter::new(File::create(&zst_path)?);
        ruzstd::encoding::compress(
            source,
            &mut target,
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        target.flush()?;
    }
    std::fs::remove_file(&tar_path)?;
    let mut writer = zip::ZipWriter::new(BufWriter::new(File::create(zip_path)?));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    writer.start_file(ARCHIVE, options)?;
    io::copy(&mut BufReader::new(File::open(&zst_path)?), &mut writer)?;
    writer.finish()?.flush()?;
    std::fs::remove_file(&zst_path)?;
    Ok(std::fs::metadata(zip_path)?.len())
}

/// Deterministic content shaped like compiled code for a compressor: runs
/// of low-entropy literals interleaved with copies of earlier bytes at
/// varying distances. zstd turns it into real sequences and Huffman-coded
/// literals (about 2:1), so decoding it does the work a real archive needs,
/// unlike raw noise or endless repeats.
struct Payload {
    remaining: u64,
    state: u64,
    history: Vec<u8>,
    position: usize,
    /// Bytes left in the current run, and the copy distance (0: literals).
    run_left: usize,
    distance: usize,
}

const HISTORY: usize = 1 << 16;

impl Payload {
    fn new(size: u64) -> Payload {
        Payload {
            remaining: size,
            state: 0x9E37_79B9_7F4A_7C15,
            history: vec![0; HISTORY],
            position: 0,
            run_left: 0,
            distance: 0,
        }
    }

    fn random(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn next_byte(&mut self) -> u8 {
        if self.run_left == 0 {
            let r = self.random();
            self.run_left = 8 + (r >> 8) as usize % 120;
            let distance = 1 + (r >> 24) as usize % (HISTORY - 1);
            self.distance = if r % 2 == 0 && distance <= self.position {
                distance
            } else {
                0
            };
        }
        self.run_left -= 1;
        let byte = if self.distance == 0 {
            // Two random nibbles ANDed: skewed towards small values, as
            // opcodes and offsets are.
            let r = self.random().to_le_bytes();
            (r[0] & r[1]) ^ (r[2] & 0x0f)
        } else {
            self.history[(self.position - self.distance) % HISTORY]
        };
        self.history[self.position % HISTORY] = byte;
        self.position += 1;
        byte
    }
}

impl Read for Payload {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = usize::try_from(self.remaining).map_or(buf.len(), |left| left.min(buf.len()));
        for byte in &mut buf[..n] {
            *byte = self.next_byte();
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The benchmark's GitHub: API answers and a blob download behind a redirect.
struct Server {
    url: String,
}

struct Served {
    zip_path: PathBuf,
    zip_bytes: u64,
    digest: String,
    url: String,
    /// How it misbehaves, if it does, and the per-request timeout it plays
    /// against.
    hostile: Option<(Scenario, Duration)>,
}

impl Server {
    fn start(zip_path: PathBuf, zip_bytes: u64, digest: String) -> Result<Server> {
        Server::start_with(zip_path, zip_bytes, digest, None)
    }

    fn start_hostile(
        zip_path: PathBuf,
        zip_bytes: u64,
        digest: String,
        scenario: Scenario,
        timeout: Duration,
    ) -> Result<Server> {
        Server::start_with(zip_path, zip_bytes, digest, Some((scenario, timeout)))
    }

    fn start_with(
        zip_path: PathBuf,
        zip_bytes: u64,
        digest: String,
        hostile: Option<(Scenario, Duration)>,
    ) -> Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0").context("cannot bind a local port")?;
        let url = format!("http://{}", listener.local_addr()?);
        let served = Arc::new(Served {
            zip_path,
            zip_bytes,
            digest,
            url: url.clone(),
            hostile,
        });
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let served = Arc::clone(&served);
                std::thread::spawn(move || {
                    // A failed connection only fails the contender using it.
                    let _ = serve_connection(stream, &served);
                });
            }
        });
        Ok(Server { url })
    }
}

/// Answers requests on one keep-alive connection until the client closes it.
fn serve_connection(stream: TcpStream, served: &Served) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::with_capacity(1 << 16, stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
                break;
            }
        }
        let target = request_line.split_whitespace().nth(1).unwrap_or("/");
        let path = target.split('?').next().unwrap_or("/");
        let json = |body: String| (200, "application/json", body);
        if let Some((scenario, timeout)) = served.hostile
            && let Some(answer) = hostile_answer(scenario, timeout, path, served)
        {
            match answer {
                Hostile::Json(body) => {
                    write!(
                        writer,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    )?;
                    writer.flush()?;
                    continue;
                }
                Hostile::Never => {
                    // Holds the connection open, answering nothing.
                    std::thread::sleep(Duration::from_secs(3600));
                    return Ok(());
                }
                Hostile::Stream { chunk, every } => {
                    write!(
                        writer,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/zip\r\nconnection: close\r\n\r\n"
                    )?;
                    writer.flush()?;
                    let bytes = vec![0u8; chunk];
                    loop {
                        writer.write_all(&bytes)?;
                        writer.flush()?;
                        std::thread::sleep(every);
                    }
                }
            }
        }
        let (status, content_type, body) = match path {
            "/repos/o/r" => json(r#"{"id": 1, "full_name": "o/r"}"#.to_owned()),
            "/repos/o/r/actions/artifacts" => json(format!(
                r#"{{"total_count": 1, "artifacts": [{{"id": {ARTIFACT_ID}, "name": "{NAME}", "size_in_bytes": {}, "expired": false, "digest": "sha256:{}", "created_at": "2026-11-30T00:00:00Z", "workflow_run": {{"id": {RUN_ID}, "repository_id": 1, "head_repository_id": 1}}}}]}}"#,
                served.zip_bytes, served.digest
            )),
            p if p == format!("/repos/o/r/actions/runs/{RUN_ID}") => json(format!(
                r#"{{"id": {RUN_ID}, "event": "push", "head_branch": "main", "head_sha": "{HEAD_SHA}", "path": ".github/workflows/ci-cache-publish.yml", "created_at": "2026-11-30T00:00:00Z", "repository": {{"id": 1, "full_name": "o/r"}}, "head_repository": {{"id": 1, "full_name": "o/r"}}}}"#
            )),
            "/repos/o/r/branches/main" => json(format!(
                r#"{{"name": "main", "commit": {{"sha": "{HEAD_SHA}"}}}}"#
            )),
            p if p == format!("/repos/o/r/compare/{HEAD_SHA}...{HEAD_SHA}") => {
                json(r#"{"status": "identical"}"#.to_owned())
            }
            p if p == format!("/repos/o/r/actions/artifacts/{ARTIFACT_ID}/zip") => {
                write!(
                    writer,
                    "HTTP/1.1 302 Found\r\nlocation: {}/blob/artifact.zip?sig=x\r\ncontent-length: 0\r\n\r\n",
                    served.url
                )?;
                writer.flush()?;
                continue;
            }
            "/blob/artifact.zip" => {
                write!(
                    writer,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/zip\r\ncontent-length: {}\r\n\r\n",
                    served.zip_bytes
                )?;
                io::copy(&mut File::open(&served.zip_path)?, &mut writer)?;
                writer.flush()?;
                continue;
            }
            _ => (
                404,
                "application/json",
                r#"{"message": "Not Found"}"#.to_owned(),
            ),
        };
        write!(
            writer,
            "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
            if status == 200 { "OK" } else { "Not Found" },
            body.len()
        )?;
        writer.flush()?;
    }
}

/// What a hostile server does with one request.
enum Hostile {
    Json(String),
    /// Keeps the connection and answers nothing.
    Never,
    /// A body of `chunk` bytes every `every`, without a length, for ever.
    Stream {
        chunk: usize,
        every: Duration,
    },
}

/// The hostile answer of `scenario` to a request for `path`, or None to
/// answer as GitHub would.
fn hostile_answer(
    scenario: Scenario,
    timeout: Duration,
    path: &str,
    served: &Served,
) -> Option<Hostile> {
    let listing = |size: u64| {
        let artifacts: Vec<String> = (0..CANDIDATES)
            .map(|index| {
                format!(
                    r#"{{"id": {}, "name": "{NAME}", "size_in_bytes": {size}, "expired": false, "created_at": "2026-11-30T00:00:00Z", "workflow_run": {{"id": {}, "repository_id": 1, "head_repository_id": 1}}}}"#,
                    ARTIFACT_ID + index as u64,
                    RUN_ID + 1000 + index as u64
                )
            })
            .collect();
        Hostile::Json(format!(r#"{{"artifacts": [{}]}}"#, artifacts.join(", ")))
    };
    match scenario {
        Scenario::Silent => Some(Hostile::Never),
        Scenario::StallingRuns => {
            if path == "/repos/o/r/actions/artifacts" {
                return Some(listing(served.zip_bytes));
            }
            let id = path.strip_prefix("/repos/o/r/actions/runs/")?;
            std::thread::sleep(timeout.saturating_sub(Duration::from_millis(100)));
            Some(Hostile::Json(format!(
                r#"{{"id": {id}, "event": "push", "head_branch": "other", "path": ".github/workflows/ci-cache-publish.yml", "repository": {{"id": 1, "full_name": "o/r"}}, "head_repository": {{"id": 1, "full_name": "o/r"}}}}"#
            )))
        }
        Scenario::Trickle | Scenario::AboveTheFloor => {
            if path != "/blob/artifact.zip" {
                // Answered as GitHub would (one good candidate, with a
                // digest the transfer never gets to) but with a zip as large
                // as the limits allow.
                return (path == "/repos/o/r/actions/artifacts").then(|| {
                    Hostile::Json(format!(
                        r#"{{"artifacts": [{{"id": {ARTIFACT_ID}, "name": "{NAME}", "size_in_bytes": {}, "expired": false, "digest": "sha256:{}", "created_at": "2026-11-30T00:00:00Z", "workflow_run": {{"id": {RUN_ID}, "repository_id": 1, "head_repository_id": 1}}}}]}}"#,
                        1u64 << 30,
                        "0".repeat(64)
                    ))
                });
            }
            Some(if scenario == Scenario::Trickle {
                Hostile::Stream {
                    chunk: 64,
                    every: Duration::from_millis(1500),
                }
            } else {
                let rate = floor_beating_rate();
                Hostile::Stream {
                    chunk: usize::try_from(rate / 10).unwrap_or(usize::MAX),
                    every: Duration::from_millis(100),
                }
            })
        }
    }
}
