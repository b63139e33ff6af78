"""Issue 18 (nemesis-mixed seeds 35, 45): an AlterPartition whose controller event hit
ControllerMovedException (its ZooKeeper write fenced by a newer controller epoch) is answered
as "controller moved" instead of the exception escaping the connection's task."""

from __future__ import annotations

import asyncio

import pytest

from kafkasim.broker.controller.event_manager import ControllerMovedError
from kafkasim.broker.controller_apis import _ask
from kafkasim.broker.zk.kafka_zk_client import ControllerMovedException

pytestmark = pytest.mark.unit


def test_ask_turns_a_moved_controller_into_no_answer() -> None:
    async def raises(exc: Exception) -> int:
        raise exc

    async def main() -> list[int | None]:
        return [await _ask(raises(ControllerMovedException("controller epoch zkVersion is 2, not 1"))),
                await _ask(raises(ControllerMovedError("shutting down"))), await _ask(asyncio.sleep(0, 7))]

    assert asyncio.run(main()) == [None, None, 7]
