"""What an API handler module needs of KafkaApis: the handler type and a registry to add its
handlers to. It sits below both, so the group APIs (a lower layer than KafkaApis) can register
without importing KafkaApis."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.primitives import Message
from kafkasim.runtime.api import ConnectionClosed

Handler = Callable[[RequestHeader, Any], Awaitable[Message | None]]
# Creates a topic: (name, partitions, replication factor, assignment, configs[, validate_only])
# -> (partitions, replication factor); TopicAdmin.create_topic.
CreateTopic = Callable[..., Awaitable[tuple[int, int]]]


class CloseConnection(ConnectionClosed):
    """Raised by a handler whose request Kafka answers by closing the connection
    (requestChannel.closeConnection): the socket server drops it as it drops a peer's EOF."""


class ApiRegistry(Protocol):
    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Advertise [min_version, max_version] for api_key and route its requests to handler."""
