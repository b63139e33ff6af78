"""Kafka's own kafka-dump-log (kafka.tools.DumpLogSegments, from the jars) reads the segments
kafkasim writes: .log (--deep-iteration --print-data-log), .index, .timeindex and the
the same leader-epoch-checkpoint, for every codec, with no error — and prints for kafkasim's .log the same
batch and record lines as for the .log real Kafka wrote from the same produce requests (modulo the
normalisations below)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kafkasim.records.compression import CompressionType
from tests.conformance.conftest import kafka_launcher
from tests.conformance.library import create_topics_req, produce_req, records
from tests.conformance.wire import Connection

pytestmark = pytest.mark.real

CODECS = {c.name.lower(): int(c) for c in CompressionType}
# What kafka-dump-log reads (it dispatches on the suffix: .log .index .timeindex .snapshot .txnindex).
# It cannot read leader-epoch-checkpoint (3.9.1 fails on a name without a suffix), so that file is
# compared with the one Kafka wrote instead.
FILES = ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex")


def write_topics(port: int) -> None:
    conn = Connection("127.0.0.1", port)
    for codec, value in CODECS.items():
        topic = f"dumplog-{codec}"
        assert conn.send(create_topics_req(topic), 5).topics[0].error_code == 0
        for first in (0, 3, 6):  # three batches: the index and time index get entries to print
            resp = conn.send(produce_req(topic, records(3, codec=value, size=400, first=first)), 8)
            assert resp.responses[0].partition_responses[0].error_code == 0, (codec, resp)
    conn.close()


def dump(log_dir: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for codec in CODECS:
        part = log_dir / f"dumplog-{codec}-0"
        out[f"{codec}:checkpoint"] = (part / "leader-epoch-checkpoint").read_text()
        files = [part / f for f in FILES]
        assert all(f.exists() for f in files), f"missing in {part}: {[f.name for f in files if not f.exists()]}"
        res = kafka_launcher().dump_log(files, "--deep-iteration", "--print-data-log")
        text = res.stdout + res.stderr
        assert res.returncode == 0, text
        # (Its index verification reports "Mismatches" for Kafka's own segments too: it compares an
        # index entry with the batch's last offset. Those lines are compared with Kafka's below.)
        assert not re.search(r"Exception|error|corrupt", text, re.I), text
        out[codec] = text
    return out


def batch_lines(text: str) -> list[str]:
    """The .log section's batch and record lines, with what legitimately differs removed: the
    batch position stays (same bytes → same positions), CreateTime stays (the producer's)."""
    section = text.split("Dumping ")[1]
    lines = [line for line in section.splitlines() if line.startswith(("baseOffset", "| offset"))]
    return [re.sub(r"producerId: \d+", "producerId: <pid>", line) for line in lines]


@pytest.fixture(scope="module")
def dumps(real_kafka: Any, sim_kafka: Any) -> dict[str, dict[str, str]]:
    out = {}
    for side, cluster in (("real", real_kafka), ("sim", sim_kafka)):
        write_topics(cluster.brokers[0].port)
        out[side] = dump(cluster.brokers[0].dir / "data")
    return out


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_dump_log_reads_kafkasim_segments(dumps: dict[str, dict[str, str]], codec: str) -> None:
    sim = dumps["sim"][codec]
    lines = batch_lines(sim)
    assert sum(1 for line in lines if line.startswith("baseOffset")) == 3, sim
    assert sum(1 for line in lines if line.startswith("| offset")) == 9, sim
    assert all(f"compresscodec: {codec}" in line for line in lines if line.startswith("baseOffset")), sim
    assert dumps["sim"][f"{codec}:checkpoint"] == dumps["real"][f"{codec}:checkpoint"] == "0\n1\n0 0\n"


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_dump_log_prints_the_same_batches_as_for_kafka(dumps: dict[str, dict[str, str]], codec: str) -> None:
    assert batch_lines(dumps["sim"][codec]) == batch_lines(dumps["real"][codec])


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_dump_log_reads_the_same_index_entries(dumps: dict[str, dict[str, str]], codec: str) -> None:
    def index_lines(text: str) -> list[str]:
        return [re.sub(r"/\S+/data/", "<dir>/", line) for line in text.splitlines()
                if line.startswith(("offset:", "timestamp:", "Mismatches", "  Index", "Indexed", "The following"))]
    assert index_lines(dumps["sim"][codec]) == index_lines(dumps["real"][codec])
