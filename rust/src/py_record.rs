//! `OmniErrorDetails`: the frozen Python class over the record. Glue only: invariants live in
//! `record`, text rules in `sanitize`, the frame in `codec`.
//!
//! The eight fields are listed once, in the `record_class!` invocation below: it writes the
//! struct, the constructor and its signature, the getters, the field names and the views the
//! rest of this file works from. A decoded record keeps its frame and makes each string when it
//! is first read, so decoding costs no string until someone looks.

// Clippy reads the code PyO3 generates for `#[classmethod]` through the macro as if it were ours.
#![allow(clippy::borrow_as_ptr, clippy::ptr_as_ptr, clippy::ref_as_ptr)]

use std::hash::{Hash, Hasher};

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::IntoPyObjectExt;

use crate::codec::{self, Decoded};
use crate::py_values::{category_str, new_str};
use crate::record::{
    check_stage_id, check_status, Category, DetailsRef, RecordError, MAX_MESSAGE_LEN, MAX_PARAMETER_LEN,
};
use crate::sanitize::{self, RULE_SET};

/// A text field: a Python string, or a span of the record's frame that becomes one when read.
pub struct Text {
    span: (usize, usize),
    cell: PyOnceLock<Py<PyString>>,
}

impl Text {
    fn given(py: Python<'_>, s: Bound<'_, PyString>) -> Self {
        let cell = PyOnceLock::new();
        let _ = cell.set(py, s.unbind());
        Text { span: (0, 0), cell }
    }

    fn owned(py: Python<'_>, s: &str) -> PyResult<Self> {
        Ok(Self::given(py, new_str(py, s)?.into_bound(py)))
    }

    fn span(frame: &[u8], s: &str) -> Self {
        let start = s.as_ptr() as usize - frame.as_ptr() as usize;
        Text {
            span: (start, start + s.len()),
            cell: PyOnceLock::new(),
        }
    }

    /// The text without making a Python string.
    fn as_str<'a>(&'a self, py: Python<'a>, frame: Option<&'a Py<PyBytes>>) -> PyResult<&'a str> {
        if let Some(s) = self.cell.get(py) {
            return s.bind(py).to_str();
        }
        let bytes = frame.map_or(&[][..], |f| f.bind(py).as_bytes());
        let raw = bytes.get(self.span.0..self.span.1).unwrap_or_default();
        // SAFETY: the span was validated as UTF-8 when the frame was decoded, and `bytes` is the
        // immutable `bytes` object it was decoded from.
        Ok(unsafe { std::str::from_utf8_unchecked(raw) })
    }

    fn get<'py>(&self, py: Python<'py>, frame: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyString>> {
        let s = self.cell.get_or_try_init(py, || new_str(py, self.as_str(py, frame)?))?;
        Ok(s.bind(py).clone())
    }
}

/// How a stored field is viewed (as the core record's field) and read (as a Python value).
pub trait Field {
    type View<'a>
    where
        Self: 'a;
    fn view<'a>(&'a self, py: Python<'a>, frame: Option<&'a Py<PyBytes>>) -> PyResult<Self::View<'a>>;
    fn read<'py>(&self, py: Python<'py>, frame: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyAny>>;
}

impl Field for Text {
    type View<'a> = &'a str;
    fn view<'a>(&'a self, py: Python<'a>, frame: Option<&'a Py<PyBytes>>) -> PyResult<&'a str> {
        self.as_str(py, frame)
    }
    fn read<'py>(&self, py: Python<'py>, frame: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.get(py, frame)?.into_any())
    }
}

impl Field for Option<Text> {
    type View<'a> = Option<&'a str>;
    fn view<'a>(&'a self, py: Python<'a>, frame: Option<&'a Py<PyBytes>>) -> PyResult<Option<&'a str>> {
        self.as_ref().map(|t| t.as_str(py, frame)).transpose()
    }
    fn read<'py>(&self, py: Python<'py>, frame: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(t) => Ok(t.get(py, frame)?.into_any()),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

impl Field for Category {
    type View<'a> = Category;
    fn view<'a>(&'a self, _: Python<'a>, _: Option<&'a Py<PyBytes>>) -> PyResult<Category> {
        Ok(*self)
    }
    fn read<'py>(&self, py: Python<'py>, _: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyAny>> {
        Ok(category_str(py, *self).clone().into_any())
    }
}

/// Plain values: viewed as themselves, read through their Python conversion.
macro_rules! plain_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            type View<'a> = $t;
            fn view<'a>(&'a self, _: Python<'a>, _: Option<&'a Py<PyBytes>>) -> PyResult<$t> {
                Ok(*self)
            }
            fn read<'py>(&self, py: Python<'py>, _: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyAny>> {
                self.into_bound_py_any(py)
            }
        }
    )*};
}
plain_field!(Option<u32>, bool);

/// The one `u16` field is `status_code`: read as one of the ints made once per process.
impl Field for u16 {
    type View<'a> = u16;
    fn view<'a>(&'a self, _: Python<'a>, _: Option<&'a Py<PyBytes>>) -> PyResult<u16> {
        Ok(*self)
    }
    fn read<'py>(&self, py: Python<'py>, _: Option<&Py<PyBytes>>) -> PyResult<Bound<'py, PyAny>> {
        crate::py_values::status_int(py, *self)
    }
}

/// Writes the class from its field list: `name: Python argument [= default] => storage = conversion;`.
macro_rules! record_class {
    ($($name:ident: $arg:ty $(= $default:tt)? => $store:ty = $convert:expr;)*) => {
        /// A validated, sanitized error record. Frozen, hashable, comparable, picklable.
        #[pyclass(frozen, name = "OmniErrorDetails", module = "omni_errors")]
        pub struct PyDetails {
            $($name: $store,)*
            /// The frame a decoded record's text spans point into.
            frame: Option<Py<PyBytes>>,
            /// The sanitizer rule set that cleaned `message` and `parameter`.
            rule_set: u16,
        }

        /// The field names, in order.
        pub const FIELDS: &[&str] = &[$(stringify!($name)),*];

        /// The constructor's arguments as Python passed them, for the field conversions.
        struct Args<'py> {
            $($name: $arg,)*
        }

        #[pymethods]
        impl PyDetails {
            #[new]
            #[allow(clippy::too_many_arguments)] // one per field: the signature Python sees
            #[pyo3(signature = ($($name $(= $default)?),*))]
            fn new<'py>(py: Python<'py>, $($name: $arg),*) -> PyResult<Self> {
                let args = Args { $($name),* };
                let record = PyDetails {
                    $($name: ($convert)(py, &args)?,)*
                    frame: None,
                    rule_set: RULE_SET,
                };
                record.view(py)?.validate()?;
                Ok(record)
            }

            $(
                #[getter]
                fn $name<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    self.$name.read(py, self.frame.as_ref())
                }
            )*

            /// The sanitizer rule set that cleaned `message` and `parameter`.
            #[getter]
            fn rule_set(&self) -> u16 {
                self.rule_set
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
                for (name, value) in FIELDS.iter().zip(self.values(py)?) {
                    d.set_item(PyString::intern(py, name), value)?;
                }
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
                let equal = self.view(py)? == other.get().view(py)?;
                match op {
                    pyo3::basic::CompareOp::Eq => equal.into_py_any(py),
                    pyo3::basic::CompareOp::Ne => (!equal).into_py_any(py),
                    _ => Ok(py.NotImplemented()),
                }
            }

            fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
                // Deterministic keys: equal records hash alike in every process.
                let mut h = std::collections::hash_map::DefaultHasher::new();
                self.view(py)?.hash(&mut h);
                #[allow(clippy::cast_possible_wrap)] // any bits make a hash
                Ok(h.finish() as isize)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let parts = FIELDS
                    .iter()
                    .zip(self.values(py)?)
                    .map(|(name, value)| Ok(format!("{name}={}", value.repr()?)))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(format!("OmniErrorDetails({})", parts.join(", ")))
            }

            #[classattr]
            fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
                (FIELDS[0], FIELDS[1], FIELDS[2], FIELDS[3])
            }
    }

        impl PyDetails {
            /// A borrowed view of the fields, as the core record.
            pub fn view<'a>(&'a self, py: Python<'a>) -> PyResult<DetailsRef<'a>> {
                let frame = self.frame.as_ref();
                Ok(DetailsRef { $($name: self.$name.view(py, frame)?,)* })
            }

            /// The fields as Python values, in [`FIELDS`] order.
            fn values<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
                let frame = self.frame.as_ref();
                Ok(vec![$(self.$name.read(py, frame)?),*])
            }
        }
    };
}

record_class! {
    message: Bound<'py, PyString> => Text = |py, a: &Args<'py>| -> PyResult<Text> {
        Ok(Text::given(py, crate::py_sanitize::sanitize(&a.message, MAX_MESSAGE_LEN)?))
    };
    category: PyBackedStr => Category = |_, a: &Args<'py>| Category::parse(&a.category).map_err(PyErr::from);
    status_code: i64 => u16 = |_, a: &Args<'py>| status(&a.category, a.status_code);
    error_type: Bound<'py, PyString> => Text = |py, a: &Args<'py>| -> PyResult<Text> {
        Ok(Text::given(py, a.error_type.clone()))
    };
    parameter: Option<Bound<'py, PyString>> = None => Option<Text> = |py, a: &Args<'py>| {
        a.parameter
            .as_ref()
            .map(|p| crate::py_sanitize::normalize_parameter(p).map(|p| Text::given(py, p)))
            .transpose()
    };
    request_id: Option<Bound<'py, PyString>> = None => Option<Text> = |py, a: &Args<'py>| -> PyResult<Option<Text>> {
        Ok(a.request_id.as_ref().map(|r| Text::given(py, r.clone())))
    };
    stage_id: Option<i64> = None => Option<u32> = |_, a: &Args<'py>| a.stage_id.map(stage).transpose();
    fatal: bool = false => bool = |_, a: &Args<'py>| -> PyResult<bool> { Ok(a.fatal) };
}

impl PyDetails {
    /// The record of a frame decoded from `frame` (the bytes `decoded` borrows from). With
    /// `resanitize`, the text goes through this build's rules again and the record says so.
    pub fn from_frame(
        py: Python<'_>,
        frame: &Bound<'_, PyBytes>,
        decoded: &Decoded<'_>,
        resanitize: bool,
    ) -> PyResult<Self> {
        let (bytes, d) = (frame.as_bytes(), &decoded.details);
        let text = |s: &str, clean: fn(&str) -> std::borrow::Cow<'_, str>| -> PyResult<Text> {
            match resanitize.then(|| clean(s)) {
                Some(std::borrow::Cow::Owned(cleaned)) => Text::owned(py, &cleaned),
                _ => Ok(Text::span(bytes, s)),
            }
        };
        Ok(PyDetails {
            message: text(d.message, |s| sanitize::sanitize(s, MAX_MESSAGE_LEN))?,
            category: d.category,
            status_code: d.status_code,
            error_type: Text::span(bytes, d.error_type),
            parameter: d
                .parameter
                .map(|p| text(p, |s| sanitize::parameter(s, MAX_PARAMETER_LEN)))
                .transpose()?,
            request_id: d.request_id.map(|r| Text::span(bytes, r)),
            stage_id: d.stage_id,
            fatal: d.fatal,
            frame: Some(frame.clone().unbind()),
            rule_set: if resanitize { RULE_SET } else { decoded.rule_set },
        })
    }

    /// The frame as a new `bytes`, written in place.
    pub fn encode<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let d = self.view(py)?;
        PyBytes::new_with(py, codec::encoded_len(&d), |out| {
            codec::encode_into(&d, self.rule_set, out)?;
            Ok(())
        })
    }

    /// The frame written into `out`; returns its length.
    pub fn encode_into(&self, py: Python<'_>, out: &mut [u8]) -> PyResult<usize> {
        Ok(codec::encode_into(&self.view(py)?, self.rule_set, out)?)
    }

    /// Bytes the frame takes.
    pub fn encoded_len(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(codec::encoded_len(&self.view(py)?))
    }
}

/// `status_code` as the frame stores it; out of `u16` it breaks the category's range.
fn status(category: &str, status: i64) -> PyResult<u16> {
    let category = Category::parse(category)?;
    let status16 = u16::try_from(status).map_err(|_| RecordError::StatusOutOfRange { category, status })?;
    check_status(category, status16)?;
    Ok(status16)
}

fn stage(stage_id: i64) -> PyResult<u32> {
    let id = u32::try_from(stage_id).map_err(|_| RecordError::StageIdOutOfRange { value: stage_id })?;
    check_stage_id(id)?;
    Ok(id)
}
