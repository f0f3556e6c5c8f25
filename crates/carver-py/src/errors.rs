//! carver's errors as Python exceptions, with the library's own message, and the guard that
//! keeps a Rust panic from reaching Python as anything but a `CarverError`.
//!
//! The classes are made here (not in Python) so that the extension raises them without
//! importing its own package; `carver/__init__.py` re-exports them.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use carver_flows::{FlowError, Progress};
use pyo3::exceptions::{PyException, PyImportError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// Which exception class an error becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An argument's value is not accepted (also a `ValueError`).
    InvalidInput,
    /// A GPU name the hardware database does not know (an `InvalidInputError`).
    UnknownArch,
    /// An argument of the wrong type, e.g. a float size (also a `TypeError`).
    ArgumentType,
    /// A GPU is needed and there is none, or no driver, or no GPU support (a `RuntimeError`).
    Gpu,
    /// Anything else carver reports: unreadable files, a damaged database.
    Carver,
    /// A bug in carver (a panic, a document that cannot be serialized).
    Internal,
}

/// Each exception class's name and docstring.
const CLASSES: [(&str, &str); 6] = [
    (
        "CarverError",
        "Base class of every error carver raises; the message says what was wrong and what is accepted.",
    ),
    (
        "InvalidInputError",
        "An argument's value is not accepted (also a ValueError).",
    ),
    (
        "UnknownArchError",
        "A GPU name the hardware database does not know; the message lists the known ones.",
    ),
    (
        "ArgumentTypeError",
        "An argument of the wrong type, such as a float where a size is expected (also a TypeError).",
    ),
    (
        "GpuError",
        "A GPU is needed and none can be used: no driver, no device, or a flow that needs a GPU failed (also a RuntimeError).",
    ),
    (
        "MissingDependencyError",
        "An optional package (triton, tilelang) is not installed (also an ImportError).",
    ),
];

/// The exception classes, made once per interpreter.
pub struct Classes {
    pub carver: Py<PyType>,
    pub invalid_input: Py<PyType>,
    pub unknown_arch: Py<PyType>,
    pub argument_type: Py<PyType>,
    pub gpu: Py<PyType>,
    pub missing_dependency: Py<PyType>,
    /// `CarverWarning`, a `UserWarning`: things to know that do not stop a flow.
    pub warning: Py<PyType>,
}

static EXCEPTIONS: PyOnceLock<Classes> = PyOnceLock::new();

fn make_class<'py>(
    py: Python<'py>,
    name: &str,
    doc: &str,
    bases: &[Bound<'py, PyAny>],
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "carver")?;
    namespace.set_item("__doc__", doc)?;
    let bases = PyTuple::new(py, bases)?;
    Ok(py
        .get_type::<PyType>()
        .call1((name, bases, namespace))?
        .cast_into::<PyType>()?
        .unbind())
}

fn make_classes(py: Python<'_>) -> PyResult<Classes> {
    let doc = |name: &str| {
        CLASSES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, d)| *d)
    };
    let class = |name: &str, bases: &[Bound<'_, PyAny>]| make_class(py, name, doc(name), bases);
    let carver = class("CarverError", &[py.get_type::<PyException>().into_any()])?;
    let base = carver.bind(py).clone().into_any();
    let invalid_input = class(
        "InvalidInputError",
        &[base.clone(), py.get_type::<PyValueError>().into_any()],
    )?;
    let unknown_arch = class(
        "UnknownArchError",
        &[invalid_input.bind(py).clone().into_any()],
    )?;
    let argument_type = class(
        "ArgumentTypeError",
        &[
            invalid_input.bind(py).clone().into_any(),
            py.get_type::<PyTypeError>().into_any(),
        ],
    )?;
    let gpu = class(
        "GpuError",
        &[base.clone(), py.get_type::<PyRuntimeError>().into_any()],
    )?;
    let missing_dependency = class(
        "MissingDependencyError",
        &[base, py.get_type::<PyImportError>().into_any()],
    )?;
    let warning = make_class(
        py,
        "CarverWarning",
        "Something carver's caller should know that does not stop the flow (a tuning database that cannot be read, ...).",
        &[py.get_type::<pyo3::exceptions::PyUserWarning>().into_any()],
    )?;
    Ok(Classes {
        carver,
        invalid_input,
        unknown_arch,
        argument_type,
        gpu,
        missing_dependency,
        warning,
    })
}

/// The exception classes (made on first use).
pub fn classes(py: Python<'_>) -> PyResult<&Classes> {
    EXCEPTIONS.get_or_try_init(py, || make_classes(py))
}

/// An exception of `kind` carrying `message` as is.
pub fn error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    let classes = match classes(py) {
        Ok(c) => c,
        // Making five classes with `type()` does not fail; if it ever did, the message still
        // reaches the caller.
        Err(_) => return PyRuntimeError::new_err(message),
    };
    let class = match kind {
        Kind::InvalidInput => &classes.invalid_input,
        Kind::UnknownArch => &classes.unknown_arch,
        Kind::ArgumentType => &classes.argument_type,
        Kind::Gpu => &classes.gpu,
        Kind::Carver | Kind::Internal => &classes.carver,
    };
    PyErr::from_type(class.bind(py).clone(), (message,))
}

/// Which class a flow's error becomes: the caller's mistakes are `InvalidInputError`s, a
/// missing GPU a `GpuError`, the rest (files, databases) plain `CarverError`s.
pub fn kind_of(e: &FlowError) -> Kind {
    match e {
        FlowError::Arch(e) => arch_kind(e),
        FlowError::Model(_)
        | FlowError::ConfigNotJson(_)
        | FlowError::BadSelector(_)
        | FlowError::MoeInput { .. } => Kind::InvalidInput,
        FlowError::Gpu(_) | FlowError::NoGpuSupport { .. } | FlowError::NotHopper { .. } => {
            Kind::Gpu
        }
        _ => Kind::Carver,
    }
}

fn arch_kind(e: &carver_arch::ArchError) -> Kind {
    match e {
        carver_arch::ArchError::UnknownGpu { .. } => Kind::UnknownArch,
        carver_arch::ArchError::MissingDbDir { .. } => Kind::InvalidInput,
        _ => Kind::Carver,
    }
}

/// A flow's error as its Python exception, with the library's message.
pub fn flow_error(py: Python<'_>, e: &FlowError) -> PyErr {
    error(py, kind_of(e), e.to_string())
}

/// The message a panic carried.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// What a caught panic becomes.
pub fn internal_error(py: Python<'_>, payload: &(dyn Any + Send)) -> PyErr {
    error(
        py,
        Kind::Internal,
        format!(
            "internal error in carver (a bug; please report it with the call that caused it): {}",
            panic_message(payload)
        ),
    )
}

/// Runs `f` without holding the interpreter (other Python threads run meanwhile) and turns a
/// panic into a `CarverError`.
pub fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    py.detach(|| catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p)))
        .map_err(|message| {
            error(
                py,
                Kind::Internal,
                format!(
                    "internal error in carver (a bug; please report it with the call that caused it): {message}"
                ),
            )
        })
}

/// Runs `f` holding the interpreter and turns a panic into a `CarverError`.
pub fn guarded<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(internal_error(py, &*p)))
}

/// The flows' warnings, kept until the interpreter can issue them as `CarverWarning`s.
#[derive(Default)]
pub struct Warnings(Mutex<Vec<String>>);

impl Progress for Warnings {
    fn warning(&self, message: &str) {
        if let Ok(mut w) = self.0.lock() {
            w.push(message.to_string());
        }
    }
}

impl Warnings {
    /// Issues every kept warning through Python's `warnings` module.
    pub fn issue(self, py: Python<'_>) -> PyResult<()> {
        let messages = self.0.into_inner().unwrap_or_default();
        if messages.is_empty() {
            return Ok(());
        }
        let category = classes(py)?.warning.bind(py).clone().into_any();
        for m in messages {
            let text = std::ffi::CString::new(m.replace('\0', " "))
                .unwrap_or_else(|_| c"carver warning".to_owned());
            PyErr::warn(py, &category, &text, 2)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is(py: Python<'_>, err: &PyErr, builtin: Bound<'_, PyType>) -> bool {
        err.get_type(py).is_subclass(&builtin).unwrap()
    }

    #[test]
    fn classes_derive_from_the_builtin_a_caller_would_catch() {
        Python::initialize();
        Python::attach(|py| {
            let base = classes(py).unwrap().carver.bind(py).clone();
            let e = error(py, Kind::InvalidInput, "top-k = 0: accepted 1 to 1024");
            assert!(is(py, &e, py.get_type::<PyValueError>()));
            assert!(is(py, &e, base.clone()));
            assert_eq!(
                e.value(py).to_string(),
                "top-k = 0: accepted 1 to 1024",
                "the message passes unchanged"
            );
            let t = error(py, Kind::ArgumentType, "M = 1.5");
            assert!(is(py, &t, py.get_type::<PyTypeError>()));
            assert!(is(py, &t, py.get_type::<PyValueError>()));
            let u = error(py, Kind::UnknownArch, "unknown GPU");
            assert!(is(
                py,
                &u,
                classes(py).unwrap().invalid_input.bind(py).clone()
            ));
            assert!(is(
                py,
                &error(py, Kind::Gpu, "x"),
                py.get_type::<PyRuntimeError>()
            ));
            let missing = classes(py).unwrap().missing_dependency.bind(py).clone();
            assert!(
                missing
                    .is_subclass(&py.get_type::<PyImportError>())
                    .unwrap()
            );
            let name: String = u
                .get_type(py)
                .getattr("__module__")
                .unwrap()
                .extract()
                .unwrap();
            assert_eq!(name, "carver");
        });
    }

    #[test]
    fn flow_errors_map_to_the_class_of_their_cause() {
        let loc = carver_flows::Locations {
            hardware_db: None,
            cache_dir: None,
        };
        let unknown = carver_flows::archs::show(&loc, "h1000", &carver_flows::Silent).unwrap_err();
        assert_eq!(kind_of(&unknown), Kind::UnknownArch);
        let model = FlowError::Model(carver::CarverError::TopKOutOfRange(0));
        assert_eq!(kind_of(&model), Kind::InvalidInput);
        let gpu = FlowError::NoGpuSupport { what: "detection" };
        assert_eq!(kind_of(&gpu), Kind::Gpu);
        let missing = carver_flows::Locations {
            hardware_db: Some("/nonexistent/carver-hw".into()),
            cache_dir: None,
        };
        let e = carver_flows::archs::list(&missing).unwrap_err();
        assert_eq!(kind_of(&e), Kind::InvalidInput, "{e}");
    }

    #[test]
    fn a_panic_becomes_a_carver_error_with_its_message() {
        Python::initialize();
        Python::attach(|py| {
            let e = detached(py, || -> u32 { panic!("the invariant broke") }).unwrap_err();
            assert!(is(py, &e, classes(py).unwrap().carver.bind(py).clone()));
            assert!(e.to_string().contains("the invariant broke"), "{e}");
            let e = guarded(py, || -> PyResult<()> { panic!("again") }).unwrap_err();
            assert!(e.to_string().contains("internal error in carver"), "{e}");
        });
    }
}
