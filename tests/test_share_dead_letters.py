"""A share group's dead-letter topic (KIP-1191) on the wire, against a broker process.

What a user of a share group relies on: a record its members reject, or that reaches
the delivery limit (released by its member, or its lock running out), is written to
the topic the group names in `errors.deadletterqueue.topic.name`, with KIP-1191's
headers saying the group, the original topic, partition and offset and the delivery
count, and herdless's saying why; with the original key, value and headers when the
group asks for copies. Without the config nothing is written; a bad name is refused
when it is set; a topic that is missing is created if the broker may, else the broker
says in its log and its metrics that records were archived without dead letters.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.test_group_configs import alter
from tests.test_metrics import scrape, value
from tests.test_share_fetch import (
    ACCEPT,
    REJECT,
    RELEASE,
    Member,
    acquired,
    new_topic,
    only_partition,
)

LOCK_MS = 1_000
DELIVERY_LIMIT = 2
TOPIC_NAME = "errors.deadletterqueue.topic.name"
COPY_RECORD = "errors.deadletterqueue.copy.record.enable"


def broker_args(**extra: Any) -> list[str]:
    settings = {
        "group.share.record.lock.duration.ms": LOCK_MS,
        "group.share.min.record.lock.duration.ms": LOCK_MS,
        "group.share.delivery.count.limit": DELIVERY_LIMIT,
        **extra,
    }
    return [arg for name, v in settings.items() for arg in ("--set", f"{name}={v}")]


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("share-dlq") / "data"
    with module_broker(data, *broker_args(), "--metrics-port", str(metrics_port)) as process:
        yield process


def set_group_configs(broker: BrokerProcess, group: str, **configs: str) -> str:
    return alter(broker.bootstrap, group, **{k.replace(".", "_"): v for k, v in configs.items()})


def create(broker: BrokerProcess, name: str, *, opted_in: bool = True) -> None:
    """A topic; one share groups may write dead letters to unless not `opted_in`."""
    config = {"errors.deadletterqueue.group.enable": "true"} if opted_in else {}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    """`count` records, each with a key and a header, one batch each."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(
            topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("app", b"h%d" % i)], partition=0
        )
        producer.flush(30)
    assert producer.flush(30) == 0


def group_with_dead_letters(
    broker: BrokerProcess, count: int, *, copy: bool | None = None, configure: bool = True
) -> tuple[Member, str, str]:
    """A member of a new group on a new topic that then gets `count` records, the group
    naming `dlq.<topic>` (created here) as its dead-letter topic unless not `configure`."""
    topic, topic_id = new_topic(broker)
    group = f"{topic}-group"
    dead_letters = f"dlq.{topic}"
    create(broker, dead_letters)
    if configure:
        configs = {TOPIC_NAME: dead_letters}
        if copy is not None:
            configs[COPY_RECORD] = "true" if copy else "false"
        assert set_group_configs(broker, group, **configs) == "OK"
    member = Member(broker, group, topic_id)
    assert acquired(member.fetch()) == []
    produce(broker, topic, count)
    return member, topic, dead_letters


def read_all(broker: BrokerProcess, topic: str, expected: int, wait_s: float = 10) -> list[Any]:
    """The records of the topic's partition 0, waiting up to `wait_s` for `expected`."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "dlq-reader",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    found: list[Any] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline and len(found) < expected:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                found.append(message)
        if expected == 0:
            # Nothing should come: give it a moment to show up if it would.
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                found.append(message)
    finally:
        consumer.close()
    return found


def headers(message: Any) -> dict[str, bytes]:
    return {name: value for name, value in message.headers() or ()}


def test_a_rejected_record_lands_in_the_dead_letter_topic_with_its_headers(
    broker: BrokerProcess,
) -> None:
    member, topic, dead_letters = group_with_dead_letters(broker, 3, copy=True)
    assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]
    got = member.acknowledge([(0, 2, [ACCEPT, REJECT, ACCEPT])])
    assert only_partition(got).error_code == ErrorCode.NONE
    [letter] = read_all(broker, dead_letters, 1)
    # The original, copied: key, value and its own headers, then the context.
    assert (letter.key(), letter.value()) == (b"k1", b"v1")
    assert letter.headers()[0] == ("app", b"h1")
    assert headers(letter) == {
        "app": b"h1",
        "__dlq.errors.topic": topic.encode(),
        "__dlq.errors.partition": b"0",
        "__dlq.errors.offset": b"1",
        "__dlq.errors.group": f"{topic}-group".encode(),
        "__dlq.errors.delivery.count": b"1",
        "__dlq.errors.reason": b"rejected",
    }


def test_a_record_released_to_the_delivery_limit_lands_there_with_that_count(
    broker: BrokerProcess,
) -> None:
    # Copies not asked for (KIP-1191's default): the context headers alone.
    member, topic, dead_letters = group_with_dead_letters(broker, 1)
    assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 0, 1)]
    got = member.fetch([(0, 0, [RELEASE])], max_wait_ms=5_000)
    assert acquired(got) == [(0, 0, 2)]
    assert acquired(member.fetch([(0, 0, [RELEASE])], max_wait_ms=200)) == []
    [letter] = read_all(broker, dead_letters, 1)
    assert (letter.key(), letter.value()) == (None, None)
    found = headers(letter)
    assert found["__dlq.errors.delivery.count"] == str(DELIVERY_LIMIT).encode()
    assert found["__dlq.errors.reason"] == b"delivery limit reached"
    assert found["__dlq.errors.offset"] == b"0"
    assert found["__dlq.errors.topic"] == topic.encode()


def test_a_lock_that_runs_out_at_the_limit_writes_a_dead_letter(broker: BrokerProcess) -> None:
    member, _, dead_letters = group_with_dead_letters(broker, 2, copy=True)
    assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 1, 1)]
    time.sleep(LOCK_MS / 1000 + 0.3)
    assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 1, 2)]
    # Never acknowledged: the second lock runs out at the limit.
    letters = read_all(broker, dead_letters, 2, wait_s=LOCK_MS / 1000 + 10)
    assert [(m.value(), headers(m)["__dlq.errors.delivery.count"]) for m in letters] == [
        (b"v0", b"2"),
        (b"v1", b"2"),
    ]
    assert {headers(m)["__dlq.errors.reason"] for m in letters} == {b"delivery limit reached"}


def test_without_the_config_nothing_is_written(broker: BrokerProcess) -> None:
    member, _, dead_letters = group_with_dead_letters(broker, 2, configure=False)
    assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 1, 1)]
    assert only_partition(member.acknowledge([(0, 1, [REJECT])])).error_code == ErrorCode.NONE
    assert read_all(broker, dead_letters, 0) == []


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("orders", "must start with 'dlq.'"),
        ("__consumer_offsets", "cannot be an internal topic"),
        ("dlq.no spaces", "may contain only ASCII letters"),
        ("dlq." + "x" * 250, "the limit is 249"),
    ],
)
def test_a_bad_dead_letter_topic_name_is_refused(
    broker: BrokerProcess, name: str, why: str
) -> None:
    answer = set_group_configs(broker, "refused-group", **{TOPIC_NAME: name})
    assert "InvalidConfigurationError" in answer and why in answer, answer
    refused = set_group_configs(broker, "refused-group", **{COPY_RECORD: "sometimes"})
    assert refused != "OK"


@pytest.mark.parametrize(
    ("exists", "said"),
    [(False, "does not exist"), (True, "does not set errors.deadletterqueue.group.enable=true")],
)
def test_a_topic_missing_or_not_opted_in_is_said_and_counted(
    broker: BrokerProcess, metrics_port: int, exists: bool, said: str
) -> None:
    topic, topic_id = new_topic(broker)
    group = f"{topic}-group"
    unusable = f"dlq.unusable-{topic}"
    if exists:
        create(broker, unusable, opted_in=False)
    assert set_group_configs(broker, group, **{TOPIC_NAME: unusable}) == "OK"
    member = Member(broker, group, topic_id)
    assert acquired(member.fetch()) == []
    produce(broker, topic, 1)
    assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 0, 1)]
    # Archived all the same: the share group goes on.
    assert only_partition(member.acknowledge([(0, 0, [REJECT])])).error_code == ErrorCode.NONE
    assert f"the dead-letter topic {unusable} {said}" in broker.log()
    samples = scrape(metrics_port)
    lost = value(samples, "herdless_share_dead_letters_lost_total", group=group, topic=unusable)
    assert lost == 1
    if exists:
        assert read_all(broker, unusable, 0) == []


def test_the_broker_creates_a_missing_topic_when_allowed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data = tmp_path_factory.mktemp("share-dlq-create") / "data"
    args = broker_args(**{"errors.deadletterqueue.auto.create.topics.enable": "true"})
    with module_broker(data, *args) as creating:
        member, topic, _ = group_with_dead_letters(creating, 1, configure=False)
        created = f"dlq.created-{topic}"
        assert set_group_configs(creating, member.group, **{TOPIC_NAME: created}) == "OK"
        assert acquired(member.fetch(max_wait_ms=5_000)) == [(0, 0, 1)]
        assert only_partition(member.acknowledge([(0, 0, [REJECT])])).error_code == 0
        [letter] = read_all(creating, created, 1)
        assert headers(letter)["__dlq.errors.reason"] == b"rejected"
