"""pytest plugin: kafka-python's own ``KafkaFixture`` spawns ``kafkasim serve`` instead of a Kafka
distribution. Written for kafkasim; run.py copies it to ``test/kafkasim_fixture.py`` and loads it
with ``-p test.kafkasim_fixture`` for ``test_sasl_integration.py`` only (those tests skip themselves
when ``KAFKA_URI`` is set, so they need a broker of the fixture's own making).

What stays kafka-python's: the fixture's configuration (``_sasl_config``, ``_acl_config`` and
``_jaas_config``: SASL mechanism, AclAuthorizer with allow.everyone.if.no.acl.found=true, the
broker's JAAS line with ``user_alice="alice-secret"`` for PLAIN), its client side
(``client_params``, ``_enrich_client_params``, ``create_topics`` through KafkaAdminClient) and the
tests. What is replaced is the layer that needs ``$KAFKA_ROOT/bin/*.sh`` and a JVM:

* ``ZookeeperFixture.open``: nothing to start, kafkasim serve keeps its metadata in an embedded store.
* ``KafkaFixture.open``/``start``: ``kafkasim serve`` with a PLAINTEXT listener (the inter-broker
  one kafkasim requires) and the fixture's SASL_PLAINTEXT listener on ``self.port``; the JAAS
  line goes in ``listener.name.sasl_plaintext.<mechanism>.sasl.jaas.config``.
* the SCRAM user the fixture adds with ``kafka-configs.sh --zookeeper ... --add-config
  'SCRAM-SHA-*=[password=...]'`` is added with AlterUserScramCredentials (what ``kafka-configs.sh
  --bootstrap-server`` sends) over the PLAINTEXT listener.
* ``get_topic_names`` (``kafka-topics.sh --list`` with the SASL command config): ListTopics through
  KafkaAdminClient with the fixture's own SASL client parameters.
"""

import os
import socket
import sys
import time

import py
from kafka import KafkaAdminClient
from kafka.admin import UserScramCredentialUpsertion
from test.integration import fixtures
from test.service import SpawnedService

REPO = os.environ["KAFKASIM_REPO"]


def _properties(text):
    """key=value lines (the fixture's *_config strings) as a dict."""
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _zookeeper_open(self):
    self.out("kafkasim serve keeps its metadata in an embedded store: no ZooKeeper to start")


def _kafka_open(self):
    if self.running:
        return
    if self.ssl_enabled:
        raise NotImplementedError("kafkasim_fixture starts PLAINTEXT and SASL_PLAINTEXT brokers only")
    if self.tmp_dir is None:
        self.tmp_dir = py.path.local.mkdtemp()  # pylint: disable=no-member
    self.tmp_dir.ensure(dir=True)
    self.host = "127.0.0.1"  # kafkasim binds 127.0.0.1; "localhost" may resolve to ::1 first
    self.sasl_config = self._sasl_config()
    self.acl_config = self._acl_config()
    self.jaas_config = self._jaas_config()
    self.start()


def _broker_configs(self, plain_port):
    configs = {
        "broker.id": self.broker_id,
        "num.partitions": self.partitions,
        "default.replication.factor": self.replicas,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 2,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": str(self.auto_create_topic).lower(),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},{self.transport}://127.0.0.1:{self.port}",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    sasl = _properties(self.sasl_config)
    # kafkasim's inter-broker listener is PLAINTEXT, so there is no inter-broker SASL mechanism to pick.
    sasl.pop("sasl.mechanism.inter.broker.protocol", None)
    configs.update(sasl)
    configs.update(_properties(self.acl_config))
    if self.sasl_enabled:
        key = f"listener.name.{self.transport.lower()}.{self.sasl_mechanism.lower()}.sasl.jaas.config"
        configs[key] = self.jaas_config.strip()
    return configs


def _wait_listening(child, port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.child.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def _kafka_start(self):
    if self.running:
        return True
    if self.auto_port:
        self.port = fixtures.get_open_port()
    plain_port = fixtures.get_open_port()
    args = [sys.executable, "-m", "kafkasim.cli", "serve", "--port", str(plain_port),
            "--log-dir", self.tmp_dir.join("data").strpath]
    for key, value in _broker_configs(self, plain_port).items():
        args += ["--config", f"{key}={value}"]
    env = dict(os.environ, PYTHONPATH=REPO)
    self.out(f"Starting kafkasim serve: PLAINTEXT on {plain_port}, {self.transport} on {self.port}")
    self.child = SpawnedService(args, env)
    self.child.start()
    if not _wait_listening(self.child, self.port):
        self.child.dump_logs()
        self.child.stop()
        raise RuntimeError("kafkasim serve did not start")
    if self.sasl_enabled and self.sasl_mechanism.startswith("SCRAM-SHA"):
        _add_scram_user(self, plain_port)
    self.running = True
    return True


def _add_scram_user(self, plain_port):
    upsert = UserScramCredentialUpsertion(self.broker_user, self.sasl_mechanism, self.broker_password)
    with KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{plain_port}", client_id="scram_setup") as admin:
        result = admin.alter_user_scram_credentials([upsert])
    if result.get(self.broker_user) is not None:  # user -> error message, None on success
        raise RuntimeError(f"AlterUserScramCredentials for {self.broker_user} failed: {result}")
    self.out(f"Added SCRAM credentials for user {self.broker_user}")


def _get_topic_names(self):
    with KafkaAdminClient(**self._enrich_client_params({}, client_id="topic_lister")) as admin:
        return list(admin.list_topics())


def pytest_configure(config):
    fixtures.ZookeeperFixture.open = _zookeeper_open
    fixtures.KafkaFixture.open = _kafka_open
    fixtures.KafkaFixture.start = _kafka_start
    fixtures.KafkaFixture.get_topic_names = _get_topic_names
