//! Helpers shared by the CLI test binaries.

use std::path::Path;

use assert_cmd::Command;

/// The carver binary under test (`CARVER_TEST_BIN` overrides it, for running a test binary on a
/// GPU machine without cargo).
pub fn carver_bin() -> String {
    std::env::var("CARVER_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_carver").to_string())
}

/// `carver --cache-dir CACHE ARGS` with the environment's CARVER_* settings removed.
pub fn carver(cache: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(carver_bin());
    cmd.env_remove("CARVER_HARDWARE_DB")
        .env_remove("CARVER_CACHE_DIR")
        .arg("--cache-dir")
        .arg(cache)
        .args(args);
    cmd
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
