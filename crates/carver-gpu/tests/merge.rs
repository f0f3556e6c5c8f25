//! The pure part of live detection: merging made-up device answers into a model. No GPU needed.

use carver_arch::{
    ArchField, CALIBRATION_FORMAT, Calibration, CalibrationStore, ComputeCapability, ComputeClass,
    HardwareDb, InstructionFamily, Origin, validate,
};
use carver_gpu::{
    DriverQuery, L2_TO_DRAM_ESTIMATE, LIVE_FIELDS, NvmlQuery, attach_calibration, key_from_name,
    merge_live,
};

/// The figure named by a dotted path, as a hardware-db file writes it.
fn field(path: &str) -> ArchField {
    path.parse().unwrap()
}

const H100_UUID: &str = "GPU-12345678-9abc-def0-0123-456789abcdef";

/// What the lent H100 reported (see shared/DEVICE.md).
fn h100_driver() -> DriverQuery {
    DriverQuery {
        index: 0,
        name: "NVIDIA H100 80GB HBM3".into(),
        uuid: H100_UUID.into(),
        compute_capability: ComputeCapability::new(9, 0),
        sm_count: 132,
        warp_size: 32,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        max_threads_per_block: 1024,
        shared_memory_per_block_default_bytes: 49152,
        shared_memory_per_block_optin_bytes: 232448,
        shared_memory_per_sm_bytes: 233472,
        shared_memory_reserved_per_block_bytes: 1024,
        registers_per_sm: 65536,
        registers_per_block: 65536,
        l2_size_bytes: 52428800,
        memory_clock_mhz: 2619.0,
        memory_bus_width_bits: 5120,
        max_sm_clock_mhz: 1980.0,
        total_memory_bytes: 85_029_158_912,
        cuda_driver_version: 13000,
    }
}

fn nvml_for(d: &DriverQuery) -> NvmlQuery {
    NvmlQuery {
        name: d.name.clone(),
        uuid: d.uuid.clone(),
        driver_version: "580.159.04".into(),
        max_sm_clock_mhz: d.max_sm_clock_mhz as u32,
        max_memory_clock_mhz: d.memory_clock_mhz as u32,
        power_limit_w: Some(700.0),
    }
}

fn db() -> HardwareDb {
    HardwareDb::embedded().unwrap()
}

#[test]
fn an_h100_matches_its_entry_and_keeps_its_figures() {
    let db = db();
    let d = h100_driver();
    let live = merge_live(&db, &d, &nvml_for(&d)).unwrap();
    let entry = db.get("h100-sxm").unwrap();
    assert_eq!(live.matched.as_deref(), Some("h100-sxm"));
    let a = &live.arch;
    assert_eq!(a.key(), "h100-sxm");
    assert_eq!(
        a.origin,
        Origin::Live {
            uuid: H100_UUID.into(),
            base: Some("h100-sxm".into())
        }
    );
    assert_eq!(a.sm, entry.sm);
    assert_eq!(a.shared_memory, entry.shared_memory);
    assert_eq!(a.registers, entry.registers);
    assert_eq!(a.peak, entry.peak);
    assert_eq!(a.tensor_instructions, entry.tensor_instructions);
    assert_eq!(a.l2, entry.l2);
    assert_eq!(a.estimated, entry.estimated);
    // Bandwidth is derived from the reported clock and bus, not copied from the datasheet.
    assert_eq!(a.memory.bandwidth_bytes_per_s, 2.0 * 2619e6 * 5120.0 / 8.0);
    assert_eq!(a.memory.capacity_bytes, 85_029_158_912);
    assert!(a.gpu.sources.last().unwrap().contains(H100_UUID));
    assert!(a.gpu.sources.last().unwrap().contains("580.159.04"));
    assert!(a.calibration.is_none());
    validate(a, "test", None).unwrap();
}

#[test]
fn every_reported_figure_replaces_the_stored_one() {
    let db = db();
    let mut d = h100_driver();
    d.sm_count = 114;
    d.max_threads_per_sm = 1536;
    d.max_blocks_per_sm = 24;
    d.max_threads_per_block = 512;
    d.shared_memory_per_block_optin_bytes = 200_000;
    d.shared_memory_per_block_default_bytes = 40_000;
    d.shared_memory_per_sm_bytes = 210_000;
    d.shared_memory_reserved_per_block_bytes = 2048;
    d.registers_per_sm = 32768;
    d.registers_per_block = 32768;
    d.l2_size_bytes = 40 << 20;
    d.memory_clock_mhz = 2000.0;
    d.memory_bus_width_bits = 4096;
    d.total_memory_bytes = 64 << 30;
    let mut nvml = nvml_for(&d);
    nvml.max_sm_clock_mhz = 1900;
    let a = merge_live(&db, &d, &nvml).unwrap().arch;
    assert_eq!(a.sm.count, 114);
    assert_eq!(a.sm.max_threads, 1536);
    assert_eq!(a.sm.max_blocks, 24);
    assert_eq!(a.sm.max_threads_per_block, 512);
    assert_eq!(a.sm.boost_clock_mhz, 1900.0);
    assert_eq!(a.shared_memory.per_block_optin_bytes, 200_000);
    assert_eq!(a.shared_memory.per_block_default_bytes, 40_000);
    assert_eq!(a.shared_memory.per_sm_bytes, 210_000);
    assert_eq!(a.shared_memory.reserved_per_block_bytes, 2048);
    assert_eq!(a.registers.per_sm, 32768);
    assert_eq!(a.registers.per_block, 32768);
    assert_eq!(a.l2.size_bytes, 40 << 20);
    assert_eq!(a.memory.memory_clock_mhz, 2000.0);
    assert_eq!(a.memory.bus_width_bits, 4096);
    assert_eq!(a.memory.capacity_bytes, 64 << 30);
    assert_eq!(a.memory.bandwidth_bytes_per_s, 2.0 * 2000e6 * 4096.0 / 8.0);
    // Fewer SMs: the stored tensor peaks no longer hold and are recomputed, marked as estimates.
    let f16 = &a.peak[&ComputeClass::F16];
    assert!((f16.tflops - 114.0 * 4.0 * 1024.0 * 1830e6 / 1e12).abs() < 1e-9);
    assert!(a.estimated.contains(&field("peak.f16")));
    // The fp32 peak was quoted at the stored boost clock (1980): it now holds at 1900.
    assert_eq!(a.peak[&ComputeClass::Fp32].clock_mhz, Some(1900.0));
    assert!(a.estimated.contains(&field("peak.fp32")));
    validate(&a, "test", None).unwrap();
}

#[test]
fn a_boost_clock_below_the_stored_sustained_clock_lowers_it() {
    let db = db();
    let d = h100_driver();
    let mut nvml = nvml_for(&d);
    nvml.max_sm_clock_mhz = 1600;
    let a = merge_live(&db, &d, &nvml).unwrap().arch;
    assert_eq!(a.sm.boost_clock_mhz, 1600.0);
    assert_eq!(a.sm.sustained_clock_mhz, 1600.0);
    assert!(a.estimated.contains(&field("sm.sustained_clock_mhz")));
    validate(&a, "test", None).unwrap();
}

#[test]
fn the_driver_clock_stands_in_when_nvml_reports_none() {
    let db = db();
    let d = h100_driver();
    let mut nvml = nvml_for(&d);
    nvml.max_sm_clock_mhz = 0;
    let a = merge_live(&db, &d, &nvml).unwrap().arch;
    assert_eq!(a.sm.boost_clock_mhz, 1980.0);
}

#[test]
fn a_figure_the_device_reports_is_never_left_marked_as_estimated() {
    let mut db = db();
    let mut entry = db.get("h100-sxm").unwrap().clone();
    entry.estimated.insert(field("sm.count"));
    entry
        .estimated
        .insert(field("memory.bandwidth_bytes_per_s"));
    // A figure the driver does not report (L2 bandwidth) keeps its mark.
    entry.estimated.insert(field("l2.bandwidth_bytes_per_s"));
    db.insert(entry);
    let d = h100_driver();
    let a = merge_live(&db, &d, &nvml_for(&d)).unwrap().arch;
    assert!(!a.estimated.contains(&field("sm.count")));
    assert!(!a.estimated.contains(&field("memory.bandwidth_bytes_per_s")));
    assert!(a.estimated.contains(&field("l2.bandwidth_bytes_per_s")));
}

#[test]
fn every_live_field_is_a_real_path_of_the_model() {
    let db = db();
    let d = h100_driver();
    let mut a = merge_live(&db, &d, &nvml_for(&d)).unwrap().arch;
    for live in LIVE_FIELDS {
        assert_eq!(field(&live.to_string()), *live);
        a.estimated.insert(*live);
    }
    validate(&a, "test", None).unwrap();
}

#[test]
fn a_different_compute_capability_does_not_match() {
    let db = db();
    let mut d = h100_driver();
    d.compute_capability = ComputeCapability::new(9, 1);
    let live = merge_live(&db, &d, &nvml_for(&d)).unwrap();
    assert_eq!(live.matched, None);
    assert_eq!(live.arch.key(), "h100-80gb-hbm3");
    // 9.1 has no row of its own: the Hopper row stands in and the architecture is a guess.
    assert_eq!(live.arch.gpu.architecture, "hopper");
    assert!(live.arch.estimated.contains(&field("gpu.architecture")));
    assert_eq!(
        live.arch.origin,
        Origin::Live {
            uuid: H100_UUID.into(),
            base: None
        }
    );
}

/// An RTX A5000-like board, which the database does not hold.
fn unknown_ampere() -> DriverQuery {
    DriverQuery {
        index: 1,
        name: "NVIDIA RTX A5000".into(),
        uuid: "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".into(),
        compute_capability: ComputeCapability::new(8, 6),
        sm_count: 64,
        warp_size: 32,
        max_threads_per_sm: 1536,
        max_blocks_per_sm: 16,
        max_threads_per_block: 1024,
        shared_memory_per_block_default_bytes: 49152,
        shared_memory_per_block_optin_bytes: 101_376,
        shared_memory_per_sm_bytes: 102_400,
        shared_memory_reserved_per_block_bytes: 1024,
        registers_per_sm: 65536,
        registers_per_block: 65536,
        l2_size_bytes: 6 << 20,
        memory_clock_mhz: 8001.0,
        memory_bus_width_bits: 384,
        max_sm_clock_mhz: 1800.0,
        total_memory_bytes: 24 << 30,
        cuda_driver_version: 12080,
    }
}

#[test]
fn a_gpu_missing_from_the_database_gets_a_complete_estimated_model() {
    let db = db();
    let d = unknown_ampere();
    let live = merge_live(&db, &d, &nvml_for(&d)).unwrap();
    assert_eq!(live.matched, None);
    let a = &live.arch;
    validate(a, "test", None).unwrap();
    assert_eq!(a.key(), "rtx-a5000");
    assert_eq!(a.gpu.name, "NVIDIA RTX A5000");
    assert_eq!(a.gpu.architecture, "ampere");
    assert_eq!(a.sm.count, 64);
    assert_eq!(a.sm.tensor_cores, 4);
    assert_eq!(a.shared_memory.per_block_optin_bytes, 101_376);
    assert_eq!(a.memory.kind, "GDDR");
    let dram = 2.0 * 8001e6 * 384.0 / 8.0;
    assert_eq!(a.memory.bandwidth_bytes_per_s, dram);
    assert_eq!(a.l2.bandwidth_bytes_per_s, L2_TO_DRAM_ESTIMATE * dram);
    let f16 = &a.peak[&ComputeClass::F16];
    assert!((f16.tflops - 64.0 * 4.0 * 256.0 * 1800e6 / 1e12).abs() < 1e-9);
    assert!(
        a.instructions_for(ComputeClass::Bf16)
            .any(|i| i.family == InstructionFamily::MmaSync)
    );
    assert!(!a.supports(ComputeClass::Fp8));
    for path in [
        "sm.sustained_clock_mhz",
        "sm.tensor_cores",
        "shared_memory.bytes_per_clock_per_sm",
        "memory.kind",
        "l2.bandwidth_bytes_per_s",
        "tensor_instructions",
        "peak.f16",
        "peak.bf16",
        "peak.tf32",
        "peak.int8",
        "peak.fp32",
        "peak.fp64",
    ] {
        assert!(
            a.estimated.contains(&field(path)),
            "{path} should be marked estimated"
        );
    }
    // A row exists for 8.6, so the architecture name is not a guess; nor is anything reported.
    assert!(!a.estimated.contains(&field("gpu.architecture")));
    for live in LIVE_FIELDS {
        assert!(
            !a.estimated.contains(live),
            "{live} was reported by the device"
        );
    }
    assert!(a.gpu.sources.iter().any(|s| s.contains("generation table")));
}

#[test]
fn a_future_gpu_borrows_the_newest_family_and_says_so() {
    let db = db();
    let mut d = unknown_ampere();
    d.name = "NVIDIA Future GPU".into();
    d.compute_capability = ComputeCapability::new(13, 0);
    d.memory_bus_width_bits = 8192;
    d.memory_clock_mhz = 4000.0;
    let a = merge_live(&db, &d, &nvml_for(&d)).unwrap().arch;
    validate(&a, "test", None).unwrap();
    assert_eq!(a.gpu.architecture, "blackwell");
    assert!(a.estimated.contains(&field("gpu.architecture")));
    assert_eq!(a.memory.kind, "HBM");
}

#[test]
fn a_gpu_without_tensor_cores_gets_simt_peaks_only() {
    let db = db();
    let d = DriverQuery {
        name: "NVIDIA GeForce GTX 1080".into(),
        compute_capability: ComputeCapability::new(6, 1),
        sm_count: 20,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        shared_memory_per_block_optin_bytes: 49152,
        shared_memory_per_sm_bytes: 98304,
        shared_memory_reserved_per_block_bytes: 0,
        l2_size_bytes: 2 << 20,
        memory_clock_mhz: 5005.0,
        memory_bus_width_bits: 256,
        max_sm_clock_mhz: 1733.0,
        total_memory_bytes: 8 << 30,
        ..unknown_ampere()
    };
    let a = merge_live(&db, &d, &nvml_for(&d)).unwrap().arch;
    validate(&a, "test", None).unwrap();
    assert!(a.tensor_instructions.is_empty());
    assert_eq!(a.sm.tensor_cores, 0);
    assert_eq!(
        a.peak.keys().copied().collect::<Vec<_>>(),
        vec![ComputeClass::Fp32, ComputeClass::Fp64]
    );
    assert!(!a.estimated.contains(&field("tensor_instructions")));
}

#[test]
fn keys_are_made_from_device_names() {
    assert_eq!(key_from_name("NVIDIA RTX A6000"), "rtx-a6000");
    assert_eq!(key_from_name("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
    assert_eq!(
        key_from_name("Tesla V100-SXM2-16GB"),
        "tesla-v100-sxm2-16gb"
    );
    assert_eq!(key_from_name("  "), "unknown-gpu");
}

#[test]
fn a_stored_calibration_is_found_by_uuid() {
    let db = db();
    let d = h100_driver();
    let mut a = merge_live(&db, &d, &nvml_for(&d)).unwrap().arch;
    let dir = tempfile::tempdir().unwrap();
    let store = CalibrationStore::new(dir.path());
    assert!(attach_calibration(&mut a, H100_UUID, &store).is_empty());
    assert!(a.calibration.is_none());
    let mut calibration = Calibration {
        format: CALIBRATION_FORMAT,
        uuid: H100_UUID.into(),
        device_name: d.name.clone(),
        base_key: Some("h100-sxm".into()),
        driver_version: Some("580.159.04".into()),
        carver_version: "test".into(),
        measured_at_unix_s: 1,
        dram_bandwidth_bytes_per_s: Some(3.0e12),
        l2_bandwidth_bytes_per_s: None,
        smem_bandwidth_bytes_per_s: None,
        peak_tflops: Default::default(),
        method: Default::default(),
    };
    calibration.peak_tflops.insert(ComputeClass::Bf16, 750.0);
    store.save(&calibration).unwrap();
    assert!(attach_calibration(&mut a, H100_UUID, &store).is_empty());
    assert_eq!(a.calibration.as_ref(), Some(&calibration));
    assert_eq!(a.dram_bandwidth(), 3.0e12);
    assert_eq!(a.peak_flops(ComputeClass::Bf16), Some(750e12));
    assert!(attach_calibration(&mut a, "GPU-other", &store).is_empty());
    assert!(a.calibration.is_none());
}

#[test]
fn a_stored_calibration_that_fails_its_checks_is_reported_and_not_applied() {
    let db = db();
    let d = h100_driver();
    let mut a = merge_live(&db, &d, &nvml_for(&d)).unwrap().arch;
    let dir = tempfile::tempdir().unwrap();
    let store = CalibrationStore::new(dir.path());
    let mut calibration = Calibration {
        format: CALIBRATION_FORMAT,
        uuid: H100_UUID.into(),
        device_name: d.name.clone(),
        base_key: Some("h100-sxm".into()),
        driver_version: None,
        carver_version: "test".into(),
        measured_at_unix_s: 1,
        // Half the DRAM bandwidth of the spec sheet's is plausible; a fiftieth is not.
        dram_bandwidth_bytes_per_s: Some(3.35e12 / 50.0),
        l2_bandwidth_bytes_per_s: None,
        smem_bandwidth_bytes_per_s: None,
        peak_tflops: Default::default(),
        method: Default::default(),
    };
    store.save(&calibration).unwrap();
    let ignored = attach_calibration(&mut a, H100_UUID, &store);
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    let message = ignored[0].to_string();
    assert!(message.contains(H100_UUID), "{message}");
    assert!(message.contains("dram_bandwidth_bytes_per_s"), "{message}");
    assert!(message.contains("0.05x to 2x"), "{message}");
    assert!(a.calibration.is_none());
    assert_eq!(a.dram_bandwidth(), a.memory.bandwidth_bytes_per_s);

    calibration.dram_bandwidth_bytes_per_s = Some(1.7e12);
    store.save(&calibration).unwrap();
    assert!(attach_calibration(&mut a, H100_UUID, &store).is_empty());
    assert_eq!(a.dram_bandwidth(), 1.7e12);
    // Not JSON: reported, and the earlier calibration does not linger.
    std::fs::write(store.dir().join(format!("{H100_UUID}.json")), "not json").unwrap();
    let ignored = attach_calibration(&mut a, H100_UUID, &store);
    assert!(
        ignored[0].to_string().contains("not a calibration"),
        "{ignored:?}"
    );
    assert!(a.calibration.is_none());
}

// ---- What a driver reports is checked like a hardware file. ----

/// Merges `d` (and NVML answers made from it) and returns the refusal.
fn refused(d: &DriverQuery) -> String {
    let nvml = nvml_for(d);
    match merge_live(&db(), d, &nvml) {
        Ok(live) => panic!("{} was accepted: {:?}", d.name, live.arch.sm),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_driver_reporting_impossible_figures_is_refused_naming_the_figure() {
    type Break = Box<dyn Fn(&mut DriverQuery)>;
    let cases: Vec<(&str, Break)> = vec![
        ("sm.count", Box::new(|d| d.sm_count = 0)),
        ("sm.count", Box::new(|d| d.sm_count = 1 << 20)),
        ("sm.warp_size", Box::new(|d| d.warp_size = 0)),
        ("sm.max_threads", Box::new(|d| d.max_threads_per_sm = 0)),
        ("sm.max_blocks", Box::new(|d| d.max_blocks_per_sm = 0)),
        ("registers.per_sm", Box::new(|d| d.registers_per_sm = 0)),
        (
            "shared_memory.per_sm_bytes",
            Box::new(|d| d.shared_memory_per_sm_bytes = 0),
        ),
        ("l2.size_bytes", Box::new(|d| d.l2_size_bytes = u64::MAX)),
        (
            "memory.capacity_bytes",
            Box::new(|d| d.total_memory_bytes = 0),
        ),
        (
            "memory.bus_width_bits",
            Box::new(|d| d.memory_bus_width_bits = 0),
        ),
        (
            "memory.memory_clock_mhz",
            Box::new(|d| d.memory_clock_mhz = f64::NAN),
        ),
        (
            "memory.memory_clock_mhz",
            Box::new(|d| d.memory_clock_mhz = f64::INFINITY),
        ),
        (
            "memory.memory_clock_mhz",
            Box::new(|d| d.memory_clock_mhz = -1.0),
        ),
    ];
    for (field, break_it) in &cases {
        // On a GPU the database knows and on one it does not (estimated from its generation).
        for mut d in [h100_driver(), unknown_ampere()] {
            break_it(&mut d);
            let message = refused(&d);
            assert!(message.contains("live device"), "{message}");
            assert!(
                message.contains(&format!("`{field}`")),
                "{field}: {message}"
            );
            assert!(message.contains("accepted"), "{message}");
        }
    }
}

#[test]
fn a_nan_or_zero_sm_clock_from_both_driver_and_nvml_is_refused() {
    for clock in [f64::NAN, f64::INFINITY, 0.0, -1980.0, 1e12] {
        for mut d in [h100_driver(), unknown_ampere()] {
            d.max_sm_clock_mhz = clock;
            let mut nvml = nvml_for(&d);
            nvml.max_sm_clock_mhz = 0;
            let message = match merge_live(&db(), &d, &nvml) {
                Ok(live) => panic!("clock {clock} accepted: {:?}", live.arch.sm),
                Err(e) => e.to_string(),
            };
            assert!(message.contains("`sm.boost_clock_mhz`"), "{message}");
        }
    }
}
