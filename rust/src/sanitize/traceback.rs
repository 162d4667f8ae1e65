//! Line pass: removes Python traceback headers, frame lines, echoed source and caret lines, and
//! C++ `frame #N:` lines, keeping every other line (the final error line in particular).

use std::borrow::Cow;

use memchr::memmem;

use super::markers::TRACEBACK;

const HEADER: &str = "Traceback (most recent call last):";

/// Whether `text` may hold a traceback (cheap substring checks, no allocation).
fn has_trigger(text: &str) -> bool {
    let b = text.as_bytes();
    memmem::find(b, b"File \"").is_some()
        || memmem::find(b, b"Traceback (").is_some()
        || memmem::find(b, b"frame #").is_some()
}

fn strip_gutter(line: &str) -> &str {
    line.trim_start_matches([' ', '\t', '|'])
}

fn is_frame(t: &str) -> bool {
    (t.starts_with("File \"") && t.contains("\", line ")) || is_cpp_frame(t)
}

fn is_cpp_frame(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("frame #") else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && rest.as_bytes().get(digits) == Some(&b':')
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// Removes traceback lines; each removed block becomes one `<traceback>` line.
pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    if !has_trigger(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut in_block = false;
    // Indentation of the last frame line, while the lines after it may be its echoed source.
    let mut frame_indent: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let t = strip_gutter(body);
        let drop = if t.starts_with(HEADER) || t.starts_with("[Previous line repeated") {
            frame_indent = None;
            true
        } else if is_frame(t) {
            frame_indent = Some(indent(body));
            true
        } else if let Some(fi) = frame_indent {
            let source = !t.is_empty() && indent(body) > fi;
            if !source {
                frame_indent = None;
            }
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
    fn no_trigger_is_borrowed() {
        assert!(matches!(strip("File not found"), Cow::Borrowed(_)));
    }
}
