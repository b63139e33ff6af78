"""`kafkasim shrink RUN_JSON`: minimise a failing run's scenario to a smallest one that still fails
the same way (same seed, at least one of the same violated checks), and write it as a new
scenario file.

Method: deterministic delta debugging over the scenario as data — drop faults (ddmin over the
schedule), then halve numbers (messages, producers, consumers, partitions, brokers, rate) while
the failure persists, repeating until nothing more can go. Every candidate is a full simulated
run with the original seed, so the result replays exactly. (ARCHITECTURE.md proposes hypothesis's
shrinker; a plain ddmin gives the same minimality guarantee, 1-minimal per dimension, with a
bounded, predictable number of runs and no dependence on hypothesis's example database.)
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkasim.harness.faults import TARGETED, Fault
from kafkasim.harness.nemesis import with_concrete_faults
from kafkasim.harness.replay import scenario_of_run
from kafkasim.harness.repro import SEEDED_BUGS_ENV
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import Scenario, ScenarioError
from kafkasim.harness.scenario_checks import check_scenario
from kafkasim.harness.swarm import swarm_table
from kafkasim.runtime.buggify import BuggifySpec

NUMERIC = (("producer", "messages", 1), ("producer", "count", 1), ("consumer", "count", 1),
           ("topic", "partitions", 1), ("cluster", "brokers", 1))


@dataclass
class ShrinkResult:
    original: Scenario
    shrunk: Scenario
    runs: int
    violations: list[str]
    path: str


def size(s: Scenario) -> int:
    """What shrinking minimises: faults count most, then workload volume."""
    return (1000 * len(s.faults) + s.producer.messages + 10 * (s.producer.count + s.consumer.count)
            + 10 * sum(t.partitions for t in s.topics) + 100 * s.brokers)


def _violations(run: dict[str, Any]) -> set[str]:
    return {c["name"] for c in run["checks"] if not c["ok"] and not c["expected"]}


def shrink(run_json: str, out_path: str | None = None, max_runs: int = 200,
           on_step: Callable[[str], None] = lambda msg: None, run: dict[str, Any] | None = None,
           on_note: Callable[[str], None] = lambda msg: None) -> ShrinkResult:
    """`run`: run_json already read (else it is read here). The scenario shrunk is the one the
    run ran (run.json's stored text; `on_note` hears when the file has changed since)."""
    if run is None:
        with open(run_json) as f:
            run = json.load(f)
    original = scenario_of_run(run, on_note)
    seed = int(run["seed"])
    target = _violations(run)
    if not target:
        raise ValueError(f"{run_json}: the run has no violations to shrink")
    work_dir = os.path.join(os.path.dirname(os.path.abspath(run_json)), "shrink")
    seeded_bugs: list[str] = list(run.get("seeded_bugs", []))
    runs = 0

    def fails(candidate: Scenario) -> bool:
        nonlocal runs
        if runs >= max_runs or not is_valid(candidate):
            return False  # a candidate the scenario checks refuse would test something else
        runs += 1
        candidate.text = dump_scenario(candidate)  # its run.json replays without a file
        # The failing run's seeded bugs, if any, stay on.
        res = run_scenario(candidate, seed, os.path.join(work_dir, f"try-{runs}"), seeded_bugs)
        ok = bool(_violations(res.run) & target)
        on_step(f"try {runs}: size {size(candidate)} -> {'still fails' if ok else 'passes'}")
        return ok

    # A nemesis is a seeded generator of faults: shrink this seed's concrete schedule instead
    # (the same faults the failing run had), and write it out as plain [[faults]].
    best = copy.deepcopy(with_concrete_faults(original, seed))
    changed = True
    while changed and runs < max_runs:
        changed = _drop_faults(best, fails) | _halve_numbers(best, fails)
    best.name = f"{original.name}-shrunk-seed{seed}"
    path = out_path or os.path.join(os.path.dirname(os.path.abspath(run_json)), "shrunk.toml")
    with open(path, "w") as f:
        f.write(dump_scenario(best, f"shrunk from {original.path} (seed {seed}); still fails at least one of "
                                    f"the original run's violations: {', '.join(sorted(target))}"
                                    + (f" (with {SEEDED_BUGS_ENV}={','.join(seeded_bugs)})" if seeded_bugs else "")))
    return ShrinkResult(original, best, runs, sorted(target), path)


def is_valid(s: Scenario) -> bool:
    try:
        check_scenario(s, lambda key, why: ScenarioError(f"{key}: {why}"))
    except ScenarioError:
        return False
    return True


def _drop_faults(s: Scenario, fails: Callable[[Scenario], bool]) -> bool:
    """ddmin over the fault schedule: try removing chunks, then single faults."""
    changed = False
    chunk = max(1, len(s.faults) // 2)
    while s.faults and chunk >= 1:
        removed = False
        for start in range(0, len(s.faults), chunk):
            trial = copy.deepcopy(s)
            trial.faults = s.faults[:start] + s.faults[start + chunk:]
            if fails(trial):
                s.faults, removed, changed = trial.faults, True, True
                break
        if not removed:
            chunk //= 2
    return changed


def _get(s: Scenario, where: str, attr: str) -> int:
    obj: Any = {"producer": s.producer, "consumer": s.consumer, "cluster": s, "topic": s.topics[0]}[where]
    return int(getattr(obj, attr))


def _set(s: Scenario, where: str, attr: str, value: int) -> None:
    obj: Any = {"producer": s.producer, "consumer": s.consumer, "cluster": s, "topic": s.topics[0]}[where]
    setattr(obj, attr, value)


def _halve_numbers(s: Scenario, fails: Callable[[Scenario], bool]) -> bool:
    """For each number, binary-search the smallest value (down to its floor) that still fails."""
    changed = False
    for where, attr, floor in NUMERIC:
        lo, hi = floor, _get(s, where, attr)
        while lo < hi:
            mid = (lo + hi) // 2
            trial = copy.deepcopy(s)
            _set(trial, where, attr, mid)
            _prune_faults(trial)
            if fails(trial):
                hi, changed = mid, True
                _set(s, where, attr, mid)
                s.faults = trial.faults
            else:
                lo = mid + 1
    return changed


_NUMBERED = re.compile(r"^(broker|producer|consumer)-(\d+)$")


def _prune_faults(s: Scenario) -> None:
    """Fewer brokers, producers or consumers: faults lose the nodes that no longer exist, and a
    fault left with nothing to act on (no target, an empty side, no end of a one-way cut) goes."""
    counts = {"broker": s.brokers, "producer": s.producer.count, "consumer": s.consumer.count}

    def exists(name: str) -> bool:
        m = _NUMBERED.match(name)
        return m is None or int(m.group(2)) < counts[m.group(1)]

    kept = []
    for f in s.faults:
        f.targets = [n for n in f.targets if exists(n)]
        f.sides = [[n for n in side if exists(n)] for side in f.sides]
        if (f.kind in TARGETED and not f.targets) or any(not side for side in f.sides) \
                or (f.src and not exists(f.src)) or (f.dst and not exists(f.dst)):
            continue
        kept.append(f)
    s.faults = kept


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def _fault_table(f: Fault) -> list[str]:
    lines = (["[[faults]]"] + ([f"# from {f.source}"] if f.source else [])
             + [f"at_ms = {_toml_value(f.at_ms)}", f"kind = {_toml_value(f.kind)}"])
    if f.jitter_ms:
        lines.append(f"jitter_ms = {_toml_value(f.jitter_ms)}")
    if f.duration_ms:
        lines.append(f"duration_ms = {_toml_value(f.duration_ms)}")
    if f.kind in TARGETED:
        lines.append(f"targets = {_toml_value(f.targets)}")
    lines += [f"{k} = {_toml_value(f.disk[k])}" for k in sorted(f.disk)]
    lines += [f"{k} = {_toml_value(f.request[k])}" for k in sorted(f.request)]  # request-level kinds
    if f.kind == "crash":
        lines.append(f"mode = {_toml_value(f.mode)}")
        if f.disk_modes:
            lines.append(f"disk_modes = {_toml_value(f.disk_modes)}")
    if f.kind == "partition":
        lines.append(f"sides = {_toml_value(f.sides)}")
    if f.kind in ("block", "clog"):
        lines += [f"from = {_toml_value(f.src)}", f"to = {_toml_value(f.dst)}"]
    if f.kind == "clog":
        lines.append(f"extra_ms = {_toml_value(f.extra_ms)}")
    return lines + [""]


def _nemesis_table(n: Any) -> list[str]:
    if n.swarm is not None:
        return swarm_table(n, _toml_value)
    lines = ["[[nemesis]]", f"kind = {_toml_value(n.kind)}", f"targets = {_toml_value(n.targets)}"]
    lines += [f"{k} = {_toml_value(getattr(n, k))}" for k in ("from_ms", "until_ms", "interval_ms", "duration_ms")]
    if n.kind == "crash":
        lines.append(f"mode = {_toml_value(n.mode)}")
        if n.disk_modes:
            lines.append(f"disk_modes = {_toml_value(n.disk_modes)}")
    if n.kind == "clog":
        lines.append(f"extra_ms = {_toml_value(n.extra_ms)}")
    lines += [f"{k} = {_toml_value(n.disk[k])}" for k in sorted(n.disk)]
    return lines + [""]


def _value_bytes(p: Any) -> str:
    return f"[{p.value_bytes}, {p.value_bytes_max}]" if p.value_bytes_max else str(p.value_bytes)


def _group_lines(s: Scenario) -> list[str]:
    """A consumer group's keys (only with a group: the loader refuses them without one)."""
    c = s.consumer
    if not c.group:
        return []
    return [f"group = {_toml_value(c.group)}", f"commit = {_toml_value(c.commit)}",
            f"commit_interval_ms = {_toml_value(c.commit_interval_ms)}",
            f"churn_interval_ms = {_toml_value(c.churn_interval_ms)}", f"churn = {_toml_value(c.churn)}",
            f"churn_until_ms = {_toml_value(c.churn_until_ms)}",
            f"crash_restart_ms = {_toml_value(c.crash_restart_ms)}",
            f"session_timeout_ms = {c.session_timeout_ms}", f"heartbeat_interval_ms = {c.heartbeat_interval_ms}",
            f"rebalance_timeout_ms = {c.rebalance_timeout_ms}"]


def _txn_lines(s: Scenario) -> list[str]:
    t = s.producer.txn
    if t is None:
        return []
    return ["transactional = true", f"txn_size = {t.txn_size}", f"abort_ratio = {_toml_value(t.abort_ratio)}",
            f"transaction_timeout_ms = {t.transaction_timeout_ms}", f"pipeline = {t.pipeline}",
            f"stall_ratio = {_toml_value(t.stall_ratio)}", f"stall_ms = {_toml_value(t.stall_ms)}",
            f"zombie_pause_ms = {_toml_value(t.zombie_pause_ms)}"]


def dump_scenario(s: Scenario, comment: str = "") -> str:
    """The scenario as TOML that load_scenario reads back to an equal Scenario."""
    p, c = s.producer, s.consumer
    acks = {-1: "all", 1: 1, 0: 0}[p.acks]
    out = [f"# {comment}"] if comment else []
    out += ["[scenario]", f"name = {_toml_value(s.name)}", f"description = {_toml_value(s.description)}",
            f"duration_ms = {_toml_value(s.duration_ms)}", "", "[cluster]", f"brokers = {s.brokers}"]
    out += [f"racks = {_toml_value(s.racks)}"] if s.racks else []
    out += ["", "[cluster.config]"]
    out += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in sorted(s.broker_config.items())] + [""]
    for t in s.topics:
        out += ["[[topics]]", f"name = {_toml_value(t.name)}", f"partitions = {t.partitions}",
                f"replication_factor = {t.replication_factor}", ""]
        if t.config:
            out += ["[topics.config]"] + [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in sorted(t.config.items())] \
                + [""]
    out += ["[workload.producer]", f"count = {p.count}", f"messages = {p.messages}",
            f"rate_per_s = {_toml_value(p.rate_per_s)}", f"acks = {_toml_value(acks)}", f"key_space = {p.key_space}",
            f"value_bytes = {_value_bytes(p)}", f"compression = {_toml_value(p.compression)}",
            f"linger_ms = {_toml_value(p.linger_ms)}", f"idempotence = {_toml_value(p.idempotence)}",
            f"key_distribution = {_toml_value(p.key_distribution)}",
            f"request_timeout_ms = {_toml_value(p.request_timeout_ms)}"] + _txn_lines(s) + ["", "[workload.consumer]",
            f"count = {c.count}", f"fetch_max_wait_ms = {c.fetch_max_wait_ms}"] + _group_lines(s) + [
            "", "[network]", f"latency_ms = {_toml_value(list(s.latency_ms))}", ""]
    for f in s.faults:
        out += _fault_table(f)
    for n in s.nemesis:  # shrink expands these into faults first; a plain dump keeps them
        out += _nemesis_table(n)
    for acl in s.acls:
        out += ["[[acls]]"] + [f"{k} = {_toml_value(v)}" for k, v in acl.describe().items()] + [""]
    out += ["[heal]", f"liveness_ms = {_toml_value(s.liveness_ms)}"]
    out += [] if s.liveness_phase else ["liveness = false", f"reason = {_toml_value(s.liveness_skip_reason)}"]
    b = s.buggify  # [buggify] only when it says something (a default table adds nothing)
    if b != BuggifySpec():
        out += ["", "[buggify]"] + [f"{k} = {_toml_value(v)}" for k, v in b.describe().items()]
    out += ["", "[guarantees]",
            f"expected = {_toml_value(s.expected)}", ""]
    return "\n".join(out)
