//! Ceilings measured on a real GPU (`carver arch calibrate`), stored per device by GPU UUID.
//!
//! The store is one JSON file per UUID under `<cache dir>/calibration/`. Files are written to a
//! temporary name and renamed, so a crash never leaves a half-written calibration behind.
//!
//! Reading a file checks what needs no description (format, UUID, finite figures of a plausible
//! size); `calibrated.rs` checks the figures against the description they replace.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::check::Check;
use crate::class::ComputeClass;
use crate::error::ArchError;

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
    /// How each figure was measured, by figure name ([`CalibratedFigure`]'s). Names are kept as
    /// text so that a file written by a carver that measures more still loads.
    #[serde(default)]
    pub method: BTreeMap<String, String>,
}

/// A figure `carver arch calibrate` measures, named as its field in a calibration file
/// (`dram_bandwidth_bytes_per_s`, `peak_tflops.bf16`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CalibratedFigure {
    /// `dram_bandwidth_bytes_per_s`
    DramBandwidth,
    /// `l2_bandwidth_bytes_per_s`
    L2Bandwidth,
    /// `smem_bandwidth_bytes_per_s`
    SmemBandwidth,
    /// `peak_tflops.<class>`
    PeakTflops(ComputeClass),
}

const DRAM_BANDWIDTH: &str = "dram_bandwidth_bytes_per_s";
const L2_BANDWIDTH: &str = "l2_bandwidth_bytes_per_s";
const SMEM_BANDWIDTH: &str = "smem_bandwidth_bytes_per_s";
const PEAK_TFLOPS_PREFIX: &str = "peak_tflops.";

impl fmt::Display for CalibratedFigure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DramBandwidth => f.write_str(DRAM_BANDWIDTH),
            Self::L2Bandwidth => f.write_str(L2_BANDWIDTH),
            Self::SmemBandwidth => f.write_str(SMEM_BANDWIDTH),
            Self::PeakTflops(class) => write!(f, "{PEAK_TFLOPS_PREFIX}{class}"),
        }
    }
}

impl FromStr for CalibratedFigure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let unknown = || {
            format!(
                "unknown calibrated figure `{s}` (accepted: {DRAM_BANDWIDTH}, {L2_BANDWIDTH}, \
                 {SMEM_BANDWIDTH}, {PEAK_TFLOPS_PREFIX}<class> with <class> one of {})",
                ComputeClass::ALL.map(|c| c.as_str()).join(", ")
            )
        };
        match s {
            DRAM_BANDWIDTH => Ok(Self::DramBandwidth),
            L2_BANDWIDTH => Ok(Self::L2Bandwidth),
            SMEM_BANDWIDTH => Ok(Self::SmemBandwidth),
            _ => {
                let class = s.strip_prefix(PEAK_TFLOPS_PREFIX).ok_or_else(unknown)?;
                ComputeClass::ALL
                    .into_iter()
                    .find(|c| c.as_str() == class)
                    .map(Self::PeakTflops)
                    .ok_or_else(unknown)
            }
        }
    }
}

impl Serialize for CalibratedFigure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CalibratedFigure {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Calibration {
    /// The measured value of `figure`, when this calibration has one.
    pub fn measured(&self, figure: CalibratedFigure) -> Option<f64> {
        match figure {
            CalibratedFigure::DramBandwidth => self.dram_bandwidth_bytes_per_s,
            CalibratedFigure::L2Bandwidth => self.l2_bandwidth_bytes_per_s,
            CalibratedFigure::SmemBandwidth => self.smem_bandwidth_bytes_per_s,
            CalibratedFigure::PeakTflops(class) => self.peak_tflops.get(&class).copied(),
        }
    }

    /// Every figure this calibration has a measurement of, with the measurement.
    pub fn figures(&self) -> Vec<(CalibratedFigure, f64)> {
        let mut out = Vec::new();
        for (figure, value) in [
            (
                CalibratedFigure::DramBandwidth,
                self.dram_bandwidth_bytes_per_s,
            ),
            (CalibratedFigure::L2Bandwidth, self.l2_bandwidth_bytes_per_s),
            (
                CalibratedFigure::SmemBandwidth,
                self.smem_bandwidth_bytes_per_s,
            ),
        ] {
            out.extend(value.map(|v| (figure, v)));
        }
        for (&class, &value) in &self.peak_tflops {
            out.push((CalibratedFigure::PeakTflops(class), value));
        }
        out
    }

    /// Stores the measured `value` of `figure` and how it was measured.
    pub fn record(&mut self, figure: CalibratedFigure, value: f64, method: String) {
        match figure {
            CalibratedFigure::DramBandwidth => self.dram_bandwidth_bytes_per_s = Some(value),
            CalibratedFigure::L2Bandwidth => self.l2_bandwidth_bytes_per_s = Some(value),
            CalibratedFigure::SmemBandwidth => self.smem_bandwidth_bytes_per_s = Some(value),
            CalibratedFigure::PeakTflops(class) => {
                self.peak_tflops.insert(class, value);
            }
        }
        self.method.insert(figure.to_string(), method);
    }
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

    pub(crate) fn path_for(&self, uuid: &str) -> PathBuf {
        self.dir.join(format!("{}.json", safe_file_stem(uuid)))
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
        let (good, bad) = self.entries();
        (good.into_iter().map(|(_, c)| c).collect(), bad)
    }

    /// Every stored calibration with its file, newest first, and the files that are not
    /// calibrations.
    pub(crate) fn entries(&self) -> (Vec<(PathBuf, Calibration)>, Vec<ArchError>) {
        let mut good = Vec::new();
        let mut bad = Vec::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return (good, bad);
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        // Read in a fixed order, so the warnings about bad files come in the same order.
        paths.sort();
        for path in paths {
            match fs::read_to_string(&path) {
                Ok(text) => match parse(&path, &text) {
                    Ok(c) => good.push((path, c)),
                    Err(e) => bad.push(e),
                },
                Err(e) => bad.push(ArchError::Io {
                    path: path.display().to_string(),
                    source: e,
                }),
            }
        }
        good.sort_by_key(|(_, c)| std::cmp::Reverse(c.measured_at_unix_s));
        (good, bad)
    }
}

/// Reads one calibration file: JSON of the right format, stored under its own UUID, every
/// figure finite and within what any GPU can measure. (How close each lies to the description's
/// figure is `Calibration::check_against`'s part.)
fn parse(path: &Path, text: &str) -> Result<Calibration, ArchError> {
    let label = path.display().to_string();
    let bad = |reason: String| ArchError::Calibration {
        path: label.clone(),
        reason,
    };
    let c: Calibration = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "not a calibration written by `carver arch calibrate` (a JSON object with format, \
             uuid, device_name, carver_version, measured_at_unix_s and the measured figures): {e}"
        ))
    })?;
    let check = Check::new(&label);
    if c.format > CALIBRATION_FORMAT {
        return Err(bad(format!(
            "written by a newer carver (format {}, this carver reads up to {CALIBRATION_FORMAT})",
            c.format
        )));
    }
    check.whole("format", c.format, 1..=CALIBRATION_FORMAT, "")?;
    // The file name is the UUID's: a file under another device's name would calibrate the
    // wrong GPU.
    let expected = safe_file_stem(&c.uuid);
    if c.uuid.trim().is_empty() || path.file_stem().and_then(|s| s.to_str()) != Some(&expected) {
        return Err(check.invalid(
            "uuid",
            format!(
                "is `{}`, but the file is named `{}`; a calibration is stored as \
                 <uuid>.json under the UUID of the GPU it measured",
                c.uuid,
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
        ));
    }
    for (figure, value) in c.figures() {
        // Bounds of any GPU: a peak as a description's, bandwidths from 1 GB/s to 1 PB/s (a whole
        // GPU's shared memory reaches tens of TB/s).
        match figure {
            CalibratedFigure::PeakTflops(_) => {
                check.real(&figure.to_string(), value, 0.01..=100_000.0, "TFLOP/s")?
            }
            _ => check.real(&figure.to_string(), value, 1e9..=1e15, "B/s")?,
        };
    }
    Ok(c)
}

/// A UUID as a file name: letters, digits and dashes kept, anything else `_`.
fn safe_file_stem(uuid: &str) -> String {
    uuid.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Calibration {
        Calibration {
            format: CALIBRATION_FORMAT,
            uuid: "GPU-0".into(),
            device_name: "test".into(),
            base_key: None,
            driver_version: None,
            carver_version: "0".into(),
            measured_at_unix_s: 0,
            dram_bandwidth_bytes_per_s: None,
            l2_bandwidth_bytes_per_s: None,
            smem_bandwidth_bytes_per_s: None,
            peak_tflops: BTreeMap::new(),
            method: BTreeMap::new(),
        }
    }

    #[test]
    fn each_figure_fills_the_field_it_is_named_after() {
        let figures = [
            CalibratedFigure::DramBandwidth,
            CalibratedFigure::L2Bandwidth,
            CalibratedFigure::SmemBandwidth,
            CalibratedFigure::PeakTflops(ComputeClass::Bf16),
            CalibratedFigure::PeakTflops(ComputeClass::F16),
        ];
        let mut c = empty();
        for (i, figure) in figures.into_iter().enumerate() {
            assert_eq!(c.measured(figure), None);
            c.record(figure, i as f64 + 1.0, format!("method {i}"));
            assert_eq!(c.measured(figure), Some(i as f64 + 1.0));
            assert_eq!(figure.to_string().parse(), Ok(figure));
        }
        let json = serde_json::to_value(&c).unwrap();
        for (i, figure) in figures.into_iter().enumerate() {
            let name = figure.to_string();
            // The name is the file's field: a top-level one, or `peak_tflops.<class>`.
            let value = match name.split_once('.') {
                Some((table, key)) => &json[table][key],
                None => &json[name.as_str()],
            };
            assert_eq!(value, &serde_json::json!(i as f64 + 1.0), "{name}");
            assert_eq!(json["method"][name.as_str()], format!("method {i}"));
        }
    }

    #[test]
    fn unknown_figure_names_list_the_accepted_ones() {
        let err = "peak_tflops.fp16".parse::<CalibratedFigure>().unwrap_err();
        assert!(err.contains("`peak_tflops.fp16`"), "{err}");
        assert!(err.contains("dram_bandwidth_bytes_per_s"), "{err}");
        assert!(err.contains("bf16"), "{err}");
    }
}
