//! PyO3 glue for the frame: `encode`, `encode_into`, `decode`, `peek`, `decode_many`.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

use crate::codec::{self, EncodeError, Frames};
use crate::py_buffer::{with_bytes, with_bytes_mut};
use crate::py_record::{category_str, PyDetails};

/// The frame of `details` as `bytes`.
#[pyfunction]
#[pyo3(signature = (details, /))]
pub fn encode<'py>(details: &Bound<'py, PyDetails>) -> PyResult<Bound<'py, PyBytes>> {
    details.get().encode(details.py())
}

/// Writes the frame of `details` into `buffer` at `offset`; returns the bytes written.
#[pyfunction]
#[pyo3(signature = (details, buffer, /, offset = 0))]
pub fn encode_into(details: &Bound<'_, PyDetails>, buffer: &Bound<'_, PyAny>, offset: usize) -> PyResult<usize> {
    let py = details.py();
    details.get().with_ref(py, |d| {
        with_bytes_mut(buffer, |out| {
            let available = out.len().saturating_sub(offset);
            let needed = codec::encoded_len(d);
            let dest = out.get_mut(offset..).filter(|rest| rest.len() >= needed);
            let Some(dest) = dest else {
                return Err(EncodeError::BufferTooSmall {
                    needed,
                    available,
                    offset,
                }
                .into());
            };
            Ok(codec::encode_into(d, dest)?)
        })
    })
}

/// Decodes exactly one frame filling `buffer` (any buffer-protocol object) into a record.
#[pyfunction]
#[pyo3(signature = (buffer, /, *, sanitize = true))]
pub fn decode<'py>(buffer: &Bound<'py, PyAny>, sanitize: bool) -> PyResult<Bound<'py, PyDetails>> {
    let py = buffer.py();
    with_bytes(buffer, |bytes| {
        let d = codec::decode(bytes)?;
        Bound::new(py, PyDetails::from_ref(py, &d, sanitize)?)
    })
}

/// `(category, fatal, status_code, stage_id)` from the header alone; the checksum is not verified.
#[pyfunction]
#[pyo3(signature = (buffer, /))]
pub fn peek<'py>(buffer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = buffer.py();
    with_bytes(buffer, |bytes| {
        let p = codec::peek(bytes)?;
        PyTuple::new(
            py,
            [
                category_str(py, p.category).clone().into_any(),
                p.fatal.into_bound_py_any(py)?,
                p.status_code.into_bound_py_any(py)?,
                p.stage_id.into_bound_py_any(py)?,
            ],
        )
    })
}

/// Decodes a buffer of back-to-back frames into a list of records; any bad frame fails the call.
#[pyfunction]
#[pyo3(signature = (buffer, /, *, sanitize = true))]
pub fn decode_many<'py>(buffer: &Bound<'py, PyAny>, sanitize: bool) -> PyResult<Bound<'py, PyList>> {
    let py = buffer.py();
    with_bytes(buffer, |bytes| {
        let list = PyList::empty(py);
        for d in Frames::new(bytes) {
            list.append(Bound::new(py, PyDetails::from_ref(py, &d?, sanitize)?)?)?;
        }
        Ok(list)
    })
}
