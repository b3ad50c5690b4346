//! Integration tests: real fixture workspaces in temporary directories, driven
//! through the real `xtask` binary.

// Tests may unwrap and cast freely: a panic is a failure with its location.
#![allow(
    clippy::unwrap_used,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::needless_pass_by_value
)]

// These drive `sh` shims, bash scripts, symbolic links and executable bits
// (adoption reuses the archive fixture): Unix only. The rest runs on Windows too.
#[cfg(unix)]
mod action;
#[cfg(unix)]
mod adoption;
#[cfg(unix)]
mod adoption_hosts;
mod architecture;
#[cfg(unix)]
mod archive;
mod contracts;
mod contracts_gates;
mod contracts_model;
mod contracts_own;
mod contracts_world;
#[cfg(unix)]
mod key;
#[cfg(unix)]
mod key_attack;
#[cfg(unix)]
mod key_config;
#[cfg(unix)]
mod key_exact;
#[cfg(unix)]
mod key_real;
mod key_scan;
#[cfg(unix)]
mod key_tree;
#[cfg(unix)]
mod key_tree_attack_pass;
#[cfg(unix)]
mod key_tree_attacks;
mod mutation;
mod output;
#[cfg(unix)]
mod reuse_attack;
#[cfg(unix)]
mod scripts;
#[cfg(unix)]
mod snapshots;
mod support;
#[cfg(unix)]
mod trace;
mod verify;
mod workflows;
