//! Writing a frame (layout in `layout.rs`): the record is validated, then written in one pass.

use super::error::EncodeError;
use super::layout::{
    CRC_LEN, FLAG_FATAL, FLAG_PARAMETER, FLAG_REQUEST_ID, FLAG_SERVER, FLAG_STAGE_ID, HEADER_LEN, MAGIC, MAJOR, MINOR,
};
use crate::record::{Category, DetailsRef};

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
