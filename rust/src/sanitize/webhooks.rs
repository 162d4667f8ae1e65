//! Webhook URLs whose path is the credential (Slack, Discord, Telegram, Outlook), inside a URL
//! (`url`) or found from the `/` after the host outside one.

use super::chars::{ends_ci, starts_ci};
use super::markers::SECRET;
use super::rule::{Cx, Found, Hit};

/// Webhook hosts and the path prefix after which the rest of the URL is the credential.
const HOOKS: [(&str, &str); 5] = [
    ("hooks.slack.com", "/services/"),
    ("discord.com", "/api/webhooks/"),
    ("discordapp.com", "/api/webhooks/"),
    ("api.telegram.org", "/bot"),
    ("outlook.office.com", "/webhook/"),
];

/// Where the credential starts in a webhook URL's `path` on `host`, if it is one.
pub(crate) fn hook_secret(host: &str, path: &str) -> Option<usize> {
    let (_, prefix) = HOOKS.iter().find(|(h, _)| host.eq_ignore_ascii_case(h))?;
    let p = path.as_bytes();
    let first = *p.get(prefix.len())?;
    (starts_ci(p, 0, prefix.as_bytes()) && (first.is_ascii_alphanumeric() || matches!(first, b'_' | b':' | b'-')))
        .then_some(prefix.len())
}

/// `hooks.slack.com/services/T0/B0/XXX` outside a URL, found from the `/` after the host.
pub(crate) fn hook(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if !ends_ci(b, i, b".com") && !ends_ci(b, i, b".org") {
        return Found::Miss;
    }
    let Some((host, _)) = HOOKS.iter().find(|(h, _)| ends_ci(b, i, h.as_bytes())) else {
        return Found::Miss;
    };
    let start = i - host.len();
    let end = i + b[i..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'/' | b':' | b'-'))
        .count();
    match hook_secret(host, cx.slice(i, end)) {
        Some(at) if start >= cx.lo => Hit::mark_part(start, end, i + at, end, SECRET),
        _ => Found::Miss,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_paths() {
        assert_eq!(hook_secret("hooks.slack.com", "/services/T0/B0/x"), Some(10));
        assert_eq!(hook_secret("api.telegram.org", "/bot123:abc/send"), Some(4));
        assert_eq!(hook_secret("api.telegram.org", "/bots"), Some(4));
        assert_eq!(hook_secret("example.com", "/services/x"), None);
    }
}
