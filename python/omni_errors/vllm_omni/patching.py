"""Replacing attributes of vLLM-Omni's classes and modules: all of a module's patches, or none.

`apply(module, {(owner, name): make_new})` checks that every attribute exists before it replaces
any, so a module whose layout differs from the known one keeps vLLM-Omni's behaviour whole
(logged once) instead of being half patched. Each replacement is marked, which makes applying
twice a no-op (plugins may be loaded more than once in a process) and lets tests find originals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["apply", "is_patched", "original"]

_log = logging.getLogger("omni_errors.vllm_omni")

_MARK = "__omni_errors_original__"

Factory = Callable[[Any], Any]  # the original attribute -> its replacement


def is_patched(value: Any) -> bool:
    """Whether `value` is a replacement this package installed."""
    return hasattr(value, _MARK)


def original(value: Any) -> Any:
    """The attribute a replacement stands for (`value` itself when it is not one)."""
    return getattr(value, _MARK, value)


def _raw(owner: Any, name: str) -> Any:
    """The attribute as stored (a staticmethod/classmethod object, not the bound function)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
    return getattr(owner, name)


def apply(module: ModuleType, patches: Mapping[tuple[Any, str], Factory]) -> bool:
    """Replace every `(owner, name)` with `factory(original)`; nothing at all if one is missing."""
    missing = [f"{getattr(owner, '__name__', owner)}.{name}" for owner, name in patches if not hasattr(owner, name)]
    if missing:
        _log.error("omni-errors: %s lacks %s; leaving the whole module unpatched", module.__name__, ", ".join(missing))
        return False
    for (owner, name), factory in patches.items():
        current = _raw(owner, name)
        inner = current.__func__ if isinstance(current, (staticmethod, classmethod)) else current
        if is_patched(inner):
            continue
        new = factory(current)
        function = new.__func__ if isinstance(new, (staticmethod, classmethod)) else new
        try:
            setattr(function, _MARK, current)
        except (AttributeError, TypeError):  # a class or a builtin: mark it through a wrapper attribute
            pass
        setattr(owner, name, new)
    return True
