//! The content key of the GPU archives (`cargo xtask ci-key`).
//!
//! Owns the discovery of every file the build reads, the components that are
//! not files (toolchain, locked crate and toolkit versions, the manual `vN`),
//! and the documented encoding they are hashed with. Other commands call
//! [`compute`]; none derives a key on its own.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::{flags, policy::Policy};

/// A computed key with everything that went into it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyManifest {
    pub key: String,
    pub artifact_name: String,
    pub components: Vec<Component>,
    pub inputs: Vec<Input>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Component {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// Repository-relative, `/`-separated.
    pub path: String,
    /// Hex SHA-256 of the content (of the link text for a symlink, empty when absent).
    pub sha256: String,
    pub size: u64,
    /// `file`, `executable`, `symlink` or `absent`.
    pub kind: String,
    /// Why the file is an input.
    pub reason: String,
}

/// Computes the key of the repository at `root` (absolute) under `policy`.
pub fn compute(root: &Path, policy: &Policy) -> Result<KeyManifest> {
    let _ = (root, policy);
    bail!("not implemented yet")
}

impl flags::CiKey {
    pub fn run(&self) -> Result<ExitCode> {
        let root = self.common.root()?;
        let policy = self.common.load_policy(&root)?;
        let manifest = compute(&root, &policy)?;
        println!("{}", manifest.key);
        Ok(ExitCode::SUCCESS)
    }
}
