"""RealFileSystem.store_of: what DescribeLogDirs reports for a log dir — Java's
File.getAbsolutePath and FileStore.getTotalSpace / getUsableSpace — and the simulated disk's
"no statistics" answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkasim.runtime.real.world import RealNode
from kafkasim.runtime.real.zk import EmbeddedCoordination
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.real


def test_store_of_is_the_absolute_path_and_the_file_store_sizes(tmp_path: Path) -> None:
    node = RealNode("b0", str(tmp_path / "b0"), zookeeper=EmbeddedCoordination(), seed=1)
    try:
        node.fs.mkdir("logs")
        path, total, usable = node.fs.store_of("logs")
        st = os.statvfs(tmp_path)
        assert path == str(tmp_path / "b0" / "logs")
        assert total == st.f_blocks * st.f_frsize > 0
        # usable moves with every write on the machine; within 1% of the reading next to it
        assert abs(usable - st.f_bavail * st.f_frsize) <= total // 100
        assert 0 < usable <= total
        with pytest.raises(OSError):
            node.fs.store_of("missing")
    finally:
        node.kill()


def test_the_simulated_disk_has_no_statistics() -> None:
    node = SimWorld(1).add_node("b0")
    assert node.runtime.fs.store_of("logs") == ("logs", -1, -1)
