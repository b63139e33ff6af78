"""SimCluster: the brokers of a simulated world — which KafkaServer runs on which node, starting,
crashing and restarting them, and the god's-eye questions only the simulation can answer
("who leads events-0 right now?", "who is the controller?").

Fault targets may name a role instead of a node, resolved when the fault fires:
  "controller"          the active controller
  "leader:<topic>-<p>"  the broker leading that partition (the live leader with the highest
                        leader epoch)
A later fault with the same role string (e.g. the restart after the crash) reuses the node the
role resolved to the first time, so "crash leader:t-0" ... "restart leader:t-0" restarts the
broker that was crashed.
"""

from __future__ import annotations

from typing import Callable, Optional

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.runtime.sim.world import SimWorld

BROKER_PORT = 9092


def broker_node_name(broker_id: int) -> str:
    return f"broker-{broker_id}"


class SimCluster:
    def __init__(self, world: SimWorld, config_for: Callable[[int, str], BrokerConfig]) -> None:
        self.world = world
        self.config_for = config_for
        self.servers: dict[str, KafkaServer] = {}
        self.resolved: dict[str, str] = {}

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
        server = KafkaServer(node.runtime, self.config_for(int(name.split("-")[1]), name))
        self.servers[name] = server
        node.runtime.spawn(server.startup(), name="broker startup")
        return server

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

    def controller(self) -> Optional[str]:
        best: Optional[tuple[int, str]] = None
        for name, s in self.live_servers():
            c = s.controller
            if c is not None and c.is_active and (best is None or c.epoch > best[0]):
                best = (c.epoch, name)
        return None if best is None else best[1]

    def leader_of(self, topic: str, partition: int) -> Optional[str]:
        best: Optional[tuple[int, str]] = None
        for name, s in self.live_servers():
            p = s.replica_manager.get_partition(topic, partition)
            if p is not None and p.is_leader and not p.offline and (best is None or p.leader_epoch > best[0]):
                best = (p.leader_epoch, name)
        return None if best is None else best[1]

    def resolve(self, target: str) -> Optional[str]:
        """A node name for a fault target (a node name stays itself)."""
        if target in self.resolved:
            return self.resolved[target]
        if target == "controller":
            name = self.controller()
        elif target.startswith("leader:"):
            topic, _, part = target[len("leader:"):].rpartition("-")
            name = self.leader_of(topic, int(part)) if part.isdigit() else None
        else:
            return target
        if name is not None:
            self.resolved[target] = name
        return name


def is_role_target(target: str) -> bool:
    return target == "controller" or target.startswith("leader:")
