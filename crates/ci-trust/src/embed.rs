//! How a host's own xtask runs ci-trust's subcommands, whatever parses its
//! command line (clap, xflags, pico-args or `std::env::args`).
//!
//! A host that already has an xtask adds two lines (`init-ci` writes the
//! module that calls [`dispatch`] and prints them): one `mod` and one call
//! at the start of `main`. [`dispatch`] looks only at the first argument:
//! a ci-trust subcommand is parsed and run here and the process exits with
//! its code; anything else returns, and the host's own parser carries on.
//! A bare `--help` (or no argument) prints ci-trust's commands first, then
//! returns so that the host prints its own. A host whose xtask uses clap's
//! derive can flatten [`crate::flags::Command`] into its enum instead, as
//! the thin xtask that `init-ci` writes does.
//!
//! Must not: hold task logic (the commands' own modules do), or read any
//! argument but the first before deciding the command is ci-trust's.

use std::path::Path;

use clap::{CommandFactory, Parser, Subcommand};

/// ci-trust's subcommands alone, as the host's `cargo xtask` shows them.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", version = crate::flags::VERSION.as_str())]
struct Embedded {
    #[command(subcommand)]
    command: crate::flags::Command,
}

/// The names of ci-trust's subcommands, from the flag definitions.
pub fn command_names() -> Vec<String> {
    let mut command = clap::Command::new("x");
    command = crate::flags::Command::augment_subcommands(command);
    command
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect()
}

/// Runs a ci-trust subcommand when the first argument names one (and exits
/// with its code); prints ci-trust's commands on a bare `--help`; returns
/// otherwise. `default_root` is what `--root` means when absent (the host
/// repository).
pub fn dispatch(default_root: &Path) {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let first = args.get(1).and_then(|a| a.to_str());
    match first {
        Some(name) if command_names().iter().any(|c| c == name) => {
            let parsed = Embedded::parse_from(&args);
            let code = crate::exit_code(parsed.command.run(default_root));
            // The host's parser never sees a ci-trust command.
            std::process::exit(exit_status(code));
        }
        None | Some("--help" | "-h" | "help") if args.len() <= 2 => {
            println!("{}", help_section());
        }
        _ => {}
    }
}

/// The list of ci-trust's commands with their one-line summaries.
pub fn help_section() -> String {
    let mut text = format!(
        "ci-trust {} commands (cargo xtask COMMAND --help for each):\n",
        crate::flags::VERSION.as_str()
    );
    let command = Embedded::command();
    for sub in command.get_subcommands() {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        text.push_str(&format!("  {:<16} {about}\n", sub.get_name()));
    }
    text
}

/// `ExitCode` is opaque: the three codes a command returns (0, 1, 2).
fn exit_status(code: std::process::ExitCode) -> i32 {
    if code == std::process::ExitCode::SUCCESS {
        0
    } else if code == std::process::ExitCode::from(1) {
        1
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_and_the_help_name_every_subcommand() {
        let names = command_names();
        for name in [
            "ci-key",
            "check-contracts",
            "gpu-archive",
            "verify-key",
            "init-ci",
        ] {
            assert!(names.iter().any(|n| n == name), "{names:?}");
            assert!(help_section().contains(name), "{}", help_section());
        }
    }
}
