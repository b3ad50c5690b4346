//! The fresh build: running each `[[archive]]`'s configured cargo command and
//! packing its output, with the runner's control channels removed.
//!
//! The build compiles code a pull request may control (build scripts, proc
//! macros, tests). Its environment therefore lacks `GITHUB_OUTPUT`,
//! `GITHUB_ENV`, `GITHUB_PATH`, `GITHUB_STATE`, `GITHUB_STEP_SUMMARY`,
//! `GITHUB_TOKEN` and every `ACTIONS_*` variable, so built code does not find
//! this step's outputs or credentials where tools look for them. That is not
//! a sandbox: a hostile build running as the same user can read them from
//! its ancestors' `/proc/<pid>/environ`, so the job's read-only token stays
//! the real boundary. Archives are built into a staging directory and
//! verified before they are moved into `--out`.
//!
//! Each build command runs traced when a tracer can run
//! ([`crate::verify::trace`]: fanotify where permitted, else strace, or
//! the trust policy's `[verify] tracer`): every repository file the build
//! opened, executed (or, under strace, examined) must be a key input, or
//! the build fails and nothing is moved into `--out`. Without a tracer the
//! build says so loudly and the
//! dep-info check alone follows; with `[verify] require-trace` in the trust
//! policy (`--trust-policy`) it fails.
//!
//! The build runs in the key tree where one can be made
//! ([`crate::key_tree`]): a copy of exactly the key's inputs, mounted at
//! the checkout's path in a private namespace, so that the archive is a
//! function of the key. A build that needs a file the key lacks fails there;
//! the trace's failed lookups (strace; after a fanotify trace, a second run
//! under strace) name the file and the `[key]` entry that adds it. Where no
//! key tree can be made the build runs in the checkout, as the log and the
//! step summary say; `[verify] key-tree = "required"` in the trust policy
//! makes that an error (and `"off"` builds in the checkout).

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xshell::{Cmd, Shell};

use super::{Request, download, verify};
use crate::build_plan::{BuildPlan, Tool};
use crate::gha;
use crate::key::KeyManifest;
use crate::key_tree::KeyTree;
use crate::policy::{KeyTreeChoice, Policy};
use crate::verify::trace::{self, Backend, TraceLog};

/// What a fresh build made.
#[derive(Debug)]
pub struct Built {
    /// Where the build ran, for the step summary: in the key tree (what it
    /// held), or in the checkout and why.
    pub key_tree: String,
}

/// Builds every archive of the request's policy for the workspace at its
/// root into its `out`.
pub fn build_all(request: &Request) -> Result<Built> {
    let (root, specs, out) = (request.root, &request.policy.archive, request.out);
    // Every command run through this shell goes through [`scrubbed`].
    let sh = Shell::new().context("cannot start a shell")?;
    sh.change_dir(root);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    // What each `[[archive]]` command means (argv, where it writes), once.
    let plans = crate::key::workspace::load(root)
        .and_then(|workspace| BuildPlan::for_policy(root, &workspace, request.policy))
        .with_context(|| {
            let commands: Vec<String> = specs
                .iter()
                .filter_map(|spec| Tool::of(spec).map(|(tool, _)| (tool, &spec.file)))
                .map(|(tool, file)| format!("`{}` for {file}", tool.name()))
                .collect();
            format!("cannot plan the fresh build ({})", commands.join(", "))
        })?;
    // Whether the trace is required is a trust setting: the trusted policy's.
    let tracer = choose_tracer(request.trust, Backend::choose(request.trust.verify.tracer))?;
    // The tree is made from the manifest of exactly the requested key.
    let manifest = crate::key::compute(root, request.policy)
        .context("cannot compute the key of the tree to build")?;
    if manifest.artifact_name != request.artifact_name {
        bail!(
            "the checkout changed after its key was computed (its key is now {}, not {}); nothing is built",
            manifest.artifact_name,
            request.artifact_name
        );
    }
    // A missing lockfile is hashed as absent (ci-key warns); cargo writing
    // one during the build does not change what the key says.
    let lock_was_absent = !root.join("Cargo.lock").exists();
    let staging = download::staging_dir(out)?;
    let (key_tree, built_in) = choose_key_tree(request, &manifest)?;
    if let Some(tree) = &key_tree {
        let mut every_output: Vec<PathBuf> =
            plans.iter().flat_map(|p| p.output_dirs(root)).collect();
        every_output.extend([staging.path().to_path_buf(), out.to_path_buf()]);
        if let Some(warning) = tree.refuse_committed_output(&every_output)? {
            gha::warning(&warning);
        }
    }
    // The build's output is the pull request's to write: the runner must not
    // take a workflow command from it. Dropped (commands resume) on return.
    let _paused = gha::CommandsPaused::start();
    for (index, (spec, plan)) in specs.iter().zip(&plans).enumerate() {
        let dest = staging.path().join(&plan.file);
        eprintln!(
            "building archive {}/{}: {}",
            index + 1,
            plans.len(),
            plan.file
        );
        // The archive is written to the staging directory beside `--out`.
        let mut output_dirs = plan.output_dirs(root);
        output_dirs.extend([staging.path().to_path_buf(), out.to_path_buf()]);
        let run = Run {
            sh: &sh,
            root,
            tree: key_tree.as_ref(),
            output_dirs: &output_dirs,
        };
        let log = tracer.as_ref().map(|t| run.trace_log(t)).transpose()?;
        let traced = log.as_ref();
        if let Some(log) = traced {
            eprintln!("the build runs traced ({})", log.backend().name());
            // The `[[archive]]` arguments are the tree's: no directory they
            // name is trusted.
            trace::refuse_occupied_output_dirs(root, &output_dirs, &[])
                .and_then(|()| log.start(root, &output_dirs))
                .with_context(|| {
                    format!(
                        "cannot trace the fresh build (`{}`) of {}",
                        plan.tool.name(),
                        plan.file
                    )
                })?;
        }
        let argv = plan.argv(&cargo, &dest);
        let built = match plan.tool {
            Tool::NextestArchive => run
                .status(traced, &argv)
                .with_context(|| format!("`cargo nextest archive` for {} failed", plan.file))
                .and_then(|()| refuse_repository_file(root, &dest, &output_dirs)),
            Tool::Build => build_binaries(&run, traced, &argv, &plan.binaries)
                .with_context(|| format!("`cargo build` for {} failed", plan.file))
                .and_then(|executables| {
                    for executable in &executables {
                        refuse_repository_file(root, executable, &output_dirs)?;
                    }
                    let members: Vec<(String, PathBuf)> =
                        plan.binaries.iter().cloned().zip(executables).collect();
                    pack_zstd_tar(&members, &dest, staging.path())
                        .with_context(|| format!("cannot pack {}", plan.file))
                }),
        };
        if let Err(err) = built {
            if key_tree.is_some() {
                // A watch of the failed build ends before anything else runs.
                if let Some(log) = traced {
                    let _ = log.stop();
                }
                let mut rerun = |backend: &Backend| {
                    let log = run.trace_log(backend)?;
                    let _ = run.status(Some(&log), &argv);
                    Ok(log)
                };
                let diagnosis =
                    trace::key_tree_failure(traced, &mut rerun, root, &manifest, &output_dirs);
                bail!("{err:#}\n{diagnosis}");
            }
            return Err(err);
        }
        if let Some(log) = traced {
            check_trace(request, log, &output_dirs, lock_was_absent).with_context(|| {
                format!(
                    "the traced build of {} is not covered by the key",
                    plan.file
                )
            })?;
        }
        let summary = verify::check_archive(&dest, spec)?;
        eprintln!(
            "built {}: {} members, {}",
            plan.file,
            summary.members,
            download::mib(summary.bytes)
        );
    }
    download::move_into_place(staging.path(), specs, out)?;
    Ok(Built { key_tree: built_in })
}

/// The key tree of the fresh build, or `None` (with a warning) where none
/// can be made and the trust policy does not require one; and where the
/// build runs, for the step summary.
fn choose_key_tree(request: &Request, manifest: &KeyManifest) -> Result<(Option<KeyTree>, String)> {
    let choice = request.trust.verify.key_tree;
    if choice == KeyTreeChoice::Off {
        gha::log(
            "the fresh build runs in the checkout: the trust policy turns the key tree off ([verify] key-tree = \"off\")",
        );
        return Ok((
            None,
            "the checkout (the trust policy turns the key tree off); checked by the trace"
                .to_owned(),
        ));
    }
    match crate::key_tree::available() {
        Ok(mechanism) => {
            let top = crate::key_tree::checkout_top(
                request.root,
                request.policy.key.repository_root.as_deref(),
            );
            let tree = KeyTree::stage(request.root, &top, manifest, mechanism)
                .context("cannot make the key tree of the fresh build")?;
            gha::log(&format!(
                "the fresh build runs in the key tree, which holds exactly the key's inputs: {}",
                tree.describe()
            ));
            let s = tree.staged();
            let built_in = format!(
                "the key tree: exactly the key's inputs ({} files, {} symlinks), mounted at the checkout's path; nothing else of the checkout was visible",
                s.files, s.symlinks
            );
            Ok((Some(tree), built_in))
        }
        Err(why) if choice == KeyTreeChoice::Required => bail!(
            "the trust policy ([verify] key-tree = \"required\") requires the fresh build to run in the key tree, but none can be made here: {why}"
        ),
        Err(why) => {
            gha::warning(&format!(
                "no key tree can be made here ({why}): the fresh build runs in the checkout, where a file the key lacks is seen only by the trace; set [verify] key-tree = \"required\" in the trust policy to make this an error"
            ));
            Ok((
                None,
                format!("the checkout: no key tree can be made here ({why}); checked by the trace"),
            ))
        }
    }
}

/// How the commands of one archive's build run: from the root, in the key
/// tree when there is one, with the build's output directories.
struct Run<'a> {
    sh: &'a Shell,
    root: &'a Path,
    tree: Option<&'a KeyTree>,
    output_dirs: &'a [PathBuf],
}

impl Run<'_> {
    /// A trace of this build by `backend`, told about the key tree.
    fn trace_log(&self, backend: &Backend) -> Result<TraceLog> {
        let log = TraceLog::new(backend)?;
        Ok(match self.tree {
            Some(tree) => log.in_key_tree(tree.view(self.output_dirs)),
            None => log,
        })
    }

    /// `argv` as it runs: traced by `log` (or not), without the runner's
    /// control variables, in the key tree (or the checkout).
    fn command(
        &self,
        traced: Option<&TraceLog>,
        argv: &[OsString],
    ) -> Result<std::process::Command> {
        let mut command: std::process::Command = scrubbed(command(self.sh, traced, argv)).into();
        if let Some(tree) = self.tree {
            tree.isolate(&mut command, self.root, self.output_dirs)?;
        }
        Ok(command)
    }

    /// Runs `argv`, its output passing through; an error unless it succeeds.
    fn status(&self, traced: Option<&TraceLog>, argv: &[OsString]) -> Result<()> {
        let mut command = self.command(traced, argv)?;
        let status = command
            .status()
            .with_context(|| format!("cannot run {}", argv[0].to_string_lossy()))?;
        if !status.success() {
            bail!("{} failed ({status})", describe(argv));
        }
        Ok(())
    }

    /// Runs `argv` and returns its standard output; its errors pass through.
    fn read(&self, traced: Option<&TraceLog>, argv: &[OsString]) -> Result<String> {
        let mut command = self.command(traced, argv)?;
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let output = command
            .output()
            .with_context(|| format!("cannot run {}", argv[0].to_string_lossy()))?;
        if !output.status.success() {
            bail!("{} failed ({})", describe(argv), output.status);
        }
        String::from_utf8(output.stdout).context("the build's messages are not UTF-8")
    }
}

/// A command line for an error message.
fn describe(argv: &[OsString]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("`{}`", words.join(" "))
}

/// The tracer for the fresh build, when one can run; otherwise a
/// loud warning and `None`, or an error when the policy requires the trace.
fn choose_tracer(
    policy: &Policy,
    found: std::result::Result<Backend, String>,
) -> Result<Option<Backend>> {
    match found {
        Ok(tracer) => Ok(Some(tracer)),
        Err(why) if policy.verify.require_trace => bail!(
            "no tracer can run ({why}), and the policy ([verify] require-trace) requires the fresh build to run traced; install strace in the job before gpu-archive, or run it as root"
        ),
        Err(why) => {
            gha::warning(&format!(
                "no tracer can run ({why}): the fresh build is NOT traced, and only rustc's dep-info can show what it read (blind to files a build script or proc macro reads without declaring them); install strace, or set [verify] require-trace = true to make this an error",
            ));
            Ok(None)
        }
    }
}

/// `argv` as it runs traced by `log` (or untraced), as an xshell command.
fn command<'a>(sh: &'a Shell, traced: Option<&TraceLog>, argv: &[OsString]) -> Cmd<'a> {
    match traced {
        Some(log) => {
            let (program, args) = log.wrap(argv);
            sh.cmd(program).args(args)
        }
        None => sh.cmd(&argv[0]).args(&argv[1..]),
    }
}

/// Checks one traced archive build against the key the request names. The
/// key is computed again from the tree as the build left it: the inputs'
/// list is what the trace is checked against, and a build that changed a
/// key input (or added one) has made the requested key wrong, which fails.
fn check_trace(
    request: &Request,
    log: &TraceLog,
    output_dirs: &[PathBuf],
    lock_was_absent: bool,
) -> Result<()> {
    let root = request.root;
    // The watch ends before this process reads the repository itself.
    log.stop()?;
    let mut manifest = crate::key::compute(root, request.policy)
        .context("cannot compute the key again after the build")?;
    let lock = root.join("Cargo.lock");
    if manifest.artifact_name != request.artifact_name && lock_was_absent && lock.exists() {
        // The key was computed without a lockfile: compute it so again,
        // then put cargo's lockfile back.
        let generated = std::fs::read(&lock).context("cannot read the generated Cargo.lock")?;
        std::fs::remove_file(&lock).context("cannot set the generated Cargo.lock aside")?;
        let again = crate::key::compute(root, request.policy);
        std::fs::write(&lock, generated).context("cannot restore the generated Cargo.lock")?;
        manifest = again.context("cannot compute the key again after the build")?;
    }
    if manifest.artifact_name != request.artifact_name {
        bail!(
            "the build changed the repository's key inputs: the key is now {}, not {}; a build must write only to its target directory (OUT_DIR for build scripts), and cargo must not rewrite Cargo.lock",
            manifest.artifact_name,
            request.artifact_name
        );
    }
    let report = log.check(root, &manifest, output_dirs, root)?;
    eprint!("{}", crate::gha::log_block(&report.render()));
    if !report.absent_in_tree.is_empty() {
        gha::warning(&format!(
            "the build looked for {} path(s) the checkout has and the key lacks, and was built without them (listed above with the [key] entry that adds each)",
            report.absent_in_tree.len()
        ));
    }
    if report.misses.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = report
        .misses
        .iter()
        .map(|m| format!("{} ({} by {}): {}", m.path, m.access, m.process, m.fix))
        .collect();
    bail!(
        "the build used {} repository file(s) the key does not cover, so the archives are not published under it:\n  {}",
        list.len(),
        list.join("\n  ")
    )
}

/// Refuses to pack or publish `path` when it resolves to a file outside
/// the build's output directories (a file of the repository, or of the
/// checkout around it): the build (or a
/// daemon it left) may have put a symlink there, in place of the file it
/// built or of a directory on the way, to have this process pack a
/// repository file that is not a key input. No trace sees this process's
/// own reads under strace.
fn refuse_repository_file(root: &Path, path: &Path, output_dirs: &[PathBuf]) -> Result<()> {
    let real = std::fs::canonicalize(path)
        .with_context(|| format!("cannot resolve the build output {}", path.display()))?;
    let in_output = output_dirs.iter().any(|dir| {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        real.starts_with(dir)
    });
    // Anywhere else is refused too: in a workspace that is a subdirectory
    // of its checkout, a link to `../secret.bin` resolves, for this
    // process, to a file of the pull request's checkout that no key names.
    if !in_output {
        let whose = if real.starts_with(root) {
            "a file of the repository"
        } else {
            "a file outside the build's output directories"
        };
        bail!(
            "the build output {} resolves to {}, {whose}, not something the build wrote: a symlink planted in the target directory; refused",
            path.display(),
            real.display()
        );
    }
    Ok(())
}

/// `cmd` without any runner control variable in its environment.
pub fn scrubbed(mut cmd: Cmd<'_>) -> Cmd<'_> {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(gha::is_runner_control_var) {
            cmd = cmd.env_remove(name);
        }
    }
    cmd
}

/// Runs `argv` (`cargo build --message-format=json… ARGS`) and returns the executables of `binaries`, in
/// order, from cargo's own artifact messages (so profile and target
/// directories need no guessing).
fn build_binaries(
    run: &Run,
    traced: Option<&TraceLog>,
    argv: &[OsString],
    binaries: &[String],
) -> Result<Vec<PathBuf>> {
    let messages = run.read(traced, argv)?;
    let mut found: Vec<Option<PathBuf>> = vec![None; binaries.len()];
    for message in cargo_metadata::Message::parse_stream(messages.as_bytes()) {
        let message = message.context("cannot read cargo's JSON messages")?;
        if let cargo_metadata::Message::CompilerArtifact(artifact) = message
            && let Some(executable) = artifact.executable
            && artifact.target.is_bin()
            && let Some(index) = binaries.iter().position(|b| *b == artifact.target.name)
        {
            found[index] = Some(executable.into_std_path_buf());
        }
    }
    binaries
        .iter()
        .zip(found)
        .map(|(name, path)| {
            path.with_context(|| {
                format!("`cargo build` produced no binary {name:?}; name it in `build` with `--bin {name}`")
            })
        })
        .collect()
}

/// Writes `members` (name in the archive, file on disk) as a zstd tar at
/// `dest`, using `scratch` for the uncompressed tar.
pub fn pack_zstd_tar(members: &[(String, PathBuf)], dest: &Path, scratch: &Path) -> Result<()> {
    let tar_file = tempfile::NamedTempFile::new_in(scratch)
        .with_context(|| format!("cannot create a file in {}", scratch.display()))?;
    {
        let mut builder = tar::Builder::new(BufWriter::new(tar_file.as_file()));
        builder.mode(tar::HeaderMode::Deterministic);
        for (name, path) in members {
            builder
                .append_path_with_name(path, name)
                .with_context(|| format!("cannot add {} to the tar", path.display()))?;
        }
        builder
            .into_inner()
            .context("cannot finish the tar")?
            .into_inner()
            .map_err(|err| err.into_error())
            .context("cannot write the tar")?;
    }
    let source = BufReader::new(
        File::open(tar_file.path())
            .with_context(|| format!("cannot reopen {}", tar_file.path().display()))?,
    );
    let target = BufWriter::new(
        File::create_new(dest).with_context(|| format!("cannot create {}", dest.display()))?,
    );
    // ruzstd's compressor panics on I/O errors instead of returning them;
    // turn that into an error so a full disk reads as one.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut target = target;
        ruzstd::encoding::compress(
            source,
            &mut target,
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        std::io::Write::flush(&mut target)
    }))
    .map_err(|_| anyhow::anyhow!("the zstd compressor failed (out of disk space?)"))?
    .with_context(|| format!("cannot write {}", dest.display()))?;
    Ok(())
}
