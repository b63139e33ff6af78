#!/usr/bin/env python3
"""Run kafka-python's own integration tests (sdist 3.0.12) against `kafkasim serve`.

    python3 real/kafka-python-suite/run.py [--fetch-only] [--junitxml PATH] [-- PYTEST_ARGS...]

1. Downloads the kafka-python 3.0.12 sdist from PyPI with pip and unpacks it under work/
   (git-ignored; skipped when already there).
2. Drops in service.py (our shim for the test/service.py the sdist omits) and an empty
   test/__init__.py (also omitted; without it `test` resolves to CPython's own test package).
3. Starts `kafkasim serve` on a free port with a temporary log dir.
4. Runs `pytest test/integration` with KAFKA_URI/KAFKA_VERSION pointing at it, deselecting the
   tests in EXCLUDED (they cannot apply to kafkasim; README.md says why) and test_sasl_integration.
5. Runs `pytest test/integration/test_sasl_integration.py` without KAFKA_URI (those tests skip
   themselves on an external broker) and with kafkasim_fixture.py as a plugin: kafka-python's own
   KafkaFixture then starts a `kafkasim serve` with a SASL_PLAINTEXT listener per mechanism.
   Its JUnit results are merged into the first run's.
6. Prints a summary (passed / failed / skipped / deselected, each failure's first line) and
   exits with pytest's status. The broker's unhandled task errors, if any, are printed too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from kafkasim.runtime.real.ports import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VERSION = "3.0.12"
WORK = HERE / "work"
SDIST_DIR = WORK / f"kafka_python-{VERSION}"

# The version kafka-python infers from kafkasim's ApiVersions table
# (kafka.protocol.broker_version_data.infer_broker_version_from_api_versions: (3, 9) from Fetch v17,
# as for real Kafka 3.9.1).
# test_kafka_version_infer asserts the inference matches it; the suite's skipif gates use it.
KAFKA_VERSION = "3.9.0"

# The broker as the suite's own Kafka fixture configures it (its kafka.properties template with
# partitions=4): auto-created topics get 4 partitions, no initial rebalance delay, a small
# offsets topic, and session timeouts down to 1 s (test_group uses session_timeout_ms=3000).
BROKER_CONFIGS = {
    "num.partitions": 4,
    "default.replication.factor": 1,
    "auto.create.topics.enable": "true",
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 2,
    "offsets.topic.replication.factor": 1,
    # The fixture's _acl_config for 2.4 <= version < 4.0: test_create_describe_delete_acls needs an
    # authorizer (without one Kafka answers the ACL APIs with SECURITY_DISABLED); with no ACLs on a
    # resource everyone may use it, so the other tests run as before.
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

# Tests that cannot apply to kafkasim as an external broker: name (a -k term) -> reason.
# README.md lists the same; keep them in step.
EXCLUDED = {
    "test_ssl_integration": "its fixture makes JKS keystores with keytool (gen_ssl_resources); kafkasim "
                            "reads PEM keystores only (ssl.keystore.type=PEM)",
}

# Run in a second pytest session, with kafkasim_fixture.py standing in for the Kafka distribution.
SASL_MODULE = "test_sasl_integration"


def fetch() -> Path:
    """Download and unpack the sdist (idempotent), then drop in the shim."""
    stamp = SDIST_DIR / ".kafkasim-unpacked"
    if not stamp.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        dist = WORK / "dist"
        archive = dist / f"kafka_python-{VERSION}.tar.gz"
        if not archive.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                            "--no-binary", ":all:", "--no-deps", f"kafka-python=={VERSION}", "-d", str(dist)],
                           check=True)
        if SDIST_DIR.exists():
            shutil.rmtree(SDIST_DIR)
        with tarfile.open(archive) as tar:
            tar.extractall(WORK, filter="data")
        stamp.touch()
    shutil.copyfile(HERE / "service.py", SDIST_DIR / "test" / "service.py")
    shutil.copyfile(HERE / "kafkasim_fixture.py", SDIST_DIR / "test" / "kafkasim_fixture.py")
    (SDIST_DIR / "test" / "__init__.py").touch()
    return SDIST_DIR


def start_broker(tmp: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    trace = tmp / "trace.jsonl"
    cmd = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", str(port), "--log-dir", str(tmp / "logs"),
           "--trace", str(trace)]
    for key, value in BROKER_CONFIGS.items():
        cmd += ["--config", f"{key}={value}"]
    with open(tmp / "broker.out", "w") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"kafkasim serve exited:\n{(tmp / 'broker.out').read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port, trace
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("kafkasim serve did not listen within 30 s")


def stop_broker(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def summarize(junit: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """From pytest's JUnit XML: outcome ("passed", "failed", "skipped") -> test ids
    ("module::name"), and each failed test's first message line."""
    out: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}
    details: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")[-1]
        name = f"{module}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            out["failed"].append(name)
            details[name] = (bad.get("message") or "").strip().split("\n")[0][:300]
        elif case.find("skipped") is not None:
            out["skipped"].append(name)
        else:
            out["passed"].append(name)
    return out, details


def merge_junit(into: Path, other: Path) -> None:
    """Append other's <testsuite> elements to into's <testsuites> root."""
    tree = ET.parse(into)
    root = tree.getroot()
    for suite in ET.parse(other).getroot().iter("testsuite"):
        root.append(suite)
    tree.write(into, encoding="utf-8", xml_declaration=True)


def run_sasl_suite(sdist: Path, tmp: Path, junit: Path, timeout: int, extra: list[str]) -> int:
    """test_sasl_integration.py: kafka-python's KafkaFixture starts kafkasim serve itself."""
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_URI", "ZOOKEEPER_URI")}
    env.update({"KAFKA_VERSION": KAFKA_VERSION, "KAFKA_ROOT": str(tmp), "KAFKASIM_REPO": str(REPO)})
    cmd = [sys.executable, "-m", "pytest", f"test/integration/{SASL_MODULE}.py", "-p", "test.kafkasim_fixture",
           "-p", "no:cacheprovider", "-o", "addopts=", "-o", "log_level=INFO", f"--timeout={timeout}",
           "--timeout-method=thread", f"--junitxml={junit}", "-q", "-rfE", *extra]
    print(f"{SASL_MODULE}: KafkaFixture(transport='SASL_PLAINTEXT') -> kafkasim serve", flush=True)
    rc = subprocess.run(cmd, cwd=sdist, env=env).returncode
    return 0 if rc == 5 else rc  # 5: extra -k arguments selected none of these tests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fetch-only", action="store_true", help="download + unpack the sdist, then exit")
    ap.add_argument("--junitxml", type=Path, help="where to keep pytest's JUnit XML (default: a temp file)")
    ap.add_argument("--timeout", type=int, default=60, help="pytest-timeout per test, seconds")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args()

    sdist = fetch()
    if args.fetch_only:
        print(f"kafka-python {VERSION} tests ready in {sdist}")
        return 0

    with tempfile.TemporaryDirectory(prefix="kafkasim-kpsuite-") as tmpname:
        tmp = Path(tmpname)
        junit = args.junitxml or tmp / "junit.xml"
        proc, port, trace = start_broker(tmp)
        env = dict(os.environ)
        env.update({
            "KAFKA_URI": f"kafka://127.0.0.1:{port}",
            "KAFKA_VERSION": KAFKA_VERSION,
            # fixtures.Fixture.__init__ insists that KAFKA_ROOT is a directory, even for an
            # external broker; nothing is ever run from it.
            "KAFKA_ROOT": str(tmp),
        })
        deselect = " and ".join(f"not {name}" for name in [*EXCLUDED, SASL_MODULE])
        cmd = [sys.executable, "-m", "pytest", "test/integration", "-p", "no:cacheprovider",
               "-o", "addopts=", "-o", "log_level=INFO", f"--timeout={args.timeout}",
               "--timeout-method=thread", "-k", deselect, f"--junitxml={junit}", "-q", "-rfE",
               "--durations=5", *args.pytest_args]
        print(f"kafkasim serve on 127.0.0.1:{port}; KAFKA_VERSION={KAFKA_VERSION}", flush=True)
        start = time.monotonic()
        try:
            rc = subprocess.run(cmd, cwd=sdist, env=env).returncode
        finally:
            stop_broker(proc)
        sasl_junit = tmp / "junit-sasl.xml"
        sasl_rc = run_sasl_suite(sdist, tmp, sasl_junit, args.timeout, args.pytest_args)
        rc = rc or sasl_rc
        if junit.exists() and sasl_junit.exists():
            merge_junit(junit, sasl_junit)
        elapsed = time.monotonic() - start

        task_errors = [line for line in trace.read_text().splitlines() if '"task_error"' in line] \
            if trace.exists() else []
        if not junit.exists():
            print(f"pytest wrote no report (exit {rc})")
            return rc or 1
        res, details = summarize(junit)
        print()
        print(f"=== kafka-python {VERSION} integration suite vs kafkasim ({elapsed:.0f} s) ===")
        for name, message in details.items():
            print(f"FAILED {name}: {message}")
        for name, reason in EXCLUDED.items():
            print(f"EXCLUDED {name}: {reason}")
        for line in task_errors:
            print(f"BROKER TASK ERROR {line[:300]}")
        print(f"kafka-python suite: {len(res['passed'])} passed, {len(res['failed'])} failed, "
              f"{len(res['skipped'])} skipped, {len(EXCLUDED)} excluded")
        return rc


if __name__ == "__main__":
    sys.exit(main())
