//! Borrowing the bytes of any buffer-protocol object (bytes, bytearray, memoryview over shared
//! memory, `zmq.Frame`, mmap) without copying them.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A Python object that cannot lend its bytes the way a call needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferError {
    /// The object to read from (`decode`) is not a contiguous byte buffer.
    Source(&'static str),
    /// The object to write into (`encode_into`) is not a writable, contiguous byte buffer.
    Destination(&'static str),
}

impl std::fmt::Display for BufferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BufferError::Source(why) => write!(f, "source buffer {why}"),
            BufferError::Destination(why) => write!(f, "destination buffer {why}"),
        }
    }
}

const NOT_A_BUFFER: &str = "does not support the buffer protocol as bytes";
const NOT_CONTIGUOUS: &str = "is not C-contiguous";

/// Runs `f` over the bytes of `obj`.
///
/// The slice aliases the caller's memory: a writer must not change it during the call (the shm
/// slot protocol guarantees this; a torn frame is still caught by the checksum).
pub fn with_bytes<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> PyResult<R>) -> PyResult<R> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return f(bytes.as_bytes());
    }
    let buf = PyBuffer::<u8>::get(obj).map_err(|_| BufferError::Source(NOT_A_BUFFER))?;
    if !buf.is_c_contiguous() {
        return Err(BufferError::Source(NOT_CONTIGUOUS).into());
    }
    // SAFETY: the view is C-contiguous, holds `len_bytes()` bytes of u8, and `buf` keeps it alive
    // until after `f` returns.
    let slice = unsafe { std::slice::from_raw_parts(buf.buf_ptr().cast::<u8>(), buf.len_bytes()) };
    f(slice)
}

/// The bytes of `obj` as an immutable `bytes` object: `obj` itself when it is one, else a copy
/// (decoded records point into it, so it must not change under them).
pub fn frozen_bytes<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(bytes.clone());
    }
    with_bytes(obj, |slice| Ok(PyBytes::new(obj.py(), slice)))
}

/// Runs `f` over the writable bytes of `obj`.
pub fn with_bytes_mut<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&mut [u8]) -> PyResult<R>) -> PyResult<R> {
    let buf = PyBuffer::<u8>::get(obj).map_err(|_| BufferError::Destination(NOT_A_BUFFER))?;
    if buf.readonly() {
        return Err(BufferError::Destination("is read-only").into());
    }
    if !buf.is_c_contiguous() {
        return Err(BufferError::Destination(NOT_CONTIGUOUS).into());
    }
    // SAFETY: as in `with_bytes`, and the exporter declared the view writable.
    let slice = unsafe { std::slice::from_raw_parts_mut(buf.buf_ptr().cast::<u8>(), buf.len_bytes()) };
    f(slice)
}
