//! The JSON form of a description (`carver_schema::ArchDescription`) prints exactly what the
//! model's own serde form printed before the schema owned it: same fields, same order, same
//! values, for every shipped GPU, every origin, with and without a calibration.

use std::collections::BTreeMap;

use carver_arch::{Arch, Calibration, ComputeClass, HardwareDb, Origin};
use carver_schema::{ArchDescription, ArchSummary};

fn calibration() -> Calibration {
    Calibration {
        format: 1,
        uuid: "GPU-1234".into(),
        device_name: "NVIDIA H100 80GB HBM3".into(),
        base_key: Some("h100-sxm".into()),
        driver_version: None,
        carver_version: "0.1.0".into(),
        measured_at_unix_s: 1_700_000_000,
        dram_bandwidth_bytes_per_s: Some(3.0e12),
        l2_bandwidth_bytes_per_s: None,
        smem_bandwidth_bytes_per_s: Some(3.1e13),
        peak_tflops: BTreeMap::from([(ComputeClass::Bf16, 700.5), (ComputeClass::F16, 701.25)]),
        method: BTreeMap::from([("dram".into(), "copy kernel".into())]),
    }
}

/// Every variant of what the loader and the live path fill in.
fn variants(arch: &Arch) -> Vec<Arch> {
    let origins = [
        arch.origin.clone(),
        Origin::Unknown,
        Origin::UserFile {
            path: "/tmp/x.toml".into(),
        },
        Origin::Live {
            uuid: "GPU-1234".into(),
            base: Some(arch.key().into()),
        },
        Origin::Live {
            uuid: "GPU-1234".into(),
            base: None,
        },
    ];
    let mut out = Vec::new();
    for origin in origins {
        for calibration in [None, Some(calibration())] {
            let mut a = arch.clone();
            a.origin = origin.clone();
            a.calibration = calibration;
            out.push(a);
        }
    }
    out
}

#[test]
fn description_json_matches_the_models_own() {
    let db = HardwareDb::embedded().unwrap();
    for arch in db.iter() {
        for a in variants(arch) {
            let own = serde_json::to_string_pretty(&a).unwrap();
            let schema = serde_json::to_string_pretty(&ArchDescription::from(&a)).unwrap();
            assert_eq!(schema, own, "{} ({:?})", a.key(), a.origin);
        }
    }
}

#[test]
fn summary_reads_the_description() {
    let db = HardwareDb::embedded().unwrap();
    let h100 = db.get("h100").unwrap();
    let s = ArchSummary::from(h100);
    assert_eq!(s.key, "h100-sxm");
    assert_eq!(s.compute_capability, "9.0");
    assert_eq!(s.sm_count, 132);
    assert_eq!(s.f16_tflops, Some(989.4));
    assert_eq!(s.origin, "embedded");
    let mut live = h100.clone();
    live.origin = Origin::Live {
        uuid: "GPU-1234".into(),
        base: None,
    };
    assert_eq!(ArchSummary::from(&live).origin, "live");
}
