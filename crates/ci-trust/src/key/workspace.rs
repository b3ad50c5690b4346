//! The packages whose sources the build compiles, read without running any
//! code from the checkout.
//!
//! `cargo metadata --no-deps --offline` runs from a directory outside the
//! checkout, so that the checkout's `.cargo/config.toml` (wrappers, `[env]`,
//! aliases) and its `rust-toolchain.toml` are never consulted; with
//! `--no-deps` cargo compiles and executes nothing. Local path dependencies
//! that are not workspace members (an excluded kernels crate, a `[patch]`) are
//! followed transitively the same way.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

use super::cargo_config::{self, CargoConfig, OutputDir};

/// One package the build compiles from the repository.
#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    /// Absolute path of its `Cargo.toml`.
    pub manifest: PathBuf,
    /// Absolute directory of the package.
    pub dir: PathBuf,
    pub targets: Vec<Target>,
    /// Why the package is compiled: a member, or how it was reached.
    pub origin: String,
    /// Dependencies declared by `path`: (dependency name, its manifest).
    pub path_dependencies: Vec<(String, PathBuf)>,
    /// Dependency declarations: (dependency name, features it enables).
    pub dependency_features: Vec<(String, Vec<String>)>,
    /// Dependency declarations: (package name, the name it is linked
    /// under when renamed with `package = …`, whether it comes from a
    /// registry rather than a path or git).
    pub dependency_renames: Vec<(String, Option<String>, bool)>,
    /// The values of the package's `[features]` table, flattened.
    pub feature_values: Vec<String>,
    /// The README cargo hands to rustc as `CARGO_PKG_README`: the manifest's
    /// `readme`, or the first of `README.md`, `README.txt`, `README` that
    /// exists in the package directory (cargo looks for it at build time, so
    /// adding one changes the build without touching a manifest).
    pub readme: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    /// `lib`, `bin`, `test`, `example`, `bench`, `custom-build`, `proc-macro`, …
    pub kind: String,
    /// Absolute path of the crate root.
    pub src_path: PathBuf,
}

impl Target {
    pub fn is_build_script(&self) -> bool {
        self.kind == "custom-build"
    }
}

/// What the key needs to know about the workspace.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The workspace root: where `Cargo.lock` lives.
    pub root: PathBuf,
    /// The workspace's target directory: build output, never hashed.
    pub target_dir: PathBuf,
    /// The target directory the environment or the configuration sets, with
    /// where; `None` when it is cargo's default.
    pub configured_target_dir: Option<OutputDir>,
    /// `build.build-dir`, where intermediate artifacts go: build output too.
    pub build_dir: Option<OutputDir>,
    /// The `build.target` triples of the configuration or `CARGO_BUILD_TARGET`
    /// (directory names: a `.json` specification's file stem).
    pub build_targets: Vec<String>,
    pub packages: Vec<Package>,
    /// Every `Cargo.toml` that shapes the build (the root manifest of a virtual workspace too).
    pub manifests: BTreeSet<PathBuf>,
    /// The cargo configuration the build reads.
    pub config: CargoConfig,
}

pub use crate::build_plan::CommandOutput;

impl Workspace {
    /// Where the cargo command line `args`, run from `repo_root`, writes
    /// ([`crate::build_plan::command_output`] decides it).
    pub fn command_output<S: AsRef<str>>(
        &self,
        repo_root: &Path,
        args: &[S],
    ) -> Result<CommandOutput> {
        crate::build_plan::command_output(self, repo_root, &crate::build_plan::CargoArgs::new(args))
    }

    /// Package name to package directory, for every package built from the repository.
    pub fn package_dirs(&self) -> std::collections::BTreeMap<String, PathBuf> {
        self.packages
            .iter()
            .map(|p| (p.name.clone(), p.dir.clone()))
            .collect()
    }
}

/// Reads the workspace at `repo_root` (absolute).
pub fn load(repo_root: &Path) -> Result<Workspace> {
    let root_manifest = repo_root.join("Cargo.toml");
    if !root_manifest.is_file() {
        bail!(
            "{} has no Cargo.toml: not a Cargo workspace; pass --root with the repository's top directory",
            repo_root.display()
        );
    }
    let neutral_dir = tempfile::tempdir().context("cannot create a neutral working directory")?;
    let metadata = cargo_metadata_no_deps(neutral_dir.path(), &root_manifest)?;
    let workspace_root = PathBuf::from(metadata.workspace_root.as_std_path());
    let config = CargoConfig::load(repo_root)?;
    let configured_target_dir = target_dir(repo_root, &config);
    let target_dir = match &configured_target_dir {
        Some(dir) => dir.path.clone(),
        None => PathBuf::from(metadata.target_directory.as_std_path()),
    };
    let mut build_targets = match std::env::var("CARGO_BUILD_TARGET") {
        Ok(targets) if !targets.is_empty() => targets
            .split(',')
            .map(cargo_config::target_dir_name)
            .collect(),
        _ => config.build_targets(),
    };
    build_targets.dedup();
    let mut workspace = Workspace {
        root: workspace_root.clone(),
        target_dir,
        configured_target_dir,
        // `{workspace-root}/…` is expanded so that a build directory among
        // the sources is refused; one that cannot be is taken literally.
        build_dir: config.build_dir(repo_root).map(|dir| OutputDir {
            path: cargo_config::expand_build_dir(&dir, &workspace_root).unwrap_or(dir.path),
            set_by: dir.set_by,
        }),
        build_targets,
        packages: Vec::new(),
        manifests: BTreeSet::from([root_manifest.clone(), workspace_root.join("Cargo.toml")]),
        config,
    };
    let members: BTreeSet<_> = metadata.workspace_members.iter().collect();
    let mut seen = BTreeSet::new();
    let mut pending = VecDeque::new();
    for package in &metadata.packages {
        if members.contains(&package.id) {
            seen.insert(PathBuf::from(package.manifest_path.as_std_path()));
            pending.push_back(convert(package, "workspace member".to_owned()));
        }
    }
    for (manifest, origin) in patched_paths(&workspace_root, repo_root, &workspace.config)? {
        if seen.insert(manifest.clone()) {
            let (package, root) =
                load_path_package(neutral_dir.path(), repo_root, &manifest, origin)?;
            workspace.manifests.extend(root);
            pending.push_back(package);
        }
    }
    while let Some(package) = pending.pop_front() {
        for (dep_name, dep_manifest) in &package.path_dependencies {
            if seen.insert(dep_manifest.clone()) {
                let origin = format!("path dependency `{dep_name}` of {}", package.name);
                let (dep, root) =
                    load_path_package(neutral_dir.path(), repo_root, dep_manifest, origin)?;
                workspace.manifests.extend(root);
                pending.push_back(dep);
            }
        }
        workspace.packages.push(package);
    }
    for package in &workspace.packages {
        // Target directories are never hashed; one that holds a package (a
        // checkout's `target-dir = "."`) would hide its sources from the key.
        if package.dir.starts_with(&workspace.target_dir) {
            bail!(
                "the target directory {} holds package `{}`, whose sources the key must hash; set {} to a directory of its own",
                workspace.target_dir.display(),
                package.name,
                workspace
                    .configured_target_dir
                    .as_ref()
                    .map_or("build.target-dir", |dir| dir.set_by.as_str())
            );
        }
        if !package.dir.starts_with(repo_root) {
            bail!(
                "package `{}` ({}) lives outside the repository root {}; the key can only hash files inside it, so move the crate into the repository",
                package.name,
                package.origin,
                repo_root.display()
            );
        }
    }
    Ok(workspace)
}

/// A package outside the workspace, and the root manifest of the workspace
/// it belongs to, when that is another manifest: cargo reads it to build
/// the package (inherited `workspace = true` fields, `[workspace.lints]`),
/// so it is an input like the package's own.
fn load_path_package(
    neutral_dir: &Path,
    repo_root: &Path,
    manifest: &Path,
    origin: String,
) -> Result<(Package, Option<PathBuf>)> {
    if !manifest.is_file() {
        bail!(
            "{origin} points to {}, which does not exist",
            manifest.display()
        );
    }
    let metadata = match cargo_metadata_no_deps(neutral_dir, manifest) {
        Ok(metadata) => metadata,
        Err(error) if format!("{error:#}").contains(NOT_A_MEMBER) => {
            metadata_of_unlisted_package(neutral_dir, repo_root, manifest)
                .with_context(|| format!("{error:#}"))
                .with_context(|| {
                    format!(
                        "{origin} ({}) lies inside the workspace's directory but is no member, and reading it as cargo reads a dependency failed",
                        manifest.display()
                    )
                })?
        }
        Err(error) => return Err(error),
    };
    let package = metadata
        .packages
        .iter()
        .find(|p| p.manifest_path.as_std_path() == manifest)
        .with_context(|| {
            format!(
                "cargo metadata did not report the package of {}",
                manifest.display()
            )
        })?;
    let root_manifest = metadata.workspace_root.as_std_path().join("Cargo.toml");
    let root_manifest = (root_manifest != manifest).then_some(root_manifest);
    Ok((convert(package, origin), root_manifest))
}

/// What `cargo metadata` says of a package inside a workspace's directory
/// that the workspace neither lists nor excludes (tikv's `[patch.crates-io]
/// tempdir = { path = "patches/tempdir" }`).
const NOT_A_MEMBER: &str = "believes it's in a workspace when it's not";

/// The metadata of such a package as cargo reads it when it is a
/// dependency: without looking for the workspace it lies in. cargo offers
/// no flag for that, so the package is read through a mirror of the
/// repository in a scratch directory: each directory from the repository
/// root down to the package is a real directory holding links to its
/// entries but the way down and its `Cargo.toml`, and the package's own
/// entries are links. Relative paths (`path = "../x"`, `readme`) resolve as
/// in the checkout, no workspace manifest is found above the package, and
/// every path cargo reports is mapped back into the repository. Nothing is
/// written in the checkout. A package that inherits `workspace = true`
/// fields finds no workspace there, and is refused with cargo's error.
#[cfg(unix)]
fn metadata_of_unlisted_package(
    neutral_dir: &Path,
    repo_root: &Path,
    manifest: &Path,
) -> Result<cargo_metadata::Metadata> {
    let package_dir = manifest.parent().context("a manifest has a directory")?;
    let way_down = package_dir.strip_prefix(repo_root).with_context(|| {
        format!(
            "{} is outside {}",
            package_dir.display(),
            repo_root.display()
        )
    })?;
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mirror_root = scratch.path().join("repository");
    let (mut real, mut mirror) = (repo_root.to_path_buf(), mirror_root.clone());
    std::fs::create_dir(&mirror).with_context(|| format!("cannot create {}", mirror.display()))?;
    let mut steps = way_down.components().map(|c| c.as_os_str().to_owned());
    loop {
        let step = steps.next();
        let entries = std::fs::read_dir(&real)
            .with_context(|| format!("cannot read the directory {}", real.display()))?;
        for entry in entries {
            let name = entry
                .with_context(|| format!("cannot read the directory {}", real.display()))?
                .file_name();
            if step.as_ref().is_some_and(|step| *step == name)
                || (step.is_some() && name == "Cargo.toml")
            {
                continue;
            }
            std::os::unix::fs::symlink(real.join(&name), mirror.join(&name))
                .with_context(|| format!("cannot link {}", mirror.join(&name).display()))?;
        }
        let Some(step) = step else { break };
        real.push(&step);
        mirror.push(&step);
        std::fs::create_dir(&mirror)
            .with_context(|| format!("cannot create {}", mirror.display()))?;
    }
    let json = cargo_metadata_json(neutral_dir, &mirror.join("Cargo.toml"))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&json).context("cannot parse the output of `cargo metadata`")?;
    map_paths(&mut value, &mirror_root, repo_root);
    serde_json::from_value(value).context("cannot parse the output of `cargo metadata`")
}

#[cfg(not(unix))]
fn metadata_of_unlisted_package(
    _neutral_dir: &Path,
    _repo_root: &Path,
    _manifest: &Path,
) -> Result<cargo_metadata::Metadata> {
    bail!("add the package to the workspace's `members` or `exclude`")
}

/// Rewrites every string of `value` that is a path under `from` to the
/// same path under `to`.
#[cfg(unix)]
fn map_paths(value: &mut serde_json::Value, from: &Path, to: &Path) {
    match value {
        serde_json::Value::String(text) => {
            if let Ok(rest) = Path::new(text.as_str()).strip_prefix(from) {
                *text = to.join(rest).to_string_lossy().into_owned();
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                map_paths(item, from, to);
            }
        }
        serde_json::Value::Object(fields) => {
            for item in fields.values_mut() {
                map_paths(item, from, to);
            }
        }
        _ => {}
    }
}

fn convert(package: &cargo_metadata::Package, origin: String) -> Package {
    let manifest = PathBuf::from(package.manifest_path.as_std_path());
    let dir = manifest
        .parent()
        .expect("a manifest has a directory")
        .to_path_buf();
    let deps: Vec<(String, PathBuf)> = package
        .dependencies
        .iter()
        .filter_map(|dep| {
            let path = dep.path.as_ref()?;
            Some((
                dep.name.clone(),
                PathBuf::from(path.as_std_path()).join("Cargo.toml"),
            ))
        })
        .collect();
    Package {
        name: package.name.to_string(),
        dir,
        targets: package
            .targets
            .iter()
            .map(|target| Target {
                name: target.name.clone(),
                kind: target
                    .kind
                    .first()
                    .map(|k| k.to_string())
                    .unwrap_or_default(),
                src_path: PathBuf::from(target.src_path.as_std_path()),
            })
            .collect(),
        origin,
        path_dependencies: deps,
        dependency_features: package
            .dependencies
            .iter()
            .map(|dep| (dep.name.clone(), dep.features.clone()))
            .collect(),
        dependency_renames: package
            .dependencies
            .iter()
            .map(|dep| {
                let from_registry = dep.source.as_ref().is_some_and(|s| {
                    s.repr.starts_with("registry+") || s.repr.starts_with("sparse+")
                });
                (dep.name.clone(), dep.rename.clone(), from_registry)
            })
            .collect(),
        feature_values: package.features.values().flatten().cloned().collect(),
        readme: package.readme.as_ref().map(|r| r.to_string()),
        manifest,
    }
}

/// Runs `cargo metadata --no-deps --offline` for `manifest` from `neutral_dir`.
pub fn cargo_metadata_no_deps(
    neutral_dir: &Path,
    manifest: &Path,
) -> Result<cargo_metadata::Metadata> {
    let json = cargo_metadata_json(neutral_dir, manifest)?;
    cargo_metadata::MetadataCommand::parse(&json)
        .context("cannot parse the output of `cargo metadata`")
}

/// The JSON `cargo metadata --no-deps --offline` prints for `manifest`.
fn cargo_metadata_json(neutral_dir: &Path, manifest: &Path) -> Result<String> {
    let sh = Shell::new()?;
    sh.change_dir(neutral_dir);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = cmd!(
        sh,
        "{cargo} metadata --format-version 1 --no-deps --offline --manifest-path {manifest}"
    )
    // Wrappers from the environment are not the checkout's, but metadata
    // needs none, so the key's derivation does not depend on them.
    .env_remove("RUSTC_WRAPPER")
    .env_remove("RUSTC_WORKSPACE_WRAPPER")
    .env_remove("CARGO_BUILD_RUSTC_WRAPPER")
    .quiet()
    .ignore_status()
    .output()
    .context("cannot run `cargo metadata`; is cargo installed?")?;
    if !output.status.success() {
        bail!(
            "`cargo metadata` failed for {}; fix the manifest:\n{}",
            manifest.display(),
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The target directory the build writes to: `CARGO_TARGET_DIR` /
/// `CARGO_BUILD_TARGET_DIR` (relative to the current directory, which for
/// the archive builds is the repository root), else `build.target-dir` of
/// the configuration (read as data, never run), else what `cargo metadata`
/// reported (which did not see the checkout's configuration).
fn target_dir(repo_root: &Path, config: &CargoConfig) -> Option<OutputDir> {
    for var in ["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"] {
        if let Some(dir) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Some(OutputDir {
                path: normalize(&repo_root.join(dir)),
                set_by: format!("the environment variable {var}"),
            });
        }
    }
    config.target_dir(repo_root)
}

/// Manifests of `[patch]`, `[replace]` and `paths` overrides that point into the checkout,
/// from the root manifest and from the cargo configuration, which the build
/// will read even though this command does not.
fn patched_paths(
    workspace_root: &Path,
    repo_root: &Path,
    config: &CargoConfig,
) -> Result<Vec<(PathBuf, String)>> {
    let mut found = Vec::new();
    let file = workspace_root.join("Cargo.toml");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("cannot parse {}", file.display()))?;
    if let Some(toml::Value::Table(patch)) = table.get("patch") {
        for (registry, crates) in patch {
            let Some(crates) = crates.as_table() else {
                continue;
            };
            for (name, spec) in crates {
                if let Some(path) = spec.get("path").and_then(|p| p.as_str()) {
                    // Paths in a manifest are relative to the manifest, and
                    // cargo joins them lexically.
                    let dir = normalize_lexically(&workspace_root.join(path));
                    found.push((
                        dir.join("Cargo.toml"),
                        format!("[patch.{registry}] `{name}` in Cargo.toml"),
                    ));
                }
            }
        }
    }
    // The deprecated `[replace]` still swaps a crate for a local path.
    if let Some(toml::Value::Table(replace)) = table.get("replace") {
        for (spec_id, spec) in replace {
            if let Some(path) = spec.get("path").and_then(|p| p.as_str()) {
                let dir = normalize_lexically(&workspace_root.join(path));
                found.push((
                    dir.join("Cargo.toml"),
                    format!("[replace] `{spec_id}` in Cargo.toml"),
                ));
            }
        }
    }
    // A crate an override places outside the repository is refused by the caller.
    found.extend(config.path_overrides(repo_root));
    Ok(found)
}

/// Removes `.` and `..` components as cargo does for a dependency's
/// `path` (its `normalize_path`): `..` drops the component before it, a
/// symlink or not (`link/../patches/x` is `patches/x` whatever `link`
/// points to). The OS would resolve the same text otherwise
/// ([`normalize`]), so the two differ only where a link precedes a `..`.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    remove_dots(path, false)
}

/// Removes `.` and `..` components the way the operating system resolves
/// them when rustc or a build script opens the path: `..` after a symlink to
/// a directory leaves the link's target, not the directory holding the link
/// (`src/kernels/../data.txt` with `src/kernels -> ../shared/kernels` is
/// `shared/data.txt`). Other symlinks are kept as they are, so paths stay in
/// the form the repository spells them.
pub fn normalize(path: &Path) -> PathBuf {
    remove_dots(path, true)
}

/// Whether `path` is already what [`remove_dots`] makes of it: no `.` or
/// `..` component, no empty one (`a//b`) and no trailing `/`, so that
/// rebuilding it from its components gives the same bytes. Most paths the
/// key meets are (a walk's entries, module files), and this test is a
/// byte scan where the rebuild allocates per component. (Elsewhere than
/// Unix separators and prefixes differ: every path is rebuilt.)
#[cfg(unix)]
fn is_plain(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    !bytes.is_empty()
        && !bytes.starts_with(b".")
        && (bytes.len() == 1 || !bytes.ends_with(b"/"))
        && memchr::memmem::find(bytes, b"/.").is_none()
        && memchr::memmem::find(bytes, b"//").is_none()
}

#[cfg(not(unix))]
fn is_plain(_: &Path) -> bool {
    false
}

/// [`normalize`] (`..` leaves a symlink's target when `through_links`) or
/// [`normalize_lexically`].
fn remove_dots(path: &Path, through_links: bool) -> PathBuf {
    if is_plain(path) {
        return path.to_path_buf();
    }
    rebuild_without_dots(path, through_links)
}

/// [`remove_dots`] component by component.
fn rebuild_without_dots(path: &Path, through_links: bool) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if through_links && out.is_symlink() {
                    if let Ok(target) = std::fs::canonicalize(&out) {
                        out = target;
                    }
                }
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(all(test, unix))]
mod tests {
    use std::path::Path;

    use super::{is_plain, rebuild_without_dots};

    /// The byte test never takes a path whose rebuild would differ.
    #[test]
    fn a_plain_path_is_what_rebuilding_it_gives() {
        let paths = [
            "/",
            "/a",
            "/a/b",
            "a/b",
            "a",
            "/a/b/",
            "a//b",
            "/a/./b",
            "/a/../b",
            "./a",
            "../a",
            ".",
            "..",
            "",
            "/a/.hidden",
            "/a/b.",
            "/a/.",
            "/a/..",
            "//a",
            "/a/b//",
            "a/.b/c",
            "/a/b..c",
            "/a/...",
            "/ws/pkg/src/m00.rs",
            "/ws/é/ü.rs",
        ];
        for path in paths {
            let path = Path::new(path);
            let rebuilt = rebuild_without_dots(path, false);
            if is_plain(path) {
                assert_eq!(rebuilt, path, "{} is not plain", path.display());
            }
        }
        // The common shapes do take the fast path.
        for plain in ["/", "/a/b", "a/b", "/a/b.", "/ws/pkg/src/m00.rs", "/a/b..c"] {
            assert!(is_plain(Path::new(plain)), "{plain}");
        }
    }
}
