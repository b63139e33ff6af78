"""Kafka's checkpoint files, in Kafka's text formats, written crash-safely.

At the log dir root (``OffsetCheckpointFile``, version 0; one line per partition)::

    recovery-point-offset-checkpoint   0\\n<count>\\n<topic> <partition> <recovery point>\\n...
    log-start-offset-checkpoint        0\\n<count>\\n<topic> <partition> <log start offset>\\n...
    replication-offset-checkpoint      0\\n<count>\\n<topic> <partition> <high watermark>\\n...
    cleaner-offset-checkpoint          0\\n<count>\\n<topic> <partition> <first dirty offset>\\n...

In each partition directory::

    leader-epoch-checkpoint   0\\n<count>\\n<epoch> <start offset>\\n...   (LeaderEpochCheckpointFile)
    partition.metadata        version: 0\\ntopic_id: <base64url uuid, no padding>   (no final newline)

and ``.kafka_cleanshutdown`` at the log dir root (Kafka 3.9's CleanShutdownFileHandler):
``{"version":0,"brokerEpoch":<epoch>}``, written + fsynced on a clean shutdown, deleted at startup.

Every checkpoint is written as Kafka's ``CheckpointFile.write`` does: the whole content to
``<name>.tmp``, fsync, rename over ``<name>`` (``Utils.atomicMoveWithFallback``), fsync the
directory — so a crash leaves the old file or the new one, never a mix. Entries are written
sorted by (topic, partition) (Kafka iterates a hash map; any order reads back the same).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from kafkasim.runtime.api import FileSystem

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0
TMP_SUFFIX = ".tmp"

TopicPartition = tuple[str, int]


class CheckpointError(Exception):
    """A checkpoint file that does not parse (Kafka: IOException "Malformed line ...")."""


def _join(d: str, name: str) -> str:
    return f"{d}/{name}" if d else name


def _dir_of(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


async def write_atomically(fs: FileSystem, path: str, data: bytes) -> None:
    """tmp + fsync + rename + directory fsync (CheckpointFile.write)."""
    tmp = path + TMP_SUFFIX
    f = fs.open(tmp)
    try:
        f.truncate(0)
        f.append(data)
        await f.fsync()
    finally:
        f.close()
    fs.rename(tmp, path)
    await fs.fsync_dir(_dir_of(path))


def read_text(fs: FileSystem, path: str) -> str | None:
    if not fs.exists(path):
        return None
    f = fs.open(path, create=False)
    try:
        raw = f.read(0, f.size())
    finally:
        f.close()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path} is not UTF-8: {exc}") from None


# ---------------------------------------------------------------- the "0\n<count>\n<lines>" format
def render_checkpoint(lines: list[str], version: int = CHECKPOINT_VERSION) -> bytes:
    """CheckpointFile.CheckpointWriteBuffer: version, count, one entry per line."""
    return "".join(f"{line}\n" for line in [str(version), str(len(lines)), *lines]).encode()


def parse_checkpoint(text: str, path: str, fields: int, version: int = CHECKPOINT_VERSION) -> list[list[str]]:
    """CheckpointFile.CheckpointReadBuffer: an empty file is no entries; a wrong version, a bad
    line or a count that disagrees with the lines is an error."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    if _to_int(lines[0], path) != version:
        raise CheckpointError(f"Unrecognised version:{lines[0]}, expected version: {version} "
                              f"in checkpoint file at: {path}")
    if len(lines) == 1:
        return []
    expected = _to_int(lines[1], path)
    entries = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"Malformed line in checkpoint file [{path}]: {line}")
        entries.append(parts)
    if len(entries) != expected:
        raise CheckpointError(f"Expected [{expected}] entries in checkpoint file [{path}], "
                              f"but found only [{len(entries)}]")
    return entries


def _to_int(s: str, path: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise CheckpointError(f"Malformed line in checkpoint file [{path}]: {s}") from None


@dataclass
class OffsetCheckpointFile:
    """<topic> <partition> <offset> per line (kafka.server.checkpoints.OffsetCheckpointFile)."""

    fs: FileSystem
    path: str

    @staticmethod
    def render(offsets: dict[TopicPartition, int]) -> bytes:
        return render_checkpoint([f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])

    @staticmethod
    def parse(text: str, path: str = "") -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for topic, partition, offset in parse_checkpoint(text, path, 3):
            out[(topic, _to_int(partition, path))] = _to_int(offset, path)
        return out

    async def write(self, offsets: dict[TopicPartition, int]) -> None:
        await write_atomically(self.fs, self.path, self.render(offsets))

    def read(self) -> dict[TopicPartition, int]:
        text = read_text(self.fs, self.path)
        return {} if text is None else self.parse(text, self.path)


@dataclass
class LeaderEpochCheckpointFile:
    """<epoch> <start offset> per line (LeaderEpochCheckpointFile)."""

    fs: FileSystem
    path: str

    @staticmethod
    def render(entries: list[tuple[int, int]]) -> bytes:
        return render_checkpoint([f"{e} {o}" for e, o in entries])

    @staticmethod
    def parse(text: str, path: str = "") -> list[tuple[int, int]]:
        return [(_to_int(e, path), _to_int(o, path)) for e, o in parse_checkpoint(text, path, 2)]

    async def write(self, entries: list[tuple[int, int]]) -> None:
        await write_atomically(self.fs, self.path, self.render(entries))

    def read(self) -> list[tuple[int, int]]:
        text = read_text(self.fs, self.path)
        return [] if text is None else self.parse(text, self.path)


# ---------------------------------------------------------------- partition.metadata
def uuid_to_base64(uuid: bytes) -> str:
    """org.apache.kafka.common.Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid).decode().rstrip("=")


def uuid_from_base64(s: str) -> bytes:
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise CheckpointError(f"not a 16-byte topic id: {s!r}")
    return raw


@dataclass
class PartitionMetadataFile:
    """``version: 0\\ntopic_id: <id>`` (PartitionMetadata.encode; no trailing newline)."""

    fs: FileSystem
    path: str

    @staticmethod
    def render(topic_id: bytes) -> bytes:
        return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_base64(topic_id)}".encode()

    @staticmethod
    def parse(text: str, path: str = "") -> bytes:
        lines = text.split("\n")
        if len(lines) < 2 or not lines[0].startswith("version: ") or not lines[1].startswith("topic_id: "):
            raise CheckpointError(f"Malformed partition metadata file [{path}]")
        if _to_int(lines[0][len("version: "):].strip(), path) != PARTITION_METADATA_VERSION:
            raise CheckpointError(f"Unrecognized version of partition metadata file [{path}]: {lines[0]}")
        return uuid_from_base64(lines[1][len("topic_id: "):].strip())

    async def write(self, topic_id: bytes) -> None:
        await write_atomically(self.fs, self.path, self.render(topic_id))

    def read(self) -> bytes | None:
        text = read_text(self.fs, self.path)
        return None if text is None else self.parse(text, self.path)


# ---------------------------------------------------------------- clean shutdown marker
@dataclass
class CleanShutdownFile:
    """Kafka 3.9's ``.kafka_cleanshutdown``: present means the last shutdown flushed every log."""

    fs: FileSystem
    log_dir: str

    @property
    def path(self) -> str:
        return _join(self.log_dir, CLEAN_SHUTDOWN_FILE)

    @staticmethod
    def render(broker_epoch: int) -> bytes:
        return json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    async def write(self, broker_epoch: int = -1) -> None:
        """As CleanShutdownFileHandler.write: the file itself, fsynced (no rename)."""
        f = self.fs.open(self.path)
        try:
            f.truncate(0)
            f.append(self.render(broker_epoch))
            await f.fsync()
        finally:
            f.close()

    async def delete(self) -> None:
        """Delete at startup, so a crash while loading counts as unclean (KAFKA-10471). We also
        fsync the directory: a deletion the platter forgets would mark the next crash clean."""
        if self.fs.exists(self.path):
            self.fs.unlink(self.path)
            await self.fs.fsync_dir(self.log_dir)
