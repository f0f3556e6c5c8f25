//! The cuda-sm90 kernel compiles with NVRTC for sm_90a, without register spills, for
//! representative configurations of its space (every structure the recommender proposes: both
//! consumer counts, every m-iteration count, the widest tiles, both B layouts, bf16 and f16,
//! epilogue chunks of 16, 32, 48 and 64 columns, split-K, the small-M path), the copy kernel that pads unaligned
//! operands and the split-K reduction.
//!
//! Needs libnvrtc, not a GPU: `scripts/test` installs the `nvidia-cuda-nvrtc` wheel and puts its
//! lib folder on `LD_LIBRARY_PATH`. Skipped, saying why, when libnvrtc cannot be loaded.

use carver::family::{ConfigError, Sm90Params, Sm90Violation};
use carver::{DType, Layout};
use carver_gpu::GpuError;
use carver_gpu::sm90::{
    CacheDefect, KernelCache, KernelSpec, PtxasReport, REPACK_NAME, REPACK_SOURCE, SPLITK_NAME,
    SPLITK_SOURCE, compile_all, compile_kernel, compile_source,
};

fn spec(
    (block_m, block_n, stages, consumers): (u32, u32, u32, u32),
    persistent: bool,
    layout_b: Layout,
    input: DType,
) -> KernelSpec {
    KernelSpec {
        params: Sm90Params {
            block_m,
            block_n,
            block_k: 64,
            stages,
            consumers,
            group_m: 8,
            cluster_m: 1,
            persistent,
            split_k: 1,
            swap_ab: false,
        },
        input,
        output: input,
        layout_b,
    }
}

fn representative() -> Vec<KernelSpec> {
    let mut v = Vec::new();
    for (shape, persistent) in [
        ((128, 256, 4, 2), true),  // the usual large-problem tile, 128 accumulators
        ((256, 192, 3, 2), false), // 2 m-slabs per consumer, 192 accumulators
        ((128, 128, 6, 1), false), // one consumer, 2 m-slabs
        ((192, 128, 4, 1), true),  // 3 m-slabs
        ((64, 64, 8, 1), false),   // the smallest tile
        ((256, 64, 4, 2), false),
    ] {
        v.push(spec(shape, persistent, Layout::Row, DType::Bf16));
    }
    v.push(spec((128, 144, 5, 2), false, Layout::Col, DType::Bf16));
    v.push(spec((128, 256, 4, 2), true, Layout::Col, DType::Bf16));
    v.push(spec((64, 16, 4, 1), false, Layout::Col, DType::F16));
    // Epilogue chunks narrower than 64 columns: 48 (128x176, persistent) and 32 (256x96, one
    // consumer with 4 m-slabs and 192 accumulators).
    v.push(spec((128, 176, 4, 2), true, Layout::Col, DType::Bf16));
    v.push(spec((256, 96, 3, 1), false, Layout::Col, DType::F16));
    v.push(spec((128, 256, 4, 2), false, Layout::Row, DType::F16));
    // 2-CTA clusters sharing B through TMA multicast, both layouts.
    for (shape, persistent, layout) in [
        ((128, 256, 4, 2), true, Layout::Row),
        ((128, 192, 5, 2), false, Layout::Row),
        ((128, 256, 4, 2), false, Layout::Col),
        ((256, 128, 4, 2), true, Layout::Col),
    ] {
        let mut s = spec(shape, persistent, layout, DType::Bf16);
        s.params.cluster_m = 2;
        v.push(s);
    }
    // Split-K (the epilogue stores fp32 partials), alone, with a cluster, persistent.
    for (shape, persistent, layout, split, cluster_m) in [
        ((64, 64, 4, 1), false, Layout::Row, 4, 1),
        ((128, 256, 4, 2), true, Layout::Row, 2, 1),
        ((128, 144, 4, 2), true, Layout::Col, 3, 2),
        ((256, 96, 3, 1), false, Layout::Col, 8, 1),
    ] {
        let mut s = spec(shape, persistent, layout, DType::Bf16);
        s.params.split_k = split;
        s.params.cluster_m = cluster_m;
        v.push(s);
    }
    // fp8 (k32 wgmma, block K 128, B stored N x K): e4m3 and e5m2, bf16 and f16 out, with a
    // cluster and a split.
    for (shape, persistent, input, output, split, cluster_m) in [
        ((128, 256, 4, 2), true, DType::E4m3, DType::Bf16, 1, 1),
        ((128, 128, 5, 1), false, DType::E4m3, DType::F16, 1, 2),
        ((64, 64, 6, 1), false, DType::E5m2, DType::Bf16, 4, 1),
        ((256, 128, 3, 2), true, DType::E4m3, DType::Bf16, 2, 2),
    ] {
        let mut s = spec(shape, persistent, Layout::Col, input);
        s.params.block_k = 128;
        s.params.split_k = split;
        s.params.cluster_m = cluster_m;
        s.output = output;
        v.push(s);
    }
    // The small-M path (A and B swapped, block M is wgmma's N): both B layouts, one and two
    // consumers, split-K, persistent, fp8.
    for (shape, persistent, layout, input, split) in [
        ((8, 128, 12, 1), false, Layout::Row, DType::Bf16, 1),
        ((16, 256, 8, 2), true, Layout::Row, DType::Bf16, 1),
        ((32, 128, 8, 2), false, Layout::Col, DType::F16, 3),
        ((64, 64, 6, 1), false, Layout::Row, DType::Bf16, 4),
        ((64, 256, 4, 2), true, Layout::Col, DType::Bf16, 1),
        ((8, 128, 8, 1), false, Layout::Col, DType::E4m3, 2),
        ((32, 256, 4, 2), false, Layout::Col, DType::E5m2, 1),
    ] {
        let mut s = spec(shape, persistent, layout, input);
        s.params.swap_ab = true;
        s.params.split_k = split;
        if input.is_fp8() {
            s.params.block_k = 128;
            s.output = DType::Bf16;
        }
        v.push(s);
    }
    // At the swapped multi-slab budgets with split-K: 96 (two consumers), 112 (one).
    for (shape, layout) in [
        ((96, 256, 4, 2), Layout::Row),
        ((112, 128, 6, 1), Layout::Col),
    ] {
        let mut s = spec(shape, false, layout, DType::Bf16);
        s.params.swap_ab = true;
        s.params.split_k = 2;
        v.push(s);
    }
    // The swapped path with clusters of two sharing B's tile, and with block M past one slab
    // (80, 160, 176 and 256 rows as wgmma's N).
    for (shape, layout, input) in [
        ((64, 128, 8, 1), Layout::Row, DType::Bf16),
        ((32, 256, 6, 2), Layout::Col, DType::Bf16),
        ((64, 128, 6, 1), Layout::Col, DType::E4m3),
        ((80, 192, 6, 1), Layout::Row, DType::Bf16),
        ((160, 128, 6, 2), Layout::Row, DType::Bf16),
        ((176, 128, 5, 2), Layout::Col, DType::F16),
        ((256, 128, 4, 2), Layout::Row, DType::Bf16),
        // At the swapped multi-slab budgets without split-K: 144 (one consumer), 128 (two).
        ((144, 128, 5, 1), Layout::Row, DType::Bf16),
        ((128, 256, 4, 2), Layout::Col, DType::Bf16),
    ] {
        let mut s = spec(shape, true, layout, input);
        s.params.swap_ab = true;
        s.params.cluster_m = 2;
        if input.is_fp8() {
            s.params.block_k = 128;
            s.output = DType::Bf16;
        }
        v.push(s);
    }
    v
}

fn nvrtc_or_skip() -> bool {
    match carver_gpu::sm90::nvrtc_version() {
        Ok(_) => true,
        Err(e @ GpuError::MissingLibrary { .. }) => {
            eprintln!("skipped: {e}");
            false
        }
        Err(e) => panic!("libnvrtc loads but does not answer: {e}"),
    }
}

#[test]
fn representative_configs_compile_without_spills() {
    if !nvrtc_or_skip() {
        return;
    }
    let specs = representative();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results = compile_all(&specs, None, threads, &|_| {});
    let mut failures = Vec::new();
    for (spec, r) in specs.iter().zip(results) {
        match r {
            Ok(k) => {
                eprintln!(
                    "{}: {} registers, {} B stack, {:.2} s, {} ptxas warnings",
                    spec.label(),
                    k.report.registers,
                    k.report.stack_frame_bytes,
                    k.compile_s,
                    k.report.warnings.len()
                );
                assert!(!k.report.spills(), "{}", spec.label());
                assert_eq!(k.report.stack_frame_bytes, 0, "{}: {}", spec.label(), k.log);
                // wgmma must stay asynchronous: ptxas says so when it serializes it.
                assert!(
                    k.report.warnings.iter().all(|w| !w.contains("wgmma")),
                    "{}: {:?}",
                    spec.label(),
                    k.report.warnings
                );
                // An ELF image.
                assert_eq!(&k.cubin[..4], b"\x7fELF", "{}", spec.label());
            }
            Err(e) => failures.push(format!("{}: {e}", spec.label())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn unsupported_configs_are_refused_before_compiling() {
    // No NVRTC needed: the check comes first.
    let mut s = spec((128, 128, 4, 2), false, Layout::Row, DType::Bf16);
    s.params.cluster_m = 3;
    match compile_kernel(&s) {
        Err(GpuError::UnsupportedConfig { reason, .. }) => assert_eq!(
            reason,
            ConfigError::Sm90(Sm90Violation::ClusterM { cluster_m: 3 })
        ),
        Err(e) => panic!("{e}"),
        Ok(k) => panic!("{} compiled", k.spec.label()),
    }
}

#[test]
fn the_cache_returns_what_was_compiled() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(dir.path()).unwrap();
    let s = spec((128, 128, 4, 1), false, Layout::Row, DType::Bf16);
    let no_defect = |d: &CacheDefect| panic!("unexpected defect: {d}");
    let first = cache.get_or_compile(&s, &no_defect).unwrap();
    assert!(!first.from_cache);
    let second = cache.get_or_compile(&s, &no_defect).unwrap();
    assert!(second.from_cache);
    assert_eq!(first.cubin, second.cubin);
    assert_eq!(first.report, second.report);
    assert!(second.path.unwrap().starts_with(dir.path().join("kernels")));
    // Another configuration has another key.
    let other = spec((128, 64, 4, 1), false, Layout::Row, DType::Bf16);
    assert_ne!(cache.key(&s), cache.key(&other));
}

/// A cubin changed on disk after it was compiled (one flipped bit, a truncation, its index entry
/// deleted or corrupted) is not loaded: the defect is reported, the kernel compiled again, and
/// the entry replaced with the real cubin.
#[test]
fn a_damaged_cache_entry_is_reported_and_compiled_again() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(dir.path()).unwrap();
    let s = spec((128, 128, 4, 1), false, Layout::Row, DType::Bf16);
    let real = cache.get_or_compile(&s, &|d| panic!("{d}")).unwrap();
    let key = cache.key(&s);
    let cubin_path = dir.path().join("kernels").join(format!("{key}.cubin"));
    let index_path = dir.path().join("kernels").join(format!("{key}.json"));
    let flip = |p: &std::path::Path| {
        let mut b = std::fs::read(p).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x40;
        std::fs::write(p, b).unwrap();
    };
    type Damage<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let damages: Vec<Damage> = vec![
        ("a flipped bit", Box::new(|| flip(&cubin_path))),
        (
            "a truncation",
            Box::new(|| std::fs::write(&cubin_path, &real.cubin[..100]).unwrap()),
        ),
        (
            "a deleted index entry",
            Box::new(|| std::fs::remove_file(&index_path).unwrap()),
        ),
        (
            "a corrupt index entry",
            Box::new(|| std::fs::write(&index_path, b"{\"format\":1,").unwrap()),
        ),
    ];
    for (what, damage) in damages {
        damage();
        assert!(cache.load(&s).is_err(), "{what}: loaded");
        let reported = std::sync::Mutex::new(Vec::new());
        let k = cache
            .get_or_compile(&s, &|d| reported.lock().unwrap().push(d.to_string()))
            .unwrap();
        let reported = reported.into_inner().unwrap();
        eprintln!("{what}: {reported:?}");
        assert_eq!(reported.len(), 1, "{what}");
        assert!(!k.from_cache, "{what}");
        assert_eq!(k.cubin, real.cubin, "{what}");
        let again = cache.load(&s).unwrap().expect("replaced");
        assert_eq!(again.cubin, real.cubin, "{what}");
    }
}

#[test]
fn the_repack_copy_kernel_compiles_without_local_memory() {
    if !nvrtc_or_skip() {
        return;
    }
    let (cubin, log) = compile_source(REPACK_SOURCE, REPACK_NAME).unwrap();
    let report = PtxasReport::parse(&log).expect("ptxas reports the copy kernel");
    eprintln!(
        "{REPACK_NAME}: {} registers, {} B stack",
        report.registers, report.stack_frame_bytes
    );
    // The per-shift specialisations keep every register index constant: no local array.
    assert!(!report.spills(), "{log}");
    assert_eq!(report.stack_frame_bytes, 0, "{log}");
    assert_eq!(&cubin[..4], b"\x7fELF");
}

#[test]
fn the_split_k_reduction_compiles_without_local_memory() {
    if !nvrtc_or_skip() {
        return;
    }
    let (cubin, log) = compile_source(SPLITK_SOURCE, SPLITK_NAME).unwrap();
    let report = PtxasReport::parse(&log).expect("ptxas reports the reduction");
    eprintln!(
        "{SPLITK_NAME}: {} registers, {} B stack",
        report.registers, report.stack_frame_bytes
    );
    assert!(!report.spills(), "{log}");
    assert_eq!(report.stack_frame_bytes, 0, "{log}");
    assert_eq!(&cubin[..4], b"\x7fELF");
}
