//! The `ci-trust` binary: ci-trust's subcommands without a host xtask
//! (`cargo install --git … ci-trust`). It only parses flags and dispatches.

use std::process::ExitCode;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "ci-trust",
    about = "Cache-trust tooling for Rust GPU CI",
    version = ci_trust::flags::VERSION.as_str()
)]
struct CiTrust {
    #[command(subcommand)]
    command: ci_trust::flags::Command,
}

fn main() -> ExitCode {
    let flags = CiTrust::parse();
    // Without --root, the repository is the one the command is run in.
    let result = std::env::current_dir()
        .map_err(anyhow::Error::from)
        .and_then(|cwd| flags.command.run(&cwd));
    ci_trust::exit_code(result)
}
