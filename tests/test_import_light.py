"""`import omni_errors` (record, codec, sanitizer, embedding) must not load torch or vLLM."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import omni_errors, omni_errors.embed, omni_errors.errors
d = omni_errors.OmniErrorDetails("x", "client", 400, "BadRequestError")
omni_errors.decode(omni_errors.encode(d))
omni_errors.sanitize("x")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "vllm", "msgpack", "msgspec", "fastapi"))
print(json.dumps(heavy))
"""


def test_import_does_not_load_heavy_modules() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []
