//! One pass of the rule alternation: decides, per match, what replaces it.

use std::borrow::Cow;

use regex::Captures;

use super::markers::{ADDR, BASE64, BYTES, DATA, EMAIL, HOST, IP, PATH, PRIVATE_KEY, SECRET, TENSOR};
use super::rules::{self, Rule, RuleSet};
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
        Out { src, buf: String::new(), last: 0, changed: false }
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

/// Runs every rule of `set` over `text` once.
pub(crate) fn apply<'a>(text: &'a str, set: &RuleSet) -> Cow<'a, str> {
    let mut out = Out::new(text);
    for caps in set.re.captures_iter(text) {
        let Some((rule, m)) = set.groups.iter().find_map(|&(r, g)| caps.get(g).map(|m| (r, m))) else {
            continue;
        };
        handle(&mut out, text, rule, m.start(), m.end(), &caps);
    }
    out.finish()
}

fn group_span(caps: &Captures<'_>, name: &str) -> Option<(usize, usize)> {
    caps.name(name).map(|m| (m.start(), m.end()))
}

fn prev_byte(text: &str, at: usize) -> Option<u8> {
    at.checked_sub(1).and_then(|i| text.as_bytes().get(i).copied())
}

fn handle(out: &mut Out<'_>, text: &str, rule: Rule, start: usize, end: usize, caps: &Captures<'_>) {
    let m = text.get(start..end).unwrap_or_default();
    match rule {
        Rule::Pem => out.replace(start, end, PRIVATE_KEY),
        Rule::Pydantic => replace_value(out, text, group_span(caps, "pyd_v")),
        Rule::DataUri => {
            if let Some((s, e)) = group_span(caps, "data_v") {
                out.replace(s, e, DATA);
            }
        }
        Rule::Bytes => out.replace(start, end, BYTES),
        Rule::Tensor => {
            if let Some((s, e)) = group_span(caps, "tensor_v") {
                if text.get(s..e).is_some_and(|t| t.contains(',')) {
                    out.replace(s, e, TENSOR);
                }
            }
        }
        Rule::NestedList => {
            if m.bytes().filter(|&b| b == b',').count() >= 3 {
                out.replace(start, end, TENSOR);
            }
        }
        Rule::Url => {
            let cleaned = url::sanitize_url(m);
            out.replace(start, end, &cleaned);
        }
        Rule::QuotedPath => {
            if m.len() >= 2 {
                out.replace(start + 1, end - 1, PATH);
            }
        }
        Rule::PosixPath | Rule::PosixFile | Rule::WinPath | Rule::UncPath | Rule::PkgPath | Rule::HfCache => {
            replace_path(out, m, start);
        }
        Rule::HomePath | Rule::DotPath | Rule::HiddenPath | Rule::RelFile => {
            // Relative forms only count at the start of a word ("v1.2/x" is not "./x").
            if !prev_byte(text, start).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_') {
                replace_path(out, m, start);
            }
        }
        Rule::Jwt | Rule::Token => out.replace(start, end, SECRET),
        Rule::Hook => {
            if let Some((s, e)) = group_span(caps, "hook_v") {
                out.replace(s, e, SECRET);
            }
        }
        Rule::Flag => replace_value(out, text, group_span(caps, "flag_v")),
        Rule::KeyValue => replace_value(out, text, group_span(caps, "kv_v")),
        Rule::AuthScheme => {
            if let Some((s, e)) = group_span(caps, "auth_v") {
                let min = if m.as_bytes().first().is_some_and(|b| b.eq_ignore_ascii_case(&b't')) { 12 } else { 8 };
                if e - s >= min {
                    out.replace(s, e, SECRET);
                }
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
}

/// Replaces a path, keeping trailing sentence punctuation outside the marker.
fn replace_path(out: &mut Out<'_>, m: &str, start: usize) {
    let trimmed = m.trim_end_matches(['.', ',']);
    if trimmed.len() > 1 {
        out.replace(start, start + trimmed.len(), PATH);
    }
}

/// Values that say nothing secret and help the reader (`api_key=None`).
fn is_placeholder(v: &str) -> bool {
    let t = v.trim();
    t.is_empty()
        || (t.starts_with('<') && t.ends_with('>'))
        || t.bytes().all(|b| b == b'*' || b == b'x' || b == b'X' || b == b'.')
        || matches!(
            t.to_ascii_lowercase().as_str(),
            "none" | "null" | "nil" | "true" | "false" | "undefined" | "required" | "missing" | "redacted" | "[redacted]"
        )
}

/// Replaces the credential inside a value span, keeping quotes, a `b` prefix and an auth scheme.
fn replace_value(out: &mut Out<'_>, text: &str, span: Option<(usize, usize)>) {
    let Some((mut s, mut e)) = span else { return };
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
        if ["bearer", "basic", "token", "digest", "bot", "apikey"].iter().any(|w| word.eq_ignore_ascii_case(w)) {
            let rest = inner[sp..].trim_start();
            s += inner.len() - rest.len();
            inner = rest;
        }
    }
    if is_placeholder(inner) || inner.bytes().all(|b| b.is_ascii_digit()) && inner.len() <= 6 {
        return;
    }
    out.replace(s, e, SECRET);
}

/// Internal, documentation, shared and link-local IPv4 addresses; any address with a port.
fn ipv4_is_sensitive(text: &str, start: usize, end: usize) -> bool {
    let b = text.as_bytes();
    // Part of a longer dotted number (a version such as 1.2.3.4.5) is not an address.
    if prev_byte(text, start) == Some(b'.') || (b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit)) {
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
fn opaque_marker(run: &str) -> Option<&'static str> {
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
        assert!(matches!(apply("max_tokens must be <= 4096, got 10000", rules::full()), Cow::Borrowed(_)));
    }

    #[test]
    fn key_values() {
        assert_eq!(run("password=hunter2x sslmode=require"), "password=<secret> sslmode=require");
        assert_eq!(run("{'passwd': 'abc!def'}"), "{'passwd': '<secret>'}");
        assert_eq!(run(r#"{"Authorization": "Bearer abcdefgh12345"}"#), r#"{"Authorization": "Bearer <secret>"}"#);
        assert_eq!(run("api_key=None"), "api_key=None");
        assert_eq!(run("Unknown key 'hf_token' in request body"), "Unknown key 'hf_token' in request body");
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
