"""`kafkasim serve`: one broker on real sockets, disks and ZooKeeper (or an embedded
coordination store), until SIGTERM or SIGINT.

Without `--zookeeper` the coordination store is embedded and kept under the log dir
(`<log-dir>/zookeeper/`, or `store_dir`): a restarted broker finds its topics, topic ids,
configs, partition states and producer-id blocks as a broker on a real ZooKeeper would, and
the previous process's ephemeral znodes (/brokers/ids/<id>, /controller) expired.
"""

from __future__ import annotations

import os
import sys

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.runtime.api import Coordination
from kafkasim.runtime.real.world import JsonlTrace, RealNode, run, stop_requested
from kafkasim.runtime.real.zk import EmbeddedCoordination
from kafkasim.runtime.zkstore_log import ZkStoreCorruptError

STORE_DIR_NAME = "zookeeper"  # no '-': the log manager never takes it for a topic-partition


def serve(port: int, log_dir: str, zookeeper: str | None, broker_id: int, host: str,
          trace_path: str | None = None, configs: dict[str, str] | None = None,
          seeded_bugs: frozenset[str] = frozenset(), store_dir: str | None = None) -> int:
    """`configs` are server.properties keys (`--config KEY=VALUE`); the explicit arguments win.
    `seeded_bugs` (test-only) are the real world's, as KAFKASIM_SEEDED_BUGS gives them.
    `store_dir`: where the embedded coordination store lives (default `<log-dir>/zookeeper`)."""

    async def main() -> int:
        # The node's disk root is the log dir itself (several, comma-separated: their common
        # parent), so segments land in <log-dir>/<topic>-<p>/.
        dirs = [os.path.abspath(d) for d in log_dir.split(",") if d]
        data_dir = dirs[0] if len(dirs) == 1 else os.path.commonpath(dirs)
        log_dirs = ",".join(os.path.relpath(d, data_dir) for d in dirs)
        coordination: str | Coordination | None = zookeeper
        if zookeeper is None:
            path = os.path.abspath(store_dir or os.path.join(dirs[0], STORE_DIR_NAME))
            try:
                coordination = EmbeddedCoordination.durable(path)
            except (ZkStoreCorruptError, OSError) as exc:
                print(f"kafkasim serve: cannot open the coordination store in {path}: {exc}", file=sys.stderr)
                return 1
        trace = JsonlTrace.to_file(trace_path)
        node = RealNode(f"broker-{broker_id}", data_dir, coordination, host=host, trace=trace,
                        seeded_bugs=seeded_bugs)
        if isinstance(coordination, EmbeddedCoordination) and coordination.journal is not None:
            j = coordination.journal
            node.trace("coordination_store_opened", directory=j.directory, open_ms=round(j.open_ms, 1),
                       replayed=j.replayed, znodes=len(coordination.store.nodes), zxid=coordination.store.zxid)
        server = KafkaServer(node, BrokerConfig.from_properties(
            {**(configs or {}), "broker.id": broker_id, "host": host, "port": port, "log.dirs": log_dirs}))
        await server.startup()
        print(f"kafkasim broker {broker_id} listening on {host}:{server.port} (log dir {data_dir}, "
              f"{'zookeeper ' + zookeeper if zookeeper else 'embedded coordination store'})", flush=True)
        if server.socket_server is not None and len(server.socket_server.listeners) > 1:
            print("listeners: " + ", ".join(f"{name}://{h}:{p} ({proto})" for name, proto, h, p
                                            in server.socket_server.advertised_endpoints()), flush=True)
        await stop_requested()
        await server.shutdown()
        node.kill()
        if isinstance(coordination, EmbeddedCoordination):
            coordination.close()
        trace.close()
        return 0

    return run(main())
