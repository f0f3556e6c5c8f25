//! The worker protocol: one JSON object per line each way. The parent sends a [`Request`], the
//! worker answers with exactly one [`Reply`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{GemmProblem, Timing, TimingOptions};
use crate::sm90::KernelSpec;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Open the device, check it is a Hopper GPU, allocate and fill the input sets.
    Setup {
        device: usize,
        problem: GemmProblem,
        timing: TimingOptions,
    },
    /// Time cuBLAS on the problem.
    Cublas,
    /// Load, check and time one compiled kernel. `best_s` is the fastest candidate so far (for
    /// the early stop).
    Candidate {
        cubin: PathBuf,
        /// SHA-256 of the cubin the parent checked: the worker loads the file only if it still
        /// has these bytes.
        cubin_sha256: String,
        spec: KernelSpec,
        best_s: Option<f64>,
    },
    /// Free everything and exit.
    Exit,
}

/// What the worker found out about its device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub device_name: String,
    pub compute_capability: (u32, u32),
    pub sms: u32,
    pub l2_bytes: u64,
    /// Input sets (A and B) rotated while timing.
    pub input_sets: usize,
    /// Bytes of one input set.
    pub set_bytes: u64,
    /// Present when A or B rows are not 16-byte aligned and are copied into padded buffers
    /// before every launch of a candidate (the copies are inside its timed region).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repack: Option<RepackInfo>,
}

/// The copies that run before every candidate launch, timed alone at worker setup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepackInfo {
    /// `A`, `B` or both.
    pub operands: Vec<String>,
    /// DRAM bytes the copies read and write per launch.
    pub bytes: u64,
    /// The copies alone, timed like a candidate over the rotated input sets.
    pub timing: Timing,
}

/// A candidate that passed the check, with its times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateMeasurement {
    /// As the loaded function reports them.
    pub registers: u32,
    pub local_bytes: u32,
    pub blocks_per_sm: u32,
    pub grid: u32,
    /// `||C - C_cublas|| / ||C_cublas||`.
    pub rel_error: f64,
    pub timing: Timing,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Ready(WorkerInfo),
    Cublas(Timing),
    Candidate(CandidateMeasurement),
    /// The candidate failed. When `context_lost`, the worker exits after this reply (a fault
    /// left its CUDA context unusable).
    Rejected {
        reason: String,
        context_lost: bool,
    },
    /// The request could not be served at all (bad setup, no GPU, ...).
    Error {
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use carver::family::Sm90Params;
    use carver::{DType, Layout};

    #[test]
    fn messages_round_trip_as_single_lines() {
        let spec = KernelSpec {
            params: Sm90Params {
                block_m: 128,
                block_n: 256,
                block_k: 64,
                stages: 4,
                consumers: 2,
                group_m: 8,
                cluster_m: 1,
                persistent: true,
                split_k: 3,
                swap_ab: false,
            },
            input: DType::Bf16,
            output: DType::Bf16,
            layout_b: Layout::Row,
        };
        let requests = [
            Request::Setup {
                device: 0,
                problem: GemmProblem {
                    m: 4096,
                    n: 4096,
                    k: 4096,
                    batch: 2,
                    input: DType::Bf16,
                    output: DType::Bf16,
                    layout_b: Layout::Col,
                },
                timing: TimingOptions::default(),
            },
            Request::Cublas,
            Request::Candidate {
                cubin: "/tmp/x.cubin".into(),
                cubin_sha256: "00".repeat(32),
                spec,
                best_s: Some(1e-4),
            },
            Request::Exit,
        ];
        for r in requests {
            let line = serde_json::to_string(&r).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r);
        }
        let reply = Reply::Rejected {
            reason: "wrong result".into(),
            context_lost: false,
        };
        let line = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), reply);
    }
}
