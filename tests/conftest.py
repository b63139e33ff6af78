"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

# The suite runs kafkasim pure (kafkasim/runtime/native.py) unless the environment chose: a few tests
# monkeypatch functions that compiled callers would bind directly. tests/runtime/test_native.py runs the
# compiled build and checks it gives the pure runs' trace hashes. Set before any compiled module
# loads (the kafkasim pytest plugin imports none); subprocesses inherit it.
os.environ.setdefault("KAFKASIM_NATIVE", "0")

sys.path.insert(0, str(Path(__file__).parent / "runtime"))
from runtime_worlds import load_zk_launcher  # noqa: E402


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real ZooKeeper for the whole session (handle with .connect_string, .stop()).
    Skips when the Debian package is absent, unless KAFKASIM_REQUIRE_ZOOKEEPER=1 (CI) makes
    that a failure."""
    zk = load_zk_launcher()
    if not os.path.exists(zk.ZK_JAR):
        if os.environ.get("KAFKASIM_REQUIRE_ZOOKEEPER") == "1":
            pytest.fail(f"{zk.ZK_JAR} missing: apt-get install -y zookeeper")
        pytest.skip(f"{zk.ZK_JAR} missing (apt-get install -y zookeeper)")
    handle = zk.start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield handle
    finally:
        handle.stop()
