"""Request/response framing: size prefix, headers, and the ApiVersions "unsupported" reply.

Frame layout (both directions):

    int32 size           number of bytes that follow (header + body)
    header               request header v0/v1/v2 or response header v0/v1 (see api.py)
    body                 the request/response message at the request's api_version

Request header (RequestHeader.json):
    v0  int16 request_api_key, int16 request_api_version, int32 correlation_id
    v1  v0 + client_id: classic nullable string (int16 length, -1 = null)
    v2  v1 + tagged-field section (client_id stays a classic string, never compact)
Response header (ResponseHeader.json):
    v0  int32 correlation_id
    v1  v0 + tagged-field section

The first 8 bytes of every request header are the same in all versions, so api key, version and
correlation id can be read before the header version is known; that is how an ApiVersions
request of a version the broker doesn't know still gets its answer (KIP-511: error 35 in an
ApiVersions v0 body with response header v0, listing only the ApiVersions range).

Functions here take and return bytes; they do no I/O. The frame given to the parsers is the
bytes AFTER the int32 size (the network layer splits frames).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafkasim.protocol import errors
from kafkasim.protocol.api import (
    API_BY_KEY,
    API_VERSIONS,
    api_info,
    request_header_version,
    response_header_version,
)
from kafkasim.protocol.errors import ProtocolError, UnsupportedVersionError
from kafkasim.protocol.messages.api_versions import ApiVersionsResponse
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.primitives import Message

_S_PEEK = struct.Struct(">hhi")
_S_SIZE = struct.Struct(">i")


class RequestIds(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int


class UnknownApiError(ProtocolError):
    """A request with an api key this codec doesn't know. Kafka closes the connection."""

    def __init__(self, ids: RequestIds) -> None:
        super().__init__(f"unknown api key {ids.api_key} (version {ids.api_version}, "
                         f"correlation id {ids.correlation_id})")
        self.ids = ids


def peek_request_ids(frame: Any) -> RequestIds:
    """api_key, api_version, correlation_id: the fixed 8 bytes every request header starts with."""
    if len(frame) < 8:
        raise ProtocolError(f"request frame of {len(frame)} bytes is shorter than a request header")
    return RequestIds(*_S_PEEK.unpack_from(frame, 0))


def parse_request_frame(frame: Any) -> tuple[RequestHeader, memoryview]:
    """Split a request frame (bytes after the size) into its header and the body bytes.

    The header is parsed for any version of a known API (so a too-new ApiVersions request can be
    answered); the body is a zero-copy memoryview of `frame`. Raises UnknownApiError for an
    unknown api key and ProtocolError for a malformed header."""
    mv = frame if type(frame) is memoryview else memoryview(frame)
    ids = peek_request_ids(mv)
    if ids.api_key not in API_BY_KEY:
        raise UnknownApiError(ids)
    if ids.api_version < 0:
        raise ProtocolError(f"negative api version {ids.api_version} for api key {ids.api_key}")
    hv = request_header_version(ids.api_key, ids.api_version)
    header, end = RequestHeader.read(mv, 0, hv)
    return header, mv[end:]


def decode_request(frame: Any) -> tuple[RequestHeader, Message]:
    """Parse header and body of a request frame. An API version outside the codec's range raises
    UnsupportedVersionError (answer ApiVersions with `api_versions_unsupported_response`)."""
    header, body = parse_request_frame(frame)
    info = api_info(header.request_api_key)
    if not info.is_valid(header.request_api_version):
        raise UnsupportedVersionError(
            f"{info.name} v{header.request_api_version} is not supported "
            f"(valid {info.min_version}-{info.max_version})"
        )
    return header, info.request.decode(body, header.request_api_version)


def _framed(parts: list[Any]) -> bytes:
    size = 0
    for p in parts:
        size += len(p) if type(p) is not memoryview else p.nbytes
    parts[0] = _S_SIZE.pack(size) + parts[0] if parts else _S_SIZE.pack(0)
    return b"".join(parts)


def encode_request(header: RequestHeader, body: Message) -> bytes:
    """Size-prefixed request: header at the version Kafka's rules pick, body at its api_version."""
    key, version = header.request_api_key, header.request_api_version
    if body.API_KEY != key or body.KIND != "request":
        raise ProtocolError(f"{type(body).__name__} is not a request of api key {key}")
    parts: list[Any] = []
    header.write(parts.append, request_header_version(key, version))
    body.write(parts.append, version)
    return _framed(parts)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Message) -> bytes:
    """Size-prefixed response: response header (v0/v1 by Kafka's rules) + body at api_version."""
    if body.API_KEY != api_key or body.KIND != "response":
        raise ProtocolError(f"{type(body).__name__} is not a response of api key {api_key}")
    parts: list[Any] = []
    ResponseHeader(correlation_id=correlation_id).write(parts.append, response_header_version(api_key, api_version))
    body.write(parts.append, api_version)
    return _framed(parts)


def api_versions_unsupported_response(
    correlation_id: int, min_version: int | None = None, max_version: int | None = None
) -> bytes:
    """Kafka's reply to an ApiVersions request of an unsupported version (size-prefixed):
    response header v0 + ApiVersionsResponse v0 {error_code=35, api_keys=[{18, min, max}]}.

    min/max default to the codec's ApiVersions range; pass the broker's advertised range."""
    info = API_BY_KEY[API_VERSIONS]
    lo = info.min_version if min_version is None else min_version
    hi = info.max_version if max_version is None else max_version
    body = ApiVersionsResponse(
        error_code=errors.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS, min_version=lo, max_version=hi)],
    )
    return encode_response(API_VERSIONS, 0, correlation_id, body)
