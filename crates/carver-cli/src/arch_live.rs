//! `carver arch detect` and `carver arch calibrate`: the parts of `carver arch` that need a GPU.

use std::process::ExitCode;

use crate::Globals;
use crate::output::Format;

pub fn detect(_globals: &Globals, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`carver arch detect` is not built yet; plan offline with `--arch h100`")
}

pub fn calibrate(_globals: &Globals, _device: usize, _format: Format) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`carver arch calibrate` is not built yet")
}
