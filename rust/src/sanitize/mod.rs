//! The public-text sanitizer: removes what must never reach a client from error messages
//! (paths, tracebacks, addresses, credentials, media, tensors, personal and infrastructure data).
//!
//! Pure Rust (no pyo3), no automata to build: a line pass for tracebacks, a scan for PEM blocks,
//! then one pass of the rule table (`table.rs`), each linear in the input. Clean text (most
//! messages) is recognised first by the table's dispatch alone, calling no rule.

mod chars;
mod dumps;
mod engine;
mod lexicon;
mod markers;
mod net;
mod out;
mod param;
mod paths;
mod pem;
mod rule;
mod secrets;
mod table;
mod tokens;
mod traceback;
mod truncate;
mod url;
mod webhooks;

use std::borrow::Cow;

pub use markers::{ADDR, BASE64, BYTES, DATA, EMAIL, HOST, IP, PATH, PRIVATE_KEY, SECRET, TENSOR, TRACEBACK};
pub use param::normalize_parameter;
pub use truncate::{truncate, TRUNCATION_MARKER};

/// The version of the rules: written into every frame whose text they sanitized, so a reader
/// with the same rules need not run them again. Bump it whenever what `sanitize` removes changes
/// (`tests/test_rule_sets.py` pins it to a digest of the rules' output on the test corpora).
pub const RULE_SET: u16 = 2;

/// Passes are repeated until nothing changes (at most 8), so `sanitize(sanitize(x)) == sanitize(x)` even
/// where removing one span exposes another; in practice the second pass finds nothing.
const MAX_PASSES: usize = 8;

/// Returns `input` with sensitive spans replaced, at most `max_len` bytes long.
/// Borrowed when nothing changed, so the common clean case allocates nothing.
#[must_use]
pub fn sanitize(input: &str, max_len: usize) -> Cow<'_, str> {
    // Most messages need nothing, and one pass of the rules' dispatch, no rule called, shows it:
    // the input itself comes back (through PyO3, the caller's own `str` object). Otherwise the
    // first pass's dispatch starts where the prefilter saw the first rule that may match.
    let from = if input.len() <= max_len {
        match engine::prefilter(input) {
            engine::Seen::Rule(from) => from,
            engine::Seen::NoRuleButBlockBytes if traceback::may_hold(input) || pem::may_hold(input) => input.len(),
            engine::Seen::NoRuleButBlockBytes | engine::Seen::Nothing => return Cow::Borrowed(input),
        }
    } else {
        0
    };
    let mut cur = match one_pass(input, max_len, from) {
        Cow::Borrowed(_) => return Cow::Borrowed(input),
        Cow::Owned(s) => s,
    };
    for _ in 1..MAX_PASSES {
        match one_pass(&cur, max_len, 0) {
            Cow::Borrowed(_) => break,
            Cow::Owned(s) => cur = s,
        }
    }
    Cow::Owned(cur)
}

/// A request parameter name as a record holds it: one spelling ([`normalize_parameter`]),
/// sanitized, at most `max_len` bytes.
#[must_use]
pub fn parameter(input: &str, max_len: usize) -> Cow<'_, str> {
    match normalize_parameter(input) {
        Cow::Borrowed(s) => sanitize(s, max_len),
        Cow::Owned(s) => Cow::Owned(sanitize(&s, max_len).into_owned()),
    }
}

/// Tracebacks, private keys, every rule, the length bound. Owned when a step changed the text.
/// The rules' dispatch starts at byte `from` of `text` where neither block step changed it.
fn one_pass(text: &str, max_len: usize, from: usize) -> Cow<'_, str> {
    let t = traceback::strip(text);
    let p = pem::strip(&t);
    let from = if matches!((&t, &p), (Cow::Borrowed(_), Cow::Borrowed(_))) {
        from
    } else {
        0
    };
    let r = engine::apply_from(&p, engine::Scope::Text, from);
    if let Cow::Owned(cut) = truncate(&r, max_len) {
        return Cow::Owned(cut);
    }
    // Within the bound: the last step that changed the text holds the result, moved (not copied).
    if let Cow::Owned(s) = r {
        return Cow::Owned(s);
    }
    if let Cow::Owned(s) = p {
        return Cow::Owned(s);
    }
    t
}

/// The rule names, in priority order (for documentation and tests).
#[must_use]
pub fn rule_names() -> Vec<&'static str> {
    table::RULES.iter().map(|r| r.name).collect()
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
