"""Hand-computed byte vectors, header/framing rules and version rules of the protocol codec.

The vectors are written out byte by byte from the protocol guide, independently of the generator,
so a generator bug that both encodes and decodes wrongly still fails here."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.protocol import api, errors, framing
from kafkasim.protocol.errors import ProtocolError, UnsupportedVersionError
from kafkasim.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafkasim.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from kafkasim.protocol.messages.fetch import FetchRequest, FetchResponse
from kafkasim.protocol.messages.headers import RequestHeader, ResponseHeader
from kafkasim.protocol.messages.join_group import JoinGroupRequest
from kafkasim.protocol.messages.metadata import MetadataRequest
from kafkasim.protocol.messages.produce import ProduceRequest, ProduceResponse
from kafkasim.protocol.primitives import (
    read_uvarint,
    read_zigzag_varint,
    read_zigzag_varlong,
    uvarint,
    zigzag_varint,
    zigzag_varlong,
)

pytestmark = pytest.mark.property


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


# --------------------------------------------------------------------------- primitives


@pytest.mark.parametrize("n, enc", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**32 - 1, "ffffffff0f")])
def test_unsigned_varint_vectors(n: int, enc: str) -> None:
    assert uvarint(n) == h(enc)
    assert read_uvarint(memoryview(h(enc)), 0) == (n, len(h(enc)))


@pytest.mark.parametrize("n, enc", [(0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (64, "8001"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")])
def test_zigzag_varint_vectors(n: int, enc: str) -> None:
    assert zigzag_varint(n) == h(enc)
    assert read_zigzag_varint(memoryview(h(enc)), 0) == (n, len(h(enc)))


def test_zigzag_varlong_extremes() -> None:
    for n in (0, -1, 2**63 - 1, -(2**63)):
        enc = zigzag_varlong(n)
        assert read_zigzag_varlong(memoryview(enc), 0) == (n, len(enc))
    assert zigzag_varlong(-(2**63)) == h("ffffffffffffffffff01")


def test_overlong_varint_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        read_uvarint(memoryview(h("ffffffffff01")), 0)


# --------------------------------------------------------------------------- message vectors


def test_metadata_request_v0_vector() -> None:
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="foo")])
    # int32 array count 1; int16 string length 3; "foo"
    assert body.encode(0) == h("00000001 0003 666f6f")
    # null topic list ("all topics") exists only from v1
    assert MetadataRequest(topics=None).encode(1) == h("ffffffff")
    with pytest.raises(ProtocolError):
        MetadataRequest(topics=None).encode(0)


def test_api_versions_request_v3_header_and_body_vector() -> None:
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="abc")
    body = ApiVersionsRequest(client_software_name="kafkasim", client_software_version="1.0")
    frame = framing.encode_request(header, body)
    expected = h(
        "00 12"  # api key 18
        "00 03"  # version 3
        "00 00 00 01"  # correlation id
        "00 03 616263"  # client id: CLASSIC int16-length string even in header v2
        "00"  # header tagged fields: none
        "09 6b61666b6173696d"  # compact string "kafkasim" (length 8 + 1)
        "04 312e30"  # compact string "1.0"
        "00"  # body tagged fields: none
    )
    assert frame == len(expected).to_bytes(4, "big") + expected
    hdr, req = framing.decode_request(frame[4:])
    assert hdr == header and req == body


def test_tagged_fields_vector_and_unknown_tags_are_kept() -> None:
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
        throttle_time_ms=0,
        finalized_features_epoch=5,
    )
    body = h(
        "0000"  # error code
        "02 0012 0000 0004 00"  # compact array of 1: key 18, min 0, max 4, no tags
        "00000000"  # throttle time
        "01"  # one tagged field
        "01 08 0000000000000005"  # tag 1 (FinalizedFeaturesEpoch), size 8, int64 5
    )
    assert resp.encode(3) == body
    # Default-valued tagged fields are not written.
    assert ApiVersionsResponse().encode(3) == h("0000 01 00000000 00")
    # An unknown tag (7) survives decode/encode and is merged in tag order.
    with_unknown = body[:-11] + h("02 01 08 0000000000000005 07 02 abcd")
    decoded = ApiVersionsResponse.decode(with_unknown, 3)
    assert decoded.finalized_features_epoch == 5
    assert decoded._unknown_tagged_fields == [(7, h("abcd"))]
    assert decoded.encode(3) == with_unknown
    # Unknown tags also survive on nested structs.
    nested = h("0000 02 0012 0000 0004 01 2a 00 00000000 00")
    d = ApiVersionsResponse.decode(nested, 3)
    assert d.api_keys[0]._unknown_tagged_fields == [(42, b"")]
    assert d.encode(3) == nested


def test_fetch_response_v12_tagged_struct_vector() -> None:
    part = FetchResponse.PartitionData(
        partition_index=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=2), records=b"",
    )
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])])
    expected = h(
        "00000000 0000 00000000"  # throttle, error, session id
        "02 02 74"  # 1 topic, compact "t"
        "02 00000000 0000 000000000000000a 000000000000000a 0000000000000000"  # partition 0, err, hw, lso, log start
        "01"  # aborted transactions: empty compact array (v4+, nullable; [] by default)
        "ffffffff"  # preferred read replica -1
        "01"  # records: compact bytes of length 0
        "01 01 09 00000001 00000002 00"  # tags: CurrentLeader (tag 1) = {1, 2}, its own empty tags
        "00"  # topic tags
        "00"  # response tags
    )
    assert resp.encode(12) == expected
    assert FetchResponse.decode(expected, 12) == resp


def test_records_decode_zero_copy_and_null() -> None:
    records = bytes(range(256)) * 4
    req = ProduceRequest(
        acks=-1, timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=3, records=records),
            ProduceRequest.PartitionProduceData(index=4, records=None),
        ])],
    )
    buf = req.encode(7)
    d = ProduceRequest.decode(buf, 7)
    rec = d.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is buf and rec == records
    assert d.topic_data[0].partition_data[1].records is None
    assert buf.endswith(h("00000004 ffffffff"))  # partition 4, null records (int32 -1)


# --------------------------------------------------------------------------- version rules


def test_non_ignorable_absent_field_with_non_default_value_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError, match="TransactionalId.*version 2"):
        ProduceRequest(transactional_id="tx").encode(2)
    assert ProduceRequest(transactional_id=None).encode(2) == h("0000 00000000 00000000")
    # AllowAutoTopicCreation (v4+, default true, not ignorable)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest(topics=[], allow_auto_topic_creation=False).encode(3)


def test_ignorable_absent_field_is_dropped_silently() -> None:
    # JoinGroupRequest.RebalanceTimeoutMs: v1+, ignorable; Reason: v8+, ignorable
    r = JoinGroupRequest(group_id="g", session_timeout_ms=10, rebalance_timeout_ms=99, member_id="", protocol_type="consumer", reason="x")
    d = JoinGroupRequest.decode(r.encode(0), 0)
    assert d.rebalance_timeout_ms == -1 and d.reason is None and d.group_id == "g"


def test_unknown_version_and_null_in_non_nullable_field() -> None:
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(12)
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest.decode(b"", -1)
    with pytest.raises(ProtocolError, match="non-nullable"):
        ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)]).encode(7)
    with pytest.raises(ProtocolError):
        ProduceResponse(throttle_time_ms=2**31).encode(7)
    with pytest.raises(ProtocolError, match="uuid"):
        FetchRequest(topics=[FetchRequest.FetchTopic(topic_id=b"short")]).encode(13)


def test_non_nullable_null_on_the_wire_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="non-nullable"):
        MetadataRequest.decode(h("00000001 ffff"), 0)


# --------------------------------------------------------------------------- headers & framing


@pytest.mark.parametrize(
    "key, version, req_hv, resp_hv",
    [
        (api.PRODUCE, 8, 1, 0), (api.PRODUCE, 9, 2, 1), (api.FETCH, 11, 1, 0), (api.FETCH, 12, 2, 1),
        (api.METADATA, 0, 1, 0), (api.API_VERSIONS, 0, 1, 0), (api.API_VERSIONS, 3, 2, 0),
        (api.API_VERSIONS, 4, 2, 0), (api.API_VERSIONS, 99, 2, 0), (api.CONTROLLED_SHUTDOWN, 0, 0, 0),
        (api.CONTROLLED_SHUTDOWN, 1, 1, 0), (api.CONTROLLED_SHUTDOWN, 3, 2, 1), (api.SASL_HANDSHAKE, 1, 1, 0),
    ],
)
def test_header_versions(key: int, version: int, req_hv: int, resp_hv: int) -> None:
    assert api.request_header_version(key, version) == req_hv
    assert api.response_header_version(key, version) == resp_hv


def test_registry() -> None:
    p = api.API_BY_KEY[api.PRODUCE]
    assert (p.name, p.min_version, p.max_version, p.flexible_from) == ("Produce", 0, 11, 9)
    assert p.request is ProduceRequest and p.response is ProduceResponse
    assert api.API_BY_KEY[api.FETCH].max_version == 17
    assert api.API_BY_KEY[api.SASL_HANDSHAKE].flexible_from is None
    assert api.API_BY_KEY[api.LEADER_AND_ISR].listeners == ("zkBroker",)
    assert api.API_BY_NAME["ApiVersions"].key == api.API_VERSIONS == 18
    assert len(api.API_BY_KEY) == 88


def test_response_framing_vectors() -> None:
    flexible = framing.encode_response(api.PRODUCE, 9, 7, ProduceResponse())
    assert flexible == h("0000000b 00000007 00 01 00000000 00")  # header v1 has tags
    classic = framing.encode_response(api.PRODUCE, 8, 7, ProduceResponse())
    assert classic == h("0000000c 00000007 00000000 00000000")
    # ApiVersions v3: flexible body, but response header v0 (no tag byte after the correlation id)
    av = framing.encode_response(api.API_VERSIONS, 3, 7, ApiVersionsResponse())
    assert av == h("0000000c 00000007 0000 01 00000000 00")
    with pytest.raises(ProtocolError):
        framing.encode_response(api.FETCH, 4, 1, ProduceResponse())


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    frame = framing.encode_request(
        RequestHeader(request_api_key=7, request_api_version=0, correlation_id=3, client_id=None),
        ControlledShutdownRequest(broker_id=5),
    )
    assert frame == h("0000000c 0007 0000 00000003 00000005")
    hdr, body = framing.decode_request(frame[4:])
    assert hdr.client_id == "" and body.broker_id == 5  # header v0 has no client id: default ""


def test_api_versions_unsupported_version_reply() -> None:
    frame = h("0012 0063 0000002a 0003 616263 00 0102") # ApiVersions v99, corr 42, client "abc", tags, junk body
    hdr, body = framing.parse_request_frame(frame)
    assert (hdr.request_api_key, hdr.request_api_version, hdr.correlation_id, hdr.client_id) == (18, 99, 42, "abc")
    assert body == h("0102")
    with pytest.raises(UnsupportedVersionError):
        framing.decode_request(frame)
    reply = framing.api_versions_unsupported_response(hdr.correlation_id)
    # size 16 | corr 42 | error 35 | 1 entry: key 18, min 0, max 4   (v0 body, header v0)
    assert reply == h("00000010 0000002a 0023 00000001 0012 0000 0004")
    assert errors.UNSUPPORTED_VERSION == 35
    assert framing.api_versions_unsupported_response(1, 0, 3).endswith(h("0012 0000 0003"))


def test_unknown_api_key_and_short_frames() -> None:
    with pytest.raises(framing.UnknownApiError) as e:
        framing.parse_request_frame(h("7fff 0000 00000001 0000"))
    assert e.value.ids.correlation_id == 1
    for short in (b"", h("0012"), h("0012 0003 000000")):
        with pytest.raises(ProtocolError):
            framing.parse_request_frame(short)
    with pytest.raises(ProtocolError):  # header v2 with a client id longer than the frame
        framing.parse_request_frame(h("0012 0003 00000001 00ff 61"))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    key=st.sampled_from(sorted(api.API_BY_KEY)),
    version=st.integers(-2, 20),
    tail=st.binary(max_size=40),
)
def test_garbage_frames_raise_only_protocol_errors(key: int, version: int, tail: bytes) -> None:
    frame = key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + b"\x00\x00\x00\x01" + tail
    try:
        framing.decode_request(frame)
    except ProtocolError:
        pass


def test_error_codes() -> None:
    assert (errors.NONE, errors.OFFSET_OUT_OF_RANGE, errors.CORRUPT_MESSAGE, errors.UNKNOWN_TOPIC_OR_PARTITION) == (0, 1, 2, 3)
    assert errors.NOT_LEADER_OR_FOLLOWER == 6 and errors.UNKNOWN_SERVER_ERROR == -1
    assert errors.ERRORS[6].retriable and not errors.ERRORS[35].retriable
    assert errors.error_name(errors.FENCED_LEADER_EPOCH) == "FENCED_LEADER_EPOCH"
    assert errors.error_name(9999) == "UNKNOWN(9999)"
    assert set(range(-1, 111)) <= set(errors.ERRORS)
    assert issubclass(UnsupportedVersionError, ProtocolError)
    assert ResponseHeader(correlation_id=1).encode(0) == h("00000001")


def test_strings_longer_than_0x7fff_bytes_are_refused_both_ways() -> None:
    long_topic = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="x" * 0x8000)])
    with pytest.raises(ProtocolError, match="exceeds"):
        long_topic.encode(9)
    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="x" * 0x7FFF)]).encode(9)
    # compact string claiming 0x8000 bytes (uvarint 0x8001 = 81 80 02)
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(h("02 00000000000000000000000000000000 818002") + b"x" * 0x8000 + h("00 00 00 00 00"), 9)


def test_invalid_utf8_decodes_with_replacement_like_java() -> None:
    d = MetadataRequest.decode(h("00000001 0002 c328"), 0)
    assert d.topics[0].name == "\ufffd("
