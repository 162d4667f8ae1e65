//! Network identity: URLs (cleaned, not removed), e-mail addresses, internal host names, internal
//! IPv4 addresses (and any with a port), internal IPv6 addresses.

use super::chars::{ends_ci, is, run_end, run_start, word_at, word_before, LABEL, LOCAL, SCHEME, URL};
use super::lexicon::internal_tld_at;
use super::markers::{EMAIL, HOST, IP};
use super::rule::{Cx, Edit, Found, Hit};
use super::url;

/// `scheme://...`, found from its `:`: kept, with the rules that apply inside a URL run over its
/// parts. A URL embedded in this one (`?next=https://u:p@h`) is its own match, so the match ends
/// before it.
pub(crate) fn url(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if b.get(i + 1..i + 3) != Some(b"//") {
        return Found::Miss;
    }
    let from = run_start(b, i, SCHEME, 16, cx.lo);
    let Some(start) = (from..i).find(|&s| b[s].is_ascii_alphabetic() && !word_before(b, s)) else {
        return Found::Miss;
    };
    let mut end = run_end(cx.text, i + 3, URL, usize::MAX);
    // A Windows domain user (`http://CORP\\jdoe:pw@proxy:8080`): the userinfo holds a backslash.
    if b.get(end) == Some(&b'\\') && !b[i + 3..end].contains(&b'/') {
        let longer = i + 3 + b[i + 3..].iter().take_while(|&&c| is(c, URL) || c == b'\\').count();
        let userinfo_end = b[end..longer].iter().position(|&c| c == b'@').map(|p| end + p);
        if userinfo_end.is_some_and(|at| !b[i + 3..at].contains(&b'/')) {
            end = longer;
        }
    }
    let m = cx.slice(start, end);
    let cut = url::embedded_start(m).unwrap_or(m.len());
    let edit = match url::clean(&m[..cut], cx.inner) {
        std::borrow::Cow::Borrowed(_) => Edit::Keep,
        std::borrow::Cow::Owned(s) => Edit::Text(s),
    };
    Found::Hit(Hit {
        start,
        end: start + cut,
        edit,
    })
}

/// `jane.doe@corp.example.com`, found from its `@`.
pub(crate) fn email(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let start = run_start(b, i, LOCAL, 64, cx.lo);
    if start == i {
        return Found::Miss;
    }
    // Up to ten labels; the last one taken is the top-level domain, letters only.
    let mut labels = [(0usize, 0usize); 10];
    let (mut n, mut j) = (0, i + 1);
    while n < labels.len() {
        let e = j + b[j.min(b.len())..]
            .iter()
            .take(64)
            .take_while(|&&c| is(c, LABEL))
            .count();
        if e == j || e - j > 63 {
            break;
        }
        labels[n] = (j, e);
        n += 1;
        if b.get(e) != Some(&b'.') {
            break;
        }
        j = e + 1;
    }
    for &(s, _) in labels[1..n.max(1)].iter().rev() {
        let letters = b[s..].iter().take_while(|c| c.is_ascii_alphabetic()).count();
        if letters >= 2 && !word_at(b, s + letters) {
            return Hit::mark(start, s + letters, EMAIL);
        }
    }
    Found::Miss
}

/// Whether what follows a host name at `end` says it is not one (`x.local.example.com`, a call
/// `svc(`, an identifier `x.local_y`, an e-mail's local part `a.local@`).
fn host_continues(b: &[u8], end: usize) -> bool {
    match b.get(end) {
        Some(b'.') => b.get(end + 1).is_some_and(u8::is_ascii_alphanumeric),
        Some(b'(' | b'_' | b'@') => true,
        _ => false,
    }
}

/// `worker-3.omni.svc.cluster.local`, `db.internal`: a host under an internal top-level domain,
/// found from the dot before that domain.
pub(crate) fn internal_host(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let Some(tld) = internal_tld_at(b, i + 1) else {
        return Found::Miss;
    };
    let end = i + 1 + tld;
    if word_at(b, end) || host_continues(b, end) {
        return Found::Miss;
    }
    let (mut start, mut dot) = (None, i);
    for _ in 0..9 {
        let from = run_start(b, dot, LABEL, 63, cx.lo);
        let s = from + b[from..dot].iter().take_while(|&&c| c == b'-').count();
        if s == dot || word_before(b, s) {
            break;
        }
        start = Some(s);
        if s != from || s == cx.lo || s == 0 || b[s - 1] != b'.' {
            break;
        }
        dot = s - 1;
    }
    match start {
        Some(s) => Hit::mark(s, end, HOST),
        None => Found::Miss,
    }
}

/// `ip-10-0-0-1.ec2.internal`: an EC2 host name, found from the `-` after `ip`.
pub(crate) fn ec2_host(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i < 2 || i - 2 < cx.lo || !ends_ci(b, i, b"ip") || word_before(b, i - 2) {
        return Found::Miss;
    }
    let mut j = i;
    for _ in 0..4 {
        if b.get(j) != Some(&b'-') {
            return Found::Miss;
        }
        let digits = b[j + 1..].iter().take(4).take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 3 {
            return Found::Miss;
        }
        j += 1 + digits;
    }
    while b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(|&c| is(c, LABEL)) {
        j = run_end(cx.text, j + 1, LABEL, usize::MAX);
    }
    while b[j - 1] == b'-' {
        j -= 1;
    }
    if word_at(b, j) || host_continues(b, j) {
        return Found::Miss;
    }
    Hit::mark(i - 2, j, HOST)
}

/// Internal, documentation, shared and link-local IPv4 addresses; any address with a port.
fn ipv4_is_sensitive(b: &[u8], text: &str, start: usize, end: usize) -> bool {
    // Part of a longer dotted number (a version such as 1.2.3.4.5) is not an address.
    if (start > 0 && b[start - 1] == b'.')
        || (b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit))
    {
        return false;
    }
    let mut o = [0u16; 4];
    for (slot, part) in o.iter_mut().zip(text[start..end].split('.')) {
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

/// `10.42.249.66`, `8.8.8.8:53`: found from its first dot. A version (`12.4.5.8`) is consumed
/// unchanged.
pub(crate) fn ipv4(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let lead = b[..i].iter().rev().take(4).take_while(|c| c.is_ascii_digit()).count();
    let start = i - lead;
    if lead == 0 || lead > 3 || start < cx.lo || word_before(b, start) {
        return Found::Miss;
    }
    let mut j = i;
    for _ in 0..3 {
        if b.get(j) != Some(&b'.') {
            return Found::Miss;
        }
        let digits = b[j + 1..].iter().take(4).take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 3 {
            return Found::Miss;
        }
        j += 1 + digits;
    }
    if word_at(b, j) {
        return Found::Miss;
    }
    if ipv4_is_sensitive(b, cx.text, start, j) {
        Hit::mark(start, j, IP)
    } else {
        Hit::keep(start, j)
    }
}

/// `fd12:3456::5`, `fe80::1%eth0`: unique-local and link-local IPv6, found from the first `:`.
pub(crate) fn ipv6(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i < 4 || i - 4 < cx.lo || word_before(b, i - 4) {
        return Found::Miss;
    }
    let g = [b[i - 4], b[i - 3], b[i - 2], b[i - 1]].map(|c| c.to_ascii_lowercase());
    let hex = |c: u8| c.is_ascii_hexdigit();
    let ula = g[0] == b'f' && matches!(g[1], b'c' | b'd') && hex(g[2]) && hex(g[3]);
    let link = g[0] == b'f' && g[1] == b'e' && matches!(g[2], b'8' | b'9' | b'a' | b'b') && hex(g[3]);
    if !(ula || link) {
        return Found::Miss;
    }
    let run = b[i + 1..].iter().take_while(|&&c| hex(c) || c == b':').count();
    let Some(last) = b[i + 1..i + 1 + run].iter().rposition(|&c| hex(c)) else {
        return Found::Miss;
    };
    let mut end = i + 2 + last;
    if b.get(end) == Some(&b'%') {
        let zone = b[end + 1..].iter().take_while(|c| c.is_ascii_alphanumeric()).count();
        if zone > 0 {
            end += 1 + zone;
        }
    }
    Hit::mark(i - 4, end, IP)
}
