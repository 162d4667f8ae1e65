//! The parameter-name normaliser for `OmniErrorDetails.parameter`: one spelling for the
//! same request field, whatever layer reported it.
//!
//! `body.messages.0.content` / `('body', 'messages', 0, 'content')` / `body -> messages -> 0`
//! / ` messages[0].content ` all become `messages[0].content`.

use std::borrow::Cow;

/// Location prefixes that name where a field came from rather than the field.
const LOCATIONS: [&str; 6] = ["body", "query", "path", "header", "json", "form"];

fn is_plain(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'[' | b']'))
        && !s.starts_with('.')
        && !s.ends_with('.')
        && !s.contains("..")
        && !s
            .split('.')
            .any(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && !LOCATIONS
            .iter()
            .any(|l| s.starts_with(l) && s.as_bytes().get(l.len()) == Some(&b'.'))
}

/// Normalises a request parameter name for the record's `parameter` field.
#[must_use]
pub fn normalize_parameter(input: &str) -> Cow<'_, str> {
    if is_plain(input) {
        return Cow::Borrowed(input);
    }
    let parts: Vec<&str> = input
        .split(|c: char| matches!(c, '.' | '/' | ',' | '(' | ')' | '\'' | '"' | '>') || c.is_whitespace())
        .filter(|p| !p.is_empty() && *p != "-" && *p != "->")
        .collect();
    let mut out = String::with_capacity(input.len());
    let mut skip_location = true;
    for p in parts {
        if skip_location && LOCATIONS.contains(&p) {
            continue;
        }
        skip_location = false;
        let clean: String = p
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '[' | ']'))
            .collect();
        if clean.is_empty() {
            continue;
        }
        if clean.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(&clean);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&clean);
        }
    }
    if out == input {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert!(matches!(normalize_parameter("max_tokens"), Cow::Borrowed(_)));
        assert_eq!(normalize_parameter("messages[0].content"), "messages[0].content");
        assert_eq!(normalize_parameter("body.max_tokens"), "max_tokens");
        assert_eq!(
            normalize_parameter("('body', 'messages', 0, 'content')"),
            "messages[0].content"
        );
        assert_eq!(
            normalize_parameter("body -> messages -> 0 -> content"),
            "messages[0].content"
        );
        assert_eq!(normalize_parameter("  temperature "), "temperature");
        assert_eq!(
            normalize_parameter("messages.2.content.0.type"),
            "messages[2].content[0].type"
        );
    }
}
