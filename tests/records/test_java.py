"""Real Kafka (3.9.1 jars from real/maven) as the judge of kafkasim.records.

- Kafka -> kafkasim: tests/resources/records/RecordVectors.java builds batches and legacy
  message sets with Kafka's own ``MemoryRecords``; we decode them, and where the bytes are
  deterministic (no compression) our builders must reproduce them exactly.
- kafkasim -> Kafka: we write a log segment and ``kafka.tools.DumpLogSegments`` must read
  every batch as valid, printing the offsets, CRCs, codecs, keys and payloads we expect.

Skips only when java/javac (or the jars and mvn to fetch them) are missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kafkasim.records import (
    CompressionType,
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
    build_legacy_message_set,
    convert_legacy_to_v2,
    decode_batch_records,
    iter_batches,
    iter_legacy_entries,
    iter_legacy_messages,
    parse_control_key,
    parse_end_txn_marker,
    peek_magic,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)
from kafkasim.records.compression import XERIAL_HEADER, compress

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
MAVEN = REPO / "real" / "maven"
LIB = MAVEN / "lib"
JAVA_SRC = REPO / "tests" / "resources" / "records" / "RecordVectors.java"


def _kafka_lib() -> Path:
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("java/javac not installed")
    if not any(LIB.glob("kafka_2.13-*.jar")):
        if shutil.which("mvn") is None:
            pytest.skip("Kafka jars absent and mvn not installed")
        subprocess.run(
            ["mvn", "-q", "dependency:copy-dependencies", "-DoutputDirectory=lib"],
            cwd=MAVEN,
            check=True,
        )
    return LIB


@pytest.fixture(scope="module")
def java_vectors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    lib = _kafka_lib()
    work = tmp_path_factory.mktemp("record_vectors")
    classes, out = work / "classes", work / "out"
    classes.mkdir()
    out.mkdir()
    subprocess.run(
        ["javac", "-cp", f"{lib}/*", "-d", str(classes), str(JAVA_SRC)], check=True
    )
    subprocess.run(
        ["java", "-cp", f"{classes}:{lib}/*", "RecordVectors", str(out)],
        check=True,
        capture_output=True,
    )
    return {p.stem: p.read_bytes() for p in out.glob("*.bin")}


def dump_log_segments(segment: Path) -> list[str]:
    lib = _kafka_lib()
    proc = subprocess.run(
        [
            "java",
            "-cp",
            f"{lib}/*",
            "kafka.tools.DumpLogSegments",
            "--files",
            str(segment),
            "--deep-iteration",
            "--print-data-log",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return [line for line in proc.stdout.splitlines() if not line.startswith("log4j:")]


# --------------------------------------------------------------------------- the same data in Python


def noise(n: int, seed: int) -> bytes:
    """RecordVectors.noise: 64-bit LCG, top byte."""
    x, out = seed, bytearray(n)
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out[i] = x >> 56
    return bytes(out)


def rich_records(with_headers: bool) -> list[Record]:
    records = []
    for i in range(40):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        if i == 5:
            value: bytes | None = noise(100_000, 42)
        elif i == 6:
            value = b"abcdefgh" * 12_500
        elif i % 11 == 0:
            value = None
        else:
            value = f"value-{i}-{'x' * i}".encode()
        headers = (
            [("h1", f"hv{i}".encode()), ("h-null", None)]
            if with_headers and i % 3 == 0
            else []
        )
        records.append(Record(2000 + (i * 37) % 101, key, value, headers))
    return records


SMALL = [
    Record(1000, b"k0", b"v0"),
    Record(1003, None, b"v1"),
    Record(999, b"k2", None),
]


# --------------------------------------------------------------------------- Kafka -> kafkasim


def test_uncompressed_batches_are_byte_identical(
    java_vectors: dict[str, bytes],
) -> None:
    assert java_vectors["v2_exact_k_v_1000"] == build_batch([Record(1000, b"k", b"v")])
    assert java_vectors["v2_none"] == build_batch(rich_records(True), base_offset=100)
    assert java_vectors["v2_txn_none"] == build_batch(
        SMALL,
        base_offset=500,
        producer_id=77,
        producer_epoch=3,
        base_sequence=10,
        partition_leader_epoch=6,
        is_transactional=True,
    )


def test_control_batches_are_byte_identical(java_vectors: dict[str, bytes]) -> None:
    for name, ctype, offset, ts, coordinator_epoch in [
        ("v2_control_abort", ControlRecordType.ABORT, 42, 3000, 9),
        ("v2_control_commit", ControlRecordType.COMMIT, 43, 3001, 10),
    ]:
        data = java_vectors[name]
        assert data == build_control_batch(
            ctype,
            producer_id=1234,
            producer_epoch=5,
            coordinator_epoch=coordinator_epoch,
            timestamp_ms=ts,
            base_offset=offset,
            partition_leader_epoch=7,
        )
        [rec] = decode_batch_records(data)
        assert parse_control_key(rec.key) == (0, ctype)
        assert parse_end_txn_marker(rec.value) == (0, coordinator_epoch)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_decode_kafka_batches_of_every_codec(
    java_vectors: dict[str, bytes], codec: str
) -> None:
    data = java_vectors[f"v2_{codec}"]
    [(pos, header)] = list(iter_batches(data, validate=True))
    assert header.compression.kafka_name == codec
    assert (header.base_offset, header.last_offset, header.record_count) == (
        100,
        139,
        40,
    )
    expected = rich_records(True)
    assert header.base_timestamp == expected[0].timestamp_ms
    assert header.max_timestamp == max(r.timestamp_ms for r in expected)
    got = decode_batch_records(data, pos)
    assert [r.offset for r in got] == list(range(100, 140))
    for rec, exp in zip(got, expected):
        assert (rec.timestamp_ms, rec.key, rec.value, list(rec.headers)) == (
            exp.timestamp_ms,
            exp.key,
            exp.value,
            list(exp.headers),
        )


def test_idempotent_batch_sequence_wraps(java_vectors: dict[str, bytes]) -> None:
    data = java_vectors["v2_idempotent_lz4"]
    header = validate_batch(data)
    assert (
        header.producer_id,
        header.producer_epoch,
        header.partition_leader_epoch,
    ) == (78, 1, 2)
    assert header.base_sequence == 2**31 - 2 and header.last_sequence == 0
    assert [r.sequence for r in decode_batch_records(data)] == [2**31 - 2, 2**31 - 1, 0]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_decode_kafka_legacy_message_sets(
    java_vectors: dict[str, bytes], magic: int, codec: str
) -> None:
    for name, expected in [
        (f"v{magic}_{codec}", rich_records(False)),
        (f"v{magic}_small_{codec}", SMALL),
    ]:
        data = java_vectors[name]
        assert peek_magic(data) == magic
        got = list(iter_legacy_messages(data))
        assert [m.offset for m in got] == list(range(10, 10 + len(expected)))
        for msg, exp in zip(got, expected):
            assert (msg.key, msg.value) == (exp.key, exp.value)
            assert msg.timestamp_ms == (exp.timestamp_ms if magic == 1 else -1)
        if codec == "none":
            assert data == build_legacy_message_set(
                expected, magic=magic, base_offset=10
            )
        else:
            [wrapper] = list(iter_legacy_entries(data))
            assert wrapper.offset == 10 + len(expected) - 1
            ours = compress(CompressionType[codec.upper()], b"", magic=magic)
            if (
                codec == "lz4"
            ):  # frame descriptor incl. HC: KIP-57 for v1, the "broken" one for v0
                assert wrapper.value[:7] == ours[:7]
            if codec == "snappy":
                assert wrapper.value[:16] == XERIAL_HEADER
        v2 = convert_legacy_to_v2(data)
        assert [(r.offset, r.key, r.value) for r in decode_batch_records(v2)] == [
            (m.offset, m.key, m.value) for m in got
        ]


# --------------------------------------------------------------------------- kafkasim -> Kafka


def _printable_records(n: int, seed: int) -> list[Record]:
    letters = bytes(
        97 + b % 26 for b in noise(70_000, seed)
    )  # > 64 KiB: several lz4/snappy blocks
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else f"k{seed}-{i}".encode()
        value = (
            letters
            if i == 1
            else (None if i % 5 == 3 else f"payload-{seed}-{i}".encode())
        )
        headers = [("trace", f"t{i}".encode()), ("nullh", None)] if i % 2 else []
        out.append(Record(10_000 + seed * 100 + (i * 13) % 17, key, value, headers))
    return out


def _batch_line(h, position: int) -> str:
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
        f"deleteHorizonMs: OptionalLong.empty position: {position} "
        f"{h.timestamp_type.kafka_name}: {h.max_timestamp} size: {h.size_in_bytes} magic: 2 "
        f"compresscodec: {h.compression.kafka_name} crc: {h.crc} isvalid: true"
    )


def _record_line(offset: int, ts: int, rec: Record, sequence: int) -> str:
    line = (
        f"| offset: {offset} CreateTime: {ts} keySize: {-1 if rec.key is None else len(rec.key)} "
        f"valueSize: {-1 if rec.value is None else len(rec.value)} sequence: {sequence} "
        f"headerKeys: [{','.join(k for k, _ in rec.headers)}]"
    )
    if rec.key is not None:
        line += f" key: {rec.key.decode()}"
    if rec.value is not None:
        line += f" payload: {rec.value.decode()}"
    return line


def test_dump_log_segments_reads_our_segment(tmp_path: Path) -> None:
    segment = bytearray()
    expected: list[str] = []
    next_offset = 0
    for seed, codec in enumerate(CompressionType):
        records = _printable_records(6, seed)
        producer = (
            {"producer_id": 1000 + seed, "producer_epoch": 2, "base_sequence": 5}
            if seed % 2
            else {}
        )
        batch = bytearray(build_batch(records, compression=codec, **producer))
        # What the leader does on append: stamp offset and epoch in place, CRC untouched.
        set_base_offset(batch, 0, next_offset)
        set_partition_leader_epoch(batch, 0, 3)
        header = validate_batch(batch)
        expected.append(_batch_line(header, len(segment)))
        for i, rec in enumerate(records):
            seq = header.base_sequence + i if header.base_sequence >= 0 else -1
            expected.append(_record_line(next_offset + i, rec.timestamp_ms, rec, seq))
        segment += batch
        next_offset = header.next_offset
    control = build_control_batch(
        ControlRecordType.COMMIT,
        producer_id=1001,
        producer_epoch=2,
        coordinator_epoch=4,
        timestamp_ms=77_000,
        base_offset=next_offset,
        partition_leader_epoch=3,
    )
    header = read_header(control)
    expected.append(_batch_line(header, len(segment)))
    expected.append(
        f"| offset: {next_offset} CreateTime: 77000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 4"
    )
    segment += control
    next_offset += 1
    # A legacy set converted to v2, as the broker stores an old producer's request.
    converted = bytearray(
        convert_legacy_to_v2(
            build_legacy_message_set(
                SMALL[:2], magic=1, compression=CompressionType.GZIP
            )
        )
    )
    set_base_offset(converted, 0, next_offset)
    header = validate_batch(converted)
    expected.append(_batch_line(header, len(segment)))
    for i, rec in enumerate(SMALL[:2]):
        expected.append(_record_line(next_offset + i, rec.timestamp_ms, rec, -1))
    segment += converted

    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment)
    lines = dump_log_segments(path)
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    assert (
        lines[2:] == expected
    )  # also proves: no "Non-consecutive offsets", no corrupt batch


def test_dump_log_segments_reads_our_legacy_segment(tmp_path: Path) -> None:
    segment = bytearray()
    offset = 0
    for magic in (0, 1):
        for codec in (
            CompressionType.NONE,
            CompressionType.GZIP,
            CompressionType.SNAPPY,
            CompressionType.LZ4,
        ):
            segment += build_legacy_message_set(
                SMALL[:2] + [Record(1001, b"k", b"v")],
                magic=magic,
                base_offset=offset,
                compression=codec,
            )
            offset += 3
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(segment)
    lines = dump_log_segments(path)[2:]
    entries = list(iter_legacy_entries(segment))
    wrapper_lines = [line for line in lines if not line.startswith("|")]
    inner_lines = [line for line in lines if line.startswith("|")]
    assert len(wrapper_lines) == len(entries) and len(inner_lines) == offset
    for line, entry in zip(wrapper_lines, entries):
        assert line.startswith(f"offset: {entry.offset} position: {entry.position} ")
        assert (
            f"magic: {entry.magic} compresscodec: {entry.compression.kafka_name} crc: {entry.crc} isvalid: true"
            in line
        )
    for line, msg in zip(inner_lines, iter_legacy_messages(segment)):
        ts = (
            "NoTimestampType: -1"
            if msg.magic == 0
            else f"CreateTime: {msg.timestamp_ms}"
        )
        assert line.startswith(f"| offset: {msg.offset} {ts} ")
        assert "isValid: true" in line
