//! The `carver` command. Thin: parses arguments, calls the libraries, prints.

mod arch;
mod cache;
mod completions;
mod output;
mod progress;
mod recommend;
mod tune;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{OsStringValueParser, TypedValueParser};
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
        value_parser = OsStringValueParser::new().try_map(hardware_db_value),
        help_heading = GLOBAL_OPTIONS
    )]
    hardware_db: Option<PathBuf>,

    /// Where calibrations and tuning results are kept (default: the user cache directory).
    #[arg(
        long,
        global = true,
        env = "CARVER_CACHE_DIR",
        value_name = "DIR",
        value_parser = OsStringValueParser::new().try_map(cache_dir_value),
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

/// `--hardware-db`: any non-empty path (whether it is a readable directory is checked when the
/// database is loaded, by the commands that load it).
fn hardware_db_value(value: OsString) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(format!(
            "an empty path names no directory: give a directory of *.toml hardware files, {}",
            "or leave the option out to use the shipped descriptions only"
        ));
    }
    Ok(value.into())
}

/// `--cache-dir`: a directory, or a path where one can be created.
fn cache_dir_value(value: OsString) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(format!(
            "an empty path names no directory: give a directory (created when needed), {}",
            "or leave the option out to use the user cache directory"
        ));
    }
    let path = PathBuf::from(value);
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_dir() => Err(format!(
            "{} is a file, not a directory: give a directory (created when needed)",
            path.display()
        )),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!(
            "{} cannot be used as a directory ({e}): give a directory (created when needed)",
            path.display()
        )),
        _ => Ok(path),
    }
}

/// Forgets CARVER_* variables that are set to nothing but blanks, so that `CARVER_CACHE_DIR=`
/// (as a shell or a CI file leaves it) means unset rather than an empty path: for clap, and for
/// the libraries that read these variables themselves.
fn forget_blank_carver_variables() {
    let blank: Vec<OsString> = std::env::vars_os()
        .filter(|(name, value)| {
            name.to_string_lossy().starts_with("CARVER_")
                && value.to_string_lossy().trim().is_empty()
        })
        .map(|(name, _)| name)
        .collect();
    for name in blank {
        // SAFETY: called first in main, before any thread exists that could read the
        // environment.
        unsafe { std::env::remove_var(name) };
    }
}

/// `error`'s message and its causes, leaving out a cause whose text the message already holds
/// (several error types print their source inside their own message).
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
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
    forget_blank_carver_variables();
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
            eprintln!("error: {}", error_text(&err));
            ExitCode::FAILURE
        }
    }
}
