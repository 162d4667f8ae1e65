//! One pass of the rule alternation: decides, per match, what replaces it.

use std::borrow::Cow;

use regex_automata::{Anchored, Input};

use super::markers::{ADDR, BASE64, BYTES, DATA, EMAIL, HOST, IP, PATH, SECRET, TENSOR, TRACEBACK};
#[cfg(test)]
use super::rules;
use super::rules::{Rule, RuleSet};
use super::url;

/// Output that stays borrowed until the first real change.
pub(crate) struct Out<'a> {
    src: &'a str,
    buf: String,
    last: usize,
    changed: bool,
}

impl<'a> Out<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Out {
            src,
            buf: String::new(),
            last: 0,
            changed: false,
        }
    }

    /// Replaces `src[start..end]` with `with`; a no-op when they are equal.
    pub(crate) fn replace(&mut self, start: usize, end: usize, with: &str) {
        if start < self.last || end < start || self.src.get(start..end) == Some(with) {
            return;
        }
        if !self.changed {
            self.buf.reserve(self.src.len());
            self.changed = true;
        }
        self.buf.push_str(self.src.get(self.last..start).unwrap_or_default());
        self.buf.push_str(with);
        self.last = end;
    }

    pub(crate) fn finish(mut self) -> Cow<'a, str> {
        if !self.changed {
            return Cow::Borrowed(self.src);
        }
        self.buf.push_str(self.src.get(self.last..).unwrap_or_default());
        Cow::Owned(self.buf)
    }
}

/// Whether `rule` can start with byte `b` (`prev` is the byte before): a cheap filter in front of
/// the anchored per-rule searches.
fn may_start(rule: Rule, b: u8, prev: Option<u8>) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    match rule {
        Rule::Pydantic => prev.is_none() || prev == Some(b'\n'),
        Rule::EscapedFrame => b == b'F',
        Rule::DataUri => matches!(b, b'd' | b'D'),
        Rule::Bytes => b == b'b',
        Rule::Tensor => matches!(b, b't' | b'a'),
        Rule::Url | Rule::WinPath => b.is_ascii_alphabetic(),
        Rule::QuotedPath => matches!(b, b'\'' | b'"'),
        Rule::PosixPath | Rule::PosixFile => b == b'/',
        Rule::UncPath => b == b'\\',
        Rule::HomePath => b == b'~',
        Rule::DotPath | Rule::HiddenPath => b == b'.',
        Rule::PkgPath => matches!(b, b's' | b'd'),
        Rule::HfCache => b == b'm',
        Rule::Jwt => b == b'e',
        Rule::Flag => b == b'-',
        Rule::AuthScheme => matches!(b | 0x20, b'b' | b't'),
        Rule::Ipv4 => b.is_ascii_digit(),
        Rule::Ipv6 => matches!(b | 0x20, b'f'),
        Rule::Addr => b == b'0',
        Rule::KeyValue => word(b) || b == b'.' || b == b'-' || b >= 0x80,
        Rule::Hook => matches!(b | 0x20, b'h' | b'd' | b'a' | b'o'),
        Rule::RelFile | Rule::Token | Rule::Email | Rule::Host | Rule::Opaque => {
            word(b) || matches!(b, b'-' | b'.' | b'%' | b'+')
        }
    }
}

/// Runs every rule of `set` over `text` once.
pub(crate) fn apply<'a>(text: &'a str, set: &RuleSet) -> Cow<'a, str> {
    let mut out = Out::new(text);
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(m) = set.re.find_at(text, at) {
        let start = m.start();
        let (first, prev) = (bytes.get(start).copied().unwrap_or(0), prev_byte(text, start));
        let input = Input::new(text).range(start..).anchored(Anchored::Yes);
        let hit = set
            .rules
            .iter()
            .filter(|(rule, _)| may_start(*rule, first, prev))
            .find_map(|(rule, re)| re.search(&input).map(|rm| (*rule, rm.end())));
        let end = match hit {
            Some((rule, end)) if end > start => handle(&mut out, text, rule, start, end),
            _ => m.end(),
        };
        // An empty match cannot occur (every rule consumes), but never loop on one.
        at = if end > start { end } else { next_boundary(text, start) };
        if at > text.len() {
            break;
        }
    }
    out.finish()
}

fn next_boundary(text: &str, mut i: usize) -> usize {
    i += 1;
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn prev_byte(text: &str, at: usize) -> Option<u8> {
    at.checked_sub(1).and_then(|i| text.as_bytes().get(i).copied())
}

/// Start of the value in `key<sep>value` (after the separator and its spaces).
fn value_start(m: &str) -> Option<usize> {
    let i = m.find([':', '=', ',', '：', '＝'])?;
    let sep_len = m[i..].chars().next().map_or(1, char::len_utf8);
    let rest = &m[i + sep_len..];
    Some(i + sep_len + (rest.len() - rest.trim_start_matches([' ', '\t']).len()))
}

/// Applies `rule` to `text[start..end]`; returns where the search resumes (normally `end`).
fn handle(out: &mut Out<'_>, text: &str, rule: Rule, start: usize, end: usize) -> usize {
    let m = text.get(start..end).unwrap_or_default();
    match rule {
        Rule::Pydantic => {
            if let Some(i) = m.rfind("input_value=") {
                replace_value(out, text, start + i + "input_value=".len(), end);
            }
        }
        Rule::DataUri => {
            if let Some(i) = m.find(',') {
                out.replace(start + i + 1, end, DATA);
            }
        }
        Rule::Bytes => out.replace(start, end, BYTES),
        Rule::EscapedFrame => out.replace(start, end, TRACEBACK),
        Rule::Tensor => {
            if let Some(i) = m.find('(') {
                if m[i..].contains(',') {
                    out.replace(start + i + 1, end, TENSOR);
                }
            }
        }
        Rule::Url => {
            // A URL embedded in this one ("...?next=https://u:p@h") is its own match: cut before
            // it and resume there, so every pass splits the text the same way.
            let cut = url::embedded_start(m).unwrap_or(m.len());
            let cleaned = url::sanitize_url(&m[..cut]);
            out.replace(start, start + cut, &cleaned);
            return start + cut;
        }
        Rule::QuotedPath => {
            if m.len() >= 2 {
                out.replace(start + 1, end - 1, PATH);
            }
        }
        Rule::PosixPath | Rule::PosixFile => {
            // "/v1/models/x" is a route: a path starts where no word or route segment ends.
            if !prev_byte(text, start)
                .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'%'))
            {
                replace_path(out, m, start);
            }
        }
        Rule::WinPath | Rule::UncPath | Rule::PkgPath | Rule::HfCache => replace_path(out, m, start),
        Rule::HomePath | Rule::DotPath | Rule::HiddenPath | Rule::RelFile => {
            // Relative forms only count at the start of a word ("v1.2/x" is not "./x").
            if !prev_byte(text, start).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_') {
                replace_path(out, m, start);
            }
        }
        Rule::Jwt | Rule::Token => out.replace(start, end, SECRET),
        Rule::Hook => {
            let lower = m.to_ascii_lowercase();
            let cut = ["/services/", "/webhooks/", "/bot", "/webhook/"]
                .iter()
                .find_map(|p| lower.find(p).map(|i| i + p.len()));
            if let Some(i) = cut {
                out.replace(start + i, end, SECRET);
            }
        }
        Rule::Flag => {
            let key_end = m[2..].find(['=', ' ', '\t']).map_or(m.len(), |i| i + 2);
            let rest = &m[key_end..];
            let v = key_end + (rest.len() - rest.trim_start_matches(['=', ' ', '\t']).len());
            replace_value(out, text, start + v, end);
        }
        Rule::KeyValue => {
            if let Some(v) = value_start(m) {
                replace_value(out, text, start + v, end);
            }
        }
        Rule::AuthScheme => {
            let v = m
                .find([' ', '\t'])
                .map_or(m.len(), |i| i + m[i..].len() - m[i..].trim_start().len());
            // 15 characters, like the clean gate's token-run check, so both agree. A shorter
            // value ("token 10.0.0.1:80") is left to the other rules.
            // It must also look random, so "token Qwen/Qwen2.5-Omni-7B" keeps its model id.
            if end - (start + v) >= 15 && opaque_marker(&m[v..]).is_some() {
                out.replace(start + v, end, SECRET);
            } else {
                return start + v;
            }
        }
        Rule::Email => out.replace(start, end, EMAIL),
        Rule::Host => {
            let next = text.as_bytes().get(end).copied();
            let after = text.as_bytes().get(end + 1).copied();
            let continues = next == Some(b'.') && after.is_some_and(|b| b.is_ascii_alphanumeric());
            if !continues && next != Some(b'(') && next != Some(b'_') {
                out.replace(start, end, HOST);
            }
        }
        Rule::Ipv4 => {
            if ipv4_is_sensitive(text, start, end) {
                out.replace(start, end, IP);
            }
        }
        Rule::Ipv6 => out.replace(start, end, IP),
        Rule::Addr => out.replace(start, end, ADDR),
        Rule::Opaque => {
            if let Some(marker) = opaque_marker(m) {
                out.replace(start, end, marker);
            }
        }
    }
    end
}

/// Replaces a path, keeping trailing sentence punctuation outside the marker.
fn replace_path(out: &mut Out<'_>, m: &str, start: usize) {
    let trimmed = m.trim_end_matches(['.', ',']);
    if trimmed.len() > 1 {
        out.replace(start, start + trimmed.len(), PATH);
    }
}

/// Authorization schemes kept in front of the credential they introduce.
const SCHEMES: [&str; 6] = ["bearer", "basic", "token", "digest", "bot", "apikey"];

/// Values that say nothing secret and help the reader (`api_key=None`).
fn is_placeholder(v: &str) -> bool {
    let t = v.trim();
    t.is_empty()
        || (t.starts_with('<') && t.ends_with('>'))
        || t.bytes().all(|b| b == b'*' || b == b'x' || b == b'X' || b == b'.')
        || matches!(
            t.to_ascii_lowercase().as_str(),
            "none"
                | "null"
                | "nil"
                | "true"
                | "false"
                | "undefined"
                | "required"
                | "missing"
                | "redacted"
                | "[redacted]"
        )
}

/// Replaces the credential in `text[s..e]`, keeping quotes, a `b` prefix and an auth scheme.
fn replace_value(out: &mut Out<'_>, text: &str, mut s: usize, mut e: usize) {
    let Some(v) = text.get(s..e) else { return };
    let mut inner = v;
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
    // Keep "Bearer " / "Basic " in front of the credential.
    if let Some(sp) = inner.find([' ', '\t']) {
        let word = &inner[..sp];
        if SCHEMES.iter().any(|w| word.eq_ignore_ascii_case(w)) {
            let rest = inner[sp..].trim_start();
            s += inner.len() - rest.len();
            inner = rest;
        }
    }
    let scheme_only = SCHEMES.iter().any(|w| inner.eq_ignore_ascii_case(w));
    if scheme_only || is_placeholder(inner) || (inner.bytes().all(|b| b.is_ascii_digit()) && inner.len() <= 6) {
        return;
    }
    out.replace(s, e, SECRET);
}

/// Internal, documentation, shared and link-local IPv4 addresses; any address with a port.
fn ipv4_is_sensitive(text: &str, start: usize, end: usize) -> bool {
    let b = text.as_bytes();
    // Part of a longer dotted number (a version such as 1.2.3.4.5) is not an address.
    if prev_byte(text, start) == Some(b'.')
        || (b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit))
    {
        return false;
    }
    let Some(ip) = text.get(start..end) else { return false };
    let mut o = [0u16; 4];
    for (slot, part) in o.iter_mut().zip(ip.split('.')) {
        match part.parse::<u16>() {
            Ok(n) if n <= 255 => *slot = n,
            _ => return false,
        }
    }
    if o == [0, 0, 0, 0] || o[0] == 127 || o[0] == 255 {
        return false;
    }
    let private = o[0] == 10
        || (o[0] == 172 && (16..32).contains(&o[1]))
        || (o[0] == 192 && o[1] == 168)
        || (o[0] == 169 && o[1] == 254)
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 192 && o[1] == 0 && (o[2] == 0 || o[2] == 2))
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
        || (o[0] == 198 && o[1] == 51 && o[2] == 100)
        || (o[0] == 203 && o[1] == 0 && o[2] == 113);
    let with_port = matches!(b.get(end), Some(b':' | b'<')) && b.get(end + 1).is_some_and(u8::is_ascii_digit);
    private || with_port
}

/// Decides whether a long run of token characters is random (a credential or a payload).
pub(crate) fn opaque_marker(run: &str) -> Option<&'static str> {
    let (mut upper, mut lower, mut digit, mut other, mut transitions, mut stretch, mut best) = (0, 0, 0, 0, 0, 0, 0);
    let mut last_class = 0u8;
    for b in run.bytes() {
        let class = match b {
            b'A'..=b'Z' => {
                upper += 1;
                1
            }
            b'a'..=b'z' => {
                lower += 1;
                2
            }
            b'0'..=b'9' => {
                digit += 1;
                3
            }
            _ => {
                other += 1;
                4
            }
        };
        if class == 4 {
            stretch = 0;
        } else {
            stretch += 1;
            best = best.max(stretch);
        }
        if last_class != 0 && class != last_class {
            transitions += 1;
        }
        last_class = class;
    }
    let len = run.len();
    let mixed = upper >= 2 && lower >= 2 && (digit >= 1 || (len >= 40 && other >= 1));
    let random = transitions * 10 >= len * 3 && best >= 16;
    if !(mixed && random) {
        return None;
    }
    Some(if len >= 100 { BASE64 } else { SECRET })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &str) -> String {
        apply(s, rules::full()).into_owned()
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(
            apply("max_tokens must be <= 4096, got 10000", rules::full()),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn key_values() {
        assert_eq!(
            run("password=hunter2x sslmode=require"),
            "password=<secret> sslmode=require"
        );
        assert_eq!(run("{'passwd': 'abc!def'}"), "{'passwd': '<secret>'}");
        assert_eq!(
            run(r#"{"Authorization": "Bearer abcdefgh12345"}"#),
            r#"{"Authorization": "Bearer <secret>"}"#
        );
        assert_eq!(run("api_key=None"), "api_key=None");
        assert_eq!(
            run("Unknown key 'hf_token' in request body"),
            "Unknown key 'hf_token' in request body"
        );
        assert_eq!(run("max_tokens=4096"), "max_tokens=4096");
    }

    #[test]
    fn ips() {
        assert_eq!(run("connect 10.1.2.3:80"), "connect <ip>:80");
        assert_eq!(run("cublas 12.4.5.8"), "cublas 12.4.5.8");
        assert_eq!(run("bind 0.0.0.0:8000"), "bind 0.0.0.0:8000");
        assert_eq!(run("[fd12:3456::5]:29500"), "[<ip>]:29500");
    }

    #[test]
    fn opaque_runs() {
        assert_eq!(opaque_marker("Qwen2AudioForConditionalGeneration"), None);
        assert_eq!(opaque_marker("a09a35458c702b33eeacc393d103063234e8bc28"), None);
        assert_eq!(opaque_marker("kSySyc6c4VNiDEidH8PDUMMYmRObrJZP5X8QmHPT"), Some(SECRET));
    }
}

#[cfg(test)]
mod escaped_frames {
    use super::*;
    use crate::sanitize::rules;

    #[test]
    fn frame_inside_a_json_string() {
        let s = r#"{"error": "Traceback (most recent call last):\n  File \"/opt/x/omni_stage.py\", line 201, in _load\n    snapshot_download(repo, token=\"abc\")\nGatedRepoError: 403"}"#;
        let out = apply(s, rules::full());
        assert!(!out.contains("snapshot_download"), "{out}");
        assert!(out.contains("GatedRepoError: 403"), "{out}");
    }
}
