//! The database's behaviour through its public API: stores, lookups, policies, filters, the
//! in-process cache, shape bucketing and read-only opens.

use carver_tunedb::test_support::{sample_key, sample_record};
use carver_tunedb::{
    Bucket, DB_FILE_NAME, Filter, KeyBuckets, LookupOptions, StoreOutcome, TuneDb, TuneDbError,
    TuneRecord, WritePolicy,
};
use serde_json::json;

fn open(dir: &tempfile::TempDir) -> TuneDb {
    let (db, warnings) = TuneDb::open(dir.path()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    db
}

/// `record` with its winner's measured time scaled by `factor` and a different winner config.
fn rival(record: &TuneRecord, factor: f64) -> TuneRecord {
    let mut rival = record.clone();
    let winner = json!({"kwargs": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, "num_warps": 4, "num_stages": 2});
    rival.winner = winner.clone();
    rival.candidates[0].config = winner;
    rival.candidates[0].measured_time_s = Some(record.winner_time_s().unwrap() * factor);
    rival
}

#[test]
fn a_stored_record_comes_back_equal_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let record = sample_record(7);
    {
        let db = open(&dir);
        assert_eq!(db.lookup(&record.key).unwrap(), None);
        assert_eq!(db.store(&record).unwrap(), StoreOutcome::Inserted);
        assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), record);
    }
    let db = open(&dir);
    assert_eq!(db.path(), dir.path().join(DB_FILE_NAME));
    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), record);
    assert_eq!(db.lookup(&sample_key(8)).unwrap(), None);
}

#[test]
fn open_creates_the_cache_directory_and_nothing_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/carver");
    let before: Vec<_> = std::fs::read_dir(".")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let (db, _) = TuneDb::open(&nested).unwrap();
    db.store(&sample_record(0)).unwrap();
    assert!(nested.join(DB_FILE_NAME).is_file());
    let after: Vec<_> = std::fs::read_dir(".")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(before, after);
}

#[test]
fn storing_the_same_record_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let record = sample_record(1);
    assert_eq!(db.store(&record).unwrap(), StoreOutcome::Inserted);
    let before = db.query(&Filter::default()).unwrap();
    assert_eq!(db.store(&record).unwrap(), StoreOutcome::KeptExisting);
    assert_eq!(db.query(&Filter::default()).unwrap(), before);
}

#[test]
fn keep_faster_keeps_the_faster_winner_in_either_order() {
    let record = sample_record(2);
    let faster = rival(&record, 0.5);
    for (first, second) in [(&record, &faster), (&faster, &record)] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        db.store(first).unwrap();
        db.store(second).unwrap();
        assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), faster);
        assert_eq!(db.count(&Filter::default()).unwrap(), 1);
    }
}

#[test]
fn a_tie_keeps_the_stored_record_and_replace_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let record = sample_record(3);
    let tie = rival(&record, 1.0);
    let slower = rival(&record, 2.0);
    db.store(&record).unwrap();
    assert_eq!(db.store(&tie).unwrap(), StoreOutcome::KeptExisting);
    assert_eq!(db.store(&slower).unwrap(), StoreOutcome::KeptExisting);
    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), record);
    assert_eq!(
        db.store_with(&slower, WritePolicy::Replace).unwrap(),
        StoreOutcome::Replaced
    );
    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), slower);
    assert_eq!(
        db.query(&Filter::default()).unwrap().records[0].id,
        1,
        "an update keeps the id"
    );
}

#[test]
fn an_invalid_record_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let mut record = sample_record(4);
    record.candidates.clear();
    match db.store(&record) {
        Err(TuneDbError::InvalidRecord(reason)) => assert!(reason.contains("candidates")),
        other => panic!("{other:?}"),
    }
    let mut key = sample_key(4);
    key.problem.n = 0;
    assert!(matches!(
        db.lookup(&key),
        Err(TuneDbError::InvalidRecord(_))
    ));
    assert_eq!(db.count(&Filter::default()).unwrap(), 0);
}

#[test]
fn every_part_of_the_key_distinguishes_results() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let base = sample_record(5);
    let variants: Vec<fn(&mut TuneRecord)> = vec![
        |r| r.key.device.name = "NVIDIA H200".into(),
        |r| r.key.device.uuid = "GPU-other".into(),
        |r| r.key.device.driver_version = "590.0".into(),
        |r| r.key.carver_version = "0.2.0".into(),
        |r| r.key.target = "cuda-sm90".into(),
        |r| r.key.kernel_hash = "0000".into(),
        |r| r.key.problem.m += 1,
        |r| r.key.problem.n += 1,
        |r| r.key.problem.k += 1,
        |r| r.key.problem.batch += 1,
        |r| r.key.problem.dtype_a = "bf16".into(),
        |r| r.key.problem.dtype_b = "bf16".into(),
        |r| r.key.problem.dtype_c = "bf16".into(),
        |r| r.key.problem.dtype_acc = "f16".into(),
        |r| r.key.problem.layout_a = "col".into(),
        |r| r.key.problem.layout_b = "col".into(),
    ];
    db.store(&base).unwrap();
    for change in &variants {
        let mut record = base.clone();
        change(&mut record);
        assert_eq!(db.lookup(&record.key).unwrap(), None, "{:?}", record.key);
        assert_eq!(db.store(&record).unwrap(), StoreOutcome::Inserted);
        assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), record);
    }
    assert_eq!(
        db.count(&Filter::default()).unwrap(),
        1 + variants.len() as u64
    );
}

#[test]
fn a_repeated_lookup_is_answered_from_memory_until_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let record = sample_record(6);
    db.store(&record).unwrap();
    let first = db.lookup(&record.key).unwrap().unwrap();
    let second = db.lookup(&record.key).unwrap().unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&first, &second),
        "the second lookup should not re-read"
    );

    // Another handle (another process, in effect) changes the row: this handle still answers
    // from memory, as documented, until it writes something itself.
    let (other, _) = TuneDb::open(dir.path()).unwrap();
    let faster = rival(&record, 0.5);
    other.store(&faster).unwrap();
    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), record);
    db.refresh();
    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), faster);

    other.store_with(&record, WritePolicy::Replace).unwrap();
    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), faster);
    db.store(&sample_record(60)).unwrap();
    assert_eq!(
        *db.lookup(&record.key).unwrap().unwrap(),
        record,
        "a write refreshes too"
    );
}

#[test]
fn bucketing_is_off_by_default_and_finds_the_closest_shape_in_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let bucketed = LookupOptions {
        buckets: KeyBuckets::all(Bucket::Pow2),
    };
    // M = 128 + n: 600 and 1000 and 1024 share the bucket (512, 1024]; 1025 does not.
    let store_m = |m: u64| {
        let mut r = sample_record(0);
        r.key.problem.m = m;
        db.store(&r).unwrap();
        r
    };
    let m600 = store_m(600);
    let m1024 = store_m(1024);
    store_m(1025);
    store_m(512);

    let mut asked = sample_key(0);
    asked.problem.m = 1000;
    assert_eq!(
        db.lookup(&asked).unwrap(),
        None,
        "exact matching is the default"
    );
    let found = db.lookup_with(&asked, bucketed).unwrap().unwrap();
    assert_eq!(found.key, m1024.key, "1024 is closer to 1000 than 600 is");
    asked.problem.m = 700;
    assert_eq!(
        db.lookup_with(&asked, bucketed).unwrap().unwrap().key,
        m600.key
    );
    asked.problem.m = 600;
    assert_eq!(
        db.lookup_with(&asked, bucketed).unwrap().unwrap().key,
        m600.key
    );

    // N and K bucket too: 3000 and 2049 round up to 4096 like the stored 4096; 2048 does not.
    asked.problem.n = 3000;
    asked.problem.k = 2049;
    assert_eq!(
        db.lookup_with(&asked, bucketed).unwrap().unwrap().key,
        m600.key
    );
    asked.problem.k = 2048;
    assert_eq!(db.lookup_with(&asked, bucketed).unwrap(), None);
}

#[test]
fn bucketing_matches_other_sizes_in_the_same_power_of_two_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let bucketed = LookupOptions {
        buckets: KeyBuckets::all(Bucket::Pow2),
    };
    let stored = sample_record(0); // M 128, N 4096, K 4096
    db.store(&stored).unwrap();
    let mut asked = stored.key.clone();
    asked.problem.m = 65; // (64, 128]
    asked.problem.n = 2049; // (2048, 4096]
    asked.problem.k = 4000;
    assert_eq!(
        db.lookup_with(&asked, bucketed).unwrap().unwrap().key,
        stored.key
    );
    asked.problem.m = 64;
    assert_eq!(db.lookup_with(&asked, bucketed).unwrap(), None);
    asked.problem.m = 100;
    asked.problem.batch = 2;
    assert_eq!(db.lookup_with(&asked, bucketed).unwrap(), None);
}

#[test]
fn filters_select_by_id_device_target_and_shape() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let mut h200 = sample_record(1);
    h200.key.device.name = "NVIDIA H200".into();
    h200.key.device.uuid = "GPU-h200".into();
    let mut sm90 = sample_record(2);
    sm90.key.target = "cuda-sm90".into();
    for r in [&sample_record(0), &h200, &sm90] {
        db.store(r).unwrap();
    }
    let ids = |filter: Filter| -> Vec<i64> {
        db.query(&filter)
            .unwrap()
            .records
            .into_iter()
            .map(|s| s.id)
            .collect()
    };
    assert_eq!(ids(Filter::default()), [1, 2, 3]);
    assert_eq!(
        ids(Filter {
            id: Some(2),
            ..Filter::default()
        }),
        [2]
    );
    assert_eq!(
        ids(Filter {
            device: Some("h200".into()),
            ..Filter::default()
        }),
        [2]
    );
    assert_eq!(
        ids(Filter {
            device: Some("GPU-h200".into()),
            ..Filter::default()
        }),
        [2]
    );
    assert_eq!(
        ids(Filter {
            device: Some("GPU-h2".into()),
            ..Filter::default()
        }),
        Vec::<i64>::new()
    );
    assert_eq!(
        ids(Filter {
            device: Some("H100".into()),
            ..Filter::default()
        }),
        [1, 3]
    );
    assert_eq!(
        ids(Filter {
            target: Some("triton".into()),
            ..Filter::default()
        }),
        [1, 2]
    );
    assert_eq!(
        ids(Filter {
            shape: Some([130, 4096, 4096]),
            ..Filter::default()
        }),
        [3]
    );
    let both = Filter {
        device: Some("h100".into()),
        target: Some("triton".into()),
        ..Filter::default()
    };
    assert_eq!(ids(both.clone()), [1]);
    assert_eq!(db.count(&both).unwrap(), 1);

    assert_eq!(
        db.winners_for_device(&h200.key.device)
            .unwrap()
            .records
            .len(),
        1
    );
    let mut other_driver = h200.key.device.clone();
    other_driver.driver_version = "1.0".into();
    assert!(
        db.winners_for_device(&other_driver)
            .unwrap()
            .records
            .is_empty()
    );
}

#[test]
fn clear_deletes_only_what_the_filter_selects() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let mut sm90 = sample_record(1);
    sm90.key.target = "cuda-sm90".into();
    db.store(&sample_record(0)).unwrap();
    db.store(&sm90).unwrap();
    db.lookup(&sm90.key).unwrap().unwrap();
    let cuda = Filter {
        target: Some("cuda-sm90".into()),
        ..Filter::default()
    };
    assert_eq!(db.clear(&cuda).unwrap(), 1);
    assert_eq!(
        db.lookup(&sm90.key).unwrap(),
        None,
        "the in-process cache forgets it too"
    );
    assert!(db.lookup(&sample_key(0)).unwrap().is_some());
    assert_eq!(db.clear(&Filter::default()).unwrap(), 1);
    assert_eq!(db.count(&Filter::default()).unwrap(), 0);
}

#[test]
fn read_only_open_creates_nothing_and_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    assert!(TuneDb::open_read_only(dir.path()).unwrap().is_none());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    open(&dir).store(&sample_record(0)).unwrap();
    let db = TuneDb::open_read_only(dir.path()).unwrap().unwrap();
    assert!(db.lookup(&sample_key(0)).unwrap().is_some());
    assert!(matches!(
        db.store(&sample_record(1)),
        Err(TuneDbError::Sqlite { .. })
    ));
}

#[test]
fn a_handle_is_shared_between_threads() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    std::thread::scope(|s| {
        for t in 0..4 {
            let db = &db;
            s.spawn(move || {
                for i in 0..25 {
                    let record = sample_record(t * 100 + i);
                    db.store(&record).unwrap();
                    assert_eq!(*db.lookup(&record.key).unwrap().unwrap(), record);
                }
            });
        }
    });
    assert_eq!(db.count(&Filter::default()).unwrap(), 100);
}
