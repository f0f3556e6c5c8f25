//! `carver cache ...`: the tuning database (see the carver-tunedb crate).

use std::process::ExitCode;

use clap::Subcommand;

use crate::Globals;

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List stored tuning results.
    List,
}

pub fn run(_cmd: CacheCommand, _globals: &Globals) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the tuning database is not built yet")
}
