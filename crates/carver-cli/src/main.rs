//! The `carver` binary: the command line of the `carver_cli` library.

use std::process::ExitCode;

/// A recommendation allocates many short-lived lists; with mimalloc it takes 8-12% fewer
/// instructions than with glibc's allocator (docs/RESULTS.md, "Recommendation latency: the front
/// ends allocate with mimalloc").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // SAFETY: first in main, before any thread exists.
    unsafe { carver_cli::prepare_process() };
    ExitCode::from(carver_cli::run(
        std::env::args_os(),
        carver_cli::Relaunch::current_exe(),
    ))
}
