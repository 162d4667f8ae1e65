"""The counts the docs quote, checked against the tree they describe: a change that alters one
fails here until the page says the new figure."""

from __future__ import annotations

import json
import re
from pathlib import Path

from omni_errors_tools.chaos.scenarios import of_target

ROOT = Path(__file__).resolve().parents[1]
NUMBER_WORDS = {"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def test_migration_quotes_the_baselines_gated_sites() -> None:
    baseline = json.loads((ROOT / "docs/audit/vllm-omni-0.30.baseline.json").read_text())
    sites = sum(row[2] for rows in baseline["files"].values() for row in rows)  # rule, fingerprint, count, ...
    assert baseline["sites"] == sites
    page = (ROOT / "docs/migration.md").read_text()
    quoted = re.search(r"vllm-omni-0\.30\.baseline\.json\) holds the ([\d,]+)\s+gated sites", page)
    assert quoted is not None, "docs/migration.md no longer says how many sites the baseline holds"
    assert _int(quoted.group(1)) == sites


def test_the_tour_lists_every_scenario_of_the_pipeline_with_its_exit_code() -> None:
    page = (ROOT / "docs/tour.md").read_text()
    table = re.findall(r"^\| `([a-z-]+)` \| .*?\bexit (\d+)\b.*\|$", page, flags=re.M)
    assert table == [(s.name, str(s.expect_exit)) for s in of_target("pipeline")]
    measured = re.search(r"^### Measured.*?^```\n(.*?)^```", page, flags=re.S | re.M)
    assert measured is not None
    rows = [line.split()[0] for line in measured.group(1).splitlines()[1:]]
    assert rows == [s.name for s in of_target("pipeline")]


def test_the_readme_counts_the_pipelines_scenarios() -> None:
    readme = (ROOT / "README.md").read_text()
    quoted = re.search(r"`omni-errors chaos` \| .*?(\w+) fault scenarios", readme)
    assert quoted is not None
    assert NUMBER_WORDS[quoted.group(1)] == len(of_target("pipeline"))
