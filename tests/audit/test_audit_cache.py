"""The content-hash cache and the process pool: same results, fewer scans, robust to a bad cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_helpers import WriteTree
from omni_errors_audit import audit
from omni_errors_audit.cache import ResultCache

FILES = {
    f"mod{i}.py": f"def f{i}(x):\n    if x:\n        raise ValueError({i})\n    return x.get()\n" for i in range(40)
}


def test_a_rerun_reads_every_file_from_the_cache(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(FILES)
    cold = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    warm = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    assert (cold.from_cache, warm.from_cache) == (0, 41)
    assert warm.sites == cold.sites


def test_only_changed_files_are_scanned_again(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(FILES)
    audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    write_tree({"mod7.py": "raise TypeError('changed')\n"})
    report = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    assert report.from_cache == 40
    assert [s.rule for s in report.sites if s.path.endswith("/mod7.py")] == ["OE102"]


def test_an_unchanged_tree_is_answered_from_the_last_run(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(FILES)
    cold = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    (
        tmp_path / "cache" / next(p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".run.json"))
    ).unlink()
    warm = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)  # the per-file entries are gone
    assert warm.from_cache == 41 and warm.sites == cold.sites and warm.lines == cold.lines


def test_a_corrupt_cache_is_ignored_and_rewritten(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(FILES)
    first = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    cache_files = sorted((tmp_path / "cache").iterdir())
    assert [p.suffixes for p in cache_files] == [[".json"], [".run", ".json"]]
    for path in cache_files:
        path.write_text("{truncated", encoding="utf-8")
    again = audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    assert again.from_cache == 0 and again.sites == first.sites
    version = ResultCache(tmp_path / "cache", []).version
    assert all(json.loads(p.read_text(encoding="utf-8"))["version"] == version for p in cache_files)


def test_a_cache_written_by_other_audit_code_is_not_used(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(FILES)
    audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False)
    for cache_file in (tmp_path / "cache").iterdir():
        data = json.loads(cache_file.read_text(encoding="utf-8"))
        data["version"] = "an older rule set"
        cache_file.write_text(json.dumps(data), encoding="utf-8")
    assert audit([package], cache_dir=tmp_path / "cache", jobs=1, progress=False).from_cache == 0


def test_an_unwritable_cache_warns_and_the_audit_goes_on(
    write_tree: WriteTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = write_tree(FILES)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("", encoding="utf-8")  # a cache folder below a file cannot be made, not even by root
    report = audit([package], cache_dir=not_a_folder / "cache", jobs=1, progress=False)
    assert len(report.files) == 41
    assert "cache not written" in capsys.readouterr().err


def test_the_pool_finds_what_one_process_finds(write_tree: WriteTree) -> None:
    package = write_tree(FILES)
    serial = audit([package], use_cache=False, jobs=1, progress=False)
    pooled = audit([package], use_cache=False, jobs=2, progress=False)
    assert pooled.jobs == 2 and serial.jobs == 1
    assert pooled.sites == serial.sites
    assert len(pooled.sites) == 80  # one raw ValueError and one Queue.get() per module
