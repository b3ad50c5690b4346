//! The cargo configuration the build will read, read the way cargo reads it,
//! as data: nothing named in it is ever run.
//!
//! Owns: which configuration files apply (`.cargo/config` over
//! `.cargo/config.toml`, the build directory and its ancestors, `include`d
//! files), the registry of configuration keys that hand a checkout file or
//! directory to the build, and the settings the key and `verify-key` need
//! (`build.target-dir`, `build.build-dir`, `build.target`, path overrides).
//! Must not touch: hashing (that is [`super::inputs`]) or the workspace's
//! packages (that is [`super::workspace`]).
//!
//! Cargo's rules, from its configuration reference
//! (doc.rust-lang.org/cargo/reference/config.html):
//! - "Hierarchical structure": cargo probes `.cargo/config.toml` in the
//!   current directory and every ancestor, then `$CARGO_HOME/config.toml`;
//!   deeper files take precedence. The builds `gpu-archive` runs start in the
//!   repository root, so the root's `.cargo/` and the ancestors above it
//!   apply, never a member crate's own `.cargo/`.
//! - "If both files exist, Cargo will use the file without the extension"
//!   (`.cargo/config` wins over `.cargo/config.toml`).
//! - "`include`": "Paths are relative to the configuration file that includes
//!   them"; an array of strings or `{ path, optional }` tables; included
//!   files load first and the including file's own values win.
//! - "Config-relative paths": a path in a config file is relative to "the
//!   parent directory of the directory where the config files were defined";
//!   a program without a path separator is searched in `PATH`; a path from an
//!   environment variable is relative to the current directory.
//! - Flags handed to rustc (`rustflags`, `@argfile`s, `-C link-arg=`, `-L`)
//!   are not config-relative: rustc resolves them from its working
//!   directory, the workspace root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::workspace::{normalize, normalize_lexically};

/// One configuration file cargo reads, with the settings it holds.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// Absolute path as cargo opens it.
    pub path: PathBuf,
    /// Where its relative paths start: the parent of the directory holding it.
    pub base: PathBuf,
    /// How cargo found it, for messages: `probed` or `included by <file>`.
    pub origin: String,
    pub table: toml::Table,
    /// A `--config KEY=VALUE` line of the policy's recipe, not a file.
    pub inline: bool,
}

/// A checkout path the configuration hands to the build.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// Absolute, normalized.
    pub path: PathBuf,
    /// The setting that names it, e.g. `build.rustc-wrapper in .cargo/config.toml`.
    pub why: String,
    /// An `[env]` value: a directory it names is where the build *may*
    /// look (`CARGO_WORKSPACE_DIR = { value = "", relative = true }` names
    /// the whole checkout), not a set of files it reads.
    pub env_value: bool,
}

/// Where a configured output directory was set, for messages.
#[derive(Debug, Clone)]
pub struct OutputDir {
    pub path: PathBuf,
    pub set_by: String,
}

/// The configuration, in cargo's precedence order (highest first).
#[derive(Debug, Clone, Default)]
pub struct CargoConfig {
    pub files: Vec<ConfigFile>,
}

/// How a configuration value names a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A program: a path when it holds a separator, else a `PATH` name;
    /// a string, or an array whose first element is the program.
    Program,
    /// A program and its arguments: `"prog arg"` or `["prog", "arg"]`.
    ProgramWithArgs,
    /// A config-relative path to a file or directory.
    Path,
    /// Flags handed to rustc or the linker, resolved from the workspace root.
    Flags,
    /// Link search directories of a build-script override, from the workspace root.
    SearchDirs,
    /// A target triple, or a path to a `.json` target specification.
    Target,
}

/// Configuration keys whose values name files or directories the build
/// reads, with `*` for any one key segment. One place for all of them.
const CHECKOUT_FILE_KEYS: &[(&str, Shape)] = &[
    ("build.rustc", Shape::Program),
    ("build.rustdoc", Shape::Program),
    ("build.rustc-wrapper", Shape::Program),
    ("build.rustc-workspace-wrapper", Shape::Program),
    ("build.rustflags", Shape::Flags),
    ("build.rustdocflags", Shape::Flags),
    ("build.target", Shape::Target),
    ("target.*.linker", Shape::Program),
    ("target.*.ar", Shape::Program),
    ("target.*.runner", Shape::ProgramWithArgs),
    ("target.*.rustflags", Shape::Flags),
    ("target.*.rustdocflags", Shape::Flags),
    // `[target.<triple>.<links>]` replaces a build script's output.
    ("target.*.*.rustc-link-search", Shape::SearchDirs),
    ("target.*.*.rustc-flags", Shape::Flags),
    ("target.*.*.rustc-link-arg", Shape::Flags),
    ("target.*.*.rustc-cdylib-link-arg", Shape::Flags),
    ("profile.*.rustflags", Shape::Flags),
    ("profile.*.build-override.rustflags", Shape::Flags),
    ("profile.*.package.*.rustflags", Shape::Flags),
    ("source.*.directory", Shape::Path),
    ("source.*.local-registry", Shape::Path),
    ("resolver.lockfile-path", Shape::Path),
];

/// Flags whose value never names a file the build reads; their values are
/// not looked up (`--remap-path-prefix=$PWD=.` would otherwise name the
/// whole checkout). An `@file` is looked up wherever it stands: rustc
/// expands argfiles before it parses options, so `--cfg @f` reads `f`.
const FLAGS_WITHOUT_FILES: &[&str] = &[
    "--remap-path-prefix",
    "--cfg",
    "--check-cfg",
    "--cap-lints",
    "--target-dir",
    "--artifact-dir",
    "--out-dir",
    "--archive-file",
];

/// cargo and nextest flags of an `[[archive]]` command that take names, not
/// paths: a package called like a directory must not pull that directory
/// in. Only for command lines, never for rustflags (rustc's `--test` takes
/// no value, so skipping what follows it would hide an argfile).
pub const RECIPE_NAME_FLAGS: &[&str] = &[
    "-p",
    "--package",
    "--exclude",
    "-F",
    "--features",
    "--bin",
    "--test",
    "--example",
    "--bench",
    "--profile",
    "--cargo-profile",
    "-E",
    "--filterset",
];

/// The largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The longest `include` chain followed before it is called a cycle.
const MAX_INCLUDE_DEPTH: usize = 32;

impl CargoConfig {
    /// Reads every configuration file a cargo command started in `root`
    /// (absolute, canonical) reads. Files outside `root` are read too: they
    /// are not the checkout's, but they change the build, so the key hashes
    /// their text as components (see [`CargoConfig::outside_files`]).
    pub fn load(root: &Path) -> Result<CargoConfig> {
        let mut config = CargoConfig::default();
        let mut probed = Vec::new();
        for dir in root.ancestors() {
            if let Some(file) = probe(&dir.join(".cargo"), "config") {
                probed.push(file);
            }
        }
        if let Some(home) = cargo_home()
            && let Some(file) = probe(&home, "config")
            && !probed.contains(&file)
        {
            probed.push(file);
        }
        for file in probed {
            let base = base_of(&file);
            config.read(root, &file, base, "probed".to_owned(), &mut Vec::new())?;
        }
        Ok(config)
    }

    /// Reads `file` and what it includes, in precedence order: the file's
    /// own values first, then its includes from last to first.
    fn read(
        &mut self,
        root: &Path,
        file: &Path,
        base: PathBuf,
        origin: String,
        chain: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        if chain.contains(&real) {
            bail!(
                "{}: cargo configuration `include` cycle ({}); remove one of the includes",
                display(root, file),
                chain
                    .iter()
                    .chain([&real])
                    .map(|p| display(root, p))
                    .collect::<Vec<_>>()
                    .join(" -> ")
            );
        }
        if chain.len() >= MAX_INCLUDE_DEPTH {
            bail!(
                "{}: cargo configuration includes nest deeper than {MAX_INCLUDE_DEPTH} files; flatten them",
                display(root, file)
            );
        }
        // A FIFO would block the read, a huge file exhaust memory: neither is
        // a configuration cargo could use.
        let meta = std::fs::metadata(file)
            .with_context(|| format!("cannot read cargo configuration {}", display(root, file)))?;
        if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
            bail!(
                "{}: a cargo configuration must be a regular file of at most {MAX_CONFIG_BYTES} bytes; replace it",
                display(root, file)
            );
        }
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read cargo configuration {}", display(root, file)))?;
        let table: toml::Table = toml::from_str(&text).with_context(|| {
            format!(
                "cannot parse cargo configuration {}; fix its TOML",
                display(root, file)
            )
        })?;
        let includes = include_paths(root, file, &table)?;
        self.files.push(ConfigFile {
            path: file.to_path_buf(),
            base,
            origin,
            table,
            inline: false,
        });
        chain.push(real);
        for (included, optional) in includes.into_iter().rev() {
            if optional && std::fs::metadata(&included).is_err() {
                continue;
            }
            let inside = file.starts_with(root);
            if inside && !normalize(&included).starts_with(root) {
                bail!(
                    "{}: `include` names {}, outside the checkout; the key can only cover configuration inside the repository, so move the file into it",
                    display(root, file),
                    included.display()
                );
            }
            let base = base_of(&included);
            let origin = format!("included by {}", display(root, file));
            self.read(root, &included, base, origin, chain)?;
        }
        chain.pop();
        Ok(())
    }

    /// The configuration a command line adds with `--config VALUE`: a
    /// `.toml` file (its paths relative to two levels up, as for probed
    /// files; its includes followed) or a `KEY=VALUE` TOML line (its paths
    /// relative to the current directory, the root). Only the files and
    /// references are used; where such a line moves the target directory
    /// is not followed (point `--target-dir` at it instead).
    pub fn from_command_line(root: &Path, values: &[&str]) -> Result<CargoConfig> {
        let mut config = CargoConfig::default();
        // A later `--config` wins over an earlier one: precedence order is
        // the reverse of the command line's.
        for value in values.iter().rev() {
            let file = normalize(&root.join(value));
            if value.ends_with(".toml") && std::fs::metadata(&file).is_ok() {
                let base = base_of(&file);
                let origin = "--config of an [[archive]] command".to_owned();
                config.read(root, &file, base, origin, &mut Vec::new())?;
            } else {
                let table: toml::Table = toml::from_str(value).with_context(|| {
                    format!(
                        "an [[archive]] command's `--config {value}` is neither a file nor a KEY=VALUE line cargo accepts"
                    )
                })?;
                config.files.push(ConfigFile {
                    path: root.join(".github/ci-trust.toml"),
                    base: root.to_path_buf(),
                    origin: format!("--config {value}"),
                    table,
                    inline: true,
                });
            }
        }
        Ok(config)
    }

    /// The files cargo reads from inside the checkout (key inputs).
    pub fn checkout_files<'a>(&'a self, root: &'a Path) -> impl Iterator<Item = &'a ConfigFile> {
        self.files
            .iter()
            .filter(move |f| !f.inline && f.path.starts_with(root))
    }

    /// The files cargo reads from outside the checkout (ancestors of the
    /// repository, `$CARGO_HOME`): not the pull request's bytes, but they
    /// change the build, so their text enters the key as a component.
    pub fn outside_files<'a>(&'a self, root: &'a Path) -> impl Iterator<Item = &'a ConfigFile> {
        self.files
            .iter()
            .filter(move |f| !f.inline && !f.path.starts_with(root))
    }

    /// The first value of `key` in precedence order, with its file.
    fn first(&self, key: &[&str]) -> Option<(&toml::Value, &ConfigFile)> {
        self.files
            .iter()
            .find_map(|file| lookup(&file.table, key).map(|value| (value, file)))
    }

    /// `build.target-dir` (config-relative), or `None` when unset.
    pub fn target_dir(&self, root: &Path) -> Option<OutputDir> {
        self.output_dir(root, &["build", "target-dir"])
    }

    /// `build.build-dir` (config-relative), its templates not expanded
    /// (see [`expand_build_dir`]; taken literally, they only make the key
    /// refuse more).
    pub fn build_dir(&self, root: &Path) -> Option<OutputDir> {
        self.output_dir(root, &["build", "build-dir"])
    }

    /// `build.dep-info-basedir` (config-relative): cargo writes the paths
    /// below it relative to it in the dep-info files it puts beside the
    /// final artifacts.
    pub fn dep_info_basedir(&self, root: &Path) -> Option<OutputDir> {
        self.output_dir(root, &["build", "dep-info-basedir"])
    }

    fn output_dir(&self, root: &Path, key: &[&str]) -> Option<OutputDir> {
        let (value, file) = self.first(key)?;
        let dir = value.as_str()?;
        Some(OutputDir {
            path: normalize(&file.base.join(dir)),
            set_by: if file.inline {
                format!("{} of the command line", file.origin)
            } else {
                format!("{} in {}", key.join("."), display(root, &file.path))
            },
        })
    }

    /// The configured `build.target` triples (a `.json` specification as
    /// its file stem, the directory name cargo uses for it).
    pub fn build_targets(&self) -> Vec<String> {
        let Some((value, _)) = self.first(&["build", "target"]) else {
            return Vec::new();
        };
        let values: Vec<&str> = match value {
            toml::Value::String(s) => vec![s.as_str()],
            toml::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
            _ => Vec::new(),
        };
        values.into_iter().map(target_dir_name).collect()
    }

    /// `[patch]` paths and `paths` overrides, as (manifest, origin); paths
    /// are config-relative.
    pub fn path_overrides(&self, root: &Path) -> Vec<(PathBuf, String)> {
        let mut found = Vec::new();
        for file in &self.files {
            let label = display(root, &file.path);
            if let Some(toml::Value::Table(patch)) = file.table.get("patch") {
                for (registry, crates) in patch {
                    for (name, spec) in crates.as_table().into_iter().flatten() {
                        if let Some(path) = spec.get("path").and_then(|p| p.as_str()) {
                            // cargo joins a dependency's path lexically.
                            found.push((
                                normalize_lexically(&file.base.join(path)).join("Cargo.toml"),
                                format!("[patch.{registry}] `{name}` in {label}"),
                            ));
                        }
                    }
                }
            }
            if let Some(toml::Value::Array(paths)) = file.table.get("paths") {
                for path in paths.iter().filter_map(|p| p.as_str()) {
                    found.push((
                        normalize(&file.base.join(path)).join("Cargo.toml"),
                        format!("`paths` override in {label}"),
                    ));
                }
            }
        }
        found
    }

    /// Every checkout path the configuration hands to the build: programs,
    /// flag files, linker scripts, search directories, vendored sources,
    /// `[env]` values with `relative = true`. Paths outside `root` are
    /// dropped (they are the machine's, like the toolchain); paths that do
    /// not exist are dropped too (a bare flag that only looks like a path).
    pub fn references(&self, root: &Path) -> Vec<Reference> {
        let mut out = BTreeSet::new();
        for file in &self.files {
            let label = display(root, &file.path);
            for (pattern, shape) in CHECKOUT_FILE_KEYS {
                let pattern: Vec<&str> = pattern.split('.').collect();
                for (key, value) in matching(&file.table, &pattern) {
                    let why = format!("{key} in {label}");
                    // Config-relative means two levels up from the file
                    // (cargo's reference); for an included file cargo's
                    // behaviour has varied (rust-lang/cargo#15769), so its
                    // own directory is tried as well: hashing a file the
                    // build does not read costs nothing but a rebuild.
                    let dir = file.path.parent().unwrap_or(root);
                    let paths = value_paths(value, *shape, &file.base, root)
                        .into_iter()
                        .chain(value_paths(value, *shape, dir, root));
                    for path in paths {
                        out.insert(Reference {
                            path,
                            why: why.clone(),
                            env_value: false,
                        });
                    }
                }
            }
            if let Some(toml::Value::Table(env)) = file.table.get("env") {
                for (name, spec) in env {
                    let relative = spec
                        .get("relative")
                        .and_then(|r| r.as_bool())
                        .unwrap_or(false);
                    let Some(value) = spec.as_str().or_else(|| spec.get("value")?.as_str()) else {
                        continue;
                    };
                    // `relative = true` makes it config-relative; otherwise
                    // the value is handed over as written, and a build
                    // script may open it from the root (its package's
                    // directory) or as an absolute path: both are looked up.
                    let candidates = if relative {
                        vec![file.base.join(value)]
                    } else {
                        vec![root.join(value)]
                    };
                    for path in candidates {
                        out.insert(Reference {
                            path: normalize(&path),
                            why: format!("env.{name} in {label}"),
                            env_value: true,
                        });
                    }
                }
            }
        }
        out.into_iter()
            .filter(|r| r.path.starts_with(root) && std::fs::symlink_metadata(&r.path).is_ok())
            .collect()
    }
}

/// What a cargo or rustup started in a directory looks for there and in
/// every ancestor: cargo probes `Cargo.toml` (the first one found is the
/// package it builds; it then looks further up for the workspace root, whose
/// `Cargo.lock` it reads), `.cargo/config` and `.cargo/config.toml`; rustup
/// `rust-toolchain` and `rust-toolchain.toml` (unless `RUSTUP_TOOLCHAIN` is
/// set, which a build script may remove). A build script that builds GPU
/// kernels with a nested `cargo build` starts it in its package directory,
/// so a file added there changes the build: present or absent, each is a
/// key input. `verify-key --trace` treats a failed lookup of any of these
/// names as a use of its absence (the one list both read).
pub const NESTED_PROBES: &[(&str, &str)] = &[
    ("Cargo.toml", "manifest"),
    ("Cargo.lock", "lockfile"),
    (".cargo/config", "cargo configuration"),
    (".cargo/config.toml", "cargo configuration"),
    ("rust-toolchain", "rustup toolchain file"),
    ("rust-toolchain.toml", "rustup toolchain file"),
];

/// The directories strictly below `root` where a build script may start a
/// nested cargo or rustup: each package directory (and each directory a
/// build script watches) and its ancestors.
pub fn nested_start_dirs<'a>(
    root: &Path,
    package_dirs: impl Iterator<Item = &'a Path>,
) -> BTreeSet<PathBuf> {
    let mut dirs = BTreeSet::new();
    for dir in package_dirs {
        let dir = normalize(dir);
        for ancestor in dir.ancestors() {
            if ancestor == root || !ancestor.starts_with(root) {
                break;
            }
            dirs.insert(ancestor.to_path_buf());
        }
    }
    dirs
}

impl CargoConfig {
    /// The configuration files a cargo started in one of `dirs` reads
    /// beyond the root's: each directory's own `.cargo/config[.toml]` and
    /// what it includes, with its paths relative to that directory.
    pub fn nested(root: &Path, dirs: &BTreeSet<PathBuf>) -> Result<CargoConfig> {
        let mut config = CargoConfig::default();
        for dir in dirs {
            if let Some(file) = probe(&dir.join(".cargo"), "config") {
                let base = base_of(&file);
                let origin = format!(
                    "read by a cargo a build script starts in {}",
                    display(root, dir)
                );
                config.read(root, &file, base, origin, &mut Vec::new())?;
            }
        }
        Ok(config)
    }
}

/// `build.build-dir` with cargo's templates expanded: `{workspace-root}`
/// and `{cargo-cache-home}`. `{workspace-path-hash}` is a hash cargo
/// computes its own way; a directory named by it cannot be found, so it is
/// refused rather than guessed.
pub fn expand_build_dir(dir: &OutputDir, workspace_root: &Path) -> Result<PathBuf> {
    let text = dir.path.to_string_lossy();
    if text.contains("{workspace-path-hash}") {
        bail!(
            "build.build-dir ({}) uses {{workspace-path-hash}}, a hash only cargo computes, so the build's dep-info files cannot be found; set build.build-dir to a plain directory (or {{workspace-root}}/…) for the checked build",
            dir.set_by
        );
    }
    let Some(start) = text.find('{') else {
        return Ok(dir.path.clone());
    };
    // A template starts the value: what precedes it is the base cargo
    // joined it to, which a template replaces.
    let template = &text[start..];
    let expanded = if let Some(rest) = template.strip_prefix("{workspace-root}") {
        format!("{}{rest}", workspace_root.display())
    } else if let Some(rest) = template.strip_prefix("{cargo-cache-home}") {
        let home =
            cargo_home().context("{cargo-cache-home}: neither CARGO_HOME nor HOME is set")?;
        format!("{}{rest}", home.display())
    } else {
        bail!(
            "build.build-dir ({}) holds a template this tool does not know ({template}); use {{workspace-root}}, {{cargo-cache-home}} or a plain directory",
            dir.set_by
        );
    };
    Ok(normalize(Path::new(&expanded)))
}

/// `dir/name` or `dir/name.toml`, as cargo chooses: the file without the
/// extension wins when both exist.
fn probe(dir: &Path, name: &str) -> Option<PathBuf> {
    let plain = dir.join(name);
    if std::fs::metadata(&plain).is_ok_and(|m| m.is_file()) {
        return Some(plain);
    }
    let with_toml = dir.join(format!("{name}.toml"));
    std::fs::metadata(&with_toml)
        .is_ok_and(|m| m.is_file())
        .then_some(with_toml)
}

/// `$CARGO_HOME`, else `$HOME/.cargo`.
fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")))
}

/// The parent of the directory holding a configuration file.
fn base_of(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("/"));
    dir.parent().unwrap_or(dir).to_path_buf()
}

/// Repository-relative, control characters escaped (see [`super::inputs::shown`]).
fn display(root: &Path, path: &Path) -> String {
    super::inputs::shown(path.strip_prefix(root).unwrap_or(path))
}

/// The files `include` names, relative to the including file, each with
/// whether it is optional.
fn include_paths(root: &Path, file: &Path, table: &toml::Table) -> Result<Vec<(PathBuf, bool)>> {
    let Some(value) = table.get("include") else {
        return Ok(Vec::new());
    };
    let dir = file.parent().unwrap_or(Path::new("/"));
    let bad = || {
        anyhow::anyhow!(
            "{}: `include` must be a path or an array of paths or {{ path, optional }} tables",
            display(root, file)
        )
    };
    let items: Vec<&toml::Value> = match value {
        toml::Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut out = Vec::new();
    for item in items {
        let (path, optional) = match item {
            toml::Value::String(path) => (path.as_str(), false),
            toml::Value::Table(spec) => (
                spec.get("path").and_then(|p| p.as_str()).ok_or_else(bad)?,
                spec.get("optional")
                    .and_then(|o| o.as_bool())
                    .unwrap_or(false),
            ),
            _ => return Err(bad()),
        };
        out.push((normalize(&dir.join(path)), optional));
    }
    Ok(out)
}

/// The value at a dotted `key`.
fn lookup<'a>(table: &'a toml::Table, key: &[&str]) -> Option<&'a toml::Value> {
    let (first, rest) = key.split_first()?;
    let value = table.get(*first)?;
    if rest.is_empty() {
        return Some(value);
    }
    lookup(value.as_table()?, rest)
}

/// Every (dotted key, value) matching `pattern`, `*` matching one segment.
fn matching<'a>(table: &'a toml::Table, pattern: &[&str]) -> Vec<(String, &'a toml::Value)> {
    let Some((first, rest)) = pattern.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, value) in table {
        if *first != "*" && first != name {
            continue;
        }
        if rest.is_empty() {
            out.push((name.clone(), value));
        } else if let Some(inner) = value.as_table() {
            for (key, found) in matching(inner, rest) {
                out.push((format!("{name}.{key}"), found));
            }
        }
    }
    out
}

/// The strings of a string-or-array value (a string split on whitespace
/// when `split`).
fn strings(value: &toml::Value, split: bool) -> Vec<String> {
    match value {
        toml::Value::String(s) if split => s.split_whitespace().map(str::to_owned).collect(),
        toml::Value::String(s) => vec![s.clone()],
        toml::Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// The paths a value of `shape` names, absolute and normalized.
fn value_paths(value: &toml::Value, shape: Shape, base: &Path, root: &Path) -> Vec<PathBuf> {
    let program = |text: &str| -> Option<PathBuf> {
        // Without a separator cargo searches PATH: not a checkout file.
        text.contains('/').then(|| normalize(&base.join(text)))
    };
    match shape {
        Shape::Program => {
            let items = strings(value, false);
            items.first().and_then(|p| program(p)).into_iter().collect()
        }
        Shape::ProgramWithArgs => {
            let items = strings(value, true);
            let mut out: Vec<PathBuf> =
                items.first().and_then(|p| program(p)).into_iter().collect();
            out.extend(flag_paths(
                items.iter().skip(1).map(String::as_str),
                root,
                &[],
            ));
            out
        }
        Shape::Path => value
            .as_str()
            .map(|p| normalize(&base.join(p)))
            .into_iter()
            .collect(),
        Shape::Flags => flag_paths(strings(value, true).iter().map(String::as_str), root, &[]),
        Shape::SearchDirs => strings(value, false)
            .iter()
            .map(|dir| {
                let dir = dir.split_once('=').map_or(dir.as_str(), |(_, d)| d);
                normalize(&root.join(dir))
            })
            .collect(),
        Shape::Target => strings(value, false)
            .iter()
            .filter(|t| t.ends_with(".json"))
            .map(|t| normalize(&base.join(t)))
            .collect(),
    }
}

/// Every path a list of rustc, linker or cargo flags may name, resolved
/// from `cwd`: `@argfile`, `-L [kind=]dir`, `-C link-arg=-Tscript`,
/// `-Clink-args=-Wl,-T,script`, `-C linker=prog`, `--config-file f`, and
/// any other piece after splitting on `=`, `,` and `:`. Over-reading is
/// harmless (a candidate that does not exist is dropped later); missing a
/// form is not, hence the catch-all rather than a list of forms.
///
/// An `@file` (a rustc argfile, or a linker response file handed over with
/// `-C link-arg=@file` or `-Wl,@file`) is read, and what it names is
/// followed the same way, from the same directory (rustc reads it, and the
/// linker runs where rustc does): its words, and the response files it
/// names in turn.
pub fn flag_paths<'a>(
    flags: impl Iterator<Item = &'a str>,
    cwd: &Path,
    name_flags: &[&str],
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut read = BTreeSet::new();
    flag_paths_into(flags, cwd, name_flags, 0, &mut read, &mut out);
    out
}

/// How deep response files may name response files, and how large one may be.
const MAX_RESPONSE_FILE_DEPTH: usize = 8;
const MAX_RESPONSE_FILE_BYTES: u64 = 1 << 20;

fn flag_paths_into<'a>(
    flags: impl Iterator<Item = &'a str>,
    cwd: &Path,
    name_flags: &[&str],
    depth: usize,
    read: &mut BTreeSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) {
    let mut skip_next = false;
    let mut response_files = Vec::new();
    for flag in flags {
        if std::mem::take(&mut skip_next) && !flag.starts_with('@') {
            continue;
        }
        if let Some(name) = FLAGS_WITHOUT_FILES
            .iter()
            .chain(name_flags)
            .find(|name| flag == **name || flag.starts_with(&format!("{name}=")))
        {
            skip_next = flag == *name;
            continue;
        }
        for word in flag.split_whitespace() {
            for piece in word.split(['=', ',', ':']) {
                if let Some(file) = piece.strip_prefix('@').filter(|f| !f.is_empty()) {
                    response_files.push(normalize(&cwd.join(file)));
                }
                for prefix in ["@", "-Wl", "-T", "-L", "-l", "-C", ""] {
                    if let Some(rest) = piece.strip_prefix(prefix)
                        && !rest.is_empty()
                        && rest != "."
                        && !rest.starts_with('-')
                    {
                        out.push(normalize(&cwd.join(rest)));
                    }
                }
            }
        }
    }
    if depth >= MAX_RESPONSE_FILE_DEPTH {
        return;
    }
    for file in response_files {
        // Only a regular file of reasonable size: a FIFO or device named
        // by the checkout must not block or flood the key.
        let readable = std::fs::metadata(&file)
            .is_ok_and(|m| m.is_file() && m.len() <= MAX_RESPONSE_FILE_BYTES);
        if !readable || !read.insert(file.clone()) {
            continue;
        }
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let words: Vec<&str> = text
            .split_whitespace()
            .map(|w| w.trim_matches(['"', '\'']))
            .collect();
        flag_paths_into(words.into_iter(), cwd, name_flags, depth + 1, read, out);
    }
}

/// The directory name cargo builds a `--target` into: the triple, or the
/// file stem of a `.json` specification.
pub fn target_dir_name(target: &str) -> String {
    if target.ends_with(".json") {
        Path::new(target)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| target.to_owned())
    } else {
        target.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_paths_find_every_form_of_file_flag() {
        let cwd = Path::new("/r");
        let flags = [
            "@args.txt",
            "-L",
            "native=libs",
            "-Clink-arg=-Tlink.ld",
            "-C",
            "link-args=-Wl,-T,other.ld -Wl,--version-script=ver.map",
            "--remap-path-prefix=/x=.",
            "--cfg",
            "evil",
            "--cfg",
            "@hidden.args",
            "--test",
            "@after-test.args",
        ];
        let found = flag_paths(flags.into_iter(), cwd, &[]);
        for want in [
            "/r/args.txt",
            "/r/libs",
            "/r/link.ld",
            "/r/other.ld",
            "/r/ver.map",
            "/r/hidden.args",
            "/r/after-test.args",
        ] {
            assert!(found.contains(&PathBuf::from(want)), "{want}: {found:?}");
        }
        assert!(!found.contains(&PathBuf::from("/r/evil")), "{found:?}");
        assert!(!found.contains(&PathBuf::from("/r")), "{found:?}");
    }

    #[test]
    fn keys_with_wildcards_match_each_segment() {
        let table: toml::Table = toml::from_str(
            "[target.x86_64-unknown-linux-gnu]\nlinker = \"a\"\n[target.'cfg(unix)']\nrustflags = [\"b\"]\n",
        )
        .unwrap();
        assert_eq!(matching(&table, &["target", "*", "linker"]).len(), 1);
        assert_eq!(matching(&table, &["target", "*", "rustflags"]).len(), 1);
        assert_eq!(target_dir_name("specs/my-gpu.json"), "my-gpu");
    }
}
