"""ProducerStateManager: the idempotent producer's per-partition state — for each producer id
its epoch and its last 5 appended batches (sequence range and offsets) — as Kafka 3.9 keeps it
(`ProducerStateManager`, `ProducerStateEntry`, `ProducerAppendInfo`, `UnifiedLog`'s
`analyzeAndValidateProducerState`), and its snapshots on disk.

Rules applied to a client's batch that carries a producer id (Kafka 3.9):

  - base sequence < 0 ........................................ INVALID_RECORD (LogValidator)
  - transactional batch ...................................... INVALID_TXN_STATE (no transactions here)
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
                     coordinator_epoch        int32   -1 (no transactions)
                     current_txn_first_offset int64   -1 (no transactions)

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

Not modelled: producer id expiration (`producer.id.expiration.ms`), transactions.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkasim.protocol import errors as E
from kafkasim.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader, iter_batches
from kafkasim.records.crc import crc32c
from kafkasim.storage.append_info import AppendInfo
from kafkasim.storage.segment import DELETED_SUFFIX

if TYPE_CHECKING:
    from kafkasim.storage.log import Log

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
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


class ProducerStateError(Exception):
    """A batch the producer state refuses; `error_code` is Kafka's answer."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class CorruptSnapshotError(Exception):
    pass


# ---------------------------------------------------------------- entries
@dataclass(frozen=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

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
    (Kafka's ProducerAppendInfo for AppendOrigin.CLIENT). `updated` collects the new batches."""

    def __init__(self, partition: str, current: ProducerStateEntry) -> None:
        self.partition = partition
        self.current = current
        self.updated = ProducerStateEntry(current.producer_id, current.producer_epoch, current.coordinator_epoch,
                                          current.last_timestamp, current.current_txn_first_offset)

    def append_data_batch(self, h: BatchHeader, first_offset: int, validate: bool) -> None:
        if validate:
            self._check_producer_epoch(h.producer_epoch, first_offset)
            self._check_sequence(h.producer_epoch, h.base_sequence, first_offset)
        last_offset = first_offset + h.last_offset_delta
        self.updated.add_batch(h.producer_epoch, h.last_sequence, last_offset, last_offset - first_offset,
                               h.max_timestamp)

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            raise ProducerStateError(
                E.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {self.current.producer_id} at offset {offset} in {self.partition} is {epoch}, "
                f"which is smaller than the last seen epoch {self.updated.producer_epoch}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        pid = self.current.producer_id
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
class ProducerStateManager:
    def __init__(self, log: Log) -> None:
        self.fs, self.dir, self.partition = log.fs, log.dir, f"{log.topic}-{log.partition}"
        self.producers: dict[int, ProducerStateEntry] = {}
        self.last_map_offset = 0      # state covers every batch below this offset
        self.last_snap_offset = 0
        self.loaded_snapshot_offset: int | None = None  # which snapshot load() started from
        self._log = log
        self._pending: dict[int, ProducerAppendInfo] = {}
        self._segment_base = 0

    # ------------------------------------------------------------ load
    @classmethod
    def load(cls, log: Log) -> ProducerStateManager:
        psm = cls(log)
        psm._segment_base = psm._active_segment_base()
        psm._truncate_and_reload(log.log_start_offset, log.log_end_offset)
        psm._replay(max(psm.last_map_offset, log.log_start_offset), log.log_end_offset)
        psm.last_map_offset = log.log_end_offset
        psm.take_snapshot()
        return psm

    def snapshot_offsets(self) -> list[int]:
        names = [n for n in self.fs.listdir(self.dir) if n.endswith(SNAPSHOT_SUFFIX)]
        offsets = []
        for n in names:
            stem = n[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def _truncate_and_reload(self, log_start: int, log_end: int) -> None:
        for off in self.snapshot_offsets():
            if off > log_end or off <= log_start:
                self._delete_snapshot(off)
        self.last_map_offset = self.last_snap_offset = log_start
        for off in reversed(self.snapshot_offsets()):
            try:
                entries = decode_snapshot(self._read_file(snapshot_name(off)))
            except CorruptSnapshotError:
                self._delete_snapshot(off)
                continue
            self.producers = {e.producer_id: e for e in entries}
            self.last_map_offset = self.last_snap_offset = off
            self.loaded_snapshot_offset = off
            return

    def _replay(self, start: int, end: int) -> None:
        """Rebuild from the log's batches in [start, end) — no checks (AppendOrigin.REPLICATION)."""
        offset = start
        while offset < end:
            data = self._log.read(offset, _REPLAY_CHUNK_BYTES)
            next_offset = offset
            for _, h in iter_batches(data):
                if h.last_offset >= offset and h.has_producer_id and not h.is_control:
                    info = ProducerAppendInfo(self.partition, self._entry(h.producer_id))
                    info.append_data_batch(h, h.base_offset, validate=False)
                    self._commit(info)
                next_offset = h.next_offset
            if next_offset <= offset:
                break
            offset = next_offset

    # ------------------------------------------------------------ append hooks
    def analyze_append(self, headers: list[tuple[int, BatchHeader]], first_offset: int) -> AppendInfo | None:
        """Check a client's batches before they are appended at `first_offset`. Returns the
        original append's info when they are a duplicate; raises ProducerStateError to refuse."""
        self._pending = {}
        offset = first_offset
        for _, h in headers:
            if h.has_producer_id:
                if h.base_sequence < 0:
                    raise ProducerStateError(E.INVALID_RECORD, f"Invalid sequence number {h.base_sequence} in "
                                             f"record batch with producerId {h.producer_id}")
                if h.is_transactional:
                    raise ProducerStateError(E.INVALID_TXN_STATE, "transactions are not supported by this broker")
                entry = self.producers.get(h.producer_id)
                dup = entry.find_duplicate_batch(h) if entry is not None else None
                if dup is not None:
                    self._pending = {}
                    return AppendInfo(dup.first_offset, dup.last_offset, h.records_count, dup.timestamp)
                info = self._pending.get(h.producer_id)
                if info is None:
                    info = self._pending[h.producer_id] = ProducerAppendInfo(self.partition,
                                                                             self._entry(h.producer_id))
                info.append_data_batch(h, offset, validate=True)
            offset += h.last_offset_delta + 1
        return None

    def on_append(self, info: AppendInfo) -> None:
        """After the log appended what analyze_append checked: snapshot if the log rolled a
        segment (state before the new segment), then record the new batches."""
        self._maybe_snapshot_on_roll()
        for pending in self._pending.values():
            self._commit(pending)
        self._pending = {}
        self.last_map_offset = info.last_offset + 1

    def on_replicated_append(self, headers: list[tuple[int, BatchHeader]]) -> None:
        """A follower appended the leader's batches (AppendOrigin.REPLICATION): record them
        without checks, so the state is there should this replica become leader."""
        self._maybe_snapshot_on_roll()
        for _, h in headers:
            if h.has_producer_id and not h.is_control:
                info = ProducerAppendInfo(self.partition, self._entry(h.producer_id))
                info.append_data_batch(h, h.base_offset, validate=False)
                self._commit(info)
            self.last_map_offset = h.next_offset

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
            return
        current.maybe_update_producer_epoch(updated.producer_epoch)
        current.batches.extend(updated.batches)
        current.coordinator_epoch = updated.coordinator_epoch
        current.current_txn_first_offset = updated.current_txn_first_offset
        current.last_timestamp = updated.last_timestamp

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
        """ProducerStateManager.onLogStartOffsetIncremented (no transactions to drop here)."""
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
