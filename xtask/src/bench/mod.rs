//! Placeholder: benchmarks are being built (see the open issues).

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::flags;

impl flags::BenchKey {
    pub fn run(&self) -> Result<ExitCode> {
        bail!("not implemented yet")
    }
}

impl flags::BenchReuse {
    pub fn run(&self) -> Result<ExitCode> {
        bail!("not implemented yet")
    }
}
