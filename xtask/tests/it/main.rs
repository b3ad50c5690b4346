//! Integration tests: real fixture workspaces in temporary directories, driven
//! through the real `xtask` binary.

// These drive `sh` shims, bash scripts, symbolic links and executable bits
// (adoption reuses the archive fixture): Unix only. The rest runs on Windows too.
#[cfg(unix)]
mod adoption;
mod architecture;
#[cfg(unix)]
mod archive;
mod contracts;
mod contracts_own;
#[cfg(unix)]
mod key;
mod key_config;
mod output;
#[cfg(unix)]
mod scripts;
mod support;
mod verify;
mod workflows;
