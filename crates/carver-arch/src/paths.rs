//! Where carver keeps what it measures: the user's cache directory, never the working directory.

use std::path::{Path, PathBuf};

use crate::error::ArchError;

/// Environment variable that overrides the cache directory.
pub const CACHE_DIR_ENV: &str = "CARVER_CACHE_DIR";
/// Environment variable naming a directory of extra or overriding hardware files.
pub const HARDWARE_DB_ENV: &str = "CARVER_HARDWARE_DB";

/// The cache directory: `explicit` (a `--cache-dir` flag) first, then `$CARVER_CACHE_DIR`, then
/// the platform cache directory (`$XDG_CACHE_HOME/carver` on Linux).
pub fn cache_dir(explicit: Option<&Path>) -> Result<PathBuf, ArchError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    // A blank variable is an unset one (an empty shell expansion), not a path.
    if let Some(p) =
        std::env::var_os(CACHE_DIR_ENV).filter(|p| !p.to_string_lossy().trim().is_empty())
    {
        return Ok(PathBuf::from(p));
    }
    directories::ProjectDirs::from("", "", "carver")
        .map(|d| d.cache_dir().to_path_buf())
        .ok_or(ArchError::NoCacheDir)
}
