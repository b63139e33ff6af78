"""ConnectionQuotas: how many connections the broker holds, per client address and in all.

Kafka's ConnectionQuotas.inc runs in the acceptor, right after accept(), in this order:

  1. max.connections (broker-wide): while the broker holds that many connections the acceptor
     blocks — the new connection is established (the kernel's backlog) but nothing of it is
     read until another connection closes. Here the accepted connection waits, first come first
     served, and the closing connection hands its slot straight to the oldest waiter.
  2. max.connections.per.ip (or the address's entry in max.connections.per.ip.overrides): the
     connection is counted, and when its address already had that many it is closed at once
     (TooManyConnectionsException; the client sees the connection drop before any answer).

Overrides are `host:count` pairs separated by commas (`127.0.0.1:10,10.0.0.7:0`). Kafka resolves
host names with InetAddress.getByName; kafkasim matches the peer's address text as given, so an
override names an IP address (a host name matches only a peer that reports that text).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from kafkasim.config.types import ConfigValueError
from kafkasim.runtime.api import Future, NodeRuntime

if TYPE_CHECKING:
    from kafkasim.broker.config import BrokerConfig


def parse_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides -> {address: max}; ConfigValueError naming the bad entry."""
    out: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigValueError(f"Invalid value {text} for configuration max.connections.per.ip.overrides: "
                             f"entry '{item}' is not host:count")
        out[host.strip()] = int(count)
    return out


class ConnectionQuotas:
    def __init__(self, rt: NodeRuntime, max_per_ip: int, overrides: dict[str, int], max_connections: int) -> None:
        self.rt = rt
        self.max_per_ip = max_per_ip
        self.overrides = overrides
        self.max_connections = max_connections
        self.counts: dict[str, int] = {}
        self.total = 0  # connections holding a broker-wide slot
        self._waiters: deque[Future[None]] = deque()

    @classmethod
    def of(cls, rt: NodeRuntime, config: BrokerConfig) -> ConnectionQuotas:
        return cls(rt, config.max_connections_per_ip, parse_overrides(config.max_connections_per_ip_overrides),
                   config.max_connections)

    def max_for(self, address: str) -> int:
        return self.overrides.get(address, self.max_per_ip)

    async def inc(self, address: str) -> bool:
        """Take a broker-wide slot (waiting for one), then count the connection against its
        address. False: the address is over its limit and the caller closes the connection.
        Either way the caller calls dec(address) once the connection is gone."""
        if self.total >= self.max_connections or self._waiters:
            slot: Future[None] = self.rt.future()
            self._waiters.append(slot)
            try:
                await slot  # dec() hands over its slot: `total` already counts this connection
            except BaseException:
                self._abandon(slot)
                raise
        else:
            self.total += 1
        count = self.counts.get(address, 0)
        self.counts[address] = count + 1
        return count < self.max_for(address)

    def dec(self, address: str) -> None:
        count = self.counts.get(address, 0) - 1
        if count > 0:
            self.counts[address] = count
        else:
            self.counts.pop(address, None)
        self._release_slot()

    def _release_slot(self) -> None:
        if self._waiters:
            self._waiters.popleft().set_result(None)
        else:
            self.total -= 1

    def _abandon(self, slot: Future[None]) -> None:
        """A waiting connection was cancelled: leave the queue, or pass on a slot it was given."""
        if slot.done():
            self._release_slot()
        else:
            self._waiters.remove(slot)
