//! Output that stays borrowed until the first real change, so clean text costs no allocation.

use std::borrow::Cow;

/// The input with replacements applied left to right.
pub(crate) struct Out<'a> {
    src: &'a str,
    buf: String,
    last: usize,
    changed: bool,
}

impl<'a> Out<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Out {
            src,
            buf: String::new(),
            last: 0,
            changed: false,
        }
    }

    /// Replaces `src[start..end]` with `with`. Ignored when it overlaps an earlier replacement,
    /// is not on character boundaries, or changes nothing.
    pub(crate) fn replace(&mut self, start: usize, end: usize, with: &str) {
        if start < self.last || end < start {
            return;
        }
        let (Some(before), Some(old)) = (self.src.get(self.last..start), self.src.get(start..end)) else {
            debug_assert!(false, "replacement {start}..{end} is not on character boundaries");
            return;
        };
        if old == with {
            return;
        }
        if !self.changed {
            self.buf.reserve(self.src.len());
            self.changed = true;
        }
        self.buf.push_str(before);
        self.buf.push_str(with);
        self.last = end;
    }

    pub(crate) fn finish(mut self) -> Cow<'a, str> {
        if !self.changed {
            return Cow::Borrowed(self.src);
        }
        self.buf.push_str(self.src.get(self.last..).unwrap_or_default());
        Cow::Owned(self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_until_changed() {
        let mut out = Out::new("abc");
        out.replace(1, 2, "b");
        assert!(matches!(out.finish(), Cow::Borrowed("abc")));
        let mut out = Out::new("abcdef");
        out.replace(1, 2, "X");
        out.replace(1, 3, "Y"); // overlaps: ignored
        out.replace(4, 6, "Z");
        assert_eq!(out.finish(), "aXcdZ");
    }
}
