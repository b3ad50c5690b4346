//! Command-line flags of ci-trust's subcommands, and their dispatch: the
//! xtask and the `ci-trust` binary both parse them.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};

/// The commit the binary was built from, set by the workflow that builds the
/// prebuilt xtask (`CI_TRUST_XTASK_COMMIT`); read at compile time, so no
/// build script runs.
pub const BUILT_FROM: &str = match option_env!("CI_TRUST_XTASK_COMMIT") {
    Some(commit) => commit,
    None => "a local build",
};

/// How the binary was compiled: `optimised` without debug assertions (the
/// release profile the prebuilt xtask is built with), else `unoptimised`
/// (the dev profile of a cold `cargo xtask`).
pub const BUILD_PROFILE: &str = if cfg!(debug_assertions) {
    "unoptimised"
} else {
    "optimised"
};

/// `--version`: the package version, the commit it was built from and how
/// it was compiled; a restored prebuilt binary is checked by running it
/// with `--version`.
pub static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (built from {BUILT_FROM}, {BUILD_PROFILE})",
        env!("CARGO_PKG_VERSION")
    )
});

/// The subcommands ci-trust provides: a host's xtask embeds them with
/// `#[command(flatten)]` beside its own, and the `ci-trust` binary runs them
/// alone.
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
    /// Adopt this CI in a Rust GPU workspace: workspace entry, alias, policy, workflows.
    InitCi(InitCi),
}

/// The repository `--root` defaults to, set once by the binary that embeds
/// the commands (the xtask: the repository it lives in; the `ci-trust`
/// binary: the current directory).
static DEFAULT_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

impl Command {
    /// Runs the command; `default_root` is what `--root` means when absent.
    pub fn run(&self, default_root: &Path) -> anyhow::Result<std::process::ExitCode> {
        // A second call in one process (tests) keeps the first root: every
        // binary passes the same one each time.
        let _ = DEFAULT_ROOT.set(default_root.to_path_buf());
        match self {
            Command::CiKey(cmd) => cmd.run(),
            Command::CheckContracts(cmd) => cmd.run(),
            Command::GpuArchive(cmd) => cmd.run(),
            Command::VerifyKey(cmd) => cmd.run(),
            Command::InitCi(cmd) => cmd.run(),
        }
    }
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
            None => DEFAULT_ROOT
                .get()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no default repository was set; pass --root DIR"))?,
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
    /// Who reads the findings: `regular` shows errors (concrete paths) and
    /// notes; `auditor` also shows warnings (paths that depend on something
    /// the repository does not show). The exit code follows errors only.
    #[arg(long, value_enum, default_value = "regular")]
    pub persona: Persona,
    /// This repository's `owner/name`, which decides guards such as
    /// `github.repository == 'org/repo'` (default: the policy's
    /// `[contracts] repository`, else the checkout's GitHub remotes).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repository: Option<String>,
}

/// Which findings `check-contracts` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Persona {
    Regular,
    Auditor,
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
    /// Run the traced build in the key tree, as `gpu-archive` does: a copy
    /// of exactly the key's inputs mounted at the repository's path in a
    /// private namespace (Linux: root, `CAP_SYS_ADMIN` or user namespaces).
    #[arg(long, requires = "trace")]
    pub key_tree: bool,
    /// The build command that `--trace` runs, from the repository root.
    #[arg(last = true, value_name = "BUILD COMMAND", requires = "trace")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct InitCi {
    #[command(flatten)]
    pub common: Common,
    /// The ci-trust checkout whose workflows, scripts and lockfile are the
    /// templates (default: the one this ci-trust was built from).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// The runner label of every GitHub-hosted job.
    #[arg(long, value_name = "LABEL", default_value = "ubuntu-24.04")]
    pub runner: String,
    /// The `name:` of the CI workflow whose runs start the GPU tests
    /// (default: `ci-trust`, the checks workflow init-ci writes).
    #[arg(long, value_name = "NAME")]
    pub ci_name: Option<String>,
    /// The GPU crates to archive (default: detected; repeat for several).
    #[arg(long, value_name = "PACKAGE")]
    pub gpu_package: Vec<String>,
    /// Replace files of the host's that differ (never its workflows).
    #[arg(long)]
    pub force: bool,
    /// Rewrite the files init-ci owns (marked) and show a diff of the rest.
    #[arg(long)]
    pub upgrade: bool,
    /// The git repository the host's xtask takes ci-trust from.
    #[arg(long, value_name = "URL", conflicts_with = "ci_trust_path")]
    pub ci_trust_git: Option<String>,
    /// The ci-trust revision it pins (default: the one the thin xtask
    /// already pins, else the commit this ci-trust was built from).
    #[arg(long, value_name = "REV", conflicts_with = "ci_trust_path")]
    pub ci_trust_rev: Option<String>,
    /// Take ci-trust from this checkout by path instead (local development, tests).
    #[arg(long, value_name = "DIR")]
    pub ci_trust_path: Option<PathBuf>,
    /// Skip the proof's fresh build of a GPU archive (one that needs a
    /// toolkit this machine lacks); the adoption is then not proven.
    #[arg(long)]
    pub no_build_proof: bool,
}

/// A full 40-hex commit id, lowercased.
fn parse_commit(text: &str) -> Result<String, String> {
    if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(format!("{text:?} is not a full 40-hex commit id"))
    }
}
