//! Turning what a device reports into a complete [`Arch`]: start from the matching database entry
//! (or from the compute-capability generation when there is none), then let every figure the device
//! reported replace the stored one.

use std::collections::BTreeMap;

use carver_arch::{
    Arch, ArchError, ArchField, CalibrationStore, ComputeClass, DERIVED_TOLERANCE, DeviceMemory,
    GpuIdentity, HardwareDb, L2Cache, Multiprocessor, Origin, Peak, RegisterFile, SharedMemory,
    throughput_tflops, validate,
};

use crate::error::GpuError;
use crate::generation::{Generation, generation_for};
use crate::query::{DriverQuery, NvmlQuery, format_cuda_version};

/// L2 bandwidth of a GPU with no database entry, as a multiple of its DRAM bandwidth (public
/// microbenchmarks of A100 and H100 read L2 at roughly 2.5x their HBM bandwidth).
pub const L2_TO_DRAM_ESTIMATE: f64 = 2.5;

/// A bus this wide or wider is HBM (GDDR boards top out at 512 bits).
const HBM_MIN_BUS_BITS: u32 = 1024;

/// Every figure [`merge_live`] takes from the device; they are never estimates, whatever the
/// database entry said.
pub const LIVE_FIELDS: &[ArchField] = &[
    ArchField::GpuName,
    ArchField::GpuComputeCapability,
    ArchField::SmCount,
    ArchField::SmWarpSize,
    ArchField::SmBoostClock,
    ArchField::SmMaxThreads,
    ArchField::SmMaxBlocks,
    ArchField::SmMaxThreadsPerBlock,
    ArchField::RegistersPerSm,
    ArchField::RegistersPerBlock,
    ArchField::SharedMemoryPerSm,
    ArchField::SharedMemoryPerBlockDefault,
    ArchField::SharedMemoryPerBlockOptin,
    ArchField::SharedMemoryReservedPerBlock,
    ArchField::MemoryCapacity,
    ArchField::MemoryBusWidth,
    ArchField::MemoryClock,
    ArchField::MemoryBandwidth,
    ArchField::L2Size,
];

/// The model of one live device.
#[derive(Clone, Debug)]
pub struct LiveArch {
    pub arch: Arch,
    /// Key of the database entry the device matched, if any.
    pub matched: Option<String>,
}

/// Builds the model of a device from its driver and NVML answers.
pub fn merge_live(
    db: &HardwareDb,
    driver: &DriverQuery,
    nvml: &NvmlQuery,
) -> Result<LiveArch, GpuError> {
    let cc = driver.compute_capability;
    let base = db
        .match_device(&driver.name, cc)
        .or_else(|| db.match_device(&nvml.name, cc));
    let matched = base.map(|a| a.gpu.key.clone());
    let mut arch = match base {
        Some(entry) => entry.clone(),
        None => estimate_unknown(driver, live_boost_clock(driver, nvml)),
    };
    let stored_boost = arch.sm.boost_clock_mhz;
    apply_live_figures(&mut arch, driver, nvml);
    reconcile_clocks(&mut arch, stored_boost);
    reconcile_peaks(&mut arch);
    if arch.l2.bandwidth_bytes_per_s < arch.memory.bandwidth_bytes_per_s {
        // The stored L2 figure was written for a slower memory than this board has.
        arch.l2.bandwidth_bytes_per_s = L2_TO_DRAM_ESTIMATE * arch.memory.bandwidth_bytes_per_s;
        arch.estimated.insert(ArchField::L2Bandwidth);
    }
    arch.gpu.sources.push(format!(
        "Live query of {} ({}) through the CUDA driver (CUDA {}) and NVML (driver {})",
        driver.name,
        driver.uuid,
        format_cuda_version(driver.cuda_driver_version),
        nvml.driver_version
    ));
    arch.origin = Origin::Live {
        uuid: driver.uuid.clone(),
        base: matched.clone(),
    };
    arch.calibration = None;
    validate(
        &arch,
        &format!(
            "live device {} ({}, as the CUDA driver and NVML report it)",
            driver.index, driver.name
        ),
        None,
    )?;
    Ok(LiveArch { arch, matched })
}

/// Applies the calibration stored for the device's UUID, when there is one and it passes the
/// checks against the device's model. Returns why a stored file was not used: a calibration is
/// optional, so a bad one costs only its figures, and the caller reports it.
pub fn attach_calibration(arch: &mut Arch, uuid: &str, store: &CalibrationStore) -> Vec<ArchError> {
    arch.calibration = None;
    let lookup = store.for_device(uuid, arch);
    arch.calibration = lookup.calibration;
    lookup.ignored
}

fn apply_live_figures(arch: &mut Arch, d: &DriverQuery, nvml: &NvmlQuery) {
    arch.gpu.name = d.name.clone();
    arch.gpu.compute_capability = d.compute_capability;
    let sm = &mut arch.sm;
    sm.count = d.sm_count;
    sm.warp_size = d.warp_size;
    sm.boost_clock_mhz = live_boost_clock(d, nvml);
    sm.max_threads = d.max_threads_per_sm;
    sm.max_blocks = d.max_blocks_per_sm;
    sm.max_threads_per_block = d.max_threads_per_block;
    arch.registers.per_sm = d.registers_per_sm;
    arch.registers.per_block = d.registers_per_block;
    let s = &mut arch.shared_memory;
    s.per_sm_bytes = d.shared_memory_per_sm_bytes;
    s.per_block_default_bytes = d.shared_memory_per_block_default_bytes;
    s.per_block_optin_bytes = d.shared_memory_per_block_optin_bytes;
    s.reserved_per_block_bytes = d.shared_memory_reserved_per_block_bytes;
    let m = &mut arch.memory;
    m.capacity_bytes = d.total_memory_bytes;
    m.bus_width_bits = d.memory_bus_width_bits;
    m.memory_clock_mhz = d.memory_clock_mhz;
    m.bandwidth_bytes_per_s =
        DeviceMemory::bandwidth_from_clock(d.memory_clock_mhz, d.memory_bus_width_bits);
    arch.l2.size_bytes = d.l2_size_bytes;
    for field in LIVE_FIELDS {
        arch.estimated.remove(field);
    }
}

/// The maximum SM clock. NVML and the driver report the same figure; NVML's is the one
/// `nvidia-smi` shows, and the driver's stands in where NVML has none.
fn live_boost_clock(d: &DriverQuery, nvml: &NvmlQuery) -> f64 {
    if nvml.max_sm_clock_mhz > 0 {
        f64::from(nvml.max_sm_clock_mhz)
    } else {
        d.max_sm_clock_mhz
    }
}

/// Keeps the stored clock assumptions consistent with the boost clock the device reported.
fn reconcile_clocks(arch: &mut Arch, stored_boost: f64) {
    let boost = arch.sm.boost_clock_mhz;
    if arch.sm.sustained_clock_mhz > boost {
        arch.sm.sustained_clock_mhz = boost;
        arch.estimated.insert(ArchField::SmSustainedClock);
    }
    for (class, peak) in &mut arch.peak {
        let Some(clock) = peak.clock_mhz else {
            continue;
        };
        // A peak the entry quoted at its boost clock holds at this board's boost clock instead;
        // none can hold above it.
        let quoted_at_boost = (clock - stored_boost).abs() < 0.5;
        if (quoted_at_boost || clock > boost) && (clock - boost).abs() >= 0.5 {
            peak.clock_mhz = Some(boost);
            arch.estimated.insert(ArchField::Peak(*class));
        }
    }
}

/// Recomputes any peak that no longer agrees with the live SM count and clocks.
fn reconcile_peaks(arch: &mut Arch) {
    let Arch {
        sm,
        peak: peaks,
        estimated,
        ..
    } = arch;
    for (class, peak) in peaks.iter_mut() {
        if let Some(derived) = peak.derived_tflops(*class, sm) {
            if (peak.tflops - derived).abs() > DERIVED_TOLERANCE * derived {
                peak.tflops = derived;
                estimated.insert(ArchField::Peak(*class));
            }
        }
    }
}

/// A lower-case key made of the device name (`"NVIDIA RTX A6000"` -> `"rtx-a6000"`).
pub fn key_from_name(name: &str) -> String {
    let mut key = String::new();
    for word in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.is_empty() || (key.is_empty() && word.eq_ignore_ascii_case("nvidia")) {
            continue;
        }
        if !key.is_empty() {
            key.push('-');
        }
        key.push_str(&word.to_ascii_lowercase());
    }
    if key.is_empty() {
        "unknown-gpu".into()
    } else {
        key
    }
}

/// A complete model for a device with no database entry. Figures the device reports are filled
/// in afterwards by [`apply_live_figures`]; the rest come from the compute-capability generation and
/// are listed in `estimated`.
fn estimate_unknown(d: &DriverQuery, boost: f64) -> Arch {
    let (generation, exact) = generation_for(d.compute_capability);
    let dram = DeviceMemory::bandwidth_from_clock(d.memory_clock_mhz, d.memory_bus_width_bits);
    let mut estimated = vec![
        ArchField::SmSustainedClock,
        ArchField::SmTensorCores,
        ArchField::SharedMemoryBytesPerClockPerSm,
        ArchField::MemoryKind,
        ArchField::L2Bandwidth,
    ];
    if !exact {
        estimated.push(ArchField::GpuArchitecture);
    }
    if !generation.instructions.is_empty() {
        estimated.push(ArchField::TensorInstructions);
    }
    let peak = generation_peaks(generation, d.sm_count, boost);
    estimated.extend(peak.keys().map(|&c| ArchField::Peak(c)));
    let mut sources = vec![format!(
        "No hardware-db entry matched; figures the device does not report are estimated from the \
         compute capability {} generation table in carver-gpu ({})",
        d.compute_capability,
        if exact {
            format!("a row written for {}", generation.architecture)
        } else {
            format!(
                "no row for this capability: the {} row stands in",
                generation.architecture
            )
        }
    )];
    sources.push(format!(
        "L2 bandwidth estimated as {L2_TO_DRAM_ESTIMATE}x the DRAM bandwidth; replace by `carver arch calibrate`"
    ));
    Arch {
        gpu: GpuIdentity {
            key: key_from_name(&d.name),
            name: d.name.clone(),
            aliases: Vec::new(),
            vendor: "nvidia".into(),
            architecture: generation.architecture.into(),
            compute_capability: d.compute_capability,
            sources,
        },
        sm: Multiprocessor {
            count: d.sm_count,
            warp_size: d.warp_size,
            boost_clock_mhz: boost,
            // Vendor peaks of most boards are quoted at the boost clock.
            sustained_clock_mhz: boost,
            max_threads: d.max_threads_per_sm,
            max_blocks: d.max_blocks_per_sm,
            max_threads_per_block: d.max_threads_per_block,
            tensor_cores: generation.tensor_cores_per_sm,
        },
        // Per-thread limit and allocation unit are the same for every capability since 5.0
        // (CUDA C++ Programming Guide, technical specifications per compute capability).
        registers: RegisterFile {
            per_sm: d.registers_per_sm,
            per_block: d.registers_per_block,
            per_thread_max: 255,
            allocation_unit: 256,
        },
        shared_memory: SharedMemory {
            per_sm_bytes: d.shared_memory_per_sm_bytes,
            per_block_default_bytes: d.shared_memory_per_block_default_bytes,
            per_block_optin_bytes: d.shared_memory_per_block_optin_bytes,
            reserved_per_block_bytes: d.shared_memory_reserved_per_block_bytes,
            banks: 32,
            bank_width_bytes: 4,
            bytes_per_clock_per_sm: 128,
        },
        memory: DeviceMemory {
            kind: if d.memory_bus_width_bits >= HBM_MIN_BUS_BITS {
                "HBM"
            } else {
                "GDDR"
            }
            .into(),
            capacity_bytes: d.total_memory_bytes,
            bus_width_bits: d.memory_bus_width_bits,
            memory_clock_mhz: d.memory_clock_mhz,
            bandwidth_bytes_per_s: dram,
            sector_bytes: 32,
            line_bytes: 128,
            segment_efficiency: Vec::new(),
        },
        l2: L2Cache {
            size_bytes: d.l2_size_bytes,
            bandwidth_bytes_per_s: L2_TO_DRAM_ESTIMATE * dram,
            request_coalescing: None,
        },
        tensor_instructions: generation
            .instructions
            .iter()
            .map(|i| i.to_instruction())
            .collect(),
        peak,
        estimated: estimated.into_iter().collect(),
        origin: Origin::Unknown,
        calibration: None,
    }
}

/// The dense peaks of a generation's rates on `sm_count` SMs at `clock_mhz`.
fn generation_peaks(
    generation: &Generation,
    sm_count: u32,
    clock_mhz: f64,
) -> BTreeMap<ComputeClass, Peak> {
    let sms = f64::from(sm_count);
    let tensor_cores = sms * f64::from(generation.tensor_cores_per_sm);
    let mut peaks = BTreeMap::new();
    for &(class, rate) in generation.tensor_rates {
        let peak = Peak {
            tflops: throughput_tflops(tensor_cores, rate, clock_mhz),
            flops_per_clock_per_tensor_core: Some(rate),
            flops_per_clock_per_sm: None,
            clock_mhz: None,
        };
        peaks.insert(class, peak);
    }
    for (class, rate) in [
        (ComputeClass::Fp32, generation.fp32_per_clock_per_sm),
        (ComputeClass::Fp64, generation.fp64_per_clock_per_sm),
    ] {
        let peak = Peak {
            tflops: throughput_tflops(sms, rate, clock_mhz),
            flops_per_clock_per_tensor_core: None,
            flops_per_clock_per_sm: Some(rate),
            clock_mhz: None,
        };
        peaks.insert(class, peak);
    }
    peaks
}
