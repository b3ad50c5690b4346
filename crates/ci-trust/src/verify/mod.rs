//! `cargo xtask verify-key`: proves, after a real build, that the content key
//! covers every file of the repository the compiler and the build scripts read.
//!
//! `ci-key` derives its inputs statically and never runs code; a proc macro
//! or a build script can still read a file no static reading sees. Cargo
//! knows the truth after a build: rustc's dep-info files (`*.d`) list every
//! source file a compilation read, and each build script's `output` file holds
//! the `rerun-if-changed` paths it printed. Every such path inside the
//! repository must be a key input; files outside it (registry sources, the
//! toolchain) are covered by the lockfile and the rustc version instead.

pub mod trace;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::build_plan::BuildPlan;
use crate::key::{self, KeyManifest};
use crate::policy::Policy;
use crate::{flags, gha};

impl flags::VerifyKey {
    pub fn run(&self) -> Result<ExitCode> {
        let root = self.common.root()?;
        let policy = self.common.load_policy(&root)?;
        let manifest = key::compute(&root, &policy)?;
        let workspace = key::workspace::load(&root)?;
        if self.trace {
            let mut output_dirs =
                trace::build_output_dirs(&root, &workspace.target_dir, &self.command);
            if let Some(dir) = &self.target_dir {
                output_dirs.push(root.join(dir));
            }
            // Wherever the command's `--target-dir`, `--config` or the
            // environment sends its output, and the build directory.
            let args: Vec<String> = self
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let outputs = workspace.command_output(&root, &args)?;
            // What the command line itself names (not the checkout's
            // configuration) may hold an earlier build's output.
            let configured = workspace.command_output(&root, &[] as &[String])?;
            let mut trusted = trace::command_line_target_dirs(&root, &self.command);
            for dir in [&outputs.target_dir, &outputs.build_dir] {
                if *dir != configured.target_dir && *dir != configured.build_dir {
                    trusted.push(dir.clone());
                }
            }
            output_dirs.extend([outputs.target_dir, outputs.build_dir]);
            trace::refuse_occupied_output_dirs(&root, &output_dirs, &trusted)?;
            let choice = self.tracer.unwrap_or(policy.verify.tracer);
            return trace::verify_command(
                &root,
                &policy,
                &manifest,
                &self.command,
                &output_dirs,
                choice,
                self.key_tree,
            );
        }
        let mut args = Vec::new();
        if let Some(dir) = &self.target_dir {
            let dir = std::path::absolute(dir).context("cannot resolve --target-dir")?;
            args = vec![
                "--target-dir".to_owned(),
                dir.to_string_lossy().into_owned(),
            ];
        }
        let outputs = workspace.command_output(&root, &args)?;
        let package_dirs = workspace.package_dirs();
        // Without --target, the build went where the checkout's `[build]
        // target` (or CARGO_BUILD_TARGET) sent it, not to the host directory.
        let triples: Vec<Option<String>> = match &self.target {
            Some(triple) => vec![Some(triple.clone())],
            None if workspace.build_targets.is_empty() => vec![None],
            None => configured_triples(&workspace, &manifest)
                .into_iter()
                .map(Some)
                .collect(),
        };
        let mut misses = Vec::new();
        for triple in triples {
            // Dep-info lives in the build directory (`build.build-dir`,
            // by default the target directory).
            let mut build = outputs.build_dir.clone();
            if let Some(triple) = &triple {
                build.push(triple);
            }
            let dirs = BuildDirs {
                profile_dir: build.join(crate::build_plan::profile_dir(&self.profile)),
                build_dir: outputs.build_dir.clone(),
                target_dir: outputs.target_dir.clone(),
            };
            let report = check(&root, &manifest, &package_dirs, &dirs)?;
            eprint!("{}", gha::log_block(&report.render()));
            misses.extend(report.misses);
        }
        if misses.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        for miss in &misses {
            gha::warning(&format!(
                "{} is read by the build but is not a key input ({}): {}",
                miss.path, miss.read_by, miss.fix
            ));
        }
        Ok(ExitCode::from(1))
    }
}

/// Checks the builds `gpu-archive` just made, one per profile directory its
/// `[[archive]]` commands wrote to, and refuses the key on any miss: an
/// archive must never be published under a key that does not describe it.
pub fn check_archive_builds(root: &Path, manifest: &KeyManifest, policy: &Policy) -> Result<()> {
    let workspace = key::workspace::load(root)?;
    let package_dirs = workspace.package_dirs();
    let triples = configured_triples(&workspace, manifest);
    let mut dirs = Vec::new();
    for plan in BuildPlan::for_policy(root, &workspace, policy)? {
        for profile_dir in plan.profile_dirs(&triples) {
            dirs.push(BuildDirs {
                target_dir: plan.output.target_dir.clone(),
                build_dir: plan.output.build_dir.clone(),
                profile_dir,
            });
        }
    }
    dirs.sort();
    dirs.dedup();
    let mut misses = Vec::new();
    for dir in dirs {
        let report = check(root, manifest, &package_dirs, &dir)?;
        eprint!("{}", gha::log_block(&report.render()));
        misses.extend(report.misses);
    }
    if !misses.is_empty() {
        let list: Vec<String> = misses
            .iter()
            .map(|m| format!("{} (read by {}): {}", m.path, m.read_by, m.fix))
            .collect();
        bail!(
            "the build read {} file(s) the key does not cover, so the archives are not published under it:\n  {}",
            list.len(),
            list.join("\n  ")
        );
    }
    Ok(())
}

/// Where a build wrote.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BuildDirs {
    /// The whole target directory: every file under it is build output.
    pub target_dir: PathBuf,
    /// The build directory (`build.build-dir`, by default the target
    /// directory): build output too, and where the dep-info files are.
    pub build_dir: PathBuf,
    /// `<build-dir>/[<triple>/]<profile>`.
    pub profile_dir: PathBuf,
}

/// The configuration's `build.target` triples, `host-tuple` replaced by the
/// host triple the key recorded (cargo builds it into `<target-dir>/<host>`).
fn configured_triples(
    workspace: &key::workspace::Workspace,
    manifest: &KeyManifest,
) -> Vec<String> {
    let host = manifest
        .components
        .iter()
        .find(|c| c.name == "host")
        .map(|c| c.value.clone());
    workspace
        .build_targets
        .iter()
        .map(|t| match (t.as_str(), &host) {
            ("host-tuple", Some(host)) => host.clone(),
            _ => t.clone(),
        })
        .collect()
}

/// A file the build read that the key does not cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    /// Repository-relative, `/`-separated.
    pub path: String,
    /// The compilation or build script that read it.
    pub read_by: String,
    pub fix: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub dep_info_files: usize,
    pub build_outputs: usize,
    /// Distinct repository files the build read, all checked.
    pub repository_files: usize,
    /// Distinct files outside the repository (registry sources, toolchain).
    pub external_files: usize,
    /// Distinct generated files under the target directory.
    pub generated_files: usize,
    /// Listed paths that no longer exist (stale dep-info from an older build).
    pub vanished_files: usize,
    /// Git metadata a build script watches (`.git/HEAD`), never a key input.
    pub git_files: usize,
    pub misses: Vec<Miss>,
}

impl Report {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "verify-key: read {} dep-info files and {} build-script outputs",
            self.dep_info_files, self.build_outputs
        );
        let _ = writeln!(
            out,
            "  {} repository files read by the build, {} of them key inputs",
            self.repository_files,
            self.repository_files - self.misses.len()
        );
        let _ = writeln!(
            out,
            "  {} files outside the repository (registry sources, toolchain): covered by Cargo.lock and the rustc version, not hashed",
            self.external_files
        );
        let _ = writeln!(
            out,
            "  {} generated files under the target directory: covered by their build scripts' inputs",
            self.generated_files
        );
        if self.git_files > 0 {
            let _ = writeln!(
                out,
                "  {} git metadata files watched by build scripts: never key inputs (an archive may carry another commit's git information)",
                self.git_files
            );
        }
        if self.vanished_files > 0 {
            let _ = writeln!(
                out,
                "  {} listed files no longer exist (dep-info of an older build)",
                self.vanished_files
            );
        }
        if self.misses.is_empty() {
            let _ = writeln!(out, "every file the build read is covered by the key");
        } else {
            let _ = writeln!(
                out,
                "{} files the build read are NOT covered by the key:",
                self.misses.len()
            );
            for miss in &self.misses {
                let _ = writeln!(
                    out,
                    "  {}  (read by {})\n    fix: {}",
                    miss.path, miss.read_by, miss.fix
                );
            }
        }
        out
    }
}

/// Checks the build in `dirs.profile_dir` (such as `target/debug`) against
/// `manifest`; `package_dirs` maps the repository's package names to their directories.
///
/// A build for a `--target` triple compiles build scripts and proc macros
/// for the host into `<target-dir>/<profile>`, beside the triple's
/// directory; those compilations read repository files too, so that
/// directory is checked as well.
pub fn check(
    root: &Path,
    manifest: &KeyManifest,
    package_dirs: &BTreeMap<String, PathBuf>,
    dirs: &BuildDirs,
) -> Result<Report> {
    let BuildDirs {
        target_dir,
        build_dir,
        profile_dir,
    } = dirs;
    if !profile_dir.is_dir() {
        bail!(
            "{} does not exist: build first (cargo build / cargo nextest archive), then point --target-dir, --target and --profile at that build",
            profile_dir.display()
        );
    }
    let mut profile_dirs = vec![profile_dir.clone()];
    if profile_dir.parent() != Some(build_dir.as_path()) {
        if let Some(profile) = profile_dir.file_name() {
            let host = build_dir.join(profile);
            if host.is_dir() {
                profile_dirs.push(host);
            }
        }
    }
    let inputs: BTreeSet<&str> = manifest.inputs.iter().map(|i| i.path.as_str()).collect();
    // Cargo writes the paths below `build.dep-info-basedir` relative to it
    // in its own dep-info files; rustc's are relative to its working
    // directory, the workspace root.
    let basedir = std::env::var_os("CARGO_BUILD_DEP_INFO_BASEDIR")
        .filter(|v| !v.is_empty())
        .map(|dir| key::workspace::normalize(&root.join(dir)))
        .or_else(|| {
            key::cargo_config::CargoConfig::load(root)
                .ok()?
                .dep_info_basedir(root)
                .map(|dir| dir.path)
        })
        .unwrap_or_else(|| root.to_path_buf());
    let mut report = Report::default();
    // path -> who read it; a BTreeMap keeps the report sorted and deduplicated.
    let mut read: BTreeMap<PathBuf, (String, Source)> = BTreeMap::new();

    let mut dep_infos = Vec::new();
    let mut outputs = Vec::new();
    let mut from_cargo: Vec<(Vec<PathBuf>, String)> = Vec::new();
    for dir in &profile_dirs {
        dep_infos.extend(dep_info_files(dir)?);
        outputs.extend(build_outputs(dir)?);
    }
    for dep_info in &dep_infos {
        report.dep_info_files += 1;
        let dep_info = dep_info.as_path();
        let text = std::fs::read_to_string(dep_info)
            .with_context(|| format!("cannot read {}", dep_info.display()))?;
        let (listed, format) = parse_any_dep_info(&text).with_context(|| {
            format!(
                "{}: cannot read this dep-info file faithfully, so the check cannot be trusted",
                dep_info.display()
            )
        })?;
        let (reader, base) = match format {
            DepInfoFormat::Rustc => (compilation_name(dep_info), root),
            DepInfoFormat::Cargo => (artifact_name(dep_info), basedir.as_path()),
        };
        let listed: Vec<PathBuf> = listed
            .into_iter()
            .map(|path| {
                key::workspace::normalize(&if path.is_absolute() {
                    path
                } else {
                    base.join(path)
                })
            })
            .collect();
        if format == DepInfoFormat::Cargo {
            // Cargo's lists repeat rustc's and the build scripts' declared
            // paths: read after both, they name only what those did not.
            from_cargo.push((listed, reader));
            continue;
        }
        for path in listed {
            for file in expand_dir(&path) {
                read.entry(file)
                    .or_insert_with(|| (reader.clone(), Source::Compiler));
            }
        }
    }
    // Never pass on nothing: a directory with no dep-info was not built
    // (or not by rustc), and an empty check proves nothing.
    if dep_infos.is_empty() {
        bail!(
            "no rustc dep-info file (*.d) under {}: nothing was checked. Build first (cargo build / cargo nextest archive), then point --target-dir, --profile and --target at that build",
            profile_dirs
                .iter()
                .map(|d| format!("{}/{{deps,examples,build/*}}", d.display()))
                .collect::<Vec<_>>()
                .join(" or ")
        );
    }
    for (output, package_dir_name) in outputs {
        report.build_outputs += 1;
        let text = std::fs::read_to_string(&output)
            .with_context(|| format!("cannot read {}", output.display()))?;
        // Build scripts run in their package's directory; packages from the
        // registry are outside the repository and need no check.
        let Some(package_dir) = package_dirs.get(&package_dir_name) else {
            continue;
        };
        let reader = format!("build script of {package_dir_name}");
        for declared in rerun_paths(&text) {
            let path = key::workspace::normalize(&package_dir.join(&declared));
            for file in expand_dir(&path) {
                read.entry(file)
                    .or_insert_with(|| (reader.clone(), Source::BuildScript));
            }
        }
        // What the script hands to rustc and the linker (search
        // directories, link arguments) is read by them, and no dep-info
        // lists it. A search directory counts whole: the linker probes it
        // for `libX.so` before `libX.a`, so a file added there is used.
        for path in link_paths(&text, package_dir, root) {
            for file in expand_dir(&path) {
                read.entry(file)
                    .or_insert_with(|| (reader.clone(), Source::BuildScriptLink));
            }
        }
    }

    for (listed, reader) in from_cargo {
        for path in listed {
            for file in expand_dir(&path) {
                read.entry(file)
                    .or_insert_with(|| (reader.clone(), Source::Cargo));
            }
        }
    }
    for (path, (reader, source)) in read {
        if path.starts_with(target_dir) || path.starts_with(build_dir) {
            report.generated_files += 1;
            continue;
        }
        let Ok(rel) = path.strip_prefix(root) else {
            report.external_files += 1;
            continue;
        };
        if std::fs::symlink_metadata(&path).is_err() {
            report.vanished_files += 1;
            continue;
        }
        // Unix paths separate with `/` only: a `\` is part of a name.
        let rel = match rel.to_string_lossy().into_owned() {
            // The root's entry set is the input `.`.
            empty if empty.is_empty() => ".".to_owned(),
            rel => rel,
        };
        // As in ci-key: git metadata is a documented residual, not a miss.
        if crate::key::is_git_metadata(&rel) {
            report.git_files += 1;
            continue;
        }
        report.repository_files += 1;
        // Through a symlink the reader got the target's bytes, so the
        // target must be an input as well as the link.
        let target = path
            .is_symlink()
            .then(|| std::fs::canonicalize(&path).ok())
            .flatten();
        let target_rel = target.as_ref().and_then(|t| {
            t.strip_prefix(root)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        });
        let rel = match target_rel {
            Some(target_rel) if inputs.contains(rel.as_str()) => target_rel,
            _ => rel,
        };
        if inputs.contains(rel.as_str()) {
            continue;
        }
        let fix = match source {
            Source::Compiler => format!(
                "a macro (a proc macro, or a macro_rules! include used from another file) made rustc read it; add key.include = [\"{rel}\"] (or a glob of its directory) to the policy, or teach ci-key's discovery this form"
            ),
            Source::Cargo => format!(
                "cargo lists it for this artifact (what rustc read, or a build script declared); add key.include = [\"{rel}\"] (or a glob of its directory) to the policy, or rebuild so that rustc's own dep-info says which compilation read it"
            ),
            Source::BuildScript => format!(
                "the build script declares it with a path built at run time; print it as a literal `cargo::rerun-if-changed=` line, or add key.include = [\"{}\"] to the policy",
                if path.is_dir() {
                    format!("{rel}/**")
                } else {
                    rel.clone()
                }
            ),
            Source::BuildScriptLink => format!(
                "the build script hands it (or its directory) to rustc or the linker (rustc-link-search, rustc-link-arg, rustc-flags); declare the directory with a literal `cargo::rerun-if-changed=`, or add a glob of the whole directory (key.include = [\"{}/**\"]) to the policy",
                if path.is_dir() {
                    rel.clone()
                } else {
                    Path::new(&rel)
                        .parent()
                        .map_or(String::new(), |d| d.display().to_string())
                }
            ),
        };
        report.misses.push(Miss {
            path: rel,
            read_by: reader,
            fix,
        });
    }
    if report.repository_files == 0 {
        bail!(
            "the {} dep-info files under {} list no file of this repository ({}): nothing was checked. Build this repository's packages there, or point --target-dir, --profile and --target at their build",
            report.dep_info_files,
            profile_dir.display(),
            root.display()
        );
    }
    Ok(report)
}

#[derive(Debug, Clone, Copy)]
enum Source {
    Compiler,
    /// Cargo's dep-info only: rustc's files and the build scripts' outputs
    /// do not name it (they were removed, or are another build's).
    Cargo,
    BuildScript,
    /// Handed to rustc or the linker by a build script's output.
    BuildScriptLink,
}

/// Build script output directives that hand rustc or the linker paths:
/// (directive, whether its value is a search directory rather than flags).
const LINK_DIRECTIVES: &[(&str, bool)] = &[
    ("rustc-link-search", true),
    ("rustc-link-arg", false),
    ("rustc-link-arg-bins", false),
    ("rustc-link-arg-tests", false),
    ("rustc-link-arg-examples", false),
    ("rustc-link-arg-benches", false),
    ("rustc-link-arg-cdylib", false),
    ("rustc-cdylib-link-arg", false),
    ("rustc-flags", false),
];

/// The existing repository paths a build script's output hands to rustc or
/// the linker. A relative path is looked up from the package directory
/// and from the workspace root (rustc's working directory): both count.
fn link_paths(output: &str, package_dir: &Path, root: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for line in output.lines() {
        let Some(directive) = line
            .strip_prefix("cargo::")
            .or_else(|| line.strip_prefix("cargo:"))
        else {
            continue;
        };
        let Some((name, value)) = directive.split_once('=') else {
            continue;
        };
        let Some((_, search)) = LINK_DIRECTIVES.iter().find(|(d, _)| *d == name.trim()) else {
            continue;
        };
        let value = value.trim();
        for base in [package_dir, root] {
            if *search {
                let dir = value.split_once('=').map_or(value, |(_, dir)| dir);
                paths.push(key::workspace::normalize(&base.join(dir)));
            } else {
                paths.extend(key::cargo_config::flag_paths(
                    value.split_whitespace(),
                    base,
                    &[],
                ));
            }
        }
    }
    paths.retain(|p| p.starts_with(root) && p != root && std::fs::symlink_metadata(p).is_ok());
    paths.sort();
    paths.dedup();
    paths
}

/// Every dep-info file of a profile directory: rustc's, in `deps/`,
/// `examples/` and `build/*/`, and cargo's own beside the final artifacts
/// (`<profile>/*.d`, `examples/<name>.d`), which repeat rustc's lists for
/// those artifacts with the build scripts' `rerun-if-changed` paths folded
/// in. Both are read: a file either lists is checked.
fn dep_info_files(profile_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in ["", "deps", "examples", "build"] {
        let dir = profile_dir.join(dir);
        let depth = if dir.ends_with("build") { 2 } else { 1 };
        if !dir.is_dir() {
            continue;
        }
        for entry in walkdir::WalkDir::new(&dir).max_depth(depth) {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == "d") {
                files.push(entry.into_path());
            }
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Each build script run's `output` file, with the `<package>-<hash>` directory name.
fn build_outputs(profile_dir: &Path) -> Result<Vec<(PathBuf, String)>> {
    let build = profile_dir.join("build");
    let mut outputs = Vec::new();
    let Ok(entries) = std::fs::read_dir(&build) else {
        return Ok(outputs);
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", build.display()))?;
        let output = entry.path().join("output");
        if output.is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let package = name
                .rsplit_once('-')
                .map_or(name.clone(), |(p, _)| p.to_owned());
            outputs.push((output, package));
        }
    }
    outputs.sort();
    Ok(outputs)
}

/// A readable name for the compilation a dep-info file belongs to.
fn compilation_name(dep_info: &Path) -> String {
    let stem = dep_info
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let crate_name = stem
        .rsplit_once('-')
        .map_or(stem.clone(), |(c, _)| c.to_owned());
    if crate_name == "build_script_build" {
        let package = dep_info
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let package = package
            .rsplit_once('-')
            .map_or(package.clone(), |(p, _)| p.to_owned());
        format!("compilation of the build script of {package}")
    } else {
        format!("compilation of crate `{crate_name}`")
    }
}

/// Who wrote a dep-info file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepInfoFormat {
    /// rustc's `--emit=dep-info`: rules, a blank line, one `DEP:` line per file.
    Rustc,
    /// cargo's, beside a final artifact: one rule line.
    Cargo,
}

/// The files a dep-info file of either format lists.
fn parse_any_dep_info(text: &str) -> Result<(Vec<PathBuf>, DepInfoFormat)> {
    // Cargo writes one line; rustc never does (a rule is followed by a
    // blank line, then the `DEP:` lines).
    let one_line = text
        .strip_suffix('\n')
        .is_some_and(|line| !line.contains('\n'));
    if one_line {
        Ok((parse_cargo_dep_info(text)?, DepInfoFormat::Cargo))
    } else {
        Ok((parse_dep_info(text)?, DepInfoFormat::Rustc))
    }
}

/// The files of cargo's own dep-info file (`<artifact>: DEP DEP …` on one
/// line, written by cargo's `output_depinfo`): each name with a space
/// written `\ `, nothing else escaped. So `a\ b` is the file `a b`, or
/// the files `a\` and `b`; every reading of such a run is returned (a
/// file any of them names is checked), not a guess. A line break in a name
/// would make a second line, which is refused by the caller's reading.
fn parse_cargo_dep_info(text: &str) -> Result<Vec<PathBuf>> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let deps = match line.split_once(": ") {
        Some((_, deps)) => deps,
        // An artifact with no prerequisite: `ARTIFACT:`.
        None if line.ends_with(':') => return Ok(Vec::new()),
        None => bail!(
            "line 1: no `ARTIFACT: DEP …` rule (cargo writes one line, rustc a rule, a blank line and one `DEP:` line per file)"
        ),
    };
    // Runs of words joined by `\ `: a word ending in `\` was followed by
    // an escaped space, or is a name ending in `\`.
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut continues = false;
    for word in deps.split(' ') {
        match runs.last_mut() {
            Some(run) if continues => run.push(word),
            _ => runs.push(vec![word]),
        }
        continues = word.ends_with('\\');
    }
    let mut files = Vec::new();
    for run in runs {
        // Each piece without the `\` before a space (the escape, or the
        // name's own last character).
        let last = run.len() - 1;
        let pieces: Vec<&str> = run
            .iter()
            .enumerate()
            .map(|(i, piece)| match i < last {
                true => piece.strip_suffix('\\').unwrap_or(piece),
                false => piece,
            })
            .collect();
        for start in 0..=last {
            for end in start..=last {
                let mut name = pieces[start..=end].join(" ");
                if end < last {
                    // A separator after it: the `\` was the name's.
                    name.push('\\');
                }
                if name.is_empty() {
                    bail!("line 1: an empty prerequisite name (two spaces in a row)");
                }
                files.push(PathBuf::from(name));
            }
        }
    }
    let mut seen = BTreeSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

/// A readable name for the final artifact a cargo dep-info file describes.
fn artifact_name(dep_info: &Path) -> String {
    let stem = dep_info
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("the artifact `{stem}` (cargo's dep-info)")
}

/// The files a rustc dep-info file lists, read with rustc's exact format.
///
/// rustc writes, for each output, `OUT: DEP DEP …` and a blank line; then
/// one line `DEP:` per prerequisite, in the same order; then blank lines and
/// `#` comments (`# env-dep:…`, `# checksum:…`). It escapes a space in a
/// name as `\ ` and nothing else: a tab, `#`, `$` or `\` stands as itself,
/// and a line break in a name is written raw. So the prerequisite list is
/// ambiguous on its own (`trail\ x` is `trail\` then `x`, or `trail x`),
/// while each `DEP:` line names exactly one file. The file is accepted only
/// when both agree and nothing else is in it; anything else (a name with a
/// line break, a format this reading does not know) is an error naming the
/// line, never a silently shorter list.
pub fn parse_dep_info(text: &str) -> Result<Vec<PathBuf>> {
    let lines: Vec<&str> = text.split('\n').collect();
    let bad = |index: usize, what: &str| {
        anyhow::anyhow!(
            "line {}: {what} (rustc writes `OUTPUT: DEP …`, a blank line, then one `DEP:` line per file); a file name with a line break cannot be listed faithfully: rename it",
            index + 1
        )
    };
    // The rules: `OUT: DEP …` followed by a blank line, one per output, all
    // with the same prerequisites.
    let mut index = 0;
    let mut prerequisites: Option<&str> = None;
    while let Some(line) = lines.get(index) {
        let Some(separator) = line.find(": ") else {
            break;
        };
        let deps = &line[separator + 2..];
        match prerequisites {
            None => prerequisites = Some(deps),
            Some(first) if first == deps => {}
            Some(_) => return Err(bad(index, "the outputs list different prerequisites")),
        }
        if lines.get(index + 1) != Some(&"") {
            return Err(bad(
                index + 1,
                "a rule line is not followed by a blank line",
            ));
        }
        index += 2;
    }
    let Some(prerequisites) = prerequisites else {
        return Err(bad(index, "no `OUTPUT: DEP …` rule"));
    };
    // One `DEP:` line per file, taken until the list re-joined with spaces
    // is the rule's prerequisite text.
    let mut files = Vec::new();
    let mut joined = String::new();
    while joined.len() < prerequisites.len() {
        let Some(name) = lines.get(index).and_then(|l| l.strip_suffix(':')) else {
            return Err(bad(index, "expected a `DEP:` line"));
        };
        if !joined.is_empty() {
            joined.push(' ');
        }
        joined.push_str(name);
        files.push(PathBuf::from(name.replace("\\ ", " ")));
        index += 1;
    }
    if joined != prerequisites {
        return Err(bad(
            index.saturating_sub(1),
            "the `DEP:` lines do not spell the rule's prerequisites",
        ));
    }
    if let Some(extra) = lines[index..]
        .iter()
        .position(|l| !l.is_empty() && !l.starts_with('#'))
    {
        return Err(bad(index + extra, "unexpected text after the `DEP:` lines"));
    }
    let mut seen = BTreeSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

/// The paths of `cargo:rerun-if-changed=` / `cargo::rerun-if-changed=`
/// lines, trimmed as cargo trims them (`= data ` watches `data`).
fn rerun_paths(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| {
            line.strip_prefix("cargo::rerun-if-changed=")
                .or_else(|| line.strip_prefix("cargo:rerun-if-changed="))
        })
        .map(|path| path.trim().to_owned())
        .collect()
}

/// A declared directory means every file below it, as cargo watches it,
/// and the entry set of every directory in it (the key hashes a directory
/// it walks as its entries: a search directory is listed by the linker, a
/// watched one by the script that watches it).
fn expand_dir(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    walkdir::WalkDir::new(path)
        .follow_links(false)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.into_path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key manifest whose inputs are `paths`; nothing else matters to the check.
    fn manifest_of(paths: &[&str]) -> KeyManifest {
        KeyManifest {
            key: "k".into(),
            artifact_name: "k".into(),
            components: vec![],
            inputs: paths
                .iter()
                .map(|path| crate::key::Input {
                    path: path.to_string(),
                    sha256: String::new(),
                    size: 0,
                    kind: "file".into(),
                    reason: String::new(),
                })
                .collect(),
            warnings: vec![],
            stats: Default::default(),
        }
    }

    #[test]
    fn a_cross_build_checks_the_host_directory_and_its_generated_files() {
        // With `--target`, host compilations (proc macros, build scripts)
        // live in `<target-dir>/debug`, beside `<target-dir>/<triple>/debug`.
        let repo = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(repo.path()).unwrap();
        let target = root.join("target");
        let triple_debug = target.join("x86_64-unknown-linux-gnu/debug");
        let host_debug = target.join("debug");
        let write = |path: &Path, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(&root.join("app/src/lib.rs"), "");
        write(&root.join("mac/src/lib.rs"), "");
        write(&root.join("mac/data/table.txt"), "read by the proc macro");
        let host_generated = host_debug.join("build/mac-1/out/gen.rs");
        write(&host_generated, "");
        write(
            &triple_debug.join("deps/app-1.d"),
            "/t/app-1.rmeta: app/src/lib.rs\n\napp/src/lib.rs:\n",
        );
        write(
            &host_debug.join("deps/mac-2.d"),
            &format!(
                "/t/libmac-2.so: mac/src/lib.rs mac/data/table.txt {0}\n\nmac/src/lib.rs:\nmac/data/table.txt:\n{0}:\n",
                host_generated.display()
            ),
        );
        let manifest = manifest_of(&["app/src/lib.rs", "mac/src/lib.rs"]);
        let report = check(
            &root,
            &manifest,
            &BTreeMap::new(),
            &BuildDirs {
                target_dir: target.clone(),
                build_dir: target.clone(),
                profile_dir: triple_debug,
            },
        )
        .unwrap();
        let missed: Vec<&str> = report.misses.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(missed, vec!["mac/data/table.txt"], "{}", report.render());
        assert_eq!(report.generated_files, 1);
    }

    #[test]
    fn git_metadata_watched_by_a_build_script_is_counted_not_missed() {
        let repo = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(repo.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let debug = root.join("target/debug");
        std::fs::create_dir_all(debug.join("build/m-1")).unwrap();
        std::fs::create_dir_all(debug.join("deps")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "").unwrap();
        std::fs::write(
            debug.join("deps/m-1.d"),
            "/t/m-1: src/lib.rs\n\nsrc/lib.rs:\n",
        )
        .unwrap();
        std::fs::write(
            debug.join("build/m-1/output"),
            "cargo:rerun-if-changed=.git/HEAD\n",
        )
        .unwrap();
        let manifest = manifest_of(&["src/lib.rs"]);
        let report = check(
            &root,
            &manifest,
            &BTreeMap::from([("m".to_owned(), root.clone())]),
            &BuildDirs {
                target_dir: root.join("target"),
                build_dir: root.join("target"),
                profile_dir: debug,
            },
        )
        .unwrap();
        assert!(report.misses.is_empty(), "{}", report.render());
        assert_eq!(report.git_files, 1);
        assert!(report.render().contains("git metadata"));
    }

    #[test]
    #[cfg(unix)]
    fn a_file_read_through_a_symlink_needs_its_target_as_an_input() {
        let repo = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(repo.path()).unwrap();
        std::fs::create_dir_all(root.join("big")).unwrap();
        std::fs::write(root.join("big/data.txt"), "d").unwrap();
        std::os::unix::fs::symlink("big/data.txt", root.join("data.txt")).unwrap();
        let debug = root.join("target/debug");
        std::fs::create_dir_all(debug.join("deps")).unwrap();
        std::fs::write(
            debug.join("deps/m-1.d"),
            "/t/libm-1.rmeta: src/../data.txt\n\nsrc/../data.txt:\n",
        )
        .unwrap();
        let manifest = manifest_of;
        let dirs = BuildDirs {
            target_dir: root.join("target"),
            build_dir: root.join("target"),
            profile_dir: debug,
        };
        let packages = BTreeMap::new();
        let report = check(&root, &manifest(&["data.txt"]), &packages, &dirs).unwrap();
        let missed: Vec<&str> = report.misses.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(missed, vec!["big/data.txt"]);
        let report = check(
            &root,
            &manifest(&["data.txt", "big/data.txt"]),
            &packages,
            &dirs,
        )
        .unwrap();
        assert!(report.misses.is_empty(), "{}", report.render());
    }

    #[test]
    fn dep_info_prerequisites_are_parsed_with_escapes() {
        let text = "/t/debug/deps/app-1.rmeta: src/lib.rs /r/my\\ dir/x.txt src/a.rs\n\n/t/debug/deps/libapp-1.rlib: src/lib.rs /r/my\\ dir/x.txt src/a.rs\n\nsrc/lib.rs:\n/r/my\\ dir/x.txt:\nsrc/a.rs:\n\n# env-dep:CARGO_MANIFEST_DIR=/r\n";
        assert_eq!(
            parse_dep_info(text).unwrap(),
            vec![
                PathBuf::from("src/lib.rs"),
                PathBuf::from("/r/my dir/x.txt"),
                PathBuf::from("src/a.rs")
            ]
        );
    }

    /// What rustc 1.95 wrote for `include_str!` of `sp ace#$x.txt`,
    /// `ta<TAB>b.txt`, `back\\ sl.txt` and `trail\\` (checked with
    /// `rustc --emit=dep-info`): only spaces are escaped.
    #[test]
    fn dep_info_names_with_tabs_hashes_dollars_and_backslashes_are_exact() {
        let text = "out.d: lib.rs sp\\ ace#$x.txt ta\tb.txt back\\\\ sl.txt trail\\ z.txt\n\nlib.rs:\nsp\\ ace#$x.txt:\nta\tb.txt:\nback\\\\ sl.txt:\ntrail\\:\nz.txt:\n\n# env-dep:X=1\n";
        assert_eq!(
            parse_dep_info(text).unwrap(),
            [
                "lib.rs",
                "sp ace#$x.txt",
                "ta\tb.txt",
                "back\\ sl.txt",
                "trail\\",
                "z.txt"
            ]
            .map(PathBuf::from)
            .to_vec()
        );
    }

    /// Cargo's own format, as `output_depinfo` writes it: one line, a
    /// space written `\ `, nothing else escaped. `trail\ z` is `trail z`,
    /// or `trail\` and `z`: both readings are checked.
    #[test]
    fn cargo_dep_info_is_one_line_and_every_reading_of_an_escape_is_kept() {
        let text = "/t/debug/examples/ex: /r/build.rs /r/my\\ dir/x.txt src/lib.rs\n";
        let (files, format) = parse_any_dep_info(text).unwrap();
        assert_eq!(format, DepInfoFormat::Cargo);
        assert_eq!(
            files,
            [
                "/r/build.rs",
                "/r/my\\",
                "/r/my dir/x.txt",
                "dir/x.txt",
                "src/lib.rs"
            ]
            .map(PathBuf::from)
            .to_vec()
        );
        assert_eq!(
            parse_any_dep_info("/t/debug/libm.so:\n").unwrap(),
            (Vec::new(), DepInfoFormat::Cargo)
        );
        // rustc's format is told apart by its blank line and `DEP:` lines.
        let (files, format) = parse_any_dep_info("/t/m.d: src/lib.rs\n\nsrc/lib.rs:\n").unwrap();
        assert_eq!((files.len(), format), (1, DepInfoFormat::Rustc));
        for bad in ["no rule here\n", "/t/a: x  y\n", "/t/a:x\n"] {
            assert!(parse_any_dep_info(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dep_info_that_cannot_be_read_faithfully_is_refused() {
        // A name with a line break, as rustc writes it (raw).
        let newline = "out.d: lib.rs new\nline.txt\n\nlib.rs:\nnew\nline.txt:\n";
        // A crafted break that would otherwise parse as two harmless rules.
        let crafted = "out.d: lib.rs p:\nr:\n\nlib.rs:\np:\nr::\n";
        // Prerequisites the `DEP:` lines do not spell out.
        let short = "out.d: lib.rs hidden.txt\n\nlib.rs:\n";
        let garbage = "not a dep-info file\n";
        for text in [newline, crafted, short, garbage, ""] {
            let err = parse_dep_info(text).unwrap_err();
            assert!(format!("{err}").starts_with("line "), "{text:?}: {err}");
        }
    }

    #[test]
    fn rerun_lines_of_both_syntaxes_are_read() {
        let output = "cargo:rustc-cfg=x\ncargo:rerun-if-changed=/r/kernels\ncargo::rerun-if-changed=build.rs\ncargo:rerun-if-env-changed=CUDA\ncargo:rerun-if-changed= data \n";
        assert_eq!(
            rerun_paths(output),
            vec![
                "/r/kernels".to_owned(),
                "build.rs".to_owned(),
                "data".to_owned()
            ]
        );
    }

    #[test]
    fn compilation_names_say_what_was_compiled() {
        assert_eq!(
            compilation_name(Path::new("/t/debug/deps/gpu_kernels-0a1b.d")),
            "compilation of crate `gpu_kernels`"
        );
        assert_eq!(
            compilation_name(Path::new(
                "/t/debug/build/gpu-kernels-77/build_script_build-77.d"
            )),
            "compilation of the build script of gpu-kernels"
        );
    }
}
