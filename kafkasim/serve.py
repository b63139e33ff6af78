"""`kafkasim serve`: one broker on real sockets, disks and ZooKeeper (or an embedded
coordination store), until SIGTERM or SIGINT."""

from __future__ import annotations

import os

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.runtime.real.world import JsonlTrace, RealNode, run, stop_requested


def serve(port: int, log_dir: str, zookeeper: str | None, broker_id: int, host: str,
          trace_path: str | None = None, configs: dict[str, str] | None = None,
          seeded_bugs: frozenset[str] = frozenset()) -> int:
    """`configs` are server.properties keys (`--config KEY=VALUE`); the explicit arguments win.
    `seeded_bugs` (test-only) are the real world's, as KAFKASIM_SEEDED_BUGS gives them."""

    async def main() -> int:
        trace = JsonlTrace.to_file(trace_path)
        # The node's disk root is the log dir itself (several, comma-separated: their common
        # parent), so segments land in <log-dir>/<topic>-<p>/.
        dirs = [os.path.abspath(d) for d in log_dir.split(",") if d]
        data_dir = dirs[0] if len(dirs) == 1 else os.path.commonpath(dirs)
        node = RealNode(f"broker-{broker_id}", data_dir, zookeeper, host=host, trace=trace,
                        seeded_bugs=seeded_bugs)
        log_dirs = ",".join(os.path.relpath(d, data_dir) for d in dirs)
        server = KafkaServer(node, BrokerConfig.from_properties(
            {**(configs or {}), "broker.id": broker_id, "host": host, "port": port, "log.dirs": log_dirs}))
        await server.startup()
        print(f"kafkasim broker {broker_id} listening on {host}:{server.port} (log dir {data_dir}, "
              f"{'zookeeper ' + zookeeper if zookeeper else 'embedded coordination store'})", flush=True)
        await stop_requested()
        await server.shutdown()
        node.kill()
        trace.close()
        return 0

    return run(main())
