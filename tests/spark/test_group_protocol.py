"""Which group protocol a streaming query joins with (spark/group_protocol.py), without Spark."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import encode_response, response_class
from herdless.spark.api_versions import served_api_keys
from herdless.spark.group_protocol import CLASSIC, CONSUMER, group_protocol, settled_by_options
from herdless.spark.options import ClientOptions


def _connection(bootstrap: str, **client: str) -> ClientOptions:
    return ClientOptions(bootstrap, client, 5.0)


def test_herdless_serves_the_consumer_protocol_and_a_query_joins_with_it(broker) -> None:
    served = served_api_keys(broker.bootstrap, "test", 5.0)
    assert served is not None and {ApiKey.API_VERSIONS, ApiKey.CONSUMER_GROUP_HEARTBEAT} <= served
    assert group_protocol(_connection(broker.bootstrap), "fresh-group", "test") == CONSUMER


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        ({"group.protocol": "Classic"}, CLASSIC),
        ({"group.protocol": "consumer", "security.protocol": "SSL"}, CONSUMER),
        # Settings of classic members: the query meant the classic protocol.
        ({"session.timeout.ms": "6000"}, CLASSIC),
        ({"heartbeat.interval.ms": "1000"}, CLASSIC),
        # TLS listeners are not asked which APIs they serve.
        ({"security.protocol": "SASL_SSL"}, CLASSIC),
        ({"security.protocol": "SASL_PLAINTEXT"}, None),
        ({}, None),
    ],
)
def test_options_that_decide_the_protocol(client: dict[str, str], expected: str | None) -> None:
    assert settled_by_options(client) == expected


_CLASSIC_ONLY = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.METADATA,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.API_VERSIONS,
)


@pytest.fixture
def classic_only_broker() -> Iterator[str]:
    """A listener that answers ApiVersions as a broker without KIP-848 does (the answer
    encoded by herdless's own protocol code, less ConsumerGroupHeartbeat), then hangs up."""
    answer_class = response_class(ApiKey.API_VERSIONS)
    entry = answer_class.ApiVersion
    keys = [entry(api_key=k, min_version=0, max_version=4) for k in _CLASSIC_ONLY]
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        connection, _ = listener.accept()
        with connection:
            size = int.from_bytes(connection.recv(4), "big")
            request = connection.recv(size)
            correlation_id = int.from_bytes(request[4:8], "big")
            response = answer_class(error_code=0, api_keys=keys)
            for chunk in encode_response(response, 0, correlation_id):
                connection.sendall(chunk)

    server = threading.Thread(target=answer, daemon=True)
    server.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    server.join(5)
    listener.close()


def test_a_broker_without_consumer_group_heartbeat_gets_classic_members(
    classic_only_broker: str,
) -> None:
    assert group_protocol(_connection(classic_only_broker), "group", "test") == CLASSIC


def test_no_broker_answers_and_the_classic_protocol_is_kept() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    assert served_api_keys(address, "test", 1.0) is None
    assert group_protocol(_connection(address), "group", "test") == CLASSIC
