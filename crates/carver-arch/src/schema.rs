//! Conversions from the hardware model into its JSON form in `carver_schema`
//! (`carver arch show`, `carver arch list`, and the models inside detect and calibrate).
//!
//! Field for field, so the JSON matches what the model's own serde form printed; the model's
//! types stay free to change without moving the schema.

use carver_schema::{self as schema, ArchDescription, ArchSummary};

use crate::calibration::Calibration;
use crate::model::{
    Arch, ComputeClass, DeviceMemory, Extent, GpuIdentity, InstructionFamily, L2Cache,
    Multiprocessor, Origin, Peak, RegisterFile, SharedMemory, StepRange, TensorInstruction,
};

impl From<InstructionFamily> for schema::InstructionFamily {
    fn from(f: InstructionFamily) -> Self {
        match f {
            InstructionFamily::MmaSync => Self::MmaSync,
            InstructionFamily::Wgmma => Self::Wgmma,
            InstructionFamily::Tcgen05 => Self::Tcgen05,
        }
    }
}

impl From<ComputeClass> for schema::ComputeClass {
    fn from(c: ComputeClass) -> Self {
        match c {
            ComputeClass::F16 => Self::F16,
            ComputeClass::Bf16 => Self::Bf16,
            ComputeClass::Tf32 => Self::Tf32,
            ComputeClass::Fp8 => Self::Fp8,
            ComputeClass::Int8 => Self::Int8,
            ComputeClass::Fp32 => Self::Fp32,
            ComputeClass::Fp64 => Self::Fp64,
        }
    }
}

impl From<&Origin> for schema::Origin {
    fn from(o: &Origin) -> Self {
        match o {
            Origin::Unknown => Self::Unknown,
            Origin::Embedded { file } => Self::Embedded { file: file.clone() },
            Origin::UserFile { path } => Self::UserFile { path: path.clone() },
            Origin::Live { uuid, base } => Self::Live {
                uuid: uuid.clone(),
                base: base.clone(),
            },
        }
    }
}

impl From<&Calibration> for schema::Calibration {
    fn from(c: &Calibration) -> Self {
        Self {
            format: c.format,
            uuid: c.uuid.clone(),
            device_name: c.device_name.clone(),
            base_key: c.base_key.clone(),
            driver_version: c.driver_version.clone(),
            carver_version: c.carver_version.clone(),
            measured_at_unix_s: c.measured_at_unix_s,
            dram_bandwidth_bytes_per_s: c.dram_bandwidth_bytes_per_s,
            l2_bandwidth_bytes_per_s: c.l2_bandwidth_bytes_per_s,
            smem_bandwidth_bytes_per_s: c.smem_bandwidth_bytes_per_s,
            peak_tflops: c
                .peak_tflops
                .iter()
                .map(|(class, tflops)| ((*class).into(), *tflops))
                .collect(),
            method: c.method.clone(),
        }
    }
}

impl From<&Arch> for ArchDescription {
    fn from(a: &Arch) -> Self {
        Self {
            gpu: identity(&a.gpu),
            sm: multiprocessor(&a.sm),
            registers: registers(&a.registers),
            shared_memory: shared_memory(&a.shared_memory),
            memory: memory(&a.memory),
            l2: l2(&a.l2),
            tensor_instructions: a.tensor_instructions.iter().map(instruction).collect(),
            peak: a
                .peak
                .iter()
                .map(|(class, p)| ((*class).into(), peak(p)))
                .collect(),
            // Kept in the model's order (a sorted set), whatever type holds the paths.
            estimated: a.estimated.iter().map(|path| path.to_string()).collect(),
            origin: (&a.origin).into(),
            calibration: a.calibration.as_ref().map(Into::into),
        }
    }
}

/// One line of `carver arch list`.
impl From<&Arch> for ArchSummary {
    fn from(a: &Arch) -> Self {
        Self {
            key: a.gpu.key.clone(),
            name: a.gpu.name.clone(),
            architecture: a.gpu.architecture.clone(),
            compute_capability: a.gpu.compute_capability.to_string(),
            sm_count: a.sm.count,
            dram_bandwidth_bytes_per_s: a.memory.bandwidth_bytes_per_s,
            l2_size_bytes: a.l2.size_bytes,
            smem_per_block_optin_bytes: a.shared_memory.per_block_optin_bytes,
            f16_tflops: a.peak.get(&ComputeClass::F16).map(|p| p.tflops),
            origin: origin_kind(&a.origin).to_string(),
        }
    }
}

/// The `kind` tag of an origin, as the full description spells it.
fn origin_kind(o: &Origin) -> &'static str {
    match o {
        Origin::Embedded { .. } => "embedded",
        Origin::UserFile { .. } => "user-file",
        Origin::Live { .. } => "live",
        Origin::Unknown => "unknown",
    }
}

fn identity(g: &GpuIdentity) -> schema::GpuIdentity {
    schema::GpuIdentity {
        key: g.key.clone(),
        name: g.name.clone(),
        aliases: g.aliases.clone(),
        vendor: g.vendor.clone(),
        architecture: g.architecture.clone(),
        compute_capability: g.compute_capability.to_string(),
        sources: g.sources.clone(),
    }
}

fn multiprocessor(sm: &Multiprocessor) -> schema::Multiprocessor {
    schema::Multiprocessor {
        count: sm.count,
        warp_size: sm.warp_size,
        boost_clock_mhz: sm.boost_clock_mhz,
        sustained_clock_mhz: sm.sustained_clock_mhz,
        max_threads: sm.max_threads,
        max_blocks: sm.max_blocks,
        max_threads_per_block: sm.max_threads_per_block,
        tensor_cores: sm.tensor_cores,
    }
}

fn registers(r: &RegisterFile) -> schema::RegisterFile {
    schema::RegisterFile {
        per_sm: r.per_sm,
        per_block: r.per_block,
        per_thread_max: r.per_thread_max,
        allocation_unit: r.allocation_unit,
    }
}

fn shared_memory(s: &SharedMemory) -> schema::SharedMemory {
    schema::SharedMemory {
        per_sm_bytes: s.per_sm_bytes,
        per_block_default_bytes: s.per_block_default_bytes,
        per_block_optin_bytes: s.per_block_optin_bytes,
        reserved_per_block_bytes: s.reserved_per_block_bytes,
        banks: s.banks,
        bank_width_bytes: s.bank_width_bytes,
        bytes_per_clock_per_sm: s.bytes_per_clock_per_sm,
    }
}

fn memory(m: &DeviceMemory) -> schema::DeviceMemory {
    schema::DeviceMemory {
        kind: m.kind.clone(),
        capacity_bytes: m.capacity_bytes,
        bus_width_bits: m.bus_width_bits,
        memory_clock_mhz: m.memory_clock_mhz,
        bandwidth_bytes_per_s: m.bandwidth_bytes_per_s,
        sector_bytes: m.sector_bytes,
        line_bytes: m.line_bytes,
        segment_efficiency: m
            .segment_efficiency
            .iter()
            .map(|e| schema::SegmentEfficiency {
                bytes: e.bytes,
                efficiency: e.efficiency,
            })
            .collect(),
    }
}

fn l2(l: &L2Cache) -> schema::L2Cache {
    schema::L2Cache {
        size_bytes: l.size_bytes,
        bandwidth_bytes_per_s: l.bandwidth_bytes_per_s,
        request_coalescing: l.request_coalescing,
    }
}

fn instruction(i: &TensorInstruction) -> schema::TensorInstruction {
    schema::TensorInstruction {
        family: i.family.into(),
        dtypes: i.dtypes.iter().map(|&c| c.into()).collect(),
        m: extent(i.m),
        n: extent(i.n),
        k: i.k,
        step_cycles: i.step_cycles,
    }
}

fn extent(e: Extent) -> schema::Extent {
    match e {
        Extent::Fixed(v) => schema::Extent::Fixed(v),
        Extent::Range(StepRange { min, max, step }) => {
            schema::Extent::Range(schema::StepRange { min, max, step })
        }
    }
}

fn peak(p: &Peak) -> schema::Peak {
    schema::Peak {
        tflops: p.tflops,
        flops_per_clock_per_tensor_core: p.flops_per_clock_per_tensor_core,
        flops_per_clock_per_sm: p.flops_per_clock_per_sm,
        clock_mhz: p.clock_mhz,
    }
}
