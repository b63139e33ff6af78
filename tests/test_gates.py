"""The gates: `ruff check kafkasim` and `mypy` (strict, over kafkasim/; both configured in
pyproject.toml) report nothing. Both are in the `test` extra, so a missing tool fails here
rather than skipping: a gate that can be absent is not a gate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing() -> None:
    res = _run("ruff", "check", "kafkasim")
    assert res.returncode == 0, f"ruff check kafkasim:\n{res.stdout}{res.stderr}"


def test_mypy_strict_finds_nothing() -> None:
    res = _run("mypy")  # files and strictness come from [tool.mypy] in pyproject.toml
    assert res.returncode == 0, f"mypy:\n{res.stdout}{res.stderr}"
