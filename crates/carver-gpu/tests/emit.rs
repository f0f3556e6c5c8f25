//! `carver tune --emit`'s writer with real compiles: the directory holds the kernel's source, an
//! ELF cubin whose hash launch.json records (and the split-K reduction's, with a split), and the
//! example that launches it from Python (examples/emit) reads that launch.json and packs its
//! arguments as described (its GPU-free tests).
//!
//! Needs libnvrtc, not a GPU (skipped, saying why, without it); the Python part needs python3
//! (skipped, saying why, without it).

use std::path::Path;
use std::process::Command;

use carver::family::Sm90Params;
use carver::{DType, Layout};
use carver_gpu::GpuError;
use carver_gpu::sm90::{
    EmitError, EmitInputs, GemmDims, KernelCache, KernelSpec, LAUNCH_FILE, emit, sha256_hex,
};
use carver_schema::{EmitDevice, EmittedKernel};

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

fn spec(split_k: u32, cluster_m: u32, layout_b: Layout) -> KernelSpec {
    KernelSpec {
        params: Sm90Params {
            block_m: 64,
            block_n: 128,
            block_k: 64,
            stages: 4,
            consumers: 1,
            group_m: 8,
            cluster_m,
            persistent: false,
            split_k,
            swap_ab: false,
        },
        input: DType::Bf16,
        output: DType::Bf16,
        layout_b,
    }
}

fn inputs(spec: KernelSpec, dims: GemmDims) -> EmitInputs {
    let grid = spec.units(dims.m, dims.n, dims.batch) * u64::from(spec.params.cluster_m);
    EmitInputs {
        spec,
        dims,
        device: EmitDevice {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: "9.0".into(),
            sm_count: 132,
        },
        grid: u32::try_from(grid).unwrap(),
        blocks_per_sm: 2,
        measured_time_s: Some(2e-5),
        cublas_time_s: None,
    }
}

/// Runs the example's GPU-free tests on `launch`, when python3 is here.
fn python_reads(launch: &Path) {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/emit/test_launch_emitted.py");
    let out = match Command::new("python3")
        .arg(&example)
        .env("CARVER_EMIT_LAUNCH_JSON", launch)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped the Python reader: python3 cannot be started ({e})");
            return;
        }
    };
    assert!(
        out.status.success(),
        "{}: {}\n{}",
        example.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn emit_writes_real_cubins_that_launch_json_describes() {
    if !nvrtc_or_skip() {
        return;
    }
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = KernelCache::new(cache_dir.path()).unwrap();
    let root = tempfile::tempdir().unwrap();
    // A split-K decode GEMM; a batched one with clusters and column-major B.
    let cases = [
        (
            spec(4, 1, Layout::Row),
            GemmDims {
                m: 1,
                n: 4096,
                k: 8192,
                batch: 1,
            },
            "1x4096x8192_bf16_rr",
        ),
        (
            spec(1, 2, Layout::Col),
            GemmDims {
                m: 512,
                n: 512,
                k: 256,
                batch: 4,
            },
            "512x512x256_batch4_bf16_rc",
        ),
    ];
    for (spec, dims, name) in cases {
        let written = emit(root.path(), &cache, &inputs(spec, dims), &|d| {
            panic!("a fresh cache has no defects: {d}")
        })
        .unwrap();
        assert_eq!(written.directory, root.path().join(name));
        let launch = written.directory.join(LAUNCH_FILE);
        let doc: EmittedKernel = serde_json::from_slice(&std::fs::read(&launch).unwrap()).unwrap();
        let split = spec.params.split_k > 1;
        assert_eq!(doc.kernels.len(), if split { 2 } else { 1 });
        for k in &doc.kernels {
            let cubin = std::fs::read(written.directory.join(&k.cubin_file)).unwrap();
            assert_eq!(&cubin[..4], b"\x7fELF", "{}", k.cubin_file);
            assert_eq!(sha256_hex(&cubin), k.cubin_sha256, "{}", k.cubin_file);
            let source = std::fs::read_to_string(written.directory.join(&k.source_file)).unwrap();
            assert!(
                source.contains(&format!("{}(", k.entry_point)),
                "{}",
                k.source_file
            );
        }
        // The source is the instantiation that was compiled, configuration included.
        let source = std::fs::read_to_string(written.directory.join("kernel.cu")).unwrap();
        assert_eq!(source, spec.source());
        assert_eq!(doc.kernels[0].cluster, [spec.params.cluster_m, 1, 1]);
        python_reads(&launch);
    }
    // A problem whose rows need the padded copies is refused before anything is compiled or
    // written.
    let unaligned = GemmDims {
        m: 64,
        n: 777,
        k: 1000,
        batch: 1,
    };
    let e = emit(
        root.path(),
        &cache,
        &inputs(spec(1, 1, Layout::Row), unaligned),
        &|_| {},
    )
    .unwrap_err();
    assert!(matches!(e, EmitError::UnalignedRows { .. }), "{e}");
    assert!(!root.path().join("64x777x1000_bf16_rr").exists());
}
