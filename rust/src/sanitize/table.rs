//! The rule table: every rule once, in priority order, with what triggers it and where it applies.
//! The engine's dispatch (which rules to try at a byte) is computed from this table at compile
//! time, so a rule and its trigger cannot disagree.

use super::chars;
use super::dumps::{bytes_repr, data_uri, decimal_addr, escaped_frame, hex_addr, tensor, DECIMAL_ADDR_SHORTEST};
use super::lexicon::KEY_LAST_LETTERS;
use super::net::{ec2_host, email, internal_host, ipv4, ipv6, url};
use super::paths::{
    dot, env, hf_cache, hidden, home, packages, posix_file, posix_root, quoted, relative_file, unc, windows,
};
use super::rule::{ByteSet, Matcher, Pre};
use super::secrets::{
    bare_scheme, flag, key_value, key_value_pre, pydantic, spaced_key_value, spaced_key_value_pre, BEARER_SHORTEST,
};
use super::tokens::{glued, jwt, known, opaque, GLUED_SHORTEST, JWT_SHORTEST, KNOWN_SHORTEST, OPAQUE_MIN};
use super::tokens::{FIRST_BYTES, SECOND_BYTES};
use super::webhooks::hook;

/// What makes the engine try a rule at a byte.
#[derive(Clone, Copy)]
pub(crate) enum Trigger {
    /// One of these bytes (a separator, `/`, `@`...): the rule looks around it.
    Bytes(&'static [u8]),
    /// A start inside a run of token characters at least [`MIN_RUN`] long: the rule measures
    /// the run from there.
    Run(Start),
}

/// Where in a long token run a rule may start.
#[derive(Clone, Copy)]
pub(crate) enum Start {
    /// A word (`\b`, then a letter, digit or `_`).
    Word,
    /// A number (`\b`, then a digit).
    Number,
    /// A base64 run (`[A-Za-z0-9+/_-]` after a byte outside it).
    Base64,
    /// After a space or tab (the value after `Bearer `).
    AfterBlank,
}

/// A run of token characters shorter than this holds no credential, id or pointer worth a look.
pub(crate) const MIN_RUN: usize = 10;

/// A rule: its name (for tests and docs), its trigger, whether it applies inside URLs, the cheap
/// conditions on the bytes around its trigger, and its matcher.
pub(crate) struct Rule {
    pub name: &'static str,
    pub trigger: Trigger,
    /// Whether the rule also runs on the parts of a URL (credentials, hosts); structural rules
    /// (paths, dumps, URLs themselves) do not.
    pub in_url: bool,
    /// Bytes the trigger byte, the one before it and the one after it must be in for the rule
    /// to match (the start and end of the text count as a space). The engine checks them, so
    /// most triggers cost no call.
    pub at: ByteSet,
    pub before: ByteSet,
    pub after: ByteSet,
    /// For a run rule: the shortest token run, from its start, that a match needs (every match
    /// is made of token run characters). The engine skips the rule where the run left is shorter.
    pub shortest: usize,
    /// A cheap necessary condition on the bytes, which the matcher checks first: where it fails
    /// the rule cannot match, so [`prefilter`](super::engine::prefilter) need not call it. Where
    /// it fails, the matcher answers `Found::Miss`, never `MissUntil`: the dispatch that
    /// [`apply_from`](super::engine::apply_from) skips would have recorded nothing.
    pub pre: Option<Pre>,
    pub find: Matcher,
}

const fn rule(name: &'static str, trigger: Trigger, in_url: bool, find: Matcher) -> Rule {
    Rule {
        name,
        trigger,
        in_url,
        at: ByteSet::ANY,
        before: ByteSet::ANY,
        after: ByteSet::ANY,
        shortest: 0,
        pre: None,
        find,
    }
}

impl Rule {
    const fn at(mut self, set: ByteSet) -> Rule {
        self.at = set;
        self
    }

    const fn before(mut self, set: ByteSet) -> Rule {
        self.before = set;
        self
    }

    const fn after(mut self, set: ByteSet) -> Rule {
        self.after = set;
        self
    }

    const fn shortest(mut self, len: usize) -> Rule {
        self.shortest = len;
        self
    }

    const fn pre(mut self, pre: Pre) -> Rule {
        self.pre = Some(pre);
        self
    }
}

const LETTERS: ByteSet = ByteSet::of(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
const DIGITS: ByteSet = ByteSet::of(b"0123456789");
const ALNUM: ByteSet = LETTERS.or(DIGITS);
const HEX: ByteSet = ByteSet::class(chars::HEX);
const QUOTES: ByteSet = ByteSet::of(b"'\"");
const NON_ASCII: ByteSet = ByteSet::class(chars::PATH).not_ascii();

use Start::{AfterBlank, Base64, Number, Word};
use Trigger::{Bytes, Run};

/// Every rule, in priority order: where two matches start at the same byte, the earlier rule wins.
const RULES_CONST: [Rule; RULE_COUNT] = [
    rule("pydantic_secret_field", Bytes(b"="), false, pydantic).before(ByteSet::of(b"eE")),
    rule("escaped_traceback_frame", Bytes(b"\\"), false, escaped_frame)
        .before(ByteSet::of(b" "))
        .after(ByteSet::of(b"\"")),
    rule("data_uri", Bytes(b":"), false, data_uri).before(ByteSet::of(b"aA")),
    rule("bytes_repr", Bytes(b"'\""), false, bytes_repr).before(ByteSet::of(b"b")),
    rule("tensor_dump", Bytes(b"("), false, tensor).before(ByteSet::of(b"ry")),
    rule("url", Bytes(b":"), false, url).after(ByteSet::of(b"/")),
    rule("quoted_path", Bytes(b"'\""), false, quoted).after(LETTERS.or(ByteSet::of(b"/~."))),
    rule("posix_path", Bytes(b"/"), false, posix_root).after(ALNUM.or(ByteSet::of(b"._"))),
    rule("posix_file", Bytes(b"/"), false, posix_file).after(ByteSet::class(chars::FILE)),
    rule("windows_path", Bytes(b":"), false, windows)
        .before(LETTERS)
        .after(ByteSet::of(b"\\/")),
    rule("unc_path", Bytes(b"\\"), false, unc).after(ByteSet::of(b"\\")),
    rule("env_path", Bytes(b"%$"), false, env).after(LETTERS.or(ByteSet::of(b"_{"))),
    rule("home_path", Bytes(b"~"), false, home).after(ALNUM.or(ByteSet::of(b"/_.-"))),
    rule("dot_path", Bytes(b"."), false, dot).after(ByteSet::of(b"./")),
    rule("hidden_path", Bytes(b"."), false, hidden)
        .before(ByteSet::ANY.without(ALNUM.or(ByteSet::of(b"._"))))
        .after(ALNUM.or(ByteSet::of(b"_-"))),
    rule("packages_path", Bytes(b"/"), false, packages).before(ByteSet::of(b"s")),
    rule("hf_cache_path", Bytes(b"-"), false, hf_cache)
        .before(ByteSet::of(b"s"))
        .after(ByteSet::of(b"-")),
    rule("relative_file", Bytes(b"/"), false, relative_file).before(ByteSet::class(chars::FILE)),
    rule("jwt", Run(Word), true, jwt)
        .at(ByteSet::of(b"e"))
        .shortest(JWT_SHORTEST),
    rule("known_token", Run(Word), true, known)
        .at(FIRST_BYTES)
        .after(SECOND_BYTES)
        .shortest(KNOWN_SHORTEST),
    // Key names are 2+ letters long: a one-letter word (`a.b.c`) starts no glued credential.
    rule("glued_secret", Run(Word), true, glued)
        .after(ALNUM.or(ByteSet::of(b"_-")))
        .shortest(GLUED_SHORTEST),
    rule("webhook", Bytes(b"/"), true, hook).before(ByteSet::of(b"mgMG")),
    rule("cli_flag", Bytes(b"-"), true, flag).after(ByteSet::of(b"-")),
    rule("key_value", Bytes(b":=,\xEF"), true, key_value)
        .before(
            ByteSet::class(chars::KEY)
                .or(QUOTES)
                .or(ByteSet::of(b" \t"))
                .or(NON_ASCII),
        )
        .pre(key_value_pre),
    rule("bearer_token", Run(AfterBlank), true, bare_scheme).shortest(BEARER_SHORTEST),
    rule("spaced_key_value", Bytes(b" "), true, spaced_key_value)
        .before(KEY_LAST_LETTERS)
        .pre(spaced_key_value_pre),
    rule("email", Bytes(b"@"), true, email).before(ByteSet::class(chars::LOCAL)),
    rule("internal_host", Bytes(b"."), true, internal_host).after(ByteSet::of(b"ilschILSCH")),
    rule("ec2_host", Bytes(b"-"), true, ec2_host).before(ByteSet::of(b"pP")),
    rule("ipv4", Bytes(b"."), true, ipv4).before(DIGITS).after(DIGITS),
    // The group before the first `:` ends a ULA or link-local prefix; a hex digit or `:` follows.
    rule("ipv6", Bytes(b":"), true, ipv6)
        .before(HEX)
        .after(HEX.or(ByteSet::of(b":"))),
    rule("hex_address", Bytes(b"xX"), true, hex_addr).before(ByteSet::of(b"0")),
    rule("decimal_address", Run(Number), true, decimal_addr).shortest(DECIMAL_ADDR_SHORTEST),
    rule("opaque_token", Run(Base64), true, opaque)
        .after(ByteSet::class(chars::B64))
        .shortest(OPAQUE_MIN),
];

pub(crate) const RULE_COUNT: usize = 34;

/// The table, as the engine reads it.
pub(crate) static RULES: [Rule; RULE_COUNT] = RULES_CONST;

/// A set of rules, one bit per row of [`RULES`] (bit order is priority order).
pub(crate) type Mask = u64;

/// The rule masks derived from the table: per trigger byte, per run start, inside URLs, and per
/// byte the rules whose conditions on the trigger byte, the byte before and the byte after it
/// admit that byte.
struct Masks {
    by_byte: [Mask; 256],
    by_start: [Mask; 4],
    in_url: Mask,
    at: [Mask; 256],
    before: [Mask; 256],
    after: [Mask; 256],
    fits: [Mask; FITS_LEN],
}

/// Run lengths the shortest-run masks tell apart; a longer run counts as this long less one.
pub(crate) const FITS_LEN: usize = 64;

const fn masks() -> Masks {
    let mut m = Masks {
        by_byte: [0; 256],
        by_start: [0; 4],
        in_url: 0,
        at: [0; 256],
        before: [0; 256],
        after: [0; 256],
        fits: [0; FITS_LEN],
    };
    let mut r = 0;
    while r < RULE_COUNT {
        let bit = 1 << r;
        let mut c = 0;
        while c < 256 {
            let rule = &RULES_CONST[r];
            if rule.at.has(c as u8) {
                m.at[c] |= bit;
            }
            if rule.before.has(c as u8) {
                m.before[c] |= bit;
            }
            if rule.after.has(c as u8) {
                m.after[c] |= bit;
            }
            c += 1;
        }
        match RULES_CONST[r].trigger {
            Bytes(list) => {
                let mut k = 0;
                while k < list.len() {
                    m.by_byte[list[k] as usize] |= bit;
                    k += 1;
                }
            }
            Run(start) => m.by_start[start as usize] |= bit,
        }
        if RULES_CONST[r].in_url {
            m.in_url |= bit;
        }
        assert!(
            RULES_CONST[r].shortest < FITS_LEN,
            "a rule's shortest run fits the mask table"
        );
        let mut n = RULES_CONST[r].shortest;
        while n < FITS_LEN {
            m.fits[n] |= bit;
            n += 1;
        }
        r += 1;
    }
    m
}

const MASKS: Masks = masks();
/// The rules each byte triggers (for tables built at compile time; [`BY_BYTE`] at run time).
pub(crate) const BYTE_MASKS: [Mask; 256] = MASKS.by_byte;
/// The rules each byte triggers.
pub(crate) static BY_BYTE: [Mask; 256] = BYTE_MASKS;
/// The rules each kind of run start triggers, indexed by [`Start`].
pub(crate) const BY_START: [Mask; 4] = MASKS.by_start;
/// The rules that apply inside a URL.
pub(crate) const IN_URL: Mask = MASKS.in_url;
/// Per byte, the rules that may trigger at it ([`Rule::at`]), right after it ([`Rule::before`])
/// and right before it ([`Rule::after`]).
pub(crate) static AT: [Mask; 256] = MASKS.at;
pub(crate) static BEFORE: [Mask; 256] = MASKS.before;
pub(crate) static AFTER: [Mask; 256] = MASKS.after;
/// Per length of the token run left (capped at `FITS_LEN - 1`), the rules whose shortest run fits.
pub(crate) static FITS: [Mask; FITS_LEN] = MASKS.fits;
/// Every rule.
pub(crate) const ALL: Mask = if RULE_COUNT == 64 {
    Mask::MAX
} else {
    (1 << RULE_COUNT) - 1
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine tries run rules only where at least `MIN_RUN` token characters are left.
    #[test]
    fn run_rules_need_min_run() {
        for rule in &RULES {
            if matches!(rule.trigger, Run(_)) {
                assert!(rule.shortest >= MIN_RUN, "{}", rule.name);
            }
        }
    }

    #[test]
    fn names_are_unique_and_every_rule_is_triggered() {
        for (i, a) in RULES.iter().enumerate() {
            assert!(RULES[i + 1..].iter().all(|b| b.name != a.name), "{}", a.name);
            let bit = 1 << i;
            assert!(
                BY_START.iter().any(|m| m & bit != 0) || BY_BYTE.iter().any(|m| m & bit != 0),
                "{}",
                a.name
            );
        }
    }
}
