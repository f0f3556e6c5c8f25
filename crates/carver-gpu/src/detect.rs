//! `carver arch detect`: every GPU of this machine, modelled and matched to the database.

use std::path::Path;

use carver_arch::{Arch, CalibrationStore, HardwareDb};
use serde::Serialize;

use crate::driver::{init_driver, open_nvml, query_driver, query_nvml};
use crate::error::GpuError;
use crate::live::{attach_calibration, merge_live};
use crate::query::{DriverQuery, NvmlQuery, format_cuda_version};

/// One GPU of this machine.
#[derive(Clone, Debug, Serialize)]
pub struct DetectedGpu {
    /// CUDA device ordinal.
    pub index: usize,
    pub name: String,
    pub uuid: String,
    /// Kernel-mode driver version from NVML (`580.159.04`).
    pub driver_version: String,
    /// CUDA version the driver supports (`13.0`).
    pub cuda_driver_version: String,
    /// Enforced power limit, when the board reports one.
    pub power_limit_w: Option<f64>,
    /// Database entry the device matched (by name and compute capability), if any.
    pub matched: Option<String>,
    /// The model: the matched entry with every figure the device reported put in (or an
    /// estimate when nothing matched), and the stored calibration when there is one.
    pub arch: Arch,
    /// Why a stored calibration of this device was not applied (each message names its file);
    /// empty when it was, or when there is none.
    #[serde(skip)]
    pub calibration_ignored: Vec<String>,
    /// The raw answers the model was built from.
    pub driver_query: DriverQuery,
    pub nvml_query: NvmlQuery,
}

/// Number of CUDA devices; an error when there is no driver or no device.
pub fn device_count() -> Result<usize, GpuError> {
    init_driver()
}

/// Detects every GPU. `cache_dir`, when given, is where stored calibrations are looked up.
pub fn detect_all(db: &HardwareDb, cache_dir: Option<&Path>) -> Result<Vec<DetectedGpu>, GpuError> {
    let count = init_driver()?;
    let nvml = open_nvml()?;
    (0..count)
        .map(|i| detect_one(db, &nvml, i, cache_dir))
        .collect()
}

/// Detects GPU `index`.
pub fn detect(
    db: &HardwareDb,
    index: usize,
    cache_dir: Option<&Path>,
) -> Result<DetectedGpu, GpuError> {
    let count = init_driver()?;
    if index >= count {
        return Err(GpuError::NoSuchDevice { index, count });
    }
    let nvml = open_nvml()?;
    detect_one(db, &nvml, index, cache_dir)
}

/// The model of GPU `index` with its stored calibration applied: what `--arch auto` plans for.
/// A stored calibration that fails its checks is left out; [`detect`] says why.
pub fn detect_arch(
    db: &HardwareDb,
    index: usize,
    cache_dir: Option<&Path>,
) -> Result<Arch, GpuError> {
    detect(db, index, cache_dir).map(|d| d.arch)
}

fn detect_one(
    db: &HardwareDb,
    nvml: &nvml_wrapper::Nvml,
    index: usize,
    cache_dir: Option<&Path>,
) -> Result<DetectedGpu, GpuError> {
    let driver_query = query_driver(index)?;
    let nvml_query = query_nvml(nvml, &driver_query.uuid)?;
    let live = merge_live(db, &driver_query, &nvml_query)?;
    let mut arch = live.arch;
    let calibration_ignored = match cache_dir {
        Some(dir) => attach_calibration(&mut arch, &driver_query.uuid, &CalibrationStore::new(dir))
            .iter()
            .map(ToString::to_string)
            .collect(),
        None => Vec::new(),
    };
    Ok(DetectedGpu {
        index,
        name: driver_query.name.clone(),
        uuid: driver_query.uuid.clone(),
        driver_version: nvml_query.driver_version.clone(),
        cuda_driver_version: format_cuda_version(driver_query.cuda_driver_version),
        power_limit_w: nvml_query.power_limit_w,
        matched: live.matched,
        arch,
        calibration_ignored,
        driver_query,
        nvml_query,
    })
}
