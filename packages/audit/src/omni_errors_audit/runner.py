"""Run an audit: find the files, take what the cache has, scan the rest on every core, classify.

Files are dealt to `jobs` worker processes in chunks that shrink as the work left does (largest files
first), so both cores stay busy to the end; a handful of files is scanned in-process, where a pool would cost more
than it saves. Workers run with the garbage collector off: ASTs have no cycles and the workers are short;
so does the parent while it receives and joins the per-file records.
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from omni_errors_audit import project
from omni_errors_audit.cache import ResultCache, default_dir
from omni_errors_audit.discover import discover
from omni_errors_audit.model import FileResult, Site, SourceFile
from omni_errors_audit.progress import Progress
from omni_errors_audit.scan import ChunkItem, content_key, scan_chunk, unreadable

CHUNKS_PER_JOB = 8
SERIAL_BELOW = 24  # files: fewer than this are scanned in-process


@dataclass(slots=True)
class AuditReport:
    """The outcome of one audit."""

    roots: list[str]
    files: list[SourceFile]
    sites: list[Site]
    unparsable: list[tuple[SourceFile, str]]
    lines: int
    reraises: int
    raised_classes: dict[str, int]
    excluded: int = 0
    from_cache: int = 0
    jobs: int = 1
    seconds: float = 0.0
    baseline: dict[str, int] = field(default_factory=dict)  # set by baseline.apply: new/known/fixed


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def audit(
    paths: Sequence[str | Path],
    *,
    jobs: int | None = None,
    cache_dir: Path | None = None,
    use_cache: bool = True,
    exclude: Sequence[str] = (),
    progress: bool | None = None,
) -> AuditReport:
    """Audit every `.py` file under `paths`. Raises AuditInputError for a path that does not exist."""
    started = time.perf_counter()
    roots, files, excluded = discover(paths, exclude)
    jobs = max(1, jobs or available_cpus())
    cache = ResultCache(cache_dir or default_dir(), roots) if use_cache else None
    keys = _content_keys(files) if cache is not None else {}
    run_key = _run_key(files, keys) if cache is not None and len(keys) == len(files) else ""
    last = cache.last_run(run_key) if cache is not None and run_key else None
    if last is not None:  # nothing changed since the last run
        return _report(roots, files, project.Inventory.from_json(last), excluded, len(files), 1, started)
    results: dict[str, FileResult] = {}
    todo: list[SourceFile] = []
    for f in files:
        key = keys.get(f.path)
        hit = cache.get(key) if cache is not None and key else None
        if hit is None:
            todo.append(f)
        else:
            results[f.path] = hit
    bar = Progress(len(files), enabled=progress)
    bar.advance(len(files) - len(todo))
    in_pool = jobs > 1 and len(todo) >= SERIAL_BELOW
    try:
        with _collector_off() if in_pool else nullcontext():  # a scan in-process collects its visitors
            for path, key, result in _scan(todo, jobs, bar):
                results[path] = result
                if cache is not None and key:
                    cache.put(key, result)
    finally:
        bar.close()
    with _collector_off():
        inventory = project.build([(f, results[f.path]) for f in files])
    if cache is not None:
        cache.save()
        if run_key:
            cache.save_run(run_key, inventory.to_json())
    used = jobs if in_pool else 1
    return _report(roots, files, inventory, excluded, len(files) - len(todo), used, started)


def _report(
    roots: list[str],
    files: list[SourceFile],
    inventory: project.Inventory,
    excluded: int,
    from_cache: int,
    jobs: int,
    started: float,
) -> AuditReport:
    by_path = {f.path: f for f in files}
    return AuditReport(
        roots=roots,
        files=files,
        sites=inventory.sites,
        unparsable=[(by_path[path], error) for path, error in inventory.unparsable.items()],
        lines=inventory.lines,
        reraises=inventory.reraises,
        raised_classes=dict(inventory.raised_classes.most_common()),
        excluded=excluded,
        from_cache=from_cache,
        jobs=jobs,
        seconds=time.perf_counter() - started,
    )


@contextmanager
def _collector_off() -> Iterator[None]:
    """The garbage collector off: the per-file records and the sites made of them have no cycles, and
    collecting while a tree's worth of them arrive costs time for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _content_keys(files: list[SourceFile]) -> dict[str, str]:
    """path -> content key for every readable file (an unreadable one is scanned, where it is reported)."""
    keys = {}
    for f in files:
        try:
            with open(f.path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        keys[f.path] = content_key(data, f.module, f.is_package, f.key_path)
    return keys


def _run_key(files: list[SourceFile], keys: dict[str, str]) -> str:
    """Every file, as it is shown and as it is: the same key means the same report."""
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.display}\0{keys[f.path]}\n".encode())
    return h.hexdigest()


def _scan(todo: list[SourceFile], jobs: int, bar: Progress) -> Iterator[tuple[str, str, FileResult]]:
    items: list[ChunkItem] = [(f.path, f.module, f.is_package, f.key_path) for f in todo]
    if jobs == 1 or len(items) < SERIAL_BELOW:
        for item in items:
            yield from scan_chunk([item])
            bar.advance(1)
        return
    import multiprocessing  # here, not at the top: a fully cached run never starts a pool
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    chunks = _balance(todo, jobs * CHUNKS_PER_JOB)
    # fork is fastest and safe while this process has one thread; otherwise start clean interpreters.
    method = "fork" if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=gc.disable) as pool:
        futures = {pool.submit(scan_chunk, chunk): chunk for chunk in chunks}
        for future in as_completed(futures):
            try:
                done = future.result()
            except BrokenProcessPool:  # a worker was killed (out of memory?): its files are reported
                done = [
                    (p, "", unreadable(m, k, "the audit worker scanning it died")) for p, m, _, k in futures[future]
                ]
            bar.advance(len(done))
            yield from done


def _balance(files: list[SourceFile], jobs: int) -> list[list[ChunkItem]]:
    """Split files into chunks that shrink as the work left does (guided scheduling), largest files first.

    Each chunk holds 1/(2 x jobs) of the bytes still to scan, down to a floor of 1/(CHUNKS_PER_JOB x jobs x
    4): the workers take them in order, so the last ones are small and both finish within a small chunk
    of each other (equal chunks left up to one chunk, 1/16 of the tree, on one worker at the end).
    """
    sized = sorted(((_size(f.path), f) for f in files), key=lambda pair: pair[0], reverse=True)
    left = sum(size for size, _ in sized)
    floor = max(left // (CHUNKS_PER_JOB * jobs * 4), 1)
    chunks: list[list[ChunkItem]] = []
    chunk: list[ChunkItem] = []
    load = 0
    target = max(left // (2 * jobs), floor)
    for size, f in sized:
        chunk.append((f.path, f.module, f.is_package, f.key_path))
        load += size
        if load >= target:
            chunks.append(chunk)
            left -= load
            chunk, load = [], 0
            target = max(left // (2 * jobs), floor)
    if chunk:
        chunks.append(chunk)
    return chunks


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # scanned anyway: the worker reports it
