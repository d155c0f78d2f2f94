"""Small, bounded conversations with the broker through librdkafka (confluent-kafka).

Everything here is an ordinary Kafka client call, so the data source works
against any Kafka-compatible broker. Every call has a deadline: a broker that
is down must turn into an error naming its address, never into a hang.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from herdless.security.client_config import Refusals
from herdless.spark.client_config import librdkafka_settings
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.offsets import TopicPartition
from herdless.spark.options import ClientOptions, Subscription

log = logging.getLogger(__name__)
# librdkafka logs every failed connection attempt to stderr; the errors that
# matter reach the user as exceptions instead.
_quiet = logging.getLogger("herdless.spark.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

METADATA_GROUP = "herdless-spark-metadata"  # never joined: librdkafka wants a group.id

# What the brokers at each bootstrap refused for good (a login, a certificate), as the
# error callbacks of this process's clients of them heard it.
_refusals: dict[str, Refusals] = {}


def _listen_for_refusals(connection: ClientOptions) -> Refusals:
    return _refusals.setdefault(connection.bootstrap, Refusals())


def query_client_id(connection: ClientOptions) -> str:
    """The client id of one query run's planning side: kafka.client.id, else one of its own.

    Spark tells a Python source neither the query's name nor its id, so a
    query run names itself; its progress reports the name (stream.py), which
    ties the query to its member in `herdless groups describe`.
    """
    return connection.client.get("client.id") or f"herdless-spark-{uuid.uuid4().hex[:8]}"


def quiet_consumer(
    connection: ClientOptions,
    group_id: str = METADATA_GROUP,
    defaults: dict[str, object] | None = None,
    **forced: object,
) -> Consumer:
    """A consumer with the user's kafka.* settings over `defaults`, under `forced`."""
    config = {**(defaults or {}), **connection.consumer_config(group_id), **forced}
    try:
        return Consumer({**config, "logger": _quiet, "error_cb": _listen_for_refusals(connection)})
    except KafkaException as exc:
        raise bad_setting(exc) from None


def quiet_producer(connection: ClientOptions, transactional_id: str | None = None) -> Producer:
    """The writer's producer (also made once at save() so that bad kafka.* options fail there);
    transactional when given a transactional id."""
    transactional = {} if transactional_id is None else {"transactional.id": transactional_id}
    try:
        return Producer(
            {
                **connection.producer_config(),
                **transactional,
                "logger": _quiet,
                "error_cb": _listen_for_refusals(connection),
            }
        )
    except KafkaException as exc:
        raise bad_setting(exc) from None


def quiet_admin(connection: ClientOptions) -> AdminClient:
    """An admin client with the user's kafka.* settings (those of consumers only are unused)."""
    try:
        return AdminClient(
            {
                **librdkafka_settings(connection.client),
                "bootstrap.servers": connection.bootstrap,
                "logger": _quiet,
                "error_cb": _listen_for_refusals(connection),
            }
        )
    except KafkaException as exc:
        raise bad_setting(exc) from None


def describe_group(admin: AdminClient, connection: ClientOptions, group_id: str) -> Any | None:
    """The group as its coordinator describes it (members, their partitions, protocol);
    None when the coordinator cannot be asked in time."""
    timeout = connection.connect_timeout_s
    try:
        future = admin.describe_consumer_groups([group_id], request_timeout=timeout)[group_id]
        return future.result(timeout)
    except (KafkaException, TimeoutError):
        return None


def bad_setting(exc: KafkaException) -> HerdlessSparkError:
    """librdkafka refused its configuration: the culprit is one of the kafka.* options."""
    return HerdlessSparkError(
        f"a kafka.* option is not a setting herdless's Kafka clients take: {kafka_reason(exc)} "
        "(kafka.* options are Java client settings that herdless translates, or librdkafka "
        "settings; see docs/spark.md)"
    )


def topic_partitions(
    consumer: Consumer, connection: ClientOptions, subscription: Subscription
) -> dict[str, int]:
    """Partition counts of the topics read; an error for a missing topic or no broker.

    For assign, every assigned partition must exist: reading a partition that
    is not there would wait for it forever.
    """
    try:
        metadata = consumer.list_topics(timeout=connection.connect_timeout_s)
    except KafkaException as exc:
        raise unreachable(connection, exc, consumer) from None
    available = {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if topic.error is None and not name.startswith("__")
    }
    if subscription.pattern is not None:
        return {n: count for n, count in available.items() if subscription.covers((n, 0))}
    named = subscription.topics or tuple(sorted({t for t, _ in subscription.assigned}))
    missing = [t for t in named if t not in available]
    if missing:
        raise HerdlessSparkError(
            f"topic {', '.join(missing)} does not exist on the broker at {connection.bootstrap} "
            "(create it first, e.g. `herdless topics create "
            f"{missing[0]} --partitions 3`)"
        )
    absent = [f"{t}-{p}" for t, p in subscription.assigned if p >= available[t]]
    if absent:
        raise HerdlessSparkError(
            f"assign names partition {', '.join(absent)}, which does not exist on the broker "
            f"at {connection.bootstrap}"
        )
    return {t: available[t] for t in named}


def readable_partitions(
    consumer: Consumer, connection: ClientOptions, subscription: Subscription
) -> list[TopicPartition]:
    """Every partition a reader reads now: the assigned ones, or all of its topics'."""
    counts = topic_partitions(consumer, connection, subscription)
    if subscription.assigns:
        return list(subscription.assigned)
    return [(t, p) for t, n in sorted(counts.items()) for p in range(n)]


def kafka_reason(exc: BaseException) -> str:
    """What librdkafka says went wrong, without the KafkaError wrapping."""
    error = exc.args[0] if exc.args else exc
    return error.str() if hasattr(error, "str") else str(error)


def require_topic(connection: ClientOptions, topic: str) -> None:
    """Fail unless the topic exists (asking never creates it, whatever the broker's policy)."""
    consumer = quiet_consumer(connection)
    try:
        metadata = consumer.list_topics(timeout=connection.connect_timeout_s)
    except KafkaException as exc:
        raise unreachable(connection, exc, consumer) from None
    finally:
        consumer.close()
    if topic not in metadata.topics or metadata.topics[topic].error is not None:
        raise HerdlessSparkError(
            f"topic {topic} does not exist on the broker at {connection.bootstrap} "
            f"(create it first, e.g. `herdless topics create {topic} --partitions 3`)"
        )


def unreachable(
    connection: ClientOptions,
    exc: BaseException | None = None,
    client: Consumer | Producer | AdminClient | None = None,
) -> HerdlessSparkError:
    """Why no broker answered: a refused login or certificate if `client` (not a group
    member: its callbacks are served here) heard one, else the wait that ran out."""
    if client is not None:
        client.poll(0)
    refusals = _refusals.pop(connection.bootstrap, None)
    refusal = refusals.reason() if refusals is not None else None
    if refusal is not None:
        return HerdlessSparkError(
            f"the broker at {connection.bootstrap} refused this client: {refusal}; check"
            " kafka.sasl.jaas.config (or kafka.sasl.username and kafka.sasl.password) and"
            " the kafka.ssl.* options"
        )
    detail = f" ({kafka_reason(exc)})" if exc is not None else ""
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
                f"{connection.bootstrap}: {kafka_reason(exc)}"
            ) from None
        result[(topic, partition)] = (low, high)
    return result


def committed_offsets(
    consumer: Consumer, connection: ClientOptions, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The group's committed offset of each partition that has one."""
    answered = _ask(
        consumer.committed,
        [KafkaTopicPartition(t, p) for t, p in partitions],
        connection,
        "fetch committed offsets from",
    )
    # librdkafka reports "no committed offset" as a negative sentinel.
    return {tp: offset for tp, offset in answered.items() if offset >= 0}


def offsets_for_times(
    consumer: Consumer, connection: ClientOptions, timestamps: dict[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """The first offset of each partition whose record is stamped at or after its timestamp.

    None where no record is that recent (Kafka's ListOffsets by timestamp).
    """
    answered = _ask(
        consumer.offsets_for_times,
        [KafkaTopicPartition(t, p, stamp) for (t, p), stamp in timestamps.items()],
        connection,
        "look offsets up by timestamp on",
    )
    return {tp: offset if offset >= 0 else None for tp, offset in answered.items()}


def _ask(
    call: Callable[..., list[KafkaTopicPartition]],
    asked: list[KafkaTopicPartition],
    connection: ClientOptions,
    doing: str,
) -> dict[TopicPartition, int]:
    if not asked:
        return {}
    try:
        answered = call(asked, timeout=connection.connect_timeout_s)
    except KafkaException as exc:
        raise HerdlessSparkError(
            f"could not {doing} the broker at {connection.bootstrap}: {kafka_reason(exc)}"
        ) from None
    return {(tp.topic, tp.partition): tp.offset for tp in answered}


def commit(consumer: Consumer, offsets: Mapping[TopicPartition, int], group_id: str) -> None:
    """Commit offsets to the group; a failed commit is logged, never raised.

    It fails when a rebalance won the race (the next owner re-reads from the
    previous commit: nothing is skipped) or, for a query that joins no group,
    when the group has members of its own: reading goes on either way.
    """
    try:
        consumer.commit(
            offsets=[KafkaTopicPartition(t, p, o) for (t, p), o in offsets.items()],
            asynchronous=False,
        )
    except KafkaException as exc:
        log.warning("group %s: commit failed: %s", group_id, exc)
