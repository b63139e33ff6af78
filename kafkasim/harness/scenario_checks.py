"""Checks that refuse a scenario which would silently test something else than it says: a fault
whose target is no node of the world (a typo in a node name, or a role naming a topic or
partition the scenario does not have, so the fault acts on nothing and the run passes), a
topic replicated more times than there are brokers, a follower role of an unreplicated topic.
They run on the parsed Scenario (so `kafkasim shrink` can apply them to its candidates too),
each failure naming the key and, where one is close, the known name it was probably meant as.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kafkasim.broker.config import BrokerConfig
from kafkasim.harness.faults import Fault

if TYPE_CHECKING:
    from kafkasim.harness.scenario import Scenario

# SimZooKeeper's host on the simulated network (kafkasim/runtime/sim/zookeeper.py).
ZOOKEEPER = "zookeeper"
OFFSETS_TOPIC = "__consumer_offsets"
# Kinds whose targets must be processes (ZooKeeper is a server of the world, not a node).
PROCESS_KINDS = ("crash", "restart", "disk", "disk_clear", "zk_expire", "pause")

Refuse = Callable[[str, str], Exception]  # (key, why) -> the error to raise


def did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def node_names(s: Scenario) -> list[str]:
    """Every node the runner builds for this scenario (kafkasim/harness/runner.py build_world)."""
    names = [f"broker-{i}" for i in range(s.brokers)] + ["admin"]
    names += [f"producer-{i}" for i in range(s.producer.count)]
    names += [f"consumer-{i}" for i in range(s.consumer.count)]
    if s.consumer.group:
        names.append(f"group-{s.consumer.group}")
    return names


def topic_shapes(s: Scenario) -> dict[str, tuple[int, int]]:
    """topic -> (partitions, replication factor) for the topics faults may name; the group
    coordinator's __consumer_offsets exists only when the consumers form a group."""
    shapes = {t.name: (t.partitions, t.replication_factor) for t in s.topics}
    if s.consumer.group:
        cfg = BrokerConfig.from_properties(dict(s.broker_config))
        shapes[OFFSETS_TOPIC] = (cfg.offsets_topic_num_partitions,
                                 min(s.brokers, cfg.offsets_topic_replication_factor))
    return shapes


def check_scenario(s: Scenario, refuse: Refuse) -> None:
    for i, t in enumerate(s.topics):
        if t.replication_factor > s.brokers:
            raise refuse(f"topics[{i}].replication_factor",
                         f"{t.replication_factor} replicas need at least {t.replication_factor} brokers, "
                         f"but [cluster] brokers = {s.brokers} (Kafka refuses to create the topic: "
                         f"INVALID_REPLICATION_FACTOR)")
    for f in s.faults:
        check_fault(s, f, f.key or "faults", refuse)
    for i, n in enumerate(s.nemesis):
        for target in n.targets:
            check_target(s, target, n.kind, f"nemesis[{i}].targets", refuse)


def check_fault(s: Scenario, f: Fault, key: str, refuse: Refuse) -> None:
    for target in f.targets:
        check_target(s, target, f.kind, f"{key}.targets", refuse)
    for side in f.sides:
        for target in side:
            check_target(s, target, f.kind, f"{key}.sides", refuse)
    for end, target in (("from", f.src), ("to", f.dst)):
        if target:
            check_target(s, target, f.kind, f"{key}.{end}", refuse)


def check_target(s: Scenario, target: str, kind: str, key: str, refuse: Refuse) -> None:
    """A node name of this world, or a role that can resolve to one of its brokers."""
    if target == ZOOKEEPER:
        if kind in PROCESS_KINDS:
            raise refuse(key, f"a {kind} fault cannot target '{ZOOKEEPER}' (it is no process: only isolate, "
                              f"partition, block and clog can)")
        return
    if target == "controller" or (target.startswith("txn_coordinator:") and len(target) > len("txn_coordinator:")):
        return
    role, sep, tp = target.partition(":")
    if sep and role in ("leader", "follower"):
        check_role(s, target, role, tp, key, refuse)
        return
    nodes = node_names(s)
    if target not in nodes:
        roles = ["controller"] + [f"leader:{t}-0" for t in topic_shapes(s)]
        raise refuse(key, f"unknown node '{target}'{did_you_mean(target, nodes + [ZOOKEEPER] + roles)}: nodes are "
                          f"{', '.join(nodes + [ZOOKEEPER])}, roles controller, leader:<topic>-<p>, "
                          f"follower:<topic>-<p>")


def check_role(s: Scenario, target: str, role: str, tp: str, key: str, refuse: Refuse) -> None:
    topic, _, part = tp.rpartition("-")
    if not topic or not part.isdigit():
        raise refuse(key, f"role target '{target}': expected {role}:<topic>-<partition>, e.g. "
                          f"{role}:{s.topics[0].name}-0")
    shapes = topic_shapes(s)
    if topic not in shapes:
        why = f"unknown topic '{topic}' in role target '{target}'{did_you_mean(topic, shapes)}"
        if topic == OFFSETS_TOPIC:
            why += f": {OFFSETS_TOPIC} exists only with a [workload.consumer] group"
        raise refuse(key, f"{why}; the scenario's topics: {', '.join(sorted(shapes))}")
    partitions, rf = shapes[topic]
    if int(part) >= partitions:
        raise refuse(key, f"role target '{target}': topic '{topic}' has partitions 0-{partitions - 1}, "
                          f"not {part}")
    if role == "follower" and rf < 2:
        raise refuse(key, f"role target '{target}' can never resolve: '{topic}' has replication factor {rf}, "
                          f"so no follower")
