//! Benchmarks that print figures side by side with the tools we are judged against.

mod key;
mod reuse;
mod trace;
mod verify;
