//! Realistic records for tests and benchmarks (feature `test-support`; not part of the API).

use carver_schema::{DeviceKey, MeasuredCandidate, TuneKey, TuneProblem, TuneRecord};
use serde_json::json;

/// A key on an H100 whose problem is made distinct by `n` (M = 128 + n, N = 4096, K = 4096).
pub fn sample_key(n: u64) -> TuneKey {
    TuneKey {
        device: DeviceKey {
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: "GPU-5e0c4a1b-0000-4000-8000-000000000001".into(),
            driver_version: "580.65.06".into(),
        },
        carver_version: "0.1.0".into(),
        target: "triton".into(),
        kernel_hash: "9f2c4e1a7b3d5f60".into(),
        problem: TuneProblem {
            m: 128 + n,
            n: 4096,
            k: 4096,
            batch: 1,
            dtype_a: "f16".into(),
            dtype_b: "f16".into(),
            dtype_c: "f16".into(),
            dtype_acc: "f32".into(),
            layout_a: "row".into(),
            layout_b: "row".into(),
        },
    }
}

/// A `triton.Config` in carver's own Triton format (what `carver recommend --target triton`
/// prints), so that the records pass carver-flows' check of the winner's format.
pub fn triton_config(block_m: u64, block_n: u64, warps: u64, stages: u64) -> serde_json::Value {
    json!({
        "kwargs": {
            "BLOCK_SIZE_M": block_m,
            "BLOCK_SIZE_N": block_n,
            "BLOCK_SIZE_K": 64,
            "GROUP_SIZE_M": 8,
            "SPLIT_K": 1,
        },
        "num_warps": warps,
        "num_stages": stages,
    })
}

/// A record for [`sample_key`]`(n)`: three candidates, the model's second choice the fastest,
/// one that failed to compile, and a cuBLAS time.
pub fn sample_record(n: u64) -> TuneRecord {
    let base = 1.0e-4 + n as f64 * 1.0e-7;
    let winner = triton_config(128, 256, 8, 3);
    TuneRecord {
        key: sample_key(n),
        winner: winner.clone(),
        candidates: vec![
            MeasuredCandidate {
                config: triton_config(128, 128, 4, 4),
                model_rank: 1,
                predicted_time_s: base * 0.9,
                measured_time_s: Some(base * 1.2),
                failure: None,
            },
            MeasuredCandidate {
                config: winner,
                model_rank: 2,
                predicted_time_s: base,
                measured_time_s: Some(base),
                failure: None,
            },
            MeasuredCandidate {
                config: triton_config(256, 256, 8, 5),
                model_rank: 3,
                predicted_time_s: base * 1.1,
                measured_time_s: None,
                failure: Some(
                    "out of shared memory: 262144 bytes requested, 232448 available".into(),
                ),
            },
        ],
        cublas_time_s: Some(base * 0.95),
        measured_at_unix_s: 1_767_225_600 + n as i64,
        method: json!({"warmup": 10, "reps": 100, "timer": "cuda-events", "statistic": "median"}),
    }
}
