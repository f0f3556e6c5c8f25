//! The `carver` command. Thin: parses arguments, calls the libraries, prints.

mod arch;
mod cache;
mod completions;
mod output;
mod progress;
mod recommend;
mod tune;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Help heading of the options every subcommand accepts, so that a subcommand's `--help` shows
/// its own options apart from them.
const GLOBAL_OPTIONS: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "carver",
    version,
    about = "GPU matmul kernel configurations, recommended and proven"
)]
struct Cli {
    /// Directory of extra or overriding hardware description files (*.toml).
    #[arg(
        long,
        global = true,
        env = "CARVER_HARDWARE_DB",
        value_name = "DIR",
        help_heading = GLOBAL_OPTIONS
    )]
    hardware_db: Option<PathBuf>,

    /// Where calibrations and tuning results are kept (default: the user cache directory).
    #[arg(
        long,
        global = true,
        env = "CARVER_CACHE_DIR",
        value_name = "DIR",
        help_heading = GLOBAL_OPTIONS
    )]
    cache_dir: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect the hardware model: list, show, detect and calibrate GPUs.
    #[command(subcommand)]
    Arch(arch::ArchCommand),
    /// Rank kernel configurations for a matmul with the cost model (no GPU needed).
    Recommend(recommend::RecommendArgs),
    /// Compile, verify and time the top candidates on this machine's GPU; cache the winner.
    Tune(tune::TuneArgs),
    /// Time one configuration (or the cached winner) against cuBLAS.
    Bench(tune::BenchArgs),
    /// Inspect, share and clear the tuning database.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Print a tab-completion script for bash, zsh, fish, elvish or powershell.
    Completions(completions::CompletionsArgs),
}

/// What every subcommand may need from the global options.
pub struct Globals {
    pub locations: carver_flows::Locations,
}

/// Lets a closed pipe end the process quietly (`carver ... | head`), as every Unix filter does,
/// instead of a panic on the next write.
#[cfg(unix)]
fn default_sigpipe() {
    // SAFETY: restoring the default disposition of one signal before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn default_sigpipe() {}

fn main() -> ExitCode {
    default_sigpipe();
    let cli = Cli::parse();
    let globals = Globals {
        locations: carver_flows::Locations {
            hardware_db: cli.hardware_db,
            cache_dir: cli.cache_dir,
        },
    };
    let result = match cli.command {
        Command::Arch(cmd) => arch::run(cmd, &globals),
        Command::Recommend(args) => recommend::run(args, &globals),
        Command::Tune(args) => tune::run_tune(args, &globals),
        Command::Bench(args) => tune::run_bench(args, &globals),
        Command::Cache(cmd) => cache::run(cmd, &globals),
        Command::Completions(args) => completions::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
