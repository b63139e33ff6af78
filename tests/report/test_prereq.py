"""`kafkasim report` checks Java (and PySpark) before anything else: without Java it prints one
line and exits 2 instead of PySpark's gateway traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkasim.report import prereq

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def fake_jdk(root: Path, version: str) -> Path:
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    (root / "release").write_text(f'IMPLEMENTOR="test"\nJAVA_VERSION="{version}"\n')
    return java


def test_java_found_through_java_home_and_its_version_read(tmp_path: Path) -> None:
    java = fake_jdk(tmp_path / "jdk17", "17.0.15")
    env = {"JAVA_HOME": str(tmp_path / "jdk17"), "PATH": ""}
    assert prereq.find_java(env) == java and prereq.java_major(java) == 17
    assert prereq.java_problem(env) is None


def test_old_java_is_named(tmp_path: Path) -> None:
    fake_jdk(tmp_path / "jdk8", "1.8.0_402")
    fake_jdk(tmp_path / "jdk11", "11.0.2")
    assert prereq.java_major(tmp_path / "jdk8" / "bin" / "java") == 8
    problem = prereq.java_problem({"JAVA_HOME": str(tmp_path / "jdk11")})
    assert problem is not None and problem.startswith(prereq.JAVA_MESSAGE) and "found Java 11" in problem


def test_java_on_path_through_a_symlink(tmp_path: Path) -> None:
    java = fake_jdk(tmp_path / "jvm" / "java-17", "17.0.1")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").symlink_to(java)  # like /usr/bin/java -> /etc/alternatives/java
    env = {"PATH": str(tmp_path / "bin")}
    assert prereq.find_java(env) == tmp_path / "bin" / "java" and prereq.java_problem(env) is None


def test_no_java_anywhere(tmp_path: Path) -> None:
    assert prereq.java_problem({"PATH": str(tmp_path)}) == prereq.JAVA_MESSAGE
    assert prereq.java_problem({"PATH": str(tmp_path), "JAVA_HOME": str(tmp_path / "nope")}) == prereq.JAVA_MESSAGE


@pytest.mark.parametrize("java_home", [None, "/nonexistent-jdk"])
def test_cli_without_java_says_one_line_and_exits_2(tmp_path: Path, java_home: str | None) -> None:
    (tmp_path / "runs").mkdir()
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PATH")}
    env.update(PATH=str(empty_bin), PYTHONPATH=str(REPO))  # python by absolute path; no java anywhere
    if java_home:
        env["JAVA_HOME"] = java_home
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "report", str(tmp_path)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=REPO)
    assert (p.returncode, p.stdout, p.stderr) == (2, "", prereq.JAVA_MESSAGE + "\n")
    assert not (tmp_path / "summary").exists()  # stopped before writing anything


def test_cli_missing_reports_dir_exits_2(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "kafkasim.cli", "report", str(tmp_path / "absent")],
                       capture_output=True, text=True, timeout=120, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.returncode == 2 and p.stderr.strip().startswith(f"kafkasim: report: reports directory {tmp_path}/absent does not exist")
