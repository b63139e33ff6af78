"""kafkasim driver for kcat (the `kcat` binary, librdkafka inside; protocol: ../README.md).

kcat reports neither offsets nor commits to its caller, so this wrapper reads what kcat itself
prints:
- produce: `kcat -P -vv` prints one "Message delivered to partition P (offset O)" line per
  delivery report, in send order within a partition. When every report names one partition
  (a single-partition topic or an explicit `partition`), report i is message i; otherwise the
  values are reported as null (which record went where is not observable).
- consume, assign mode: `kcat -C -J -o beginning|end -e`, records below the offsets already
  handed back are skipped, so successive consumes continue.
- consume, group mode: a long-running `kcat -G GROUP -J` member whose output is queued; with
  commit=true the member is one-shot (`-c max`): kcat commits what it consumed when it exits
  (enable.auto.commit on close), which is the only commit kcat can make.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import pyloop  # noqa: E402

ARGS = pyloop.parse_args()
KCAT = os.environ.get("KCAT", "kcat")
DELIVERED = re.compile(r"Message delivered to partition (-?\d+) \(offset (-?\d+)\)")
FAILED = re.compile(r"(Delivery failed for message: .*|% ERROR: .*|% FATAL .*|%\d\|[^|]*\|FATAL\|.*)")


def version() -> str:
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"Version (\S+) .*librdkafka (\S+)", out)
    return f"{m.group(1)} (librdkafka {m.group(2)})" if m else out.strip()


def codecs() -> list[str]:
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"builtin\.features=(\S+)\)", out)
    feats = set(m.group(1).split(",")) if m else set()
    return ["none"] + [c for c in ("gzip", "snappy", "lz4", "zstd") if c in feats]


def base(cmd: dict[str, Any]) -> list[str]:
    security = [a for k, v in pyloop.librdkafka_security(pyloop.security()).items() for a in ("-X", f"{k}={v}")]
    return [KCAT, "-b", ARGS.bootstrap, "-X", f"client.id={ARGS.client_id}", *security]


def produce(cmd: dict[str, Any]) -> dict[str, Any]:
    n = int(cmd["count"])
    values = [pyloop.value_of(cmd["prefix"], i) for i in range(n)]
    argv = base(cmd) + ["-P", "-vv", "-t", cmd["topic"]]
    if cmd.get("partition") is not None:
        argv += ["-p", str(int(cmd["partition"]))]
    if cmd.get("acks") is not None:
        argv += ["-X", f"acks={'all' if pyloop.acks_of(cmd) == 'all' else pyloop.acks_of(cmd)}"]
    if cmd.get("compression", "none") != "none":
        argv += ["-z", cmd["compression"]]
    if cmd.get("idempotent") is not None:
        argv += ["-X", f"enable.idempotence={'true' if cmd['idempotent'] else 'false'}"]
    lines = values
    if cmd.get("key_prefix") is not None:
        argv += ["-K", "\t"]
        lines = [f"{pyloop.key_of(cmd['key_prefix'], i)}\t{v}" for i, v in enumerate(values)]
    timeout_s = cmd.get("timeout_ms", 30000) / 1000
    try:
        p = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=timeout_s)
        err, rc = p.stderr, p.returncode
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        rc = -1
    reports = [(int(m.group(1)), int(m.group(2))) for m in DELIVERED.finditer(err)]
    errors: list[str] = []
    for m in FAILED.finditer(err):
        if m.group(1) not in errors and len(errors) < 20:
            errors.append(m.group(1))
    if rc != 0 and not errors:
        errors.append(f"kcat exited {rc}: {err.strip()[-500:]}")
    one_partition = len({p for p, _ in reports}) <= 1
    acked = [[p, o, values[i] if one_partition and i < n else None] for i, (p, o) in enumerate(reports)]
    return {"op": "produced", "acked": acked, "errors": errors}


def record(line: str) -> Optional[list[Any]]:
    try:
        j = json.loads(line)
    except ValueError:
        return None
    if not isinstance(j, dict) or "offset" not in j:
        return None
    return [int(j["partition"]), int(j["offset"]), j.get("payload")]


class AssignConsumer:
    def __init__(self, topic: str, cmd: dict[str, Any]) -> None:
        self.topic, self.group = topic, None
        self.start = "beginning" if cmd.get("from", "earliest") == "earliest" else "end"
        self.returned: dict[int, int] = {}
        self.partitions: list[int] = []

    def consume(self, max_records: int, timeout_ms: int, errors: list[str]) -> list[list[Any]]:
        argv = base({}) + ["-C", "-J", "-e", "-q", "-t", self.topic, "-o", self.start]
        deadline = pyloop.Deadline(timeout_ms)
        out: list[list[Any]] = []
        while not out and not deadline.expired():
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=max(1.0, deadline.left_s()))
                stdout, stderr = p.stdout, p.stderr
            except subprocess.TimeoutExpired as exc:
                stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
                stderr = ""
            for line in stdout.splitlines():
                r = record(line)
                if r is None or r[1] < self.returned.get(r[0], 0) or len(out) >= max_records:
                    continue
                out.append(r)
                self.returned[r[0]] = r[1] + 1
            if stderr.strip() and "ERROR" in stderr:
                pyloop.note_error(errors, RuntimeError(stderr.strip()[-300:]))
            if not out:
                time.sleep(0.1)
        self.partitions = sorted(set(self.partitions) | {r[0] for r in out})
        return out

    def assignment(self) -> list[int]:
        return self.partitions

    def close(self) -> None:
        pass


class GroupConsumer:
    def __init__(self, topic: str, group: str, cmd: dict[str, Any], count: Optional[int]) -> None:
        self.topic, self.group = topic, group
        argv = base(cmd) + ["-G", group, "-J", "-u", "-X", f"auto.offset.reset={cmd.get('from', 'earliest')}",
                            "-X", f"session.timeout.ms={cmd.get('session_timeout_ms', 10000)}",
                            "-X", f"heartbeat.interval.ms={cmd.get('heartbeat_interval_ms', 1000)}",
                            "-X", f"enable.auto.commit={'true' if count is not None else 'false'}"]
        if count is not None:
            argv += ["-c", str(count)]
        self.proc = subprocess.Popen(argv + [topic], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.q: "queue.Queue[Optional[list[Any]]]" = queue.Queue()
        self.stderr: list[str] = []
        self.assigned: set[int] = set()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            r = record(line)
            if r is not None:
                self.q.put(r)
        self.q.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            line = line.rstrip()
            m = re.search(r"% Group \S+ rebalanced \(memberid \S+\): (assigned|revoked): (.*)", line)
            if m:
                parts = {int(x.rsplit("[", 1)[1].rstrip("]")) for x in m.group(2).split(", ") if "[" in x}
                self.assigned = parts if m.group(1) == "assigned" else set()
            elif "ERROR" in line or "FATAL" in line:
                self.stderr.append(line)

    def consume(self, max_records: int, timeout_ms: int, errors: list[str]) -> list[list[Any]]:
        out: list[list[Any]] = []
        deadline = pyloop.Deadline(timeout_ms)
        while len(out) < max_records and not deadline.expired():
            try:
                r = self.q.get(timeout=min(0.1, deadline.left_s()) or 0.001)
            except queue.Empty:
                continue
            if r is None:
                break
            out.append(r)
        for e in self.stderr:
            pyloop.note_error(errors, RuntimeError(e))
        self.stderr.clear()
        return out

    def assignment(self) -> list[int]:
        return sorted(self.assigned)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


CONSUMERS: dict[tuple, Any] = {}


def consume(cmd: dict[str, Any]) -> dict[str, Any]:
    key = (cmd["topic"], cmd.get("group"))
    errors: list[str] = []
    max_records = int(cmd.get("max", 1 << 30))
    timeout_ms = int(cmd.get("timeout_ms", 10000))
    if cmd.get("group") is not None and cmd.get("commit"):
        # one-shot member: consumes `max` records, commits them as it exits, leaves the group
        c = GroupConsumer(cmd["topic"], cmd["group"], cmd, max_records)
        recs = c.consume(max_records, timeout_ms, errors)
        assignment = c.assignment()
        c.close()
        recs += [r for r in iter(c.q.get, None)][: max(0, max_records - len(recs))]
        committed: dict[int, int] = {}
        for p, o, _ in recs:
            committed[p] = max(committed.get(p, 0), o + 1)
        return {"op": "consumed", "records": recs, "assignment": assignment, "errors": errors,
                "committed": [[p, o] for p, o in sorted(committed.items())]}
    if key not in CONSUMERS:
        CONSUMERS[key] = (GroupConsumer(cmd["topic"], cmd["group"], cmd, None) if cmd.get("group") is not None
                          else AssignConsumer(cmd["topic"], cmd))
    c = CONSUMERS[key]
    recs = c.consume(max_records, timeout_ms, errors)
    return {"op": "consumed", "records": recs, "assignment": c.assignment(), "errors": errors}


def commit(cmd: dict[str, Any]) -> dict[str, Any]:
    raise NotImplementedError("kcat cannot commit on demand; use consume with commit=true (commit on exit)")


def close() -> None:
    for c in CONSUMERS.values():
        c.close()


def hello(cmd: dict[str, Any]) -> dict[str, Any]:
    return {"op": "hello", "client": "kcat", "version": version(), "language": "c (kcat binary)",
            "codecs": codecs(), "default_idempotent": False, "commit": "on-exit"}


pyloop.serve({"hello": hello, "produce": produce, "consume": consume, "commit": commit}, close)
