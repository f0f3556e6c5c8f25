//! On a real GPU: detection, matching and calibration. Each test skips, saying why, on a
//! machine without a CUDA driver or GPU; any other failure fails.

use carver_arch::{CalibrationStore, ComputeClass, HardwareDb, Origin, validate};
use carver_gpu::{CalibrationOptions, GpuError, calibrate, detect, detect_all, detect_arch};

/// The hardware database when a GPU is usable; `None` (after saying why) when there is none.
fn gpu_or_skip() -> Option<HardwareDb> {
    match carver_gpu::device_count() {
        Ok(_) => Some(HardwareDb::embedded().unwrap()),
        Err(e @ (GpuError::NoDriver | GpuError::NoDevice { .. })) => {
            eprintln!("skipped: no GPU here ({e})");
            None
        }
        Err(e) => panic!("a CUDA driver is present but unusable: {e}"),
    }
}

fn is_h100_sxm(name: &str) -> bool {
    name.contains("H100") && name.contains("HBM3")
}

#[test]
fn every_gpu_is_detected_and_modelled() {
    let Some(db) = gpu_or_skip() else { return };
    let gpus = detect_all(&db, None).unwrap();
    assert!(!gpus.is_empty());
    for (i, gpu) in gpus.iter().enumerate() {
        eprintln!(
            "GPU {i}: {} {} driver {} CUDA {} matched {:?} power {:?} W",
            gpu.name,
            gpu.uuid,
            gpu.driver_version,
            gpu.cuda_driver_version,
            gpu.matched,
            gpu.power_limit_w
        );
        assert_eq!(gpu.index, i);
        assert!(gpu.uuid.starts_with("GPU-"), "{}", gpu.uuid);
        assert_eq!(
            gpu.uuid, gpu.nvml_query.uuid,
            "driver and NVML see different devices"
        );
        assert!(!gpu.driver_version.is_empty());
        let a = &gpu.arch;
        validate(a, "detected", None).unwrap();
        assert_eq!(
            a.origin,
            Origin::Live {
                uuid: gpu.uuid.clone(),
                base: gpu.matched.clone()
            }
        );
        assert_eq!(a.sm.count, gpu.driver_query.sm_count);
        assert_eq!(a.memory.bandwidth_bytes_per_s, a.derived_dram_bandwidth());
        assert!(a.calibration.is_none(), "no cache directory was given");
        if is_h100_sxm(&gpu.name) {
            assert_eq!(gpu.matched.as_deref(), Some("h100-sxm"));
            assert_eq!(a.sm.count, 132);
            assert_eq!(a.shared_memory.per_block_optin_bytes, 232_448);
            assert_eq!(a.l2.size_bytes, 52_428_800);
            assert!((a.memory.bandwidth_bytes_per_s - 3.35e12).abs() < 0.01e12);
        }
    }
}

#[test]
fn a_device_index_past_the_last_gpu_is_refused() {
    let Some(db) = gpu_or_skip() else { return };
    let count = carver_gpu::device_count().unwrap();
    match detect(&db, count, None) {
        Err(GpuError::NoSuchDevice { index, count: c }) => assert_eq!((index, c), (count, count)),
        other => panic!("expected NoSuchDevice, got {other:?}"),
    }
}

#[test]
fn calibration_measures_plausible_ceilings_that_detection_then_applies() {
    let Some(db) = gpu_or_skip() else { return };
    let mut steps = Vec::new();
    let outcome = calibrate(&db, 0, &CalibrationOptions::default(), &mut |s| {
        steps.push(s.label)
    })
    .unwrap();
    assert_eq!(steps.len(), 6, "{steps:?}");
    for f in &outcome.figures {
        eprintln!(
            "{:<28} {:>12.4e} {:<8} spec {:>12.4e} ratio {:.3} runs {} ({:.4e} .. {:.4e})",
            f.label,
            f.measured,
            f.unit,
            f.spec,
            f.measured / f.spec,
            f.runs,
            f.slowest,
            f.fastest
        );
        assert!(f.measured.is_finite() && f.measured > 0.0, "{}", f.label);
        assert!(
            f.slowest <= f.measured && f.measured <= f.fastest,
            "{}",
            f.label
        );
        assert!(!f.method.is_empty());
    }
    let c = &outcome.calibration;
    let arch = &outcome.device.arch;
    assert_eq!(c.uuid, outcome.device.uuid);
    assert_eq!(c.base_key, outcome.device.matched);
    assert_eq!(c.method.len(), outcome.figures.len());

    let dram = c.dram_bandwidth_bytes_per_s.unwrap();
    let dram_ratio = dram / arch.memory.bandwidth_bytes_per_s;
    assert!(
        (0.5..=1.1).contains(&dram_ratio),
        "DRAM at {dram_ratio:.3} of spec"
    );
    let l2 = c.l2_bandwidth_bytes_per_s.unwrap();
    assert!(
        l2 > 1.2 * dram && l2 < 1e14,
        "L2 {l2:.3e} B/s vs DRAM {dram:.3e} B/s"
    );
    let smem = c.smem_bandwidth_bytes_per_s.unwrap();
    // Bytes per clock x SMs x the boost clock bounds what shared memory can deliver.
    let smem_ceiling = f64::from(arch.shared_memory.bytes_per_clock_per_sm)
        * f64::from(arch.sm.count)
        * arch.sm.boost_clock_mhz
        * 1e6;
    assert!(
        smem > l2,
        "shared memory {smem:.3e} B/s is not above L2 {l2:.3e} B/s"
    );
    assert!(
        (0.5..=1.02).contains(&(smem / smem_ceiling)),
        "shared memory at {:.3} of bytes/clock x SMs x boost clock",
        smem / smem_ceiling
    );
    for class in [ComputeClass::Bf16, ComputeClass::F16] {
        let measured = c.peak_tflops[&class];
        let peak = arch.peak[&class].tflops;
        // cuBLAS reaches about 80% of peak on an H100; above the boost-clock peak is impossible.
        let boost_peak = peak * arch.sm.boost_clock_mhz / arch.sm.sustained_clock_mhz;
        assert!(
            measured > 0.4 * peak && measured < boost_peak,
            "{class}: {measured:.1} TFLOP/s against a {peak:.1} TFLOP/s peak"
        );
    }

    let cache = tempfile::tempdir().unwrap();
    CalibrationStore::new(cache.path()).save(c).unwrap();
    let calibrated = detect_arch(&db, 0, Some(cache.path())).unwrap();
    assert_eq!(calibrated.calibration.as_ref(), Some(c));
    assert_eq!(calibrated.dram_bandwidth(), dram);
    assert_eq!(calibrated.l2_bandwidth(), l2);
    assert_eq!(
        calibrated.peak_flops(ComputeClass::Bf16),
        Some(c.peak_tflops[&ComputeClass::Bf16] * 1e12)
    );
}
