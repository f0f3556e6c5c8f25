//! Bad input to `carver cache ...` (and to `recommend` through the tuning database), on the real
//! binary: empty filters, hostile or absurd imported records and headers, endless and huge
//! input, damaged database files, export targets that are not regular files, and cache
//! directories that cannot be used.
//!
//! Every case must end with a clear message and a non-zero exit status (or a documented warning
//! and success), within a time limit, without a panic, without raw terminal escapes in what is
//! printed, and without losing a good stored result (rows are counted before and after).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use carver_tunedb::test_support::{sample_record, triton_config};
use carver_tunedb::{DB_FILE_NAME, TuneRecord};
use serde_json::{Value, json};
use tempfile::TempDir;

use common::carver_bin;

/// What a run printed, and how it ended.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn out(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    #[track_caller]
    fn fails_with(&self, expected: &str) -> &Self {
        assert_ne!(self.code, 0, "should fail: {}", self.out());
        assert!(
            self.out().contains(expected),
            "expected {expected:?} in:\n{}",
            self.out()
        );
        self
    }

    #[track_caller]
    fn succeeds_with(&self, expected: &str) -> &Self {
        assert_eq!(self.code, 0, "should succeed: {}", self.out());
        assert!(
            self.out().contains(expected),
            "expected {expected:?} in:\n{}",
            self.out()
        );
        self
    }
}

/// Runs `carver --cache-dir CACHE ARGS` (stdin from `input`) with a time limit, and checks the
/// promises every case shares: no panic, no raw escape character on either stream.
fn run_with(cache: &Path, args: &[&str], input: Option<Vec<u8>>) -> Run {
    let mut cmd = common::carver(cache, args);
    cmd.timeout(Duration::from_secs(120));
    if let Some(bytes) = input {
        cmd.write_stdin(bytes);
    }
    let output = cmd.output().expect("carver runs");
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: common::text(&output.stdout),
        stderr: common::text(&output.stderr),
    };
    assert_ne!(run.code, -1, "killed (timeout?): {}", run.out());
    assert!(!run.out().contains("panicked"), "{}", run.out());
    assert!(!run.out().contains('\u{1b}'), "raw escape: {:?}", run.out());
    run
}

fn run(cache: &Path, args: &[&str]) -> Run {
    run_with(cache, args, None)
}

/// Stored rows, damaged or not, counted behind carver's back.
fn rows(cache: &Path) -> i64 {
    let path = cache.join(DB_FILE_NAME);
    if !path.exists() {
        return 0;
    }
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM tuning_results", [], |r| r.get(0))
        .unwrap()
}

/// Runs SQL on the database file behind carver's back, as an editor or a bad disk would.
fn tamper(cache: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(cache.join(DB_FILE_NAME)).unwrap();
    conn.execute_batch(sql).unwrap();
}

fn sm90_config(block_n: u32, stages: u32) -> Value {
    json!({
        "block_m": 128, "block_n": block_n, "block_k": 64, "stages": stages, "consumers": 2,
        "group_m": 8, "cluster_m": 1, "persistent": false,
    })
}

/// Three good results: two triton ones on an H100, a cuda-sm90 one on an H200.
fn fixture() -> Vec<TuneRecord> {
    let mut h200 = sample_record(3968);
    h200.key.device.name = "NVIDIA H200".into();
    h200.key.device.uuid = "GPU-h200-0000".into();
    h200.key.target = "cuda-sm90".into();
    for (c, (n, s)) in h200
        .candidates
        .iter_mut()
        .zip([(128, 4), (256, 3), (256, 5)])
    {
        c.config = sm90_config(n, s);
    }
    h200.winner = sm90_config(256, 3);
    vec![sample_record(0), sample_record(1920), h200]
}

fn header(records: usize) -> String {
    format!("{{\"format\":\"carver-tuning-results\",\"format_version\":1,\"records\":{records}}}")
}

fn line(record: &TuneRecord) -> String {
    serde_json::to_string(record).unwrap()
}

/// A cache holding the fixture (imported through the CLI), and a directory for files.
fn populated() -> (TempDir, TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let mut text = header(3);
    for r in fixture() {
        text.push('\n');
        text.push_str(&line(&r));
    }
    text.push('\n');
    let file = files.path().join("fixture.jsonl");
    fs::write(&file, text).unwrap();
    run(cache.path(), &["cache", "import", file.to_str().unwrap()]).succeeds_with("3 new");
    assert_eq!(rows(cache.path()), 3);
    (cache, files)
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Filters on destructive and other cache commands.

#[test]
fn empty_and_blank_filters_are_refused_by_every_command() {
    let (cache, files) = populated();
    let c = cache.path();
    let out = files.path().join("out.jsonl");
    let cases: Vec<Vec<&str>> = vec![
        vec!["cache", "clear", "--yes", "--device", ""],
        vec!["cache", "clear", "--yes", "--device", "   "],
        vec!["cache", "clear", "--yes", "--device", "\t"],
        vec!["cache", "clear", "--yes", "--target", ""],
        vec!["cache", "clear", "--dry-run", "--device", ""],
        vec!["cache", "clear", "--device", ""],
        vec!["cache", "list", "--device", ""],
        vec!["cache", "list", "--target", " "],
        vec!["cache", "show", "1", "--device", ""],
        vec!["cache", "show", "128x4096x4096", "--target", ""],
        vec!["cache", "export", "--device", ""],
        vec!["cache", "export", "--target", "", "-o", arg(&out)],
    ];
    for args in cases {
        run(c, &args).fails_with("filter is empty");
        assert_eq!(rows(c), 3, "{args:?} deleted something");
    }
    assert!(!out.exists(), "no export was written");
    run(c, &["cache", "clear", "--yes", "--device", "  "]).fails_with("(only spaces)");
    run(c, &["cache", "clear", "--yes", "--device", ""]).fails_with("an unset shell variable?");
}

#[test]
fn clear_counts_dry_runs_and_deletes_by_id() {
    let (cache, _files) = populated();
    let c = cache.path();
    run(c, &["cache", "clear", "--device", "h100"])
        .fails_with("refusing to delete 2 stored tuning results matching device \"h100\"");
    run(c, &["cache", "clear", "--dry-run", "--device", "h100"])
        .succeeds_with("would delete 2 tuning results matching device \"h100\": ids 1, 2")
        .succeeds_with("nothing was deleted");
    let json: Value =
        serde_json::from_str(&run(c, &["cache", "clear", "--dry-run", "--format", "json"]).stdout)
            .unwrap();
    assert_eq!(json["dry_run"], json!(true));
    assert_eq!(json["would_delete"], json!([1, 2, 3]));
    assert_eq!(json["deleted"], json!(0));
    assert_eq!(rows(c), 3);
    run(c, &["cache", "clear", "--yes", "--dry-run"]).fails_with("cannot be used with");
    run(c, &["cache", "clear", "--yes", "--id", "2"])
        .succeeds_with("deleted 1 tuning results matching id 2");
    assert_eq!(rows(c), 2);
    run(c, &["cache", "clear", "--yes", "--id", "2"]).succeeds_with("deleted 0");
    run(c, &["cache", "clear", "--id", "x"]).fails_with("invalid value 'x'");
    run(c, &["cache", "clear", "--shape", "0x1x1"])
        .fails_with("expected MxNxK with positive integers");
    assert_eq!(rows(c), 2);
}

#[test]
fn remove_takes_existing_ids_only() {
    let (cache, _files) = populated();
    let c = cache.path();
    run(c, &["cache", "remove", "99"])
        .fails_with("no stored tuning result has id 99; nothing was removed");
    run(c, &["cache", "remove", "1", "99"]).fails_with("no stored tuning result has id 99");
    assert_eq!(rows(c), 3, "all or nothing");
    run(c, &["cache", "remove"]).fails_with("required");
    run(c, &["cache", "remove", "one"]).fails_with("invalid value 'one'");
    run(c, &["cache", "show", "\u{1b}[2J"]).fails_with("`\\u{1b}[2J` is neither a result id");
    run(c, &["cache", "show", "77"]).fails_with("no stored tuning result matches `77`");
    run(c, &["cache", "remove", "1", "3"]).succeeds_with("deleted 2 tuning results (ids 1, 3)");
    assert_eq!(rows(c), 1);
}

// ---------------------------------------------------------------------------------------------
// Imported rows: each case is one bad (or odd) row after a good one.

/// What a row case must give.
enum Expect {
    /// A bad row whose reason contains this; the good row is imported.
    Bad(&'static str),
    /// A warning containing this; both rows are imported, the exit status is 0.
    Warn(&'static str),
    /// Imported without a word.
    Clean,
}

/// Sets the time of the winner's measurement (candidate 1 of `sample_record`).
fn winner_time(r: &mut Value, t: Value) {
    r["candidates"][1]["measured_time_s"] = t;
}

type Edit = fn(&mut Value);

fn row_cases() -> Vec<(&'static str, Edit, Expect)> {
    use Expect::*;
    vec![
        (
            "winner time 1e-12 s",
            |r| winner_time(r, json!(1e-12)),
            Bad(
                "candidates[1].measured_time_s must be a number of seconds between 1e-9 (1 ns) and 3600 (1 hour) (got 1e-12)",
            ),
        ),
        (
            "winner time 1e-300 s",
            |r| winner_time(r, json!(1e-300)),
            Bad("candidates[1].measured_time_s must be"),
        ),
        (
            "winner time 1e300 s",
            |r| winner_time(r, json!(1e300)),
            Bad("(got 1e300)"),
        ),
        (
            "winner time 2 hours",
            |r| winner_time(r, json!(7200.0)),
            Bad("candidates[1].measured_time_s must be"),
        ),
        (
            "negative time",
            |r| r["candidates"][0]["measured_time_s"] = json!(-1.0),
            Bad("candidates[0].measured_time_s must be"),
        ),
        (
            "zero time",
            |r| winner_time(r, json!(0.0)),
            Bad("(got 0.0)"),
        ),
        (
            "time as text",
            |r| winner_time(r, json!("fast")),
            Bad("not a tuning record: invalid type: string \"fast\""),
        ),
        (
            "cuBLAS 1e-12 s",
            |r| r["cublas_time_s"] = json!(1e-12),
            Bad("cublas_time_s must be"),
        ),
        (
            "cuBLAS 1e300 s",
            |r| r["cublas_time_s"] = json!(1e300),
            Bad("cublas_time_s must be"),
        ),
        (
            "predicted 1e300 s",
            |r| r["candidates"][0]["predicted_time_s"] = json!(1e300),
            Bad("candidates[0].predicted_time_s must be"),
        ),
        (
            "predicted negative",
            |r| r["candidates"][2]["predicted_time_s"] = json!(-5.0),
            Bad("candidates[2].predicted_time_s must be"),
        ),
        (
            "M = 2^62",
            |r| r["key"]["problem"]["m"] = json!(1u64 << 62),
            Bad("key.problem.m must be between 1 and 2147483647 (got 4611686018427387904)"),
        ),
        (
            "N = 0",
            |r| r["key"]["problem"]["n"] = json!(0),
            Bad("key.problem.n must be between 1 and 2147483647"),
        ),
        (
            "K = 2^31",
            |r| r["key"]["problem"]["k"] = json!(1u64 << 31),
            Bad("key.problem.k must be between"),
        ),
        (
            "K = -1",
            |r| r["key"]["problem"]["k"] = json!(-1),
            Bad("not a tuning record: invalid value: integer `-1`"),
        ),
        (
            "M = 1.5",
            |r| r["key"]["problem"]["m"] = json!(1.5),
            Bad("not a tuning record: invalid type: floating point"),
        ),
        (
            "batch = 2^31",
            |r| r["key"]["problem"]["batch"] = json!(1u64 << 31),
            Bad("key.problem.batch must be between"),
        ),
        (
            "batch = 2^64 - 1",
            |r| r["key"]["problem"]["batch"] = json!(u64::MAX),
            Bad("key.problem.batch must be between"),
        ),
        (
            "dtype banana",
            |r| r["key"]["problem"]["dtype_a"] = json!("banana"),
            Bad(
                "key.problem.dtype_a is \"banana\"; accepted: f16, bf16, f32, tf32, e4m3, e5m2, i8, i32",
            ),
        ),
        (
            "dtype empty",
            |r| r["key"]["problem"]["dtype_acc"] = json!(""),
            Bad("key.problem.dtype_acc is \"\"; accepted:"),
        ),
        (
            "dtype alias fp16",
            |r| r["key"]["problem"]["dtype_c"] = json!("fp16"),
            Bad("key.problem.dtype_c is \"fp16\"; accepted:"),
        ),
        (
            "layout diagonal",
            |r| r["key"]["problem"]["layout_b"] = json!("diagonal"),
            Bad("key.problem.layout_b is \"diagonal\"; accepted: row, col"),
        ),
        (
            "target unknown",
            |r| r["key"]["target"] = json!("cutlass"),
            Bad(
                "key.target \"cutlass\" is not a kernel family carver knows (accepted: triton, tilelang, cuda-sm90, generic)",
            ),
        ),
        (
            "target empty",
            |r| r["key"]["target"] = json!(""),
            Bad("key.target is empty"),
        ),
        (
            "device with escape",
            |r| r["key"]["device"]["name"] = json!("NVIDIA H100\u{1b}[2J\u{1b}[31m"),
            Bad("key.device.name contains the control character '\\u{1b}'"),
        ),
        (
            "device with newline",
            |r| r["key"]["device"]["name"] = json!("H100\nfake line"),
            Bad("key.device.name contains the control character '\\n'"),
        ),
        (
            "device 300 bytes",
            |r| r["key"]["device"]["name"] = json!("H".repeat(300)),
            Bad("key.device.name is 300 bytes long; at most 256"),
        ),
        (
            "uuid empty",
            |r| r["key"]["device"]["uuid"] = json!(""),
            Bad("key.device.uuid is empty"),
        ),
        (
            "driver blank",
            |r| r["key"]["device"]["driver_version"] = json!("  "),
            Bad("key.device.driver_version is empty"),
        ),
        (
            "winner of arbitrary keys",
            |r| {
                let junk = json!({"rm -rf /": true, "BLOCK": "x"});
                r["winner"] = junk.clone();
                r["candidates"][1]["config"] = junk;
            },
            Bad("the winner is not a triton configuration"),
        ),
        (
            "winner with zero warps",
            |r| {
                let zero = triton_config(128, 256, 0, 3);
                r["winner"] = zero.clone();
                r["candidates"][1]["config"] = zero;
            },
            Bad("the winner is not a triton configuration: native parameter `num_warps`"),
        ),
        (
            "winner of billions of rows",
            |r| {
                let huge = triton_config(1 << 31, 1 << 31, u64::from(u32::MAX), 3);
                r["winner"] = huge.clone();
                r["candidates"][1]["config"] = huge;
            },
            Bad("the winner is not a triton configuration"),
        ),
        (
            "cuda-sm90 target with a triton winner",
            |r| r["key"]["target"] = json!("cuda-sm90"),
            Bad("the winner is not a cuda-sm90 configuration"),
        ),
        (
            "winner an array",
            |r| r["winner"] = json!([1, 2]),
            Bad("winner must be a JSON object"),
        ),
        (
            "config null",
            |r| r["candidates"][0]["config"] = Value::Null,
            Bad("candidates[0].config must be a JSON object of the target's parameters (got null)"),
        ),
        (
            "config empty object",
            |r| r["candidates"][0]["config"] = json!({}),
            Bad("candidates[0].config is an empty object"),
        ),
        (
            "no candidates",
            |r| r["candidates"] = json!([]),
            Bad("candidates is empty"),
        ),
        (
            "model rank 0",
            |r| r["candidates"][0]["model_rank"] = json!(0),
            Bad("candidates[0].model_rank must be 1 or more"),
        ),
        (
            "model rank -1",
            |r| r["candidates"][0]["model_rank"] = json!(-1),
            Bad("not a tuning record: invalid value: integer `-1`"),
        ),
        (
            "winner never measured",
            |r| r["winner"] = r["candidates"][2]["config"].clone(),
            Bad("the winner is not the config of any successfully measured candidate"),
        ),
        (
            "failure without a reason",
            |r| r["candidates"][2]["failure"] = json!(""),
            Bad("candidates[2].failure is empty"),
        ),
        (
            "neither time nor failure",
            |r| r["candidates"][2]["failure"] = Value::Null,
            Bad("candidates[2] has neither measured_time_s nor failure"),
        ),
        (
            "measured before 1970",
            |r| r["measured_at_unix_s"] = json!(-5),
            Bad("measured_at_unix_s must be between 0 and now plus a day"),
        ),
        (
            "measured in 2100",
            |r| r["measured_at_unix_s"] = json!(4_102_444_800i64),
            Bad("measured_at_unix_s must be between 0 and now plus a day"),
        ),
        (
            "method not an object",
            |r| r["method"] = json!("median of 3"),
            Bad("method must be a JSON object"),
        ),
        // M = 2 (a shape no other case uses): 33.6 MB that fit in L2, 4.28 us at its bandwidth.
        (
            "winner under the roofline",
            |r| {
                r["key"]["problem"]["m"] = json!(2);
                winner_time(r, json!(2e-6));
            },
            Bad(
                "candidates[1].measured_time_s = 2e-6 s is faster than physically possible on NVIDIA H100 80GB HBM3",
            ),
        ),
        (
            "cuBLAS under the roofline",
            |r| r["cublas_time_s"] = json!(2e-6),
            Bad("cublas_time_s = 2e-6 s is faster than physically possible"),
        ),
        (
            "every time under the roofline",
            |r| {
                for i in 0..2 {
                    r["candidates"][i]["measured_time_s"] = json!(1e-8);
                }
            },
            Bad("is faster than physically possible"),
        ),
        (
            "schema_version 99 in the row",
            |r| r["schema_version"] = json!(99),
            Bad("schema_version 99 is not one this carver reads (accepted: 1)"),
        ),
        (
            "key not an object",
            |r| r["key"] = json!("h100"),
            Bad("not a tuning record: invalid type: string \"h100\""),
        ),
        (
            "missing key",
            |r| {
                r.as_object_mut().unwrap().remove("key");
            },
            Bad("not a tuning record: missing field `key`"),
        ),
        (
            "unknown device",
            |r| r["key"]["device"]["name"] = json!("Imaginary GPU 9000"),
            Warn(
                "no hardware description matches the device \"Imaginary GPU 9000\": its times were checked for sense only",
            ),
        ),
        (
            "unknown field",
            |r| r["comment"] = json!("hand edited"),
            Warn("the record has the unknown field \"comment\"; it was ignored"),
        ),
        (
            "unknown nested field",
            |r| r["candidates"][0]["registers"] = json!(168),
            Warn("candidates[0] has the unknown field \"registers\"; it was ignored"),
        ),
        (
            "unknown field with an escape in its name",
            |r| r["key"]["x\u{1b}[31m"] = json!(1),
            Warn("key has the unknown field \"x\\u{1b}[31m\"; it was ignored"),
        ),
        (
            "schema_version 1 in the row",
            |r| r["schema_version"] = json!(1),
            Clean,
        ),
        (
            "a time just above half the roofline",
            |r| {
                r["key"]["problem"]["m"] = json!(2);
                winner_time(r, json!(2.4e-6));
            },
            Clean,
        ),
    ]
}

#[test]
fn each_bad_row_is_refused_with_its_reason_and_the_good_ones_kept() {
    let (cache, files) = populated();
    let c = cache.path();
    let cases = row_cases();
    for (i, (name, edit, expect)) in cases.into_iter().enumerate() {
        // Keys no other case uses, so that every good row is new.
        let good = sample_record(10 + 2 * i as u64);
        let mut odd = serde_json::to_value(sample_record(11 + 2 * i as u64)).unwrap();
        edit(&mut odd);
        let text = format!("{}\n{}\n{odd}\n", header(2), line(&good));
        let file = write(files.path(), "case.jsonl", text);
        let before = rows(c);
        let result = run(c, &["cache", "import", arg(&file)]);
        match expect {
            Expect::Bad(reason) => {
                result.fails_with("bad row, line 3: ").fails_with(reason);
                result.fails_with("1 of 2 rows of");
                assert_eq!(rows(c), before + 1, "{name}: the good row only");
            }
            Expect::Warn(message) => {
                result.succeeds_with(&format!("warning, line 3: {message}"));
                assert_eq!(rows(c), before + 2, "{name}");
            }
            Expect::Clean => {
                result.succeeds_with("2 new");
                assert!(
                    !result.out().contains("warning"),
                    "{name}: {}",
                    result.out()
                );
                assert_eq!(rows(c), before + 2, "{name}");
            }
        }
    }
    // Nothing stored before was lost along the way.
    run(c, &["cache", "show", "1"]).succeeds_with("result 1");
    run(c, &["cache", "show", "3"]).succeeds_with("NVIDIA H200");
}

#[test]
fn bad_row_texts_are_refused() {
    let (cache, files) = populated();
    let c = cache.path();
    let good = line(&sample_record(500));
    // JSON has no NaN and no 1e999: written into the text where a time goes.
    let with_cublas = |n: u64, text: &str| {
        let mut r = sample_record(n);
        r.cublas_time_s = Some(0.125);
        line(&r).replace(
            "\"cublas_time_s\":0.125",
            &format!("\"cublas_time_s\":{text}"),
        )
    };
    let nan = with_cublas(501, "NaN");
    assert!(nan.contains("NaN"));
    let huge_number = with_cublas(502, "1e999");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "NaN literal",
            nan.into_bytes(),
            "not a tuning record: expected value",
        ),
        (
            "number out of range",
            huge_number.into_bytes(),
            "not a tuning record: number out of range",
        ),
        (
            "invalid UTF-8",
            b"\xff\xfe{\"key\": 1}".to_vec(),
            "the line is not valid UTF-8 (at byte 0",
        ),
        (
            "cut short",
            line(&sample_record(503)).as_bytes()[..60].to_vec(),
            "EOF while parsing",
        ),
        (
            "trailing garbage",
            format!("{} trailing", line(&sample_record(504))).into_bytes(),
            "trailing characters",
        ),
        (
            "an array",
            b"[1, 2, 3]".to_vec(),
            "not a tuning record: invalid type: integer `1`",
        ),
        (
            "a bare string",
            b"\"\x1b[2Jgotcha\"".to_vec(),
            "not a tuning record",
        ),
        ("NUL bytes", vec![0u8; 100], "not a tuning record"),
        (
            "5 MiB of one line",
            format!("{{\"key\":\"{}\"}}", "A".repeat(5 << 20)).into_bytes(),
            "bytes long; at most 4194304 are read (it starts with \"{\\\"key\\\":\\\"AAAA",
        ),
    ];
    for (name, bad, reason) in cases {
        let mut text = format!("{}\n", header(2)).into_bytes();
        text.extend_from_slice(&bad);
        text.extend_from_slice(format!("\n{good}\n").as_bytes());
        let file = write(files.path(), "case.jsonl", text);
        let before = rows(c);
        let result = run(c, &["cache", "import", arg(&file)]);
        result.fails_with("bad row, line 2: ").fails_with(reason);
        assert_eq!(rows(c), before.max(4), "{name}: the good row is in");
        assert!(result.stdout.len() < 4000, "{name}: a short report");
    }
}

#[test]
fn bad_headers_import_nothing() {
    let (cache, files) = populated();
    let c = cache.path();
    let record = line(&sample_record(600));
    let long_header = format!("{{\"format\":\"{}\"}}", "x".repeat(100_000));
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty file", String::new(), "the file is empty"),
        ("blank first line", "\n".into(), "line 1 should be a header"),
        ("format_version 0", r#"{"format":"carver-tuning-results","format_version":0,"records":1}"#.into(), "format version 0 is not one this carver reads (accepted: 1)"),
        ("format_version 2", r#"{"format":"carver-tuning-results","format_version":2,"records":1}"#.into(), "format version 2 was written by a newer carver; this one reads version 1"),
        ("format_version text", r#"{"format":"carver-tuning-results","format_version":"1","records":1}"#.into(), "format version \"1\" is not one"),
        ("format_version negative", r#"{"format":"carver-tuning-results","format_version":-1,"records":1}"#.into(), "format version -1 is not one"),
        ("format_version missing", r#"{"format":"carver-tuning-results","records":1}"#.into(), "the header has no format_version (accepted: 1)"),
        ("other format", r#"{"format":"other","format_version":1,"records":1}"#.into(), "the header's format is \"other\""),
        ("format with an escape", "{\"format\":\"\\u001b[2J\",\"format_version\":1,\"records\":1}".into(), "the header's format is \"\\u{1b}[2J\""),
        ("schema_version 99", r#"{"format":"carver-tuning-results","format_version":1,"schema_version":99,"records":1}"#.into(), "the header's schema_version 99 is not one this carver reads (accepted: 1)"),
        ("records missing", r#"{"format":"carver-tuning-results","format_version":1}"#.into(), "the header has no records count"),
        ("records text", r#"{"format":"carver-tuning-results","format_version":1,"records":"many"}"#.into(), "the header's records must be a count"),
        ("exported_by a number", r#"{"format":"carver-tuning-results","format_version":1,"records":1,"exported_by":5}"#.into(), "the header's exported_by must be a text"),
        ("a record first", record.clone(), "line 1 should be a header"),
        ("an array", "[]".into(), "line 1 should be a header"),
        ("a 100 KB header", long_header, "line 1 is longer than 65536 bytes"),
    ];
    for (name, first, expected) in cases {
        let text = if first.is_empty() {
            String::new()
        } else {
            format!("{first}\n{record}\n")
        };
        let file = write(files.path(), "case.jsonl", text);
        run(c, &["cache", "import", arg(&file)]).fails_with(expected);
        assert_eq!(rows(c), 3, "{name}");
    }
    // Binary garbage.
    let garbage: Vec<u8> = (0..20_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let file = write(files.path(), "garbage.bin", garbage);
    run(c, &["cache", "import", arg(&file)]).fails_with("not a carver tuning export");
    assert_eq!(rows(c), 3);
}

#[test]
fn endless_and_odd_inputs_end_quickly_with_a_clear_message() {
    let (cache, files) = populated();
    let c = cache.path();
    let started = std::time::Instant::now();
    run(c, &["cache", "import", "/dev/zero"])
        .fails_with("line 1 is longer than 65536 bytes, so it is no header");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    run(c, &["cache", "import", "/dev/null"]).fails_with("the file is empty");
    run_with(c, &["cache", "import", "-"], Some(b"garbage\n".to_vec()))
        .fails_with("line 1 should be a header");
    run(c, &["cache", "import", arg(files.path())]).fails_with("Is a directory");
    run(
        c,
        &["cache", "import", arg(&files.path().join("missing.jsonl"))],
    )
    .fails_with("cannot open");
    // A valid header, then a line that never ends: read up to 1 GiB, then given up.
    let head = write(files.path(), "head.jsonl", format!("{}\n", header(1)));
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"cat "$1" /dev/zero | "$2" --cache-dir "$3" cache import -"#)
        .args(["sh", arg(&head), &carver_bin(), arg(c)])
        .env_remove("CARVER_CACHE_DIR")
        .env_remove("CARVER_HARDWARE_DB")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        out.contains("the line goes on for more than 1073741824 bytes"),
        "{out}"
    );
    assert!(out.contains("the rest of the input was not read"), "{out}");
    assert!(out.len() < 4000);
    assert_eq!(rows(c), 3);
}

#[test]
fn a_60_megabyte_line_is_quoted_by_its_start_only() {
    let (cache, files) = populated();
    let c = cache.path();
    let mut text = format!("{}\n{{\"key\":\"", header(2));
    text.push_str(&"Z".repeat(60_000_000));
    text.push_str("\"}\n");
    text.push_str(&line(&sample_record(700)));
    text.push('\n');
    let file = write(files.path(), "huge.jsonl", text);
    let result = run(c, &["cache", "import", arg(&file)]);
    result.fails_with("bad row, line 2: the line is 60000010 bytes long; at most 4194304 are read");
    assert!(
        result.stdout.len() < 2000,
        "{} bytes of report",
        result.stdout.len()
    );
    assert_eq!(rows(c), 4, "the good row after it is in");
}

#[test]
fn a_report_lists_a_thousand_bad_rows_and_counts_the_rest() {
    let (cache, files) = populated();
    let mut text = format!("{}\n", header(1500));
    for _ in 0..1500 {
        text.push_str("{\"key\": 5}\n");
    }
    let file = write(files.path(), "many.jsonl", text);
    let result = run(cache.path(), &["cache", "import", arg(&file)]);
    result
        .fails_with("... and 500 more bad rows")
        .fails_with("1500 of 1500 rows");
    assert_eq!(result.stdout.matches("bad row, line").count(), 1000);
    assert_eq!(rows(cache.path()), 3);
}

#[test]
fn an_implausible_stored_result_never_blocks_a_real_one() {
    let (cache, files) = populated();
    let c = cache.path();
    // Stored before these checks existed: 10 ns for a problem that needs at least 4.5 us.
    let fake = r#"[{"config":{"kwargs":{"BLOCK_SIZE_M":128,"BLOCK_SIZE_N":256,"BLOCK_SIZE_K":64,"GROUP_SIZE_M":8,"SPLIT_K":1},"num_warps":8,"num_stages":3},"model_rank":1,"predicted_time_s":0.0001,"measured_time_s":1e-8,"failure":null}]"#;
    tamper(
        c,
        &format!(
            "UPDATE tuning_results SET candidates = '{fake}', cublas_time_s = NULL WHERE id = 1"
        ),
    );
    // recommend does not show it.
    run(c, &["recommend", "--arch", "h100", "--m", "128", "--n", "4096", "--k", "4096", "--target", "triton"])
        .succeeds_with("stored result 1 is not shown: candidates[0].measured_time_s = 1e-8 s is faster than physically possible");
    // An honest import for the same key replaces it although it is slower.
    let file = write(
        files.path(),
        "honest.jsonl",
        format!("{}\n{}\n", header(1), line(&sample_record(0))),
    );
    run(c, &["cache", "import", arg(&file)]).succeeds_with("1 replaced a slower result");
    let shown: Value =
        serde_json::from_str(&run(c, &["cache", "show", "1", "--format", "json"]).stdout).unwrap();
    assert_eq!(
        shown["results"][0]["candidates"][1]["measured_time_s"],
        json!(1.0e-4)
    );
    assert_eq!(rows(c), 3);
}

// ---------------------------------------------------------------------------------------------
// Damaged databases.

#[test]
fn a_damaged_row_is_skipped_named_and_removable() {
    let (cache, _files) = populated();
    let c = cache.path();
    tamper(
        c,
        "UPDATE tuning_results SET winner = '{\"kwargs\": [' WHERE id = 2",
    );
    run(c, &["cache", "list"])
        .succeeds_with("2 results in")
        .succeeds_with(
            "warning: stored result 2 cannot be read and was skipped: winner is not valid",
        )
        .succeeds_with("`carver cache remove 2` deletes it");
    let json: Value =
        serde_json::from_str(&run(c, &["cache", "list", "--format", "json"]).stdout).unwrap();
    assert_eq!(json["skipped"][0]["id"], json!(2));
    run(c, &["cache", "show", "2"])
        .fails_with("the stored results matching `2` cannot be read (row 2: winner is not valid");
    run(c, &["cache", "show", "1"]).succeeds_with("result 1");
    let export = run(c, &["cache", "export"]);
    export
        .fails_with("exported 2 tuning results")
        .fails_with("1 stored results could not be read and are not in the export");
    assert_eq!(
        export.stdout.lines().count(),
        3,
        "header and the two good rows"
    );
    assert_eq!(rows(c), 3);
    run(c, &["cache", "remove", "2"]).succeeds_with("deleted 1");
    run(c, &["cache", "export"]).succeeds_with("exported 2 tuning results");
    assert_eq!(rows(c), 2);
}

#[test]
fn stored_texts_are_escaped_or_refused_on_output() {
    let (cache, _files) = populated();
    let c = cache.path();
    // Texts the checks refuse in a key are skipped; texts they allow are shown escaped.
    tamper(
        c,
        "UPDATE tuning_results SET device_name = 'H100' || char(27) || ']0;owned' || char(7) WHERE id = 2;
         UPDATE tuning_results SET candidates = replace(candidates, 'out of shared memory', 'out of\\u001b[2J shared' || char(8238) || 'memory') WHERE id = 1;
         UPDATE tuning_results SET method = '{\"timer\": \"' || char(8238) || 'cuda-events\", \"k\\u001b\": 1}' WHERE id = 1;",
    );
    run(c, &["cache", "list"])
        .succeeds_with("key.device.name contains the control character '\\u{1b}'");
    let shown = run(c, &["cache", "show", "1"]);
    shown
        .succeeds_with("FAILED: out of\\u{1b}[2J shared\\u{202e}memory")
        .succeeds_with("\\u{202e}cuda-events");
    assert!(
        !shown.out().contains('\u{202e}'),
        "raw override: {}",
        shown.out()
    );
    run(c, &["cache", "show", "2"]).fails_with("control character");
    // JSON output is escaped by serde.
    let json = run(c, &["cache", "show", "1", "--format", "json"]);
    assert!(json.stdout.contains("\\u001b[2J"), "{}", json.stdout);
    assert_eq!(rows(c), 3);
}

#[test]
fn invalid_text_in_a_row_is_skipped() {
    let (cache, _files) = populated();
    let c = cache.path();
    tamper(
        c,
        "UPDATE tuning_results SET device_uuid = CAST(X'FFFE' AS TEXT) WHERE id = 3;",
    );
    run(c, &["cache", "list"]).succeeds_with(
        "warning: stored result 3 cannot be read and was skipped: a column cannot be read",
    );
    run(c, &["cache", "export", "--device", "h100"]).succeeds_with("exported 2");
    assert_eq!(rows(c), 3);
}

/// A database of `n` records, made with the library and closed.
fn database_of(dir: &Path, n: u64) {
    let (db, _) = carver_tunedb::TuneDb::open(dir).unwrap();
    for i in 0..n {
        db.store(&sample_record(i)).unwrap();
    }
}

#[test]
fn structural_damage_is_moved_aside_and_salvaged() {
    let cache = tempfile::tempdir().unwrap();
    let c = cache.path();
    database_of(c, 1000);
    let path = c.join(DB_FILE_NAME);
    let mut bytes = fs::read(&path).unwrap();
    let middle = bytes.len() / 2 / 4096 * 4096;
    bytes[middle..middle + 3 * 4096].fill(0);
    fs::write(&path, &bytes).unwrap();

    // recommend never repairs and never refuses.
    run(
        c,
        &[
            "recommend",
            "--arch",
            "h100",
            "--m",
            "128",
            "--n",
            "4096",
            "--k",
            "4096",
        ],
    )
    .succeeds_with("measured winners from the tuning database are not shown");
    assert_eq!(fs::read(&path).unwrap(), bytes, "recommend changed nothing");

    let list = run(c, &["cache", "list", "--format", "json"]);
    list.succeeds_with("it was moved to")
        .succeeds_with("recovered");
    let json: Value = serde_json::from_str(&list.stdout).unwrap();
    let kept = json["results"].as_array().unwrap().len();
    assert!((980..1000).contains(&kept), "{kept} of 1000 kept");
    let moved: Vec<PathBuf> = fs::read_dir(c)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_string_lossy().contains(".moved-aside-")
                && !p.to_string_lossy().ends_with("-wal")
                && !p.to_string_lossy().ends_with("-shm")
        })
        .collect();
    assert_eq!(moved.len(), 1);
    assert_eq!(
        fs::read(&moved[0]).unwrap(),
        bytes,
        "the damaged file is kept as it was"
    );
    // Recovering it again finds nothing new.
    run(c, &["cache", "recover", arg(&moved[0])])
        .succeeds_with(&format!("{kept} kept the stored result"));
    assert_eq!(rows(c) as usize, kept);
}

#[test]
fn recover_refuses_what_it_cannot_read() {
    let (cache, files) = populated();
    let c = cache.path();
    let text = write(files.path(), "notes.txt", "my notes\n".repeat(1000));
    let cases: Vec<(String, &str)> = vec![
        (
            c.join(DB_FILE_NAME).display().to_string(),
            "it is the database in use",
        ),
        (files.path().display().to_string(), "it is a directory"),
        ("/dev/zero".into(), "it is a device, pipe or socket"),
        (
            files.path().join("missing").display().to_string(),
            "No such file or directory",
        ),
        (
            text.display().to_string(),
            "no tuning results were found in",
        ),
    ];
    for (file, expected) in cases {
        run(c, &["cache", "recover", &file]).fails_with(expected);
        assert_eq!(rows(c), 3);
    }
    let newer = files.path().join("newer.sqlite3");
    let conn = rusqlite::Connection::open(&newer).unwrap();
    conn.pragma_update(None, "application_id", carver_tunedb::APPLICATION_ID)
        .unwrap();
    conn.pragma_update(None, "user_version", carver_tunedb::SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    run(c, &["cache", "recover", arg(&newer)]).fails_with("was written by a newer carver");
    assert_eq!(rows(c), 3);
}

#[test]
fn recover_checks_every_row_like_an_import() {
    let (cache, files) = populated();
    let other = tempfile::tempdir().unwrap();
    database_of(other.path(), 4);
    tamper(
        other.path(),
        "UPDATE tuning_results SET dtype_a = 'banana' WHERE id = 2;
         UPDATE tuning_results SET cublas_time_s = 2e-6 WHERE id = 3;",
    );
    let file = files.path().join("other.sqlite3");
    fs::copy(other.path().join(DB_FILE_NAME), &file).unwrap();
    let result = run(cache.path(), &["cache", "recover", arg(&file)]);
    result
        .fails_with("recovered 2 of the 4 results found in")
        .fails_with("bad row, id 2: key.problem.dtype_a is \"banana\"")
        .fails_with("bad row, id 3: cublas_time_s = 2e-6 s is faster than physically possible")
        .fails_with("2 of the 4 rows found in");
    // sample_record(0) was in the fixture already.
    assert_eq!(rows(cache.path()), 4);
}

// ---------------------------------------------------------------------------------------------
// Export targets.

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn export_respects_the_umask_and_what_it_would_replace() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let (cache, files) = populated();
    let c = cache.path();
    let dir = files.path();

    // A new file gets what any new file gets here (the test runs under the same umask).
    let new = dir.join("new.jsonl");
    run(c, &["cache", "export", "-o", arg(&new)]).succeeds_with("exported 3");
    let probe = write(dir, "probe", "");
    assert_eq!(mode(&new), mode(&probe));
    // A replaced file keeps its mode.
    fs::set_permissions(&new, fs::Permissions::from_mode(0o640)).unwrap();
    run(c, &["cache", "export", "-o", arg(&new)]).succeeds_with("exported 3");
    assert_eq!(mode(&new), 0o640);

    // A symlink is refused, then followed with --force; the link stays a link.
    let real = write(dir, "real.jsonl", "precious");
    let link = dir.join("link.jsonl");
    symlink(&real, &link).unwrap();
    run(c, &["cache", "export", "-o", arg(&link)]).fails_with("it is a symbolic link (to");
    assert_eq!(fs::read_to_string(&real).unwrap(), "precious");
    run(c, &["cache", "export", "-o", arg(&link), "--force"]).succeeds_with("exported 3");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        fs::read_to_string(&real)
            .unwrap()
            .starts_with("{\"format\"")
    );
    // A dangling link cannot be followed.
    let dangling = dir.join("dangling.jsonl");
    symlink(dir.join("nowhere/x"), &dangling).unwrap();
    run(c, &["cache", "export", "-o", arg(&dangling), "--force"]).fails_with("cannot be followed");

    // A directory, always; a device unless forced.
    run(c, &["cache", "export", "-o", arg(dir)]).fails_with("it is a directory");
    run(c, &["cache", "export", "-o", arg(dir), "--force"]).fails_with("it is a directory");
    run(c, &["cache", "export", "-o", "/dev/null"]).fails_with("it is a device, FIFO or socket");
    run(c, &["cache", "export", "-o", "/dev/null", "--force"]).succeeds_with("exported 3");
    assert!(Path::new("/dev/null").exists());

    // Elsewhere.
    run(c, &["cache", "export", "--force"]).fails_with("--output");
    run(
        c,
        &["cache", "export", "-o", arg(&dir.join("missing/out.jsonl"))],
    )
    .fails_with("cannot create a file beside it");
    let leftovers: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("carver-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(rows(c), 3);
}

// ---------------------------------------------------------------------------------------------
// Cache directories that cannot be used.

#[test]
fn an_uncreatable_cache_directory_is_named_with_the_reason_once() {
    let files = tempfile::tempdir().unwrap();
    let file = write(files.path(), "a-file", "x");
    let below = file.join("cache");
    let result = run(&below, &["cache", "list"]);
    // The CLI refuses such a --cache-dir while parsing it, before any flow runs.
    result.fails_with(&format!(
        "{} cannot be used as a directory (Not a directory (os error 20))",
        below.display()
    ));
    assert_eq!(
        result.stderr.matches("Not a directory").count(),
        1,
        "{}",
        result.stderr
    );
    let result = run(&file, &["cache", "import", "/dev/null"]);
    result.fails_with("is a file, not a directory");
    // A cache directory the user named is input like any other: even recommend, which needs no
    // database, says what is wrong with it rather than silently planning without it.
    run(
        &below,
        &[
            "recommend",
            "--arch",
            "h100",
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
        ],
    )
    .fails_with("cannot be used as a directory");
}

/// Runs carver as an unprivileged user where the tests run as root (root may write anywhere);
/// `None` when that is not possible here.
#[cfg(unix)]
fn unprivileged(cache: &Path, args: &[&str]) -> Option<Run> {
    let root = is_root();
    let mut cmd = if root {
        if std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: running as root without setpriv");
            return None;
        }
        let mut cmd = assert_cmd::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(carver_bin());
        cmd
    } else {
        assert_cmd::Command::new(carver_bin())
    };
    cmd.env_remove("CARVER_HARDWARE_DB")
        .env_remove("CARVER_CACHE_DIR")
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .timeout(Duration::from_secs(60));
    let output = cmd.output().unwrap();
    let run = Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(!run.out().contains("panicked"), "{}", run.out());
    Some(run)
}

#[cfg(unix)]
fn is_root() -> bool {
    // The owner of a file this process creates is its effective user.
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid() == 0
}

#[cfg(unix)]
#[test]
fn an_unwritable_cache_directory_or_database_is_named_with_the_reason_once() {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    // Reachable by the unprivileged user.
    fs::set_permissions(base.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let locked = base.path().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o555)).unwrap();
    let Some(result) = unprivileged(&locked, &["cache", "list"]) else {
        return;
    };
    assert_ne!(result.code, 0);
    let expected = format!(
        "the cache directory {} is not writable: Permission denied (os error 13)",
        locked.display()
    );
    assert!(result.stderr.contains(&expected), "{}", result.stderr);
    assert_eq!(
        result.stderr.matches("Permission denied").count(),
        1,
        "{}",
        result.stderr
    );
    assert!(
        !result.stderr.contains("unable to open database file"),
        "{}",
        result.stderr
    );
    let inner = locked.join("sub");
    let result = unprivileged(&inner, &["cache", "import", "/dev/null"]).unwrap();
    assert!(
        result.stderr.contains("cannot create the cache directory"),
        "{}",
        result.stderr
    );
    assert!(
        result.stderr.contains("Permission denied"),
        "{}",
        result.stderr
    );
    // recommend needs no database and still runs.
    let result = unprivileged(
        &locked,
        &[
            "recommend",
            "--arch",
            "h100",
            "--m",
            "64",
            "--n",
            "64",
            "--k",
            "64",
        ],
    )
    .unwrap();
    assert_eq!(result.code, 0, "{}", result.out());

    // A writable directory holding a database this user cannot write.
    let shared = base.path().join("shared");
    fs::create_dir(&shared).unwrap();
    database_of(&shared, 2);
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(shared.join(DB_FILE_NAME), fs::Permissions::from_mode(0o444)).unwrap();
    let result = unprivileged(&shared, &["cache", "list"]).unwrap();
    assert_ne!(result.code, 0);
    assert!(
        result.stderr.contains("the tuning database"),
        "{}",
        result.stderr
    );
    assert!(
        result.stderr.contains("is not writable: Permission denied"),
        "{}",
        result.stderr
    );
    assert_eq!(rows(&shared), 2);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
}
