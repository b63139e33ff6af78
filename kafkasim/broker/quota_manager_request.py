"""Request quotas as Kafka's ClientRequestQuotaManager enforces them: `request_percentage` per
user and client id (quota_manager.QuotaConfigs resolves which entity applies), the share of one
thread's time a client may take per quota window. Kafka's capacity is
(num.io.threads + num.network.threads) × 100 percent; a quota of 200 is two threads' worth.

What is recorded (ClientRequestQuotaManager.maybeRecordAndGetThrottleTimeMs): each request's time
as a percentage-second, nanos × 100 / 1e9 — so `request_ms / 10` — into the entity's windowed
Rate (quota_manager.Rate), whose per-second rate is then the percentage of time used. Over the
quota, the throttle time is QuotaUtils.boundedThrottleTime: Kafka's formula, at most one quota
window (`quota.window.size.seconds`).

The request's time: Kafka's requestThreadTimeNanos runs from the request handler taking the
request until the handler returns — which for a request parked in a purgatory (a DelayedFetch
long poll, an acks=all DelayedProduce, a DelayedJoin) is when it parks, so waiting is not
charged. kafkasim's handler is a coroutine: RequestTimer steps it and sums, on the runtime's
clock, the time of each step and of each suspension that did not begin a parked wait
(purgatory.Parking) — ZooKeeper calls and disk flushes count, as Kafka's blocking calls do. In the
simulated world computing takes no time, so there only the awaited I/O is charged.

Exempt (Kafka sends these with sendResponseExemptThrottle): LeaderAndIsr, StopReplica,
UpdateMetadata, ControlledShutdown, WriteTxnMarkers and AlterPartition (inter-broker requests,
authorized by ClusterAction), a follower's Fetch, and an acks=0 Produce. ApiVersions,
SaslHandshake and SaslAuthenticate are exempt only while authenticating (the SASL authenticator
answers them before KafkaApis sees them); after, Kafka throttles them like any other request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from kafkasim.broker.purgatory import Parking
from kafkasim.protocol import api as A

T = TypeVar("T")

EXEMPT_KEYS = frozenset({A.LEADER_AND_ISR, A.STOP_REPLICA, A.UPDATE_METADATA, A.CONTROLLED_SHUTDOWN,
                         A.WRITE_TXN_MARKERS, A.ALTER_PARTITION})


def exempt(api_key: int, api_version: int, request: Any) -> bool:
    """Whether Kafka answers this request without recording it against a request quota."""
    if api_key in EXEMPT_KEYS:
        return True
    if api_key == A.FETCH:
        return not consumer_fetch(request, api_version)
    if api_key == A.PRODUCE:
        return bool(request.acks == 0)
    return False


def consumer_fetch(request: Any, version: int) -> bool:
    """A Fetch from a consumer (replica id < 0), not from a follower."""
    replica = request.replica_state.replica_id if version >= 15 else request.replica_id
    return bool(replica < 0)


def percentage(request_ms: float) -> float:
    """ClientRequestQuotaManager.nanosToPercentage, from milliseconds."""
    return request_ms * 100.0 / 1000.0


class RequestTimer:
    """Runs a handler coroutine and measures its request time (see the module's docstring)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.request_ms = 0.0

    async def run(self, aw: Awaitable[T]) -> T:
        result: T = await _Stepped(aw, self)
        return result


class _Stepped:
    """An awaitable that forwards every step of `aw` to whoever drives it (the sim kernel or
    asyncio), timing each step and each suspension that was not a parked wait."""

    def __init__(self, aw: Awaitable[Any], timer: RequestTimer) -> None:
        self.aw, self.timer = aw, timer

    def __await__(self) -> Generator[Any, Any, Any]:
        inner, clock, timer = self.aw.__await__(), self.timer.clock, self.timer
        send: Any = None
        error: BaseException | None = None
        while True:
            started, parks = clock(), Parking.begun
            try:
                yielded = inner.throw(error) if error is not None else inner.send(send)
            except StopIteration as done:
                timer.request_ms += clock() - started
                return done.value
            parked = Parking.begun != parks
            suspended = clock()
            timer.request_ms += suspended - started
            try:
                send, error = (yield yielded), None
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:   # thrown in by the driver (a cancellation): pass it on
                send, error = None, exc
            if not parked:
                timer.request_ms += clock() - suspended
