"""power-loss-default-flush-swarm seed 210 (scenarios/regressions/power-loss-default-flush-swarm-
seed-210.toml): the leader of events-2 lost power with its tail unflushed and came back leading
the *same* epoch (the new controller saw it registered again before it learned it had gone), so
no LeaderAndIsr told its followers to truncate. A follower that was fetching kept fetching from
its own log end; once the leader had refilled the lost offsets in its epoch, it took the new
records after its old ones and the replicas diverged below the high watermark. Kafka 3.9's
follower sends last_fetched_epoch with every fetch (truncation on fetch, IBP >= 2.7) and the
leader answers a diverging epoch instead of records: the follower truncates there."""

from __future__ import annotations

import io
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

import pytest

from kafkasim.broker.config import ReplicationConfig
from kafkasim.broker.replica_fetcher import PartitionFetchState, ReplicaFetcherManager, ReplicaFetcherThread
from kafkasim.broker.zk.zk_data import BrokerInfo
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchResponse
from kafkasim.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.sim.world import SimWorld
from kafkasim.storage.log import Log, LogConfig

pytestmark = pytest.mark.sim

TP = ("events", 2)
PD = FetchResponse.FetchableTopicResponse.PartitionData


class OneAnswerClient:
    """The leader's side of one Fetch: records what was asked, answers `answer`."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[Any] = []
        self.closed = False

    async def send(self, req: Any, version: int, timeout_ms: float) -> Any:
        self.asked.append(req)
        return self.answer

    def close(self) -> None:
        self.closed = True


def _fetcher(rt: Any, log: Log, client: OneAnswerClient, leader_epoch: int) -> tuple[ReplicaFetcherThread, Any]:
    appended: list[bytes] = []

    async def append_records_to_follower(data: bytes, *_: Any) -> None:
        appended.append(data)

    async def truncate_partition(p: Any, offset: int) -> None:
        await p.log.truncate_to(offset)

    async def truncate_partition_fully(p: Any, offset: int) -> None:
        await p.log.truncate_fully_and_start_at(offset)

    partition = SimpleNamespace(log=log, leader_epoch=leader_epoch, offline=False, high_watermark=0,
                                appended=appended, append_records_to_follower=append_records_to_follower)
    rm = SimpleNamespace(rt=rt, replication=ReplicationConfig(), broker_id=1, inter_broker_security=None,
                         get_partition=lambda *_: partition, truncate_partition=truncate_partition,
                         truncate_partition_fully=truncate_partition_fully)
    thread = ReplicaFetcherThread(SimpleNamespace(rm=rm, failed_partitions={}), BrokerInfo(0, "broker-0", 9092, None))  # type: ignore[arg-type]
    thread.client = client  # type: ignore[assignment]
    thread.partitions[TP] = PartitionFetchState(b"\0" * 16, log.log_end_offset, leader_epoch, truncating=False)
    return thread, partition


def _append(log: Log, epoch: int, n: int) -> None:
    buf = bytearray(build_batch([Record(1000, None, b"v%d" % i) for i in range(n)]))
    log.append_as_leader(buf, list(iter_batches(buf, validate=True)), leader_epoch=epoch)


def _run(world: SimWorld, rt: Any, body: Any) -> Any:
    out: list[Any] = []

    async def main() -> None:
        try:
            out.append(await body())
        except Exception as exc:  # the test's failure, reported below rather than lost in the task
            out.append(exc)

    task = rt.spawn(main(), name="main")
    while not task.done() and world.now_ms() < 10_000:
        world.run(world.now_ms() + 100.0)
    assert out, "the body did not finish"
    if isinstance(out[0], Exception):
        raise out[0]
    return out[0]


def test_a_follower_fetching_past_a_leader_that_lost_its_tail_truncates_on_the_diverging_epoch() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    # The leader restarted with offsets 0-1 of epoch 9 and leads epoch 11 from 2 (its cache
    # (9, 0), (11, 2)); it answers the follower's epoch 9 with where 9 ends there: 2.
    answer = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=TP[0], partitions=[
        PD(partition_index=TP[1], error_code=0, high_watermark=2, log_start_offset=0,
           diverging_epoch=PD.EpochEndOffset(epoch=9, end_offset=2), records=b"")])])
    client = OneAnswerClient(answer)

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _append(log, 9, 2)
        _append(log, 9, 2)   # offsets 2-3 of epoch 9: what the leader lost
        thread, partition = _fetcher(rt, log, client, leader_epoch=11)
        await thread._fetch([TP])
        sent = client.asked[0].topics[0].partitions[0]
        return (sent.fetch_offset, sent.last_fetched_epoch, log.log_end_offset, log.leader_epoch_cache.entries,
                partition.appended, thread.partitions[TP].fetch_offset, thread.partitions[TP].truncating)

    fetch_offset, last_fetched_epoch, leo, epochs, appended, next_offset, truncating = _run(world, rt, body)
    assert (fetch_offset, last_fetched_epoch) == (4, 9)
    assert (leo, epochs) == (2, [(9, 0)])       # cut where epoch 9 ends on the leader
    assert appended == [] and (next_offset, truncating) == (2, False)   # no records taken; fetch on from 2


def test_without_a_diverging_epoch_the_records_are_appended() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    answer = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=TP[0], partitions=[
        PD(partition_index=TP[1], error_code=0, high_watermark=2, log_start_offset=0, records=b"")])])
    client = OneAnswerClient(answer)

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _append(log, 9, 2)
        thread, partition = _fetcher(rt, log, client, leader_epoch=11)
        await thread._fetch([TP])
        return log.log_end_offset, partition.appended

    leo, appended = _run(world, rt, body)
    assert leo == 2 and appended == [b""]


class ReAddedWhileAskingClient:
    """kill-failover-swarm seed 791: the leader answers FENCED_LEADER_EPOCH to an
    OffsetForLeaderEpoch sent at the follower's old epoch, and while it is out a LeaderAndIsr
    re-adds the partition to the fetcher at the leader's new epoch."""

    def __init__(self, thread_box: list[ReplicaFetcherThread], new_epoch: int) -> None:
        self.thread_box, self.new_epoch = thread_box, new_epoch
        self.closed = False

    async def send(self, req: Any, version: int, timeout_ms: float) -> Any:
        self.thread_box[0].add_partitions({TP: PartitionFetchState(b"\0" * 16, 0, self.new_epoch)})
        R = OffsetForLeaderEpochResponse
        return R(topics=[R.OffsetForLeaderTopicResult(topic=TP[0], partitions=[
            R.OffsetForLeaderTopicResult.EpochEndOffset(error_code=E.FENCED_LEADER_EPOCH, partition=TP[1])])])


def test_a_fenced_answer_for_an_old_epoch_keeps_the_state_a_leader_and_isr_added_meanwhile() -> None:
    # Kafka's AbstractFetcherThread.truncateToEpochEndOffsets keeps only the answers whose
    # request epoch is still the partition's current leader epoch; before, the old epoch's
    # FENCED_LEADER_EPOCH removed the new epoch's state and the follower never fetched again.
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    box: list[ReplicaFetcherThread] = []

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _append(log, 4, 2)
        thread, _ = _fetcher(rt, log, ReAddedWhileAskingClient(box, new_epoch=5), leader_epoch=5)
        box.append(thread)
        thread.partitions[TP] = PartitionFetchState(b"\0" * 16, 2, 4)   # Truncating at epoch 4
        await thread._truncate([TP])
        st = thread.partitions.get(TP)
        return None if st is None else (st.current_leader_epoch, st.truncating)

    assert _run(world, rt, body) == (5, True)   # still there, to be truncated at epoch 5


class NewEpochWhileFetchingClient:
    """A Fetch sent at the follower's epoch 4 comes back FENCED_LEADER_EPOCH (the leader is at 5),
    and while it was out the follower's state moved to epoch 5 at the same fetch offset, the
    partition too (`on_send` does what such a LeaderAndIsr would)."""

    def __init__(self, on_send: Any) -> None:
        self.on_send = on_send
        self.closed = False

    async def send(self, req: Any, version: int, timeout_ms: float) -> Any:
        self.on_send()
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=TP[0], partitions=[
            PD(partition_index=TP[1], error_code=E.FENCED_LEADER_EPOCH, high_watermark=-1, log_start_offset=-1,
               records=b"")])])


@pytest.mark.parametrize("moved", [True, False])
def test_a_fenced_fetch_fences_only_the_epoch_it_was_sent_at(moved: bool) -> None:
    # AbstractFetcherThread.onPartitionFenced(tp, requestEpoch): FENCED_LEADER_EPOCH removes the
    # partition only while its state is still at the epoch the request carried; a state at a
    # newer epoch retries after the backoff. (kafkasim's fetcher adds a new epoch's state as
    # truncating, which the response loop skips, so only this check keeps a later change to
    # that from fencing the new epoch.)
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    box: list[Any] = []

    def new_epoch() -> None:
        if moved:
            thread, partition = box
            partition.leader_epoch = 5
            thread.partitions[TP] = PartitionFetchState(b"\0" * 16, 2, 5, truncating=False)

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _append(log, 4, 2)
        thread, partition = _fetcher(rt, log, NewEpochWhileFetchingClient(new_epoch), leader_epoch=4)
        box.extend([thread, partition])
        await thread._fetch([TP])
        st = thread.partitions.get(TP)
        return None if st is None else (st.current_leader_epoch, st.delayed_until_ms > rt.monotonic_ms())

    assert _run(world, rt, body) == ((5, True) if moved else None)


def _answer(data: bytes, high_watermark: int) -> FetchResponse:
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=TP[0], partitions=[
        PD(partition_index=TP[1], error_code=0, high_watermark=high_watermark, log_start_offset=0, records=data)])])


def _leader_batches(*spans: tuple[int, int]) -> bytes:
    """The leader's batches as a fetch answer carries them: (base offset, record count) each."""
    return b"".join(build_batch([Record(1000, None, b"v%d" % i) for i in range(n)], base_offset=base,
                                partition_leader_epoch=7) for base, n in spans)


def test_a_batch_below_the_log_end_marks_the_partition_failed_and_leaves_no_hole() -> None:
    # power-loss-default-flush-swarm seed 1184 (--buggify): the follower held 0-2, the leader's
    # batch 2-3 overlaps it. Kafka's UnifiedLog.append throws UnexpectedAppendOffsetException and
    # AbstractFetcherThread marks the partition failed. Dropping 2-3 and appending 4-5 instead left
    # offset 3 missing from a replica that then rejoined the ISR.
    out = io.StringIO()
    world = SimWorld(1, trace_out=out)
    rt = world.add_node("broker-1").runtime
    client = OneAnswerClient(_answer(_leader_batches((2, 2), (4, 2)), high_watermark=6))

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _append(log, 7, 3)
        thread, partition = _fetcher(rt, log, client, leader_epoch=7)
        await thread._fetch([TP])
        return log.log_end_offset, partition.appended, TP in thread.partitions, thread.manager.failed_partitions

    leo, appended, still_fetching, failed = _run(world, rt, body)
    assert (leo, appended, still_fetching) == (3, [], False)
    assert failed == {TP: {"leader": 0, "first_offset": 2, "log_end_offset": 3}}   # what the liveness phase reads
    trace = out.getvalue()
    assert '"ev":"replica_fetch_partition_failed","first_offset":2' in trace


def test_an_empty_log_inside_the_first_batch_starts_over_at_its_base() -> None:
    # Partition.appendRecordsToFollowerOrFutureReplica's one recovery: an empty log whose start
    # falls inside the batch (the leader's DeleteRecords start mid-batch) restarts at the base.
    out = io.StringIO()
    world = SimWorld(1, trace_out=out)
    rt = world.add_node("broker-1").runtime
    data = _leader_batches((3, 4))
    client = OneAnswerClient(_answer(data, high_watermark=7))

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        await log.truncate_fully_and_start_at(5)
        thread, partition = _fetcher(rt, log, client, leader_epoch=7)
        thread.partitions[TP].fetch_offset = 5
        await thread._fetch([TP])
        return log.log_start_offset, log.log_end_offset, partition.appended, TP in thread.partitions

    start, leo, appended, still_fetching = _run(world, rt, body)
    assert (start, leo) == (3, 3) and appended == [data] and still_fetching
    assert "replica_fetch_partition_failed" not in out.getvalue()


def _at_once(step: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that must not wait (no thread is applying a response here)."""
    try:
        step.send(None)
    except StopIteration:
        return
    raise AssertionError("waited for a fetcher thread that was applying nothing")


def test_a_leader_and_isr_that_adds_or_removes_a_failed_partition_clears_its_failure() -> None:
    # AbstractFetcherManager.addFetcherForPartitions and removeFetcherForPartitions both take the
    # partitions out of failedPartitions: only a partition still failed is a stall to name.
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    manager = ReplicaFetcherManager(SimpleNamespace(rt=rt, replication=ReplicationConfig()))  # type: ignore[arg-type]
    seen = {"leader": 0, "first_offset": 2, "log_end_offset": 3}
    manager.failed_partitions.update({TP: dict(seen), ("events", 0): dict(seen), ("events", 1): dict(seen)})
    leader = BrokerInfo(0, "broker-0", 9092, None)
    manager.threads[0] = ReplicaFetcherThread(manager, leader)   # not started: no fetching here
    _at_once(manager.add_fetcher_for_partitions({TP: (leader, PartitionFetchState(b"\0" * 16, 3, 8))}))
    _at_once(manager.remove_fetcher_for_partitions([("events", 0)]))
    assert manager.failed_partitions == {("events", 1): seen}
    manager.shutdown()


def _slow_appending_fetcher(rt: Any, log: Log, steps: list[str]) -> tuple[ReplicaFetcherManager, ReplicaFetcherThread]:
    """A fetcher whose follower append takes 50 ms (flush.messages=1: the fsync of what it
    appended), started on one Fetch whose answer is empty records."""
    answer = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=TP[0], partitions=[
        PD(partition_index=TP[1], error_code=0, high_watermark=0, log_start_offset=0, records=b"")])])
    thread, partition = _fetcher(rt, log, OneAnswerClient(answer), leader_epoch=3)

    async def append_records_to_follower(*_: Any) -> None:
        steps.append("append")
        await rt.sleep(50)
        steps.append("flushed")

    partition.append_records_to_follower = append_records_to_follower
    manager = ReplicaFetcherManager(thread.rm)
    thread.manager = manager
    manager.threads[0], manager.assigned[TP] = thread, 0
    thread.task = rt.spawn(thread._fetch([TP]), name=thread.name)
    return manager, thread


def test_removing_a_partition_waits_for_the_append_in_progress_and_never_cuts_its_flush() -> None:
    # power-loss-fsync-swarm seed 2444: a LeaderAndIsr removed the partition from its fetcher
    # while the fetcher flushed an append; the cancel cut the fsync, the replica then led with
    # that offset unsynced and committed, and a power loss took it. Kafka's removePartitions
    # takes the thread's partitionMapLock (held while a response is applied) and the replica
    # fetcher thread is not interruptible.
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    steps: list[str] = []

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        manager, thread = _slow_appending_fetcher(rt, log, steps)
        await rt.sleep(10)              # the append's flush is in progress
        await manager.remove_fetcher_for_partitions([TP])
        steps.append("removed")
        assert thread.task is not None
        await rt.sleep(1)
        return thread.task.done(), manager.threads

    done, threads = _run(world, rt, body)
    assert steps == ["append", "flushed", "removed"]
    assert done and threads == {}


def test_a_shutdown_during_an_append_lets_the_flush_finish_and_then_stops_the_thread() -> None:
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime
    steps: list[str] = []

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _, thread = _slow_appending_fetcher(rt, log, steps)
        await rt.sleep(10)
        thread.shutdown()               # e.g. the leader came back at another address
        steps.append("shutdown")
        assert thread.task is not None
        await thread.task               # ends normally (a cancel would raise here)
        return thread.client.closed if thread.client is not None else None

    assert _run(world, rt, body) is True
    assert steps == ["append", "shutdown", "flushed"]


def test_the_fetcher_keeps_an_incremental_fetch_session_with_its_leader() -> None:
    """Kafka's follower fetches through a FetchSessionHandler: once the leader opened a session,
    a partition whose fetch data did not change is left out; a session error drops the answer
    and the next Fetch is full again."""
    world = SimWorld(1, trace_out=io.StringIO())
    rt = world.add_node("broker-1").runtime

    def answer(session_id: int, error: int = E.NONE) -> FetchResponse:
        parts = [] if error else [FetchResponse.FetchableTopicResponse(topic=TP[0], partitions=[
            PD(partition_index=TP[1], error_code=0, high_watermark=2, log_start_offset=0, records=b"")])]
        return FetchResponse(error_code=error, session_id=session_id, responses=parts)

    client = OneAnswerClient(answer(9))

    async def body() -> Any:
        log = await Log.load(rt, "events-2", LogConfig())
        _append(log, 9, 2)
        thread, partition = _fetcher(rt, log, client, leader_epoch=11)
        await thread._fetch([TP])                     # full: opens session 9
        client.answer = answer(9)
        await thread._fetch([TP])                     # nothing changed: no partition sent
        _append(log, 9, 1)
        client.answer = answer(0, E.FETCH_SESSION_ID_NOT_FOUND)
        await thread._fetch([TP])                     # the log end moved: the partition goes out
        await thread._fetch([TP])                     # after the error: full, no session
        return [(r.session_id, r.session_epoch, [(t.topic, [p.fetch_offset for p in t.partitions]) for t in r.topics])
                for r in client.asked], partition.appended

    asked, appended = _run(world, rt, body)
    assert asked == [(0, 0, [("events", [2])]), (9, 1, []), (9, 2, [("events", [3])]), (0, 0, [("events", [3])])]
    assert appended == [b"", b""]  # the answer to the failed session was not applied
