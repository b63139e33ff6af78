"""Ports for the project's servers: outside the kernel's ephemeral range (where an outgoing
connection's source port could take a chosen port before its server binds it), free when chosen,
and never handed out twice in a process."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kafkasim.runtime.real import ports

pytestmark = pytest.mark.real


def test_ports_lie_outside_the_ephemeral_range_and_are_not_repeated() -> None:
    low, high = ports.ephemeral_range()
    chosen = [ports.free_port() for _ in range(200)]
    assert all(not low <= p <= high and 1024 < p < 65536 for p in chosen)
    assert len(set(chosen)) == len(chosen)


def test_a_chosen_port_can_be_bound_and_a_listening_one_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", ports.free_port()))
        busy.listen()
        taken = busy.getsockname()[1]
        # Only two candidates: the one that is listening, and one that is free.
        monkeypatch.setattr(ports, "candidate_range", lambda: range(taken, taken + 2))
        monkeypatch.setattr(ports, "_handed_out", set())
        if not ports._bindable("127.0.0.1", taken + 1):
            pytest.fail(f"port {taken + 1} is in use by something else; the test needs it free")
        got = ports.free_port(attempts=50)
        assert got == taken + 1
        with pytest.raises(RuntimeError, match="no free port"):
            ports.free_port(attempts=20)   # both candidates now taken: the listener's, and one handed out
    with socket.socket() as s:
        s.bind(("127.0.0.1", got))


def test_the_range_comes_from_the_kernel_and_moves_above_a_low_ephemeral_range(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "ip_local_port_range"
    fake.write_text("1024\t60999\n")
    monkeypatch.setattr(ports, "_RANGE_FILE", fake)
    assert ports.ephemeral_range() == (1024, 60999)
    assert ports.candidate_range() == range(61000, 65536)
    fake.write_text("40000 50000\n")
    assert ports.candidate_range() == range(10000, 40000)
