//! Integration tests: real fixture workspaces in temporary directories, driven
//! through the real `xtask` binary.

mod archive;
mod contracts;
mod key;
mod scripts;
mod support;
mod trace;
mod verify;
mod workflows;
