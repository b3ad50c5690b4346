//! `cargo xtask`: cache-trust tooling for a Rust repository whose GPU tests
//! run on paid, self-hosted pods.
//!
//! This file only parses flags and dispatches: ci-trust's subcommands go to
//! the `ci-trust` library, and this repository's benchmarks to `bench`.

mod bench;
mod flags;

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let flags = flags::Xtask::parse();
    // `--root` defaults to the repository this xtask lives in.
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the xtask crate lives inside the repository");
    let result = match flags.command {
        flags::Command::CiTrust(cmd) => cmd.run(repository),
        flags::Command::BenchKey(cmd) => cmd.run(),
        flags::Command::BenchReuse(cmd) => cmd.run(),
        flags::Command::BenchVerify(cmd) => cmd.run(),
        flags::Command::BenchTrace(cmd) => cmd.run(),
        flags::Command::BenchKeyTree(cmd) => cmd.run(),
        flags::Command::BenchKeystep(cmd) => cmd.run(),
    };
    ci_trust::exit_code(result)
}
