//! The binary frame that carries one record across processes: layout, encoder, decoder, peek.
//!
//! Pure Rust (no pyo3). The layout is specified in `docs/wire-format.md`.

mod decode;
mod encode;
mod error;
mod layout;

pub use decode::{decode, decode_frame, Decoded, Frames};
pub use encode::{encode_into, encoded_len};
pub use error::{DecodeError, DecodeErrorKind, EncodeError};
pub use layout::{
    peek, Peek, EXT_TAG_MAX, HEADER_LEN, MAGIC, MAJOR, MAX_FRAME_LEN, MINOR, MIN_FRAME_LEN, RULE_SET_UNKNOWN,
};
