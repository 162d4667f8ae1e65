//! The rule table: one linear-time regex alternation per scope, one named group per rule.
//!
//! Every rule is a finite-automaton pattern (`regex` crate: no backtracking, O(pattern × input)),
//! so the whole sanitizer is linear in its input whatever the input is.

use regex::{Regex, RegexBuilder};
use regex_automata::meta;
use std::sync::OnceLock;

/// What a match is, decided by which named group matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    Pydantic,
    EscapedFrame,
    DataUri,
    Bytes,
    Tensor,
    Url,
    QuotedPath,
    PosixPath,
    PosixFile,
    WinPath,
    UncPath,
    HomePath,
    DotPath,
    HiddenPath,
    PkgPath,
    HfCache,
    RelFile,
    Jwt,
    Token,
    Hook,
    Flag,
    AuthScheme,
    KeyValue,
    Email,
    Host,
    Ipv4,
    Ipv6,
    Addr,
    Opaque,
}

/// First directory of an absolute POSIX path that marks it as a filesystem path (not an API route).
const ROOTS: &str =
    "home|Users|root|tmp|var|etc|opt|usr|data|data[0-9]|mnt|media|nfs|srv|scratch|workspace|workspaces|\
private|dev|proc|sys|run|lib|lib64|bin|sbin|app|apps|pytorch|models|model|content|kaggle|local|shared|share|storage|\
efs|fsx|lustre|gpfs|cache|ckpt|checkpoints|weights|datasets|export|net|Volumes|System|Library|Applications|snap|\
builds|build|src|code|project|projects|work|workdir|job|jobs|outputs|hf|huggingface|volume|volumes|disk|disks|mount|\
secrets|config|configs|logs|sandbox|user|users|team|teams|cloud|gcs|s3|conda|miniconda3|anaconda3|venv|\\.venv|\
ephemeral|persistent|host|lfs|fs|gpu|nvme|nvme[0-9]|raid|tank|pool|mlops|runs|experiments|tmpfs";

/// File extensions that make a slash-separated word a file path even without a known root.
const EXTS: &str = "py|pyc|pyi|pyx|so|dll|dylib|exe|json|jsonl|yaml|yml|toml|ini|cfg|conf|txt|log|csv|tsv|\
safetensors|bin|pt|pth|ckpt|onnx|gguf|ggml|engine|plan|h5|npz|npy|pkl|pickle|model|tiktoken|jinja|j2|wav|flac|mp3|\
ogg|opus|m4a|aac|mp4|webm|mkv|mov|avi|png|jpg|jpeg|gif|webp|bmp|tif|tiff|cpp|cc|cu|cuh|c|h|hpp|rs|go|js|ts|sh|pem|\
key|crt|cer|p12|sock|lock|tar|gz|tgz|xz|zst|zip|whl|egg|env|db|sqlite|parquet|arrow|msgpack|md|html|xml|proto";

/// Key names (as the end of an identifier) whose value is a credential.
const SECRET_KEYS: &str = "password|passwd|passphrase|pwd|pass|sig|secret|token|api[_\\-]?key|apikey|access[_\\-]?key|\
access[_\\-]?key[_\\-]?id|private[_\\-]?key[_\\-]?id|secret[_\\-]?key|private[_\\-]?key|signing[_\\-]?key|client[_\\-]?secret|credentials?|\
signature|authorization|auth|cookie|session|session[_\\-]?id|sessionid|sid|account[_\\-]?key|sas|conn(?:ection)?[_\\-]?string|\
dsn";

/// The same idea for keys written in other languages (no ASCII boundary applies to them).
const SECRET_KEYS_INTL: &str = "密码|密碼|口令|密钥|密鑰|令牌|パスワード|トークン|пароль|Пароль|ПАРОЛЬ|токен|\
contraseña|Contraseña|passwort|Passwort|senha|Senha|mot de passe|Mot de passe|parola|wachtwoord|hasło";

/// Well-known credential formats, recognised by their prefix and body.
const TOKENS: &str = r"sk-[A-Za-z0-9_\-]{20,}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9*]{10,}|sk_[A-Za-z0-9]{32,}|whsec_[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_\-]{20,}|xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}|(?:AKIA|ASIA)[A-Z0-9]{16}:[A-Za-z0-9+/]{40}|(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA|APKA)[A-Z0-9]{16}|AIza[A-Za-z0-9_\-]{30,}|ya29\.[A-Za-z0-9_\-]{20,}|1//0[A-Za-z0-9_\-]{20,}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}|pplx-[A-Za-z0-9]{20,}|r8_[A-Za-z0-9]{20,}|nvapi-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{40,}|dop_v1_[a-f0-9]{40,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|lin_api_[A-Za-z0-9]{30,}|dapi[a-f0-9]{32}|sntrys_[A-Za-z0-9_=+/]{30,}|fw_[A-Za-z0-9]{20,}|tgp_v1_[A-Za-z0-9_\-]{30,}|key-[a-f0-9]{32}|hvs\.[A-Za-z0-9_\-]{20,}|dckr_pat_[A-Za-z0-9_\-]{20,}|tvly-[A-Za-z0-9\-]{20,}|jina_[A-Za-z0-9]{20,}|csk-[A-Za-z0-9]{20,}|ATATT[A-Za-z0-9_\-=]{20,}|glsa_[A-Za-z0-9_]{20,}|LTAI[A-Za-z0-9]{12,}|(?:AC|SK)[0-9a-f]{32}|IQoJb3JpZ2luX2Vj[A-Za-z0-9+/=]*|FwoGZXIvYXdz[A-Za-z0-9+/=]*";

/// The rules in priority order. Every rule that needs a suffix before it matches (an extension,
/// a separator, a TLD, an `@`) bounds how far it looks, so the iteration over all matches stays
/// linear: no rule stays alive (unmatched) for more than a bounded distance, except those whose
/// start positions cannot repeat inside that distance (a quote, a line start, `tensor(`).
#[allow(clippy::too_many_lines)] // one row per rule: a table reads best in one place
fn alternatives(full: bool) -> Vec<(Rule, String)> {
    let pcn = r#"[^\s'"<>|;:()\[\]{}\\,`/]"#;
    let fcn = r"[A-Za-z0-9_.+@%~=\-]";
    let wpc = r#"[^\s'"<>|*?;:,()\[\]{}`]"#;
    let sq = r"'(?:[^'\\\n]|\\.)*'";
    let dq = r#""(?:[^"\\\n]|\\.)*""#;
    let edq = r#"\\"(?:[^"\\\n]|\\[^"])*\\""#;
    let bare = r#"[^\s'"<>,;&)}\]\\]+"#;
    let scheme = r"(?i:bearer|basic|token|digest|bot|apikey)[ \t]+";
    let mut v: Vec<(Rule, String)> = Vec::new();
    if full {
        v.push((
            Rule::Pydantic,
            format!(
                r"(?m:^)[ \t]*(?:[A-Za-z0-9_]+\.)*[A-Za-z0-9_]*(?i:password|passwd|passphrase|secret|token|api_?key|private_key|credentials?)[ \t]*\r?\n[^\n]*?input_value=(?:{sq}|{dq}|[^\s,\]]+)"
            ),
        ));
        // A traceback frame inside a JSON/repr string (`\n  File \"...\", line 3, in f\n    src`).
        v.push((
            Rule::EscapedFrame,
            r#"File \\"[^"\n]{1,512}?\\", line [0-9]{1,9}, in [^\\\n"]{1,128}(?:\\n {2,}(?:[^\\\n"]|\\[^n])*)?"#
                .to_owned(),
        ));
        v.push((
            Rule::DataUri,
            r"(?-u:\b)(?i:data):[A-Za-z0-9.+\-/]{0,64}(?:;[A-Za-z0-9.+\-_=]{0,64}){0,8},[A-Za-z0-9+/=_\-%]+".to_owned(),
        ));
        v.push((
            Rule::Bytes,
            r#"(?-u:\b)b'(?:[^'\\\n]|\\.)*\\x[0-9a-fA-F]{2}(?:[^'\\\n]|\\.)*(?:'|(?m:$))|(?-u:\b)b"(?:[^"\\\n]|\\.)*\\x[0-9a-fA-F]{2}(?:[^"\\\n]|\\.)*(?:"|(?m:$))"#
                .to_owned(),
        ));
        v.push((
            Rule::Tensor,
            r"(?-u:\b)(?:tensor|array)\([ \t\r\n]*\[(?:[\[\] \t\r\n,.+\-0-9eE]|nan|inf|True|False)*\]".to_owned(),
        ));
        v.push((
            Rule::Url,
            r#"(?-u:\b)[A-Za-z][A-Za-z0-9+.\-]{0,15}://[^\s'"<>()\[\]{}`\\]*"#.to_owned(),
        ));
        let start = format!(r"(?:/(?:{ROOTS})/|~[A-Za-z0-9_.\-]{{0,32}}/|[A-Za-z]:[\\/]|\.\.?/)");
        v.push((Rule::QuotedPath, format!(r#"'{start}[^'\n<>]*'|"{start}[^"\n<>]*""#)));
        v.push((Rule::PosixPath, format!(r"/(?:{ROOTS})(?:/{pcn}*)+")));
        v.push((
            Rule::PosixFile,
            format!(r"/(?:{fcn}{{1,64}}/){{1,24}}{fcn}{{0,64}}\.(?:{EXTS})(?-u:\b)"),
        ));
        // "C:\Program Files (x86)\..." is the one space Windows paths commonly carry unquoted.
        v.push((
            Rule::WinPath,
            format!(r"(?-u:\b)[A-Za-z]:[\\/](?:{wpc}|Program Files(?: \(x86\))?)*"),
        ));
        v.push((Rule::UncPath, format!(r"\\\\[A-Za-z0-9_.$\-]{{1,64}}\\{wpc}+")));
        v.push((Rule::HomePath, format!(r"~[A-Za-z0-9_.\-]{{0,32}}/{pcn}*(?:/{pcn}*)*")));
        v.push((Rule::DotPath, format!(r"\.\.?/{pcn}+(?:/{pcn}*)*")));
        v.push((
            Rule::HiddenPath,
            format!(r"\.[A-Za-z0-9_\-]{{1,64}}/{pcn}+(?:/{pcn}*)*"),
        ));
        v.push((Rule::PkgPath, format!(r"(?:site|dist)-packages/{pcn}*(?:/{pcn}*)*")));
        v.push((Rule::HfCache, format!(r"models--[A-Za-z0-9_.\-]+(?:/{pcn}*)*")));
        v.push((
            Rule::RelFile,
            format!(r"[A-Za-z0-9_\-]{fcn}{{0,64}}(?:/{fcn}{{1,64}}){{1,24}}\.(?:{EXTS})(?-u:\b)"),
        ));
    }
    v.push((
        Rule::Jwt,
        r"(?-u:\b)eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*".to_owned(),
    ));
    v.push((Rule::Token, format!(r"(?-u:\b)(?:{TOKENS})")));
    v.push((
        Rule::Hook,
        r"(?i:hooks\.slack\.com/services/|discord(?:app)?\.com/api/webhooks/|api\.telegram\.org/bot|outlook\.office\.com/webhook/)[A-Za-z0-9_:\-][A-Za-z0-9_/:\-]*"
            .to_owned(),
    ));
    v.push((
        Rule::Flag,
        r"--[A-Za-z0-9_\-]{0,48}(?i:key|token|password|passwd|secret|credentials?)(?:=|[ \t]{1,8})[^\s'<>]+".to_owned(),
    ));
    v.push((
        Rule::KeyValue,
        format!(
            r#"(?:[A-Za-z0-9_.\-]{{0,48}}(?i:{SECRET_KEYS})|{SECRET_KEYS_INTL})(?:\\?["'][ \t]{{0,8}}[:=,]|[ \t]{{0,8}}[:=：＝])[ \t]{{0,8}}(?:b?{sq}|b?{dq}|{edq}|(?:{scheme})?{bare})"#
        ),
    ));
    v.push((
        Rule::AuthScheme,
        r"(?-u:\b)(?i:bearer|basic|token)[ \t]{1,8}[A-Za-z0-9._~+/=\-]*[0-9_~+/=\-][A-Za-z0-9._~+/=\-]*".to_owned(),
    ));
    v.push((
        Rule::Email,
        r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,8}\.[A-Za-z]{2,}(?-u:\b)".to_owned(),
    ));
    v.push((
        Rule::Host,
        r"(?-u:\b)(?i:ip-[0-9]{1,3}(?:-[0-9]{1,3}){3}(?:\.[a-z0-9\-]+)*|[a-z0-9][a-z0-9\-]{0,62}(?:\.[a-z0-9][a-z0-9\-]{0,62}){0,8}\.(?:internal|local|localdomain|lan|intranet|corp|svc|home\.arpa|consul))(?-u:\b)"
            .to_owned(),
    ));
    v.push((Rule::Ipv4, r"(?-u:\b)(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?-u:\b)".to_owned()));
    v.push((
        Rule::Ipv6,
        r"(?-u:\b)(?i:(?:f[cd][0-9a-f]{2}|fe[89ab][0-9a-f]):[0-9a-f:]*[0-9a-f](?:%[A-Za-z0-9]+)?)".to_owned(),
    ));
    v.push((Rule::Addr, r"(?-u:\b)0[xX][0-9a-fA-F]{6,16}(?-u:\b)".to_owned()));
    v.push((Rule::Opaque, r"[A-Za-z0-9+_\-][A-Za-z0-9+/_\-]{23,}={0,3}".to_owned()));
    v
}

/// The alternation of a scope (for finding matches) and one anchored regex per rule (for
/// telling which rule matched, leftmost-first, without running captures over the big automaton).
pub(crate) struct RuleSet {
    pub(crate) re: Regex,
    pub(crate) rules: Vec<(Rule, meta::Regex)>,
}

fn build(full: bool) -> RuleSet {
    let alts = alternatives(full);
    let pattern = alts
        .iter()
        .map(|(_, p)| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    // The patterns are constants of this module, so a compile error is a programming error that
    // every test catches; a never-matching fallback keeps this path panic-free.
    let re = match RegexBuilder::new(&pattern)
        .size_limit(256 << 20)
        .dfa_size_limit(64 << 20)
        .build()
    {
        Ok(re) => re,
        Err(_) => never(),
    };
    let rules = alts
        .iter()
        .filter_map(|(rule, p)| {
            meta::Regex::builder()
                .configure(
                    meta::Config::new()
                        .nfa_size_limit(Some(64 << 20))
                        .hybrid_cache_capacity(4 << 20),
                )
                .build(p)
                .ok()
                .map(|r| (*rule, r))
        })
        .collect();
    RuleSet { re, rules }
}

fn never() -> Regex {
    #[allow(clippy::expect_used)] // a constant, valid pattern
    Regex::new(r"[^\s\S]").expect("constant pattern")
}

/// All rules, for public text.
pub(crate) fn full() -> &'static RuleSet {
    static SET: OnceLock<RuleSet> = OnceLock::new();
    SET.get_or_init(|| build(true))
}

/// The rules that apply inside a URL (no path, URL or structural rules).
pub(crate) fn url_inner() -> &'static RuleSet {
    static SET: OnceLock<RuleSet> = OnceLock::new();
    SET.get_or_init(|| build(false))
}

/// Whether `first` (the first segment after `//` in a URL path) is a filesystem root.
pub(crate) fn is_root(first: &str) -> bool {
    ROOTS.split('|').any(|r| r == first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sets_compile_with_every_rule() {
        assert_eq!(full().rules.len(), alternatives(true).len());
        assert_eq!(url_inner().rules.len(), alternatives(false).len());
    }

    #[test]
    fn roots_are_recognised() {
        assert!(is_root("home"));
        assert!(!is_root("v1"));
    }
}
