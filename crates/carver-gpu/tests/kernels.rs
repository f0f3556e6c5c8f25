//! The calibration microbenchmarks compile with NVRTC for every family carver estimates. Needs
//! libnvrtc (the `nvidia-cuda-nvrtc` wheel is enough), not a GPU; skipped without it.

use carver_arch::ComputeCapability;
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
        for entry in [
            "fill_u32",
            "fill_f16",
            "fill_bf16",
            "poison_u16",
            "l2_read",
            "smem_read",
        ] {
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
