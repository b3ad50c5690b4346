//! What a cargo command line means, in one place, and the build plan of
//! each `[[archive]]` computed from it once.
//!
//! Owns: reading a cargo (or `cargo nextest archive`) command line as cargo
//! reads it ([`CargoArgs`]: the `--config` values it adds, its
//! `--target-dir`, `--target` triples, profile, selected packages and the
//! files its flags name), where it writes as cargo chooses it
//! ([`command_output`]: target and build directory from the flags, the
//! environment and the configuration), the words of an arbitrary command
//! handed to `verify-key --trace` ([`TracedCommand`]), and [`BuildPlan`]:
//! one `[[archive]]`'s command, argv and output directories. The fresh
//! build, the key tree, the trace and the dep-info check all read the
//! plan; none parses a command line of its own.
//! Must not: run anything, read the checkout's configuration as anything
//! but data, or hash (that is `key`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::key::cargo_config::{self, CargoConfig, OutputDir};
use crate::key::workspace::{Workspace, normalize};
use crate::policy::{ArchiveSpec, Policy};

/// Which cargo command an `[[archive]]` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `cargo nextest archive --archive-file FILE ARGS…`
    NextestArchive,
    /// `cargo build --message-format=json-render-diagnostics ARGS…`
    Build,
}

impl Tool {
    /// The command an `[[archive]]` runs, and its arguments.
    pub fn of(spec: &ArchiveSpec) -> Option<(Tool, &[String])> {
        match (&spec.nextest, &spec.build) {
            (Some(args), _) => Some((Tool::NextestArchive, args)),
            (None, Some(args)) => Some((Tool::Build, args)),
            (None, None) => None,
        }
    }

    /// The command as the log names it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::NextestArchive => "cargo nextest archive",
            Tool::Build => "cargo build",
        }
    }

    /// The flag that names cargo's profile: nextest's own `--profile` is a
    /// nextest profile.
    fn profile_flag(self) -> &'static str {
        match self {
            Tool::NextestArchive => "--cargo-profile",
            Tool::Build => "--profile",
        }
    }
}

/// The arguments of one cargo command line, as cargo reads them: the words
/// before `--` (what follows is the program's, not cargo's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CargoArgs {
    words: Vec<String>,
}

/// Gets the path out of a flag's value.
type PathOfValue = fn(&str) -> &str;

/// Flags whose value is a nextest configuration file the archive reads:
/// (flag, how to get the path out of its value).
const NEXTEST_FILE_FLAGS: &[(&str, PathOfValue)] = &[
    ("--config-file", |value| value),
    // `--tool-config-file TOOL:PATH`
    ("--tool-config-file", |value| {
        value.split_once(':').map_or(value, |(_, path)| path)
    }),
];

impl CargoArgs {
    pub fn new<S: AsRef<str>>(args: &[S]) -> CargoArgs {
        CargoArgs {
            words: args
                .iter()
                .map(|a| a.as_ref().to_owned())
                .take_while(|a| a != "--")
                .collect(),
        }
    }

    /// The words cargo reads.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// Every value of `flag`, in order: `FLAG VALUE` and `FLAG=VALUE`.
    pub fn values(&self, flag: &str) -> Vec<&str> {
        let mut found = Vec::new();
        for (i, word) in self.words.iter().enumerate() {
            if word == flag {
                found.extend(self.words.get(i + 1).map(String::as_str));
            } else if let Some(value) = word.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                found.push(value);
            }
        }
        found
    }

    /// The value cargo uses when `flag` is given more than once: the last.
    pub fn last(&self, flag: &str) -> Option<&str> {
        self.values(flag).last().copied()
    }

    /// Whether any of `names` stands as a word of its own.
    pub fn has(&self, names: &[&str]) -> bool {
        self.words.iter().any(|w| names.contains(&w.as_str()))
    }

    /// The `--config KEY=VALUE|FILE` values, in order (a later one wins).
    pub fn configs(&self) -> Vec<&str> {
        self.values("--config")
    }

    /// The `--target` triples (cargo builds each into its own directory).
    pub fn targets(&self) -> Vec<&str> {
        self.values("--target")
    }

    /// The cargo profile `tool` builds with: its profile flag, else
    /// `release` for `--release`/`-r`, else `dev`.
    pub fn profile(&self, tool: Tool) -> String {
        match self.last(tool.profile_flag()) {
            Some(profile) => profile.to_owned(),
            None if self.has(&["--release", "-r"]) => "release".to_owned(),
            None => "dev".to_owned(),
        }
    }

    /// The package names the command selects, or `None` when it may select
    /// more than named packages (`--workspace`, `--all`, another manifest,
    /// configuration or unstable flags, a name pattern).
    pub fn selected_packages(&self) -> Option<Vec<String>> {
        let mut names = Vec::new();
        let mut words = self.words.iter();
        while let Some(word) = words.next() {
            let name = match word.as_str() {
                "--workspace" | "--all" => return None,
                // Another manifest, or configuration (`--config patch…`) or
                // unstable flags that can change what is built: not provable.
                w if w.starts_with("--manifest-path")
                    || w.starts_with("--config")
                    || w.starts_with("-Z") =>
                {
                    return None;
                }
                "-p" | "--package" => words.next()?.clone(),
                w if w.starts_with("--package=") => w["--package=".len()..].to_owned(),
                w if w.starts_with("-p") => w[2..].to_owned(),
                _ => continue,
            };
            // `-p 'gpu-*'` is a pattern cargo expands over the workspace.
            if name.contains(['*', '?', '[']) {
                return None;
            }
            // `-p name@version` names the package too.
            names.push(name.split('@').next().unwrap_or_default().to_owned());
        }
        Some(names)
    }

    /// The nextest configuration files the flags name (`--config-file`,
    /// `--tool-config-file TOOL:PATH`), as written.
    pub fn nextest_config_files(&self) -> Vec<&str> {
        NEXTEST_FILE_FLAGS
            .iter()
            .flat_map(|(flag, path_of)| self.values(flag).into_iter().map(path_of))
            .collect()
    }
}

/// Where one cargo command writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The target directory: final artifacts.
    pub target_dir: PathBuf,
    /// The build directory (`build.build-dir`, by default the target
    /// directory): `<profile>/deps/*.d` dep-info and build script outputs.
    pub build_dir: PathBuf,
}

/// Where the cargo (or `cargo nextest`) command line `args`, run from
/// `repo_root` in `workspace`, writes, as cargo decides it: the target
/// directory is the last `--target-dir`, else `CARGO_TARGET_DIR`, else
/// `build.target-dir` from the command's `--config` values (the last
/// wins), else `CARGO_BUILD_TARGET_DIR` or the configuration files (what
/// [`Workspace::target_dir`] already holds); the build directory is
/// `build.build-dir` from the same sources (`CARGO_BUILD_BUILD_DIR`), else
/// the target directory.
pub fn command_output(
    workspace: &Workspace,
    repo_root: &Path,
    args: &CargoArgs,
) -> Result<CommandOutput> {
    let cli = CargoConfig::from_command_line(repo_root, &args.configs())?;
    let env_dir = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(|dir| normalize(&repo_root.join(dir)))
    };
    let target_dir = match args.last("--target-dir") {
        Some(dir) => normalize(&repo_root.join(dir)),
        None if std::env::var_os("CARGO_TARGET_DIR").is_some_and(|v| !v.is_empty()) => {
            workspace.target_dir.clone()
        }
        None => cli
            .target_dir(repo_root)
            .map_or_else(|| workspace.target_dir.clone(), |dir| dir.path),
    };
    let configured_build_dir = cli
        .build_dir(repo_root)
        .map(|dir| cargo_config::expand_build_dir(&dir, &workspace.root))
        .or_else(|| {
            env_dir("CARGO_BUILD_BUILD_DIR").map(|path| {
                let set_by = "the environment variable CARGO_BUILD_BUILD_DIR".to_owned();
                cargo_config::expand_build_dir(&OutputDir { path, set_by }, &workspace.root)
            })
        })
        .or_else(|| {
            workspace
                .build_dir
                .as_ref()
                .map(|dir| cargo_config::expand_build_dir(dir, &workspace.root))
        })
        .transpose()?;
    Ok(CommandOutput {
        build_dir: configured_build_dir.unwrap_or_else(|| target_dir.clone()),
        target_dir,
    })
}

/// The build of one `[[archive]]`: its command, and where it writes.
#[derive(Debug, Clone)]
pub struct BuildPlan {
    /// The archive's file name inside `--out`.
    pub file: String,
    pub tool: Tool,
    /// The `[[archive]]` arguments, as the policy writes them.
    pub args: Vec<String>,
    /// Those arguments as cargo reads them.
    pub cargo: CargoArgs,
    /// Where the command writes, run from the repository root.
    pub output: CommandOutput,
    /// The binaries a `build` archive packs.
    pub binaries: Vec<String>,
}

impl BuildPlan {
    /// The plan of `spec`, for the workspace at `root`.
    pub fn for_archive(root: &Path, workspace: &Workspace, spec: &ArchiveSpec) -> Result<Self> {
        let (tool, args) = match (&spec.nextest, &spec.build) {
            (Some(args), _) => (Tool::NextestArchive, args.clone()),
            (None, Some(args)) => (Tool::Build, args.clone()),
            (None, None) => {
                anyhow::bail!("archive {} has neither `nextest` nor `build`", spec.file)
            }
        };
        let cargo = CargoArgs::new(&args);
        let output = command_output(workspace, root, &cargo)?;
        Ok(BuildPlan {
            file: spec.file.clone(),
            tool,
            args,
            cargo,
            output,
            binaries: spec.binaries.clone(),
        })
    }

    /// The plans of every `[[archive]]` of `policy`, in order.
    pub fn for_policy(root: &Path, workspace: &Workspace, policy: &Policy) -> Result<Vec<Self>> {
        policy
            .archive
            .iter()
            .map(|spec| BuildPlan::for_archive(root, workspace, spec))
            .collect()
    }

    /// The command line: `cargo` (the program), then the tool's words, then
    /// the `[[archive]]` arguments; `archive_file` is where a nextest
    /// archive is written.
    pub fn argv(&self, cargo: &OsStr, archive_file: &Path) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![cargo.to_owned()];
        match self.tool {
            Tool::NextestArchive => argv.extend([
                "nextest".into(),
                "archive".into(),
                "--archive-file".into(),
                archive_file.into(),
            ]),
            Tool::Build => argv.extend([
                "build".into(),
                "--message-format=json-render-diagnostics".into(),
            ]),
        }
        argv.extend(self.args.iter().map(OsString::from));
        argv
    }

    /// The directories the command writes to: its target and build
    /// directory, and each `--target-dir` as written when it goes through
    /// `..` (which the trace refuses: it resolves differently once the
    /// build has made the directories before it).
    pub fn output_dirs(&self, root: &Path) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .cargo
            .values("--target-dir")
            .into_iter()
            .map(|dir| root.join(dir))
            .filter(|dir| {
                dir.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            })
            .collect();
        dirs.push(self.output.target_dir.clone());
        if self.output.build_dir != self.output.target_dir {
            dirs.push(self.output.build_dir.clone());
        }
        dirs
    }

    /// The profile directories it compiles into (`<build-dir>/[<triple>/]<profile>`),
    /// from its `--target` triples, else the configuration's `build.target`
    /// triples (`configured_targets`), else the host directory. A `.json`
    /// target specification builds into a directory named by its stem.
    pub fn profile_dirs(&self, configured_targets: &[String]) -> Vec<PathBuf> {
        let profile = profile_dir(&self.cargo.profile(self.tool)).to_owned();
        let named: Vec<String> = self
            .cargo
            .targets()
            .into_iter()
            .map(cargo_config::target_dir_name)
            .collect();
        let triples = if named.is_empty() {
            configured_targets.to_vec()
        } else {
            named
        };
        if triples.is_empty() {
            return vec![self.output.build_dir.join(profile)];
        }
        triples
            .iter()
            .map(|triple| self.output.build_dir.join(triple).join(&profile))
            .collect()
    }
}

/// The directory cargo uses for a profile: `dev` and `test` build into `debug`.
pub fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    }
}

/// The variables that send a cargo command's output elsewhere.
const OUTPUT_VARS: [&str; 3] = [
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
];

/// A command line handed to `verify-key --trace`: any program, typically
/// `cargo build …` or `env CARGO_TARGET_DIR=out cargo …`.
pub struct TracedCommand {
    words: Vec<String>,
}

impl TracedCommand {
    pub fn new(command: &[OsString]) -> TracedCommand {
        TracedCommand {
            words: command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }
    }

    /// The target directories the command line itself names: `--target-dir
    /// DIR` and `VAR=DIR` arguments (`env CARGO_TARGET_DIR=… cargo …`), not
    /// the checkout's configuration.
    pub fn named_target_dirs(&self, root: &Path) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for (i, text) in self.words.iter().enumerate() {
            if text == "--target-dir" {
                dirs.extend(self.words.get(i + 1).map(|dir| root.join(dir)));
            } else if let Some(dir) = text.strip_prefix("--target-dir=") {
                dirs.push(root.join(dir));
            } else if let Some((var, dir)) = text.split_once('=')
                && OUTPUT_VARS.contains(&var)
                && !dir.is_empty()
            {
                dirs.push(root.join(dir));
            }
        }
        dirs
    }

    /// Every directory the command may write its build to: what it names
    /// (`--target-dir`, `VAR=DIR`), the output variables of this process's
    /// environment, and the target and build directories of its `--config`
    /// values and of the checkout's configuration. Every candidate counts
    /// (the precise choice is [`command_output`]'s).
    pub fn output_candidates(&self, root: &Path) -> Vec<PathBuf> {
        let mut dirs = self.named_target_dirs(root);
        for var in OUTPUT_VARS {
            if let Some(dir) = std::env::var_os(var).filter(|d| !d.is_empty()) {
                dirs.push(root.join(dir));
            }
        }
        let cargo = CargoArgs::new(&self.words);
        let configs = [
            CargoConfig::from_command_line(root, &cargo.configs()),
            CargoConfig::load(root),
        ];
        for config in configs.iter().flatten() {
            dirs.extend(config.target_dir(root).map(|dir| dir.path));
            dirs.extend(
                config
                    .build_dir(root)
                    .and_then(|dir| cargo_config::expand_build_dir(&dir, root).ok()),
            );
        }
        dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn args(words: &[&str]) -> CargoArgs {
        CargoArgs::new(words)
    }

    fn workspace(root: &Path) -> Workspace {
        Workspace {
            root: root.to_path_buf(),
            target_dir: root.join("target"),
            configured_target_dir: None,
            build_dir: None,
            build_targets: Vec::new(),
            packages: Vec::new(),
            manifests: BTreeSet::new(),
            config: CargoConfig::default(),
        }
    }

    #[test]
    fn only_explicit_package_names_are_read() {
        assert_eq!(
            args(&[
                "-p",
                "gpu",
                "--features",
                "cuda",
                "--package=k@0.1.0",
                "-pz"
            ])
            .selected_packages(),
            Some(vec!["gpu".into(), "k".into(), "z".into()])
        );
        assert_eq!(
            args(&["--features", "cuda"]).selected_packages(),
            Some(vec![])
        );
        for words in [
            &["--workspace"][..],
            &["-p", "gpu", "--all"],
            &["-p", "gpu-*"],
            &["--manifest-path", "xtask/Cargo.toml"],
            &["-p", "gpu", "--config", "patch.crates-io.x.path='xtask'"],
            &["-p", "gpu", "-Zavoid-dev-deps"],
            &["-p"],
        ] {
            assert_eq!(args(words).selected_packages(), None, "{words:?}");
        }
    }

    #[test]
    fn flags_are_read_in_both_forms_and_not_after_the_separator() {
        let a = args(&[
            "--config",
            "a=1",
            "--config=b=2",
            "--target",
            "x86_64-unknown-linux-gnu",
            "--target=spec/gpu.json",
            "--config-file",
            "n.toml",
            "--tool-config-file=t:tool.toml",
            "--",
            "--config",
            "c=3",
        ]);
        assert_eq!(a.configs(), ["a=1", "b=2"]);
        assert_eq!(a.targets(), ["x86_64-unknown-linux-gnu", "spec/gpu.json"]);
        assert_eq!(a.nextest_config_files(), ["n.toml", "tool.toml"]);
        assert!(!args(&["--target-dir", "t"]).has(&["--target"]));
        assert_eq!(args(&["--target-dir", "t"]).targets(), Vec::<&str>::new());
    }

    #[test]
    fn profiles_follow_each_tool_s_flag() {
        let nextest = args(&["--profile", "ci", "--cargo-profile", "fast"]);
        assert_eq!(nextest.profile(Tool::NextestArchive), "fast");
        assert_eq!(nextest.profile(Tool::Build), "ci");
        assert_eq!(args(&["-r"]).profile(Tool::Build), "release");
        assert_eq!(args(&[]).profile(Tool::NextestArchive), "dev");
        assert_eq!(profile_dir("test"), "debug");
        assert_eq!(profile_dir("bench"), "release");
    }

    #[test]
    fn profile_dirs_follow_targets_and_the_configuration() {
        let root = Path::new("/r");
        let ws = workspace(root);
        let spec = |nextest: &[&str]| ArchiveSpec {
            file: "a.tar.zst".into(),
            nextest: Some(nextest.iter().map(|a| a.to_string()).collect()),
            build: None,
            binaries: Vec::new(),
        };
        if std::env::var_os("CARGO_TARGET_DIR").is_some() {
            return;
        }
        let plan = BuildPlan::for_archive(root, &ws, &spec(&["--cargo-profile", "ci"])).unwrap();
        assert_eq!(plan.profile_dirs(&[]), [root.join("target/ci")]);
        assert_eq!(
            plan.profile_dirs(&["aarch64-unknown-linux-gnu".into()]),
            [root.join("target/aarch64-unknown-linux-gnu/ci")]
        );
        let plan = BuildPlan::for_archive(
            root,
            &ws,
            &spec(&[
                "--target",
                "spec/gpu.json",
                "--target-dir",
                "t",
                "--release",
            ]),
        )
        .unwrap();
        assert_eq!(
            plan.profile_dirs(&["ignored".into()]),
            [root.join("t/gpu/release")]
        );
        assert_eq!(plan.output_dirs(root), [root.join("t")]);
        let argv = plan.argv(OsStr::new("cargo"), Path::new("/out/a.tar.zst"));
        assert_eq!(argv[..4], ["cargo", "nextest", "archive", "--archive-file"]);
        assert_eq!(argv.last().unwrap(), "--release");
        // Dep-info is in the build directory, with the triple below it.
        let plan = BuildPlan::for_archive(
            root,
            &ws,
            &spec(&[
                "--config",
                "build.build-dir='bd'",
                "--target",
                "x86_64-unknown-linux-gnu",
            ]),
        )
        .unwrap();
        assert_eq!(
            plan.profile_dirs(&[]),
            [root.join("bd/x86_64-unknown-linux-gnu/debug")]
        );
        assert_eq!(
            plan.output_dirs(root),
            [root.join("target"), root.join("bd")]
        );
    }

    /// Where a command line writes, as cargo decides it (the environment
    /// is left alone: tests run in parallel).
    #[test]
    fn command_output_follows_target_dir_and_config_as_cargo_does() {
        if ["CARGO_TARGET_DIR", "CARGO_BUILD_BUILD_DIR"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
        {
            return;
        }
        let root = Path::new("/r");
        let ws = workspace(root);
        let out = |words: &[&str]| command_output(&ws, root, &args(words)).unwrap();
        assert_eq!(
            out(&["build"]),
            CommandOutput {
                target_dir: root.join("target"),
                build_dir: root.join("target"),
            }
        );
        let cli = out(&[
            "build",
            "--config",
            "build.target-dir='a'",
            "--config=build.target-dir='b'",
        ]);
        assert_eq!(cli.target_dir, root.join("b"), "the last --config wins");
        assert_eq!(
            cli.build_dir,
            root.join("b"),
            "the build dir follows the target dir"
        );
        let flag = out(&[
            "build",
            "--config",
            "build.target-dir='a'",
            "--target-dir",
            "t",
        ]);
        assert_eq!(flag.target_dir, root.join("t"), "--target-dir wins");
        let split = out(&[
            "nextest",
            "archive",
            "--config",
            "build.build-dir='{workspace-root}/bd'",
        ]);
        assert_eq!(
            (split.target_dir, split.build_dir),
            (root.join("target"), root.join("bd"))
        );
        let after = out(&["run", "--", "--target-dir", "x"]);
        assert_eq!(
            after.target_dir,
            root.join("target"),
            "after `--` is not cargo's"
        );
        // The checkout's build.build-dir applies when the command sets none.
        let mut configured = workspace(root);
        configured.build_dir = Some(OutputDir {
            path: root.join("cfg-bd"),
            set_by: "build.build-dir in .cargo/config.toml".into(),
        });
        let got = command_output(&configured, root, &args(&["build"])).unwrap();
        assert_eq!(got.build_dir, root.join("cfg-bd"));
    }

    #[test]
    fn a_traced_command_s_own_output_directories_are_found() {
        let root = Path::new("/r");
        let command: Vec<OsString> = [
            "env",
            "CARGO_BUILD_BUILD_DIR=bd",
            "cargo",
            "build",
            "--target-dir=t",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(
            TracedCommand::new(&command).named_target_dirs(root),
            [root.join("bd"), root.join("t")]
        );
    }
}
