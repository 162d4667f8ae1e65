//! The one place where Rust errors become Python exceptions (classes live in `omni_errors.errors`).

use pyo3::PyErr;

use crate::codec::{DecodeError, EncodeError};
use crate::record::RecordError;

/// The Python classes, resolved from `omni_errors.errors` on first raise.
mod classes {
    pyo3::import_exception!(omni_errors.errors, DecodeError);
    pyo3::import_exception!(omni_errors.errors, EncodeError);
    pyo3::import_exception!(omni_errors.errors, InvalidRecordError);
}
use classes::{DecodeError as PyDecodeError, EncodeError as PyEncodeError, InvalidRecordError as PyInvalidRecordError};

impl From<DecodeError> for PyErr {
    fn from(e: DecodeError) -> PyErr {
        PyDecodeError::new_err((e.to_string(), e.offset, e.field()))
    }
}

impl From<EncodeError> for PyErr {
    fn from(e: EncodeError) -> PyErr {
        match e {
            EncodeError::BufferTooSmall { offset, .. } => PyEncodeError::new_err((e.to_string(), offset, "buffer")),
            EncodeError::Invalid(inner) => inner.into(),
        }
    }
}

impl From<RecordError> for PyErr {
    fn from(e: RecordError) -> PyErr {
        PyInvalidRecordError::new_err((e.to_string(), e.field()))
    }
}

/// An `EncodeError` for a destination that is not a writable, contiguous byte buffer.
pub fn bad_destination(why: &str) -> PyErr {
    PyEncodeError::new_err((format!("destination buffer {why}"), 0usize, "buffer"))
}

/// A `DecodeError` for a source that is not a contiguous byte buffer.
pub fn bad_source(why: &str) -> PyErr {
    PyDecodeError::new_err((format!("source buffer {why}"), 0usize, "buffer"))
}

/// An `InvalidRecordError` about `field` with a prepared message.
pub fn invalid_field(field: &'static str, message: String) -> PyErr {
    PyInvalidRecordError::new_err((message, field))
}
