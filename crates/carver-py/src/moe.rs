//! `carver.recommend_moe` and `carver.moe_from_hf`: the fused-MoE kernel's config file for a
//! layer, as objects wrapping the `carver moe --format json` document.

use std::path::PathBuf;

use carver::moe::{MoeTemplate, Routing};
use carver_flows::moe::{MoeRequest, moe, parse_block_shape, parse_dtype, read_hf_config};
use carver_schema as schema;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::args;
use crate::errors::{Kind, error, guarded};
use crate::values::document_to_py;

/// One ranked configuration of the fused-MoE kernel (one config for both GEMMs).
#[pyclass(frozen, module = "carver")]
pub struct MoeHint(schema::MoeHint);

#[pymethods]
impl MoeHint {
    #[getter]
    fn rank(&self) -> usize {
        self.0.rank
    }
    /// `{"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"}`.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0.config)
    }
    /// Gate/up plus down, microseconds.
    #[getter]
    fn predicted_us(&self) -> f64 {
        self.0.predicted_us
    }
    /// The gate/up GEMM's prediction (time, padded rows, active experts, grid, detail) as a dict.
    #[getter]
    fn gate_up<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0.gate_up)
    }
    #[getter]
    fn down<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0.down)
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0)
    }
    fn __repr__(&self) -> String {
        let c = &self.0.config;
        format!(
            "MoeHint(rank={}, BLOCK_SIZE_M={}, BLOCK_SIZE_N={}, BLOCK_SIZE_K={}, GROUP_SIZE_M={}, num_warps={}, num_stages={}, predicted_us={:.1})",
            self.0.rank,
            c.BLOCK_SIZE_M,
            c.BLOCK_SIZE_N,
            c.BLOCK_SIZE_K,
            c.GROUP_SIZE_M,
            c.num_warps,
            c.num_stages,
            self.0.predicted_us
        )
    }
}

/// The ranking for one batch size.
#[pyclass(frozen, module = "carver")]
pub struct MoeBatch(schema::MoeBatch);

#[pymethods]
impl MoeBatch {
    /// Tokens in the batch (the file's key).
    #[getter]
    fn m(&self) -> u64 {
        self.0.m
    }
    #[getter]
    fn hints<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.hints.iter().map(|h| MoeHint(h.clone())))
    }
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0)
    }
    fn __repr__(&self) -> String {
        format!("MoeBatch(m={}, hints={})", self.0.m, self.0.hints.len())
    }
}

/// A whole fused-MoE config file's rankings for one GPU.
#[pyclass(frozen, module = "carver")]
pub struct MoeRecommendation(schema::MoeOutput);

#[pymethods]
impl MoeRecommendation {
    /// The file vLLM looks up (`E=..,N=..,device_name=...json`).
    #[getter]
    fn file_name(&self) -> &str {
        &self.0.file_name
    }
    /// The same file as SGLang names it.
    #[getter]
    fn sglang_file_name(&self) -> &str {
        &self.0.sglang_file_name
    }
    #[getter]
    fn device_name(&self) -> &str {
        &self.0.device_name
    }
    #[getter]
    fn arch(&self) -> &str {
        &self.0.arch
    }
    #[getter]
    fn batches<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.batches.iter().map(|b| MoeBatch(b.clone())))
    }
    /// The document `carver moe --format json` prints for this GPU.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0)
    }
    /// The config file's content: batch size (str) -> the six kernel parameters.
    fn vllm_config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // Built key by key: a JSON map would sort "1024" before "2", and the file's keys go up.
        let out = PyDict::new(py);
        for (m, config) in &self.0.config_file().0 {
            out.set_item(m.to_string(), document_to_py(py, config)?)?;
        }
        Ok(out)
    }
    fn __repr__(&self) -> String {
        format!(
            "MoeRecommendation(file_name={:?}, batches={})",
            self.0.file_name,
            self.0.batches.len()
        )
    }
}

fn count(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u32> {
    let v = args::size(obj, what)?;
    u32::try_from(v).map_err(|_| {
        error(
            obj.py(),
            Kind::InvalidInput,
            format!("{what} = {v} is too large"),
        )
    })
}

/// The fused-MoE kernel's ranked configurations for every batch size of a layer on one GPU.
///
/// `intermediate` is the whole layer's (moe_)intermediate size; each of `tp` shards holds
/// `intermediate / tp`. `dtype` is `bf16`, `fp16` or `fp8_w8a8`; `block_shape` `[128, 128]` for
/// block-quantized fp8; `batch_sizes` the file's keys (vLLM's tuner's ladder when None);
/// `routing` a list of tokens per expert (uniform when None). Raises `InvalidInputError` naming
/// the field for a value it cannot use, `UnknownArchError` for an unknown GPU.
#[pyfunction]
#[pyo3(signature = (experts, topk, hidden, intermediate, *, tp = None, dtype = "bf16",
    block_shape = None, arch = None, batch_sizes = None, candidates = None, routing = None,
    hardware_db = None, cache_dir = None))]
#[allow(clippy::too_many_arguments)]
pub fn recommend_moe(
    py: Python<'_>,
    experts: &Bound<'_, PyAny>,
    topk: &Bound<'_, PyAny>,
    hidden: &Bound<'_, PyAny>,
    intermediate: &Bound<'_, PyAny>,
    tp: Option<&Bound<'_, PyAny>>,
    dtype: &str,
    block_shape: Option<&Bound<'_, PyAny>>,
    arch: Option<&Bound<'_, PyAny>>,
    batch_sizes: Option<Vec<Bound<'_, PyAny>>>,
    candidates: Option<&Bound<'_, PyAny>>,
    routing: Option<Vec<f64>>,
    hardware_db: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<MoeRecommendation> {
    guarded(py, || {
        let invalid = |e: String| error(py, Kind::InvalidInput, e);
        let block_shape = match block_shape {
            None => None,
            Some(b) if b.is_instance_of::<pyo3::types::PyString>() => {
                Some(parse_block_shape(&b.extract::<String>()?).map_err(invalid)?)
            }
            Some(b) => {
                let v: Vec<u32> = b.extract().map_err(|_| {
                    invalid(
                        "block_shape: give two integers, [block_n, block_k] (accepted: [128, 128])"
                            .into(),
                    )
                })?;
                match v.as_slice() {
                    [n, k] => Some([*n, *k]),
                    _ => {
                        return Err(invalid(format!(
                            "block_shape {v:?}: give two integers (accepted: [128, 128])"
                        )));
                    }
                }
            }
        };
        let dtype = parse_dtype(dtype).map_err(|e| invalid(e.to_string()))?;
        let template = MoeTemplate::new(
            count(experts, "experts")?,
            count(topk, "topk")?,
            args::size(hidden, "hidden")?,
            args::size(intermediate, "intermediate")?,
        )
        .with_tp(match tp {
            Some(tp) => count(tp, "tp")?,
            None => 1,
        })
        .with_dtype(dtype)
        .with_block_shape(block_shape)
        .with_routing(routing.map_or(Routing::Uniform, Routing::Histogram));
        let batch_sizes = batch_sizes
            .map(|list| {
                list.iter()
                    .map(|b| args::size(b, "batch size"))
                    .collect::<PyResult<Vec<u64>>>()
            })
            .transpose()?;
        let arch = match arch {
            Some(a) => args::arch(a)?,
            None => carver_flows::archs::ArchChoice::parse("h100"),
        };
        let request = MoeRequest {
            archs: vec![arch],
            template,
            batch_sizes,
            candidates: match candidates {
                Some(c) => args::topk(c)?,
                None => carver::TopK::DEFAULT,
            },
        };
        let loc = args::locations(hardware_db, cache_dir);
        let docs = crate::run_flow(py, |w| moe(&loc, &request, w))?;
        docs.into_iter()
            .next()
            .map(MoeRecommendation)
            .ok_or_else(|| error(py, Kind::Internal, "the flow answered no GPU"))
    })
}

/// The MoE fields of a Hugging Face `config.json`: `{"experts", "topk", "hidden", "intermediate"}`.
#[pyfunction]
pub fn moe_from_hf<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    guarded(py, || {
        let f = read_hf_config(&path).map_err(|e| crate::errors::flow_error(py, &e))?;
        let d = PyDict::new(py);
        d.set_item("experts", f.experts)?;
        d.set_item("topk", f.topk)?;
        d.set_item("hidden", f.hidden)?;
        d.set_item("intermediate", f.intermediate)?;
        Ok(d)
    })
}
