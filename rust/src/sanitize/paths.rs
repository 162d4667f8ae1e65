//! Filesystem paths: POSIX (by root directory or file extension), Windows, UNC, environment
//! variables, home, relative, hidden directories, `site-packages` and Hugging Face caches.
//!
//! An API route (`/v1/chat/completions`) is not a path: a POSIX path needs a filesystem root or a
//! file extension, and must not continue a word (`v1/models/x`).

use super::chars::{at, ends_ci, is, run_end, run_start, starts_ci, word_before, FILE, PATH, PATHS, WIN, WORD};
use super::lexicon::{ext_at, is_root};
use super::markers::PATH as MARK;
use super::rule::{Cx, Found, Hit};

/// Longest root directory name looked at (`checkpoints`, `miniconda3`).
const MAX_ROOT: usize = 16;
/// A file-name component is at most this long (a longer run is not a file name).
const MAX_COMPONENT: usize = 64;

/// Replaces a path, keeping trailing sentence punctuation outside the marker.
fn path(start: usize, end: usize, cx: &Cx<'_>) -> Found {
    let trimmed = cx.slice(start, end).trim_end_matches(['.', ',']);
    if trimmed.len() > 1 {
        Hit::mark_part(start, end, start, start + trimmed.len(), MARK)
    } else {
        Found::Miss
    }
}

/// Whether the byte before `i` continues a word or a route (`v1/`, `a-b/`), so `i` cannot start a path.
fn continues_word(b: &[u8], i: usize) -> bool {
    i > 0 && (is(b[i - 1], WORD) || matches!(b[i - 1], b'-' | b'.' | b'%'))
}

/// Length of `/root/` at `b[i]` (the `/` at `i`), if the first directory is a filesystem root.
fn root_at(b: &[u8], i: usize) -> Option<usize> {
    let name = b.get(i + 1..)?;
    let len = name
        .iter()
        .take(MAX_ROOT + 1)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_'))
        .count();
    (name.get(len) == Some(&b'/') && is_root(&name[..len])).then_some(len + 2)
}

/// A path start inside quotes: `/root/`, `~user/`, `C:\`, `./`, `../`.
fn quoted_start(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        Some(b'/') => root_at(b, i).is_some(),
        Some(b'~') => {
            let user = b[i + 1..]
                .iter()
                .take(33)
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
                .count();
            user <= 32 && b.get(i + 1 + user) == Some(&b'/')
        }
        Some(b'.') => b.get(i + 1) == Some(&b'/') || (b.get(i + 1) == Some(&b'.') && b.get(i + 2) == Some(&b'/')),
        Some(c) if c.is_ascii_alphabetic() => b.get(i + 1) == Some(&b':') && matches!(b.get(i + 2), Some(b'\\' | b'/')),
        _ => false,
    }
}

/// `'/home/a b/c.json'`: a quoted path may hold spaces; the quotes stay.
pub(crate) fn quoted(cx: &Cx<'_>, i: usize) -> Found {
    let (b, q) = (cx.b, cx.b[i]);
    if !quoted_start(b, i + 1) {
        return Found::Miss;
    }
    let mut other_quote = false;
    for (j, &c) in b.iter().enumerate().skip(i + 1) {
        match c {
            _ if c == q => return Hit::mark_part(i, j + 1, i + 1, j, MARK),
            b'\n' | b'<' | b'>' => return if other_quote { Found::Miss } else { Found::MissUntil(j) },
            b'\'' | b'"' => other_quote = true,
            _ => {}
        }
    }
    Found::Miss
}

/// `/home/...`, `/data1/...`, `/.venv/...`: an absolute path under a filesystem root.
pub(crate) fn posix_root(cx: &Cx<'_>, i: usize) -> Found {
    let Some(len) = root_at(cx.b, i) else {
        return Found::Miss;
    };
    if continues_word(cx.b, i) {
        return Found::Miss;
    }
    path(i, run_end(cx.text, i + len, PATHS, usize::MAX), cx)
}

/// End of the file name at `b[j..]` whose stem (at least `min_stem`, at most [`MAX_COMPONENT`]
/// bytes) is followed by a known extension: the rightmost such dot wins.
fn file_end(b: &[u8], j: usize, min_stem: usize) -> Option<usize> {
    let end = run_end_ascii(b, j, FILE, MAX_COMPONENT + 16);
    (j..end)
        .rev()
        .filter(|&d| b[d] == b'.' && d - j >= min_stem && d - j <= MAX_COMPONENT)
        .find_map(|d| ext_at(b, d + 1).map(|n| d + 1 + n))
}

fn run_end_ascii(b: &[u8], i: usize, class: u32, max: usize) -> usize {
    let limit = i.saturating_add(max).min(b.len());
    (i..limit).find(|&j| !is(b[j], class) || b[j] >= 0x80).unwrap_or(limit)
}

/// A chain of file-name components from `j` (`dir/dir/name.ext`): the end of its deepest
/// component that has a known extension (after at least one directory), and where the chain
/// stops. The first component may be `first_max` bytes long, the others [`MAX_COMPONENT`].
fn file_chain(b: &[u8], mut j: usize, first_max: usize, min_stem: usize) -> (Option<usize>, usize) {
    let mut best = None;
    let mut depth = 0;
    loop {
        if depth > 0 {
            if let Some(end) = file_end(b, j, min_stem) {
                best = Some(end);
            }
        }
        let max = if depth == 0 { first_max } else { MAX_COMPONENT };
        let e = run_end_ascii(b, j, FILE, max + 1);
        if e == j || e - j > max || b.get(e) != Some(&b'/') {
            return (best, e);
        }
        depth += 1;
        j = e + 1;
    }
}

/// `/foo/bar/baz.py`: an absolute path with no known root but a file extension. A chain
/// without one is not read again from its later slashes.
pub(crate) fn posix_file(cx: &Cx<'_>, i: usize) -> Found {
    match file_chain(cx.b, i + 1, MAX_COMPONENT, 0) {
        (Some(end), _) if !continues_word(cx.b, i) => path(i, end, cx),
        (_, stop) => Found::MissUntil(stop),
    }
}

/// `lora/adapters/c-1/adapter_config.json`: a relative path with a file extension, starting
/// with a word before the `/` at `i`.
pub(crate) fn relative_file(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let first = run_start(b, i, FILE, MAX_COMPONENT + 1, cx.lo);
    let Some(start) = (first..i).find(|&s| is(b[s], WORD) || b[s] == b'-') else {
        return Found::Miss;
    };
    if start > 0 && (is(b[start - 1], WORD) || b[start - 1] == b'.') {
        return Found::Miss;
    }
    match file_chain(b, start, MAX_COMPONENT + 1, 1) {
        (Some(end), _) => path(start, end, cx),
        (None, stop) => Found::MissUntil(stop),
    }
}

/// End of a Windows path starting at `i`: its characters, and the spaces of `Program Files`,
/// `Program Files (x86)` or a user name that a later component follows (`John Smith\AppData`).
fn windows_end(cx: &Cx<'_>, i: usize) -> usize {
    let b = cx.b;
    let mut end = run_end(cx.text, i, WIN, usize::MAX);
    for _ in 0..4 {
        if b.get(end) != Some(&b' ') {
            break;
        }
        let program = ends_ci(b, end, b"program") && matches!(b.get(end.wrapping_sub(8)), Some(b'\\' | b'/'));
        if program && starts_ci(b, end, b" files") {
            let mut next = end + 6;
            if starts_ci(b, next, b" (x86)") {
                next += 6;
            }
            end = run_end(cx.text, next, WIN, usize::MAX);
            continue;
        }
        let next = run_end(cx.text, end + 1, WIN, usize::MAX);
        match b[end + 1..next].iter().position(|&c| c == b'\\' || c == b'/') {
            Some(sep) if sep > 0 => end = next,
            _ => break,
        }
    }
    end
}

/// `C:\Users\x\y.dll`, `C:/Users/x`, `D:\Program Files (x86)\...`.
pub(crate) fn windows(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i == 0 || i - 1 < cx.lo || !b[i - 1].is_ascii_alphabetic() || word_before(b, i - 1) {
        return Found::Miss;
    }
    if !matches!(b.get(i + 1), Some(b'\\' | b'/')) {
        return Found::Miss;
    }
    path(i - 1, windows_end(cx, i + 1), cx)
}

/// `\\server\share\...`.
pub(crate) fn unc(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if b.get(i + 1) != Some(&b'\\') {
        return Found::Miss;
    }
    let host = b[i + 2..]
        .iter()
        .take(65)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'$' | b'-'))
        .count();
    let sep = i + 2 + host;
    if host == 0 || host > 64 || b.get(sep) != Some(&b'\\') || !at(b, sep + 1, WIN) {
        return Found::Miss;
    }
    path(i, windows_end(cx, sep + 1), cx)
}

/// Length of an environment variable reference at `b[i]`: `%NAME%`, `$env:NAME`, `${NAME}`, `$NAME`.
fn env_ref(b: &[u8], i: usize) -> Option<usize> {
    let name = |from: usize, extra: &[u8]| {
        let n = b[from.min(b.len())..]
            .iter()
            .take(64)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || extra.contains(c))
            .count();
        (n > 0 && (b[from].is_ascii_alphabetic() || b[from] == b'_')).then_some(n)
    };
    match b.get(i)? {
        b'%' => name(i + 1, b"()")
            .filter(|n| b.get(i + 1 + n) == Some(&b'%'))
            .map(|n| n + 2),
        b'$' if starts_ci(b, i + 1, b"env:") => name(i + 5, b"").map(|n| n + 5),
        b'$' if b.get(i + 1) == Some(&b'{') => name(i + 2, b"")
            .filter(|n| b.get(i + 2 + n) == Some(&b'}'))
            .map(|n| n + 3),
        b'$' => name(i + 1, b"").map(|n| n + 1),
        _ => None,
    }
}

/// `%USERPROFILE%\AppData\...`, `$env:LOCALAPPDATA\...`, `${HF_HOME}/hub`, `$HOME/.cache/...`:
/// a path written through an environment variable.
pub(crate) fn env(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let Some(len) = env_ref(b, i) else { return Found::Miss };
    let sep = i + len;
    if !matches!(b.get(sep), Some(b'\\' | b'/')) || !at(b, sep + 1, WIN) || word_before(b, i) {
        return Found::Miss;
    }
    path(i, windows_end(cx, sep + 1), cx)
}

/// `~/models/x`, `~alice/voices/ref.wav`, `~\AppData\x`.
pub(crate) fn home(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'.' | b'_')) {
        return Found::Miss;
    }
    let user = b[i + 1..]
        .iter()
        .take(33)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        .count();
    if user > 32 || b.get(i + 1 + user) != Some(&b'/') {
        return Found::Miss;
    }
    path(i, run_end(cx.text, i + 2 + user, PATHS, usize::MAX), cx)
}

/// `./x`, `../x` (`dot`) and `.cache/x` (`hidden`): relative paths from a dot, at the start of a word.
pub(crate) fn dot(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let slash = if b.get(i + 1) == Some(&b'.') { i + 2 } else { i + 1 };
    if b.get(slash) != Some(&b'/') || !at(b, slash + 1, PATH) || starts_word_before(b, i) {
        return Found::Miss;
    }
    path(i, run_end(cx.text, slash + 1, PATHS, usize::MAX), cx)
}

/// `.cache/huggingface/token`: a hidden directory at the start of a word.
pub(crate) fn hidden(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    let name = b[i + 1..]
        .iter()
        .take(65)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
        .count();
    let slash = i + 1 + name;
    if name == 0 || name > 64 || b.get(slash) != Some(&b'/') || !at(b, slash + 1, PATH) || starts_word_before(b, i) {
        return Found::Miss;
    }
    path(i, run_end(cx.text, slash + 1, PATHS, usize::MAX), cx)
}

fn starts_word_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'.' | b'_'))
}

/// `site-packages/...`, `dist-packages/...`, found from the `/` after them.
pub(crate) fn packages(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i < 13 || b[i - 1] != b's' || b[i - 9] != b'-' {
        return Found::Miss;
    }
    let start = i - 13;
    let name = &b[start..i];
    if start < cx.lo || !name.ends_with(b"-packages") || (!name.starts_with(b"site") && !name.starts_with(b"dist")) {
        return Found::Miss;
    }
    path(start, run_end(cx.text, i, PATHS, usize::MAX), cx)
}

/// `models--Qwen--Qwen2.5-Omni-7B/snapshots/...`: a Hugging Face cache entry, from its `--`.
pub(crate) fn hf_cache(cx: &Cx<'_>, i: usize) -> Found {
    let b = cx.b;
    if i < 6 || i - 6 < cx.lo || &b[i - 6..i] != b"models" || b.get(i + 1) != Some(&b'-') {
        return Found::Miss;
    }
    let name_len = b[i + 2..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        .count();
    if name_len == 0 {
        return Found::Miss;
    }
    let name = i + 2 + name_len;
    let end = if b.get(name) == Some(&b'/') {
        run_end(cx.text, name, PATHS, usize::MAX)
    } else {
        name
    };
    path(i - 6, end, cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_refs() {
        assert_eq!(env_ref(b"%USERPROFILE%\\x", 0), Some(13));
        assert_eq!(env_ref(b"%ProgramFiles(x86)%\\x", 0), Some(19));
        assert_eq!(env_ref(b"$env:APPDATA\\x", 0), Some(12));
        assert_eq!(env_ref(b"${HF_HOME}/x", 0), Some(10));
        assert_eq!(env_ref(b"$HOME/x", 0), Some(5));
        assert_eq!(env_ref(b"$5/month", 0), None);
        assert_eq!(env_ref(b"100%/x", 3), None);
    }

    #[test]
    fn chains_take_the_deepest_file_and_the_rightmost_extension() {
        assert_eq!(file_chain(b"a/b/c.json/d", 0, 64, 1).0, Some(10));
        assert_eq!(file_chain(b"a/model.safetensors.index.json x", 0, 64, 1).0, Some(30));
        assert_eq!(file_chain(b"a/config.json.bak", 0, 64, 1).0, Some(13));
        assert_eq!(file_chain(b"Qwen/Qwen2.5-Omni-7B", 0, 64, 1).0, None);
        assert_eq!(file_chain(b"a.json", 0, 64, 1).0, None);
        assert_eq!(file_chain(b"a/.env", 0, 64, 0).0, Some(6));
        assert_eq!(file_chain(b"a/.env", 0, 64, 1).0, None);
    }
}
