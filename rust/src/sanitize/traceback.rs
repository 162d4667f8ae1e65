//! Line pass: removes Python traceback headers, frame lines, the source lines printed under
//! them and their caret lines, and C++ `frame #N:` lines, keeping every other line (the final
//! error line in particular).
//!
//! Lines may carry a prefix that the logger or a process wrapper put in front of each line
//! (`(EngineCore_DP0 pid=7) ERROR 01-08 11:19:33 [core.py:866]`, `|` gutters of exception groups):
//! the lines under a frame are its source when they carry the same prefix and are indented
//! deeper, or, whatever their indent (log collectors strip it), when they directly follow the
//! frame and do not read like the exception line.

use std::borrow::Cow;

use memchr::memchr3_iter;

use super::markers::TRACEBACK;

const HEADER: &str = "Traceback (most recent call last):";

/// Whether `text` may hold a traceback: a `File "`, `Traceback (` or `frame #`, found from the
/// rarer byte in each (`"`, `(`, `#`).
fn has_trigger(b: &[u8]) -> bool {
    memchr3_iter(b'"', b'(', b'#', b).any(|i| match b[i] {
        b'"' => b[..i].ends_with(b"File "),
        b'(' => b[..i].ends_with(b"Traceback "),
        _ => b[..i].ends_with(b"frame "),
    })
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
/// trimmed), the marker's indentation after the prefix, and whether it is a frame.
struct Marked<'a> {
    prefix: &'a str,
    indent: usize,
    frame: bool,
}

/// Where `marker` occurs in `line`, found from its byte at `pivot` (a rare byte of the marker).
fn find_marker(line: &str, marker: &str, pivot: usize) -> Option<usize> {
    let (b, m) = (line.as_bytes(), marker.as_bytes());
    memchr::memchr_iter(m[pivot], b)
        .filter_map(|i| i.checked_sub(pivot))
        .find(|&at| b[at..].starts_with(m))
}

fn marked(line: &str) -> Option<Marked<'_>> {
    let split = |at: usize, frame: bool| {
        let head = &line[..at];
        let prefix = head.trim_end_matches([' ', '\t', '|']);
        // The marker starts the line or follows a blank or gutter, never the end of a word.
        let standalone = prefix.is_empty() || head.len() > prefix.len();
        standalone.then(|| Marked {
            prefix,
            indent: head.len() - prefix.len(),
            frame,
        })
    };
    if let Some(at) = find_marker(line, "File \"", 5) {
        if is_frame_at(line, at) {
            return split(at, true);
        }
    }
    for (marker, pivot) in [(HEADER, 10), ("[Previous line repeated", 0)] {
        if let Some(at) = find_marker(line, marker, pivot) {
            return split(at, false);
        }
    }
    let t = line.trim_start_matches([' ', '\t', '|']);
    is_cpp_frame(t).then(|| Marked {
        prefix: "",
        indent: line.len() - t.len(),
        frame: false,
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

/// Removes traceback lines; each removed block becomes one `<traceback>` line.
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    if !has_trigger(text.as_bytes()) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut in_block = false;
    // The frame whose source lines may follow: its prefix, its indent, and lines seen since.
    let mut frame: Option<(&str, usize, usize)> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let drop = if let Some(m) = marked(body) {
            frame = m.frame.then_some((m.prefix, m.indent, 0));
            true
        } else if let Some((prefix, fi, seen)) = frame {
            let rest = body
                .strip_prefix(prefix)
                .filter(|r| prefix.is_empty() || r.starts_with([' ', '\t']));
            let source = rest.is_some_and(|r| {
                let t = r.trim_start_matches([' ', '\t', '|']);
                !t.is_empty() && (indent(r) > fi || is_carets(t) || (seen == 0 && !reads_like_exception(t)))
            });
            frame = source.then_some((prefix, fi, seen + 1));
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
    fn no_trigger_is_borrowed() {
        assert!(matches!(strip("File not found"), Cow::Borrowed(_)));
    }
}
