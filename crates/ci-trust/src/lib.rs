//! ci-trust: cache and artifact reuse for Rust GPU CI, without trusting
//! bytes an attacker could have influenced.
//!
//! The library behind `cargo xtask ci-key | gpu-archive | check-contracts |
//! verify-key | init-ci`: a host's xtask embeds [`flags::Command`] beside its
//! own subcommands, and the `ci-trust` binary runs it alone. Each task lives
//! in its own module; `gha` is the shared layer for the GitHub Actions
//! environment. docs/architecture.md is the map.

pub mod archive;
pub mod build_plan;
pub mod contracts;
pub mod embed;
pub mod flags;
pub mod gha;
pub mod init_ci;
pub mod key;
pub mod key_tree;
pub mod policy;
pub mod verify;

use std::process::ExitCode;

/// The exit code of a command's result: its own code, or 2 with the error
/// printed as one encoded `error:` line.
pub fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) => {
            // Exit 2 means "could not do the job" (usage or input error), as
            // distinct from 1, "did the job and found problems".
            // The chain can carry file names and API text: encoded, so that
            // no part of it can start a workflow command.
            eprintln!(
                "{}",
                gha::error_line(&format!("{err:#}"), gha::in_actions())
            );
            ExitCode::from(2)
        }
    }
}
