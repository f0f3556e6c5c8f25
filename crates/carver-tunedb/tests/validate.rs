//! The record checks, for arbitrary values: anything non-finite or out of range is refused with
//! the field named, and anything in range is accepted and comes back unchanged.

use carver_tunedb::test_support::sample_record;
use carver_tunedb::{
    ACCEPTED_DTYPES, ACCEPTED_LAYOUTS, Filter, MAX_PREDICTED_TIME_S, MAX_SIZE, MAX_TIME_S,
    MIN_TIME_S, TuneDb, TuneRecord, validate_record,
};
use proptest::prelude::*;

/// A time outside 1 ns ..= 1 hour, or not a number at all.
fn bad_time() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(0.0),
        Just(-0.0),
        Just(1e-12),
        Just(1e-300),
        Just(1e300),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
        -1e300f64..0.0,
        0.0f64..MIN_TIME_S,
        (MAX_TIME_S * 1.000_001)..1e300f64,
    ]
}

fn good_time() -> impl Strategy<Value = f64> {
    prop_oneof![Just(MIN_TIME_S), Just(MAX_TIME_S), MIN_TIME_S..MAX_TIME_S]
}

fn bad_size() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), (MAX_SIZE + 1)..=u64::MAX, Just(1 << 62)]
}

/// The winner's candidate of `sample_record`.
const WINNER: usize = 1;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_bad_measured_time_is_refused_naming_it(t in bad_time(), which in 0usize..3) {
        let mut r = sample_record(0);
        let field = match which {
            0 => {
                r.candidates[0].measured_time_s = Some(t);
                "candidates[0].measured_time_s"
            }
            1 => {
                r.candidates[WINNER].measured_time_s = Some(t);
                "candidates[1].measured_time_s"
            }
            _ => {
                r.cublas_time_s = Some(t);
                "cublas_time_s"
            }
        };
        let err = validate_record(&r).unwrap_err();
        prop_assert!(err.contains(field), "{err}");
        prop_assert!(err.contains("1 ns") && err.contains("1 hour"), "{err}");
    }

    #[test]
    fn a_bad_predicted_time_is_refused_naming_it(
        t in prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            -1e300f64..-1e-300,
            (MAX_PREDICTED_TIME_S * 1.001)..1e300f64,
        ]
    ) {
        let mut r = sample_record(0);
        r.candidates[2].predicted_time_s = t;
        let err = validate_record(&r).unwrap_err();
        prop_assert!(err.contains("candidates[2].predicted_time_s"), "{err}");
    }

    #[test]
    fn a_size_out_of_range_is_refused_naming_it(size in bad_size(), which in 0usize..4) {
        let mut r = sample_record(0);
        let p = &mut r.key.problem;
        let field = match which {
            0 => { p.m = size; "key.problem.m" }
            1 => { p.n = size; "key.problem.n" }
            2 => { p.k = size; "key.problem.k" }
            _ => { p.batch = size; "key.problem.batch" }
        };
        let err = validate_record(&r).unwrap_err();
        prop_assert!(err.contains(field), "{err}");
        prop_assert!(err.contains("2147483647"), "{err}");
    }

    #[test]
    fn an_unknown_dtype_or_layout_is_refused_with_the_accepted_list(
        name in "[a-z0-9]{0,8}",
        which in 0usize..6,
    ) {
        prop_assume!(!ACCEPTED_DTYPES.contains(&name.as_str()));
        prop_assume!(!ACCEPTED_LAYOUTS.contains(&name.as_str()));
        let mut r = sample_record(0);
        let p = &mut r.key.problem;
        let (field, accepted) = match which {
            0 => { p.dtype_a = name.clone(); ("dtype_a", "f16, bf16") }
            1 => { p.dtype_b = name.clone(); ("dtype_b", "f16, bf16") }
            2 => { p.dtype_c = name.clone(); ("dtype_c", "f16, bf16") }
            3 => { p.dtype_acc = name.clone(); ("dtype_acc", "f16, bf16") }
            4 => { p.layout_a = name.clone(); ("layout_a", "row, col") }
            _ => { p.layout_b = name.clone(); ("layout_b", "row, col") }
        };
        let err = validate_record(&r).unwrap_err();
        prop_assert!(err.contains(field) && err.contains(accepted), "{err}");
    }

    #[test]
    fn a_configuration_that_is_not_an_object_is_refused(
        config in prop_oneof![
            Just(serde_json::Value::Null),
            any::<i64>().prop_map(serde_json::Value::from),
            "[ -~]{0,10}".prop_map(serde_json::Value::from),
            Just(serde_json::json!([])),
            Just(serde_json::json!({})),
        ],
        which in 0usize..3,
    ) {
        let mut r = sample_record(0);
        r.candidates[which].config = config;
        let err = validate_record(&r).unwrap_err();
        let expected = format!("candidates[{which}].config");
        // Breaking the winner's candidate may be caught first as a missing winner.
        prop_assert!(err.contains(&expected) || err.contains("winner"), "{err}");
    }

    /// Anything in range is accepted, stored and read back unchanged.
    #[test]
    fn a_record_in_range_round_trips(
        m in 1..=MAX_SIZE,
        batch in 1..=MAX_SIZE,
        winner_time in good_time(),
        other_time in good_time(),
        cublas in prop::option::of(good_time()),
        dtype in prop::sample::select(&ACCEPTED_DTYPES[..]),
        layout in prop::sample::select(&ACCEPTED_LAYOUTS[..]),
    ) {
        let mut r: TuneRecord = sample_record(0);
        r.key.problem.m = m;
        r.key.problem.batch = batch;
        r.key.problem.dtype_c = dtype.to_string();
        r.key.problem.layout_b = layout.to_string();
        r.candidates[WINNER].measured_time_s = Some(winner_time);
        r.candidates[0].measured_time_s = Some(other_time);
        r.cublas_time_s = cublas;
        prop_assert_eq!(validate_record(&r), Ok(()));

        let dir = tempfile::tempdir().unwrap();
        let (db, _) = TuneDb::open(dir.path()).unwrap();
        db.store(&r).unwrap();
        let stored = db.query(&Filter::default()).unwrap();
        prop_assert!(stored.skipped.is_empty());
        prop_assert_eq!(&stored.records[0].record, &r);
        let mut bytes = Vec::new();
        db.export(&Filter::default(), &mut bytes).unwrap();
        let other = tempfile::tempdir().unwrap();
        let (copy, _) = TuneDb::open(other.path()).unwrap();
        let report = copy.import(&mut bytes.as_slice()).unwrap();
        prop_assert!(report.is_clean(), "{:?}", report);
        prop_assert_eq!(&*copy.lookup(&r.key).unwrap().unwrap(), &r);
    }
}
