//! `carver arch list` and `carver arch show` on the real binary, with no GPU needed. Every run
//! gets its own cache directory and no inherited CARVER_* variables, so nothing here reads the
//! user's cache or hardware directory.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

const REQUIRED_KEYS: [&str; 12] = [
    "v100-sxm2",
    "a100-sxm4-80gb",
    "a100-pcie-80gb",
    "a10",
    "l4",
    "l40s",
    "rtx-3090",
    "rtx-4090",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
];

/// `carver --cache-dir <fresh dir>` with the environment's CARVER_* settings removed.
fn carver(cache: &TempDir) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_carver"));
    cmd.env_remove("CARVER_HARDWARE_DB")
        .env_remove("CARVER_CACHE_DIR")
        .arg("--cache-dir")
        .arg(cache.path());
    cmd
}

fn stdout_of(cmd: &mut Command) -> String {
    let output = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(output).expect("stdout is UTF-8")
}

fn shipped_h100() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hardware-db/h100-sxm.toml");
    fs::read_to_string(path).expect("hardware-db/h100-sxm.toml")
}

/// A directory holding one file `name` with `text`.
fn user_dir(name: &str, text: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    fs::write(&file, text).unwrap();
    (dir, file)
}

#[test]
fn arch_list_shows_every_shipped_gpu_without_a_gpu() {
    let cache = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(&cache).args(["arch", "list"]));
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("KEY") && header.contains("SMS"),
        "{header}"
    );
    let keys: Vec<&str> = lines
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(keys.len() >= 12, "{out}");
    for key in REQUIRED_KEYS {
        assert!(keys.contains(&key), "`{key}` missing from:\n{out}");
    }
}

#[test]
fn arch_list_table_snapshot() {
    let cache = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(stdout_of(carver(&cache).args(["arch", "list"])));
}

#[test]
fn arch_list_json_is_versioned_and_complete() {
    let cache = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(&cache).args(["arch", "list", "--format", "json"]));
    let doc: Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(
        doc["schema_version"],
        Value::from(carver_schema::SCHEMA_VERSION)
    );
    let gpus = doc["gpus"].as_array().unwrap();
    assert!(gpus.len() >= 12);
    let keys: Vec<&str> = gpus.iter().map(|g| g["key"].as_str().unwrap()).collect();
    for key in REQUIRED_KEYS {
        assert!(keys.contains(&key), "`{key}` missing");
    }
    let h100 = gpus.iter().find(|g| g["key"] == "h100-sxm").unwrap();
    assert_eq!(h100["sm_count"], 132);
    assert_eq!(h100["origin"], "embedded");
}

#[test]
fn arch_show_h100_json_has_the_h100_sxm_figures() {
    let cache = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(&cache).args(["arch", "show", "h100", "--format", "json"]));
    let doc: Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(
        doc["schema_version"],
        Value::from(carver_schema::SCHEMA_VERSION)
    );
    let arch = &doc["arch"];
    assert_eq!(arch["gpu"]["key"], "h100-sxm");
    assert_eq!(arch["sm"]["count"], 132);
    assert_eq!(arch["shared_memory"]["per_block_optin_bytes"], 232448);
    assert_eq!(arch["l2"]["size_bytes"], 52428800);
    assert_eq!(
        arch["memory"]["bandwidth_bytes_per_s"].as_f64(),
        Some(3.35e12)
    );
    assert!(
        arch.get("calibration").is_none(),
        "a fresh cache holds no calibration"
    );
}

#[test]
fn arch_show_accepts_keys_names_and_aliases() {
    let cache = tempfile::tempdir().unwrap();
    for name in ["h100-sxm", "NVIDIA H100 80GB HBM3", "H100"] {
        let out = stdout_of(carver(&cache).args(["arch", "show", name]));
        assert!(
            out.contains("key                      h100-sxm"),
            "{name}:\n{out}"
        );
    }
    let out = stdout_of(carver(&cache).args(["arch", "show", "4090"]));
    assert!(out.contains("NVIDIA GeForce RTX 4090"), "{out}");
}

#[test]
fn arch_show_h100_table_snapshot() {
    let cache = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(stdout_of(carver(&cache).args(["arch", "show", "h100"])));
}

#[test]
fn arch_show_marks_estimated_figures() {
    let cache = tempfile::tempdir().unwrap();
    let out = stdout_of(carver(&cache).args(["arch", "show", "b200"]));
    assert!(out.contains("1860 MHz sustained (estimated)"), "{out}");
    assert!(out.contains("TB/s (estimated)"), "{out}");
}

#[test]
fn unknown_gpu_fails_with_a_suggestion_and_the_known_names() {
    let cache = tempfile::tempdir().unwrap();
    carver(&cache)
        .args(["arch", "show", "h1000"])
        .assert()
        .failure()
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("unknown GPU `h1000`"))
        .stderr(predicate::str::contains("did you mean `h100"))
        .stderr(predicate::str::contains("known GPUs:").and(predicate::str::contains("v100-sxm2")))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn hardware_db_with_an_inconsistent_file_names_the_file_and_field() {
    let cache = tempfile::tempdir().unwrap();
    let text = shipped_h100().replacen(
        "bandwidth_bytes_per_s = 3.35e12",
        "bandwidth_bytes_per_s = 6.7e12",
        1,
    );
    let (dir, file) = user_dir("h100-sxm.toml", &text);
    carver(&cache)
        .arg("--hardware-db")
        .arg(dir.path())
        .args(["arch", "list"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(file.display().to_string()))
        .stderr(predicate::str::contains("memory.bandwidth_bytes_per_s"))
        .stderr(predicate::str::contains("apart"));
}

#[test]
fn hardware_db_with_a_malformed_file_names_the_file_and_field() {
    let cache = tempfile::tempdir().unwrap();
    let text = shipped_h100().replacen("warp_size = 32", "warp_size = 32\nwarp_width = 32", 1);
    let (dir, file) = user_dir("h100-sxm.toml", &text);
    carver(&cache)
        .arg("--hardware-db")
        .arg(dir.path())
        .args(["arch", "show", "h100"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(file.display().to_string()))
        .stderr(predicate::str::contains("unknown field `warp_width`"));
}

#[test]
fn hardware_db_at_a_missing_directory_is_an_error() {
    let cache = tempfile::tempdir().unwrap();
    let missing = cache.path().join("no-such-dir");
    carver(&cache)
        .arg("--hardware-db")
        .arg(&missing)
        .args(["arch", "list"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(missing.display().to_string()))
        .stderr(predicate::str::contains("does not exist"));
}

#[test]
fn hardware_db_entries_are_listed_as_user_files_and_override_by_key() {
    let cache = tempfile::tempdir().unwrap();
    let text = shipped_h100().replacen(
        "bandwidth_bytes_per_s = 7.85e12",
        "bandwidth_bytes_per_s = 9.1e12",
        1,
    );
    let (dir, file) = user_dir("h100-sxm.toml", &text);
    let out = stdout_of(
        carver(&cache)
            .arg("--hardware-db")
            .arg(dir.path())
            .args(["arch", "list"]),
    );
    let h100_row = out.lines().find(|l| l.starts_with("h100-sxm ")).unwrap();
    assert!(h100_row.ends_with("user-file"), "{h100_row}");
    let out = stdout_of(
        carver(&cache)
            .arg("--hardware-db")
            .arg(dir.path())
            .args(["arch", "show", "h100"]),
    );
    assert!(out.contains("9.10 TB/s"), "{out}");
    assert!(
        out.contains(&format!("user file {}", file.display())),
        "{out}"
    );
}

#[test]
fn carver_hardware_db_variable_is_honoured() {
    let cache = tempfile::tempdir().unwrap();
    let text = shipped_h100()
        .replacen(r#"key = "h100-sxm""#, r#"key = "lab-gpu""#, 1)
        .replacen(
            r#"name = "NVIDIA H100 80GB HBM3""#,
            r#"name = "Lab GPU""#,
            1,
        )
        .replacen(
            r#"aliases = ["h100", "h100-sxm5", "h100-sxm5-80gb"]"#,
            "aliases = []",
            1,
        );
    assert!(text.contains("aliases = []"));
    let (dir, _) = user_dir("lab-gpu.toml", &text);
    let out = stdout_of(
        carver(&cache)
            .env("CARVER_HARDWARE_DB", dir.path())
            .args(["arch", "list"]),
    );
    assert!(out.lines().any(|l| l.starts_with("lab-gpu ")), "{out}");
}
