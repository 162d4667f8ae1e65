//! Decode and encode failures: each names the field, the limit, the actual value and the byte offset.

use std::fmt;

use crate::record::RecordError;

/// Why a frame was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The buffer ends before `field` does.
    Truncated {
        field: &'static str,
        needed: usize,
        available: usize,
    },
    /// The frame does not start with [`super::MAGIC`].
    BadMagic { found: [u8; 2] },
    /// A major version this reader does not speak.
    UnsupportedVersion { major: u8 },
    /// `frame_len` outside the allowed range.
    BadFrameLength { len: u32, min: usize, max: usize },
    /// The CRC32C stored in the frame does not match its bytes: torn or corrupted.
    ChecksumMismatch { stored: u32, computed: u32 },
    /// A reserved field or bit is set.
    Reserved { field: &'static str, value: u32 },
    /// A stage id is stored but its presence flag is clear.
    StageIdWithoutFlag { value: u16 },
    /// A string field is not valid UTF-8.
    InvalidUtf8 { field: &'static str },
    /// The strings and extensions do not end where `frame_len` says.
    LengthMismatch {
        field: &'static str,
        end: usize,
        frame_end: usize,
    },
    /// `decode` was given more bytes than one frame.
    TrailingBytes { frame_len: usize, buffer_len: usize },
    /// The fields decode but break a record invariant.
    Invalid(RecordError),
}

/// A refused frame and where in the buffer the problem is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub kind: DecodeErrorKind,
    /// Byte offset from the start of the caller's buffer.
    pub offset: usize,
}

impl DecodeError {
    pub(crate) fn new(kind: DecodeErrorKind, offset: usize) -> Self {
        DecodeError { kind, offset }
    }

    /// Shifts the offset by `base`, for a frame found inside a larger buffer.
    #[must_use]
    pub fn at_base(mut self, base: usize) -> Self {
        self.offset = self.offset.saturating_add(base);
        self
    }

    /// The field the error is about.
    #[must_use]
    pub fn field(&self) -> &'static str {
        match &self.kind {
            DecodeErrorKind::Truncated { field, .. }
            | DecodeErrorKind::Reserved { field, .. }
            | DecodeErrorKind::InvalidUtf8 { field }
            | DecodeErrorKind::LengthMismatch { field, .. } => field,
            DecodeErrorKind::BadMagic { .. } => "magic",
            DecodeErrorKind::StageIdWithoutFlag { .. } => "stage_id",
            DecodeErrorKind::UnsupportedVersion { .. } => "major_version",
            DecodeErrorKind::BadFrameLength { .. } | DecodeErrorKind::TrailingBytes { .. } => "frame_len",
            DecodeErrorKind::ChecksumMismatch { .. } => "checksum",
            DecodeErrorKind::Invalid(e) => e.field(),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.offset;
        match &self.kind {
            DecodeErrorKind::Truncated { field, needed, available } => {
                write!(f, "truncated frame: field `{field}` needs {needed} bytes at byte {at}, {available} available")
            }
            DecodeErrorKind::BadMagic { found } => write!(
                f,
                "field `magic` expected 0x{:02x}{:02x}, got 0x{:02x}{:02x} at byte {at}",
                super::MAGIC[0],
                super::MAGIC[1],
                found[0],
                found[1]
            ),
            DecodeErrorKind::UnsupportedVersion { major } => {
                write!(f, "field `major_version` {major} is not supported (this reader speaks {}) at byte {at}", super::MAJOR)
            }
            DecodeErrorKind::BadFrameLength { len, min, max } => {
                write!(f, "field `frame_len` {len} is outside {min}..={max} at byte {at}")
            }
            DecodeErrorKind::ChecksumMismatch { stored, computed } => write!(
                f,
                "field `checksum` 0x{stored:08x} does not match computed 0x{computed:08x} at byte {at}: frame is torn or corrupted"
            ),
            DecodeErrorKind::Reserved { field, value } => {
                write!(f, "field `{field}` has reserved bits set (0x{value:x}) at byte {at}")
            }
            DecodeErrorKind::StageIdWithoutFlag { value } => {
                write!(f, "field `stage_id` is {value} but its presence flag (bit 2) is clear at byte {at}")
            }
            DecodeErrorKind::InvalidUtf8 { field } => write!(f, "field `{field}` is not valid UTF-8 at byte {at}"),
            DecodeErrorKind::LengthMismatch { field, end, frame_end } => write!(
                f,
                "field `{field}` ends at byte {end}, past the frame's end at byte {frame_end} (at byte {at})"
            ),
            DecodeErrorKind::TrailingBytes { frame_len, buffer_len } => write!(
                f,
                "field `frame_len` {frame_len} leaves trailing bytes: buffer has {buffer_len} (at byte {at}); use decode_many for back-to-back frames"
            ),
            DecodeErrorKind::Invalid(e) => write!(f, "{e} at byte {at}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a record could not be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The destination cannot hold the frame.
    BufferTooSmall {
        needed: usize,
        available: usize,
        offset: usize,
    },
    /// The record breaks an invariant (only reachable from Rust; Python records are valid by construction).
    Invalid(RecordError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::BufferTooSmall {
                needed,
                available,
                offset,
            } => write!(
                f,
                "buffer too small: frame needs {needed} bytes at offset {offset}, {available} available"
            ),
            EncodeError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EncodeError {}
