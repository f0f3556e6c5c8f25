//! What the database accepts. Checked on every store, every imported row and every row read
//! back, so that nothing stored is unusable or absurd when it is read.
//!
//! These are the checks that need no hardware: sense and carver's limits. Whether a time is
//! possible on the GPU it names is for the caller, who knows the hardware (carver-flows checks
//! it against the GPU's roofline before storing or importing).

use carver_schema::{TuneKey, TuneRecord};

/// Element types a problem may name (carver's `DType` names).
pub const ACCEPTED_DTYPES: [&str; 8] = ["f16", "bf16", "f32", "tf32", "e4m3", "e5m2", "i8", "i32"];

/// Storage orders an operand may have (carver's `Layout` names).
pub const ACCEPTED_LAYOUTS: [&str; 2] = ["row", "col"];

/// Largest M, N, K or batch: carver's `MAX_DIM` (32-bit signed indexing per dimension).
pub const MAX_SIZE: u64 = (1 << 31) - 1;

/// Fastest believable measurement: one nanosecond is below any kernel launch.
pub const MIN_TIME_S: f64 = 1e-9;

/// Slowest believable measurement: a tuning run times each candidate many times, so one run
/// of an hour is already beyond what a tuner waits for.
pub const MAX_TIME_S: f64 = 3600.0;

/// Largest predicted time: a model may predict long times for shapes nobody measures; a week
/// still rules out garbage such as 1e300.
pub const MAX_PREDICTED_TIME_S: f64 = 7.0 * 86400.0;

/// Longest text of a key field (names, UUIDs, versions, hashes are all far shorter).
pub const MAX_KEY_TEXT_BYTES: usize = 256;

/// Largest record, as JSON. An exhaustive sweep of the 984 cuda-sm90 configurations is about
/// 260 KB; this leaves room for long failure messages, and is also the longest line an import
/// reads, so that everything stored can be exported and imported again.
pub const MAX_RECORD_BYTES: usize = 4 << 20;

/// Latest believable measurement date: a day ahead of this machine's clock, for clock skew
/// between the machine that measured and this one.
fn latest_unix_s() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    now.saturating_add(86_400)
}

/// Checks a lookup or storage key: texts non-empty, short and free of control characters;
/// dtypes and layouts from the accepted lists; sizes within carver's limits.
pub fn validate_key(key: &TuneKey) -> Result<(), String> {
    let p = &key.problem;
    let texts = [
        ("key.device.name", &key.device.name),
        ("key.device.uuid", &key.device.uuid),
        ("key.device.driver_version", &key.device.driver_version),
        ("key.carver_version", &key.carver_version),
        ("key.target", &key.target),
        ("key.kernel_hash", &key.kernel_hash),
    ];
    for (field, text) in texts {
        check_text(field, text)?;
    }
    for (field, dtype) in [
        ("dtype_a", &p.dtype_a),
        ("dtype_b", &p.dtype_b),
        ("dtype_c", &p.dtype_c),
        ("dtype_acc", &p.dtype_acc),
    ] {
        if !ACCEPTED_DTYPES.contains(&dtype.as_str()) {
            return Err(format!(
                "key.problem.{field} is {}; accepted: {}",
                quote(dtype),
                ACCEPTED_DTYPES.join(", ")
            ));
        }
    }
    for (field, layout) in [("layout_a", &p.layout_a), ("layout_b", &p.layout_b)] {
        if !ACCEPTED_LAYOUTS.contains(&layout.as_str()) {
            return Err(format!(
                "key.problem.{field} is {}; accepted: {}",
                quote(layout),
                ACCEPTED_LAYOUTS.join(", ")
            ));
        }
    }
    for (field, size) in [("m", p.m), ("n", p.n), ("k", p.k), ("batch", p.batch)] {
        if !(1..=MAX_SIZE).contains(&size) {
            return Err(format!(
                "key.problem.{field} must be between 1 and {MAX_SIZE} (got {size})"
            ));
        }
    }
    Ok(())
}

fn check_text(field: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err(format!("{field} is empty"));
    }
    if text.len() > MAX_KEY_TEXT_BYTES {
        return Err(format!(
            "{field} is {} bytes long; at most {MAX_KEY_TEXT_BYTES} are accepted",
            text.len()
        ));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!(
            "{field} contains the control character {:?}; names are printable text",
            c
        ));
    }
    Ok(())
}

/// Checks a measured time (seconds).
fn check_time(field: &str, t: f64) -> Result<(), String> {
    if !(t.is_finite() && (MIN_TIME_S..=MAX_TIME_S).contains(&t)) {
        return Err(format!(
            "{field} must be a number of seconds between {MIN_TIME_S:e} (1 ns) and {MAX_TIME_S} \
             (1 hour) (got {t:?})"
        ));
    }
    Ok(())
}

/// Checks a configuration: a non-empty JSON object in the target's own format.
fn check_config(field: &str, config: &serde_json::Value) -> Result<(), String> {
    match config.as_object() {
        Some(map) if !map.is_empty() => Ok(()),
        Some(_) => Err(format!(
            "{field} is an empty object; a configuration has parameters"
        )),
        None => Err(format!(
            "{field} must be a JSON object of the target's parameters (got {})",
            json_kind(config)
        )),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Checks a whole record: a valid key, at least one candidate, every configuration a JSON
/// object, model ranks from 1, times within [`MIN_TIME_S`]..=[`MAX_TIME_S`], a reason for every
/// candidate without a time, a date neither negative nor in the future, a `method` object, a
/// winner that is one of the successfully measured candidates (its time is what
/// keep-the-faster compares), and at most [`MAX_RECORD_BYTES`] of JSON.
pub fn validate_record(record: &TuneRecord) -> Result<(), String> {
    validate_key(&record.key)?;
    if record.candidates.is_empty() {
        return Err("candidates is empty: a result needs at least the winner's measurement".into());
    }
    check_config("winner", &record.winner)?;
    for (i, c) in record.candidates.iter().enumerate() {
        check_config(&format!("candidates[{i}].config"), &c.config)?;
        if c.model_rank == 0 {
            return Err(format!(
                "candidates[{i}].model_rank must be 1 or more (1 = the model's first choice)"
            ));
        }
        let predicted = c.predicted_time_s;
        if !(predicted.is_finite() && (0.0..=MAX_PREDICTED_TIME_S).contains(&predicted)) {
            return Err(format!(
                "candidates[{i}].predicted_time_s must be a number of seconds between 0 and \
                 {MAX_PREDICTED_TIME_S} (a week) (got {predicted:?})"
            ));
        }
        if let Some(t) = c.measured_time_s {
            check_time(&format!("candidates[{i}].measured_time_s"), t)?;
        }
        match (c.measured_time_s, &c.failure) {
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
        check_time("cublas_time_s", t)?;
    }
    let latest = latest_unix_s();
    if !(0..=latest).contains(&record.measured_at_unix_s) {
        return Err(format!(
            "measured_at_unix_s must be between 0 and now plus a day ({latest}) (got {})",
            record.measured_at_unix_s
        ));
    }
    if !record.method.is_object() {
        return Err("method must be a JSON object (warm-up, repetitions, timer, ...)".into());
    }
    if record.winner_time_s().is_none() {
        return Err("the winner is not the config of any successfully measured candidate".into());
    }
    let size = serde_json::to_vec(record).map_or(usize::MAX, |v| v.len());
    if size > MAX_RECORD_BYTES {
        return Err(format!(
            "the record is {size} bytes of JSON; at most {MAX_RECORD_BYTES} are accepted"
        ));
    }
    Ok(())
}

/// How many characters of an untrusted text a message quotes.
pub const QUOTE_CHARS: usize = 200;

/// An untrusted text for a message: its first [`QUOTE_CHARS`] characters, quoted, with control
/// characters escaped (`"\u{1b}[31m..."`), so that a report never carries a terminal escape or
/// a whole 60 MB line.
pub fn quote(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(QUOTE_CHARS).collect();
    let rest = chars.count();
    if rest == 0 {
        format!("{head:?}")
    } else {
        format!("{head:?} (and {rest} more characters)")
    }
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
            (
                "key.device.name contains the control character '\\u{1b}'",
                |r| r.key.device.name = "H100\u{1b}[2J".into(),
            ),
            ("key.kernel_hash is 300 bytes long", |r| {
                r.key.kernel_hash = "x".repeat(300)
            }),
            (
                "key.problem.dtype_a is \"banana\"; accepted: f16, bf16",
                |r| r.key.problem.dtype_a = "banana".into(),
            ),
            (
                "key.problem.layout_b is \"diagonal\"; accepted: row, col",
                |r| r.key.problem.layout_b = "diagonal".into(),
            ),
            ("key.problem.m must be between 1 and 2147483647", |r| {
                r.key.problem.m = 0
            }),
            ("key.problem.k must be between", |r| {
                r.key.problem.k = 1 << 62
            }),
            ("key.problem.batch must be between", |r| {
                r.key.problem.batch = u64::MAX
            }),
            ("candidates is empty", |r| r.candidates.clear()),
            ("winner must be a JSON object", |r| {
                r.winner = serde_json::json!([1])
            }),
            ("candidates[2].config is an empty object", |r| {
                r.candidates[2].config = serde_json::json!({})
            }),
            ("candidates[0].config must be a JSON object", |r| {
                r.candidates[0].config = serde_json::Value::Null
            }),
            ("candidates[0].model_rank", |r| {
                r.candidates[0].model_rank = 0
            }),
            ("candidates[1].predicted_time_s", |r| {
                r.candidates[1].predicted_time_s = f64::NAN
            }),
            ("candidates[1].predicted_time_s", |r| {
                r.candidates[1].predicted_time_s = 1e300
            }),
            (
                "candidates[0].measured_time_s must be a number of seconds between 1e-9",
                |r| r.candidates[0].measured_time_s = Some(-1.0),
            ),
            ("candidates[1].measured_time_s", |r| {
                r.candidates[1].measured_time_s = Some(1e-12)
            }),
            ("candidates[1].measured_time_s", |r| {
                r.candidates[1].measured_time_s = Some(1e-300)
            }),
            ("candidates[1].measured_time_s", |r| {
                r.candidates[1].measured_time_s = Some(1e300)
            }),
            ("has neither measured_time_s nor failure", |r| {
                r.candidates[1].measured_time_s = None;
                r.candidates[1].failure = None;
            }),
            ("candidates[2].failure is empty", |r| {
                r.candidates[2].failure = Some(String::new())
            }),
            ("cublas_time_s", |r| r.cublas_time_s = Some(f64::INFINITY)),
            ("cublas_time_s", |r| r.cublas_time_s = Some(7200.0)),
            ("measured_at_unix_s", |r| r.measured_at_unix_s = -5),
            ("measured_at_unix_s", |r| r.measured_at_unix_s = i64::MAX),
            ("method must be a JSON object", |r| {
                r.method = serde_json::json!(3)
            }),
            ("the winner is not", |r| {
                r.winner = serde_json::json!({"BLOCK_M": 999})
            }),
            ("bytes of JSON; at most", |r| {
                r.candidates[2].failure = Some("x".repeat(MAX_RECORD_BYTES))
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

    #[test]
    fn the_limits_themselves_are_accepted() {
        let mut record = sample_record(0);
        record.key.problem.m = MAX_SIZE;
        record.key.problem.batch = MAX_SIZE;
        for c in &mut record.candidates {
            c.measured_time_s = c.measured_time_s.map(|_| MAX_TIME_S);
        }
        record.cublas_time_s = Some(MIN_TIME_S);
        assert_eq!(validate_record(&record), Ok(()));
    }

    #[test]
    fn quotes_are_short_and_escaped() {
        assert_eq!(quote("a\u{1b}[31mb"), "\"a\\u{1b}[31mb\"");
        let long = quote(&"x".repeat(60_000_000 / 1000));
        assert!(long.len() < 300, "{long}");
        assert!(long.ends_with("(and 59800 more characters)"), "{long}");
    }
}
