//! PyO3 glue for the sanitizer.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::record::{MAX_MESSAGE_LEN, MAX_PARAMETER_LEN};
use crate::sanitize as rules;

/// Sanitizes `text` for clients; see the stub for the rules.
#[pyfunction]
#[pyo3(signature = (text, /, *, max_len = MAX_MESSAGE_LEN))]
pub fn sanitize<'py>(text: &Bound<'py, PyString>, max_len: usize) -> PyResult<Bound<'py, PyString>> {
    let s = text.to_str()?;
    Ok(match rules::sanitize(s, max_len) {
        std::borrow::Cow::Borrowed(_) => text.clone(),
        std::borrow::Cow::Owned(out) => PyString::new(text.py(), &out),
    })
}

/// Normalises a parameter name for `OmniErrorDetails.parameter`.
#[pyfunction]
#[pyo3(signature = (name, /))]
pub fn normalize_parameter<'py>(name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyString>> {
    let s = name.to_str()?;
    let normal = rules::normalize_parameter(s);
    let out = rules::sanitize(&normal, MAX_PARAMETER_LEN);
    // The common case (already a plain name) returns the caller's object.
    if out == s {
        return Ok(name.clone());
    }
    Ok(PyString::new(name.py(), &out))
}
