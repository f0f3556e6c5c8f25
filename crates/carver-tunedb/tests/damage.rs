//! Damage is contained: a bad row is skipped and named, never the reason a whole query or
//! export fails; a damaged file's readable rows are salvaged; imports read with bounded memory.

use std::io::Read;
use std::path::Path;

use carver_tunedb::test_support::{sample_key, sample_record};
use carver_tunedb::{
    DB_FILE_NAME, Filter, MAX_LINE_BYTES, StoreOutcome, TuneDb, TuneDbError, TuneRecord, Warning,
    write_export,
};

/// A closed database of `n` sample records (the WAL checkpointed into the file).
fn populated(dir: &Path, n: u64) -> TuneDb {
    let (db, _) = TuneDb::open(dir).unwrap();
    for i in 0..n {
        db.store(&sample_record(i)).unwrap();
    }
    db
}

/// Runs SQL on the database file behind carver's back, as a damaged disk or an editor would.
fn tamper(dir: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(dir.join(DB_FILE_NAME)).unwrap();
    conn.execute_batch(sql).unwrap();
}

/// Overwrites bytes of the closed database file.
fn patch(dir: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(DB_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    edit(&mut bytes);
    std::fs::write(path, bytes).unwrap();
}

fn skipped_ids(db: &TuneDb) -> Vec<i64> {
    db.query(&Filter::default())
        .unwrap()
        .skipped
        .iter()
        .map(|s| s.id)
        .collect()
}

#[test]
fn a_flipped_byte_in_a_row_skips_that_row_only() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path(), 1000));
    // A brace of one stored winner becomes a bracket: still a valid SQLite file.
    patch(dir.path(), |b| {
        let at = b
            .windows(9)
            .position(|w| w == b"{\"kwargs\"")
            .map(|i| i + b.len() / 2)
            .unwrap();
        let at = at
            + b[at..]
                .windows(9)
                .position(|w| w == b"{\"kwargs\"")
                .unwrap();
        b[at] = b'[';
    });
    let (db, warnings) = TuneDb::open(dir.path()).unwrap();
    assert!(warnings.is_empty(), "quick_check passes: {warnings:?}");
    let selection = db.query(&Filter::default()).unwrap();
    assert_eq!(selection.records.len(), 999);
    let [bad] = selection.skipped.as_slice() else {
        panic!("{:?}", selection.skipped);
    };
    assert!(bad.reason.contains("is not valid"), "{}", bad.reason);

    // The 999 good rows export; the bad one is named.
    let mut out = Vec::new();
    let exported = db.export(&Filter::default(), &mut out).unwrap();
    assert_eq!(exported.written, 999);
    assert_eq!(exported.skipped, selection.skipped);
    let other = tempfile::tempdir().unwrap();
    let (copy, _) = TuneDb::open(other.path()).unwrap();
    assert_eq!(copy.import(&mut out.as_slice()).unwrap().inserted, 999);

    // It can be removed by id, and nothing else goes.
    assert!(db.remove(bad.id).unwrap());
    assert!(!db.remove(bad.id).unwrap());
    assert_eq!(db.count(&Filter::default()).unwrap(), 999);
    assert!(skipped_ids(&db).is_empty());
}

#[test]
fn rows_edited_into_nonsense_are_skipped_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path(), 8));
    tamper(
        dir.path(),
        "UPDATE tuning_results SET m = -1 WHERE id = 2;
         UPDATE tuning_results SET dtype_a = 'banana' WHERE id = 3;
         UPDATE tuning_results SET device_name = 'H100' || char(27) || '[2J' WHERE id = 4;
         UPDATE tuning_results SET winner = '{\"BLOCK\": 1}' WHERE id = 5;
         UPDATE tuning_results SET cublas_time_s = 1e-12 WHERE id = 6;
         UPDATE tuning_results SET device_name = CAST(X'FF48313030' AS TEXT) WHERE id = 7;",
    );
    let (db, _) = TuneDb::open(dir.path()).unwrap();
    let selection = db.query(&Filter::default()).unwrap();
    let reasons: Vec<(i64, &str)> = selection
        .skipped
        .iter()
        .map(|s| (s.id, s.reason.as_str()))
        .collect();
    assert_eq!(selection.records.len(), 2, "{reasons:?}");
    let expect = [
        (2, "m is negative"),
        (3, "key.problem.dtype_a"),
        (4, "control character"),
        (5, "the winner is not"),
        (6, "cublas_time_s"),
        (7, "a column cannot be read"),
    ];
    assert_eq!(reasons.len(), expect.len(), "{reasons:?}");
    for ((id, reason), (want_id, want)) in reasons.iter().zip(expect) {
        assert_eq!(*id, want_id);
        assert!(reason.contains(want), "row {id}: {reason}");
    }
    // A lookup of a damaged key is a miss, and a store for it replaces the damaged row.
    assert!(db.lookup(&sample_key(4)).unwrap().is_none());
    assert_eq!(db.store(&sample_record(4)).unwrap(), StoreOutcome::Inserted);
    assert_eq!(
        *db.lookup(&sample_key(4)).unwrap().unwrap(),
        sample_record(4)
    );
    assert_eq!(
        db.count(&Filter::default()).unwrap(),
        8,
        "replaced, not added"
    );
}

#[test]
fn a_stored_result_the_check_refuses_never_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = TuneDb::open(dir.path()).unwrap();
    let mut fake = sample_record(0);
    for c in &mut fake.candidates {
        c.measured_time_s = c.measured_time_s.map(|_| 2e-9);
    }
    fake.cublas_time_s = None;
    db.store(&fake).unwrap();
    let honest = sample_record(0);
    // Plain keep-the-faster keeps the fake...
    assert_eq!(db.store(&honest).unwrap(), StoreOutcome::KeptExisting);
    // ...unless the caller's checks refuse it.
    let mut trusted = |r: &TuneRecord| r.winner_time_s() > Some(1e-6);
    let outcome = db
        .store_checked(&honest, Default::default(), &mut trusted)
        .unwrap();
    assert_eq!(outcome, StoreOutcome::Replaced);
    assert_eq!(*db.lookup(&sample_key(0)).unwrap().unwrap(), honest);

    // The same through an import.
    db.store_with(&fake, carver_tunedb::WritePolicy::Replace)
        .unwrap();
    let mut file = Vec::new();
    write_export(std::slice::from_ref(&honest), &mut file).unwrap();
    let report = db
        .import_checked(&mut file.as_slice(), &mut |r| {
            if r.winner_time_s() > Some(1e-6) {
                Ok(vec![])
            } else {
                Err("too fast".into())
            }
        })
        .unwrap();
    assert_eq!(report.replaced, 1);
    assert_eq!(*db.lookup(&sample_key(0)).unwrap().unwrap(), honest);
}

#[test]
fn a_damaged_file_is_salvaged_row_by_row() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path(), 1000));
    let pristine = std::fs::read(dir.path().join(DB_FILE_NAME)).unwrap();
    patch(dir.path(), |b| {
        let middle = b.len() / 2 / 4096 * 4096;
        b[middle..middle + 3 * 4096].fill(0xA5);
    });
    let (db, warnings) = TuneDb::open(dir.path()).unwrap();
    let (moved_to, report) = match warnings.as_slice() {
        [
            Warning::MovedAside { moved_to, .. },
            Warning::Salvaged { from, report },
        ] => {
            assert_eq!(from, moved_to);
            (moved_to.clone(), report.clone())
        }
        other => panic!("{other:?}"),
    };
    // Three pages of about five rows each are lost, nothing else.
    assert!(report.kept() >= 980, "{report:?}");
    assert_eq!(report.rows_found, report.kept() + report.bad_row_count());
    assert!(warnings[1].to_string().contains("recovered"));
    let stored = db.query(&Filter::default()).unwrap();
    assert_eq!(stored.records.len() as u64, report.kept());
    for s in &stored.records {
        let n = s.record.key.problem.m - 128;
        assert_eq!(s.record, sample_record(n));
    }
    // Salvaging the moved file again finds the same rows, all already there.
    let again = db.salvage(&moved_to, &mut |_| Ok(vec![])).unwrap();
    assert_eq!(again.kept_existing, report.kept());
    assert_eq!(again.inserted, 0);

    // A whole, healthy file gives back every row.
    let healthy = tempfile::tempdir().unwrap();
    let file = healthy.path().join("copy.sqlite3");
    std::fs::write(&file, &pristine).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let (target, _) = TuneDb::open(fresh.path()).unwrap();
    let all = target.salvage(&file, &mut |_| Ok(vec![])).unwrap();
    assert_eq!((all.rows_found, all.inserted), (1000, 1000));
    assert_eq!(std::fs::read(&file).unwrap(), pristine, "never changed");
}

#[test]
fn salvage_applies_the_log_and_leaves_deleted_rows_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 200);
    // The first 100 go: their pages return to the free list. Every tenth of the others too:
    // their cells leave their pages.
    db.clear(&Filter::default()).ok();
    for i in 0..200 {
        if i >= 100 && i % 10 != 0 {
            db.store(&sample_record(i)).unwrap();
        }
    }
    // Copied while open: the newest pages are in the write-ahead log only.
    let copy = tempfile::tempdir().unwrap();
    let file = copy.path().join("open.sqlite3");
    std::fs::copy(dir.path().join(DB_FILE_NAME), &file).unwrap();
    let wal = dir.path().join(format!("{DB_FILE_NAME}-wal"));
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    std::fs::copy(&wal, copy.path().join("open.sqlite3-wal")).unwrap();

    let fresh = tempfile::tempdir().unwrap();
    let (target, _) = TuneDb::open(fresh.path()).unwrap();
    let report = target.salvage(&file, &mut |_| Ok(vec![])).unwrap();
    assert_eq!(report.inserted, 90, "{report:?}");
    assert!(report.bad_rows.is_empty());
    let stored = target.query(&Filter::default()).unwrap().records;
    assert!(
        stored
            .iter()
            .all(|s| s.record.key.problem.m >= 228 && (s.record.key.problem.m - 128) % 10 != 0)
    );
}

#[test]
fn salvage_refuses_what_it_cannot_read_and_reports_refused_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 3);
    let own = dir.path().join(DB_FILE_NAME);
    for (path, expected) in [
        (own.as_path(), "the database in use"),
        (dir.path(), "a directory"),
        (Path::new("/dev/zero"), "a device"),
        (Path::new("/nonexistent/x"), "No such file"),
    ] {
        match db.salvage(path, &mut |_| Ok(vec![])) {
            Err(TuneDbError::Recover { reason, .. }) => {
                assert!(reason.contains(expected), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
    // A text file holds no rows.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "hello ".repeat(2000)).unwrap();
    let report = db.salvage(&notes, &mut |_| Ok(vec![])).unwrap();
    assert_eq!(report.rows_found, 0);

    // Rows the caller refuses are reported by id, the others kept.
    let other = tempfile::tempdir().unwrap();
    drop(populated(other.path(), 5));
    let report = db
        .salvage(&other.path().join(DB_FILE_NAME), &mut |r| {
            if r.key.problem.m == 130 {
                Err("not believable".into())
            } else {
                Ok(vec!["checked".into()])
            }
        })
        .unwrap();
    assert_eq!(report.rows_found, 5);
    assert_eq!(report.kept(), 4);
    assert_eq!(report.bad_rows.len(), 1);
    assert_eq!(report.bad_rows[0].id, 3);
    assert_eq!(report.notes, ["checked"]);

    // A newer carver's file is refused.
    let newer = tempfile::tempdir().unwrap();
    let file = newer.path().join("newer.sqlite3");
    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.pragma_update(None, "application_id", carver_tunedb::APPLICATION_ID)
        .unwrap();
    conn.pragma_update(None, "user_version", carver_tunedb::SCHEMA_VERSION + 1)
        .unwrap();
    drop(conn);
    assert!(matches!(
        db.salvage(&file, &mut |_| Ok(vec![])),
        Err(TuneDbError::NewerSchema { .. })
    ));
}

/// A reader that never ends: `byte` forever.
struct Endless(u8);

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(self.0);
        Ok(buf.len())
    }
}

#[test]
fn imports_read_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = TuneDb::open(dir.path()).unwrap();

    // An endless first line is no header, said at once.
    let mut endless = std::io::BufReader::new(Endless(0));
    match db.import(&mut endless) {
        Err(TuneDbError::ImportHeader(message)) => {
            assert!(message.contains("line 1 is longer than"), "{message}");
            assert!(message.len() < 2000, "quoted briefly");
        }
        other => panic!("{other:?}"),
    }

    // A record line over the limit is a bad row quoted by its start; the next line still counts.
    let mut file = Vec::new();
    write_export(&[sample_record(0), sample_record(1)], &mut file).unwrap();
    let text = String::from_utf8(file).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let mut input = format!("{header}\n{{\"key\": \"");
    input.push_str(&"A".repeat(MAX_LINE_BYTES + 10));
    input.push_str("\"}\n");
    for line in lines {
        input.push_str(line);
        input.push('\n');
    }
    let report = db.import(&mut input.as_bytes()).unwrap();
    assert_eq!(report.inserted, 2);
    let [bad] = report.bad_rows.as_slice() else {
        panic!("{report:?}");
    };
    assert_eq!(bad.line, 2);
    assert!(bad.reason.contains("bytes long; at most"), "{}", bad.reason);
    assert!(bad.reason.len() < 600, "{}", bad.reason.len());

    // A report lists a thousand bad rows and counts the rest.
    let mut many = format!("{header}\n");
    for _ in 0..1500 {
        many.push_str("{}\n");
    }
    let report = db.import(&mut many.as_bytes()).unwrap();
    assert_eq!(report.bad_rows.len(), 1000);
    assert_eq!(report.bad_rows_not_listed, 500);
    assert_eq!(report.bad_row_count(), 1500);
    assert!(!report.is_clean());
}

#[test]
fn an_import_refuses_unknown_versions_and_reports_unknown_fields() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = TuneDb::open(dir.path()).unwrap();
    let record = serde_json::to_value(sample_record(0)).unwrap();
    for (header, expected) in [
        (
            r#"{"format":"carver-tuning-results","format_version":0,"records":1}"#,
            "format version 0 is not one this carver reads (accepted: 1)",
        ),
        (
            r#"{"format":"carver-tuning-results","format_version":"1","records":1}"#,
            "format version \"1\" is not one",
        ),
        (
            r#"{"format":"carver-tuning-results","format_version":1,"schema_version":99,"records":1}"#,
            "schema_version 99 is not one this carver reads (accepted: 1)",
        ),
        (
            r#"{"format":"carver-tuning-results","format_version":1}"#,
            "no records count",
        ),
        (r#"[1,2]"#, "line 1 should be a header"),
    ] {
        let input = format!("{header}\n{record}\n");
        match db.import(&mut input.as_bytes()) {
            Err(TuneDbError::ImportHeader(message)) => {
                assert!(message.contains(expected), "{message}")
            }
            other => panic!("{header}: {other:?}"),
        }
    }
    assert_eq!(db.count(&Filter::default()).unwrap(), 0);

    let mut extra = record.clone();
    extra["comment"] = serde_json::json!("hi");
    extra["key"]["problem"]["stride"] = serde_json::json!(7);
    extra["candidates"][0]["registers"] = serde_json::json!(96);
    let mut newer_row = serde_json::to_value(sample_record(1)).unwrap();
    newer_row["schema_version"] = serde_json::json!(99);
    let mut known_row = serde_json::to_value(sample_record(2)).unwrap();
    known_row["schema_version"] = serde_json::json!(1);
    let input = format!(
        "{{\"format\":\"carver-tuning-results\",\"format_version\":1,\"records\":3,\"note\":1}}\n\
         {extra}\n{newer_row}\n{known_row}\n"
    );
    let report = db.import(&mut input.as_bytes()).unwrap();
    assert_eq!(report.inserted, 2);
    let warnings: Vec<(u64, &str)> = report
        .warnings
        .iter()
        .map(|w| (w.line, w.message.as_str()))
        .collect();
    assert_eq!(
        warnings,
        [
            (
                1,
                "the header has the unknown field \"note\"; it was ignored"
            ),
            (
                2,
                "the record has the unknown field \"comment\"; it was ignored"
            ),
            (
                2,
                "key.problem has the unknown field \"stride\"; it was ignored"
            ),
            (
                2,
                "candidates[0] has the unknown field \"registers\"; it was ignored"
            ),
        ]
    );
    assert_eq!(report.bad_rows.len(), 1);
    assert!(report.bad_rows[0].reason.contains("schema_version"));
    // What was stored has no trace of the unknown fields.
    assert_eq!(
        *db.lookup(&sample_key(0)).unwrap().unwrap(),
        sample_record(0)
    );
}

#[test]
fn empty_filters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 3);
    for filter in [
        Filter {
            device: Some(String::new()),
            ..Filter::default()
        },
        Filter {
            device: Some(" \t ".into()),
            ..Filter::default()
        },
        Filter {
            target: Some(String::new()),
            ..Filter::default()
        },
    ] {
        for result in [
            db.clear(&filter).map(|_| ()),
            db.count(&filter).map(|_| ()),
            db.query(&filter).map(|_| ()),
            db.ids(&filter).map(|_| ()),
        ] {
            match result {
                Err(e @ TuneDbError::EmptyFilter { .. }) => {
                    assert!(e.to_string().contains("filter is empty"), "{e}")
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(db.count(&Filter::default()).unwrap(), 3);
}
