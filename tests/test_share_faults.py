"""Share groups through faults on one broker, with confluent-kafka's ShareConsumer.

What a user of a queue relies on when a consumer dies or a record keeps failing: a
member SIGKILLed with records acquired loses them to the others, delivered again with a
delivery count of 2, as soon as its connection drops (Kafka 4.1's share sessions end
with their connection) and at the latest when their lock runs out; a record released
again and again is archived at the group's share.delivery.count.limit and lands in its
dead-letter topic with headers saying where it came from and why; and an
acknowledgement that comes after the member's lock ran out is refused with
INVALID_RECORD_STATE, said once in the log, and changes nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess, module_broker
from tests.test_group_configs import alter
from tests.test_share_dead_letters import headers, read_all
from tests.test_share_fetch import ACCEPT, Member, acquired, new_topic, only_partition, produce

MEMBER = Path(__file__).parent / "support" / "share_member.py"
LOCK_MS = 1_000
DELIVERY_LIMIT = 3
RECORDS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # The broker allows short locks; each group below asks for its own.
    data = tmp_path_factory.mktemp("share-faults") / "data"
    with module_broker(
        data,
        "--set",
        f"group.share.min.record.lock.duration.ms={LOCK_MS}",
        "--set",
        f"group.share.record.lock.duration.ms={LOCK_MS}",
    ) as process:
        yield process


def share_group(broker: BrokerProcess, name: str, lock_ms: int = LOCK_MS, **configs: str) -> str:
    """A one-partition topic `name` with records 0..RECORDS-1, and a share group of that
    name reading it from the start with a lock of `lock_ms` and `configs`."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    assert (
        alter(
            broker.bootstrap,
            name,
            share_auto_offset_reset="earliest",
            share_record_lock_duration_ms=str(lock_ms),
            **configs,
        )
        == "OK"
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for n in range(RECORDS):
        producer.produce(name, key=b"k%d" % n, value=b"%d" % n, headers=[("app", b"h%d" % n)])
    assert producer.flush(30) == 0
    return name


def share_consumer(broker: BrokerProcess, group: str) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([group])
    return consumer


def reported(path: Path) -> dict[int, int]:
    """offset -> delivery count of what a member process reported it got."""
    found = {}
    if path.exists():
        for line in path.read_text().splitlines():
            _, _, what, _, offset, count, _ = line.split(" ", 6)
            if what == "got":
                found[int(offset)] = int(count)
    return found


def held_by_a_killed_member(broker: BrokerProcess, group: str, report: Path) -> dict[int, int]:
    """Start a member process that takes records and holds them, SIGKILL it once it
    has them; offset -> delivery count of what it reported getting."""
    holder = subprocess.Popen(
        [sys.executable, str(MEMBER), broker.bootstrap, group, group, str(report), "a", "hold"],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not reported(report):
            assert time.monotonic() < deadline, "the member got no record"
            assert holder.poll() is None, holder.stderr.read() if holder.stderr else ""
            time.sleep(0.05)
        time.sleep(0.2)  # its poll's records, all reported
    finally:
        holder.kill()
        holder.wait()
    held = reported(report)
    assert set(held.values()) == {1}
    return held


def take_all(broker: BrokerProcess, group: str, timeout_s: float) -> dict[int, list[int]]:
    """A new member accepting every record until it has RECORDS deliveries or
    `timeout_s` passed: offset -> the delivery counts it got."""
    consumer = share_consumer(broker, group)
    counts: dict[int, list[int]] = {}
    try:
        deadline = time.monotonic() + timeout_s
        while sum(len(c) for c in counts.values()) < RECORDS and time.monotonic() < deadline:
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()
                counts.setdefault(message.offset(), []).append(message.delivery_count())
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            consumer.commit_sync(30)
    finally:
        consumer.close()
    return counts


def test_records_of_a_sigkilled_member_come_back_with_a_delivery_count_of_2(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    group = share_group(broker, "killed-member")
    held = held_by_a_killed_member(broker, group, tmp_path / "reports")
    counts = take_all(broker, group, timeout_s=30)
    # Each record once more; those the killed member held (and any its client fetched
    # without handing them over yet) a second time.
    assert sorted(counts) == list(range(RECORDS))
    assert all(counts[offset] == [2] for offset in held), counts
    assert all(c in ([1], [2]) for c in counts.values()), counts


def test_a_killed_members_records_come_back_when_its_connection_drops_not_its_lock(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    """As Kafka 4.1 ends a share session with its connection: the kernel closes a
    SIGKILLed process's sockets, and the broker releases what it held at once."""
    lock_ms = 20_000
    group = share_group(broker, "dropped-connection", lock_ms=lock_ms)
    held = held_by_a_killed_member(broker, group, tmp_path / "reports")
    started = time.monotonic()
    counts = take_all(broker, group, timeout_s=lock_ms / 1000)
    assert time.monotonic() - started < lock_ms / 2000
    assert all(counts.get(offset) == [2] for offset in held), counts


def test_a_record_released_to_the_limit_is_archived_into_the_dead_letter_topic(
    broker: BrokerProcess,
) -> None:
    dead_letters = "dlq.released"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics(
        [NewTopic(dead_letters, 1, 1, config={"errors.deadletterqueue.group.enable": "true"})]
    )
    created[dead_letters].result(30)
    group = share_group(
        broker,
        "released",
        share_delivery_count_limit=str(DELIVERY_LIMIT),
        errors_deadletterqueue_topic_name=dead_letters,
        errors_deadletterqueue_copy_record_enable="true",
    )
    consumer = share_consumer(broker, group)
    deliveries: dict[int, list[int]] = {}
    try:
        deadline = time.monotonic() + 30
        while (
            sum(len(c) for c in deliveries.values()) < RECORDS * DELIVERY_LIMIT
            and time.monotonic() < deadline
        ):
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()
                deliveries.setdefault(message.offset(), []).append(message.delivery_count())
                consumer.acknowledge(message, AcknowledgeType.RELEASE)
            consumer.commit_sync(30)
        # Archived at the limit: nothing is delivered again.
        leftover = [m for m in consumer.poll(LOCK_MS / 1000 + 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert deliveries == {n: list(range(1, DELIVERY_LIMIT + 1)) for n in range(RECORDS)}
    assert leftover == []
    letters = read_all(broker, dead_letters, RECORDS)
    assert [(m.key(), m.value()) for m in letters] == [
        (b"k%d" % n, b"%d" % n) for n in range(RECORDS)
    ]
    for n, letter in enumerate(letters):
        assert headers(letter) == {
            "app": b"h%d" % n,
            "__dlq.errors.topic": group.encode(),
            "__dlq.errors.partition": b"0",
            "__dlq.errors.offset": b"%d" % n,
            "__dlq.errors.group": group.encode(),
            "__dlq.errors.delivery.count": b"%d" % DELIVERY_LIMIT,
            "__dlq.errors.reason": b"delivery limit reached",
        }


def test_an_acknowledgement_after_the_lock_ran_out_is_refused_once_and_changes_nothing(
    broker: BrokerProcess,
) -> None:
    """Nobody took the records since: they are Available, and the late ACCEPT must
    not settle them (ShareFetch tests cover a lock taken over by another member)."""
    topic, topic_id = new_topic(broker)
    group = f"{topic}-group"
    late, other = Member(broker, group, topic_id), Member(broker, group, topic_id)
    assert acquired(late.fetch()) == [] and acquired(other.fetch()) == []
    produce(broker, topic, 3)
    assert acquired(late.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]
    time.sleep(LOCK_MS / 1000 + 0.5)
    before = broker.log()
    refused = late.acknowledge([(0, 2, [ACCEPT])])
    assert only_partition(refused).error_code == ErrorCode.INVALID_RECORD_STATE
    said = broker.log()[len(before) :]
    lines = [line for line in said.splitlines() if late.member_id in line]
    assert len(lines) == 1, said
    assert "INVALID" in lines[0] or "refused" in lines[0]
    assert "Traceback" not in said
    # Nothing changed: the records go to the next member, delivered a second time.
    assert acquired(other.fetch(max_wait_ms=5_000)) == [(0, 2, 2)]
    accepted = other.acknowledge([(0, 2, [ACCEPT])])
    assert only_partition(accepted).error_code == ErrorCode.NONE
