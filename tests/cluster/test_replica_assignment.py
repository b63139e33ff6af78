"""AdminUtils.assignReplicasToBrokers and the control-plane znodes, against the values Kafka
3.9's own tests (AdminRackAwareTest) and a real 3-broker Kafka 3.9.1 cluster give."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker.admin_utils import (
    AssignmentError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)
from kafkasim.broker.zk import zk_data as Z
from kafkasim.protocol import errors as E

pytestmark = pytest.mark.unit


def _never(n: int) -> int:
    raise AssertionError("a fixed start index draws nothing")


def test_rack_unaware_assignment_is_kafkas() -> None:
    brokers = [BrokerMetadata(i, None) for i in range(5)]
    got = assign_replicas_to_brokers(brokers, 10, 3, _never, fixed_start_index=0)
    assert got == {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                   5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_random_start_comes_from_the_given_rng() -> None:
    # A real Kafka 3.9.1 cluster of 3 created t3 (4 partitions, RF 3) as below. Its broker list
    # came from the metadata cache's LongMap, which iterates brokers 0, 2, 1; the draws were a
    # start index of 2 and a replica shift of 0.
    draws = iter([2, 0])
    brokers = [BrokerMetadata(i, None) for i in (0, 2, 1)]
    got = assign_replicas_to_brokers(brokers, 4, 3, lambda n: next(draws))
    assert got == {0: [1, 0, 2], 1: [0, 2, 1], 2: [2, 1, 0], 3: [1, 2, 0]}


def test_rack_alternated_list_and_rack_aware_assignment() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({k: v for k, v in racks.items() if k != 5}) == [0, 3, 1, 4, 2]
    brokers = [BrokerMetadata(b, r) for b, r in racks.items()]
    got = assign_replicas_to_brokers(brokers, 7, 3, _never, fixed_start_index=0, start_partition_id=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
                   6: [0, 4, 2]}
    # Every partition of a rack-aware assignment spans three racks.
    wide = assign_replicas_to_brokers(brokers, 12, 3, lambda n: 2)
    assert all(len({racks[b] for b in r}) == 3 for r in wide.values())


@pytest.mark.parametrize("partitions,rf,brokers,code", [
    (0, 1, 3, E.INVALID_PARTITIONS), (3, 0, 3, E.INVALID_REPLICATION_FACTOR), (3, 4, 3, E.INVALID_REPLICATION_FACTOR)])
def test_invalid_requests(partitions: int, rf: int, brokers: int, code: int) -> None:
    with pytest.raises(AssignmentError) as err:
        assign_replicas_to_brokers([BrokerMetadata(i, None) for i in range(brokers)], partitions, rf, lambda n: 0)
    assert err.value.error_code == code


def test_partial_rack_information_is_refused() -> None:
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers([BrokerMetadata(0, "a"), BrokerMetadata(1, None)], 1, 1, lambda n: 0)


def test_control_plane_znodes_are_kafkas_json() -> None:
    assert Z.partition_state_json_full(0, 1, [0, 2], 1) == \
        b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":1,"isr":[0,2]}'
    recovering = Z.partition_state_json_full(2, 3, [2], 4, Z.LEADER_RECOVERY_RECOVERING)
    assert json.loads(recovering)["leader_recovery_state"] == 1 and Z.parse_leader_recovery_state(recovering) == 1
    assert Z.partitions_json([("t", 0), ("u", 3)]) == \
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    assert Z.parse_partitions_json(Z.partitions_json([("t", 0)])) == [("t", 0)]
    assert Z.log_dir_event_json(1) == b'{"version":1,"broker":1,"event":1}'
    assert Z.reassignment_json({("t", 0): [1, 2]}) == \
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    assert Z.feature_json() == b'{"features":{},"version":2,"status":1}'
    full = Z.topic_assignment_json_full({0: [1, 2, 0]}, "id", {0: [0]}, {0: [3]})
    assert json.loads(full)["adding_replicas"] == {"0": [0]}
    assert Z.parse_topic_assignment_full(full) == ({0: [1, 2, 0]}, "id", {0: [0]}, {0: [3]})
