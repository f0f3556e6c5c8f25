//! What every example's `main` shares: `--help`, usage errors with the usage, messages instead
//! of panics, and a quiet end when the reader of standard output goes away (`... | head`).
//! Standard library and libc only, so that examples of other crates can include it by path.
#![allow(dead_code)] // each example uses part of it

use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;

/// Why an example stopped. Deliberately not `Display`: then every displayable error converts
/// into it, and `?` works on the library's errors, I/O and parsing alike.
pub enum Failure {
    /// The arguments are wrong: the usage is printed after the message.
    Usage(String),
    /// Anything else (a file, its contents, the library).
    Error(String),
}

impl<E: Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Error(e.to_string())
    }
}

pub type Result<T = ()> = std::result::Result<T, Failure>;

pub fn usage_error<T>(message: impl Into<String>) -> Result<T> {
    Err(Failure::Usage(message.into()))
}

pub fn error<T>(message: impl Into<String>) -> Result<T> {
    Err(Failure::Error(message.into()))
}

/// Says what was being done when a result failed or a value was missing.
pub trait Context<T> {
    fn context(self, what: impl Display) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|e| Failure::Error(format!("{what}: {e}")))
    }
}

impl<T> Context<T> for Result<T> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|failure| match failure {
            Failure::Usage(m) => Failure::Usage(format!("{what}: {m}")),
            Failure::Error(m) => Failure::Error(format!("{what}: {m}")),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Display) -> Result<T> {
        self.ok_or_else(|| Failure::Error(what.to_string()))
    }
}

/// Runs an example: `--help` or `-h` anywhere prints `usage` and succeeds; otherwise `body` gets
/// the arguments, and a failure is printed (with the usage after a usage error) as the exit
/// status turns non-zero: 2 for usage, 1 for anything else.
pub fn main(usage: &str, body: impl FnOnce(Vec<String>) -> Result) -> ExitCode {
    default_sigpipe();
    let mut args = Vec::new();
    for arg in std::env::args_os().skip(1) {
        match arg.into_string() {
            Ok(a) => args.push(a),
            Err(a) => {
                eprintln!("error: argument {a:?} is not UTF-8\n\n{usage}");
                return ExitCode::from(2);
            }
        }
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{usage}");
        return ExitCode::SUCCESS;
    }
    match body(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}\n\n{usage}");
            ExitCode::from(2)
        }
        Err(Failure::Error(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `arg` as a `T`, or a usage error naming the argument.
pub fn number<T: FromStr>(arg: &str, what: &str) -> Result<T> {
    arg.parse()
        .or_else(|_| usage_error(format!("{what} `{arg}` is not a non-negative whole number")))
}

/// A count that must be at least 1 (a repetition count divides by it).
pub fn positive(arg: &str, what: &str) -> Result<u32> {
    match number(arg, what)? {
        0 => usage_error(format!("{what} must be at least 1")),
        n => Ok(n),
    }
}

/// `MxNxK`, such as `4096x4096x4096`.
pub fn shape(arg: &str) -> Result<(u64, u64, u64)> {
    let dims: Vec<Option<u64>> = arg.split('x').map(|x| x.parse().ok()).collect();
    match dims.as_slice() {
        [Some(m), Some(n), Some(k)] => Ok((*m, *n, *k)),
        _ => usage_error(format!("shape `{arg}` is not MxNxK, like 4096x4096x4096")),
    }
}

/// Removes `flag VALUE` from `args` and returns VALUE; an error when VALUE is missing.
pub fn take_option(args: &mut Vec<String>, flag: &str) -> Result<Option<String>> {
    let Some(at) = args.iter().position(|a| a == flag) else {
        return Ok(None);
    };
    if at + 1 >= args.len() {
        return usage_error(format!("{flag} needs a value"));
    }
    let value = args.remove(at + 1);
    args.remove(at);
    Ok(Some(value))
}

/// A usage error for the first argument that looks like an option (`--x`, `-x`): what is left
/// once the known options are taken must be positional. `-3` is left to the number parser.
pub fn no_options(args: &[String]) -> Result {
    match args.iter().find(|a| {
        a.starts_with("--")
            || (a.len() > 1
                && a.starts_with('-')
                && !a[1..].starts_with(|c: char| c.is_ascii_digit()))
    }) {
        Some(a) => usage_error(format!("unknown option `{a}`")),
        None => Ok(()),
    }
}

/// Lets a closed pipe end the process quietly, as every Unix filter does, instead of a panic
/// in `println!` on the next write (Rust ignores SIGPIPE by default).
#[cfg(unix)]
fn default_sigpipe() {
    // SAFETY: restoring the default disposition of one signal before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn default_sigpipe() {}
