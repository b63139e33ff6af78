"""The kernel's queue upkeep: a wait_first answered before its timeout leaves a dead queue entry,
and the kernel drops the dead ones once they are half the queue — without changing when anything
else runs. And the cyclic collector's thresholds are raised only while a simulation runs."""

from __future__ import annotations

import gc

import pytest

from kafkasim.runtime.sim.kernel import GC_THRESHOLDS, Owner, SimFuture, SimKernel, fewer_collections

pytestmark = pytest.mark.unit


def test_dead_timeouts_are_dropped_and_the_order_is_kept() -> None:
    kernel = SimKernel()
    owner = Owner("client")
    fired: list[tuple[float, int]] = []
    for i in range(50):  # timers spread over the whole run, due among the dead timeouts
        kernel.call_later(owner, 37.0 * i + 0.5, lambda i=i: fired.append((kernel.now(), i)))
    answers: list[int | None] = []
    depth: list[int] = []

    async def requests() -> None:
        for _ in range(2000):
            f: SimFuture = kernel.future()
            kernel.schedule(1.0, lambda _a, f=f: f.set_result("response"))
            answers.append(await kernel.wait_first([f], 30_000))  # answered long before the timeout
            depth.append(len(kernel._queue))
        late = kernel.future()  # never answered: the timeout must still fire, on time
        start = kernel.now()
        answers.append(await kernel.wait_first([late], 500))
        fired.append((kernel.now() - start, -1))

    kernel.spawn(owner, requests())
    kernel.run()
    assert answers[:-1] == [0] * 2000 and answers[-1] is None
    assert fired[-1] == (500.0, -1)
    timers = fired[:-1]
    assert [i for _, i in timers] == list(range(50))  # every timer, in order, at its time
    assert all(t == 37.0 * i + 0.5 for t, i in timers)
    # Without the upkeep the queue would hold every one of the 2000 timeouts by the end.
    assert max(depth) < 700, max(depth)


def test_fewer_collections_raises_the_thresholds_and_restores_them() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a run that fails")
    assert gc.get_threshold() == before
