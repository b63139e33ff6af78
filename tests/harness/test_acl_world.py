"""The `acl` check in the simulated world: a run whose brokers enforce the ACLs passes it
(including across a revocation and a re-grant during consumption), and one whose brokers ignore
them (the authorization hook bypassed) is caught reading what the ACLs forbade. Also the
check's reading of the brokers' traced ACL caches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkasim.broker.security.authorizer import AclAuthorizer
from kafkasim.harness.acl_world import broker_acl_histories, check_acls
from kafkasim.harness.runner import run_scenario
from kafkasim.harness.scenario import scenario_from_text
from kafkasim.harness.workload import History, Poll, Send

pytestmark = pytest.mark.sim

SCENARIO = """
[scenario]
name = "acl-check"
duration_ms = 120000
[cluster]
brokers = 1
[cluster.config]
"authorizer.class.name" = "kafka.security.authorizer.AclAuthorizer"
[[topics]]
name = "orders"
partitions = 1
[workload.producer]
messages = 4000
rate_per_s = 100
acks = "all"
[workload.consumer]
fetch_max_wait_ms = 200
[[acls]]
host = "producer-0"
resource_type = "topic"
name = "orders"
operation = "write"
permission = "allow"
[[acls]]
host = "consumer-0"
resource_type = "topic"
name = "orders"
operation = "read"
permission = "allow"
until_ms = 3000
[[acls]]
host = "consumer-0"
resource_type = "topic"
name = "orders"
operation = "read"
permission = "allow"
from_ms = 37000
[heal]
liveness_ms = 100000
"""


def _acl_check(run: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in run["checks"] if c["name"] == "acl")


def test_enforced_acls_pass_the_check(tmp_path: Path) -> None:
    run = run_scenario(scenario_from_text("acl.toml", SCENARIO), 1, str(tmp_path)).run
    assert run["verdict"] == "pass", [c for c in run["checks"] if not c["ok"]]
    assert _acl_check(run)["ok"]
    polls = [json.loads(line)["t"] for line in open(tmp_path / "trace.jsonl") if '"ev":"poll"' in line]
    assert not [t for t in polls if 4000 < t < 37000], "the consumer read while its READ was revoked"
    assert max(polls) > 37000


def test_ignored_acls_are_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A broker that ignores its ACLs: the authorizer allows everything (the per-API rules and
    # FetchApi's checks of the fetch session's partitions all ask it).
    monkeypatch.setattr(AclAuthorizer, "authorize", lambda self, ctx, op, rtype, name: True)
    run = run_scenario(scenario_from_text("acl.toml", SCENARIO), 1, str(tmp_path)).run
    assert not _acl_check(run)["ok"]
    kinds = {a["kind"] for a in run["anomalies"]}
    assert "acl-forbidden-read" in kinds and "acl-forbidden-write" not in kinds


def _trace(tmp_path: Path, events: list[dict[str, Any]]) -> str:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return str(path)


def test_the_check_judges_by_what_each_broker_knew(tmp_path: Path) -> None:
    read = [["User:ANONYMOUS", "c", 3, 3]]
    path = _trace(tmp_path, [
        {"ev": "acl_cache_started", "node": "broker-0", "t": 0},
        {"ev": "acl_cache_started", "node": "broker-1", "t": 0},
        {"ev": "acls_changed", "node": "broker-0", "t": 1, "resource_type": 2, "name": "t", "pattern_type": 3,
         "acls": read},
        {"ev": "acls_changed", "node": "broker-1", "t": 1, "resource_type": 2, "name": "t", "pattern_type": 3,
         "acls": read},
        {"ev": "acls_changed", "node": "broker-0", "t": 100, "resource_type": 2, "name": "t", "pattern_type": 3,
         "acls": []},
        {"ev": "acls_changed", "node": "broker-1", "t": 300, "resource_type": 2, "name": "t", "pattern_type": 3,
         "acls": []},
        # A writer outside the brokers (the harness seeding ZooKeeper) is not a broker's cache.
        {"ev": "acls_changed", "node": "admin", "t": 400, "resource_type": 2, "name": "t", "pattern_type": 3,
         "acls": read},
    ])
    assert sorted(broker_acl_histories(path)) == ["broker-0", "broker-1"]
    h = History()
    h.polls = [Poll("c", 50, "t", 0, 0, "a"), Poll("c", 250, "t", 0, 1, "b"), Poll("c", 450, "t", 0, 2, "c"),
               Poll("d", 50, "t", 0, 3, "d")]
    h.sends = [Send("c", "w", None, 10, 20, ok=True)]
    result = check_acls(path, h, "t", {}, 100)
    # 250: broker-1 still allowed (it heard of the revocation at 300); 450: nobody did since 300;
    # d: never allowed; the write: nobody ever allowed WRITE.
    assert [(a.kind, a.detail.get("offset")) for a in result.anomalies] == [
        ("acl-forbidden-write", None), ("acl-forbidden-read", 2), ("acl-forbidden-read", 3)]
    assert check_acls(path, h, "t", {"allow.everyone.if.no.acl.found": "true", "super.users": "User:ANONYMOUS"},
                      100).anomalies == []
