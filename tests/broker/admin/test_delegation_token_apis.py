"""The delegation token APIs on the broker's PLAINTEXT listener answer as Kafka 3.9.1 does there
(captured with `realkafka`): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64), no token."""

from __future__ import annotations

from typing import Any

import pytest

from kafkasim.protocol import api as A
from kafkasim.protocol.messages.create_delegation_token import CreateDelegationTokenRequest as C
from kafkasim.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest as D
from kafkasim.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest as X
from kafkasim.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest as R
from kafkasim.runtime.api import NodeRuntime
from kafkasim.runtime.sim.world import SimWorld
from tests.broker.test_idempotence import _connect, _run

pytestmark = pytest.mark.sim


def test_token_requests_are_not_allowed_on_plaintext() -> None:
    async def body(world: SimWorld, rt: NodeRuntime, servers: dict[str, Any]) -> Any:
        w = await _connect(rt)
        renewers = [C.CreatableRenewers(principal_type="User", principal_name="x")]
        creates = [await w.call(A.CREATE_DELEGATION_TOKEN, v, C(renewers=renewers, max_lifetime_ms=-1))
                   for v in range(4)]
        owned = await w.call(A.CREATE_DELEGATION_TOKEN, 3, C(owner_principal_type="Group", owner_principal_name="g",
                                                              renewers=[], max_lifetime_ms=-1))
        others = []
        for v in range(3):
            others.append(await w.call(A.RENEW_DELEGATION_TOKEN, v, R(hmac=b"abc", renew_period_ms=1000)))
            others.append(await w.call(A.EXPIRE_DELEGATION_TOKEN, v, X(hmac=b"abc", expiry_time_period_ms=-1)))
        for v in range(4):
            others.append(await w.call(A.DESCRIBE_DELEGATION_TOKEN, v, D(owners=None)))
        return creates, owned, others
    creates, owned, others = _run(body)
    for v, c in enumerate(creates):
        requester = ("User", "ANONYMOUS") if v >= 3 else ("", "")
        assert (c.error_code, c.principal_type, c.principal_name, c.token_requester_principal_type,
                c.token_requester_principal_name, c.issue_timestamp_ms, c.expiry_timestamp_ms, c.max_timestamp_ms,
                c.token_id, c.hmac) == (64, "User", "ANONYMOUS", *requester, -1, -1, -1, "", b"")
    assert (owned.error_code, owned.principal_type, owned.principal_name,
            owned.token_requester_principal_name) == (64, "Group", "g", "ANONYMOUS")
    for r in others:
        assert r.error_code == 64
        assert getattr(r, "expiry_timestamp_ms", -1) == -1 and getattr(r, "tokens", []) == []
