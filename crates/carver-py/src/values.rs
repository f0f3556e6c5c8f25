//! carver's JSON values to Python objects and back. Every dict the package returns is made
//! here from the carver-schema document the CLI prints, so `to_dict()` and
//! `carver ... --format json` agree field for field.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::Serialize;
use serde_json::{Map, Number, Value};

use crate::errors::{Kind, error};

/// A JSON value as the Python object `json.loads` would give.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                // serde_json holds every other number as a finite f64.
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A carver-schema document (or part of one) as Python dicts and lists.
pub fn document_to_py<'py, T: Serialize>(py: Python<'py>, doc: &T) -> PyResult<Bound<'py, PyAny>> {
    // Serializing plain data types into a Value cannot fail (no maps with non-string keys).
    let value = serde_json::to_value(doc).map_err(|e| {
        error(
            py,
            Kind::Internal,
            format!("cannot serialize a document: {e}"),
        )
    })?;
    to_py(py, &value)
}

/// A Python object made of dicts (string keys), lists, tuples, strings, ints, floats, bools and
/// None, as JSON: what a configuration given by a caller is made of.
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let py = obj.py();
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(error(
            py,
            Kind::InvalidInput,
            format!("{} does not fit in 64 bits", repr(obj)),
        ));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x).map(Value::Number).ok_or_else(|| {
            error(
                py,
                Kind::InvalidInput,
                format!("{x} is not a finite number"),
            )
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return obj
            .try_iter()?
            .map(|item| from_py(&item?))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in dict.iter() {
            let key = k.cast::<PyString>().map_err(|_| {
                error(
                    py,
                    Kind::ArgumentType,
                    format!(
                        "a configuration's keys are strings; got the key {}",
                        repr(&k)
                    ),
                )
            })?;
            map.insert(key.to_cow()?.into_owned(), from_py(&v)?);
        }
        return Ok(Value::Object(map));
    }
    Err(error(
        py,
        Kind::ArgumentType,
        format!(
            "{} ({}) is not JSON data; accepted: dict, list, tuple, str, int, float, bool, None",
            repr(obj),
            type_name(obj)
        ),
    ))
}

/// `repr(obj)`, or a placeholder when even that fails.
pub fn repr(obj: &Bound<'_, PyAny>) -> String {
    obj.repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<object>".into())
}

/// The name of `obj`'s type (`float`, `str`).
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trips_through_python_objects() {
        Python::initialize();
        Python::attach(|py| {
            let value = json!({
                "kwargs": {"BLOCK_SIZE_M": 128, "SPLIT_K": 1},
                "num_warps": 8,
                "time_us": 12.625,
                "big": u64::MAX,
                "negative": -3,
                "flag": true,
                "none": null,
                "list": [1, "two", 3.5]
            });
            let obj = to_py(py, &value).unwrap();
            assert!(obj.is_instance_of::<PyDict>());
            let big: u64 = obj.get_item("big").unwrap().extract().unwrap();
            assert_eq!(big, u64::MAX);
            let t: f64 = obj.get_item("time_us").unwrap().extract().unwrap();
            assert_eq!(t, 12.625);
            assert!(obj.get_item("none").unwrap().is_none());
            assert_eq!(from_py(&obj).unwrap(), value);
        });
    }

    #[test]
    fn non_json_objects_are_refused_with_their_type() {
        Python::initialize();
        Python::attach(|py| {
            let set = py.eval(c"{1, 2}", None, None).unwrap();
            let e = from_py(&set).unwrap_err().to_string();
            assert!(e.contains("(set) is not JSON data"), "{e}");
            let nan = PyFloat::new(py, f64::NAN);
            assert!(from_py(nan.as_any()).is_err());
            let int_keys = py.eval(c"{1: 2}", None, None).unwrap();
            let e = from_py(&int_keys).unwrap_err().to_string();
            assert!(e.contains("keys are strings"), "{e}");
        });
    }
}
