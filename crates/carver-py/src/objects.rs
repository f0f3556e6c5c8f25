//! The typed objects the package returns. Each wraps the carver-schema type the CLI prints, so
//! its attributes are that document's fields and `to_dict()` is the CLI's JSON for it. Nested
//! objects and dicts are made when asked for, which keeps a recommendation's Python cost to a
//! handful of allocations.

use carver_schema as schema;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::values::{document_to_py, to_py};

/// The JSON spelling of a serde enum (`"wgmma"`, `"grouped-rows"`, `"compute"`).
fn json_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

/// Getters for plain fields, and the class's other methods, in one `#[pymethods]` block.
macro_rules! class_methods {
    ($class:ident { $($field:ident: $ty:ty),* $(,)? } $($extra:item)*) => {
        #[pymethods]
        impl $class {
            $(
                #[getter]
                fn $field(&self) -> $ty {
                    self.0.$field.clone()
                }
            )*

            /// The same fields as carver's JSON (`carver ... --format json`).
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                document_to_py(py, &self.0)
            }

            $($extra)*
        }
    };
}

/// A configuration in family-neutral terms (`hints[].tile` of the JSON).
#[pyclass(frozen, eq, hash, module = "carver")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Tile(pub schema::Tile);

class_methods!(Tile {
    block_m: u32,
    block_n: u32,
    block_k: u32,
    warps_m: u32,
    warps_n: u32,
    producer_warps: u32,
    stages: u32,
    split_k: u32,
    cluster_m: u32,
    cluster_n: u32,
    persistent: bool,
    swap_ab: bool,
}

    /// Tile rows per launch-order group (1 = no grouping).
    #[getter]
    fn group(&self) -> u32 {
        self.0.raster.group
    }

    /// The launch-order walk (`grouped-rows`).
    #[getter]
    fn raster_order(&self) -> String {
        json_name(&self.0.raster.order)
    }

    /// The tensor-core instruction family: `mma-sync`, `wgmma` or `tcgen05`.
    #[getter]
    fn mma(&self) -> String {
        json_name(&self.0.mma)
    }

    /// Every warp of a block, compute and producer.
    #[getter]
    fn warps(&self) -> u32 {
        self.0.warps_m * self.0.warps_n + self.0.producer_warps
    }

    fn __repr__(&self) -> String {
        let t = &self.0;
        format!(
            "Tile({}x{}x{}, warps {}x{}+{}, stages {}, group {}, split_k {}, {})",
            t.block_m,
            t.block_n,
            t.block_k,
            t.warps_m,
            t.warps_n,
            t.producer_warps,
            t.stages,
            t.raster.group,
            t.split_k,
            json_name(&t.mma)
        )
    }
);

/// Where the predicted time goes (`prediction.breakdown` of the JSON).
#[pyclass(frozen, eq, module = "carver")]
#[derive(Clone, PartialEq)]
pub struct Breakdown(pub schema::Breakdown);

class_methods!(Breakdown {
    compute_us: f64,
    smem_us: f64,
    l2_us: f64,
    dram_us: f64,
    latency_us: f64,
    epilogue_us: f64,
    split_k_us: f64,
    overhead_us: f64,
    repack_us: f64,
    dram_bytes: f64,
    l2_bytes: f64,
    wave_efficiency: f64,
    padding_efficiency: f64,
}

    fn __repr__(&self) -> String {
        let b = &self.0;
        format!(
            "Breakdown(compute_us={}, smem_us={}, l2_us={}, dram_us={}, latency_us={}, ...)",
            b.compute_us, b.smem_us, b.l2_us, b.dram_us, b.latency_us
        )
    }
);

/// The cost model's verdict on one configuration (`hints[].prediction` of the JSON).
#[pyclass(frozen, eq, module = "carver")]
#[derive(Clone, PartialEq)]
pub struct Prediction(pub schema::Prediction);

class_methods!(Prediction {
    time_us: f64,
    tflops: f64,
    smem_bytes: u64,
    registers_per_thread: u32,
    threads: u32,
    blocks_per_sm: u32,
    grid: u64,
    waves: f64,
}

    /// What limits the time: `dram`, `l2`, `smem`, `compute` or `latency`.
    #[getter]
    fn bound(&self) -> &'static str {
        self.0.bound.as_str()
    }

    /// On a hedge of the ranking, the registers per thread its time assumes (fewer than the
    /// estimate `registers_per_thread`, one block more per SM); else None.
    #[getter]
    fn hedged_registers(&self) -> Option<u32> {
        self.0.hedged_registers
    }

    #[getter]
    fn breakdown(&self) -> Breakdown {
        Breakdown(self.0.breakdown.clone())
    }

    fn __repr__(&self) -> String {
        format!(
            "Prediction(time_us={}, tflops={}, bound='{}')",
            self.0.time_us,
            self.0.tflops,
            self.0.bound.as_str()
        )
    }
);

/// One recommended configuration: its rank, the configuration in the target's own parameter
/// names (`config`, e.g. a `triton.Config` dict), its tile and the model's prediction.
#[pyclass(frozen, eq, module = "carver")]
#[derive(Clone, PartialEq)]
pub struct Hint(pub schema::Hint);

class_methods!(Hint {
    rank: usize,
}

    /// The configuration in the target's own parameter names (a new dict on each access).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.config)
    }

    #[getter]
    fn tile(&self) -> Tile {
        Tile(self.0.tile)
    }

    #[getter]
    fn prediction(&self) -> Prediction {
        Prediction(self.0.prediction.clone())
    }

    /// Predicted time, microseconds (`prediction.time_us`).
    #[getter]
    fn time_us(&self) -> f64 {
        self.0.prediction.time_us
    }

    /// Predicted TFLOP/s (`prediction.tflops`).
    #[getter]
    fn tflops(&self) -> f64 {
        self.0.prediction.tflops
    }

    /// What limits the time (`prediction.bound`).
    #[getter]
    fn bound(&self) -> &'static str {
        self.0.prediction.bound.as_str()
    }

    /// Where the time goes (`prediction.breakdown`).
    #[getter]
    fn breakdown(&self) -> Breakdown {
        Breakdown(self.0.prediction.breakdown.clone())
    }

    fn __repr__(&self) -> String {
        format!(
            "Hint(rank={}, time_us={:.2}, bound='{}', config={})",
            self.0.rank,
            self.0.prediction.time_us,
            self.0.prediction.bound.as_str(),
            self.0.config
        )
    }
);

/// The hints for one shape on one GPU, or why there are none (`results[]` of the JSON).
#[pyclass(frozen, eq, module = "carver")]
#[derive(Clone, PartialEq)]
pub struct ShapeResult(pub schema::RecommendResult);

class_methods!(ShapeResult {
    arch: String,
    target: String,
    error: Option<String>,
    elapsed_us: f64,
}

    /// The shape as given: `m`, `n`, `k`, `batch` and `name` when it has one.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0.shape)
    }

    #[getter]
    fn m(&self) -> u64 {
        self.0.shape.m
    }

    #[getter]
    fn n(&self) -> u64 {
        self.0.shape.n
    }

    #[getter]
    fn k(&self) -> u64 {
        self.0.shape.k
    }

    #[getter]
    fn batch(&self) -> u64 {
        self.0.shape.batch
    }

    #[getter]
    fn name(&self) -> Option<String> {
        self.0.shape.name.clone()
    }

    /// Dtypes and layouts: `dtype_a`, `dtype_b`, `dtype_c`, `dtype_acc`, `layout_a`, `layout_b`.
    #[getter]
    fn problem<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        document_to_py(py, &self.0.problem)
    }

    /// Best first; empty when `error` is set.
    #[getter]
    fn hints<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        hint_list(py, self.0.hints.iter().cloned())
    }

    /// The winner `carver tune` measured for this problem on a GPU of this kind, when the
    /// tuning database holds one.
    #[getter]
    fn measured<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0
            .measured
            .as_ref()
            .map(|m| document_to_py(py, m))
            .transpose()
    }

    /// Whether this shape got hints.
    #[getter]
    fn ok(&self) -> bool {
        self.0.error.is_none()
    }

    fn __repr__(&self) -> String {
        let s = &self.0.shape;
        let what = match &self.0.error {
            Some(e) => format!("error={e:?}"),
            None => format!("{} hints", self.0.hints.len()),
        };
        format!(
            "ShapeResult(m={}, n={}, k={}, batch={}, arch='{}', target='{}', {what})",
            s.m, s.n, s.k, s.batch, self.0.arch, self.0.target
        )
    }
);

/// Hint objects for `hints`, in order.
pub fn hint_list<'py>(
    py: Python<'py>,
    hints: impl IntoIterator<Item = schema::Hint>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for h in hints {
        list.append(Hint(h))?;
    }
    Ok(list)
}

/// A whole recommendation (`carver recommend --format json`): one result per shape and GPU.
#[pyclass(frozen, eq, sequence, module = "carver")]
#[derive(Clone, PartialEq)]
pub struct Recommendations(pub schema::RecommendOutput);

class_methods!(Recommendations {
    schema_version: u32,
    carver_version: String,
}

    /// Shapes in the order given; for each shape, the GPUs in the order given.
    #[getter]
    fn results(&self) -> Vec<ShapeResult> {
        self.0.results.iter().cloned().map(ShapeResult).collect()
    }

    fn __len__(&self) -> usize {
        self.0.results.len()
    }

    fn __getitem__(&self, index: isize) -> PyResult<ShapeResult> {
        let len = self.0.results.len() as isize;
        let i = if index < 0 { index + len } else { index };
        if !(0..len).contains(&i) {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "result {index} of {len}"
            )));
        }
        Ok(ShapeResult(self.0.results[i as usize].clone()))
    }

    fn __repr__(&self) -> String {
        let failed = self.0.results.iter().filter(|r| r.error.is_some()).count();
        format!(
            "Recommendations({} results, {failed} with errors)",
            self.0.results.len()
        )
    }
);

/// The model's verdict on one configuration a caller gave (`carver.price`).
#[pyclass(frozen, module = "carver")]
pub struct PricedConfig(pub carver_flows::price::Priced);

#[pymethods]
impl PricedConfig {
    /// The configuration as given, in the target's own parameter names.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.config)
    }

    /// Its tile, or None when it could not be priced.
    #[getter]
    fn tile(&self) -> Option<Tile> {
        self.0.verdict.as_ref().ok().map(|(t, _)| Tile(*t))
    }

    /// The prediction, or None when it could not be priced.
    #[getter]
    fn prediction(&self) -> Option<Prediction> {
        self.0
            .verdict
            .as_ref()
            .ok()
            .map(|(_, p)| Prediction(p.clone()))
    }

    /// Predicted time, microseconds, or None when it could not be priced.
    #[getter]
    fn time_us(&self) -> Option<f64> {
        self.0.verdict.as_ref().ok().map(|(_, p)| p.time_us)
    }

    /// Why it could not be priced (a tile rule it breaks, a GPU limit it exceeds), or None.
    #[getter]
    fn error(&self) -> Option<String> {
        self.0.verdict.as_ref().err().cloned()
    }

    #[getter]
    fn ok(&self) -> bool {
        self.0.verdict.is_ok()
    }

    /// `config`, `tile`, `prediction` and `error`, the last three None where they do not apply.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (tile, prediction, error) = match &self.0.verdict {
            Ok((t, p)) => (
                serde_json::to_value(t).ok(),
                serde_json::to_value(p).ok(),
                None,
            ),
            Err(e) => (None, None, Some(e.clone())),
        };
        let value = serde_json::json!({
            "config": self.0.config,
            "tile": tile,
            "prediction": prediction,
            "error": error,
        });
        to_py(py, &value)
    }

    fn __repr__(&self) -> String {
        match &self.0.verdict {
            Ok((_, p)) => format!(
                "PricedConfig(time_us={:.2}, config={})",
                p.time_us, self.0.config
            ),
            Err(e) => format!("PricedConfig(error={e:?}, config={})", self.0.config),
        }
    }
}
