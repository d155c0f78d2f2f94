"""Requests in, responses out, with kafka-python's classes generated from Kafka's schemas.

Server side we decode requests and encode responses; those classes carry every
version, flexible ones included, so herdless writes no per-field codec.

The schemas are Kafka 4's, which dropped the oldest versions from their ranges but
kept those versions' fields; kafka-python encodes and decodes any version from 0,
so the old versions herdless serves (Produce v0-v2, Fetch v0-v3, ListOffsets v0,
...) use the same classes, field for field as in Kafka 3.9's schemas.
"""

from __future__ import annotations

import inspect
import struct
from dataclasses import dataclass
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
from kafka.protocol.api_message import ApiMessage

from herdless.protocol import consumer_group_messages

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
        consumer_group_messages,  # the APIs kafka-python has no classes for
    )
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, ApiMessage) and cls is not ApiMessage and cls._json is not None:
                table = requests if cls.is_request() else responses
                table[cls.API_KEY] = cls
    return requests, responses


REQUESTS, RESPONSES = _message_classes()


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


def read_prefix(frame: bytes | memoryview) -> RequestPrefix:
    if len(frame) < _PREFIX.size:
        raise MalformedRequest("frame shorter than a request header")
    return RequestPrefix(*_PREFIX.unpack_from(frame, 0))


def decode_request(
    frame: bytes | memoryview, prefix: RequestPrefix, client_host: str = ""
) -> Request:
    """Decode a whole request; the caller has checked the key and version are served."""
    cls = REQUESTS[prefix.api_key]
    try:
        body = cls.decode(frame, version=prefix.api_version, header=True)
    except Exception as exc:  # the codec raises assorted errors on bad input
        raise MalformedRequest(f"cannot decode {cls.name} v{prefix.api_version}: {exc}") from exc
    return Request(
        api_key=prefix.api_key,
        api_version=prefix.api_version,
        correlation_id=prefix.correlation_id,
        client_id=body.header.client_id,
        body=body,
        client_host=client_host,
    )


def response_class(api_key: int) -> type[ApiMessage]:
    return RESPONSES[api_key]


def encode_response(response: ApiMessage, version: int, correlation_id: int) -> bytes:
    """Frame a response; its header version follows the API's flexible versions."""
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def error_response(
    api_key: int, version: int, correlation_id: int, error_code: int
) -> bytes | None:
    """A response carrying only a top-level error code, or None if this version has none
    (then the only answer Kafka gives to a bad request is a closed connection)."""
    cls = RESPONSES[api_key]
    field = cls._struct.fields.get("error_code")
    if field is None or not field.for_version_q(version):
        return None
    return encode_response(cls(error_code=error_code), version, correlation_id)
