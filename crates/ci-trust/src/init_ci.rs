//! `cargo xtask init-ci`: adopts this CI in a host Rust GPU workspace.
//!
//! Owns the edits to the host's files: the xtask's place in the workspace
//! (`members`, `default-members`, its own `edition`/`rust-version`, the
//! `[profile]` entries it needs for speed), the `.cargo/config.toml` alias,
//! the policy `.github/ci-trust.toml` (with the detected GPU crates), the five
//! workflows from this repository's own templates, and the CI scripts. It
//! edits manifests as text, line by line, so the host's formatting and
//! comments stay; every result is re-parsed before anything is written. It
//! never overwrites a file whose content differs without `--force`, writes
//! nothing when any check fails, and then runs `ci-key` and
//! `check-contracts` on the result.
//!
//! It must not touch the key, contract or archive logic: it only calls them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::flags;
use crate::key::is_version_feature;
use crate::policy::{DEFAULT_POLICY_PATH, Policy};

/// The five workflows, copied from the template repository's `.github/workflows`.
const WORKFLOWS: [&str; 5] = [
    "ci.yml",
    "ci-cache-publish.yml",
    "runpod-gpu-test.yml",
    "runpod-gpu-execute.yml",
    "runpod-reap.yml",
];

/// What of ci-trust is copied into a host's `xtask/` (the library and its
/// binary, renamed `xtask`), not this repository's benchmarks or tests.
const XTASK_PARTS: [&str; 2] = ["Cargo.toml", "src"];

/// Where the copied parts live in the template repository.
const LIBRARY_DIR: &str = "crates/ci-trust";

/// The runner label the templates use for every GitHub-hosted job.
const TEMPLATE_RUNNER: &str = "runs-on: ubuntu-24.04";

/// Crates that bind a GPU toolkit: a package depending on one is a GPU crate,
/// and their locked versions enter the key.
const TOOLKIT_CRATES: &[&str] = &[
    "cudarc",
    "cust",
    "cuda_std",
    "cuda_builder",
    "rustacuda",
    "cuda-sys",
    "cuda-driver-sys",
    "cuda-runtime-sys",
    "cudnn-sys",
    "cublas-sys",
];

/// Crates the xtask optimises in dev builds (its hot paths: hashing and
/// tokenising); added to the host's `[profile.dev.package]` unless the host
/// already sets them. The root manifest's opt-level 0 for compile-time-only
/// crates (syn, the derive macros) is not copied: they also expand the
/// host's own derives, whose speed is the host's to choose.
const PROFILE_PACKAGES: &[&str] = &["sha2", "proc-macro2", "memchr"];

/// The `[package]` fields the xtask inherits from this repository's
/// `[workspace.package]`, and the values it needs in a host.
const OWN_PACKAGE_FIELDS: &[(&str, &str)] = &[
    ("edition", "2024"),
    ("rust-version", env!("CARGO_PKG_RUST_VERSION")),
    ("license", env!("CARGO_PKG_LICENSE")),
];

impl flags::InitCi {
    pub fn run(&self) -> Result<ExitCode> {
        let host = self.common.root()?;
        let from = match &self.from {
            Some(dir) => std::fs::canonicalize(dir)
                .with_context(|| format!("--from {}: pass a ci-trust checkout", dir.display()))?,
            None => template_repository()?,
        };
        check_label("--runner", &self.runner)?;
        check_workflow_name(&self.ci_name)?;
        let workflows_dir = from.join(".github/workflows");
        if !WORKFLOWS.iter().all(|w| workflows_dir.join(w).is_file()) {
            bail!(
                "{} does not hold the five template workflows ({}); pass --from with a ci-trust checkout",
                workflows_dir.display(),
                WORKFLOWS.join(", ")
            );
        }
        let host_manifest = host.join("Cargo.toml");
        let manifest_text = read(&host_manifest)?;
        let metadata = host_metadata(&host)?;
        let mut plan = Plan::new(&host);

        // The xtask itself: copied from the template repository when absent.
        let xtask_dir = host.join(crate::key::TOOL_PACKAGE);
        let copying = !xtask_dir.exists();
        if copying {
            for part in XTASK_PARTS {
                plan.copy_tree(&from.join(LIBRARY_DIR).join(part), &xtask_dir.join(part))?;
            }
        }
        let xtask_manifest = xtask_dir.join("Cargo.toml");
        let xtask_text = match plan.planned(&xtask_manifest) {
            Some(text) => text.to_owned(),
            None => read(&xtask_manifest).with_context(|| {
                format!(
                    "the xtask is not at {}; copy it there or pass --from",
                    xtask_dir.display()
                )
            })?,
        };
        plan.edit(&xtask_manifest, own_package_fields(&xtask_text)?);

        // The host workspace: members, default-members, profiles.
        let members: Vec<String> = metadata
            .packages
            .iter()
            .filter(|p| metadata.workspace_members.contains(&p.id))
            .filter(|p| p.name.as_str() != crate::key::TOOL_PACKAGE)
            .map(|p| relative_dir(&host, p.manifest_path.as_std_path()))
            .collect::<Result<_>>()?;
        plan.edit(&host_manifest, add_to_workspace(&manifest_text, &members)?);

        // The alias, from the host's own `.cargo/config.toml`.
        let config = host.join(".cargo/config.toml");
        let config_text = if config.exists() {
            read(&config)?
        } else {
            String::new()
        };
        plan.edit(&config, add_alias(&config_text, self.force)?);

        // The CI scripts the workflows run.
        if from != host {
            plan.copy_tree(&from.join("scripts/ci"), &host.join("scripts/ci"))?;
        }

        // The policy: the detected GPU crates and toolkit versions.
        let gpu = detect_gpu(&host, &metadata, &self.gpu_package)?;
        for note in &gpu.notes {
            eprintln!("note: {note}");
        }
        let policy_text = policy_text(&gpu, &self.runner);
        Policy::parse(&policy_text)
            .context("the generated policy is invalid (a bug in init-ci)")?;
        plan.write(&host.join(DEFAULT_POLICY_PATH), policy_text);

        // The workflows, with the host's names and runner labels.
        let archives: Vec<&str> = gpu.archives.iter().map(|a| a.file.as_str()).collect();
        for name in WORKFLOWS {
            let text = read(&workflows_dir.join(name))?;
            let text = customise_workflow(name, &text, &self.runner, &self.ci_name, &archives)?;
            plan.write(&host.join(".github/workflows").join(name), text);
        }

        plan.apply(self.force)?;
        if copying {
            eprintln!("copied the xtask into {}", xtask_dir.display());
        }
        update_lockfile(&host);

        // The proof: the key and the contracts of the result.
        let common = flags::Common {
            root: Some(host.clone()),
            policy: None,
        };
        eprintln!("--- cargo xtask ci-key");
        flags::CiKey {
            common: common.clone(),
            explain: false,
            json: None,
            diff: None,
            github_output: false,
        }
        .run()
        .context("ci-key failed on the initialised repository")?;
        eprintln!("--- cargo xtask check-contracts");
        let code = flags::CheckContracts {
            common,
            format: flags::Format::Human,
            persona: flags::Persona::Regular,
        }
        .run()?;
        eprintln!(
            "next: review the changes, set the `runpod` environment and variables (docs/ci-system.md), and commit"
        );
        Ok(code)
    }
}

/// The repository the running ci-trust was built from (it lives at
/// `crates/ci-trust` there): its workflows and scripts are the templates.
fn template_repository() -> Result<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .context("the ci-trust crate lives at crates/ci-trust inside a repository")?;
    Ok(dir.to_path_buf())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A runner label goes into YAML unquoted: letters, digits, `.`, `_`, `-`.
fn check_label(flag: &str, label: &str) -> Result<()> {
    if label.is_empty()
        || !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        bail!("{flag} {label:?} may hold only letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

/// The CI workflow's `name:` goes into YAML unquoted, in a flow sequence too.
fn check_workflow_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.trim() == name
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b" ._-".contains(&b));
    if !valid {
        bail!("--ci-name {name:?} may hold only letters, digits, spaces, `.`, `_` and `-`");
    }
    Ok(())
}

/// `cargo metadata --no-deps` of the host, run as the key runs it.
fn host_metadata(host: &Path) -> Result<cargo_metadata::Metadata> {
    let neutral = tempfile::tempdir().context("cannot create a neutral working directory")?;
    crate::key::workspace::cargo_metadata_no_deps(neutral.path(), &host.join("Cargo.toml"))
}

fn relative_dir(root: &Path, manifest: &Path) -> Result<String> {
    let dir = manifest.parent().context("a manifest has a directory")?;
    let rel = dir.strip_prefix(root).with_context(|| {
        format!(
            "workspace member {} is outside {}",
            dir.display(),
            root.display()
        )
    })?;
    let text = rel
        .to_str()
        .with_context(|| format!("{} is not UTF-8", rel.display()))?
        .replace('\\', "/");
    Ok(if text.is_empty() { ".".into() } else { text })
}

/// Every file `init-ci` will write, checked before any is written.
struct Plan {
    host: PathBuf,
    writes: Vec<(PathBuf, String, Kind)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// A new file, or one replaced: refused over different content without `--force`.
    Write,
    /// An edit of the host's own file (additions only).
    Edit,
}

impl Plan {
    fn new(host: &Path) -> Plan {
        Plan {
            host: host.to_path_buf(),
            writes: Vec::new(),
        }
    }

    fn planned(&self, path: &Path) -> Option<&str> {
        self.writes
            .iter()
            .rev()
            .find(|(p, _, _)| p == path)
            .map(|(_, text, _)| text.as_str())
    }

    fn write(&mut self, path: &Path, text: String) {
        self.writes.push((path.to_path_buf(), text, Kind::Write));
    }

    fn edit(&mut self, path: &Path, text: String) {
        // An edit of a file this plan creates is still a new file.
        let kind = match self.writes.iter().position(|(p, _, _)| p == path) {
            Some(index) => self.writes.remove(index).2,
            None => Kind::Edit,
        };
        self.writes.push((path.to_path_buf(), text, kind));
    }

    /// Plans a copy of every regular file under `from` (UTF-8 text only).
    fn copy_tree(&mut self, from: &Path, to: &Path) -> Result<()> {
        if from.is_file() {
            self.write(to, read(from)?);
            return Ok(());
        }
        for entry in walkdir::WalkDir::new(from).sort_by_file_name() {
            let entry = entry.with_context(|| format!("cannot list {}", from.display()))?;
            if entry.file_type().is_file() {
                let rel = entry
                    .path()
                    .strip_prefix(from)
                    .expect("walkdir stays under its root");
                self.write(&to.join(rel), read(entry.path())?);
            } else if !entry.file_type().is_dir() {
                bail!(
                    "{} is not a regular file; refusing to copy it",
                    entry.path().display()
                );
            }
        }
        Ok(())
    }

    fn apply(self, force: bool) -> Result<()> {
        let mut conflicts = Vec::new();
        for (path, text, kind) in &self.writes {
            if *kind == Kind::Write
                && path.exists()
                && std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str())
            {
                conflicts.push(
                    path.strip_prefix(&self.host)
                        .unwrap_or(path)
                        .display()
                        .to_string(),
                );
            }
        }
        if !conflicts.is_empty() && !force {
            bail!(
                "init-ci would overwrite {} file{} whose content differs:\n  {}\nnothing was written; review them and pass --force to replace them",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                conflicts.join("\n  ")
            );
        }
        for (path, text, _) in &self.writes {
            if std::fs::read_to_string(path).ok().as_deref() == Some(text.as_str()) {
                continue;
            }
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "wrote {}",
                path.strip_prefix(&self.host).unwrap_or(path).display()
            );
        }
        Ok(())
    }
}

/// The line range `[start, end)` of the table whose header is exactly `header`.
fn table_lines(lines: &[&str], header: &str) -> Option<(usize, usize)> {
    let start = lines
        .iter()
        .position(|l| l.split('#').next().unwrap_or("").trim() == header)?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |i| start + 1 + i);
    Some((start, end))
}

/// The line within `range` assigning `key` (`key = …`).
fn key_line(lines: &[&str], (start, end): (usize, usize), key: &str) -> Option<usize> {
    (start + 1..end).find(|&i| {
        lines[i]
            .trim_start()
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    })
}

/// Whether a workspace path list (globs allowed) selects `dir`.
fn selects(list: Option<&toml::Value>, dir: &str) -> bool {
    list.and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .any(|pattern| {
            globset::Glob::new(pattern.trim_end_matches('/'))
                .is_ok_and(|g| g.compile_matcher().is_match(dir))
        })
}

/// The lines as `&str`, for the line helpers.
fn view(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).collect()
}

/// Adds the xtask to the host's workspace: a member, kept out of
/// `default-members` (so the host's `cargo test` and Windows CI never build
/// it), with the `[profile.dev.package]` entries it needs for speed.
fn add_to_workspace(text: &str, members: &[String]) -> Result<String> {
    const TOOL: &str = crate::key::TOOL_PACKAGE;
    let parsed: toml::Table = toml::from_str(text).context("cannot parse the host's Cargo.toml")?;
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let is_package = parsed.contains_key("package");
    match parsed.get("workspace").and_then(|w| w.as_table()) {
        None => {
            // A single package becomes the root of a workspace; cargo's default
            // for a root package is that package alone.
            lines.push(String::new());
            lines.push("[workspace]".into());
            lines.push(format!("members = [\"{TOOL}\"]"));
        }
        Some(workspace) => {
            let Some(range) = table_lines(&view(&lines), "[workspace]") else {
                bail!(
                    "the host's Cargo.toml defines the workspace without a `[workspace]` header; add \"{TOOL}\" to its members by hand"
                );
            };
            if selects(workspace.get("exclude"), TOOL) {
                bail!("the host's [workspace] excludes \"{TOOL}\"; remove it from `exclude`");
            }
            // Right under the header: never inside a multi-line array.
            let insert_at = range.0 + 1;
            if !selects(workspace.get("members"), TOOL) {
                let members_line = key_line(&view(&lines), range, "members");
                match members_line {
                    Some(i) => {
                        let bracket = lines[i].find('[').with_context(|| {
                            format!(
                                "Cargo.toml:{}: `members` is not an array on its line",
                                i + 1
                            )
                        })?;
                        lines[i].insert_str(bracket + 1, &format!("\"{TOOL}\", "));
                    }
                    None => lines.insert(insert_at, format!("members = [\"{TOOL}\"]")),
                }
            }
            if !is_package {
                if selects(workspace.get("default-members"), TOOL) {
                    bail!(
                        "the host's default-members selects \"{TOOL}\"; the host's `cargo test` would build the xtask: remove it"
                    );
                }
                if !workspace.contains_key("default-members") {
                    let list: Vec<String> = members.iter().map(|m| format!("\"{m}\"")).collect();
                    if list.is_empty() {
                        bail!("the host workspace has no member besides the xtask");
                    }
                    lines.insert(
                        insert_at.min(lines.len()),
                        format!(
                            "# Everything but the CI xtask: `cargo build`/`cargo test` without -p never build it.\ndefault-members = [{}]",
                            list.join(", ")
                        ),
                    );
                }
            }
        }
    }
    let profiles = parsed
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(|d| d.get("package"))
        .and_then(|p| p.as_table());
    let missing: Vec<&str> = PROFILE_PACKAGES
        .iter()
        .copied()
        .filter(|p| !profiles.is_some_and(|t| t.contains_key(*p)))
        .collect();
    if !missing.is_empty() {
        lines.push(String::new());
        lines.push(
            "# The CI xtask's hot paths (hashing, tokenising): optimised even in dev builds, which costs seconds of compile time and halves the key's run time.".into(),
        );
        for package in missing {
            lines.push(format!("[profile.dev.package.{package}]\nopt-level = 3"));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    let check: toml::Table = toml::from_str(&out).with_context(|| {
        "the edited Cargo.toml does not parse (its layout is unusual); add the xtask to the workspace by hand"
    })?;
    let workspace = check.get("workspace").and_then(|w| w.as_table());
    if !selects(workspace.and_then(|w| w.get("members")), TOOL) {
        bail!("could not add \"{TOOL}\" to the host's workspace members; add it by hand");
    }
    Ok(out)
}

/// Replaces the xtask's `field.workspace = true` inheritance with its own
/// values: a host's `[workspace.package]` (edition 2021, an older
/// rust-version) must not decide how the xtask compiles.
fn own_package_fields(text: &str) -> Result<String> {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        // The copied ci-trust becomes the host's `xtask` package and binary.
        if trimmed == "name = \"ci-trust\"" {
            out.push_str("name = \"xtask\"\n");
            continue;
        }
        let replaced = OWN_PACKAGE_FIELDS.iter().find_map(|(field, value)| {
            let rest = trimmed.strip_prefix(field)?;
            let rest = rest.trim_start().strip_prefix(".workspace")?;
            let rest = rest.trim_start().strip_prefix('=')?;
            (rest.trim() == "true").then(|| format!("{field} = \"{value}\""))
        });
        out.push_str(replaced.as_deref().unwrap_or(line));
        out.push('\n');
    }
    let parsed: toml::Table =
        toml::from_str(&out).context("the xtask's Cargo.toml does not parse")?;
    if let Some(package) = parsed.get("package").and_then(|p| p.as_table()) {
        for (field, value) in package {
            if value.get("workspace").is_some() {
                bail!(
                    "xtask/Cargo.toml inherits `{field}` from the workspace; give it its own value so the host's settings cannot change how the xtask builds"
                );
            }
        }
    }
    Ok(out)
}

/// Adds `xtask = "run --package xtask --"` to `[alias]`. A different `xtask`
/// alias is refused without `--force`.
fn add_alias(text: &str, force: bool) -> Result<String> {
    const ALIAS: &str = "xtask = \"run --package xtask --\"";
    let parsed: toml::Table = toml::from_str(text).context("cannot parse .cargo/config.toml")?;
    let existing = parsed.get("alias").and_then(|a| a.get("xtask"));
    let wanted = toml::Value::String("run --package xtask --".into());
    if existing == Some(&wanted) {
        return Ok(text.to_owned());
    }
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let (table, line) = {
        let view: Vec<&str> = lines.iter().map(String::as_str).collect();
        let table = table_lines(&view, "[alias]");
        (
            table,
            table.and_then(|range| key_line(&view, range, "xtask")),
        )
    };
    match table {
        Some(range) => match line {
            Some(i) if force => lines[i] = ALIAS.into(),
            Some(i) => bail!(
                ".cargo/config.toml:{}: an `xtask` alias already exists ({}); pass --force to replace it",
                i + 1,
                lines[i].trim()
            ),
            None => lines.insert(range.0 + 1, ALIAS.into()),
        },
        None if existing.is_some() => {
            bail!(
                ".cargo/config.toml defines alias.xtask outside an [alias] table; set it to \"run --package xtask --\" by hand"
            )
        }
        None => {
            if !lines.is_empty() {
                lines.push(String::new());
            }
            lines.push("[alias]".into());
            lines.push(ALIAS.into());
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    let check: toml::Table =
        toml::from_str(&out).context("the edited .cargo/config.toml does not parse")?;
    if check.get("alias").and_then(|a| a.get("xtask")) != Some(&wanted) {
        bail!("could not set the xtask alias in .cargo/config.toml; set it by hand");
    }
    Ok(out)
}

/// What the policy says about the host's GPU crates.
struct Gpu {
    archives: Vec<Archive>,
    /// `locked-crates` entries, as TOML inline tables.
    locked: Vec<String>,
    notes: Vec<String>,
}

struct Archive {
    file: String,
    nextest: Vec<String>,
}

/// Finds the GPU crates: members with a `cuda` feature (or one starting with
/// `cuda`) or a dependency on a toolkit crate; `--gpu-package` names them
/// instead. Toolkit crates in the lockfile become `locked-crates`, with
/// `feature-prefix = "cuda-"` only when a member enables a version feature.
fn detect_gpu(host: &Path, metadata: &cargo_metadata::Metadata, named: &[String]) -> Result<Gpu> {
    let members: Vec<&cargo_metadata::Package> = metadata
        .packages
        .iter()
        .filter(|p| metadata.workspace_members.contains(&p.id))
        .filter(|p| p.name.as_str() != crate::key::TOOL_PACKAGE)
        .collect();
    let mut archives = Vec::new();
    for package in &members {
        let name = package.name.as_str();
        let feature = if package.features.contains_key("cuda") {
            Some("cuda".to_owned())
        } else {
            package
                .features
                .keys()
                .find(|f| f.starts_with("cuda"))
                .cloned()
        };
        let uses_toolkit = package
            .dependencies
            .iter()
            .any(|d| TOOLKIT_CRATES.contains(&d.name.as_str()));
        let chosen = if named.is_empty() {
            feature.is_some() || uses_toolkit
        } else {
            named.iter().any(|n| n == name)
        };
        if !chosen {
            continue;
        }
        let mut nextest = vec!["-p".to_owned(), name.to_owned()];
        if let Some(feature) = feature {
            nextest.extend(["--features".to_owned(), feature]);
        }
        nextest.push("--locked".to_owned());
        archives.push(Archive {
            file: format!("{}-gpu-tests.tar.zst", name.replace('_', "-")),
            nextest,
        });
    }
    for name in named {
        if !members.iter().any(|p| p.name.as_str() == name) {
            bail!("--gpu-package {name} is not a member of the host workspace");
        }
    }
    if archives.is_empty() {
        bail!(
            "found no GPU crate in the host workspace (no member has a `cuda` feature or depends on {}); name them with --gpu-package",
            TOOLKIT_CRATES.join(", ")
        );
    }

    let lock_path = host.join("Cargo.lock");
    let locked_names: BTreeSet<String> = match std::fs::read_to_string(&lock_path) {
        Ok(text) => {
            let lock: toml::Table = toml::from_str(&text)
                .with_context(|| format!("cannot parse {}", lock_path.display()))?;
            lock.get("package")
                .and_then(|p| p.as_array())
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("name")?.as_str().map(str::to_owned))
                .collect()
        }
        Err(_) => BTreeSet::new(),
    };
    let mut locked = Vec::new();
    let mut notes = Vec::new();
    if locked_names.is_empty() {
        notes.push("the host has no Cargo.lock: commit one, or the key cannot name the toolkit crates' versions".into());
    }
    for toolkit in TOOLKIT_CRATES.iter().filter(|t| locked_names.contains(**t)) {
        // The features members enable on the crate, in a dependency
        // declaration or through their own `[features]`.
        let mut enabled = BTreeSet::new();
        for package in &members {
            for dep in package.dependencies.iter().filter(|d| d.name == *toolkit) {
                enabled.extend(dep.features.iter().cloned());
            }
            for values in package.features.values() {
                for value in values {
                    match value.split_once('/') {
                        Some((dep, feature)) if dep.trim_end_matches('?') == *toolkit => {
                            enabled.insert(feature.to_owned());
                        }
                        _ => {}
                    }
                }
            }
        }
        let prefix = "cuda-";
        let versions: Vec<&String> = enabled
            .iter()
            .filter(|f| is_version_feature(f, prefix))
            .collect();
        if versions.is_empty() {
            locked.push(format!("{{ name = \"{toolkit}\" }}"));
            let others: Vec<&String> = enabled.iter().filter(|f| f.starts_with(prefix)).collect();
            if *toolkit == "cudarc" {
                notes.push(format!(
                    "cudarc's CUDA version is not chosen by a `{prefix}<version>` feature{}: the key names cudarc's version but not the CUDA version; enable one (such as `{prefix}12080`) and add feature-prefix = \"{prefix}\", or list the variable that selects it in key.toolkit-env",
                    if others.is_empty() { String::new() } else { format!(" (enabled: {})", others.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")) }
                ));
            }
        } else {
            locked.push(format!(
                "{{ name = \"{toolkit}\", feature-prefix = \"{prefix}\" }}"
            ));
        }
    }
    Ok(Gpu {
        archives,
        locked,
        notes,
    })
}

/// The host's `.github/ci-trust.toml`.
fn policy_text(gpu: &Gpu, runner: &str) -> String {
    let mut text = String::from(
        "# The CI trust policy (written by `cargo xtask init-ci`; schema: crates/ci-trust/src/policy.rs).\n\
         # Read by `cargo xtask ci-key`, `gpu-archive`, `check-contracts` and `verify-key`.\n\n\
         default-branch = \"main\"\n\n[key]\nname = \"cuda-archive\"\n\
         # Bump when the archive build commands ([[archive]] below) or the toolkit selection change.\n\
         version = \"v1\"\nstep-id = \"archive_key\"\n",
    );
    if !gpu.locked.is_empty() {
        text.push_str(&format!("locked-crates = [{}]\n", gpu.locked.join(", ")));
    }
    text.push_str(
        "\n[publisher]\nworkflows = [\"ci-cache-publish.yml\"]\n\n[artifacts]\n\
         trusted-workflows = [\"runpod-gpu-test.yml\", \"ci-cache-publish.yml\"]\n\
         trusted-events = [\"workflow_run\", \"workflow_dispatch\", \"push\", \"schedule\"]\n\n\
         # The nextest archives published under one key and run on the pod\n\
         # (runpod-gpu-test.yml's `archives` input names the same files).\n",
    );
    for archive in &gpu.archives {
        let args: Vec<String> = archive.nextest.iter().map(|a| format!("\"{a}\"")).collect();
        text.push_str(&format!(
            "[[archive]]\nfile = \"{}\"\nnextest = [{}]\n\n",
            archive.file,
            args.join(", ")
        ));
    }
    // check-contracts treats a label it does not know as a self-hosted pod;
    // the label given is GitHub-hosted (a larger runner, say), so say so.
    if format!("runs-on: {runner}") != TEMPLATE_RUNNER {
        text.push_str(&format!(
            "[contracts]\n# The GitHub-hosted runner of every job but the pod's (init-ci --runner).\nhosted-labels = [\"{runner}\"]\n\n"
        ));
    }
    text.push_str(
        "# Reviewed grants beyond the read-only default, one per job.\n\
         [[contracts.job]]\nworkflow = \"runpod-gpu-test.yml\"\njob = \"authorize\"\nread-scopes = [\"pull-requests\"]\n\n\
         [[contracts.job]]\nworkflow = \"runpod-gpu-test.yml\"\njob = \"cuda-archive\"\n\
         # The artifact finder of `gpu-archive --reuse` lists artifacts and reads runs.\nread-scopes = [\"actions\"]\n\n\
         [[contracts.job]]\nworkflow = \"runpod-gpu-execute.yml\"\njob = \"create-pod\"\nsecrets = [\"RUNPOD_API_KEY\", \"RUNNER_ADMIN_TOKEN\"]\n\n\
         [[contracts.job]]\nworkflow = \"runpod-gpu-execute.yml\"\njob = \"delete-pod\"\nsecrets = [\"RUNPOD_API_KEY\", \"RUNNER_ADMIN_TOKEN\"]\n\n\
         [[contracts.job]]\nworkflow = \"runpod-reap.yml\"\njob = \"reap\"\nsecrets = [\"RUNPOD_API_KEY\"]\n",
    );
    text
}

/// One template workflow with the host's runner label, CI workflow name and
/// archive files. Each replacement must find its anchor in the template: a
/// template that changed shape fails here rather than passing unedited.
fn customise_workflow(
    name: &str,
    text: &str,
    runner: &str,
    ci_name: &str,
    archives: &[&str],
) -> Result<String> {
    let replaced = text.replace(TEMPLATE_RUNNER, &format!("runs-on: {runner}"));
    let mut lines: Vec<String> = replaced.lines().map(str::to_owned).collect();
    // Replaces the first line that starts with `prefix`.
    let mut replace_line = |prefix: &str, line: String| -> Result<()> {
        let Some(found) = lines.iter_mut().find(|l| l.starts_with(prefix)) else {
            bail!(
                "the template {name} has no `{}` line; update init-ci",
                prefix.trim()
            );
        };
        *found = line;
        Ok(())
    };
    match name {
        "ci.yml" => replace_line("name: ", format!("name: {ci_name}"))?,
        "runpod-gpu-test.yml" => {
            replace_line("    workflows: [", format!("    workflows: [{ci_name}]"))?;
            replace_line(
                "      archives: ",
                format!("      archives: {}", archives.join(" ")),
            )?;
        }
        _ => {}
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// Adds the xtask's dependencies to the host's lockfile, so `--locked`
/// builds pass; a failure (offline, say) only asks the user to do it.
fn update_lockfile(host: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = std::process::Command::new(cargo)
        .args(["update", "--workspace", "--quiet", "--manifest-path"])
        .arg(host.join("Cargo.toml"))
        .current_dir(host)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        eprintln!(
            "note: `cargo update --workspace` failed; run it in {} so that Cargo.lock holds the xtask's dependencies",
            host.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_workspace_gains_the_member_default_members_and_profiles() {
        let text = "# my workspace\n[workspace]\nresolver = \"2\"\nmembers = [\n  \"crates/*\", # all\n]\n\n[profile.dev.package.syn]\nopt-level = 2\n";
        let out = add_to_workspace(text, &["crates/a".into(), "crates/b".into()]).unwrap();
        assert!(out.starts_with("# my workspace\n"), "{out}");
        assert!(
            out.contains("members = [\"xtask\", \n  \"crates/*\", # all"),
            "{out}"
        );
        assert!(
            out.contains("default-members = [\"crates/a\", \"crates/b\"]"),
            "{out}"
        );
        assert!(
            out.contains("[profile.dev.package.sha2]")
                && !out.contains("[profile.dev.package.syn]\nopt-level = 3"),
            "{out}"
        );
        // Idempotent: a second run adds nothing.
        assert_eq!(add_to_workspace(&out, &["crates/a".into()]).unwrap(), out);
    }

    #[test]
    fn a_single_package_becomes_a_workspace_root() {
        let out = add_to_workspace(
            "[package]\nname = \"gpu\"\nversion = \"0.1.0\"\n",
            &[".".into()],
        )
        .unwrap();
        assert!(out.contains("[workspace]\nmembers = [\"xtask\"]"), "{out}");
        assert!(!out.contains("default-members"), "{out}");
    }

    #[test]
    fn a_workspace_that_would_build_the_xtask_by_default_is_refused() {
        let err = add_to_workspace(
            "[workspace]\nmembers = [\"*\"]\ndefault-members = [\"*\"]\n",
            &[],
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("default-members selects"),
            "{err:#}"
        );
        let err = add_to_workspace(
            "[workspace]\nmembers = [\"a\"]\nexclude = [\"xtask\"]\n",
            &[],
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("excludes"), "{err:#}");
    }

    #[test]
    fn inherited_package_fields_get_the_xtasks_own_values() {
        let out = own_package_fields("[package]\nname = \"xtask\"\nedition.workspace = true\nrust-version.workspace = true\nlicense.workspace = true\n").unwrap();
        assert!(out.contains("edition = \"2024\"\n"), "{out}");
        assert!(
            out.contains(&format!(
                "rust-version = \"{}\"",
                env!("CARGO_PKG_RUST_VERSION")
            )),
            "{out}"
        );
        assert!(
            own_package_fields("[package]\nname = \"xtask\"\nversion.workspace = true\n").is_err()
        );
    }

    #[test]
    fn the_alias_is_added_kept_or_refused() {
        assert_eq!(
            add_alias("", false).unwrap(),
            "[alias]\nxtask = \"run --package xtask --\"\n"
        );
        let kept = "[alias]\nxtask = \"run --package xtask --\"\n";
        assert_eq!(add_alias(kept, false).unwrap(), kept);
        let other = "[build]\njobs = 2\n[alias]\nb = \"build\"\n";
        assert!(
            add_alias(other, false)
                .unwrap()
                .contains("[alias]\nxtask = \"run --package xtask --\"\nb = \"build\"")
        );
        let hostile = "[alias]\nxtask = \"run --package evil --\"\n";
        assert!(format!("{:#}", add_alias(hostile, false).unwrap_err()).contains("--force"));
        assert!(
            add_alias(hostile, true)
                .unwrap()
                .contains("run --package xtask --")
        );
    }

    #[test]
    fn labels_and_names_that_could_break_the_yaml_are_refused() {
        assert!(check_label("--runner", "ubuntu-24.04").is_ok());
        for bad in ["", "a b", "x\n  evil: 1", "${{ x }}", "a#b"] {
            assert!(check_label("--runner", bad).is_err(), "{bad:?}");
        }
        assert!(check_workflow_name("Rust CI").is_ok());
        for bad in ["", " CI", "CI]", "CI\nx", "a: b"] {
            assert!(check_workflow_name(bad).is_err(), "{bad:?}");
        }
    }
}
