//! Command-line flags of every subcommand; `main.rs` dispatches on them.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The commit the binary was built from, set by the workflow that builds the
/// prebuilt xtask (`CI_TRUST_XTASK_COMMIT`); read at compile time, so no
/// build script runs.
pub const BUILT_FROM: &str = match option_env!("CI_TRUST_XTASK_COMMIT") {
    Some(commit) => commit,
    None => "a local build",
};

/// `--version`: the package version and the commit it was built from; a
/// restored prebuilt binary is checked by running it with `--version`.
pub static VERSION: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{} (built from {BUILT_FROM})", env!("CARGO_PKG_VERSION")));

#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    about = "Cache-trust tooling for Rust GPU CI",
    version = VERSION.as_str()
)]
pub struct Xtask {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the content key of the GPU archives: a hash of every compile input.
    CiKey(CiKey),
    /// Check the workflows against the cache-trust contracts.
    CheckContracts(CheckContracts),
    /// Build the GPU nextest archives, or reuse a trusted cache entry or artifact.
    GpuArchive(GpuArchive),
    /// After a build, check that every file the compiler read is a key input.
    VerifyKey(VerifyKey),
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
    /// Adopt this CI in a Rust GPU workspace: workspace entry, alias, policy, workflows.
    InitCi(InitCi),
}

/// The flags every command takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// The repository to work on (default: the repository this xtask lives in).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The CI trust policy (default: ROOT/.github/ci-trust.toml, or the defaults when absent).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

impl Common {
    /// The repository root, made absolute so that no later step depends on the working directory.
    pub fn root(&self) -> anyhow::Result<PathBuf> {
        let root = match &self.root {
            Some(root) => root.clone(),
            None => Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("the xtask crate lives inside the repository")
                .to_path_buf(),
        };
        std::fs::canonicalize(&root).map_err(|err| {
            anyhow::anyhow!(
                "--root {}: {err}; pass an existing repository directory",
                root.display()
            )
        })
    }

    pub fn load_policy(&self, root: &Path) -> anyhow::Result<crate::policy::Policy> {
        crate::policy::Policy::load(root, self.policy.as_deref())
    }
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
    pub fn load_policy(&self) -> anyhow::Result<Option<crate::policy::Policy>> {
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
pub struct CiKey {
    #[command(flatten)]
    pub common: Common,
    /// Print every input and component, and why it is there, on stderr.
    #[arg(long)]
    pub explain: bool,
    /// Write a JSON manifest of the key, its components and its inputs.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Compare with an earlier `--json` manifest and say what changed.
    #[arg(long, value_name = "OLD.json")]
    pub diff: Option<PathBuf>,
    /// Also append `key=` and `artifact_name=` to `$GITHUB_OUTPUT`.
    #[arg(long)]
    pub github_output: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Github,
    Json,
    Sarif,
}

#[derive(Debug, Args)]
pub struct CheckContracts {
    #[command(flatten)]
    pub common: Common,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct GpuArchive {
    #[command(flatten)]
    pub common: Common,
    /// Where the archives are written (default: ROOT/target/gpu-archive; a
    /// relative path is taken from the current directory, like every path flag).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Look for a trusted artifact named by the key before building.
    #[arg(long)]
    pub reuse: bool,
    /// The workflow restored the archives from the cache into `--out`.
    #[arg(long)]
    pub cache_hit: bool,
    /// The pull-request head commit (40 hex) the archives are built from:
    /// a consumer run's artifact is reused only when its run name states it.
    #[arg(long, value_name = "SHA", value_parser = parse_commit)]
    pub head_sha: Option<String>,
    /// The policy whose trust settings (`default-branch`, `[publisher]`,
    /// `[artifacts]`) judge artifacts: the trusted checkout's, never the
    /// tree being keyed (default: the `--policy` of that tree).
    #[arg(long, value_name = "FILE")]
    pub trust_policy: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct VerifyKey {
    #[command(flatten)]
    pub common: Common,
    /// The target directory of the build to check (default: the workspace's).
    #[arg(long, value_name = "DIR")]
    pub target_dir: Option<PathBuf>,
    /// The profile directory under the target directory.
    #[arg(long, default_value = "debug")]
    pub profile: String,
    /// The `--target` triple the build was for, if any.
    #[arg(long, value_name = "TRIPLE")]
    pub target: Option<String>,
    /// Run BUILD COMMAND (after `--`) under strace and check every repository
    /// file any of its processes opened, executed or examined.
    #[arg(long, requires = "command")]
    pub trace: bool,
    /// The tracer `--trace` uses (default: the policy's `[verify] tracer`,
    /// auto: fanotify where permitted, else strace).
    #[arg(long, value_enum, requires = "trace")]
    pub tracer: Option<crate::policy::TracerChoice>,
    /// The build command that `--trace` runs, from the repository root.
    #[arg(last = true, value_name = "BUILD COMMAND", requires = "trace")]
    pub command: Vec<std::ffi::OsString>,
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
}

#[derive(Debug, Args)]
pub struct BenchKeystep {
    /// `--root`: the repository keyed in both paths (default: this one).
    #[command(flatten)]
    pub common: Common,
    /// Runs of the restore path; the median is reported (the cold build runs once).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
}

#[derive(Debug, Args)]
pub struct InitCi {
    #[command(flatten)]
    pub common: Common,
    /// The ci-trust checkout whose workflows, scripts and xtask are copied
    /// (default: the repository this xtask was built from).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// The runner label of every GitHub-hosted job.
    #[arg(long, value_name = "LABEL", default_value = "ubuntu-24.04")]
    pub runner: String,
    /// The `name:` of the CI workflow whose runs start the GPU tests.
    #[arg(long, value_name = "NAME", default_value = "CI")]
    pub ci_name: String,
    /// The GPU crates to archive (default: detected; repeat for several).
    #[arg(long, value_name = "PACKAGE")]
    pub gpu_package: Vec<String>,
    /// Replace files whose content differs (never done without it).
    #[arg(long)]
    pub force: bool,
}

/// A full 40-hex commit id, lowercased.
fn parse_commit(text: &str) -> Result<String, String> {
    if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(format!("{text:?} is not a full 40-hex commit id"))
    }
}
