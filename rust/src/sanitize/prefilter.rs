//! The clean-path gate: one byte scan that proves no rule can match, so the common clean message
//! never reaches the automata. It is conservative: every rule has a necessary condition here (a
//! byte such as `/` or `@`, a long token run, a dotted quad, a keyword before a separator, a
//! marker word such as `Bearer`), checked only where that byte occurs.

/// Key names whose value is a credential, as identifier suffixes (lowercase).
const KEY_SUFFIXES: &[&str] = &[
    "password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "key", "keyid", "key_id", "key-id", "auth",
    "authorization", "cookie", "session", "session_id", "session-id", "sessionid", "sid", "credential",
    "credentials", "signature", "sas", "dsn", "string", "input_value", "data",
];

/// Words that start a credential on their own (`Bearer abc`, `token abc`).
const SCHEMES: &[&[u8]] = &[b"bearer", b"basic", b"token", b"digest"];

/// Top-level labels of internal host names.
const INTERNAL_TLDS: &[&[u8]] = &[b"internal", b"local", b"localdomain", b"lan", b"intranet", b"corp", b"svc", b"arpa", b"consul"];

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
        && !b.get(at + word.len()).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn looks_back(b: &[u8], at: usize, word: &[u8]) -> bool {
    at >= word.len() && b[at - word.len()..at].eq_ignore_ascii_case(word)
}

const OTHER: u8 = 0;
const LETTER: u8 = 1;
const DIGIT: u8 = 2;
const DOT: u8 = 3;
const DASH: u8 = 4;
const DIRTY: u8 = 5;

/// Byte classes of the gate; `DIRTY` bytes start a path, an e-mail, a list dump or non-ASCII text.
static CLASS: [u8; 256] = {
    let mut t = [OTHER; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        t[i] = if c.is_ascii_alphabetic() || c == b'_' || c == b'+' {
            LETTER
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b'.' {
            DOT
        } else if c == b'-' {
            DASH
        } else if c >= 0x80 || matches!(c, b'/' | b'\\' | b'@' | b'~' | b'[' | b'#') {
            DIRTY
        } else {
            OTHER
        };
        i += 1;
    }
    t
};

/// Whether the word that just ended is a credential scheme or a JWT start.
fn suspicious_word(word: &[u8]) -> bool {
    (matches!(word.len(), 5 | 6) && SCHEMES.iter().any(|s| word.eq_ignore_ascii_case(s))) || word.starts_with(b"eyJ")
}

/// Checks at a punctuation byte (separators, `(`, `"`, `:`).
fn punctuation_hit(b: &[u8], i: usize, run: usize, run_start: usize) -> bool {
    match b[i] {
        b':' | b'=' | b',' if key_before(b, i) => true,
        // fd12:..., fe80::
        b':' => run >= 2 && b[run_start] | 0x20 == b'f',
        b'(' => looks_back(b, i, b"tensor") || looks_back(b, i, b"array") || looks_back(b, i, b"traceback "),
        b'"' => looks_back(b, i, b"file "),
        _ => false,
    }
}

/// `true` when no rule can match `text` (so it is returned unchanged without running them).
pub fn is_clean(text: &str) -> bool {
    let b = text.as_bytes();
    let mut run = 0usize; // token-character run (credentials, base64)
    let mut run_start = 0usize;
    let mut dots = 0usize; // dots in the current digit/dot run (IPv4)
    for (i, &c) in b.iter().enumerate() {
        let class = CLASS[c as usize];
        if class == OTHER {
            if run > 0 && suspicious_word(&b[run_start..i]) {
                return false;
            }
            if c != b' ' && punctuation_hit(b, i, run, run_start) {
                return false;
            }
            run = 0;
            dots = 0;
            continue;
        }
        match class {
            DIRTY => return false,
            LETTER => dots = 0,
            DASH => {
                if b.get(i + 1) == Some(&b'-') || looks_back(b, i, b"ip") {
                    return false; // --flag, -----BEGIN, ip-10-0-0-1
                }
                dots = 0;
            }
            DIGIT => {
                if c == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
                    return false;
                }
            }
            _ => {
                if INTERNAL_TLDS.iter().any(|t| word_at(b, i + 1, t)) {
                    return false;
                }
                dots += 1;
            }
        }
        if run == 0 {
            run_start = i;
        }
        run += 1;
        if dots >= 3 || run >= 15 {
            return false;
        }
    }
    !(run > 0 && suspicious_word(&b[run_start..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate() {
        assert!(is_clean("max_tokens must be <= 4096, got 10000"));
        assert!(is_clean("This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."));
        assert!(!is_clean("password=x"));
        assert!(!is_clean("token abc123"));
        assert!(!is_clean("at 10.1.2.3 now"));
        assert!(!is_clean("key sk-proj-abcdefghijklmnopqrstu"));
        assert!(!is_clean("see /home/x"));
        assert!(!is_clean("密码=x"));
        assert!(!is_clean("worker.local down"));
    }
}

