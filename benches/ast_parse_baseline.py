"""The audit's named baseline: a plain single-threaded `ast.parse` of every `.py` file of a tree.

`python benches/ast_parse_baseline.py TREE` runs it once (for hyperfine, beside `omni-errors audit TREE`);
benches/test_bench_audit.py measures it with pytest-benchmark in the same run as the audit.
"""

from __future__ import annotations

import ast
import os
import sys


def python_files(root: str) -> list[str]:
    return sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(root)
        if "__pycache__" not in folder
        for name in names
        if name.endswith(".py")
    )


def parse_all(files: list[str]) -> int:
    for path in files:
        with open(path, "rb") as f:
            ast.parse(f.read())
    return len(files)


if __name__ == "__main__":
    print(parse_all(python_files(sys.argv[1])), "files parsed")
