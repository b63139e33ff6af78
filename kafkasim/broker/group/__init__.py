"""Consumer groups and committed offsets (Kafka's classic group protocol).

- ``metadata``     GroupMetadata / MemberMetadata: one group's state machine, pure state.
- ``delayed``      the coordinator's delayed operations: DelayedHeartbeat, DelayedJoin,
                   InitialDelayedJoin, DelayedSync, in kafkasim.broker.purgatory's purgatory.
- ``coordinator``  GroupCoordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit/... as
                   Kafka 3.9's GroupCoordinator answers them.
- ``manager``      GroupMetadataManager: the ``__consumer_offsets`` log (record formats, store,
                   load on leadership, tombstones, offset retention).
- ``apis``         the wire handlers; ``register(apis)`` wires the whole thing into KafkaApis.

OffsetFetch answers the committed leader epoch (OffsetCommitValue v3) from v5 on, as Kafka does;
clients then validate their position with OffsetForLeaderEpoch.
"""
