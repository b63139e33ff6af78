"""Replica assignment exactly as Kafka's AdminUtils.assignReplicasToBrokers
(server-common/src/main/java/org/apache/kafka/admin/AdminUtils.java, 3.9).

Three goals: spread replicas evenly over brokers; for the partitions a broker leads, spread
their followers over the other brokers; with rack information on every broker, put each
partition's replicas on distinct racks when possible.

Rack unaware: the first replica of each partition goes round-robin from a random start in the
broker list; the others follow with an increasing shift. Rack aware: the same over a
rack-alternated broker list (0 -> r1, 1 -> r3, 2 -> r3, 3 -> r2, 4 -> r2, 5 -> r1 becomes
0, 3, 1, 5, 4, 2), skipping a broker whose rack (or which itself) already holds a replica while
some rack (broker) holds none.

Kafka draws the random start index and shift from `new Random()`; here they come from the
runtime's seeded rng (the caller passes `rng_int(n)` -> [0, n)), so a simulated run is repeatable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkasim.protocol import errors as E

MAX_PARTITIONS_PER_OP = 10_000


class AssignmentError(Exception):
    """InvalidPartitionsException / InvalidReplicationFactorException / AdminOperationException."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True)
class BrokerMetadata:
    id: int
    rack: str | None


def assign_replicas_to_brokers(brokers: list[BrokerMetadata], n_partitions: int, replication_factor: int,
                               rng_int: Callable[[int], int], fixed_start_index: int = -1,
                               start_partition_id: int = -1) -> dict[int, list[int]]:
    if n_partitions <= 0:
        raise AssignmentError(E.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(E.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(E.INVALID_REPLICATION_FACTOR, f"Replication factor: {replication_factor} larger than "
                              f"available brokers: {len(brokers)}.")
    if n_partitions > MAX_PARTITIONS_PER_OP:
        # Kafka's ZooKeeper-mode AdminZkClient has no bound and runs out of heap building the
        # assignment; its KRaft controller refuses an operation of more than 10,000 records
        # (QuorumController.MAX_RECORDS_PER_USER_OP) with this error, which kafkasim answers.
        raise AssignmentError(E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    if all(b.rack is None for b in brokers):
        return _rack_unaware(n_partitions, replication_factor, [b.id for b in brokers], rng_int,
                             fixed_start_index, start_partition_id)
    if any(b.rack is None for b in brokers):
        raise AssignmentError(E.INVALID_REPLICA_ASSIGNMENT,
                              "Not all brokers have rack information for replica rack aware assignment.")
    return _rack_aware(n_partitions, replication_factor, {b.id: str(b.rack) for b in brokers}, rng_int,
                       fixed_start_index, start_partition_id)


def _start(fixed_start_index: int, n: int, rng_int: Callable[[int], int]) -> int:
    return fixed_start_index if fixed_start_index >= 0 else rng_int(n)


def _rack_unaware(n_partitions: int, rf: int, broker_list: list[int], rng_int: Callable[[int], int],
                  fixed_start_index: int, start_partition_id: int) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index = _start(fixed_start_index, n, rng_int)
    next_replica_shift = _start(fixed_start_index, n, rng_int)
    current = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        replicas = [broker_list[first]]
        for j in range(rf - 1):
            replicas.append(broker_list[replica_index(first, next_replica_shift, j, n)])
        out[current] = replicas
        current += 1
    return out


def _rack_aware(n_partitions: int, rf: int, rack_of: dict[int, str], rng_int: Callable[[int], int],
                fixed_start_index: int, start_partition_id: int) -> dict[int, list[int]]:
    num_racks = len(set(rack_of.values()))
    arranged = rack_alternated_broker_list(rack_of)
    n = len(arranged)
    start_index = _start(fixed_start_index, n, rng_int)
    next_replica_shift = _start(fixed_start_index, n, rng_int)
    current = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            next_replica_shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {rack_of[leader]}
        brokers_with = {leader}
        k = 0
        for _j in range(rf - 1):
            while True:
                broker = arranged[replica_index(first, next_replica_shift * num_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none, or
                # that already has one while some broker has none.
                if (rack not in racks_with or len(racks_with) == num_racks) and \
                        (broker not in brokers_with or len(brokers_with) == n):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[current] = replicas
        current += 1
    return out


def rack_alternated_broker_list(rack_of: dict[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: one broker per rack in turn, racks sorted, each
    rack's brokers sorted by id (rack1: 0,1,2  rack2: 3,4,5 -> 0,3,1,4,2,5)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    iters = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iters)
    out: list[int] = []
    i = 0
    while len(out) < len(rack_of):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(racks)
    return out


def replica_index(first_replica_index: int, second_replica_shift: int, index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers
