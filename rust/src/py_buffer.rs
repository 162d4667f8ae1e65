//! Borrowing the bytes of any buffer-protocol object (bytes, bytearray, memoryview over shared
//! memory, `zmq.Frame`, mmap) without copying them.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::py_errors::{bad_destination, bad_source};

/// Runs `f` over the bytes of `obj`.
///
/// The slice aliases the caller's memory: a writer must not change it during the call (the shm
/// slot protocol guarantees this; a torn frame is still caught by the checksum).
pub fn with_bytes<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> PyResult<R>) -> PyResult<R> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return f(bytes.as_bytes());
    }
    let buf = PyBuffer::<u8>::get(obj).map_err(|_| bad_source("does not support the buffer protocol as bytes"))?;
    if !buf.is_c_contiguous() {
        return Err(bad_source("is not C-contiguous"));
    }
    // SAFETY: the view is C-contiguous, holds `len_bytes()` bytes of u8, and `buf` keeps it alive
    // until after `f` returns.
    let slice = unsafe { std::slice::from_raw_parts(buf.buf_ptr().cast::<u8>(), buf.len_bytes()) };
    f(slice)
}

/// Runs `f` over the writable bytes of `obj`.
pub fn with_bytes_mut<R>(obj: &Bound<'_, PyAny>, f: impl FnOnce(&mut [u8]) -> PyResult<R>) -> PyResult<R> {
    let buf = PyBuffer::<u8>::get(obj).map_err(|_| bad_destination("does not support the buffer protocol as bytes"))?;
    if buf.readonly() {
        return Err(bad_destination("is read-only"));
    }
    if !buf.is_c_contiguous() {
        return Err(bad_destination("is not C-contiguous"));
    }
    // SAFETY: as in `with_bytes`, and the exporter declared the view writable.
    let slice = unsafe { std::slice::from_raw_parts_mut(buf.buf_ptr().cast::<u8>(), buf.len_bytes()) };
    f(slice)
}
