"""Byte formats pinned by vectors computed by hand from Kafka's sources: index entries, index
preallocation and trimming, the checkpoint files, partition.metadata, the clean-shutdown file."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import append, run_real

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.checkpoints import (
    CheckpointError,
    CleanShutdownFile,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    parse_checkpoint,
    uuid_from_base64,
    uuid_to_base64,
)
from kafkasim.storage.index import OffsetIndex, TimeIndex
from kafkasim.storage.log import Log, LogConfig

pytestmark = pytest.mark.unit


def test_offset_and_time_index_entries_and_file_sizes(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        node.fs.mkdir("d")
        idx = OffsetIndex(node.fs, "d/00000000000000000100.index", 100, 1000)
        tix = TimeIndex(node.fs, "d/00000000000000000100.timeindex", 100, 1000)
        sizes = [idx.file.size(), tix.file.size()]  # preallocated, rounded down to whole entries
        idx.append(105, 4096)
        idx.append(0x7FFFFFFF + 100, 0x10203040)
        tix.maybe_append(1_700_000_000_000, 105)
        tix.maybe_append(1_700_000_000_000, 106)  # not later: no entry (TimeIndex.maybeAppend)
        tix.maybe_append(1_700_000_000_001, 107)
        lookups = [idx.lookup(99), idx.lookup(104), idx.lookup(105), idx.lookup(10**10),
                   tix.lookup(0), tix.lookup(1_700_000_000_000), tix.lookup(2**62)]
        idx.close()
        tix.close()
        return sizes, lookups

    sizes, lookups = run_real(tmp_path, body)
    assert sizes == [1000, 996]
    assert (tmp_path / "d" / "00000000000000000100.index").read_bytes() == (
        b"\x00\x00\x00\x05" b"\x00\x00\x10\x00"        # relative offset 5, position 4096
        b"\x7f\xff\xff\xff" b"\x10\x20\x30\x40")       # the largest relative offset a segment holds
    assert (tmp_path / "d" / "00000000000000000100.timeindex").read_bytes() == (
        b"\x00\x00\x01\x8b\xcf\xe5\x68\x00" b"\x00\x00\x00\x05"   # 1700000000000 ms, offset 105
        b"\x00\x00\x01\x8b\xcf\xe5\x68\x01" b"\x00\x00\x00\x07")
    assert lookups == [(100, 0), (100, 0), (105, 4096), (0x7FFFFFFF + 100, 0x10203040),
                       (-1, 100), (1_700_000_000_000, 105), (1_700_000_000_001, 107)]


def test_an_index_entry_beyond_int32_is_refused(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> None:
        idx = OffsetIndex(node.fs, "x.index", 0, 64)
        with pytest.raises(Exception, match="overflow"):
            idx.append(2**31, 0)
        idx.append(5, 0)
        with pytest.raises(Exception, match="no larger than the last offset"):
            idx.append(5, 10)
        idx.close()
    run_real(tmp_path, body)


def test_segment_files_are_preallocated_then_trimmed_on_roll(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", LogConfig(segment_index_bytes=4000, index_interval_bytes=10))
        for i in range(5):
            append(log, i)
        before = [node.fs.open(f"t-0/00000000000000000000{s}").size() for s in (".index", ".timeindex")]
        log.roll()
        after = [node.fs.open(f"t-0/00000000000000000000{s}").size() for s in (".index", ".timeindex")]
        new = [node.fs.open(f"t-0/00000000000000000005{s}").size() for s in (".index", ".timeindex")]
        return before, after, new, log.segments[0].time_index.all_entries()

    before, after, new, times = run_real(tmp_path, body)
    assert before == [4000, 3996] and new == [4000, 3996]
    # 4 offset entries (appends 2..5 each followed more than 10 bytes); the time index has those
    # plus none more: the closing entry repeats the last timestamp, so it is not appended.
    assert after == [4 * 8, len(times) * 12] and len(times) == 4
    raw = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    assert [struct.unpack_from(">i", raw, i)[0] for i in range(0, len(raw), 8)] == [1, 2, 3, 4]


def test_offset_checkpoint_file_bytes() -> None:
    data = OffsetCheckpointFile.render({("t", 0): 5, ("a-b", 12): 7, ("t", 10): 0})
    assert data == b"0\n3\na-b 12 7\nt 0 5\nt 10 0\n"
    assert OffsetCheckpointFile.parse(data.decode()) == {("t", 0): 5, ("a-b", 12): 7, ("t", 10): 0}
    assert OffsetCheckpointFile.render({}) == b"0\n0\n"
    assert OffsetCheckpointFile.parse("") == {}


@pytest.mark.parametrize("text, message", [
    ("1\n0\n", "Unrecognised version"),
    ("0\n2\nt 0 5\n", "Expected [2] entries"),
    ("0\n1\nt zero 5\n", "Malformed line"),
    ("0\n1\nt 0\n", "Malformed line"),
    ("x\n", "Malformed line"),
])
def test_bad_checkpoints_are_errors_as_in_kafka(text: str, message: str) -> None:
    with pytest.raises(CheckpointError, match=message.replace("[", r"\[")):
        OffsetCheckpointFile.parse(text, "f")


def test_leader_epoch_checkpoint_partition_metadata_and_clean_shutdown_bytes() -> None:
    assert LeaderEpochCheckpointFile.render([(0, 0), (3, 17)]) == b"0\n2\n0 0\n3 17\n"
    assert LeaderEpochCheckpointFile.parse("0\n2\n0 0\n3 17\n") == [(0, 0), (3, 17)]
    topic_id = bytes(range(16))
    assert uuid_to_base64(topic_id) == "AAECAwQFBgcICQoLDA0ODw"
    assert uuid_from_base64("AAECAwQFBgcICQoLDA0ODw") == topic_id
    assert PartitionMetadataFile.render(topic_id) == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert PartitionMetadataFile.parse("version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw") == topic_id
    assert CleanShutdownFile.render(-1) == b'{"version":0,"brokerEpoch":-1}'
    assert parse_checkpoint("0\n1\n5 10\n", "f", 2) == [["5", "10"]]


def test_checkpoints_are_written_tmp_fsync_rename_fsync(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        node.fs.mkdir("logs")
        f = OffsetCheckpointFile(node.fs, "logs/recovery-point-offset-checkpoint")
        await f.write({("t", 0): 1})
        await f.write({("t", 0): 2})
        return f.read(), node.fs.listdir("logs")

    assert run_real(tmp_path, body) == ({("t", 0): 2}, ["recovery-point-offset-checkpoint"])
    assert (tmp_path / "logs" / "recovery-point-offset-checkpoint").read_bytes() == b"0\n1\nt 0 2\n"
