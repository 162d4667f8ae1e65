"""Run a function right after a module is imported (a post-import hook, as PEP 369 proposed).

The plugin is loaded by vLLM in every process that loads general plugins, including plain vLLM
processes and diffusion workers that never import vLLM-Omni's orchestrator or API server.
Importing those modules just to patch them would cost seconds and hundreds of MB there, so each
patch waits for its module: if the module is already loaded it is patched at once, otherwise a
finder on `sys.meta_path` patches it as soon as its code has run, before anyone can use it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = ["cancel", "pending", "when_imported"]

_log = logging.getLogger(LOG_NAME)

Hook = Callable[[ModuleType], None]

_lock = threading.RLock()
_pending: dict[str, list[Hook]] = {}


def _run(module: ModuleType, hooks: list[Hook]) -> None:
    for hook in hooks:
        try:
            hook(module)
        except Exception:  # a broken hook must not break the import that triggered it
            _log.exception("omni-errors: a post-import hook for %s failed", module.__name__)


class _Loader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the hooks for the module it executed."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        # The rest of the real loader's API is the module's own: `get_source` (tracebacks, inspect,
        # linecache), `get_code`, `get_filename`, `is_package`, `get_resource_reader`.
        return getattr(self._inner, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        with _lock:
            hooks = _pending.pop(module.__name__, [])
            _retire_finder_when_idle()
        _run(module, hooks)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the modules that have pending hooks."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_finder = _Finder()


def _retire_finder_when_idle() -> None:
    """With nothing pending, the finder leaves `sys.meta_path`: later imports do not pass through it."""
    if not _pending and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


def when_imported(name: str, hook: Hook) -> None:
    """Call `hook(module)` once `name` is imported: now if it already is, else right after its import."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _pending.setdefault(name, []).append(hook)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    _run(module, [hook])


def cancel(hook: Hook) -> None:
    """Forget `hook` for every module not imported yet (the plugin being switched off)."""
    with _lock:
        for name in list(_pending):
            _pending[name] = [h for h in _pending[name] if h is not hook]
            if not _pending[name]:
                del _pending[name]
        _retire_finder_when_idle()


def pending() -> dict[str, int]:
    """How many hooks wait for each module not imported yet."""
    with _lock:
        return {name: len(hooks) for name, hooks in _pending.items()}
