//! `cargo xtask init-ci`: adopts this CI in a host Rust GPU workspace.
//!
//! Owns the adoption as a whole: the host's xtask (`host_xtask.rs`), its
//! lockfile (generated when absent, un-ignored when git ignores it), the
//! alias, the policy `.github/ci-trust.toml` (with the detected GPU crates),
//! the workflows from this repository's own templates (the host's own CI
//! workflow is kept; init-ci's checks go to `ci-trust.yml`), and the CI
//! scripts; which of these it owns and rewrites on `--upgrade` (`plan.rs`);
//! and the proof in the host that the result works (`proof.rs`). It edits
//! the host's files as text, adding lines only, so formatting and comments
//! stay; every result is re-parsed before anything is written.
//!
//! It must not touch the key, contract or archive logic: the proof runs the
//! host's own `cargo xtask` for them.

mod host_xtask;
mod plan;
mod proof;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::flags;
use crate::key::is_version_feature;
use crate::policy::{DEFAULT_POLICY_PATH, Policy};
use host_xtask::Shape;
pub use host_xtask::Source;
use plan::{Kind, Plan, marker_line};

/// Writes init-ci's thin xtask (manifest, `main.rs`, seeded lockfile) into
/// `host/xtask`, and nothing else: what `bench-keystep` builds cold.
pub fn write_thin_xtask(host: &Path, source: &Source, template: &Path) -> Result<()> {
    let mut plan = Plan::new(host);
    host_xtask::plan_thin(&mut plan, host, source, template, false)?;
    plan.apply(false, false).map(|_| ())
}

/// The template workflows, from the template repository's `.github/workflows`
/// (its `ci.yml` is this repository's own CI: only its `contracts` job is
/// taken, into the host's `ci-trust.yml`).
const TEMPLATES: [&str; 5] = [
    "ci.yml",
    "ci-cache-publish.yml",
    "runpod-gpu-test.yml",
    "runpod-gpu-execute.yml",
    "runpod-reap.yml",
];

/// The workflow init-ci writes for its own checks, beside the host's CI.
const CHECKS_WORKFLOW: &str = "ci-trust.yml";

/// Its `name:`, which the GPU consumer's `workflow_run` names by default.
const CHECKS_NAME: &str = "ci-trust";

/// The git repository hosts depend on by default (`--ci-trust-git`).
pub const CI_TRUST_GIT: &str = "https://github.com/ci-trust/ci-trust";

/// The runner label the templates use for every GitHub-hosted job.
const TEMPLATE_RUNNER: &str = "runs-on: ubuntu-24.04";

/// Where this repository's own xtask binary lands; a thin xtask's is elsewhere.
const TEMPLATE_BINARY: &str = "trusted/target/debug/xtask";

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

impl flags::InitCi {
    pub fn run(&self) -> Result<ExitCode> {
        let host = self.common.root()?;
        let from = match &self.from {
            Some(dir) => std::fs::canonicalize(dir)
                .with_context(|| format!("--from {}: pass a ci-trust checkout", dir.display()))?,
            None => template_repository()?,
        };
        check_label("--runner", &self.runner)?;
        if let Some(name) = &self.ci_name {
            check_workflow_name(name)?;
        }
        let workflows_dir = from.join(".github/workflows");
        if !TEMPLATES.iter().all(|w| workflows_dir.join(w).is_file()) {
            bail!(
                "{} does not hold the template workflows ({}); pass --from with a ci-trust checkout",
                workflows_dir.display(),
                TEMPLATES.join(", ")
            );
        }
        let metadata = host_metadata(&host)?;
        let shape = host_xtask::find(&host, &metadata)?;
        let source = self.source(&host, &from)?;
        let plan = Plan::new(&host);

        // The lockfile first: the policy names the toolkit crates it locks,
        // and `--locked` builds need it committed.
        let lockfile = host.join("Cargo.lock");
        let created_lock = !lockfile.exists();
        if created_lock {
            generate_lockfile(&host)?;
        }
        let result = self.plan_and_apply(&host, &from, &metadata, &shape, &source, plan);
        let applied = match result {
            Ok(applied) => applied,
            Err(err) => {
                if created_lock {
                    // Nothing else was written: leave the host as it was.
                    let _ = std::fs::remove_file(&lockfile);
                }
                return Err(err);
            }
        };
        if created_lock {
            eprintln!("generated Cargo.lock: commit it (the GPU archives build with --locked)");
        }
        for (path, diff) in &applied.diffs {
            eprintln!(
                "kept {} (yours: init-ci does not own it); init-ci's version differs:\n{diff}",
                path.strip_prefix(&host).unwrap_or(path).display()
            );
        }

        // The proof, by the host's own xtask.
        // The two lines, when the host's own xtask still lacks them.
        let own_lines = match &shape {
            Shape::Own { main, .. } if !host_xtask::has_two_lines(main) => {
                Some(host_xtask::two_lines(main))
            }
            _ => None,
        };
        let policy = Policy::load(&host, None)?;
        let build = policy.archive.iter().find_map(|a| {
            Some(proof::Build {
                file: a.file.clone(),
                nextest: a.nextest.clone()?,
            })
        });
        if build.is_none() && !self.no_build_proof {
            bail!(
                "the policy has no nextest [[archive]] to prove a build with; add one, or pass --no-build-proof"
            );
        }
        let build = if self.no_build_proof {
            None
        } else {
            build.as_ref()
        };
        let xtask_manifest = match &shape {
            Shape::Thin => host.join(host_xtask::XTASK).join("Cargo.toml"),
            Shape::Own { dir, .. } => dir.join("Cargo.toml"),
        };
        let code = proof::prove(&host, &xtask_manifest, own_lines.as_deref(), build)?;
        if code == ExitCode::SUCCESS {
            eprintln!(
                "adopted: review the changes and commit them{}; then set the `runpod` environment and variables (docs/ci-system.md)",
                match shape {
                    Shape::Thin => " (xtask/Cargo.lock too)",
                    Shape::Own { .. } => "",
                }
            );
        }
        Ok(code)
    }

    /// Where the host's xtask takes ci-trust from.
    fn source(&self, host: &Path, from: &Path) -> Result<Source> {
        if let Some(dir) = &self.ci_trust_path {
            let dir = std::fs::canonicalize(dir).with_context(|| {
                format!(
                    "--ci-trust-path {}: pass a ci-trust checkout",
                    dir.display()
                )
            })?;
            if !dir.join("crates/ci-trust/Cargo.toml").is_file() {
                bail!(
                    "--ci-trust-path {}: no crates/ci-trust/Cargo.toml there",
                    dir.display()
                );
            }
            return Ok(Source::Path(dir));
        }
        let url = self
            .ci_trust_git
            .clone()
            .unwrap_or_else(|| CI_TRUST_GIT.to_owned());
        let recorded = std::fs::read_to_string(host.join("xtask/Cargo.toml"))
            .ok()
            .filter(|text| plan::is_marked(text))
            .and_then(|text| Source::recorded_rev(&text));
        let rev = match (&self.ci_trust_rev, recorded) {
            (Some(rev), _) => rev.clone(),
            // A bump by hand in the thin xtask's manifest is kept.
            (None, Some(rev)) => rev,
            (None, None) => built_commit(from)?,
        };
        if rev.is_empty()
            || !rev
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
        {
            bail!("--ci-trust-rev {rev:?} is not a git revision");
        }
        if url.contains(['"', '\\', '\n']) {
            bail!("--ci-trust-git {url:?} cannot go into a manifest");
        }
        Ok(Source::Git { url, rev })
    }

    fn plan_and_apply(
        &self,
        host: &Path,
        from: &Path,
        metadata: &cargo_metadata::Metadata,
        shape: &Shape,
        source: &Source,
        mut plan: Plan,
    ) -> Result<plan::Applied> {
        // The xtask, and the alias that runs it.
        let config = host.join(".cargo/config.toml");
        let config_text = std::fs::read_to_string(&config).unwrap_or_default();
        match shape {
            Shape::Thin => {
                host_xtask::plan_thin(&mut plan, host, source, from, self.upgrade)?;
                let manifest = host.join("Cargo.toml");
                plan.add(
                    &manifest,
                    host_xtask::exclude_from_workspace(&read(&manifest)?)?,
                    Kind::Edit,
                );
                plan.add(
                    &config,
                    host_xtask::add_alias(&config_text, host_xtask::THIN_ALIAS, false, self.force)?,
                    Kind::Edit,
                );
            }
            Shape::Own { dir, main, .. } => {
                let wired = host_xtask::plan_own(&mut plan, host, dir, main, source)?;
                if wired {
                    eprintln!(
                        "adding ci-trust's subcommands to the host's xtask ({}): `{}` and `{}`",
                        main.strip_prefix(host).unwrap_or(main).display(),
                        host_xtask::MOD_LINE,
                        host_xtask::CALL_LINE
                    );
                } else {
                    eprintln!(
                        "note: init-ci cannot tell where `fn main` of the host's xtask starts; add these two lines:\n{}",
                        host_xtask::two_lines(main)
                    );
                }
                // ci-trust's locked versions seed the lockfile the xtask resolves in.
                let member = metadata.packages.iter().any(|p| {
                    metadata.workspace_members.contains(&p.id)
                        && p.name.as_str() == host_xtask::XTASK
                });
                let lock = if member {
                    host.join("Cargo.lock")
                } else {
                    dir.join("Cargo.lock")
                };
                let current = std::fs::read_to_string(&lock).unwrap_or_default();
                plan.add(
                    &lock,
                    host_xtask::seed_lockfile(&current, &read(&from.join("Cargo.lock"))?)?,
                    Kind::Edit,
                );
                plan.add(
                    &config,
                    host_xtask::add_alias(
                        &config_text,
                        host_xtask::MEMBER_ALIAS,
                        true,
                        self.force,
                    )?,
                    Kind::Edit,
                );
            }
        }

        // A lockfile git ignores is un-ignored: CI checks out what is committed.
        if let Some(edited) = unignore_lockfile(host)? {
            plan.add(&host.join(".gitignore"), edited, Kind::Edit);
            eprintln!(
                "note: .gitignore ignored Cargo.lock; init-ci adds `!/Cargo.lock`: commit Cargo.lock"
            );
        }

        // The CI scripts the workflows run.
        if from != host {
            copy_scripts(
                &mut plan,
                &from.join("scripts/ci"),
                &host.join("scripts/ci"),
            )?;
        }

        // The policy: the detected GPU crates and toolkit versions.
        let gpu = detect_gpu(host, metadata, &self.gpu_package)?;
        for note in &gpu.notes {
            eprintln!("note: {note}");
        }
        let policy_text = policy_text(&gpu, &self.runner);
        Policy::parse(&policy_text)
            .context("the generated policy is invalid (a bug in init-ci)")?;
        plan.add(&host.join(DEFAULT_POLICY_PATH), policy_text, Kind::Once);

        // The workflows, with the host's names, runner labels and xtask.
        let ci_name = self.ci_name.as_deref().unwrap_or(CHECKS_NAME);
        let archives: Vec<&str> = gpu.archives.iter().map(|a| a.file.as_str()).collect();
        let workflows = host.join(".github/workflows");
        for name in TEMPLATES {
            let text = read(&from.join(".github/workflows").join(name))?;
            let (target, text) = if name == "ci.yml" {
                (CHECKS_WORKFLOW, checks_workflow(&text)?)
            } else {
                (name, text)
            };
            let text = customise_workflow(target, &text, &self.runner, ci_name, &archives, shape)?;
            plan.add(&workflows.join(target), text, Kind::OwnedWorkflow);
        }
        plan.apply(self.force, self.upgrade)
    }
}

/// The commit the running ci-trust was built from: `CI_TRUST_XTASK_COMMIT`
/// at compile time, else the template checkout's `HEAD`.
fn built_commit(from: &Path) -> Result<String> {
    let built = flags::BUILT_FROM;
    if built.len() == 40 && built.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(built.to_owned());
    }
    let sh = xshell::Shell::new()?;
    let head = xshell::cmd!(sh, "git -C {from} rev-parse HEAD")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .filter(|h| h.len() == 40);
    head.with_context(|| {
        format!(
            "cannot tell which ci-trust commit the host's xtask should depend on ({} is not a git checkout); pass --ci-trust-rev SHA, or --ci-trust-path DIR",
            from.display()
        )
    })
}

/// `cargo generate-lockfile` in the host; its failure (a git dependency
/// cargo cannot fetch, say) stops init-ci with cargo's own words.
fn generate_lockfile(host: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .args(["generate-lockfile", "--manifest-path"])
        .arg(host.join("Cargo.toml"))
        .current_dir(host)
        .output()
        .context("cannot run cargo generate-lockfile")?;
    if !out.status.success() {
        bail!(
            "the host has no Cargo.lock, and cargo could not resolve its dependencies to generate one:\n{}\nfix the dependency cargo names (or generate Cargo.lock yourself), then run init-ci again; nothing was written",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(())
}

/// `.gitignore` with `!/Cargo.lock` added when git ignores the lockfile
/// (`None` when it does not, or the host is not a git work tree).
fn unignore_lockfile(host: &Path) -> Result<Option<String>> {
    let sh = xshell::Shell::new()?;
    let ignored = xshell::cmd!(sh, "git -C {host} check-ignore -q Cargo.lock")
        .quiet()
        .ignore_stderr()
        .run()
        .is_ok();
    if !ignored {
        return Ok(None);
    }
    let path = host.join(".gitignore");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# The GPU archives build with --locked: the lockfile is committed (ci-trust init-ci).\n!/Cargo.lock\n");
    Ok(Some(text))
}

/// Plans the CI scripts, each marked after its `#!` line.
fn copy_scripts(plan: &mut Plan, from: &Path, to: &Path) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(from)
        .with_context(|| format!("cannot list {}", from.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for path in entries {
        if !path.is_file() {
            bail!(
                "{} is not a regular file; refusing to copy it",
                path.display()
            );
        }
        let text = read(&path)?;
        let (shebang, rest) = match text.strip_prefix("#!") {
            Some(_) => text.split_at(text.find('\n').map_or(text.len(), |i| i + 1)),
            None => ("", text.as_str()),
        };
        let marked = format!("{shebang}{}\n{rest}", marker_line("#"));
        let name = path.file_name().context("a listed file has a name")?;
        plan.add(&to.join(name), marked, Kind::Owned);
    }
    Ok(())
}

/// The host's `ci-trust.yml`: the template CI's header and its `contracts`
/// job (check-contracts and the key), nothing of this repository's own
/// fmt, clippy and test jobs, which would judge the host's code.
fn checks_workflow(ci: &str) -> Result<String> {
    let lines: Vec<&str> = ci.lines().collect();
    let body = lines
        .iter()
        .position(|l| l.starts_with("name: "))
        .context("the template ci.yml has no `name:` line; update init-ci")?;
    let jobs = lines
        .iter()
        .position(|l| *l == "jobs:")
        .context("the template ci.yml has no `jobs:` line; update init-ci")?;
    let start = lines
        .iter()
        .position(|l| *l == "  contracts:")
        .context("the template ci.yml has no `contracts` job; update init-ci")?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.len() > 2 && l.starts_with("  ") && !l.starts_with("   "))
        .map_or(lines.len(), |i| start + 1 + i);
    let mut out = String::from(
        "# The cache-trust checks (written by ci-trust init-ci, beside your own CI):\n\
         # the workflow contracts and the GPU archive key, on every pull request and\n\
         # push to main. Its runs start the GPU tests (runpod-gpu-test.yml names it).\n",
    );
    for line in &lines[body..=jobs] {
        out.push_str(line);
        out.push('\n');
    }
    for line in &lines[start..end] {
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

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
        .filter(|p| p.name.as_str() != host_xtask::XTASK)
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
    shape: &Shape,
) -> Result<String> {
    let mut replaced = text.replace(TEMPLATE_RUNNER, &format!("runs-on: {runner}"));
    if matches!(name, "ci-cache-publish.yml" | "runpod-gpu-test.yml") {
        // The prebuilt binary is saved and given CAP_SYS_ADMIN where the
        // host's `cargo xtask` builds it.
        let binary = format!("trusted/{}", shape.binary());
        if !replaced.contains(TEMPLATE_BINARY) {
            bail!("the template {name} does not name {TEMPLATE_BINARY}; update init-ci");
        }
        replaced = replaced.replace(TEMPLATE_BINARY, &binary);
        // A binary built under `xtask/` would change the prebuilt binary's
        // own key (hashFiles of trusted/xtask/**) between restore and save.
        if let Some(dir) = shape.binary().strip_suffix("/debug/xtask") {
            if dir.starts_with("xtask/") {
                replaced = replaced.replace(
                    "'trusted/xtask/**', ",
                    &format!("'trusted/xtask/**', '!trusted/{dir}/**', "),
                );
            }
        }
    }
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
        CHECKS_WORKFLOW => replace_line("name: ", format!("name: {CHECKS_NAME}"))?,
        "runpod-gpu-test.yml" => {
            replace_line("    workflows: [", format!("    workflows: [{ci_name}]"))?;
            replace_line(
                "      archives: ",
                format!("      archives: {}", archives.join(" ")),
            )?;
        }
        _ => {}
    }
    let mut out = marker_line("#");
    out.push('\n');
    out.push_str(&lines.join("\n"));
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_checks_workflow_is_the_templates_contracts_job_alone() {
        let ci = "# header\nname: CI\n\non:\n  pull_request:\n\njobs:\n  fmt:\n    runs-on: x\n  contracts:\n    name: Workflow contracts\n    steps:\n      - run: cargo xtask check-contracts\n  later:\n    runs-on: y\n";
        let out = checks_workflow(ci).unwrap();
        assert!(out.contains("name: CI\n\non:\n  pull_request:\n\njobs:\n  contracts:\n    name: Workflow contracts\n    steps:\n      - run: cargo xtask check-contracts\n"), "{out}");
        assert!(!out.contains("fmt:") && !out.contains("later:"), "{out}");
    }
}
