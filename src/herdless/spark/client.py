"""Small, bounded conversations with the broker through librdkafka (confluent-kafka).

Everything here is an ordinary Kafka client call, so the data source works
against any Kafka-compatible broker. Every call has a deadline: a broker that
is down must turn into an error naming its address, never into a hang.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import TopicPartition
from herdless.spark.options import ClientOptions, ReadOptions

# librdkafka logs every failed connection attempt to stderr; the errors that
# matter reach the user as exceptions instead.
_quiet = logging.getLogger("herdless.spark.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

METADATA_GROUP = "herdless-spark-metadata"  # never joined: librdkafka wants a group.id


def quiet_consumer(
    connection: ClientOptions,
    group_id: str = METADATA_GROUP,
    defaults: dict[str, object] | None = None,
    **forced: object,
) -> Consumer:
    """A consumer with the user's kafka.* settings over `defaults`, under `forced`."""
    config = {**(defaults or {}), **connection.consumer_config(group_id), **forced}
    return Consumer({**config, "logger": _quiet})


def topic_partitions(
    consumer: Consumer, connection: ClientOptions, options: ReadOptions
) -> dict[str, int]:
    """Partition counts of the subscribed topics; an error for a missing topic or no broker."""
    try:
        metadata = consumer.list_topics(timeout=connection.connect_timeout_s)
    except KafkaException as exc:
        raise unreachable(connection, exc) from None
    available = {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if topic.error is None and not name.startswith("__")
    }
    if options.pattern is not None:
        regex = re.compile(options.pattern.lstrip("^"))
        return {name: n for name, n in available.items() if regex.fullmatch(name)}
    missing = [t for t in options.topics if t not in available]
    if missing:
        raise HerdlessSparkError(
            f"topic {', '.join(missing)} does not exist on the broker at {connection.bootstrap} "
            "(create it first, e.g. `herdless topics create "
            f"{missing[0]} --partitions 3`)"
        )
    return {t: available[t] for t in options.topics}


def _reason(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else exc
    return error.str() if hasattr(error, "str") else str(error)


def require_topic(connection: ClientOptions, topic: str) -> None:
    """Fail unless the topic exists (asking never creates it, whatever the broker's policy)."""
    consumer = quiet_consumer(connection)
    try:
        metadata = consumer.list_topics(timeout=connection.connect_timeout_s)
    except KafkaException as exc:
        raise unreachable(connection, exc) from None
    finally:
        consumer.close()
    if topic not in metadata.topics or metadata.topics[topic].error is not None:
        raise HerdlessSparkError(
            f"topic {topic} does not exist on the broker at {connection.bootstrap} "
            f"(create it first, e.g. `herdless topics create {topic} --partitions 3`)"
        )


def unreachable(connection: ClientOptions, exc: BaseException | None = None) -> HerdlessSparkError:
    detail = f" ({_reason(exc)})" if exc is not None else ""
    return HerdlessSparkError(
        f"no Kafka broker answered at {connection.bootstrap} within "
        f"{connection.connect_timeout_s:g}s{detail}; check kafka.bootstrap.servers "
        "(connectTimeoutMs sets the wait)"
    )


def watermarks(
    consumer: Consumer, connection: ClientOptions, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, tuple[int, int]]:
    """(log start, log end) of each partition, asked of the broker rather than cached."""
    result = {}
    for topic, partition in partitions:
        try:
            low, high = consumer.get_watermark_offsets(
                KafkaTopicPartition(topic, partition),
                timeout=connection.connect_timeout_s,
                cached=False,
            )
        except KafkaException as exc:
            raise HerdlessSparkError(
                f"could not read the offsets of {topic}-{partition} from the broker at "
                f"{connection.bootstrap}: {_reason(exc)}"
            ) from None
        result[(topic, partition)] = (low, high)
    return result


def committed_offsets(
    consumer: Consumer, connection: ClientOptions, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The group's committed offset of each partition that has one."""
    asked = [KafkaTopicPartition(t, p) for t, p in partitions]
    if not asked:
        return {}
    try:
        answered = consumer.committed(asked, timeout=connection.connect_timeout_s)
    except KafkaException as exc:
        raise HerdlessSparkError(
            f"could not fetch committed offsets from the broker at {connection.bootstrap}: "
            f"{_reason(exc)}"
        ) from None
    # librdkafka reports "no committed offset" as a negative sentinel.
    return {(tp.topic, tp.partition): tp.offset for tp in answered if tp.offset >= 0}
