"""Entry points that run kafkasim code in the real world: `kafkasim serve` (a broker) and
`kafkasim load` (the harness workload against any Kafka-compatible broker)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from kafkasim.runtime.real.world import JsonlTrace, RealNode


def serve(port: int, log_dir: str, zookeeper: str | None, broker_id: int, host: str,
          trace_path: str | None = None, configs: dict[str, str] | None = None) -> int:
    """`configs` are server.properties keys (`--config KEY=VALUE`); the explicit arguments win."""
    from kafkasim.broker.config import BrokerConfig
    from kafkasim.broker.server import KafkaServer

    async def main() -> int:
        if trace_path:
            os.makedirs(os.path.dirname(os.path.abspath(trace_path)), exist_ok=True)
        trace_file = open(trace_path, "a", buffering=1) if trace_path else None
        data_dir = os.path.abspath(log_dir)
        node = RealNode(f"broker-{broker_id}", data_dir, zookeeper, host=host, trace=JsonlTrace(trace_file))
        # The node's disk root is the log dir itself, so segments land in <log-dir>/<topic>-<p>/.
        server = KafkaServer(node, BrokerConfig.from_properties(
            {**(configs or {}), "broker.id": broker_id, "host": host, "port": port, "log.dirs": "."}))
        await server.startup()
        print(f"kafkasim broker {broker_id} listening on {host}:{server.port} (log dir {data_dir}, "
              f"{'zookeeper ' + zookeeper if zookeeper else 'embedded coordination store'})", flush=True)
        stop = asyncio.get_running_loop().create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
        await stop
        await server.shutdown()
        node.kill()
        if trace_file:
            trace_file.close()
        return 0

    return asyncio.run(main())


def load(bootstrap: str, topic: str, messages: int, rate: float, acks: str, seed: int) -> dict[str, Any]:
    """The simulated workload's producer and consumer, on real sockets; returns what the checkers
    found."""
    from kafkasim.harness.checkers import check_all
    from kafkasim.harness.scenario import ConsumerSpec, ProducerSpec
    from kafkasim.harness.workload import History, run_consumer, run_producer

    async def main() -> dict[str, Any]:
        import tempfile

        history = History()
        with tempfile.TemporaryDirectory() as tmp:
            node = RealNode("load", tmp, seed=seed)
            spec = ProducerSpec(messages=messages, rate_per_s=rate, acks={"all": -1, "1": 1, "0": 0}[acks],
                                key_space=16)
            producer = node.spawn(run_producer(node, bootstrap, topic, spec, "producer-0", history))
            consumer = node.spawn(run_consumer(node, bootstrap, topic, ConsumerSpec(fetch_max_wait_ms=200),
                                               "consumer-0", history, 1, idle_polls_after_done=3))
            await producer
            await consumer
            node.kill()
        results = {r.name: len(r.anomalies) for r in check_all(history)}
        return {"sent": len(history.sends), "acked": len(history.acked()), "consumed": len(history.polls),
                "lost": results["lost-write"] + results["unseen"], "duplicates": results["duplicate"],
                "anomalies": results}

    return asyncio.run(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve(int(sys.argv[1]), sys.argv[2], None, 0, "127.0.0.1"))
