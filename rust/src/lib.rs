//! omni-errors: the error record, its wire frame and the sanitizer, with their Python bindings.
//!
//! `record`, `codec` and `sanitize` are pure Rust; the `py_*` modules are the PyO3 glue.

pub mod codec;
pub mod record;
pub mod sanitize;

#[cfg(feature = "python")]
mod py_buffer;
#[cfg(feature = "python")]
mod py_codec;
#[cfg(feature = "python")]
mod py_errors;
#[cfg(feature = "python")]
mod py_peek;
#[cfg(feature = "python")]
mod py_record;
#[cfg(feature = "python")]
mod py_sanitize;
#[cfg(feature = "python")]
mod py_values;

#[cfg(feature = "python")]
#[pyo3::pymodule(gil_used = false)]
mod _native {
    #[pymodule_export]
    use crate::py_codec::{decode, decode_many, encode, encode_into, peek};
    #[pymodule_export]
    use crate::py_record::PyDetails;
    #[pymodule_export]
    use crate::py_sanitize::{normalize_parameter, sanitize};

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("FRAME_MAJOR", crate::codec::MAJOR)?;
        m.add("FRAME_MINOR", crate::codec::MINOR)?;
        m.add("RULE_SET", crate::sanitize::RULE_SET)?;
        m.add("Peek", crate::py_peek::peek_type(m.py())?)?;
        m.add("MAX_FRAME_LEN", crate::codec::MAX_FRAME_LEN)?;
        m.add("MAX_MESSAGE_LEN", crate::record::MAX_MESSAGE_LEN)?;
        m.add("MAX_ERROR_TYPE_LEN", crate::record::MAX_ERROR_TYPE_LEN)?;
        m.add("MAX_PARAMETER_LEN", crate::record::MAX_PARAMETER_LEN)?;
        m.add("MAX_REQUEST_ID_LEN", crate::record::MAX_REQUEST_ID_LEN)?;
        m.add("MAX_STAGE_ID", crate::record::MAX_STAGE_ID)?;
        Ok(())
    }
}
