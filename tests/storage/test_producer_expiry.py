"""producer.id.expiration.ms: the LogManager's PeriodicProducerExpirationCheck forgets a producer
whose last batch is that old unless it has a transaction open (Kafka's
ProducerStateManager.removeExpiredProducers); a forgotten producer's next batch is accepted at any
sequence, a remembered one's must follow its last."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import run_sim

from kafkasim.protocol import errors as E
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import LogConfig
from kafkasim.storage.log_manager import LogManager, LogManagerConfig
from kafkasim.storage.producer_state import ProducerStateError

pytestmark = pytest.mark.unit

IDEMPOTENT, TRANSACTIONAL = 5, 6
CONFIG = LogManagerConfig(producer_id_expiration_ms=60_000, producer_id_expiration_check_interval_ms=10_000)


def append(log: Any, pid: int, seq: int, ts: float, transactional: bool = False) -> int:
    buf = bytearray(build_batch([Record(int(ts), None, b"v")], producer_id=pid, producer_epoch=0, base_sequence=seq,
                                is_transactional=transactional))
    headers = list(iter_batches(buf, validate=True))
    psm = log.producer_state_manager
    try:
        psm.analyze_append(headers, log.log_end_offset, buf=buf)
    except ProducerStateError as exc:
        return exc.error_code
    psm.on_append(log.append_as_leader(buf, headers, leader_epoch=0))
    return E.NONE


def test_an_idle_producer_is_forgotten_but_not_one_in_a_transaction() -> None:
    async def body(rt: NodeRuntime, world: Any) -> list[Any]:
        lm = LogManager(rt, "logs", LogConfig(), CONFIG)
        await lm.startup()
        log = await lm.get_or_create_log("t", 0)
        psm = log.producer_state_manager
        out: list[Any] = [append(log, IDEMPOTENT, 0, rt.now_ms()), append(log, TRANSACTIONAL, 0, rt.now_ms(), True)]
        psm.maybe_create_verification_state_entry(9, 0, 0, rt.now_ms())
        await rt.sleep(30_000)
        out.append(append(log, IDEMPOTENT, 7, rt.now_ms()))    # still known: the gap is refused
        await rt.sleep(61_000)
        out.append(sorted(psm.producers))                        # forgotten by the check at 60 s
        out.append(sorted(psm.verification_states))
        out.append(append(log, IDEMPOTENT, 7, rt.now_ms()))     # forgotten: any sequence
        await lm.shutdown()
        return out

    assert run_sim(body) == [E.NONE, E.NONE, E.OUT_OF_ORDER_SEQUENCE_NUMBER, [TRANSACTIONAL], [], E.NONE]


def test_a_transaction_open_past_the_max_timeout_and_the_buffer_is_late() -> None:
    async def body(rt: NodeRuntime, world: Any) -> list[bool]:
        lm = LogManager(rt, "logs", LogConfig(), CONFIG)
        await lm.startup()
        log = await lm.get_or_create_log("t", 0)
        psm = log.producer_state_manager
        out = [psm.has_late_transaction(rt.now_ms(), 900_000)]          # nothing open
        start = rt.now_ms()
        assert append(log, TRANSACTIONAL, 0, start, True) == E.NONE
        out.append(psm.has_late_transaction(start + 900_000 + 300_000, 900_000))       # at the bound: not yet
        out.append(psm.has_late_transaction(start + 900_000 + 300_001, 900_000))       # past it
        out.append(psm.has_late_transaction(start + 1_300_000, 2_000_000))             # a larger max timeout
        await lm.shutdown()
        return out

    assert run_sim(body) == [False, False, True, False]


@pytest.mark.parametrize("expiration_ms", [60_000, 3_600_000])
def test_producers_expired_by_the_restart_are_not_loaded_from_the_snapshot(expiration_ms: int) -> None:
    """ProducerStateManager.loadFromSnapshot skips an expired producer (isProducerExpired): down for
    longer than producer.id.expiration.ms, a broker forgets an idle producer at load — not one with
    a transaction open, nor one that wrote recently. The periodic check never runs here."""
    recent = 7
    config = LogManagerConfig(producer_id_expiration_ms=expiration_ms, producer_id_expiration_check_interval_ms=10**9)

    async def body(rt: NodeRuntime, world: Any) -> list[Any]:
        lm = LogManager(rt, "logs", LogConfig(), config)
        await lm.startup()
        log = await lm.get_or_create_log("t", 0)
        assert append(log, IDEMPOTENT, 0, rt.now_ms()) == E.NONE
        assert append(log, TRANSACTIONAL, 0, rt.now_ms(), True) == E.NONE
        await rt.sleep(50_000)
        assert append(log, recent, 0, rt.now_ms()) == E.NONE
        await lm.shutdown()                 # a snapshot at the log end offset holds all three
        await rt.sleep(11_000)              # 61 s after the first two wrote, 11 s after `recent`
        lm = LogManager(rt, "logs", LogConfig(), config)
        await lm.startup()
        log = await lm.get_or_create_log("t", 0)
        out: list[Any] = [log.producer_state_manager.loaded_snapshot_offset, sorted(log.producer_state_manager.producers)]
        out.append(append(log, IDEMPOTENT, 5, rt.now_ms()))  # forgotten: any sequence; known: a gap
        await lm.shutdown()
        return out

    snapshot, producers, gap = run_sim(body)
    assert snapshot == 3
    if expiration_ms == 60_000:
        assert producers == [TRANSACTIONAL, recent] and gap == E.NONE
    else:
        assert producers == [IDEMPOTENT, TRANSACTIONAL, recent] and gap == E.OUT_OF_ORDER_SEQUENCE_NUMBER
