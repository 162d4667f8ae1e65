//! What a rule is given and what it returns: the interface between the rule table, the rules and
//! the engine that runs them.

use std::borrow::Cow;

/// The text a rule looks at, at one trigger position.
pub(crate) struct Cx<'a> {
    pub text: &'a str,
    pub b: &'a [u8],
    /// The earliest byte a match may start at: the end of the previous match.
    pub lo: usize,
    /// The rules that apply inside a URL, for rules that clean parts of their own match.
    pub inner: fn(&str) -> Cow<'_, str>,
}

impl Cx<'_> {
    /// `text[start..end]`, or `""` if that is not a valid range.
    pub fn slice(&self, start: usize, end: usize) -> &str {
        self.text.get(start..end).unwrap_or_default()
    }
}

/// What a rule does with the span it matched.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// Nothing: the span is known harmless, and no other rule may match inside it.
    Keep,
    /// Replace `text[from..to]` (inside the match) with a marker.
    Mark {
        from: usize,
        to: usize,
        marker: &'static str,
    },
    /// Replace the whole match with this text (a URL with its secrets removed).
    Text(String),
}

/// A match: the span `start..end` and what to do with it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    pub start: usize,
    pub end: usize,
    pub edit: Edit,
}

impl Hit {
    /// Replace all of `start..end` with `marker`.
    pub fn mark(start: usize, end: usize, marker: &'static str) -> Found {
        Found::Hit(Hit {
            start,
            end,
            edit: Edit::Mark {
                from: start,
                to: end,
                marker,
            },
        })
    }

    /// Replace `from..to`, inside the match `start..end`, with `marker`.
    pub fn mark_part(start: usize, end: usize, from: usize, to: usize, marker: &'static str) -> Found {
        Found::Hit(Hit {
            start,
            end,
            edit: Edit::Mark { from, to, marker },
        })
    }

    /// Consume `start..end` unchanged.
    pub fn keep(start: usize, end: usize) -> Found {
        Found::Hit(Hit {
            start,
            end,
            edit: Edit::Keep,
        })
    }
}

/// A rule's answer at one trigger position.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// No match here.
    Miss,
    /// No match here, nor at any trigger before this byte offset: the rule has read that far and
    /// need not read it again (what keeps a long run from being rescanned at every position).
    MissUntil(usize),
    /// A match.
    Hit(Hit),
}

/// A rule's matcher: the context and the trigger position.
pub(crate) type Matcher = fn(&Cx<'_>, usize) -> Found;

/// A cheap necessary condition for a rule's match at a trigger position, on the bytes alone.
pub(crate) type Pre = fn(&[u8], usize) -> bool;

/// A set of bytes: the cheap necessary conditions a rule states in the table (the byte before
/// its trigger, at it, after it), which the engine checks before calling the rule's matcher.
#[derive(Clone, Copy)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    /// Every byte.
    pub const ANY: ByteSet = ByteSet([u64::MAX; 4]);

    /// The bytes of `list`.
    pub const fn of(list: &[u8]) -> ByteSet {
        let mut s = [0u64; 4];
        let mut k = 0;
        while k < list.len() {
            s[(list[k] >> 6) as usize] |= 1 << (list[k] & 63);
            k += 1;
        }
        ByteSet(s)
    }

    /// The bytes of a character class of `chars` (non-ASCII bytes when the class admits them).
    pub const fn class(class: u32) -> ByteSet {
        let mut s = [0u64; 4];
        let mut c = 0;
        while c < 256 {
            if super::chars::class_in(c as u8, class) {
                s[c >> 6] |= 1 << (c & 63);
            }
            c += 1;
        }
        ByteSet(s)
    }

    /// The bytes in either set.
    pub const fn or(self, other: ByteSet) -> ByteSet {
        let (a, b) = (self.0, other.0);
        ByteSet([a[0] | b[0], a[1] | b[1], a[2] | b[2], a[3] | b[3]])
    }

    /// The bytes of this set that are not in `other`.
    pub const fn without(self, other: ByteSet) -> ByteSet {
        let (a, b) = (self.0, other.0);
        ByteSet([a[0] & !b[0], a[1] & !b[1], a[2] & !b[2], a[3] & !b[3]])
    }

    /// The non-ASCII bytes of the set.
    pub const fn not_ascii(self) -> ByteSet {
        ByteSet([0, 0, self.0[2], self.0[3]])
    }

    /// Whether `c` is in the set.
    pub const fn has(&self, c: u8) -> bool {
        self.0[(c >> 6) as usize] >> (c & 63) & 1 == 1
    }
}
