"""ReplicaFetcherManager and ReplicaFetcherThread: followers copy their leaders' logs (Kafka's
kafka.server.ReplicaFetcherThread / AbstractFetcherThread, num.replica.fetchers = 1: one thread
per leader broker).

A partition added to a fetcher starts *Truncating*: before fetching, the follower asks the
leader with OffsetForLeaderEpoch (v4, replica_id = this broker) where its latest leader epoch
ends, and truncates what lies beyond (KIP-101). The leader answers with the largest epoch
<= the one asked about it knows and where that epoch ends; when that epoch is not the one the
follower asked about, the follower truncates to where *its* epoch ends and asks again — so two
replicas never keep different records at the same offset after any sequence of failovers; a
leader that does not know the follower's current leader epoch yet answers UNKNOWN_LEADER_EPOCH
and the follower asks again later (KIP-279). A follower with no epochs at all truncates to its
high watermark.

Then *Fetching*: Fetch v12 (replica_id = this broker, the partition's current leader epoch,
replica.fetch.wait.max.ms / min.bytes / max.bytes) from the follower's log end offset; the
batches are appended as they are (offsets and epochs stamped by the leader) and the follower's
high watermark becomes the leader's (capped by its log end offset). The leader learns the
follower's position from the fetch offset itself. Each thread keeps an incremental fetch session
with its leader (KIP-227, kafkasim/client/fetch_session_handler.py, as Kafka's follower does): once
the leader opened one, a Fetch carries only the partitions whose fetch data changed and the
leader answers only those with news; the leader still reads every partition of the session, so
an idle follower stays caught up (in the ISR) without naming its partitions.

Errors: FENCED_LEADER_EPOCH — this fetcher's epoch is old, the partition leaves it until the
next LeaderAndIsr; UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER and the like — retry after
replica.fetch.backoff.ms; OFFSET_OUT_OF_RANGE — the leader's log ends below our fetch offset
(it was elected uncleanly) or starts above it (retention): truncate to its end / start over at
its start.

Note: Kafka 3.9 with Fetch v13+ lets a follower with epochs skip the OffsetForLeaderEpoch round
and learn divergence from the fetch response ("truncation on fetch", KIP-595's
diverging_epoch); both give the same logs. kafkasim runs the OffsetForLeaderEpoch protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkasim.broker.security.inter_broker import inter_broker_address
from kafkasim.broker.zk import zk_data as Z
from kafkasim.client.fetch_session_handler import FetchSessionHandler, PartitionData
from kafkasim.client.network_client import NetworkClient
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.fetch import FetchRequest
from kafkasim.protocol.messages.list_offsets import ListOffsetsRequest
from kafkasim.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kafkasim.records.batch import iter_batches
from kafkasim.records.errors import CorruptRecordError
from kafkasim.runtime.api import Future, NetworkError, NodeRuntime, RuntimeTimeout, Task
from kafkasim.storage.log import KafkaStorageError

if TYPE_CHECKING:
    from kafkasim.broker.partition import Partition
    from kafkasim.broker.replica_manager import ReplicaManager

TopicPartition = tuple[str, int]
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 7
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1


@dataclass
class PartitionFetchState:
    topic_id: bytes
    fetch_offset: int
    current_leader_epoch: int
    truncating: bool = True
    delayed_until_ms: float = 0.0


class ReplicaFetcherThread:
    def __init__(self, manager: ReplicaFetcherManager, leader: Z.BrokerInfo) -> None:
        self.manager = manager
        self.rm = manager.rm
        self.rt: NodeRuntime = manager.rm.rt
        self.leader = leader
        self.name = f"ReplicaFetcherThread-0-{leader.broker_id}"
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.client: NetworkClient | None = None
        self.session = FetchSessionHandler()  # one per fetcher thread, as Kafka's
        self._wakeup: Future[Any] | None = None
        self.task: Task | None = None
        # partitionMapLock, as far as it matters here: held while a fetch response or an epoch
        # answer changes the logs (appends with their flush, truncations with their fsyncs).
        # Removing partitions waits for it and a shutdown never cuts it: Kafka's replica fetcher
        # is not interruptible and its removePartitions takes the lock, so a follower's flush
        # always completes before the partition's new role begins (power-loss-fsync-swarm 2444:
        # a cancelled flush left an offset unsynced that the replica then committed as leader).
        self._busy = False
        self._stopping = False
        self._idle_waiters: list[Future[Any]] = []

    # ---------------------------------------------------------------- membership
    def add_partitions(self, states: dict[TopicPartition, PartitionFetchState]) -> None:
        self.partitions.update(states)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.partitions.pop(tp, None)

    def start(self) -> None:
        self.task = self.rt.spawn(self._run(), name=self.name)

    def shutdown(self) -> None:
        """Stop now, or, while the logs are being changed, as soon as that is done."""
        self._stopping = True
        if self._busy:
            return  # _leave() closes the client; _run returns
        if self.task is not None:
            self.task.cancel()
        if self.client is not None:
            self.client.close()

    async def idle(self) -> None:
        """Wait until no fetch response or epoch answer is being applied (at once if none is:
        no kernel step, so a removal that finds the thread idle changes no interleaving)."""
        if self._busy:
            waiter: Future[Any] = self.rt.future()
            self._idle_waiters.append(waiter)
            await waiter

    def _enter(self) -> None:
        self._busy = True

    def _leave(self) -> None:
        self._busy = False
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            waiter.set_result(None)
        if self._stopping and self.client is not None:
            self.client.close()

    @property
    def config(self) -> Any:
        return self.rm.replication

    # ---------------------------------------------------------------- the loop
    async def _run(self) -> None:
        while not self._stopping:
            if not self.partitions:
                self._wakeup = self.rt.future()
                await self._wakeup
                continue
            failed = False
            try:
                await self._ensure_connected()
                # A partition is ready once its backoff (delayed_until_ms) has passed; the clock
                # is read once per pass (no wait inside one): a fetcher serving the internal
                # topics' 50 partitions read it 100 times per fetch.
                now = self.rt.monotonic_ms()
                truncating = sorted(tp for tp, st in self.partitions.items()
                                    if st.truncating and st.delayed_until_ms <= now)
                if truncating:
                    await self._truncate(truncating)
                now = self.rt.monotonic_ms()
                fetching = sorted(tp for tp, st in self.partitions.items()
                                  if not st.truncating and st.delayed_until_ms <= now)
                if fetching:
                    if self.rt.buggify("replica_fetcher.slow"):  # a busy fetcher thread: the follower lags
                        await self.rt.sleep(self.config.replica_fetch_backoff_ms / 10)
                    await self._fetch(fetching)
                elif not truncating:
                    await self.rt.sleep(self._next_ready_in())
            except (NetworkError, RuntimeTimeout) as exc:
                self.rt.trace("replica_fetch_failed", leader=self.leader.broker_id, error=type(exc).__name__)
                if self.client is not None:
                    self.client.close()
                self.client = None
                failed = True
            if failed:  # backoff outside the except block (kafka_zk_client._get_or_none says why)
                await self.rt.sleep(self.config.replica_fetch_backoff_ms)

    def _next_ready_in(self) -> float:
        now = self.rt.monotonic_ms()
        waits = [st.delayed_until_ms - now for st in self.partitions.values()]
        return max(1.0, min(waits, default=self.config.replica_fetch_backoff_ms))

    def _delay(self, tp: TopicPartition) -> None:
        st = self.partitions.get(tp)
        if st is not None:
            st.delayed_until_ms = self.rt.monotonic_ms() + self.config.replica_fetch_backoff_ms

    async def _ensure_connected(self) -> None:
        if self.client is None or self.client.closed:
            security = self.rm.inter_broker_security
            self.client = NetworkClient(self.rt, *inter_broker_address(self.leader, security),
                                        f"broker-{self.rm.broker_id}-fetcher-0", security=security)
            # Kafka's awaitReady gives up when the NetworkClient's connection setup times out
            # (socket.connection.setup.timeout.ms), not after replica.socket.timeout.ms: a
            # connect begun across a partition must not keep the thread (and every partition
            # it serves, Truncating ones included) blocked long after the partition healed.
            await self.client.connect(self.config.socket_connection_setup_timeout_ms)

    def _partition(self, tp: TopicPartition) -> Partition | None:
        p = self.rm.get_partition(*tp)
        return None if p is None or p.offline else p

    # ---------------------------------------------------------------- truncation (KIP-101/279)
    async def _truncate(self, tps: list[TopicPartition]) -> None:
        self._enter()
        try:
            requests = await self._truncate_without_epochs(tps)
        finally:
            self._leave()
        if not requests or self._stopping:
            return
        await self._ask_epoch_end_offsets(requests)

    async def _truncate_without_epochs(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Truncate the partitions that have no leader epochs; the others' latest epochs."""
        requests: dict[TopicPartition, int] = {}
        for tp in tps:
            p = self._partition(tp)
            if p is not None and self.rt.seeded_bug("skip-follower-truncation"):
                self._fetching_from(tp, p.log.log_end_offset)  # seeded bug: keep a diverged suffix
                continue
            if p is None:
                self.partitions.pop(tp, None)
                continue
            latest = p.log.leader_epoch_cache.latest_epoch
            if latest == UNDEFINED_EPOCH:
                # No epochs to compare: what is above the high watermark cannot be trusted.
                await self._truncate_to(tp, p, p.high_watermark, "no leader epochs")
                self._fetching_from(tp, p.log.log_end_offset)
                continue
            requests[tp] = latest
        return requests

    async def _ask_epoch_end_offsets(self, requests: dict[TopicPartition, int]) -> None:
        T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        by_topic: dict[str, list[Any]] = {}
        for (t, part), epoch in sorted(requests.items()):
            by_topic.setdefault(t, []).append(T.OffsetForLeaderPartition(
                partition=part, current_leader_epoch=self.partitions[(t, part)].current_leader_epoch,
                leader_epoch=epoch))
        req = OffsetForLeaderEpochRequest(replica_id=self.rm.broker_id,
                                          topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()])
        sent_epochs = {tp: self.partitions[tp].current_leader_epoch for tp in requests}
        assert self.client is not None
        resp = await self.client.send(req, OFFSET_FOR_LEADER_EPOCH_VERSION, self.config.replica_socket_timeout_ms)
        self._enter()
        try:
            for topic in resp.topics:
                for r in topic.partitions:
                    tp = (topic.topic, r.partition)
                    st = self.partitions.get(tp)
                    # Kafka's truncateToEpochEndOffsets drops an answer if the partition's leader
                    # epoch changed while it was out (a LeaderAndIsr re-added it): an old epoch's
                    # FENCED_LEADER_EPOCH must not remove the new epoch's state (kill-failover-swarm 791).
                    if tp in requests and st is not None and st.current_leader_epoch == sent_epochs[tp]:
                        await self._on_epoch_end_offset(tp, requests[tp], r.error_code, r.leader_epoch,
                                                        r.end_offset)
        finally:
            self._leave()

    async def _on_epoch_end_offset(self, tp: TopicPartition, asked_epoch: int, error: int, leader_epoch: int,
                                   end_offset: int) -> None:
        p = self._partition(tp)
        if p is None:
            self.partitions.pop(tp, None)
            return
        if error == E.FENCED_LEADER_EPOCH:
            self._fenced(tp)
            return
        if error != E.NONE:
            self._delay(tp)  # UNKNOWN_LEADER_EPOCH (KIP-279): the leader is behind; ask again
            return
        leo = p.log.log_end_offset
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            await self._truncate_to(tp, p, p.high_watermark, "leader knows no epoch <= ours")
            self._fetching_from(tp, p.log.log_end_offset)
            return
        ours = p.log.leader_epoch_cache.end_offset_for(leader_epoch, leo)
        if ours == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET):
            await self._truncate_to(tp, p, min(end_offset, leo), "epoch unknown here")
            self._fetching_from(tp, p.log.log_end_offset)
        elif ours[0] != leader_epoch:
            # We do not know the leader's epoch: cut to where our largest smaller epoch ends and
            # ask again with the epoch that is then our latest.
            await self._truncate_to(tp, p, min(ours[1], leo), "intermediate")
        else:
            await self._truncate_to(tp, p, min(ours[1], end_offset, leo), "diverged")
            self._fetching_from(tp, p.log.log_end_offset)

    async def _truncate_to(self, tp: TopicPartition, p: Partition, offset: int, why: str) -> None:
        before = p.log.log_end_offset
        try:
            # Even at or past the log end: the log then drops epochs that start there
            # (UnifiedLog.truncateTo), as Kafka's fetcher always calls it.
            await self.rm.truncate_partition(p, offset)
        except KafkaStorageError:
            self.rm.on_storage_error()
            self.partitions.pop(tp, None)
            return
        if offset >= before:
            return
        self.rt.trace("follower_truncated", topic=tp[0], partition=tp[1], from_offset=before, to_offset=offset,
                      leader=self.leader.broker_id, reason=why)

    def _fetching_from(self, tp: TopicPartition, offset: int) -> None:
        st = self.partitions.get(tp)
        if st is not None:
            st.truncating, st.fetch_offset = False, offset

    def _fenced(self, tp: TopicPartition) -> None:
        self.rt.trace("replica_fetch_fenced", topic=tp[0], partition=tp[1], leader=self.leader.broker_id)
        self.partitions.pop(tp, None)

    # ---------------------------------------------------------------- fetching
    async def _fetch(self, tps: list[TopicPartition]) -> None:
        wanted = self._fetch_data(tps)
        if not wanted:
            return
        data = self.session.build(wanted)
        req = FetchRequest(replica_id=self.rm.broker_id, max_wait_ms=self.config.replica_fetch_wait_max_ms,
                           min_bytes=self.config.replica_fetch_min_bytes,
                           max_bytes=self.config.replica_fetch_response_max_bytes, isolation_level=0,
                           session_id=data.session_id, session_epoch=data.epoch,
                           topics=_fetch_topics(data.to_send), forgotten_topics_data=_forgotten(data.to_forget),
                           rack_id="")
        assert self.client is not None
        try:
            resp = await self.client.send(req, FETCH_VERSION, self.config.replica_socket_timeout_ms
                                          + self.config.replica_fetch_wait_max_ms)
        except (NetworkError, RuntimeTimeout):
            self.session.handle_error()
            raise
        answered = {(topic.topic, pd.partition_index) for topic in resp.responses for pd in topic.partitions}
        if not self.session.handle_response(resp.error_code, resp.session_id, answered):
            self.rt.trace("replica_fetch_session_reset", leader=self.leader.broker_id, error=resp.error_code,
                          session_id=data.session_id, epoch=data.epoch)
            return
        self._enter()
        try:
            for topic in resp.responses:
                for pd in topic.partitions:
                    tp = (topic.topic, pd.partition_index)
                    # The session's fetch data for tp: what this request asked, or (left out
                    # as unchanged) what an earlier one did — the offset it is at either way.
                    current, asked = self.partitions.get(tp), data.session_partitions.get(tp)
                    if current is None or current.truncating or asked is None \
                            or asked.fetch_offset != current.fetch_offset:
                        continue  # removed or reset while the fetch was in flight
                    await self._process_partition_data(tp, current, pd, asked.current_leader_epoch)
        finally:
            self._leave()

    def _fetch_data(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionData]:
        """What each partition ready to fetch asks now, from the follower's log end."""
        wanted: dict[TopicPartition, PartitionData] = {}
        for tp in tps:
            p = self._partition(tp)
            st = self.partitions.get(tp)
            if p is None or st is None:
                self.partitions.pop(tp, None)
                continue
            st.fetch_offset = p.log.log_end_offset
            wanted[tp] = PartitionData(
                st.topic_id, st.fetch_offset, p.log.log_start_offset,
                1 if self.rt.buggify("replica_fetcher.tiny_fetch") else self.config.replica_fetch_max_bytes,
                st.current_leader_epoch, self._last_fetched_epoch(p))
        return wanted

    def _last_fetched_epoch(self, p: Partition) -> int:
        """Fetch v12's last_fetched_epoch: the epoch of the follower's last batch (its epoch cache's
        latest), so that the leader answers a diverging epoch instead of records when this log
        no longer matches its own (AbstractFetcherThread with isTruncationOnFetchSupported)."""
        if self.rt.seeded_bug("skip-follower-truncation"):
            return UNDEFINED_EPOCH  # seeded bug: never learn of a divergence
        return p.log.leader_epoch_cache.latest_epoch

    async def _process_partition_data(self, tp: TopicPartition, st: PartitionFetchState, pd: Any,
                                      request_epoch: int) -> None:
        p = self._partition(tp)
        if p is None or p.leader_epoch != st.current_leader_epoch:
            self.partitions.pop(tp, None)
            return
        code = pd.error_code
        if code == E.NONE and pd.diverging_epoch.epoch >= 0:
            # Truncation on fetch (KIP-595; AbstractFetcherThread.truncateOnFetchResponse): no
            # records, truncate as an OffsetForLeaderEpoch answer would have us, fetch on from
            # the new log end (its latest epoch asks again if this was an intermediate step).
            # What it catches: a leader that lost its tail and came back leading the same epoch
            # (no LeaderAndIsr tells its followers to truncate).
            div = pd.diverging_epoch
            await self._on_epoch_end_offset(tp, self._last_fetched_epoch(p), E.NONE, div.epoch, div.end_offset)
            self._fetching_from(tp, p.log.log_end_offset)
        elif code == E.NONE:
            await self._append(tp, p, st, pd)
        elif code == E.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(tp, p, st)
        elif code == E.FENCED_LEADER_EPOCH and request_epoch == st.current_leader_epoch:
            self._fenced(tp)
        else:
            # FENCED_LEADER_EPOCH to a request sent at an older epoch than the partition's
            # state has now (a LeaderAndIsr came in while it was out) says nothing about the
            # new epoch: retry after the backoff (AbstractFetcherThread.onPartitionFenced with
            # the request's epoch). Any other error: retry too.
            self._delay(tp)

    async def _append(self, tp: TopicPartition, p: Partition, st: PartitionFetchState, pd: Any) -> None:
        data = bytes(pd.records) if pd.records is not None else b""
        headers: list[Any] = []
        if data:
            try:
                it = iter_batches(data, validate=True)
                headers = list(it)
            except CorruptRecordError as exc:
                self.rt.trace("replica_fetch_corrupt", topic=tp[0], partition=tp[1], error=str(exc))
                self._delay(tp)
                return
            if it.partial:  # a trailing partial batch (max bytes cut it): keep the whole ones
                data = data[:it.position]
            if headers and headers[0][1].base_offset < st.fetch_offset and not await self._below_fetch_offset(
                    tp, p, st, headers[0][1]):
                return
        try:
            await p.append_records_to_follower(data if headers else b"", headers, pd.high_watermark,
                                               pd.log_start_offset)
        except KafkaStorageError:
            self.rm.on_storage_error()
            self.partitions.pop(tp, None)
            return
        st.fetch_offset = p.log.log_end_offset

    async def _below_fetch_offset(self, tp: TopicPartition, p: Partition, st: PartitionFetchState,
                                  first: Any) -> bool:
        """The leader's first batch starts below our log end: may we append it? Kafka's
        UnifiedLog.append throws UnexpectedAppendOffsetException. Partition.appendRecordsToFollower
        recovers only an empty log whose start falls inside the batch (DeleteRecords moved the
        leader's start mid-batch): it starts over at the batch's base. Otherwise the logs differ
        (a follower that kept records its leader lost), and AbstractFetcherThread marks the
        partition failed: it stops fetching until a LeaderAndIsr adds it again. Appending the
        batches after it instead would leave a hole in a replica that then rejoins the ISR."""
        log = p.log
        if log.log_end_offset == log.log_start_offset and first.last_offset >= log.log_end_offset:
            await self.rm.truncate_partition_fully(p, first.base_offset)
            st.fetch_offset = p.log.log_end_offset
            return True
        self.rt.trace("replica_fetch_partition_failed", topic=tp[0], partition=tp[1], leader=self.leader.broker_id,
                      first_offset=first.base_offset, log_end_offset=log.log_end_offset)
        self.manager.failed_partitions[tp] = {"leader": self.leader.broker_id, "first_offset": first.base_offset,
                                              "log_end_offset": log.log_end_offset}
        self.partitions.pop(tp, None)
        return False

    async def _handle_out_of_range(self, tp: TopicPartition, p: Partition, st: PartitionFetchState) -> None:
        """AbstractFetcherThread.fetchOffsetAndTruncate."""
        leader_end = await self._leader_offset(tp, st, LATEST_TIMESTAMP)
        if leader_end is None:
            self._delay(tp)
            return
        leo = p.log.log_end_offset
        if leader_end < leo:
            # The leader's log is shorter: it was elected uncleanly. Match it.
            await self._truncate_to(tp, p, leader_end, "leader log ends below ours (unclean election)")
            st.fetch_offset = p.log.log_end_offset
            return
        leader_start = await self._leader_offset(tp, st, EARLIEST_TIMESTAMP)
        if leader_start is None:
            self._delay(tp)
            return
        if leader_start > leo:
            await self.rm.truncate_partition_fully(p, leader_start)
            self.rt.trace("follower_truncated", topic=tp[0], partition=tp[1], from_offset=leo, to_offset=leader_start,
                          leader=self.leader.broker_id, reason="leader log starts above ours")
        st.fetch_offset = p.log.log_end_offset

    async def _leader_offset(self, tp: TopicPartition, st: PartitionFetchState, timestamp: int) -> int | None:
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=self.rm.broker_id, isolation_level=0, topics=[T(name=tp[0], partitions=[
            T.ListOffsetsPartition(partition_index=tp[1], current_leader_epoch=st.current_leader_epoch,
                                   timestamp=timestamp)])])
        assert self.client is not None
        resp = await self.client.send(req, LIST_OFFSETS_VERSION, self.config.replica_socket_timeout_ms)
        r = resp.topics[0].partitions[0]
        return None if r.error_code != E.NONE else int(r.offset)


class ReplicaFetcherManager:
    """One ReplicaFetcherThread per leader broker (num.replica.fetchers = 1)."""

    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.threads: dict[int, ReplicaFetcherThread] = {}
        self.assigned: dict[TopicPartition, int] = {}
        # AbstractFetcherManager.failedPartitions: those a thread stopped fetching (an unexpected
        # append offset), with what it saw; gone once a LeaderAndIsr adds or removes them again.
        self.failed_partitions: dict[TopicPartition, dict[str, int]] = {}

    async def add_fetcher_for_partitions(self, states: dict[TopicPartition, tuple[Z.BrokerInfo, PartitionFetchState]]
                                         ) -> None:
        by_leader: dict[int, dict[TopicPartition, PartitionFetchState]] = {}
        for tp, (leader, st) in sorted(states.items()):
            thread = self.threads.get(leader.broker_id)
            if thread is not None and (thread.leader.host, thread.leader.port) != (leader.host, leader.port):
                del self.threads[leader.broker_id]  # the leader restarted elsewhere
                await thread.idle()  # Kafka's shutdown joins the thread
                thread.shutdown()
                thread = None
            if thread is None:
                thread = self.threads[leader.broker_id] = ReplicaFetcherThread(self, leader)
                thread.start()
            by_leader.setdefault(leader.broker_id, {})[tp] = st
            self.assigned[tp] = leader.broker_id
            self.failed_partitions.pop(tp, None)
        for bid, sts in sorted(by_leader.items()):
            self.threads[bid].add_partitions(sts)

    async def remove_fetcher_for_partitions(self, tps: list[TopicPartition]) -> None:
        """AbstractFetcherManager.removeFetcherForPartitions: each thread's removePartitions takes
        its partitionMapLock, so an append or truncation in progress finishes first."""
        for thread in self.remove_fetcher_for_partitions_now(tps):
            await thread.idle()
        self.shutdown_idle_fetcher_threads()

    def remove_fetcher_for_partitions_now(self, tps: list[TopicPartition]) -> list[ReplicaFetcherThread]:
        """Remove without waiting (a failed log dir: its appends fail anyway); the threads touched."""
        touched: list[ReplicaFetcherThread] = []
        for tp in tps:
            self.failed_partitions.pop(tp, None)
            bid = self.assigned.pop(tp, None)
            if bid is not None and bid in self.threads:
                thread = self.threads[bid]
                thread.remove_partitions([tp])
                if thread not in touched:
                    touched.append(thread)
        return touched

    def shutdown_idle_fetcher_threads(self) -> None:
        for bid in sorted(self.threads):
            if not self.threads[bid].partitions:
                self.threads.pop(bid).shutdown()

    def shutdown(self) -> None:
        for bid in sorted(self.threads):
            self.threads.pop(bid).shutdown()
        self.assigned.clear()


def _fetch_topics(parts: dict[TopicPartition, PartitionData]) -> list[Any]:
    """Fetch v12's topics, by name, grouped as the partitions come (FetchRequest.Builder)."""
    F = FetchRequest.FetchTopic
    topics: list[Any] = []
    for (topic, index), d in parts.items():
        if not topics or topics[-1].topic != topic:
            topics.append(F(topic=topic, partitions=[]))
        topics[-1].partitions.append(F.FetchPartition(
            partition=index, current_leader_epoch=d.current_leader_epoch, fetch_offset=d.fetch_offset,
            last_fetched_epoch=d.last_fetched_epoch, log_start_offset=d.log_start_offset,
            partition_max_bytes=d.max_bytes))
    return topics


def _forgotten(tps: list[TopicPartition]) -> list[Any]:
    forgotten: list[Any] = []
    for topic, index in tps:
        if not forgotten or forgotten[-1].topic != topic:
            forgotten.append(FetchRequest.ForgottenTopic(topic=topic, partitions=[]))
        forgotten[-1].partitions.append(index)
    return forgotten
