use std::path::PathBuf;
use std::sync::OnceLock;

use carver_arch::{HARDWARE_DB_ENV, HardwareDb};

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
    /// The embedded hardware database plus the user's directory (`hardware_db`, else
    /// `$CARVER_HARDWARE_DB`), as `HardwareDb::load` makes it.
    pub fn hardware_db(&self) -> Result<HardwareDb, FlowError> {
        // What the variable means (a blank one is unset) is carver-arch's to decide.
        if self.hardware_db.is_none() && std::env::var_os(HARDWARE_DB_ENV).is_some() {
            return Ok(HardwareDb::load(None)?);
        }
        // Parsing the embedded files takes about 0.4 ms, 30 times a recommendation: a library
        // caller (the Python package) pays it once per process, not per call. They never
        // change; a user's directory is read on every call, as its files may.
        static EMBEDDED: OnceLock<HardwareDb> = OnceLock::new();
        let mut db = match EMBEDDED.get() {
            Some(db) => db.clone(),
            None => {
                let parsed = HardwareDb::embedded()?;
                EMBEDDED.get_or_init(|| parsed).clone()
            }
        };
        if let Some(dir) = &self.hardware_db {
            db.add_dir(dir)?;
        }
        Ok(db)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_is_the_one_load_makes_with_or_without_a_user_directory() {
        let keys = |db: HardwareDb| db.keys();
        let plain = Locations::default();
        for _ in 0..2 {
            // The second call reads the cached embedded files.
            assert_eq!(
                keys(plain.hardware_db().unwrap()),
                keys(HardwareDb::load(None).unwrap())
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let shipped = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../hardware-db/h100-sxm.toml"),
        )
        .unwrap();
        let copy: String = shipped
            .replace("key = \"h100-sxm\"", "key = \"h100-copy\"")
            .lines()
            .filter(|l| !l.starts_with("aliases"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.path().join("h100-copy.toml"), copy).unwrap();
        let user = Locations {
            hardware_db: Some(dir.path().to_path_buf()),
            cache_dir: None,
        };
        let with_user = keys(user.hardware_db().unwrap());
        assert!(with_user.contains(&"h100-copy".to_string()));
        assert_eq!(with_user, keys(HardwareDb::load(Some(dir.path())).unwrap()));
        assert_eq!(
            keys(plain.hardware_db().unwrap()).len() + 1,
            with_user.len()
        );
    }
}
