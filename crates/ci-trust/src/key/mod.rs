//! The content key of the GPU archives (`cargo xtask ci-key`).
//!
//! Owns the discovery of every file the build reads, the components that are
//! not files (toolchain, locked crate and toolkit versions, the manual `vN`),
//! and the documented encoding they are hashed with. Other commands call
//! [`compute`]; none derives a key on its own.

mod build_script;
mod callers;
pub mod cargo_config;
mod components;
mod inputs;
mod lexer;
mod report;
mod scan;
mod sources;
pub mod workspace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::{flags, gha, policy::Policy};

use build_script::BuildScriptInputs;
pub use components::is_version_feature;
use inputs::InputSet;
pub use inputs::is_git_metadata;

/// Each directory whose existence the key implies, as `dir/`: every
/// directory a present input lies in. `verify-key --trace` accepts an
/// existence check (`stat`, `access`) of such a directory; a listing needs
/// the directory's entry set itself (an input of kind `directory`).
pub fn implied_dirs(manifest: &KeyManifest) -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for input in manifest.inputs.iter().filter(|i| i.kind != "absent") {
        let mut end = 0;
        while let Some(slash) = input.path[end..].find('/') {
            end += slash + 1;
            dirs.insert(&input.path[..end]);
        }
    }
    dirs.into_iter().map(str::to_owned).collect()
}

/// Whether the file, symlink or absence at `path` is what `input` records:
/// the same kind, and the same bytes (a symlink's text) by SHA-256. The
/// key tree checks every path it holds with this.
pub fn hashes_to(path: &Path, input: &Input) -> Result<bool> {
    let hashed = inputs::hash_path(path)?;
    Ok(hashed.kind.name() == input.kind
        && (hashed.kind == inputs::Kind::Absent || inputs::hex(&hashed.sha256) == input.sha256))
}

/// A computed key with everything that went into it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyManifest {
    pub key: String,
    pub artifact_name: String,
    pub components: Vec<Component>,
    pub inputs: Vec<Input>,
    /// Things worth a look that do not make the key wrong.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Counts for `--explain`: files parsed, `OUT_DIR` embeds left to build scripts.
    #[serde(skip)]
    pub stats: Stats,
}

#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub parsed_files: usize,
    pub out_dir_embeds: usize,
    pub packages: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// Repository-relative, `/`-separated.
    pub path: String,
    /// Hex SHA-256 of the content (of the link text for a symlink, empty when absent).
    pub sha256: String,
    pub size: u64,
    /// `file`, `executable`, `symlink` or `absent`.
    pub kind: String,
    /// Why the file is an input.
    pub reason: String,
}

/// The longest key a cache or artifact name may hold.
const MAX_KEY_LEN: usize = 512;

/// Fixed inputs every build reads from the checkout besides the crates.
const FIXED_DIRS: &[(&str, &str)] = &[
    (
        "scripts/ci",
        "CI script: run or read during the archive build",
    ),
    (".cargo", "cargo configuration: read by the build"),
];
const TOOLCHAIN_FILES: &[&str] = &["rust-toolchain", "rust-toolchain.toml"];
/// Lint configuration clippy-driver reads (from the package directory up)
/// and lists in the dep-info of its check builds, which share the target
/// directory with the archive build: hashed where it exists (in the root
/// and the package directories) so that `verify-key` after a `cargo
/// clippy` finds it covered. It changes diagnostics, not code, so the cost
/// is a rebuild when the lint configuration changes.
const LINT_CONFIG_FILES: &[&str] = &["clippy.toml", ".clippy.toml"];

/// The repository's top directory, which bounds where symlinks may point:
/// the nearest of `root` and its ancestors that holds `.git` (a directory,
/// or the gitfile of a worktree or submodule), else `root`. The policy's
/// `key.repository-root` (`..` components) names it instead; below a
/// `.git` it may only narrow it, so a pull request's policy cannot widen
/// the key beyond the checkout.
fn repository_root(root: &Path, configured: Option<&str>) -> PathBuf {
    let found = root
        .ancestors()
        .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
        .map(Path::to_path_buf);
    let Some(up) = configured else {
        return found.unwrap_or_else(|| root.to_path_buf());
    };
    let named = workspace::normalize(&root.join(up));
    match found {
        Some(git) if !named.starts_with(&git) => git,
        _ => named,
    }
}

/// Computes the key of the repository at `root` (absolute) under `policy`.
pub fn compute(root: &Path, policy: &Policy) -> Result<KeyManifest> {
    let workspace = workspace::load(root)?;
    // `rustc -V` is a process start: run it while the sources are read.
    let components_thread = {
        let (root, policy, workspace) = (root.to_path_buf(), policy.clone(), workspace.clone());
        std::thread::spawn(move || components::compute(&root, &policy, &workspace))
    };
    let mut inputs = InputSet::with_output_dirs(root, output_dirs(root, &workspace));
    inputs.set_repository_root(&repository_root(
        root,
        policy.key.repository_root.as_deref(),
    ));
    let mut warnings = Vec::new();

    let lockfile = workspace.root.join("Cargo.lock");
    inputs.set_workspace(&lockfile, workspace.packages.iter().map(|p| p.dir.clone()));
    if lockfile.exists() {
        inputs.add(&lockfile, "lockfile")?;
    } else {
        inputs.add_maybe_absent(
            &lockfile,
            "lockfile (absent: its absence is hashed, so resolution may float)",
        )?;
        warnings.push("Cargo.lock is absent: dependency versions may change under an unchanged key; commit the lockfile".into());
    }
    for manifest in &workspace.manifests {
        inputs.add(manifest, "workspace manifest")?;
    }

    let mut roots = Vec::new();
    for package in &workspace.packages {
        inputs.add(
            &package.manifest,
            &format!("manifest of {} ({})", package.name, package.origin),
        )?;
        for dir in ["src", "tests", "examples", "benches"] {
            inputs.add_dir(
                &package.dir.join(dir),
                &format!("{dir}/ of package {}", package.name),
                false,
            )?;
        }
        for target in &package.targets {
            let label = match target.kind.as_str() {
                "custom-build" => format!("build script of {}", package.name),
                kind => format!("{kind} `{}` of {}", target.name, package.name),
            };
            inputs.add(&target.src_path, &format!("crate root of the {label}"))?;
            roots.push(sources::Root {
                file: target.src_path.clone(),
                package_dir: package.dir.clone(),
                label,
                crate_name: target.name.replace('-', "_"),
                build_script: target.is_build_script(),
                token_output: sources::token_output_macros(package, &workspace),
                sees_packages: sources::packages_seen_by(package, &workspace),
                readme: package.readme.clone().unwrap_or_default(),
                rustc_cwd: if package.dir.starts_with(&workspace.root) {
                    workspace.root.clone()
                } else {
                    package.dir.clone()
                },
            });
        }
    }

    let discovery = sources::discover(&roots, &mut inputs, &policy.key);
    if !discovery.errors.is_empty() {
        bail!(
            "cannot prove the key covers every compile input ({} problem{}):\n  {}",
            discovery.errors.len(),
            if discovery.errors.len() == 1 { "" } else { "s" },
            discovery.errors.join("\n  ")
        );
    }
    warnings.extend(discovery.warnings.iter().cloned());

    let mut watched_dirs = Vec::new();
    for (index, root_info) in roots.iter().enumerate().filter(|(_, r)| r.build_script) {
        let literals = discovery
            .rerun_literals
            .get(&index)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        // Files a literal `rustc-link-arg` line hands the linker.
        for path in
            build_script::link_arg_paths(literals, &root_info.package_dir, &root_info.rustc_cwd)
        {
            if path.starts_with(root) && path != root && std::fs::symlink_metadata(&path).is_ok() {
                let reason = format!("handed to the linker by the {}", root_info.label);
                if path.is_dir() {
                    inputs.add_dir(&path, &reason, false)?;
                } else {
                    inputs.add(&path, &reason)?;
                }
            }
        }
        match build_script::analyse(literals, &root_info.package_dir, root, &mut warnings) {
            BuildScriptInputs::Declared(paths) => {
                for path in paths {
                    // Scripts that stamp the commit id watch `.git/HEAD`.
                    // Git metadata is never a key input (it changes with
                    // every commit, and no archive would ever be reused), so
                    // this is a documented residual, not a hard error.
                    let normal = workspace::normalize(&path);
                    if let Some(rel) = normal
                        .strip_prefix(root)
                        .ok()
                        .and_then(|rel| rel.to_str())
                        .filter(|rel| inputs::is_git_metadata(rel))
                    {
                        warnings.push(format!(
                            "the {} watches {rel} (rerun-if-changed); git metadata is never a key input, so an archive reused under this key may carry another commit's git information",
                            root_info.label
                        ));
                        continue;
                    }
                    // A kernel builder may start a nested cargo in the
                    // directory it watches (or above it).
                    watched_dirs.push(if path.is_dir() {
                        path.clone()
                    } else {
                        path.parent().unwrap_or(root).to_path_buf()
                    });
                    let reason = format!("rerun-if-changed of the {}", root_info.label);
                    if path.is_dir() {
                        inputs
                            .add_dir(&path, &reason, false)
                            .with_context(|| format!("{}: rerun-if-changed", root_info.label))?;
                    } else {
                        inputs
                            .add(&path, &reason)
                            .and_then(|()| inputs.add_link_target(&path, &reason))
                            .with_context(|| format!("{}: rerun-if-changed", root_info.label))?;
                    }
                }
            }
            BuildScriptInputs::WholePackage(why) => {
                let reason = format!(
                    "package directory watched by the {} ({why})",
                    root_info.label
                );
                inputs.add_dir(&root_info.package_dir, &reason, true)?;
            }
        }
    }

    for (dir, reason) in FIXED_DIRS {
        inputs.add_dir(&root.join(dir), reason, false)?;
    }
    add_build_configuration(root, policy, &workspace, &watched_dirs, &mut inputs)?;
    for file in TOOLCHAIN_FILES {
        let path = root.join(file);
        if path.exists() || path.is_symlink() {
            inputs.add(&path, "toolchain file: selects the compiler")?;
        }
    }
    let lint_dirs = std::iter::once(root).chain(workspace.packages.iter().map(|p| p.dir.as_path()));
    for dir in lint_dirs {
        for file in LINT_CONFIG_FILES {
            let path = dir.join(file);
            if path.is_file() || path.is_symlink() {
                inputs.add(&path, "lint configuration clippy lists in dep-info")?;
            }
        }
    }
    for glob in &policy.key.include {
        let count = inputs.add_glob(glob, &format!("policy key.include {glob:?}"))?;
        if count == 0 {
            warnings.push(format!("policy key.include {glob:?} matches no file"));
        }
    }

    let components = components_thread
        .join()
        .map_err(|_| anyhow::anyhow!("computing the key components panicked"))??;
    let hashed = inputs.hash(&discovery.known)?;
    let digest = inputs::key_digest(&components.components, &hashed);
    let key = format!("{}-{digest}", components.segments.join("-"));
    if key.len() > MAX_KEY_LEN {
        bail!(
            "the key is {} characters long, over the {MAX_KEY_LEN} a cache key or artifact name may hold; shorten key.name, key.labels or the toolkit values",
            key.len()
        );
    }
    debug_assert!(crate::policy::is_key_text(&key));
    Ok(KeyManifest {
        artifact_name: key.clone(),
        key,
        components: components.components,
        inputs: hashed.into_iter().map(|(input, _)| input).collect(),
        warnings,
        stats: Stats {
            parsed_files: discovery.parsed_files,
            out_dir_embeds: discovery.out_dir_embeds,
            packages: workspace.packages.len(),
        },
    })
}

/// The build's output directories, never hashed: the target directory (with
/// the setting that chose it), the default `target/`, `build.build-dir`.
fn output_dirs(root: &Path, workspace: &workspace::Workspace) -> Vec<(PathBuf, String)> {
    let mut dirs = vec![(
        workspace.target_dir.clone(),
        workspace
            .configured_target_dir
            .as_ref()
            .map(|dir| dir.set_by.clone())
            .unwrap_or_default(),
    )];
    if let Some(dir) = &workspace.build_dir {
        dirs.push((dir.path.clone(), dir.set_by.clone()));
    }
    if !dirs.iter().any(|(dir, _)| *dir == root.join("target")) {
        dirs.push((root.join("target"), String::new()));
    }
    dirs
}

/// nextest's configuration files, relative to the workspace root; a change
/// to one changes what `cargo nextest archive` puts in the archive. When
/// `.config/nextest.toml` is absent, nextest's configuration loader tries
/// the name with `.toml` appended, and loads that file instead.
const NEXTEST_CONFIG_FILES: &[&str] = &[".config/nextest.toml", ".config/nextest.toml.toml"];

/// Everything the build reads because configuration says so: the cargo
/// configuration files cargo merges (and what they `include`), each checkout
/// file or directory a configuration key, a build environment variable or
/// an `[[archive]]` argument hands to the build, and nextest's configuration.
fn add_build_configuration(
    root: &Path,
    policy: &Policy,
    workspace: &workspace::Workspace,
    watched_dirs: &[PathBuf],
    inputs: &mut InputSet,
) -> Result<()> {
    let config = &workspace.config;
    for file in config.checkout_files(root) {
        inputs.add(
            &file.path,
            &format!("cargo configuration ({})", file.origin),
        )?;
    }
    let mut references = config.references(root);
    // What a nested cargo or rustup started by a build script reads
    // (cargo_config::NESTED_PROBES): present or absent, an input.
    let package_dirs = workspace
        .packages
        .iter()
        .map(|p| p.dir.as_path())
        .chain(watched_dirs.iter().map(PathBuf::as_path));
    let nested_dirs = cargo_config::nested_start_dirs(root, package_dirs);
    // The root's own: `verify-key --trace` checks that the key records the
    // absence of every configuration file cargo or rustup looked for.
    for (file, what) in cargo_config::NESTED_PROBES {
        inputs.add_maybe_absent(&root.join(file), &format!("{what} cargo or rustup reads"))?;
    }
    for dir in &nested_dirs {
        let shown = inputs::shown(dir.strip_prefix(root).unwrap_or(dir));
        for (file, what) in cargo_config::NESTED_PROBES {
            let why = format!("{what} a cargo or rustup started in {shown} would read");
            inputs.add_maybe_absent(&dir.join(file), &why)?;
        }
        let why = format!("cargo configuration a cargo started in {shown} would read");
        inputs.add_dir(&dir.join(".cargo"), &why, false)?;
    }
    let nested = cargo_config::CargoConfig::nested(root, &nested_dirs)?;
    for file in nested.checkout_files(root) {
        inputs.add(
            &file.path,
            &format!("cargo configuration ({})", file.origin),
        )?;
    }
    references.extend(nested.references(root));
    for (var, value) in components::build_environment() {
        let flags = value.split(['\u{1f}', ' ', '\t']);
        for path in cargo_config::flag_paths(flags, root, &[]) {
            references.push(cargo_config::Reference {
                path,
                why: format!("named by the environment variable {var}"),
                env_value: false,
            });
        }
    }
    for spec in &policy.archive {
        let args = spec.nextest.iter().chain(&spec.build).flatten();
        let cargo = crate::build_plan::CargoArgs::new(&args.collect::<Vec<_>>());
        let why = format!("named by the [[archive]] arguments of {}", spec.file);
        for path in cargo.nextest_config_files() {
            inputs.add(&root.join(path), &format!("nextest configuration {why}"))?;
        }
        // `--config FILE|KEY=VALUE` adds configuration for this command only.
        let cli = cargo_config::CargoConfig::from_command_line(root, &cargo.configs())?;
        for file in cli.checkout_files(root) {
            inputs.add(
                &file.path,
                &format!("cargo configuration ({})", file.origin),
            )?;
        }
        references.extend(cli.references(root));
        let names = cargo_config::RECIPE_NAME_FLAGS;
        let words = cargo.words().iter().map(String::as_str);
        for path in cargo_config::flag_paths(words, root, names) {
            references.push(cargo_config::Reference {
                path,
                why: why.clone(),
                env_value: false,
            });
        }
    }
    for file in NEXTEST_CONFIG_FILES {
        let path = workspace.root.join(file);
        if std::fs::symlink_metadata(&path).is_ok() {
            inputs.add(&path, "nextest configuration: shapes the archive")?;
        }
    }
    references.sort();
    references.dedup();
    for reference in references {
        if !reference.path.starts_with(root) || std::fs::symlink_metadata(&reference.path).is_err()
        {
            continue;
        }
        let reason = format!("handed to the build: {}", reference.why);
        if reference.path == root && reference.env_value {
            // The checkout itself, handed over so code can find files in
            // it: what it then reads is found by the source scan (an
            // `env!` in an include) and proved by verify-key.
            continue;
        } else if reference.path == root {
            // `-L .`: the libraries directly in the root, not the whole checkout.
            for entry in std::fs::read_dir(root).context("cannot list the repository root")? {
                let path = entry?.path();
                if path.is_file() {
                    inputs.add(&path, &reason)?;
                }
            }
        } else if reference.path.is_dir() {
            inputs.add_dir(&reference.path, &reason, false)?;
        } else {
            inputs.add(&reference.path, &reason)?;
        }
    }
    Ok(())
}

impl flags::CiKey {
    pub fn run(&self) -> Result<ExitCode> {
        let root = self.common.root()?;
        let policy = self.common.load_policy(&root)?;
        let manifest = compute(&root, &policy)?;
        for warning in &manifest.warnings {
            gha::warning(warning);
        }
        if self.explain {
            eprint!("{}", gha::log_block(&report::explain(&manifest, &policy)));
        }
        if let Some(old) = &self.diff {
            let text = std::fs::read_to_string(old)
                .with_context(|| format!("cannot read {}", old.display()))?;
            let old: KeyManifest = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a ci-key --json manifest", old.display()))?;
            eprint!("{}", gha::log_block(&report::diff(&old, &manifest)));
        }
        if let Some(path) = &self.json {
            let json = serde_json::to_string_pretty(&manifest)?;
            std::fs::write(path, json + "\n")
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if self.github_output {
            gha::set_outputs(&[
                ("key", &manifest.key),
                ("artifact_name", &manifest.artifact_name),
            ])?;
        }
        println!("{}", manifest.key);
        Ok(ExitCode::SUCCESS)
    }
}
