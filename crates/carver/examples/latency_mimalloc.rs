//! The `latency` example with mimalloc, the allocator the `carver` CLI and the Python module
//! ship (`carver-cli`'s `main.rs`).
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "common/mod.rs"]
mod common;
#[path = "common/latency.rs"]
mod latency;

fn main() -> ExitCode {
    common::main(latency::USAGE, latency::run)
}
