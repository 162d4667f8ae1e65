//! What a repr or a dump leaks: media payloads (`data:` URIs), binary `b'...'` reprs, tensor and
//! array values, traceback frames inside JSON or repr strings, and memory addresses (hex, and
//! decimal where a pointer is printed as an integer).

use super::chars::{self, ends_ci, is, word_at, word_before, HEX, MIME, PAYLOAD};
use super::markers::{ADDR, BYTES, DATA, TENSOR, TRACEBACK};
use super::rule::{Cx, Found, Hit};

/// `data:image/png;base64,<payload>`: the payload goes, the media type stays.
pub(crate) fn data_uri(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i < 4 || i - 4 < cx.lo || !ends_ci(b, i, b"data") || (i > 4 && b[i - 5].is_ascii_alphanumeric()) {
        return Found::Miss;
    }
    let comma = i + 1 + b[i + 1..].iter().take(601).take_while(|&&c| is(c, MIME)).count();
    if b.get(comma) != Some(&b',') {
        return Found::Miss;
    }
    let end = comma + 1 + b[comma + 1..].iter().take_while(|&&c| is(c, PAYLOAD)).count();
    if end == comma + 1 {
        return Found::Miss;
    }
    Hit::mark_part(i - 4, end, comma + 1, end, DATA)
}

/// `b'\x89PNG\r\n...'`: a bytes repr holding binary (`\xNN`) bytes, to its closing quote or the
/// end of the line.
pub(crate) fn bytes_repr(cx: &Cx<'_>, i: usize) -> Found {
    let (b, q) = (cx.b, cx.b[i]);
    if i == 0 || b[i - 1] != b'b' || i - 1 < cx.lo || word_before(b, i - 1) {
        return Found::Miss;
    }
    let (mut j, mut binary) = (i + 1, false);
    let end = loop {
        match b.get(j) {
            None | Some(b'\n') => break j,
            Some(&c) if c == q => break j + 1,
            Some(b'\\') => match b.get(j + 1) {
                Some(b'x')
                    if b.get(j + 2).is_some_and(|&c| is(c, HEX)) && b.get(j + 3).is_some_and(|&c| is(c, HEX)) =>
                {
                    binary = true;
                    j += 4;
                }
                Some(&c) if c != b'\n' => j += 2,
                _ => return Found::Miss,
            },
            Some(_) => j += 1,
        }
    };
    if binary && cx.text.is_char_boundary(end) {
        Hit::mark(i - 1, end, BYTES)
    } else {
        Found::Miss
    }
}

/// `tensor([[0.1, 0.2], ...], device='cuda:0')`: the values of a multi-element tensor or array go;
/// `device=`/`dtype=` after them and scalar tensors (`tensor(nan)`) stay.
pub(crate) fn tensor(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let Some(word) = [&b"tensor"[..], b"array"].into_iter().find(|w| b[..i].ends_with(w)) else {
        return Found::Miss;
    };
    let start = i - word.len();
    if start < cx.lo || word_before(b, start) {
        return Found::Miss;
    }
    let open = i
        + 1
        + b[i + 1..]
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            .count();
    if b.get(open) != Some(&b'[') {
        return Found::Miss;
    }
    let mut j = open + 1;
    loop {
        j += b[j..].iter().take_while(|&&c| is(c, chars::TENSOR)).count();
        match ["nan", "inf", "True", "False"]
            .iter()
            .find(|w| b[j..].starts_with(w.as_bytes()))
        {
            Some(w) => j += w.len(),
            None => break,
        }
    }
    let Some(last) = memchr::memrchr(b']', &b[open + 1..j]).map(|k| open + 1 + k) else {
        return Found::Miss;
    };
    if b[i + 1..last].contains(&b',') {
        Hit::mark_part(start, last + 1, i + 1, last + 1, TENSOR)
    } else {
        Hit::keep(start, last + 1)
    }
}

/// `File \"/x/y.py\", line 3, in f\n    src` inside a JSON or repr string (where the line pass
/// cannot see it): the frame and its escaped source line.
pub(crate) fn escaped_frame(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i < 5 || i - 5 < cx.lo || &b[i - 5..i] != b"File " || b.get(i + 1) != Some(&b'"') {
        return Found::Miss;
    }
    let from = i + 2;
    let quote = from
        + b[from..]
            .iter()
            .take(514)
            .take_while(|&&c| c != b'"' && c != b'\n')
            .count();
    if b.get(quote) != Some(&b'"') || b[quote - 1] != b'\\' || quote - 1 <= from || quote - 1 - from > 512 {
        return Found::Miss;
    }
    let Some(rest) = b.get(quote + 1..).filter(|r| r.starts_with(b", line ")) else {
        return Found::Miss;
    };
    let digits = rest[7..].iter().take(10).take_while(|c| c.is_ascii_digit()).count();
    let at = quote + 1 + 7 + digits;
    if digits == 0 || digits > 9 || !b[at..].starts_with(b", in ") {
        return Found::Miss;
    }
    let name = at + 5;
    let mut end = name
        + b[name..]
            .iter()
            .take(128)
            .take_while(|&&c| !matches!(c, b'\\' | b'\n' | b'"'))
            .count();
    while end > name && !cx.text.is_char_boundary(end) {
        end -= 1;
    }
    if end == name {
        return Found::Miss;
    }
    // The escaped source line: `\n` and 2+ spaces, then anything but `\n`, a quote or a newline.
    let spaces = b
        .get(end + 2..)
        .map_or(0, |r| r.iter().take_while(|&&c| c == b' ').count());
    if b[end..].starts_with(b"\\n") && spaces >= 2 {
        let mut j = end + 2 + spaces;
        loop {
            match b.get(j) {
                Some(b'\\') if b.get(j + 1).is_some_and(|&c| c != b'n') => j += 2,
                Some(&c) if c != b'\\' && c != b'\n' && c != b'"' => j += 1,
                _ => break,
            }
        }
        while !cx.text.is_char_boundary(j) {
            j -= 1;
        }
        end = j;
    }
    Hit::mark(i - 5, end, TRACEBACK)
}

/// `0x7f8070a36957`: a pointer-sized hex value (6 to 16 digits), found from its `x`.
pub(crate) fn hex_addr(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i == 0 || b[i - 1] != b'0' || i - 1 < cx.lo || word_before(b, i - 1) {
        return Found::Miss;
    }
    let digits = b[i + 1..].iter().take(17).take_while(|&&c| is(c, HEX)).count();
    if !(6..=16).contains(&digits) || word_at(b, i + 1 + digits) {
        return Found::Miss;
    }
    Hit::mark(i - 1, i + 1 + digits, ADDR)
}

/// User-space pointers on 64-bit Linux, printed in decimal: the executable and heap
/// (`0x55..`/`0x56..`) and shared libraries, mappings and stacks (`0x7e..`/`0x7f..`).
const POINTER_RANGES: [(u64, u64); 2] = [
    (0x5500_0000_0000, 0x5700_0000_0000),
    (0x7e00_0000_0000, 0x8000_0000_0000),
];

/// Words that say the number after them is an address.
const POINTER_WORDS: [&str; 6] = ["ptr", "pointer", "address", "addr", "data_ptr", "handle"];

/// The fewest digits of a decimal pointer.
pub(crate) const DECIMAL_ADDR_SHORTEST: usize = 10;

/// `data_ptr=140234567890123`, `at 94823749283840`: a pointer printed in decimal, by its range
/// or by a pointer word just before it.
pub(crate) fn decimal_addr(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let digits = b[i..].iter().take(21).take_while(|c| c.is_ascii_digit()).count();
    let end = i + digits;
    if !(DECIMAL_ADDR_SHORTEST..=15).contains(&digits)
        || word_before(b, i)
        || word_at(b, end)
        || b.get(end) == Some(&b'.')
    {
        return Found::MissUntil(end.max(i + 1));
    }
    let Ok(value) = cx.text[i..end].parse::<u64>() else {
        return Found::Miss;
    };
    let in_range = POINTER_RANGES.iter().any(|&(lo, hi)| (lo..hi).contains(&value));
    let lead = &b[i.saturating_sub(16)..i];
    let named = value >= 1 << 32
        && POINTER_WORDS.iter().any(|w| {
            let trimmed = lead.trim_ascii_end();
            let trimmed = trimmed
                .strip_suffix(b"=")
                .or_else(|| trimmed.strip_suffix(b":"))
                .unwrap_or(trimmed);
            let trimmed = trimmed.trim_ascii_end();
            ends_ci(trimmed, trimmed.len(), w.as_bytes()) && !word_before(trimmed, trimmed.len() - w.len())
        });
    if in_range || named {
        Hit::mark(i, end, ADDR)
    } else {
        Found::MissUntil(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn same(s: &str) -> Cow<'_, str> {
        Cow::Borrowed(s)
    }

    fn cx(text: &str) -> Cx<'_> {
        Cx {
            text,
            b: text.as_bytes(),
            lo: 0,
            inner: same,
        }
    }

    #[test]
    fn decimal_pointers() {
        let hit = |s: &str| {
            matches!(
                decimal_addr(&cx(s), s.find(|c: char| c.is_ascii_digit()).unwrap_or(0)),
                Found::Hit(_)
            )
        };
        assert!(hit("at 140234567890123 freed"));
        assert!(hit("data_ptr=4831838208 bad"));
        assert!(hit("ptr: 94823749283840"));
        assert!(!hit("tokens 100000000000000 requested"));
        assert!(!hit("id 4831838208 bad"));
        assert!(!hit("v 140234567890123.5"));
    }
}
