"""Shared test configuration: `tests/` is importable so helpers like reference_decoder load by name."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
