//! The key's components that are not files, in their fixed order: key name,
//! manual `vN`, literal labels, the rustc release, the locked versions (and
//! features) of named crates, and toolkit versions from the environment.
//!
//! The rustc release comes from running the official toolchain the checkout
//! names by `channel` (through rustup, from a neutral directory, with
//! auto-install off). A toolchain named by `path` is a binary from the
//! checkout: it is never run, and the key is refused.

use std::path::Path;

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

use super::Component;
use super::workspace::Workspace;
use crate::policy::{ArchiveSpec, Policy, is_key_text};
use sha2::Digest;

/// The components and the key segments they contribute, in order.
pub struct Components {
    pub components: Vec<Component>,
    pub segments: Vec<String>,
}

pub fn compute(root: &Path, policy: &Policy, workspace: &Workspace) -> Result<Components> {
    let key = &policy.key;
    let mut out = Components {
        components: Vec::new(),
        segments: Vec::new(),
    };
    let mut push = |name: String, value: String, segment: String| {
        out.components.push(Component { name, value });
        out.segments.push(segment);
    };
    push("name".into(), key.name.clone(), key.name.clone());
    push("version".into(), key.version.clone(), key.version.clone());
    for label in &key.labels {
        push("label".into(), label.clone(), label.clone());
    }
    let (rustc, host) = rustc_version(root)?;
    let release = rustc
        .split_whitespace()
        .nth(1)
        .unwrap_or("unknown")
        .to_owned();
    push(
        "rustc".into(),
        rustc,
        format!("rustc{}", sanitize(&release)),
    );
    for locked in &key.locked_crates {
        let versions = locked_versions(workspace, &locked.name)?;
        let mut value = versions.join("+");
        let mut segment = format!("{}{}", locked.name, value);
        if let Some(prefix) = &locked.feature_prefix {
            let (features, others): (Vec<_>, Vec<_>) =
                enabled_features(workspace, &locked.name, prefix)
                    .into_iter()
                    .partition(|f| is_version_feature(f, prefix));
            // The prefix exists to name the toolkit version in the key: a
            // match such as cudarc's `cuda-version-from-build-system` names
            // none, and a key without the version would be silently wrong.
            if features.is_empty() {
                bail!(
                    "key.locked-crates asks for the `{prefix}<version>` feature of `{}`, but no workspace manifest enables one{}; enable the version feature (such as `{prefix}12080`) or drop feature-prefix",
                    locked.name,
                    if others.is_empty() {
                        String::new()
                    } else {
                        format!(" (enabled: {}, which name no version)", others.join(", "))
                    }
                );
            }
            value = format!("{value} {}", features.join("+"));
            segment = format!("{segment}-{}", features.join("+"));
        }
        push(format!("crate:{}", locked.name), value, sanitize(&segment));
    }
    for var in &key.toolkit_env {
        let value = std::env::var(var).unwrap_or_default();
        if value.trim().is_empty() {
            bail!(
                "key.toolkit-env lists {var}, which is not set; set it (identically) in the key step's env in the publisher and the consumer"
            );
        }
        let segment = sanitize(value.trim());
        push(format!("env:{var}"), value, segment);
    }
    // The recipe: hashed, not spelled in the key text (it would not fit).
    let mut hashed = |name: String, value: String| {
        out.components.push(Component { name, value });
    };
    hashed("host".into(), host);
    for target in &workspace.build_targets {
        hashed("build-target".into(), target.clone());
    }
    for spec in &policy.archive {
        hashed("archive".into(), archive_recipe(spec));
    }
    for (var, value) in build_environment() {
        hashed(format!("build-env:{var}"), value);
    }
    // `CARGO_PKG_README` is the README cargo found, and code can read it
    // (`env!`, `option_env!`): a README added beside a manifest changes
    // the build. Its name, not its text, is what rustc gets.
    for package in &workspace.packages {
        if let Some(readme) = &package.readme {
            hashed(format!("package-readme:{}", package.name), readme.clone());
        }
    }
    for file in workspace.config.outside_files(root) {
        let text = std::fs::read(&file.path)
            .with_context(|| format!("cannot read {}", file.path.display()))?;
        hashed(
            format!("cargo-config:{}", outside_label(root, &file.path)),
            super::inputs::hex(&sha2::Sha256::digest(&text)),
        );
    }
    Ok(out)
}

/// An `[[archive]]` entry as one line of JSON: file, command kind,
/// arguments, binaries. JSON quoting keeps it unambiguous.
fn archive_recipe(spec: &ArchiveSpec) -> String {
    let (kind, args) = match (&spec.nextest, &spec.build) {
        (Some(args), _) => ("nextest", args.clone()),
        (None, Some(args)) => ("build", args.clone()),
        (None, None) => ("none", Vec::new()),
    };
    serde_json::json!([spec.file, kind, args, spec.binaries]).to_string()
}

/// Where a configuration file outside the checkout sits, independently of
/// where the checkout is: `../.cargo/config.toml` for an ancestor's,
/// `$CARGO_HOME/config.toml` otherwise.
fn outside_label(root: &Path, file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dot_cargo = file.parent().unwrap_or(Path::new("/"));
    let holder = dot_cargo.parent().unwrap_or(Path::new("/"));
    if dot_cargo.file_name().is_some_and(|n| n == ".cargo") && root.starts_with(holder) {
        let up = root.components().count() - holder.components().count();
        format!("{}.cargo/{name}", "../".repeat(up))
    } else {
        format!("$CARGO_HOME/{name}")
    }
}

/// Environment variables cargo or rustc read that change the compiled
/// output: (exact name, or prefix when it ends in `*`, and suffix for
/// `CARGO_TARGET_<triple>_<key>`). One place for all of them; README's key
/// section lists them. Output locations (`CARGO_TARGET_DIR`,
/// `CARGO_BUILD_TARGET_DIR`, `CARGO_BUILD_BUILD_DIR`) and parallelism
/// (`CARGO_BUILD_JOBS`) say where and how fast, not what: they stay out.
const BUILD_ENV: &[(&str, &[&str])] = &[
    ("RUSTFLAGS", &[]),
    ("RUSTDOCFLAGS", &[]),
    ("CARGO_ENCODED_RUSTFLAGS", &[]),
    ("CARGO_ENCODED_RUSTDOCFLAGS", &[]),
    ("RUSTC", &[]),
    ("RUSTDOC", &[]),
    ("RUSTC_WRAPPER", &[]),
    ("RUSTC_WORKSPACE_WRAPPER", &[]),
    ("RUSTC_BOOTSTRAP", &[]),
    ("RUST_TARGET_PATH", &[]),
    // Incremental compilation changes codegen units, hence the binaries.
    ("CARGO_INCREMENTAL", &[]),
    ("CARGO_BUILD_*", &[]),
    ("CARGO_PROFILE_*", &[]),
    ("CARGO_UNSTABLE_*", &[]),
    ("CARGO_RESOLVER_*", &[]),
    (
        "CARGO_TARGET_*",
        &["_LINKER", "_AR", "_RUNNER", "_RUSTFLAGS", "_RUSTDOCFLAGS"],
    ),
];
const BUILD_ENV_OUTPUT_ONLY: &[&str] = &[
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
    "CARGO_BUILD_JOBS",
];

/// The build-relevant environment variables that are set, sorted by name.
pub fn build_environment() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| is_build_env(name))
        .map(|(name, value)| (name, value.to_string_lossy().into_owned()))
        .collect();
    found.sort();
    found
}

fn is_build_env(name: &str) -> bool {
    if BUILD_ENV_OUTPUT_ONLY.contains(&name) {
        return false;
    }
    BUILD_ENV
        .iter()
        .any(|(pattern, suffixes)| match pattern.strip_suffix('*') {
            None => name == *pattern,
            Some(prefix) => {
                name.starts_with(prefix)
                    && (suffixes.is_empty() || suffixes.iter().any(|s| name.ends_with(s)))
            }
        })
}

/// Replaces what a cache key or artifact name cannot hold. Collisions do not
/// matter: the raw value is hashed as well.
pub fn sanitize(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if is_key_text(c.encode_utf8(&mut [0; 4])) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "_".into()
    } else {
        cleaned
    }
}

/// `rustc -V` of the toolchain the build will use, and its host triple
/// (from `rustc -vV`).
fn rustc_version(root: &Path) -> Result<(String, String)> {
    let channel = toolchain_channel(root)?;
    let neutral_dir = tempfile::tempdir().context("cannot create a neutral working directory")?;
    let sh = Shell::new()?;
    sh.change_dir(neutral_dir.path());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let mut command = cmd!(sh, "{rustc} -vV")
        .env("RUSTUP_AUTO_INSTALL", "0")
        .quiet()
        .ignore_status();
    // rustup lets RUSTUP_TOOLCHAIN override the toolchain file, so the build
    // in this environment uses that toolchain; the key must name the same.
    let overridden = std::env::var_os("RUSTUP_TOOLCHAIN").is_some_and(|v| !v.is_empty());
    if let Some(channel) = channel.as_ref().filter(|_| !overridden) {
        command = command.env("RUSTUP_TOOLCHAIN", channel);
    }
    let output = command
        .output()
        .context("cannot run `rustc -V`; is a Rust toolchain installed?")?;
    if !output.status.success() {
        bail!(
            "`rustc -V` failed{}: {}",
            channel.map(|c| format!(" for the toolchain `{c}` the checkout names (install it with `rustup toolchain install {c}`)")).unwrap_or_default(),
            String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or("")
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.lines().next().unwrap_or("").trim().to_owned();
    let host = text
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .with_context(|| format!("`rustc -vV` printed no host triple:\n{text}"))?
        .trim()
        .to_owned();
    Ok((version, host))
}

/// The channel named by `rust-toolchain.toml` or `rust-toolchain`, if any.
fn toolchain_channel(root: &Path) -> Result<Option<String>> {
    // rustup: "If both files are present in a directory, the latter
    // [`rust-toolchain`] is used for backwards compatibility" (rustup book,
    // "Overrides", "The toolchain file").
    for name in ["rust-toolchain", "rust-toolchain.toml"] {
        let path = root.join(name);
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let channel = match toml::from_str::<toml::Table>(&text) {
            Ok(table) => {
                let Some(toolchain) = table.get("toolchain").and_then(|t| t.as_table()) else {
                    bail!(
                        "{name}: no [toolchain] table; name the toolchain with `[toolchain] channel = \"…\"`"
                    );
                };
                if toolchain.contains_key("path") {
                    let line = text
                        .lines()
                        .position(|l| l.trim_start().starts_with("path"))
                        .map_or(1, |i| i + 1);
                    bail!(
                        "{name}:{line}: the toolchain is named by `path`, a binary from the checkout; ci-key never runs code from the checkout it hashes, so name an official toolchain with `channel` instead"
                    );
                }
                toolchain
                    .get("channel")
                    .and_then(|c| c.as_str())
                    .map(str::to_owned)
            }
            // The legacy one-line form holds just the channel.
            Err(_) if name == "rust-toolchain" && text.trim().lines().count() == 1 => {
                Some(text.trim().to_owned())
            }
            Err(err) => bail!("{name}: {err}"),
        };
        if let Some(channel) = &channel {
            let valid = !channel.is_empty()
                && channel
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            if !valid {
                bail!("{name}: channel {channel:?} is not a toolchain name");
            }
        }
        return Ok(channel);
    }
    Ok(None)
}

/// The locked versions of `name`, from the workspace's `Cargo.lock`.
fn locked_versions(workspace: &Workspace, name: &str) -> Result<Vec<String>> {
    let lock_path = workspace.root.join("Cargo.lock");
    let text = std::fs::read_to_string(&lock_path).with_context(|| {
        format!("key.locked-crates names `{name}`, but there is no readable Cargo.lock at {}; commit the lockfile", lock_path.display())
    })?;
    let lock: toml::Table =
        toml::from_str(&text).with_context(|| format!("cannot parse {}", lock_path.display()))?;
    let mut versions: Vec<String> = lock
        .get("package")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
        .filter(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))
        .filter_map(|p| p.get("version").and_then(|v| v.as_str()).map(str::to_owned))
        .collect();
    versions.sort();
    versions.dedup();
    if versions.is_empty() {
        bail!(
            "key.locked-crates names `{name}`, which Cargo.lock does not contain; fix the name or drop the entry"
        );
    }
    Ok(versions)
}

/// Whether `feature` is `prefix` followed by a version: a digit, then only
/// digits, `.` and `_` (`cuda-12080`, `cuda-12.8`).
pub fn is_version_feature(feature: &str, prefix: &str) -> bool {
    feature.strip_prefix(prefix).is_some_and(|rest| {
        rest.starts_with(|c: char| c.is_ascii_digit())
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'.' || b == b'_')
    })
}

/// Features of `crate_name` starting with `prefix` that any compiled package enables,
/// in a dependency declaration or through its own `[features]` table.
fn enabled_features(workspace: &Workspace, crate_name: &str, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for package in &workspace.packages {
        for (dep, features) in &package.dependency_features {
            if dep == crate_name {
                found.extend(features.iter().filter(|f| f.starts_with(prefix)).cloned());
            }
        }
        for value in &package.feature_values {
            let Some((dep, feature)) = value.split_once('/') else {
                continue;
            };
            if dep.trim_end_matches('?') == crate_name && feature.starts_with(prefix) {
                found.push(feature.to_owned());
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toolchain_path_is_refused_and_channels_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("rust-toolchain.toml"),
            "[toolchain]\n\npath = \"/tmp/evil\"\n",
        )
        .unwrap();
        let err = toolchain_channel(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("rust-toolchain.toml:3") && err.contains("channel"),
            "{err}"
        );
        std::fs::write(
            dir.path().join("rust-toolchain.toml"),
            "[toolchain]\nchannel = \"1.95.0\"\n",
        )
        .unwrap();
        assert_eq!(
            toolchain_channel(dir.path()).unwrap().as_deref(),
            Some("1.95.0")
        );
        std::fs::remove_file(dir.path().join("rust-toolchain.toml")).unwrap();
        std::fs::write(dir.path().join("rust-toolchain"), "nightly-2026-01-01\n").unwrap();
        assert_eq!(
            toolchain_channel(dir.path()).unwrap().as_deref(),
            Some("nightly-2026-01-01")
        );
        std::fs::write(dir.path().join("rust-toolchain"), "$(touch /tmp/x)\n").unwrap();
        assert!(toolchain_channel(dir.path()).is_err());
    }

    #[test]
    fn only_a_version_after_the_prefix_is_a_version_feature() {
        assert!(is_version_feature("cuda-12080", "cuda-"));
        assert!(is_version_feature("cuda-12.8", "cuda-"));
        assert!(!is_version_feature(
            "cuda-version-from-build-system",
            "cuda-"
        ));
        assert!(!is_version_feature("cuda-", "cuda-"));
        assert!(!is_version_feature("cudnn-9", "cuda-"));
    }

    #[test]
    fn sanitize_keeps_key_characters_only() {
        assert_eq!(sanitize("12.8"), "12.8");
        assert_eq!(sanitize("1.0.0+cuda 12"), "1.0.0_cuda_12");
    }
}
