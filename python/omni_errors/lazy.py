"""Package attributes resolved on first use (PEP 562), for packages whose names import heavy modules."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each name of `table` (name -> module) is imported
    from its module when first read, then kept in the package like an ordinary attribute."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
