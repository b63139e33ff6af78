"""Fixtures for the runtime contract suite.

`world`     — every contract test runs twice: "sim" (SimWorld) and "real" (asyncio + OS).
`zk_world`  — coordination runs three times: "sim" (SimZooKeeper), "embedded" (the real world's
              in-process ZkStore) and "zookeeper" (kazoo against a real ZooKeeper 3.8 started
              once per session by real/zookeeper/zk.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from runtime_worlds import RealHarness, SimHarness, World, load_zk_launcher  # noqa: E402


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


@pytest.fixture(params=["sim", "real"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    if request.param == "sim":
        return SimHarness()
    return RealHarness(tmp=tmp_path)


@pytest.fixture(params=["sim", "embedded", "zookeeper"])
def zk_world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    if request.param == "sim":
        return SimHarness()
    if request.param == "embedded":
        return RealHarness(tmp=tmp_path)
    handle = request.getfixturevalue("zookeeper")
    return RealHarness(tmp=tmp_path, zookeeper=handle.connect_string)  # type: ignore[attr-defined]
