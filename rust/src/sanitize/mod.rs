//! The public-text sanitizer: removes what must never reach a client from error messages.
//!
//! Pure Rust (no pyo3). PLACEHOLDER: passes text through, truncated to the bound.

use std::borrow::Cow;

/// Marker appended when output is cut at `max_len`.
pub const TRUNCATION_MARKER: &str = "...<truncated>";

/// Returns `input` with sensitive spans replaced, at most `max_len` bytes long.
/// Borrowed when nothing changed, so the common clean case allocates nothing.
#[must_use]
pub fn sanitize(input: &str, max_len: usize) -> Cow<'_, str> {
    if input.len() <= max_len {
        return Cow::Borrowed(input);
    }
    let keep = max_len.saturating_sub(TRUNCATION_MARKER.len());
    let mut end = keep;
    while !input.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{TRUNCATION_MARKER}", &input[..end]))
}

/// Normalises a request parameter name for the record's `parameter` field.
#[must_use]
pub fn normalize_parameter(input: &str) -> Cow<'_, str> {
    Cow::Borrowed(input)
}
