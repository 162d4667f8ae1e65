//! Frame layout 1.1 (see `docs/wire-format.md`): a 16-byte header, length-prefixed UTF-8 strings,
//! skippable extensions and a trailing CRC32C. All integers are little-endian.

use super::error::{DecodeError, DecodeErrorKind as K, EncodeError};
use crate::record::{
    check_identifier, check_stage_id, check_status, Category, DetailsRef, MAX_ERROR_TYPE_LEN, MAX_MESSAGE_LEN,
    MAX_PARAMETER_LEN, MAX_REQUEST_ID_LEN,
};

/// First two bytes of every frame: `OE`.
pub const MAGIC: [u8; 2] = *b"OE";
/// Major version written and the only one read.
pub const MAJOR: u8 = 1;
/// Minor version written; readers accept any minor of their major. 1.1 records the sanitizer
/// rule set in the header (bytes 14-15, reserved and zero in 1.0).
pub const MINOR: u8 = 1;
/// Bytes before the first string.
pub const HEADER_LEN: usize = 16;
const CRC_LEN: usize = 4;
/// The shortest frame: header, two empty length prefixes, checksum.
pub const MIN_FRAME_LEN: usize = HEADER_LEN + 2 + 2 + CRC_LEN;
/// The longest frame a reader accepts, extensions included.
pub const MAX_FRAME_LEN: usize = 64 * 1024;
/// Extension tags are `u16`; all are optional, and readers skip those they do not know.
pub const EXT_TAG_MAX: u16 = u16::MAX;

const FLAG_SERVER: u8 = 1 << 0;
const FLAG_FATAL: u8 = 1 << 1;
const FLAG_STAGE_ID: u8 = 1 << 2;
const FLAG_PARAMETER: u8 = 1 << 3;
const FLAG_REQUEST_ID: u8 = 1 << 4;
const FLAGS_KNOWN: u8 = FLAG_SERVER | FLAG_FATAL | FLAG_STAGE_ID | FLAG_PARAMETER | FLAG_REQUEST_ID;

// Header offsets.
const OFF_MAJOR: usize = 2;
const OFF_FRAME_LEN: usize = 4;
const OFF_STATUS: usize = 8;
const OFF_FLAGS: usize = 10;
const OFF_RESERVED8: usize = 11;
const OFF_STAGE_ID: usize = 12;
const OFF_RULE_SET: usize = 14;

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

/// Bytes the frame for `d` takes.
#[must_use]
pub fn encoded_len(d: &DetailsRef<'_>) -> usize {
    let opt = |s: Option<&str>| s.map_or(0, |s| 2 + s.len());
    HEADER_LEN + 2 + d.message.len() + 2 + d.error_type.len() + opt(d.parameter) + opt(d.request_id) + CRC_LEN
}

/// Writes the frame for `d`, whose text `rule_set` sanitized, at the start of `out`; returns its length.
///
/// # Errors
/// [`EncodeError::Invalid`] for a record that breaks an invariant, [`EncodeError::BufferTooSmall`]
/// when `out` is shorter than [`encoded_len`].
pub fn encode_into(d: &DetailsRef<'_>, rule_set: u16, out: &mut [u8]) -> Result<usize, EncodeError> {
    d.validate().map_err(EncodeError::Invalid)?;
    let len = encoded_len(d);
    let Some(out) = out.get_mut(..len) else {
        return Err(EncodeError::BufferTooSmall {
            needed: len,
            available: out.len(),
            offset: 0,
        });
    };
    let mut flags = 0;
    if d.category == Category::Server {
        flags |= FLAG_SERVER;
    }
    if d.fatal {
        flags |= FLAG_FATAL;
    }
    if d.stage_id.is_some() {
        flags |= FLAG_STAGE_ID;
    }
    if d.parameter.is_some() {
        flags |= FLAG_PARAMETER;
    }
    if d.request_id.is_some() {
        flags |= FLAG_REQUEST_ID;
    }
    // Bounds hold by construction: validate() capped every string, so all lengths fit u16
    // and the frame fits u32.
    let mut w = Writer { out, pos: 0 };
    w.put(&MAGIC);
    w.put(&[MAJOR, MINOR]);
    w.put(&(len as u32).to_le_bytes());
    w.put(&d.status_code.to_le_bytes());
    w.put(&[flags, 0]);
    w.put(&(d.stage_id.unwrap_or(0) as u16).to_le_bytes());
    w.put(&rule_set.to_le_bytes());
    w.put_str(d.message);
    w.put_str(d.error_type);
    if let Some(p) = d.parameter {
        w.put_str(p);
    }
    if let Some(r) = d.request_id {
        w.put_str(r);
    }
    let body_end = w.pos;
    let crc = crc32c::crc32c(&w.out[..body_end]);
    w.put(&crc.to_le_bytes());
    debug_assert_eq!(w.pos, len);
    Ok(len)
}

struct Writer<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    fn put_str(&mut self, s: &str) {
        self.put(&(s.len() as u16).to_le_bytes());
        self.put(s.as_bytes());
    }
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

/// A decoded frame: the record, borrowing the frame's bytes, and what the header says about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub details: DetailsRef<'a>,
    /// The sanitizer rule set that cleaned the text ([`RULE_SET_UNKNOWN`] if not recorded).
    pub rule_set: u16,
    /// Bytes in the whole frame.
    pub frame_len: usize,
}

/// Decodes exactly one frame that fills `buf`.
///
/// # Errors
/// A [`DecodeError`] for any malformed input, including bytes after the frame.
pub fn decode(buf: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    let decoded = decode_frame(buf)?;
    let frame_len = decoded.frame_len;
    if frame_len != buf.len() {
        return Err(DecodeError::new(
            K::TrailingBytes {
                frame_len,
                buffer_len: buf.len(),
            },
            frame_len,
        ));
    }
    Ok(decoded)
}

/// Decodes the frame at the start of `buf`; later bytes are not read.
///
/// # Errors
/// A [`DecodeError`] for any malformed frame.
pub fn decode_frame(buf: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    let head = peek(buf)?;
    let frame = &buf[..head.frame_len];
    let body_end = head.frame_len - CRC_LEN;
    let stored = u32::from_le_bytes([
        frame[body_end],
        frame[body_end + 1],
        frame[body_end + 2],
        frame[body_end + 3],
    ]);
    let computed = crc32c::crc32c(&frame[..body_end]);
    if stored != computed {
        return Err(DecodeError::new(K::ChecksumMismatch { stored, computed }, body_end));
    }
    let flags = frame[OFF_FLAGS];
    let mut r = Reader {
        buf: &frame[..body_end],
        pos: HEADER_LEN,
    };
    let message = r.string("message", MAX_MESSAGE_LEN)?;
    let error_type = r.string("error_type", MAX_ERROR_TYPE_LEN)?;
    let parameter = if flags & FLAG_PARAMETER != 0 {
        Some(r.string("parameter", MAX_PARAMETER_LEN)?)
    } else {
        None
    };
    let request_id = if flags & FLAG_REQUEST_ID != 0 {
        Some(r.string("request_id", MAX_REQUEST_ID_LEN)?)
    } else {
        None
    };
    // Extensions: this version knows none, so every one is skipped after its bounds are checked.
    while r.pos < body_end {
        let _tag = r.u16("extension_tag")?;
        let len = usize::from(r.u16("extension_len")?);
        r.bytes("extension_value", len)?;
    }
    // `peek` checked the header's invariants and each read checked its bound; one rule is left.
    check_identifier(error_type).map_err(|e| DecodeError::new(K::Invalid(e), HEADER_LEN + 2 + message.len()))?;
    let details = DetailsRef {
        message,
        category: head.category,
        status_code: head.status_code,
        error_type,
        parameter,
        request_id,
        stage_id: head.stage_id,
        fatal: head.fatal,
    };
    Ok(Decoded {
        details,
        rule_set: head.rule_set,
        frame_len: head.frame_len,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.buf.len());
        match end {
            Some(end) => {
                let out = &self.buf[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(DecodeError::new(
                K::LengthMismatch {
                    field,
                    end: self.pos.saturating_add(n),
                    frame_end: self.buf.len(),
                },
                self.pos,
            )),
        }
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        let b = self.bytes(field, 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn string(&mut self, field: &'static str, max: usize) -> Result<&'a str, DecodeError> {
        let len_at = self.pos;
        let len = usize::from(self.u16(field)?);
        if len > max {
            let e = crate::record::RecordError::TooLong { field, len, max };
            return Err(DecodeError::new(K::Invalid(e), len_at));
        }
        let at = self.pos;
        let bytes = self
            .bytes(field, len)
            .map_err(|e| DecodeError { offset: len_at, ..e })?;
        if is_ascii(bytes) {
            // SAFETY: ASCII is valid UTF-8. Most fields are ASCII, and this check costs less than
            // a full validation of short strings.
            return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        simdutf8::basic::from_utf8(bytes).map_err(|_| {
            // Slow path, errors only: find the first bad byte for the message.
            let bad = simdutf8::compat::from_utf8(bytes).map_or_else(|e| e.valid_up_to(), |_| 0);
            DecodeError::new(K::InvalidUtf8 { field }, at + bad)
        })
    }
}

/// Whether `bytes` is ASCII: the high bits of every 8-byte word OR-ed together and tested once at
/// the end (no branch per byte or word); the last word overlaps the rest so no byte loop is left.
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    let n = bytes.len();
    if n < 8 {
        let half = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or_default());
        return if n >= 4 {
            (half(&bytes[..4]) | half(&bytes[n - 4..])) & 0x8080_8080 == 0
        } else {
            bytes.iter().fold(0u8, |acc, &b| acc | b) < 0x80
        };
    }
    let chunks = bytes.chunks_exact(8);
    let last = word(&bytes[n - 8..]);
    chunks.fold(last, |acc, c| acc | word(c)) & HIGH == 0
}

fn truncated(field: &'static str, needed: usize, available: usize, at: usize) -> DecodeError {
    DecodeError::new(
        K::Truncated {
            field,
            needed,
            available,
        },
        at,
    )
}

/// Iterates over back-to-back frames in one buffer; stops at the first error.
pub struct Frames<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Frames<'a> {
    /// Frames packed from the start of `buf` to its end.
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Frames { buf, pos: 0 }
    }
}

impl<'a> Iterator for Frames<'a> {
    /// Each frame with its offset in the buffer.
    type Item = Result<(usize, Decoded<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.get(self.pos..).filter(|r| !r.is_empty())?;
        match decode_frame(rest) {
            Ok(d) => {
                let at = self.pos;
                self.pos += d.frame_len;
                Some(Ok((at, d)))
            }
            Err(e) => {
                let base = self.pos;
                self.pos = self.buf.len();
                Some(Err(e.at_base(base)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Details;

    fn sample() -> Details {
        Details {
            message: "stage 1 failed".into(),
            category: Category::Server,
            status_code: 500,
            error_type: "EngineDeadError".into(),
            parameter: None,
            request_id: Some("req-7".into()),
            stage_id: Some(1),
            fatal: true,
        }
    }

    fn frame(d: &Details) -> Vec<u8> {
        let mut out = vec![0; encoded_len(&d.as_ref())];
        encode_into(&d.as_ref(), 7, &mut out).unwrap();
        out
    }

    #[test]
    fn roundtrip() {
        let d = sample();
        let f = frame(&d);
        let decoded = decode(&f).unwrap();
        assert_eq!(decoded.details.to_owned(), d);
        assert_eq!((decoded.rule_set, decoded.frame_len), (7, f.len()));
    }

    #[test]
    fn peek_reads_header() {
        let f = frame(&sample());
        let p = peek(&f).unwrap();
        assert_eq!(
            (p.category, p.fatal, p.status_code, p.stage_id, p.frame_len, p.rule_set),
            (Category::Server, true, 500, Some(1), f.len(), 7)
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let f = frame(&sample());
        for n in 0..f.len() {
            assert!(decode(&f[..n]).is_err(), "prefix of {n} bytes decoded");
        }
    }

    #[test]
    fn encode_into_short_buffer() {
        let d = sample();
        let mut out = vec![0; 10];
        let need = encoded_len(&d.as_ref());
        assert_eq!(
            encode_into(&d.as_ref(), 1, &mut out),
            Err(EncodeError::BufferTooSmall {
                needed: need,
                available: 10,
                offset: 0
            })
        );
    }
}
