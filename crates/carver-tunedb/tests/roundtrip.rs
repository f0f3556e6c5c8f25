//! Export then import gives back exactly what was stored, for arbitrary records.

use carver_tunedb::{
    DeviceKey, Filter, MeasuredCandidate, TuneDb, TuneKey, TuneProblem, TuneRecord,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Few choices per key field, so that generated records often share a key and the merge
/// (keep the faster) is exercised too.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("f16".to_string()),
        Just("NVIDIA H100 80GB HBM3".to_string()),
        Just("ünïcødé \"quoted\" \\ back".to_string()),
        "[a-z0-9-]{1,6}",
    ]
}

fn dtype() -> impl Strategy<Value = String> {
    prop::sample::select(&carver_tunedb::ACCEPTED_DTYPES[..]).prop_map(str::to_string)
}

fn layout() -> impl Strategy<Value = String> {
    prop::sample::select(&carver_tunedb::ACCEPTED_LAYOUTS[..]).prop_map(str::to_string)
}

fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        1u64..=4,
        Just(4096u64),
        1u64..=carver_tunedb::MAX_SIZE,
        Just(carver_tunedb::MAX_SIZE)
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        "[ -~]{0,8}".prop_map(Value::from),
    ]
}

fn config() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[A-Z_]{1,8}", json_leaf(), 1..5)
        .prop_map(|kwargs| json!({"kwargs": kwargs}))
}

fn time() -> impl Strategy<Value = f64> {
    1.0e-9f64..10.0
}

fn candidate() -> impl Strategy<Value = MeasuredCandidate> {
    (
        config(),
        1u32..64,
        0.0f64..10.0,
        prop::option::of(time()),
        // A reason says something: printable text that is not only spaces.
        prop::option::of("[!-~][ -~]{0,19}"),
    )
        .prop_map(
            |(config, model_rank, predicted_time_s, measured, failure)| {
                MeasuredCandidate {
                    config,
                    model_rank,
                    predicted_time_s,
                    // Every candidate has a time or a reason.
                    failure: if measured.is_none() {
                        Some(failure.unwrap_or_else(|| "did not compile".into()))
                    } else {
                        failure
                    },
                    measured_time_s: measured,
                }
            },
        )
}

fn record() -> impl Strategy<Value = TuneRecord> {
    let key = (
        (name(), name(), name(), name(), name(), name()),
        (size(), size(), size(), 1u64..=8),
        (dtype(), dtype(), dtype(), dtype(), layout(), layout()),
    )
        .prop_map(
            |((device, uuid, driver, carver, target, hash), (m, n, k, batch), dtypes)| TuneKey {
                device: DeviceKey {
                    name: device,
                    uuid,
                    driver_version: driver,
                },
                carver_version: carver,
                target,
                kernel_hash: hash,
                problem: TuneProblem {
                    m,
                    n,
                    k,
                    batch,
                    dtype_a: dtypes.0,
                    dtype_b: dtypes.1,
                    dtype_c: dtypes.2,
                    dtype_acc: dtypes.3,
                    layout_a: dtypes.4,
                    layout_b: dtypes.5,
                },
            },
        );
    (
        key,
        prop::collection::vec(candidate(), 0..6),
        (config(), time()),
        any::<prop::sample::Index>(),
        prop::option::of(time()),
        0i64..1_700_000_000,
        prop::collection::btree_map("[a-z]{1,6}", json_leaf(), 0..4),
    )
        .prop_map(
            |(key, mut candidates, (winner, winner_time), at, cublas, when, method)| {
                // The winner must be a successfully measured candidate: insert it somewhere.
                let position = at.index(candidates.len() + 1);
                candidates.insert(
                    position,
                    MeasuredCandidate {
                        config: winner.clone(),
                        model_rank: 1,
                        predicted_time_s: winner_time,
                        measured_time_s: Some(winner_time),
                        failure: None,
                    },
                );
                TuneRecord {
                    key,
                    winner,
                    candidates,
                    cublas_time_s: cublas,
                    measured_at_unix_s: when,
                    method: Value::Object(method.into_iter().collect()),
                }
            },
        )
}

fn all(db: &TuneDb) -> Vec<TuneRecord> {
    let mut records: Vec<TuneRecord> = db
        .query(&Filter::default())
        .unwrap()
        .records
        .into_iter()
        .map(|s| s.record)
        .collect();
    records.sort_by(|a, b| a.key.cmp(&b.key));
    records
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn export_then_import_round_trips(records in prop::collection::vec(record(), 0..12)) {
        let source_dir = tempfile::tempdir().unwrap();
        let (source, _) = TuneDb::open(source_dir.path()).unwrap();
        for r in &records {
            source.store(r).unwrap();
        }
        let mut exported = Vec::new();
        let count = source.export(&Filter::default(), &mut exported).unwrap().written;
        prop_assert_eq!(count, source.count(&Filter::default()).unwrap());

        let target_dir = tempfile::tempdir().unwrap();
        let (target, _) = TuneDb::open(target_dir.path()).unwrap();
        let report = target.import(&mut exported.as_slice()).unwrap();
        prop_assert!(report.is_clean(), "{:?}", report);
        prop_assert_eq!(report.inserted, count);
        prop_assert!(report.conflicts.is_empty());
        prop_assert_eq!(all(&target), all(&source));

        // The export is deterministic, and importing it again changes nothing.
        let mut again = Vec::new();
        target.export(&Filter::default(), &mut again).unwrap();
        prop_assert_eq!(&again, &exported);
        let report = target.import(&mut exported.as_slice()).unwrap();
        prop_assert_eq!((report.inserted, report.replaced, report.kept_existing), (0, 0, count));
        prop_assert_eq!(all(&target), all(&source));
    }

    #[test]
    fn import_order_does_not_change_the_result(records in prop::collection::vec(record(), 0..8)) {
        let export = |records: &[TuneRecord]| {
            let mut bytes = Vec::new();
            carver_tunedb::write_export(records, &mut bytes).unwrap();
            bytes
        };
        let forward_dir = tempfile::tempdir().unwrap();
        let (forward, _) = TuneDb::open(forward_dir.path()).unwrap();
        let backward_dir = tempfile::tempdir().unwrap();
        let (backward, _) = TuneDb::open(backward_dir.path()).unwrap();
        for r in &records {
            forward.import(&mut export(std::slice::from_ref(r)).as_slice()).unwrap();
        }
        for r in records.iter().rev() {
            backward.import(&mut export(std::slice::from_ref(r)).as_slice()).unwrap();
        }
        // Equal winner times (a tie) keep the first stored, so compare winner times only.
        let times = |db: &TuneDb| -> Vec<(TuneKey, Option<f64>)> {
            all(db).into_iter().map(|r| {
                let t = r.winner_time_s();
                (r.key, t)
            }).collect()
        };
        prop_assert_eq!(times(&forward), times(&backward));
    }
}
