"""ZooKeeper access for the broker (Kafka's kafka.zk and kafka.zookeeper packages): the session
client (ZooKeeperClient), the znode layouts and their JSON (zk_data) and KafkaZkClient's
operations on them. It sits below the controller, the group coordinator and the server, which
all reach ZooKeeper through it; it imports nothing else of the broker's."""
