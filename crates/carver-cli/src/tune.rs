//! `carver tune` and `carver bench`: the empirical loop on this machine's GPU.
//!
//! `carver tune` ranks the `cuda-sm90` family with the cost model, compiles the top-k (or, with
//! `--exhaustive`, every legal configuration) with NVRTC, checks each against cuBLAS and times
//! the survivors beside cuBLAS in a worker process (`carver tune --worker`, hidden), then stores
//! the winner in the tuning database. A result already in the database is answered from there
//! (`--retune` measures again). `carver bench` times one configuration, or the stored winner,
//! against cuBLAS.

use std::path::PathBuf;
use std::process::ExitCode;

use carver::{DType, Layout};
use clap::Args;

use crate::Globals;
use crate::output::Format;

#[derive(Debug, Args)]
pub struct TuneArgs {
    #[arg(long, required_unless_present_any = ["shapes", "worker"])]
    pub m: Option<u64>,
    #[arg(long, required_unless_present_any = ["shapes", "worker"])]
    pub n: Option<u64>,
    #[arg(long, required_unless_present_any = ["shapes", "worker"])]
    pub k: Option<u64>,
    /// Input dtype of A and B (the output has the same type): bf16 or f16.
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Storage order of A and B: `rr` (B is K x N) or `rc` (B is N x K, K contiguous).
    #[arg(long, default_value = "rr", value_parser = parse_layout)]
    pub layout: (Layout, Layout),
    /// How many of the model's best configurations to try.
    #[arg(long, default_value_t = 8)]
    pub topk: usize,
    /// Try every legal configuration of the family instead of the top-k.
    #[arg(long)]
    pub exhaustive: bool,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Many shapes: JSON (like eval/dev-shapes.json) or CSV with M,N,K columns.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["m", "n", "k"])]
    pub shapes: Option<PathBuf>,
    /// Measure again even when the tuning database already has a result.
    #[arg(long)]
    pub retune: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Seconds a candidate may take (check and timing) before its worker is killed.
    #[arg(long, default_value_t = 60)]
    pub watchdog_s: u64,
    /// Serve one tuning worker on stdin/stdout (used by `carver tune` itself).
    #[arg(long, hide = true)]
    pub worker: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[arg(long)]
    pub m: u64,
    #[arg(long)]
    pub n: u64,
    #[arg(long)]
    pub k: u64,
    #[arg(long, default_value = "bf16", value_parser = parse_dtype)]
    pub dtype: DType,
    #[arg(long, default_value = "rr", value_parser = parse_layout)]
    pub layout: (Layout, Layout),
    /// The configuration in cuda-sm90's own terms, e.g. `{"block_m":128,"block_n":256,
    /// "block_k":64,"stages":4,"consumers":2,"group_m":8,"cluster_m":1,"persistent":true}`
    /// (default: the tuning database's winner for this shape on this GPU).
    #[arg(long, value_name = "JSON")]
    pub config: Option<String>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    #[arg(long, default_value_t = 60)]
    pub watchdog_s: u64,
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    let t: DType = s.parse()?;
    if matches!(t, DType::Bf16 | DType::F16) {
        Ok(t)
    } else {
        Err(format!(
            "dtype `{s}`: carver's native kernel family (cuda-sm90) takes bf16 or f16"
        ))
    }
}

fn parse_layout(s: &str) -> Result<(Layout, Layout), String> {
    match s.to_ascii_lowercase().as_str() {
        "rr" => Ok((Layout::Row, Layout::Row)),
        "rc" => Ok((Layout::Row, Layout::Col)),
        _ => Err(format!(
            "layout `{s}`: cuda-sm90 takes `rr` (A row-major, B row-major K x N) or `rc` (B column-major, stored N x K)"
        )),
    }
}

pub fn run_tune(args: TuneArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "gpu")]
    {
        live::tune(args, globals)
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (args, globals);
        anyhow::bail!("`carver tune` is not available: {NO_GPU_SUPPORT}")
    }
}

pub fn run_bench(args: BenchArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "gpu")]
    {
        live::bench(args, globals)
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (args, globals);
        anyhow::bail!("`carver bench` is not available: {NO_GPU_SUPPORT}")
    }
}

#[cfg(not(feature = "gpu"))]
const NO_GPU_SUPPORT: &str = "this carver was built without GPU support (the `gpu` feature of carver-cli); \
     rebuild with default features to tune on a GPU, or rank offline with \
     `carver recommend --target cuda-sm90 --arch h100`";

#[cfg(feature = "gpu")]
mod live {
    use std::io::IsTerminal;
    use std::process::{Command, ExitCode};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use anyhow::Context;
    use carver::family::{Sm90Params, Sm90Rules, check_config};
    use carver::{DType, Family, Layout, MatmulTemplate, Problem, recommend_hints};
    use carver_arch::Arch;
    use carver_gpu::DetectedGpu;
    use carver_gpu::sm90::{KernelCache, family_hash, operand_rows};
    use carver_gpu::tune::{
        Candidate, CandidateReport, GemmProblem, TimingOptions, TuneEvent, TuneJob, TuneOutcome,
        serve_worker, tune as run_loop,
    };
    use carver_schema::{SCHEMA_VERSION, ShapeSpec};
    use carver_tunedb::{
        DeviceKey, MeasuredCandidate, StoreOutcome, TuneDb, TuneKey, TuneProblem, TuneRecord,
    };
    use indicatif::{ProgressBar, ProgressStyle};
    use serde::Serialize;

    use super::{BenchArgs, TuneArgs};
    use crate::Globals;
    use crate::output::{Format, print_json, table};
    use crate::shapes::{ParsedShape, shape_rows};

    const TARGET: Family = Family::CudaSm90;

    /// `carver tune --format json`.
    #[derive(Serialize)]
    struct TuneReport {
        schema_version: u32,
        carver_version: String,
        device: DeviceKey,
        results: Vec<ShapeResult>,
    }

    /// One shape's answer.
    #[derive(Serialize)]
    struct ShapeResult {
        shape: ShapeSpec,
        dtype: String,
        layout: String,
        /// `tuned` (measured now), `database` (a stored result) or `error`.
        source: String,
        /// The winner in cuda-sm90's own terms.
        winner: Option<serde_json::Value>,
        winner_time_us: Option<f64>,
        winner_tflops: Option<f64>,
        cublas_time_us: Option<f64>,
        /// cuBLAS time / winner time: above 1 means carver's kernel is faster.
        speedup_vs_cublas: Option<f64>,
        /// Position of the winner in the model's ranking (1 = the model's first choice).
        winner_model_rank: Option<u32>,
        /// Candidates tried: every one with its prediction and measurement or failure.
        candidates: Vec<CandidateRow>,
        compile_wall_s: Option<f64>,
        bench_wall_s: Option<f64>,
        /// Wall time of this shape from the database lookup to the stored result.
        total_wall_s: Option<f64>,
        /// Where the result went: `inserted`, `replaced`, `kept-existing`, or why it was not
        /// stored.
        stored: Option<String>,
        /// Present when rows of A or B are not 16-byte aligned.
        #[serde(skip_serializing_if = "Option::is_none")]
        repack: Option<RepackRow>,
        error: Option<String>,
    }

    /// Operands copied into rows padded to 16 bytes before every launch; every measured time
    /// of the family includes the copies.
    #[derive(Serialize)]
    struct RepackRow {
        operands: Vec<String>,
        /// The copies alone (median), timed at worker setup.
        time_us: Option<f64>,
    }

    impl RepackRow {
        fn from_info(r: &carver_gpu::tune::RepackInfo) -> Self {
            Self {
                operands: r.operands.clone(),
                time_us: Some(r.timing.median_s * 1e6),
            }
        }

        /// From a stored result's method (see `TuneOutcome::method`).
        fn from_method(method: &serde_json::Value) -> Option<Self> {
            let r = method.get("repack")?;
            Some(Self {
                operands: serde_json::from_value(r.get("operands")?.clone()).ok()?,
                time_us: r
                    .get("copy_median_s")
                    .and_then(serde_json::Value::as_f64)
                    .map(|t| t * 1e6),
            })
        }

        /// One line for the table output; `winner_us` gives the copies' share.
        fn describe(&self, winner_us: Option<f64>) -> String {
            let share = match (self.time_us, winner_us) {
                (Some(t), Some(w)) if w > 0.0 => {
                    format!(", {:.0}% of the winner's time", 100.0 * t / w)
                }
                _ => String::new(),
            };
            format!(
                "repack: {} copied into 16-byte-aligned rows before every launch (included in every measured time): {} us{share}",
                self.operands.join(" and "),
                fmt_opt(self.time_us, 1)
            )
        }
    }

    #[derive(Serialize)]
    struct CandidateRow {
        model_rank: u32,
        label: String,
        config: serde_json::Value,
        predicted_time_us: f64,
        measured_time_us: Option<f64>,
        tflops: Option<f64>,
        /// The worker's full measurement (registers, relative error, runs...), when tuned now.
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<carver_gpu::tune::CandidateMeasurement>,
        compile_s: Option<f64>,
        from_cache: Option<bool>,
        failure: Option<String>,
    }

    /// The detected GPU, checked to be a Hopper.
    fn hopper(globals: &Globals, device: usize) -> anyhow::Result<DetectedGpu> {
        let db = globals.db()?;
        let cache = globals.cache_dir().ok();
        let gpu = carver_gpu::detect(&db, device, cache.as_deref())?;
        let cc = gpu.arch.gpu.compute_capability;
        if (cc.major, cc.minor) != (9, 0) {
            anyhow::bail!(
                "GPU {device} ({}) has compute capability {cc}; carver's native kernel family \
                 (cuda-sm90) needs a Hopper GPU (9.0). Rank configurations for other kernel \
                 families offline with `carver recommend --target triton`",
                gpu.name
            );
        }
        Ok(gpu)
    }

    fn worker_command() -> Command {
        let exe = std::env::current_exe().unwrap_or_else(|_| "carver".into());
        let mut c = Command::new(exe);
        c.args(["tune", "--worker"]);
        c
    }

    fn template(m: u64, n: u64, k: u64, dtype: DType, layout: (Layout, Layout)) -> MatmulTemplate {
        MatmulTemplate::new(m, n, k)
            .with_dtype(dtype)
            .with_layouts(layout.0, layout.1)
            .with_family(TARGET)
    }

    fn gemm_problem(p: &Problem) -> GemmProblem {
        GemmProblem {
            m: p.m,
            n: p.n,
            k: p.k,
            input: p.a,
            output: p.c,
            layout_b: p.layout_b,
        }
    }

    fn device_key(gpu: &DetectedGpu) -> DeviceKey {
        DeviceKey {
            name: gpu.name.clone(),
            uuid: gpu.uuid.clone(),
            driver_version: gpu.driver_version.clone(),
        }
    }

    fn tune_key(device: &DeviceKey, p: &Problem) -> TuneKey {
        TuneKey {
            device: device.clone(),
            carver_version: env!("CARGO_PKG_VERSION").to_string(),
            target: TARGET.to_string(),
            kernel_hash: family_hash(repacked(p)),
            problem: TuneProblem {
                m: p.m,
                n: p.n,
                k: p.k,
                batch: p.batch,
                dtype_a: p.a.as_str().into(),
                dtype_b: p.b.as_str().into(),
                dtype_c: p.c.as_str().into(),
                dtype_acc: p.acc.as_str().into(),
                layout_a: p.layout_a.as_str().into(),
                layout_b: p.layout_b.as_str().into(),
            },
        }
    }

    /// Whether the kernel reads padded copies of A or B (rows not 16-byte aligned).
    fn repacked(p: &Problem) -> bool {
        let (a, b) = operand_rows(p.layout_b, p.m, p.n, p.k);
        a.repacked() || b.repacked()
    }

    /// The model's top-k, or every legal point of the family's space ranked by prediction.
    fn candidates(
        tpl: &MatmulTemplate,
        p: &Problem,
        arch: &Arch,
        topk: usize,
        exhaustive: bool,
    ) -> anyhow::Result<Vec<Candidate>> {
        let problem = gemm_problem(p);
        if !exhaustive {
            return Ok(recommend_hints(tpl, arch, topk)?
                .into_iter()
                .map(|h| Candidate {
                    spec: problem.spec(Sm90Params::from_tile(&h.tile)),
                    model_rank: h.rank as u32,
                    predicted_s: h.prediction.time_us * 1e-6,
                })
                .collect());
        }
        let family = TARGET.rules();
        let mut all = Vec::new();
        for params in Sm90Rules.space(p, arch) {
            let tile = params.to_tile();
            let Ok(res) = check_config(family, &tile, p, arch) else {
                continue;
            };
            let Some(pred) = carver::cost::predict(family, p, &tile, res, arch) else {
                continue;
            };
            all.push((params, pred.time_us * 1e-6));
        }
        if all.is_empty() {
            anyhow::bail!(
                "no configuration of cuda-sm90 is legal for this problem on {}",
                arch.key()
            );
        }
        all.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(all
            .into_iter()
            .enumerate()
            .map(|(i, (params, t))| Candidate {
                spec: problem.spec(params),
                model_rank: i as u32 + 1,
                predicted_s: t,
            })
            .collect())
    }

    /// Progress bars on stderr for the compile and benchmark phases (hidden when stderr is not
    /// a terminal).
    struct Bars {
        compile: ProgressBar,
        bench: ProgressBar,
    }

    impl Bars {
        fn new(label: &str) -> Self {
            let style = ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> ");
            let make = |prefix: &str| {
                let bar = if std::io::stderr().is_terminal() {
                    ProgressBar::new(0)
                } else {
                    ProgressBar::hidden()
                };
                bar.set_style(style.clone());
                bar.set_prefix(prefix.to_string());
                bar.set_message(label.to_string());
                bar
            };
            Self {
                compile: make("compile"),
                bench: make("benchmark"),
            }
        }

        fn event(&self, e: TuneEvent) {
            match e {
                TuneEvent::Compiling { total } => self.compile.set_length(total as u64),
                TuneEvent::Compiled { done, .. } => {
                    self.compile.set_position(done as u64);
                }
                TuneEvent::Benchmarking { total } => {
                    self.compile.finish();
                    self.bench.set_length(total as u64);
                }
                TuneEvent::Benchmarked { done, .. } => self.bench.set_position(done as u64),
                TuneEvent::WorkerLost { candidate, reason } => {
                    self.bench.suspend(|| {
                        eprintln!("warning: candidate {candidate} lost its worker: {reason}");
                    });
                }
            }
        }

        fn finish(&self) {
            self.compile.finish_and_clear();
            self.bench.finish_and_clear();
        }
    }

    fn tflops(p: &Problem, t_s: f64) -> f64 {
        p.flops() / t_s / 1e12
    }

    fn rows_from_outcome(p: &Problem, o: &TuneOutcome) -> Vec<CandidateRow> {
        o.candidates
            .iter()
            .map(|c: &CandidateReport| CandidateRow {
                model_rank: c.model_rank,
                label: c.spec.label(),
                config: serde_json::to_value(c.spec.params).expect("params serialize"),
                predicted_time_us: c.predicted_s * 1e6,
                measured_time_us: c.time_s().map(|t| t * 1e6),
                tflops: c.time_s().map(|t| tflops(p, t)),
                details: c.measured.clone(),
                compile_s: c.compile.as_ref().map(|i| i.compile_s),
                from_cache: c.compile.as_ref().map(|i| i.from_cache),
                failure: c.failure.clone(),
            })
            .collect()
    }

    fn rows_from_record(p: &Problem, r: &TuneRecord) -> Vec<CandidateRow> {
        r.candidates
            .iter()
            .map(|c| CandidateRow {
                model_rank: c.model_rank,
                label: serde_json::from_value::<Sm90Params>(c.config.clone())
                    .map(|params| gemm_problem(p).spec(params).label())
                    .unwrap_or_else(|_| c.config.to_string()),
                config: c.config.clone(),
                predicted_time_us: c.predicted_time_s * 1e6,
                measured_time_us: c.measured_time_s.map(|t| t * 1e6),
                tflops: c.measured_time_s.map(|t| tflops(p, t)),
                details: None,
                compile_s: None,
                from_cache: None,
                failure: c.failure.clone(),
            })
            .collect()
    }

    fn record_from_outcome(key: TuneKey, o: &TuneOutcome) -> Option<TuneRecord> {
        let winner = o.winner()?;
        Some(TuneRecord {
            key,
            winner: serde_json::to_value(winner.spec.params).expect("params serialize"),
            candidates: o
                .candidates
                .iter()
                .map(|c| MeasuredCandidate {
                    config: serde_json::to_value(c.spec.params).expect("params serialize"),
                    model_rank: c.model_rank.max(1),
                    predicted_time_s: c.predicted_s,
                    measured_time_s: c.time_s(),
                    failure: if c.time_s().is_some() {
                        None
                    } else {
                        Some(c.failure.clone().unwrap_or_else(|| "not measured".into()))
                    },
                })
                .collect(),
            cublas_time_s: o.cublas_s(),
            measured_at_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
            method: o.method(),
        })
    }

    fn shape_spec(s: &ParsedShape) -> ShapeSpec {
        ShapeSpec {
            name: s.name.clone(),
            m: s.m,
            n: s.n,
            k: s.k,
            batch: s.batch,
        }
    }

    fn empty_result(shape: ShapeSpec, args: &TuneArgs, error: String) -> ShapeResult {
        ShapeResult {
            shape,
            dtype: args.dtype.to_string(),
            layout: layout_text(args.layout),
            source: "error".into(),
            winner: None,
            winner_time_us: None,
            winner_tflops: None,
            cublas_time_us: None,
            speedup_vs_cublas: None,
            winner_model_rank: None,
            candidates: Vec::new(),
            compile_wall_s: None,
            bench_wall_s: None,
            total_wall_s: None,
            stored: None,
            repack: None,
            error: Some(error),
        }
    }

    fn layout_text(l: (Layout, Layout)) -> String {
        let c = |x: Layout| match x {
            Layout::Row => 'r',
            Layout::Col => 'c',
        };
        format!("{}{}", c(l.0), c(l.1))
    }

    struct Session {
        gpu: DetectedGpu,
        device: DeviceKey,
        cache: KernelCache,
        db: TuneDb,
    }

    fn open_session(globals: &Globals, device: usize) -> anyhow::Result<Session> {
        let gpu = hopper(globals, device)?;
        let cache_dir = globals.cache_dir()?;
        let cache = KernelCache::new(&cache_dir)?;
        let (db, warnings) = TuneDb::open(&cache_dir)?;
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        Ok(Session {
            device: device_key(&gpu),
            gpu,
            cache,
            db,
        })
    }

    fn tune_shape(
        s: &Session,
        args: &TuneArgs,
        shape: &ParsedShape,
    ) -> anyhow::Result<ShapeResult> {
        let started = Instant::now();
        if shape.batch != 1 {
            anyhow::bail!(
                "batch = {}: the cuda-sm90 kernel runs one matmul (batch 1)",
                shape.batch
            );
        }
        let tpl = template(shape.m, shape.n, shape.k, args.dtype, args.layout);
        let arch = &s.gpu.arch;
        let p = tpl.validate(arch)?;
        let key = tune_key(&s.device, &p);
        let mut result = empty_result(shape_spec(shape), args, String::new());
        result.error = None;
        if !args.retune
            && !args.exhaustive
            && let Some(hit) = s.db.lookup(&key)?
        {
            let t = hit.winner_time_s();
            result.source = "database".into();
            result.winner = Some(hit.winner.clone());
            result.winner_time_us = t.map(|t| t * 1e6);
            result.winner_tflops = t.map(|t| tflops(&p, t));
            result.cublas_time_us = hit.cublas_time_s.map(|t| t * 1e6);
            result.speedup_vs_cublas = hit.cublas_time_s.zip(t).map(|(c, w)| c / w);
            result.winner_model_rank = hit
                .candidates
                .iter()
                .find(|c| c.config == hit.winner && c.failure.is_none())
                .map(|c| c.model_rank);
            result.candidates = rows_from_record(&p, &hit);
            result.repack = RepackRow::from_method(&hit.method);
            result.total_wall_s = Some(started.elapsed().as_secs_f64());
            return Ok(result);
        }
        let cands = candidates(&tpl, &p, arch, args.topk, args.exhaustive)?;
        let bars = Bars::new(&format!("{}x{}x{}", p.m, p.n, p.k));
        let job = TuneJob {
            problem: gemm_problem(&p),
            candidates: cands,
            device: args.device,
            cache: &s.cache,
            timing: TimingOptions::default(),
            watchdog: Duration::from_secs(args.watchdog_s.max(1)),
            compile_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        };
        let outcome = run_loop(&job, &worker_command, &|e| bars.event(e));
        bars.finish();
        let outcome = outcome?;
        result.source = "tuned".into();
        result.candidates = rows_from_outcome(&p, &outcome);
        result.compile_wall_s = Some(outcome.compile_wall_s);
        result.bench_wall_s = Some(outcome.bench_wall_s);
        result.cublas_time_us = outcome.cublas_s().map(|t| t * 1e6);
        result.repack = outcome.worker.repack.as_ref().map(RepackRow::from_info);
        if let Some(w) = outcome.winner() {
            let t = w.time_s().expect("the winner was timed");
            result.winner = Some(serde_json::to_value(w.spec.params)?);
            result.winner_time_us = Some(t * 1e6);
            result.winner_tflops = Some(tflops(&p, t));
            result.speedup_vs_cublas = outcome.cublas_s().map(|c| c / t);
            result.winner_model_rank = Some(w.model_rank);
        }
        result.stored = Some(match record_from_outcome(key, &outcome) {
            None => {
                result.error = Some("no candidate passed the check against cuBLAS".into());
                "not stored: no candidate passed".into()
            }
            Some(record) => match s.db.store(&record) {
                Ok(StoreOutcome::Inserted) => "inserted".into(),
                Ok(StoreOutcome::Replaced) => "replaced".into(),
                Ok(StoreOutcome::KeptExisting) => {
                    "kept-existing (a faster result was stored)".into()
                }
                Err(e) => format!("not stored: {e}"),
            },
        });
        result.total_wall_s = Some(started.elapsed().as_secs_f64());
        Ok(result)
    }

    pub fn tune(args: TuneArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
        if args.worker {
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            serve_worker(stdin.lock(), stdout.lock())?;
            return Ok(ExitCode::SUCCESS);
        }
        if args.topk == 0 {
            anyhow::bail!("--topk must be at least 1");
        }
        let rows = shape_rows(args.shapes.as_deref(), args.m, args.n, args.k, 1)?;
        let session = open_session(globals, args.device)?;
        let mut results = Vec::new();
        for row in &rows {
            let r = match &row.parsed {
                Err(e) => empty_result(
                    ShapeSpec {
                        name: None,
                        m: 0,
                        n: 0,
                        k: 0,
                        batch: 0,
                    },
                    &args,
                    format!("line {}: {e}", row.line),
                ),
                Ok(shape) => match tune_shape(&session, &args, shape) {
                    Ok(r) => r,
                    Err(e) => empty_result(shape_spec(shape), &args, format!("{e:#}")),
                },
            };
            if args.format == Format::Table {
                print_shape(&session, &r);
            }
            results.push(r);
        }
        let failed = results.iter().filter(|r| r.error.is_some()).count();
        if args.format == Format::Json {
            print_json(&TuneReport {
                schema_version: SCHEMA_VERSION,
                carver_version: env!("CARGO_PKG_VERSION").into(),
                device: session.device.clone(),
                results,
            })?;
        }
        if failed > 0 {
            eprintln!("error: {failed} of {} shape(s) have no result", rows.len());
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }

    fn fmt_opt(v: Option<f64>, digits: usize) -> String {
        v.map_or("-".into(), |x| format!("{x:.digits$}"))
    }

    fn print_shape(s: &Session, r: &ShapeResult) {
        let sh = &r.shape;
        let name = sh
            .name
            .as_deref()
            .map(|n| format!("{n}: "))
            .unwrap_or_default();
        println!(
            "{name}M={} N={} K={} {} {} on {} (target cuda-sm90, {})",
            sh.m, sh.n, sh.k, r.dtype, r.layout, s.device.name, r.source
        );
        if let Some(e) = &r.error
            && r.candidates.is_empty()
        {
            println!("  error: {e}\n");
            return;
        }
        let rows: Vec<Vec<String>> = r
            .candidates
            .iter()
            .map(|c| {
                vec![
                    c.model_rank.to_string(),
                    c.label.clone(),
                    fmt_opt(Some(c.predicted_time_us), 1),
                    fmt_opt(c.measured_time_us, 1),
                    fmt_opt(c.tflops, 0),
                    fmt_opt(
                        c.measured_time_us
                            .zip(r.cublas_time_us)
                            .map(|(t, cb)| cb / t),
                        3,
                    ),
                    c.details
                        .as_ref()
                        .map_or("-".into(), |d| d.registers.to_string()),
                    c.details.as_ref().map_or("-".into(), |d| {
                        if d.rel_error == 0.0 {
                            "exact".into()
                        } else {
                            format!("{:.1e}", d.rel_error)
                        }
                    }),
                    match (&c.failure, &c.details) {
                        (Some(f), _) => f.clone(),
                        (None, Some(d)) if d.timing.early_stopped => {
                            format!("stopped early after {} runs", d.timing.runs)
                        }
                        _ => String::new(),
                    },
                ]
            })
            .collect();
        print!(
            "{}",
            table(
                &[
                    "RANK",
                    "CONFIG",
                    "PRED us",
                    "MEAS us",
                    "TFLOP/s",
                    "vs cuBLAS",
                    "REGS",
                    "ERR",
                    "NOTE",
                ],
                &rows
            )
        );
        println!(
            "cuBLAS {} us; winner {} us ({} TFLOP/s, model rank {}), {} of cuBLAS",
            fmt_opt(r.cublas_time_us, 1),
            fmt_opt(r.winner_time_us, 1),
            fmt_opt(r.winner_tflops, 0),
            r.winner_model_rank.map_or("-".into(), |x| x.to_string()),
            fmt_opt(r.speedup_vs_cublas, 3),
        );
        if let Some(rp) = &r.repack {
            println!("{}", rp.describe(r.winner_time_us));
        }
        if let (Some(c), Some(b), Some(t)) = (r.compile_wall_s, r.bench_wall_s, r.total_wall_s) {
            println!("wall time: compile {c:.2} s, check and benchmark {b:.2} s, total {t:.2} s");
        }
        if let Some(st) = &r.stored {
            println!("tuning database: {st}");
        }
        if let Some(e) = &r.error {
            println!("error: {e}");
        }
        println!();
    }

    /// `carver bench --format json`.
    #[derive(Serialize)]
    struct BenchReport {
        schema_version: u32,
        device: DeviceKey,
        shape: ShapeSpec,
        dtype: String,
        layout: String,
        /// `argument` or `database`.
        config_source: String,
        config: serde_json::Value,
        label: String,
        predicted_time_us: f64,
        measured_time_us: Option<f64>,
        tflops: Option<f64>,
        cublas_time_us: Option<f64>,
        cublas_tflops: Option<f64>,
        speedup_vs_cublas: Option<f64>,
        details: Option<carver_gpu::tune::CandidateMeasurement>,
        /// Present when rows of A or B are not 16-byte aligned.
        #[serde(skip_serializing_if = "Option::is_none")]
        repack: Option<RepackRow>,
        failure: Option<String>,
    }

    pub fn bench(args: BenchArgs, globals: &Globals) -> anyhow::Result<ExitCode> {
        let session = open_session(globals, args.device)?;
        let tpl = template(args.m, args.n, args.k, args.dtype, args.layout);
        let arch = &session.gpu.arch;
        let p = tpl.validate(arch)?;
        let (config, source) = match &args.config {
            Some(text) => (
                serde_json::from_str::<serde_json::Value>(text).context("--config is not JSON")?,
                "argument",
            ),
            None => {
                let key = tune_key(&session.device, &p);
                let hit = session.db.lookup(&key)?.with_context(|| {
                    format!(
                        "no tuned result for {}x{}x{} {} {} on this GPU in the tuning database; \
                         run `carver tune` first or pass --config",
                        p.m,
                        p.n,
                        p.k,
                        args.dtype,
                        layout_text(args.layout)
                    )
                })?;
                (hit.winner.clone(), "database")
            }
        };
        let (tile, prediction) = carver::predict_native(&tpl, arch, &config)?;
        let params = Sm90Params::from_tile(&tile);
        let spec = gemm_problem(&p).spec(params);
        let bars = Bars::new(&spec.label());
        let job = TuneJob {
            problem: gemm_problem(&p),
            candidates: vec![Candidate {
                spec,
                model_rank: 1,
                predicted_s: prediction.time_us * 1e-6,
            }],
            device: args.device,
            cache: &session.cache,
            timing: TimingOptions::default(),
            watchdog: Duration::from_secs(args.watchdog_s.max(1)),
            compile_threads: 1,
        };
        let outcome = run_loop(&job, &worker_command, &|e| bars.event(e));
        bars.finish();
        let outcome = outcome?;
        let c = &outcome.candidates[0];
        let t = c.time_s();
        let cublas = outcome.cublas_s();
        let report = BenchReport {
            schema_version: SCHEMA_VERSION,
            device: session.device.clone(),
            shape: ShapeSpec {
                name: None,
                m: p.m,
                n: p.n,
                k: p.k,
                batch: 1,
            },
            dtype: args.dtype.to_string(),
            layout: layout_text(args.layout),
            config_source: source.into(),
            config: serde_json::to_value(params)?,
            label: spec.label(),
            predicted_time_us: prediction.time_us,
            measured_time_us: t.map(|t| t * 1e6),
            tflops: t.map(|t| tflops(&p, t)),
            cublas_time_us: cublas.map(|t| t * 1e6),
            cublas_tflops: cublas.map(|t| tflops(&p, t)),
            speedup_vs_cublas: cublas.zip(t).map(|(c, w)| c / w),
            details: c.measured.clone(),
            repack: outcome.worker.repack.as_ref().map(RepackRow::from_info),
            failure: c.failure.clone(),
        };
        match args.format {
            Format::Json => print_json(&report)?,
            Format::Table => {
                println!(
                    "M={} N={} K={} {} {} on {}: {} ({})",
                    p.m,
                    p.n,
                    p.k,
                    report.dtype,
                    report.layout,
                    session.device.name,
                    report.label,
                    source
                );
                println!(
                    "{}",
                    table(
                        &["KERNEL", "TIME us", "TFLOP/s", "NOTE"],
                        &[
                            vec![
                                "carver cuda-sm90".into(),
                                fmt_opt(report.measured_time_us, 1),
                                fmt_opt(report.tflops, 0),
                                report.failure.clone().unwrap_or_else(|| format!(
                                    "predicted {:.1} us, rel. error {}",
                                    report.predicted_time_us,
                                    report
                                        .details
                                        .as_ref()
                                        .map_or("-".into(), |d| format!("{:.1e}", d.rel_error))
                                )),
                            ],
                            vec![
                                "cuBLAS".into(),
                                fmt_opt(report.cublas_time_us, 1),
                                fmt_opt(report.cublas_tflops, 0),
                                String::new(),
                            ],
                        ]
                    )
                    .trim_end()
                );
                println!("{} of cuBLAS", fmt_opt(report.speedup_vs_cublas, 3));
                if let Some(rp) = &report.repack {
                    println!("{}", rp.describe(report.measured_time_us));
                }
            }
        }
        if report.failure.is_some() {
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }
}
