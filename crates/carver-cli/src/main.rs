//! The `carver` binary: the command line of the `carver_cli` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    // SAFETY: first in main, before any thread exists.
    unsafe { carver_cli::prepare_process() };
    ExitCode::from(carver_cli::run(
        std::env::args_os(),
        carver_cli::Relaunch::current_exe(),
    ))
}
