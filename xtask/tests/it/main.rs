//! Integration tests: real fixture workspaces in temporary directories, driven
//! through the real `xtask` binary.

mod architecture;
mod archive;
mod contracts;
mod contracts_own;
mod contracts_world;
mod key;
mod key_config;
mod key_scan;
mod output;
mod scripts;
mod support;
mod trace;
mod verify;
mod workflows;
