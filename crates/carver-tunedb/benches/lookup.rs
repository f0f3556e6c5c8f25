//! How long a lookup takes: from the in-process cache (the common case once a process has
//! looked a key up) and from SQLite (the first lookup of a key, and a miss), over a database
//! of 10,000 results. `cargo bench -p carver-tunedb --bench lookup`.

use carver_tunedb::test_support::{sample_key, sample_record};
use carver_tunedb::{Bucket, KeyBuckets, LookupOptions, TuneDb, TuneRecord};
use divan::Bencher;

const RESULTS: u64 = 10_000;

fn main() {
    divan::main();
}

/// A database of `RESULTS` records in a temporary cache directory (kept alive by the caller).
fn populated() -> (tempfile::TempDir, TuneDb) {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = TuneDb::open(dir.path()).unwrap();
    let records: Vec<TuneRecord> = (0..RESULTS).map(sample_record).collect();
    let mut export = Vec::new();
    carver_tunedb::write_export(&records, &mut export).unwrap();
    let report = db.import(&mut export.as_slice()).unwrap();
    assert_eq!(report.inserted, RESULTS);
    (dir, db)
}

#[divan::bench]
fn hit_in_process_cache(bencher: Bencher) {
    let (_dir, db) = populated();
    let key = sample_key(RESULTS / 2);
    assert!(db.lookup(&key).unwrap().is_some());
    bencher.bench_local(|| db.lookup(divan::black_box(&key)).unwrap());
}

#[divan::bench]
fn hit_in_process_cache_bucketed(bencher: Bencher) {
    let (_dir, db) = populated();
    let mut key = sample_key(RESULTS / 2);
    key.problem.m -= 1;
    let bucketed = LookupOptions {
        buckets: KeyBuckets::all(Bucket::Pow2),
    };
    assert!(db.lookup_with(&key, bucketed).unwrap().is_some());
    bencher.bench_local(|| db.lookup_with(divan::black_box(&key), bucketed).unwrap());
}

/// The first lookup of a key: an indexed SQLite query and the JSON columns decoded.
#[divan::bench]
fn hit_from_sqlite(bencher: Bencher) {
    let (_dir, db) = populated();
    let key = sample_key(RESULTS / 2);
    bencher
        .with_inputs(|| db.refresh())
        .bench_local_refs(|_| db.lookup(divan::black_box(&key)).unwrap());
}

/// Opening an existing database, as each `carver` process does once: the header and
/// application id checks, `PRAGMA quick_check` over the whole file, and the WAL switch.
#[divan::bench(sample_count = 20)]
fn open_existing(bencher: Bencher) {
    let (dir, db) = populated();
    drop(db);
    bencher.bench_local(|| TuneDb::open(dir.path()).unwrap());
}

/// A key the database does not hold (misses are not cached).
#[divan::bench]
fn miss(bencher: Bencher) {
    let (_dir, db) = populated();
    let key = sample_key(RESULTS + 1);
    assert!(db.lookup(&key).unwrap().is_none());
    bencher.bench_local(|| db.lookup(divan::black_box(&key)).unwrap());
}
