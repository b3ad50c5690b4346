//! Integration tests: real fixture workspaces in temporary directories, driven
//! through the real `xtask` binary.

mod scripts;
mod support;
mod workflows;
