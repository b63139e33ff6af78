"""The ZooKeeper-mode controller (Kafka's kafka.controller package).

    KafkaController              kafka_controller.py          election, failover, every controller event
    ControllerContext            context.py                   the controller's picture of the cluster
    ControllerChannelManager,
    ControllerBrokerRequestBatch channel_manager.py           LeaderAndIsr / UpdateMetadata / StopReplica
    PartitionStateMachine        partition_state_machine.py   New -> Online <-> Offline -> NonExistent
    ReplicaStateMachine          replica_state_machine.py     replicas: New, Online, Offline, deletion
    TopicDeletionManager         topic_deletion_manager.py    /admin/delete_topics
    ControllerEventManager       event_manager.py             one event at a time
    Election                     election.py                  leader election strategies
"""
