"""The broker's answers to bad and edge-case input, over the simulated network: Kafka's error
codes where Kafka answers, a closed connection where Kafka closes it — and everyone else keeps
being served."""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kafkasim.broker.config import BrokerConfig
from kafkasim.broker.server import KafkaServer
from kafkasim.protocol import errors as E
from kafkasim.protocol.framing import encode_request
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkasim.protocol.messages.headers import RequestHeader
from kafkasim.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kafkasim.runtime.api import ConnectionClosed, NodeRuntime
from kafkasim.runtime.sim.world import SimWorld

pytestmark = pytest.mark.sim


def _with_broker(body: Callable[[NodeRuntime], Awaitable[Any]], **cfg: Any) -> Any:
    world = SimWorld(5)
    b = world.add_node("broker-0")
    server = KafkaServer(b.runtime, BrokerConfig(host="broker-0", port=9092, log_dir="logs", **cfg))
    b.runtime.spawn(server.startup())
    c = world.add_node("client")
    out: dict[str, Any] = {}

    async def main() -> None:
        await c.runtime.sleep(100)
        out["result"] = await body(c.runtime)

    task = c.runtime.spawn(main())
    world.run(30_000)
    assert task.done(), "client did not finish"
    assert world.failures == [], world.failures
    return out["result"]


def _req(api_key: int, version: int, body: Any, corr: int = 1) -> bytes:
    return encode_request(RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=corr,
                                        client_id="t"), body)


def test_api_versions_of_unknown_version_gets_error_35_in_v0() -> None:
    async def body(rt: NodeRuntime) -> Any:
        s = await rt.net.connect("broker-0", 9092, 1000)
        # Version 5 does not exist yet (the codec cannot write it): a v4 body labelled v5.
        raw = bytearray(_req(18, 4, ApiVersionsRequest(client_software_name="x", client_software_version="1")))
        struct.pack_into(">h", raw, 6, 5)
        await s.write(bytes(raw))
        frame = await s.read_frame(1 << 20)
        return frame

    frame = _with_broker(body)
    (corr,) = struct.unpack_from(">i", frame, 0)
    resp = ApiVersionsResponse.decode(frame[4:], 0)
    assert corr == 1 and resp.error_code == E.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]


def test_api_versions_v3_lists_what_is_implemented() -> None:
    async def body(rt: NodeRuntime) -> Any:
        s = await rt.net.connect("broker-0", 9092, 1000)
        await s.write(_req(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1")))
        return await s.read_frame(1 << 20)

    frame = _with_broker(body)
    resp = ApiVersionsResponse.decode(frame[4:], 3)
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert resp.error_code == 0
    assert keys[0] == (0, 11) and keys[1] == (0, 17) and keys[3] == (0, 12) and keys[18] == (0, 4)
    assert all(lo <= hi for lo, hi in keys.values())
    assert resp.finalized_features_epoch == 0   # ZooKeeper mode: no finalized features


def test_api_versions_v3_with_an_invalid_software_name_is_invalid_request() -> None:
    async def body(rt: NodeRuntime) -> Any:
        s = await rt.net.connect("broker-0", 9092, 1000)
        await s.write(_req(18, 3, ApiVersionsRequest(client_software_name="bad name!", client_software_version="1")))
        return await s.read_frame(1 << 20)

    frame = _with_broker(body)
    resp = ApiVersionsResponse.decode(frame[4:], 3)
    assert resp.error_code == E.INVALID_REQUEST and resp.api_keys == []


def test_metadata_authorized_operations_when_asked() -> None:
    """No authorizer: every operation is allowed — reported from v8 when asked (the cluster's
    only up to v10), omitted otherwise, as realkafka answers."""
    async def body(rt: NodeRuntime) -> Any:
        s = await rt.net.connect("broker-0", 9092, 1000)
        T = MetadataRequest.MetadataRequestTopic
        out = []
        for corr, (version, ask) in enumerate([(8, True), (10, False), (11, True)], start=1):
            req = MetadataRequest(topics=[T(name="none-such")], allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=ask and version <= 10,
                                  include_topic_authorized_operations=ask)
            await s.write(_req(3, version, req, corr=corr))
            frame = await s.read_frame(1 << 20)
            resp = MetadataResponse.decode(frame[4 if version < 9 else 5:], version)
            out.append((resp.cluster_authorized_operations, resp.topics[0].topic_authorized_operations))
        return out

    assert _with_broker(body) == [(8096, 3576), (-2**31, -2**31), (-2**31, 3576)]


def test_malformed_and_oversized_requests_close_only_that_connection() -> None:
    async def body(rt: NodeRuntime) -> Any:
        good = await rt.net.connect("broker-0", 9092, 1000)
        results = []
        for junk in (b"\x00\x00\x00\x03abc",                       # shorter than a header
                     struct.pack(">ihhi", 8, 999, 0, 7),          # unknown api key
                     struct.pack(">i", 200_000_000),              # above socket.request.max.bytes
                     _req(3, 12, MetadataRequest(topics=None))[:-3]):  # truncated body (size fixed below)
            s = await rt.net.connect("broker-0", 9092, 1000)
            if junk[4:6] == b"\x00\x03":
                junk = struct.pack(">i", len(junk) - 4) + junk[4:]
            await s.write(junk)
            try:
                await s.read_frame(1 << 20)
                results.append("answered")
            except ConnectionClosed:
                results.append("closed")
        await good.write(_req(3, 1, MetadataRequest(topics=None), corr=9))
        frame = await good.read_frame(1 << 20)
        return results, MetadataResponse.decode(frame[4:], 1)

    results, meta = _with_broker(body)
    assert results == ["closed"] * 4
    assert [b.node_id for b in meta.brokers] == [0] and meta.controller_id == 0


def test_metadata_auto_creates_and_rejects_illegal_names() -> None:
    async def body(rt: NodeRuntime) -> Any:
        s = await rt.net.connect("broker-0", 9092, 1000)
        T = MetadataRequest.MetadataRequestTopic
        answers = []
        for corr in range(1, 20):
            await s.write(_req(3, 10, MetadataRequest(topics=[T(name="auto"), T(name="bad/name")],
                                                     allow_auto_topic_creation=True), corr=corr))
            answers.append(MetadataResponse.decode((await s.read_frame(1 << 20))[5:], 10))
            if answers[-1].topics[0].error_code == E.NONE:
                break  # the controller has given the new topic its leaders
            await rt.sleep(20)
        return answers[0], answers[-1]

    first, second = _with_broker(body, num_partitions=2)
    assert [(t.name, t.error_code) for t in first.topics] == [("auto", E.LEADER_NOT_AVAILABLE),
                                                              ("bad/name", E.INVALID_TOPIC_EXCEPTION)]
    auto = second.topics[0]
    assert auto.error_code == 0 and len(auto.partitions) == 2 and auto.partitions[0].leader_id == 0
    assert auto.topic_id != bytes(16)


def test_idle_connection_is_closed_after_connections_max_idle_ms() -> None:
    async def body(rt: NodeRuntime) -> Any:
        s = await rt.net.connect("broker-0", 9092, 1000)
        await s.write(_req(3, 1, MetadataRequest(topics=None)))
        await s.read_frame(1 << 20)
        t0 = rt.monotonic_ms()
        try:
            await s.read_frame(1 << 20)
        except ConnectionClosed:
            return rt.monotonic_ms() - t0
        return None

    waited = _with_broker(body, connections_max_idle_ms=2000)
    assert waited is not None and 1990 <= waited <= 2010


def test_fetch_response_with_file_records_is_byte_identical_to_plain_bytes() -> None:
    """write_response sends FileRecords regions with sendfile; the peer sees the same frame as
    the codec's encode of the same records as bytes."""
    from kafkasim.broker.socket_server import write_response
    from kafkasim.protocol.framing import encode_response
    from kafkasim.protocol.messages.fetch import FetchResponse
    from kafkasim.storage.file_records import FileRecords, FileRegion

    world = SimWorld(3)
    srv, cli = world.add_node("srv"), world.add_node("cli")
    fh = srv.runtime.fs.open("seg.log")
    fh.append(bytes(range(200)) * 50)
    PD = FetchResponse.FetchableTopicResponse.PartitionData

    def response(records: Any) -> FetchResponse:
        return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            FetchResponse.FetchableTopicResponse(topic="t", partitions=[
                PD(partition_index=0, high_watermark=9, last_stable_offset=9, log_start_offset=0,
                   aborted_transactions=None, preferred_read_replica=-1, records=records)])])

    regions = FileRecords([FileRegion(fh, 10, 300), FileRegion(fh, 5000, 2000)])
    plain = bytes(regions)
    out: dict[str, bytes] = {}

    async def handle(s: Any) -> None:
        for version in (11, 12):
            await write_response(s, 1, version, 7, response(regions))

    async def main() -> None:
        server = await srv.runtime.net.serve("srv", 0, handle)
        c = await cli.runtime.net.connect("srv", server.port, 1000)
        for version in (11, 12):
            out[f"v{version}"] = await c.read_frame(1 << 20)

    cli.runtime.spawn(main())
    world.run(5000)
    for version in (11, 12):
        assert out[f"v{version}"] == encode_response(1, version, 7, response(plain))[4:]
