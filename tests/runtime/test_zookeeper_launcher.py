"""real/zookeeper/zk.py: the session's ZooKeeper is up and is 3.8; the shell entry point starts
and stops one by pid; a start that cannot bind fails fast with the server's log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from runtime_worlds import ZK_SCRIPT, load_zk_launcher

pytestmark = pytest.mark.unit

zk = load_zk_launcher()


def test_session_zookeeper_answers_and_is_3_8(zookeeper: Any) -> None:
    assert zookeeper.connect_string.startswith("127.0.0.1:")
    assert zk.four_letter(zookeeper.port, "ruok") == "imok"
    assert "Zookeeper version: 3.8." in zk.four_letter(zookeeper.port, "srvr")
    assert zookeeper.alive()


def test_shell_start_prints_address_and_stop_kills_by_pid(zookeeper: Any, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(ZK_SCRIPT), "start", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    host, port = out.stdout.strip().split(":")
    pid = int((tmp_path / "zookeeper.pid").read_text().split()[0])
    try:
        assert host == "127.0.0.1" and int(port) != zookeeper.port
        assert zk.four_letter(int(port), "ruok") == "imok"
    finally:
        stop = subprocess.run([sys.executable, str(ZK_SCRIPT), "stop", str(tmp_path)], timeout=60)
    assert stop.returncode == 0
    assert zk.four_letter(int(port), "ruok") == ""
    assert not zk._pid_alive(pid) or Path(f"/proc/{pid}/status").read_text().find("zombie") >= 0
    assert not (tmp_path / "zookeeper.pid").exists()


def test_start_on_a_taken_port_fails_with_the_log(zookeeper: Any, tmp_path: Path) -> None:
    with pytest.raises(zk.ZooKeeperStartError) as err:
        zk.start_zookeeper(tmp_path, port=zookeeper.port, timeout_s=20)
    assert "Address already in use" in str(err.value) or "BindException" in str(err.value)
    assert zk.four_letter(zookeeper.port, "ruok") == "imok"  # the session's server is untouched
