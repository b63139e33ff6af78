"""run_in_processes replaces its workers every jobs * RUNS_PER_WORKER items (a chunk), so that what
a run leaves behind in a worker cannot pile up over a sweep of thousands, and still hands every
item's result back exactly once."""

from __future__ import annotations

import os

import pytest

from kafkasim.harness import host

pytestmark = pytest.mark.unit


def worker_pid(item: int) -> tuple[int, int]:
    return item, os.getpid()


def test_workers_are_new_for_every_chunk_and_every_item_is_answered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "RUNS_PER_WORKER", 3)
    seen: list[tuple[int, int]] = []
    host.run_in_processes(worker_pid, list(range(14)), 2, lambda item, result: seen.append(result))
    assert sorted(item for item, _ in seen) == list(range(14))
    by_chunk = [{pid for item, pid in seen if start <= item < start + 6} for start in (0, 6, 12)]
    assert all(1 <= len(pids) <= 2 for pids in by_chunk)
    assert not by_chunk[0] & by_chunk[1] and not by_chunk[1] & by_chunk[2]  # no worker outlives its chunk
    assert os.getpid() not in {pid for _, pid in seen}


def dies_on_four(item: int) -> int:
    if item == 4:
        os.kill(os.getpid(), 9)  # as a segfault or the OOM killer ends a worker
    return item * 10


def test_a_worker_that_dies_costs_only_its_own_item() -> None:
    results: dict[int, int] = {}
    crashed: list[tuple[int, str]] = []
    host.run_in_processes(dies_on_four, list(range(10)), 2, lambda item, r: results.__setitem__(item, r),
                          lambda item, why: crashed.append((item, why)))
    assert results == {i: i * 10 for i in range(10) if i != 4}
    assert [item for item, _ in crashed] == [4]
    assert "died" in crashed[0][1]


def test_without_on_crash_a_dead_worker_stops_the_run() -> None:
    from concurrent.futures.process import BrokenProcessPool
    with pytest.raises(BrokenProcessPool):
        host.run_in_processes(dies_on_four, list(range(10)), 2, lambda item, r: None)
