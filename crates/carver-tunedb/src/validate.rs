//! What the database accepts. Checked on every store and every imported row, so that nothing
//! stored is unusable when it is read back.

use carver_schema::{TuneKey, TuneRecord};

/// Checks a lookup or storage key: names non-empty, sizes at least 1 and within SQLite's
/// integers.
pub fn validate_key(key: &TuneKey) -> Result<(), String> {
    let texts = [
        ("key.device.name", &key.device.name),
        ("key.device.uuid", &key.device.uuid),
        ("key.device.driver_version", &key.device.driver_version),
        ("key.carver_version", &key.carver_version),
        ("key.target", &key.target),
        ("key.kernel_hash", &key.kernel_hash),
        ("key.problem.dtype_a", &key.problem.dtype_a),
        ("key.problem.dtype_b", &key.problem.dtype_b),
        ("key.problem.dtype_c", &key.problem.dtype_c),
        ("key.problem.dtype_acc", &key.problem.dtype_acc),
        ("key.problem.layout_a", &key.problem.layout_a),
        ("key.problem.layout_b", &key.problem.layout_b),
    ];
    for (field, text) in texts {
        if text.trim().is_empty() {
            return Err(format!("{field} is empty"));
        }
    }
    let p = &key.problem;
    for (field, size) in [("m", p.m), ("n", p.n), ("k", p.k), ("batch", p.batch)] {
        if size == 0 || i64::try_from(size).is_err() {
            return Err(format!(
                "key.problem.{field} must be between 1 and {} (got {size})",
                i64::MAX
            ));
        }
    }
    Ok(())
}

/// Checks a whole record: a valid key, at least one candidate, finite positive times, a reason
/// for every candidate without a time, a `method` object, and a winner that is one of the
/// successfully measured candidates (its time is what keep-the-faster compares).
pub fn validate_record(record: &TuneRecord) -> Result<(), String> {
    validate_key(&record.key)?;
    if record.candidates.is_empty() {
        return Err("candidates is empty: a result needs at least the winner's measurement".into());
    }
    for (i, c) in record.candidates.iter().enumerate() {
        if c.config.is_null() {
            return Err(format!("candidates[{i}].config is null"));
        }
        if c.model_rank == 0 {
            return Err(format!(
                "candidates[{i}].model_rank must be 1 or more (1 = the model's first choice)"
            ));
        }
        if !(c.predicted_time_s.is_finite() && c.predicted_time_s >= 0.0) {
            return Err(format!(
                "candidates[{i}].predicted_time_s must be a finite number of seconds >= 0 (got {})",
                c.predicted_time_s
            ));
        }
        match (c.measured_time_s, &c.failure) {
            (Some(t), _) if !(t.is_finite() && t > 0.0) => {
                return Err(format!(
                    "candidates[{i}].measured_time_s must be a finite number of seconds > 0 (got {t})"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "candidates[{i}] has neither measured_time_s nor failure"
                ));
            }
            (_, Some(reason)) if reason.trim().is_empty() => {
                return Err(format!(
                    "candidates[{i}].failure is empty: say why it failed"
                ));
            }
            _ => {}
        }
    }
    if let Some(t) = record.cublas_time_s {
        if !(t.is_finite() && t > 0.0) {
            return Err(format!(
                "cublas_time_s must be a finite number of seconds > 0 (got {t})"
            ));
        }
    }
    if record.measured_at_unix_s < 0 {
        return Err(format!(
            "measured_at_unix_s must be >= 0 (got {})",
            record.measured_at_unix_s
        ));
    }
    if !record.method.is_object() {
        return Err("method must be a JSON object (warm-up, repetitions, timer, ...)".into());
    }
    if record.winner_time_s().is_none() {
        return Err("the winner is not the config of any successfully measured candidate".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::sample_record;

    #[test]
    fn a_complete_record_is_accepted() {
        assert_eq!(validate_record(&sample_record(0)), Ok(()));
    }

    /// Breaks one field of a record.
    type Breakage = fn(&mut TuneRecord);

    #[test]
    fn each_broken_field_is_named() {
        let cases: Vec<(&str, Breakage)> = vec![
            ("key.device.uuid is empty", |r| r.key.device.uuid.clear()),
            ("key.target is empty", |r| r.key.target = "  ".into()),
            ("key.problem.m must be between", |r| r.key.problem.m = 0),
            ("key.problem.k must be between", |r| {
                r.key.problem.k = u64::MAX
            }),
            ("candidates is empty", |r| r.candidates.clear()),
            ("candidates[0].model_rank", |r| {
                r.candidates[0].model_rank = 0
            }),
            ("candidates[1].predicted_time_s", |r| {
                r.candidates[1].predicted_time_s = f64::NAN
            }),
            ("candidates[0].measured_time_s", |r| {
                r.candidates[0].measured_time_s = Some(-1.0)
            }),
            ("has neither measured_time_s nor failure", |r| {
                r.candidates[1].measured_time_s = None;
                r.candidates[1].failure = None;
            }),
            ("candidates[2].failure is empty", |r| {
                r.candidates[2].failure = Some(String::new())
            }),
            ("cublas_time_s", |r| r.cublas_time_s = Some(f64::INFINITY)),
            ("measured_at_unix_s", |r| r.measured_at_unix_s = -5),
            ("method must be a JSON object", |r| {
                r.method = serde_json::json!(3)
            }),
            ("the winner is not", |r| {
                r.winner = serde_json::json!({"BLOCK_M": 999})
            }),
        ];
        for (expected, break_it) in cases {
            let mut record = sample_record(0);
            break_it(&mut record);
            let err = validate_record(&record).expect_err(expected);
            assert!(err.contains(expected), "expected {expected:?} in {err:?}");
        }
    }

    #[test]
    fn a_failed_winner_is_refused() {
        let mut record = sample_record(0);
        let winner = record.winner.clone();
        let c = record
            .candidates
            .iter_mut()
            .find(|c| c.config == winner)
            .unwrap();
        c.failure = Some("wrong result".into());
        assert!(
            validate_record(&record)
                .unwrap_err()
                .contains("the winner is not")
        );
    }
}
