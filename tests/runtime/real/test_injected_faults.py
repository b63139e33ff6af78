"""The real world's injected faults, below the seam: a RealNode's disk (EIO, ENOSPC after a
budget, slow fsync) and its outgoing peer connections (refused, stalled), armed and healed as
the control plane does."""

from __future__ import annotations

import asyncio
import errno
import time
from pathlib import Path

import pytest

from kafkasim.runtime.api import ConnectionRefused, RuntimeTimeout, Stream
from kafkasim.runtime.real.world import RealNode
from kafkasim.runtime.real.zk import EmbeddedCoordination

pytestmark = pytest.mark.real


def _node(tmp: Path, name: str) -> RealNode:
    return RealNode(name, str(tmp / name), zookeeper=EmbeddedCoordination())


def test_disk_faults_fail_and_slow_the_operations_they_name(tmp_path: Path) -> None:
    async def main() -> None:
        node = _node(tmp_path, "n")
        f = node.fs.open("a.log")
        f.append(b"x" * 10)
        node.fs.faults.eio_rate = 1.0
        with pytest.raises(OSError) as e:
            f.append(b"y")
        assert e.value.errno == errno.EIO and f.size() == 10          # nothing written
        with pytest.raises(OSError):
            await f.fsync()
        node.fs.faults.clear()
        node.fs.faults.enospc, node.fs.faults.free_bytes = True, 5
        f.append(b"12345")                                             # exactly the budget
        with pytest.raises(OSError) as e:
            f.append(b"6")
        assert e.value.errno == errno.ENOSPC and f.size() == 15
        node.fs.faults.clear()
        node.fs.faults.slow_fsync_ms = 200
        t0 = time.monotonic()
        await f.fsync()
        await node.fs.fsync_dir("")
        assert time.monotonic() - t0 >= 0.4
        node.fs.faults.clear()
        f.append(b"ok")
        assert f.read(0, 17) == b"x" * 10 + b"12345ok" and node.fs.faults.injected >= 5
        node.kill()

    asyncio.run(main())


def test_peer_refusal_resets_open_connections_and_refuses_new_ones(tmp_path: Path) -> None:
    async def main() -> None:
        server, client = _node(tmp_path, "s"), _node(tmp_path, "c")

        async def echo(stream: Stream) -> None:
            while True:
                await stream.write(await stream.read_exactly(1))

        listener = await server.net.serve("127.0.0.1", 0, echo)
        port = listener.port
        st = await client.net.connect("127.0.0.1", port, 2000)
        await st.write(b"a")
        assert await st.read_exactly(1) == b"a"
        assert client.net.inject("f1", "refuse", [("127.0.0.1", port)]) == 1
        assert st.is_closed()
        with pytest.raises(ConnectionRefused, match="injected"):
            await client.net.connect("127.0.0.1", port, 2000)
        assert client.net.heal("f1") and not client.net.heal("f1")
        st2 = await client.net.connect("127.0.0.1", port, 2000)
        await st2.write(b"b")
        assert await st2.read_exactly(1) == b"b"
        server.kill()
        client.kill()

    asyncio.run(main())


def test_peer_stall_holds_traffic_until_healed(tmp_path: Path) -> None:
    async def main() -> None:
        server, client = _node(tmp_path, "s"), _node(tmp_path, "c")

        async def echo(stream: Stream) -> None:
            while True:
                await stream.write(await stream.read_exactly(1))

        port = (await server.net.serve("127.0.0.1", 0, echo)).port
        st = await client.net.connect("127.0.0.1", port, 2000)
        client.net.inject("f1", "stall", None)                      # every peer
        t0 = time.monotonic()
        with pytest.raises(RuntimeTimeout, match="stall"):
            await client.net.connect("127.0.0.1", port, 300)
        assert time.monotonic() - t0 >= 0.3
        pending = asyncio.ensure_future(st.write(b"z"))
        await asyncio.sleep(0.3)
        assert not pending.done()                                   # held while stalled
        client.net.heal("f1")
        await asyncio.wait_for(pending, 2)
        assert await asyncio.wait_for(st.read_exactly(1), 2) == b"z"
        server.kill()
        client.kill()

    asyncio.run(main())
