//! `carver tune` and `carver bench`: the empirical loop on this machine's GPU.

use std::process::ExitCode;

use clap::Args;

use crate::Globals;

#[derive(Debug, Args)]
pub struct TuneArgs {}

#[derive(Debug, Args)]
pub struct BenchArgs {}

pub fn run_tune(_args: TuneArgs, _globals: &Globals) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`carver tune` needs the cuda-sm90 kernel family, which is not built yet")
}

pub fn run_bench(_args: BenchArgs, _globals: &Globals) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`carver bench` needs the cuda-sm90 kernel family, which is not built yet")
}
