//! The host's `cargo xtask`: a thin xtask that depends on ci-trust, or
//! ci-trust's subcommands added to the xtask the host already has.
//!
//! Owns: where the host's xtask is and which shape it takes, the thin
//! xtask's files (its own workspace, so that the host's `Cargo.lock`,
//! `cargo build` and GPU key never see it), the dependency line on
//! ci-trust, the module and the two lines a host's own xtask needs, the
//! alias, and seeding a lockfile with ci-trust's locked versions.
//! Must not: change anything of the host's xtask but by adding lines.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::plan::{Kind, MARKER, Plan, is_marked, marker_line};

/// The thin xtask's directory and package name.
pub const XTASK: &str = "xtask";

/// The module a host's own xtask gets, and the two lines that wire it in.
pub const MODULE: &str = "ci_trust_xtask";
pub const MOD_LINE: &str = "mod ci_trust_xtask; // ci-trust's subcommands (cargo xtask init-ci)";
pub const CALL_LINE: &str = "ci_trust_xtask::dispatch();";

/// The alias of the thin xtask: its own manifest, built into the host's
/// `target/xtask` (never under `xtask/`, whose files key the prebuilt
/// binary, and beside the host's own outputs, which it already ignores).
pub const THIN_ALIAS: &str = "run --manifest-path xtask/Cargo.toml --target-dir target/xtask --";

/// Where the thin xtask's binary lands (the workflows save and `setcap` it).
pub const THIN_BINARY: &str = "target/xtask/debug/xtask";

/// The alias of a host xtask that is a workspace member.
pub const MEMBER_ALIAS: &str = "run --package xtask --";

/// Where ci-trust comes from, as a Cargo dependency.
#[derive(Clone, Debug)]
pub enum Source {
    Git { url: String, rev: String },
    Path(PathBuf),
}

impl Source {
    /// The dependency's inline table.
    fn dependency(&self) -> String {
        // Values as TOML strings: a path or URL cannot break the line.
        let quoted = |text: &str| toml::Value::String(text.to_owned()).to_string();
        match self {
            Source::Git { url, rev } => {
                format!("{{ git = {}, rev = {} }}", quoted(url), quoted(rev))
            }
            Source::Path(dir) => {
                let dir = dir.join("crates/ci-trust").display().to_string();
                format!("{{ path = {} }}", quoted(&dir.replace('\\', "/")))
            }
        }
    }

    /// The revision recorded in an earlier thin xtask's manifest (a bump by
    /// hand is kept by `--upgrade`).
    pub fn recorded_rev(manifest: &str) -> Option<String> {
        let table: toml::Table = toml::from_str(manifest).ok()?;
        let dep = table.get("dependencies")?.get("ci-trust")?;
        dep.get("rev")?.as_str().map(str::to_owned)
    }
}

/// The shape of the host's xtask after adoption.
pub enum Shape {
    /// `xtask/` is init-ci's thin xtask, its own workspace.
    Thin,
    /// The host's own xtask package, at `dir`, a member of its workspace
    /// or not; `main` is its binary's source file; `binary` where its alias
    /// builds it, from the repository root.
    Own {
        dir: PathBuf,
        main: PathBuf,
        binary: String,
    },
}

impl Shape {
    /// Where the binary `cargo xtask` runs is built, from the repository root.
    pub fn binary(&self) -> &str {
        match self {
            Shape::Thin => THIN_BINARY,
            Shape::Own { binary, .. } => binary,
        }
    }
}

/// Where the host's `xtask` alias builds the binary: its `--target-dir`,
/// else the `target` beside a `--manifest-path` (an xtask that is its own
/// workspace), else `target`.
fn own_binary(host: &Path) -> String {
    let config = std::fs::read_to_string(host.join(".cargo/config.toml")).unwrap_or_default();
    let alias = toml::from_str::<toml::Table>(&config)
        .ok()
        .and_then(|t| t.get("alias")?.get("xtask").cloned());
    let words: Vec<String> = match alias {
        Some(toml::Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let target = words
        .iter()
        .position(|w| w == "--target-dir")
        .and_then(|i| words.get(i + 1).cloned())
        .or_else(|| {
            words
                .iter()
                .find_map(|w| w.strip_prefix("--target-dir=").map(str::to_owned))
        })
        .or_else(|| {
            let manifest = words
                .iter()
                .position(|w| w == "--manifest-path")
                .and_then(|i| words.get(i + 1))?;
            let dir = Path::new(manifest).parent()?.to_str()?;
            Some(if dir.is_empty() {
                "target".to_owned()
            } else {
                format!("{dir}/target")
            })
        })
        .unwrap_or_else(|| "target".to_owned());
    format!("{}/debug/xtask", target.trim_end_matches('/'))
}

/// Finds the host's xtask: a package named `xtask` among the members, or an
/// `xtask/Cargo.toml` that is not init-ci's; otherwise the thin one.
pub fn find(host: &Path, metadata: &cargo_metadata::Metadata) -> Result<Shape> {
    let member = metadata
        .packages
        .iter()
        .filter(|p| metadata.workspace_members.contains(&p.id))
        .find(|p| p.name.as_str() == XTASK);
    let manifest = match member {
        Some(package) => package.manifest_path.clone().into_std_path_buf(),
        None => {
            let path = host.join(XTASK).join("Cargo.toml");
            match std::fs::read_to_string(&path) {
                Ok(text) if is_marked(&text) => return Ok(Shape::Thin),
                Ok(_) => path,
                Err(_) => return Ok(Shape::Thin),
            }
        }
    };
    let dir = manifest
        .parent()
        .context("a manifest has a directory")?
        .to_path_buf();
    let text = read(&manifest)?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("cannot parse {}", manifest.display()))?;
    let main = table
        .get("bin")
        .and_then(|b| b.as_array())
        .and_then(|bins| bins.iter().find_map(|b| b.get("path")?.as_str()))
        .map_or_else(|| dir.join("src/main.rs"), |p| dir.join(p));
    if !main.is_file() {
        bail!(
            "the host's xtask at {} has no binary source at {}; add ci-trust's subcommands by hand (docs/ci-system.md)",
            dir.display(),
            main.display()
        );
    }
    Ok(Shape::Own {
        dir,
        main,
        binary: own_binary(host),
    })
}

/// Plans the thin xtask: manifest, `main.rs`, and a lockfile seeded with
/// ci-trust's own locked versions (the ones its CI builds and tests).
pub fn plan_thin(
    plan: &mut Plan,
    host: &Path,
    source: &Source,
    template: &Path,
    upgrade: bool,
) -> Result<()> {
    let dir = host.join(XTASK);
    let template_manifest = read(&template.join("Cargo.toml"))?;
    let manifest = thin_manifest(source, &profiles(&template_manifest));
    toml::from_str::<toml::Table>(&manifest)
        .context("the thin xtask's manifest does not parse (a bug in init-ci)")?;
    plan.add(&dir.join("Cargo.toml"), manifest, Kind::Owned);
    plan.add(&dir.join("src/main.rs"), thin_main(), Kind::Owned);
    let lock = dir.join("Cargo.lock");
    if upgrade || !lock.exists() {
        let ours = read(&template.join("Cargo.lock"))?;
        let current = std::fs::read_to_string(&lock).unwrap_or_default();
        plan.add(&lock, seed_lockfile(&current, &ours)?, Kind::Edit);
    }
    Ok(())
}

/// The thin xtask's manifest.
fn thin_manifest(source: &Source, profiles: &str) -> String {
    format!(
        "{marker}
# The CI xtask (`cargo xtask`): ci-trust's subcommands, and room for yours.
# It is its own workspace, with its own Cargo.lock (commit it), so the
# repository's Cargo.lock, `cargo build` and GPU archive key never see it;
# the alias in .cargo/config.toml builds it into target/xtask.
[package]
name = \"xtask\"
version = \"0.1.0\"
edition = \"2021\"
rust-version = \"{rust_version}\"
publish = false

[dependencies]
ci-trust = {dependency}
# The clap ci-trust builds (the same features: one build of it).
clap = {{ version = \"4\", default-features = false, features = [\"std\", \"derive\", \"help\", \"usage\", \"error-context\"] }}

[workspace]

# ci-trust's compile-time settings: its hot paths optimised, compile-time-only
# crates not, no debug info for dependencies.
{profiles}",
        marker = marker_line("#"),
        rust_version = env!("CARGO_PKG_RUST_VERSION"),
        dependency = source.dependency(),
    )
}

/// The `[profile…]` tables of ci-trust's root manifest, as text.
fn profiles(manifest: &str) -> String {
    let mut out = String::new();
    let mut in_profile = false;
    for line in manifest.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            in_profile = trimmed.starts_with("[profile");
        }
        if in_profile && !trimmed.starts_with('#') {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The thin xtask's `main.rs`: a clap command line with ci-trust's
/// subcommands flattened in.
fn thin_main() -> String {
    format!(
        "{marker}
//! `cargo xtask`: this repository's tasks. ci-trust's subcommands (`ci-key`,
//! `gpu-archive`, `check-contracts`, `verify-key`, `init-ci`) are flattened
//! in; add your own as variants of `Command` and arms of the `match`.

use std::path::Path;
use std::process::ExitCode;

use clap::{{Parser, Subcommand}};

#[derive(Parser)]
#[command(name = \"cargo xtask\", version = ci_trust::flags::VERSION.as_str())]
struct Xtask {{
    #[command(subcommand)]
    command: Command,
}}

#[derive(Subcommand)]
enum Command {{
    #[command(flatten)]
    CiTrust(ci_trust::flags::Command),
}}

fn main() -> ExitCode {{
    // `--root` defaults to the repository this xtask lives in.
    let root = Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"..\");
    let result = match Xtask::parse().command {{
        Command::CiTrust(command) => command.run(&root),
    }};
    ci_trust::exit_code(result)
}}
",
        marker = marker_line("//")
    )
}

/// Adds ci-trust's locked packages to `current` (a lockfile, or empty),
/// so that cargo resolves the new dependency to the versions ci-trust is
/// built and tested with instead of the newest; cargo drops what the
/// workspace does not use when it next writes the file. Local packages
/// (no `source`) are left out.
///
/// The host's locked versions win: a package the host locks at another
/// version is not seeded, and neither is any of ours that depends on one
/// not seeded, transitively. Seeding `futures 0.3.34` (which needs
/// `futures-core ^0.3.34`) beside egui's `futures-core 0.3.33` made the
/// lockfile unsatisfiable: cargo does not move a locked version to
/// resolve a conflict. What is left out, cargo resolves against the
/// host's versions.
pub fn seed_lockfile(current: &str, ours: &str) -> Result<String> {
    let ours_table: toml::Table =
        toml::from_str(ours).context("cannot parse ci-trust's Cargo.lock")?;
    let present: Vec<(String, String)> = toml::from_str::<toml::Table>(current)
        .ok()
        .and_then(|t| t.get("package").and_then(|p| p.as_array()).cloned())
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p.get("name")?.as_str()?.to_owned(),
                p.get("version")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    let mut out = if current.trim().is_empty() {
        let version = ours_table
            .get("version")
            .and_then(|v| v.as_integer())
            .unwrap_or(4);
        format!(
            "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = {version}\n"
        )
    } else {
        current.to_owned()
    };
    let packages: Vec<&toml::Value> = ours_table
        .get("package")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
        .collect();
    let name_of = |package: &toml::Value| {
        package
            .get("name")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    // Ours that the host locks at another version, then, until nothing
    // changes, ours that depend on one of them (a dependency entry is
    // `name` or `name version`).
    let mut held_back: HashSet<String> = packages
        .iter()
        .filter_map(|package| {
            let name = name_of(package)?;
            let version = package.get("version")?.as_str()?;
            let host_has_other = present.iter().any(|(n, v)| *n == name && v != version)
                && !present.iter().any(|(n, v)| *n == name && v == version);
            host_has_other.then_some(name)
        })
        .collect();
    loop {
        let before = held_back.len();
        for package in &packages {
            let Some(name) = name_of(package) else {
                continue;
            };
            let depends_on_held = package
                .get("dependencies")
                .and_then(|d| d.as_array())
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str())
                .any(|d| held_back.contains(d.split(' ').next().unwrap_or(d)));
            if depends_on_held {
                held_back.insert(name);
            }
        }
        if held_back.len() == before {
            break;
        }
    }
    for package in packages {
        let (Some(name), Some(version)) = (
            package.get("name").and_then(|v| v.as_str()),
            package.get("version").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        if package.get("source").is_none()
            || held_back.contains(name)
            || present.iter().any(|(n, v)| n == name && v == version)
        {
            continue;
        }
        let mut table = toml::Table::new();
        table.insert("package".into(), toml::Value::Array(vec![package.clone()]));
        out.push('\n');
        out.push_str(&toml::to_string(&table).context("cannot write a lockfile entry")?);
    }
    toml::from_str::<toml::Table>(&out).context("the seeded lockfile does not parse")?;
    Ok(out)
}

/// Plans ci-trust's subcommands in the host's own xtask: the dependency,
/// the module, and the two lines in `main` where they can be added safely
/// (returns false when they could not: the user must add them).
pub fn plan_own(
    plan: &mut Plan,
    host: &Path,
    dir: &Path,
    main: &Path,
    source: &Source,
) -> Result<bool> {
    let manifest = dir.join("Cargo.toml");
    let text = read(&manifest)?;
    plan.add(&manifest, add_dependency(&text, source)?, Kind::Edit);
    let root = relative_root(host, dir)?;
    let module = format!(
        "{marker}
//! ci-trust's subcommands (`ci-key`, `gpu-archive`, `check-contracts`,
//! `verify-key`, `init-ci`) in this xtask, whatever parses its command line:
//! `main` calls [`dispatch`] first, which runs a ci-trust subcommand and
//! exits, or returns for the xtask's own commands.

/// Runs a ci-trust subcommand named by the first argument, and exits.
pub fn dispatch() {{
    // `--root` defaults to the repository this xtask lives in.
    let root = std::path::Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"{root}\");
    ::ci_trust::embed::dispatch(&root);
}}
",
        marker = marker_line("//")
    );
    let module_path = main
        .parent()
        .context("a source file has a directory")?
        .join(format!("{MODULE}.rs"));
    plan.add(&module_path, module, Kind::Owned);
    let source_text = read(main)?;
    match add_two_lines(&source_text) {
        Some(edited) => {
            plan.add(main, edited, Kind::Edit);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The way from an xtask's directory to the repository root (`..`).
fn relative_root(host: &Path, dir: &Path) -> Result<String> {
    let rel = dir.strip_prefix(host).with_context(|| {
        format!(
            "the host's xtask {} is outside {}",
            dir.display(),
            host.display()
        )
    })?;
    let depth = rel.components().count();
    Ok(vec![".."; depth.max(1)].join("/"))
}

/// Whether the host's `main.rs` holds both lines (added by init-ci or by hand).
pub fn has_two_lines(main: &Path) -> bool {
    let text = std::fs::read_to_string(main).unwrap_or_default();
    text.lines()
        .any(|l| l.trim_start().starts_with("mod ci_trust_xtask;"))
        && text.contains(CALL_LINE)
}

/// The two lines a host's own xtask needs, as the user adds them.
pub fn two_lines(main: &Path) -> String {
    format!(
        "  at the end of {}:\n      {MOD_LINE}\n  as the first statement of `fn main`:\n      {CALL_LINE}",
        main.display()
    )
}

/// Adds the module and the call to a `main.rs` when both places are
/// unambiguous: exactly one `fn main` at the start of a line, whose line
/// ends with the body's `{`. `None` otherwise (nothing is guessed).
fn add_two_lines(text: &str) -> Option<String> {
    let has_mod = text
        .lines()
        .any(|l| l.trim_start().starts_with("mod ci_trust_xtask;"));
    let has_call = text.contains(CALL_LINE);
    if has_mod && has_call {
        return Some(text.to_owned());
    }
    let mains: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            [
                "fn main(",
                "async fn main(",
                "pub fn main(",
                "pub async fn main(",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .map(|(i, _)| i)
        .collect();
    let [main_line] = mains[..] else {
        return None;
    };
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if !lines[main_line].trim_end().ends_with('{') {
        return None;
    }
    if !has_call {
        lines.insert(main_line + 1, format!("    {CALL_LINE}"));
    }
    if !has_mod {
        lines.push(MOD_LINE.to_owned());
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Some(out)
}

/// Adds `ci-trust = …` to `[dependencies]` of the host's xtask manifest,
/// marked so that an upgrade rewrites that line only.
fn add_dependency(text: &str, source: &Source) -> Result<String> {
    let line = format!(
        "ci-trust = {} # {MARKER} (--upgrade rewrites this line)",
        source.dependency()
    );
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if let Some(i) = lines
        .iter()
        .position(|l| l.trim_start().starts_with("ci-trust"))
    {
        if !lines[i].contains(MARKER) {
            // The host's own line: theirs to keep.
            return Ok(text.to_owned());
        }
        lines[i] = line;
    } else {
        match lines.iter().position(|l| l.trim() == "[dependencies]") {
            Some(i) => lines.insert(i + 1, line),
            None => {
                lines.push(String::new());
                lines.push("[dependencies]".into());
                lines.push(line);
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    let check: toml::Table = toml::from_str(&out).context(
        "the host's xtask manifest does not parse with ci-trust added; add the dependency by hand",
    )?;
    if check
        .get("dependencies")
        .and_then(|d| d.get("ci-trust"))
        .is_none()
    {
        bail!("could not add ci-trust to the host's xtask [dependencies]; add it by hand");
    }
    Ok(out)
}

/// Sets `alias.xtask` in `.cargo/config.toml` to `alias`: kept when the
/// host already has an `xtask` alias that is the same (or, for the host's
/// own xtask, any alias: it runs the host's xtask); a different one is
/// replaced only with `force`.
pub fn add_alias(text: &str, alias: &str, keep_any: bool, force: bool) -> Result<String> {
    let parsed: toml::Table = toml::from_str(text).context("cannot parse .cargo/config.toml")?;
    let existing = parsed.get("alias").and_then(|a| a.get("xtask"));
    let wanted = toml::Value::String(alias.into());
    if existing == Some(&wanted) || (keep_any && existing.is_some()) {
        return Ok(text.to_owned());
    }
    let line_text = format!("xtask = \"{alias}\"");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let header = lines
        .iter()
        .position(|l| l.split('#').next().unwrap_or("").trim() == "[alias]");
    match header {
        Some(start) => {
            let end = lines[start + 1..]
                .iter()
                .position(|l| l.trim_start().starts_with('['))
                .map_or(lines.len(), |i| start + 1 + i);
            let existing_line = (start + 1..end).find(|&i| {
                lines[i]
                    .trim_start()
                    .strip_prefix("xtask")
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            });
            match existing_line {
                Some(i) if force => lines[i] = line_text,
                Some(i) => bail!(
                    ".cargo/config.toml:{}: an `xtask` alias already exists ({}); pass --force to replace it",
                    i + 1,
                    lines[i].trim()
                ),
                None => lines.insert(start + 1, line_text),
            }
        }
        None if existing.is_some() => bail!(
            ".cargo/config.toml defines alias.xtask outside an [alias] table; set it to \"{alias}\" by hand"
        ),
        None => {
            if !lines.is_empty() {
                lines.push(String::new());
            }
            lines.push("[alias]".into());
            lines.push(line_text);
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

/// Keeps the thin xtask out of the host's workspace: when a `members`
/// pattern selects `xtask`, it is added to `exclude` (cargo would refuse a
/// member that is its own workspace). Otherwise the manifest is unchanged.
pub fn exclude_from_workspace(text: &str) -> Result<String> {
    let parsed: toml::Table = toml::from_str(text).context("cannot parse the host's Cargo.toml")?;
    let Some(workspace) = parsed.get("workspace").and_then(|w| w.as_table()) else {
        return Ok(text.to_owned());
    };
    if !selects(workspace.get("members"), XTASK) || selects(workspace.get("exclude"), XTASK) {
        return Ok(text.to_owned());
    }
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.split('#').next().unwrap_or("").trim() == "[workspace]")
    else {
        bail!(
            "the host's Cargo.toml defines the workspace without a `[workspace]` header; add \"xtask\" to its `exclude` by hand"
        );
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |i| start + 1 + i);
    let exclude = (start + 1..end).find(|&i| {
        lines[i]
            .trim_start()
            .strip_prefix("exclude")
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    });
    match exclude {
        Some(i) => {
            let bracket = lines[i].find('[').with_context(|| {
                format!(
                    "Cargo.toml:{}: `exclude` is not an array on its line; add \"xtask\" by hand",
                    i + 1
                )
            })?;
            lines[i].insert_str(bracket + 1, "\"xtask\", ");
        }
        None => lines.insert(
            start + 1,
            "exclude = [\"xtask\"] # the CI xtask is its own workspace".into(),
        ),
    }
    let mut out = lines.join("\n");
    out.push('\n');
    let check: toml::Table = toml::from_str(&out).context(
        "the edited Cargo.toml does not parse; add \"xtask\" to the workspace's `exclude` by hand",
    )?;
    if !selects(check.get("workspace").and_then(|w| w.get("exclude")), XTASK) {
        bail!("could not add \"xtask\" to the host's workspace `exclude`; add it by hand");
    }
    Ok(out)
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

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_lines_go_in_only_where_main_is_unambiguous() {
        let out = add_two_lines("use x;\n\nfn main() {\n    run();\n}\n").unwrap();
        assert_eq!(
            out,
            format!("use x;\n\nfn main() {{\n    {CALL_LINE}\n    run();\n}}\n{MOD_LINE}\n")
        );
        assert_eq!(add_two_lines(&out).unwrap(), out, "idempotent");
        let attr = add_two_lines("#[tokio::main]\nasync fn main() -> Result<()> {\n}\n").unwrap();
        assert!(attr.contains("async fn main() -> Result<()> {\n    ci_trust_xtask::dispatch();"));
        // A signature over several lines, two mains, or none: not guessed.
        for text in [
            "fn main()\n    -> Result<()>\n{\n}\n",
            "fn main() {}\n",
            "mod a {\n    fn main() {\n    }\n}\n",
            "fn main() {\n}\n#[cfg(x)]\nfn main() {\n}\n",
        ] {
            assert_eq!(add_two_lines(text), None, "{text}");
        }
    }

    #[test]
    fn the_dependency_is_added_once_and_upgraded_by_its_marker() {
        let git = |rev: &str| Source::Git {
            url: "https://example.invalid/ci-trust".into(),
            rev: rev.into(),
        };
        let text = "[package]\nname = \"xtask\"\n\n[dependencies]\nclap = \"4\"\n";
        let out = add_dependency(text, &git("aaa")).unwrap();
        assert!(out.contains("[dependencies]\nci-trust = { git = \"https://example.invalid/ci-trust\", rev = \"aaa\" } #"), "{out}");
        let upgraded = add_dependency(&out, &git("bbb")).unwrap();
        assert!(upgraded.contains("rev = \"bbb\"") && !upgraded.contains("aaa"));
        let theirs = "[dependencies]\nci-trust = \"0.1\"\n";
        assert_eq!(add_dependency(theirs, &git("bbb")).unwrap(), theirs);
        assert!(add_dependency("[package]\nname = \"x\"\n", &git("a")).unwrap().ends_with("[dependencies]\nci-trust = { git = \"https://example.invalid/ci-trust\", rev = \"a\" } # @generated by ci-trust init-ci (--upgrade rewrites this line)\n"));
    }

    #[test]
    fn an_upgrade_keeps_a_revision_bumped_by_hand() {
        let source = Source::Git {
            url: "https://example.invalid/ci-trust".into(),
            rev: "0123abc".into(),
        };
        let manifest = thin_manifest(&source, "");
        assert_eq!(Source::recorded_rev(&manifest).as_deref(), Some("0123abc"));
        let bumped = manifest.replace("0123abc", "4567def");
        assert_eq!(Source::recorded_rev(&bumped).as_deref(), Some("4567def"));
        let path = thin_manifest(&Source::Path("/src/ci-trust".into()), "");
        assert_eq!(Source::recorded_rev(&path), None);
        assert!(
            path.contains("path = \"/src/ci-trust/crates/ci-trust\""),
            "{path}"
        );
    }

    #[test]
    fn the_own_binary_follows_the_alias_target_dir() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(own_binary(dir.path()), "target/debug/xtask");
        std::fs::create_dir(dir.path().join(".cargo")).unwrap();
        std::fs::write(
            dir.path().join(".cargo/config.toml"),
            "[alias]\nxtask = \"run --target-dir target/xtask --color always --package xtask --bin xtask --\"\n",
        )
        .unwrap();
        assert_eq!(own_binary(dir.path()), "target/xtask/debug/xtask");
        std::fs::write(
            dir.path().join(".cargo/config.toml"),
            "[alias]\nxtask = \"run --manifest-path xtask/Cargo.toml --\"\n",
        )
        .unwrap();
        assert_eq!(own_binary(dir.path()), "xtask/target/debug/xtask");
    }

    #[test]
    fn the_thin_xtask_is_excluded_only_where_a_pattern_selects_it() {
        let listed = "[workspace]\nmembers = [\"crates/*\"]\n";
        assert_eq!(exclude_from_workspace(listed).unwrap(), listed);
        let glob = "[workspace]\nmembers = [\"*\"]\nexclude = [\"kernels\"]\n";
        assert_eq!(
            exclude_from_workspace(glob).unwrap(),
            "[workspace]\nmembers = [\"*\"]\nexclude = [\"xtask\", \"kernels\"]\n"
        );
        let bare = "[workspace]\nmembers = [\"*\"]\n";
        assert!(
            exclude_from_workspace(bare)
                .unwrap()
                .contains("exclude = [\"xtask\"]")
        );
        let package = "[package]\nname = \"gpu\"\n";
        assert_eq!(exclude_from_workspace(package).unwrap(), package);
    }

    #[test]
    fn the_alias_is_added_kept_or_refused() {
        assert_eq!(
            add_alias("", THIN_ALIAS, false, false).unwrap(),
            format!("[alias]\nxtask = \"{THIN_ALIAS}\"\n")
        );
        let other = "[build]\njobs = 2\n[alias]\nb = \"build\"\n";
        assert!(
            add_alias(other, THIN_ALIAS, false, false)
                .unwrap()
                .contains(&format!("[alias]\nxtask = \"{THIN_ALIAS}\"\nb = \"build\""))
        );
        let hostile = "[alias]\nxtask = \"run --package evil --\"\n";
        let err = add_alias(hostile, THIN_ALIAS, false, false).unwrap_err();
        assert!(format!("{err:#}").contains("--force"));
        assert!(
            add_alias(hostile, THIN_ALIAS, false, true)
                .unwrap()
                .contains(THIN_ALIAS)
        );
        // The host's own xtask keeps the host's own alias.
        assert_eq!(
            add_alias(hostile, MEMBER_ALIAS, true, false).unwrap(),
            hostile
        );
    }

    #[test]
    fn a_seeded_lockfile_adds_registry_packages_once() {
        let ours = "version = 4\n\n[[package]]\nname = \"ci-trust\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"memchr\"\nversion = \"2.7.4\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"00\"\n";
        let seeded = seed_lockfile("", ours).unwrap();
        assert!(
            seeded.contains("name = \"memchr\"") && !seeded.contains("ci-trust"),
            "{seeded}"
        );
        assert_eq!(seed_lockfile(&seeded, ours).unwrap(), seeded);
    }

    /// Seen adopting egui: the host locks `futures-core 0.3.33`; ours
    /// locks `futures 0.3.34`, which needs `futures-core ^0.3.34`. Neither
    /// of ours is seeded (cargo resolves `futures` against the host's
    /// core), and a package of ours that needs neither still is.
    #[test]
    fn a_seeded_lockfile_keeps_the_host_s_versions_and_what_depends_on_them() {
        let registry = "source = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"00\"\n";
        let host = format!(
            "version = 4\n\n[[package]]\nname = \"futures-core\"\nversion = \"0.3.33\"\n{registry}"
        );
        let ours = format!(
            "version = 4\n\n[[package]]\nname = \"futures\"\nversion = \"0.3.34\"\n{registry}dependencies = [\"futures-util\"]\n\n[[package]]\nname = \"futures-util\"\nversion = \"0.3.34\"\n{registry}dependencies = [\"futures-core\", \"memchr\"]\n\n[[package]]\nname = \"futures-core\"\nversion = \"0.3.34\"\n{registry}\n[[package]]\nname = \"memchr\"\nversion = \"2.7.4\"\n{registry}"
        );
        let seeded = seed_lockfile(&host, &ours).unwrap();
        for held in ["futures\"", "futures-util\"", "version = \"0.3.34\""] {
            assert!(!seeded.contains(held), "{held} seeded:\n{seeded}");
        }
        assert!(seeded.contains("name = \"memchr\""), "{seeded}");
        assert!(seeded.contains("version = \"0.3.33\""), "{seeded}");
    }
}
