"""Delegation token APIs — CreateDelegationToken 0-3, RenewDelegationToken 0-2,
ExpireDelegationToken 0-2, DescribeDelegationToken 0-3 — answered as Kafka 3.9.1 answers them
on a PLAINTEXT listener (checked with `realkafka`): KafkaApis refuses every token request that
does not come over an authenticated SASL channel (allowTokenRequests) before it looks at
`delegation.token.secret.key`, so each answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64) with
no token. The broker serves PLAINTEXT only, so that is every answer here.

CreateDelegationToken still names the owner: the request's owner (v3+, when a name is given)
or the requester, and the requester (v3+), both `User:ANONYMOUS` on PLAINTEXT; the
timestamps are -1, the token id empty and the hmac empty.
"""

from __future__ import annotations

from typing import Any

from kafkasim.protocol import api as A
from kafkasim.protocol import errors as E
from kafkasim.protocol.messages.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from kafkasim.protocol.messages.describe_delegation_token import (
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from kafkasim.protocol.messages.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.renew_delegation_token import (
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from kafkasim.protocol.primitives import Message

VERSIONS: dict[int, tuple[int, int]] = {
    A.CREATE_DELEGATION_TOKEN: (0, 3),
    A.RENEW_DELEGATION_TOKEN: (0, 2),
    A.EXPIRE_DELEGATION_TOKEN: (0, 2),
    A.DESCRIBE_DELEGATION_TOKEN: (0, 3),
}
PRINCIPAL_TYPE = "User"
ANONYMOUS = "ANONYMOUS"     # KafkaPrincipal.ANONYMOUS, the principal of a PLAINTEXT connection
NOT_ALLOWED = E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


class DelegationTokenApis:
    def handlers(self) -> dict[int, Any]:
        return {A.CREATE_DELEGATION_TOKEN: self.create, A.RENEW_DELEGATION_TOKEN: self.renew,
                A.EXPIRE_DELEGATION_TOKEN: self.expire, A.DESCRIBE_DELEGATION_TOKEN: self.describe}

    async def create(self, header: RequestHeader, req: CreateDelegationTokenRequest) -> Message:
        owner_type, owner_name = PRINCIPAL_TYPE, ANONYMOUS
        requester: dict[str, Any] = {}
        if header.request_api_version >= 3:  # the requester is a v3 field
            requester = {"token_requester_principal_type": PRINCIPAL_TYPE,
                         "token_requester_principal_name": ANONYMOUS}
            if req.owner_principal_name:
                owner_type, owner_name = req.owner_principal_type or "", req.owner_principal_name
        return CreateDelegationTokenResponse(
            error_code=NOT_ALLOWED, principal_type=owner_type, principal_name=owner_name,
            issue_timestamp_ms=-1, expiry_timestamp_ms=-1, max_timestamp_ms=-1, token_id="", hmac=b"",
            throttle_time_ms=0, **requester)

    async def renew(self, header: RequestHeader, req: RenewDelegationTokenRequest) -> Message:
        return RenewDelegationTokenResponse(error_code=NOT_ALLOWED, expiry_timestamp_ms=-1, throttle_time_ms=0)

    async def expire(self, header: RequestHeader, req: ExpireDelegationTokenRequest) -> Message:
        return ExpireDelegationTokenResponse(error_code=NOT_ALLOWED, expiry_timestamp_ms=-1, throttle_time_ms=0)

    async def describe(self, header: RequestHeader, req: DescribeDelegationTokenRequest) -> Message:
        return DescribeDelegationTokenResponse(error_code=NOT_ALLOWED, tokens=[], throttle_time_ms=0)
