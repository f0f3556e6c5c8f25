//! The hardware database: the descriptions shipped in the binary, plus a user's own directory.

use std::fs;
use std::path::Path;

use crate::error::ArchError;
use crate::model::{Arch, ComputeCapability, Origin, normalize_name};
use crate::paths::HARDWARE_DB_ENV;
use crate::validate::validate;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_db.rs"));
}

/// Parses and validates one description. `label` names it in errors (a path or an embedded
/// file name); `stem`, when given, must equal the key.
pub fn parse_arch(label: &str, stem: Option<&str>, text: &str) -> Result<Arch, ArchError> {
    let arch: Arch = toml::from_str(text).map_err(|e| ArchError::Parse {
        path: label.to_string(),
        reason: e.to_string(),
    })?;
    validate(&arch, label, stem)?;
    Ok(arch)
}

/// Every GPU carver knows, by key.
#[derive(Clone, Debug)]
pub struct HardwareDb {
    entries: Vec<Arch>,
}

impl HardwareDb {
    /// Only the descriptions shipped inside the binary.
    pub fn embedded() -> Result<Self, ArchError> {
        let mut entries = Vec::with_capacity(embedded::EMBEDDED.len());
        for (file, text) in embedded::EMBEDDED {
            let stem = file.strip_suffix(".toml");
            let mut arch = parse_arch(&format!("hardware-db/{file}"), stem, text)?;
            arch.origin = Origin::Embedded {
                file: file.to_string(),
            };
            entries.push(arch);
        }
        entries.sort_by(|a, b| a.gpu.key.cmp(&b.gpu.key));
        Ok(Self { entries })
    }

    /// The shipped descriptions, then `user_dir` (or `$CARVER_HARDWARE_DB` when `user_dir` is
    /// `None`) on top: a user file with a shipped key replaces that entry, others are added.
    pub fn load(user_dir: Option<&Path>) -> Result<Self, ArchError> {
        let mut db = Self::embedded()?;
        // A blank variable is an unset one (an empty shell expansion), not a path.
        let from_env =
            std::env::var_os(HARDWARE_DB_ENV).filter(|v| !v.to_string_lossy().trim().is_empty());
        if let Some(dir) = user_dir.map(Path::to_path_buf).or(from_env.map(Into::into)) {
            db.add_dir(&dir)?;
        }
        Ok(db)
    }

    /// Adds or replaces entries from every `*.toml` file of `dir`.
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), ArchError> {
        if !dir.is_dir() {
            return Err(ArchError::MissingDbDir {
                path: dir.display().to_string(),
            });
        }
        let listing = fs::read_dir(dir).map_err(|e| ArchError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        let mut files: Vec<_> = listing
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for path in files {
            let label = path.display().to_string();
            let text = fs::read_to_string(&path).map_err(|e| ArchError::Io {
                path: label.clone(),
                source: e,
            })?;
            let stem = path.file_stem().and_then(|s| s.to_str());
            let mut arch = parse_arch(&label, stem, &text)?;
            arch.origin = Origin::UserFile { path: label };
            self.insert(arch);
        }
        Ok(())
    }

    /// Adds an entry, replacing one with the same key.
    pub fn insert(&mut self, arch: Arch) {
        match self
            .entries
            .binary_search_by(|a| a.gpu.key.cmp(&arch.gpu.key))
        {
            Ok(i) => self.entries[i] = arch,
            Err(i) => self.entries.insert(i, arch),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arch> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn keys(&self) -> Vec<String> {
        self.entries.iter().map(|a| a.gpu.key.clone()).collect()
    }

    /// Looks a GPU up by key, name or alias; an unknown name gets the known keys and the
    /// closest match.
    pub fn get(&self, name: &str) -> Result<&Arch, ArchError> {
        self.entries
            .iter()
            .find(|a| a.answers_to(name))
            .ok_or_else(|| self.unknown(name))
    }

    fn unknown(&self, name: &str) -> ArchError {
        let want = normalize_name(name);
        let want = want.as_str();
        let closest = self
            .entries
            .iter()
            .flat_map(|a| {
                std::iter::once(&a.gpu.key)
                    .chain(a.gpu.aliases.iter())
                    .map(move |n| (strsim::jaro_winkler(want, &normalize_name(n)), &a.gpu.key))
            })
            .max_by(|x, y| x.0.total_cmp(&y.0))
            .filter(|(score, _)| *score > 0.7)
            .map(|(_, key)| key.clone());
        ArchError::UnknownGpu {
            name: name.to_string(),
            closest,
            known: self.keys(),
        }
    }

    /// The entry for a GPU reported by the driver: its name must match, and so must the
    /// compute capability.
    pub fn match_device(&self, device_name: &str, cc: ComputeCapability) -> Option<&Arch> {
        self.entries
            .iter()
            .find(|a| a.gpu.compute_capability == cc && a.answers_to(device_name))
    }
}
