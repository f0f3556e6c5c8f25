//! The hardware model as front ends ask for it: list, show, resolve the GPUs to plan for, and
//! (with the `gpu` feature) detect and calibrate this machine's GPUs.

use carver_arch::{Arch, CalibrationStore, HardwareDb};
use carver_schema::{
    ArchDescription, ArchList, ArchReport, ArchSummary, CalibrateReport, DetectReport,
    SCHEMA_VERSION,
};

use crate::{FlowError, Locations, Progress};

/// A GPU to plan for: one from the hardware database, or this machine's, queried live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchChoice {
    /// A key, name or alias from the hardware database (`h100`, "NVIDIA H100 80GB HBM3").
    Named(String),
    /// This machine's first GPU (needs the `gpu` feature and a driver).
    Auto,
}

impl ArchChoice {
    /// `auto` (any case) for this machine's GPU, else a database name.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if text.eq_ignore_ascii_case("auto") {
            Self::Auto
        } else {
            Self::Named(text.to_string())
        }
    }
}

/// Every GPU in the hardware database (shipped plus the user's directory).
pub fn list(loc: &Locations) -> Result<ArchList, FlowError> {
    let db = loc.hardware_db()?;
    Ok(ArchList {
        schema_version: SCHEMA_VERSION,
        gpus: db.iter().map(ArchSummary::from).collect(),
    })
}

/// One GPU's full model, with its stored calibration applied; a stored calibration that fails
/// its checks is reported through `progress` and left out.
pub fn show(loc: &Locations, name: &str, progress: &dyn Progress) -> Result<ArchReport, FlowError> {
    Ok(ArchReport {
        schema_version: SCHEMA_VERSION,
        arch: ArchDescription::from(&resolve_named(
            loc,
            &loc.hardware_db()?,
            name,
            &mut Warnings(progress, Vec::new()),
        )?),
    })
}

/// The models to plan for, in the order given, each with its stored calibration; a stored
/// calibration that fails its checks is reported through `progress` and left out.
pub fn resolve(
    loc: &Locations,
    choices: &[ArchChoice],
    progress: &dyn Progress,
) -> Result<Vec<Arch>, FlowError> {
    // One warning per bad file, however many GPUs it was read for; the database read once.
    let mut warnings = Warnings(progress, Vec::new());
    let db = loc.hardware_db()?;
    choices
        .iter()
        .map(|choice| match choice {
            ArchChoice::Named(name) => resolve_named(loc, &db, name, &mut warnings),
            ArchChoice::Auto => detect_for_planning(loc, &db, &mut warnings),
        })
        .collect()
}

/// Warnings about ignored calibration files, each given once.
struct Warnings<'a>(&'a dyn Progress, Vec<String>);

impl Warnings<'_> {
    fn ignored(&mut self, ignored: &[String]) {
        for why in ignored {
            if !self.1.contains(why) {
                warn_ignored(self.0, std::slice::from_ref(why));
                self.1.push(why.clone());
            }
        }
    }
}

/// The database entry for `name`, with the newest good calibration of that GPU applied.
fn resolve_named(
    loc: &Locations,
    db: &HardwareDb,
    name: &str,
    warnings: &mut Warnings,
) -> Result<Arch, FlowError> {
    let mut arch = db.get(name)?.clone();
    if let Some(dir) = loc.cache_dir_if_any() {
        let lookup = CalibrationStore::new(&dir).for_entry(&arch);
        let ignored: Vec<String> = lookup.ignored.iter().map(ToString::to_string).collect();
        warnings.ignored(&ignored);
        arch.calibration = lookup.calibration;
    }
    Ok(arch)
}

/// Tells the user about calibration files that were not used, and what that means.
pub(crate) fn warn_ignored(progress: &dyn Progress, ignored: &[String]) {
    for why in ignored {
        progress.warning(&format!(
            "calibration file ignored, the model uses the hardware description's figures \
             instead (run `carver arch calibrate` again, or delete the file): {why}"
        ));
    }
}

/// `auto`: the model of this machine's first GPU, queried live, with its calibration.
#[cfg(feature = "gpu")]
fn detect_for_planning(
    loc: &Locations,
    db: &HardwareDb,
    warnings: &mut Warnings,
) -> Result<Arch, FlowError> {
    let cache = loc.cache_dir_if_any();
    let gpu = carver_gpu::detect(db, 0, cache.as_deref())?;
    warnings.ignored(&gpu.calibration_ignored);
    Ok(gpu.arch)
}

#[cfg(not(feature = "gpu"))]
fn detect_for_planning(
    _loc: &Locations,
    _db: &HardwareDb,
    _warnings: &mut Warnings,
) -> Result<Arch, FlowError> {
    Err(FlowError::NoGpuSupport {
        what: "--arch auto (live GPU detection)",
    })
}

/// Every GPU of this machine, modelled and matched to the hardware database; a stored
/// calibration that fails its checks is reported through `progress` and left out.
pub fn detect(loc: &Locations, progress: &dyn Progress) -> Result<DetectReport, FlowError> {
    #[cfg(feature = "gpu")]
    {
        let db = loc.hardware_db()?;
        let cache_dir = loc.cache_dir()?;
        let gpus = carver_gpu::detect_all(&db, Some(&cache_dir))?;
        for gpu in &gpus {
            warn_ignored(progress, &gpu.calibration_ignored);
        }
        Ok(DetectReport {
            schema_version: SCHEMA_VERSION,
            gpus: gpus.iter().map(Into::into).collect(),
        })
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (loc, progress);
        Err(FlowError::NoGpuSupport {
            what: "GPU detection (`carver arch detect`)",
        })
    }
}

/// Measures GPU `device`'s ceilings (DRAM, L2 and shared-memory bandwidth, tensor throughput)
/// and stores them under its UUID, so the model uses them from then on.
pub fn calibrate(
    loc: &Locations,
    device: usize,
    progress: &dyn Progress,
) -> Result<CalibrateReport, FlowError> {
    #[cfg(feature = "gpu")]
    {
        let db = loc.hardware_db()?;
        let store = CalibrationStore::new(&loc.cache_dir()?);
        let mut on_step = |step: carver_gpu::Step| {
            progress.calibration_step(&crate::progress::CalibrationStep {
                index: step.index,
                total: step.total,
                label: step.label.to_string(),
            });
        };
        let outcome = carver_gpu::calibrate(
            &db,
            device,
            &carver_gpu::CalibrationOptions::default(),
            &mut on_step,
        );
        progress.calibration_finished();
        let outcome = outcome?;
        // A measurement that went wrong (a NaN, a unit slip) must not become the model's figure.
        outcome.calibration.check_against(
            &outcome.device.arch,
            &format!(
                "the calibration just measured on device {} ({})",
                outcome.device.index, outcome.device.name
            ),
        )?;
        let path = store.save(&outcome.calibration)?;
        Ok(CalibrateReport {
            schema_version: SCHEMA_VERSION,
            device_index: outcome.device.index as u64,
            device_name: outcome.device.name.clone(),
            uuid: outcome.device.uuid.clone(),
            matched: outcome.device.matched.clone(),
            stored_at: path.display().to_string(),
            figures: outcome.figures.iter().map(Into::into).collect(),
            calibration: (&outcome.calibration).into(),
        })
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (loc, device, progress);
        Err(FlowError::NoGpuSupport {
            what: "calibration (`carver arch calibrate`)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Silent;

    #[test]
    fn auto_is_recognised_in_any_case_and_names_are_trimmed() {
        assert_eq!(ArchChoice::parse(" AUTO "), ArchChoice::Auto);
        assert_eq!(ArchChoice::parse(" h100"), ArchChoice::Named("h100".into()));
    }

    #[test]
    fn unknown_names_say_what_exists() {
        let loc = Locations {
            hardware_db: None,
            cache_dir: Some(tempfile::tempdir().unwrap().path().to_path_buf()),
        };
        let err = resolve(&loc, &[ArchChoice::parse("h1000")], &Silent).unwrap_err();
        assert!(err.to_string().contains("h100"), "{err}");
        assert_eq!(
            resolve(&loc, &[ArchChoice::parse("h100")], &Silent)
                .unwrap()
                .len(),
            1
        );
    }
}
