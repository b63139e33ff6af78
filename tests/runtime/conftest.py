"""Fixtures for the runtime contract suite.

`world`     — every contract test runs twice: "sim" (SimWorld) and "real" (asyncio + OS).
`zk_world`  — coordination runs three times: "sim" (SimZooKeeper), "embedded" (the real world's
              in-process ZkStore) and "zookeeper" (kazoo against a real ZooKeeper 3.8 started
              once per session by real/zookeeper/zk.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from runtime_worlds import RealHarness, SimHarness, World  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ZK_SCRIPT = REPO / "real" / "zookeeper" / "zk.py"


def load_zk_launcher() -> ModuleType:
    """real/ is a kit of scripts, not a package: load the launcher by path."""
    spec = importlib.util.spec_from_file_location("kafkasim_real_zookeeper", ZK_SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


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
