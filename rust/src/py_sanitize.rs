//! PyO3 glue for the sanitizer.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::record::{MAX_MESSAGE_LEN, MAX_PARAMETER_LEN};
use crate::sanitize as rules;

/// Sanitizes `text` for clients; see the stub for the rules.
#[pyfunction]
#[pyo3(signature = (text, /, *, max_len = MAX_MESSAGE_LEN))]
pub fn sanitize<'py>(text: &Bound<'py, PyString>, max_len: usize) -> PyResult<Bound<'py, PyString>> {
    Ok(same_or_new(text, rules::sanitize(text.to_str()?, max_len)))
}

/// Normalises a parameter name for `OmniErrorDetails.parameter`.
#[pyfunction]
#[pyo3(signature = (name, /))]
pub fn normalize_parameter<'py>(name: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyString>> {
    Ok(same_or_new(name, rules::parameter(name.to_str()?, MAX_PARAMETER_LEN)))
}

/// The caller's own object when nothing changed (the common case), else a new string.
fn same_or_new<'py>(original: &Bound<'py, PyString>, out: Cow<'_, str>) -> Bound<'py, PyString> {
    match out {
        Cow::Borrowed(_) => original.clone(),
        Cow::Owned(s) => PyString::new(original.py(), &s),
    }
}
