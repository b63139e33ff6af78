"""The real world: a writer process appending to a log is killed with SIGKILL mid-append; the
log recovers to a contiguous prefix of what it wrote, holding everything it reported flushed,
with indexes that agree with the data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from storage_helpers import read_all, run_real

from kafkasim.records.batch import decode_batch_records
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig
from kafkasim.storage.verify import check_log

pytestmark = pytest.mark.real

WRITER = Path(__file__).resolve().parents[1] / "resources" / "storage" / "log_writer.py"


def _kill_mid_append(root: Path, flushes: int) -> int:
    """Run the writer until it reported `flushes` flushes, then SIGKILL it; returns the last
    recovery point it reported."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root)], stdout=subprocess.PIPE, text=True, env=env)
    flushed = 0
    seen = 0
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("flushed"):
                flushed = int(line.split()[1])
                seen += 1
                if seen >= flushes:
                    break
            assert time.monotonic() < deadline, "writer too slow"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return flushed


@pytest.mark.parametrize("flushes", [3, 11])
def test_sigkill_mid_append_recovers_a_prefix_with_everything_flushed(tmp_path: Path, flushes: int) -> None:
    flushed = _kill_mid_append(tmp_path, flushes)

    async def recover(node: NodeRuntime) -> Any:
        m = LogManager(node, "kafka-logs", LogConfig(segment_bytes=16 * 1024, index_interval_bytes=1024),
                       LogManagerConfig(initial_task_delay_ms=10**9))
        await m.startup()
        log = m.get_log("t", 0)
        assert log is not None
        batches = read_all(log)
        problems = check_log(log)
        await m.shutdown()
        return m.had_clean_shutdown, log.log_end_offset, batches, problems, len(log.segments)

    clean, leo, batches, problems, segments = run_real(tmp_path, recover)
    assert not clean and problems == [] and segments > 1
    assert leo >= flushed > 0
    offset, i = 0, 0
    for base, h, data in batches:  # batch i holds 1 + i % 4 records "<i>.<j>"
        assert base == offset
        values = [r.value for r in decode_batch_records(data)]
        assert values == [f"{i}.{j}".encode() * 20 for j in range(1 + i % 4)]
        offset, i = h.last_offset + 1, i + 1
    assert offset == leo
