"""KafkaApis.handle and a handler's exception (kill-failover-swarm seed 234,
scenarios/regressions/kill-failover-swarm-seed-234.toml): a LeaderAndIsr whose topic-config read
met the broker's expired ZooKeeper session is answered with the request's error response
(UNKNOWN_SERVER_ERROR, as Kafka's KafkaApis.handle → handleError does), not by killing the
connection's task. Every other exception still escapes: the sweep's task-error check sees it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkasim.broker.kafka_apis import KafkaApis
from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from kafkasim.runtime.api import SessionExpiredError

pytestmark = pytest.mark.unit

API_WITHOUT_ERROR_RESPONSE = A.CREATE_TOPICS  # per-topic errors only: request_faults cannot build one


class _Rt:
    def __init__(self) -> None:
        self.traces: list[tuple[str, dict[str, Any]]] = []

    def trace(self, ev: str, **fields: Any) -> None:
        self.traces.append((ev, fields))


def _apis(api_key: int, exc: Exception) -> tuple[KafkaApis, _Rt]:
    async def handler(header: RequestHeader, request: Any) -> Any:
        raise exc

    apis = KafkaApis.__new__(KafkaApis)   # only what handle() reads: no broker behind it
    rt = _Rt()
    apis.rt, apis.handlers, apis.request_authorizer, apis.quotas = rt, {api_key: handler}, None, None  # type: ignore[assignment]
    return apis, rt


def _header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=2, client_id="c")


def test_an_expired_zookeeper_session_answers_the_requests_error_response() -> None:
    apis, rt = _apis(A.LEADER_AND_ISR, SessionExpiredError("session 0x107 expired"))
    response = asyncio.run(apis.handle(_header(A.LEADER_AND_ISR, 7), LeaderAndIsrRequest()))
    assert isinstance(response, LeaderAndIsrResponse) and response.error_code == E.UNKNOWN_SERVER_ERROR
    assert rt.traces == [("request_failed", {"api_key": A.LEADER_AND_ISR, "correlation_id": 2,
                                             "error": "SessionExpiredError: session 0x107 expired"})]


def test_any_other_exception_still_escapes_the_handler() -> None:
    apis, rt = _apis(A.LEADER_AND_ISR, RuntimeError("a bug"))
    with pytest.raises(RuntimeError, match="a bug"):
        asyncio.run(apis.handle(_header(A.LEADER_AND_ISR, 7), LeaderAndIsrRequest()))
    assert rt.traces == []


def test_an_api_without_an_error_response_lets_the_expired_session_escape() -> None:
    apis, _ = _apis(API_WITHOUT_ERROR_RESPONSE, SessionExpiredError("session 0x107 expired"))
    with pytest.raises(SessionExpiredError):
        asyncio.run(apis.handle(_header(API_WITHOUT_ERROR_RESPONSE, 7), object()))
