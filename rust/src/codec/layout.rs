//! Frame layout 1.1 (see `docs/wire-format.md`): a 16-byte header, length-prefixed UTF-8 strings,
//! skippable extensions and a trailing CRC32C. All integers are little-endian. This file holds the
//! layout's constants and `peek`, which reads the header alone; `encode` and `decode` write and read
//! whole frames.

use super::error::{DecodeError, DecodeErrorKind as K};
use crate::record::{check_stage_id, check_status, Category};

/// First two bytes of every frame: `OE`.
pub const MAGIC: [u8; 2] = *b"OE";
/// Major version written and the only one read.
pub const MAJOR: u8 = 1;
/// Minor version written; readers accept any minor of their major. 1.1 records the sanitizer
/// rule set in the header (bytes 14-15, reserved and zero in 1.0).
pub const MINOR: u8 = 1;
/// Bytes before the first string.
pub const HEADER_LEN: usize = 16;
pub(super) const CRC_LEN: usize = 4;
/// The shortest frame: header, two empty length prefixes, checksum.
pub const MIN_FRAME_LEN: usize = HEADER_LEN + 2 + 2 + CRC_LEN;
/// The longest frame a reader accepts, extensions included.
pub const MAX_FRAME_LEN: usize = 64 * 1024;
/// Extension tags are `u16`; all are optional, and readers skip those they do not know.
pub const EXT_TAG_MAX: u16 = u16::MAX;

pub(super) const FLAG_SERVER: u8 = 1 << 0;
pub(super) const FLAG_FATAL: u8 = 1 << 1;
pub(super) const FLAG_STAGE_ID: u8 = 1 << 2;
pub(super) const FLAG_PARAMETER: u8 = 1 << 3;
pub(super) const FLAG_REQUEST_ID: u8 = 1 << 4;
pub(super) const FLAGS_KNOWN: u8 = FLAG_SERVER | FLAG_FATAL | FLAG_STAGE_ID | FLAG_PARAMETER | FLAG_REQUEST_ID;

// Header offsets.
pub(super) const OFF_MAJOR: usize = 2;
pub(super) const OFF_FRAME_LEN: usize = 4;
pub(super) const OFF_STATUS: usize = 8;
pub(super) const OFF_FLAGS: usize = 10;
pub(super) const OFF_RESERVED8: usize = 11;
pub(super) const OFF_STAGE_ID: usize = 12;
pub(super) const OFF_RULE_SET: usize = 14;

/// The sanitizer rule set recorded in a frame: which rules cleaned its `message` and `parameter`.
/// `0` means not recorded (a 1.0 writer, or an encoder that does not sanitize).
pub const RULE_SET_UNKNOWN: u16 = 0;

/// What `peek` reads from the header alone, without touching strings or the checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peek {
    pub category: Category,
    pub fatal: bool,
    pub status_code: u16,
    pub stage_id: Option<u32>,
    /// Bytes in the whole frame.
    pub frame_len: usize,
    /// The sanitizer rule set that cleaned the text ([`RULE_SET_UNKNOWN`] if not recorded).
    pub rule_set: u16,
}

/// Reads the header of the frame at the start of `buf`: category, fatal, status, stage id, length.
///
/// Checks magic, version, length and the header's own invariants, but not the checksum: it is a
/// routing hint, and `decode` is the authority.
///
/// # Errors
/// A [`DecodeError`] for a header that is truncated, foreign, of another major version or inconsistent.
pub fn peek(buf: &[u8]) -> Result<Peek, DecodeError> {
    let header: &[u8; HEADER_LEN] = match buf.first_chunk() {
        Some(h) => h,
        None => return Err(truncated("header", HEADER_LEN, buf.len(), 0)),
    };
    if header[..2] != MAGIC {
        return Err(DecodeError::new(
            K::BadMagic {
                found: [header[0], header[1]],
            },
            0,
        ));
    }
    if header[OFF_MAJOR] != MAJOR {
        return Err(DecodeError::new(
            K::UnsupportedVersion {
                major: header[OFF_MAJOR],
            },
            OFF_MAJOR,
        ));
    }
    // header[3] (the minor): any minor of this major is accepted; its additions are skippable extensions.
    let frame_len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let frame_len_usize = frame_len as usize;
    if !(MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(&frame_len_usize) {
        return Err(DecodeError::new(
            K::BadFrameLength {
                len: frame_len,
                min: MIN_FRAME_LEN,
                max: MAX_FRAME_LEN,
            },
            OFF_FRAME_LEN,
        ));
    }
    let status_code = u16::from_le_bytes([header[OFF_STATUS], header[OFF_STATUS + 1]]);
    let flags = header[OFF_FLAGS];
    if flags & !FLAGS_KNOWN != 0 {
        return Err(DecodeError::new(
            K::Reserved {
                field: "flags",
                value: u32::from(flags),
            },
            OFF_FLAGS,
        ));
    }
    if header[OFF_RESERVED8] != 0 {
        let value = u32::from(header[OFF_RESERVED8]);
        return Err(DecodeError::new(
            K::Reserved {
                field: "reserved",
                value,
            },
            OFF_RESERVED8,
        ));
    }
    let stage_raw = u16::from_le_bytes([header[OFF_STAGE_ID], header[OFF_STAGE_ID + 1]]);
    let rule_set = u16::from_le_bytes([header[OFF_RULE_SET], header[OFF_RULE_SET + 1]]);
    let stage_id = if flags & FLAG_STAGE_ID != 0 {
        let id = u32::from(stage_raw);
        check_stage_id(id).map_err(|e| DecodeError::new(K::Invalid(e), OFF_STAGE_ID))?;
        Some(id)
    } else if stage_raw != 0 {
        return Err(DecodeError::new(
            K::StageIdWithoutFlag { value: stage_raw },
            OFF_STAGE_ID,
        ));
    } else {
        None
    };
    let category = if flags & FLAG_SERVER != 0 {
        Category::Server
    } else {
        Category::Client
    };
    check_status(category, status_code).map_err(|e| DecodeError::new(K::Invalid(e), OFF_STATUS))?;
    let fatal = flags & FLAG_FATAL != 0;
    if fatal && category == Category::Client {
        return Err(DecodeError::new(
            K::Invalid(crate::record::RecordError::FatalClient),
            OFF_FLAGS,
        ));
    }
    if buf.len() < frame_len_usize {
        return Err(truncated("frame", frame_len_usize, buf.len(), 0));
    }
    Ok(Peek {
        category,
        fatal,
        status_code,
        stage_id,
        frame_len: frame_len_usize,
        rule_set,
    })
}

pub(super) fn truncated(field: &'static str, needed: usize, available: usize, at: usize) -> DecodeError {
    DecodeError::new(
        K::Truncated {
            field,
            needed,
            available,
        },
        at,
    )
}
