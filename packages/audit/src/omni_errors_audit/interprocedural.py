"""Following the exception across the audited tree: which functions and methods send a parameter to a
client, raise it or return it to one, which classes are response models and which are protocol errors
whose message is public; and so which of the sites the files left open are reported (OE201, OE202,
OE205). It joins every file's flow records (flows.py) and runs on every audit, cached or not.

- A function's parameter reaches a client when the function places it in a client sink, passes it to a
  callee whose parameter does, to a response model's constructor or a client-error class, or returns it
  from a function whose return reaches a client; transitively, to a fixed point.
- A function's return reaches a client when it is a route or exception handler, or when some caller
  places its result in a sink, passes it where a parameter reaches a client, or returns it from a
  function whose return does. This is the audit's reachability for what is client-facing only by use:
  an error body, a message or a response object that no route, handler or sink receives is not a leak.
- A class is a response model when its instances reach a client that way, when a route names it
  (return annotation, `response_model`, `responses`), when a serving function returns it beside
  `ErrorResponse`, or when it is the type of a response model's field; subclasses included.
- A class of the tree is a client-error class (its message is public) when it derives from one of
  names.PUBLIC_ERRORS, or when a handler sends a caught instance's own error code with its text to a
  client (`payload(exc.code, str(exc))`) or re-raises it as such a class.
- A parameter fails its caller when it is raised, chained from, set on a future, or passed to a
  callee whose parameter fails.

Callees are matched as flows.py names them: resolved names, `self.m` through the class and its bases
(vLLM's bases through names.EXTERNAL_SINK_PARAMS), and `.m` by name against every function called `m`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omni_errors_audit import names as N
from omni_errors_audit.model import FileResult, RawSite

Slot = tuple[int, str]  # (position, keyword) of an argument


def _last(ref: str) -> str:
    return ref.rpartition(":")[2].rpartition(".")[2] if ref[:1] in "@^" else ref[1:].rpartition(".")[2]


class Tree:
    """Every file's flows, joined; built once per audit (see the module docstring)."""

    def __init__(
        self, results: Iterable[FileResult], canonical: Any, classes: dict[str, list[str]], functions: set[str]
    ) -> None:
        self.canonical = canonical
        self.classes = classes
        self.flows: dict[str, dict[str, Any]] = {}
        self.members: dict[str, set[str]] = {}
        self.fields: dict[str, list[str]] = {}
        self.by_name: dict[str, list[str]] = {}
        self.defined: set[str] = set()
        seeds: list[str] = []
        renders: list[list[Any]] = []
        for r in results:
            self.flows.update(r.flows)
            self.members.update((c, set(m)) for c, m in r.members.items())
            self.fields.update(r.fields)
            self.defined.update(r.defined)
            seeds.extend(r.models)
            seeds.extend(r.entries)
            renders.extend(r.renders)
        # Every function and method of the tree (a function without flows can still have its return reach
        # a client: a validator returning a message), matched by last name for `.m` references.
        self.known: set[str] = set(functions) | self.flows.keys()
        self.known.update(f"{cls}.{m}" for cls, methods in self.members.items() for m in methods)
        for name in self.known:
            self.by_name.setdefault(name.rpartition(".")[2], []).append(name)
        self._targets: dict[str, tuple[str, ...]] = {}
        self._mro: dict[str, list[str]] = {}
        self._children: dict[str, list[str]] = {}
        self._subclasses: dict[str, set[str]] = {}
        for cls, bases in classes.items():
            for base in bases:
                self._children.setdefault(canonical(base), []).append(cls)
        self.sink: dict[str, set[int | str]] = {}
        self.fail: dict[str, set[int | str]] = {}
        self.reach: set[str] = {t for ref in seeds for t in self.targets(ref)}  # returns/instances reach clients
        self.reach.update(f for f, rec in self.flows.items() if rec.get("e"))
        self.models: set[str] = set()
        self.public: set[str] = {c for c in classes if self._derives_public(c)}
        self._solve(renders)

    # -- resolving references --------------------------------------------------------------------
    def targets(self, ref: str) -> tuple[str, ...]:
        """The functions, classes or vLLM methods a callee reference may call."""
        found = self._targets.get(ref)
        if found is None:
            found = self._targets[ref] = tuple(self._resolve(ref))
        return found

    def _resolve(self, ref: str) -> list[str]:
        kind, rest = ref[:1], ref[1:]
        if kind == "=":
            name = rest if rest in self.known or rest in self.classes else self.canonical(rest)
            return [name] if name in self.known or name in self.classes else []
        if kind == ".":
            return self.by_name.get(rest, [])
        if kind in "@^":
            owner, _, method = rest.partition(":")
            owner = self.canonical(owner)
            chain = self.mro(owner)
            found = []
            for cls in chain[1:] if kind == "^" else chain:
                if method in self.members.get(cls, ()) or f"{cls}.{method}" in N.EXTERNAL_SINK_PARAMS:
                    found.append(f"{cls}.{method}")
                    break
            if kind == "@":  # `self.m()` runs the override of the object's class: every subclass's
                found.extend(
                    sorted(f"{sub}.{method}" for sub in self.subclasses(owner) if method in self.members.get(sub, ()))
                )
            return found
        return []

    def subclasses(self, cls: str) -> set[str]:
        found = self._subclasses.get(cls)
        if found is None:
            found = self._subclasses[cls] = set()
            todo = list(self._children.get(cls, ()))
            while todo:
                sub = todo.pop()
                if sub not in found:
                    found.add(sub)
                    todo.extend(self._children.get(sub, ()))
        return found

    def mro(self, cls: str) -> list[str]:
        """`cls` and its bases, depth first (bases outside the tree end their branch)."""
        found = self._mro.get(cls)
        if found is None:
            self._mro[cls] = [cls]  # a cycle ends here
            found = [cls]
            for base in self.classes.get(cls, ()):
                for c in self.mro(self.canonical(base)):
                    if c not in found:
                        found.append(c)
            self._mro[cls] = found
        return found

    def _derives_public(self, cls: str) -> bool:
        return any(c.rpartition(".")[2] in N.PUBLIC_ERRORS for c in self.mro(cls))

    # -- what a callee does with an argument -------------------------------------------------------
    def accepts(self, target: str, position: int, keyword: str) -> bool:
        """Whether the argument at (position, keyword) of a call to `target` reaches a client."""
        if target in self.models or target in self.public:
            return True
        external = N.EXTERNAL_SINK_PARAMS.get(target)
        if external is not None:
            return position == external[0] or keyword == external[1]
        found = self.sink.get(target)
        return found is not None and ((keyword in found) if keyword else (position in found))

    def fails(self, target: str, position: int, keyword: str) -> bool:
        found = self.fail.get(target)
        return found is not None and ((keyword in found) if keyword else (position in found))

    def reaches(self, ref: str, position: int, keyword: str) -> bool:
        return any(self.accepts(t, position, keyword) for t in self.targets(ref))

    def is_public(self, caught: tuple[str, ...]) -> bool:
        """Whether every exception a piece of text comes from was caught as a client-error class."""
        return all(c and (c.rpartition(".")[2] in N.PUBLIC_TEXT or self.canonical(c) in self.public) for c in caught)

    # -- the fixed point -------------------------------------------------------------------------
    def _solve(self, renders: list[list[Any]]) -> None:
        """Propagate to the fixed point with a work list: each fact, once learned, re-reads only the
        entries that depend on it (a callee's parameters, a function's return, a class's kind)."""
        by_target: dict[str, list[tuple[str, Any]]] = {}  # callee -> the entries that read what it does

        def depend(ref: str, entry: tuple[str, Any]) -> None:
            for t in self.targets(ref):
                by_target.setdefault(t, []).append(entry)

        self._returns: dict[str, list[str]] = {}
        for name, rec in self.flows.items():
            params = rec.get("p", {})
            for ref, position, keyword, param in rec.get("c", ()):
                depend(ref, ("call", (name, ref, position, keyword, _slots(param, params))))
            for producer, consumer, position, keyword in rec.get("rc", ()):
                if self.targets(producer):
                    depend(consumer, ("result", (producer, consumer, position, keyword)))
            returned = [ref for ref in rec.get("r", ()) if self.targets(ref)]
            if returned:
                self._returns[name] = returned
        for caught, consumer, position, keyword in renders:
            if consumer:
                depend(consumer, ("render", (caught, consumer, position, keyword)))
        self._queue: list[tuple[str, str]] = []
        for name, rec in self.flows.items():
            params = rec.get("p", {})
            for param in rec.get("s", ()):
                self._grow(self.sink, name, _slots(param, params), "accept")
            for param in rec.get("f", ()):
                self._grow(self.fail, name, _slots(param, params), "fail")
            for producer in rec.get("rs", ()):
                for t in self.targets(producer):
                    self._reach(t)
        for seed in list(self.reach):
            self.reach.discard(seed)
            self._reach(seed)
        for cls in list(self.public):
            self.public.discard(cls)
            self._publish(cls)
        for caught, consumer, _, _ in renders:
            if not consumer:
                for cls in map(self.canonical, caught):
                    if cls in self.classes:
                        self._publish(cls)
        queue = self._queue
        while queue:
            event, target = queue.pop()
            if event == "reach":
                for ref in self._returns.get(target, ()):
                    for t in self.targets(ref):
                        self._reach(t)
                record = self.flows.get(target, {})
                for param in record.get("rp", ()):
                    self._grow(self.sink, target, _slots(param, record.get("p", {})), "accept")
                continue
            for kind, entry in by_target.get(target, ()):
                if kind == "call":
                    name, ref, position, keyword, slots = entry
                    if event == "accept" and self.accepts(target, position, keyword):
                        self._grow(self.sink, name, slots, "accept")
                    elif event == "fail" and self.fails(target, position, keyword):
                        self._grow(self.fail, name, slots, "fail")
                elif event == "accept" and self.accepts(target, entry[2], entry[3]):
                    if kind == "result":
                        for t in self.targets(entry[0]):
                            self._reach(t)
                    else:  # a render: the caught classes are protocol errors
                        for cls in map(self.canonical, entry[0]):
                            if cls in self.classes:
                                self._publish(cls)

    def _grow(self, facts: dict[str, set[int | str]], name: str, slots: set[int | str], event: str) -> None:
        found = facts.setdefault(name, set())
        if not slots <= found:
            found |= slots
            self._queue.append((event, name))

    def _reach(self, target: str) -> None:
        if target in self.reach:
            return
        self.reach.add(target)
        self._queue.append(("reach", target))
        if target in self.classes:
            self._model(target)

    def _model(self, cls: str) -> None:
        """A response model, the types of its fields and its subclasses."""
        if cls in self.models:
            return
        self.models.add(cls)
        self._queue.append(("accept", cls))
        for ref in self.fields.get(cls, ()):
            for t in self.targets(ref):
                if t in self.classes:
                    self._model(t)
        for sub in self._children.get(cls, ()):
            self._model(sub)

    def _publish(self, cls: str) -> None:
        """A client-error class of the tree, and its subclasses."""
        if cls in self.public:
            return
        self.public.add(cls)
        self._queue.append(("accept", cls))
        for sub in self._children.get(cls, ()):
            self._publish(sub)

    # -- the sites -------------------------------------------------------------------------------
    def followed(self, result: FileResult) -> list[RawSite]:
        """The OE201, OE202 and OE205 sites of one file that depend on the rest of the tree."""
        out: list[RawSite] = [k.site for k in result.leaks if not self.is_public(k.caught)]
        for f in result.forwarded:
            if self.is_public(f.caught):
                continue
            if self.reaches(f.callee, f.position, f.keyword) or (f.in_sink and _last(f.callee) in self.defined):
                out.append(f.site)
        out.extend(r.site for r in result.returned if r.function in self.reach and not self.is_public(r.caught))
        for u in result.unanswered:
            message = self.answer(u.callees, u.message_in)
            if message:
                out.append(u.site._replace(message=f"`except ValueError` answers {message}"))
        for h in result.handled:
            if not any(self.fails(t, p, k) for ref, p, k in h.handoffs for t in self.targets(ref)):
                out.append(h.site)
        return out

    def answer(self, callees: tuple[str, ...], message_in: str) -> str:
        """How an `except ValueError` clause answers the client with a 4xx through the tree, or ""."""
        for ref in callees:
            for t in self.targets(ref):
                status = self.flows.get(t, {}).get("d")
                if status:
                    return f"`{_last(ref)}` (its status defaults to {status})"
        for ref in callees:
            for t in self.targets(ref):
                if t in self.public:
                    return f"`raise {_last(ref)}` (a client error of the tree)"
                if self.sink.get(t) or t in N.EXTERNAL_SINK_PARAMS:
                    return f"`{_last(ref)}`, which sends the error to the client"
        if message_in and message_in in self.reach:
            return f"with a message that `{message_in.rpartition('.')[2]}` returns to a client"
        return ""


def _slots(param: str, params: dict[str, int]) -> set[int | str]:
    position = params.get(param, -1)
    return {param} if position < 0 else {param, position}
