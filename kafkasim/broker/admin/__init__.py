"""The admin APIs of a ZooKeeper-mode Kafka 3.9.1 broker, one module per family (topics,
configs, log dirs, client quotas, SCRAM credentials, delegation tokens, features), with the
ZkAdminManager state they share in manager.py; kafkasim.broker.admin_apis registers them."""
