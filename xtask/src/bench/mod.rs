//! Benchmarks that print figures side by side with the tools we are judged against.

mod key;
mod key_tree;
mod keystep;
mod reuse;
mod trace;
mod verify;
mod workdir;
