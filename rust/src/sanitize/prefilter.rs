//! The clean-path gate: one byte scan that proves no rule can match, so the common clean message
//! never reaches the automata. It is conservative: every rule has a necessary condition here (a
//! byte such as `/` or `@`, a long token run, a dotted quad, a keyword before a separator, a
//! marker word such as `Bearer`), checked only where that byte occurs.

/// Key names whose value is a credential, as identifier suffixes (lowercase).
const KEY_SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "secret",
    "token",
    "key",
    "keyid",
    "key_id",
    "key-id",
    "auth",
    "authorization",
    "cookie",
    "session",
    "session_id",
    "session-id",
    "sessionid",
    "sid",
    "credential",
    "credentials",
    "signature",
    "sas",
    "dsn",
    "string",
    "input_value",
    "data",
];

use memchr::{memchr3_iter, memchr_iter};

/// Top-level labels of internal host names.
const INTERNAL_TLDS: &[&[u8]] = &[
    b"internal",
    b"local",
    b"localdomain",
    b"lan",
    b"intranet",
    b"corp",
    b"svc",
    b"arpa",
    b"consul",
];

fn ends_with_ci(hay: &[u8], suffix: &str) -> bool {
    hay.len() >= suffix.len() && hay[hay.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// At a separator (`:`/`=`/`,`), whether the identifier before it names a secret.
fn key_before(b: &[u8], sep: usize) -> bool {
    let mut i = sep;
    while i > 0 && matches!(b[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    let quoted = i > 0 && matches!(b[i - 1], b'"' | b'\'');
    if quoted {
        i -= 1;
        if i > 0 && b[i - 1] == b'\\' {
            i -= 1;
        }
    } else if b[sep] == b',' {
        return false;
    }
    let end = i;
    while i > 0 && end - i < 64 && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'_' | b'-' | b'.')) {
        i -= 1;
    }
    let ident = &b[i..end];
    !ident.is_empty() && KEY_SUFFIXES.iter().any(|k| ends_with_ci(ident, k))
}

/// Whether `b[at..]` starts with `word` (ASCII case-insensitive) followed by a non-identifier byte.
fn word_at(b: &[u8], at: usize, word: &[u8]) -> bool {
    b.get(at..at + word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word))
        && !b
            .get(at + word.len())
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn looks_back(b: &[u8], at: usize, word: &[u8]) -> bool {
    at >= word.len() && b[at - word.len()..at].eq_ignore_ascii_case(word)
}

const TOKEN: u8 = 1; // extends a token run (credentials, base64, dotted numbers, identifiers)
const DIRTY: u8 = 2; // starts a path, an e-mail, a list dump, or is not ASCII
const ZERO: u8 = 4; // may start 0x...
const SEP: u8 = 8; // key/value separator
const PQD: u8 = 16; // '(' '"' '-'
const DOT: u8 = 32;

/// Byte flags of the gate.
static FLAGS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut f = 0;
        if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'+' | b'-' | b'.') {
            f |= TOKEN;
        }
        if c >= 0x80 || matches!(c, b'/' | b'\\' | b'@' | b'~' | b'[' | b'#') {
            f |= DIRTY;
        }
        if c == b'0' {
            f |= ZERO;
        }
        if matches!(c, b':' | b'=' | b',') {
            f |= SEP;
        }
        if matches!(c, b'(' | b'"' | b'-') {
            f |= PQD;
        }
        if c == b'.' {
            f |= DOT;
        }
        t[i] = f;
        i += 1;
    }
    t
};

/// One pass over 64-byte blocks: the union of byte flags and whether 15 consecutive bytes are
/// all token bytes (bit masks: no per-byte branch, no loop-carried dependency inside a block).
fn scan(b: &[u8]) -> (u8, bool) {
    let (mut flags, mut carry) = (0u8, 0u32);
    for chunk in b.chunks(64) {
        let (mut m, mut f) = (0u64, 0u8);
        for (j, &c) in chunk.iter().enumerate() {
            let e = FLAGS[c as usize];
            m |= u64::from(e & TOKEN) << j;
            f |= e;
        }
        flags |= f;
        let m2 = m & (m >> 1);
        let m4 = m2 & (m2 >> 2);
        let m8 = m4 & (m4 >> 4);
        let lead = m.trailing_ones();
        if m8 & (m4 >> 8) & (m2 >> 12) & (m >> 14) != 0 || carry + lead >= 15 {
            return (flags, true);
        }
        let len = chunk.len() as u32;
        carry = if lead >= len {
            carry + len
        } else {
            (m << (64 - len)).leading_ones()
        };
    }
    (flags, false)
}

/// A digit/dot run with three dots (an IPv4 address), starting from a dot at `i`.
fn dotted_quad_at(b: &[u8], i: usize) -> bool {
    let mut s = i;
    while s > 0 && (b[s - 1].is_ascii_digit() || b[s - 1] == b'.') {
        s -= 1;
    }
    let mut e = i;
    while e < b.len() && (b[e].is_ascii_digit() || b[e] == b'.') {
        e += 1;
    }
    memchr_iter(b'.', &b[s..e]).count() >= 3
}

/// Whether `fcXX`/`fdXX`/`fe8X`.. (an internal IPv6 group) ends at `colon`.
fn ipv6_group_before(b: &[u8], colon: usize) -> bool {
    let mut s = colon;
    while s > 0 && colon - s < 4 && b[s - 1].is_ascii_hexdigit() {
        s -= 1;
    }
    colon - s >= 3 && b[s] | 0x20 == b'f'
}

/// `true` when no rule can match `text` (so it is returned unchanged without running them).
///
/// A handful of vectorised byte searches and one branch-free loop; the keyword checks run only
/// where their trigger byte occurs (separators, `(`, `"`, `-`, `.`, spaces after a scheme word).
pub(crate) fn is_clean(text: &str) -> bool {
    let b = text.as_bytes();
    let (flags, long_run) = scan(b);
    if long_run || flags & DIRTY != 0 {
        return false;
    }
    // A `0` followed by `x`: checked per `0` rather than with memmem, whose searcher costs more to
    // build than this whole scan on a short message.
    if flags & ZERO != 0 && memchr_iter(b'0', b).any(|i| matches!(b.get(i + 1), Some(b'x' | b'X'))) {
        return false;
    }
    let seps = if flags & SEP != 0 { b } else { &[] };
    for i in memchr3_iter(b':', b'=', b',', seps) {
        if key_before(b, i) || (b[i] == b':' && ipv6_group_before(b, i)) {
            return false; // secret key, or an IPv6 group (fd12:...)
        }
    }
    let pqd = if flags & PQD != 0 { b } else { &[] };
    for i in memchr3_iter(b'(', b'"', b'-', pqd) {
        let hit = match b[i] {
            b'(' => looks_back(b, i, b"tensor") || looks_back(b, i, b"array") || looks_back(b, i, b"traceback "),
            b'"' => looks_back(b, i, b"file "),
            _ => b.get(i + 1) == Some(&b'-') || looks_back(b, i, b"ip"),
        };
        if hit {
            return false;
        }
    }
    let dotted = if flags & DOT != 0 { b } else { &[] };
    let many_dots = memchr_iter(b'.', dotted).nth(2).is_some();
    for i in memchr_iter(b'.', dotted) {
        if INTERNAL_TLDS.iter().any(|t| word_at(b, i + 1, t)) || (many_dots && dotted_quad_at(b, i)) {
            return false;
        }
    }
    // A bare "Bearer abc"/"token abc" credential counts from 15 characters (the token-run check
    // above); with a key before it ("Authorization: ...") the separator check catches it.
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_runs_across_windows() {
        for n in 0..200 {
            let text = format!("{} {} x", "a b ".repeat(n), "q".repeat(15));
            assert!(scan(text.as_bytes()).1, "{n}");
            let text = format!("{} {} x", "a b ".repeat(n), "q".repeat(14));
            assert!(!scan(text.as_bytes()).1, "{n}");
        }
    }

    #[test]
    fn gate() {
        assert!(is_clean("max_tokens must be <= 4096, got 10000"));
        assert!(is_clean(
            "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."
        ));
        assert!(!is_clean("password=x"));
        assert!(!is_clean("token abc123def456ghi"));
        assert!(!is_clean("at 10.1.2.3 now"));
        assert!(!is_clean("key sk-proj-abcdefghijklmnopqrstu"));
        assert!(!is_clean("see /home/x"));
        assert!(!is_clean("密码=x"));
        assert!(!is_clean("worker.local down"));
    }
}
