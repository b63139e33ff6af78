"""`kafkasim load`: the simulated workload's producer and consumer on real sockets, against any
Kafka-compatible broker, checked by the same checkers."""

from __future__ import annotations

from typing import Any

from kafkasim.harness.checkers import check_all
from kafkasim.harness.host import scratch_dir, unique_token
from kafkasim.harness.scenario import ConsumerSpec, ProducerSpec
from kafkasim.harness.workload import History, run_consumer, run_producer
from kafkasim.runtime.real.world import RealNode, run


def fresh_topic() -> str:
    """The default topic: a new one per run (`kafkasim-load-<time>-<random>`), so a second run
    against the same broker does not read the first run's records back as duplicates."""
    return f"kafkasim-load-{unique_token()}"


def load(bootstrap: str, topic: str, messages: int, rate: float, acks: str, seed: int) -> dict[str, Any]:
    """Produce and consume `messages`; returns what the checkers found."""

    async def main(data_dir: str) -> History:
        history = History()
        node = RealNode("load", data_dir, seed=seed)
        spec = ProducerSpec(messages=messages, rate_per_s=rate, acks={"all": -1, "1": 1, "0": 0}[acks],
                            key_space=16)
        producer = node.spawn(run_producer(node, bootstrap, topic, spec, "producer-0", history))
        consumer = node.spawn(run_consumer(node, bootstrap, topic, ConsumerSpec(fetch_max_wait_ms=200),
                                           "consumer-0", history, 1, idle_polls_after_done=3))
        await producer
        await consumer
        node.kill()
        return history

    with scratch_dir() as tmp:
        history = run(main(tmp))
    results = {r.name: len(r.anomalies) for r in check_all(history)}
    return {"sent": len(history.sends), "acked": len(history.acked()), "consumed": len(history.polls),
            "lost": results["lost-write"] + results["unseen"], "duplicates": results["duplicate"],
            "anomalies": results}
