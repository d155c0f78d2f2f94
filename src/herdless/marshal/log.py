"""The coordination topic: writing messages durably, and reading them all back.

This is the only place that talks to Kafka for coordination, through
confluent-kafka, so it works against any Kafka-compatible broker. Writes use
an idempotent producer with acks=all: a message the protocol relies on must
neither vanish nor be duplicated. One reader thread follows every partition
of the topic from the beginning and feeds a Rationalizer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from herdless.marshal.messages import Kind, Message, encode
from herdless.marshal.placement import (
    DEFAULT_PARTITIONS,
    DEFAULT_TOPIC,
    coordinating_partition,
    member_partition,
)
from herdless.marshal.rationalizer import Entry, Rationalizer, WorldState
from herdless.security.client_config import ClientConfigError, Refusals, librdkafka_config

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
# How often to look at librdkafka's errors while waiting for the first metadata.
METADATA_ATTEMPT_S = 0.5


class MarshalError(RuntimeError):
    """The coordination log could not be written or read."""


def client_config(config: Mapping[str, str] | None) -> dict[str, str]:
    """Client settings as Marshal's users give them, in librdkafka's names or the Java
    client's (security.protocol, sasl.jaas.config, ssl.truststore.location...), as
    librdkafka takes them; MarshalError names a setting that cannot be honoured."""
    try:
        return librdkafka_config(config or {})
    except ClientConfigError as exc:
        raise MarshalError(f"client setting {exc}") from None


def ensure_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str], create: bool = True
) -> int:
    """Create the coordination topic if it is missing; return its partition count.

    LogAppendTime makes the broker's clock the log's only clock.
    """
    refusals = Refusals()
    admin = AdminClient({"bootstrap.servers": bootstrap, **config, "error_cb": refusals})
    metadata = _metadata(admin, refusals, bootstrap)
    if topic not in metadata.topics or metadata.topics[topic].error is not None:
        if not create:
            raise MarshalError(f"no coordination topic {topic} at {bootstrap}")
        new = NewTopic(
            topic,
            num_partitions=partitions,
            replication_factor=-1,
            config={"message.timestamp.type": "LogAppendTime", "cleanup.policy": "delete"},
        )
        future = admin.create_topics([new], operation_timeout=TIMEOUT_S)[topic]
        try:
            future.result(TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise MarshalError(f"cannot create {topic}: {exc}") from None
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        time.sleep(0.1)
    raise MarshalError(f"{topic} did not appear")


def _metadata(admin: AdminClient, refusals: Refusals, bootstrap: str) -> ClusterMetadata:
    """The brokers' metadata; MarshalError at once if they refuse the client's login or
    certificate (librdkafka would retry it until TIMEOUT_S, naming only a transport
    failure)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return admin.list_topics(timeout=METADATA_ATTEMPT_S)
        except KafkaException:
            admin.poll(0)  # serves the error callback
            reason = refusals.reason()
            if reason is not None:
                message = f"the brokers at {bootstrap} refused the client: {reason}"
                raise MarshalError(message) from None
            if time.monotonic() >= deadline:
                raise


def destination(message: Message, partitions: int) -> int:
    if message.kind is Kind.PRESENT:
        return member_partition(message.group_id, partitions)
    return coordinating_partition(message.topic, message.partition, partitions)


class CoordinationLog:
    """Writes to and follows the coordination topic; owns a Rationalizer."""

    def __init__(
        self,
        bootstrap: str,
        topic: str = DEFAULT_TOPIC,
        partitions: int = DEFAULT_PARTITIONS,
        config: dict[str, str] | None = None,
        create: bool = True,
    ) -> None:
        config = client_config(config)
        self.topic = topic
        self.partitions = ensure_topic(bootstrap, topic, partitions, config, create)
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                **config,
            }
        )
        # Assigned, never subscribed: the group id only satisfies the client; no
        # group is joined and nothing is committed.
        self._reader = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"herdless-marshal-reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 50,
                **config,
            }
        )
        # Watermarks are asked of a client of their own: a query on the reader
        # waits behind its fetches in another thread.
        self._probe = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"herdless-marshal-probe-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                **config,
            }
        )
        self._reader.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
        )
        self._rationalizer = Rationalizer(self.partitions)
        self._changed = threading.Condition()
        self._closing = threading.Event()
        self._warned_clock = False
        self._thread = threading.Thread(target=self._follow, name="marshal-reader", daemon=True)
        self._thread.start()

    # -- writing ---------------------------------------------------------

    def send(self, messages: Sequence[Message]) -> list[tuple[int, int]]:
        """Write messages durably; return each one's (partition, offset)."""
        results: list[tuple[int, int] | None] = [None] * len(messages)
        errors: list[str] = []
        pending = threading.Semaphore(0)

        def delivered(index: int):
            def callback(err, msg) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    results[index] = (msg.partition(), msg.offset())
                pending.release()

            return callback

        for index, message in enumerate(messages):
            self._producer.produce(
                self.topic,
                value=encode(message),
                partition=destination(message, self.partitions),
                on_delivery=delivered(index),
            )
        deadline = time.monotonic() + TIMEOUT_S
        for _ in messages:
            while not pending.acquire(timeout=0.01):
                self._producer.poll(0)
                if time.monotonic() > deadline:
                    raise MarshalError("coordination write timed out")
        if errors:
            raise MarshalError(f"coordination write failed: {errors[0]}")
        return [r for r in results if r is not None]

    # -- reading ---------------------------------------------------------

    def _follow(self) -> None:
        while not self._closing.is_set():
            try:
                batch = self._reader.consume(500, timeout=0.05)
            except RuntimeError:
                return  # closed under us
            entries = []
            for record in batch:
                if record.error() is not None:
                    continue
                kind, timestamp = record.timestamp()
                if kind != TIMESTAMP_LOG_APPEND_TIME and not self._warned_clock:
                    self._warned_clock = True
                    log.warning(
                        "%s is not a LogAppendTime topic: staleness is judged by "
                        "the writers' clocks",
                        self.topic,
                    )
                entries.append(
                    Entry(record.partition(), record.offset(), timestamp, record.value())
                )
            if entries:
                with self._changed:
                    for entry in entries:
                        self._rationalizer.apply(entry)
                    self._changed.notify_all()

    def state(self) -> WorldState:
        with self._changed:
            return self._rationalizer.state()

    def wait_past(
        self, positions: Sequence[tuple[int, int]], timeout: float = TIMEOUT_S
    ) -> WorldState:
        """The state once every given (partition, offset) has been read."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not all(self._rationalizer.position(p) > o for p, o in positions):
                left = deadline - time.monotonic()
                if left <= 0 or self._closing.is_set():
                    raise MarshalError("coordination log not read back in time")
                self._changed.wait(min(left, 0.1))
            return self._rationalizer.state()

    def sync(self, timeout: float = TIMEOUT_S) -> WorldState:
        """The state once everything written before this call has been read."""
        ends = []
        for partition in range(self.partitions):
            _, high = self._probe.get_watermark_offsets(
                TopicPartition(self.topic, partition), timeout=timeout, cached=False
            )
            if high > 0:
                ends.append((partition, high - 1))
        return self.wait_past(ends, timeout)

    def close(self) -> None:
        self._closing.set()
        self._thread.join(5)
        self._producer.flush(5)
        with contextlib.suppress(RuntimeError):
            self._reader.close()
        self._probe.close()


def read_state(
    bootstrap: str, topic: str = DEFAULT_TOPIC, config: dict[str, str] | None = None
) -> WorldState:
    """Read the whole coordination topic once (what `herdless marshal status` shows)."""
    coordination = CoordinationLog(bootstrap, topic, config=config, create=False)
    try:
        return coordination.sync()
    finally:
        coordination.close()
