"""Every user mistake gets one line on stderr and exit 2: no traceback, no "coroutine was never
awaited" warning. Each case runs the real command in a subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.cli import JAVA_FIX

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "scenarios" / "smoke.toml")


def kafkasim(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "default", "-m", "kafkasim.cli", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                          capture_output=True, text=True, timeout=120)


def one_line_error(p: subprocess.CompletedProcess[str], *expect: str) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert "Traceback" not in err and "never awaited" not in err, err
    assert len(err.splitlines()) == 1, err
    for text in expect:
        assert text in err
    return err


def test_unknown_scenario_file(tmp_path: Path) -> None:
    one_line_error(kafkasim("run", "nosuch.toml", cwd=tmp_path), "nosuch.toml: no such scenario file")
    one_line_error(kafkasim("sweep", "nosuch.toml", cwd=tmp_path), "nosuch.toml")


def test_a_typo_in_a_role_target_names_file_and_key(tmp_path: Path) -> None:
    text = Path(SMOKE).read_text() + '\n[[faults]]\nat_ms = 1000\nkind = "crash"\ntargets = ["leader:smok-0"]\n'
    (tmp_path / "typo.toml").write_text(text)
    one_line_error(kafkasim("run", "typo.toml", cwd=tmp_path),
                   "typo.toml: key 'faults[0].targets'", "did you mean 'smoke'")


def test_unknown_fault_node(tmp_path: Path) -> None:
    text = Path(SMOKE).read_text() + '\n[[faults]]\nat_ms = 1000\nkind = "crash"\ntargets = ["broker-7"]\n'
    (tmp_path / "node.toml").write_text(text)
    one_line_error(kafkasim("run", "node.toml", cwd=tmp_path), "unknown node 'broker-7'")
    assert not (tmp_path / "reports").exists()  # refused before anything ran


def test_missing_or_unwritable_reports_dirs(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    one_line_error(kafkasim("run", SMOKE, "--out", "afile/run", cwd=tmp_path), "afile/run")
    one_line_error(kafkasim("sweep", SMOKE, "--out", "afile/sweep", cwd=tmp_path), "afile/sweep")
    one_line_error(kafkasim("report", "no-reports", cwd=tmp_path), "no-reports does not exist")


def test_missing_run_json(tmp_path: Path) -> None:
    one_line_error(kafkasim("replay", "run.json", cwd=tmp_path), "run.json: no such run.json")
    one_line_error(kafkasim("shrink", "run.json", cwd=tmp_path), "run.json: no such run.json")
    (tmp_path / "bad.json").write_text("{not json")
    one_line_error(kafkasim("replay", "bad.json", cwd=tmp_path), "bad.json: not a readable run.json")


def test_report_without_java_names_the_fix(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    p = kafkasim("report", "reports", cwd=tmp_path, env={"JAVA_HOME": str(tmp_path / "nojava")})
    one_line_error(p, "needs Java", JAVA_FIX)


def test_bad_seeds_and_bad_seeded_bugs(tmp_path: Path) -> None:
    one_line_error(kafkasim("sweep", SMOKE, "--seeds", "x-3", cwd=tmp_path), "--seeds")
    one_line_error(kafkasim("run", SMOKE, cwd=tmp_path, env={"KAFKASIM_SEEDED_BUGS": "no-such-bug"}),
                   "KAFKASIM_SEEDED_BUGS")


def test_serve_on_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = kafkasim("serve", "--port", str(port), "--log-dir", str(tmp_path / "logs"), cwd=tmp_path)
    one_line_error(p, f"127.0.0.1:{port} is already in use")


def test_version(tmp_path: Path) -> None:
    p = kafkasim("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("kafkasim 0.")
