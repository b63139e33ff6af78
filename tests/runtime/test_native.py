"""The native build (kafkasim/runtime/native.py, real/build_native.py): when it is used, and that a compiled
run is the same run as a pure one.

The compiled-run test needs the build (`python3 real/build_native.py`, which `real/install.sh`
runs); without one it skips, unless KAFKASIM_REQUIRE_NATIVE=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkasim.runtime import native

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import json, sys; from kafkasim.cli import main; import kafkasim.runtime.native as n; "
         "import kafkasim.broker.partition as p; "
         "print(json.dumps({'active': n.active(), 'partition': p.__file__}))")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("KAFKASIM_NATIVE")}
    full.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=600)


def _manifest(tmp: Path, **over: Any) -> dict[str, Any]:
    src = "kafkasim/records/varint.py"
    (tmp / "varint.so").write_bytes(b"")
    entry = {"source": src, "sha256": native.source_hash(ROOT / src), "library": "varint.so"}
    manifest: dict[str, Any] = {"python": sys.implementation.cache_tag, "modules": {"kafkasim.records.varint": entry}}
    manifest.update(over)
    return manifest


def test_a_fresh_manifest_is_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "BUILD_DIR", tmp_path)
    assert native.stale_reason(_manifest(tmp_path)) is None


def test_an_edited_source_makes_the_build_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "BUILD_DIR", tmp_path)
    manifest = _manifest(tmp_path)
    manifest["modules"]["kafkasim.records.varint"]["sha256"] = "0" * 64
    assert native.stale_reason(manifest) == "kafkasim/records/varint.py changed since the build"


def test_another_python_or_a_missing_library_makes_the_build_stale(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "BUILD_DIR", tmp_path)
    assert "built for cpython-39" in (native.stale_reason(_manifest(tmp_path, python="cpython-39")) or "")
    manifest = _manifest(tmp_path)
    (tmp_path / "varint.so").unlink()
    assert native.stale_reason(manifest) == "varint.so is missing"


def test_without_a_build_auto_runs_pure_and_required_refuses_in_one_line(tmp_path: Path) -> None:
    auto = _python(PROBE, KAFKASIM_NATIVE_DIR=str(tmp_path))
    assert auto.returncode == 0, auto.stderr
    assert json.loads(auto.stdout) == {"active": False, "partition": str(ROOT / "kafkasim/broker/partition.py")}
    required = _python(PROBE, KAFKASIM_NATIVE_DIR=str(tmp_path), KAFKASIM_NATIVE="1")
    assert required.returncode != 0
    assert "KAFKASIM_NATIVE=1 but the native build cannot be used: no build" in required.stderr
    assert "python3 real/build_native.py" in required.stderr


def _built() -> None:
    if native.stale_reason(json.loads(native.MANIFEST.read_text())) if native.MANIFEST.exists() else "no build":
        why = f"no fresh native build in {native.BUILD_DIR} (python3 real/build_native.py)"
        if os.environ.get("KAFKASIM_REQUIRE_NATIVE") == "1":
            pytest.fail(why)
        pytest.skip(why)


def _run(scenario: str, seed: int, out: Path, mode: str, hashseed: str) -> dict[str, Any]:
    buggify = ", '--buggify'" if "crash-swarm" in scenario else ""
    code = ("import sys; from kafkasim.cli import main; import kafkasim.runtime.native as n; "
            f"sys.argv = ['kafkasim', 'run', {scenario!r}, '--seed', '{seed}', '--out', {str(out)!r}{buggify}]; "
            "rc = main(); print('NATIVE', n.active()); sys.exit(rc)")
    proc = _python(code, KAFKASIM_NATIVE=mode, PYTHONHASHSEED=hashseed)
    assert f"NATIVE {mode == '1'}" in proc.stdout, proc.stdout + proc.stderr
    run: dict[str, Any] = json.loads((out / "run.json").read_text())
    return run


@pytest.mark.parametrize("scenario,seed", [("scenarios/cluster-leader-failover.toml", 3),
                                           ("scenarios/controller-zk-session-expiry.toml", 1),
                                           ("scenarios/txn-coordinator-failover.toml", 2),
                                           ("scenarios/crash-swarm/kill-failover-swarm.toml", 2604)])
def test_a_compiled_run_is_the_pure_run(scenario: str, seed: int, tmp_path: Path) -> None:
    """Same seed, separate processes, different PYTHONHASHSEED: the same trace hash and verdict.
    (The controller scenario is here because a compiled controller once failed where the pure one
    did not: resetting its context through __dict__, which native instances lack. Crash-swarm seed
    2604, with BUGGIFY, segfaulted compiled while a coroutine awaited inside an except block.)"""
    _built()
    pure = _run(scenario, seed, tmp_path / "pure", "0", "1")
    compiled = _run(scenario, seed, tmp_path / "native", "1", "2")
    assert compiled["trace_hash"] == pure["trace_hash"]
    assert compiled["verdict"] == pure["verdict"] == "pass"


def _compiled_sources() -> list[str]:
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_native", ROOT / "real" / "build_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[str] = module.sources()
    return found


def test_no_compiled_coroutine_awaits_inside_an_except_block() -> None:
    """A mypyc coroutine suspended inside an `except` block leaves the thread's handled exception
    set until it leaves the block, and for good when its task is never resumed (a crashed node's
    tasks are dropped, not unwound): everything raised later chains to it, and a sweep worker
    kept every earlier run's world alive through it (5 MB a run). Compiled code handles the
    exception after the block instead (kafka_zk_client._get_or_none)."""
    import ast
    found = []
    for rel in _compiled_sources():
        for node in ast.walk(ast.parse((ROOT / rel).read_text())):
            if isinstance(node, ast.ExceptHandler):
                for sub in node.body:
                    if any(isinstance(x, (ast.Await, ast.AsyncFor, ast.AsyncWith)) for x in ast.walk(sub)):
                        found.append(f"{rel}:{sub.lineno}")
                        break
    assert len(_compiled_sources()) > 100
    assert found == []


LEAK_PROBE = """
import gc, json, sys
import kafkasim.runtime.native as n
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import load_scenario, with_buggify
sc = with_buggify(load_scenario('scenarios/crash-swarm/power-loss-fsync-swarm.toml'))
after, worlds = [], []
for seed in (2, 3, 4):
    run_scenario(sc, seed, out_dir=sys.argv[1])
    after.append(repr(sys.exc_info()[1]))
    gc.collect()
    worlds.append(sum(type(o).__name__ == 'SimWorld' for o in gc.get_objects()))
print(json.dumps({'native': n.active(), 'after': after, 'worlds': worlds}))
"""


def test_a_compiled_run_leaves_no_handled_exception_and_no_world_behind(tmp_path: Path) -> None:
    """What the scan above guards against, seen from outside: three crash-swarm runs in one
    process (seeds on which a crashed broker's task was suspended in an except block)."""
    _built()
    proc = subprocess.run([sys.executable, "-c", LEAK_PROBE, str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "KAFKASIM_NATIVE": "1", "PYTHONPATH": str(ROOT)})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"native": True, "after": ["None", "None", "None"], "worlds": [0, 0, 0]}


# The dataclasses a simulated run constructs most (per leader-failover run: FetchResult 21k,
# ConsumedRecord 12k, _Wanted and FetchSpec 10k, ... ; per txn-pipeline run: ProducerStateEntry 5k,
# CoordinatorEpochAndTxnMetadata 3k). A dataclass-made __init__ is Python exec'd at import, which
# runs interpreted even in the native build; a written-out one is compiled (about 12x cheaper for
# a frozen class). Removing one of them slows every run without failing anything else.
HOT_DATACLASSES = [
    "kafkasim.broker.replica_manager:FetchResult", "kafkasim.broker.replica_manager:FetchSpec",
    "kafkasim.broker.replica_manager:PartitionAppendResult", "kafkasim.broker.fetch_api:_Wanted",
    "kafkasim.broker.fetch_session:PartitionRequest", "kafkasim.broker.partition:ValidatedRecords",
    "kafkasim.client.consumer:ConsumedRecord", "kafkasim.client.consumer:_FetchInFlight",
    "kafkasim.client.producer:RecordMetadata", "kafkasim.client.producer:_Pending",
    "kafkasim.records.batch:Record", "kafkasim.records.control:EndTxnMarker",
    "kafkasim.storage.segment:BatchInfo", "kafkasim.storage.file_records:FileRegion",
    "kafkasim.storage.append_info:AppendInfo", "kafkasim.storage.txn_index:AbortedTxn",
    "kafkasim.storage.producer_state:ProducerStateEntry", "kafkasim.storage.producer_state:BatchMetadata",
    "kafkasim.storage.producer_state:TxnMetadata", "kafkasim.storage.producer_state:CompletedTxn",
    "kafkasim.broker.transaction.metadata:TopicPartition",
    "kafkasim.broker.transaction.state_manager:CoordinatorEpochAndTxnMetadata",
]


@pytest.mark.parametrize("spec", HOT_DATACLASSES)
def test_a_hot_dataclass_has_a_written_out_init(spec: str) -> None:
    import dataclasses
    import importlib

    module, name = spec.split(":")
    cls = getattr(importlib.import_module(module), name)
    assert dataclasses.is_dataclass(cls)
    init = cls.__dict__["__init__"]
    code = getattr(init, "__code__", None)  # None: a compiled method (the native build)
    assert code is None or code.co_filename != "<string>", f"{spec}: its __init__ is the dataclass-made one"
    frozen_before = name in {"ConsumedRecord", "Record", "EndTxnMarker", "BatchInfo", "FileRegion", "AbortedTxn",
                             "BatchMetadata", "CompletedTxn", "TopicPartition", "CoordinatorEpochAndTxnMetadata"}
    if frozen_before:  # still hashable by value, as the frozen dataclass was
        assert cls.__hash__ is not None and cls.__dataclass_params__.unsafe_hash
