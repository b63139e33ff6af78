"""Consumer groups and committed offsets (Kafka's classic group protocol).

- ``metadata``     GroupMetadata / MemberMetadata: one group's state machine, pure state.
- ``delayed``      the coordinator's delayed operations: DelayedHeartbeat, DelayedJoin,
                   InitialDelayedJoin, DelayedSync, in kafkasim.broker.purgatory's purgatory.
- ``coordinator``  GroupCoordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit/... as
                   Kafka 3.9's GroupCoordinator answers them.
- ``manager``      GroupMetadataManager: the ``__consumer_offsets`` log (record formats, store,
                   load on leadership, tombstones, offset retention).
- ``apis``         the wire handlers; ``register(apis)`` wires the whole thing into KafkaApis.

OffsetFetch answers committed_leader_epoch -1 even though the epoch a client committed is stored
(OffsetCommitValue v3): handing epochs back makes clients validate their position with
OffsetForLeaderEpoch, which is only meaningful once leader epochs are real end to end.
"""
