"""The kernel's task error path: a KeyboardInterrupt or SystemExit raised inside a task or a
timer stops the simulation (it propagates out of run()), and is never recorded as that task's
error (which would turn Ctrl-C into a failing verdict)."""

from __future__ import annotations

import pytest

from kafkasim.runtime.api import Cancelled
from kafkasim.runtime.sim.kernel import Owner, SimKernel

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_a_task_raising_an_interrupt_stops_the_run(exc: type[BaseException]) -> None:
    kernel = SimKernel()

    async def fetcher() -> None:
        await kernel.sleep(5)
        raise exc()

    kernel.spawn(Owner("broker-0"), fetcher(), name="replica fetcher")
    with pytest.raises(exc):
        kernel.run(100)
    assert kernel.failures == []
    assert kernel.now() == 5  # stopped where it was raised, not at the deadline


def test_a_timer_raising_an_interrupt_stops_the_run() -> None:
    kernel = SimKernel()

    def fire() -> None:
        raise KeyboardInterrupt

    kernel.call_later(Owner("harness"), 3, fire)
    with pytest.raises(KeyboardInterrupt):
        kernel.run(100)
    assert kernel.failures == []


def test_an_interrupt_during_a_kill_is_not_swallowed() -> None:
    kernel = SimKernel()

    async def stubborn() -> None:
        try:
            await kernel.sleep(50)
        finally:
            raise KeyboardInterrupt  # arrives while the coroutine is being closed

    task = kernel.spawn(Owner("broker-0"), stubborn())
    kernel.run(1)
    with pytest.raises(KeyboardInterrupt):
        task.kill()


def test_ordinary_errors_and_cancels_keep_their_paths() -> None:
    """The contrast: an Exception is still a recorded task error, a cancel is not an error."""
    kernel = SimKernel()

    async def broken() -> None:
        await kernel.sleep(1)
        raise ValueError("bug")

    async def waits() -> None:
        await kernel.sleep(50)

    kernel.spawn(Owner("a"), broken(), name="broken")
    cancelled = kernel.spawn(Owner("b"), waits(), name="waits")
    kernel.run(2)
    cancelled.cancel()
    kernel.run(3)
    assert kernel.failures == [("a", "broken", "ValueError: bug")]
    assert cancelled.done()
    with pytest.raises(Cancelled):
        cancelled._done.result()
