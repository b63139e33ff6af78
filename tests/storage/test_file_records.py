"""Log.read_records (the sendfile path) serves exactly the bytes Log.read does, for every offset,
byte limit and high watermark — as file regions, without reading the data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from storage_helpers import append, run_real

from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig

pytestmark = pytest.mark.unit

SMALL = LogConfig(segment_bytes=1000)


def test_read_records_equals_read_everywhere(tmp_path: Path) -> None:
    async def body(node: NodeRuntime) -> Any:
        log = await Log.load(node, "t-0", SMALL)
        for i in range(40):
            append(log, i)
        mismatches, regions, nonempty = [], 0, 0
        for offset in range(0, 41, 3):
            for max_bytes in (0, 1, 50, 200, 700, 1 << 20):
                for hw in (None, 7, 25, 40):
                    want = log.read(offset, max_bytes, max_offset=hw)
                    got = log.read_records(offset, max_bytes, max_offset=hw)
                    regions += len(got.regions)
                    nonempty += bool(want)
                    if bytes(got) != want or len(got) != len(want):
                        mismatches.append((offset, max_bytes, hw))
        log.close()
        return mismatches, regions, nonempty

    mismatches, regions, nonempty = run_real(tmp_path, body)
    assert mismatches == []
    assert nonempty > 50 and regions >= nonempty, "non-empty reads come back as file regions"
