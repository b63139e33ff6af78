"""Record parsing of bytes a hostile or odd producer may send (found by tests/serve/test_fuzz.py):
Kafka reads a header key with Utils.utf8 (Java's new String(.., UTF_8)), which replaces what is
not UTF-8 — the batch is valid, and kafkasim must not raise on it."""

from __future__ import annotations

import pytest

from kafkasim.records.batch import Record, build_batch, decode_batch_records

pytestmark = pytest.mark.unit


def test_a_header_key_that_is_not_utf8_reads_with_replacement() -> None:
    batch = bytearray(build_batch([Record(1_700_000_000_000, b"k", b"v", (("hk", b"hv"),))]))
    at = batch.index(b"hk")
    batch[at] = 0xFF                     # an invalid UTF-8 lead byte in the header key
    (rec,) = decode_batch_records(bytes(batch), validate=False)
    assert rec.headers == (("\ufffdk", b"hv"),)
    assert (rec.key, rec.value) == (b"k", b"v")
