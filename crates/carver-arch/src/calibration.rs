//! Ceilings measured on a real GPU (`carver arch calibrate`), stored per device by GPU UUID.
//!
//! The store is one JSON file per UUID under `<cache dir>/calibration/`. Files are written to a
//! temporary name and renamed, so a crash never leaves a half-written calibration behind.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ArchError;
use crate::model::ComputeClass;

/// Version of the calibration file format.
pub const CALIBRATION_FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub format: u32,
    /// GPU UUID as NVML / the driver reports it (`GPU-xxxxxxxx-...`).
    pub uuid: String,
    pub device_name: String,
    /// Database key this device matched, if any.
    #[serde(default)]
    pub base_key: Option<String>,
    #[serde(default)]
    pub driver_version: Option<String>,
    pub carver_version: String,
    /// Seconds since the Unix epoch.
    pub measured_at_unix_s: u64,
    #[serde(default)]
    pub dram_bandwidth_bytes_per_s: Option<f64>,
    #[serde(default)]
    pub l2_bandwidth_bytes_per_s: Option<f64>,
    #[serde(default)]
    pub smem_bandwidth_bytes_per_s: Option<f64>,
    /// Measured dense throughput per compute class, TFLOP/s.
    #[serde(default)]
    pub peak_tflops: BTreeMap<ComputeClass, f64>,
    /// How each figure was measured, by figure name.
    #[serde(default)]
    pub method: BTreeMap<String, String>,
}

/// Calibrations on disk.
#[derive(Clone, Debug)]
pub struct CalibrationStore {
    dir: PathBuf,
}

impl CalibrationStore {
    /// A store under `<cache_dir>/calibration`.
    pub fn new(cache_dir: &Path) -> Self {
        Self {
            dir: cache_dir.join("calibration"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_for(&self, uuid: &str) -> PathBuf {
        let safe: String = uuid
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{safe}.json"))
    }

    pub fn save(&self, calibration: &Calibration) -> Result<PathBuf, ArchError> {
        let io = |path: &Path, e: std::io::Error| ArchError::Io {
            path: path.display().to_string(),
            source: e,
        };
        fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let path = self.path_for(&calibration.uuid);
        let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
        let text = serde_json::to_string_pretty(calibration).expect("calibration serializes");
        fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        Ok(path)
    }

    /// The calibration of one device, if stored.
    pub fn load(&self, uuid: &str) -> Result<Option<Calibration>, ArchError> {
        let path = self.path_for(uuid);
        match fs::read_to_string(&path) {
            Ok(text) => parse(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ArchError::Io {
                path: path.display().to_string(),
                source: e,
            }),
        }
    }

    /// Every stored calibration, newest first. Unreadable files are returned as errors beside
    /// the good ones rather than hiding them.
    pub fn all(&self) -> (Vec<Calibration>, Vec<ArchError>) {
        let mut good = Vec::new();
        let mut bad = Vec::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return (good, bad);
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            match fs::read_to_string(&path) {
                Ok(text) => match parse(&path, &text) {
                    Ok(c) => good.push(c),
                    Err(e) => bad.push(e),
                },
                Err(e) => bad.push(ArchError::Io {
                    path: path.display().to_string(),
                    source: e,
                }),
            }
        }
        good.sort_by_key(|c| std::cmp::Reverse(c.measured_at_unix_s));
        (good, bad)
    }

    /// The newest calibration of any device that matched database entry `key`.
    pub fn newest_for_key(&self, key: &str) -> Option<Calibration> {
        self.all()
            .0
            .into_iter()
            .find(|c| c.base_key.as_deref() == Some(key))
    }
}

fn parse(path: &Path, text: &str) -> Result<Calibration, ArchError> {
    let c: Calibration = serde_json::from_str(text).map_err(|e| ArchError::Calibration {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    if c.format > CALIBRATION_FORMAT {
        return Err(ArchError::Calibration {
            path: path.display().to_string(),
            reason: format!(
                "written by a newer carver (format {}, this carver reads up to {CALIBRATION_FORMAT})",
                c.format
            ),
        });
    }
    Ok(c)
}
