"""LeaderEpochFileCache: which leader epoch started at which offset, kept in the partition's
``leader-epoch-checkpoint`` (format in checkpoints.py).

Kafka writes the file synchronously on ``assign`` and in the background after truncations; here
``assign`` only changes memory and marks the cache dirty, and the owner writes it with
``await flush()`` (the broker does so when it becomes leader, before any append of the epoch).
"""

from __future__ import annotations

from kafkasim.runtime.api import FileSystem
from kafkasim.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, CheckpointError, LeaderEpochCheckpointFile


class LeaderEpochFileCache:
    def __init__(self, fs: FileSystem, dir_path: str) -> None:
        self.checkpoint = LeaderEpochCheckpointFile(fs, f"{dir_path}/{LEADER_EPOCH_CHECKPOINT}")
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both increasing
        self.dirty = False
        self.load_error: str | None = None

    def load(self) -> None:
        try:
            self.entries = sorted(self.checkpoint.read())
        except CheckpointError as exc:
            self.entries, self.load_error = [], str(exc)
            self.dirty = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; entries it contradicts (a later or equal
        epoch, a later or equal start) are removed first. Returns whether anything changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        if self.entries and not (epoch != self.entries[-1][0] or start_offset < self.entries[-1][1]):
            return False
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start_offset):
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self.dirty = True
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after end_offset (the log was truncated there)."""
        if end_offset >= 0 and self.entries and self.entries[-1][1] >= end_offset:
            while self.entries and self.entries[-1][1] >= end_offset:
                self.entries.pop()
            self.dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before start_offset; the last of them now starts there."""
        removed = [e for e in self.entries if e[1] <= start_offset]
        if removed:
            self.entries = [(removed[-1][0], start_offset)] + [e for e in self.entries if e[1] > start_offset]
            self.dirty = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as LeaderEpochFileCache.endOffsetFor answers OffsetForLeaderEpoch."""
        if requested_epoch < 0 or not self.entries:
            return -1, -1
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        later = [e for e in self.entries if e[0] > requested_epoch]
        earlier = [e for e in self.entries if e[0] <= requested_epoch]
        if not later:
            return -1, -1
        if not earlier:
            return requested_epoch, later[0][1]
        return earlier[-1][0], later[0][1]

    async def flush(self) -> None:
        """Write the checkpoint if anything changed (callers serialize writes: one .tmp file)."""
        if self.dirty:
            self.dirty = False
            try:
                await self.checkpoint.write(list(self.entries))
            except BaseException:
                self.dirty = True
                raise
