//! `carver tune` and `carver bench`: argument errors and the worker protocol anywhere; clean
//! failures on a machine without a GPU; on a Hopper GPU, real tuning runs (correctness against
//! cuBLAS, a stored winner answered from the database, ragged sizes and both B layouts, operands
//! whose rows are not 16-byte aligned).
//! GPU cases skip, saying why, where they cannot run.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use tempfile::TempDir;

mod common;
use common::{carver, carver_bin, text};

fn assert_no_panic(output: &Output, what: &str) {
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "{what}: {stderr}");
}

/// The detected GPU's compute capability when `carver arch detect` works here.
fn gpu_capability(cache: &Path) -> Option<String> {
    let out = carver(cache, &["arch", "detect", "--format", "json"])
        .output()
        .expect("carver runs");
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let cc = &v["gpus"][0]["arch"]["gpu"]["compute_capability"];
    Some(match cc {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// Whether this machine has a Hopper GPU; says why the test skips when not.
fn hopper_or_skip(cache: &Path) -> bool {
    match gpu_capability(cache) {
        None => {
            eprintln!("skipped: no GPU here");
            false
        }
        Some(cc) if !is_hopper(&cc) => {
            eprintln!("skipped: the GPU is compute capability {cc}, cuda-sm90 needs 9.0");
            false
        }
        Some(_) => true,
    }
}

fn is_hopper(cc: &str) -> bool {
    cc.contains("9.0") || cc.contains("\"major\":9") && cc.contains("\"minor\":0")
}

#[test]
fn bad_arguments_are_refused_before_any_gpu_work() {
    let cache = TempDir::new().unwrap();
    for (args, expect) in [
        (
            &[
                "tune", "--m", "64", "--n", "64", "--k", "64", "--dtype", "f32",
            ][..],
            "bf16, f16, e4m3 or e5m2",
        ),
        (
            &[
                "tune",
                "--m",
                "64",
                "--n",
                "64",
                "--k",
                "64",
                "--dtype",
                "e4m3",
                "--out-dtype",
                "e4m3",
            ][..],
            "writes bf16 or f16",
        ),
        (
            &[
                "tune", "--m", "64", "--n", "64", "--k", "64", "--layout", "cr",
            ],
            "`rr`",
        ),
        (&["tune", "--m", "64", "--n", "64"], "--k"),
        (
            &["tune", "--m", "64", "--n", "64", "--k", "64", "--topk", "0"],
            "accepted 1 to 1024",
        ),
        (&["bench", "--m", "64", "--n", "64"], "--k"),
        (
            &[
                "tune",
                "--m",
                "64",
                "--n",
                "64",
                "--k",
                "64",
                "--reference",
                "--exhaustive",
            ],
            "cannot be used with",
        ),
    ] {
        let out = carver(cache.path(), args).output().unwrap();
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert_no_panic(&out, &args.join(" "));
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
    }
}

#[test]
fn the_worker_answers_every_line_and_exits_on_request() {
    let cache = TempDir::new().unwrap();
    let out = carver(cache.path(), &["tune", "--worker"])
        .write_stdin(
            "{\"op\":\"cublas\"}\nthis is not json\n\n{\"op\":\"exit\"}\n{\"op\":\"cublas\"}\n",
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let replies: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0]["reply"], "error");
    assert!(replies[0]["message"].as_str().unwrap().contains("setup"));
    assert_eq!(replies[1]["reply"], "error");
    assert!(
        replies[1]["message"]
            .as_str()
            .unwrap()
            .contains("not a request")
    );
}

#[test]
fn without_a_gpu_tune_and_bench_fail_cleanly_and_store_nothing() {
    let cache = TempDir::new().unwrap();
    if gpu_capability(cache.path()).is_some() {
        eprintln!("skipped: this machine has a working GPU, so the no-GPU failure cannot be seen");
        return;
    }
    for args in [
        &["tune", "--m", "256", "--n", "256", "--k", "256"][..],
        &[
            "tune", "--m", "256", "--n", "256", "--k", "256", "--format", "json",
        ],
        &["bench", "--m", "256", "--n", "256", "--k", "256"],
    ] {
        let out = carver(cache.path(), args).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(
            stderr.contains("CUDA driver") || stderr.contains("no GPU"),
            "{args:?}: {stderr}"
        );
        assert_no_panic(&out, &args.join(" "));
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!cache.path().join("tuning.sqlite3").exists(), "{args:?}");
    }
    // A worker asked to set up says why it cannot, as a reply.
    let out = carver(cache.path(), &["tune", "--worker"])
        .write_stdin(
            "{\"op\":\"setup\",\"device\":0,\"problem\":{\"m\":64,\"n\":64,\"k\":64,\"input\":\"bf16\",\"output\":\"bf16\",\"layout_b\":\"row\"},\"timing\":{\"warmup_ms\":1,\"measure_ms\":1,\"min_runs\":1,\"max_runs\":2,\"early_stop_ratio\":1.5,\"tolerance\":0.01,\"l2_multiple\":2}}\n",
        )
        .output()
        .unwrap();
    let reply: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(reply["reply"], "error");
    assert!(
        reply["message"].as_str().unwrap().contains("CUDA driver")
            || reply["message"].as_str().unwrap().contains("no GPU"),
        "{reply}"
    );
}

/// Tunes on the GPU and returns the JSON report.
fn tune_json(cache: &Path, args: &[&str]) -> Value {
    let mut all = vec!["tune", "--format", "json"];
    all.extend_from_slice(args);
    let out = carver(cache, &all).output().unwrap();
    assert!(
        out.status.success(),
        "{all:?}: {}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn on_a_hopper_gpu_tuning_finds_a_correct_winner_and_stores_it() {
    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    // Sizes that are not multiples of any tile, both B layouts.
    for (m, n, k, layout) in [("1000", "1000", "1000", "rr"), ("777", "1232", "304", "rc")] {
        let report = tune_json(
            cache.path(),
            &[
                "--m", m, "--n", n, "--k", k, "--layout", layout, "--topk", "3",
            ],
        );
        let r = &report["results"][0];
        assert_eq!(r["source"], "tuned", "{r}");
        assert!(r["error"].is_null(), "{r}");
        assert!(r["winner_time_us"].as_f64().unwrap() > 0.0);
        assert!(r["cublas_time_us"].as_f64().unwrap() > 0.0);
        assert_eq!(r["stored"], "inserted");
        for c in r["candidates"].as_array().unwrap() {
            if let Some(d) = c.get("details").filter(|d| !d.is_null()) {
                assert!(d["rel_error"].as_f64().unwrap() < 1e-2, "{c}");
            }
        }
        // The same question again is answered from the tuning database.
        let again = tune_json(
            cache.path(),
            &[
                "--m", m, "--n", n, "--k", k, "--layout", layout, "--topk", "3",
            ],
        );
        let a = &again["results"][0];
        assert_eq!(a["source"], "database", "{a}");
        assert_eq!(a["winner"], r["winner"]);
    }
    // bench times the stored winner against cuBLAS.
    let out = carver(
        cache.path(),
        &[
            "bench", "--m", "1000", "--n", "1000", "--k", "1000", "--format", "json",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["config_source"], "database");
    assert!(b["measured_time_us"].as_f64().unwrap() > 0.0);
}

/// A candidate that faults and one that hangs are recorded as failures, their workers replaced,
/// and the run goes on to time the next candidate. The two bad kernels are planted in the
/// kernel cache under the keys of two legal configurations, so the real loop picks them up.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_a_faulting_or_hanging_candidate_does_not_end_the_run() {
    use carver::family::Sm90Params;
    use carver::{DType, Layout};
    use carver_gpu::sm90::{CompiledKernel, KernelCache, PtxasReport, compile_source};
    use carver_gpu::tune::{Candidate, GemmProblem, TimingOptions, TuneJob, tune};

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let kernels = KernelCache::new(cache.path()).unwrap();
    let problem = GemmProblem {
        m: 512,
        n: 512,
        k: 512,
        batch: 1,
        input: DType::Bf16,
        output: DType::Bf16,
        layout_b: Layout::Row,
    };
    let spec = |stages: u32| {
        problem.spec(Sm90Params {
            block_m: 128,
            block_n: 128,
            block_k: 64,
            stages,
            consumers: 1,
            group_m: 1,
            cluster_m: 1,
            persistent: false,
            split_k: 1,
            swap_ab: false,
        })
    };
    let (trap, hang, good) = (spec(3), spec(4), spec(5));
    for (s, body) in [
        (trap, "asm volatile(\"trap;\");"),
        (hang, "for (;;) { asm volatile(\"nanosleep.u32 1000;\"); }"),
    ] {
        let source = format!(
            "struct __align__(64) TmaMap {{ unsigned long long w[16]; }};\n\
             extern \"C\" __global__ void carver_sm90_gemm(const __grid_constant__ TmaMap a, \
             const __grid_constant__ TmaMap b, unsigned short* c, float* partials, int m, int n, int k, \
             int batch) {{ {body} }}\n"
        );
        let (cubin, log) = compile_source(&source, "planted").unwrap();
        let mut k = CompiledKernel {
            spec: s,
            cubin,
            report: PtxasReport::default(),
            log,
            compile_s: 0.0,
            from_cache: false,
            path: None,
        };
        kernels.store(&mut k).unwrap();
    }
    let job = TuneJob {
        problem,
        candidates: [trap, hang, good]
            .into_iter()
            .enumerate()
            .map(|(i, spec)| Candidate {
                spec,
                model_rank: i as u32 + 1,
                predicted_s: 1e-5,
            })
            .collect(),
        device: 0,
        cache: &kernels,
        timing: TimingOptions::default(),
        watchdog: std::time::Duration::from_secs(8),
        compile_threads: 2,
    };
    let bin = carver_bin();
    let worker = || {
        let mut c = std::process::Command::new(&bin);
        c.args(["tune", "--worker"]);
        c
    };
    let outcome = tune(&job, &worker, &|_| {}).unwrap();
    let c = &outcome.candidates;
    eprintln!("trap: {:?}", c[0].failure);
    eprintln!("hang: {:?}", c[1].failure);
    assert!(c[0].measured.is_none());
    assert!(
        c[0].failure.as_ref().unwrap().contains("context"),
        "{:?}",
        c[0].failure
    );
    assert!(c[1].measured.is_none());
    assert!(
        c[1].failure.as_ref().unwrap().contains("no answer within"),
        "{:?}",
        c[1].failure
    );
    assert!(c[2].failure.is_none(), "{:?}", c[2].failure);
    assert!(c[2].measured.as_ref().unwrap().rel_error < 1e-2);
    assert_eq!(outcome.winner, Some(2));
    assert_eq!(outcome.worker_restarts, 2);
}

/// Tunes explicit cuda-sm90 configurations `(block_m, block_n, stages, consumers, cluster_m,
/// persistent)` of `problem` in worker processes, with timing cut to a few runs: the GPU tests
/// that use it check results, not speed.
#[cfg(feature = "gpu")]
fn tune_configs(
    problem: carver_gpu::tune::GemmProblem,
    configs: &[(u32, u32, u32, u32, u32, bool)],
    kernels: &carver_gpu::sm90::KernelCache,
) -> carver_gpu::tune::TuneOutcome {
    let params = configs
        .iter()
        .map(
            |&(block_m, block_n, stages, consumers, cluster_m, persistent)| {
                sm90_params(
                    block_m, block_n, stages, consumers, cluster_m, persistent, 1,
                )
            },
        )
        .collect::<Vec<_>>();
    tune_params(problem, &params, kernels)
}

#[cfg(feature = "gpu")]
fn sm90_params(
    block_m: u32,
    block_n: u32,
    stages: u32,
    consumers: u32,
    cluster_m: u32,
    persistent: bool,
    split_k: u32,
) -> carver::family::Sm90Params {
    carver::family::Sm90Params {
        block_m,
        block_n,
        block_k: 64,
        stages,
        consumers,
        group_m: 8,
        cluster_m,
        persistent,
        split_k,
        swap_ab: false,
    }
}

/// [`tune_configs`] for whole parameter sets.
#[cfg(feature = "gpu")]
fn tune_params(
    problem: carver_gpu::tune::GemmProblem,
    params: &[carver::family::Sm90Params],
    kernels: &carver_gpu::sm90::KernelCache,
) -> carver_gpu::tune::TuneOutcome {
    use carver_gpu::tune::{Candidate, TimingOptions, TuneJob, tune};

    let bin = carver_bin();
    let worker = || {
        let mut c = std::process::Command::new(&bin);
        c.args(["tune", "--worker"]);
        c
    };
    let candidates = params
        .iter()
        .enumerate()
        .map(|(i, &params)| Candidate {
            spec: problem.spec(params),
            model_rank: i as u32 + 1,
            predicted_s: 1e-5,
        })
        .collect();
    let job = TuneJob {
        problem,
        candidates,
        device: 0,
        cache: kernels,
        timing: TimingOptions {
            warmup_ms: 1.0,
            measure_ms: 1.0,
            min_runs: 1,
            max_runs: 3,
            l2_multiple: 0.0,
            ..TimingOptions::default()
        },
        watchdog: std::time::Duration::from_secs(30),
        compile_threads: 4,
    };
    tune(&job, &worker, &|_| {}).unwrap()
}

/// Every path of the kernel's epilogue against cuBLAS: ragged M and N with rows of C that start
/// on 16-, 4- and 2-byte boundaries (N = 1000, 1002, 1001), column chunks of 16 to 64, tiles
/// whose last chunks lie wholly past N, 1 to 4 m-slabs, 1 or 2 consumers, clusters, persistent
/// grids, both B layouts, bf16 and f16. Timing is cut to a few runs: this is about correctness.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_every_epilogue_path_matches_cublas() {
    use carver::{DType, Layout};
    use carver_gpu::sm90::KernelCache;
    use carver_gpu::tune::GemmProblem;

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let kernels = KernelCache::new(cache.path()).unwrap();
    // (block_m, block_n, stages, consumers, cluster_m, persistent)
    let row_major_b: &[(u32, u32, u32, u32, u32, bool)] = &[
        (128, 256, 4, 2, 1, true),
        (256, 128, 4, 2, 2, true),
        (128, 192, 5, 2, 2, false),
        (64, 64, 8, 1, 1, false),
        (256, 64, 4, 1, 1, false),
        (192, 128, 4, 1, 1, true),
    ];
    let col_major_b: &[(u32, u32, u32, u32, u32, bool)] = &[
        (128, 144, 5, 2, 1, false),
        (128, 176, 4, 2, 2, true),
        (256, 96, 3, 1, 1, false),
        (64, 16, 4, 1, 1, true),
        (128, 80, 4, 1, 2, false),
        (256, 128, 4, 2, 2, true),
    ];
    let problems = [
        (777, 1000, 304, Layout::Row, DType::Bf16, row_major_b),
        (333, 1002, 200, Layout::Col, DType::F16, col_major_b),
        (333, 1001, 136, Layout::Col, DType::Bf16, col_major_b),
    ];
    let mut failures = Vec::new();
    for (m, n, k, layout_b, dtype, configs) in problems {
        let problem = GemmProblem {
            m,
            n,
            k,
            batch: 1,
            input: dtype,
            output: dtype,
            layout_b,
        };
        let outcome = tune_configs(problem, configs, &kernels);
        // Aligned operands are read in place: no copies.
        assert!(outcome.worker.repack.is_none(), "{m}x{n}x{k}");
        for c in &outcome.candidates {
            let what = format!("{m}x{n}x{k} {}", c.spec.label());
            match (&c.measured, &c.failure) {
                (Some(meas), _) => eprintln!("{what}: relative error {:.2e}", meas.rel_error),
                (None, failure) => failures.push(format!("{what}: {failure:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Split-K and batches against cuBLAS: K shared by 2 to 7 blocks per tile with shares of
/// unequal length, decode (M = 1) and ragged M and N, with clusters and persistent grids; then
/// batches of 3 and 4 matrices with and without a split, aligned and repacked. Then the CLI:
/// `carver tune --batch` tunes a batched shape and stores it under its batch.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_split_k_and_batches_match_cublas() {
    use carver::{DType, Layout};
    use carver_gpu::sm90::KernelCache;
    use carver_gpu::tune::GemmProblem;

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let kernels = KernelCache::new(cache.path()).unwrap();
    let p = sm90_params;
    let row_major_b = [
        p(64, 64, 4, 1, 1, false, 2),
        p(64, 128, 6, 1, 1, true, 3),
        p(128, 256, 4, 2, 1, true, 4),
        p(128, 128, 4, 1, 2, false, 7),
    ];
    let col_major_b = [
        p(64, 16, 4, 1, 1, false, 5),
        p(64, 96, 6, 1, 1, true, 2),
        p(128, 144, 4, 2, 2, true, 3),
        p(64, 64, 4, 1, 1, false, 1),
    ];
    // (m, n, k, batch, B layout, dtype, configs)
    let problems = [
        (1, 1000, 4096, 1, Layout::Row, DType::Bf16, &row_major_b),
        (1, 1000, 4096, 1, Layout::Col, DType::Bf16, &col_major_b),
        (333, 1002, 3001, 1, Layout::Col, DType::F16, &col_major_b),
        (777, 1024, 2000, 1, Layout::Row, DType::F16, &row_major_b),
        (333, 1000, 1000, 3, Layout::Row, DType::Bf16, &row_major_b),
        (96, 1001, 1001, 4, Layout::Col, DType::Bf16, &col_major_b),
    ];
    let mut failures = Vec::new();
    for (m, n, k, batch, layout_b, dtype, configs) in problems {
        let problem = GemmProblem {
            m,
            n,
            k,
            batch,
            input: dtype,
            output: dtype,
            layout_b,
        };
        let outcome = tune_params(problem, configs, &kernels);
        for c in &outcome.candidates {
            let what = format!("{batch} x {m}x{n}x{k} {}", c.spec.label());
            match (&c.measured, &c.failure) {
                (Some(meas), _) => eprintln!("{what}: relative error {:.2e}", meas.rel_error),
                (None, failure) => failures.push(format!("{what}: {failure:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let dims = [
        "--m", "256", "--n", "512", "--k", "1024", "--batch", "6", "--topk", "2",
    ];
    let report = tune_json(cache.path(), &dims);
    let r = &report["results"][0];
    assert_eq!(r["source"], "tuned", "{r}");
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["shape"]["batch"], 6, "{r}");
    assert_eq!(r["stored"], "inserted", "{r}");
    let again = tune_json(cache.path(), &dims);
    assert_eq!(again["results"][0]["source"], "database", "{again}");
    // Another batch is another problem.
    let dims = [
        "--m", "256", "--n", "512", "--k", "1024", "--batch", "2", "--topk", "1",
    ];
    assert_eq!(
        tune_json(cache.path(), &dims)["results"][0]["source"],
        "tuned"
    );
}

/// fp8 (e4m3 and e5m2 inputs, B stored N x K, bf16 and f16 out) against cuBLAS on exact bf16
/// copies of the inputs, with the per-tensor scale applied: ragged M and N, splits, clusters,
/// persistent grids and a batch. Then the CLI: `carver tune --dtype e4m3 --out-dtype bf16
/// --layout rc` tunes against cuBLASLt's fp8 GEMM and stores the result under its types.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_fp8_matches_the_reference() {
    use carver::{DType, Layout};
    use carver_gpu::sm90::KernelCache;
    use carver_gpu::tune::GemmProblem;

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let kernels = KernelCache::new(cache.path()).unwrap();
    let fp8 = |block_m, block_n, stages, consumers, cluster_m, persistent, split_k| {
        carver::family::Sm90Params {
            block_k: 128,
            ..sm90_params(
                block_m, block_n, stages, consumers, cluster_m, persistent, split_k,
            )
        }
    };
    let configs = [
        fp8(128, 256, 4, 2, 1, true, 1),
        fp8(128, 128, 5, 1, 2, false, 1),
        fp8(64, 64, 6, 1, 1, false, 4),
        fp8(256, 128, 3, 2, 2, true, 2),
        fp8(64, 144, 4, 1, 1, true, 3),
    ];
    // (m, n, k, batch, input, output)
    let problems = [
        (777, 1000, 1024, 1, DType::E4m3, DType::Bf16),
        (333, 1002, 2048, 1, DType::E5m2, DType::F16),
        (1, 4096, 4096, 1, DType::E4m3, DType::Bf16),
        (96, 520, 512, 3, DType::E4m3, DType::Bf16),
    ];
    let mut failures = Vec::new();
    for (m, n, k, batch, input, output) in problems {
        let problem = GemmProblem {
            m,
            n,
            k,
            batch,
            input,
            output,
            layout_b: Layout::Col,
        };
        let outcome = tune_params(problem, &configs, &kernels);
        assert!(outcome.cublas_s().is_some(), "no baseline timing");
        for c in &outcome.candidates {
            let what = format!("{batch} x {m}x{n}x{k} {} -> {output}", c.spec.label());
            match (&c.measured, &c.failure) {
                (Some(meas), _) => eprintln!("{what}: relative error {:.2e}", meas.rel_error),
                (None, failure) => failures.push(format!("{what}: {failure:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let dims = [
        "--m",
        "512",
        "--n",
        "1024",
        "--k",
        "2048",
        "--dtype",
        "e4m3",
        "--out-dtype",
        "bf16",
        "--layout",
        "rc",
        "--topk",
        "2",
    ];
    let report = tune_json(cache.path(), &dims);
    let r = &report["results"][0];
    assert_eq!(r["source"], "tuned", "{r}");
    assert!(r["error"].is_null(), "{r}");
    assert!(r["speedup_vs_cublas"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["stored"], "inserted", "{r}");
    // B stored K x N cannot run in fp8: refused, saying how to store it.
    let out = carver(
        cache.path(),
        &[
            "tune", "--m", "512", "--n", "1024", "--k", "2048", "--dtype", "e4m3",
        ],
    )
    .output()
    .unwrap();
    // The shape's error is in its table row; the exit status says a shape failed.
    assert!(!out.status.success());
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("layout `rc`"), "{}", said);
}

/// The swapped path (A and B swapped in the wgmma: block M of 8 to 256 is its N) against the
/// reference: decode and ragged M across several tile rows, rows of C on 16-, 4- and 2-byte
/// boundaries (N = 1000, 1002, 1001), one and two consumers, both B layouts, splits, persistent
/// grids, clusters of two sharing B (one CTA past M when M fits one tile), a batch, bf16, f16 and
/// fp8 e4m3 with its scale.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_the_small_m_path_matches_the_reference() {
    use carver::{DType, Layout};
    use carver_gpu::sm90::KernelCache;
    use carver_gpu::tune::GemmProblem;

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let kernels = KernelCache::new(cache.path()).unwrap();
    let swapped = |block_m, block_n, stages, consumers, cluster_m, persistent, split_k, block_k| {
        carver::family::Sm90Params {
            swap_ab: true,
            block_k,
            ..sm90_params(
                block_m, block_n, stages, consumers, cluster_m, persistent, split_k,
            )
        }
    };
    let sixteen_bit = [
        swapped(8, 128, 12, 1, 1, false, 1, 64),
        swapped(16, 256, 6, 2, 1, true, 1, 64),
        swapped(32, 128, 8, 2, 1, false, 3, 64),
        swapped(64, 64, 6, 1, 1, true, 4, 64),
        swapped(64, 256, 4, 2, 1, false, 1, 64),
        swapped(64, 128, 8, 1, 2, false, 1, 64),
        swapped(32, 256, 6, 2, 2, true, 2, 64),
        swapped(80, 192, 6, 1, 2, false, 1, 64),
        swapped(176, 128, 5, 2, 1, true, 2, 64),
    ];
    let fp8 = [
        swapped(8, 128, 8, 1, 1, false, 2, 128),
        swapped(32, 256, 4, 2, 1, true, 1, 128),
        swapped(16, 64, 10, 1, 1, false, 1, 128),
        swapped(64, 128, 6, 1, 2, true, 1, 128),
    ];
    // (m, n, k, batch, B layout, input, output, configs)
    let problems = [
        (
            1,
            1000,
            4096,
            1,
            Layout::Row,
            DType::Bf16,
            DType::Bf16,
            &sixteen_bit[..],
        ),
        (
            17,
            1002,
            2000,
            1,
            Layout::Col,
            DType::F16,
            DType::F16,
            &sixteen_bit[..],
        ),
        (
            100,
            1001,
            1024,
            1,
            Layout::Col,
            DType::Bf16,
            DType::Bf16,
            &sixteen_bit[..],
        ),
        (
            333,
            1024,
            512,
            3,
            Layout::Row,
            DType::Bf16,
            DType::Bf16,
            &sixteen_bit[..],
        ),
        (
            1,
            4096,
            4096,
            1,
            Layout::Col,
            DType::E4m3,
            DType::Bf16,
            &fp8[..],
        ),
        (
            40,
            1000,
            1024,
            2,
            Layout::Col,
            DType::E4m3,
            DType::Bf16,
            &fp8[..],
        ),
    ];
    let mut failures = Vec::new();
    for (m, n, k, batch, layout_b, input, output, configs) in problems {
        let problem = GemmProblem {
            m,
            n,
            k,
            batch,
            input,
            output,
            layout_b,
        };
        let outcome = tune_params(problem, configs, &kernels);
        for c in &outcome.candidates {
            assert!(c.spec.params.swap_ab, "{}", c.spec.label());
            let what = format!("{batch} x {m}x{n}x{k} {} -> {output}", c.spec.label());
            match (&c.measured, &c.failure) {
                (Some(meas), _) => eprintln!("{what}: relative error {:.2e}", meas.rel_error),
                (None, failure) => failures.push(format!("{what}: {failure:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Operands whose rows are not 16-byte aligned are copied into padded rows before every launch:
/// A alone (K = 1001), row-major B alone (N = 777), both (row-major B with K = 999 and N = 777,
/// or K = 3001 and N = 2049; column-major B with K = 1003 or 998), bf16 and f16, clusters and
/// persistent grids, every candidate against cuBLAS. The padding of a copy holds other values
/// of the operand, so a kernel that read it would fail the check. Then the CLI: `carver tune`
/// reports the repack, stores the winner, and `carver bench` times it again.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_unaligned_operands_are_repacked_and_match_cublas() {
    use carver::{DType, Layout};
    use carver_gpu::sm90::KernelCache;
    use carver_gpu::tune::GemmProblem;

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let kernels = KernelCache::new(cache.path()).unwrap();
    // (block_m, block_n, stages, consumers, cluster_m, persistent)
    let row_major_b: &[(u32, u32, u32, u32, u32, bool)] = &[
        (128, 256, 4, 2, 1, true),
        (256, 128, 4, 2, 2, true),
        (128, 192, 5, 2, 2, false),
        (64, 64, 8, 1, 1, false),
    ];
    let col_major_b: &[(u32, u32, u32, u32, u32, bool)] = &[
        (128, 144, 5, 2, 1, false),
        (128, 176, 4, 2, 2, true),
        (64, 16, 4, 1, 1, true),
        (256, 128, 4, 2, 2, true),
    ];
    // (m, n, k, B layout, dtype, configs, operands copied)
    let problems = [
        (333, 1024, 1001, Layout::Row, DType::Bf16, row_major_b, "A"),
        (777, 777, 512, Layout::Row, DType::F16, row_major_b, "B"),
        (333, 777, 999, Layout::Row, DType::Bf16, row_major_b, "A B"),
        (
            1537,
            2049,
            3001,
            Layout::Row,
            DType::F16,
            row_major_b,
            "A B",
        ),
        (
            333,
            1000,
            1003,
            Layout::Col,
            DType::Bf16,
            col_major_b,
            "A B",
        ),
        (777, 1001, 998, Layout::Col, DType::F16, col_major_b, "A B"),
    ];
    let mut failures = Vec::new();
    for (m, n, k, layout_b, dtype, configs, copied) in problems {
        let problem = GemmProblem {
            m,
            n,
            k,
            batch: 1,
            input: dtype,
            output: dtype,
            layout_b,
        };
        let outcome = tune_configs(problem, configs, &kernels);
        let repack = outcome.worker.repack.as_ref().expect("a repack");
        assert_eq!(repack.operands.join(" "), copied, "{m}x{n}x{k}");
        assert!(repack.timing.median_s > 0.0);
        for c in &outcome.candidates {
            let what = format!("{m}x{n}x{k} {}", c.spec.label());
            match (&c.measured, &c.failure) {
                (Some(meas), _) => eprintln!(
                    "{what}: relative error {:.2e}, {:.1} us with the copies ({:.1} us alone)",
                    meas.rel_error,
                    meas.timing.median_s * 1e6,
                    repack.timing.median_s * 1e6
                ),
                (None, failure) => failures.push(format!("{what}: {failure:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The CLI path: the recommender accepts the shape, the worker repacks, the result is stored.
    let dims = ["--m", "333", "--n", "777", "--k", "999", "--topk", "3"];
    let report = tune_json(cache.path(), &dims);
    let r = &report["results"][0];
    assert_eq!(r["source"], "tuned", "{r}");
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(
        r["repack"]["operands"],
        serde_json::json!(["A", "B"]),
        "{r}"
    );
    assert!(r["repack"]["time_us"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["stored"], "inserted");
    for c in r["candidates"].as_array().unwrap() {
        if let Some(d) = c.get("details").filter(|d| !d.is_null()) {
            assert!(d["rel_error"].as_f64().unwrap() < 1e-2, "{c}");
        }
    }
    let again = tune_json(cache.path(), &dims);
    assert_eq!(again["results"][0]["source"], "database");
    assert_eq!(again["results"][0]["repack"], r["repack"]);
    let out = carver(
        cache.path(),
        &[
            "bench", "--m", "333", "--n", "777", "--k", "999", "--format", "json",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["config_source"], "database");
    assert!(b["measured_time_us"].as_f64().unwrap() > 0.0);
    assert!(b["details"]["rel_error"].as_f64().unwrap() < 1e-2, "{b}");
    assert_eq!(
        b["repack"]["operands"],
        serde_json::json!(["A", "B"]),
        "{b}"
    );
}

#[test]
fn tune_emit_refuses_a_file_and_without_a_gpu_fails_cleanly_writing_nothing() {
    let cache = TempDir::new().unwrap();
    let dir = TempDir::new().unwrap();
    // A file where the directory should be: refused before any GPU work, GPU or not.
    let file = dir.path().join("a_file");
    std::fs::write(&file, "x").unwrap();
    let out = carver(
        cache.path(),
        &[
            "tune",
            "--m",
            "256",
            "--n",
            "256",
            "--k",
            "256",
            "--emit",
            file.to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: --emit: "), "{stderr}");
    assert!(stderr.contains("not a directory"), "{stderr}");
    assert_no_panic(&out, "tune --emit FILE");
    assert!(out.stdout.is_empty());
    assert!(!cache.path().join("tuning.sqlite3").exists());

    if gpu_capability(cache.path()).is_some() {
        eprintln!("skipped the no-GPU half: this machine has a working GPU");
        return;
    }
    let target = dir.path().join("kernels");
    for format in ["table", "json"] {
        let out = carver(
            cache.path(),
            &[
                "tune",
                "--m",
                "1",
                "--n",
                "4096",
                "--k",
                "8192",
                "--format",
                format,
                "--emit",
                target.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{format}: {stderr}");
        assert!(stderr.starts_with("error: "), "{format}: {stderr}");
        assert!(
            stderr.contains("CUDA driver") || stderr.contains("no GPU"),
            "{format}: {stderr}"
        );
        assert_no_panic(&out, "tune --emit DIR");
        assert!(out.stdout.is_empty(), "{format}");
        assert!(!target.exists(), "{format}: the emit directory was created");
        assert!(!cache.path().join("tuning.sqlite3").exists());
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only the planted file"
    );
}

/// Runs `carver tune --format json ARGS` and returns its exit status and report (the report is
/// printed even when the status says a shape failed).
fn tune_json_status(cache: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["tune", "--format", "json"];
    all.extend_from_slice(args);
    let out = carver(cache, &all).output().unwrap();
    assert_no_panic(&out, &all.join(" "));
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{all:?}: not JSON ({e}): {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// The launch.json of an emit, checked against the files beside it: every kernel's cubin is
/// there, an ELF image with the recorded hash, and so is its source.
fn check_emitted(emit: &Value) -> carver_schema::EmittedKernel {
    assert!(emit["error"].is_null(), "{emit}");
    let dir = Path::new(emit["directory"].as_str().unwrap());
    let doc: carver_schema::EmittedKernel =
        serde_json::from_slice(&std::fs::read(dir.join("launch.json")).unwrap()).unwrap();
    for k in &doc.kernels {
        let cubin = std::fs::read(dir.join(&k.cubin_file)).unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF", "{}", k.cubin_file);
        assert!(dir.join(&k.source_file).is_file(), "{}", k.source_file);
        assert!(k.grid[0] >= 1 && k.grid[0] % k.cluster[0] == 0, "{k:?}");
    }
    let split = doc.config["split_k"].as_u64().unwrap_or(1) > 1;
    assert_eq!(
        doc.kernels.len(),
        if split { 2 } else { 1 },
        "{}",
        doc.label
    );
    assert_eq!(dir.join("splitk_reduce.cubin").is_file(), split);
    doc
}

/// The example that launches an emitted kernel from Python, when this machine has torch with
/// CUDA and the repository's examples are here (run.sh runs it too).
fn launch_from_python(launch: &Path) {
    let example = ["examples/emit/launch_emitted.py"]
        .iter()
        .map(std::path::PathBuf::from)
        .chain(
            [Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/emit/launch_emitted.py")],
        )
        .find(|p| p.is_file());
    let Some(example) = example else {
        eprintln!("skipped the Python launch: examples/emit is not here");
        return;
    };
    let torch = std::process::Command::new("python3")
        .args(["-c", "import torch; assert torch.cuda.is_available()"])
        .output();
    if !torch.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped the Python launch: no python3 with torch and CUDA");
        return;
    }
    let out = std::process::Command::new("python3")
        .arg(&example)
        .arg(launch)
        .args(["--runs", "5"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    eprintln!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{}", launch.display());
    assert!(text(&out.stdout).starts_with("ok: "));
}

/// `carver tune --emit`: a split-K decode shape and a batched one are written with their
/// cubins and launch.json; the same shape again is answered from the database, its winner run
/// again for the grid and written again; a shape whose rows need the padded copies keeps its
/// result but is not emitted, and the command says so with its exit status. Then a split-K
/// configuration, measured on the GPU, is emitted through the library with both kernels.
#[cfg(feature = "gpu")]
#[test]
fn on_a_hopper_gpu_tune_emit_writes_the_winner_for_other_programs() {
    use carver::{DType, Layout};
    use carver_gpu::sm90::{EmitInputs, KernelCache, emit};
    use carver_gpu::tune::GemmProblem;
    use carver_schema::EmitDevice;

    let cache = TempDir::new().unwrap();
    if !hopper_or_skip(cache.path()) {
        return;
    }
    let out_dir = TempDir::new().unwrap();
    let emit_dir = out_dir.path().to_str().unwrap();
    let decode = [
        "--m", "1", "--n", "4096", "--k", "8192", "--topk", "4", "--emit", emit_dir,
    ];
    let (status, report) = tune_json_status(cache.path(), &decode);
    let r = &report["results"][0];
    assert_eq!(status, Some(0), "{r}");
    assert_eq!(r["source"], "tuned", "{r}");
    assert_eq!(r["emit"]["rerun"], false, "{r}");
    assert_eq!(
        r["emit"]["directory"],
        out_dir.path().join("1x4096x8192_bf16_rr").to_str().unwrap()
    );
    let doc = check_emitted(&r["emit"]);
    assert_eq!(Some(&doc.config), r.get("winner"));
    assert_eq!(
        (doc.problem.m, doc.problem.n, doc.problem.k),
        (1, 4096, 8192)
    );
    launch_from_python(&out_dir.path().join("1x4096x8192_bf16_rr/launch.json"));

    // From the database: run again for its grid, and written again over the first emit.
    let (status, again) = tune_json_status(cache.path(), &decode);
    let a = &again["results"][0];
    assert_eq!(status, Some(0), "{a}");
    assert_eq!(a["source"], "database", "{a}");
    assert_eq!(a["emit"]["rerun"], true, "{a}");
    assert_eq!(check_emitted(&a["emit"]).config, doc.config);

    let batched = [
        "--m", "512", "--n", "512", "--k", "256", "--batch", "4", "--topk", "2", "--emit", emit_dir,
    ];
    let (status, report) = tune_json_status(cache.path(), &batched);
    let r = &report["results"][0];
    assert_eq!(status, Some(0), "{r}");
    let doc = check_emitted(&r["emit"]);
    assert_eq!(doc.problem.batch, 4);
    let a_map = doc.kernels[0].params[0].tensor_map.as_ref().unwrap();
    assert_eq!(a_map.global_dim, [256, 512, 4]);
    launch_from_python(
        &out_dir
            .path()
            .join("512x512x256_batch4_bf16_rr/launch.json"),
    );

    // Rows of B (N = 777) that TMA cannot describe: tuned and stored, not emitted.
    let unaligned = [
        "--m", "64", "--n", "777", "--k", "1024", "--topk", "1", "--emit", emit_dir,
    ];
    let (status, report) = tune_json_status(cache.path(), &unaligned);
    let r = &report["results"][0];
    assert_eq!(status, Some(1), "{r}");
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["stored"], "inserted", "{r}");
    let why = r["emit"]["error"].as_str().unwrap();
    assert!(why.contains("16-byte-aligned"), "{why}");
    assert!(!out_dir.path().join("64x777x1024_bf16_rr").exists());

    // A winner measured here with everything at once (split-K, clusters of 2, a persistent
    // grid, a batch, column-major B), emitted with its reduction.
    let kernels = KernelCache::new(cache.path()).unwrap();
    let problem = GemmProblem {
        m: 256,
        n: 1024,
        k: 4096,
        batch: 2,
        input: DType::Bf16,
        output: DType::Bf16,
        layout_b: Layout::Col,
    };
    let params = sm90_params(128, 128, 4, 1, 2, true, 3);
    let outcome = tune_params(problem, &[params], &kernels);
    let winner = &outcome.candidates[0];
    let measured = winner
        .measured
        .as_ref()
        .expect("the split-K candidate runs");
    let inputs = EmitInputs {
        spec: winner.spec,
        dims: problem.dims(),
        device: EmitDevice {
            name: outcome.worker.device_name.clone(),
            compute_capability: "9.0".into(),
            sm_count: outcome.worker.sms,
        },
        grid: measured.grid,
        blocks_per_sm: measured.blocks_per_sm,
        measured_time_s: Some(measured.timing.median_s),
        cublas_time_s: outcome.cublas_s(),
    };
    let written = emit(out_dir.path(), &kernels, &inputs, &|_| {}).unwrap();
    let emitted = serde_json::json!({
        "directory": written.directory.to_str().unwrap(),
        "error": null,
    });
    let doc = check_emitted(&emitted);
    assert_eq!(doc.kernels[1].entry_point, "carver_sm90_splitk_reduce");
    assert_eq!(doc.kernels[0].cluster, [2, 1, 1]);
    assert_eq!(doc.workspace_bytes, 2 * 3 * 256 * 1024 * 4);
    launch_from_python(&written.directory.join("launch.json"));
}
