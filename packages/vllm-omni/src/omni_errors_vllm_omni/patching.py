"""Replacing the manifest's attributes of one imported module, all or none, and putting them back.

`apply(module, targets)` resolves every target's owner and attribute before it replaces any, so a
module whose layout differs keeps vLLM-Omni's behaviour whole; a factory that fails is an
`ApplyError` naming its target (the plugin then refuses, and undoes the rest: `register`). Each
replacement is recorded with the attribute it replaced; `unapply()` restores them all, in reverse
order. Replacements are marked, which makes applying twice a no-op (vLLM may load plugins more
than once in a process).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from omni_errors_vllm_omni.manifest import Target

__all__ = ["ApplyError", "LayoutError", "applied", "apply", "is_patched", "point_route", "unapply"]

_MARK = "__omni_errors_original__"


class ApplyError(RuntimeError):
    """A target could not be applied to its imported module."""


class LayoutError(ApplyError):
    """An imported module lacks an attribute its manifest entry names."""


@dataclass(frozen=True, slots=True)
class _Applied:
    target: Target
    owner: Any
    original: Any  # as stored (a staticmethod/classmethod object, not the bound function)
    own: bool  # whether the owner itself held it (else it was inherited: removing restores it)


_lock = threading.Lock()
_applied: list[_Applied] = []


def _unwrap(value: Any) -> Any:
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def is_patched(value: Any) -> bool:
    """Whether `value` is a replacement this package installed."""
    return hasattr(_unwrap(value), _MARK)


def point_route(router: Any, original: Any, replacement: Any) -> None:
    """Point the routes of `router` whose endpoint is `original` at `replacement`: a router registers
    its routes when its module is imported, and an app that includes it later copies what they hold."""
    for route in router.routes:
        if getattr(route, "endpoint", None) is original:
            route.endpoint = replacement


def _raw(owner: Any, name: str) -> tuple[Any, bool]:
    """The attribute as stored, and whether `owner` itself holds it."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in vars(klass):
                return vars(klass)[name], klass is owner
    return getattr(owner, name), True


def _factory(target: Target) -> Any:
    file, _, function = target.patch.partition(":")
    return getattr(importlib.import_module(f"omni_errors_vllm_omni.{file}"), function)


def apply(module: ModuleType, targets: Sequence[Target]) -> None:
    """Replace each target's attribute of `module` with its factory's result; none if one is missing."""
    owners = []
    for target in targets:
        owner = getattr(module, target.owner) if target.owner else module
        if owner is None or not hasattr(owner, target.name):
            raise LayoutError(f"{target.key} is missing; {module.__name__} is left unpatched")
        owners.append(owner)
    with _lock:
        for target, owner in zip(targets, owners, strict=True):
            current, own = _raw(owner, target.name)
            if is_patched(current):
                continue
            try:
                new = _factory(target)(module, current)
            except Exception as exc:
                raise ApplyError(f"{target.key}: its patch could not be built ({type(exc).__name__}: {exc})") from exc
            try:
                setattr(_unwrap(new), _MARK, target.key)
            except (AttributeError, TypeError):  # a class that refuses attributes: found by `applied()`
                pass
            setattr(owner, target.name, new)
            _applied.append(_Applied(target, owner, current, own))


def applied() -> list[Target]:
    """The targets replaced in this process, in the order they were."""
    with _lock:
        return [entry.target for entry in _applied]


def unapply() -> int:
    """Restore every original replaced in this process; returns how many."""
    with _lock:
        entries = list(reversed(_applied))
        _applied.clear()
    for entry in entries:
        if entry.own:
            setattr(entry.owner, entry.target.name, entry.original)
        else:
            delattr(entry.owner, entry.target.name)
    return len(entries)
