//! The run-time compiled helper sources compile with NVRTC, each with the shared helpers of
//! `src/cuda/common.cuh` in front: the calibration microbenchmarks for every generation carver
//! estimates, the tuning worker's helpers for sm_90. Needs libnvrtc (the `nvidia-cuda-nvrtc`
//! wheel is enough), not a GPU; skipped without it.

use carver_arch::ComputeCapability;
use carver_gpu::tune::compile_worker_helpers;
use carver_gpu::{GpuError, compile_calibration_kernels};

#[test]
fn calibration_kernels_compile_for_every_tensor_core_family() {
    for (major, minor) in [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)] {
        let ptx = match compile_calibration_kernels(ComputeCapability::new(major, minor)) {
            Ok(ptx) => ptx,
            Err(GpuError::MissingLibrary { .. }) => {
                eprintln!("skipped: libnvrtc is not installed on this machine");
                return;
            }
            Err(e) => panic!("sm_{major}{minor}: {e}"),
        };
        for entry in ["fill_u32", "fill_16", "poison_u16", "l2_read", "smem_read"] {
            assert!(
                ptx.contains(&format!(".entry {entry}(")),
                "sm_{major}{minor}: no {entry}"
            );
        }
        // The loads the measurements rely on: 16-byte, L2-only global loads and 16-byte
        // shared loads that ptxas may not merge.
        assert!(ptx.contains("ld.global.cg.v4.u32"), "sm_{major}{minor}");
        assert!(
            ptx.contains("ld.volatile.shared.v4.u32"),
            "sm_{major}{minor}"
        );
        assert!(
            ptx.contains(&format!(".target sm_{major}{minor}")),
            "sm_{major}{minor}"
        );
    }
}

#[test]
fn tuning_worker_helpers_compile_for_hopper() {
    let ptx = match compile_worker_helpers() {
        Ok(ptx) => ptx,
        Err(GpuError::MissingLibrary { .. }) => {
            eprintln!("skipped: libnvrtc is not installed on this machine");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    for entry in ["fill_16", "poison_u16", "diff_16", "fill_fp8", "fp8_to_16"] {
        assert!(ptx.contains(&format!(".entry {entry}(")), "no {entry}");
    }
    assert!(ptx.contains(".target sm_90"));
    // The output check accumulates in f64 with reductions, not a loop of atomics per element.
    assert!(ptx.contains("red.global.add.f64"));
}
