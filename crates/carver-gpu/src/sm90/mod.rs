//! carver's own Hopper GEMM family (`cuda-sm90`): the CUDA source, its instantiation per
//! configuration, NVRTC compilation to cubins with an on-disk cache, and (on a GPU) launching.
//! Operands whose rows are not 16-byte aligned, which TMA cannot load, are first copied into
//! padded buffers by the family's copy kernel (`repack`); a split-K configuration's partial
//! tiles are summed by a second kernel (`splitk`). A tuned winner can be written out for other
//! programs to launch (`emit`).
//!
//! The configuration space is [`carver::family::Sm90Params`], the same definition the
//! recommender's `cuda-sm90` target ranks, and so are its rules: [`KernelSpec::check`] is
//! [`Sm90Params::check`], the check the recommender applies to every point of its space.

mod compile;
mod emit;
mod kernel_cache;
mod launch;
mod repack;
mod splitk;

use std::fmt::Write as _;

use carver::family::{ConfigError, Sm90Params};
use carver::{DType, Layout};
use serde::{Deserialize, Serialize};

pub use compile::{CompiledKernel, PtxasReport, compile_kernel, compile_source, nvrtc_version};
pub use emit::{
    EmitCubins, EmitError, EmitInputs, EmitWritten, GEMM_CUBIN_FILE, GEMM_SOURCE_FILE, LAUNCH_FILE,
    REDUCE_CUBIN_FILE, REDUCE_SOURCE_FILE, check_emit_problem, check_emit_root, check_emittable,
    describe, emit, emit_dir_name, write_emit,
};
pub use kernel_cache::{CacheDefect, CompileEvent, KernelCache, compile_all, sha256_hex};
pub use launch::{
    GemmDims, GemmOutput, LoadedKernel, TmaGeometry, TmaMap, encode_tma_maps, tma_boxes,
    tma_geometry,
};
pub use repack::{OperandRows, REPACK_NAME, REPACK_SOURCE, RepackKernel, operand_rows};
pub use splitk::{
    SPLITK_COLUMNS_PER_THREAD, SPLITK_NAME, SPLITK_SOURCE, SPLITK_THREADS, SplitKReduce,
    SplitKShape,
};

/// The kernel source as shipped (without the per-configuration header).
pub const KERNEL_SOURCE: &str = include_str!("kernel.cu");
/// The kernel's entry point.
pub const KERNEL_NAME: &str = "carver_sm90_gemm";
/// Bumped when the generated header changes meaning without the source changing.
const GENERATOR_VERSION: u32 = 2;

/// A problem of the family as the tuning database and `launch.json` store it: `input` A and B,
/// an `output` C, B stored `layout_b`; A is row-major and the accumulation fp32, the family's
/// only forms.
pub fn stored_problem(
    input: DType,
    output: DType,
    layout_b: Layout,
    dims: &GemmDims,
) -> carver_schema::TuneProblem {
    carver_schema::TuneProblem {
        m: dims.m,
        n: dims.n,
        k: dims.k,
        batch: dims.batch,
        dtype_a: input.as_str().into(),
        dtype_b: input.as_str().into(),
        dtype_c: output.as_str().into(),
        dtype_acc: DType::F32.as_str().into(),
        layout_a: Layout::Row.as_str().into(),
        layout_b: layout_b.as_str().into(),
    }
}

/// One instantiation of the family: a configuration and the problem's element types and B
/// layout (A is row-major, C row-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelSpec {
    pub params: Sm90Params,
    /// Element type of A and B: `bf16`, `f16`, `e4m3` or `e5m2`.
    pub input: DType,
    /// Element type of C: `bf16` or `f16`.
    pub output: DType,
    /// `row`: B is K x N, N contiguous; `col`: B is stored N x K, K contiguous.
    pub layout_b: Layout,
}

impl KernelSpec {
    /// `dims` of this kernel's types as the tuning database and `launch.json` store a problem.
    pub fn stored_problem(&self, dims: &GemmDims) -> carver_schema::TuneProblem {
        stored_problem(self.input, self.output, self.layout_b, dims)
    }

    /// Why this kernel cannot be instantiated with these parameters, if it cannot: the family's
    /// rules as the recommender applies them.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.params
            .check(self.input, self.output, self.layout_b)
            .map_err(ConfigError::from)
    }

    /// Threads per block: one producer warpgroup and the consumers.
    pub fn threads(&self) -> u32 {
        self.params.threads()
    }

    /// Dynamic shared memory: the ring plus 1 KiB holding the mbarriers.
    pub fn dynamic_smem_bytes(&self) -> u32 {
        // A checked spec needs at most about 0.5 MiB; saturate rather than wrap on others.
        u32::try_from(self.params.dynamic_smem_bytes(self.input.bytes())).unwrap_or(u32::MAX)
    }

    pub fn accumulators_per_thread(&self) -> u32 {
        self.params.accumulators_per_thread()
    }

    /// Work units of `batch` M x N products: clusters of `cluster_m` vertically adjacent tiles,
    /// once per K split.
    pub fn units(&self, m: u64, n: u64, batch: u64) -> u64 {
        let p = &self.params;
        m.div_ceil(u64::from(p.block_m))
            .div_ceil(u64::from(p.cluster_m.max(1)))
            * n.div_ceil(u64::from(p.block_n))
            * u64::from(p.split_k.max(1))
            * batch
    }

    /// A short name, e.g. `128x256x64 s4 c2 g8 x2 k3 persistent rr bf16` (`x2`: clusters of 2,
    /// `k3`: K split three ways; `swap-ab`: the small-M path, A and B swapped in the wgmma).
    pub fn label(&self) -> String {
        let p = &self.params;
        format!(
            "{}x{}x{} s{} c{} g{}{}{}{}{} r{} {}",
            p.block_m,
            p.block_n,
            p.block_k,
            p.stages,
            p.consumers,
            p.group_m,
            if p.cluster_m > 1 {
                format!(" x{}", p.cluster_m)
            } else {
                String::new()
            },
            if p.split_k > 1 {
                format!(" k{}", p.split_k)
            } else {
                String::new()
            },
            if p.persistent { " persistent" } else { "" },
            if p.swap_ab { " swap-ab" } else { "" },
            match self.layout_b {
                Layout::Row => 'r',
                Layout::Col => 'c',
            },
            self.input
        )
    }

    /// The complete source NVRTC compiles for this instantiation.
    pub fn source(&self) -> String {
        let p = &self.params;
        let mut s = String::with_capacity(KERNEL_SOURCE.len() + 8192);
        let _ = writeln!(s, "// carver cuda-sm90 instantiation: {}", self.label());
        for (name, value) in [
            ("BM", p.block_m),
            ("BN", p.block_n),
            ("BK", p.block_k),
            ("STAGES", p.stages),
            ("CONSUMERS", p.consumers),
            ("GROUP_M", p.group_m),
            ("PERSISTENT", u32::from(p.persistent)),
            ("CLUSTER_M", p.cluster_m),
            ("SPLIT_K", p.split_k),
            ("SWAP_AB", u32::from(p.swap_ab)),
            ("B_KMAJOR", u32::from(self.layout_b == Layout::Col)),
            ("OUT_BF16", u32::from(self.output == DType::Bf16)),
            ("ELEM_BYTES", self.input.bytes()),
        ] {
            let _ = writeln!(s, "#define {name} {value}");
        }
        // The kernel body uses the typedefs; declare the wrapper after them by putting it in a
        // macro-free function that only needs built-in types.
        // Row-major B is N-major: transposed for wgmma, as whichever operand it is.
        let b_n_major = self.layout_b == Layout::Row;
        let transposes = Transposes {
            a: p.swap_ab && b_n_major,
            b: !p.swap_ab && b_n_major,
        };
        s.push_str(&wgmma_wrapper(p.wgmma_extent().1, self.input, transposes));
        s.push_str(KERNEL_SOURCE);
        s
    }
}

/// Which of wgmma's operands are read MN-major from shared memory (16-bit inputs only).
#[derive(Clone, Copy, Debug)]
struct Transposes {
    a: bool,
    b: bool,
}

/// `wgmma_tile(acc, desc_a, desc_b)`: one `wgmma.mma_async m64nNk16` (16-bit inputs) or
/// `m64nNk32` (fp8) with fp32 accumulators, A and B from shared memory (16-bit operands
/// MN-major where `transposes` says; 8-bit operands have no transpose: they are always K-major).
fn wgmma_wrapper(wgmma_n: u32, input: DType, transposes: Transposes) -> String {
    let regs = wgmma_n / 2;
    let (ty, k) = match input {
        DType::Bf16 => ("bf16", 16),
        DType::E4m3 => ("e4m3", 32),
        DType::E5m2 => ("e5m2", 32),
        _ => ("f16", 16),
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "__device__ __forceinline__ void wgmma_tile(float (&d)[{regs}], unsigned long long da, unsigned long long db) {{"
    );
    s.push_str("    asm volatile(\n        \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %");
    let _ = write!(s, "{}", regs + 2);
    let _ = write!(
        s,
        ", 0;\\nwgmma.mma_async.sync.aligned.m64n{wgmma_n}k{k}.f32.{ty}.{ty} {{"
    );
    for i in 0..regs {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "%{i}");
    }
    // scale-d from the predicate, A and B unnegated, then (16-bit only) the transposes.
    let transposes = if input.is_fp8() {
        String::new()
    } else {
        format!(", {}, {}", u32::from(transposes.a), u32::from(transposes.b))
    };
    let _ = writeln!(
        s,
        "}}, %{}, %{}, p, 1, 1{transposes};\\n}}\\n\"",
        regs,
        regs + 1,
    );
    s.push_str("        : ");
    for i in 0..regs {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "\"+f\"(d[{i}])");
    }
    s.push_str("\n        : \"l\"(da), \"l\"(db), \"r\"(1));\n}\n");
    s
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust versions and machines (the kernel
/// cache and the tuning database key on it).
pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separate the parts so that ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Hash of the family's source and generator, as 16 hex digits: the `kernel_hash` of tuning
/// records, so that an edited kernel is tuned again. With `repacked` (A or B of the problem is
/// copied into padded rows first, see [`operand_rows`]) it covers the copy kernel too, whose
/// time is part of such a problem's; records of aligned problems do not depend on it.
pub fn family_hash(repacked: bool) -> String {
    let mut parts: Vec<&[u8]> = Vec::with_capacity(5);
    let wrapper = wgmma_wrapper(256, DType::Bf16, Transposes { a: true, b: true });
    let version = GENERATOR_VERSION.to_le_bytes();
    parts.extend([
        KERNEL_SOURCE.as_bytes(),
        &version[..],
        wrapper.as_bytes(),
        SPLITK_SOURCE.as_bytes(),
    ]);
    if repacked {
        parts.push(REPACK_SOURCE.as_bytes());
    }
    format!("{:016x}", fnv1a(&parts))
}

/// The unit tests' kernel: bf16 in and out, K block 64, 4 stages, launch groups of 8, no cluster,
/// persistence or split-K; a test changes what it is about with struct update syntax.
#[cfg(test)]
pub(crate) fn test_spec(
    block_m: u32,
    block_n: u32,
    consumers: u32,
    layout_b: Layout,
) -> KernelSpec {
    KernelSpec {
        params: Sm90Params {
            block_m,
            block_n,
            block_k: 64,
            stages: 4,
            consumers,
            group_m: 8,
            cluster_m: 1,
            persistent: false,
            split_k: 1,
            swap_ab: false,
        },
        input: DType::Bf16,
        output: DType::Bf16,
        layout_b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(block_m: u32, block_n: u32, consumers: u32, layout_b: Layout) -> KernelSpec {
        test_spec(block_m, block_n, consumers, layout_b)
    }

    #[test]
    fn wrapper_lists_every_accumulator_once() {
        let w = wgmma_wrapper(256, DType::Bf16, Transposes { a: false, b: true });
        assert!(w.contains("m64n256k16.f32.bf16.bf16"));
        assert!(w.contains("float (&d)[128]"));
        assert!(w.contains("\"+f\"(d[127])"));
        assert!(!w.contains("\"+f\"(d[128])"));
        // scale-d comes from operand 130, the descriptors are 128 and 129, B transposed.
        assert!(w.contains("setp.ne.b32 p, %130, 0"));
        assert!(w.contains("%128, %129, p, 1, 1, 0, 1;"));
        let k = wgmma_wrapper(16, DType::F16, Transposes { a: false, b: false });
        assert!(k.contains("m64n16k16.f32.f16.f16"));
        assert!(k.contains("%8, %9, p, 1, 1, 0, 0;"));
        // fp8: k32, and no transpose operands (8-bit operands are K-major only).
        let f = wgmma_wrapper(128, DType::E4m3, Transposes { a: false, b: false });
        assert!(f.contains("m64n128k32.f32.e4m3.e4m3"));
        assert!(f.contains("%64, %65, p, 1, 1;"));
        assert!(
            wgmma_wrapper(64, DType::E5m2, Transposes { a: false, b: false })
                .contains("m64n64k32.f32.e5m2.e5m2")
        );
        // The swapped small-M path over row-major B: wgmma's A (B's tile) is N-major.
        let s = wgmma_wrapper(8, DType::Bf16, Transposes { a: true, b: false });
        assert!(s.contains("m64n8k16.f32.bf16.bf16"));
        assert!(s.contains("%4, %5, p, 1, 1, 1, 0;"));
    }

    #[test]
    fn source_carries_the_configuration() {
        let s = spec(128, 256, 2, Layout::Row).source();
        for line in [
            "#define BM 128",
            "#define BN 256",
            "#define STAGES 4",
            "#define CONSUMERS 2",
            "#define B_KMAJOR 0",
            "#define OUT_BF16 1",
        ] {
            assert!(s.contains(line), "{line}");
        }
        assert!(s.contains(KERNEL_NAME));
    }

    #[test]
    fn check_names_what_the_kernel_does_not_run() {
        use carver::family::Sm90Violation;
        let violation = |s: &KernelSpec| match s.check() {
            Err(ConfigError::Sm90(v)) => Some(v),
            Err(other) => panic!("not a cuda-sm90 rule: {other}"),
            Ok(()) => None,
        };
        assert_eq!(violation(&spec(128, 256, 2, Layout::Row)), None);
        assert_eq!(violation(&spec(128, 144, 2, Layout::Col)), None);
        let row_major_144 = spec(128, 144, 2, Layout::Row);
        assert_eq!(
            violation(&row_major_144),
            Some(Sm90Violation::RowMajorBlockN { block_n: 144 })
        );
        assert!(
            row_major_144
                .check()
                .unwrap_err()
                .to_string()
                .contains("64")
        );
        assert_eq!(
            violation(&spec(192, 128, 2, Layout::Col)),
            Some(Sm90Violation::BlockM {
                block_m: 192,
                consumers: 2
            })
        );
        let too_many_accumulators = spec(256, 256, 2, Layout::Col);
        assert_eq!(
            violation(&too_many_accumulators),
            Some(Sm90Violation::Accumulators { accumulators: 256 })
        );
        assert!(
            too_many_accumulators
                .check()
                .unwrap_err()
                .to_string()
                .contains("256 fp32")
        );
        let mut s = spec(128, 128, 1, Layout::Row);
        s.params.cluster_m = 2;
        assert!(s.check().is_ok());
        assert!(s.source().contains("#define CLUSTER_M 2"));
        s.params.cluster_m = 4;
        assert!(s.check().unwrap_err().to_string().contains("cluster"));
        s.params.cluster_m = 1;
        s.params.block_k = 32;
        assert_eq!(
            violation(&s),
            Some(Sm90Violation::BlockK {
                block_k: 32,
                elem_bytes: 2
            })
        );
    }

    #[test]
    fn smem_matches_the_recommenders_resource_model() {
        // carver's cuda-sm90 target counts ring + 1 KiB; the kernel asks for exactly that.
        let s = spec(128, 256, 2, Layout::Row);
        assert_eq!(s.dynamic_smem_bytes(), 4 * (128 + 256) * 64 * 2 + 1024);
    }

    #[test]
    fn hashes_are_stable() {
        assert_eq!(fnv1a(&[b""]), fnv1a(&[b""]));
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        assert_eq!(family_hash(false).len(), 16);
        assert_ne!(family_hash(false), family_hash(true));
    }
}
