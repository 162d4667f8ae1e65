//! The public-text sanitizer: removes what must never reach a client from error messages
//! (paths, tracebacks, addresses, credentials, media, tensors, personal and infrastructure data).
//!
//! Pure Rust (no pyo3). Every rule is a finite automaton, so the cost is linear in the input.

mod markers;
mod media;
mod param;
mod pem;
mod prefilter;
mod replace;
mod rules;
mod traceback;
mod truncate;
mod url;

use std::borrow::Cow;

pub use markers::{ADDR, BASE64, BYTES, DATA, EMAIL, HOST, IP, PATH, PRIVATE_KEY, SECRET, TENSOR, TRACEBACK};
pub use param::normalize_parameter;
pub use truncate::{truncate, TRUNCATION_MARKER};

/// Passes are repeated until nothing changes (at most 8), so `sanitize(sanitize(x)) == sanitize(x)` even
/// where removing one span exposes another; in practice the second pass finds nothing.
const MAX_PASSES: usize = 8;

/// Returns `input` with sensitive spans replaced, at most `max_len` bytes long.
/// Borrowed when nothing changed, so the common clean case allocates nothing.
#[must_use]
pub fn sanitize(input: &str, max_len: usize) -> Cow<'_, str> {
    let mut cur: Cow<'_, str> = Cow::Borrowed(input);
    for _ in 0..MAX_PASSES {
        let next = match one_pass(&cur, max_len) {
            Cow::Borrowed(_) => None,
            Cow::Owned(s) => Some(s),
        };
        match next {
            Some(s) => cur = Cow::Owned(s),
            None => break,
        }
    }
    cur
}

/// The clean gate; else tracebacks, private keys, media payloads, every rule, the length bound.
fn one_pass(text: &str, max_len: usize) -> Cow<'_, str> {
    if prefilter::is_clean(text) {
        return truncate(text, max_len);
    }
    let t = traceback::strip(text);
    let p = pem::strip(&t);
    let d = media::strip(&p);
    let r = replace::apply(&d, rules::full());
    let out = truncate(&r, max_len);
    let changed = matches!(out, Cow::Owned(_))
        || matches!(r, Cow::Owned(_))
        || matches!(d, Cow::Owned(_))
        || matches!(p, Cow::Owned(_))
        || matches!(t, Cow::Owned(_));
    if changed {
        Cow::Owned(out.into_owned())
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_is_borrowed() {
        assert!(matches!(
            sanitize("max_tokens must be <= 4096, got 10000", 4096),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn bound_holds() {
        let s = "x".repeat(10_000);
        assert!(sanitize(&s, 100).len() <= 100);
        assert!(sanitize(&s, 3).len() <= 3);
        assert_eq!(sanitize(&s, 0), "");
    }
}
