//! Reading a frame (layout in `layout.rs`): the header, the checksum, then each string, validated
//! where it lies, so a record borrows the caller's buffer and nothing is half built.

use super::error::{DecodeError, DecodeErrorKind as K};
use super::layout::{peek, CRC_LEN, FLAG_PARAMETER, FLAG_REQUEST_ID, HEADER_LEN, OFF_FLAGS};
use crate::record::{
    check_identifier, DetailsRef, MAX_ERROR_TYPE_LEN, MAX_MESSAGE_LEN, MAX_PARAMETER_LEN, MAX_REQUEST_ID_LEN,
};

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
    use super::super::encode::{encode_into, encoded_len};
    use super::super::error::EncodeError;
    use super::super::layout::*;
    use super::*;
    use crate::record::Category;
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
