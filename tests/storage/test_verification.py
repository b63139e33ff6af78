"""KIP-890 part 1 in the log's producer state: a transactional batch that would open a
transaction goes in only with the guard of the producer's verification entry; a marker (or the
first batch) uses the entry up, so a stale verification cannot open the next transaction (the
ABA case); the entry's lowest sequence refuses a higher sequence that raced ahead."""

from __future__ import annotations

from typing import Any

import pytest
from storage_helpers import run_sim

from kafkasim.protocol import errors as E
from kafkasim.records.batch import Record, build_batch, iter_batches
from kafkasim.records.control import end_txn_marker_batch
from kafkasim.runtime.api import NodeRuntime
from kafkasim.storage.log import Log, LogConfig
from kafkasim.storage.producer_state import AppendOrigin, ProducerStateError
from kafkasim.storage.verification import SENTINEL, VerificationGuard

pytestmark = pytest.mark.unit

PID = 9


def test_a_guard_verifies_only_itself() -> None:
    g = VerificationGuard()
    assert g.verify(g) and not g.verify(VerificationGuard()) and not g.verify(SENTINEL) and not g.verify(None)
    assert not SENTINEL.verify(SENTINEL)


def append(log: Log, data: bytes, guard: VerificationGuard | None,
           origin: AppendOrigin = AppendOrigin.CLIENT) -> int:
    buf = bytearray(data)
    headers = list(iter_batches(buf, validate=True))
    psm = log.producer_state_manager
    try:
        psm.analyze_append(headers, log.log_end_offset, origin, buf, guard)
    except ProducerStateError as exc:
        return exc.error_code
    psm.on_append(log.append_as_leader(buf, headers, leader_epoch=0))
    return E.NONE


def txn_batch(seq: int) -> bytes:
    return build_batch([Record(0, None, b"v")], producer_id=PID, producer_epoch=0, base_sequence=seq,
                       is_transactional=True)


def test_the_first_batch_needs_the_guard_then_the_marker_uses_it_up() -> None:
    async def body(rt: NodeRuntime, world: Any) -> list[Any]:
        log = await Log.load(rt, "logs/t-0", LogConfig())
        psm = log.producer_state_manager
        out: list[Any] = [append(log, txn_batch(0), SENTINEL)]          # never verified
        stale = psm.maybe_create_verification_state_entry(PID, 0, 0, 0).verification_guard
        out.append(append(log, txn_batch(0), stale))                    # verified: opens the txn
        out.append(psm.has_ongoing_transaction(PID) and PID not in psm.verification_states)
        out.append(append(log, txn_batch(1), SENTINEL))                 # ongoing: no guard needed
        out.append(append(log, end_txn_marker_batch(PID, 0, 0, False, 0), None, AppendOrigin.COORDINATOR))
        # A new verification started; the stale guard of the previous one must not open a txn.
        psm.maybe_create_verification_state_entry(PID, 2, 0, 0)
        out.append(append(log, txn_batch(2), stale))
        out.append(append(log, txn_batch(2), None))                     # verification off: not checked
        return out

    assert run_sim(body) == [E.INVALID_TXN_STATE, E.NONE, True, E.NONE, E.NONE, E.INVALID_TXN_STATE, E.NONE]


def test_the_lowest_sequence_seen_while_verifying_blocks_higher_ones() -> None:
    async def body(rt: NodeRuntime, world: Any) -> list[int]:
        log = await Log.load(rt, "logs/t-0", LogConfig())
        psm = log.producer_state_manager
        psm.maybe_create_verification_state_entry(PID, 3, 0, 0)
        guard = psm.maybe_create_verification_state_entry(PID, 0, 0, 0).verification_guard  # a lower one came
        newer_epoch = psm.maybe_create_verification_state_entry(PID, 5, 1, 0)
        assert (newer_epoch.epoch, newer_epoch.lowest_sequence) == (1, 5)
        psm.maybe_create_verification_state_entry(PID, 0, 0, 0)                             # an older epoch: kept
        return [append(log, txn_batch(6), guard), newer_epoch.verification_guard == guard]

    assert run_sim(body) == [E.OUT_OF_ORDER_SEQUENCE_NUMBER, True]
