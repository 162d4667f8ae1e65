//! Credentials found by their context: `key=value` forms whose key names a credential, CLI flags,
//! pydantic errors that echo a secret field, and `Bearer <token>` (webhook URLs: `webhooks`).

use super::chars::{blanks_after, blanks_before, ends_ci, is, run_end, word_before, KEY};
use super::lexicon::{
    intl_key_before, is_placeholder, is_scheme, is_secret_key, may_end_with_secret_key, BARE_SCHEMES,
};
use super::markers::SECRET;
use super::rule::{Cx, Found, Hit};
use super::tokens::opaque_marker;

/// The span of the credential in `text[s..e]`: quotes, a `b` prefix and an auth scheme word are
/// kept outside it; `None` for a placeholder (`None`, `***`, `<secret>`) or a short number.
fn value_span(text: &str, mut s: usize, mut e: usize) -> Option<(usize, usize)> {
    let mut inner = text.get(s..e)?;
    if let Some(rest) = inner.strip_prefix('b').filter(|r| r.starts_with(['\'', '"'])) {
        s += 1;
        inner = rest;
    }
    for q in ["\\\"", "'", "\""] {
        if inner.len() >= 2 * q.len() && inner.starts_with(q) && inner.ends_with(q) {
            s += q.len();
            e -= q.len();
            inner = &inner[q.len()..inner.len() - q.len()];
            break;
        }
    }
    if let Some(sp) = inner.find([' ', '\t']) {
        if is_scheme(&inner[..sp]) {
            let rest = inner[sp..].trim_start();
            s += inner.len() - rest.len();
            inner = rest;
        }
    }
    (!is_scheme(inner) && !is_placeholder(inner)).then_some((s, e))
}

/// A match `start..end` whose value `vs..ve` is replaced unless it is a placeholder.
fn value_hit(cx: &Cx<'_>, start: usize, end: usize, vs: usize, ve: usize) -> Found {
    match value_span(cx.text, vs, ve) {
        Some((s, e)) => Hit::mark_part(start, end, s, e, SECRET),
        None => Hit::keep(start, end),
    }
}

/// End of a quoted string starting at `b[i]` (`'`, `"` or `\"`), escapes allowed, on one line.
fn quoted_end(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'"') {
        let mut j = i + 2;
        while j < b.len() {
            match b[j] {
                b'\\' if b.get(j + 1) == Some(&b'"') => return Some(j + 2),
                b'\\' if b.get(j + 1).is_some_and(|&c| c != b'\n') => j += 2,
                b'"' | b'\\' | b'\n' => return None,
                _ => j += 1,
            }
        }
        return None;
    }
    let q = *b.get(i).filter(|q| matches!(q, b'\'' | b'"'))?;
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            c if c == q => return Some(j + 1),
            b'\\' if b.get(j + 1).is_some_and(|&c| c != b'\n') => j += 2,
            b'\\' | b'\n' => return None,
            _ => j += 1,
        }
    }
    None
}

/// Whether `c` may be part of a bare (unquoted) value.
fn bare(c: u8) -> bool {
    !matches!(
        c,
        b'\'' | b'"' | b'<' | b'>' | b',' | b';' | b'&' | b')' | b'}' | b']' | b'\\'
    )
}

/// End of the run from `i` of ASCII bytes that `keep` accepts and non-ASCII characters other
/// than whitespace; whitespace always ends it.
fn value_run(text: &str, i: usize, keep: fn(u8) -> bool) -> usize {
    let b = text.as_bytes();
    let mut j = i;
    while j < b.len() {
        if b[j] < 0x80 {
            if b[j].is_ascii_whitespace() || b[j] == 0x0b || !keep(b[j]) {
                break;
            }
            j += 1;
        } else {
            match text.get(j..).and_then(|s| s.chars().next()) {
                Some(ch) if !ch.is_whitespace() => j += ch.len_utf8(),
                _ => break,
            }
        }
    }
    j
}

/// End of the value at `v`: a quoted string (optionally `b`-prefixed), or an optional auth scheme
/// and a bare word.
fn value_end(text: &str, v: usize) -> Option<usize> {
    let b = text.as_bytes();
    let q = if b.get(v) == Some(&b'b') && matches!(b.get(v + 1), Some(b'\'' | b'"')) {
        v + 1
    } else {
        v
    };
    if let Some(end) = quoted_end(b, q) {
        return Some(end);
    }
    let word = run_end(text, v, KEY, 16);
    let scheme = is_scheme(text.get(v..word).unwrap_or_default()) && blanks_after(b, word, usize::MAX) > 0;
    let from = if scheme {
        word + blanks_after(b, word, usize::MAX)
    } else {
        v
    };
    let end = value_run(text, from, bare);
    if end > from {
        Some(end)
    } else {
        (scheme && from > word).then_some(word).filter(|&w| w > v)
    }
}

/// Length of a separator at `b[i]`: `:`, `=`, `,` or a full-width `：`/`＝`.
fn separator(b: &[u8], i: usize) -> usize {
    match b[i] {
        b':' | b'=' | b',' => 1,
        0xEF if matches!(b.get(i + 1..i + 3), Some([0xBC, 0x9A | 0x9D])) => 3,
        _ => 0,
    }
}

/// Where the key before the separator at `i` ends (blanks and a quote skipped), if one may.
fn key_end(b: &[u8], i: usize) -> Option<usize> {
    if separator(b, i) == 0 {
        return None;
    }
    let mut k = i - blanks_before(b, i, 8);
    let quoted = k > 0 && matches!(b[k - 1], b'"' | b'\'');
    if quoted {
        k -= 1;
        if k > 0 && b[k - 1] == b'\\' {
            k -= 1;
        }
    } else if b[i] == b',' {
        return None;
    }
    Some(k)
}

/// [`key_value`]'s cheap necessary condition: a key that may end with a credential key name,
/// or one in another language (non-ASCII, or the `e` of `mot de passe`).
pub(crate) fn key_value_pre(b: &[u8], i: usize) -> bool {
    key_end(b, i).is_some_and(|k| may_end_with_secret_key(&b[..k]) || (k > 0 && (b[k - 1] >= 0x80 || b[k - 1] == b'e')))
}

/// `password=x`, `"api_key": "x"`, `('token', 'x')`, `\"secret\": \"x\"`, `密码=x`, `Authorization: Bearer x`:
/// a value whose key names a credential, found from its separator.
pub(crate) fn key_value(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if !key_value_pre(b, i) {
        return Found::Miss;
    }
    let (Some(k), sep) = (key_end(b, i), separator(b, i)) else {
        return Found::Miss;
    };
    let ascii = super::lexicon::key_start(b, k, cx.lo);
    let start = if ascii < k && is_secret_key(&b[ascii..k]) {
        ascii
    } else if k > 0 && (b[k - 1] >= 0x80 || b[k - 1] == b'e') {
        match intl_key_before(cx.text, k) {
            Some(s) => s,
            None => return Found::Miss,
        }
    } else {
        return Found::Miss;
    };
    if start < cx.lo {
        return Found::Miss;
    }
    let v = i + sep + blanks_after(b, i + sep, 8);
    match value_end(cx.text, v) {
        Some(end) => value_hit(cx, start, end, v, end),
        None => Found::Miss,
    }
}

/// Whether a value written after a key and a space (no separator) reads as a credential rather
/// than the next word of a sentence, a number, a model id or code: 6+ characters, no `/`, and a
/// symbol a password uses (`!@#$%^&*+~`), a `user:password` pair, or (after any `user:`) 16+
/// hex digits or letters and digits only.
fn reads_like_credential(v: &str) -> bool {
    if v.len() < 6 || v.contains('/') || v.starts_with(['<', '(', '[', '{']) || is_placeholder(v) {
        return false;
    }
    if v.bytes().any(|c| b"!@#$%^&*+~".contains(&c)) {
        return true;
    }
    let (user, core) = v
        .rsplit_once(':')
        .map_or(("", v.as_bytes()), |(u, c)| (u, c.as_bytes()));
    // `user:password`, but not `host:port` (`0.0.0.0:8000`, `localhost:8080`): a user has a
    // letter, and a password is not a port.
    let port = core.len() <= 5 && core.iter().all(u8::is_ascii_digit);
    if user.bytes().any(|c| c.is_ascii_alphabetic()) && !port && core.len() >= 4 && core.iter().any(u8::is_ascii_digit)
    {
        return true;
    }
    let hex = core.len() >= 16 && core.iter().all(u8::is_ascii_hexdigit);
    let letters_and_digits = core.len() >= 6
        && core.iter().all(u8::is_ascii_alphanumeric)
        && core.iter().any(u8::is_ascii_digit)
        && core.iter().any(u8::is_ascii_alphabetic);
    hex || letters_and_digits
}

/// [`spaced_key_value`]'s cheap necessary condition (it runs at most spaces of prose): the key
/// may end with a credential key name, and the value may read like a credential.
pub(crate) fn spaced_key_value_pre(b: &[u8], i: usize) -> bool {
    may_end_with_secret_key(&b[..i]) && value_may_read_like_credential(b, i + 1)
}

/// A necessary condition for `reads_like_credential` on the value at `v`: six bytes that can
/// start it, and a digit or one of `!@#$%^&*+~` in it, unless it is 16 bytes long or more.
fn value_may_read_like_credential(b: &[u8], v: usize) -> bool {
    if !six_value_bytes(b, v) {
        return false;
    }
    for &c in b[v..].iter().take(16) {
        if c >= 0x80 || c.is_ascii_digit() || b"!@#$%^&*+~".contains(&c) {
            return true;
        }
        if c.is_ascii_whitespace() || c == 0x0b || !bare(c) {
            return false;
        }
    }
    b.len() - v >= 16
}

/// Whether the six bytes at `v` can start a value `reads_like_credential` accepts: none of them
/// ends the value run or is a `/`, and the first opens no bracket.
fn six_value_bytes(b: &[u8], v: usize) -> bool {
    b.get(v..v.saturating_add(6)).is_some_and(|w| {
        !matches!(w[0], b'(' | b'[' | b'{')
            && w.iter()
                .all(|&c| c >= 0x80 || !(c.is_ascii_whitespace() || c == 0x0b || c == b'/' || !bare(c)))
    })
}

/// `password hunter2`, `API key 9f86d081...`, `session 3f2a9c1e7b4d`, `credentials alice:pw`:
/// a credential key of one to three words, a space, and a value that reads as a credential
/// (found from the space).
pub(crate) fn spaced_key_value(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if !spaced_key_value_pre(b, i) {
        return Found::Miss;
    }
    // The value first: after most spaces of prose it is a short word, which ends the look
    // before the key names are searched.
    let v = i + 1;
    let run = value_run(cx.text, v, bare);
    let value = cx.slice(v, run).trim_end_matches(['.', ':', '!', '?']);
    if !reads_like_credential(value) {
        return Found::Miss;
    }
    let mut start = super::lexicon::key_start(b, i, cx.lo);
    for _ in 0..2 {
        if start == i || is_secret_key(&b[start..i]) || start < cx.lo + 2 || b[start - 1] != b' ' {
            break;
        }
        let earlier = super::lexicon::key_start(b, start - 1, cx.lo);
        if earlier == start - 1 {
            break;
        }
        start = earlier;
    }
    if start == i || !is_secret_key(&b[start..i]) || word_before(b, start) {
        return Found::Miss;
    }
    Hit::mark_part(start, v + value.len(), v, v + value.len(), SECRET)
}

/// `--api-key VALUE`, `--hf-token=VALUE`: a command-line flag naming a credential.
pub(crate) fn flag(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if b.get(i + 1) != Some(&b'-') {
        return Found::Miss;
    }
    let name_end = i
        + 2
        + b[i + 2..]
            .iter()
            .take(64)
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
            .count();
    let name = &b[i + 2..name_end];
    if name.is_empty() || !(is_secret_key(name) || ends_ci(name, name.len(), b"key")) {
        return Found::Miss;
    }
    let v = if b.get(name_end) == Some(&b'=') {
        name_end + 1
    } else {
        name_end + blanks_after(b, name_end, 8)
    };
    // The next flag (`--api-key --port 80`) is not a value; a negative number is.
    let next_flag = b.get(v) == Some(&b'-') && b.get(v + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'-');
    if v == name_end || next_flag {
        return Found::Miss;
    }
    let end = value_run(cx.text, v, |c| !matches!(c, b'\'' | b'<' | b'>'));
    if end == v {
        return Found::Miss;
    }
    value_hit(cx, i, end, v, end)
}

/// `password\n  String should have ... [type=..., input_value='x', ...]`: pydantic echoes the
/// rejected value of a field; when the field names a credential, the value goes.
pub(crate) fn pydantic(cx: &Cx<'_>, i: usize) -> Found {
    const KEY_WORD: &[u8] = b"input_value";
    let b = cx.b;
    if !ends_ci(b, i, KEY_WORD) || i - KEY_WORD.len() < cx.lo {
        return Found::Miss;
    }
    let line_start = b[..i].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    if line_start == 0 {
        return Found::Miss;
    }
    let prev_start = b[..line_start - 1]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |p| p + 1);
    let field = cx
        .slice(prev_start, line_start - 1)
        .trim_end_matches('\r')
        .trim_matches([' ', '\t']);
    let plain = field
        .split('.')
        .all(|p| !p.is_empty() && p.bytes().all(|c| is(c, super::chars::WORD)));
    if !plain || !is_secret_key(field.as_bytes()) {
        return Found::Miss;
    }
    let v = i + 1;
    let end = quoted_end(b, v).unwrap_or_else(|| {
        v + b[v..]
            .iter()
            .take_while(|&&c| !c.is_ascii_whitespace() && c != b',' && c != b']')
            .count()
    });
    if end == v {
        return Found::Miss;
    }
    value_hit(cx, i - KEY_WORD.len(), end, v, end)
}

/// The shortest value after a bare scheme that counts as a credential.
pub(crate) const BEARER_SHORTEST: usize = 15;

/// `Bearer <token>`, `token <token>` in running text: the token, when it looks random, found
/// from the start of its run (a bare scheme word is too common to start from).
pub(crate) fn bare_scheme(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let gap = blanks_before(b, i, 8);
    if gap == 0 {
        return Found::Miss;
    }
    let word_end = i - gap;
    let Some(scheme) = BARE_SCHEMES.iter().find(|w| ends_ci(b, word_end, w.as_bytes())) else {
        return Found::Miss;
    };
    let start = word_end - scheme.len();
    if start < cx.lo || word_before(b, start) {
        return Found::Miss;
    }
    let end = i + b[i..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-'))
        .count();
    let value = &cx.text[i..end];
    let marked = value.bytes().any(|c| !c.is_ascii_alphabetic() && c != b'.');
    if end - i >= BEARER_SHORTEST && marked && opaque_marker(value).is_some() {
        Hit::mark_part(start, end, i, end, SECRET)
    } else {
        Found::MissUntil(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_spans_keep_quotes_schemes_and_placeholders() {
        let t = "'Bearer abc' b\"xyz\" None <secret> 1234";
        assert_eq!(value_span(t, 0, 12), Some((8, 11)));
        assert_eq!(value_span(t, 13, 19), Some((15, 18)));
        assert_eq!(value_span(t, 20, 24), None);
        assert_eq!(value_span(t, 25, 33), None);
        assert_eq!(value_span(t, 34, 38), None);
    }
}
