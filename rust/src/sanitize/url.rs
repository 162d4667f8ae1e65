//! URLs are kept (they help the client) with their credentials, internal hosts and any
//! filesystem path smuggled into the path component removed.

use std::borrow::Cow;

use super::markers::{PATH, SECRET};
use super::replace::apply;
use super::rules::{is_root, url_inner};

/// Start of the scheme of a second URL inside `url` (after its own `://`), if any.
pub(crate) fn embedded_start(url: &str) -> Option<usize> {
    let first = url.find("://")? + 3;
    let second = first + url[first..].find("://")?;
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
pub(crate) fn sanitize_url(url: &str) -> Cow<'_, str> {
    let Some(sep) = url.find("://") else {
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
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = (&rest[..auth_end], &rest[auth_end..]);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    out.push_str("://");
    let host = match authority.rfind('@') {
        Some(at) => {
            push_userinfo(&mut out, &authority[..at]);
            out.push('@');
            &authority[at + 1..]
        }
        None => authority,
    };
    out.push_str(&apply(host, url_inner()));
    push_tail(&mut out, tail);
    if out == url {
        Cow::Borrowed(url)
    } else {
        Cow::Owned(out)
    }
}

fn push_userinfo(out: &mut String, userinfo: &str) {
    if let Some(colon) = userinfo.find(':') {
        out.push_str(&apply(&userinfo[..colon], url_inner()));
        out.push(':');
        if !userinfo[colon + 1..].is_empty() {
            out.push_str(SECRET);
        }
    } else if userinfo.len() >= 16 || userinfo == SECRET {
        // A bare token as user (`https://TOKEN@github.com`).
        out.push_str(SECRET);
    } else {
        out.push_str(&apply(userinfo, url_inner()));
    }
}

/// Path, query and fragment: a `//root/...` filesystem path is cut, the rest goes through the
/// credential rules (secret query parameters, tokens, e-mails, internal hosts).
fn push_tail(out: &mut String, tail: &str) {
    let path_end = tail.find(['?', '#']).unwrap_or(tail.len());
    let (path, query) = (&tail[..path_end], &tail[path_end..]);
    let mut path_out: Cow<'_, str> = Cow::Borrowed(path);
    if let Some(dbl) = path.find("//") {
        let after = &path[dbl + 2..];
        let first = after.split('/').next().unwrap_or_default();
        if is_root(first) {
            path_out = Cow::Owned(format!("{}/{PATH}", &path[..dbl]));
        }
    }
    out.push_str(&apply(&path_out, url_inner()));
    out.push_str(&apply(query, url_inner()));
}
