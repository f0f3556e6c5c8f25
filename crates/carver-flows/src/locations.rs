use std::path::PathBuf;

use carver_arch::HardwareDb;

use crate::FlowError;

/// Where carver reads GPU descriptions and keeps calibrations and tuning results: what a front
/// end's global options (`--hardware-db`, `--cache-dir` and their environment variables) set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Locations {
    /// A directory of extra or overriding hardware descriptions (`*.toml`).
    pub hardware_db: Option<PathBuf>,
    /// The cache directory; the user cache directory when unset.
    pub cache_dir: Option<PathBuf>,
}

impl Locations {
    /// The embedded hardware database plus the user's directory, if any.
    pub fn hardware_db(&self) -> Result<HardwareDb, FlowError> {
        Ok(HardwareDb::load(self.hardware_db.as_deref())?)
    }

    /// The cache directory (created on first write by whoever writes there).
    pub fn cache_dir(&self) -> Result<PathBuf, FlowError> {
        Ok(carver_arch::cache_dir(self.cache_dir.as_deref())?)
    }

    /// The cache directory when one can be named; read-only flows work without it.
    pub(crate) fn cache_dir_if_any(&self) -> Option<PathBuf> {
        carver_arch::cache_dir(self.cache_dir.as_deref()).ok()
    }
}
