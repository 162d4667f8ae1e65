//! One left-to-right pass of the rule table over a text.
//!
//! Each byte selects, through one table lookup, the rules it can trigger; most bytes select
//! none, so clean text costs about a byte scan. Where several rules match at one trigger, the
//! match that starts first wins, then the rule listed first. A rule that has read ahead without
//! matching says how far (`MissUntil`), and is not tried again before that byte: with every
//! look-back and look-ahead bounded or skipped this way, the pass is linear in the text.

use std::borrow::Cow;

use super::chars::{class_in, B64, RUN, WORD};
use super::out::Out;
use super::rule::{Cx, Edit, Found, Hit};
use super::table::{
    Mask, Start, AFTER, ALL, AT, BEFORE, BYTE_MASKS, BY_BYTE, BY_START, FITS, FITS_LEN, IN_URL, MIN_RUN, RULES,
    RULE_COUNT,
};

/// Where a pass runs: on public text, or on the parts of a URL.
#[derive(Clone, Copy)]
pub(crate) enum Scope {
    Text,
    Url,
}

/// The rules of `scope`, run once over `text`.
pub(crate) fn apply(text: &str, scope: Scope) -> Cow<'_, str> {
    apply_from(text, scope, 0)
}

/// [`apply`], its dispatch starting at byte `from`: the same result where [`prefilter`] said
/// `Seen::Rule(from)`. Before `from`, `apply`'s dispatch visits only rules whose cheap condition
/// fails there (the prefilter saw it), and such a rule answers `Found::Miss`: no match, no
/// `MissUntil`, so at `from` the dispatch is in its initial state (no cursor moved, no rule
/// skipped), and `from` starts a token run or lies outside one, as a dispatch from 0 sees it.
pub(crate) fn apply_from(text: &str, scope: Scope, from: usize) -> Cow<'_, str> {
    let (rules, trigger) = match scope {
        Scope::Text => (ALL, TRIGGER),
        Scope::Url => (IN_URL, TRIGGER_IN_URL),
    };
    let b = text.as_bytes();
    let mut out = Out::new(text);
    let mut not_before = [0usize; RULE_COUNT];
    dispatch(b, from, rules, trigger, |i, mask, cursor| {
        let cx = Cx {
            text,
            b,
            lo: cursor,
            inner: url_parts,
        };
        match best_hit(&cx, i, mask, &mut not_before) {
            Some(hit) => {
                match hit.edit {
                    Edit::Keep => {}
                    Edit::Mark { from, to, marker } => out.replace(from, to, marker),
                    Edit::Text(s) => out.replace(hit.start, hit.end, &s),
                }
                Step::Jump(hit.end)
            }
            None => Step::On,
        }
    });
    out.finish()
}

/// What the prefilter saw in a text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// A rule may match, none before this byte (the start of a token run or a byte outside
    /// one): [`apply_from`] may start its dispatch there.
    Rule(usize),
    /// No rule can match; a traceback or PEM block may be there (a byte of their markers is).
    NoRuleButBlockBytes,
    /// Nothing any pass of the sanitizer would change.
    Nothing,
}

/// Whether a rule may match anywhere in public `text` (`Seen::Rule`), and if not, whether a
/// traceback or PEM block may: the prefilter that lets clean text leave at once. Anything but
/// `Seen::Rule` proves that [`apply`] returns `text` unchanged.
///
/// `apply` without a match never jumps, so it visits exactly the bytes where the rules' masks
/// hold, one byte at a time: the trigger bytes whose byte rules' conditions hold, and in each
/// token run of `MIN_RUN` bytes or more the starts where a run rule fits. This visits the same
/// bytes with the same masks in one tight pass (`dispatch_may_change` in the tests is the
/// reference), calling no rule: a rule whose row names a cheap necessary condition
/// ([`Rule::pre`](super::table::Rule)) is asked that, any other counts as a match.
pub(crate) fn prefilter(text: &str) -> Seen {
    let b = text.as_bytes();
    // Every kind of byte seen outside plain run bytes, and where the token run at `i` started.
    let (mut kinds, mut run_start) = (0, 0);
    let mut i = 0;
    loop {
        // Token run bytes that trigger no rule (most bytes of most messages): no block byte
        // among them, as `.` and `-` trigger rules.
        while i < b.len() && KIND[usize::from(b[i])] & (TRIGGER | IN_RUN) == IN_RUN {
            i += 1;
        }
        let Some(&c) = b.get(i) else { break };
        let kind = KIND[usize::from(c)];
        kinds |= kind;
        // A trigger inside a token run is seen before the run's own starts, and one after it
        // before the starts of the run it ends: the dispatch resumes where the run starts.
        if kind & TRIGGER != 0 && any_may_match(b, i, masked(b, i, BY_BYTE[usize::from(c)])) {
            return Seen::Rule(run_start);
        }
        if kind & IN_RUN == 0 {
            if i - run_start >= MIN_RUN && run_rules_may_match(b, run_start, i) {
                return Seen::Rule(run_start);
            }
            run_start = i + 1;
        }
        i += 1;
    }
    if b.len() - run_start >= MIN_RUN && run_rules_may_match(b, run_start, b.len()) {
        Seen::Rule(run_start)
    } else if kinds & BLOCK_BYTE != 0 {
        Seen::NoRuleButBlockBytes
    } else {
        Seen::Nothing
    }
}

/// Whether a run rule may start in the token run `b[start..end]` (at least `MIN_RUN` long).
#[inline(never)]
fn run_rules_may_match(b: &[u8], start: usize, end: usize) -> bool {
    (start..=end - MIN_RUN).any(|i| {
        let rules = starts_at(b, i, 0) & FITS[(end - i).min(FITS_LEN - 1)];
        any_may_match(b, i, masked(b, i, rules))
    })
}

/// The rules of `rules` whose conditions on the bytes around `i` hold.
#[inline]
fn masked(b: &[u8], i: usize, rules: Mask) -> Mask {
    let (before, after) = (
        if i == 0 { b' ' } else { b[i - 1] },
        b.get(i + 1).copied().unwrap_or(b' '),
    );
    rules & AT[usize::from(b[i])] & BEFORE[usize::from(before)] & AFTER[usize::from(after)]
}

/// Whether a rule of `mask` (rules whose byte conditions hold at `i`) may match at `i`: its cheap
/// necessary condition holds, where it has one.
#[inline]
fn any_may_match(b: &[u8], i: usize, mask: Mask) -> bool {
    if mask == 0 {
        return false;
    }
    rules_may_match(b, i, mask)
}

/// [`any_may_match`] on a mask that is not empty (not inlined: the prefilter's loop keeps its
/// registers).
#[inline(never)]
fn rules_may_match(b: &[u8], i: usize, mut mask: Mask) -> bool {
    while mask != 0 {
        let r = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        if RULES[r].pre.map_or(true, |pre| pre(b, i)) {
            return true;
        }
    }
    false
}

/// What the dispatch does after a visit.
enum Step {
    /// Go on with the next byte.
    On,
    /// A match ended here: the next may start at this byte, not before.
    Jump(usize),
    /// Stop the pass (the tests' reference prefilter).
    #[cfg(test)]
    Stop,
}

/// The one left-to-right dispatch: calls `visit(i, mask, cursor)` at every byte `i` where the
/// rules of `mask` (some of `rules`) may match by their conditions on the bytes around it;
/// `cursor` is where the last match ended.
#[inline]
fn dispatch(b: &[u8], from: usize, rules: Mask, trigger: u8, mut visit: impl FnMut(usize, Mask, usize) -> Step) {
    let mut cursor = 0;
    // The token run `i` is in ends at `run_end`; run rules may start before `long_end`, where at
    // least `MIN_RUN` of its bytes are left (every run rule needs as many).
    let (mut run_end, mut long_end) = (0, 0);
    let mut i = from;
    while i < b.len() {
        let kind = KIND[usize::from(b[i])];
        if kind & IN_RUN != 0 && i >= run_end {
            let (end, any_trigger) = measure_run(b, i, trigger);
            run_end = end;
            long_end = if end - i >= MIN_RUN { end + 1 - MIN_RUN } else { i };
            // A short word without a trigger byte (most words of prose) is skipped whole.
            if long_end == i && !any_trigger {
                i = end;
                continue;
            }
        }
        let run_rules = if i < long_end {
            starts_at(b, i, cursor) & rules & FITS[(run_end - i).min(FITS_LEN - 1)]
        } else {
            0
        };
        if kind & trigger == 0 && run_rules == 0 {
            i += 1;
            // Inside a run, past the bytes where run rules may start, only trigger bytes count.
            while i < run_end && i >= long_end && KIND[usize::from(b[i])] & trigger == 0 {
                i += 1;
            }
            continue;
        }
        let (before, after) = (
            if i == 0 { b' ' } else { b[i - 1] },
            b.get(i + 1).copied().unwrap_or(b' '),
        );
        // The rules' conditions on the bytes around `i`, for all rules at once.
        let mask = ((BY_BYTE[usize::from(b[i])] & rules) | run_rules)
            & AT[usize::from(b[i])]
            & BEFORE[usize::from(before)]
            & AFTER[usize::from(after)];
        if mask == 0 {
            i += 1;
            continue;
        }
        match visit(i, mask, cursor) {
            Step::On => i += 1,
            Step::Jump(end) => {
                cursor = end;
                i = end;
            }
            #[cfg(test)]
            Step::Stop => return,
        }
    }
}

/// End of the token run at `i`, and whether a byte in it triggers a rule.
fn measure_run(b: &[u8], i: usize, trigger: u8) -> (usize, bool) {
    let mut any = 0;
    let mut j = i;
    while j < b.len() {
        let k = KIND[usize::from(b[j])];
        if k & IN_RUN == 0 {
            break;
        }
        any |= k;
        j += 1;
    }
    (j, any & trigger != 0)
}

/// Per byte: which token-run classes it is in, whether it is a blank, and whether it triggers
/// a rule in each scope.
const IN_RUN: u8 = 1;
const IS_WORD: u8 = 1 << 1;
const IS_DIGIT: u8 = 1 << 2;
const IS_B64: u8 = 1 << 3;
const IS_BLANK: u8 = 1 << 4;
const TRIGGER: u8 = 1 << 5;
const TRIGGER_IN_URL: u8 = 1 << 6;
/// A byte without which no traceback marker (`File "`, `Traceback (`, `frame #`, `.py`) and no
/// PEM header (`-----BEGIN`) can occur.
const BLOCK_BYTE: u8 = 1 << 7;

static KIND: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let byte = c as u8;
        let flags = [
            (class_in(byte, RUN), IN_RUN),
            (class_in(byte, WORD), IS_WORD),
            (byte.is_ascii_digit(), IS_DIGIT),
            (class_in(byte, B64), IS_B64),
            (byte == b' ' || byte == b'\t', IS_BLANK),
            (BYTE_MASKS[c] & ALL != 0, TRIGGER),
            (BYTE_MASKS[c] & IN_URL != 0, TRIGGER_IN_URL),
            (matches!(byte, b'"' | b'(' | b'#' | b'.' | b'-'), BLOCK_BYTE),
        ];
        let mut k = 0;
        while k < flags.len() {
            if flags[k].0 {
                t[c] |= flags[k].1;
            }
            k += 1;
        }
        c += 1;
    }
    t
};

/// The run rules that may start at `b[i]` (inside a long token run), from what it and the byte
/// before it are; at the start of the text or right after a match, every kind of start counts.
fn starts_at(b: &[u8], i: usize, cursor: usize) -> Mask {
    let k = KIND[usize::from(b[i])];
    let p = if i == 0 || i == cursor {
        0
    } else {
        KIND[usize::from(b[i - 1])]
    };
    let mut mask = 0;
    if k & IS_WORD != 0 && p & IS_WORD == 0 {
        mask |= BY_START[Start::Word as usize];
        if k & IS_DIGIT != 0 {
            mask |= BY_START[Start::Number as usize];
        }
    }
    if k & IS_B64 != 0 && p & IS_B64 == 0 {
        mask |= BY_START[Start::Base64 as usize];
    }
    if p & IS_BLANK != 0 {
        mask |= BY_START[Start::AfterBlank as usize];
    }
    mask
}

/// The rules that apply inside a URL, as the URL rule's helper.
fn url_parts(s: &str) -> Cow<'_, str> {
    apply(s, Scope::Url)
}

/// The winning match among the rules of `mask` (whose byte conditions hold at `i`) at trigger
/// `i`: the earliest start, then the earliest rule.
fn best_hit(cx: &Cx<'_>, i: usize, mut mask: Mask, not_before: &mut [usize; RULE_COUNT]) -> Option<Hit> {
    let mut best: Option<Hit> = None;
    while mask != 0 {
        let r = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        if not_before[r] > i {
            continue;
        }
        match (RULES[r].find)(cx, i) {
            Found::Hit(hit) if hit.start >= cx.lo && hit.end > i => {
                if best.as_ref().map_or(true, |b| hit.start < b.start) {
                    best = Some(hit);
                }
            }
            Found::MissUntil(until) => not_before[r] = until,
            Found::Hit(_) | Found::Miss => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &str) -> String {
        apply(s, Scope::Text).into_owned()
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(
            apply("max_tokens must be <= 4096, got 10000", Scope::Text),
            Cow::Borrowed(_)
        ));
    }

    /// Whether [`prefilter`] sees a rule, on `apply`'s own dispatch: visiting what `apply` visits.
    fn dispatch_may_change(text: &str) -> bool {
        let b = text.as_bytes();
        let mut found = false;
        dispatch(b, 0, ALL, TRIGGER, |i, mask, _| {
            if any_may_match(b, i, mask) {
                found = true;
                return Step::Stop;
            }
            Step::On
        });
        found
    }

    #[test]
    fn prefilter_visits_what_the_dispatch_visits() {
        const BYTES: &[u8] = b" _-./:=@'\"\\,;()[]{}<>~%$#!?*+&|`aZ09";
        let pieces = [
            "password",
            "token",
            "api_key",
            "Bearer ",
            "sk-",
            "hf_",
            "eyJ",
            "0x7f",
            "10.1.2.3",
            "/home/",
            "~/",
            "C:\\",
            "http://",
            "https://u:p@",
            "File \"",
            "--api-key",
            "ip-10-0-0-1",
            ".internal",
            "@x.com",
            "::1",
            " ",
            ". ",
            ", ",
            "=",
            ": ",
            "'",
            "\"",
            "(",
            "é",
            "\u{3000}",
            "1234567890123",
            "max_tokens",
            "abcdefghijklmnopqrstuvwxyz0123",
            "a-b_c.d",
            "\n",
            "\t",
        ];
        let mut x: u64 = 28;
        let mut next = |n: usize| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as usize % n
        };
        for _ in 0..100_000 {
            let mut s = String::new();
            for _ in 0..=next(8) {
                if next(3) == 0 {
                    s.push(char::from(BYTES[next(BYTES.len())]));
                } else {
                    s.push_str(pieces[next(pieces.len())]);
                }
            }
            let seen = prefilter(&s);
            let may_change = matches!(seen, Seen::Rule(_));
            if let Seen::Rule(from) = seen {
                assert_eq!(apply_from(&s, Scope::Text, from), apply(&s, Scope::Text), "{s:?}");
            }
            // What `apply_from` relies on: where a rule's cheap condition fails, it records nothing.
            let cx = Cx {
                text: &s,
                b: s.as_bytes(),
                lo: 0,
                inner: url_parts,
            };
            for i in 0..s.len() {
                for rule in &RULES {
                    if rule.pre.is_some_and(|pre| !pre(s.as_bytes(), i)) {
                        assert_eq!((rule.find)(&cx, i), Found::Miss, "{} {i} {s:?}", rule.name);
                    }
                }
            }
            assert_eq!(may_change, dispatch_may_change(&s), "{s:?}");
            if !may_change {
                assert!(matches!(apply(&s, Scope::Text), Cow::Borrowed(_)), "{s:?}");
            }
        }
    }

    /// The prefilter's inner loop skips run bytes that trigger nothing, so no block byte may be one.
    #[test]
    fn block_bytes_are_never_skipped() {
        for c in 0..=255u8 {
            let kind = KIND[usize::from(c)];
            assert!(kind & BLOCK_BYTE == 0 || kind & (TRIGGER | IN_RUN) != IN_RUN, "{c}");
        }
    }

    #[test]
    fn clean_text_may_not_change() {
        assert_eq!(prefilter("max_tokens must be <= 4096, got 10000 ok"), Seen::Nothing);
        assert_eq!(prefilter(""), Seen::Nothing);
        assert_eq!(prefilter("The model does not exist."), Seen::NoRuleButBlockBytes);
        for s in [
            "password hunter2x",
            "api_key=abc123",
            "connect 10.1.2.3:80",
            "see /home/alice/x.py",
        ] {
            assert!(matches!(prefilter(s), Seen::Rule(_)), "{s}");
        }
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
    fn escaped_frame_inside_a_json_string() {
        let s = r#"{"error": "Traceback (most recent call last):\n  File \"/opt/x/omni_stage.py\", line 201, in _load\n    snapshot_download(repo, token=\"abc\")\nGatedRepoError: 403"}"#;
        let out = run(s);
        assert!(!out.contains("snapshot_download"), "{out}");
        assert!(out.contains("GatedRepoError: 403"), "{out}");
    }
}
