"""The one table of API keys against Kafka's schemas, as kafka-python's classes carry them."""

from __future__ import annotations

import pytest

from herdless.broker.handlers.apis import APIS
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import REQUESTS, RESPONSES


@pytest.mark.parametrize("key", list(ApiKey), ids=lambda key: key.kafka_name)
def test_each_key_is_its_messages_api_key(key: ApiKey) -> None:
    assert REQUESTS[key].name == f"{key.kafka_name}Request"
    assert RESPONSES[key].name == f"{key.kafka_name}Response"
    assert REQUESTS[key].API_KEY == RESPONSES[key].API_KEY == key


def test_the_broker_serves_every_key_in_the_table() -> None:
    assert set(APIS) == set(ApiKey)
    assert [api.name for api in APIS.values()][:4] == [
        "Produce",
        "Fetch",
        "ListOffsets",
        "Metadata",
    ]
