//! The content key of the GPU archives (`cargo xtask ci-key`).
//!
//! Owns the discovery of every file the build reads, the components that are
//! not files (toolchain, locked crate and toolkit versions, the manual `vN`),
//! and the documented encoding they are hashed with. Other commands call
//! [`compute`]; none derives a key on its own.

mod build_script;
mod components;
mod inputs;
mod report;
mod scan;
mod sources;
mod tool_package;
pub mod workspace;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::{flags, gha, policy::Policy};

use build_script::BuildScriptInputs;
pub use components::is_version_feature;
use inputs::InputSet;
pub use inputs::is_git_metadata;
pub use tool_package::TOOL_PACKAGE;

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

/// Computes the key of the repository at `root` (absolute) under `policy`.
pub fn compute(root: &Path, policy: &Policy) -> Result<KeyManifest> {
    let workspace = workspace::load(root)?;
    let mut skipped = vec![workspace.target_dir.clone(), root.join("target")];
    skipped.dedup();
    let mut inputs = InputSet::new(root, skipped);
    let mut warnings = Vec::new();

    let lockfile = workspace.root.join("Cargo.lock");
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
    // The xtask in a host workspace is tooling, not a GPU build input
    // (tool_package.rs says exactly when it is left out).
    let unbuilt_tool = tool_package::unbuilt_tool_manifest(&workspace, policy);
    for package in &workspace.packages {
        if Some(package.manifest.as_path()) == unbuilt_tool {
            continue;
        }
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
                build_script: target.is_build_script(),
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

    for (index, root_info) in roots.iter().enumerate().filter(|(_, r)| r.build_script) {
        let literals = discovery
            .rerun_literals
            .get(&index)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
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
    for file in TOOLCHAIN_FILES {
        let path = root.join(file);
        if path.exists() || path.is_symlink() {
            inputs.add(&path, "toolchain file: selects the compiler")?;
        }
    }
    for glob in &policy.key.include {
        let count = inputs.add_glob(glob, &format!("policy key.include {glob:?}"))?;
        if count == 0 {
            warnings.push(format!("policy key.include {glob:?} matches no file"));
        }
    }

    let components = components::compute(root, policy, &workspace)?;
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
