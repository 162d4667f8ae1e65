//! The word lists the rules share, each written once: credential key names, filesystem roots,
//! file extensions, internal top-level domains, authorization schemes and harmless placeholders.

use super::chars::KEY;

/// Key names whose value is a credential, matched as the end of a key with ASCII case, `_`, `-`
/// and spaces ignored (`api_key` covers `apikey`, `api-key`, `API_KEY`, `x-api-key`, `API key`).
const SECRET_KEYS: [&str; 34] = [
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "pass",
    "sig",
    "secret",
    "token",
    "api_key",
    "access_key",
    "access_key_id",
    "private_key_id",
    "secret_key",
    "private_key",
    "signing_key",
    "client_secret",
    "credential",
    "credentials",
    "signature",
    "authorization",
    "auth",
    "cookie",
    "session",
    "session_id",
    "sid",
    "account_key",
    "sas",
    "conn_string",
    "connection_string",
    "dsn",
    "passwort",
    "senha",
    "parola",
    "wachtwoord",
];

/// The same idea in other languages, where the ASCII rules do not apply: compared exactly.
pub(crate) const SECRET_KEYS_INTL: &[&str] = &[
    "密码",
    "密碼",
    "口令",
    "密钥",
    "密鑰",
    "令牌",
    "パスワード",
    "トークン",
    "пароль",
    "Пароль",
    "ПАРОЛЬ",
    "токен",
    "contraseña",
    "Contraseña",
    "mot de passe",
    "Mot de passe",
    "hasło",
];

/// For each lowercase letter, the keys of [`SECRET_KEYS`] (one bit each) that end with it.
static KEYS_BY_LAST: [u64; 26] = {
    let mut t = [0u64; 26];
    let mut k = 0;
    while k < SECRET_KEYS.len() {
        let word = SECRET_KEYS[k].as_bytes();
        t[(word[word.len() - 1] - b'a') as usize] |= 1 << k;
        k += 1;
    }
    t
};

/// The last letters of the credential key names, either case: a word ending otherwise names none.
pub(crate) const KEY_LAST_LETTERS: super::rule::ByteSet = {
    let mut set = super::rule::ByteSet::of(b"");
    let mut k = 0;
    while k < SECRET_KEYS.len() {
        let word = SECRET_KEYS[k].as_bytes();
        let last = word[word.len() - 1];
        set = set.or(super::rule::ByteSet::of(&[last, last.to_ascii_uppercase()]));
        k += 1;
    }
    set
};

/// For each lowercase letter, the letters that precede it as the last two letters of a key of
/// [`SECRET_KEYS`] (`_` left out, as [`is_secret_key`] leaves it out), one bit each.
static BEFORE_LAST: [u32; 26] = {
    let mut t = [0u32; 26];
    let mut k = 0;
    while k < SECRET_KEYS.len() {
        let w = SECRET_KEYS[k].as_bytes();
        let last = w[w.len() - 1];
        let mut p = w.len() - 2;
        while w[p] == b'_' {
            p -= 1;
        }
        t[(last - b'a') as usize] |= 1 << (w[p] - b'a');
        k += 1;
    }
    t
};

/// A cheap necessary condition for [`is_secret_key`] on any key that ends where `head` ends:
/// its last two bytes can end a credential key name (a separator before the last letter, which
/// [`is_secret_key`] would skip, passes).
pub(crate) fn may_end_with_secret_key(head: &[u8]) -> bool {
    let [.., prev, last] = head else {
        return false;
    };
    let (p, l) = (LETTER[usize::from(*prev)], LETTER[usize::from(*last)]);
    if (p | l) & SEPARATOR != 0 {
        return true;
    }
    p != 0 && l != 0 && BEFORE_LAST[usize::from(l - 1)] >> (p - 1) & 1 == 1
}

/// What [`is_secret_key`] skips between letters.
const SEPARATOR: u8 = 0x80;

/// Per byte: 1 to 26 for a letter of either case, [`SEPARATOR`] for what `is_secret_key` skips.
static LETTER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 26 {
        t[b'a' as usize + c] = c as u8 + 1;
        t[b'A' as usize + c] = c as u8 + 1;
        c += 1;
    }
    t[b'_' as usize] = SEPARATOR;
    t[b'-' as usize] = SEPARATOR;
    t[b' ' as usize] = SEPARATOR;
    t
};

/// Whether the key name `key` ends with a credential key name.
pub(crate) fn is_secret_key(key: &[u8]) -> bool {
    let mut letters = key
        .iter()
        .rev()
        .filter(|c| !matches!(c, b'_' | b'-' | b' '))
        .map(u8::to_ascii_lowercase);
    let Some(last) = letters.next().filter(u8::is_ascii_lowercase) else {
        return false;
    };
    let mut candidates = KEYS_BY_LAST[usize::from(last - b'a')];
    while candidates != 0 {
        let word = SECRET_KEYS[candidates.trailing_zeros() as usize];
        candidates &= candidates - 1;
        let mut theirs = word.bytes().rev().filter(|&c| c != b'_').skip(1);
        let mut ours = letters.clone();
        if theirs.all(|c| ours.next() == Some(c)) {
            return true;
        }
    }
    false
}

/// Whether `text[..end]` ends with a credential key name in another language.
pub(crate) fn intl_key_before(text: &str, end: usize) -> Option<usize> {
    let head = text.get(..end)?;
    let last = *head.as_bytes().last()?;
    SECRET_KEYS_INTL
        .iter()
        .find(|k| k.as_bytes().last() == Some(&last) && head.ends_with(*k))
        .map(|k| end - k.len())
}

/// The key name that ends at `end` (after skipping nothing): its start, looking back at most 64 bytes.
pub(crate) fn key_start(b: &[u8], end: usize, lo: usize) -> usize {
    super::chars::run_start(b, end, KEY, 64, lo)
}

/// First directories of an absolute POSIX path that mark it as a filesystem path, not an API
/// route. Sorted (byte order) for binary search; a test keeps it so.
const ROOTS: &[&str] = &[
    ".venv",
    "Applications",
    "Library",
    "System",
    "Users",
    "Volumes",
    "anaconda3",
    "app",
    "apps",
    "bin",
    "build",
    "builds",
    "cache",
    "checkpoints",
    "ckpt",
    "cloud",
    "code",
    "conda",
    "config",
    "configs",
    "content",
    "data",
    "datasets",
    "dev",
    "disk",
    "disks",
    "efs",
    "ephemeral",
    "etc",
    "experiments",
    "export",
    "fs",
    "fsx",
    "gcs",
    "gpfs",
    "gpu",
    "hf",
    "home",
    "host",
    "huggingface",
    "job",
    "jobs",
    "kaggle",
    "lfs",
    "lib",
    "lib64",
    "local",
    "logs",
    "lustre",
    "media",
    "miniconda3",
    "mlops",
    "mnt",
    "model",
    "models",
    "mount",
    "net",
    "nfs",
    "nvme",
    "opt",
    "outputs",
    "persistent",
    "pool",
    "private",
    "proc",
    "project",
    "projects",
    "pytorch",
    "raid",
    "root",
    "run",
    "runs",
    "s3",
    "sandbox",
    "sbin",
    "scratch",
    "secrets",
    "share",
    "shared",
    "snap",
    "src",
    "srv",
    "storage",
    "sys",
    "tank",
    "team",
    "teams",
    "tmp",
    "tmpfs",
    "user",
    "users",
    "usr",
    "var",
    "venv",
    "volume",
    "volumes",
    "weights",
    "work",
    "workdir",
    "workspace",
    "workspaces",
];

/// Roots that also appear numbered (`/data1`, `/nvme0`, `/disk2`).
const NUMBERED_ROOTS: &[&str] = &["data", "nvme", "disk", "mnt", "raid", "scratch", "ssd", "hdd", "vol"];

/// Whether `name` (one path component) is a filesystem root.
pub(crate) fn is_root(name: &[u8]) -> bool {
    if name.len() < 2 {
        return false;
    }
    if ROOTS.binary_search_by(|r| r.as_bytes().cmp(name)).is_ok() {
        return true;
    }
    let digits = name.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    (1..=2).contains(&digits)
        && NUMBERED_ROOTS
            .iter()
            .any(|r| r.as_bytes() == &name[..name.len() - digits])
}

/// Extensions that make a slash-separated word a file path even without a known root. Sorted.
const EXTS: &[&str] = &[
    "aac",
    "arrow",
    "avi",
    "bat",
    "bin",
    "bmp",
    "c",
    "cc",
    "cer",
    "cfg",
    "ckpt",
    "cmd",
    "conf",
    "cpp",
    "crt",
    "csv",
    "cu",
    "cuh",
    "db",
    "dll",
    "docx",
    "dylib",
    "egg",
    "engine",
    "env",
    "exe",
    "flac",
    "ggml",
    "gguf",
    "gif",
    "go",
    "gz",
    "h",
    "h5",
    "hpp",
    "html",
    "ini",
    "j2",
    "jinja",
    "jpeg",
    "jpg",
    "js",
    "json",
    "jsonl",
    "key",
    "lnk",
    "lock",
    "log",
    "m4a",
    "md",
    "mkv",
    "model",
    "mov",
    "mp3",
    "mp4",
    "msgpack",
    "npy",
    "npz",
    "ogg",
    "onnx",
    "opus",
    "p12",
    "parquet",
    "pdf",
    "pem",
    "pickle",
    "pkl",
    "plan",
    "png",
    "proto",
    "ps1",
    "pt",
    "pth",
    "py",
    "pyc",
    "pyi",
    "pyx",
    "rs",
    "safetensors",
    "sh",
    "so",
    "sock",
    "sqlite",
    "tar",
    "tgz",
    "tif",
    "tiff",
    "tiktoken",
    "toml",
    "ts",
    "tsv",
    "txt",
    "wav",
    "webm",
    "webp",
    "whl",
    "xlsx",
    "xml",
    "xz",
    "yaml",
    "yml",
    "zip",
    "zst",
];

/// Length of the known extension that starts at `b[i]` and ends at a word boundary, if any.
pub(crate) fn ext_at(b: &[u8], i: usize) -> Option<usize> {
    let len = b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    let ext = &b[i..i + len];
    let ends = !b.get(i + len).is_some_and(|&c| c == b'_');
    (ends && EXTS.binary_search_by(|e| e.as_bytes().cmp(ext)).is_ok()).then_some(len)
}

/// Top-level labels of internal host names.
const INTERNAL_TLDS: &[&str] = &[
    "internal",
    "local",
    "localdomain",
    "lan",
    "intranet",
    "corp",
    "svc",
    "consul",
];

/// Length of the internal top-level label (`internal`, `svc`, `home.arpa`...) at `b[i]`, if it ends there.
pub(crate) fn internal_tld_at(b: &[u8], i: usize) -> Option<usize> {
    // Every internal top-level label starts with one of these letters.
    if !matches!(
        b.get(i).map(u8::to_ascii_lowercase),
        Some(b'i' | b'l' | b's' | b'c' | b'h')
    ) {
        return None;
    }
    let len = b[i.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    let label = &b[i..i + len];
    if b.get(i + len) == Some(&b'_') {
        return None;
    }
    if INTERNAL_TLDS.iter().any(|t| label.eq_ignore_ascii_case(t.as_bytes())) {
        return Some(len);
    }
    let home = b"home.arpa";
    let ends = !b
        .get(i + home.len())
        .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_');
    (super::chars::starts_ci(b, i, home) && ends).then_some(home.len())
}

/// Authorization schemes, kept in front of the credential they introduce.
pub(crate) const AUTH_SCHEMES: &[&str] = &["bearer", "basic", "token", "digest", "bot", "apikey"];

/// The schemes that introduce a bare credential in running text (`Bearer abc...`).
pub(crate) const BARE_SCHEMES: &[&str] = &["bearer", "basic", "token"];

/// Whether `v` is an authorization scheme word.
pub(crate) fn is_scheme(v: &str) -> bool {
    AUTH_SCHEMES.iter().any(|w| v.eq_ignore_ascii_case(w))
}

/// Values that say nothing secret and help the reader (`api_key=None`, `password: ***`).
pub(crate) fn is_placeholder(v: &str) -> bool {
    const WORDS: [&str; 10] = [
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "missing",
        "redacted",
        "[redacted]",
    ];
    let t = v.trim();
    t.is_empty()
        || (t.starts_with('<') && t.ends_with('>'))
        || t.bytes().all(|b| matches!(b, b'*' | b'x' | b'X' | b'.'))
        || WORDS.iter().any(|w| t.eq_ignore_ascii_case(w))
        || (t.len() <= 6 && t.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `may_end_with_secret_key` never refuses a key `is_secret_key` accepts, whatever precedes it.
    #[test]
    fn last_two_letters_are_a_necessary_condition() {
        let mut keys: Vec<String> = SECRET_KEYS.iter().map(|k| (*k).to_owned()).collect();
        keys.extend(
            [
                "API key",
                "x-api-key",
                "Api-Key",
                "PASS_WORD",
                "auth_",
                "api_key-",
                "TOKEN",
            ]
            .map(String::from),
        );
        let alphabet = b"ab_- .1Zy\xc3";
        let mut x: u32 = 1;
        for k in &keys {
            for _ in 0..200 {
                let mut s = Vec::new();
                for _ in 0..(x % 4) {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    s.push(alphabet[(x >> 16) as usize % alphabet.len()]);
                }
                s.extend_from_slice(k.as_bytes());
                for _ in 0..(x % 3) {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    s.push(b"_- "[(x >> 16) as usize % 3]);
                }
                for start in 0..s.len() {
                    if is_secret_key(&s[start..]) {
                        assert!(may_end_with_secret_key(&s), "{:?}", String::from_utf8_lossy(&s));
                    }
                }
            }
        }
        // Any two bytes: where `is_secret_key` holds on a key ending in them, so does the check.
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for k in SECRET_KEYS {
                    let w = k.replace('_', "");
                    let head = &w.as_bytes()[..w.len() - 2];
                    let s = [head, &[a, b]].concat();
                    if is_secret_key(&s) {
                        assert!(may_end_with_secret_key(&s), "{a} {b} {k}");
                    }
                }
            }
        }
        assert!(!may_end_with_secret_key(b"must"));
        assert!(!may_end_with_secret_key(b"the"));
        assert!(may_end_with_secret_key(b"token"));
    }

    #[test]
    fn secret_keys() {
        for k in [
            "password",
            "DB_PASSWORD",
            "x-api-key",
            "apikey",
            "API_KEY",
            "aws_secret_access_key",
            "oauth",
        ] {
            assert!(is_secret_key(k.as_bytes()), "{k}");
        }
        for k in ["max_tokens", "key", "model", "bypass_cache", "tokens"] {
            assert!(!is_secret_key(k.as_bytes()), "{k}");
        }
    }

    #[test]
    fn lists_are_sorted_for_binary_search() {
        assert!(ROOTS.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()));
        assert!(EXTS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn roots_by_name_including_numbered_and_dotted() {
        for r in ["home", "data", "data1", "nvme0", "nvme12", ".venv", "Users"] {
            assert!(is_root(r.as_bytes()), "{r}");
        }
        for r in ["v1", "api", "datas", "nvme123", "homes", ""] {
            assert!(!is_root(r.as_bytes()), "{r}");
        }
    }

    #[test]
    fn extensions_end_at_a_boundary() {
        assert_eq!(ext_at(b"json:12", 0), Some(4));
        assert_eq!(ext_at(b"pyc", 0), Some(3));
        assert_eq!(ext_at(b"pyz", 0), None);
        assert_eq!(ext_at(b"py_x", 0), None);
    }
}
