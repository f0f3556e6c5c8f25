//! `tune` and `bench`: carver's own Hopper family (`cuda-sm90`) measured on this machine's GPU.
//!
//! `tune` answers each shape from the tuning database when it can; otherwise it ranks the
//! family with the cost model, compiles the top-k (or every legal configuration), checks each
//! against cuBLAS and times the survivors beside cuBLAS in worker processes, then stores the
//! winner. `bench` times one configuration, or the stored winner, against cuBLAS.
//!
//! With `emit`, `tune` writes each shape's winner out for other programs (source, cubin and
//! `launch.json`, see `carver_gpu::sm90::emit`). The description needs the grid the winner was
//! launched with, which a stored result does not keep: a winner from the database is run once
//! more, as `bench` runs it (checked against cuBLAS again), before it is written.

use std::path::PathBuf;
use std::time::Duration;

use carver::{DType, Layout, TopK};
use carver_schema::{BenchReport, TuneReport};
use carver_tunedb::Bucket;

use crate::shapes::ShapeRow;
use crate::{FlowError, Locations, Progress};

/// Which of the family's configurations a tuning run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidates {
    /// The model's top-k.
    Top(TopK),
    /// Every legal configuration, ranked by the model (to measure the ranking itself).
    Every,
    /// The model's top-k, then a reduced whole space to measure them against where the whole
    /// one is too large to time (`carver::reference_configs`).
    Reference(TopK),
}

/// The program a tuning run starts for each worker process: one that serves [`serve_worker`]
/// on its standard input and output (the CLI starts itself with `tune --worker`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerProgram {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// How candidates are run: which GPU, how long one may take, which worker program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// CUDA device ordinal.
    pub device: usize,
    /// Longest a candidate's check and timing may take before its worker is killed.
    pub watchdog: Duration,
    pub worker: WorkerProgram,
}

/// What to tune: the same problem kind for every shape.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneRequest {
    pub shapes: Vec<ShapeRow>,
    /// Input dtype of A and B: bf16, f16, e4m3 or e5m2.
    pub dtype: DType,
    /// The output's dtype, bf16 or f16 (default: the input's for 16-bit inputs, f16 for fp8,
    /// as `MatmulTemplate::with_dtype` has it).
    pub out_dtype: Option<DType>,
    /// Storage order of A and B; A must be row-major (fp8: B stored N x K).
    pub layouts: (Layout, Layout),
    pub candidates: Candidates,
    /// Measure again even when the database holds a result, and store the new result in its
    /// place (without it, a stored result is replaced only by a faster one).
    pub retune: bool,
    /// How the database lookup matches M, N and K (exact by default).
    pub bucket: Bucket,
    pub run: RunOptions,
    /// Write each shape's winner under this directory (`<dir>/<shape>/launch.json`, the source
    /// and the cubins); a shape that cannot be written says why in its `emit` field.
    pub emit: Option<PathBuf>,
}

/// One configuration to time against cuBLAS.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchRequest {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub dtype: DType,
    /// As [`TuneRequest::out_dtype`].
    pub out_dtype: Option<DType>,
    pub layouts: (Layout, Layout),
    /// The configuration in cuda-sm90's own terms; the database's winner when `None`.
    pub config: Option<serde_json::Value>,
    /// How the lookup of the database's winner matches M, N and K.
    pub bucket: Bucket,
    pub run: RunOptions,
}

/// The tuning report. A shape that could not be tuned carries its `error`; only what stops
/// every shape (no GPU, not a Hopper GPU, no usable cache directory) is an `Err`.
pub fn tune(
    loc: &Locations,
    request: &TuneRequest,
    progress: &dyn Progress,
) -> Result<TuneReport, FlowError> {
    #[cfg(feature = "gpu")]
    {
        live::tune(loc, request, progress)
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (loc, request, progress);
        Err(FlowError::NoGpuSupport {
            what: "tuning (`carver tune`)",
        })
    }
}

/// Times one configuration against cuBLAS.
pub fn bench(
    loc: &Locations,
    request: &BenchRequest,
    progress: &dyn Progress,
) -> Result<BenchReport, FlowError> {
    #[cfg(feature = "gpu")]
    {
        live::bench(loc, request, progress)
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (loc, request, progress);
        Err(FlowError::NoGpuSupport {
            what: "benchmarking (`carver bench`)",
        })
    }
}

/// Serves one tuning worker on standard input and output until the parent closes them.
pub fn serve_worker() -> Result<(), FlowError> {
    #[cfg(feature = "gpu")]
    {
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        Ok(carver_gpu::tune::serve_worker(stdin.lock(), stdout.lock())?)
    }
    #[cfg(not(feature = "gpu"))]
    {
        Err(FlowError::NoGpuSupport {
            what: "a tuning worker",
        })
    }
}

/// `rr` or `rc`: how tune reports name the layouts.
pub fn layout_text(layouts: (Layout, Layout)) -> String {
    let letter = |x: Layout| match x {
        Layout::Row => 'r',
        Layout::Col => 'c',
    };
    format!("{}{}", letter(layouts.0), letter(layouts.1))
}

#[cfg(feature = "gpu")]
mod live {
    use std::path::Path;
    use std::process::Command;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    use carver::family::Sm90Params;
    use carver::{Family, MatmulTemplate, Problem};
    use carver_gpu::DetectedGpu;
    use carver_gpu::sm90::{
        EmitInputs, KernelCache, KernelSpec, check_emit_problem, check_emit_root, emit,
        family_hash, operand_rows,
    };
    use carver_gpu::tune::{
        Candidate, CandidateReport, GemmProblem, TimingOptions, TuneEvent, TuneJob, TuneOutcome,
    };
    use carver_schema::{
        BenchReport, DeviceKey, EmitDevice, EmitReport, MeasuredCandidate, RepackReport,
        SCHEMA_VERSION, ShapeSpec, TuneCandidate, TuneKey, TuneRecord, TuneReport, TuneShapeResult,
    };
    use carver_tunedb::{Bucket, KeyBuckets, LookupOptions, StoreOutcome, TuneDb, WritePolicy};

    use super::{BenchRequest, Candidates, RunOptions, TuneRequest, layout_text};
    use crate::progress::TuneProgress;
    use crate::recommend::shape_spec;
    use crate::shapes::ParsedShape;
    use crate::{FlowError, Locations, Progress};

    const FAMILY: Family = Family::CudaSm90;

    /// What every shape of a run shares: the GPU, its kernel cache and the tuning database.
    struct Session {
        gpu: DetectedGpu,
        device: DeviceKey,
        cache: KernelCache,
        db: TuneDb,
    }

    impl Session {
        fn open(
            loc: &Locations,
            device: usize,
            progress: &dyn Progress,
        ) -> Result<Self, FlowError> {
            let gpu = hopper(loc, device)?;
            crate::archs::warn_ignored(progress, &gpu.calibration_ignored);
            let cache_dir = loc.cache_dir()?;
            let cache = KernelCache::new(&cache_dir)?;
            let db = crate::cache::open(loc, progress)?;
            Ok(Self {
                device: DeviceKey {
                    name: gpu.name.clone(),
                    uuid: gpu.uuid.clone(),
                    driver_version: gpu.driver_version.clone(),
                },
                gpu,
                cache,
                db,
            })
        }
    }

    /// The detected GPU, checked to be a Hopper.
    fn hopper(loc: &Locations, device: usize) -> Result<DetectedGpu, FlowError> {
        let db = loc.hardware_db()?;
        let cache = loc.cache_dir_if_any();
        let gpu = carver_gpu::detect(&db, device, cache.as_deref())?;
        let cc = gpu.arch.gpu.compute_capability;
        if (cc.major, cc.minor) != (9, 0) {
            return Err(FlowError::NotHopper {
                device,
                name: gpu.name.clone(),
                capability: cc.to_string(),
            });
        }
        Ok(gpu)
    }

    fn worker_command(run: &RunOptions) -> impl Fn() -> Command + '_ {
        move || {
            let mut c = Command::new(&run.worker.program);
            c.args(&run.worker.args);
            c
        }
    }

    fn template(
        m: u64,
        n: u64,
        k: u64,
        (dtype, out_dtype): (carver::DType, Option<carver::DType>),
        layouts: (carver::Layout, carver::Layout),
    ) -> MatmulTemplate {
        let t = MatmulTemplate::new(m, n, k)
            .with_dtype(dtype)
            .with_layouts(layouts.0, layouts.1)
            .with_family(FAMILY);
        match out_dtype {
            Some(c) => t.with_output(c),
            None => t,
        }
    }

    fn gemm_problem(p: &Problem) -> GemmProblem {
        GemmProblem {
            m: p.m,
            n: p.n,
            k: p.k,
            batch: p.batch,
            input: p.a,
            output: p.c,
            layout_b: p.layout_b,
        }
    }

    fn tune_key(device: &DeviceKey, p: &Problem) -> TuneKey {
        let (a, b) = operand_rows(p.layout_b, p.m, p.n, p.k);
        TuneKey {
            device: device.clone(),
            carver_version: env!("CARGO_PKG_VERSION").to_string(),
            target: FAMILY.to_string(),
            // The copy kernel's source counts only for problems it runs on.
            kernel_hash: family_hash(a.repacked() || b.repacked()),
            // (The family checked that A is row-major and B of A's type.)
            problem: gemm_problem(p).stored(),
        }
    }

    /// The candidates to measure, ranked by the model.
    fn candidates(
        tpl: &MatmulTemplate,
        p: &Problem,
        arch: &carver_arch::Arch,
        which: Candidates,
    ) -> Result<Vec<Candidate>, FlowError> {
        let hints = match which {
            Candidates::Top(k) => carver::recommend_hints(tpl, arch, k)?,
            Candidates::Every => carver::rank_every_config(tpl, arch)?,
            Candidates::Reference(k) => carver::reference_configs(tpl, arch, k)?,
        };
        let problem = gemm_problem(p);
        Ok(hints
            .into_iter()
            .map(|h| Candidate {
                spec: problem.spec(Sm90Params::from_tile(&h.tile)),
                model_rank: u32::try_from(h.rank).unwrap_or(u32::MAX),
                predicted_s: h.prediction.time_us * 1e-6,
            })
            .collect())
    }

    fn lookup_options(bucket: Bucket) -> LookupOptions {
        LookupOptions {
            buckets: KeyBuckets::all(bucket),
        }
    }

    fn tflops(p: &Problem, t_s: f64) -> f64 {
        p.flops() / t_s / 1e12
    }

    fn forward(progress: &dyn Progress) -> impl Fn(TuneEvent) + Sync + '_ {
        move |e| {
            progress.tune(match e {
                TuneEvent::Compiling { total } => TuneProgress::Compiling { total },
                TuneEvent::Compiled { done, total } => TuneProgress::Compiled { done, total },
                TuneEvent::Benchmarking { total } => TuneProgress::Benchmarking { total },
                TuneEvent::Benchmarked { done, total } => TuneProgress::Benchmarked { done, total },
                TuneEvent::WorkerLost { candidate, reason } => {
                    TuneProgress::WorkerLost { candidate, reason }
                }
                TuneEvent::CacheEntryRejected { candidate, defect } => {
                    return progress.warning(&format!(
                        "cached kernel of {candidate} not used, compiling it again: {defect}"
                    ));
                }
            })
        }
    }

    fn empty_result(
        shape: ShapeSpec,
        request: &TuneRequest,
        error: Option<String>,
    ) -> TuneShapeResult {
        TuneShapeResult {
            shape,
            dtype: request.dtype.to_string(),
            layout: layout_text(request.layouts),
            source: if error.is_some() { "error" } else { "tuned" }.into(),
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
            matched_shape: None,
            error,
            emit: None,
        }
    }

    pub(super) fn tune(
        loc: &Locations,
        request: &TuneRequest,
        progress: &dyn Progress,
    ) -> Result<TuneReport, FlowError> {
        if let Some(dir) = &request.emit {
            // Before any GPU time is spent on results that could not be written.
            check_emit_root(dir)?;
        }
        let session = Session::open(loc, request.run.device, progress)?;
        let results = request
            .shapes
            .iter()
            .map(|row| match &row.parsed {
                Err(e) => empty_result(
                    ShapeSpec {
                        name: None,
                        m: 0,
                        n: 0,
                        k: 0,
                        batch: 0,
                    },
                    request,
                    Some(format!("line {}: {e}", row.line)),
                ),
                Ok(shape) => tune_shape(&session, request, shape, progress).unwrap_or_else(|e| {
                    empty_result(shape_spec(shape), request, Some(e.to_string()))
                }),
            })
            .map(|mut result| {
                if request.emit.is_some() && result.emit.is_none() {
                    result.emit = Some(not_emitted(
                        false,
                        "this shape has no verified result to write (see its error)".into(),
                    ));
                }
                result
            })
            .collect();
        Ok(TuneReport {
            schema_version: SCHEMA_VERSION,
            carver_version: env!("CARGO_PKG_VERSION").into(),
            device: session.device.clone(),
            results,
        })
    }

    fn tune_shape(
        s: &Session,
        request: &TuneRequest,
        shape: &ParsedShape,
        progress: &dyn Progress,
    ) -> Result<TuneShapeResult, FlowError> {
        let started = Instant::now();
        let tpl = template(
            shape.m,
            shape.n,
            shape.k,
            (request.dtype, request.out_dtype),
            request.layouts,
        )
        .with_batch(shape.batch);
        let arch = &s.gpu.arch;
        let p = tpl.validate(arch)?;
        let key = tune_key(&s.device, &p);
        let mut result = empty_result(shape_spec(shape), request, None);
        // A measurement of the ranking always measures.
        let measures_ranking = !matches!(request.candidates, Candidates::Top(_));
        if !request.retune
            && !measures_ranking
            && let Some(hit) = s.db.lookup_with(&key, lookup_options(request.bucket))?
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
            result.repack = repack_from_method(&hit.method);
            let stored = &hit.key.problem;
            if (stored.m, stored.n, stored.k) != (p.m, p.n, p.k) {
                result.matched_shape = Some(ShapeSpec {
                    name: None,
                    m: stored.m,
                    n: stored.n,
                    k: stored.k,
                    batch: stored.batch,
                });
            }
            if let Some(dir) = &request.emit {
                result.emit = Some(emit_stored(
                    s,
                    request,
                    &tpl,
                    &p,
                    &hit.winner,
                    dir,
                    progress,
                ));
            }
            result.total_wall_s = Some(started.elapsed().as_secs_f64());
            return Ok(result);
        }
        let job = TuneJob {
            problem: gemm_problem(&p),
            candidates: candidates(&tpl, &p, arch, request.candidates)?,
            device: request.run.device,
            cache: &s.cache,
            timing: TimingOptions::default(),
            watchdog: request.run.watchdog.max(std::time::Duration::from_secs(1)),
            compile_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        };
        progress.shape_started(&format!("{}x{}x{}", p.m, p.n, p.k));
        let outcome =
            carver_gpu::tune::tune(&job, &worker_command(&request.run), &forward(progress));
        progress.shape_finished();
        let outcome = outcome?;
        result.candidates = rows_from_outcome(&p, &outcome);
        result.compile_wall_s = Some(outcome.compile_wall_s);
        result.bench_wall_s = Some(outcome.bench_wall_s);
        result.cublas_time_us = outcome.cublas_s().map(|t| t * 1e6);
        result.repack = outcome.worker.repack.as_ref().map(RepackReport::from);
        if let Some((w, t)) = outcome.winner().and_then(|w| Some((w, w.time_s()?))) {
            result.winner = Some(params_json(w.spec.params));
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
            Some(record) => match crate::plausible::check_record_on(&record, arch) {
                // A time under the roofline is a measurement fault; stored, it would win its
                // key for good.
                Err(reason) => {
                    result.error = Some(format!("the measurement is not believable: {reason}"));
                    format!("not stored: {reason}")
                }
                Ok(()) => match s.db.store_checked(
                    &record,
                    store_policy(request.retune),
                    // A stored result this GPU cannot have produced never blocks a real one.
                    &mut |stored| crate::plausible::check_record_on(stored, arch).is_ok(),
                ) {
                    Ok(StoreOutcome::Inserted) => "inserted".into(),
                    Ok(StoreOutcome::Replaced) => "replaced".into(),
                    Ok(StoreOutcome::KeptExisting) => {
                        "kept-existing (a faster result was stored)".into()
                    }
                    Err(e) => format!("not stored: {e}"),
                },
            },
        });
        if let Some(dir) = &request.emit {
            result.emit = Some(match (&result.error, outcome.winner()) {
                (None, Some(winner)) => emit_measured(s, dir, &outcome, winner, false, progress),
                _ => not_emitted(
                    false,
                    "this shape has no verified result to write (see its error)".into(),
                ),
            });
        }
        result.total_wall_s = Some(started.elapsed().as_secs_f64());
        Ok(result)
    }

    fn not_emitted(rerun: bool, error: String) -> EmitReport {
        EmitReport {
            directory: None,
            files: Vec::new(),
            rerun,
            error: Some(error),
        }
    }

    /// Writes `winner` of `outcome`, which it verified and timed, under `dir`.
    fn emit_measured(
        s: &Session,
        dir: &Path,
        outcome: &TuneOutcome,
        winner: &CandidateReport,
        rerun: bool,
        progress: &dyn Progress,
    ) -> EmitReport {
        let Some(measured) = &winner.measured else {
            return not_emitted(rerun, "the winner has no measurement".into());
        };
        let worker = &outcome.worker;
        let inputs = EmitInputs {
            spec: winner.spec,
            dims: outcome.problem.dims(),
            device: EmitDevice {
                name: worker.device_name.clone(),
                compute_capability: format!(
                    "{}.{}",
                    worker.compute_capability.0, worker.compute_capability.1
                ),
                sm_count: worker.sms,
            },
            grid: measured.grid,
            blocks_per_sm: measured.blocks_per_sm,
            measured_time_s: Some(measured.timing.median_s),
            cublas_time_s: outcome.cublas_s(),
        };
        let label = winner.spec.label();
        let warn = |defect: &carver_gpu::sm90::CacheDefect| {
            progress.warning(&format!(
                "cached kernel of {label} not used, compiling it again: {defect}"
            ));
        };
        match emit(dir, &s.cache, &inputs, &warn) {
            Ok(written) => EmitReport {
                directory: Some(written.directory.display().to_string()),
                files: written.files,
                rerun,
                error: None,
            },
            Err(e) => not_emitted(rerun, e.to_string()),
        }
    }

    /// Writes a winner from the tuning database under `dir`: it is run once more as `bench`
    /// runs it, checked against cuBLAS again, which gives the grid the description needs.
    fn emit_stored(
        s: &Session,
        request: &TuneRequest,
        tpl: &MatmulTemplate,
        p: &Problem,
        winner: &serde_json::Value,
        dir: &Path,
        progress: &dyn Progress,
    ) -> EmitReport {
        let (tile, prediction) = match carver::predict_native(tpl, &s.gpu.arch, winner) {
            Ok(t) => t,
            Err(e) => {
                return not_emitted(false, format!("the stored winner cannot be run: {e}"));
            }
        };
        let spec = gemm_problem(p).spec(Sm90Params::from_tile(&tile));
        // What no run could fix is refused before the GPU is used.
        if let Err(e) = check_emit_problem(&spec, &gemm_problem(p).dims()) {
            return not_emitted(false, e.to_string());
        }
        let outcome = match run_one(
            s,
            &request.run,
            p,
            spec,
            prediction.time_us * 1e-6,
            progress,
        ) {
            Ok(o) => o,
            Err(e) => return not_emitted(true, format!("the stored winner could not be run: {e}")),
        };
        match outcome.candidates.first() {
            Some(c) if c.measured.is_some() => emit_measured(s, dir, &outcome, c, true, progress),
            Some(c) => not_emitted(
                true,
                format!(
                    "the stored winner failed when run again: {}",
                    c.failure.as_deref().unwrap_or("not measured")
                ),
            ),
            None => not_emitted(true, "the stored winner was not run".into()),
        }
    }

    /// One configuration checked against cuBLAS and timed beside it (`bench`, and a stored
    /// winner before it is emitted).
    fn run_one(
        s: &Session,
        run: &RunOptions,
        p: &Problem,
        spec: KernelSpec,
        predicted_s: f64,
        progress: &dyn Progress,
    ) -> Result<TuneOutcome, FlowError> {
        let job = TuneJob {
            problem: gemm_problem(p),
            candidates: vec![Candidate {
                spec,
                model_rank: 1,
                predicted_s,
            }],
            device: run.device,
            cache: &s.cache,
            timing: TimingOptions::default(),
            watchdog: run.watchdog.max(std::time::Duration::from_secs(1)),
            compile_threads: 1,
        };
        progress.shape_started(&spec.label());
        let outcome = carver_gpu::tune::tune(&job, &worker_command(run), &forward(progress));
        progress.shape_finished();
        Ok(outcome?)
    }

    /// A deliberate re-tune replaces the stored result (which may be a fault that no honest
    /// measurement can beat); otherwise the faster result is kept.
    fn store_policy(retune: bool) -> WritePolicy {
        if retune {
            WritePolicy::Replace
        } else {
            WritePolicy::KeepFaster
        }
    }

    fn params_json(params: Sm90Params) -> serde_json::Value {
        // Plain integers and a bool: serializing them cannot fail.
        serde_json::to_value(params).unwrap_or(serde_json::Value::Null)
    }

    fn rows_from_outcome(p: &Problem, o: &TuneOutcome) -> Vec<TuneCandidate> {
        o.candidates
            .iter()
            .map(|c: &CandidateReport| TuneCandidate {
                model_rank: c.model_rank,
                label: c.spec.label(),
                config: params_json(c.spec.params),
                predicted_time_us: c.predicted_s * 1e6,
                measured_time_us: c.time_s().map(|t| t * 1e6),
                tflops: c.time_s().map(|t| tflops(p, t)),
                details: c.measured.as_ref().map(Into::into),
                compile_s: c.compile.as_ref().map(|i| i.compile_s),
                from_cache: c.compile.as_ref().map(|i| i.from_cache),
                failure: c.failure.clone(),
            })
            .collect()
    }

    fn rows_from_record(p: &Problem, r: &TuneRecord) -> Vec<TuneCandidate> {
        r.candidates
            .iter()
            .map(|c| TuneCandidate {
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

    /// The repack of a stored result, from its method (see `TuneOutcome::method`).
    fn repack_from_method(method: &serde_json::Value) -> Option<RepackReport> {
        let r = method.get("repack")?;
        Some(RepackReport {
            operands: serde_json::from_value(r.get("operands")?.clone()).ok()?,
            time_us: r
                .get("copy_median_s")
                .and_then(serde_json::Value::as_f64)
                .map(|t| t * 1e6),
        })
    }

    fn record_from_outcome(key: TuneKey, o: &TuneOutcome) -> Option<TuneRecord> {
        let winner = o.winner()?;
        Some(TuneRecord {
            key,
            winner: params_json(winner.spec.params),
            candidates: o
                .candidates
                .iter()
                .map(|c| MeasuredCandidate {
                    config: params_json(c.spec.params),
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
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
            method: o.method(),
        })
    }

    pub(super) fn bench(
        loc: &Locations,
        request: &BenchRequest,
        progress: &dyn Progress,
    ) -> Result<BenchReport, FlowError> {
        let session = Session::open(loc, request.run.device, progress)?;
        let tpl = template(
            request.m,
            request.n,
            request.k,
            (request.dtype, request.out_dtype),
            request.layouts,
        );
        let arch = &session.gpu.arch;
        let p = tpl.validate(arch)?;
        let (config, source) = match &request.config {
            Some(config) => (config.clone(), "argument"),
            None => {
                let key = tune_key(&session.device, &p);
                let hit = session
                    .db
                    .lookup_with(&key, lookup_options(request.bucket))?
                    .ok_or_else(|| FlowError::NoTunedResult {
                        problem: format!(
                            "{}x{}x{} {} {}",
                            p.m,
                            p.n,
                            p.k,
                            request.dtype,
                            layout_text(request.layouts)
                        ),
                    })?;
                (hit.winner.clone(), "database")
            }
        };
        let (tile, prediction) = carver::predict_native(&tpl, arch, &config)?;
        let params = Sm90Params::from_tile(&tile);
        let spec = gemm_problem(&p).spec(params);
        let outcome = run_one(
            &session,
            &request.run,
            &p,
            spec,
            prediction.time_us * 1e-6,
            progress,
        )?;
        let c = outcome.candidates.first();
        let t = c.and_then(CandidateReport::time_s);
        let cublas = outcome.cublas_s();
        Ok(BenchReport {
            schema_version: SCHEMA_VERSION,
            device: session.device.clone(),
            shape: ShapeSpec {
                name: None,
                m: p.m,
                n: p.n,
                k: p.k,
                batch: 1,
            },
            dtype: request.dtype.to_string(),
            layout: layout_text(request.layouts),
            config_source: source.into(),
            config: params_json(params),
            label: spec.label(),
            predicted_time_us: prediction.time_us,
            measured_time_us: t.map(|t| t * 1e6),
            tflops: t.map(|t| tflops(&p, t)),
            cublas_time_us: cublas.map(|t| t * 1e6),
            cublas_tflops: cublas.map(|t| tflops(&p, t)),
            speedup_vs_cublas: cublas.zip(t).map(|(c, w)| c / w),
            details: c.and_then(|c| c.measured.as_ref()).map(Into::into),
            repack: outcome.worker.repack.as_ref().map(RepackReport::from),
            failure: match c {
                Some(c) => c.failure.clone(),
                None => Some("the configuration was not run".into()),
            },
        })
    }
}
