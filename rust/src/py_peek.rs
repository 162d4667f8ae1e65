//! `Peek`: what a frame's header says, as a named tuple (a struct sequence, like
//! `os.stat_result`), filled without running Python code.

use std::ffi::CStr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::IntoPyObjectExt;

use crate::codec::Peek;
use crate::py_values::{category_str, status_int};

/// The fields, in tuple order, with their docs.
const FIELDS: [(&CStr, &CStr); 6] = [
    (c"category", c"\"client\" or \"server\""),
    (c"fatal", c"whether the stage or engine is dead"),
    (c"status_code", c"the HTTP status"),
    (c"stage_id", c"the stage that failed, or None"),
    (c"frame_len", c"bytes in the whole frame, checksum included"),
    (
        c"rule_set",
        c"the sanitizer rule set that cleaned the text (0: not recorded)",
    ),
];

/// The `omni_errors.Peek` type, made once per process.
pub fn peek_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    TYPE.get_or_try_init(py, || {
        // CPython keeps pointers to the field table: it lives as long as the process.
        let mut fields: Vec<ffi::PyStructSequence_Field> = FIELDS
            .iter()
            .map(|(name, doc)| ffi::PyStructSequence_Field {
                name: name.as_ptr(),
                doc: doc.as_ptr(),
            })
            .collect();
        fields.push(ffi::PyStructSequence_Field {
            name: std::ptr::null(),
            doc: std::ptr::null(),
        });
        let desc = Box::leak(Box::new(ffi::PyStructSequence_Desc {
            name: c"omni_errors.Peek".as_ptr(),
            doc: c"A frame header: peek(buffer) reads it in O(1), without the checksum.".as_ptr(),
            fields: Box::leak(fields.into_boxed_slice()).as_mut_ptr(),
            n_in_sequence: std::ffi::c_int::try_from(FIELDS.len())?,
        }));
        // SAFETY: `desc` and its fields are valid for the life of the process; the call returns a
        // new reference to a type object, or NULL with an exception set.
        let ty = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyStructSequence_NewType(desc).cast()) }?;
        Ok(ty.cast_into::<PyType>()?.unbind())
    })
    .map(|t| t.bind(py))
}

/// A `Peek` holding `p`.
pub fn new_peek<'py>(py: Python<'py>, p: &Peek) -> PyResult<Bound<'py, PyAny>> {
    let ty = peek_type(py)?;
    let items = [
        category_str(py, p.category).clone().into_any(),
        p.fatal.into_bound_py_any(py)?,
        status_int(py, p.status_code)?,
        p.stage_id.into_bound_py_any(py)?,
        p.frame_len.into_bound_py_any(py)?,
        p.rule_set.into_bound_py_any(py)?,
    ];
    let len = ffi::Py_ssize_t::try_from(FIELDS.len())?;
    // SAFETY: this is `PyStructSequence_New` for a type with no hidden fields, without its two
    // look-ups of the field counts in the type's dict (most of a peek's cost): a new, untracked
    // instance of `ty` with `len` slots (or NULL with an exception set), each filled once below
    // before anything else can see it; SET_ITEM steals the reference, as `PyStructSequence_SetItem`.
    unsafe {
        let obj = ffi::_PyObject_GC_NewVar(ty.as_type_ptr(), len).cast::<ffi::PyObject>();
        let obj = Bound::from_owned_ptr_or_err(py, obj)?;
        for (i, item) in (0..).zip(items) {
            ffi::PyTuple_SET_ITEM(obj.as_ptr(), i, item.into_ptr());
        }
        Ok(obj)
    }
}
