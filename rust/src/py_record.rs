//! `OmniErrorDetails`: the frozen Python class over the record. Glue only: invariants live in
//! `record`, text rules in `sanitize`.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::{intern, IntoPyObjectExt};

use crate::codec;
use crate::py_sanitize;
use crate::record::{
    check_stage_id, check_status, Category, DetailsRef, RecordError, MAX_MESSAGE_LEN, MAX_PARAMETER_LEN,
};
use crate::sanitize;

const FIELDS: [&str; 8] = [
    "message",
    "category",
    "status_code",
    "error_type",
    "parameter",
    "request_id",
    "stage_id",
    "fatal",
];

/// A validated, sanitized error record. Frozen, hashable, comparable, picklable.
#[pyclass(frozen, name = "OmniErrorDetails", module = "omni_errors")]
pub struct PyDetails {
    #[pyo3(get)]
    message: Py<PyString>,
    category: Category,
    #[pyo3(get)]
    status_code: u16,
    #[pyo3(get)]
    error_type: Py<PyString>,
    #[pyo3(get)]
    parameter: Option<Py<PyString>>,
    #[pyo3(get)]
    request_id: Option<Py<PyString>>,
    #[pyo3(get)]
    stage_id: Option<u32>,
    #[pyo3(get)]
    fatal: bool,
}

#[pymethods]
impl PyDetails {
    #[new]
    #[pyo3(signature = (message, category, status_code, error_type, parameter=None, request_id=None, stage_id=None, fatal=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        message: &Bound<'_, PyString>,
        category: &str,
        status_code: i64,
        error_type: &Bound<'_, PyString>,
        parameter: Option<&Bound<'_, PyString>>,
        request_id: Option<&Bound<'_, PyString>>,
        stage_id: Option<i64>,
        fatal: bool,
    ) -> PyResult<Self> {
        let py = message.py();
        let category = parse_category(category)?;
        let status_code = check_int_status(category, status_code)?;
        let stage_id = stage_id.map(check_int_stage_id).transpose()?;
        // The same rules as `omni_errors.sanitize` and `omni_errors.normalize_parameter`.
        let message = py_sanitize::sanitize(message, MAX_MESSAGE_LEN)?;
        let parameter = parameter.map(py_sanitize::normalize_parameter).transpose()?;
        let details = PyDetails {
            message: message.unbind(),
            category,
            status_code,
            error_type: error_type.clone().unbind(),
            parameter: parameter.map(Bound::unbind),
            request_id: request_id.map(|r| r.clone().unbind()),
            stage_id,
            fatal,
        };
        details.with_ref(py, |d| d.validate().map_err(PyErr::from))?;
        Ok(details)
    }

    /// `"client"` or `"server"`.
    #[getter]
    fn category<'py>(&self, py: Python<'py>) -> &Bound<'py, PyString> {
        category_str(py, self.category)
    }

    /// A copy with some fields changed, validated and sanitized like a new record.
    #[pyo3(signature = (**changes))]
    fn replace<'py>(slf: &Bound<'py, Self>, changes: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        let fields = slf.get().to_dict(slf.py())?;
        if let Some(changes) = changes {
            for (key, value) in changes.iter() {
                let name: PyBackedStr = key.extract()?;
                if !FIELDS.contains(&&*name) {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "replace() got an unexpected field '{}'; fields are {}",
                        &*name,
                        FIELDS.join(", ")
                    )));
                }
                fields.set_item(key, value)?;
            }
        }
        slf.get_type().call((), Some(&fields))
    }

    /// The eight fields as a plain dict (JSON-ready).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item(intern!(py, "message"), &self.message)?;
        d.set_item(intern!(py, "category"), category_str(py, self.category))?;
        d.set_item(intern!(py, "status_code"), self.status_code)?;
        d.set_item(intern!(py, "error_type"), &self.error_type)?;
        d.set_item(intern!(py, "parameter"), &self.parameter)?;
        d.set_item(intern!(py, "request_id"), &self.request_id)?;
        d.set_item(intern!(py, "stage_id"), self.stage_id)?;
        d.set_item(intern!(py, "fatal"), self.fatal)?;
        Ok(d)
    }

    /// Builds a record from `to_dict()` output; unknown keys are refused.
    #[classmethod]
    #[pyo3(signature = (data, /))]
    fn from_dict<'py>(cls: &Bound<'py, PyType>, data: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
        cls.call((), Some(data))
    }

    /// The record's wire frame (same as `omni_errors.encode(self)`).
    fn to_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.encode(py)
    }

    fn __reduce_ex__<'py>(&self, py: Python<'py>, protocol: i32) -> PyResult<Bound<'py, PyTuple>> {
        static DECODE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        static PICKLE_BUFFER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let decode = DECODE.get_or_try_init(py, || {
            py.import("omni_errors._native")?.getattr("decode").map(Bound::unbind)
        })?;
        let frame = self.encode(py)?.into_any();
        // Protocol 5: one PickleBuffer, which travels out of band when the pickler has a buffer_callback.
        let arg = if protocol >= 5 {
            let cls = PICKLE_BUFFER
                .get_or_try_init(py, || py.import("pickle")?.getattr("PickleBuffer").map(Bound::unbind))?;
            cls.bind(py).call1((frame,))?
        } else {
            frame
        };
        PyTuple::new(py, [decode.bind(py).clone(), PyTuple::new(py, [arg])?.into_any()])
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: pyo3::basic::CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<PyDetails>() else {
            return Ok(py.NotImplemented());
        };
        let equal = self.with_ref(py, |a| other.get().with_ref(py, |b| Ok(a == b)))?;
        match op {
            pyo3::basic::CompareOp::Eq => equal.into_py_any(py),
            pyo3::basic::CompareOp::Ne => (!equal).into_py_any(py),
            _ => Ok(py.NotImplemented()),
        }
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.fields_tuple(py)?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let repr = |o: &Option<Py<PyString>>| -> PyResult<String> {
            o.as_ref()
                .map_or(Ok("None".to_owned()), |s| Ok(s.bind(py).repr()?.to_string()))
        };
        Ok(format!(
            "OmniErrorDetails(message={}, category={}, status_code={}, error_type={}, parameter={}, request_id={}, stage_id={}, fatal={})",
            self.message.bind(py).repr()?,
            category_str(py, self.category).repr()?,
            self.status_code,
            self.error_type.bind(py).repr()?,
            repr(&self.parameter)?,
            repr(&self.request_id)?,
            self.stage_id.map_or("None".to_owned(), |s| s.to_string()),
            if self.fatal { "True" } else { "False" },
        ))
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("message", "category", "status_code", "error_type")
    }
}

impl PyDetails {
    /// Builds a record from a decoded frame; `clean` re-applies the sanitizer to the text fields.
    pub fn from_ref(py: Python<'_>, d: &DetailsRef<'_>, clean: bool) -> PyResult<Self> {
        let text = |s: &str, max: usize| {
            if clean {
                new_str(py, &sanitize::sanitize(s, max))
            } else {
                new_str(py, s)
            }
        };
        Ok(PyDetails {
            message: text(d.message, MAX_MESSAGE_LEN)?,
            category: d.category,
            status_code: d.status_code,
            error_type: new_str(py, d.error_type)?,
            parameter: d.parameter.map(|p| text(p, MAX_PARAMETER_LEN)).transpose()?,
            request_id: d.request_id.map(|r| new_str(py, r)).transpose()?,
            stage_id: d.stage_id,
            fatal: d.fatal,
        })
    }

    /// Runs `f` over a borrowed view of this record's fields.
    pub fn with_ref<R>(&self, py: Python<'_>, f: impl FnOnce(&DetailsRef<'_>) -> PyResult<R>) -> PyResult<R> {
        let parameter = self.parameter.as_ref().map(|p| p.bind(py));
        let request_id = self.request_id.as_ref().map(|r| r.bind(py));
        let d = DetailsRef {
            message: self.message.bind(py).to_str()?,
            category: self.category,
            status_code: self.status_code,
            error_type: self.error_type.bind(py).to_str()?,
            parameter: parameter.map(|p| p.to_str()).transpose()?,
            request_id: request_id.map(|r| r.to_str()).transpose()?,
            stage_id: self.stage_id,
            fatal: self.fatal,
        };
        f(&d)
    }

    /// The frame as a new `bytes`, written in place.
    pub fn encode<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.with_ref(py, |d| {
            let len = codec::encoded_len(d);
            PyBytes::new_with(py, len, |out| {
                codec::encode_into(d, out)?;
                Ok(())
            })
        })
    }

    fn fields_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            [
                self.message.clone_ref(py).into_any(),
                category_str(py, self.category).clone().into_any().unbind(),
                self.status_code.into_py_any(py)?,
                self.error_type.clone_ref(py).into_any(),
                self.parameter.as_ref().into_py_any(py)?,
                self.request_id.as_ref().into_py_any(py)?,
                self.stage_id.into_py_any(py)?,
                self.fatal.into_py_any(py)?,
            ],
        )
    }
}

/// A `str` for decoded text. ASCII (error types, ids, most messages) is copied straight into a new
/// compact string, which skips a second UTF-8 decode (by `CPython`) of bytes already validated.
fn new_str(py: Python<'_>, s: &str) -> PyResult<Py<PyString>> {
    if !s.is_ascii() {
        return Ok(PyString::new(py, s).unbind());
    }
    let len = ffi::Py_ssize_t::try_from(s.len())?;
    // SAFETY: PyUnicode_New(len, 127) returns a new compact ASCII string with room for exactly
    // `len` bytes, or NULL with MemoryError set; it is filled before anything else can see it.
    unsafe {
        let obj = Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_New(len, 127))?;
        std::ptr::copy_nonoverlapping(s.as_ptr(), ffi::PyUnicode_1BYTE_DATA(obj.as_ptr()), s.len());
        Ok(obj.cast_into_unchecked::<PyString>().unbind())
    }
}

/// The interned Python literal for a category.
pub fn category_str(py: Python<'_>, category: Category) -> &Bound<'_, PyString> {
    match category {
        Category::Client => intern!(py, "client"),
        Category::Server => intern!(py, "server"),
    }
}

fn parse_category(value: &str) -> PyResult<Category> {
    Category::parse(value).ok_or_else(|| {
        crate::py_errors::invalid_field(
            "category",
            format!("field `category` must be one of \"client\", \"server\", got {value:?}"),
        )
    })
}

fn check_int_status(category: Category, status: i64) -> PyResult<u16> {
    let status16 =
        u16::try_from(status).map_err(|_| PyErr::from(RecordError::StatusOutOfRange { category, status }))?;
    check_status(category, status16)?;
    Ok(status16)
}

fn check_int_stage_id(stage_id: i64) -> PyResult<u32> {
    let id = u32::try_from(stage_id).map_err(|_| PyErr::from(RecordError::StageIdOutOfRange { value: stage_id }))?;
    check_stage_id(id)?;
    Ok(id)
}
