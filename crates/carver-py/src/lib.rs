//! `carver._carver`: the Python front end of carver-flows. Each function parses its Python
//! arguments into a flow's typed request, runs the flow without holding the interpreter, and
//! returns objects wrapping the carver-schema document the CLI prints. `main` runs the `carver`
//! command line itself (`python -m carver`). The pure-Python package around it (`carver/`)
//! re-exports these and adds the Triton and TileLang helpers.

mod args;
mod errors;
mod moe;
mod objects;
mod values;

use std::path::PathBuf;
use std::time::Instant;

use carver_flows::archs;
use carver_flows::price::{PriceRequest, price as price_flow};
use carver_flows::recommend::{RecommendRequest, recommend as recommend_flow};
use carver_flows::shapes::{ParsedShape, ShapeRow};
use carver_flows::{FlowError, Locations};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::args::ProblemKind;

/// The CLI's allocator (`carver-cli`'s `main.rs` says why), with thread-locals Python's `dlopen`
/// can place.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use crate::errors::{Kind, Warnings, detached, error, flow_error, guarded};
use crate::objects::{
    Breakdown, Hint, Prediction, PricedConfig, Recommendations, ShapeResult, Tile, hint_list,
};
use crate::values::{document_to_py, from_py};

/// Runs a flow detached from the interpreter; its error becomes the matching exception and its
/// warnings `CarverWarning`s.
pub(crate) fn run_flow<T: Send>(
    py: Python<'_>,
    flow: impl FnOnce(&Warnings) -> Result<T, FlowError> + Send,
) -> PyResult<T> {
    let warnings = Warnings::default();
    let outcome = detached(py, || flow(&warnings))?;
    warnings.issue(py)?;
    outcome.map_err(|e| flow_error(py, &e))
}

/// The request of one `recommend` or `recommend_many` call.
#[allow(clippy::too_many_arguments)]
fn request(
    py: Python<'_>,
    archs: Vec<carver_flows::archs::ArchChoice>,
    shapes: Vec<ShapeRow>,
    target: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    layout: &Bound<'_, PyAny>,
    topk: &Bound<'_, PyAny>,
    out_dtype: Option<&Bound<'_, PyAny>>,
    acc_dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<RecommendRequest> {
    let kind = ProblemKind::extract(py, target, dtype, out_dtype, acc_dtype, layout)?;
    Ok(RecommendRequest {
        archs,
        shapes,
        dtype: kind.dtype,
        out_dtype: kind.out_dtype,
        acc_dtype: kind.acc_dtype,
        layouts: kind.layouts,
        family: kind.family,
        topk: args::topk(topk)?,
    })
}

/// The `topk` best configurations for C (m x n) = A (m x k) @ B (k x n), best first.
///
/// `arch` is a GPU of the hardware database (`carver.arch_list()`) or `"auto"` for this
/// machine's first GPU; `target` the kernel family the configurations are for (`triton`,
/// `tilelang`, `cuda-sm90`, `generic`); `dtype` the input type (`f16`, `bf16`, `f32`, `e4m3`,
/// `e5m2`, `i8`, or a dtype object such as `torch.float16`); `layout` the storage order of A and
/// B (`rr`, `rc`, `cr`, `cc`). `hardware_db` and `cache_dir` are the CLI's `--hardware-db` and
/// `--cache-dir` (default: `$CARVER_HARDWARE_DB`, `$CARVER_CACHE_DIR`, the user cache).
/// Raises `InvalidInputError` (a `ValueError`) with the CLI's message for a value it cannot use.
#[pyfunction]
#[pyo3(signature = (m, n, k, *, arch = None, target = None, dtype = None, layout = None,
    batch = None, topk = None, out_dtype = None, acc_dtype = None, hardware_db = None,
    cache_dir = None))]
#[allow(clippy::too_many_arguments)]
fn recommend<'py>(
    py: Python<'py>,
    m: &Bound<'py, PyAny>,
    n: &Bound<'py, PyAny>,
    k: &Bound<'py, PyAny>,
    arch: Option<&Bound<'py, PyAny>>,
    target: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
    layout: Option<&Bound<'py, PyAny>>,
    batch: Option<&Bound<'py, PyAny>>,
    topk: Option<&Bound<'py, PyAny>>,
    out_dtype: Option<&Bound<'py, PyAny>>,
    acc_dtype: Option<&Bound<'py, PyAny>>,
    hardware_db: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyList>> {
    guarded(py, || {
        let d = Defaults::new(py);
        let shape = ShapeRow {
            line: 0,
            parsed: Ok(one_shape(m, n, k, batch.unwrap_or(&d.one))?),
        };
        let request = request(
            py,
            vec![args::arch(arch.unwrap_or(&d.arch))?],
            vec![shape],
            target.unwrap_or(&d.target),
            dtype.unwrap_or(&d.dtype),
            layout.unwrap_or(&d.layout),
            topk.unwrap_or(&d.topk),
            out_dtype,
            acc_dtype,
        )?;
        let loc = args::locations(hardware_db, cache_dir);
        let answer = run_flow(py, |w| recommend_flow(&loc, &request, w))?;
        let result = answer.output.results.into_iter().next();
        match result {
            Some(r) => match r.error {
                // Every per-shape error is the problem's (a size, a dtype, a target).
                Some(e) => Err(error(py, Kind::InvalidInput, e)),
                None => hint_list(py, r.hints),
            },
            None => Err(error(py, Kind::Internal, "the flow answered no shape")),
        }
    })
}

/// The shape of a one-shape call, each size checked as the CLI checks its flags.
fn one_shape(
    m: &Bound<'_, PyAny>,
    n: &Bound<'_, PyAny>,
    k: &Bound<'_, PyAny>,
    batch: &Bound<'_, PyAny>,
) -> PyResult<ParsedShape> {
    Ok(ParsedShape {
        name: None,
        m: args::size(m, "M")?,
        n: args::size(n, "N")?,
        k: args::size(k, "K")?,
        batch: args::size(batch, "batch")?,
    })
}

/// Many shapes (and GPUs) in one call, as `carver recommend --shapes FILE --format json`: a
/// `Recommendations` with one `ShapeResult` per (shape, GPU); a shape the model cannot answer
/// has its `error` in place and the others are answered.
///
/// `shapes`: (m, n, k) or (m, n, k, batch) tuples, or dicts with `m`, `n`, `k` and optional
/// `batch` and `name`. `arch`: a name, several comma-separated, or a list of names.
#[pyfunction]
#[pyo3(signature = (shapes, *, arch = None, target = None, dtype = None, layout = None,
    batch = None, topk = None, out_dtype = None, acc_dtype = None, hardware_db = None,
    cache_dir = None))]
#[allow(clippy::too_many_arguments)]
fn recommend_many<'py>(
    py: Python<'py>,
    shapes: &Bound<'py, PyAny>,
    arch: Option<&Bound<'py, PyAny>>,
    target: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
    layout: Option<&Bound<'py, PyAny>>,
    batch: Option<&Bound<'py, PyAny>>,
    topk: Option<&Bound<'py, PyAny>>,
    out_dtype: Option<&Bound<'py, PyAny>>,
    acc_dtype: Option<&Bound<'py, PyAny>>,
    hardware_db: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<Recommendations> {
    guarded(py, || {
        let d = Defaults::new(py);
        let default_batch = args::size(batch.unwrap_or(&d.one), "batch")?;
        let request = request(
            py,
            args::archs(arch.unwrap_or(&d.arch))?,
            args::shapes(shapes, default_batch)?,
            target.unwrap_or(&d.target),
            dtype.unwrap_or(&d.dtype),
            layout.unwrap_or(&d.layout),
            topk.unwrap_or(&d.topk),
            out_dtype,
            acc_dtype,
        )?;
        let loc = args::locations(hardware_db, cache_dir);
        let answer = run_flow(py, |w| recommend_flow(&loc, &request, w))?;
        Ok(Recommendations(answer.output))
    })
}

/// The model's verdict on configurations the caller already has (in the target's own
/// parameter names: `hints[].config` of a recommendation, or a `triton.Config`'s dict form),
/// for one shape on one GPU: a `PricedConfig` per configuration, in the order given, with
/// `error` set where one cannot be priced (it breaks a tile rule or a limit of the GPU).
#[pyfunction]
#[pyo3(signature = (m, n, k, configs, *, arch = None, target = None, dtype = None,
    layout = None, batch = None, out_dtype = None, acc_dtype = None, hardware_db = None,
    cache_dir = None))]
#[allow(clippy::too_many_arguments)]
fn price<'py>(
    py: Python<'py>,
    m: &Bound<'py, PyAny>,
    n: &Bound<'py, PyAny>,
    k: &Bound<'py, PyAny>,
    configs: &Bound<'py, PyAny>,
    arch: Option<&Bound<'py, PyAny>>,
    target: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
    layout: Option<&Bound<'py, PyAny>>,
    batch: Option<&Bound<'py, PyAny>>,
    out_dtype: Option<&Bound<'py, PyAny>>,
    acc_dtype: Option<&Bound<'py, PyAny>>,
    hardware_db: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<Vec<PricedConfig>> {
    guarded(py, || {
        let d = Defaults::new(py);
        let kind = ProblemKind::extract(
            py,
            target.unwrap_or(&d.target),
            dtype.unwrap_or(&d.dtype),
            out_dtype,
            acc_dtype,
            layout.unwrap_or(&d.layout),
        )?;
        let configs = configs
            .try_iter()?
            .enumerate()
            .map(|(i, c)| {
                from_py(&c?).map_err(|e| {
                    let kind = if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
                        Kind::ArgumentType
                    } else {
                        Kind::InvalidInput
                    };
                    error(py, kind, format!("configs[{i}]: {}", e.value(py)))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let request = PriceRequest {
            arch: args::arch(arch.unwrap_or(&d.arch))?,
            shape: one_shape(m, n, k, batch.unwrap_or(&d.one))?,
            dtype: kind.dtype,
            out_dtype: kind.out_dtype,
            acc_dtype: kind.acc_dtype,
            layouts: kind.layouts,
            family: kind.family,
            configs,
        };
        let loc = args::locations(hardware_db, cache_dir);
        let priced = run_flow(py, |w| price_flow(&loc, &request, w))?;
        Ok(priced.into_iter().map(PricedConfig).collect())
    })
}

/// Every GPU of the hardware database: the `gpus` of `carver arch list --format json`.
#[pyfunction]
#[pyo3(signature = (*, hardware_db = None))]
fn arch_list(py: Python<'_>, hardware_db: Option<PathBuf>) -> PyResult<Bound<'_, PyAny>> {
    guarded(py, || {
        let loc = args::locations(hardware_db, None);
        let list = run_flow(py, |_| archs::list(&loc))?;
        document_to_py(py, &list.gpus)
    })
}

/// One GPU's full model, with its stored calibration: the `arch` of
/// `carver arch show NAME --format json`.
#[pyfunction]
#[pyo3(signature = (name, *, hardware_db = None, cache_dir = None))]
fn arch<'py>(
    py: Python<'py>,
    name: &Bound<'py, PyAny>,
    hardware_db: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    guarded(py, || {
        let name = args::text(name, "name")?;
        let loc = args::locations(hardware_db, cache_dir);
        let report = run_flow(py, |w| archs::show(&loc, &name, w))?;
        document_to_py(py, &report.arch)
    })
}

/// This machine's GPUs, modelled and matched to the database: the `gpus` of
/// `carver arch detect --format json`. Raises `GpuError` without a driver or a GPU.
#[pyfunction]
#[pyo3(signature = (*, hardware_db = None, cache_dir = None))]
fn detect(
    py: Python<'_>,
    hardware_db: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<Bound<'_, PyAny>> {
    guarded(py, || {
        let loc = args::locations(hardware_db, cache_dir);
        let report = run_flow(py, |w| archs::detect(&loc, w))?;
        document_to_py(py, &report.gpus)
    })
}

/// Runs the `carver` command line on `argv` (program name first) in this process and returns
/// its exit status; `relaunch` is how to start it again (`[sys.executable, "-m", "carver"]`),
/// which `carver tune` uses for its worker processes.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>, relaunch: Vec<String>) -> PyResult<u8> {
    let Some((program, rest)) = relaunch.split_first() else {
        return Err(error(
            py,
            Kind::InvalidInput,
            "relaunch is empty; give the program that starts this command line",
        ));
    };
    let relaunch = carver_cli::Relaunch {
        program: program.into(),
        args: rest.to_vec(),
    };
    // A panic in the command line is reported as one in the binary is: exit status 101.
    Ok(detached(py, || carver_cli::run(argv, relaunch)).unwrap_or(101))
}

/// Checks the problem options (`target`, `dtype`, `layout`, `out_dtype`, `acc_dtype`) as
/// `recommend` would, without planning anything: a decorator reports a bad one when it is
/// applied instead of at the kernel's first call.
#[pyfunction]
#[pyo3(signature = (*, target, dtype, layout, out_dtype = None, acc_dtype = None))]
fn _check_problem_kind(
    py: Python<'_>,
    target: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    layout: &Bound<'_, PyAny>,
    out_dtype: Option<&Bound<'_, PyAny>>,
    acc_dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    guarded(py, || {
        ProblemKind::extract(py, target, dtype, out_dtype, acc_dtype, layout).map(|_| ())
    })
}

/// Prepares this process to run the command line as the binary does (a closed pipe ends it
/// quietly; blank CARVER_* variables count as unset). For `python -m carver` only, before it
/// starts any thread: it changes the process's environment.
#[pyfunction]
fn _prepare_cli_process() {
    // SAFETY: called from `carver/__main__.py` when it runs as the program, in the main thread
    // before any other thread is started.
    unsafe { carver_cli::prepare_process() };
}

/// Seconds per call of the recommend flow itself, timed in Rust over `iterations` calls: the
/// reference for measuring what the Python layer adds (`benches/python/decorator_bench.py`).
#[pyfunction]
#[pyo3(signature = (m, n, k, *, iterations, arch = "h100", target = "triton", topk = 8))]
#[allow(clippy::too_many_arguments)]
fn _time_recommend_flow(
    py: Python<'_>,
    m: u64,
    n: u64,
    k: u64,
    iterations: u32,
    arch: &str,
    target: &str,
    topk: usize,
) -> PyResult<f64> {
    let family = target
        .parse()
        .map_err(|e: carver::family::UnknownFamily| error(py, Kind::InvalidInput, e.to_string()))?;
    let mut request = RecommendRequest::new(arch, family, m, n, k);
    request.topk =
        carver::TopK::new(topk).map_err(|e| error(py, Kind::InvalidInput, e.to_string()))?;
    let loc = Locations::default();
    let iterations = iterations.max(1);
    run_flow(py, |w| {
        let start = Instant::now();
        for _ in 0..iterations {
            recommend_flow(&loc, &request, w)?;
        }
        Ok(start.elapsed().as_secs_f64() / f64::from(iterations))
    })
}

/// The keyword arguments' defaults as Python objects, so that a default and an explicit
/// argument go through the same checks.
struct Defaults<'py> {
    arch: Bound<'py, PyAny>,
    target: Bound<'py, PyAny>,
    dtype: Bound<'py, PyAny>,
    layout: Bound<'py, PyAny>,
    topk: Bound<'py, PyAny>,
    one: Bound<'py, PyAny>,
}

impl<'py> Defaults<'py> {
    fn new(py: Python<'py>) -> Self {
        use pyo3::types::{PyInt, PyString};
        Self {
            arch: PyString::intern(py, "h100").into_any(),
            target: PyString::intern(py, "triton").into_any(),
            dtype: PyString::intern(py, "f16").into_any(),
            layout: PyString::intern(py, "rr").into_any(),
            topk: PyInt::new(py, carver::TopK::DEFAULT.get()).into_any(),
            one: PyInt::new(py, 1).into_any(),
        }
    }
}

#[pymodule]
fn _carver(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(recommend, m)?)?;
    m.add_function(wrap_pyfunction!(recommend_many, m)?)?;
    m.add_function(wrap_pyfunction!(price, m)?)?;
    m.add_function(wrap_pyfunction!(moe::recommend_moe, m)?)?;
    m.add_function(wrap_pyfunction!(moe::moe_from_hf, m)?)?;
    m.add_function(wrap_pyfunction!(arch_list, m)?)?;
    m.add_function(wrap_pyfunction!(arch, m)?)?;
    m.add_function(wrap_pyfunction!(detect, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(_time_recommend_flow, m)?)?;
    m.add_function(wrap_pyfunction!(_check_problem_kind, m)?)?;
    m.add_function(wrap_pyfunction!(_prepare_cli_process, m)?)?;
    m.add_class::<Hint>()?;
    m.add_class::<Tile>()?;
    m.add_class::<Prediction>()?;
    m.add_class::<Breakdown>()?;
    m.add_class::<ShapeResult>()?;
    m.add_class::<Recommendations>()?;
    m.add_class::<PricedConfig>()?;
    m.add_class::<moe::MoeRecommendation>()?;
    m.add_class::<moe::MoeBatch>()?;
    m.add_class::<moe::MoeHint>()?;
    let c = errors::classes(py)?;
    m.add("CarverError", c.carver.bind(py))?;
    m.add("InvalidInputError", c.invalid_input.bind(py))?;
    m.add("UnknownArchError", c.unknown_arch.bind(py))?;
    m.add("ArgumentTypeError", c.argument_type.bind(py))?;
    m.add("GpuError", c.gpu.bind(py))?;
    m.add("MissingDependencyError", c.missing_dependency.bind(py))?;
    m.add("CarverWarning", c.warning.bind(py))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SCHEMA_VERSION", carver_schema::SCHEMA_VERSION)?;
    m.add("TARGETS", carver::Family::ALL.map(|f| f.as_str()).to_vec())?;
    Ok(())
}
