"""RequestContext: who sent a request, and over what — Kafka's RequestContext.

Kafka hands every handler a RequestContext (header, principal, listener name, security
protocol, client address). kafkasim's handlers take `(header, request)`; rather than change
every handler's signature, the socket server passes a RequestContext *as* the header (it is a
RequestHeader with four more slots). A handler that needs the principal — the authorizer's
checks, delegation tokens, quotas — calls `context_of(header)`; a bare RequestHeader (built by a
unit test, or by the broker for itself) reads as an anonymous PLAINTEXT request, which is what
Kafka's PLAINTEXT listener gives every connection.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkasim.protocol.messages.headers import RequestHeader


@dataclass(frozen=True)
class KafkaPrincipal:
    """`User:alice`; Kafka's KafkaPrincipal (type and name; the type is `User` for every
    authenticator Kafka ships)."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @staticmethod
    def parse(text: str) -> KafkaPrincipal:
        """'User:alice' -> KafkaPrincipal('User', 'alice'); ValueError without a ':'."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"principal {text!r} is not TYPE:NAME")
        return KafkaPrincipal(kind, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
PLAINTEXT = "PLAINTEXT"
DEFAULT_LISTENER = "PLAINTEXT"


class RequestContext(RequestHeader):
    """A request's header plus its sender. Built by the socket server per request."""

    __slots__ = ("principal", "listener_name", "security_protocol", "client_address")

    principal: KafkaPrincipal
    listener_name: str
    security_protocol: str
    client_address: str

    @staticmethod
    def of(header: RequestHeader, principal: KafkaPrincipal = ANONYMOUS, listener_name: str = DEFAULT_LISTENER,
           security_protocol: str = PLAINTEXT, client_address: str = "") -> RequestContext:
        ctx = RequestContext(request_api_key=header.request_api_key,
                             request_api_version=header.request_api_version,
                             correlation_id=header.correlation_id, client_id=header.client_id,
                             _unknown_tagged_fields=header._unknown_tagged_fields)
        ctx.principal, ctx.listener_name = principal, listener_name
        ctx.security_protocol, ctx.client_address = security_protocol, client_address
        return ctx


def context_of(header: RequestHeader) -> RequestContext:
    """The header's context; a bare header reads as an anonymous PLAINTEXT request."""
    if isinstance(header, RequestContext):
        return header
    return RequestContext.of(header)
