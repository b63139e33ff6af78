"""Consumer: kafkasim's own consumer with manual assignment (consumer groups come with the
group coordinator). Fetch long-polls the leaders of the assigned partitions, decodes whole
batches, skips records below the position (a batch can start before it) and ignores a
trailing partial batch, as Kafka's consumers do. With isolation_level 1 (read_committed) the
records of aborted transactions are dropped as Kafka's CompletedFetch does (read_committed.py).

Fetches go to every leader at once, as Kafka's Fetcher.sendFetches does: one Fetch per node
that has no fetch in flight (AbstractFetch.prepareFetchRequests skips a node in
nodesWithPendingFetchRequests), and poll() returns once any of them has answered. A leader
that does not answer (a host without power sends no RST: request.timeout.ms) holds up only its
own partitions. An answer is used only where the partition's position is still the offset it
was fetched from (FetchCollector discards a stale fetch: a seek, a reset, or a fetch from a
newer leader answered first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kafkasim.client.cluster import ClientCluster
from kafkasim.client.read_committed import READ_COMMITTED, AbortedTransactions
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.records.batch import decode_batch_records, iter_batches
from kafkasim.records.errors import CorruptRecordError
from kafkasim.runtime.api import Future, NetworkError, NodeRuntime, RuntimeTimeout, Task

EARLIEST, LATEST = -2, -1
TP = tuple[str, int]


@dataclass(init=False, unsafe_hash=True)
class ConsumedRecord:
    topic: Final[str]
    partition: Final[int]
    offset: Final[int]
    timestamp_ms: Final[int]
    key: Final[bytes | None]
    value: Final[bytes | None]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int, key: bytes | None,
                 value: bytes | None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp_ms = timestamp_ms
        self.key = key
        self.value = value


@dataclass
class ConsumerConfig:
    fetch_max_wait_ms: int = 500       # fetch.max.wait.ms
    fetch_min_bytes: int = 1           # fetch.min.bytes
    fetch_max_bytes: int = 52428800    # fetch.max.bytes
    max_partition_fetch_bytes: int = 1048576  # max.partition.fetch.bytes
    auto_offset_reset: str = "earliest"  # auto.offset.reset
    request_timeout_ms: float = 30000  # request.timeout.ms
    isolation_level: int = 0           # isolation.level (0 read_uncommitted)


@dataclass(init=False)
class _FetchInFlight:
    """One Fetch to one leader: the offsets it asked for, then its answer or failure."""
    leader: int
    offsets: dict[TP, int]
    task: Task | None
    done: bool
    response: Any      # the FetchResponse, when it answered
    failed: bool      # unreachable, timed out, or its leader unknown

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, leader: int, offsets: dict[TP, int], task: Task | None = None, done: bool = False,
                 response: Any = None, failed: bool = False) -> None:
        self.leader = leader
        self.offsets = offsets
        self.task = task
        self.done = done
        self.response = response
        self.failed = failed


class Consumer:
    def __init__(self, rt: NodeRuntime, bootstrap: str, config: ConsumerConfig | None = None,
                 client_id: str = "kafkasim-consumer") -> None:
        self.rt = rt
        self.config = config or ConsumerConfig()
        self.cluster = ClientCluster(rt, bootstrap, client_id, self.config.request_timeout_ms)
        self.positions: dict[tuple[str, int], int | None] = {}
        self.corrupt_batches = 0
        self.misplaced: list[ConsumedRecord] = []  # records of batches with corrupt offsets (_misplaced)
        self._in_flight: dict[int, _FetchInFlight] = {}   # leader -> its pending fetch
        self._answered: Future[Any] | None = None          # set when a fetch in flight completes

    async def assign(self, partitions: list[tuple[str, int]]) -> None:
        for topic in sorted({t for t, _ in partitions}):
            await self.cluster.wait_for_topic(topic)
        self.positions = {tp: None for tp in partitions}

    async def assign_all(self, topic: str) -> None:
        n = await self.cluster.wait_for_topic(topic)
        await self.assign([(topic, p) for p in range(n)])

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        self.positions[tp] = offset

    async def _reset(self, tp: tuple[str, int]) -> None:
        ts = EARLIEST if self.config.auto_offset_reset == "earliest" else LATEST
        self.positions[tp] = await self.list_offset(tp, ts)

    async def list_offset(self, tp: tuple[str, int], timestamp: int) -> int:
        leader = self.cluster.leaders[tp].leader
        conn = await self.cluster.broker_connection(leader)
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=-1, isolation_level=self.config.isolation_level, topics=[
            T(name=tp[0], partitions=[T.ListOffsetsPartition(partition_index=tp[1], timestamp=timestamp)])])
        resp = await conn.request_within(req, self.config.request_timeout_ms)
        p = resp.topics[0].partitions[0]
        if p.error_code != E.NONE:
            raise NetworkError(f"ListOffsets {tp} failed with error {p.error_code}")
        return int(p.offset)

    async def poll(self) -> list[ConsumedRecord]:
        """Position every partition, keep a Fetch in flight to each leader (long-polling up to
        fetch.max.wait.ms), and return as soon as some answer brings records, in offset order
        per partition. An empty poll means every leader answered (or failed) at least once
        during it, so callers may count empty polls as rounds in which nothing came. A leader
        that fails (unreachable, or an error such as NOT_LEADER_OR_FOLLOWER) does not cost the
        records the others returned; it ends the poll with a metadata refresh."""
        out: list[ConsumedRecord] = []
        by_leader, stale = await self._leaders()
        waiting = set(by_leader)
        while not stale and waiting:
            for leader, tps in sorted(by_leader.items()):
                if leader not in self._in_flight:
                    self._send_fetch(leader, tps)
            if not any(f.done for f in self._in_flight.values()):
                self._answered = self.rt.future()
                await self._answered
            records, stale, answered = self._collect()
            out += records
            waiting -= answered
            if out or any(pos is None for pos in self.positions.values()):
                break  # records to hand back, or a partition to reset first (next poll)
        if stale or self.rt.buggify("consumer.metadata.refresh"):  # metadata.max.age.ms may refresh any time
            await self.rt.sleep(100)
            try:
                await self.cluster.refresh_metadata(sorted({t for t, _ in self.positions}), allow_auto_create=False)
            except (NetworkError, RuntimeTimeout):
                pass
        return out

    async def _leaders(self) -> tuple[dict[int, list[TP]], bool]:
        """The assigned partitions by leader, every one positioned; stale if that failed."""
        try:
            for tp, pos in list(self.positions.items()):
                if pos is None:
                    await self._reset(tp)
            by_leader: dict[int, list[TP]] = {}
            for tp in self.positions:
                by_leader.setdefault(self.cluster.leaders[tp].leader, []).append(tp)
            return by_leader, False
        except (NetworkError, RuntimeTimeout, KeyError):
            return {}, True

    def _send_fetch(self, leader: int, tps: list[TP]) -> None:
        offsets: dict[TP, int] = {}
        for tp in tps:
            pos = self.positions[tp]
            assert pos is not None  # poll() positioned every partition before fetching
            offsets[tp] = pos
        fetch = self._in_flight[leader] = _FetchInFlight(leader, offsets)
        fetch.task = self.rt.spawn(self._fetch(fetch), name=f"{self.cluster.client_id} fetch {leader}")

    async def _fetch(self, fetch: _FetchInFlight) -> None:
        try:
            fetch.response = await self._fetch_from(fetch.leader, fetch.offsets)
        except (NetworkError, RuntimeTimeout, KeyError):
            pass
        finally:  # any other error still fails this task (a task error), but never hangs poll()
            fetch.failed, fetch.done = fetch.response is None, True
            if self._answered is not None and not self._answered.done():
                self._answered.set_result(None)

    def _collect(self) -> tuple[list[ConsumedRecord], bool, set[int]]:
        """The records of every answered fetch (leaders in order), whether one failed or
        answered a partition error (the leader moved: metadata must be refreshed), and the
        leaders whose fetch completed."""
        out: list[ConsumedRecord] = []
        errors = False
        completed = {leader for leader, f in self._in_flight.items() if f.done}
        for leader in sorted(completed):
            fetch = self._in_flight.pop(leader)
            if fetch.failed:
                errors = True
                continue
            for t in fetch.response.responses:
                for p in t.partitions:
                    tp = (t.topic, p.partition_index)
                    if tp not in fetch.offsets or self.positions.get(tp) != fetch.offsets[tp]:
                        continue  # a stale answer: the position moved since it was asked
                    out += self._handle_partition(t.topic, p)
                    errors = errors or p.error_code not in (E.NONE, E.OFFSET_OUT_OF_RANGE)
        return out, errors, completed

    async def _fetch_from(self, leader: int, offsets: dict[TP, int]) -> Any:
        """One Fetch to `leader` for `offsets`; its response."""
        conn = await self.cluster.broker_connection(leader)
        topics: dict[str, list[FetchRequest.FetchTopic.FetchPartition]] = {}
        for (topic, p), offset in offsets.items():
            topics.setdefault(topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=p, fetch_offset=offset,
                partition_max_bytes=self.config.max_partition_fetch_bytes))
        req = FetchRequest(replica_id=-1, max_wait_ms=self.config.fetch_max_wait_ms,
                           min_bytes=self.config.fetch_min_bytes,
                           max_bytes=1 if self.rt.buggify("consumer.fetch.tiny") else self.config.fetch_max_bytes,
                           isolation_level=self.config.isolation_level,
                           topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        return await conn.request_within(req, self.config.request_timeout_ms + self.config.fetch_max_wait_ms)

    def _handle_partition(self, topic: str, p: object) -> list[ConsumedRecord]:
        tp = (topic, p.partition_index)  # type: ignore[attr-defined]
        code = p.error_code  # type: ignore[attr-defined]
        if code == E.OFFSET_OUT_OF_RANGE:
            self.positions[tp] = None
            return []
        if code != E.NONE or p.records is None:  # type: ignore[attr-defined]
            return []
        data = bytes(p.records)  # type: ignore[attr-defined]
        out: list[ConsumedRecord] = []
        pos = self.positions[tp]
        assert pos is not None
        read_committed = self.config.isolation_level == READ_COMMITTED
        aborted = AbortedTransactions(p.aborted_transactions) if read_committed else None  # type: ignore[attr-defined]
        try:
            # check.crcs (on by default): each batch's CRC before anything of it is believed, its
            # control and transactional bits included (CompletedFetch.maybeEnsureValid comes first):
            # a flipped attributes byte must not make a data batch pass for a marker to skip.
            for at, h in iter_batches(data, validate=True):
                if aborted is not None and aborted.skip(data, at, h):
                    pos = max(pos, h.next_offset)
                    continue
                if h.is_control:
                    pos = max(pos, h.next_offset)
                    continue
                if h.last_offset < pos:
                    self._misplaced(topic, tp[1], data, at, h.base_offset, h.last_offset, pos)
                    continue
                for r in decode_batch_records(data, at, validate=False):  # validated above
                    if r.offset >= pos:
                        out.append(ConsumedRecord(topic, tp[1], r.offset, r.timestamp_ms, r.key, r.value))
                pos = max(pos, h.next_offset)
        except CorruptRecordError:
            self.corrupt_batches += 1
        self.positions[tp] = pos
        return out

    def _misplaced(self, topic: str, partition: int, data: bytes, at: int, base: int, last: int, pos: int) -> None:
        """A batch wholly below the fetch position: a broker reads from the batch holding the
        position, so its header's offsets are corrupt (the CRC does not cover the base offset).
        Kafka's consumer skips such records silently; so does this one, but it keeps them
        (`take_misplaced`) so the checkers can say what happened to them."""
        self.rt.trace("consumer_misplaced_batch", topic=topic, partition=partition, base_offset=base,
                      last_offset=last, position=pos)
        self.misplaced.extend(ConsumedRecord(topic, partition, r.offset, r.timestamp_ms, r.key, r.value)
                              for r in decode_batch_records(data, at))

    def take_misplaced(self) -> list[ConsumedRecord]:
        out, self.misplaced = self.misplaced, []
        return out

    def close(self) -> None:
        for fetch in self._in_flight.values():
            if fetch.task is not None:
                fetch.task.cancel()
        self._in_flight.clear()
        self.cluster.close()
