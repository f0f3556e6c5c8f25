//! A calibration checked against the description it calibrates, and the lookups that find the
//! one to use. A calibration replaces figures the cost model divides by, so each is checked
//! before use: finite, and within [`CALIBRATION_FACTORS`] of the description's own figure. A file
//! that fails is returned as an error beside the lookup's answer, never dropped silently; the
//! model then runs on the description's figures (a calibration is optional).
//!
//! Apart from `calibration.rs` because it reads an [`Arch`], whose model holds a calibration.

use std::ops::RangeInclusive;

use crate::calibration::{CalibratedFigure, Calibration, CalibrationStore};
use crate::check::Check;
use crate::error::ArchError;
use crate::model::Arch;

/// How far a measured figure may lie from the description's figure for the same thing. A busy,
/// throttled or power-capped GPU measures well below its spec sheet, but under 5% of it the
/// measurement itself is broken (a failed run, a unit slip); nothing measures above its physical
/// ceiling, and 2x leaves room for database figures that are estimates (L2 bandwidth).
pub const CALIBRATION_FACTORS: RangeInclusive<f64> = 0.05..=2.0;

impl Calibration {
    /// Checks every measured figure against `arch`, the description whose figures it replaces:
    /// each must be finite and within [`CALIBRATION_FACTORS`] of the description's figure.
    /// `source` names the calibration in errors.
    pub fn check_against(&self, arch: &Arch, source: &str) -> Result<(), ArchError> {
        let c = Check::new(source);
        for (figure, value) in self.figures() {
            let field = figure.to_string();
            let (reference, reference_name, unit) = match figure {
                CalibratedFigure::DramBandwidth => (
                    arch.memory.bandwidth_bytes_per_s,
                    "memory.bandwidth_bytes_per_s".to_string(),
                    "B/s",
                ),
                CalibratedFigure::L2Bandwidth => (
                    arch.l2.bandwidth_bytes_per_s,
                    "l2.bandwidth_bytes_per_s".to_string(),
                    "B/s",
                ),
                CalibratedFigure::SmemBandwidth => (
                    arch.derived_smem_bandwidth(),
                    "the shared-memory bandwidth derived from the description".to_string(),
                    "B/s",
                ),
                CalibratedFigure::PeakTflops(class) => {
                    let Some(peak) = arch.peak.get(&class) else {
                        return Err(c.invalid(
                            &field,
                            format!(
                                "is a measurement of {class}, but {} has no [peak.{class}] \
                                 (accepted: {})",
                                arch.key(),
                                arch.peak
                                    .keys()
                                    .map(|k| format!("peak_tflops.{k}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    };
                    (
                        peak.tflops,
                        format!("{}'s peak.{class}.tflops", arch.key()),
                        "TFLOP/s",
                    )
                }
            };
            c.near(
                &field,
                value,
                reference,
                CALIBRATION_FACTORS,
                &reference_name,
                unit,
            )?;
        }
        Ok(())
    }
}

impl CalibrationStore {
    /// The newest calibration of a device that matched `arch`'s database entry and that passes
    /// [`Calibration::check_against`] `arch`. Every file that could not be used is in `ignored`:
    /// files that are not calibrations, and calibrations of this entry that fail the check.
    pub fn for_entry(&self, arch: &Arch) -> CalibrationLookup {
        let (entries, mut ignored) = self.entries();
        let mut calibration = None;
        for (path, c) in entries {
            if c.base_key.as_deref() != Some(arch.key()) {
                continue;
            }
            match c.check_against(arch, &path.display().to_string()) {
                Ok(()) if calibration.is_none() => calibration = Some(c),
                Ok(()) => {}
                Err(e) => ignored.push(e),
            }
        }
        CalibrationLookup {
            calibration,
            ignored,
        }
    }

    /// The calibration stored for device `uuid`, if it passes [`Calibration::check_against`]
    /// `arch` (the device's model); else the reason in `ignored`.
    pub fn for_device(&self, uuid: &str, arch: &Arch) -> CalibrationLookup {
        let path = self.path_for(uuid).display().to_string();
        let checked = self.load(uuid).and_then(|c| match c {
            Some(c) => c.check_against(arch, &path).map(|()| Some(c)),
            None => Ok(None),
        });
        match checked {
            Ok(calibration) => CalibrationLookup {
                calibration,
                ignored: Vec::new(),
            },
            Err(e) => CalibrationLookup {
                calibration: None,
                ignored: vec![e],
            },
        }
    }
}

/// What a calibration lookup found: the calibration to use, if any, and every file it could not
/// use, with why (each error names its file).
#[derive(Debug, Default)]
pub struct CalibrationLookup {
    pub calibration: Option<Calibration>,
    pub ignored: Vec<ArchError>,
}
