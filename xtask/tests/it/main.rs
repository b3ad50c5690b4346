//! Integration tests: real fixture workspaces in temporary directories, driven
//! through the real `xtask` binary.

mod archive;
mod contracts;
mod key;
mod key_scan;
mod scripts;
mod support;
mod verify;
mod workflows;
