//! Line pass: removes Python traceback headers, frame lines, the source lines printed under
//! them and their caret lines, and C++ `frame #N:` lines, keeping every other line (the final
//! error line in particular).
//!
//! `IPython` and Jupyter print frames as `File ~/x.py:722, in f(self)` (or `/x.py in f(...)`)
//! followed by numbered source lines (`    721 with m:`, `--> 722     y = g()`); those go too.
//!
//! Lines may carry a prefix that the logger or a process wrapper put in front of each line
//! (`(EngineCore_DP0 pid=7) ERROR 01-08 11:19:33 [core.py:866]`, `|` gutters of exception groups):
//! the lines under a frame are its source when they carry the same prefix and are indented
//! deeper, or, whatever their indent (log collectors strip it), when they directly follow the
//! frame and do not read like the exception line.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::{memchr3_iter, memmem};

use super::markers::TRACEBACK;

const HEADER: &str = "Traceback (most recent call last):";

/// Built once per process: building a searcher costs more than scanning a short message.
static FIND_IN: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b", in "));
static FIND_PY: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b".py"));
/// Above this length `.py` is searched whole: in text dense with `.` (`a.a.a...`) one call per dot
/// cost more than the rules' pass.
const LONG_TEXT: usize = 256;

/// Whether `text` may hold a traceback: a `File "`, `Traceback (`, `frame #` (found from the
/// rarer byte in each: `"`, `(`, `#`), or an `IPython` frame's `.py in `, `.py](`, `.py:N, in `.
fn has_trigger(b: &[u8]) -> bool {
    // `.py` found from its `.` (a searcher for `.py` costs more to start than short text takes).
    let ipython = if b.len() > LONG_TEXT {
        has_ipython_frame_long(b)
    } else {
        memchr::memchr_iter(b'.', b).any(|i| b[i + 1..].starts_with(b"py") && ipython_frame_at(b, i))
    };
    ipython
        || memchr3_iter(b'"', b'(', b'#', b).any(|i| match b[i] {
            b'"' => b[..i].ends_with(b"File "),
            b'(' => b[..i].ends_with(b"Traceback "),
            _ => b[..i].ends_with(b"frame "),
        })
}

/// `has_trigger`'s `.py` search in long text (kept out of line: short text, most messages, never calls it).
#[inline(never)]
fn has_ipython_frame_long(b: &[u8]) -> bool {
    FIND_PY.find_iter(b).any(|i| ipython_frame_at(b, i))
}

/// Whether the `.py` at `i` ends the path of an `IPython` frame: `.py in `, `.py](`, `.py:N, in `.
fn ipython_frame_at(b: &[u8], i: usize) -> bool {
    let after = &b[i + 3..];
    after.starts_with(b" in ")
        || after.starts_with(b"](")
        || (after.first() == Some(&b':') && FIND_IN.find(after).is_some())
}

/// An `IPython` frame line: `File ~/x.py:722, in f(...)` or `/x/y.py in f(...)` (possibly a
/// Markdown link: `[/x/y.py](...) in f(...)`).
fn is_ipython_frame(t: &str) -> bool {
    if let Some(rest) = t.strip_prefix("File ").filter(|r| !r.starts_with('"')) {
        let Some(colon) = rest.find(", in ") else { return false };
        let head = &rest[..colon];
        return head.rsplit_once(':').is_some_and(|(path, line)| {
            !path.is_empty() && !path.contains(' ') && !line.is_empty() && line.bytes().all(|c| c.is_ascii_digit())
        });
    }
    let first = t.split(' ').next().unwrap_or_default();
    let path_like = first.starts_with(['/', '~', '[']) || first.get(1..3) == Some(":\\");
    // Bytes, not a `str` slice: the cut may fall inside a character of a non-ASCII path.
    let py = first.len() > 3 && first.as_bytes()[first.len() - 3..].eq_ignore_ascii_case(b".py");
    path_like && (py || first.ends_with(')')) && t[first.len()..].starts_with(" in ")
}

/// A numbered source line of an `IPython` frame: `    720 code`, `--> 722     code`, `   1160 `.
fn is_numbered_source(t: &str) -> bool {
    let t = t.trim_start_matches('-').trim_start_matches('>').trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && t.as_bytes().get(digits).map_or(true, |c| *c == b' ')
}

fn indent(s: &str) -> usize {
    s.len() - s.trim_start_matches([' ', '\t']).len()
}

/// `File "x.py", line 3, in f` at `at` in `line`.
fn is_frame_at(line: &str, at: usize) -> bool {
    let rest = &line[at..];
    let Some(path_end) = rest.get(6..).and_then(|r| memchr::memchr(b'"', r.as_bytes())) else {
        return false;
    };
    let after = &rest[6 + path_end + 1..];
    after
        .strip_prefix(", line ")
        .is_some_and(|n| n.bytes().next().is_some_and(|c| c.is_ascii_digit()))
}

/// `frame #12: c10::Error::Error(...)`.
fn is_cpp_frame(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("frame #") else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && rest.as_bytes().get(digits) == Some(&b':')
}

/// What a traceback line is: its prefix (what precedes the marker, trailing blanks and gutters
/// trimmed), the marker's indentation after the prefix, and its kind.
struct Marked<'a> {
    prefix: &'a str,
    indent: usize,
    kind: Kind,
}

/// A removed line, by what may follow it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A header, a `[Previous line repeated]` note, a C++ frame: nothing follows.
    Marker,
    /// A Python frame: its source lines may follow.
    Frame,
    /// An `IPython` frame: numbered source lines may follow.
    IpythonFrame,
}

/// Where `marker` occurs in `line`, found from its byte at `pivot` (a rare byte of the marker).
fn find_marker(line: &str, marker: &str, pivot: usize) -> Option<usize> {
    let (b, m) = (line.as_bytes(), marker.as_bytes());
    memchr::memchr_iter(m[pivot], b)
        .filter_map(|i| i.checked_sub(pivot))
        .find(|&at| b[at..].starts_with(m))
}

fn marked(line: &str) -> Option<Marked<'_>> {
    let split = |at: usize, kind: Kind| {
        let head = &line[..at];
        let prefix = head.trim_end_matches([' ', '\t', '|']);
        // The marker starts the line or follows a blank or gutter, never the end of a word.
        let standalone = prefix.is_empty() || head.len() > prefix.len();
        standalone.then(|| Marked {
            prefix,
            indent: head.len() - prefix.len(),
            kind,
        })
    };
    if let Some(at) = find_marker(line, "File \"", 5) {
        if is_frame_at(line, at) {
            return split(at, Kind::Frame);
        }
    }
    for (marker, pivot) in [(HEADER, 10), ("[Previous line repeated", 0)] {
        if let Some(at) = find_marker(line, marker, pivot) {
            return split(at, Kind::Marker);
        }
    }
    let t = line.trim_start_matches([' ', '\t', '|']);
    let kind = if is_cpp_frame(t) {
        Kind::Marker
    } else if is_ipython_frame(t) {
        Kind::IpythonFrame
    } else {
        return None;
    };
    Some(Marked {
        prefix: "",
        indent: line.len() - t.len(),
        kind,
    })
}

/// `RuntimeError: boom`, `vllm.v1.engine.exceptions.EngineDeadError: ...`, `KeyboardInterrupt`.
fn reads_like_exception(t: &str) -> bool {
    let name = t
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'))
        .count();
    name > 0 && t.as_bytes()[0].is_ascii_alphabetic() && matches!(t.as_bytes().get(name), None | Some(b':'))
}

fn is_carets(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|c| matches!(c, b'^' | b'~' | b' '))
}

/// Whether `text` may hold traceback lines; `false` proves that [`strip`] changes nothing.
pub(crate) fn may_hold(text: &str) -> bool {
    has_trigger(text.as_bytes())
}

/// Removes traceback lines; each removed block becomes one `<traceback>` line.
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    if !has_trigger(text.as_bytes()) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut in_block = false;
    // The frame whose source lines may follow: its prefix, indent and kind, and lines seen since.
    let mut frame: Option<(&str, usize, Kind, usize)> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let drop = if let Some(m) = marked(body) {
            frame = (m.kind != Kind::Marker).then_some((m.prefix, m.indent, m.kind, 0));
            true
        } else if let Some((prefix, fi, kind, seen)) = frame {
            let rest = body
                .strip_prefix(prefix)
                .filter(|r| prefix.is_empty() || r.starts_with([' ', '\t']));
            let source = rest.is_some_and(|r| {
                let t = r.trim_start_matches([' ', '\t', '|']);
                match kind {
                    Kind::IpythonFrame => t.is_empty() || is_numbered_source(t),
                    _ => !t.is_empty() && (indent(r) > fi || is_carets(t) || (seen == 0 && !reads_like_exception(t))),
                }
            });
            frame = source.then_some((prefix, fi, kind, seen + 1));
            source
        } else {
            false
        };
        if drop {
            changed = true;
            if !in_block {
                out.push_str(TRACEBACK);
                out.push('\n');
                in_block = true;
            }
        } else {
            in_block = false;
            out.push_str(line);
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    // A block at the very end leaves the newline we added; the input had none there.
    if !text.ends_with('\n') && out.ends_with('\n') {
        out.pop();
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipython_frames_found_in_short_and_long_text_alike() {
        for frame in [
            "/x/y.py in f(a)",
            "[/x/y.py](file:///x) in f()",
            "File ~/x.py:722, in f(a)",
        ] {
            let short = format!("a.a.a {frame}");
            let long = format!("{}{frame}", "a.".repeat(LONG_TEXT));
            assert!(has_trigger(short.as_bytes()) && has_trigger(long.as_bytes()), "{frame}");
        }
        let dense = "a.a.py.".repeat(LONG_TEXT);
        assert!(!has_trigger(dense.as_bytes()) && !has_trigger(&dense.as_bytes()[..LONG_TEXT]));
    }

    #[test]
    fn keeps_final_error_line() {
        let tb = "Traceback (most recent call last):\n  File \"/a/b.py\", line 3, in f\n    x = g()\n    ^^^^^\nValueError: bad";
        assert_eq!(strip(tb), "<traceback>\nValueError: bad");
    }

    #[test]
    fn cpp_frames() {
        let tb = "CUDA error\nframe #0: c10::Error + 0x96 (0x7f in /x/libc10.so)\nframe #1: y\ndone";
        assert_eq!(strip(tb), "CUDA error\n<traceback>\ndone");
    }

    #[test]
    fn log_prefixed_frames_and_their_source() {
        let p = "(EngineCore_DP0 pid=7) ERROR 01-08 11:19:33 [core.py:866]";
        let tb = format!(
            "{p} Traceback (most recent call last):\n{p}   File \"/x/core.py\", line 857, in run\n{p}     engine = Proc(*args)\n{p}              ^^^^^\n{p} ValueError: bad\n"
        );
        assert_eq!(strip(&tb), format!("<traceback>\n{p} ValueError: bad\n"));
    }

    #[test]
    fn source_lines_whose_indent_was_stripped() {
        let p = "ERROR 05-23 09:31:47 [core.py:396]";
        let tb = format!(
            "{p} File \"/x/b.py\", line 459, in call\n{p} Interp(self.split_gm, names)\n{p} RuntimeError: boom"
        );
        assert_eq!(strip(&tb), format!("<traceback>\n{p} RuntimeError: boom"));
    }

    #[test]
    fn ipython_frames_and_their_numbered_source() {
        let tb = "Error\nFile ~/env/lib/python3.10/site-packages/vllm/worker/model_runner.py:722, in Runner.load(self)\n    720 logger.info(x)\n--> 722     self.model = get_model(a,\n    723       b)\n\nValueError: bad";
        assert_eq!(strip(tb), "Error\n<traceback>\nValueError: bad");
        let old = "[/usr/lib/vllm/utils.py](https://localhost:8080/#) in inner(*args)\n   1159  )\n-> 1161  return fn(*args)\nRuntimeError: x";
        assert_eq!(strip(old), "<traceback>\nRuntimeError: x");
    }

    #[test]
    fn non_ascii_path_before_in_does_not_panic() {
        assert!(matches!(strip("File \"\n/xдолжно in f"), Cow::Borrowed(_)));
        assert!(matches!(strip("Traceback (\n~дол in x"), Cow::Borrowed(_)));
    }

    #[test]
    fn no_trigger_is_borrowed() {
        assert!(matches!(strip("File not found"), Cow::Borrowed(_)));
    }
}
