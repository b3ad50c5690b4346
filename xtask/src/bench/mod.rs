//! Benchmarks that print figures side by side with the tools we are judged against.

mod key;
mod verify;

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::flags;

impl flags::BenchReuse {
    pub fn run(&self) -> Result<ExitCode> {
        bail!("not implemented yet")
    }
}
