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

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xshell::{Cmd, Shell, cmd};

use super::{download, verify};
use crate::gha;
use crate::policy::ArchiveSpec;

/// Builds every archive of `specs` for the workspace at `root` into `out`.
pub fn build_all(root: &Path, specs: &[ArchiveSpec], out: &Path) -> Result<Vec<PathBuf>> {
    // Every command run through this shell goes through [`scrubbed`].
    let sh = Shell::new().context("cannot start a shell")?;
    sh.change_dir(root);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let staging = download::staging_dir(out)?;
    // The build's output is the pull request's to write: the runner must not
    // take a workflow command from it. Dropped (commands resume) on return.
    let _paused = gha::CommandsPaused::start();
    for (index, spec) in specs.iter().enumerate() {
        let dest = staging.path().join(&spec.file);
        eprintln!(
            "building archive {}/{}: {}",
            index + 1,
            specs.len(),
            spec.file
        );
        match (&spec.nextest, &spec.build) {
            (Some(args), _) => {
                scrubbed(cmd!(
                    sh,
                    "{cargo} nextest archive --archive-file {dest} {args...}"
                ))
                .run()
                .with_context(|| format!("`cargo nextest archive` for {} failed", spec.file))?;
            }
            (None, Some(args)) => {
                let executables = build_binaries(&sh, &cargo, args, &spec.binaries)
                    .with_context(|| format!("`cargo build` for {} failed", spec.file))?;
                let members: Vec<(String, PathBuf)> =
                    spec.binaries.iter().cloned().zip(executables).collect();
                pack_zstd_tar(&members, &dest, staging.path())
                    .with_context(|| format!("cannot pack {}", spec.file))?;
            }
            (None, None) => bail!("archive {} has neither `nextest` nor `build`", spec.file),
        }
        let summary = verify::check_archive(&dest, spec)?;
        eprintln!(
            "built {}: {} members, {}",
            spec.file,
            summary.members,
            download::mib(summary.bytes)
        );
    }
    download::move_into_place(staging.path(), specs, out)
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

/// Runs `cargo build ARGS` and returns the executables of `binaries`, in
/// order, from cargo's own artifact messages (so profile and target
/// directories need no guessing).
fn build_binaries(
    sh: &Shell,
    cargo: &OsString,
    args: &[String],
    binaries: &[String],
) -> Result<Vec<PathBuf>> {
    let messages = scrubbed(cmd!(
        sh,
        "{cargo} build --message-format=json-render-diagnostics {args...}"
    ))
    .read()?;
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
