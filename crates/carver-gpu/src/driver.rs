//! Talking to the CUDA driver and NVML: loading them safely and asking for device figures.
//!
//! cudarc loads libcuda, libnvrtc and libcublas lazily and *panics* when one is missing (or lacks
//! a symbol its bindings expect). Every entry point here first checks that the library loads,
//! and runs the calls under [`guarded`], so a machine without a GPU gets a typed error.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use carver_arch::ComputeCapability;
use cudarc::driver::{DriverError, result, sys};
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::error::NvmlError;

use crate::error::GpuError;
use crate::query::{DriverQuery, NvmlQuery, format_uuid};

thread_local! {
    /// Set while this thread runs a [`guarded`] call: its panics become errors, not messages.
    static QUIET_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent for panics raised inside [`guarded`] on the
/// same thread and hands every other panic to the hook that was there before.
fn install_quiet_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic inside a CUDA library binding into [`GpuError::LibraryPanicked`]
/// (cudarc panics when a library or one of its symbols is missing).
pub(crate) fn guarded<T>(
    library: &'static str,
    call: &'static str,
    f: impl FnOnce() -> Result<T, GpuError>,
) -> Result<T, GpuError> {
    install_quiet_hook();
    let was_quiet = QUIET_PANICS.with(|q| q.replace(true));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    QUIET_PANICS.with(|q| q.set(was_quiet));
    match outcome {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(no message)".into());
            Err(GpuError::LibraryPanicked {
                library,
                call,
                message,
            })
        }
    }
}

pub(crate) fn driver_err(call: &'static str) -> impl FnOnce(DriverError) -> GpuError {
    move |source| GpuError::Driver { call, source }
}

fn nvml_err(call: &'static str) -> impl FnOnce(NvmlError) -> GpuError {
    move |source| GpuError::Nvml { call, source }
}

/// Whether libcuda can be loaded at all (no call into it is made).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the candidate library names.
    unsafe { sys::is_culib_present() }
}

/// Loads and initializes the driver and returns the number of devices; no GPU is an error.
pub fn init_driver() -> Result<usize, GpuError> {
    if !driver_present() {
        return Err(GpuError::NoDriver);
    }
    guarded("libcuda", "cuInit", || {
        match result::init() {
            Ok(()) => {}
            Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => {
                return Err(GpuError::NoDevice {
                    reason: "cuInit: CUDA_ERROR_NO_DEVICE".into(),
                });
            }
            Err(e) => {
                return Err(GpuError::Driver {
                    call: "cuInit",
                    source: e,
                });
            }
        }
        let count = result::device::get_count().map_err(driver_err("cuDeviceGetCount"))?;
        if count <= 0 {
            return Err(GpuError::NoDevice {
                reason: "cuDeviceGetCount returned 0".into(),
            });
        }
        Ok(count as usize)
    })
}

/// Every figure the driver reports about device `index` (the driver must be initialized).
pub fn query_driver(index: usize) -> Result<DriverQuery, GpuError> {
    guarded("libcuda", "device query", || query_driver_unguarded(index))
}

fn query_driver_unguarded(index: usize) -> Result<DriverQuery, GpuError> {
    use sys::CUdevice_attribute as A;
    let ordinal = i32::try_from(index)
        .map_err(|_| GpuError::BadQuery(format!("device index {index} is too large")))?;
    let dev = result::device::get(ordinal).map_err(driver_err("cuDeviceGet"))?;
    let attr = |a: A, what: &'static str| -> Result<u32, GpuError> {
        // SAFETY: `dev` is a valid device handle from cuDeviceGet.
        let v = unsafe { result::device::get_attribute(dev, a) }
            .map_err(driver_err("cuDeviceGetAttribute"))?;
        u32::try_from(v).map_err(|_| GpuError::BadQuery(format!("{what} is {v}")))
    };
    let name = result::device::get_name(dev).map_err(driver_err("cuDeviceGetName"))?;
    let raw_uuid = result::device::get_uuid(dev).map_err(driver_err("cuDeviceGetUuid"))?;
    let uuid = format_uuid(&raw_uuid.bytes.map(|b| b as u8));
    // SAFETY: `dev` is valid.
    let total =
        unsafe { result::device::total_mem(dev) }.map_err(driver_err("cuDeviceTotalMem"))?;
    let mut cuda_version = 0;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut cuda_version) }
        .result()
        .map_err(driver_err("cuDriverGetVersion"))?;
    Ok(DriverQuery {
        index,
        name,
        uuid,
        compute_capability: ComputeCapability::new(
            attr(
                A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                "compute capability major",
            )?,
            attr(
                A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                "compute capability minor",
            )?,
        ),
        sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count")?,
        warp_size: attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size")?,
        max_threads_per_sm: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            "threads per SM",
        )?,
        max_blocks_per_sm: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
            "blocks per SM",
        )?,
        max_threads_per_block: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            "threads per block",
        )?,
        shared_memory_per_block_default_bytes: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            "shared memory per block",
        )?
        .into(),
        shared_memory_per_block_optin_bytes: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "opt-in shared memory per block",
        )?
        .into(),
        shared_memory_per_sm_bytes: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            "shared memory per SM",
        )?
        .into(),
        shared_memory_reserved_per_block_bytes: attr(
            A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
            "reserved shared memory per block",
        )?
        .into(),
        registers_per_sm: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
            "registers per SM",
        )?,
        registers_per_block: attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
            "registers per block",
        )?,
        l2_size_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")?.into(),
        memory_clock_mhz: f64::from(attr(
            A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
            "memory clock",
        )?) / 1000.0,
        memory_bus_width_bits: attr(
            A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
            "memory bus width",
        )?,
        max_sm_clock_mhz: f64::from(attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "SM clock")?) / 1000.0,
        total_memory_bytes: total as u64,
        cuda_driver_version: cuda_version,
    })
}

/// Opens NVML; a machine without it gets [`GpuError::NoNvml`].
pub fn open_nvml() -> Result<Nvml, GpuError> {
    guarded("libnvidia-ml", "nvmlInit", || {
        Nvml::init().map_err(|e| GpuError::NoNvml {
            reason: e.to_string(),
        })
    })
}

/// NVML's figures for the device with this UUID.
pub fn query_nvml(nvml: &Nvml, uuid: &str) -> Result<NvmlQuery, GpuError> {
    guarded("libnvidia-ml", "device query", || {
        let device = nvml
            .device_by_uuid(uuid)
            .map_err(nvml_err("nvmlDeviceGetHandleByUUID"))?;
        let power_limit_w = match device.enforced_power_limit() {
            Ok(milliwatts) => Some(f64::from(milliwatts) / 1000.0),
            // Some boards do not report one; the output says so rather than inventing a figure.
            Err(NvmlError::NotSupported) => None,
            Err(e) => return Err(nvml_err("nvmlDeviceGetEnforcedPowerLimit")(e)),
        };
        Ok(NvmlQuery {
            name: device.name().map_err(nvml_err("nvmlDeviceGetName"))?,
            uuid: device.uuid().map_err(nvml_err("nvmlDeviceGetUUID"))?,
            driver_version: nvml
                .sys_driver_version()
                .map_err(nvml_err("nvmlSystemGetDriverVersion"))?,
            max_sm_clock_mhz: device
                .max_clock_info(Clock::SM)
                .map_err(nvml_err("nvmlDeviceGetMaxClockInfo(SM)"))?,
            max_memory_clock_mhz: device
                .max_clock_info(Clock::Memory)
                .map_err(nvml_err("nvmlDeviceGetMaxClockInfo(MEM)"))?,
            power_limit_w,
        })
    })
}
