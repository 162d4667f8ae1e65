//! The binary frame that carries one record across processes: layout, encoder, decoder, peek.
//!
//! Pure Rust (no pyo3). The layout is specified in `docs/wire-format.md`.

mod error;
mod frame;

pub use error::{DecodeError, DecodeErrorKind, EncodeError};
pub use frame::{
    decode, decode_frame, encode_into, encoded_len, peek, Decoded, Frames, Peek, EXT_TAG_MAX, HEADER_LEN, MAGIC, MAJOR,
    MAX_FRAME_LEN, MINOR, MIN_FRAME_LEN, RULE_SET_UNKNOWN,
};
