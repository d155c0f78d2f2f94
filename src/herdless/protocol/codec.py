"""Requests in, responses out, as kafka-python's classes generated from Kafka's schemas.

Server side we decode requests and encode responses. The APIs a busy broker answers
most (COMPILED_APIS) go through code written per version from the schemas
(schema_codec), compiled the first time a version is used; every other API through
kafka-python's own codec. Either way handlers see kafka-python's objects.

The schemas are Kafka 4's, which dropped the oldest versions from their ranges but
kept those versions' fields; kafka-python encodes and decodes any version from 0,
so the old versions herdless serves (Produce v0-v2, Fetch v0-v3, ListOffsets v0,
...) use the same classes, field for field as in Kafka 3.9's schemas.
"""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl
from kafka.protocol.api_message import ApiMessage

from herdless.protocol import (
    broker_messages,
    consumer_group_messages,
    delegation_token_messages,
    share_group_messages,
    share_messages,
    share_state_messages,
    telemetry_messages,
)
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.offset_commit import CommitPartition, CommitResponse, CommitTopic
from herdless.protocol.regions import Chunk
from herdless.protocol.schema_codec import StandIn, request_decoder, response_encoder
from herdless.protocol.validate import null_violation

_PREFIX = struct.Struct(">hhi")
FRAME_SIZE = struct.Struct(">i")


def _message_classes() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    modules = (
        kafka.protocol.admin,
        kafka.protocol.consumer,
        kafka.protocol.metadata,
        kafka.protocol.producer,
        kafka.protocol.sasl,
        consumer_group_messages,  # the APIs kafka-python has no classes for
        delegation_token_messages,
        share_group_messages,
        share_messages,
        share_state_messages,
        broker_messages,
        telemetry_messages,
    )
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, ApiMessage) and cls is not ApiMessage and cls._json is not None:
                table = requests if cls.is_request() else responses
                table[cls.API_KEY] = cls
    return requests, responses


REQUESTS, RESPONSES = _message_classes()

COMPILED_APIS = frozenset(
    {
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.METADATA,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.JOIN_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.SYNC_GROUP,
    }
)

F = TypeVar("F")


class _Compiled(dict[tuple[Any, int], F], Generic[F]):
    """Functions per (message, version), written and compiled on first use."""

    def __init__(self, build: Callable[[Any, int], F]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, key: tuple[Any, int]) -> F:
        function = self[key] = self._build(*key)
        return function


_OffsetCommitTopic = REQUESTS[ApiKey.OFFSET_COMMIT].OffsetCommitRequestTopic
# Structs of a (compiled) request decoded into plain named tuples in place of
# kafka-python's objects, by API; each maps the schema's field names to the tuple's. A handler that
# turns a request's entries into its own tuples at once gets them so from the frame,
# without kafka-python's objects on the way (8% of the broker's instructions on a
# 4-partition commit).
_REQUEST_STAND_INS: dict[int, dict[type, StandIn]] = {
    ApiKey.OFFSET_COMMIT: {
        _OffsetCommitTopic: StandIn(CommitTopic, {"name": "name", "partitions": "partitions"}),
        _OffsetCommitTopic.OffsetCommitRequestPartition: StandIn(
            CommitPartition,
            {
                "partition_index": "partition",
                "committed_offset": "offset",
                "committed_metadata": "metadata",
                "committed_leader_epoch": "leader_epoch",
                # Only v1 carries one; other versions take the default, -1 ("now").
                "commit_timestamp": "commit_timestamp",
            },
        ),
    },
}
# Named tuples a handler may answer with in place of kafka-python's message, for the
# (compiled) response they stand for; the encoder reads each field by name from whatever
# holds it. A kafka-python message takes several microseconds to build, a named tuple
# a fraction of one.
_STAND_INS: dict[type, type[ApiMessage]] = {CommitResponse: RESPONSES[ApiKey.OFFSET_COMMIT]}
_DECODERS: _Compiled[Callable[[bytes], tuple[Any, str | None]]] = _Compiled(
    lambda api_key, version: request_decoder(
        REQUESTS[api_key], version, _REQUEST_STAND_INS.get(api_key)
    )[0]
)
_ENCODERS: _Compiled[Callable[[Any, int], list[Chunk]]] = _Compiled(
    lambda message, version: response_encoder(message, version)[0]
)
_COMPILED_RESPONSES = frozenset(RESPONSES[key] for key in COMPILED_APIS)


class MalformedRequest(ValueError):
    """A frame that cannot be decoded as the request its header names."""


@dataclass(slots=True)
class RequestPrefix:
    """The first fields of every request header, readable before the rest decodes."""

    api_key: int
    api_version: int
    correlation_id: int


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    # The peer's address, which the group coordinator reports as client_host.
    client_host: str = ""
    # The first field that is null where the schema forbids it (validate.py).
    null_field: str | None = None
    # Who sent it, on which listener: a herdless.security.session.ClientSession, set by
    # the connection (the protocol layer does not look inside).
    session: Any = None


def read_prefix(frame: bytes | memoryview) -> RequestPrefix:
    if len(frame) < _PREFIX.size:
        raise MalformedRequest("frame shorter than a request header")
    return RequestPrefix(*_PREFIX.unpack_from(frame, 0))


def decode_request(
    frame: bytes | memoryview, prefix: RequestPrefix, client_host: str = ""
) -> Request:
    """Decode a whole request; the caller has checked the key and version are served."""
    api_key, version = prefix.api_key, prefix.api_version
    try:
        if api_key in COMPILED_APIS:
            body, null_field = _DECODERS[api_key, version](bytes(frame))
        else:
            body = REQUESTS[api_key].decode(frame, version=version, header=True)
            null_field = null_violation(body, version)
    except Exception as exc:  # the codecs raise assorted errors on bad input
        name = REQUESTS[api_key].name
        raise MalformedRequest(f"cannot decode {name} v{version}: {exc}") from exc
    # Positional: keywords cost a twentieth of decoding a commit.
    return Request(
        api_key,
        version,
        prefix.correlation_id,
        body.header.client_id,
        body,
        client_host,
        null_field,
    )


def response_class(api_key: int) -> type[ApiMessage]:
    return RESPONSES[api_key]


def encode_response(response: Any, version: int, correlation_id: int) -> list[Chunk]:
    """Frame a response, as chunks to write in order: bytes, and the file regions a Fetch
    response's records may be (regions.py). The header version follows the API's
    flexible versions."""
    message = type(response)
    message = _STAND_INS.get(message, message)
    if message in _COMPILED_RESPONSES:
        return _ENCODERS[message, version](response, correlation_id)
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    return [bytes(response.encode(header=True, framed=True))]


def error_response(
    api_key: int, version: int, correlation_id: int, error_code: int
) -> list[Chunk] | None:
    """A response carrying only a top-level error code, or None if this version has none
    (then the only answer Kafka gives to a bad request is a closed connection)."""
    cls = RESPONSES[api_key]
    field = cls._struct.fields.get("error_code")
    if field is None or not field.for_version_q(version):
        return None
    return encode_response(cls(error_code=error_code), version, correlation_id)
