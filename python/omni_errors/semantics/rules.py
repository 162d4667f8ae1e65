"""Exception -> `OmniErrorDetails` by table: a `Rule` per class, looked up along the exception's MRO.

`RuleTable.lookup(cls)` takes the first class of `cls.__mro__` that has a row, so a subclass
inherits its parent's row until it gets its own. A row may name its class lazily (`LazyClass`): it
is looked up in `sys.modules`, never imported, because an exception of a class can only exist
once its module is loaded. `table.extend(rows)` puts more specific rows in front of a table: the
vLLM-free core (`omni_errors.semantics.core_table`) is extended that way by `omni_errors.semantics.classification`.

This module imports nothing heavy.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from omni_errors._native import OmniErrorDetails
from omni_errors.errors import InvalidRecordError
from omni_errors.semantics.http_status import Category, category_for_status, error_type_for, phrase, type_for_status
from omni_errors.semantics.ids import with_ids

__all__ = ["Category", "LazyClass", "NamedClass", "Rule", "RuleTable", "build_record"]

# Fields of an exception that become public text; returns (message, parameter).
Extractor = Callable[[BaseException], tuple[str, "str | None"]]


@dataclass(frozen=True, slots=True)
class Rule:
    """How instances of one class are classified.

    Attributes:
        category: "client" or "server"; None when the class carries its own HTTP status
            (`GracefulHTTPError`, Starlette `HTTPException`) and the category follows from it.
        status: the status, or the default when `status_attr` is missing or out of range.
        error_type: the OpenAI-style `type`; None derives it from the status (`type_for_status`).
        status_attr: instance attribute holding the status, if the class carries one.
        parameter_attr: instance attribute naming the rejected request parameter.
        message_attr: instance attribute holding the public message (else `args[0]`, else `str(exc)`).
        type_attr: instance attribute holding the OpenAI-style type (normalised to an identifier).
        public_message: a fixed public message that replaces the exception's own text.
        stage_attr: instance attribute holding the id of the stage that raised.
        fatal: the failure ends the stage (server only).
        carrier: the exception carries its canonical record in `.details`, used as is.
        raw_fallback: a raw Python type kept for vLLM's migration; applies only while fallbacks are on.
        stage_deadline: applies only when the classifier is told the stage (a wait on a stage expired).
        extract: a function producing (message, parameter) for classes whose text needs assembling.
        summary: one line for the catalogue.
    """

    category: Category | None
    status: int
    error_type: str | None = None
    status_attr: str | None = None
    parameter_attr: str | None = None
    message_attr: str | None = None
    type_attr: str | None = None
    public_message: str | None = None
    stage_attr: str | None = None
    fatal: bool = False
    carrier: bool = False
    raw_fallback: bool = False
    stage_deadline: bool = False
    extract: Extractor | None = None
    summary: str = ""

    def record(self, message: str, *, request_id: str | None = None, stage_id: int | None = None) -> OmniErrorDetails:
        """A record of this rule's category, status, type and fatality, with `message` as its text."""
        assert self.category is not None, "a rule whose category follows from the status needs an exception"
        return build_record(
            message,
            self.category,
            self.status,
            self.error_type or type_for_status(self.status),
            fatal=self.fatal,
            request_id=request_id,
            stage_id=stage_id,
        )


@dataclass(frozen=True)
class NamedClass:
    """A class named by the module that defines it and its name, so that a table naming it can be
    read (the catalogue) without importing that module; `load()` imports it."""

    module: str
    name: str

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    def load(self) -> type[BaseException]:
        """The class, its module imported (ImportError if absent, TypeError if not an exception class)."""
        cls = getattr(importlib.import_module(self.module), self.name)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            why = f"{self.qualname} is not an exception class"
            raise TypeError(why)  # omni-errors: ignore[OE102]: a defect of the table, not of a request
        return cls


@dataclass(frozen=True)
class LazyClass(NamedClass):
    """A class named by module and attribute, resolved only from modules already imported (a
    module that may be absent), never imported by the table."""

    def resolve(self) -> type[BaseException] | None:
        """The class, or None while its module is not loaded (no instance can exist then)."""
        cls = getattr(sys.modules.get(self.module), self.name, None)
        return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


Row = tuple["type[BaseException] | LazyClass", Rule]


def build_record(
    message: str,
    category: Category,
    status: int,
    error_type: str,
    *,
    fatal: bool = False,
    **optional: Any,  # parameter and request_id (str), stage_id (int), each optional
) -> OmniErrorDetails:
    """Construct a record on an error path, where it must not fail.

    An optional field that breaks a limit is dropped, an `error_type` that is not an identifier
    becomes the status's own, and text that cannot be encoded is replaced, rather than raising.
    """
    fields = dict(optional)
    for _ in range(len(fields) + 3):
        try:
            return OmniErrorDetails(message, category, status, error_type, fatal=fatal, **fields)
        except InvalidRecordError as exc:
            if exc.field in fields and fields[exc.field] is not None:
                fields[exc.field] = None
                continue
            if exc.field == "error_type" and error_type != type_for_status(status):
                error_type = type_for_status(status)
                continue
            raise
        except UnicodeError:
            message = message.encode("utf-8", "replace").decode("utf-8")
    raise AssertionError("unreachable")  # pragma: no cover


class RuleTable:
    """Rows of (class or `LazyClass`, `Rule`), most specific first; `BaseException` should close it."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows: tuple[Row, ...] = tuple(rows)
        self._rules: dict[type[BaseException], Rule] = {}
        for cls, rule in self.rows:
            if isinstance(cls, type):
                self._rules.setdefault(cls, rule)
        self._lazy = [(cls, rule) for cls, rule in self.rows if isinstance(cls, LazyClass)]
        self._cache: dict[tuple[type[BaseException], bool, bool], Rule] = {}

    def extend(self, rows: Sequence[Row]) -> RuleTable:
        """A new table: `rows` first, then this table's rows."""
        return RuleTable([*rows, *self.rows])

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def _resolve_lazy(self) -> None:
        pending = []
        for lazy, rule in self._lazy:
            cls = lazy.resolve()
            if cls is None:
                pending.append((lazy, rule))
            else:
                self._rules.setdefault(cls, rule)
        self._lazy = pending

    def lookup(self, cls: type[BaseException], *, raw_fallbacks: bool = True, stage_known: bool = False) -> Rule:
        """The first rule along `cls.__mro__`, skipping fallback rows when they are off."""
        key = (cls, raw_fallbacks, stage_known)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if self._lazy:
            self._resolve_lazy()
        for base in cls.__mro__:
            rule = self._rules.get(base)
            if rule is None or (rule.raw_fallback and not raw_fallbacks) or (rule.stage_deadline and not stage_known):
                continue
            if len(self._cache) < 4096:  # bounded: classes can be created at runtime
                self._cache[key] = rule
            return rule
        raise LookupError(f"no rule for {cls.__qualname__}; a table must end with BaseException")

    def classify(
        self,
        exc: BaseException,
        *,
        request_id: str | None = None,
        stage_id: int | None = None,
        raw_fallbacks: bool = True,
    ) -> OmniErrorDetails:
        """The canonical record of `exc` by this table (see `omni_errors.semantics.classification.classify`)."""
        rule = self.lookup(type(exc), raw_fallbacks=raw_fallbacks, stage_known=stage_id is not None)
        carried = getattr(exc, "details", None) if rule.carrier else None
        if isinstance(carried, OmniErrorDetails):
            return with_ids(carried, request_id=request_id, stage_id=stage_id)
        category, status = _status_of(exc, rule)
        try:
            message, parameter = _message_of(exc, rule)
        except Exception:  # omni-errors: ignore[OE202]: a broken __str__ or attribute must not break the error path
            message, parameter = "", None
        if not message.strip():
            message = phrase(status)
        own_stage = getattr(exc, rule.stage_attr, None) if rule.stage_attr else None
        return build_record(
            message,
            category,
            status,
            rule.error_type or error_type_for(getattr(exc, rule.type_attr, None) if rule.type_attr else None, status),
            fatal=rule.fatal and category == "server",
            parameter=parameter,
            request_id=request_id,
            stage_id=own_stage if isinstance(own_stage, int) else stage_id,
        )


def _status_of(exc: BaseException, rule: Rule) -> tuple[Category, int]:
    status = rule.status
    if rule.status_attr is not None:
        value = getattr(exc, rule.status_attr, None)
        if isinstance(value, int):
            status = int(value)
    if rule.category is not None:
        low = 400 if rule.category == "client" else 500
        return rule.category, status if low <= status < low + 100 else rule.status
    return category_for_status(status)


def _message_of(exc: BaseException, rule: Rule) -> tuple[str, str | None]:
    parameter = getattr(exc, rule.parameter_attr, None) if rule.parameter_attr else None
    if rule.extract is not None:
        return rule.extract(exc)
    if rule.public_message is not None:
        message: object = rule.public_message
    elif rule.message_attr is not None and getattr(exc, rule.message_attr, None) is not None:
        message = getattr(exc, rule.message_attr)
    elif exc.args and isinstance(exc.args[0], str):
        # args[0], not str(exc): VLLMValidationError.__str__ appends the rejected value.
        message = exc.args[0]
    else:
        message = str(exc)
    return str(message), parameter if isinstance(parameter, str) else None
