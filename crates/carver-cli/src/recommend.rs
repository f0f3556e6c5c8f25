//! `carver recommend`.

use std::process::ExitCode;

use clap::Args;

use crate::Globals;

#[derive(Debug, Args)]
pub struct RecommendArgs {}

pub fn run(_args: RecommendArgs, _globals: &Globals) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
