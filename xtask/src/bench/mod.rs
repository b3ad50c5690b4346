//! Benchmarks that print figures side by side with the tools we are judged against.

mod key;
mod key_tree;
mod keystep;
mod reuse;
mod trace;
mod verify;
mod workdir;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use xshell::{Shell, cmd};

/// The binary CI restores: this repository's xtask built as the publisher
/// builds the prebuilt one (`cargo build --release --locked --package
/// xtask`), into the usual target directory (a no-op when it is up to date),
/// with its `--version` (which says `optimised`). `given` measures another
/// binary instead.
pub(crate) fn optimised_xtask(given: Option<&Path>) -> Result<(PathBuf, String)> {
    let sh = Shell::new()?;
    let binary = match given {
        Some(binary) => binary.to_path_buf(),
        None => {
            let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .context("the xtask lives in a repository")?;
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let _cwd = sh.push_dir(repo);
            eprintln!(
                "building the optimised xtask (cargo build --release --locked --package xtask)"
            );
            cmd!(sh, "{cargo} build --release --locked --package xtask")
                .quiet()
                .run()
                .context("cannot build the optimised xtask")?;
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .filter(|d| !d.is_empty())
                .map_or_else(|| repo.join("target"), PathBuf::from);
            target
                .join("release")
                .join(format!("xtask{}", std::env::consts::EXE_SUFFIX))
        }
    };
    let version = cmd!(sh, "{binary} --version")
        .quiet()
        .read()
        .with_context(|| format!("{} does not run", binary.display()))?;
    if given.is_none() && !version.ends_with(", optimised)") {
        bail!("{} is not an optimised build: {version}", binary.display());
    }
    Ok((binary, version))
}
