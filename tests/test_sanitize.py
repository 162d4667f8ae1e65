"""The sanitizer as Python sees it: rule classes, guarantees, corpus scores, properties.

Timing is never asserted here (see benches/); adversarial inputs assert correctness only.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from omni_errors import normalize_parameter, sanitize

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "sanitizer"
BOUND = 4096
MARKER = "...<truncated>..."


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


# --- rule classes ---------------------------------------------------------------------------

RULES = [
    # (input, removed, kept)
    ("No such file: '/home/alice/models/config.json'", "/home/alice", "No such file"),
    (r"loading C:\Users\Bob\x\y.dll failed", r"C:\Users\Bob", "failed"),
    ("weights under ~/models/wan2.1 missing", "~/models/wan2.1", "missing"),
    ("bad ./stage_configs/a.yaml file", "./stage_configs/a.yaml", "file"),
    ("at lora/adapters/c-1/adapter_config.json has r=8", "lora/adapters", "r=8"),
    (
        'Traceback (most recent call last):\n  File "/x/y.py", line 1, in f\n    g(secret)\nValueError: bad',
        "g(secret)",
        "ValueError: bad",
    ),
    ("<_io.BytesIO object at 0x7f8070a36957>", "0x7f8070a36957", "BytesIO"),
    ("key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 revoked", "sk-proj-", "revoked"),
    ("x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345", "sk-ant-api03", "x-api-key"),
    ("token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH bad", "hf_abcdefghij", "bad"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789 expired", "ghp_", "expired"),
    ("SLACK=xoxb-886385441171-7229867707090-cleYT3LENRfCJq", "xoxb-", "SLACK"),
    ("sk_live_51KmKztbO1ReZmS11DFvEvFz is live", "sk_live_51", "is live"),
    ("id AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE", "denied"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "aws_secret_access_key"),
    ('{"type": "service_account", "private_key_id": "15816841069a98b02274a571b6f545f16e19b7f7"}', "158168", "type"),
    (
        "bad eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U x",
        "eyJhbGciOiJIUzI1NiJ9",
        "bad",
    ),
    ("Authorization: Bearer TWq51o2t19pVwXlxeNnmEMb8", "TWq51o2t19pVwXlxeNnmEMb8", "Bearer"),
    ("Authorization: Basic YWRtaW46cGFzc3dvcmQ=", "YWRtaW46cGFzc3dvcmQ=", "Basic"),
    ("redis://user:p4ss-w0rd@kv.example.com:6379/0 down", "p4ss-w0rd", "kv.example.com:6379"),
    ("https://a.example.com/x?api_key=abc123def456&id=7", "abc123def456", "id=7"),
    ('{"password": "hunter2!x", "user": "omni"}', "hunter2!x", '"user": "omni"'),
    ("key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\nssl error", "MIIEvQ", "ssl error"),
    ("bad data:image/png;base64,iVBORw0KGgoAAAANSUhEUg== (x)", "iVBORw0KGgo", "(x)"),
    (r"magic bytes b'\x89PNG\r\n\x1a\n' wrong", r"\x89PNG", "wrong"),
    ("got tensor([[1.0, 2.0],\n        [3.0, 4.0]], device='cuda:0')", "3.0, 4.0", "device='cuda:0'"),
    ("contact jane.doe@corp.example.com now", "jane.doe@", "now"),
    ("connect to 10.42.249.66:6379 failed", "10.42.249.66", ":6379 failed"),
    ("connect to [fd12:3456:789a:1::5]:29500 failed", "fd12:3456", "29500"),
    ("rank 3 on ip-10-254-21-7.ec2.internal:29500", "ip-10-254-21-7", "rank 3"),
]


@pytest.mark.parametrize(("text", "removed", "kept"), RULES)
def test_rule_removes_and_keeps(text: str, removed: str, kept: str) -> None:
    out = sanitize(text)
    assert removed not in out
    assert kept in out
    assert sanitize(out) == out


CLEAN = [
    "max_tokens must be <= 4096, got 10000",
    "Model 'Qwen/Qwen2.5-Omni-7B' loaded with dtype torch.bfloat16 does not support audio output.",
    "POST /v1/audio/speech is not enabled on this server; enabled routes: /v1/chat/completions",
    "Failed to download https://github.com/openai/whisper/raw/main/tests/jfk.flac: 403 Forbidden",
    "vllm-omni 0.11.0rc2 requires vllm>=0.11.0,<0.12; found cublas 12.4.5.8",
    "Request 3fa85f64-5717-4562-b3fc-2c963f66afa6 was preempted 3 times",
    "Failed to bind 0.0.0.0:8000: address already in use",
    "loss is tensor(nan) at step 0; aspect_ratio 16/9; top_p/top_k",
    "画像の解像度が大きすぎます (8192x8192)。最大 4096x4096 までです。",
]


@pytest.mark.parametrize("text", CLEAN)
def test_clean_text_is_returned_unchanged(text: str) -> None:
    assert sanitize(text) == text


def test_clean_text_is_the_same_object() -> None:
    text = "max_tokens must be <= 4096, got 10000"
    assert sanitize(text) is text


# --- guarantees ----------------------------------------------------------------------------


@pytest.mark.parametrize("max_len", [0, 1, 5, 17, 18, 64, 100, 4096])
def test_bound_in_utf8_bytes(max_len: int) -> None:
    text = "é héllo wörld /home/x/y.py " * 500
    out = sanitize(text, max_len=max_len)
    assert _utf8_len(out) <= max_len
    assert sanitize(out, max_len=max_len) == out


def test_truncation_keeps_head_and_final_line() -> None:
    text = "ValueError: head " + "word " * 5000 + "\nFinalError: the line that matters"
    out = sanitize(text)
    assert _utf8_len(out) <= BOUND
    assert out.startswith("ValueError: head")
    assert out.endswith("FinalError: the line that matters")
    assert MARKER in out


def test_default_bound_is_the_record_message_bound() -> None:
    assert _utf8_len(sanitize("x " * 10_000)) <= BOUND


MIB = 1 << 20
ADVERSARIAL = {
    "posix": "/a" * (MIB // 2),
    "quoted_path": "'/home/" * (MIB // 7),
    "address": "<obj at 0x" * (MIB // 10),
    "dotted": "a." * (MIB // 2),
    "ipv4": "1.2.3." * (MIB // 6),
    "data_uri": "data:image/png;base64," + "," * MIB,
    "pem": "-----BEGIN PRIVATE KEY-----" * (MIB // 27),
    "bytes": "b'\\x" * (MIB // 4),
    "tensor": "tensor([" * (MIB // 8),
    "key_value": "password=" * (MIB // 9),
    "url": "https://" * (MIB // 8),
    "traceback": 'File "x", line 1\n' * (MIB // 18),
    "opaque": "A1b2" * (MIB // 4),
    "email": "a@b." * (MIB // 4),
    "path_and_address": "/a/0x7f8070a36957" * (MIB // 17),
    "bearer": "Bearer " * (MIB // 7),
    "windows": "C:\\" * (MIB // 3),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_mebibyte_inputs(name: str) -> None:
    text = ADVERSARIAL[name]
    out = sanitize(text)
    assert _utf8_len(out) <= BOUND
    assert sanitize(out) == out


def test_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        sanitize(b"bytes")  # type: ignore[arg-type,unused-ignore]


def test_lone_surrogate_is_an_error_not_a_panic() -> None:
    with pytest.raises(UnicodeEncodeError):
        sanitize("\ud800")


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("max_tokens", "max_tokens"),
        ("body.max_tokens", "max_tokens"),
        ("('body', 'messages', 0, 'content')", "messages[0].content"),
        ("body -> messages -> 0 -> content", "messages[0].content"),
        ("messages.2.content.0.type", "messages[2].content[0].type"),
        ("  temperature ", "temperature"),
    ],
)
def test_normalize_parameter(raw: str, normal: str) -> None:
    assert normalize_parameter(raw) == normal


# --- corpus scores -------------------------------------------------------------------------


def _load_score() -> ModuleType:
    path = SHARED / "score.py"
    if not path.exists():
        pytest.skip(f"shared scorer not found at {path}")
    spec = importlib.util.spec_from_file_location("sanitizer_score", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sanitizer_score"] = module
    spec.loader.exec_module(module)
    return module


def _assert_scores(res: dict[str, Any]) -> None:
    assert res["errors"] == [] and res["timeouts"] == []
    assert res["recall_micro"] >= 0.99, res["recall_micro"]
    assert res["keep_rate"] >= 0.995, res["keep_rate"]
    assert res["clean_unchanged"] >= 0.99, res["clean_unchanged"]


def test_dev_corpus_scores() -> None:
    score = _load_score()
    cases = score.load_corpus(str(SHARED / "dev.jsonl.gz"))
    _assert_scores(score.score(sanitize, cases, timeout=30, passes=0))


def test_own_cases_score() -> None:
    score = _load_score()
    cases = score.load_corpus(str(REPO / "tests" / "sanitize_cases.jsonl"))
    _assert_scores(score.score(sanitize, cases, timeout=30, passes=0))


def test_realistic_corpus_scores() -> None:
    """Real error text from vLLM and vLLM-Omni threads (each case cites its source)."""
    score = _load_score()
    cases = score.load_corpus(str(REPO / "tests" / "sanitizer" / "realistic.jsonl"))
    assert all(c["source"].startswith("https://github.com/") for c in cases)
    _assert_scores(score.score(sanitize, cases, timeout=30, passes=0))


def test_dev_corpus_is_idempotent() -> None:
    path = SHARED / "dev.jsonl.gz"
    if not path.exists():
        pytest.skip("shared corpus not found")
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["input"]
            once = sanitize(text)
            assert sanitize(once) == once


# --- properties ----------------------------------------------------------------------------

BENIGN = st.sampled_from(
    [
        "stage",
        "request",
        "failed",
        "max_tokens",
        "must",
        "be",
        "<=",
        "4096,",
        "got",
        "10000",
        "(talker)",
        "Qwen/Qwen2.5-Omni-7B",
        "top_p/top_k",
        "v0.11.0",
        "cuda:0",
        "torch.bfloat16",
        "https://huggingface.co/docs",
        "0.0.0.0:8000",
        "shape",
        "(1, 80, 3000)",
        "16/9",
        "cmpl-2a2b7b9f0b7c6f0bbf2903b56e77b8c7",
        "error:",
        "the",
        "token",
        "budget",
        "is",
        "exhausted.",
        "model",
        "'alloy'",
        "[0, 1, 2]",
        "status",
        "503",
    ]
)
CLEAN_TEXT = st.lists(BENIGN, min_size=1, max_size=30).map(" ".join)

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _body(min_size: int, max_size: int = 48) -> st.SearchStrategy[str]:
    return st.text(alphabet=ALNUM, min_size=min_size, max_size=max_size).filter(
        lambda s: any(c.isdigit() for c in s) and sum(c.isupper() for c in s) >= 2 and sum(c.islower() for c in s) >= 2
    )


def _hexs(n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet="0123456789abcdef", min_size=n, max_size=n)


USER = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10)
OCTET = st.integers(min_value=0, max_value=255)

# (strategy producing (text to plant, secret that must disappear))
PLANTED = st.one_of(
    _body(24).map(lambda b: ("sk-proj-" + b, "sk-proj-" + b)),
    _body(40).map(lambda b: ("sk-ant-api03-" + b, b)),
    _body(34, 34).map(lambda b: ("hf_" + b, b)),
    _body(36, 36).map(lambda b: ("ghp_" + b, b)),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(
        lambda b: ("AKIA" + b, "AKIA" + b)
    ),
    _body(35, 35).map(lambda b: ("AIza" + b, b)),
    _body(20).map(lambda b: ("Authorization: Bearer " + b, b)),
    _body(12).map(lambda b: ("password=" + b + "!", b)),
    _body(12).map(lambda b: ('{"api_key": "' + b + '"}', b)),
    st.tuples(USER, _body(12)).map(lambda t: (f"redis://{t[0]}:{t[1]}@cache.example.com:6379", t[1])),
    st.tuples(USER, USER).map(lambda t: (f"/home/{t[0]}/models/{t[1]}.safetensors", f"/home/{t[0]}/")),
    st.tuples(USER, USER).map(lambda t: (f"C:\\Users\\{t[0]}\\{t[1]}.dll", f"C:\\Users\\{t[0]}")),
    st.tuples(USER, USER).map(lambda t: (f"{t[0]}.{t[1]}@example.com", f"{t[0]}.{t[1]}@")),
    st.tuples(OCTET, OCTET, OCTET).map(lambda t: (f"10.{t[0]}.{t[1]}.{t[2]}", f"10.{t[0]}.{t[1]}.{t[2]}")),
    st.tuples(OCTET, OCTET).map(lambda t: (f"192.168.{t[0]}.{t[1]}:8080", f"192.168.{t[0]}.{t[1]}")),
    _hexs(12).map(lambda h: (f"<obj at 0x7f{h}>", "0x7f" + h)),
    _body(64, 200).map(lambda b: ("data:image/png;base64," + b, b)),
    _body(30).map(lambda b: (f"eyJhbGciOiJIUzI1NiJ9.eyJ{b}.{b}", "eyJhbGciOiJIUzI1NiJ9")),
    _body(40).map(lambda b: ("-----BEGIN PRIVATE KEY-----\n" + b + "\n-----END PRIVATE KEY-----", b)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(before=CLEAN_TEXT, planted=PLANTED, after=CLEAN_TEXT)
def test_planted_secrets_always_disappear(before: str, planted: tuple[str, str], after: str) -> None:
    text, secret = planted
    out = sanitize(f"{before} {text} {after}")
    assert secret not in out
    assert sanitize(out) == out


@settings(max_examples=300, deadline=None)
@given(CLEAN_TEXT)
def test_clean_text_survives(text: str) -> None:
    assert sanitize(text) == text


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=600), st.integers(min_value=0, max_value=5000))
def test_any_text_is_bounded_and_idempotent(text: str, max_len: int) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return
    out = sanitize(text, max_len=max_len)
    assert _utf8_len(out) <= max_len
    assert sanitize(out, max_len=max_len) == out


def test_the_benchmarks_default_corpora_are_the_checkouts() -> None:
    """`omni-errors bench` and `make bench` measure the corpora of this checkout by default."""
    from omni_errors_tools.bench import sanitizer

    realistic = Path(__file__).resolve().parent / "sanitizer" / "realistic.jsonl"
    dev = Path(__file__).resolve().parents[2] / "shared" / "sanitizer" / "dev.jsonl.gz"
    assert sanitizer.DEFAULT_CORPORA == (dev, realistic)
    assert realistic.exists()
