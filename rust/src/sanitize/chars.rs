//! Byte classes shared by the rules, as one 256-entry table, and the scanning helpers built on it.
//!
//! Every class is ASCII; where a class admits other text (path characters), a non-ASCII character
//! counts as a member unless it is Unicode whitespace, and scans step over it whole, so every
//! span a rule reports starts and ends on a character boundary.

/// `[A-Za-z0-9_]`: the ASCII word characters, as `\b` sees them.
pub(crate) const WORD: u32 = 1 << 0;
/// Characters of a POSIX path component: anything but whitespace and `'"<>|;:()[]{}\,` and `` ` `` and `/`.
pub(crate) const PATH: u32 = 1 << 1;
/// Characters of a file name without a known root: `[A-Za-z0-9_.+@%~=-]`.
pub(crate) const FILE: u32 = 1 << 2;
/// Characters of a Windows path: anything but whitespace and `'"<>|*?;:,()[]{}` and `` ` ``.
pub(crate) const WIN: u32 = 1 << 3;
/// Characters of a token run (credentials, identifiers, numbers): `[A-Za-z0-9_.+/=~*:-]`.
pub(crate) const RUN: u32 = 1 << 4;
/// Characters of an opaque run (base64 and its URL-safe form): `[A-Za-z0-9+/_-]`.
pub(crate) const B64: u32 = 1 << 5;
/// `[0-9a-fA-F]`.
pub(crate) const HEX: u32 = 1 << 6;
/// Characters of a URL (RFC 3986 and what logs put in them): anything but whitespace and `'"<>()[]{}\` and `` ` ``.
pub(crate) const URL: u32 = 1 << 7;
/// Characters of a URI scheme: `[A-Za-z0-9+.-]`.
pub(crate) const SCHEME: u32 = 1 << 8;
/// Characters of a host label or e-mail domain: `[A-Za-z0-9-]`.
pub(crate) const LABEL: u32 = 1 << 9;
/// Characters of an e-mail local part: `[A-Za-z0-9._%+-]`.
pub(crate) const LOCAL: u32 = 1 << 10;
/// Characters of a key name before `=`/`:`: `[A-Za-z0-9_.-]`.
pub(crate) const KEY: u32 = 1 << 11;
/// `PATH` and the `/` that separates components.
pub(crate) const PATHS: u32 = 1 << 12;
/// Characters of a media type and its parameters: `[A-Za-z0-9.+/;=_-]`.
pub(crate) const MIME: u32 = 1 << 13;
/// Characters of a `data:` payload: `[A-Za-z0-9+/=_%-]`.
pub(crate) const PAYLOAD: u32 = 1 << 14;
/// Characters of a tensor or array body besides its words: `[0-9eE.,+-[] \t\r\n]`.
pub(crate) const TENSOR: u32 = 1 << 15;

const fn class_of(c: u8) -> u32 {
    let alnum = c.is_ascii_alphanumeric();
    let space = c.is_ascii_whitespace() || c == 0x0b;
    let mut f = 0;
    if alnum || c == b'_' {
        f |= WORD;
    }
    if !space
        && !matches!(
            c,
            b'\'' | b'"' | b'<' | b'>' | b'|' | b';' | b':' | b'(' | b')' | b'[' | b']'
        )
        && !matches!(c, b'{' | b'}' | b'\\' | b',' | b'`' | b'/')
    {
        f |= PATH;
    }
    if f & PATH != 0 || c == b'/' {
        f |= PATHS;
    }
    if alnum || matches!(c, b'_' | b'.' | b'+' | b'@' | b'%' | b'~' | b'=' | b'-') {
        f |= FILE;
    }
    if !space
        && !matches!(
            c,
            b'\'' | b'"' | b'<' | b'>' | b'|' | b'*' | b'?' | b';' | b':' | b',' | b'(' | b')'
        )
        && !matches!(c, b'[' | b']' | b'{' | b'}' | b'`')
    {
        f |= WIN;
    }
    if alnum || matches!(c, b'_' | b'.' | b'+' | b'/' | b'=' | b'~' | b'*' | b':' | b'-') {
        f |= RUN;
    }
    if alnum || matches!(c, b'+' | b'/' | b'_' | b'-') {
        f |= B64;
    }
    if c.is_ascii_hexdigit() {
        f |= HEX;
    }
    if !space
        && !matches!(
            c,
            b'\'' | b'"' | b'<' | b'>' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'\\' | b'`'
        )
    {
        f |= URL;
    }
    if alnum || matches!(c, b'+' | b'.' | b'-') {
        f |= SCHEME;
    }
    if alnum || c == b'-' {
        f |= LABEL;
    }
    if alnum || matches!(c, b'.' | b'_' | b'%' | b'+' | b'-') {
        f |= LOCAL;
    }
    if alnum || matches!(c, b'_' | b'.' | b'-') {
        f |= KEY;
    }
    if alnum || matches!(c, b'.' | b'+' | b'-' | b'/' | b';' | b'=' | b'_') {
        f |= MIME;
    }
    if alnum || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-' | b'%') {
        f |= PAYLOAD;
    }
    if c.is_ascii_digit()
        || matches!(
            c,
            b'[' | b']' | b' ' | b'\t' | b'\r' | b'\n' | b',' | b'.' | b'+' | b'-' | b'e' | b'E'
        )
    {
        f |= TENSOR;
    }
    // Control characters are never part of anything but a token's surroundings.
    if c < 0x20 || c == 0x7f {
        f &= WORD | HEX | TENSOR;
    }
    f
}

/// Classes that admit non-ASCII characters other than whitespace.
const WIDE: u32 = PATH | PATHS | WIN | URL;

static CLASS: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if i < 0x80 { class_of(i as u8) } else { WIDE };
        i += 1;
    }
    t
};

/// Whether byte `c` is in `class`, at compile time (for tables built from these classes).
pub(crate) const fn class_in(c: u8, class: u32) -> bool {
    (if c < 0x80 { class_of(c) } else { WIDE }) & class != 0
}

/// Whether byte `c` is in `class` (for a non-ASCII byte: whether the class admits other text).
#[inline]
pub(crate) fn is(c: u8, class: u32) -> bool {
    CLASS[usize::from(c)] & class != 0
}

/// Whether `b[i]` exists and is in `class`.
#[inline]
pub(crate) fn at(b: &[u8], i: usize, class: u32) -> bool {
    b.get(i).is_some_and(|&c| is(c, class))
}

/// Whether `b[i]` is an ASCII word character.
#[inline]
pub(crate) fn word_at(b: &[u8], i: usize) -> bool {
    at(b, i, WORD)
}

/// Whether the byte before `i` is an ASCII word character (so `i` is not at a `\b` before a word).
#[inline]
pub(crate) fn word_before(b: &[u8], i: usize) -> bool {
    i > 0 && is(b[i - 1], WORD)
}

/// End of the run of `class` characters starting at `i`, scanning at most `max` bytes.
/// Non-ASCII characters count for the wide classes unless they are whitespace, and are stepped
/// over whole.
pub(crate) fn run_end(text: &str, i: usize, class: u32, max: usize) -> usize {
    let b = text.as_bytes();
    let limit = i.saturating_add(max).min(b.len());
    let mut j = i;
    while j < limit {
        let c = b[j];
        if c < 0x80 {
            if !is(c, class) {
                break;
            }
            j += 1;
        } else {
            if class & WIDE == 0 {
                break;
            }
            let Some(ch) = text.get(j..).and_then(|s| s.chars().next()) else {
                break;
            };
            if ch.is_whitespace() || j + ch.len_utf8() > limit {
                break;
            }
            j += ch.len_utf8();
        }
    }
    j
}

/// Start of the run of ASCII `class` bytes that ends at `i`, looking back at most `max` bytes and
/// never before `lo`.
pub(crate) fn run_start(b: &[u8], i: usize, class: u32, max: usize, lo: usize) -> usize {
    let floor = i.saturating_sub(max).max(lo);
    let mut j = i;
    while j > floor && b[j - 1] < 0x80 && is(b[j - 1], class) {
        j -= 1;
    }
    j
}

/// Whether `b[i..]` starts with `word`, ASCII case-insensitively.
#[inline]
pub(crate) fn starts_ci(b: &[u8], i: usize, word: &[u8]) -> bool {
    b.get(i..i.saturating_add(word.len()))
        .is_some_and(|w| w.eq_ignore_ascii_case(word))
}

/// Whether `b[..i]` ends with `word`, ASCII case-insensitively.
#[inline]
pub(crate) fn ends_ci(b: &[u8], i: usize, word: &[u8]) -> bool {
    i >= word.len() && b[i - word.len()..i].eq_ignore_ascii_case(word)
}

/// Number of spaces and tabs ending at `i` (at most `max`).
pub(crate) fn blanks_before(b: &[u8], i: usize, max: usize) -> usize {
    let mut n = 0;
    while n < max && i > n && matches!(b[i - n - 1], b' ' | b'\t') {
        n += 1;
    }
    n
}

/// Number of spaces and tabs starting at `i` (at most `max`).
pub(crate) fn blanks_after(b: &[u8], i: usize, max: usize) -> usize {
    let mut n = 0;
    while n < max && matches!(b.get(i + n), Some(b' ' | b'\t')) {
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert!(is(b'a', WORD | PATH | FILE | RUN | B64 | HEX));
        assert!(!is(b'/', PATH) && is(b'/', WIN) && is(b'/', B64));
        assert!(!is(b'\\', PATH) && is(b'\\', WIN) && !is(b'\\', URL));
        assert!(!is(b' ', PATH | WIN | URL | RUN));
        assert!(is(0xc3, PATH) && !is(0xc3, WORD | RUN));
    }

    #[test]
    fn runs_step_over_characters_and_stop_at_unicode_space() {
        let s = "/é/ü\u{3000}x";
        assert_eq!(run_end(s, 1, PATH, 100), 3);
        assert_eq!(run_end(s, 0, PATH | WIN, 100), s.find('\u{3000}').unwrap_or(0));
        assert_eq!(run_end("abc def", 0, WORD, 2), 2);
        assert_eq!(run_start(b"x abc=", 5, WORD, 100, 0), 2);
        assert_eq!(run_start(b"x abc=", 5, WORD, 100, 3), 3);
    }
}
