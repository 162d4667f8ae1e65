//! URLs are kept (they help the client) with their credentials, webhook secrets, internal hosts
//! and any filesystem path smuggled into the path component removed.

use std::borrow::Cow;

use super::lexicon::is_root;
use super::markers::{PATH, SECRET};
use super::webhooks::hook_secret;

/// The rules that apply inside a URL.
pub(crate) type Inner = fn(&str) -> Cow<'_, str>;

/// Byte offset of the first `://` in `s` at or after `from`.
fn scheme_sep(s: &str, from: usize) -> Option<usize> {
    let b = s.as_bytes();
    memchr::memchr_iter(b':', b.get(from..)?)
        .map(|i| from + i)
        .find(|&i| b.get(i + 1..i + 3) == Some(b"//"))
}

/// Start of the scheme of a second URL inside `url` (after its own `://`), if any.
pub(crate) fn embedded_start(url: &str) -> Option<usize> {
    let first = scheme_sep(url, 0)? + 3;
    let second = scheme_sep(url, first)?;
    let b = url.as_bytes();
    let mut s = second;
    while s > first && second - s < 16 && (b[s - 1].is_ascii_alphanumeric() || matches!(b[s - 1], b'+' | b'.' | b'-')) {
        s -= 1;
    }
    // The scheme must start with a letter after a non-word byte, as the URL rule requires.
    while s < second && !b[s].is_ascii_alphabetic() {
        s += 1;
    }
    let boundary = s == 0 || !(b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_');
    (s < second && s > first && boundary).then_some(s)
}

/// Returns `url` with userinfo, secret query values, tokens and internal hosts replaced.
pub(crate) fn clean(url: &str, inner: Inner) -> Cow<'_, str> {
    let Some(sep) = scheme_sep(url, 0) else {
        return Cow::Borrowed(url);
    };
    let (scheme, rest) = (&url[..sep], &url[sep + 3..]);
    if scheme.eq_ignore_ascii_case("file") {
        return if rest.is_empty() || rest == PATH {
            Cow::Borrowed(url)
        } else {
            Cow::Owned(format!("{scheme}://{PATH}"))
        };
    }
    let auth_end = rest
        .bytes()
        .position(|c| matches!(c, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let (authority, tail) = (&rest[..auth_end], &rest[auth_end..]);
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(userinfo(&authority[..at], inner)), &authority[at + 1..]),
        None => (None, authority),
    };
    let host_name = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let (host_out, tail_out) = (inner(host), clean_tail(host_name, tail, inner));
    let unchanged = userinfo.as_ref().map_or(true, |u| matches!(u, Cow::Borrowed(_)))
        && matches!(host_out, Cow::Borrowed(_))
        && matches!(tail_out, Cow::Borrowed(_));
    if unchanged {
        return Cow::Borrowed(url);
    }
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..sep + 3]);
    if let Some(u) = userinfo {
        out.push_str(&u);
        out.push('@');
    }
    out.push_str(&host_out);
    out.push_str(&tail_out);
    Cow::Owned(out)
}

/// The user part cleaned, the password replaced; a bare token as user (`https://TOKEN@github.com`) replaced.
fn userinfo(userinfo: &str, inner: Inner) -> Cow<'_, str> {
    if let Some(colon) = userinfo.find(':') {
        let (user, password) = (inner(&userinfo[..colon]), &userinfo[colon + 1..]);
        if password.is_empty() || password == SECRET {
            return match user {
                Cow::Borrowed(_) => Cow::Borrowed(userinfo),
                Cow::Owned(u) => Cow::Owned(format!("{u}:{password}")),
            };
        }
        return Cow::Owned(format!("{user}:{SECRET}"));
    }
    if userinfo.len() >= 16 {
        return Cow::Owned(SECRET.to_owned());
    }
    inner(userinfo)
}

/// Path, query and fragment: a webhook's secret path is cut, a `//root/...` filesystem path is
/// cut, the rest goes through the rules that apply inside a URL.
fn clean_tail<'a>(host: &str, tail: &'a str, inner: Inner) -> Cow<'a, str> {
    let path_end = tail.bytes().position(|c| c == b'?' || c == b'#').unwrap_or(tail.len());
    let path = &tail[..path_end];
    if let Some(at) = hook_secret(host, path) {
        let body = path[at..]
            .bytes()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'/' | b':' | b'-'))
            .count();
        return Cow::Owned(format!("{}{SECRET}{}", &path[..at], inner(&tail[at + body..])));
    }
    if let Some(dbl) = path.as_bytes().windows(2).position(|w| w == b"//") {
        let first = path[dbl + 2..].split('/').next().unwrap_or_default();
        if is_root(first.as_bytes()) {
            return Cow::Owned(format!("{}/{PATH}{}", &path[..dbl], inner(&tail[path_end..])));
        }
    }
    inner(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(s: &str) -> Cow<'_, str> {
        Cow::Borrowed(s)
    }

    #[test]
    fn userinfo_and_paths() {
        assert_eq!(clean("redis://u:pw@h:1/0", same), "redis://u:<secret>@h:1/0");
        assert_eq!(clean("https://h//data1/x/y", same), "https://h/<path>");
        assert_eq!(clean("https://h//nvme0/x", same), "https://h/<path>");
        assert_eq!(clean("https://h//v1/x", same), "https://h//v1/x");
        assert_eq!(clean("https://tok_0123456789abcdef@h/x", same), "https://<secret>@h/x");
        assert_eq!(clean("redis://:pw@h", same), "redis://:<secret>@h");
        assert_eq!(clean("file:///etc/passwd", same), "file://<path>");
    }

    #[test]
    fn webhook_secrets() {
        assert_eq!(
            clean("https://api.telegram.org/bot123:ABCdef/sendMessage?x=1", same),
            "https://api.telegram.org/bot<secret>?x=1"
        );
        assert_eq!(
            clean("https://hooks.slack.com/services/T0/B0/xyz", same),
            "https://hooks.slack.com/services/<secret>"
        );
    }
}
