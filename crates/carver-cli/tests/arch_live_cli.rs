//! `carver arch detect` and `carver arch calibrate` where they cannot work: a machine without a
//! GPU or a CUDA driver, and a broken libcuda. Each must fail with a message that says how to
//! plan offline, never with a panic. On a machine with a working GPU these cases cannot be
//! produced, and the tests say so and return.

use std::path::Path;
use std::process::Output;

use tempfile::TempDir;

mod common;
use common::{carver, text};

/// Checks a run that must fail cleanly: non-zero exit, the offline hint, no panic, nothing on
/// stdout, and no calibration written.
fn assert_clean_failure(output: &Output, cache: &Path, what: &str) {
    let stderr = text(&output.stderr);
    assert!(!output.status.success(), "{what} succeeded: {stderr}");
    assert_eq!(output.status.code(), Some(1), "{what}: {stderr}");
    assert!(
        stderr.contains("--arch h100"),
        "{what}: no offline hint in {stderr:?}"
    );
    assert!(stderr.starts_with("error: "), "{what}: {stderr:?}");
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "{what}: {stderr}");
    assert!(
        output.stdout.is_empty(),
        "{what} printed {:?}",
        text(&output.stdout)
    );
    assert!(
        !cache.join("calibration").exists(),
        "{what} wrote a calibration"
    );
}

/// Whether `carver arch detect` works here (a GPU and its driver are present).
fn gpu_present(cache: &Path) -> bool {
    carver(cache, &["arch", "detect"])
        .output()
        .expect("carver runs")
        .status
        .success()
}

#[test]
fn without_a_gpu_detect_and_calibrate_fail_with_the_offline_hint() {
    let cache = TempDir::new().unwrap();
    if gpu_present(cache.path()) {
        eprintln!("skipped: this machine has a working GPU, so the no-GPU failure cannot be seen");
        return;
    }
    for args in [
        &["arch", "detect"][..],
        &["arch", "detect", "--format", "json"],
        &["arch", "calibrate"],
        &["arch", "calibrate", "--device", "1", "--format", "json"],
    ] {
        let output = carver(cache.path(), args).output().unwrap();
        assert_clean_failure(&output, cache.path(), &args.join(" "));
    }
}

#[cfg(feature = "gpu")]
#[test]
fn with_no_driver_library_the_message_names_the_missing_driver() {
    let cache = TempDir::new().unwrap();
    if gpu_present(cache.path()) {
        eprintln!("skipped: this machine has a working GPU");
        return;
    }
    // An empty library path: libcuda can only come from the system directories, and on a machine
    // without a driver there is none there either.
    let output = carver(cache.path(), &["arch", "detect"])
        .env("LD_LIBRARY_PATH", "")
        .output()
        .unwrap();
    assert_clean_failure(&output, cache.path(), "arch detect");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("CUDA driver") || stderr.contains("no GPU"),
        "{stderr}"
    );
}

/// A libcuda that loads but has none of the driver's functions: cudarc panics looking up cuInit,
/// and carver must turn that into an error. Runs on any Linux machine with a C compiler, GPU or
/// not (the fake library is found before the real one).
#[cfg(all(feature = "gpu", target_os = "linux"))]
#[test]
fn a_libcuda_without_the_driver_api_is_an_error_not_a_panic() {
    let dir = TempDir::new().unwrap();
    let source = dir.path().join("empty.c");
    std::fs::write(&source, "int carver_test_nothing(void) { return 0; }\n").unwrap();
    // `libcuda.so` is the first name cudarc tries, so this one wins over an installed driver.
    let library = dir.path().join("libcuda.so");
    let compiled = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status();
    match compiled {
        Ok(status) if status.success() => {}
        other => {
            eprintln!("skipped: no C compiler to build a fake libcuda ({other:?})");
            return;
        }
    }
    let cache = TempDir::new().unwrap();
    for args in [&["arch", "detect"][..], &["arch", "calibrate"]] {
        let output = carver(cache.path(), args)
            .env("LD_LIBRARY_PATH", dir.path())
            .output()
            .unwrap();
        assert_clean_failure(&output, cache.path(), &args.join(" "));
        let stderr = text(&output.stderr);
        assert!(stderr.contains("libcuda failed inside cuInit"), "{stderr}");
    }
}
