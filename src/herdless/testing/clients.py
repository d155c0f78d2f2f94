"""What a test does to its brokers through a real client (librdkafka, by confluent-kafka).

Each helper opens its own client and drops it before returning, so nothing of a
helper's lingers into the code under test (no shared producer buffering, no
reader holding a group). confluent_kafka is imported when a helper runs: the
plugin module loads into every pytest session where herdless is installed.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from herdless.protocol.config_values import format_boolean
from herdless.testing.security import ADMIN

if TYPE_CHECKING:
    from pathlib import Path

    from confluent_kafka.admin import AdminClient, ClusterMetadata, ConsumerGroupDescription

    from herdless.testing.security import ClientSettings, Security

T = TypeVar("T")
Data = bytes | str | None
# A record to produce: its value, or a (key, value) pair.
Sent = Data | tuple[Data, Data]

METADATA_TIMEOUT_S = 10.0
# The reader behind consume() assigns partitions itself and never joins or commits;
# librdkafka still wants a group id.
READER_GROUP = "herdless-testing-reader"
# A broker a test has stopped on purpose is not worth a line per retry on stderr.
QUIET = {"log.connection.close": False, "log_level": 3}


class _ClientTrace(logging.Handler):
    """A librdkafka client's log, its last lines kept (a logging.Logger it writes to)."""

    def __init__(self, lines: int = 200) -> None:
        super().__init__(logging.DEBUG)
        self._lines: collections.deque[str] = collections.deque(maxlen=lines)
        self.logger = logging.Logger("herdless.testing.client-trace", logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self._lines.append(f"{record.created:.3f} {record.getMessage()}")

    def text(self) -> str:
        return "\n".join(self._lines)


@dataclass(frozen=True)
class Record:
    """A record as consume() read it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def kafka_settings(
    settings: Mapping[str, object] | None, names: Mapping[str, object]
) -> dict[str, str]:
    """Kafka-style settings from a mapping and keywords; in keywords `_` stands for `.`
    (`cleanup_policy="compact"` is `cleanup.policy=compact`) and booleans are true/false."""
    merged = {**(settings or {}), **{k.replace("_", "."): v for k, v in names.items()}}
    return {
        key: format_boolean(value) if isinstance(value, bool) else str(value)
        for key, value in merged.items()
    }


def _encode(data: Data) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


class Brokers:
    """One broker or a cluster as a test sees it: where clients connect, its lifetime
    (a context manager: started on entry unless it already is, stopped on exit), its
    logs, and helpers that go through a real client.

    Secured ones (with a herdless.testing.security.Security) say how each user
    connects (`client_settings`), and their helpers connect as the super user admin.
    """

    security: Security | None = None
    # The throw-away CA's and client's files of secured brokers.
    certificates: Path

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def listener_bootstrap(self) -> dict[str, str]:
        """Each listener's addresses (comma-separated), by its name (PLAINTEXT, SASL_SSL...)."""
        raise NotImplementedError

    def start(self) -> Self:
        raise NotImplementedError

    def started(self) -> bool:
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stop every process: SIGTERM, then SIGKILL for those that do not stop in time."""
        raise NotImplementedError

    def heal(self) -> None:
        """Resume what a test paused and start what it stopped or killed."""
        raise NotImplementedError

    def logs(self) -> str:
        """The brokers' logs, for failure messages."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        if not self.started():
            self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.shutdown()

    def client_config(self, **settings: Any) -> dict[str, Any]:
        """librdkafka settings for a client of these brokers, e.g. `{"group.id": "g"}`
        (secured ones: as admin over the first secured listener)."""
        if self.security is None:
            return {"bootstrap.servers": self.bootstrap, **settings}
        return self.client_settings().librdkafka(**settings)

    def client_settings(
        self,
        user: str | None = ADMIN,
        *,
        listener: str | None = None,
        mechanism: str | None = None,
        certificate: bool = False,
    ) -> ClientSettings:
        """How `user` connects to a secured listener (the first unless named): with SASL
        by `mechanism` (SCRAM-SHA-512 unless named), with the client certificate if
        `certificate`; in each client library's settings."""
        if self.security is None:
            raise ValueError("these brokers serve no secured listener: give them a Security")
        return self.security.client_settings(
            self.listener_bootstrap(),
            self.certificates,
            user,
            listener=listener,
            mechanism=mechanism,
            certificate=certificate,
        )

    def admin(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config(**QUIET))

    def metadata(self, topic: str | None = None) -> ClusterMetadata:
        return self.admin().list_topics(topic, timeout=METADATA_TIMEOUT_S)

    def wait_for(
        self,
        predicate: Callable[[ClusterMetadata], T],
        timeout: float = 30.0,
        what: str = "",
    ) -> T:
        """Poll the metadata until `predicate` holds; return its value."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            try:
                result = predicate(self.metadata())
                if result:
                    return result
            except Exception as exc:  # a broker down, metadata not there yet
                last = exc
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{what or predicate} not reached within {timeout:g}s"
                    + (f" (last error: {last!r})" if last else "")
                    + f"\n{self.logs()}"
                )
            time.sleep(0.1)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        *,
        timeout: float = 30.0,
        **configs: object,
    ) -> None:
        """Create a topic and return once every partition has a leader and a full ISR.

        Topic configs are keywords (`retention_ms=1000`, `cleanup_policy="compact"`);
        a replication factor of -1 takes the brokers' default.replication.factor.
        """
        from confluent_kafka.admin import AdminClient, NewTopic

        new = NewTopic(name, partitions, replication_factor, config=kafka_settings(None, configs))
        # What the client did is kept for the error: a CreateTopics that never gets an
        # answer says nothing else (it goes to the controller the client learnt of).
        trace = _ClientTrace()
        admin = AdminClient(  # alive until the answer: dropping it cancels the request
            self.client_config(
                **{**QUIET, "log_level": 7, "debug": "admin,broker,metadata"},
                logger=trace.logger,
            )
        )
        try:
            self._send_create_topics(admin, new, timeout)
        except concurrent.futures.TimeoutError:
            admin.poll(0)  # an admin client hands its log over only when polled
            raise TimeoutError(
                f"creating topic {name}: no answer within {timeout:g}s; the admin client's"
                f" last lines:\n{trace.text()}\n{self.logs()}"
            ) from None
        self.wait_for(
            lambda m: (
                name in m.topics
                and len(m.topics[name].partitions) == partitions
                and all(
                    p.leader >= 0 and len(p.isrs) == len(p.replicas)
                    for p in m.topics[name].partitions.values()
                )
            ),
            timeout,
            what=f"topic {name!r} with a leader and a full ISR for every partition",
        )

    @staticmethod
    def _send_create_topics(admin: Any, new: Any, timeout: float) -> None:
        """CreateTopics, sent again if the broker it went to left the client's metadata
        meanwhile (a broker re-registering after a ZooKeeper outage is not named for a
        moment): librdkafka fails such a request with _DESTROY_BROKER rather than
        retrying it. A topic the first attempt did create counts as created."""
        from confluent_kafka import KafkaError, KafkaException

        sent_again = False
        while True:
            try:
                admin.create_topics([new], operation_timeout=timeout)[new.topic].result(timeout)
                return
            except KafkaException as exc:
                code = exc.args[0].code()
                if sent_again and code == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if sent_again or code not in (KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT):
                    raise
                sent_again = True

    def produce(
        self,
        topic: str,
        records: Iterable[Sent],
        *,
        partition: int | None = None,
        timeout: float = 30.0,
        **settings: Any,
    ) -> list[tuple[int, int]]:
        """Produce values, or (key, value) pairs, with acks=all; return each record's
        (partition, offset) in the order given. Raises if any is not acknowledged.
        `settings` are librdkafka producer settings (`compression_type="zstd"`)."""
        from confluent_kafka import KafkaError, Producer

        producer = Producer(
            {**self.client_config(**QUIET), "acks": "all", **kafka_settings(None, settings)}
        )
        delivered: dict[int, tuple[int, int]] = {}
        errors: list[str] = []

        def on_delivery(index: int) -> Callable[[KafkaError | None, Any], None]:
            def report(error: KafkaError | None, message: Any) -> None:
                if error is not None:
                    errors.append(f"record {index}: {error.str()}")
                else:
                    delivered[index] = (message.partition(), message.offset())

            return report

        sent = list(records)
        extra = {} if partition is None else {"partition": partition}
        for index, record in enumerate(sent):
            key, value = record if isinstance(record, tuple) else (None, record)
            producer.produce(
                topic, _encode(value), _encode(key), on_delivery=on_delivery(index), **extra
            )
            producer.poll(0)
        left = producer.flush(timeout)
        if errors or left:
            unsent = f"; {left} not acknowledged within {timeout:g}s" if left else ""
            raise RuntimeError(
                f"producing to {topic!r} failed: {'; '.join(errors[:5])}{unsent}\n{self.logs()}"
            )
        return [delivered[i] for i in range(len(sent))]

    def consume(
        self, topic: str, n: int, timeout: float = 10.0, *, partition: int | None = None
    ) -> list[Record]:
        """The first `n` records of the topic (or of one partition), read from the beginning
        with no consumer group; TimeoutError if fewer arrive within `timeout`. Across
        partitions records come in the order they are read; within one, in offset order."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        deadline = time.monotonic() + timeout
        consumer = Consumer(
            self.client_config(
                **QUIET,
                **{"group.id": READER_GROUP, "enable.auto.commit": False},
            )
        )
        try:
            partitions = self._partitions(topic, timeout) if partition is None else [partition]
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            records: list[Record] = []
            while len(records) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"{len(records)} of {n} records read from {topic!r} within"
                        f" {timeout:g}s: {records}"
                    )
                message = consumer.poll(min(remaining, 0.5))
                if message is None:
                    continue
                if message.error() is not None:
                    raise RuntimeError(f"reading {topic!r}: {message.error().str()}")
                records.append(
                    Record(
                        topic=message.topic(),
                        partition=message.partition(),
                        offset=message.offset(),
                        key=message.key(),
                        value=message.value(),
                        timestamp_ms=message.timestamp()[1],
                        headers=tuple(message.headers() or ()),
                    )
                )
            return records
        finally:
            consumer.close()

    def _partitions(self, topic: str, timeout: float) -> list[int]:
        def found(m: ClusterMetadata) -> list[int] | None:
            known = m.topics.get(topic)
            if known is None or known.error is not None:
                return None
            return sorted(known.partitions)

        return self.wait_for(found, timeout, what=f"topic {topic!r} in the metadata")

    def describe_group(self, group_id: str, timeout: float = 10.0) -> ConsumerGroupDescription:
        """The group as DescribeGroups tells it: state, protocol, members and assignments."""
        admin = self.admin()
        return admin.describe_consumer_groups([group_id])[group_id].result(timeout)

    def wait_for_group_stable(
        self, group_id: str, members: int | None = None, timeout: float = 30.0
    ) -> ConsumerGroupDescription:
        """Return the group's description once it is Stable (with `members` members,
        when given): the rebalance is over and every member has its assignment."""
        from confluent_kafka import ConsumerGroupState

        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                group = self.describe_group(group_id)
            except Exception as exc:  # the coordinator loading, moving, or down a moment
                last = exc
            else:
                if group.state == ConsumerGroupState.STABLE and (
                    members is None or len(group.members) == members
                ):
                    return group
                last = f"{group.state.name} with {len(group.members)} members"
            if time.monotonic() >= deadline:
                wanted = "Stable" if members is None else f"Stable with {members} members"
                raise TimeoutError(
                    f"group {group_id!r} not {wanted} within {timeout:g}s (last: {last})"
                )
            time.sleep(0.1)

    def committed(self, group_id: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
        """The group's committed offsets in the topic, by partition (partitions with no
        commit are left out)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        request = ConsumerGroupTopicPartitions(group_id)
        admin = self.admin()
        answer = admin.list_consumer_group_offsets([request])[group_id].result(timeout)
        return {
            tp.partition: tp.offset
            for tp in answer.topic_partitions
            if tp.topic == topic and tp.offset >= 0
        }
