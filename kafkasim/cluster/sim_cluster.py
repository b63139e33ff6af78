"""SimCluster: the brokers of a simulated world — which KafkaServer runs on which node, starting,
crashing and restarting them, and the god's-eye questions only the simulation can answer
("who leads events-0 right now?", "who is the controller?").

Fault targets may name a role instead of a node, resolved when the fault fires:
  "controller"            the active controller
  "leader:<topic>-<p>"    the broker leading that partition (the live leader with the highest
                          leader epoch)
  "follower:<topic>-<p>"  the in-sync follower of that partition with the lowest broker id
  "txn_coordinator:<transactional.id>"  the transaction coordinator of that id: the leader of
                          its __transaction_state partition
Each fault resolves its roles afresh; a restart (`fresh=False`) reuses the node the role last
resolved to, so "crash leader:t-0" ... "restart leader:t-0" restarts the broker that was crashed
(which by then no longer leads).

Racks: `racks = ["a", "b"]` gives broker i the rack racks[i % len(racks)] (broker.rack), so the
controller's rack-aware replica assignment is exercised.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.replica_manager import ReplicaManager
from kafkasim.broker.server import KafkaServer
from kafkasim.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC_NAME
from kafkasim.runtime.api import ConnectionLossError, SessionExpiredError
from kafkasim.runtime.sim.kernel import Owner
from kafkasim.runtime.sim.world import SimWorld

BROKER_PORT = 9092
# A broker that cannot reach ZooKeeper while starting exits (Kafka: "Fatal error during
# KafkaServer startup. Prepare to shutdown", then Exit(1)); its supervisor (systemd's
# Restart=on-failure, a Kubernetes pod) starts it again after this long.
SUPERVISOR_RESTART_MS = 3000.0
TXN_COORDINATOR = "txn_coordinator:"


def broker_node_name(broker_id: int) -> str:
    return f"broker-{broker_id}"


class SimCluster:
    def __init__(self, world: SimWorld, config_for: Callable[[int, str], BrokerConfig],
                 racks: list[str] | None = None) -> None:
        self.world = world
        self.config_for = config_for
        self.racks = list(racks or [])
        self.servers: dict[str, KafkaServer] = {}
        self.resolved: dict[str, str] = {}
        self._supervisor = Owner("supervisor")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{name}:{BROKER_PORT}" for name in sorted(self.servers))

    def add_broker(self, broker_id: int) -> str:
        name = broker_node_name(broker_id)
        self.world.add_node(name)
        self.start_broker(name)
        return name

    def start_broker(self, name: str) -> KafkaServer:
        node = self.world.nodes[name]
        broker_id = int(name.split("-")[1])
        config = self.config_for(broker_id, name)
        if self.racks:
            config.rack = self.racks[broker_id % len(self.racks)]
        server = KafkaServer(node.runtime, config)
        self.servers[name] = server
        node.runtime.spawn(self._startup(name, server), name="broker startup")
        return server

    async def _startup(self, name: str, server: KafkaServer) -> None:
        try:
            await server.startup()
        except (ConnectionLossError, SessionExpiredError) as exc:
            # Only ZooKeeper being unreachable is an expected fatal startup error; any other
            # exception stays a task error (a bug) for the run's verdict.
            server.rt.trace("broker_startup_failed", error=f"{type(exc).__name__}: {exc}",
                            restart_in_ms=SUPERVISOR_RESTART_MS)
            self.world.kernel.call_later(self._supervisor, 0.0, lambda: self._exit_and_restart(name))

    def _exit_and_restart(self, name: str) -> None:
        """The process exits (peers see its sockets reset); the supervisor restarts it later."""
        self.world.nodes[name].crash("kill")
        self.world.kernel.call_later(self._supervisor, SUPERVISOR_RESTART_MS, lambda: self.restart(name))

    def restart(self, name: str) -> None:
        node = self.world.nodes[name]
        if node.alive:
            return
        node.restart()
        if name in self.servers:
            self.start_broker(name)

    # ---------------------------------------------------------------- god's eye
    def live_servers(self) -> list[tuple[str, KafkaServer]]:
        return [(n, s) for n, s in sorted(self.servers.items()) if self.world.nodes[n].alive]

    def replica_manager(self, name: str) -> ReplicaManager | None:
        """The node's ReplicaManager, if it is alive and its broker got that far in startup."""
        server = self.servers.get(name)
        return server.replica_manager if server is not None and self.world.nodes[name].alive else None

    def live_replica_managers(self) -> list[tuple[str, ReplicaManager]]:
        return [(n, s.replica_manager) for n, s in self.live_servers() if s.replica_manager is not None]

    def controller(self) -> str | None:
        best: tuple[int, str] | None = None
        for name, s in self.live_servers():
            c = s.controller
            if c is not None and c.is_active and (best is None or c.epoch > best[0]):
                best = (c.epoch, name)
        return None if best is None else best[1]

    def leader_of(self, topic: str, partition: int) -> str | None:
        best: tuple[int, str] | None = None
        for name, rm in self.live_replica_managers():
            p = rm.get_partition(topic, partition)
            if p is not None and p.is_leader and not p.offline and (best is None or p.leader_epoch > best[0]):
                best = (p.leader_epoch, name)
        return None if best is None else best[1]

    def follower_of(self, topic: str, partition: int) -> str | None:
        leader = self.leader_of(topic, partition)
        if leader is None:
            return None
        rm = self.replica_manager(leader)
        p = rm.get_partition(topic, partition) if rm is not None else None
        followers = sorted(b for b in (p.isr if p is not None else []) if broker_node_name(b) != leader)
        return broker_node_name(followers[0]) if followers else None

    def txn_coordinator_of(self, transactional_id: str) -> str | None:
        for _, s in self.live_servers():
            if s.txn_coordinator is not None:
                return self.leader_of(TRANSACTION_STATE_TOPIC_NAME, s.txn_coordinator.partition_for(transactional_id))
        return None

    def resolve(self, target: str, fresh: bool = True) -> str | None:
        """A node name for a fault target (a node name stays itself); `fresh=False` reuses what
        the role last resolved to (the restart after a crash)."""
        if not is_role_target(target):
            return target
        if not fresh and target in self.resolved:
            return self.resolved[target]
        name: str | None = None
        if target == "controller":
            name = self.controller()
        elif target.startswith(TXN_COORDINATOR):
            name = self.txn_coordinator_of(target[len(TXN_COORDINATOR):])
        else:
            role, _, tp = target.partition(":")
            topic, _, part = tp.rpartition("-")
            if part.isdigit():
                name = (self.leader_of if role == "leader" else self.follower_of)(topic, int(part))
        if name is not None:
            self.resolved[target] = name
        return name


def is_role_target(target: str) -> bool:
    return target == "controller" or target.startswith(("leader:", "follower:", TXN_COORDINATOR))
