"""ProducerStateManager: the idempotent producer's per-partition state — for each producer id
its epoch and its last 5 appended batches (sequence range and offsets) — as Kafka 3.9 keeps it
(`ProducerStateManager`, `ProducerStateEntry`, `ProducerAppendInfo`, `UnifiedLog`'s
`analyzeAndValidateProducerState`), and its snapshots on disk.

Rules applied to a client's batch that carries a producer id (Kafka 3.9):

  - base sequence < 0 ........................................ INVALID_RECORD (LogValidator)
  - a non-transactional batch while the producer's transaction
    is ongoing ............................................... INVALID_TXN_STATE
  - same epoch and the exact sequence range of one of the last 5
    batches of that producer ................................. a duplicate: success with the
                                                                ORIGINAL offsets, nothing appended
  - epoch < the producer's epoch ............................. INVALID_PRODUCER_EPOCH
  - new epoch and sequence != 0 (producer known) ............. OUT_OF_ORDER_SEQUENCE_NUMBER
  - same epoch and sequence != last sequence + 1 (with wrap at
    INT32_MAX to 0) .......................................... OUT_OF_ORDER_SEQUENCE_NUMBER
  - unknown producer (no state: new, or all its batches deleted
    by retention/DeleteRecords) .............................. accepted at ANY sequence — 3.9
                                                                returns UNKNOWN_PRODUCER_ID no more
                                                                ("accept writes with any sequence")

Snapshot file `<log dir>/<topic>-<p>/<20-digit offset>.snapshot` — the state of every producer
after all batches below `offset` (Kafka's `ProducerStateManager.writeSnapshot`, version 1;
big-endian; checked byte for byte against a Kafka 3.9.1 broker's snapshot)::

    offset  size  field
         0     2  version                 int16   = 1
         2     4  crc                     uint32  CRC-32C of bytes [6, end)
         6     4  producer_entries count  int32
        10    46  entry * count:
                     producer_id              int64
                     epoch                    int16
                     last_sequence            int32   of the producer's last batch (-1: none)
                     last_offset              int64   of the last batch (-1: no batch kept)
                     offset_delta             int32   last_offset - first offset of that batch
                     timestamp                int64   the batch's max timestamp
                     coordinator_epoch        int32   of the producer's last marker (-1: none)
                     current_txn_first_offset int64   first offset of its ongoing transaction
                                                      (-1: none)

Only the LAST batch of each producer is in a snapshot (as in Kafka), so after a restart a retry
of an older batch of the window is OUT_OF_ORDER rather than a duplicate, as on Kafka.

When snapshots are taken (Kafka's points): when the log rolls a segment (named by the new
segment's base offset, holding the state before it) and after loading at the log end offset.
They are written without fsync (Kafka fsyncs them in the background): a crash may lose or tear
one; a torn or zeroed one fails its version/CRC check and is deleted, and the state is rebuilt
from an older snapshot or from the log.

Loading (`ProducerStateManager.load`, Kafka's `truncateAndReload` + `rebuildProducerState`):
drop snapshots above the log end offset or at/below the log start offset, read the latest valid
one, then replay the batches of the log from that offset (or the log start offset) to its end.

Transactions (Kafka's ProducerAppendInfo.appendDataBatch / appendEndTxnMarker, TxnMetadata,
CompletedTxn): a producer's first transactional batch starts a transaction at its base offset
(`ongoing_txns`, keyed by that offset); its ABORT or COMMIT marker (a control batch, written by
the coordinator only: AppendOrigin.COORDINATOR) ends it —

  - marker epoch < the producer's epoch ....................... INVALID_PRODUCER_EPOCH
  - marker coordinator epoch < the producer's coordinator epoch  TRANSACTION_COORDINATOR_FENCED
  - a marker for a producer with no ongoing transaction is accepted (and bumps its epoch) but
    completes nothing.

A completed transaction stays "unreplicated" until the high watermark passes its marker; the
first unstable offset is the lowest first offset of an ongoing or unreplicated transaction, and
the log's last stable offset is min(first unstable offset, high watermark). An aborted
transaction goes into the `.txnindex` of the segment its marker is in (txn_index.py), with the
LSO at that moment: the first offset of the earliest ongoing transaction of ANOTHER producer,
else the marker offset + 1 (ProducerStateManager.lastStableOffset). Origins checked: CLIENT
(epoch, sequence, duplicates), COORDINATOR (epoch, coordinator epoch), REPLICATION (nothing: the
leader checked; a follower and recovery take the log as it is).

KIP-890 part 1 (verification.py): a transactional data batch from a client or the group
coordinator, for a producer with no transaction ongoing here, is appended only with the guard of
the producer's verification state entry (created when the leader asked the coordinator);
otherwise INVALID_TXN_STATE "Record was not part of an ongoing transaction". Any transactional
batch appended clears the entry.

Expiry (`removeExpiredProducers`, every producer.id.expiration.check.interval.ms from the
LogManager): a producer with no transaction ongoing whose last batch's timestamp is
producer.id.expiration.ms old is forgotten (its next batch is accepted at any sequence), and so
is a verification entry that old.

A late transaction (`hasLateTransaction`, behind Kafka's PartitionsWithLateTransactionsCount
metric): the producer of the oldest ongoing transaction last wrote more than
transaction.max.timeout.ms + 5 minutes ago — the coordinator should have aborted it by then.

Loading a snapshot skips the producers expired by then (`loadFromSnapshot` with
`isProducerExpired`: no transaction ongoing and last timestamp producer.id.expiration.ms old at
the load's clock), so a broker down for longer than that forgets them at once; the producers
rebuilt from the batches replayed after the snapshot are kept whatever their age (as in Kafka;
the periodic check removes them later).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Final

from kafkasim.protocol import errors as E
from kafkasim.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader, Buffer, iter_batches
from kafkasim.records.control import EndTxnMarker, parse_end_txn_marker_batch
from kafkasim.records.crc import crc32c
from kafkasim.records.errors import CorruptRecordError
from kafkasim.storage.append_info import AppendInfo
from kafkasim.storage.segment import DELETED_SUFFIX
from kafkasim.storage.txn_index import AbortedTxn
from kafkasim.storage.verification import VerificationGuard, VerificationStateEntry

if TYPE_CHECKING:
    from kafkasim.storage.log import Log

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
LONG_MAX = 2**63 - 1
SNAPSHOT_SUFFIX = ".snapshot"
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
PRODUCER_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")        # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")    # 46 bytes, fields as in the layout above
_ENTRIES_OFFSET = 6                             # the CRC covers [6, end)
_REPLAY_CHUNK_BYTES = 1 << 20


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence: sequences wrap from INT32_MAX to 0."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class AppendOrigin(Enum):
    """Who appends (Kafka's AppendOrigin): how much of a batch is checked."""

    CLIENT = "client"            # Produce: epoch, sequence, duplicates; no control batches
    COORDINATOR = "coordinator"  # WriteTxnMarkers, the group coordinator: epoch (+ coordinator epoch)
    REPLICATION = "replication"  # a follower, recovery, loading: nothing


@dataclass(init=False)
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None  # the marker's, once completed

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, producer_id: int, first_offset: int, last_offset: int | None = None) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset


@dataclass(init=False, unsafe_hash=True)
class CompletedTxn:
    producer_id: Final[int]
    first_offset: Final[int]
    last_offset: Final[int]  # the marker's offset
    is_aborted: Final[bool]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, producer_id: int, first_offset: int, last_offset: int, is_aborted: bool) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.is_aborted = is_aborted


class ProducerStateError(Exception):
    """A batch the producer state refuses; `error_code` is Kafka's answer."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class CorruptSnapshotError(Exception):
    pass


# ---------------------------------------------------------------- entries
@dataclass(init=False, unsafe_hash=True)
class BatchMetadata:
    last_seq: Final[int]
    last_offset: Final[int]
    offset_delta: Final[int]
    timestamp: Final[int]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.last_seq = last_seq
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(init=False)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_timestamp: int
    current_txn_first_offset: int
    batches: deque[BatchMetadata]

    # Written out (init=False; its defaults are the only ones) so that mypyc compiles it: a
    # dataclass-made __init__ runs interpreted.
    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = -1, current_txn_first_offset: int = -1,
                 batches: deque[BatchMetadata] | None = None) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches = deque(maxlen=NUM_BATCHES_TO_RETAIN) if batches is None else batches

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.producer_epoch:
            return None
        first, last = h.base_sequence, h.last_sequence
        return next((b for b in self.batches if b.first_seq == first and b.last_seq == last), None)


# ---------------------------------------------------------------- validation of one append
class ProducerAppendInfo:
    """The checks of one producer's batches in one append, against its state before it
    (Kafka's ProducerAppendInfo). `updated` collects the new state; `started` the transactions
    this append begins."""

    def __init__(self, partition: str, current: ProducerStateEntry, origin: AppendOrigin,
                 verification: VerificationStateEntry | None = None) -> None:
        self.partition = partition
        self.current = current
        self.origin = origin
        self.verification = verification
        self.saw_transactional = False  # a marker or a transaction's batch: its verification is used up
        self.updated = ProducerStateEntry(current.producer_id, current.producer_epoch, current.coordinator_epoch,
                                          current.last_timestamp, current.current_txn_first_offset)
        self.started: list[TxnMetadata] = []

    @property
    def producer_id(self) -> int:
        return self.current.producer_id

    def append_data_batch(self, h: BatchHeader, first_offset: int) -> None:
        if self.origin != AppendOrigin.REPLICATION:
            self._check_producer_epoch(h.producer_epoch, first_offset)
        if self.origin == AppendOrigin.CLIENT:
            self._check_sequence(h.producer_epoch, h.base_sequence, first_offset)
        last_offset = first_offset + h.last_offset_delta
        self.updated.add_batch(h.producer_epoch, h.last_sequence, last_offset, last_offset - first_offset,
                               h.max_timestamp)
        in_txn = self.updated.current_txn_first_offset >= 0
        if in_txn and not h.is_transactional:
            # Kafka throws for every origin; a replica takes what its leader accepted.
            if self.origin != AppendOrigin.REPLICATION:
                raise ProducerStateError(E.INVALID_TXN_STATE,
                                         f"Expected transactional write from producer {self.producer_id} at offset "
                                         f"{first_offset} in partition {self.partition}")
        elif not in_txn and h.is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, marker: EndTxnMarker, offset: int) -> CompletedTxn | None:
        """The producer's ABORT/COMMIT at `offset`: the completed transaction, None when it had
        none ongoing (an empty transaction changes neither the LSO nor the txn index)."""
        if self.origin != AppendOrigin.REPLICATION:
            self._check_producer_epoch(marker.producer_epoch, offset)
            if self.updated.coordinator_epoch > marker.coordinator_epoch:
                raise ProducerStateError(
                    E.TRANSACTION_COORDINATOR_FENCED,
                    f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset} in partition "
                    f"{self.partition}: {marker.coordinator_epoch} (zombie), {self.updated.coordinator_epoch} "
                    "(current)")
        first = self.updated.current_txn_first_offset
        completed = CompletedTxn(self.producer_id, first, offset, not marker.committed) if first >= 0 else None
        self.updated.maybe_update_producer_epoch(marker.producer_epoch)
        self.updated.current_txn_first_offset = -1
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = marker.timestamp_ms
        return completed

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            raise ProducerStateError(
                E.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {self.current.producer_id} at offset {offset} in {self.partition} is {epoch}, "
                f"which is smaller than the last seen epoch {self.updated.producer_epoch}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        pid = self.current.producer_id
        if self.verification is not None and first_seq > self.verification.lowest_sequence:
            raise ProducerStateError(
                E.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {pid} at offset {offset} in partition {self.partition}: "
                f"{first_seq} (incoming seq. number), {self.verification.lowest_sequence} (earliest seen sequence)")
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    E.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {pid} at offset {offset} in partition "
                    f"{self.partition}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)")
            return
        if not self.updated.is_empty:
            current_last = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last = self.current.last_seq
        else:
            current_last = NO_SEQUENCE
        # No current epoch (e.g. all its records deleted): accept writes with any sequence number.
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last, first_seq)):
            raise ProducerStateError(
                E.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {pid} at offset {offset} in partition {self.partition}: "
                f"{first_seq} (incoming seq. number), {current_last} (current end sequence number)")


# ---------------------------------------------------------------- snapshot codec
def encode_snapshot(entries: list[ProducerStateEntry]) -> bytes:
    body = b"".join(_SNAPSHOT_ENTRY.pack(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset,
                                         e.last_offset_delta, e.last_timestamp, e.coordinator_epoch,
                                         e.current_txn_first_offset)
                    for e in sorted(entries, key=lambda e: e.producer_id))
    tail = struct.pack(">i", len(entries)) + body
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c(tail)) + tail


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshotError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                   f"Computed crc: {computed}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot length {len(data)} does not hold {count} entries")
    out = []
    for i in range(count):
        pid, epoch, seq, offset, delta, ts, coord, txn = _SNAPSHOT_ENTRY.unpack_from(
            data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size)
        entry = ProducerStateEntry(pid, epoch, coord, ts, txn)
        if offset >= 0:
            entry.batches.append(BatchMetadata(seq, offset, delta, ts))
        out.append(entry)
    return out


# ---------------------------------------------------------------- the manager
# Called for each transaction a replay completes, with its LSO (the txn index rebuild's hook).
CompletionHook = Callable[[CompletedTxn, int], None]


class ProducerStateManager:
    def __init__(self, log: Log) -> None:
        self.fs, self.dir, self.partition = log.fs, log.dir, f"{log.topic}-{log.partition}"
        self.producers: dict[int, ProducerStateEntry] = {}
        # Transactions by first offset: undecided ones, and decided ones whose marker is not
        # below the high watermark yet (both hold the last stable offset back).
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        self.last_map_offset = 0      # state covers every batch below this offset
        self.last_snap_offset = 0
        self.loaded_snapshot_offset: int | None = None  # which snapshot load() started from
        self._log = log
        self._pending: dict[int, ProducerAppendInfo] = {}
        self._pending_completed: list[CompletedTxn] = []
        self._segment_base = 0
        self.verification_states: dict[int, VerificationStateEntry] = {}

    # ------------------------------------------------------------ load
    @classmethod
    def load(cls, log: Log) -> ProducerStateManager:
        psm = cls(log)
        psm._segment_base = psm._active_segment_base()
        psm._truncate_and_reload(log.log_start_offset, log.log_end_offset, log.rt.now_ms())
        psm._replay(max(psm.last_map_offset, log.log_start_offset), log.log_end_offset)
        psm.last_map_offset = log.log_end_offset
        psm.take_snapshot()
        return psm

    @classmethod
    def rebuild_txn_indexes(cls, log: Log, bases: set[int]) -> None:
        """The producer-state pass of LogSegment.recover (LogLoader.recoverSegment): the
        segments at `bases` had their txn indexes reset; replay the log from the first of them
        with the state before it (latest snapshot at or below it, then the batches up to it) and
        append every aborted transaction whose marker is in one of them. Snapshots are left
        as they are (the load that follows deals with them)."""
        if not bases:
            return
        first = min(bases)
        psm = cls(log)
        psm._load_latest_snapshot(log.log_start_offset, first, log.rt.now_ms())
        psm._replay(max(psm.last_map_offset, log.log_start_offset), first)

        def on_completed(txn: CompletedTxn, lso: int) -> None:
            seg = log.segment_containing(txn.last_offset)
            if txn.is_aborted and seg is not None and seg.base_offset in bases:
                seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        psm._replay(max(first, log.log_start_offset), log.log_end_offset, on_completed)

    def snapshot_offsets(self) -> list[int]:
        names = [n for n in self.fs.listdir(self.dir) if n.endswith(SNAPSHOT_SUFFIX)]
        offsets = []
        for n in names:
            stem = n[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def _truncate_and_reload(self, log_start: int, log_end: int, now_ms: float) -> None:
        for off in self.snapshot_offsets():
            if off > log_end or off <= log_start:
                self._delete_snapshot(off)
        self._load_latest_snapshot(log_start, log_end, now_ms)

    def _load_latest_snapshot(self, log_start: int, upto: int, now_ms: float) -> None:
        """The state of the latest valid snapshot in (log_start, upto] (corrupt ones deleted),
        without the producers expired at `now_ms` (ProducerStateManager.loadFromSnapshot)."""
        self.producers, self.ongoing_txns, self.unreplicated_txns = {}, {}, {}
        self.last_map_offset = self.last_snap_offset = log_start
        for off in reversed(self.snapshot_offsets()):
            if off > upto or off <= log_start:
                continue
            try:
                entries = decode_snapshot(self._read_file(snapshot_name(off)))
            except CorruptSnapshotError:
                self._delete_snapshot(off)
                continue
            for e in entries:
                if not self.is_producer_expired(e, now_ms):
                    self._load_entry(e)
            self.last_map_offset = self.last_snap_offset = off
            self.loaded_snapshot_offset = off
            return

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        """ProducerStateManager.loadProducerEntry: an entry with a transaction ongoing reopens it."""
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            first = entry.current_txn_first_offset
            self.ongoing_txns[first] = TxnMetadata(entry.producer_id, first)

    def _replay(self, start: int, end: int, on_completed: CompletionHook | None = None) -> None:
        """Rebuild from the log's batches in [start, end) — no checks (AppendOrigin.REPLICATION)."""
        offset = start
        while offset < end:
            data = self._log.read(offset, _REPLAY_CHUNK_BYTES)
            next_offset = offset
            for pos, h in iter_batches(data):
                if h.next_offset > end:
                    break
                if h.last_offset >= offset and h.has_producer_id:
                    info = ProducerAppendInfo(self.partition, self._entry(h.producer_id), AppendOrigin.REPLICATION)
                    completed = self._append_batch(info, data, pos, h, h.base_offset)
                    self._commit(info)
                    if completed is not None:
                        lso = self.last_stable_offset_of(completed)
                        if on_completed is not None:
                            on_completed(completed, lso)
                        self.complete_txn(completed)
                next_offset = h.next_offset
            if next_offset <= offset:
                break
            offset = next_offset

    def _append_batch(self, info: ProducerAppendInfo, buf: Buffer | None, pos: int, h: BatchHeader,
                      first_offset: int) -> CompletedTxn | None:
        """ProducerAppendInfo.append: a control batch ends the transaction (an empty one — the
        cleaner emptied it — or another control type changes nothing), a data batch is added."""
        info.saw_transactional = info.saw_transactional or h.is_transactional
        if not h.is_control:
            info.append_data_batch(h, first_offset)
            return None
        if buf is None:
            raise ValueError("a control batch needs its bytes to be read")
        try:
            marker = parse_end_txn_marker_batch(buf, pos)
        except CorruptRecordError as exc:
            if info.origin == AppendOrigin.REPLICATION:
                return None
            raise ProducerStateError(E.INVALID_RECORD, f"invalid transaction marker: {exc}") from exc
        return None if marker is None else info.append_end_txn_marker(marker, first_offset)

    # ------------------------------------------------------------ transactions
    def last_stable_offset_of(self, txn: CompletedTxn) -> int:
        """ProducerStateManager.lastStableOffset: the first offset of the earliest ongoing
        transaction of another producer, else just past the marker."""
        for first in sorted(self.ongoing_txns):
            if self.ongoing_txns[first].producer_id != txn.producer_id:
                return first
        return txn.last_offset + 1

    def complete_txn(self, txn: CompletedTxn) -> None:
        meta = self.ongoing_txns.pop(txn.first_offset, None) or TxnMetadata(txn.producer_id, txn.first_offset)
        meta.last_offset = txn.last_offset
        self.unreplicated_txns[txn.first_offset] = meta

    def first_unstable_offset(self) -> int | None:
        """The lowest first offset of a transaction undecided, or decided with its marker at or
        above the high watermark (None: every transaction is stable)."""
        if not self.ongoing_txns and not self.unreplicated_txns:
            return None
        return min(min(self.ongoing_txns, default=LONG_MAX), min(self.unreplicated_txns, default=LONG_MAX))

    def first_undecided_offset(self) -> int | None:
        return min(self.ongoing_txns, default=None)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated(high_watermark)

    def _remove_unreplicated(self, offset: int) -> None:
        for first in [f for f, t in self.unreplicated_txns.items() if t.last_offset is not None and
                      t.last_offset < offset]:
            del self.unreplicated_txns[first]

    # ------------------------------------------------------------ KIP-890 verification
    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              now_ms: float) -> VerificationStateEntry:
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def is_producer_expired(self, entry: ProducerStateEntry, now_ms: float, expiration_ms: int | None = None) -> bool:
        """ProducerStateManager.isProducerExpired (by producer.id.expiration.ms unless given)."""
        limit = self._log.producer_id_expiration_ms if expiration_ms is None else expiration_ms
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= limit

    def remove_expired_producers(self, now_ms: float, expiration_ms: int) -> list[int]:
        """ProducerStateManager.removeExpiredProducers: the producer ids removed."""
        expired = sorted(pid for pid, e in self.producers.items() if self.is_producer_expired(e, now_ms, expiration_ms))
        for pid in expired:
            del self.producers[pid]
        for pid in [pid for pid, v in self.verification_states.items() if now_ms - v.timestamp_ms >= expiration_ms]:
            del self.verification_states[pid]
        return expired

    def has_late_transaction(self, now_ms: float, max_transaction_timeout_ms: int) -> bool:
        """ProducerStateManager.hasLateTransaction (its oldestTxnLastTimestamp, computed here on
        demand): by the last timestamp of the oldest ongoing transaction's producer."""
        if not self.ongoing_txns:
            return False
        entry = self.producers.get(self.ongoing_txns[min(self.ongoing_txns)].producer_id)
        last = entry.last_timestamp if entry is not None else -1
        return last > 0 and now_ms - last > max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def _check_verified(self, h: BatchHeader, guard: VerificationGuard | None) -> None:
        """UnifiedLog.analyzeAndValidateProducerState: a transactional data batch opening a
        transaction here needs the guard of its verification (guard None: not checked)."""
        if guard is None or not h.is_transactional or h.is_control or self.has_ongoing_transaction(h.producer_id):
            return
        entry = self.verification_states.get(h.producer_id)
        if entry is None or not entry.verification_guard.verify(guard):
            raise ProducerStateError(E.INVALID_TXN_STATE, "Record was not part of an ongoing transaction")

    # ------------------------------------------------------------ append hooks
    def analyze_append(self, headers: list[tuple[int, BatchHeader]], first_offset: int,
                       origin: AppendOrigin = AppendOrigin.CLIENT, buf: Buffer | None = None,
                       verification_guard: VerificationGuard | None = None) -> AppendInfo | None:
        """Check the batches a leader is about to append at `first_offset` (`buf` holds them:
        markers are read from it). Returns the original append's info when a client's batches
        are a duplicate; raises ProducerStateError to refuse. `verification_guard`: the guard
        a KIP-890 verification got (SENTINEL: none), None when appends are not verified."""
        self._pending, self._pending_completed = {}, []
        offset = first_offset
        for pos, h in headers:
            if h.has_producer_id:
                if origin == AppendOrigin.CLIENT:
                    if h.base_sequence < 0:
                        raise ProducerStateError(E.INVALID_RECORD, f"Invalid sequence number {h.base_sequence} in "
                                                 f"record batch with producerId {h.producer_id}")
                    entry = self.producers.get(h.producer_id)
                    dup = entry.find_duplicate_batch(h) if entry is not None else None
                    if dup is not None:
                        self._pending = {}
                        return AppendInfo(dup.first_offset, dup.last_offset, h.records_count, dup.timestamp,
                                          log_append_time=dup.timestamp)
                if origin in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR):
                    self._check_verified(h, verification_guard)
                info = self._pending.get(h.producer_id)
                if info is None:
                    info = self._pending[h.producer_id] = ProducerAppendInfo(
                        self.partition, self._entry(h.producer_id), origin, self.verification_states.get(h.producer_id))
                completed = self._append_batch(info, buf, pos, h, offset)
                if completed is not None:
                    self._pending_completed.append(completed)
            offset += h.last_offset_delta + 1
        return None

    def on_append(self, info: AppendInfo) -> None:
        """After the log appended what analyze_append checked: snapshot if the log rolled a
        segment (state before the new segment), then record the new batches and the
        transactions they completed (UnifiedLog.append)."""
        self._maybe_snapshot_on_roll()
        for pending in self._pending.values():
            self._commit(pending)
        completed, self._pending, self._pending_completed = self._pending_completed, {}, []
        for txn in completed:
            self._complete_in_active_segment(txn)
        self.last_map_offset = info.last_offset + 1

    def on_replicated_append(self, records: Buffer, headers: list[tuple[int, BatchHeader]]) -> None:
        """A follower appended the leader's batches (AppendOrigin.REPLICATION): record them
        without checks, so the state (and the txn index) is there should this replica lead."""
        self._maybe_snapshot_on_roll()
        for pos, h in headers:
            if h.has_producer_id:
                info = ProducerAppendInfo(self.partition, self._entry(h.producer_id), AppendOrigin.REPLICATION)
                completed = self._append_batch(info, records, pos, h, h.base_offset)
                self._commit(info)
                if completed is not None:
                    self._complete_in_active_segment(completed)
            self.last_map_offset = h.next_offset

    def _complete_in_active_segment(self, txn: CompletedTxn) -> None:
        """LogSegment.updateTxnIndex, then completeTxn: the marker went to the active segment."""
        lso = self.last_stable_offset_of(txn)
        if txn.is_aborted:
            self._log.active_segment.txn_index.append(
                AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        self.complete_txn(txn)

    def _maybe_snapshot_on_roll(self) -> None:
        base = self._active_segment_base()
        if base != self._segment_base:
            self._segment_base = base
            if base == self.last_map_offset:
                self.take_snapshot()

    def _active_segment_base(self) -> int:
        segments = self._log.segments
        return segments[-1].base_offset if segments else 0

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        return self.producers.get(producer_id) or ProducerStateEntry(producer_id)

    def _commit(self, info: ProducerAppendInfo) -> None:
        updated = info.updated
        current = self.producers.get(updated.producer_id)
        if current is None:
            self.producers[updated.producer_id] = updated
        else:
            current.maybe_update_producer_epoch(updated.producer_epoch)
            current.batches.extend(updated.batches)
            current.coordinator_epoch = updated.coordinator_epoch
            current.current_txn_first_offset = updated.current_txn_first_offset
            current.last_timestamp = updated.last_timestamp
        for txn in info.started:
            self.ongoing_txns[txn.first_offset] = txn
        if info.saw_transactional:
            # UnifiedLog.updateProducers: the transaction is complete or has its first offset.
            self.clear_verification_state_entry(updated.producer_id)

    # ------------------------------------------------------------ snapshots
    def take_snapshot(self) -> None:
        """Write the state at last_map_offset unless a snapshot there (or later) exists."""
        if self.last_map_offset <= self.last_snap_offset:
            return
        f = self.fs.open(f"{self.dir}/{snapshot_name(self.last_map_offset)}")
        try:
            f.truncate(0)
            f.append(encode_snapshot(list(self.producers.values())))
        finally:
            f.close()
        self.last_snap_offset = self.last_map_offset
        oldest_segment = self._oldest_segment_base()
        for off in self.snapshot_offsets():
            if off < oldest_segment:
                self._delete_snapshot(off)

    def _oldest_segment_base(self) -> int:
        segments = self._log.segments
        return segments[0].base_offset if segments else 0

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """ProducerStateManager.removeAndMarkSnapshotForDeletion: the snapshot of a segment
        retention deletes is renamed `.deleted` (removed with the segment's files, or by the next
        load); returns its new path, None when there is none."""
        path = f"{self.dir}/{snapshot_name(offset)}"
        if not self.fs.exists(path):
            return None
        self.fs.rename(path, path + DELETED_SUFFIX)
        return path + DELETED_SUFFIX

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """ProducerStateManager.onLogStartOffsetIncremented."""
        self._remove_unreplicated(log_start_offset)
        self.last_map_offset = max(self.last_map_offset, log_start_offset)
        offsets = self.snapshot_offsets()
        self.last_snap_offset = offsets[-1] if offsets else log_start_offset

    def _read_file(self, name: str) -> bytes:
        f = self.fs.open(f"{self.dir}/{name}", create=False)
        try:
            return f.read(0, f.size())
        finally:
            f.close()

    def _delete_snapshot(self, offset: int) -> None:
        path = f"{self.dir}/{snapshot_name(offset)}"
        if self.fs.exists(path):
            self.fs.unlink(path)
