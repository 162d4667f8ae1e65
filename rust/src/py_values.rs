//! The Python objects the glue makes for decoded values, in one place: the ones made once per
//! process (category strings, status ints) and decoded text as a `str` without a second UTF-8
//! decode. Both `py_record` and `py_peek` build their values here.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use pyo3::{intern, IntoPyObjectExt};

use crate::record::Category;

/// A `str` for decoded text. ASCII (error types, ids, most messages) is copied straight into a new
/// compact string, which skips a second UTF-8 decode (by `CPython`) of bytes already validated.
pub fn new_str(py: Python<'_>, s: &str) -> PyResult<Py<PyString>> {
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

/// `status` as a Python int: 400-599 are made once (the interpreter caches only up to 256).
pub fn status_int(py: Python<'_>, status: u16) -> PyResult<Bound<'_, PyAny>> {
    const FIRST: u16 = 400;
    static INTS: PyOnceLock<Vec<Py<PyAny>>> = PyOnceLock::new();
    let ints = INTS.get_or_try_init(py, || {
        (FIRST..600).map(|s| s.into_py_any(py)).collect::<PyResult<Vec<_>>>()
    })?;
    match ints.get(usize::from(status.wrapping_sub(FIRST))) {
        Some(int) => Ok(int.bind(py).clone()),
        None => status.into_bound_py_any(py),
    }
}
