//! Bad input gets a typed error that says what was wrong, never a panic or a silent answer.

use carver::{CarverError, DType, Family, MatmulTemplate, TopK, recommend_hints};
use carver_arch::HardwareDb;

fn h100() -> carver_arch::Arch {
    HardwareDb::embedded().unwrap().get("h100").unwrap().clone()
}

#[test]
fn zero_sizes_are_rejected() {
    for (m, n, k) in [(0, 1, 1), (1, 0, 1), (1, 1, 0)] {
        let err =
            recommend_hints(&MatmulTemplate::new(m, n, k), &h100(), TopK::DEFAULT).unwrap_err();
        assert!(matches!(err, CarverError::InvalidShape(_)), "{err}");
        assert!(err.to_string().contains("at least 1"), "{err}");
    }
}

#[test]
fn oversized_and_overflowing_sizes_are_rejected() {
    let err =
        recommend_hints(&MatmulTemplate::new(1 << 40, 1, 1), &h100(), TopK::DEFAULT).unwrap_err();
    assert!(err.to_string().contains("exceeds"), "{err}");
    let err = recommend_hints(
        &MatmulTemplate::new(1 << 30, 1 << 30, 16),
        &h100(),
        TopK::DEFAULT,
    )
    .unwrap_err();
    assert!(err.to_string().contains("2^40"), "{err}");
    let err = recommend_hints(
        &MatmulTemplate::new(1 << 20, 1 << 20, 1 << 20).with_batch(1 << 30),
        &h100(),
        TopK::DEFAULT,
    )
    .unwrap_err();
    assert!(matches!(err, CarverError::InvalidShape(_)), "{err}");
}

#[test]
fn fp8_on_an_a100_is_rejected_with_what_it_supports() {
    let db = HardwareDb::embedded().unwrap();
    let a100 = db.get("a100").unwrap();
    let err = recommend_hints(
        &MatmulTemplate::new(128, 128, 128).with_dtype(DType::E4m3),
        a100,
        TopK::DEFAULT,
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, CarverError::UnsupportedDtype { .. }),
        "{text}"
    );
    assert!(text.contains("fp8") && text.contains("bf16"), "{text}");
}

#[test]
fn out_of_range_topk_is_rejected_with_what_is_accepted() {
    for bad in [0, TopK::MAX + 1, 1_000_000_000] {
        assert_eq!(
            TopK::new(bad).unwrap_err(),
            CarverError::TopKOutOfRange(bad)
        );
    }
}

#[test]
fn unknown_target_lists_the_accepted_ones() {
    let err = "cutlass".parse::<Family>().unwrap_err();
    assert!(
        err.to_string()
            .contains("triton, tilelang, cuda-sm90, generic"),
        "{err}"
    );
}

#[test]
fn mismatched_operand_dtypes_are_rejected() {
    let mut t = MatmulTemplate::new(64, 64, 64);
    t.dtype_b = DType::Bf16;
    let err = recommend_hints(&t, &h100(), TopK::new(1).unwrap()).unwrap_err();
    assert!(err.to_string().contains("same dtype"), "{err}");
}

#[test]
fn cuda_sm90_refuses_what_it_cannot_run() {
    let db = HardwareDb::embedded().unwrap();
    let tpl = MatmulTemplate::new(256, 256, 256).with_family(Family::CudaSm90);
    let err = recommend_hints(&tpl, db.get("a100").unwrap(), TopK::DEFAULT).unwrap_err();
    assert!(err.to_string().contains("wgmma"), "{err}");
    let tpl = MatmulTemplate::new(256, 256, 256)
        .with_dtype(DType::F32)
        .with_family(Family::CudaSm90);
    let err = recommend_hints(&tpl, &h100(), TopK::DEFAULT).unwrap_err();
    assert!(
        err.to_string()
            .contains("inputs are f32; accepted: bf16, f16"),
        "{err}"
    );
}

#[test]
fn cuda_sm90_runs_unaligned_operands_through_a_priced_repack() {
    // Rows of A (K = 999) and of row-major B (N = 777) are not 16 bytes: both are copied into
    // aligned buffers first, and every hint carries the copies' time.
    for (m, n, k) in [(333, 777, 999), (1537, 2049, 3001)] {
        let tpl = MatmulTemplate::new(m, n, k)
            .with_dtype(DType::Bf16)
            .with_family(Family::CudaSm90);
        let hints = recommend_hints(&tpl, &h100(), TopK::DEFAULT).unwrap();
        assert!(!hints.is_empty(), "{m}x{n}x{k}");
        for h in &hints {
            let b = &h.prediction.breakdown;
            assert!(b.repack_us > 8.0, "{m}x{n}x{k}: {}", b.repack_us);
            assert!(h.prediction.time_us > b.repack_us);
        }
    }
    // Aligned operands are read in place: no repack.
    let tpl = MatmulTemplate::new(1024, 1024, 1024)
        .with_dtype(DType::Bf16)
        .with_family(Family::CudaSm90);
    for h in recommend_hints(&tpl, &h100(), TopK::DEFAULT).unwrap() {
        assert_eq!(h.prediction.breakdown.repack_us, 0.0);
    }
}

#[test]
fn unaligned_and_tiny_shapes_still_get_hints_for_triton() {
    for (m, n, k) in [
        (1, 1, 1),
        (333, 777, 999),
        (1537, 2049, 3001),
        (4096, 4096, 96),
        (65536, 256, 1024),
    ] {
        let hints = recommend_hints(
            &MatmulTemplate::new(m, n, k).with_family(Family::Triton),
            &h100(),
            TopK::DEFAULT,
        )
        .unwrap();
        assert!(!hints.is_empty(), "{m}x{n}x{k}");
    }
}

#[test]
fn an_illegal_native_config_is_rejected_with_its_rule() {
    use carver::{ConfigError, predict_native};
    let arch = h100();
    let tpl = MatmulTemplate::new(1024, 1024, 1024).with_family(Family::Triton);
    let config = |block_m: u32| {
        serde_json::json!({
            "kwargs": {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32},
            "num_warps": 4,
            "num_stages": 3,
        })
    };
    assert!(predict_native(&tpl, &arch, &config(64)).is_ok());
    let err = predict_native(&tpl, &arch, &config(24)).unwrap_err();
    assert!(
        matches!(
            err,
            CarverError::IllegalConfig {
                reason: ConfigError::Rule {
                    family: Family::Triton,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("BLOCK_SIZE_M = 24; Triton needs a power of two of at least 16"),
        "{err}"
    );
    let err = predict_native(&tpl, &arch, &serde_json::json!({"num_warps": 4})).unwrap_err();
    assert!(
        matches!(
            err,
            CarverError::IllegalConfig {
                reason: ConfigError::Native { ref field, .. },
                ..
            } if field == "kwargs"
        ),
        "{err:?}"
    );
    // cuda-sm90: a rule of the family, named by the family's own check.
    let tpl = MatmulTemplate::new(1024, 1024, 1024).with_family(Family::CudaSm90);
    let native = serde_json::json!({
        "block_m": 128, "block_n": 128, "block_k": 64, "stages": 20, "consumers": 2,
        "group_m": 8, "cluster_m": 1, "persistent": false,
    });
    let err = predict_native(&tpl, &arch, &native).unwrap_err();
    assert!(
        err.to_string().contains("stages = 20; accepted: 2 to 16"),
        "{err}"
    );
}
