//! What the validators let through, the model can price: any description `carver_arch::validate`
//! accepts, with any calibration `Calibration::check_against` accepts, gives finite, positive
//! predictions. The descriptions are shipped ones with their figures moved far from the truth
//! (but each within its bounds, and the derived figures kept in agreement).

use carver::{DType, Family, Layout, MatmulTemplate, TopK, recommend_hints};
use carver_arch::{Arch, CALIBRATION_FORMAT, Calibration, ComputeClass, HardwareDb, validate};
use proptest::prelude::*;

fn db() -> HardwareDb {
    HardwareDb::embedded().expect("embedded database loads")
}

/// How far each figure is moved: a factor per figure.
#[derive(Clone, Debug)]
struct Moves {
    sm_count: f64,
    boost: f64,
    sustained: f64,
    memory_clock: f64,
    bus_width: f64,
    l2_bandwidth: f64,
    smem: f64,
}

fn factor() -> impl Strategy<Value = f64> {
    prop_oneof![0.2f64..1.0, 1.0f64..3.0]
}

fn moves() -> impl Strategy<Value = Moves> {
    (
        factor(),
        factor(),
        0.3f64..=1.0,
        factor(),
        factor(),
        factor(),
        0.2f64..=1.0,
    )
        .prop_map(
            |(sm_count, boost, sustained, memory_clock, bus_width, l2_bandwidth, smem)| Moves {
                sm_count,
                boost,
                sustained,
                memory_clock,
                bus_width,
                l2_bandwidth,
                smem,
            },
        )
}

/// `arch` with its figures moved and the figures derived from them recomputed.
fn moved(arch: &Arch, m: &Moves) -> Arch {
    let mut a = arch.clone();
    a.sm.count = ((f64::from(a.sm.count) * m.sm_count).round() as u32).max(1);
    a.sm.boost_clock_mhz *= m.boost;
    a.sm.sustained_clock_mhz = a.sm.boost_clock_mhz * m.sustained;
    a.memory.memory_clock_mhz *= m.memory_clock;
    a.memory.bus_width_bits = ((f64::from(a.memory.bus_width_bits) * m.bus_width) as u32).max(1);
    a.memory.bandwidth_bytes_per_s = a.derived_dram_bandwidth();
    a.l2.bandwidth_bytes_per_s = a.memory.bandwidth_bytes_per_s * 2.5 * m.l2_bandwidth;
    let optin = (a.shared_memory.per_block_optin_bytes as f64 * m.smem) as u64;
    a.shared_memory.per_block_optin_bytes = optin;
    a.shared_memory.per_block_default_bytes = a.shared_memory.per_block_default_bytes.min(optin);
    let boost = a.sm.boost_clock_mhz;
    let classes: Vec<ComputeClass> = a.peak.keys().copied().collect();
    for class in classes {
        let peak = a.peak.get_mut(&class).unwrap();
        if let Some(clock) = peak.clock_mhz.as_mut() {
            *clock = clock.min(boost);
        }
        let derived = a.peak[&class].derived_tflops(class, &a.sm).unwrap();
        a.peak.get_mut(&class).unwrap().tflops = derived;
    }
    a
}

/// A calibration of `arch` with each figure at `f` times the description's.
fn calibrated(arch: &Arch, f: [f64; 4]) -> Calibration {
    let mut c = Calibration {
        format: CALIBRATION_FORMAT,
        uuid: "GPU-test".into(),
        device_name: arch.gpu.name.clone(),
        base_key: Some(arch.key().into()),
        driver_version: None,
        carver_version: "test".into(),
        measured_at_unix_s: 0,
        dram_bandwidth_bytes_per_s: Some(arch.memory.bandwidth_bytes_per_s * f[0]),
        l2_bandwidth_bytes_per_s: Some(arch.l2.bandwidth_bytes_per_s * f[1]),
        smem_bandwidth_bytes_per_s: Some(arch.derived_smem_bandwidth() * f[2]),
        peak_tflops: Default::default(),
        method: Default::default(),
    };
    for (class, peak) in &arch.peak {
        c.peak_tflops.insert(*class, peak.tflops * f[3]);
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn every_accepted_description_gives_finite_predictions(
        key in prop::sample::select(vec!["h100-sxm", "a100-sxm4-80gb", "l4", "rtx-4090", "b200"]),
        m in moves(),
        calibration in prop::option::of(prop::array::uniform4(0.05f64..=2.0)),
        size in prop::sample::select(vec![1u64, 17, 256, 4096, 12288]),
        target in prop::sample::select(vec![Family::Generic, Family::Triton, Family::CudaSm90]),
    ) {
        let db = db();
        let mut arch = moved(db.get(key).unwrap(), &m);
        // Moved out of bounds: refused, which is the other half of the contract; draw again.
        prop_assume!(validate(&arch, "moved", None).is_ok());
        if let Some(f) = calibration {
            let c = calibrated(&arch, f);
            prop_assert!(c.check_against(&arch, "test").is_ok());
            arch.calibration = Some(c);
        }
        let template = MatmulTemplate::new(size, 4096, 4096)
            .with_dtype(DType::F16)
            .with_family(target)
            .with_layouts(Layout::Row, Layout::Row);
        let Ok(hints) = recommend_hints(&template, &arch, TopK::DEFAULT) else {
            return Ok(());
        };
        for h in hints {
            let p = &h.prediction;
            prop_assert!(p.time_us.is_finite() && p.time_us > 0.0, "{:?}", p);
            prop_assert!(p.tflops.is_finite() && p.tflops >= 0.0, "{:?}", p);
        }
    }
}
