//! Whether a tuning result is believable on the GPU it names. The tuning database checks what
//! needs no hardware (carver-tunedb's `validate_record`); this adds what does: no measured time
//! may beat the problem's roofline on that GPU, and the winner must be a configuration of its
//! kernel family. Applied to every import, salvage and store, and to every stored winner that
//! `recommend` is about to show.

use std::collections::HashSet;

use carver::{DType, Family, Layout, Problem};
use carver_arch::{Arch, HardwareDb};
use carver_schema::TuneRecord;

/// How far under the roofline a measured time may be before it is refused. The roofline uses
/// the quoted dense peak (H100: at the 1830 MHz sustained clock, while boost reaches 1980 MHz,
/// 8% faster), and timers of microsecond kernels are noisy, so some measurements legitimately
/// come in under it; twice as fast as the bound is beyond any of that.
pub const ROOFLINE_FRACTION: f64 = 0.5;

/// Checks records against the hardware database, remembering which unknown devices it has
/// already warned about (one warning per device, not per row).
pub struct Plausibility {
    hardware: HardwareDb,
    warned: HashSet<String>,
}

impl Plausibility {
    pub fn new(hardware: HardwareDb) -> Self {
        Plausibility {
            hardware,
            warned: HashSet::new(),
        }
    }

    /// `Err` with the reason when `record` is not believable; `Ok` with warnings otherwise
    /// (a device the hardware database does not describe is checked for sense only).
    pub fn check(&mut self, record: &TuneRecord) -> Result<Vec<String>, String> {
        let family = family_of(record)?;
        let name = &record.key.device.name;
        match self.hardware.get(name) {
            Ok(arch) => check_on(record, family, arch).map(|()| Vec::new()),
            Err(_) if self.warned.insert(name.clone()) => Ok(vec![format!(
                "no hardware description matches the device {}: its times were checked for \
                 sense only (1 ns to 1 hour), not against its roofline; `carver arch list` shows \
                 the GPUs carver knows, --hardware-db adds one",
                carver_tunedb::quote(name)
            )]),
            Err(_) => Ok(Vec::new()),
        }
    }
}

/// The record's target as a kernel family carver knows.
fn family_of(record: &TuneRecord) -> Result<Family, String> {
    record.key.target.parse::<Family>().map_err(|_| {
        format!(
            "key.target {} is not a kernel family carver knows (accepted: {})",
            carver_tunedb::quote(&record.key.target),
            Family::ALL.map(Family::as_str).join(", ")
        )
    })
}

/// Checks `record` on `arch`: every measured time (candidates and cuBLAS) at least
/// [`ROOFLINE_FRACTION`] of the problem's roofline, and the winner a configuration of `family`.
pub fn check_on(record: &TuneRecord, family: Family, arch: &Arch) -> Result<(), String> {
    let problem = problem_of(record)?;
    let bound = problem.roofline_time_s(arch);
    let floor = bound * ROOFLINE_FRACTION;
    let times = record
        .candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            Some((
                format!("candidates[{i}].measured_time_s"),
                c.measured_time_s?,
            ))
        })
        .chain(
            record
                .cublas_time_s
                .map(|t| ("cublas_time_s".to_string(), t)),
        );
    for (field, t) in times {
        if t < floor {
            return Err(format!(
                "{field} = {t:?} s is faster than physically possible on {}: this problem's \
                 roofline (its FLOPs at the dense peak, or its bytes at the memory bandwidth) is \
                 {bound:.3e} s, and a measurement may come in at most {}x under it",
                arch.gpu.name,
                1.0 / ROOFLINE_FRACTION
            ));
        }
    }
    family
        .rules()
        .parse_native(&record.winner, &problem, arch)
        .map_err(|e| format!("the winner is not a {family} configuration: {e}"))?;
    Ok(())
}

/// Checks a record against an arch already known (the GPU a tuning run measured on).
pub fn check_record_on(record: &TuneRecord, arch: &Arch) -> Result<(), String> {
    check_on(record, family_of(record)?, arch)
}

/// The problem a record was measured on, for the roofline and the family's parser.
fn problem_of(record: &TuneRecord) -> Result<Problem, String> {
    let p = &record.key.problem;
    let dtype = |field: &str, name: &str| {
        name.parse::<DType>()
            .map_err(|e| format!("key.problem.{field}: {e}"))
    };
    let layout = |field: &str, name: &str| {
        name.parse::<Layout>()
            .map_err(|e| format!("key.problem.{field}: {e}"))
    };
    let a = dtype("dtype_a", &p.dtype_a)?;
    Ok(Problem {
        m: p.m,
        n: p.n,
        k: p.k,
        batch: p.batch,
        layout_a: layout("layout_a", &p.layout_a)?,
        layout_b: layout("layout_b", &p.layout_b)?,
        a,
        b: dtype("dtype_b", &p.dtype_b)?,
        c: dtype("dtype_c", &p.dtype_c)?,
        acc: dtype("dtype_acc", &p.dtype_acc)?,
        class: a.compute_class(),
        // Alignment changes neither the roofline nor how a configuration parses.
        aligned_a: true,
        aligned_b: true,
        aligned_c: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use carver_tunedb::test_support::sample_record;

    fn checker() -> Plausibility {
        Plausibility::new(HardwareDb::embedded().unwrap())
    }

    #[test]
    fn the_database_and_the_model_accept_the_same_names() {
        let model: Vec<&str> = DType::ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(model, carver_tunedb::ACCEPTED_DTYPES);
        assert_eq!(
            [Layout::Row.as_str(), Layout::Col.as_str()],
            carver_tunedb::ACCEPTED_LAYOUTS
        );
        assert_eq!(carver_tunedb::MAX_SIZE, carver::template::MAX_DIM);
    }

    #[test]
    fn a_real_result_passes() {
        assert_eq!(checker().check(&sample_record(0)), Ok(vec![]));
    }

    #[test]
    fn a_time_under_the_roofline_is_refused() {
        // 128 x 4096 x 4096 f16 on an H100: 36 MB at 7.85 TB/s (it fits in L2) is 4.5 us.
        let mut record = sample_record(0);
        let winner = record.winner.clone();
        for c in &mut record.candidates {
            if c.config == winner {
                c.measured_time_s = Some(1e-6);
            }
        }
        let err = checker().check(&record).unwrap_err();
        assert!(
            err.contains("candidates[1].measured_time_s = 1e-6 s is faster than physically possible on NVIDIA H100 80GB HBM3"),
            "{err}"
        );
        // Just above half the bound is believed.
        let bound = problem_of(&record)
            .unwrap()
            .roofline_time_s(HardwareDb::embedded().unwrap().get("h100").unwrap());
        for c in &mut record.candidates {
            if c.config == winner {
                c.measured_time_s = Some(bound * 0.51);
            }
        }
        assert_eq!(checker().check(&record), Ok(vec![]));
        record.cublas_time_s = Some(bound * 0.4);
        assert!(
            checker()
                .check(&record)
                .unwrap_err()
                .contains("cublas_time_s")
        );
    }

    #[test]
    fn a_winner_of_arbitrary_keys_is_refused() {
        let mut record = sample_record(0);
        let junk = serde_json::json!({"rm -rf": true, "BLOCK": "x"});
        record.winner = junk.clone();
        record.candidates[1].config = junk;
        let err = checker().check(&record).unwrap_err();
        assert!(
            err.contains("the winner is not a triton configuration"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_target_is_refused_and_an_unknown_device_warned_once() {
        let mut record = sample_record(0);
        record.key.target = "cutlass".into();
        let err = checker().check(&record).unwrap_err();
        assert!(
            err.contains("accepted: triton, tilelang, cuda-sm90, generic"),
            "{err}"
        );

        let mut checker = checker();
        let mut record = sample_record(0);
        record.key.device.name = "Imaginary GPU 9000".into();
        let warnings = checker.check(&record).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .contains("no hardware description matches the device \"Imaginary GPU 9000\"")
        );
        assert_eq!(checker.check(&record), Ok(vec![]));
    }

    #[test]
    fn hostile_configurations_are_refused_without_panicking() {
        let arch = HardwareDb::embedded().unwrap().get("h100").unwrap().clone();
        let numbers = [
            0u64,
            1,
            3,
            4,
            63,
            64,
            1 << 31,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        for family in Family::ALL {
            for &a in &numbers {
                for &b in &numbers {
                    let mut record = sample_record(0);
                    record.key.target = family.to_string();
                    let config = serde_json::json!({
                        "kwargs": {"BLOCK_SIZE_M": a, "BLOCK_SIZE_N": a, "BLOCK_SIZE_K": b},
                        "num_warps": b, "num_stages": a,
                        "block_M": a, "block_N": a, "block_K": b, "thread_num": b, "num_stages_": a,
                        "block": [a, a], "warp": [b, b], "rstep": [b],
                        "block_m": a, "block_n": a, "block_k": b, "stages": a, "consumers": b,
                        "group_m": a, "cluster_m": b, "persistent": false,
                    });
                    record.winner = config.clone();
                    record.candidates[1].config = config;
                    // Either answer is fine; a panic is not.
                    let _ = check_on(&record, family, &arch);
                }
            }
        }
    }
}
