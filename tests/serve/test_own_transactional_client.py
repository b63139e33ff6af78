"""kafkasim's own TransactionalProducer and read_committed Consumer on real sockets (RealNode)
against `kafkasim serve`: the same client code the simulated workload runs. Committed
transactions are read, aborted ones are not; offsets sent to a committed transaction are the
group's committed offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkasim.client.consumer import Consumer, ConsumerConfig
from kafkasim.client.transactional import TransactionalConfig, TransactionalProducer
from kafkasim.harness.txn_pipeline import committed_offsets
from kafkasim.runtime.real.world import RealNode, run
from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real


def test_own_transactional_client_against_serve(broker: ServedBroker, tmp_path: Path) -> None:
    async def main() -> Any:
        node = RealNode("client", str(tmp_path / "client"), seed=1)
        p = TransactionalProducer(node, broker.bootstrap, TransactionalConfig("own-txn", request_timeout_ms=10000),
                                  client_id="own")
        await p.start(["in"])
        await p.init_transactions()
        for n, commit in ((0, True), (1, False), (2, True)):
            p.begin_transaction()
            for i in range(3):
                p.send("in", f"{n}-{i}".encode(), partition=0)
            if commit:
                await p.send_offsets_to_transaction({("in", 0): n + 1}, "copiers")
                await p.commit_transaction()
            else:
                await p.flush()
                await p.abort_transaction()
        offsets = await committed_offsets(node, p, "in", 1)
        c = Consumer(node, broker.bootstrap, ConsumerConfig(fetch_max_wait_ms=200, isolation_level=1), client_id="c")
        await c.assign_all("in")
        got: list[bytes] = []
        for _ in range(20):
            got += [r.value or b"" for r in await c.poll()]
            if len(got) >= 6:
                break
        c.close()
        p.close()
        node.kill()
        return offsets, got

    offsets, got = run(main())
    assert offsets == {("in", 0): 3}
    assert got == [b"0-0", b"0-1", b"0-2", b"2-0", b"2-1", b"2-2"]
