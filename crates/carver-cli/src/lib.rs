//! The `carver` command. Thin: parses arguments, calls the libraries, prints.
//!
//! A library as well as the binary so that every front end runs the one parser: `main.rs` calls
//! [`run`], and so does the Python package (`python -m carver`), which cannot start a binary it
//! does not ship.

mod arch;
mod cache;
mod completions;
mod moe;
mod output;
mod progress;
mod recommend;
mod tune;

use std::ffi::OsString;
use std::io::Write;
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
    /// Write the fused-MoE Triton kernel's config file (vLLM, SGLang) for an MoE layer.
    Moe(moe::MoeArgs),
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
///
/// # Safety
/// It changes the environment: no other thread may read or write it meanwhile (call it first
/// in a process, as [`prepare_process`] says).
unsafe fn forget_blank_carver_variables() {
    let blank: Vec<OsString> = std::env::vars_os()
        .filter(|(name, value)| {
            name.to_string_lossy().starts_with("CARVER_")
                && value.to_string_lossy().trim().is_empty()
        })
        .map(|(name, _)| name)
        .collect();
    for name in blank {
        // SAFETY: the caller guarantees no other thread uses the environment.
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
    /// How to start this command again (tuning workers are it plus `tune --worker`).
    pub relaunch: Relaunch,
}

/// A command line that starts this same CLI: the `carver` binary, or a Python interpreter with
/// `-m carver`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relaunch {
    pub program: PathBuf,
    /// Arguments before the subcommand's own.
    pub args: Vec<String>,
}

impl Relaunch {
    /// The running executable, with no arguments of its own.
    pub fn current_exe() -> Self {
        Self {
            program: std::env::current_exe().unwrap_or_else(|_| "carver".into()),
            args: Vec::new(),
        }
    }
}

/// Lets a closed pipe end the process quietly (`carver ... | head`), as every Unix filter does,
/// instead of a panic on the next write.
#[cfg(unix)]
fn default_sigpipe() {
    // SAFETY: restoring the default disposition of one signal.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn default_sigpipe() {}

/// What the process running the command line sets up first: a closed pipe ends it quietly, and
/// blank CARVER_* variables count as unset.
///
/// # Safety
/// Call it before any other thread of the process can read or write the environment (first in
/// `main`, or in a Python process before it starts threads).
pub unsafe fn prepare_process() {
    default_sigpipe();
    // SAFETY: the caller's guarantee.
    unsafe { forget_blank_carver_variables() };
}

/// Runs the command line `argv` (program name first) and returns the process exit status:
/// 0 on success, 1 when the command failed, clap's status (2) for bad arguments. Never exits
/// the process itself, so a host process (Python) decides what happens next.
pub fn run<I, T>(argv: I, relaunch: Relaunch) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(err) => {
            // What `Cli::parse` would print (help and version on stdout, errors on stderr),
            // without its `exit`.
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(2);
        }
    };
    let globals = Globals {
        locations: carver_flows::Locations {
            hardware_db: cli.hardware_db,
            cache_dir: cli.cache_dir,
        },
        relaunch,
    };
    let result = match cli.command {
        Command::Arch(cmd) => arch::run(cmd, &globals),
        Command::Recommend(args) => recommend::run(args, &globals),
        Command::Moe(args) => moe::run(args, &globals),
        Command::Tune(args) => tune::run_tune(args, &globals),
        Command::Bench(args) => tune::run_bench(args, &globals),
        Command::Cache(cmd) => cache::run(cmd, &globals),
        Command::Completions(args) => completions::run(args),
    };
    // A host process does not flush Rust's stdout at exit as a Rust `main` does.
    let _ = std::io::stdout().flush();
    match result {
        // Subcommands end with SUCCESS or FAILURE only.
        Ok(code) if code == ExitCode::SUCCESS => 0,
        Ok(_) => 1,
        Err(err) => {
            eprintln!("error: {}", error_text(&err));
            1
        }
    }
}
