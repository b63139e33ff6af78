"""The committed generated modules are exactly what the generator makes from Kafka's jars."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kafkasim.protocol import codegen

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "real" / "maven" / "lib"
MESSAGES = REPO / "kafkasim" / "protocol" / "messages"
JARS = [
    codegen.CLIENTS_JAR.format(v=codegen.KAFKA_VERSION),
    codegen.GROUP_COORDINATOR_JAR.format(v=codegen.KAFKA_VERSION),
    codegen.TRANSACTION_COORDINATOR_JAR.format(v=codegen.KAFKA_VERSION),
]


def ensure_jars() -> None:
    """Fetch the reference jars with Maven when absent; skip only when mvn itself is missing."""
    if all((LIB / j).exists() for j in JARS):
        return
    if shutil.which("mvn") is None:
        pytest.skip("Kafka jars absent and mvn not installed")
    subprocess.run(
        ["mvn", "-q", "-f", str(REPO / "real" / "maven" / "pom.xml"), "dependency:copy-dependencies", "-DoutputDirectory=lib"],
        check=True,
        timeout=900,
    )
    assert all((LIB / j).exists() for j in JARS), "mvn ran but the Kafka jars are still missing"


def test_generated_modules_match_the_jars(tmp_path: Path) -> None:
    ensure_jars()
    assert codegen.main(["--lib-dir", str(LIB), "--out", str(tmp_path)]) == 0
    fresh = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.py")}
    committed = {p.name: p.read_text(encoding="utf-8") for p in MESSAGES.glob("*.py")}
    assert sorted(fresh) == sorted(committed), "generated module set differs from the committed one"
    stale = [name for name in sorted(fresh) if fresh[name] != committed[name]]
    assert not stale, f"committed modules differ from the generator's output: {stale[:10]} (run python -m kafkasim.protocol.codegen)"


def test_generation_is_deterministic() -> None:
    ensure_jars()
    assert codegen.generate(LIB) == codegen.generate(LIB)


def test_comment_stripping_keeps_slashes_inside_strings() -> None:
    text = '{ "a": "http://x//y", // comment\n "b": 1 } // tail'
    assert codegen.strip_comments(text) == '{ "a": "http://x//y", \n "b": 1 } '


@pytest.mark.parametrize(
    "name, snake",
    [
        ("TopicData", "topic_data"),
        ("ThrottleTimeMs", "throttle_time_ms"),
        ("ApiKeys", "api_keys"),
        ("ProducerId", "producer_id"),
        ("leaderEpoch", "leader_epoch"),
        ("ISRReplicas", "isr_replicas"),
    ],
)
def test_snake_case(name: str, snake: str) -> None:
    assert codegen.snake(name) == snake


def test_generated_header_names_the_jar() -> None:
    head = (MESSAGES / "produce.py").read_text(encoding="utf-8").splitlines()[:3]
    assert "kafka-clients-3.9.1.jar" in head[0] and "DO NOT EDIT" in head[1]
    head = (MESSAGES / "consumer_offsets.py").read_text(encoding="utf-8").splitlines()[0]
    assert "kafka-group-coordinator-3.9.1.jar" in head


def test_absent_field_checks_match_kafka_java() -> None:
    """The set of fields whose non-default value makes an encode fail at versions lacking them
    ("Attempted to write a non-default X") is exactly the set Kafka's generated Java code checks."""
    import re
    import zipfile

    if shutil.which("javap") is None:
        pytest.skip("no JDK on this machine")
    ensure_jars()
    jar = LIB / JARS[0]
    with zipfile.ZipFile(jar) as z:
        classes = sorted(
            n[: -len(".class")].replace("/", ".")
            for n in z.namelist()
            if re.fullmatch(r"org/apache/kafka/common/message/[A-Za-z$]+\.class", n) and "JsonConverter" not in n
        )
    out = subprocess.run(
        ["javap", "-c", "-constants", "-cp", str(jar), *classes], capture_output=True, text=True, check=True
    ).stdout
    java: set[tuple[str, str]] = set()
    current = ""
    for line in out.splitlines():
        m = re.match(r"^(?:public |final |abstract |static )*class ([\w.$]+)", line)
        if m:
            current = re.sub(r"Data$", "", m.group(1).split(".")[-1].split("$")[0])
            continue
        m = re.search(r"Attempted to write a non-default (\w+)", line)
        if m:
            java.add((current, m.group(1)))
    ours: set[tuple[str, str]] = set()
    generated = {p.stem for p in MESSAGES.glob("*.py")}
    for path in MESSAGES.glob("*.py"):
        for m in re.finditer(r"not_in_version\('([^']+)', '([^']+)'\)", path.read_text(encoding="utf-8")):
            ours.add((m.group(1).split(".")[0], m.group(2)[0].lower() + m.group(2)[1:]))
    # Kafka-clients data records kafkasim doesn't generate (KRaft snapshot/control records).
    java = {(c, f) for c, f in java if c not in ("LeaderChangeMessage", "VotersRecord", "KRaftVersionRecord", "SnapshotHeaderRecord", "SnapshotFooterRecord", "DefaultPrincipalData")}
    ours = {(c, f) for c, f in ours if c not in ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue")}
    assert len(java) > 100 and generated
    assert ours == java
