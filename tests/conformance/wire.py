"""A blocking Kafka wire connection for the conformance suite: one socket, one request at a time,
encoded and decoded with kafkasim's generated codec (kafkasim.protocol), so both brokers' answers
are read by the same code. A closed connection is a result too (Kafka closes on some errors)."""

from __future__ import annotations

import socket
from typing import Any, Optional

from kafkasim.protocol import api as A
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.primitives import Message

TIMEOUT_S = 30.0


class Closed(Exception):
    """The broker closed the connection instead of answering."""


class Connection:
    def __init__(self, host: str, port: int, client_id: str = "kafkasim-conformance") -> None:
        self.addr = (host, port)
        self.client_id = client_id
        self.sock: Optional[socket.socket] = None
        self.correlation_id = 0
        self.retry_budget_s = 30.0  # see model._send

    def _socket(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=TIMEOUT_S)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, body: Message, version: int, expect_response: bool = True) -> Any:
        """Send body at version; the decoded response, or Closed when the broker hung up."""
        assert body.API_KEY is not None
        self.correlation_id += 1
        header = RequestHeader(request_api_key=body.API_KEY, request_api_version=version,
                               correlation_id=self.correlation_id, client_id=self.client_id)
        sock = self._socket()
        try:
            sock.sendall(encode_request(header, body))
            if not expect_response:
                return None
            size = int.from_bytes(self._read(sock, 4), "big")
            frame = memoryview(self._read(sock, size))
        except (ConnectionError, socket.timeout) as exc:
            self.close()
            raise Closed(str(exc)) from exc
        hv = A.response_header_version(body.API_KEY, version)
        rh, end = ResponseHeader.read(frame, 0, hv)
        if rh.correlation_id != self.correlation_id:
            raise AssertionError(f"correlation id {rh.correlation_id}, expected {self.correlation_id}")
        return A.api_info(body.API_KEY).response.decode(frame[end:], version)

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)
