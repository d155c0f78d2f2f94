"""What `herdless produce` and `herdless consume` share: librdkafka, as kcat uses it.

confluent_kafka is imported only when one of them runs.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from herdless.admin.client import CLIENT_ID
from herdless.cli.client import require_reachable
from herdless.cli.errors import fail
from herdless.cli.options import client_settings
from herdless.security.client_config import Refusals

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer

METADATA_TIMEOUT_S = 10.0
# How often to look at librdkafka's errors while waiting for metadata: it retries a
# refused login until the wait is over, and says why only through its error callback.
METADATA_ATTEMPT_S = 0.5
# librdkafka logs every failed attempt itself; the command says what failed, once.
_quiet = logging.getLogger("herdless.cli.rdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

# Every librdkafka client of the command reports here; one command, one verdict.
failures = Refusals()


def client_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """librdkafka settings for a client of these brokers, with the command's client
    settings (--command-config, -X) and then the command's own; fails at once if no
    broker answers."""
    require_reachable(bootstrap)
    return {
        "client.id": CLIENT_ID,
        **client_settings(),
        "bootstrap.servers": bootstrap,
        "error_cb": failures,
        "logger": _quiet,
        **settings,
    }


def fail_if_refused() -> None:
    """One line naming why the brokers refused the client, if they did (librdkafka's
    words name the broker)."""
    reason = failures.reason()
    if reason is not None:
        raise fail(reason)


def partition_count(client: Producer | Consumer, topic: str) -> int:
    """How many partitions the topic has; fails, naming it, when it does not exist."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            metadata = client.list_topics(topic, timeout=METADATA_ATTEMPT_S)
            break
        except KafkaException as exc:
            client.poll(0)  # serves the error callback
            fail_if_refused()
            if time.monotonic() >= deadline:
                raise fail(
                    f"cannot read metadata of topic {topic!r}: {exc.args[0].str()}"
                ) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise fail(f"topic {topic!r} does not exist")
    return len(found.partitions)
