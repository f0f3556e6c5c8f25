//! Python arguments to the flows' typed requests. Values are checked by the library's own
//! parsers (dtype, target, layout, top-k, sizes), so a bad one raises the message the CLI prints
//! for the same mistake; only what Python adds (wrong types, negative numbers) is worded here.

use std::path::PathBuf;

use carver::template::MAX_DIM;
use carver::{CarverError, DType, Family, Layout, TopK};
use carver_flows::Locations;
use carver_flows::archs::ArchChoice;
use carver_flows::recommend::parse_layouts;
use carver_flows::shapes::{ParsedShape, ShapeRow};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::errors::{Kind, error};
use crate::values::{repr, type_name};

/// What every recommendation and pricing call takes besides shapes and GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct ProblemKind {
    pub family: Family,
    pub dtype: DType,
    pub out_dtype: Option<DType>,
    pub acc_dtype: Option<DType>,
    pub layouts: (Layout, Layout),
}

impl ProblemKind {
    /// From the keyword arguments' text.
    pub fn parse(
        target: &str,
        dtype: &str,
        out_dtype: Option<&str>,
        acc_dtype: Option<&str>,
        layout: &str,
    ) -> Result<Self, String> {
        Ok(Self {
            family: target
                .parse()
                .map_err(|e: carver::family::UnknownFamily| e.to_string())?,
            dtype: dtype.parse()?,
            out_dtype: out_dtype.map(str::parse).transpose()?,
            acc_dtype: acc_dtype.map(str::parse).transpose()?,
            layouts: parse_layouts(layout)?,
        })
    }

    /// The same, raising `InvalidInputError` with the parser's message.
    pub fn extract(
        py: Python<'_>,
        target: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        out_dtype: Option<&Bound<'_, PyAny>>,
        acc_dtype: Option<&Bound<'_, PyAny>>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let out = out_dtype.map(|d| dtype_text(d, "out_dtype")).transpose()?;
        let acc = acc_dtype.map(|d| dtype_text(d, "acc_dtype")).transpose()?;
        Self::parse(
            &text(target, "target")?,
            &dtype_text(dtype, "dtype")?,
            out.as_deref(),
            acc.as_deref(),
            &text(layout, "layout")?,
        )
        .map_err(|m| error(py, Kind::InvalidInput, m))
    }
}

/// A string argument, or `ArgumentTypeError` naming what was given.
pub fn text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(error(
            obj.py(),
            Kind::ArgumentType,
            format!(
                "{what} = {} ({}) is not a string",
                repr(obj),
                type_name(obj)
            ),
        )),
    }
}

/// A dtype given as text (`"f16"`, `"torch.float16"`) or as a framework's dtype object
/// (`torch.float16`), named by its text after any module prefix.
pub fn dtype_text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let shown = if obj.is_instance_of::<PyString>() {
        text(obj, what)?
    } else {
        obj.str()?.to_string()
    };
    match shown.rsplit_once('.') {
        Some((_, name)) if !name.is_empty() => Ok(name.to_string()),
        _ => Ok(shown),
    }
}

/// One problem size (`what` is `M`, `N`, `K` or `batch`): a Python int (or anything with
/// `__index__`, such as a numpy integer) from 1 to `MAX_DIM`. Zero and sizes too large are
/// left to the library's check, so their message is the CLI's.
pub fn size(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let py = obj.py();
    let not_int = || {
        error(
            py,
            Kind::ArgumentType,
            format!(
                "{what} = {} ({}) is not an integer; accepted: an int from 1 to {MAX_DIM}",
                repr(obj),
                type_name(obj)
            ),
        )
    };
    // `True` is an int to Python and never a size.
    if obj.is_instance_of::<PyBool>() {
        return Err(not_int());
    }
    let index = if obj.is_instance_of::<PyInt>() {
        obj.clone()
    } else {
        // `operator.index`: what Python itself accepts where it needs an integer.
        obj.call_method0("__index__").map_err(|_| not_int())?
    };
    match index.extract::<i64>() {
        Ok(v) if v >= 0 => Ok(v as u64),
        Ok(v) => Err(error(
            py,
            Kind::InvalidInput,
            CarverError::InvalidShape(format!("{what} is {v}; every size must be at least 1"))
                .to_string(),
        )),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => Err(error(
            py,
            Kind::InvalidInput,
            CarverError::InvalidShape(format!(
                "{what} = {} exceeds the largest supported size {MAX_DIM}",
                repr(&index)
            ))
            .to_string(),
        )),
        Err(_) => Err(not_int()),
    }
}

/// How many configurations to return: 1 to `TopK::MAX`, checked by the library.
pub fn topk(obj: &Bound<'_, PyAny>) -> PyResult<TopK> {
    let py = obj.py();
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(error(
            py,
            Kind::ArgumentType,
            format!(
                "topk = {} ({}) is not an integer; accepted 1 to {}",
                repr(obj),
                type_name(obj),
                TopK::MAX
            ),
        ));
    }
    // The library's parser words negative and oversized values as the CLI's `--topk` does.
    let shown = obj.str()?.to_string();
    shown
        .parse::<TopK>()
        .map_err(|e| error(py, Kind::InvalidInput, e.to_string()))
}

/// One GPU name (`h100`) or `auto`.
pub fn arch(obj: &Bound<'_, PyAny>) -> PyResult<ArchChoice> {
    Ok(ArchChoice::parse(&text(obj, "arch")?))
}

/// One GPU or several: a name, a comma-separated list (as `--arch` takes), or a list of names.
pub fn archs(obj: &Bound<'_, PyAny>) -> PyResult<Vec<ArchChoice>> {
    let names: Vec<String> = if obj.is_instance_of::<PyString>() {
        text(obj, "arch")?.split(',').map(str::to_string).collect()
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        obj.try_iter()?
            .map(|item| text(&item?, "arch"))
            .collect::<PyResult<_>>()?
    } else {
        return Err(error(
            obj.py(),
            Kind::ArgumentType,
            format!(
                "arch = {} ({}) is not a GPU name or a list of them",
                repr(obj),
                type_name(obj)
            ),
        ));
    };
    if names.is_empty() {
        return Err(error(
            obj.py(),
            Kind::InvalidInput,
            "arch is empty; give a GPU name (`carver.arch_list()`) or `auto`",
        ));
    }
    Ok(names.iter().map(|n| ArchChoice::parse(n)).collect())
}

/// The shapes of a batch: `(m, n, k)`, `(m, n, k, batch)` or a dict with `m`, `n`, `k` (or
/// `M`, `N`, `K`) and optional `batch` and `name`. A malformed item raises with its index; a
/// size the model rejects (0, too large) is answered in place, as the CLI does.
pub fn shapes(obj: &Bound<'_, PyAny>, default_batch: u64) -> PyResult<Vec<ShapeRow>> {
    let py = obj.py();
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyDict>() {
        return Err(error(
            py,
            Kind::ArgumentType,
            "shapes is a list of (m, n, k) tuples, (m, n, k, batch) tuples or dicts with m, n, k",
        ));
    }
    let mut rows = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let parsed = shape(&item, default_batch).map_err(|e| {
            let kind = if e.is_instance_of::<PyTypeError>(py) {
                Kind::ArgumentType
            } else {
                Kind::InvalidInput
            };
            error(py, kind, format!("shapes[{i}]: {}", e.value(py)))
        })?;
        rows.push(ShapeRow {
            line: 0,
            parsed: Ok(parsed),
        });
    }
    Ok(rows)
}

fn shape(item: &Bound<'_, PyAny>, default_batch: u64) -> PyResult<ParsedShape> {
    let py = item.py();
    if let Ok(d) = item.cast::<PyDict>() {
        let get = |lower: &str, upper: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            match d.get_item(lower)? {
                Some(v) => Ok(Some(v)),
                None => d.get_item(upper),
            }
        };
        let need = |lower: &str, upper: &str| -> PyResult<u64> {
            match get(lower, upper)? {
                Some(v) => size(&v, upper),
                None => Err(error(
                    py,
                    Kind::InvalidInput,
                    format!("missing `{lower}`; a shape dict has m, n, k and optional batch, name"),
                )),
            }
        };
        let name = match d.get_item("name")? {
            Some(v) if !v.is_none() => Some(text(&v, "name")?),
            _ => None,
        };
        return Ok(ParsedShape {
            name,
            m: need("m", "M")?,
            n: need("n", "N")?,
            k: need("k", "K")?,
            batch: match get("batch", "BATCH")? {
                Some(v) => size(&v, "batch")?,
                None => default_batch,
            },
        });
    }
    if item.is_instance_of::<PyTuple>() || item.is_instance_of::<PyList>() {
        let parts: Vec<Bound<'_, PyAny>> = item.try_iter()?.collect::<PyResult<_>>()?;
        if parts.len() == 3 || parts.len() == 4 {
            return Ok(ParsedShape {
                name: None,
                m: size(&parts[0], "M")?,
                n: size(&parts[1], "N")?,
                k: size(&parts[2], "K")?,
                batch: match parts.get(3) {
                    Some(b) => size(b, "batch")?,
                    None => default_batch,
                },
            });
        }
    }
    Err(error(
        py,
        Kind::ArgumentType,
        format!(
            "{} ({}) is not a shape; accepted: (m, n, k), (m, n, k, batch) or a dict with m, n, k",
            repr(item),
            type_name(item)
        ),
    ))
}

/// Where the hardware database and the cache are: the arguments, else the environment
/// (`CARVER_HARDWARE_DB`, `CARVER_CACHE_DIR`, read by the flows as the CLI's are).
pub fn locations(hardware_db: Option<PathBuf>, cache_dir: Option<PathBuf>) -> Locations {
    Locations {
        hardware_db,
        cache_dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_text_is_checked_by_the_librarys_parsers() {
        let p = ProblemKind::parse("triton", "bf16", None, None, "rc").unwrap();
        assert_eq!(p.family, Family::Triton);
        assert_eq!(p.dtype, DType::Bf16);
        assert_eq!(p.layouts, (Layout::Row, Layout::Col));
        let e = ProblemKind::parse("trition", "f16", None, None, "rr").unwrap_err();
        assert_eq!(
            e,
            "unknown target `trition` (accepted: triton, tilelang, cuda-sm90, generic)"
        );
        let e = ProblemKind::parse("triton", "f17", None, None, "rr").unwrap_err();
        assert!(e.starts_with("unknown dtype `f17` (accepted: f16"), "{e}");
        let e = ProblemKind::parse("triton", "f16", Some("x"), None, "rr").unwrap_err();
        assert!(e.contains("`x`"), "{e}");
        let e = ProblemKind::parse("triton", "f16", None, None, "row").unwrap_err();
        assert!(e.contains("use two letters"), "{e}");
    }

    #[test]
    fn sizes_take_ints_and_say_what_is_accepted_otherwise() {
        Python::initialize();
        Python::attach(|py| {
            let eval = |code: &std::ffi::CStr| py.eval(code, None, None).unwrap();
            assert_eq!(size(&eval(c"4096"), "M").unwrap(), 4096);
            // Zero passes through to the library's own check.
            assert_eq!(size(&eval(c"0"), "M").unwrap(), 0);
            let e = size(&eval(c"4096.0"), "M").unwrap_err();
            assert!(e.is_instance_of::<PyTypeError>(py));
            assert_eq!(
                e.value(py).to_string(),
                "M = 4096.0 (float) is not an integer; accepted: an int from 1 to 2147483647"
            );
            let e = size(&eval(c"True"), "K").unwrap_err();
            assert!(e.value(py).to_string().contains("(bool)"));
            let e = size(&eval(c"'64'"), "N").unwrap_err();
            assert!(e.value(py).to_string().contains("'64' (str)"));
            let e = size(&eval(c"-5"), "N").unwrap_err();
            assert_eq!(
                e.value(py).to_string(),
                "invalid problem size: N is -5; every size must be at least 1"
            );
            let e = size(&eval(c"2**70"), "M").unwrap_err();
            assert!(e.value(py).to_string().contains("exceeds the largest"));
        });
    }

    #[test]
    fn topk_is_the_librarys_check() {
        Python::initialize();
        Python::attach(|py| {
            let eval = |code: &std::ffi::CStr| py.eval(code, None, None).unwrap();
            assert_eq!(topk(&eval(c"8")).unwrap().get(), 8);
            let e = topk(&eval(c"0")).unwrap_err();
            assert_eq!(
                e.value(py).to_string(),
                CarverError::TopKOutOfRange(0).to_string()
            );
            assert!(topk(&eval(c"-1")).is_err());
            assert!(
                topk(&eval(c"2.0"))
                    .unwrap_err()
                    .is_instance_of::<PyTypeError>(py)
            );
        });
    }

    #[test]
    fn shapes_are_tuples_or_dicts_and_a_bad_one_is_named_by_index() {
        Python::initialize();
        Python::attach(|py| {
            let list = py
                .eval(
                    c"[(1, 2, 3), [4, 5, 6, 2], {'M': 7, 'n': 8, 'k': 9, 'name': 'x'}]",
                    None,
                    None,
                )
                .unwrap();
            let rows = shapes(&list, 1).unwrap();
            let got: Vec<_> = rows.iter().map(|r| r.parsed.clone().unwrap()).collect();
            assert_eq!((got[0].m, got[0].n, got[0].k, got[0].batch), (1, 2, 3, 1));
            assert_eq!(got[1].batch, 2);
            assert_eq!(got[2].name.as_deref(), Some("x"));
            assert_eq!((got[2].m, got[2].n, got[2].k), (7, 8, 9));
            let bad = py.eval(c"[(1, 2, 3), (1, 2.5, 3)]", None, None).unwrap();
            let e = shapes(&bad, 1).unwrap_err();
            assert!(e.is_instance_of::<PyTypeError>(py));
            assert!(
                e.value(py).to_string().starts_with("shapes[1]: N = 2.5"),
                "{e}"
            );
            let short = py.eval(c"[(1, 2)]", None, None).unwrap();
            assert!(
                shapes(&short, 1)
                    .unwrap_err()
                    .to_string()
                    .contains("not a shape")
            );
        });
    }

    #[test]
    fn several_gpus_as_a_list_or_comma_separated() {
        Python::initialize();
        Python::attach(|py| {
            let one = py.eval(c"'h100,a100'", None, None).unwrap();
            assert_eq!(archs(&one).unwrap().len(), 2);
            let list = py.eval(c"['h100', 'auto']", None, None).unwrap();
            assert_eq!(archs(&list).unwrap()[1], ArchChoice::Auto);
            let bad = py.eval(c"3", None, None).unwrap();
            assert!(archs(&bad).is_err());
        });
    }
}
