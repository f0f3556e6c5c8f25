//! The reliability promises, each shown: several writer processes, a writer killed with SIGKILL,
//! a truncated file, a file that is not a database, another application's database, a
//! database from a newer carver, and an import with bad rows.
//!
//! Writer processes are this test binary run again on its ignored `writer_process` test, told
//! what to write through environment variables.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use carver_tunedb::test_support::{sample_key, sample_record};
use carver_tunedb::{
    APPLICATION_ID, DB_FILE_NAME, Filter, SCHEMA_VERSION, TuneDb, TuneDbError, Warning,
};

const WRITER_DIR: &str = "CARVER_TUNEDB_TEST_WRITER_DIR";
const WRITER_FIRST: &str = "CARVER_TUNEDB_TEST_WRITER_FIRST";
const WRITER_COUNT: &str = "CARVER_TUNEDB_TEST_WRITER_COUNT";
const WRITER_CANDIDATES: &str = "CARVER_TUNEDB_TEST_WRITER_CANDIDATES";

/// The writer process: opens the database in `$WRITER_DIR`, stores `sample_record(i)` for
/// `i` in `FIRST..FIRST + COUNT` one transaction each, and prints `committed i` after each
/// commit. Does nothing when run without those variables (as by `cargo test -- --ignored`).
#[test]
#[ignore = "run by the other tests as a separate process"]
fn writer_process() {
    let Some(dir) = std::env::var_os(WRITER_DIR) else {
        return;
    };
    let number = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let (first, count) = (number(WRITER_FIRST), number(WRITER_COUNT));
    let padding = std::env::var(WRITER_CANDIDATES).map_or(0, |v| v.parse().unwrap());
    let (db, warnings) = TuneDb::open(Path::new(&dir)).unwrap();
    for warning in warnings {
        println!("open warning: {warning}");
    }
    for i in first..first + count {
        let mut record = sample_record(i);
        // Extra failed candidates make each transaction span several pages, so that a kill
        // is likely to land in the middle of one.
        let failed = record.candidates[2].clone();
        record.candidates.extend((0..padding).map(|rank| {
            let mut c = failed.clone();
            c.model_rank = 4 + rank;
            c
        }));
        db.store(&record).unwrap();
        println!("committed {i}");
    }
}

fn spawn_writer(dir: &Path, first: u64, count: u64, candidates: u32) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "writer_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_DIR, dir)
        .env(WRITER_FIRST, first.to_string())
        .env(WRITER_COUNT, count.to_string())
        .env(WRITER_CANDIDATES, candidates.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The record number of a `committed i` line. libtest prints `test writer_process ... ` without
/// a newline before the test's own output, so the marker may not start the line.
fn committed(line: &str) -> Option<u64> {
    let (_, number) = line.split_once("committed ")?;
    number.trim().parse().ok()
}

/// Opens with the warnings it must not have, and checks the whole file with integrity_check.
fn open_clean(dir: &Path) -> TuneDb {
    let (db, warnings) = TuneDb::open(dir).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let conn = rusqlite::Connection::open(dir.join(DB_FILE_NAME)).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    db
}

#[test]
fn eight_writer_processes_lose_nothing() {
    const WRITERS: u64 = 8;
    const EACH: u64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // All start on a directory with no database: creating it is part of the race.
    let writers: Vec<Child> = (0..WRITERS)
        .map(|w| spawn_writer(dir.path(), w * EACH, EACH, 0))
        .collect();
    assert_eq!(
        finish(writers, EACH),
        0,
        "a fresh directory gives no warnings"
    );
    eprintln!(
        "{WRITERS} writers x {EACH} records took {:?}",
        started.elapsed()
    );

    let db = open_clean(dir.path());
    assert_eq!(db.count(&Filter::default()).unwrap(), WRITERS * EACH);
    for i in 0..WRITERS * EACH {
        let found = db.lookup(&sample_key(i)).unwrap();
        assert_eq!(found.as_deref(), Some(&sample_record(i)), "record {i}");
    }
}

/// Waits for writers that each commit `each` records; returns how many open warnings they
/// printed in all.
fn finish(writers: Vec<Child>, each: u64) -> usize {
    let mut warnings = 0;
    for writer in writers {
        let output = writer.wait_with_output().unwrap();
        assert!(output.status.success(), "a writer failed: {output:?}");
        let lines = String::from_utf8(output.stdout).unwrap();
        assert_eq!(lines.lines().filter_map(committed).count() as u64, each);
        warnings += lines.matches("open warning: ").count();
    }
    warnings
}

#[test]
fn writers_that_all_find_a_bad_file_move_it_aside_once() {
    const WRITERS: u64 = 6;
    const EACH: u64 = 100;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(DB_FILE_NAME), "not a database ".repeat(500)).unwrap();
    let writers: Vec<Child> = (0..WRITERS)
        .map(|w| spawn_writer(dir.path(), w * EACH, EACH, 0))
        .collect();
    // Had two writers both moved a file aside, the second would have taken the first one's new
    // database (and its records) with it.
    assert_eq!(
        finish(writers, EACH),
        1,
        "exactly one writer moves the file aside"
    );
    let moved = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy()
                .starts_with("tuning.sqlite3.moved-aside-")
        })
        .count();
    assert_eq!(moved, 1);
    let db = open_clean(dir.path());
    assert_eq!(db.count(&Filter::default()).unwrap(), WRITERS * EACH);
}

#[test]
fn a_writer_killed_mid_write_leaves_every_committed_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut acknowledged = Vec::new();
    // Kill three writers at different points, each with its own range of records.
    for (round, kill_after) in [(0u64, 40usize), (1, 150), (2, 7)] {
        let stored_before = if round == 0 {
            0
        } else {
            open_clean(dir.path()).count(&Filter::default()).unwrap()
        };
        let acknowledged_before = acknowledged.len() as u64;
        let mut writer = spawn_writer(dir.path(), round * 100_000, 100_000, 60);
        let stdout = BufReader::new(writer.stdout.take().unwrap());
        let mut seen = 0;
        // Lines the writer printed before it died are still read after the kill.
        for line in stdout.lines() {
            if let Some(i) = committed(&line.unwrap()) {
                acknowledged.push(i);
                seen += 1;
                if seen == kill_after {
                    writer.kill().unwrap(); // SIGKILL on Unix: no destructor, no rollback
                }
            }
        }
        assert!(
            !writer.wait().unwrap().success(),
            "the writer should have been killed"
        );

        let db = open_clean(dir.path());
        for &i in &acknowledged {
            assert!(
                db.lookup(&sample_key(i)).unwrap().is_some(),
                "committed record {i} lost"
            );
        }
        // Beyond what was acknowledged, at most the one transaction that committed just before
        // the kill, whose line was never printed.
        let stored = db.count(&Filter::default()).unwrap() - stored_before;
        let expected = acknowledged.len() as u64 - acknowledged_before;
        assert!(
            stored == expected || stored == expected + 1,
            "round {round}: {stored} stored, {expected} acknowledged"
        );
    }
}

/// A database holding `n` records, closed (so the WAL is checkpointed into the main file).
fn populated(dir: &Path, n: u64) -> Vec<u8> {
    let (db, _) = TuneDb::open(dir).unwrap();
    for i in 0..n {
        db.store(&sample_record(i)).unwrap();
    }
    drop(db);
    assert!(
        !dir.join(format!("{DB_FILE_NAME}-wal")).exists(),
        "closing should checkpoint"
    );
    std::fs::read(dir.join(DB_FILE_NAME)).unwrap()
}

/// Opens, expects one moved-aside warning whose reason contains `reason` (and, when rows could
/// be read from the moved file, a salvage warning), checks the moved file holds `original` byte
/// for byte and the new database holds exactly the salvaged rows, each one as it was stored, and
/// is usable. Returns how many rows were salvaged.
fn assert_moved_aside(dir: &Path, original: &[u8], reason: &str) -> u64 {
    let (db, warnings) = TuneDb::open(dir).unwrap();
    let (
        Some(Warning::MovedAside {
            path,
            moved_to,
            reason: why,
        }),
        rest,
    ) = (warnings.first(), &warnings[1.min(warnings.len())..])
    else {
        panic!("expected a moved-aside warning, got {warnings:?}");
    };
    assert_eq!(path, &dir.join(DB_FILE_NAME));
    assert!(
        why.contains(reason),
        "reason {why:?} should mention {reason:?}"
    );
    let name = moved_to.file_name().unwrap().to_string_lossy();
    assert!(name.starts_with("tuning.sqlite3.moved-aside-"), "{name}");
    assert_eq!(
        std::fs::read(moved_to).unwrap(),
        original,
        "the bad file is kept as it was"
    );
    assert!(
        warnings[0]
            .to_string()
            .contains(&*moved_to.to_string_lossy())
    );
    let salvaged = match rest {
        [] => 0,
        [Warning::Salvaged { from, report }] => {
            assert_eq!(from, moved_to);
            // A row cut by the damage is reported, never imported.
            assert_eq!(
                report.rows_found,
                report.kept() + report.bad_row_count(),
                "{report:?}"
            );
            report.kept()
        }
        other => panic!("unexpected warnings {other:?}"),
    };

    let stored = db.query(&Filter::default()).unwrap();
    assert!(stored.skipped.is_empty());
    assert_eq!(stored.records.len() as u64, salvaged);
    for s in &stored.records {
        let n = s.record.key.problem.m - 128;
        assert_eq!(
            s.record,
            sample_record(n),
            "a salvaged row is the stored one"
        );
    }
    db.store(&sample_record(1_000_000)).unwrap();
    drop(db);
    let db = open_clean(dir);
    assert_eq!(db.count(&Filter::default()).unwrap(), salvaged + 1);
    salvaged
}

#[test]
fn a_truncated_file_is_moved_aside_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let full = populated(dir.path(), 300);
    let truncated = &full[..full.len() / 2];
    std::fs::write(dir.path().join(DB_FILE_NAME), truncated).unwrap();
    // The rows in the first half of the file survive.
    let salvaged = assert_moved_aside(dir.path(), truncated, "damaged");
    assert!((100..300).contains(&salvaged), "{salvaged}");
}

#[test]
fn a_file_cut_inside_its_header_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let full = populated(dir.path(), 3);
    std::fs::write(dir.path().join(DB_FILE_NAME), &full[..50]).unwrap();
    assert_moved_aside(dir.path(), &full[..50], "");
}

#[test]
fn a_file_that_is_not_a_database_is_moved_aside_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let text = "these are my notes, not a database\n".repeat(200);
    std::fs::write(dir.path().join(DB_FILE_NAME), &text).unwrap();
    assert_moved_aside(dir.path(), text.as_bytes(), "not an SQLite database");
}

#[test]
fn a_damaged_page_is_moved_aside_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = populated(dir.path(), 300);
    // Overwrite the middle of the file (b-tree pages, not the header) with garbage.
    let middle = bytes.len() / 2;
    bytes[middle..middle + 8192].fill(0xA5);
    std::fs::write(dir.path().join(DB_FILE_NAME), &bytes).unwrap();
    // Only the rows of the two overwritten pages are lost.
    let salvaged = assert_moved_aside(dir.path(), &bytes, "damaged");
    assert!((280..300).contains(&salvaged), "{salvaged}");
}

#[test]
fn another_applications_database_is_moved_aside_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE bookmarks (url TEXT, title TEXT);
             INSERT INTO bookmarks VALUES ('https://example.org', 'example');",
        )
        .unwrap();
    }
    let original = std::fs::read(&path).unwrap();
    assert_moved_aside(
        dir.path(),
        &original,
        "another application's tables (bookmarks)",
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "application_id", 0x0F0F_0F0F)
            .unwrap();
    }
    let original = std::fs::read(&path).unwrap();
    assert_moved_aside(dir.path(), &original, "application_id 0x0f0f0f0f");
}

#[test]
fn a_database_from_a_newer_carver_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path(), 5);
    let path = dir.path().join(DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        // A newer carver may have changed the tables in ways this one cannot read.
        conn.execute_batch("ALTER TABLE tuning_results RENAME TO results_v2")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let listing = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let files_before = listing(dir.path());

    for result in [
        TuneDb::open(dir.path()).map(|_| ()),
        TuneDb::open_read_only(dir.path()).map(|_| ()),
    ] {
        match result {
            Err(
                e @ TuneDbError::NewerSchema {
                    found, supported, ..
                },
            ) => {
                assert_eq!((found, supported), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
                let message = e.to_string();
                assert!(message.contains("newer carver"), "{message}");
                assert!(message.contains("left untouched"), "{message}");
            }
            other => panic!("expected NewerSchema, got {:?}", other.err()),
        }
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(
        listing(dir.path()),
        files_before,
        "nothing moved aside or created"
    );
    let conn = rusqlite::Connection::open(&path).unwrap();
    let app: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    assert_eq!(app, APPLICATION_ID);
}

#[test]
fn read_only_open_reports_damage_without_moving_anything() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(DB_FILE_NAME), "not a database at all").unwrap();
    match TuneDb::open_read_only(dir.path()) {
        Err(TuneDbError::Unusable { reason, .. }) => {
            assert!(reason.contains("not an SQLite database"), "{reason}")
        }
        other => panic!("{:?}", other.err()),
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join(DB_FILE_NAME)).unwrap(),
        "not a database at all"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn an_import_with_bad_rows_imports_the_good_ones_and_names_the_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = TuneDb::open(dir.path()).unwrap();
    let mut export = Vec::new();
    carver_tunedb::write_export(&[sample_record(1), sample_record(2)], &mut export).unwrap();
    let mut lines: Vec<String> = String::from_utf8(export)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let mut no_winner_time = sample_record(3);
    no_winner_time.candidates.remove(1);
    lines.insert(2, "{\"key\": 5}".into()); // line 3: wrong shape
    lines.push(serde_json::to_string(&no_winner_time).unwrap()); // line 5: fails validation
    lines.push(String::new()); // blank lines are skipped
    lines.push(lines[1][..40].to_string()); // line 7: cut short
    let mut bytes = lines.join("\n").into_bytes();
    bytes.extend(b"\n\xff\xfe not utf-8\n"); // line 8
    let report = db.import(&mut bytes.as_slice()).unwrap();

    let bad: Vec<(u64, &str)> = report
        .bad_rows
        .iter()
        .map(|b| (b.line, b.reason.as_str()))
        .collect();
    assert_eq!(bad.len(), 4, "{bad:?}");
    assert_eq!(bad[0].0, 3);
    assert!(bad[0].1.contains("not a tuning record"), "{}", bad[0].1);
    assert_eq!(bad[1].0, 5);
    assert!(bad[1].1.contains("the winner is not"), "{}", bad[1].1);
    assert_eq!(bad[2].0, 7);
    assert!(bad[2].1.contains("EOF while parsing"), "{}", bad[2].1);
    assert_eq!(bad[3].0, 8);
    assert!(
        bad[3].1.starts_with("the line is not valid UTF-8"),
        "{}",
        bad[3].1
    );
    assert_eq!(
        (report.inserted, report.replaced, report.kept_existing),
        (2, 0, 0)
    );
    assert_eq!((report.expected_records, report.records_in_file), (2, 6));
    assert!(!report.is_clean());
    assert_eq!(db.count(&Filter::default()).unwrap(), 2);
    assert_eq!(
        *db.lookup(&sample_key(2)).unwrap().unwrap(),
        sample_record(2)
    );
}

#[test]
fn an_import_with_a_bad_header_imports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = TuneDb::open(dir.path()).unwrap();
    let record = serde_json::to_string(&sample_record(0)).unwrap();
    let cases = [
        (String::new(), "the file is empty"),
        (format!("{record}\n"), "line 1 should be a header"),
        (
            format!(
                "{{\"format\":\"other\",\"format_version\":1,\"exported_by\":\"x\",\"records\":1}}\n{record}\n"
            ),
            "format is \"other\"",
        ),
        (
            format!(
                "{{\"format\":\"carver-tuning-results\",\"format_version\":99,\"exported_by\":\"x\",\"records\":1}}\n{record}\n"
            ),
            "format version 99 was written by a newer carver",
        ),
    ];
    for (file, expected) in cases {
        match db.import(&mut file.as_bytes()) {
            Err(TuneDbError::ImportHeader(message)) => {
                assert!(
                    message.contains(expected),
                    "{message:?} should contain {expected:?}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(db.count(&Filter::default()).unwrap(), 0);
}
