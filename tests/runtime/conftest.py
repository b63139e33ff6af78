"""Fixtures for the runtime contract suite.

`world`     — every contract test runs twice: "sim" (SimWorld) and "real" (asyncio + OS).
`zk_world`  — coordination runs four times: "sim" (SimZooKeeper), "embedded" (the real world's
              in-process ZkStore), "durable" (that store kept on disk, snapshotting every 2 KiB
              of WAL, as `kafkasim serve` keeps it) and "zookeeper" (kazoo against a real ZooKeeper 3.8 started
              once per session by real/zookeeper/zk.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from runtime_worlds import RealHarness, SimHarness, World  # noqa: E402


@pytest.fixture(params=["sim", "real"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    if request.param == "sim":
        return SimHarness()
    return RealHarness(tmp=tmp_path)


@pytest.fixture(params=["sim", "embedded", "durable", "zookeeper"])
def zk_world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    if request.param == "sim":
        return SimHarness()
    if request.param == "embedded":
        return RealHarness(tmp=tmp_path)
    if request.param == "durable":
        return RealHarness(tmp=tmp_path, durable=True)
    handle = request.getfixturevalue("zookeeper")
    return RealHarness(tmp=tmp_path, zookeeper=handle.connect_string)  # type: ignore[attr-defined]
