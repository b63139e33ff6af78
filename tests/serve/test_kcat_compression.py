"""kcat (librdkafka) producing compressed batches to `kafkasim serve`: what lands in the segment
is what Kafka 3.9.1 stores — one batch per produce, in the producer's codec — judged by Kafka's
own DumpLogSegments (the jars in real/maven).

librdkafka decides from the broker's ApiVersions whether it may compress at all: gzip, snappy
and lz4 need Produce v0 to be in the broker's range (rdkafka_msgset_writer.c checks
`ApiVersion_supported(Produce, 0, 0)` for them), zstd needs Produce v7 and Fetch v10. A broker
whose Produce range starts at 3 gets those three uncompressed, silently. The payload is
compressible and large enough that librdkafka keeps the compressed form (it sends a batch
uncompressed when compression would not shrink it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.serve.conftest import ServedBroker

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "real" / "maven" / "lib"
MESSAGES = [f"message-{i:03d}-".encode() + b"x" * 200 for i in range(50)]
# DumpLogSegments' names for the codecs (CompressionType.name).
KAFKA_CODEC = {"gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}


def _dump(segment: Path) -> list[str]:
    if shutil.which("java") is None or not any(LIB.glob("kafka_2.13-*.jar")):
        pytest.skip("java or Kafka's jars (bash real/install.sh) missing")
    proc = subprocess.run(["java", "-cp", f"{LIB}/*", "kafka.tools.DumpLogSegments", "--files", str(segment),
                           "--deep-iteration", "--print-data-log"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("codec", sorted(KAFKA_CODEC))
def test_kcat_compressed_batches_are_stored_compressed(broker: ServedBroker, codec: str) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat not installed")
    topic = f"kcat-{codec}"
    # linger.ms: every message goes into one batch, as with real Kafka.
    p = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec,
                        "-X", "linger.ms=500"], input=b"\n".join(MESSAGES) + b"\n", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = _dump(broker.log_dir / f"{topic}-0" / "00000000000000000000.log")
    batches = [line for line in lines if line.startswith("baseOffset:")]
    codecs = [re.search(r"compresscodec: (\w+)", b).group(1) for b in batches]  # type: ignore[union-attr]
    assert codecs and set(codecs) == {KAFKA_CODEC[codec]}, batches
    assert all("magic: 2" in b and "isvalid: true" in b for b in batches), batches
    payloads = [re.search(r"payload: (\S+)", line).group(1).encode()  # type: ignore[union-attr]
                for line in lines if "| offset:" in line]
    assert payloads == MESSAGES
