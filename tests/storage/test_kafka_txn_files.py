"""Byte fidelity against Kafka 3.9.1's own files: a segment real Kafka wrote for two transactional
producers (confluent-kafka against `realkafka up`: A writes 0-1, B writes 2, A aborts at 3, B
commits at 4, A writes 5 and aborts at 6) and the .txnindex it wrote beside it
(tests/resources/storage/kafka-3.9.1-txn/). kafkasim's markers are Kafka's byte for byte, and
kafkasim's recovery of that segment rebuilds exactly Kafka's .txnindex."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import run_real

from kafkasim.records.batch import iter_batches, set_base_offset
from kafkasim.records.control import end_txn_marker_batch, parse_end_txn_marker_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.txn_index import AbortedTxn

pytestmark = pytest.mark.unit

KAFKA = Path(__file__).resolve().parents[1] / "resources" / "storage" / "kafka-3.9.1-txn"
SEGMENT = "00000000000000000000.log"
TXN_INDEX = "00000000000000000000.txnindex"


def test_kafkas_markers_are_the_ones_kafkasim_builds() -> None:
    data = (KAFKA / SEGMENT).read_bytes()
    markers = [(pos, h) for pos, h in iter_batches(data, validate=True) if h.is_control]
    assert [h.base_offset for _, h in markers] == [3, 4, 6]
    for pos, h in markers:
        m = parse_end_txn_marker_batch(data, pos)
        assert m is not None
        ours = bytearray(end_txn_marker_batch(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.committed,
                                              m.timestamp_ms, partition_leader_epoch=h.partition_leader_epoch))
        set_base_offset(ours, 0, h.base_offset)
        assert bytes(ours) == data[pos:pos + h.size_in_bytes]
    assert [parse_end_txn_marker_batch(data, p).committed for p, _ in markers] == [False, True, False]  # type: ignore[union-attr]


def test_kafkasim_recovery_rebuilds_kafkas_txnindex(tmp_path: Path) -> None:
    (tmp_path / "tx-0").mkdir()
    shutil.copy(KAFKA / SEGMENT, tmp_path / "tx-0" / SEGMENT)

    async def body(rt: NodeRuntime) -> tuple[Any, ...]:
        log = await Log.load(rt, "tx-0", LogConfig(), recovery_point=0)
        log.update_high_watermark(log.log_end_offset)
        aborted = log.collect_aborted_transactions(0, log.log_end_offset)
        lso = log.last_stable_offset
        log.close()
        return aborted, lso

    aborted, lso = run_real(tmp_path, body)
    kafka_index = (KAFKA / TXN_INDEX).read_bytes()
    assert (tmp_path / "tx-0" / TXN_INDEX).read_bytes() == kafka_index
    assert aborted == [AbortedTxn(0, 0, 3, 2), AbortedTxn(0, 5, 6, 7)]
    assert kafka_index == b"".join(t.encode() for t in aborted)
    assert lso == 7
