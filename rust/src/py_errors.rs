//! The one place where Rust errors become Python exceptions: one `From` per error type (the
//! classes live in `omni_errors.errors` and are resolved on first raise).

use pyo3::PyErr;

use crate::codec::{DecodeError, EncodeError};
use crate::py_buffer::BufferError;
use crate::record::RecordError;

mod classes {
    pyo3::import_exception!(omni_errors.errors, DecodeError);
    pyo3::import_exception!(omni_errors.errors, EncodeError);
    pyo3::import_exception!(omni_errors.errors, InvalidRecordError);
}
use classes::{DecodeError as PyDecodeError, EncodeError as PyEncodeError, InvalidRecordError as PyInvalidRecordError};

/// `DecodeError(message, offset, field)`.
impl From<DecodeError> for PyErr {
    fn from(e: DecodeError) -> PyErr {
        PyDecodeError::new_err((e.to_string(), e.offset, e.field()))
    }
}

/// `EncodeError(message, offset, "buffer")` for a short buffer; a broken invariant is the
/// record's own error.
impl From<EncodeError> for PyErr {
    fn from(e: EncodeError) -> PyErr {
        match e {
            EncodeError::BufferTooSmall { offset, .. } => PyEncodeError::new_err((e.to_string(), offset, "buffer")),
            EncodeError::Invalid(inner) => inner.into(),
        }
    }
}

/// `InvalidRecordError(message, field)`.
impl From<RecordError> for PyErr {
    fn from(e: RecordError) -> PyErr {
        PyInvalidRecordError::new_err((e.to_string(), e.field()))
    }
}

/// A source that cannot be read is a `DecodeError`, a destination that cannot be written an
/// `EncodeError`; both at offset 0, field `"buffer"`.
impl From<BufferError> for PyErr {
    fn from(e: BufferError) -> PyErr {
        let args = (e.to_string(), 0usize, "buffer");
        match e {
            BufferError::Source(_) => PyDecodeError::new_err(args),
            BufferError::Destination(_) => PyEncodeError::new_err(args),
        }
    }
}

/// The mapping as Python sees it: class, message and attributes of each conversion. Needs an
/// interpreter (`make test-rust` runs it after the build, with `python/` on the path).
#[cfg(test)]
mod tests {
    use pyo3::prelude::*;
    use pyo3::types::PyAnyMethods;

    use super::*;
    use crate::codec::DecodeErrorKind;
    use crate::record::Category;

    /// What Python sees of an exception: class name, message, `.offset`, `.field`.
    type Seen = (String, String, Option<usize>, Option<String>);

    /// A conversion and what Python must see of it.
    struct Case {
        err: PyErr,
        class: &'static str,
        message: String,
        offset: Option<usize>,
        field: Option<&'static str>,
    }

    fn case(
        err: impl Into<PyErr>,
        class: &'static str,
        message: impl Into<String>,
        offset: Option<usize>,
        field: &'static str,
    ) -> Case {
        Case {
            err: err.into(),
            class,
            message: message.into(),
            offset,
            field: Some(field),
        }
    }

    fn raised(py: Python<'_>, err: PyErr) -> Seen {
        let value = err.value(py);
        let get = |name: &str| value.getattr(name).ok().filter(|v| !v.is_none());
        (
            value.get_type().name().map(|n| n.to_string()).unwrap_or_default(),
            value.str().map(|s| s.to_string()).unwrap_or_default(),
            get("offset").and_then(|v| v.extract().ok()),
            get("field").and_then(|v| v.extract().ok()),
        )
    }

    #[test]
    fn each_error_type_maps_to_its_class_with_message_offset_and_field() {
        Python::initialize();
        Python::attach(|py| {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../python");
            py.import("sys")?.getattr("path")?.call_method1("insert", (0, path))?;
            let errors = py.import("omni_errors.errors")?;
            let decode = DecodeError::new(DecodeErrorKind::BadMagic { found: *b"PK" }, 0);
            let cases = [
                case(decode.clone(), "DecodeError", decode.to_string(), Some(0), "magic"),
                case(
                    EncodeError::BufferTooSmall {
                        needed: 60,
                        available: 10,
                        offset: 40,
                    },
                    "EncodeError",
                    "buffer too small: frame needs 60 bytes at offset 40, 10 available",
                    Some(40),
                    "buffer",
                ),
                case(
                    EncodeError::Invalid(RecordError::FatalClient),
                    "InvalidRecordError",
                    RecordError::FatalClient.to_string(),
                    None,
                    "fatal",
                ),
                case(
                    RecordError::StatusOutOfRange {
                        category: Category::Client,
                        status: 503,
                    },
                    "InvalidRecordError",
                    "field `status_code` 503 is outside 400..=499 required for category \"client\"",
                    None,
                    "status_code",
                ),
                case(
                    BufferError::Source("is not C-contiguous"),
                    "DecodeError",
                    "source buffer is not C-contiguous",
                    Some(0),
                    "buffer",
                ),
                case(
                    BufferError::Destination("is read-only"),
                    "EncodeError",
                    "destination buffer is read-only",
                    Some(0),
                    "buffer",
                ),
            ];
            for Case {
                err,
                class,
                message,
                offset,
                field,
            } in cases
            {
                assert!(err.is_instance(py, &errors.getattr(class)?), "{class}");
                assert!(err.is_instance(py, &errors.getattr("OmniErrorsError")?), "{class}");
                let got = raised(py, err);
                assert_eq!(got, (class.to_owned(), message, offset, field.map(str::to_owned)));
            }
            Ok::<(), PyErr>(())
        })
        .expect("the mapping test needs omni_errors.errors importable");
    }
}
