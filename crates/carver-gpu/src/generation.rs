//! What a GPU carver has no database entry for most likely has, judged by its compute
//! capability: tensor-core instruction shapes, per-tensor-core rates, SIMT rates.
//!
//! Rates are dense operations per clock (an FMA counts 2), with fp32 accumulation on the
//! professional parts; GeForce boards of the 8.6 / 8.9 / 12.x generations run fp32-accumulate MMA at
//! half these rates. Every figure taken from here is listed in `Arch::estimated`.

use carver_arch::{
    ComputeCapability, ComputeClass, Extent, InstructionFamily, StepRange, TensorInstruction,
};

/// One GPU architecture generation, keyed by compute capability.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Compute capabilities (major, minor) this row was written for.
    pub capabilities: &'static [(u32, u32)],
    pub architecture: &'static str,
    pub tensor_cores_per_sm: u32,
    /// Dense tensor-core operations per clock of one tensor core.
    pub tensor_rates: &'static [(ComputeClass, f64)],
    /// (family, dtypes, m, n, k) of each instruction shape, best first.
    pub instructions: &'static [InstructionRow],
    pub fp32_per_clock_per_sm: f64,
    pub fp64_per_clock_per_sm: f64,
}

/// A tensor instruction shape in table form (`n_max == n_min` for a fixed N).
#[derive(Clone, Copy, Debug)]
pub struct InstructionRow {
    pub family: InstructionFamily,
    pub dtypes: &'static [ComputeClass],
    pub m: (u32, u32, u32),
    pub n: (u32, u32, u32),
    pub k: u32,
}

use ComputeClass::{Bf16, F16, Fp8, Int8, Tf32};
use InstructionFamily::{MmaSync, Tcgen05, Wgmma};

const fn fixed(v: u32) -> (u32, u32, u32) {
    (v, v, 1)
}

const MMA_F16: InstructionRow = InstructionRow {
    family: MmaSync,
    dtypes: &[F16, Bf16],
    m: fixed(16),
    n: fixed(8),
    k: 16,
};
const MMA_TF32: InstructionRow = InstructionRow {
    family: MmaSync,
    dtypes: &[Tf32],
    m: fixed(16),
    n: fixed(8),
    k: 8,
};
const MMA_INT8: InstructionRow = InstructionRow {
    family: MmaSync,
    dtypes: &[Int8],
    m: fixed(16),
    n: fixed(8),
    k: 32,
};
const MMA_FP8: InstructionRow = InstructionRow {
    family: MmaSync,
    dtypes: &[Fp8],
    m: fixed(16),
    n: fixed(8),
    k: 32,
};

const MMA_AMPERE: [InstructionRow; 3] = [MMA_F16, MMA_TF32, MMA_INT8];

/// Ada added fp8 (e4m3 / e5m2) to mma.sync.
const MMA_ADA: [InstructionRow; 4] = [MMA_F16, MMA_TF32, MMA_INT8, MMA_FP8];

const HOPPER: [InstructionRow; 7] = [
    InstructionRow {
        family: Wgmma,
        dtypes: &[F16, Bf16],
        m: fixed(64),
        n: (8, 256, 8),
        k: 16,
    },
    InstructionRow {
        family: Wgmma,
        dtypes: &[Tf32],
        m: fixed(64),
        n: (8, 256, 8),
        k: 8,
    },
    InstructionRow {
        family: Wgmma,
        dtypes: &[Fp8, Int8],
        m: fixed(64),
        n: (8, 256, 8),
        k: 32,
    },
    MMA_F16,
    MMA_TF32,
    MMA_INT8,
    MMA_FP8,
];

/// tcgen05.mma with one CTA: M = 64 takes N in steps of 8, M = 128 in steps of 16.
const BLACKWELL: [InstructionRow; 11] = [
    InstructionRow {
        family: Tcgen05,
        dtypes: &[F16, Bf16],
        m: fixed(64),
        n: (8, 256, 8),
        k: 16,
    },
    InstructionRow {
        family: Tcgen05,
        dtypes: &[F16, Bf16],
        m: fixed(128),
        n: (16, 256, 16),
        k: 16,
    },
    InstructionRow {
        family: Tcgen05,
        dtypes: &[Tf32],
        m: fixed(64),
        n: (8, 256, 8),
        k: 8,
    },
    InstructionRow {
        family: Tcgen05,
        dtypes: &[Tf32],
        m: fixed(128),
        n: (16, 256, 16),
        k: 8,
    },
    InstructionRow {
        family: Tcgen05,
        dtypes: &[Fp8],
        m: fixed(64),
        n: (8, 256, 8),
        k: 32,
    },
    InstructionRow {
        family: Tcgen05,
        dtypes: &[Fp8],
        m: fixed(128),
        n: (16, 256, 16),
        k: 32,
    },
    InstructionRow {
        family: Tcgen05,
        dtypes: &[Int8],
        m: (64, 128, 64),
        n: (16, 256, 16),
        k: 32,
    },
    MMA_F16,
    MMA_TF32,
    MMA_INT8,
    MMA_FP8,
];

/// The table, oldest first. Sources: the CUDA C++ Programming Guide (throughput of native
/// arithmetic instructions per SM and clock), NVIDIA's architecture whitepapers (tensor cores per
/// SM, dense tensor TFLOP/s divided by SMs x tensor cores x boost clock) and the PTX ISA (shapes).
pub const GENERATIONS: &[Generation] = &[
    Generation {
        capabilities: &[(7, 0), (7, 2)],
        architecture: "volta",
        tensor_cores_per_sm: 8,
        tensor_rates: &[(F16, 128.0)],
        instructions: &[InstructionRow {
            family: MmaSync,
            dtypes: &[F16],
            m: fixed(8),
            n: fixed(8),
            k: 4,
        }],
        fp32_per_clock_per_sm: 128.0,
        fp64_per_clock_per_sm: 64.0,
    },
    Generation {
        capabilities: &[(7, 5)],
        architecture: "turing",
        tensor_cores_per_sm: 8,
        tensor_rates: &[(F16, 128.0), (Int8, 256.0)],
        instructions: &[
            InstructionRow {
                family: MmaSync,
                dtypes: &[F16],
                m: fixed(16),
                n: fixed(8),
                k: 8,
            },
            InstructionRow {
                family: MmaSync,
                dtypes: &[Int8],
                m: fixed(8),
                n: fixed(8),
                k: 16,
            },
        ],
        fp32_per_clock_per_sm: 128.0,
        fp64_per_clock_per_sm: 4.0,
    },
    Generation {
        capabilities: &[(8, 0)],
        architecture: "ampere",
        tensor_cores_per_sm: 4,
        tensor_rates: &[(F16, 512.0), (Bf16, 512.0), (Tf32, 256.0), (Int8, 1024.0)],
        instructions: &MMA_AMPERE,
        fp32_per_clock_per_sm: 128.0,
        fp64_per_clock_per_sm: 64.0,
    },
    Generation {
        capabilities: &[(8, 6), (8, 7)],
        architecture: "ampere",
        tensor_cores_per_sm: 4,
        tensor_rates: &[(F16, 256.0), (Bf16, 256.0), (Tf32, 128.0), (Int8, 512.0)],
        instructions: &MMA_AMPERE,
        fp32_per_clock_per_sm: 256.0,
        fp64_per_clock_per_sm: 2.0,
    },
    Generation {
        capabilities: &[(8, 9)],
        architecture: "ada",
        tensor_cores_per_sm: 4,
        tensor_rates: &[
            (F16, 256.0),
            (Bf16, 256.0),
            (Tf32, 128.0),
            (Fp8, 512.0),
            (Int8, 512.0),
        ],
        instructions: &MMA_ADA,
        fp32_per_clock_per_sm: 256.0,
        fp64_per_clock_per_sm: 2.0,
    },
    Generation {
        capabilities: &[(9, 0)],
        architecture: "hopper",
        tensor_cores_per_sm: 4,
        tensor_rates: &[
            (F16, 1024.0),
            (Bf16, 1024.0),
            (Tf32, 512.0),
            (Fp8, 2048.0),
            (Int8, 2048.0),
        ],
        instructions: &HOPPER,
        fp32_per_clock_per_sm: 256.0,
        fp64_per_clock_per_sm: 128.0,
    },
    Generation {
        capabilities: &[(10, 0), (10, 3), (11, 0)],
        architecture: "blackwell",
        tensor_cores_per_sm: 4,
        tensor_rates: &[
            (F16, 2048.0),
            (Bf16, 2048.0),
            (Tf32, 1024.0),
            (Fp8, 4096.0),
            (Int8, 4096.0),
        ],
        instructions: &BLACKWELL,
        fp32_per_clock_per_sm: 256.0,
        fp64_per_clock_per_sm: 128.0,
    },
    Generation {
        capabilities: &[(12, 0), (12, 1)],
        architecture: "blackwell",
        tensor_cores_per_sm: 4,
        tensor_rates: &[
            (F16, 256.0),
            (Bf16, 256.0),
            (Tf32, 128.0),
            (Fp8, 512.0),
            (Int8, 512.0),
        ],
        instructions: &MMA_ADA,
        fp32_per_clock_per_sm: 256.0,
        fp64_per_clock_per_sm: 2.0,
    },
];

/// GPUs older than Volta: no tensor cores.
pub const PRE_TENSOR: Generation = Generation {
    capabilities: &[],
    architecture: "pre-volta",
    tensor_cores_per_sm: 0,
    tensor_rates: &[],
    instructions: &[],
    fp32_per_clock_per_sm: 128.0,
    fp64_per_clock_per_sm: 4.0,
};

/// The generation of a compute capability, and whether the table has a row written for exactly it
/// (`false`: the closest older generation stands in, or [`PRE_TENSOR`] below Volta).
pub fn generation_for(cc: ComputeCapability) -> (&'static Generation, bool) {
    let key = (cc.major, cc.minor);
    if let Some(f) = GENERATIONS.iter().find(|f| f.capabilities.contains(&key)) {
        return (f, true);
    }
    let older = GENERATIONS
        .iter()
        .rfind(|f| f.capabilities.iter().any(|&c| c <= key));
    (older.unwrap_or(&PRE_TENSOR), false)
}

impl InstructionRow {
    pub fn to_instruction(self) -> TensorInstruction {
        let extent = |(min, max, step): (u32, u32, u32)| {
            if min == max {
                Extent::Fixed(min)
            } else {
                Extent::Range(StepRange { min, max, step })
            }
        };
        TensorInstruction {
            family: self.family,
            dtypes: self.dtypes.to_vec(),
            m: extent(self.m),
            n: extent(self.n),
            k: self.k,
            // Measured per device model, in the shipped database only.
            step_cycles: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tensor_rate_has_an_instruction_and_back() {
        for f in GENERATIONS {
            for (class, _) in f.tensor_rates {
                assert!(
                    f.instructions.iter().any(|i| i.dtypes.contains(class)),
                    "{} lacks an instruction for {class}",
                    f.architecture
                );
            }
            for i in f.instructions {
                for d in i.dtypes {
                    assert!(
                        f.tensor_rates.iter().any(|(c, _)| c == d),
                        "{} has an instruction for {d} but no rate",
                        f.architecture
                    );
                }
            }
        }
    }

    #[test]
    fn exact_rows_are_found_and_unknown_ones_fall_to_the_older_generation() {
        let (f, exact) = generation_for(ComputeCapability::new(9, 0));
        assert_eq!((f.architecture, exact), ("hopper", true));
        let (f, exact) = generation_for(ComputeCapability::new(8, 8));
        assert_eq!((f.architecture, exact), ("ampere", false));
        assert_eq!(f.capabilities, &[(8, 6), (8, 7)]);
        let (f, exact) = generation_for(ComputeCapability::new(13, 0));
        assert_eq!((f.capabilities, exact), (&[(12, 0), (12, 1)][..], false));
        let (f, exact) = generation_for(ComputeCapability::new(6, 1));
        assert_eq!(
            (f.architecture, f.tensor_cores_per_sm, exact),
            ("pre-volta", 0, false)
        );
    }

    /// Every database entry of a professional board agrees with its generation's row, so a GPU
    /// missing from the database is estimated the way its known siblings are described.
    /// GeForce boards are left out: their fp32-accumulate tensor rates are cut in half.
    #[test]
    fn rows_reproduce_the_database_entries() {
        let db = carver_arch::HardwareDb::embedded().unwrap();
        let mut checked = 0;
        for entry in db.iter().filter(|a| !a.gpu.name.contains("GeForce")) {
            let (f, exact) = generation_for(entry.gpu.compute_capability);
            let key = entry.key();
            assert!(exact, "{key}: no row for its compute capability");
            assert_eq!(f.architecture, entry.gpu.architecture, "{key}");
            assert_eq!(f.tensor_cores_per_sm, entry.sm.tensor_cores, "{key}");
            for (class, peak) in &entry.peak {
                let ours = if class.is_tensor() {
                    f.tensor_rates
                        .iter()
                        .find(|(c, _)| c == class)
                        .map(|(_, r)| *r)
                } else if *class == ComputeClass::Fp32 {
                    Some(f.fp32_per_clock_per_sm)
                } else {
                    Some(f.fp64_per_clock_per_sm)
                };
                let theirs = peak
                    .flops_per_clock_per_tensor_core
                    .or(peak.flops_per_clock_per_sm);
                assert_eq!(ours, theirs, "{key}: {class}");
            }
            let ours: Vec<TensorInstruction> =
                f.instructions.iter().map(|i| i.to_instruction()).collect();
            // A k-step's measured wait belongs to one device model, not to its generation.
            let shapes: Vec<TensorInstruction> = entry
                .tensor_instructions
                .iter()
                .map(|i| TensorInstruction {
                    step_cycles: None,
                    ..i.clone()
                })
                .collect();
            assert_eq!(ours, shapes, "{key}");
            checked += 1;
        }
        assert!(checked >= 5, "only {checked} entries checked");
    }
}
