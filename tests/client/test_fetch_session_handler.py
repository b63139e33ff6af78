"""FetchSessionHandler (the fetcher's side of KIP-227) against Kafka 3.9's FetchSessionHandler
rules: what a full and an incremental Fetch carry, and how each answer moves the session on."""

from __future__ import annotations

import pytest

from kafkasim.client.fetch_session_handler import FetchSessionHandler, PartitionData
from kafkasim.protocol import errors as E

pytestmark = pytest.mark.unit

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def pd(offset: int, epoch: int = 3) -> PartitionData:
    return PartitionData(bytes(16), offset, 0, 1 << 20, epoch, epoch)


def established(session_id: int = 7) -> FetchSessionHandler:
    h = FetchSessionHandler()
    h.build({A: pd(10), B: pd(20)})
    assert h.handle_response(E.NONE, session_id, {A, B})
    return h


def test_the_first_request_is_full_and_an_answer_with_a_session_id_opens_it() -> None:
    h = FetchSessionHandler()
    data = h.build({A: pd(10), B: pd(20)})
    assert (data.session_id, data.epoch, list(data.to_send), data.to_forget) == (0, 0, [A, B], [])
    assert h.handle_response(E.NONE, 7, {A, B})
    assert (h.session_id, h.epoch) == (7, 1)


def test_an_incremental_request_carries_only_new_and_changed_partitions_and_forgets_the_dropped() -> None:
    h = established()
    data = h.build({C: pd(5), B: pd(21), A: pd(10)})  # A unchanged, B moved on, C new
    assert (data.session_id, data.epoch) == (7, 1)
    assert list(data.to_send) == [C, B]  # new ones first, then the altered (Kafka's order)
    assert list(data.session_partitions) == [A, B, C]
    assert h.handle_response(E.NONE, 7, {B})
    data = h.build({C: pd(5)})
    assert (list(data.to_send), data.to_forget, data.epoch) == ([], [A, B], 2)


def test_a_changed_leader_epoch_alone_makes_a_partition_go_out_again() -> None:
    h = established()
    assert list(h.build({A: pd(10, epoch=4), B: pd(20)}).to_send) == [A]


def test_an_answer_that_omits_a_partition_of_a_full_request_is_not_used() -> None:
    h = FetchSessionHandler()
    h.build({A: pd(10), B: pd(20)})
    assert not h.handle_response(E.NONE, 7, {A})
    assert (h.session_id, h.epoch) == (0, 0)


def test_an_incremental_answer_with_a_partition_outside_the_session_closes_it() -> None:
    h = established()
    h.build({A: pd(10), B: pd(20)})
    assert not h.handle_response(E.NONE, 7, {C})
    assert (h.session_id, h.epoch) == (7, 0)  # the next request closes session 7 and starts again


def test_session_errors_start_again_full() -> None:
    h = established()
    h.build({A: pd(11), B: pd(20)})
    assert not h.handle_response(E.FETCH_SESSION_ID_NOT_FOUND, 0, set())
    assert (h.session_id, h.epoch) == (0, 0)
    h = established()
    h.build({A: pd(11), B: pd(20)})
    assert not h.handle_response(E.INVALID_FETCH_SESSION_EPOCH, 0, set())
    data = h.build({A: pd(11), B: pd(20)})
    assert (data.session_id, data.epoch, list(data.to_send)) == (7, 0, [A, B])


def test_a_sessionless_answer_keeps_every_request_full() -> None:
    h = FetchSessionHandler()
    h.build({A: pd(10)})
    assert h.handle_response(E.NONE, 0, {A})
    data = h.build({A: pd(10)})
    assert (data.session_id, data.epoch, list(data.to_send)) == (0, 0, [A])


def test_a_broker_closing_the_session_and_a_failed_request_both_lead_to_a_full_request() -> None:
    h = established()
    h.build({A: pd(10), B: pd(20)})
    assert h.handle_response(E.NONE, 0, set())
    assert (h.session_id, h.epoch) == (0, 0)
    h = established()
    h.build({A: pd(12), B: pd(20)})
    h.handle_error()
    data = h.build({A: pd(12), B: pd(20)})
    assert (data.session_id, data.epoch, list(data.to_send)) == (7, 0, [A, B])


def test_the_epoch_after_int_max_is_one() -> None:
    h = established()
    h.epoch = 2**31 - 1
    h.build({A: pd(10), B: pd(20)})
    assert h.handle_response(E.NONE, 7, set())
    assert h.epoch == 1
