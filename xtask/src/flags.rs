//! Command-line flags of the xtask: ci-trust's subcommands, and this
//! repository's own benchmarks; `main.rs` dispatches on them.

use std::path::PathBuf;

use ci_trust::flags::Common;
use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Cache-trust tooling for Rust GPU CI",
    version = ci_trust::flags::VERSION.as_str()
)]
pub struct Xtask {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(flatten)]
    CiTrust(ci_trust::flags::Command),
    /// Benchmark `ci-key` against `hashFiles()` and the raw hashing floor.
    BenchKey(BenchKey),
    /// Benchmark the artifact reuse path against curl + unzip.
    BenchReuse(BenchReuse),
    /// Benchmark `verify-key` after a real build of a rust-analyzer-sized workspace.
    BenchVerify(BenchVerify),
    /// Benchmark a fresh build untraced against the same build under strace.
    BenchTrace(BenchTrace),
    /// Benchmark the key step of a cold CI job: compiling the xtask vs restoring it prebuilt.
    BenchKeystep(BenchKeystep),
    /// Benchmark a fresh build in the checkout against the same build in the key tree.
    BenchKeyTree(BenchKeyTree),
}

/// `--root` and `--policy` for the commands that work without a repository.
#[derive(Debug, Clone, Args)]
pub struct OptionalRoot {
    /// The repository to work on (default: none, see the command).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The CI trust policy (default: ROOT/.github/ci-trust.toml, or the defaults when absent).
    #[arg(long, value_name = "FILE", requires = "root")]
    pub policy: Option<PathBuf>,
}

impl OptionalRoot {
    /// The policy of `--root`, when one was given.
    pub fn load_policy(&self) -> anyhow::Result<Option<ci_trust::policy::Policy>> {
        let Some(root) = &self.root else {
            return Ok(None);
        };
        let common = Common {
            root: Some(root.clone()),
            policy: self.policy.clone(),
        };
        let root = common.root()?;
        common.load_policy(&root).map(Some)
    }
}

#[derive(Debug, Args)]
pub struct BenchKey {
    /// Measure this existing repository instead of a generated workspace.
    #[arg(long, value_name = "DIR", conflicts_with = "workdir")]
    pub root: Option<PathBuf>,
    /// Where to generate the benchmark workspace (default: a temporary
    /// directory). It must be empty or one an earlier run created (it holds
    /// the marker file `.ci-trust-bench-workdir`); only what the benchmark
    /// generated is ever deleted from it.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Runs of each contender; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Approximate size of the generated workspace in MB.
    #[arg(long, default_value_t = 100)]
    pub megabytes: u64,
    /// Measure this xtask binary (default: this repository's, built with
    /// `--release` as the publisher builds the one CI restores).
    #[arg(long, value_name = "BINARY")]
    pub xtask: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchVerify {
    /// Measure this existing repository instead of a generated workspace
    /// (built into a temporary target directory; nothing is written in it).
    #[arg(long, value_name = "DIR", conflicts_with = "workdir")]
    pub root: Option<PathBuf>,
    /// Where to generate and build the benchmark workspace (default: a
    /// temporary directory); the same rules as `bench-key --workdir`.
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Runs of each measurement; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
}

#[derive(Debug, Args)]
pub struct BenchTrace {
    /// Where to generate and build the benchmark workspace (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Runs of each contender; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Only the untraced build and fanotify (a large repository's build
    /// takes minutes per contender).
    #[arg(long)]
    pub fanotify_only: bool,
    /// `--root DIR`: build that repository (`cargo build --workspace
    /// --all-targets`) instead of a generated workspace.
    #[command(flatten)]
    pub common: OptionalRoot,
}

#[derive(Debug, Args)]
pub struct BenchKeyTree {
    /// Where to generate and build the benchmark workspace (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Runs of each contender; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// `--root DIR`: build that workspace (`cargo build --workspace`,
    /// offline) instead of a generated one; `--policy` keys it.
    #[command(flatten)]
    pub common: OptionalRoot,
}

#[derive(Debug, Args)]
pub struct BenchReuse {
    /// The repository whose policy `[artifacts]` limits (timeout, largest
    /// download) the measured reuse obeys (default: the benchmark's own).
    #[command(flatten)]
    pub common: OptionalRoot,
    /// Size of the served artifact in MB.
    #[arg(long, default_value_t = 200)]
    pub megabytes: u64,
    /// Runs of each contender; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Internal: run the reuse path once, into this directory, as the
    /// measured child process.
    #[arg(long, hide = true, value_name = "DIR", requires = "child_api")]
    pub child_out: Option<PathBuf>,
    /// Internal: the benchmark server the child talks to.
    #[arg(long, hide = true, value_name = "URL")]
    pub child_api: Option<String>,
    /// `artifacts.reuse-deadline-secs` for the worst case against hostile
    /// servers (each scenario runs until the reuse path gives up).
    #[arg(long, default_value_t = 10)]
    pub deadline_secs: u64,
    /// `artifacts.timeout-secs` (the per-request timeout and the window of
    /// the minimum transfer rate) for the worst case.
    #[arg(long, default_value_t = 5)]
    pub timeout_secs: u64,
    /// Internal: the child runs this hostile scenario and expects to fall back.
    #[arg(long, hide = true, value_name = "NAME", requires = "child_api")]
    pub child_scenario: Option<String>,
}

#[derive(Debug, Args)]
pub struct BenchKeystep {
    /// `--root`: the repository keyed in both paths (default: this one).
    #[command(flatten)]
    pub common: Common,
    /// Runs of the restore path; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Pairs of cold builds, (a) and (c) in turn (the order swapped each
    /// pair); the medians of their wall and CPU times are reported.
    #[arg(long, default_value_t = 1)]
    pub cold_runs: usize,
}
