"""Free TCP ports on 127.0.0.1 for servers started by the project's scripts and tests.

A port that `bind(("127.0.0.1", 0))` hands out comes from the kernel's ephemeral range
(net.ipv4.ip_local_port_range, 32768-60999 by default), the same range every outgoing connection
takes its source port from. Between choosing the port and the server binding it, any client
connecting anywhere may take it as its source port, and the server then fails with "address
already in use" (stop 16's CI: a broker's control plane lost its port that way). So ports are
chosen below the ephemeral range, where the kernel never picks a source port, and each one is
handed out at most once per process (a chosen port is not bound until its server starts).
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10000          # below it sit the well-known services (ZooKeeper 2181, Kafka 9092, ...)
_handed_out: set[int] = set()
_rng = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "big"))


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for source ports (Linux's default when the file is unreadable)."""
    try:
        low, high = _RANGE_FILE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def candidate_range() -> range:
    """Ports outside the ephemeral range: below it when there is room, else above it."""
    low, high = ephemeral_range()
    if low - _LOWEST >= 1000:
        return range(_LOWEST, low)
    return range(high + 1, 65536)


def free_port(host: str = "127.0.0.1", attempts: int = 500) -> int:
    """A port nobody listens on now, outside the ephemeral range, not handed out before here."""
    ports = candidate_range()
    for _ in range(attempts):
        port = _rng.choice(ports)
        if port in _handed_out or not _bindable(host, port):
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port on {host} in {ports.start}-{ports.stop - 1} after {attempts} tries")


def _bindable(host: str, port: int) -> bool:
    # Without SO_REUSEADDR: a port still in TIME_WAIT from an earlier server counts as taken.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
