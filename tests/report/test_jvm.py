"""The report's JVM options: a CDS archive dumped once per machine (one file per writer), then
adopted and used; off with KAFKASIM_REPORT_CDS=0."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkasim.report import jvm

pytestmark = pytest.mark.unit


def test_first_start_dumps_to_its_own_file(tmp_path: Path) -> None:
    opts = jvm.cds_options(tmp_path / "cache", "spark-x", 4242)
    assert opts == f"-XX:ArchiveClassesAtExit={tmp_path / 'cache' / 'spark-x.4242.tmp'}"
    assert (tmp_path / "cache").is_dir()  # the JVM writes there at exit


def test_a_finished_dump_is_adopted_then_used(tmp_path: Path) -> None:
    (tmp_path / "spark-x.17.tmp").write_bytes(b"archive")
    (tmp_path / "spark-y.18.tmp").write_bytes(b"another key's")
    opts = jvm.cds_options(tmp_path, "spark-x", 99)
    assert opts == f"-XX:SharedArchiveFile={tmp_path / 'spark-x.jsa'} -Xshare:auto"
    assert (tmp_path / "spark-x.jsa").read_bytes() == b"archive" and not (tmp_path / "spark-x.17.tmp").exists()
    assert (tmp_path / "spark-y.18.tmp").exists()  # another PySpark or java's dump is left alone
    assert jvm.cds_options(tmp_path, "spark-x", 100) == opts


def test_key_names_pyspark_and_java(tmp_path: Path) -> None:
    a = jvm.archive_key({"PATH": str(tmp_path)}, "4.3.0")
    assert a.startswith("spark-4.3.0-") and a != jvm.archive_key({"PATH": str(tmp_path)}, "4.4.0")


def test_switched_off_and_cache_location(tmp_path: Path) -> None:
    env = {"KAFKASIM_REPORT_CDS": "0", "XDG_CACHE_HOME": str(tmp_path)}
    assert jvm.driver_java_options(env, "4.3.0") == jvm.BASE_OPTIONS
    assert jvm.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "kafkasim"
    assert jvm.cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "kafkasim"
    opts = jvm.driver_java_options({"XDG_CACHE_HOME": str(tmp_path), "PATH": ""}, "4.3.0")
    assert opts.startswith(jvm.BASE_OPTIONS + " -XX:ArchiveClassesAtExit=" + str(tmp_path / "kafkasim"))


def test_unwritable_cache_runs_without_archive(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    assert jvm.cds_options(tmp_path / "file" / "cache", "spark-x", 1) == ""
