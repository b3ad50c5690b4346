//! Placeholder: this command is being built (see the open issue).

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::flags;

impl flags::VerifyKey {
    pub fn run(&self) -> Result<ExitCode> {
        bail!("not implemented yet")
    }
}
