//! Credentials found by their shape: well-known token formats (by prefix and body), JWTs, and
//! any other random-looking run. A run of identifier or hex characters (`Qwen2AudioForConditionalGeneration`,
//! a SHA, a UUID, `chatcmpl-<hex>`) is recognised as harmless in the one pass that measures it.

use super::chars::{is, word_before, B64};
use super::markers::{BASE64, SECRET};
use super::rule::{ByteSet, Cx, Found, Hit};

fn alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}
fn alnum_dash(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}
fn alnum_us(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}
fn alnum_us_dash(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}
fn alnum_star(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'*'
}
fn upper_digit(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}
fn lower_hex(c: u8) -> bool {
    c.is_ascii_digit() || (b'a'..=b'f').contains(&c)
}
fn hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}
fn b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')
}
fn sentry(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'=' | b'+' | b'/')
}
fn atlassian(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'=')
}

/// How many body bytes a format takes after its prefix.
#[derive(Clone, Copy)]
enum Len {
    /// At least this many, and every one that follows.
    AtLeast(usize),
    /// Exactly this many.
    Exactly(usize),
}

/// A second part after a separator: `AKIA...:secret` (optional), `SG.x.y` (required).
#[derive(Clone, Copy)]
struct Then {
    sep: u8,
    body: fn(u8) -> bool,
    len: Len,
    required: bool,
}

/// A credential format: one of `prefixes`, then a body, then maybe a second part.
struct Format {
    prefixes: &'static [&'static str],
    body: fn(u8) -> bool,
    len: Len,
    then: Option<Then>,
}

const fn f(prefixes: &'static [&'static str], body: fn(u8) -> bool, len: Len) -> Format {
    Format {
        prefixes,
        body,
        len,
        then: None,
    }
}

/// Well-known formats, in the order they are tried (a more specific prefix first).
const FORMATS: [Format; FORMAT_COUNT] = [
    f(&["sk-"], alnum_us_dash, Len::AtLeast(20)),
    f(
        &["sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"],
        alnum_star,
        Len::AtLeast(10),
    ),
    f(&["sk_"], alnum, Len::AtLeast(32)),
    f(&["whsec_"], alnum, Len::AtLeast(20)),
    f(&["hf_"], alnum, Len::AtLeast(30)),
    f(&["api_org_"], alnum, Len::AtLeast(20)),
    f(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_"], alnum, Len::AtLeast(30)),
    f(&["github_pat_"], alnum_us, Len::AtLeast(30)),
    f(&["glpat-"], alnum_us_dash, Len::AtLeast(20)),
    f(
        &["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xapp-"],
        alnum_dash,
        Len::AtLeast(10),
    ),
    Format {
        prefixes: &["AKIA", "ASIA"],
        body: upper_digit,
        len: Len::Exactly(16),
        then: Some(Then {
            sep: b':',
            body: b64,
            len: Len::Exactly(40),
            required: false,
        }),
    },
    f(
        &["AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "ABIA", "ACCA", "APKA"],
        upper_digit,
        Len::Exactly(16),
    ),
    f(&["AIza"], alnum_us_dash, Len::AtLeast(30)),
    f(&["ya29."], alnum_us_dash, Len::AtLeast(20)),
    f(&["1//0"], alnum_us_dash, Len::AtLeast(20)),
    f(&["gsk_"], alnum, Len::AtLeast(20)),
    f(&["xai-"], alnum, Len::AtLeast(20)),
    f(&["pplx-"], alnum, Len::AtLeast(20)),
    f(&["r8_"], alnum, Len::AtLeast(20)),
    f(&["nvapi-"], alnum_us_dash, Len::AtLeast(20)),
    f(&["npm_"], alnum, Len::AtLeast(30)),
    f(&["pypi-"], alnum_us_dash, Len::AtLeast(40)),
    f(&["dop_v1_"], lower_hex, Len::AtLeast(40)),
    Format {
        prefixes: &["SG."],
        body: alnum_us_dash,
        len: Len::AtLeast(16),
        then: Some(Then {
            sep: b'.',
            body: alnum_us_dash,
            len: Len::AtLeast(16),
            required: true,
        }),
    },
    f(&["shpat_", "shpss_", "shpca_", "shppa_"], hex, Len::Exactly(32)),
    f(&["lin_api_"], alnum, Len::AtLeast(30)),
    f(&["dapi"], lower_hex, Len::Exactly(32)),
    f(&["sntrys_"], sentry, Len::AtLeast(30)),
    f(&["fw_"], alnum, Len::AtLeast(20)),
    f(&["tgp_v1_"], alnum_us_dash, Len::AtLeast(30)),
    f(&["key-"], lower_hex, Len::Exactly(32)),
    f(&["hvs."], alnum_us_dash, Len::AtLeast(20)),
    f(&["dckr_pat_"], alnum_us_dash, Len::AtLeast(20)),
    f(&["tvly-"], alnum_dash, Len::AtLeast(20)),
    f(&["jina_"], alnum, Len::AtLeast(20)),
    f(&["csk-"], alnum, Len::AtLeast(20)),
    f(&["ATATT"], atlassian, Len::AtLeast(20)),
    f(&["glsa_"], alnum_us, Len::AtLeast(20)),
    f(&["LTAI"], alnum, Len::AtLeast(12)),
    f(&["AC", "SK"], lower_hex, Len::Exactly(32)),
    f(&["IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdz"], b64, Len::AtLeast(0)),
];
const FORMAT_COUNT: usize = 41;

/// For each byte, the formats (bits of [`FORMATS`]) one of whose prefixes starts with it.
static BY_FIRST: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut k = 0;
    while k < FORMAT_COUNT {
        let mut p = 0;
        while p < FORMATS[k].prefixes.len() {
            t[FORMATS[k].prefixes[p].as_bytes()[0] as usize] |= 1 << k;
            p += 1;
        }
        k += 1;
    }
    t
};

/// The shortest well-known token: the shortest prefix with the shortest body of its format.
pub(crate) const KNOWN_SHORTEST: usize = {
    let mut min = usize::MAX;
    let mut k = 0;
    while k < FORMAT_COUNT {
        let body = match FORMATS[k].len {
            Len::AtLeast(n) | Len::Exactly(n) => n,
        };
        let mut p = 0;
        while p < FORMATS[k].prefixes.len() {
            if FORMATS[k].prefixes[p].len() + body < min {
                min = FORMATS[k].prefixes[p].len() + body;
            }
            p += 1;
        }
        k += 1;
    }
    min
};

/// The bytes that follow the first byte of a well-known format (every prefix is 2+ bytes long):
/// the engine does not try the formats at a word start followed by anything else.
pub(crate) const SECOND_BYTES: ByteSet = {
    let mut set = ByteSet::of(b"");
    let mut k = 0;
    while k < FORMAT_COUNT {
        let mut p = 0;
        while p < FORMATS[k].prefixes.len() {
            let prefix = FORMATS[k].prefixes[p].as_bytes();
            assert!(prefix.len() >= 2, "a format prefix is at least two bytes long");
            set = set.or(ByteSet::of(prefix.split_at(2).0.split_at(1).1));
            p += 1;
        }
        k += 1;
    }
    set
};

/// The bytes a well-known format starts with.
pub(crate) const FIRST_BYTES: ByteSet = {
    let mut set = ByteSet::of(b"");
    let mut k = 0;
    while k < FORMAT_COUNT {
        let mut p = 0;
        while p < FORMATS[k].prefixes.len() {
            set = set.or(ByteSet::of(FORMATS[k].prefixes[p].as_bytes().split_at(1).0));
            p += 1;
        }
        k += 1;
    }
    set
};

fn has_prefix(b: &[u8], i: usize, prefix: &[u8]) -> bool {
    b.len() - i >= prefix.len() && prefix.iter().zip(&b[i..]).all(|(p, c)| p == c)
}

/// End of a body of `len` bytes accepted by `body` at `b[i..]`.
fn body_end(b: &[u8], i: usize, body: fn(u8) -> bool, len: Len) -> Option<usize> {
    match len {
        Len::Exactly(n) => (b.get(i..i + n)?.iter().all(|&c| body(c))).then_some(i + n),
        Len::AtLeast(n) => {
            let run = b[i.min(b.len())..].iter().take_while(|&&c| body(c)).count();
            (run >= n).then_some(i + run)
        }
    }
}

/// End of a well-known credential starting at `b[i]`, if one does.
fn format_end(b: &[u8], i: usize) -> Option<usize> {
    let mut candidates = BY_FIRST[usize::from(*b.get(i)?)];
    while candidates != 0 {
        let fmt = &FORMATS[candidates.trailing_zeros() as usize];
        candidates &= candidates - 1;
        let Some(prefix) = fmt.prefixes.iter().find(|p| has_prefix(b, i, p.as_bytes())) else {
            continue;
        };
        let Some(end) = body_end(b, i + prefix.len(), fmt.body, fmt.len) else {
            continue;
        };
        let Some(then) = fmt.then else { return Some(end) };
        let second = (b.get(end) == Some(&then.sep)).then(|| body_end(b, end + 1, then.body, then.len));
        match second.flatten() {
            Some(e) => return Some(e),
            None if then.required => {}
            None => return Some(end),
        }
    }
    None
}

/// `sk-...`, `hf_...`, `AKIA...`, `xoxb-...`: a well-known credential format at the start of a word.
pub(crate) fn known(cx: &Cx<'_>, i: usize) -> Found {
    if word_before(cx.b, i) {
        return Found::Miss;
    }
    match format_end(cx.b, i) {
        Some(end) => Hit::mark(i, end, SECRET),
        None => Found::Miss,
    }
}

const JWT_SEGMENT_MIN: usize = 10;
/// The shortest JWT: `eyJ`, a header and a payload segment, each followed by a `.`.
pub(crate) const JWT_SHORTEST: usize = 3 + JWT_SEGMENT_MIN + 1 + JWT_SEGMENT_MIN + 1;

/// `eyJ<header>.<payload>.<signature>`: a JSON Web Token.
pub(crate) fn jwt(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if !has_prefix(b, i, b"eyJ") || word_before(b, i) {
        return Found::Miss;
    }
    let seg = |from: usize| from + b[from.min(b.len())..].iter().take_while(|&&c| alnum_us_dash(c)).count();
    let head = seg(i + 3);
    if head - (i + 3) < JWT_SEGMENT_MIN || b.get(head) != Some(&b'.') {
        return Found::MissUntil(head);
    }
    let payload = seg(head + 1);
    if payload - (head + 1) < JWT_SEGMENT_MIN || b.get(payload) != Some(&b'.') {
        return Found::MissUntil(payload);
    }
    Hit::mark(i, seg(payload + 1), SECRET)
}

const GLUED_TAIL_MIN: usize = 16;
/// The shortest glued credential: a key byte, its `_`/`-`, and the shortest tail.
pub(crate) const GLUED_SHORTEST: usize = 2 + GLUED_TAIL_MIN;

/// `access_token_9b2f1c7d...`, `session-7f3a9c2b...`: a credential glued to the identifier that
/// names it: a word ending in a credential key, `_` or `-`, then 20+ hex digits or a random run.
pub(crate) fn glued(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if word_before(b, i) {
        return Found::Miss;
    }
    let end = i + b[i..].iter().take_while(|&&c| alnum_us_dash(c)).count();
    let Some(sep) = (i..end).rev().find(|&k| matches!(b[k], b'_' | b'-')) else {
        return Found::MissUntil(end);
    };
    let tail = &b[sep + 1..end];
    let hex_tail = tail.len() >= 20 && tail.iter().all(|&c| hex(c));
    let random_tail = tail.len() >= GLUED_TAIL_MIN && opaque_marker(&cx.text[sep + 1..end]).is_some();
    if sep > i && (hex_tail || random_tail) && super::lexicon::is_secret_key(&b[i..sep]) {
        Hit::mark_part(i, end, sep + 1, end, SECRET)
    } else {
        Found::MissUntil(end)
    }
}

/// Runs shorter than this are not opaque (identifiers and ids are shorter or look otherwise).
/// The shortest opaque run (also the shortest match of the rule).
pub(crate) const OPAQUE_MIN: usize = 24;

/// Any other random-looking run of 24+ base64 characters: an unknown key format, a signature,
/// a media payload (`<base64>` from 100 characters).
pub(crate) fn opaque(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i > cx.lo && is(b[i - 1], B64) {
        return Found::Miss;
    }
    let start = i;
    let run = start + b[start..].iter().take_while(|&&c| is(c, B64)).count();
    if run - start < OPAQUE_MIN || b[start..run].iter().all(|&c| c == b'/') {
        return Found::MissUntil(run);
    }
    let end = run + b[run..].iter().take(3).take_while(|&&c| c == b'=').count();
    match opaque_marker(&cx.text[start..end]) {
        Some(marker) => Hit::mark(start, end, marker),
        None => Found::MissUntil(end),
    }
}

/// Common English letter pairs, as a 26 x 26 bit table: words in identifiers are made of them,
/// random strings mostly are not.
static BIGRAMS: [u32; 26] = {
    const LIST: &[u8] = b"th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le \
ve co me de hi ri ro ic ne ea ra ce li ch ll be ma si om ur ca el ta la ns di fo ho pe ec pr no ct us ac ot il tr ly \
nc et ut ss so rs un lo wa ge ie wh ee wi em ad ol rt po we na ul ni ts mo ow pa im mi ai sh ir su id os iv ia am fi \
ci vi pl ig tu ev ld ry mp fe bl ab gh ty op wo sa ay ex ke fr oo av ag if ap gr od bo sp rd do uc bu ei ov by rm ep \
tt oc fa ef cu rn sc gi da yo cr cl du ga qu ue ff ba ey ls va um pp ua up lu go ht ru ug ds lt pi rc rr eg au ck ew \
mu br bi pt ak pu ui rg ib tl ny ki rk ys ob mm fu ph og ms ye ud mb ip ub oi rl gu dr hr cc tw ft wn nu af hu nn eo \
vo rv nf xp gn sm fl iz ok nl my gl aw sy oa yt";
    let mut t = [0u32; 26];
    let mut i = 0;
    while i + 1 < LIST.len() {
        if LIST[i] != b' ' && LIST[i + 1] != b' ' {
            t[(LIST[i] - b'a') as usize] |= 1 << (LIST[i + 1] - b'a');
            i += 2;
        } else {
            i += 1;
        }
    }
    t
};

fn common_pair(a: u8, b: u8) -> bool {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    a.is_ascii_lowercase() && b.is_ascii_lowercase() && BIGRAMS[usize::from(a - b'a')] >> (b - b'a') & 1 == 1
}

/// Whether word-like humps (`Conditional`, `omni`: a capital or nothing, then 2+ lowercase
/// letters (3+ without the capital) with a vowel, at least two thirds of whose letter pairs are
/// common) cover 55 % of `run`, as they do in identifiers and never in random strings. One
/// pass; a hump is scored when it ends.
fn is_wordy(run: &[u8]) -> bool {
    let (mut covered, mut len, mut lower, mut common, mut vowel, mut cap) =
        (0usize, 0usize, 0usize, 0usize, false, false);
    let mut prev = 0u8;
    let mut score = |len: usize, lower: usize, common: usize, vowel: bool, cap: bool| {
        if lower >= 2 + usize::from(!cap) && vowel && common * 3 >= (len - 1) * 2 {
            covered += len;
        }
    };
    for &c in run {
        match CLASS4[usize::from(c)] {
            1 if len > 0 => {
                len += 1;
                lower += 1;
                common += usize::from(common_pair(prev, c));
                vowel |= is_vowel(c);
            }
            1 => {
                (len, lower, common, vowel, cap) = (1, 1, 0, is_vowel(c), false);
            }
            class => {
                score(len, lower, common, vowel, cap);
                (len, lower, common, vowel, cap) = if class == 0 {
                    (1, 0, 0, is_vowel(c), true)
                } else {
                    (0, 0, 0, false, false)
                };
            }
        }
        prev = c;
    }
    score(len, lower, common, vowel, cap);
    covered * 100 >= run.len() * 55
}

fn is_vowel(c: u8) -> bool {
    matches!(c | 0x20, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// Character classes for [`opaque_marker`]: upper 0, lower 1, digit 2, other 3.
static CLASS4: [u8; 256] = {
    let mut t = [3u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_uppercase() {
            0
        } else if b.is_ascii_lowercase() {
            1
        } else if b.is_ascii_digit() {
            2
        } else {
            3
        };
        c += 1;
    }
    t
};

/// Whether a long run of token characters is random (a credential or a payload), and its marker.
///
/// Random means: upper and lower case and digits mixed, frequent class changes, a 16+ character
/// alphanumeric stretch, and not made of word-like humps (`MiniCPMO2_6ForConditionalGeneration`).
pub(crate) fn opaque_marker(run: &str) -> Option<&'static str> {
    // Per class (upper, lower, digit, other): a count; and class changes, longest alphanumeric stretch.
    let mut count = [0usize; 4];
    let (mut changes, mut stretch, mut best) = (0usize, 0usize, 0usize);
    let mut last = run.bytes().next().map_or(0, |c| CLASS4[usize::from(c)]);
    for c in run.bytes() {
        let class = CLASS4[usize::from(c)];
        count[usize::from(class)] += 1;
        stretch = if class == 3 { 0 } else { stretch + 1 };
        best = best.max(stretch);
        changes += usize::from(class != last);
        last = class;
    }
    let [upper, lower, digit, other] = count;
    let len = run.len();
    let mixed = upper >= 2 && lower >= 2 && (digit >= 1 || (len >= 40 && other >= 1));
    let random = changes * 10 >= len * 3 && best >= 16;
    // Identifiers are shorter than 100 characters; a longer run is measured as a payload.
    if !(mixed && random) || (len < 100 && is_wordy(run.as_bytes())) {
        return None;
    }
    Some(if len >= 100 { BASE64 } else { SECRET })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sanitize::chars::RUN;

    /// What the engine's shortest-run check relies on: a token of any format is made of token
    /// run characters, so it lies inside the run the engine measured.
    #[test]
    fn formats_are_token_runs() {
        for fmt in &FORMATS {
            for p in fmt.prefixes {
                assert!(p.bytes().all(|c| is(c, RUN)), "{p}");
            }
            let bodies = [Some(fmt.body), fmt.then.as_ref().map(|t| t.body)];
            for body in bodies.into_iter().flatten() {
                assert!(
                    (0..=255u8).filter(|&c| body(c)).all(|c| is(c, RUN)),
                    "{:?}",
                    fmt.prefixes
                );
            }
            if let Some(then) = &fmt.then {
                assert!(is(then.sep, RUN));
            }
        }
        for c in 0..=255u8 {
            assert!(!(alnum_us_dash(c) || is(c, B64)) || is(c, RUN), "{c}");
        }
        assert_eq!(KNOWN_SHORTEST, "FwoGZXIvYXdz".len());
    }

    #[test]
    fn formats() {
        let end = |s: &str| format_end(s.as_bytes(), 0);
        assert_eq!(end("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx x"), Some(32));
        assert_eq!(end("AKIAIOSFODNN7EXAMPLE!"), Some(20));
        assert_eq!(end("SG.abcdefghijklmnop.qrstuvwxyzABCDEFGH"), Some(38));
        assert_eq!(end("SG.abcdefghijklmnop"), None);
        assert_eq!(end("sk-short"), None);
        assert_eq!(end("key-0123456789abcdef0123456789abcdefXYZ"), Some(36));
    }

    #[test]
    fn identifiers_are_not_opaque() {
        for id in [
            "Qwen2AudioForConditionalGeneration",
            "Qwen2_5OmniForConditionalGeneration",
            "MiniCPMO2_6ForConditionalGeneration",
            "XLMRobertaForSequenceClassification",
            "Qwen2_5OmniToken2WavBigVGANModel",
            "a09a35458c702b33eeacc393d103063234e8bc28",
        ] {
            assert_eq!(opaque_marker(id), None, "{id}");
        }
        for secret in [
            "kSySyc6c4VNiDEidH8PDUMMYmRObrJZP5X8QmHPT",
            "TWq51o2t19pVwXlxeNnmEMb8DUMMYwYYdnJFZ9LF",
            "WpcCAg6gcANd4uJHDUMMYsqRTKtm87_ugP7h5TlhfkdDDWuo",
        ] {
            assert_eq!(opaque_marker(secret), Some(SECRET), "{secret}");
        }
    }
}
