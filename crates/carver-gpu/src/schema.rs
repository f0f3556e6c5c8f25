//! Conversions from what this crate measures and queries into its JSON form in `carver_schema`
//! (`carver arch detect`, `carver arch calibrate`, `carver tune`, `carver bench`).
//!
//! Field for field, so a change to the worker protocol or the detection types does not move the
//! JSON by itself.

use carver_schema as schema;

use crate::calibrate::MeasuredFigure;
use crate::detect::DetectedGpu;
use crate::query::{DriverQuery, NvmlQuery};
use crate::tune::{CandidateMeasurement, RepackInfo, Timing};

/// Counts are `usize` here and `u64` in the schema; no count comes near 2^64.
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl From<&DetectedGpu> for schema::DetectedGpu {
    fn from(g: &DetectedGpu) -> Self {
        Self {
            index: count(g.index),
            name: g.name.clone(),
            uuid: g.uuid.clone(),
            driver_version: g.driver_version.clone(),
            cuda_driver_version: g.cuda_driver_version.clone(),
            power_limit_w: g.power_limit_w,
            matched: g.matched.clone(),
            arch: (&g.arch).into(),
            driver_query: (&g.driver_query).into(),
            nvml_query: (&g.nvml_query).into(),
        }
    }
}

impl From<&DriverQuery> for schema::DriverQuery {
    fn from(q: &DriverQuery) -> Self {
        Self {
            index: count(q.index),
            name: q.name.clone(),
            uuid: q.uuid.clone(),
            compute_capability: q.compute_capability.to_string(),
            sm_count: q.sm_count,
            warp_size: q.warp_size,
            max_threads_per_sm: q.max_threads_per_sm,
            max_blocks_per_sm: q.max_blocks_per_sm,
            max_threads_per_block: q.max_threads_per_block,
            shared_memory_per_block_default_bytes: q.shared_memory_per_block_default_bytes,
            shared_memory_per_block_optin_bytes: q.shared_memory_per_block_optin_bytes,
            shared_memory_per_sm_bytes: q.shared_memory_per_sm_bytes,
            shared_memory_reserved_per_block_bytes: q.shared_memory_reserved_per_block_bytes,
            registers_per_sm: q.registers_per_sm,
            registers_per_block: q.registers_per_block,
            l2_size_bytes: q.l2_size_bytes,
            memory_clock_mhz: q.memory_clock_mhz,
            memory_bus_width_bits: q.memory_bus_width_bits,
            max_sm_clock_mhz: q.max_sm_clock_mhz,
            total_memory_bytes: q.total_memory_bytes,
            cuda_driver_version: q.cuda_driver_version,
        }
    }
}

impl From<&NvmlQuery> for schema::NvmlQuery {
    fn from(q: &NvmlQuery) -> Self {
        Self {
            name: q.name.clone(),
            uuid: q.uuid.clone(),
            driver_version: q.driver_version.clone(),
            max_sm_clock_mhz: q.max_sm_clock_mhz,
            max_memory_clock_mhz: q.max_memory_clock_mhz,
            power_limit_w: q.power_limit_w,
        }
    }
}

impl From<&MeasuredFigure> for schema::MeasuredFigure {
    fn from(f: &MeasuredFigure) -> Self {
        Self {
            field: f.field.to_string(),
            label: f.label.clone(),
            unit: f.unit.clone(),
            measured: f.measured,
            slowest: f.slowest,
            fastest: f.fastest,
            runs: count(f.runs),
            spec: f.spec,
            spec_is_estimate: f.spec_is_estimate,
            method: f.method.clone(),
        }
    }
}

impl From<&Timing> for schema::Timing {
    fn from(t: &Timing) -> Self {
        Self {
            median_s: t.median_s,
            min_s: t.min_s,
            max_s: t.max_s,
            runs: count(t.runs),
            early_stopped: t.early_stopped,
        }
    }
}

impl From<&CandidateMeasurement> for schema::CandidateMeasurement {
    fn from(m: &CandidateMeasurement) -> Self {
        Self {
            registers: m.registers,
            local_bytes: m.local_bytes,
            blocks_per_sm: m.blocks_per_sm,
            grid: m.grid,
            rel_error: m.rel_error,
            timing: (&m.timing).into(),
        }
    }
}

/// The operands a tuning worker repacks, with the copies' median time.
impl From<&RepackInfo> for schema::RepackReport {
    fn from(r: &RepackInfo) -> Self {
        Self {
            operands: r.operands.clone(),
            time_us: Some(r.timing.median_s * 1e6),
        }
    }
}
