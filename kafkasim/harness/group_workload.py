"""Consumer-group workload: `count` member slots (one node each, consumer-<i>) subscribe through
one group with kafkasim's GroupConsumer, commit as the scenario says, and are churned by a
driver: members join, leave (LeaveGroup) and crash (their node dies without a LeaveGroup, so
the coordinator waits for the session to time out; the node restarts after
`crash_restart_ms` and its member joins again under a new member id).

Churn: after an exponential gap (mean `churn_interval_ms`, the driver's seeded stream) one
applicable action of `churn` is drawn — "join" restarts a slot that left, "leave" and "crash"
need two running members (one always keeps the group consuming). No event after
`churn_until_ms`; then every slot that left joins again.

Finishing (the run must end even if writes were lost): once churn is over and every send is
answered, each member counts its empty polls in a stable generation; when every slot runs, all
are in the same generation, their assignments together cover every partition, and each has
`idle_polls_after_done` empty polls in a row, the group is done: one member reads the committed
offsets of every partition back (OffsetFetch), and all leave. (Coverage matters: a member that
crashed while its JoinGroup was parked is still counted as joined — Kafka keeps a member
awaiting join alive — so a generation can hand partitions to a dead member until its session
expires and the group rebalances again.) Every poll, assignment, commit and read-back goes into
the History."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkasim.client.connection import ClientError
from kafkasim.client.consumer import ConsumerConfig
from kafkasim.client.group import TP, GroupConfig, GroupConsumer
from kafkasim.client.group import Generation as GroupGeneration
from kafkasim.harness.scenario import ConsumerSpec
from kafkasim.harness.workload import Assignment, Commit, History, MemberEvent, OffsetRead, Poll
from kafkasim.protocol import errors as E
from kafkasim.runtime.api import NetworkError, NodeRuntime, RuntimeTimeout


class MemberHost(Protocol):
    """What the churn driver may do to a member's machine (the runner implements it on SimWorld)."""

    def start(self, process: str) -> None: ...   # spawn a fresh member on the node's current runtime
    def crash(self, process: str) -> None: ...   # kill -9 the node: no LeaveGroup, connections reset
    def restart(self, process: str) -> None: ...  # a new incarnation of the node (then start)


@dataclass
class Slot:
    process: str
    state: str = "running"        # running | left | down | finished
    leave_requested: bool = False
    idle_polls: int = 0
    generation: int = -1
    assigned: tuple[int, ...] = ()   # partitions of the member's current generation


@dataclass
class GroupRun:
    """The shared state of one group's members and its churn driver (all in one simulated process)."""
    spec: ConsumerSpec
    topic: str
    partitions: int
    producers: int
    history: History
    idle_polls_after_done: int = 5
    slots: dict[str, Slot] = field(default_factory=dict)
    churn_over: bool = False
    finished: bool = False
    final_read_done: bool = False

    def workload_done(self) -> bool:
        return self.churn_over and self.history.sends_resolved(self.producers)

    def note_poll(self, slot: Slot, generation: int, got_records: bool, stable: bool) -> None:
        quiet = not got_records and stable and generation == slot.generation and self.workload_done()
        slot.idle_polls = slot.idle_polls + 1 if quiet else 0
        slot.generation = generation
        slots = list(self.slots.values())
        covered = {p for s in slots for p in s.assigned} == set(range(self.partitions))
        if (self.workload_done() and all(s.state == "running" and not s.leave_requested for s in slots)
                and len({s.generation for s in slots}) == 1 and covered
                and all(s.idle_polls >= self.idle_polls_after_done for s in slots)):
            self.finished = True


def group_config(spec: ConsumerSpec) -> GroupConfig:
    return GroupConfig(spec.group, session_timeout_ms=spec.session_timeout_ms,
                       rebalance_timeout_ms=spec.rebalance_timeout_ms, heartbeat_interval_ms=spec.heartbeat_interval_ms)


class _Member:
    """One incarnation of one slot's member: its polls, commits and rebalances go to the history."""

    def __init__(self, rt: NodeRuntime, bootstrap: str, run: GroupRun, process: str) -> None:
        self.rt, self.group, self.process = rt, run, process
        self.spec, self.history, self.slot = run.spec, run.history, run.slots[process]
        self.gc = GroupConsumer(rt, bootstrap, group_config(self.spec), [run.topic],
                                ConsumerConfig(fetch_max_wait_ms=self.spec.fetch_max_wait_ms), client_id=process,
                                on_assigned=self._assigned)
        self.last_committed: dict[TP, int] = {}
        self.last_commit_ms = rt.monotonic_ms()

    def _event(self, kind: str) -> None:
        self.history.member_events.append(MemberEvent(self.spec.group, self.process, kind, self.rt.monotonic_ms(),
                                                      self.gc.member.member_id))
        self.rt.trace("group_member", process=self.process, kind=kind, member=self.gc.member.member_id)

    def _assigned(self, gen: GroupGeneration, tps: list[TP], committed: dict[TP, int], sent_ms: float) -> None:
        now = self.rt.monotonic_ms()
        self.last_committed = {tp: off for tp, off in committed.items() if off >= 0}
        self.slot.assigned = tuple(p for _, p in tps)
        self.history.assignments.append(Assignment(self.spec.group, self.process, gen.member_id, gen.generation_id,
                                                   [p for _, p in tps], now))
        if tps:
            self.history.offset_reads.append(OffsetRead(self.spec.group, self.process, sent_ms, now,
                                                        {p: off for (_, p), off in committed.items()}))
        self.rt.trace("group_assigned", process=self.process, member=gen.member_id, generation=gen.generation_id,
                      partitions=[p for _, p in tps])

    async def run(self) -> None:
        self._event("start")
        while True:
            if self.slot.leave_requested or self.group.finished:
                await self._stop()
                return
            records = await self.gc.poll()
            gen = self.gc.fetch_generation
            for r in records:
                value = (r.value or b"").split(b".", 1)[0].decode()
                self.history.polls.append(Poll(self.process, self.rt.monotonic_ms(), r.topic, r.partition, r.offset,
                                               value, gen.member_id, gen.generation_id, self.spec.group))
            if records:
                self.rt.trace("poll", process=self.process, generation=gen.generation_id, records=len(records))
            await self._maybe_commit()
            self.group.note_poll(self.slot, gen.generation_id, bool(records), not self.gc.member.rejoin_needed)

    async def _maybe_commit(self) -> None:
        spec = self.spec
        if spec.commit == "none" or self.gc.member.rejoin_needed:
            return
        if spec.commit == "interval" and self.rt.monotonic_ms() - self.last_commit_ms < spec.commit_interval_ms:
            return
        positions = self.gc.positions()
        if not positions or positions == self.last_committed:
            return
        self.last_commit_ms = self.rt.monotonic_ms()
        gen = self.gc.member.generation
        c = Commit(spec.group, self.process, gen.member_id, gen.generation_id,
                   {p: off for (_, p), off in sorted(positions.items())}, self.rt.monotonic_ms())
        self.history.commits.append(c)
        try:
            errors = await self.gc.commit()
        except (NetworkError, RuntimeTimeout, ClientError):
            self.gc.member._mark_coordinator_dead()
            c.complete_ms = self.rt.monotonic_ms()  # acked stays None: the commit may or may not have landed
            return
        c.complete_ms = self.rt.monotonic_ms()
        c.errors = {p: code for (_, p), code in sorted(errors.items())}
        c.acked = all(code == E.NONE for code in errors.values())
        if c.acked:
            self.last_committed = positions

    async def _stop(self) -> None:
        if self.group.finished and not self.group.final_read_done:
            self.group.final_read_done = True
            await self._final_read()
        self._event("leave" if self.slot.leave_requested else "done")
        await self.gc.close()
        self.slot.state = "left" if self.slot.leave_requested else "finished"
        self.slot.leave_requested = False

    async def _final_read(self, attempts: int = 100) -> None:
        """The committed offsets of every partition, as the group ends (for the regression check)."""
        n = self.gc.consumer.cluster.partition_counts.get(self.group.topic, 0)
        tps = [(self.group.topic, p) for p in range(n)]
        for _ in range(attempts):
            sent = self.rt.monotonic_ms()
            try:
                code, committed = await self.gc.member.fetch_committed(tps)
                if code == E.NONE:
                    self.history.offset_reads.append(OffsetRead(self.spec.group, self.process, sent,
                                                                self.rt.monotonic_ms(),
                                                                {p: off for (_, p), off in committed.items()}))
                    return
            except (NetworkError, RuntimeTimeout, ClientError):
                self.gc.member._mark_coordinator_dead()
            await self.rt.sleep(100)


async def run_group_member(rt: NodeRuntime, bootstrap: str, run: GroupRun, process: str) -> None:
    await _Member(rt, bootstrap, run, process).run()


async def run_churn(rt: NodeRuntime, run: GroupRun, host: MemberHost) -> None:
    """The churn driver, then wait until every member has finished (the run's final task)."""
    spec = run.spec
    rng = rt.rng("churn")
    if spec.churn_interval_ms > 0:
        while True:
            await rt.sleep(rng.expovariate(1.0 / spec.churn_interval_ms))
            if rt.monotonic_ms() >= spec.churn_until_ms:
                break
            _churn_once(rt, run, host, rng)
    run.churn_over = True
    rt.trace("churn_over", group=spec.group)
    while not all(s.state == "finished" for s in run.slots.values()):
        for s in run.slots.values():
            if s.state == "left":   # everyone comes back for the end
                s.state = "running"
                host.start(s.process)
        await rt.sleep(100)


def _churn_once(rt: NodeRuntime, run: GroupRun, host: MemberHost, rng: Any) -> None:
    running = [s for s in run.slots.values() if s.state == "running" and not s.leave_requested]
    left = [s for s in run.slots.values() if s.state == "left"]
    options = [k for k in run.spec.churn if (k == "join" and left) or (k != "join" and len(running) >= 2)]
    if not options:
        return
    kind = rng.choice(options)
    slot = rng.choice(left if kind == "join" else running)
    rt.trace("churn", group=run.spec.group, action=kind, process=slot.process)
    run.history.member_events.append(MemberEvent(run.spec.group, slot.process, f"churn-{kind}", rt.monotonic_ms()))
    if kind == "join":
        slot.state, slot.idle_polls = "running", 0
        host.start(slot.process)
    elif kind == "leave":
        slot.leave_requested = True
    else:
        slot.state, slot.idle_polls = "down", 0
        host.crash(slot.process)
        rt.spawn(_restart_later(rt, run, host, slot), name=f"restart {slot.process}")


async def _restart_later(rt: NodeRuntime, run: GroupRun, host: MemberHost, slot: Slot) -> None:
    await rt.sleep(run.spec.crash_restart_ms)
    host.restart(slot.process)
    slot.state = "running"
    run.history.member_events.append(MemberEvent(run.spec.group, slot.process, "restart", rt.monotonic_ms()))
    host.start(slot.process)


StartMember = Callable[[NodeRuntime, str], Coroutine[Any, Any, None]]


def member_starter(bootstrap: str, run: GroupRun) -> StartMember:
    return lambda rt, process: run_group_member(rt, bootstrap, run, process)

