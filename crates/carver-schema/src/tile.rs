//! A kernel configuration in family-neutral terms, as the JSON gives it (`hints[].tile`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a tensor-core instruction is issued (`hints[].tile.mma`, `tensor_instructions[].family`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstructionFamily {
    /// Volta/Turing/Ampere/Ada warp-level `mma.sync` (`"mma-sync"`).
    MmaSync,
    /// Hopper warpgroup-level asynchronous `wgmma.mma_async` (`"wgmma"`).
    Wgmma,
    /// Blackwell `tcgen05.mma`, accumulating in tensor memory (`"tcgen05"`).
    Tcgen05,
}

impl fmt::Display for InstructionFamily {
    /// The PTX spelling (`mma.sync`), for tables; the JSON spelling is kebab-case.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MmaSync => "mma.sync",
            Self::Wgmma => "wgmma",
            Self::Tcgen05 => "tcgen05",
        })
    }
}

/// Order in which output tiles are handed to blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RasterOrder {
    /// Groups of `group` tile rows, walked column by column inside a group (Triton's
    /// `GROUP_SIZE_M`); `group = 1` is plain row-major order.
    GroupedRows,
}

/// How output tiles are assigned to blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Raster {
    /// The walk over the tile grid.
    pub order: RasterOrder,
    /// Tile rows per group (1 = no grouping).
    pub group: u32,
}

/// One point of a kernel family's configuration space, in family-neutral terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tile {
    /// Rows of C one block computes.
    pub block_m: u32,
    /// Columns of C one block computes.
    pub block_n: u32,
    /// Depth of K one main-loop step consumes.
    pub block_k: u32,
    /// Compute warps along M; they are laid out `warps_m x warps_n`.
    pub warps_m: u32,
    /// Compute warps along N.
    pub warps_n: u32,
    /// Extra warps that only move data (warp specialization); 0 when every warp computes.
    pub producer_warps: u32,
    /// Shared-memory pipeline depth.
    pub stages: u32,
    /// Order in which blocks take output tiles.
    pub raster: Raster,
    /// K is split across this many blocks whose partial sums are reduced (1 = no split).
    pub split_k: u32,
    /// Thread-block cluster rows (1 x 1 = no cluster).
    pub cluster_m: u32,
    /// Thread-block cluster columns.
    pub cluster_n: u32,
    /// Blocks loop over tiles (grid = number of SMs) instead of one block per tile.
    pub persistent: bool,
    /// Tensor-core instruction family the kernel issues.
    pub mma: InstructionFamily,
    /// The instruction's rows run along N and its columns along M (A and B trade places: a
    /// small-M path). Absent when false, and from hints written before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swap_ab: bool,
}
