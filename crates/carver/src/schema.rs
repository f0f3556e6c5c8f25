//! Conversions from the model's working types into their JSON form in `carver_schema`.
//!
//! Field for field: a change to the model shows up here, and the schema (and its version) moves
//! only when someone decides it should.

use crate::prediction::{Bound, Breakdown, Hint, Prediction};
use crate::tile::{Raster, RasterOrder, TileConfig};

impl From<RasterOrder> for carver_schema::RasterOrder {
    fn from(order: RasterOrder) -> Self {
        match order {
            RasterOrder::GroupedRows => Self::GroupedRows,
        }
    }
}

impl From<Raster> for carver_schema::Raster {
    fn from(r: Raster) -> Self {
        Self {
            order: r.order.into(),
            group: r.group,
        }
    }
}

impl From<&TileConfig> for carver_schema::Tile {
    fn from(t: &TileConfig) -> Self {
        Self {
            block_m: t.block_m,
            block_n: t.block_n,
            block_k: t.block_k,
            warps_m: t.warps_m,
            warps_n: t.warps_n,
            producer_warps: t.producer_warps,
            stages: t.stages,
            raster: t.raster.into(),
            split_k: t.split_k,
            cluster_m: t.cluster_m,
            cluster_n: t.cluster_n,
            persistent: t.persistent,
            mma: t.mma.into(),
            swap_ab: t.swap_ab,
        }
    }
}

impl From<Bound> for carver_schema::Bound {
    fn from(b: Bound) -> Self {
        match b {
            Bound::Dram => Self::Dram,
            Bound::L2 => Self::L2,
            Bound::Smem => Self::Smem,
            Bound::Compute => Self::Compute,
            Bound::Latency => Self::Latency,
        }
    }
}

impl From<&Breakdown> for carver_schema::Breakdown {
    fn from(b: &Breakdown) -> Self {
        Self {
            compute_us: b.compute_us,
            smem_us: b.smem_us,
            l2_us: b.l2_us,
            dram_us: b.dram_us,
            latency_us: b.latency_us,
            epilogue_us: b.epilogue_us,
            split_k_us: b.split_k_us,
            overhead_us: b.overhead_us,
            repack_us: b.repack_us,
            dram_bytes: b.dram_bytes,
            l2_bytes: b.l2_bytes,
            wave_efficiency: b.wave_efficiency,
            padding_efficiency: b.padding_efficiency,
        }
    }
}

impl From<&Prediction> for carver_schema::Prediction {
    fn from(p: &Prediction) -> Self {
        Self {
            time_us: p.time_us,
            tflops: p.tflops,
            bound: p.bound.into(),
            smem_bytes: p.smem_bytes,
            registers_per_thread: p.registers_per_thread,
            hedged_registers: p.hedged_registers,
            threads: p.threads,
            blocks_per_sm: p.blocks_per_sm,
            grid: p.grid,
            waves: p.waves,
            breakdown: (&p.breakdown).into(),
        }
    }
}

impl From<&Hint> for carver_schema::Hint {
    fn from(h: &Hint) -> Self {
        Self {
            rank: h.rank,
            config: h.config.clone(),
            tile: (&h.tile).into(),
            prediction: (&h.prediction).into(),
        }
    }
}

impl From<&crate::moe::MoeConfig> for carver_schema::MoeKernelConfig {
    fn from(c: &crate::moe::MoeConfig) -> Self {
        Self {
            BLOCK_SIZE_M: c.block_m,
            BLOCK_SIZE_N: c.block_n,
            BLOCK_SIZE_K: c.block_k,
            GROUP_SIZE_M: c.group_m,
            num_warps: c.num_warps,
            num_stages: c.num_stages,
        }
    }
}

impl From<&crate::moe::GemmPrediction> for carver_schema::MoeGemmPrediction {
    fn from(g: &crate::moe::GemmPrediction) -> Self {
        Self {
            time_us: g.time_us,
            padded_rows: g.padded_rows,
            active_experts: g.active_experts,
            grid: g.grid,
            detail: (&g.detail).into(),
        }
    }
}

impl From<&crate::moe::MoeHint> for carver_schema::MoeHint {
    fn from(h: &crate::moe::MoeHint) -> Self {
        Self {
            rank: h.rank,
            config: (&h.config).into(),
            predicted_us: h.time_us,
            gate_up: (&h.gate_up).into(),
            down: (&h.down).into(),
        }
    }
}

impl From<&crate::moe::MoeBatch> for carver_schema::MoeBatch {
    fn from(b: &crate::moe::MoeBatch) -> Self {
        Self {
            m: b.m,
            hints: b.hints.iter().map(Into::into).collect(),
        }
    }
}
