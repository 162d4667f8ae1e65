//! PEM private-key blocks, found by hand: `BEGIN … PRIVATE KEY` to the matching `END` line
//! (real or `\n`-escaped newlines), or, without an `END`, to the end of the base64 body.
//! The next `END` is searched once and remembered, so many `BEGIN`s cost one scan.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem;

use super::markers::PRIVATE_KEY;
use super::out::Out;

const BEGIN: &[u8] = b"-----BEGIN";
const END: &[u8] = b"-----END";

/// Searchers built once per process (building one costs more than scanning a short message).
static FIND_BEGIN: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(BEGIN));
static FIND_END: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(END));

/// Length of a `-----BEGIN|END <LABEL> PRIVATE KEY[ BLOCK]-----` line starting at `at`, if any.
fn armor_len(b: &[u8], at: usize, lead: &[u8]) -> Option<usize> {
    let rest = b.get(at..)?.strip_prefix(lead)?;
    let label = rest
        .iter()
        .take(64)
        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == b' ')
        .count();
    let l = &rest[..label];
    let is_key = l.ends_with(b"PRIVATE KEY") || l.ends_with(b"PRIVATE KEY BLOCK");
    (is_key && rest[label..].starts_with(b"-----")).then_some(lead.len() + label + 5)
}

/// Length of the base64 body (and escaped newlines) after a header with no `END`.
fn body_len(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            c if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b':' | b',' | b'-') => i += 1,
            c if c.is_ascii_whitespace() => i += 1,
            b'\\' if matches!(b.get(i + 1), Some(b'n' | b'r')) => i += 2,
            _ => break,
        }
    }
    i - from
}

/// Whether `text` may hold a private key; `false` proves that [`strip`] changes nothing.
pub(crate) fn may_hold(text: &str) -> bool {
    // From the first `-`: most messages have none, and memchr starts faster than the searcher.
    let b = text.as_bytes();
    memchr::memchr(b'-', b).is_some_and(|p| FIND_BEGIN.find(&b[p..]).is_some())
}

/// Replaces every PEM private-key block with `<private-key>`.
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let Some(first) = FIND_BEGIN.find(b) else {
        return Cow::Borrowed(text);
    };
    let mut out = Out::new(text);
    // The next END at or after the last search position; `None` once none is left.
    let mut next_end: Option<Option<usize>> = None;
    let mut pos = first;
    while let Some(rel) = FIND_BEGIN.find(&b[pos..]) {
        let at = pos + rel;
        let Some(head) = armor_len(b, at, BEGIN) else {
            pos = at + BEGIN.len();
            continue;
        };
        let body = at + head;
        let cached = match next_end {
            Some(Some(e)) if e >= body => Some(e),
            Some(None) => None,
            _ => {
                let found = FIND_END.find(&b[body..]).map(|r| body + r);
                next_end = Some(found);
                found
            }
        };
        let stop = match cached.and_then(|e| armor_len(b, e, END).map(|l| e + l)) {
            Some(stop) if body_len(b, body) + body >= cached.unwrap_or(usize::MAX) => stop,
            _ => body + body_len(b, body),
        };
        let stop = floor_char(text, stop);
        out.replace(at, stop, PRIVATE_KEY);
        pos = stop.max(at + 1);
    }
    out.finish()
}

fn floor_char(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_with_end() {
        let s = "k: -----BEGIN RSA PRIVATE KEY-----\nMIIE+/=\n-----END RSA PRIVATE KEY-----\nerr";
        assert_eq!(strip(s), "k: <private-key>\nerr");
    }

    #[test]
    fn escaped_newlines_without_end() {
        let s = r#"{"k": "-----BEGIN PRIVATE KEY-----\nMIIEvQ\nAB=="} bad"#;
        assert_eq!(strip(s), r#"{"k": "<private-key>"} bad"#);
    }

    #[test]
    fn certificates_are_kept() {
        let s = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
        assert!(matches!(strip(s), Cow::Borrowed(_)));
    }
}
