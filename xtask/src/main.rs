//! `cargo xtask`: cache-trust tooling for a Rust repository whose GPU tests
//! run on paid, self-hosted pods.
//!
//! This file only parses flags and dispatches; each task lives in its own
//! module, and `gha` is the shared layer for the GitHub Actions environment.

mod archive;
mod bench;
mod contracts;
mod flags;
mod gha;
mod init_ci;
mod key;
mod policy;
mod verify;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let flags = flags::Xtask::parse();
    let result = match flags.command {
        flags::Command::CiKey(cmd) => cmd.run(),
        flags::Command::CheckContracts(cmd) => cmd.run(),
        flags::Command::GpuArchive(cmd) => cmd.run(),
        flags::Command::VerifyKey(cmd) => cmd.run(),
        flags::Command::BenchKey(cmd) => cmd.run(),
        flags::Command::BenchReuse(cmd) => cmd.run(),
        flags::Command::BenchVerify(cmd) => cmd.run(),
        flags::Command::BenchTrace(cmd) => cmd.run(),
        flags::Command::BenchKeystep(cmd) => cmd.run(),
        flags::Command::InitCi(cmd) => cmd.run(),
    };
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
