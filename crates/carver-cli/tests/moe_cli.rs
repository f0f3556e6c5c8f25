//! `carver moe` as a user runs it.

use assert_cmd::Command;
use predicates::prelude::*;

fn carver() -> Command {
    let mut cmd = Command::cargo_bin("carver").unwrap();
    cmd.arg("--cache-dir")
        .arg(std::env::temp_dir().join("carver-moe-cli-tests"));
    cmd.env_remove("CARVER_HARDWARE_DB")
        .env_remove("CARVER_CACHE_DIR");
    cmd
}

const MIXTRAL_TP2: [&str; 12] = [
    "moe",
    "--arch",
    "h100",
    "--experts",
    "8",
    "--topk",
    "2",
    "--hidden",
    "4096",
    "--intermediate",
    "14336",
    "--tp",
];

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_vllm_file_of_mixtral_tp2_on_h100() {
    let text = stdout(carver().args(MIXTRAL_TP2).arg("2"));
    let file: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = file.keys().map(String::as_str).collect();
    let mut want: Vec<String> = carver::moe::BATCH_SIZES
        .iter()
        .map(u64::to_string)
        .collect();
    want.sort();
    let mut got: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(got, want);
    insta::assert_snapshot!("mixtral_tp2_h100_vllm", text);
}

#[test]
fn the_json_document_of_mixtral_tp2_on_h100() {
    let text = stdout(carver().args(MIXTRAL_TP2).args([
        "2",
        "--format",
        "json",
        "--batch-sizes",
        "1,64,4096",
        "--candidates",
        "2",
    ]));
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["file_name"],
        "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"
    );
    doc["carver_version"] = "<version>".into();
    insta::assert_json_snapshot!("mixtral_tp2_h100_json", doc);
}

#[test]
fn several_gpus_write_one_file_each() {
    let dir = tempfile::tempdir().unwrap();
    carver()
        .args(MIXTRAL_TP2)
        .args([
            "2",
            "--arch",
            "h100,h200",
            "--batch-sizes",
            "1,2",
            "--output",
        ])
        .arg(dir.path())
        .assert()
        .success();
    for name in [
        "E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json",
        "E=8,N=7168,device_name=NVIDIA_H200.json",
    ] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 2, "{name}");
    }
}

#[test]
fn a_hugging_face_config_gives_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(
        &path,
        r#"{"n_routed_experts": 256, "num_experts_per_tok": 8, "hidden_size": 7168,
            "intermediate_size": 18432, "moe_intermediate_size": 2048}"#,
    )
    .unwrap();
    carver()
        .args([
            "moe",
            "--batch-sizes",
            "1",
            "--format",
            "json",
            "--candidates",
            "1",
            "--from-hf",
        ])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "E=256,N=2048,device_name=NVIDIA_H100_80GB_HBM3.json",
        ));
    std::fs::write(
        &path,
        r#"{"hidden_size": 4096, "intermediate_size": 11008}"#,
    )
    .unwrap();
    carver()
        .args(["moe", "--from-hf"])
        .arg(&path)
        .assert()
        .failure()
        .stderr(predicate::str::contains("not a mixture-of-experts config"));
}

#[test]
fn bad_input_names_the_field_and_fails() {
    // Each case is a command line: a whitespace-separated layer and what the error must name.
    let cases = [
        (
            "--experts 8 --topk 9 --hidden 4096 --intermediate 14336",
            "topk",
        ),
        (
            "--experts 0 --topk 1 --hidden 4096 --intermediate 14336",
            "experts",
        ),
        (
            "--experts 8 --topk 2 --hidden 4096 --intermediate 14336 --tp 3",
            "intermediate",
        ),
        (
            "--experts 8 --topk 2 --hidden 4096 --intermediate 14336 --dtype int4",
            "dtype",
        ),
        (
            "--experts 8 --topk 2 --hidden 4096 --intermediate 14336 --dtype fp8_w8a8 --block-shape 64,64",
            "block_shape",
        ),
        (
            "--experts 8 --topk 2 --hidden 4096 --intermediate 14336 --arch h999",
            "h999",
        ),
        (
            "--experts 8 --topk 2 --hidden 4096 --intermediate 14336 --batch-sizes 1,1",
            "batch_sizes",
        ),
    ];
    for (line, field) in cases {
        carver()
            .arg("moe")
            .args(line.split_whitespace())
            .assert()
            .failure()
            .stderr(
                predicate::str::contains(field).and(predicate::str::contains("panicked").not()),
            );
    }
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("routing.json");
    std::fs::write(&hist, "[1, 2, \"x\"]").unwrap();
    carver()
        .args([
            "moe",
            "--experts",
            "3",
            "--topk",
            "1",
            "--hidden",
            "4096",
            "--intermediate",
            "1024",
            "--routing",
        ])
        .arg(&hist)
        .assert()
        .failure()
        .stderr(predicate::str::contains("entry 2"));
}
