"""Which APIs a broker serves, asked with ApiVersions v0 on a socket of its own.

The planning process needs one fact before it joins a group: whether the
broker serves ConsumerGroupHeartbeat (group_protocol.py). librdkafka knows but
does not tell, and the Kafka message classes executors use (wire.py) cost the
planning process a fifth of a second to import; version 0 of ApiVersions is a
dozen bytes each way, so it is written out here.

Kafka answers ApiVersions before authentication, so this works on SASL
listeners as well as plaintext ones; TLS listeners are not asked.
"""

from __future__ import annotations

import socket
import struct

from herdless.protocol.api_keys import ApiKey

_CORRELATION_ID = 1
_REQUEST_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id size
_SIZE = struct.Struct(">i")
_ANSWER_HEAD = struct.Struct(">ihi")  # correlation id, error code, number of API keys
_API_KEY = struct.Struct(">hhh")  # api key, min version, max version


def host_port(address: str) -> tuple[str, int]:
    """One entry of bootstrap.servers: host:port, [v6-address]:port."""
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


def served_api_keys(bootstrap: str, client_id: str, timeout_s: float) -> frozenset[int] | None:
    """The API keys the first bootstrap server that answers serves; None if none answers."""
    request = (
        _REQUEST_HEADER.pack(ApiKey.API_VERSIONS, 0, _CORRELATION_ID, len(client_id.encode()))
        + client_id.encode()
    )
    for address in (a for a in bootstrap.split(",") if a.strip()):
        try:
            with socket.create_connection(host_port(address), timeout=timeout_s) as connection:
                connection.sendall(_SIZE.pack(len(request)) + request)
                answer = _receive(connection, _SIZE.unpack(_receive(connection, _SIZE.size))[0])
        except (OSError, ValueError, struct.error):
            continue
        keys = _api_keys(answer)
        if keys is not None:
            return keys
    return None


def _api_keys(answer: bytes) -> frozenset[int] | None:
    """The keys in an ApiVersions v0 answer; None for an error or a garbled answer."""
    try:
        correlation_id, error_code, count = _ANSWER_HEAD.unpack_from(answer, 0)
        if correlation_id != _CORRELATION_ID or error_code != 0 or count < 0:
            return None
        return frozenset(
            _API_KEY.unpack_from(answer, _ANSWER_HEAD.size + i * _API_KEY.size)[0]
            for i in range(count)
        )
    except struct.error:
        return None


def _receive(connection: socket.socket, size: int) -> bytes:
    if not 0 <= size <= 1 << 20:
        raise ValueError(f"an ApiVersions answer of {size} bytes")
    data = bytearray()
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("connection closed by the broker")
        data += chunk
    return bytes(data)
