//! The length bound. The cut keeps the head and the tail: the final error line of a long
//! message is usually its last line, and it is the line a client needs.

use std::borrow::Cow;

/// Marker placed where output was cut to fit `max_len`.
pub const TRUNCATION_MARKER: &str = "...<truncated>...";

/// Returns `text` cut to at most `max_len` bytes (on char boundaries), head and tail kept.
#[must_use]
pub fn truncate(text: &str, max_len: usize) -> Cow<'_, str> {
    if text.len() <= max_len {
        return Cow::Borrowed(text);
    }
    if max_len < TRUNCATION_MARKER.len() + 2 {
        return Cow::Owned(text[..floor_boundary(text, max_len)].to_owned());
    }
    let budget = max_len - TRUNCATION_MARKER.len();
    let tail_len = budget / 3;
    let head_end = cut_at_space_before(text, floor_boundary(text, budget - tail_len));
    let tail_start = cut_at_space_after(text, ceil_boundary(text, text.len() - tail_len));
    let mut out = String::with_capacity(max_len);
    out.push_str(&text[..head_end]);
    out.push_str(TRUNCATION_MARKER);
    out.push_str(&text[tail_start..]);
    Cow::Owned(out)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Moves a head cut back to just after whitespace when one is near, so a word is not split.
fn cut_at_space_before(s: &str, end: usize) -> usize {
    let window = &s.as_bytes()[end.saturating_sub(64)..end];
    match window.iter().rposition(u8::is_ascii_whitespace) {
        Some(p) => end.saturating_sub(64) + p + 1,
        None => end,
    }
}

/// Moves a tail cut forward to just after whitespace when one is near (never lengthening).
fn cut_at_space_after(s: &str, start: usize) -> usize {
    let window = &s.as_bytes()[start..(start + 64).min(s.len())];
    match window.iter().position(u8::is_ascii_whitespace) {
        Some(p) => start + p + 1,
        None => start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail() {
        let s = format!("head {} tail", "word ".repeat(1000));
        let t = truncate(&s, 200);
        assert!(t.len() <= 200);
        assert!(t.starts_with("head "));
        assert!(t.ends_with(" tail"));
        assert!(t.contains(TRUNCATION_MARKER));
    }

    #[test]
    fn multibyte_is_never_split() {
        let s = "é".repeat(1000);
        for n in 0..60 {
            let t = truncate(&s, n);
            assert!(t.len() <= n);
        }
    }
}
