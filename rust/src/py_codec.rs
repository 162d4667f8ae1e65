//! PyO3 glue for the frame: `encode`, `encode_into`, `decode`, `decode_many`, `peek`.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::codec::{self, Decoded, EncodeError, Frames};
use crate::py_buffer::{frozen_bytes, with_bytes, with_bytes_mut};
use crate::py_peek::new_peek;
use crate::py_record::PyDetails;
use crate::sanitize::RULE_SET;

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
    let (py, d) = (details.py(), details.get());
    let needed = d.encoded_len(py)?;
    with_bytes_mut(buffer, |out| {
        let available = out.len().saturating_sub(offset);
        match out.get_mut(offset..).filter(|rest| rest.len() >= needed) {
            Some(dest) => d.encode_into(py, dest),
            None => Err(EncodeError::BufferTooSmall {
                needed,
                available,
                offset,
            }
            .into()),
        }
    })
}

/// Whether a frame's text goes through this build's sanitizer again: when asked (`True`), never
/// when told not to (`False`), and by default only when another rule set (or none) cleaned it.
fn resanitize(sanitize: Option<bool>, decoded: &Decoded<'_>) -> bool {
    sanitize.unwrap_or(decoded.rule_set != RULE_SET)
}

/// Decodes exactly one frame filling `buffer` (any buffer-protocol object) into a record.
#[pyfunction]
#[pyo3(signature = (buffer, /, *, sanitize = None))]
pub fn decode<'py>(buffer: &Bound<'py, PyAny>, sanitize: Option<bool>) -> PyResult<Bound<'py, PyDetails>> {
    let py = buffer.py();
    let frame = frozen_bytes(buffer)?;
    let decoded = codec::decode(frame.as_bytes())?;
    Bound::new(
        py,
        PyDetails::from_frame(py, &frame, &decoded, resanitize(sanitize, &decoded))?,
    )
}

/// Decodes a buffer of back-to-back frames into a list of records; any bad frame fails the call
/// with its offset. The records share one copy of the buffer (none when it is `bytes`).
#[pyfunction]
#[pyo3(signature = (buffer, /, *, sanitize = None))]
pub fn decode_many<'py>(buffer: &Bound<'py, PyAny>, sanitize: Option<bool>) -> PyResult<Bound<'py, PyList>> {
    let py = buffer.py();
    let frames = frozen_bytes(buffer)?;
    let mut records = Vec::new();
    for item in Frames::new(frames.as_bytes()) {
        let (_, decoded) = item?;
        let record = PyDetails::from_frame(py, &frames, &decoded, resanitize(sanitize, &decoded))?;
        records.push(Bound::new(py, record)?);
    }
    PyList::new(py, records)
}

/// The header's fields as a `Peek` named tuple; the checksum is not verified.
#[pyfunction]
#[pyo3(signature = (buffer, /))]
pub fn peek<'py>(buffer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    with_bytes(buffer, |bytes| new_peek(buffer.py(), &codec::peek(bytes)?))
}
