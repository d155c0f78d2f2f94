"""What `herdless produce` and `herdless consume` share: librdkafka, as kcat uses it.

confluent_kafka is imported only when one of them runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herdless.cli.client import CLIENT_ID, require_reachable
from herdless.cli.errors import fail

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer

METADATA_TIMEOUT_S = 10.0


def client_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """librdkafka settings for a client of these brokers; fails at once if none answers."""
    require_reachable(bootstrap)
    return {"bootstrap.servers": bootstrap, "client.id": CLIENT_ID, **settings}


def partition_count(client: Producer | Consumer, topic: str) -> int:
    """How many partitions the topic has; fails, naming it, when it does not exist."""
    from confluent_kafka import KafkaException

    try:
        metadata = client.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise fail(f"cannot read metadata of topic {topic!r}: {exc.args[0].str()}") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise fail(f"topic {topic!r} does not exist")
    return len(found.partitions)
