"""Share groups end to end with confluent-kafka's ShareConsumer (KIP-932): several members
read the same partitions, each record goes to one member at a time, and what a member
acknowledges decides what happens next: ACCEPT ends the record's delivery, RELEASE hands
it to any member again with its delivery count raised, REJECT archives it for good.

Five members on a two-partition topic, so most partitions are shared by several members:
the case share groups exist for and consumer groups cannot serve.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.test_group_configs import alter

MEMBERS = 5
PARTITIONS = 2
RECORDS = 600


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("share-consumers") / "data") as process:
        yield process


def create_topic(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str) -> None:
    """The records arrive while the members wait, a few at a time, as a queue's work does:
    written all at once, the first fetch would acquire a whole partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(RECORDS):
        producer.produce(topic, str(n).encode(), partition=n % PARTITIONS)
        if n % 10 == 9:
            producer.flush(30)
            time.sleep(0.02)
    assert producer.flush(30) == 0


@dataclass(frozen=True)
class Delivery:
    member: int
    value: int
    delivery_count: int
    acknowledged: str


@dataclass
class ShareGroupRun:
    """Members in threads of their own (a ShareConsumer is not thread-safe), each
    acknowledging what it receives by `decide`, until the broker has confirmed an
    acknowledgement that settles every record (ACCEPT or REJECT)."""

    bootstrap: str
    group: str
    topic: str
    explicit: bool
    deliveries: list[Delivery] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _settled: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _done: threading.Event = field(default_factory=threading.Event)

    def decide(self, value: int, delivery_count: int) -> str:
        """Explicit members release every tenth record once (it must come back with a
        delivery count of 2) and reject another tenth (it must never come back)."""
        if not self.explicit:
            return "ACCEPT"
        if value % 10 == 3 and delivery_count == 1:
            return "RELEASE"
        if value % 10 == 7:
            return "REJECT"
        return "ACCEPT"

    def run(self, timeout_s: float) -> None:
        threads = [threading.Thread(target=self._member, args=(n,)) for n in range(MEMBERS)]
        for thread in threads:
            thread.start()
        produce(self.bootstrap, self.topic)
        self._done.wait(timeout_s)
        self._done.set()
        for thread in threads:
            thread.join(60)

    def _member(self, n: int) -> None:
        config = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "client.id": f"member-{n}",
        }
        if self.explicit:
            config["share.acknowledgement.mode"] = "explicit"
        consumer = ShareConsumer(config)
        # (partition, offset) -> (value, decision), until the broker confirms it.
        pending: dict[tuple[int, int], tuple[int, str]] = {}

        def confirmed(offsets: dict[TopicPartition, set[int]], error: object) -> None:
            if error is not None:
                self.errors.append(f"member {n}: acknowledgement failed: {error}")
                return
            with self._lock:
                for tp, acknowledged in offsets.items():
                    for offset in acknowledged:
                        value, decision = pending.pop((tp.partition, offset))
                        if decision != "RELEASE":
                            self._settled.add(value)
                if len(self._settled) == RECORDS:
                    self._done.set()

        consumer.set_acknowledgement_commit_callback(confirmed)
        consumer.subscribe([self.topic])
        try:
            while not self._done.is_set():
                messages = consumer.poll(0.5)
                for message in messages:
                    if message.error() is not None:
                        self.errors.append(f"member {n}: {message.error()}")
                        continue
                    value, count = int(message.value()), message.delivery_count()
                    decision = self.decide(value, count)
                    if self.explicit:
                        consumer.acknowledge(message, getattr(AcknowledgeType, decision))
                    pending[(message.partition(), message.offset())] = (value, decision)
                    with self._lock:
                        self.deliveries.append(Delivery(n, value, count, decision))
                if not messages:
                    continue
                # Implicit members accept what the last poll returned by committing (the
                # next poll would too); of the explicit ones, half wait for the broker's
                # answer and half do not.
                if n % 2 == 0 or not self.explicit:
                    results = consumer.commit_sync(30)
                    self.errors.extend(
                        f"member {n}: {tp} {error}"
                        for tp, error in results.items()
                        if error is not None
                    )
                else:
                    consumer.commit_async()
        finally:
            consumer.close()


def started(broker: BrokerProcess, name: str, *, explicit: bool) -> ShareGroupRun:
    topic, group = f"{name}-input", name
    create_topic(broker, topic)
    # A new share group starts at the log end (share.auto.offset.reset=latest); this one
    # reads from the start whenever its members come.
    assert alter(broker.bootstrap, group, share_auto_offset_reset="earliest") == "OK"
    return ShareGroupRun(broker.bootstrap, group, topic, explicit)


def test_five_members_share_two_partitions_and_each_record_is_accepted_once(
    broker: BrokerProcess,
) -> None:
    """Implicit acknowledgement: what a poll returned is accepted by the next poll."""
    run = started(broker, "implicit", explicit=False)
    run.run(timeout_s=90)
    assert not run.errors
    received = Counter(d.value for d in run.deliveries)
    assert set(received) == set(range(RECORDS)), f"missing {set(range(RECORDS)) - set(received)}"
    twice = {value: count for value, count in received.items() if count > 1}
    assert not twice, f"accepted records delivered again: {twice}"
    assert {d.delivery_count for d in run.deliveries} == {1}
    # Sharing is real: more members took records than there are partitions.
    assert len({d.member for d in run.deliveries}) > PARTITIONS


def test_accept_release_and_reject_decide_what_is_delivered_again(
    broker: BrokerProcess,
) -> None:
    """Explicit acknowledgement, committed with commit_sync by some members and
    commit_async by others."""
    run = started(broker, "explicit", explicit=True)
    run.run(timeout_s=90)
    assert not run.errors
    by_value: dict[int, list[Delivery]] = defaultdict(list)
    for delivery in run.deliveries:
        by_value[delivery.value].append(delivery)
    assert set(by_value) == set(range(RECORDS))
    wrong = {}
    for value, deliveries in by_value.items():
        seen = [(d.delivery_count, d.acknowledged) for d in deliveries]
        if value % 10 == 3:
            expected = [(1, "RELEASE"), (2, "ACCEPT")]
        elif value % 10 == 7:
            expected = [(1, "REJECT")]
        else:
            expected = [(1, "ACCEPT")]
        if seen != expected:
            wrong[value] = seen
    assert not wrong, (
        f"records delivered otherwise than acknowledged: {dict(list(wrong.items())[:10])}"
    )
    # A released record may go to any member, not only the one that released it.
    assert len({d.member for d in run.deliveries}) > PARTITIONS


def test_a_share_group_and_its_members_show_while_they_consume(broker: BrokerProcess) -> None:
    """While consuming, ShareGroupDescribe names every member; after close, none."""
    from tests.test_share_groups import describe

    run = started(broker, "described", explicit=False)
    seen: list[int] = []

    def watch() -> None:
        while not run._done.is_set():
            (group,) = describe(broker, run.group)
            seen.append(len(group.members))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    run.run(timeout_s=90)
    watcher.join(10)
    assert max(seen) == MEMBERS
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        (group,) = describe(broker, run.group)
        if not group.members:
            break
        time.sleep(0.2)
    assert (group.group_state, len(group.members)) == ("Empty", 0)
