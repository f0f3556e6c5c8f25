//! The empirical loop of `carver tune`: compile candidates of the `cuda-sm90` family, check each
//! against cuBLAS, time the survivors and cuBLAS in the same run.
//!
//! Candidates run in a **worker process** (`carver tune --worker`, or whatever command the caller
//! gives) that talks JSON Lines over stdin/stdout: a kernel that faults leaves its CUDA context
//! unusable and one that hangs never returns, so the parent keeps a watchdog on every request,
//! records the failure, and starts a fresh worker for the next candidate.
//!
//! Method (also recorded in every result):
//! - **Correctness**: for every candidate, fresh random inputs (uniform in [-1, 1)) in input set
//!   0, cuBLAS (`cublasGemmEx`, fp32 compute) computes the reference, the output is poisoned
//!   with NaN, the candidate runs once, and the relative Frobenius error
//!   `||C - C_ref|| / ||C_ref||` must be under the tolerance (1e-2) with every output finite.
//! - **Timing**: warm-up by time, then CUDA events around each launch, rotating over input sets
//!   that together exceed twice the L2 size, median of the runs; a candidate whose running
//!   median is far behind the best so far stops early (its median is still reported, marked).
//!   cuBLAS is timed the same way before every candidate (every few candidates when there are
//!   more than 16) and once more at the end, and its
//!   time is the median of those medians: the GPU's clocks drift during a run (the same cuBLAS
//!   GEMM was seen 10% apart between runs), so each candidate has a cuBLAS timing beside it.
//! - **Unaligned operands**: when rows of A or B are not 16-byte aligned, the family's copy into
//!   padded rows runs before every launch of a candidate, inside its timed region (cuBLAS reads
//!   the operands as they are); the copies are also timed alone once per worker.

mod lt;
mod process;
mod protocol;
mod worker;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use carver::{DType, Layout};
use serde::{Deserialize, Serialize};

use crate::error::GpuError;
use crate::sm90::{CacheDefect, CompileEvent, KernelCache, KernelSpec, compile_all, sha256_hex};
use crate::timing::{EarlyStop, RunCount, TimingPlan, Warmup, median};

pub use crate::timing::Timing;
pub use protocol::{CandidateMeasurement, RepackInfo, Reply, Request, WorkerInfo};
pub use worker::{compile_worker_helpers, serve_worker};

/// The per-tensor scale product fp8 candidates are checked and timed with.
pub const FP8_ALPHA: f32 = 0.375;

/// At most this many cuBLAS timings are interleaved with the candidates (plus one at the end).
const MAX_CUBLAS_TIMINGS: usize = 16;

/// The matmul being tuned: `C[M, N] = A[M, K] B[K, N]`, A and C row-major, for each of
/// `batch` densely stacked matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GemmProblem {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Matrices in the batch (1: one matmul).
    #[serde(default = "one_matrix")]
    pub batch: u64,
    /// Element type of A and B.
    pub input: DType,
    pub output: DType,
    /// `row`: B is K x N; `col`: B is stored N x K (K contiguous).
    pub layout_b: Layout,
}

fn one_matrix() -> u64 {
    1
}

impl GemmProblem {
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// The problem as the tuning database stores it.
    pub fn stored(&self) -> carver_schema::TuneProblem {
        crate::sm90::stored_problem(self.input, self.output, self.layout_b, &self.dims())
    }

    /// The vendor GEMM every candidate is timed beside (the `cublas` timings).
    pub fn baseline(&self) -> &'static str {
        match self.input {
            DType::E4m3 => "cublasLtMatmul, fp8 e4m3, fast accumulation, per-tensor scale as alpha",
            DType::E5m2 => {
                "cublasLtMatmul on the same bytes read as e4m3 x e4m3 (cuBLASLt has no e5m2 x e5m2), fast accumulation, per-tensor scale as alpha"
            }
            _ => "cublasGemmEx, fp32 compute",
        }
    }

    /// The scale the kernel multiplies the product by: fp8's per-tensor scales multiplied (an
    /// exact binary fraction, so that the check also covers the scaling), 1 for 16-bit inputs.
    pub fn alpha(&self) -> f32 {
        if self.input.is_fp8() { FP8_ALPHA } else { 1.0 }
    }

    /// The kernel's size parameters.
    pub fn dims(&self) -> crate::sm90::GemmDims {
        crate::sm90::GemmDims {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: self.batch,
        }
    }

    /// The instantiation of `params` for this problem.
    pub fn spec(&self, params: carver::family::Sm90Params) -> KernelSpec {
        KernelSpec {
            params,
            input: self.input,
            output: self.output,
            layout_b: self.layout_b,
        }
    }
}

/// How candidates are checked and timed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingOptions {
    /// Launches before timing, until this much wall time has passed.
    pub warmup_ms: f64,
    /// Timed launches: as many as fit in this much time, within `min_runs..=max_runs`.
    pub measure_ms: f64,
    pub min_runs: usize,
    pub max_runs: usize,
    /// Stop timing a candidate whose median exceeds this multiple of the best so far.
    pub early_stop_ratio: f64,
    /// Largest accepted relative Frobenius error against cuBLAS.
    pub tolerance: f64,
    /// The rotated input sets hold at least this multiple of the L2 size.
    pub l2_multiple: f64,
}

impl Default for TimingOptions {
    fn default() -> Self {
        Self {
            warmup_ms: 30.0,
            measure_ms: 120.0,
            min_runs: 10,
            max_runs: 400,
            early_stop_ratio: 1.5,
            tolerance: 1e-2,
            l2_multiple: 2.0,
        }
    }
}

impl TimingOptions {
    /// How the harness times one operation: warm-up by time, as many runs as fit in the
    /// measuring time, and an early stop when `best_s` (the best time so far) is given.
    pub(crate) fn plan(&self, best_s: Option<f64>) -> TimingPlan {
        // Negative or NaN times from a caller count as none.
        let duration = |ms: f64| Duration::try_from_secs_f64(ms / 1e3).unwrap_or_default();
        TimingPlan {
            warmup: Warmup::For(duration(self.warmup_ms)),
            runs: RunCount::Fill {
                measure: duration(self.measure_ms),
                min: self.min_runs,
                max: self.max_runs,
            },
            early_stop: best_s.map(|best_s| EarlyStop {
                best_s,
                ratio: self.early_stop_ratio,
                min_runs: self.min_runs,
            }),
        }
    }
}

/// One configuration to try, as the recommender ranked it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub spec: KernelSpec,
    /// 1 = the model's first choice.
    pub model_rank: u32,
    pub predicted_s: f64,
}

/// How the candidate compiled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompileInfo {
    pub registers: u32,
    pub compile_s: f64,
    pub from_cache: bool,
}

/// What happened to one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateReport {
    pub spec: KernelSpec,
    pub model_rank: u32,
    pub predicted_s: f64,
    pub compile: Option<CompileInfo>,
    /// Present when the candidate was verified and timed.
    pub measured: Option<CandidateMeasurement>,
    /// Why it was not (compile error, spills, wrong result, fault, hang, ...).
    pub failure: Option<String>,
}

impl CandidateReport {
    pub fn time_s(&self) -> Option<f64> {
        self.measured.as_ref().map(|m| m.timing.median_s)
    }
}

/// The result of a tuning run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneOutcome {
    pub problem: GemmProblem,
    pub worker: WorkerInfo,
    /// In the order they were given (model rank).
    pub candidates: Vec<CandidateReport>,
    /// cuBLAS, timed before every candidate and at the end of the run.
    pub cublas: Vec<Timing>,
    /// Index into `candidates` of the fastest verified candidate.
    pub winner: Option<usize>,
    pub compile_wall_s: f64,
    pub bench_wall_s: f64,
    /// Workers started after one crashed or hung.
    pub worker_restarts: usize,
    pub timing: TimingOptions,
}

impl TuneOutcome {
    /// cuBLAS' time: the median of its interleaved timings' medians.
    pub fn cublas_s(&self) -> Option<f64> {
        let medians: Vec<f64> = self.cublas.iter().map(|t| t.median_s).collect();
        (!medians.is_empty()).then(|| median(&medians))
    }

    pub fn winner(&self) -> Option<&CandidateReport> {
        self.winner.map(|i| &self.candidates[i])
    }

    /// How the times were taken, for the tuning database.
    pub fn method(&self) -> serde_json::Value {
        let mut method = serde_json::json!({
            "timer": "cuda-events",
            "statistic": "median",
            "warmup_ms": self.timing.warmup_ms,
            "measure_ms": self.timing.measure_ms,
            "min_runs": self.timing.min_runs,
            "max_runs": self.timing.max_runs,
            "early_stop_ratio": self.timing.early_stop_ratio,
            "input_sets": self.worker.input_sets,
            "input_set_bytes": self.worker.set_bytes,
            "l2_bytes": self.worker.l2_bytes,
            "check": if self.problem.input.is_fp8() {
                format!(
                    "relative Frobenius error < {} against cublasGemmEx (fp32 compute) on exact 16-bit copies (the output's type) of fresh fp8 inputs (uniform [-1, 1) rounded to {}), alpha = {FP8_ALPHA}, output poisoned with NaN first",
                    self.timing.tolerance, self.problem.input
                )
            } else {
                format!(
                    "relative Frobenius error against cublasGemmEx (fp32 compute) < {} on fresh uniform [-1, 1) inputs, output poisoned with NaN first",
                    self.timing.tolerance
                )
            },
            "baseline": self.problem.baseline(),
            "cublas": "median of the medians of the baseline's timings taken before every candidate and at the end",
            "cublas_timings": self.cublas.len(),
            "isolation": "one worker process, restarted after a fault or a hang",
        });
        if let Some(r) = &self.worker.repack {
            method["repack"] = serde_json::json!({
                "operands": r.operands,
                "how": "copied into rows padded to 16 bytes before every launch, inside the timed region",
                "bytes": r.bytes,
                "copy_median_s": r.timing.median_s,
            });
        }
        method
    }
}

/// Progress of [`tune`].
#[derive(Clone, Debug)]
pub enum TuneEvent {
    Compiling {
        total: usize,
    },
    Compiled {
        done: usize,
        total: usize,
    },
    Benchmarking {
        total: usize,
    },
    Benchmarked {
        done: usize,
        total: usize,
    },
    /// A worker crashed or hung; a fresh one takes the next candidate.
    WorkerLost {
        candidate: String,
        reason: String,
    },
    /// The kernel cache's entry for a candidate could not be trusted; it is compiled again.
    CacheEntryRejected {
        candidate: String,
        defect: CacheDefect,
    },
}

/// A tuning run's inputs.
pub struct TuneJob<'a> {
    pub problem: GemmProblem,
    pub candidates: Vec<Candidate>,
    /// CUDA device ordinal.
    pub device: usize,
    pub cache: &'a KernelCache,
    pub timing: TimingOptions,
    /// Longest a worker may take to answer one candidate before it is killed.
    pub watchdog: Duration,
    pub compile_threads: usize,
}

/// Compiles, checks and times every candidate; `worker` builds the command that starts a
/// worker process (one that runs [`serve_worker`] on its stdin and stdout).
///
/// Errors are what stop the whole run (no GPU, not a Hopper GPU, the first worker cannot start);
/// a candidate's own failure is recorded in its report.
pub fn tune(
    job: &TuneJob<'_>,
    worker: &dyn Fn() -> Command,
    progress: &(dyn Fn(TuneEvent) + Sync),
) -> Result<TuneOutcome, GpuError> {
    let started = Instant::now();
    let specs: Vec<KernelSpec> = job.candidates.iter().map(|c| c.spec).collect();
    progress(TuneEvent::Compiling { total: specs.len() });
    let compiled = compile_all(&specs, Some(job.cache), job.compile_threads, &|e| match e {
        CompileEvent::Finished { done, total, .. } => progress(TuneEvent::Compiled { done, total }),
        CompileEvent::CacheEntryRejected { index, defect } => {
            progress(TuneEvent::CacheEntryRejected {
                candidate: specs[index].label(),
                defect,
            });
        }
    });
    let compile_wall_s = started.elapsed().as_secs_f64();

    let bench_started = Instant::now();
    let setup = Request::Setup {
        device: job.device,
        problem: job.problem,
        timing: job.timing.clone(),
    };
    let mut pool = process::WorkerPool::new(worker, setup);
    let info = pool.start()?;
    let mut cublas = Vec::new();
    // cuBLAS beside every candidate, or beside every few when there are many (--exhaustive).
    let cublas_stride = job.candidates.len().div_ceil(MAX_CUBLAS_TIMINGS).max(1);

    let mut reports = Vec::with_capacity(job.candidates.len());
    let mut best: Option<f64> = None;
    let total = job.candidates.len();
    progress(TuneEvent::Benchmarking { total });
    for (i, (cand, built)) in job.candidates.iter().zip(compiled).enumerate() {
        let mut report = CandidateReport {
            spec: cand.spec,
            model_rank: cand.model_rank,
            predicted_s: cand.predicted_s,
            compile: None,
            measured: None,
            failure: None,
        };
        match built {
            Err(e) => report.failure = Some(e.to_string()),
            Ok(kernel) => {
                report.compile = Some(CompileInfo {
                    registers: kernel.report.registers,
                    compile_s: kernel.compile_s,
                    from_cache: kernel.from_cache,
                });
                let cubin: PathBuf = kernel
                    .path
                    .clone()
                    .expect("kernels compiled through the cache have a path");
                if i % cublas_stride == 0 {
                    cublas.push(pool.cublas(job.watchdog)?);
                }
                let request = Request::Candidate {
                    cubin,
                    cubin_sha256: sha256_hex(&kernel.cubin),
                    spec: cand.spec,
                    best_s: best,
                };
                match pool.candidate(&request, job.watchdog)? {
                    Ok(m) => {
                        best = Some(best.map_or(m.timing.median_s, |b| b.min(m.timing.median_s)));
                        report.measured = Some(m);
                    }
                    Err(failure) => {
                        if failure.worker_lost {
                            progress(TuneEvent::WorkerLost {
                                candidate: cand.spec.label(),
                                reason: failure.reason.clone(),
                            });
                        }
                        report.failure = Some(failure.reason);
                    }
                }
            }
        }
        reports.push(report);
        progress(TuneEvent::Benchmarked { done: i + 1, total });
    }
    cublas.push(pool.cublas(job.watchdog)?);
    let worker_restarts = pool.restarts();
    pool.finish();

    let winner = reports
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.time_s().map(|t| (i, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i);
    Ok(TuneOutcome {
        problem: job.problem,
        worker: info,
        candidates: reports,
        cublas,
        winner,
        compile_wall_s,
        bench_wall_s: bench_started.elapsed().as_secs_f64(),
        worker_restarts,
        timing: job.timing.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(median_s: f64) -> Timing {
        Timing {
            median_s,
            min_s: median_s,
            max_s: median_s,
            runs: 10,
            early_stopped: false,
        }
    }

    #[test]
    fn cublas_time_is_the_median_of_its_interleaved_timings() {
        let mut o = TuneOutcome {
            problem: GemmProblem {
                m: 1,
                n: 1,
                k: 1,
                batch: 1,
                input: DType::Bf16,
                output: DType::Bf16,
                layout_b: Layout::Row,
            },
            worker: WorkerInfo {
                device_name: "test".into(),
                compute_capability: (9, 0),
                sms: 1,
                l2_bytes: 1,
                input_sets: 2,
                set_bytes: 4,
                repack: None,
            },
            candidates: Vec::new(),
            cublas: Vec::new(),
            winner: None,
            compile_wall_s: 0.0,
            bench_wall_s: 0.0,
            worker_restarts: 0,
            timing: TimingOptions::default(),
        };
        assert_eq!(o.cublas_s(), None);
        o.cublas = vec![timing(3.0), timing(1.0), timing(2.0)];
        assert_eq!(o.cublas_s(), Some(2.0));
        o.cublas.push(timing(10.0));
        assert_eq!(o.cublas_s(), Some(2.5));
        assert_eq!(o.method()["cublas_timings"], 4);
    }
}
