//! `carver cache list|show|export|import|clear` on the real binary, no GPU needed. Every run
//! gets its own cache directory and no inherited CARVER_* variables.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use carver_tunedb::test_support::sample_record;
use carver_tunedb::{DB_FILE_NAME, TuneRecord};
use predicates::prelude::*;
use serde_json::{Value, json};
use tempfile::TempDir;

/// `carver --cache-dir <cache>` with the environment's CARVER_* settings removed.
fn carver(cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_carver"));
    cmd.env_remove("CARVER_HARDWARE_DB")
        .env_remove("CARVER_CACHE_DIR")
        .arg("--cache-dir")
        .arg(cache);
    cmd
}

fn stdout_of(cmd: &mut Command) -> String {
    let output = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(output).expect("stdout is UTF-8")
}

fn json_of(cmd: &mut Command) -> Value {
    serde_json::from_str(&stdout_of(cmd)).expect("stdout is JSON")
}

/// A configuration of carver's cuda-sm90 family.
fn sm90_config(block_n: u32, stages: u32) -> Value {
    json!({
        "block_m": 128, "block_n": block_n, "block_k": 64, "stages": stages, "consumers": 2,
        "group_m": 8, "cluster_m": 1, "persistent": false,
    })
}

/// Three results: two triton ones on an H100 and a cuda-sm90 one on an H200.
fn fixture_records() -> Vec<TuneRecord> {
    let mut h200 = sample_record(3968); // M = 4096
    h200.key.device.name = "NVIDIA H200".into();
    h200.key.device.uuid = "GPU-h200-0000".into();
    h200.key.target = "cuda-sm90".into();
    for (c, (block_n, stages)) in h200
        .candidates
        .iter_mut()
        .zip([(128, 4), (256, 3), (256, 5)])
    {
        c.config = sm90_config(block_n, stages);
    }
    h200.winner = sm90_config(256, 3);
    h200.key.problem.batch = 4;
    h200.key.problem.dtype_a = "bf16".into();
    h200.key.problem.dtype_b = "bf16".into();
    h200.key.problem.dtype_c = "bf16".into();
    h200.cublas_time_s = None;
    vec![sample_record(0), sample_record(1920), h200]
}

fn export_file(dir: &Path, name: &str, records: &[TuneRecord]) -> PathBuf {
    let mut bytes = Vec::new();
    carver_tunedb::write_export(records, &mut bytes).unwrap();
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path
}

/// A cache directory holding the fixture, imported through the CLI.
fn populated_cache() -> (TempDir, TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = export_file(files.path(), "fixture.jsonl", &fixture_records());
    carver(cache.path())
        .args(["cache", "import"])
        .arg(&file)
        .assert()
        .success();
    (cache, files)
}

fn redact(text: &str, dir: &Path) -> String {
    text.replace(&dir.display().to_string(), "[CACHE]")
}

#[test]
fn an_empty_cache_lists_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(cache.path()).args(["cache", "list"]));
    assert_eq!(
        redact(&out, cache.path()),
        "no stored tuning results\ndatabase: [CACHE]/tuning.sqlite3\n"
    );
    let json = json_of(carver(cache.path()).args(["cache", "list", "--format", "json"]));
    assert_eq!(json["schema_version"], json!(carver_schema::SCHEMA_VERSION));
    assert_eq!(json["results"], json!([]));
}

#[test]
fn list_and_show_after_an_import() {
    let (cache, _files) = populated_cache();
    let list = stdout_of(carver(cache.path()).args(["cache", "list"]));
    insta::assert_snapshot!("cache_list_table", redact(&list, cache.path()));

    let json = json_of(carver(cache.path()).args(["cache", "list", "--format", "json"]));
    assert_eq!(
        json["database"],
        json!(cache.path().join(DB_FILE_NAME).display().to_string())
    );
    let mut json = json;
    json["database"] = json!("[CACHE]");
    insta::assert_snapshot!(
        "cache_list_json",
        serde_json::to_string_pretty(&json).unwrap()
    );

    let show = stdout_of(carver(cache.path()).args(["cache", "show", "1"]));
    insta::assert_snapshot!("cache_show_table", show);

    let json = json_of(carver(cache.path()).args(["cache", "show", "3", "--format", "json"]));
    assert_eq!(json["schema_version"], json!(carver_schema::SCHEMA_VERSION));
    let shown: TuneRecord = serde_json::from_value({
        let mut r = json["results"][0].clone();
        r.as_object_mut().unwrap().remove("id");
        r
    })
    .unwrap();
    assert_eq!(
        shown,
        fixture_records()[2],
        "show returns the record exactly"
    );
}

#[test]
fn filters_narrow_list_and_show() {
    let (cache, _files) = populated_cache();
    let ids = |args: &[&str]| -> Vec<i64> {
        let json = json_of(
            carver(cache.path())
                .args(["cache", "list", "--format", "json"])
                .args(args),
        );
        json["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(ids(&[]), [1, 2, 3]);
    assert_eq!(ids(&["--device", "h200"]), [3]);
    assert_eq!(ids(&["--device", "GPU-h200-0000"]), [3]);
    assert_eq!(ids(&["--target", "triton"]), [1, 2]);
    assert_eq!(ids(&["--shape", "2048x4096x4096"]), [2]);
    assert_eq!(
        ids(&["--target", "triton", "--device", "h200"]),
        Vec::<i64>::new()
    );

    // `show` by shape finds both 4096-row results unless a filter narrows it.
    let json =
        json_of(carver(cache.path()).args(["cache", "show", "4096x4096x4096", "--format", "json"]));
    assert_eq!(json["results"].as_array().unwrap().len(), 1);
    let json = json_of(carver(cache.path()).args([
        "cache",
        "show",
        "128x4096x4096",
        "--target",
        "triton",
        "--format",
        "json",
    ]));
    assert_eq!(json["results"][0]["id"], json!(1));
}

#[test]
fn show_explains_a_bad_selector_and_a_miss() {
    let (cache, _files) = populated_cache();
    carver(cache.path())
        .args(["cache", "show", "h100"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "`h100` is neither a result id (the ID column of `carver cache list`) nor a shape MxNxK",
        ));
    carver(cache.path())
        .args(["cache", "show", "99"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "no stored tuning result matches `99`",
        ));
    carver(cache.path())
        .args(["cache", "list", "--shape", "4096x4096"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "expected MxNxK with positive integers",
        ));
}

/// The stored data: the database file and its write-ahead log. (A read-only SQLite connection
/// may leave an empty `-wal` and a `-shm` lock index behind; neither holds data.)
fn stored_bytes(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let wal = fs::read(dir.join(format!("{DB_FILE_NAME}-wal"))).unwrap_or_default();
    (fs::read(dir.join(DB_FILE_NAME)).unwrap(), wal)
}

#[test]
fn export_changes_nothing_and_round_trips_through_another_cache() {
    let (cache, files) = populated_cache();
    let before = stored_bytes(cache.path());
    let to_stdout = stdout_of(carver(cache.path()).args(["cache", "export"]));
    let file = files.path().join("shared.jsonl");
    carver(cache.path())
        .args(["cache", "export", "--output"])
        .arg(&file)
        .assert()
        .success()
        .stderr(predicate::str::contains("exported 3 tuning results to"));
    assert_eq!(
        stored_bytes(cache.path()),
        before,
        "export must not change the database"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), to_stdout);
    let header: Value = serde_json::from_str(to_stdout.lines().next().unwrap()).unwrap();
    assert_eq!(header["format"], json!("carver-tuning-results"));
    assert_eq!(header["format_version"], json!(1));
    assert_eq!(header["records"], json!(3));

    let other = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(other.path()).args(["cache", "import"]).arg(&file));
    assert!(
        out.contains("3 new, 0 replaced a slower result, 0 kept"),
        "{out}"
    );
    assert_eq!(
        stdout_of(carver(other.path()).args(["cache", "export"])),
        to_stdout
    );

    // A filtered export holds only the selection.
    let triton = stdout_of(carver(cache.path()).args(["cache", "export", "--target", "triton"]));
    assert_eq!(triton.lines().count(), 3, "header and two records");
}

#[test]
fn export_of_a_cache_without_a_database_creates_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(cache.path()).args(["cache", "export"]));
    assert_eq!(out.lines().count(), 1);
    assert_eq!(fs::read_dir(cache.path()).unwrap().count(), 0);
}

#[test]
fn import_with_bad_rows_keeps_the_good_ones_and_fails() {
    let cache = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = export_file(files.path(), "mixed.jsonl", &fixture_records()[..2]);
    let mut text = fs::read_to_string(&file).unwrap();
    text.push_str("{\"key\": \"nope\"}\n");
    let mut broken = sample_record(5);
    broken.candidates[1].measured_time_s = Some(-3.0);
    text.push_str(&serde_json::to_string(&broken).unwrap());
    text.push('\n');
    fs::write(&file, text).unwrap();

    let assert = carver(cache.path())
        .args(["cache", "import"])
        .arg(&file)
        .assert()
        .failure()
        .stderr(predicate::str::contains("2 of 4 rows of"));
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    assert!(out.contains("2 new"), "{out}");
    assert!(
        out.contains("bad row, line 4: not a tuning record: invalid type: string \"nope\""),
        "{out}"
    );
    assert!(
        out.contains("bad row, line 5: candidates[1].measured_time_s must be a number of seconds between 1e-9 (1 ns) and 3600 (1 hour) (got -3.0)"),
        "{out}"
    );
    assert!(
        out.contains("the header announces 2 records but the file holds 4"),
        "{out}"
    );
    let json = json_of(carver(cache.path()).args(["cache", "list", "--format", "json"]));
    assert_eq!(json["results"].as_array().unwrap().len(), 2);

    // The same report as JSON, still with a failing exit status.
    let other = tempfile::tempdir().unwrap();
    let assert = carver(other.path())
        .args(["cache", "import", "--format", "json"])
        .arg(&file)
        .assert()
        .failure();
    let report: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(
        report["schema_version"],
        json!(carver_schema::SCHEMA_VERSION)
    );
    assert_eq!(report["inserted"], json!(2));
    let lines: Vec<_> = report["bad_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["line"].clone())
        .collect();
    assert_eq!(lines, [json!(4), json!(5)]);
}

#[test]
fn import_reports_conflicts_and_keeps_the_faster_winner() {
    let (cache, files) = populated_cache();
    let mut faster = sample_record(0);
    let config = carver_tunedb::test_support::triton_config(64, 64, 4, 2);
    faster.winner = config.clone();
    faster.candidates[0].config = config;
    faster.candidates[0].measured_time_s = Some(50e-6);
    let mut slower = sample_record(1920);
    slower.winner = slower.candidates[0].config.clone(); // measured 1.2x the stored winner
    let file = export_file(files.path(), "rival.jsonl", &[faster.clone(), slower]);

    let out = stdout_of(carver(cache.path()).args(["cache", "import"]).arg(&file));
    assert!(
        out.contains("0 new, 1 replaced a slower result, 1 kept"),
        "{out}"
    );
    assert!(out.contains("conflict, line 2:"), "{out}");
    assert!(out.contains("took the incoming winner (faster)"), "{out}");
    assert!(out.contains("conflict, line 3:"), "{out}");
    assert!(
        out.contains("kept the stored winner (as fast or faster)"),
        "{out}"
    );

    let json = json_of(carver(cache.path()).args(["cache", "show", "1", "--format", "json"]));
    assert_eq!(json["results"][0]["winner"], faster.winner);
}

#[test]
fn import_reads_standard_input_and_refuses_a_file_that_is_not_an_export() {
    let cache = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = export_file(files.path(), "in.jsonl", &fixture_records());
    carver(cache.path())
        .args(["cache", "import", "-"])
        .write_stdin(fs::read(&file).unwrap())
        .assert()
        .success()
        .stdout(predicate::str::contains("3 new"));

    let notes = files.path().join("notes.txt");
    fs::write(&notes, "hello\n").unwrap();
    carver(cache.path())
        .args(["cache", "import"])
        .arg(&notes)
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "not a carver tuning export: line 1 should be a header",
        ));
    carver(cache.path())
        .args(["cache", "import"])
        .arg(files.path().join("missing.jsonl"))
        .assert()
        .failure()
        .stderr(predicate::str::contains("cannot open"));
}

#[test]
fn clear_refuses_without_yes_and_deletes_only_the_selection() {
    let (cache, _files) = populated_cache();
    carver(cache.path())
        .args(["cache", "clear"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "refusing to delete 3 stored tuning results without --yes",
        ));
    carver(cache.path())
        .args(["cache", "clear", "--target", "cuda-sm90", "--yes"])
        .assert()
        .success()
        .stdout("deleted 1 tuning results matching target \"cuda-sm90\"\n");
    let json = json_of(carver(cache.path()).args(["cache", "clear", "--yes", "--format", "json"]));
    assert_eq!(
        json,
        json!({"schema_version": carver_schema::SCHEMA_VERSION, "deleted": 2})
    );
    let json = json_of(carver(cache.path()).args(["cache", "list", "--format", "json"]));
    assert_eq!(json["results"], json!([]));
}

#[test]
fn a_damaged_database_is_moved_aside_with_a_warning() {
    let cache = tempfile::tempdir().unwrap();
    let db = cache.path().join(DB_FILE_NAME);
    fs::write(&db, "definitely not SQLite ".repeat(100)).unwrap();
    carver(cache.path())
        .args(["cache", "list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no stored tuning results"))
        .stderr(
            predicate::str::contains("warning: the tuning database").and(predicate::str::contains(
                "is not an SQLite database; it was moved to",
            )),
        );
    let moved: Vec<_> = fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tuning.sqlite3.moved-aside-"))
        .collect();
    assert_eq!(moved.len(), 1);
    assert!(
        fs::read_to_string(cache.path().join(&moved[0]))
            .unwrap()
            .starts_with("definitely not SQLite")
    );
}

#[test]
fn a_database_from_a_newer_carver_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    let db = cache.path().join(DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "application_id", carver_tunedb::APPLICATION_ID)
            .unwrap();
        conn.pragma_update(None, "user_version", carver_tunedb::SCHEMA_VERSION + 1)
            .unwrap();
    }
    let before = fs::read(&db).unwrap();
    for command in [["cache", "list"], ["cache", "export"]] {
        carver(cache.path())
            .args(command)
            .assert()
            .failure()
            .stderr(predicate::str::contains(
                "was written by a newer carver (schema version 2",
            ));
    }
    assert_eq!(fs::read(&db).unwrap(), before);
}

#[test]
fn the_cache_directory_comes_from_the_environment_and_never_the_working_directory() {
    let work = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let file = export_file(files.path(), "in.jsonl", &fixture_records());
    Command::new(env!("CARGO_BIN_EXE_carver"))
        .env_remove("CARVER_HARDWARE_DB")
        .env("CARVER_CACHE_DIR", cache.path())
        .current_dir(work.path())
        .args(["cache", "import"])
        .arg(&file)
        .assert()
        .success();
    assert!(cache.path().join(DB_FILE_NAME).is_file());
    assert_eq!(fs::read_dir(work.path()).unwrap().count(), 0);
}
