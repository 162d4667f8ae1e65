"""The random draw behind the `draw` part of the labelled sample (docs/audit.md, *Precision and recall*).

`python tests/audit/label_draw.py [TREE]` lists, in the order they were read, the files of the vllm-omni
0.30 wheel that the sample did not cover before the draw and that hold an `except` clause, shuffled with
a fixed seed in two strata: files that serve clients (under `entrypoints/`, or importing fastapi,
starlette, aiohttp or websockets) and the rest. Under each file it prints the candidates a reader goes
through: every `except` clause (its types) and every expression that makes exception text (`str(e)`,
`repr(e)`, `f"{e}"`, `e.args`, `e.message`, `traceback.format_exc()`). The list shares no code with the
audit; the labels are what reading those lines and their functions decided.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 29
# Files the sample covered before the draw (its first 287 sites): the draw skips them.
BEFORE_DRAW = 287
# How many files of each stratum were read, in the drawn order: every serving file, and the first 32
# of the others (by then the draw held more than 50 sites).
READ = {"serving": 29, "other": 32}
_SERVES = re.compile(r"^\s*(?:from|import)\s+(?:fastapi|starlette|aiohttp|websockets)\b", re.MULTILINE)
_TEXT_ATTRS = frozenset({"args", "message", "msg", "detail", "reason", "strerror"})


def covered() -> set[str]:
    rows = json.loads((HERE / "labels" / "vllm-omni-0.30.json").read_text(encoding="utf-8"))["labels"]
    return {r["site"].rsplit(":", 1)[0] for r in rows[:BEFORE_DRAW]}


def _has_handler(text: str) -> bool:
    return any(isinstance(n, ast.ExceptHandler) for n in ast.walk(ast.parse(text)))


def strata(tree: Path) -> tuple[list[str], list[str]]:
    """(serving files, other files), each shuffled with SEED; key paths (`vllm_omni/...`)."""
    done = covered()
    serving: list[str] = []
    other: list[str] = []
    for folder, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = Path(folder, name)
            key = f"{tree.name}/{path.relative_to(tree).as_posix()}"
            text = path.read_text(encoding="utf-8")
            # No `except` in the text, no handler: the parse is skipped, the result is the same.
            if key in done or "except" not in text or not _has_handler(text):
                continue
            (serving if key.startswith(f"{tree.name}/entrypoints/") or _SERVES.search(text) else other).append(key)
    rng = random.Random(SEED)
    rng.shuffle(serving)
    rng.shuffle(other)
    return serving, other


def candidates(text: str) -> list[str]:
    """`line: what` for every except clause, every parameter annotated as an exception, and every
    exception-text expression of one file."""
    tree = ast.parse(text)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            types = ast.unparse(node.type) if node.type is not None else "(bare)"
            out.append((node.lineno, f"except {types}" + (f" as {node.name}" if node.name else "")))
            if node.name:
                out.extend((line, f"  text of {node.name}: {what}") for line, what in _texts(node, node.name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for arg in args:
                if arg.annotation is not None and re.search(r"(Error|Exception)\b", ast.unparse(arg.annotation)):
                    out.append((node.lineno, f"def {node.name}({arg.arg}: {ast.unparse(arg.annotation)})"))
                    out.extend((line, f"  text of {arg.arg}: {what}") for line, what in _texts(node, arg.arg))
    return [f"{line}: {what}" for line, what in sorted(set(out))]


def _texts(owner: ast.ExceptHandler | ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.Module(body=owner.body, type_ignores=[])):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr"):
            if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == name:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Name) and node.value.id == name:
            found.append((node.lineno, f"f-string {{{name}}}"))
        elif isinstance(node, ast.Attribute) and node.attr in _TEXT_ATTRS and isinstance(node.value, ast.Name):
            if node.value.id == name:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("format_exc"):
            found.append((node.lineno, ast.unparse(node)))
    return found


def read(tree: Path) -> list[str]:
    """The files the draw read, in order."""
    serving, other = strata(tree)
    return serving[: READ["serving"]] + other[: READ["other"]]


def main(argv: list[str]) -> int:
    tree = Path(argv[0]) if argv else HERE.parents[1] / ".cache" / "vllm-omni-0.30.0" / "vllm_omni"
    for title, files in zip(("serving", "other"), strata(tree), strict=True):
        print(f"## {title}: {len(files)} files, the first {READ[title]} read")
        for key in files[: READ[title]]:
            print(key)
            text = (tree.parent / key).read_text(encoding="utf-8")
            for line in candidates(text):
                print(f"    {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
