//! Media payloads found by hand before the automata run: `data:` URI payloads and long base64
//! runs. A byte loop over a 64 KiB image is much cheaper than any automaton, and the rule pass
//! then sees only the short text around it.

use std::borrow::Cow;

use memchr::memchr_iter;

use super::markers::{BASE64, DATA};
use super::replace::{opaque_marker, Out};

/// Runs shorter than this are left to the rule pass.
const LONG_RUN: usize = 256;

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'_' | b'-')
}

fn is_mime(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'+' | b'-' | b'/' | b';' | b'=' | b'_')
}

/// Replaces `data:` payloads with `<data>` and long random base64 runs with `<base64>`.
#[allow(clippy::many_single_char_names)] // byte-scanner indices: b(ytes), i, e(nd), s(tart), t(ext)
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let mut out = Out::new(text);
    let mut pos = 0;
    // data: URIs (any case), found from their ':'.
    for colon in memchr_iter(b':', b) {
        if colon < pos || colon < 4 || !b[colon - 4..colon].eq_ignore_ascii_case(b"data") {
            continue;
        }
        if colon > 4 && b[colon - 5].is_ascii_alphanumeric() {
            continue;
        }
        let mut i = colon + 1;
        while i < b.len() && i - colon <= 600 && is_mime(b[i]) {
            i += 1;
        }
        if b.get(i) != Some(&b',') {
            continue;
        }
        let payload = i + 1;
        let mut e = payload;
        while e < b.len() && (is_b64(b[e]) || matches!(b[e], b'=' | b'%')) {
            e += 1;
        }
        if e > payload {
            out.replace(payload, e, DATA);
            pos = e;
        }
    }
    let first = out.finish();
    // Long base64 runs.
    let t: &str = &first;
    let tb = t.as_bytes();
    let mut out2 = Out::new(t);
    let mut i = 0;
    while i < tb.len() {
        if !is_b64(tb[i]) {
            i += 1;
            continue;
        }
        let s = i;
        while i < tb.len() && is_b64(tb[i]) {
            i += 1;
        }
        let mut e = i;
        while e < tb.len() && e - i < 3 && tb[e] == b'=' {
            e += 1;
        }
        if e - s >= LONG_RUN && opaque_marker(&t[s..e]).is_some() {
            out2.replace(s, e, BASE64);
        }
        i = e.max(i);
    }
    match out2.finish() {
        Cow::Borrowed(_) => first,
        Cow::Owned(s) => Cow::Owned(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_uri() {
        assert_eq!(
            strip("x data:image/png;base64,iVBOR+/w== y"),
            "x data:image/png;base64,<data> y"
        );
        assert!(matches!(strip("metadata: 3"), Cow::Borrowed(_)));
    }
}
