//! The `carver` binary: the command line of the `carver_cli` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    carver_cli::default_sigpipe();
    ExitCode::from(carver_cli::run(
        std::env::args_os(),
        carver_cli::Relaunch::current_exe(),
    ))
}
