"""ShareFetch and ShareAcknowledge (KIP-932) on the wire, against a broker process.

What a share consumer relies on, sent raw as librdkafka's ShareConsumer sends it (v1):
records acquired by one member and no other, acknowledged as accepted, released for
redelivery with a higher delivery count, rejected, or released when their lock runs
out, up to the delivery limit; share sessions with their epochs; and the errors Kafka
answers a stale session, an unknown one, and acknowledgements of records the member
does not hold, with nothing changed by them.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import iter_batches, iter_records
from herdless.protocol.share_messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from tests.support.broker import BrokerProcess, module_broker
from tests.support.wire import Wire
from tests.test_protocol_versions import topic_id_of

LOCK_MS = 1_000
DELIVERY_LIMIT = 2
ACCEPT, RELEASE, REJECT = 1, 2, 3
_topics = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {
        "group.share.record.lock.duration.ms": LOCK_MS,
        "group.share.min.record.lock.duration.ms": LOCK_MS,
        "group.share.delivery.count.limit": DELIVERY_LIMIT,
    }
    args = [arg for name, value in settings.items() for arg in ("--set", f"{name}={value}")]
    with module_broker(tmp_path_factory.mktemp("share") / "data", *args) as process:
        yield process


class Member:
    """One share consumer's connection and share session, as librdkafka keeps them."""

    def __init__(self, broker: BrokerProcess, group: str, topic_id: uuid.UUID) -> None:
        self.wire = Wire(broker)
        self.group = group
        self.member_id = str(uuid.uuid4())
        self.topic_id = topic_id
        self.epoch = 0

    def fetch(
        self,
        acks: list[tuple[int, int, list[int]]] | None = None,
        *,
        max_wait_ms: int = 0,
        max_records: int = 500,
        epoch: int | None = None,
    ) -> Any:
        request = self.fetch_request(acks, max_wait_ms, max_records, epoch)
        response = self.wire.call(request, ShareFetchResponse)
        if response.error_code == ErrorCode.NONE and epoch is None:
            self.epoch += 1
        return response

    def fetch_request(
        self,
        acks: list[tuple[int, int, list[int]]] | None = None,
        max_wait_ms: int = 0,
        max_records: int = 500,
        epoch: int | None = None,
    ) -> Any:
        R = ShareFetchRequest
        Partition = R.FetchTopic.FetchPartition
        batches = [
            Partition.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
            for f, la, t in acks or ()
        ]
        request = R[1](
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=max_records,
            topics=[
                R.FetchTopic(
                    topic_id=self.topic_id,
                    partitions=[Partition(partition_index=0, acknowledgement_batches=batches)],
                )
            ],
            forgotten_topics_data=[],
        )
        return request

    def acknowledge(self, acks: list[tuple[int, int, list[int]]], epoch: int | None = None) -> Any:
        R = ShareAcknowledgeRequest
        Partition = R.AcknowledgeTopic.AcknowledgePartition
        request = R[1](
            group_id=self.group,
            member_id=self.member_id,
            share_session_epoch=self.epoch if epoch is None else epoch,
            topics=[
                R.AcknowledgeTopic(
                    topic_id=self.topic_id,
                    partitions=[
                        Partition(
                            partition_index=0,
                            acknowledgement_batches=[
                                Partition.AcknowledgementBatch(
                                    first_offset=f, last_offset=la, acknowledge_types=t
                                )
                                for f, la, t in acks
                            ],
                        )
                    ],
                )
            ],
        )
        response = self.wire.call(request, ShareAcknowledgeResponse)
        if response.error_code == ErrorCode.NONE and epoch is None:
            self.epoch += 1
        return response


def only_partition(response: Any) -> Any:
    assert response.error_code == ErrorCode.NONE, response
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def acquired(response: Any) -> list[tuple[int, int, int]]:
    partitions = [p for topic in response.responses for p in topic.partitions]
    return [
        (r.first_offset, r.last_offset, r.delivery_count)
        for p in partitions
        for r in p.acquired_records
    ]


def values(response: Any) -> dict[int, bytes]:
    """The records the answer carries, by offset, as a client reads them."""
    found = {}
    for topic in response.responses:
        for partition in topic.partitions:
            data = bytes(partition.records or b"")
            for pos, header in iter_batches(data):
                batch = memoryview(data)[pos : pos + header.size]
                for record in iter_records(batch, header):
                    found[record.offset] = record.value
    return found


def new_topic(broker: BrokerProcess) -> tuple[str, uuid.UUID]:
    name = f"share-{next(_topics)}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    wire = Wire(broker)
    try:
        return name, topic_id_of(wire, name)
    finally:
        wire.close()


def produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=0)
        producer.flush(30)  # one batch each, so that acquisition can split them
    assert producer.flush(30) == 0


def opened(broker: BrokerProcess, count: int, members: int = 1) -> tuple[list[Member], str]:
    """Members of a new group, each with a share session on a new topic, which then gets
    `count` records (the group starts at the log end: share.auto.offset.reset=latest)."""
    topic, topic_id = new_topic(broker)
    group = f"{topic}-group"
    consumers = [Member(broker, group, topic_id) for _ in range(members)]
    for member in consumers:
        assert acquired(member.fetch()) == []
    produce(broker, topic, count)
    return consumers, topic


def test_share_apis_are_advertised_at_v1(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    response = wire.call(
        ApiVersionsRequest[3](client_software_name="t", client_software_version="1"),
        ApiVersionsResponse,
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[78] == (1, 1) and ranges[79] == (1, 1)


def test_records_go_to_one_member_and_accepted_ones_never_come_back(
    broker: BrokerProcess,
) -> None:
    (a, b), _ = opened(broker, 5, members=2)
    got = a.fetch(max_wait_ms=5_000)
    assert acquired(got) == [(0, 4, 1)]
    assert values(got) == {i: b"v%d" % i for i in range(5)}
    assert got.acquisition_lock_timeout_ms == LOCK_MS
    # Held by a: b gets nothing, after waiting what it asked.
    started = time.monotonic()
    assert acquired(b.fetch(max_wait_ms=300)) == []
    assert time.monotonic() - started >= 0.25
    assert only_partition(a.acknowledge([(0, 4, [ACCEPT])])).error_code == ErrorCode.NONE
    time.sleep(LOCK_MS / 1000 + 0.3)  # past the lock: accepted records stay accepted
    assert acquired(b.fetch(max_wait_ms=200)) == []
    assert acquired(a.fetch(max_wait_ms=200)) == []


def test_release_redelivers_with_a_higher_count_and_reject_archives(
    broker: BrokerProcess,
) -> None:
    (a, b), _ = opened(broker, 3, members=2)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]
    # Acknowledgements ride on the next fetch, one type per offset.
    got = a.fetch([(0, 2, [ACCEPT, RELEASE, REJECT])], max_wait_ms=5_000)
    assert only_partition(got).acknowledge_error_code == ErrorCode.NONE
    assert acquired(got) == [(1, 1, 2)]
    assert values(got)[1] == b"v1"
    # Released at the delivery limit: archived, delivered to no one again.
    got = a.fetch([(1, 1, [RELEASE])], max_wait_ms=200)
    assert only_partition(got).acknowledge_error_code == ErrorCode.NONE
    assert acquired(got) == []
    assert acquired(b.fetch(max_wait_ms=200)) == []


def test_members_sharing_a_partition_each_get_an_even_share_of_its_record_locks(
    broker: BrokerProcess,
) -> None:
    """Beyond Kafka: four members asking for every record of a backlog as large as the
    lock cap (2,000 by default) each get a quarter, rather than the first all of it and
    the rest nothing."""
    (a, b, c, d), topic = opened(broker, 0, members=4)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 10})
    for i in range(2_000):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    runs = [acquired(m.fetch(max_wait_ms=5_000, max_records=2_000)) for m in (a, b, c, d)]
    counts = [sum(last - first + 1 for first, last, _ in got) for got in runs]
    # Whole batches of at most 10 records: a share may be passed by the rest of one.
    assert all(500 <= count < 510 for count in counts[:3]), counts
    assert sum(counts) == 2_000 and counts[3] > 0, counts


def test_a_lock_that_runs_out_wakes_another_members_fetch(broker: BrokerProcess) -> None:
    (a, b), _ = opened(broker, 2, members=2)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 1, 1)]
    started = time.monotonic()
    got = b.fetch(max_wait_ms=10_000)
    waited = time.monotonic() - started
    assert acquired(got) == [(0, 1, 2)]
    assert 0.5 < waited < 5, waited
    # a's lock ran out: its acknowledgement is refused, and b's records stay b's.
    refused = a.acknowledge([(0, 1, [ACCEPT])])
    assert only_partition(refused).error_code == ErrorCode.INVALID_RECORD_STATE
    assert only_partition(b.acknowledge([(0, 1, [ACCEPT])])).error_code == ErrorCode.NONE


def test_a_request_sent_behind_a_waiting_share_fetch_cuts_its_wait_short(
    broker: BrokerProcess,
) -> None:
    """As a Fetch's: a ShareFetch that waits for records answers, with none, as soon as
    the member sends another request behind it, which then need not wait out the poll."""
    [a], _ = opened(broker, 0)
    fetch = a.fetch_request(max_wait_ms=20_000)
    question = FindCoordinatorRequest[2](key=a.group, key_type=0)
    a.wire.send(fetch)
    time.sleep(0.5)  # the ShareFetch has parked
    started = time.monotonic()
    a.wire.send(question)
    fetched = a.wire.receive(fetch, ShareFetchResponse, behind=1)
    answered = a.wire.receive(question, FindCoordinatorResponse)
    waited = time.monotonic() - started
    assert (fetched.error_code, acquired(fetched)) == (ErrorCode.NONE, [])
    assert answered.error_code == ErrorCode.NONE
    assert waited < 5, f"the question waited {waited:.1f} s behind the ShareFetch"


def test_acknowledging_records_not_held_is_refused_and_changes_nothing(
    broker: BrokerProcess,
) -> None:
    (a, b), _ = opened(broker, 3, members=2)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 2, 1)]
    for member, acks in (
        (b, [(0, 2, [ACCEPT])]),  # a's records
        (a, [(0, 1, [ACCEPT]), (2, 9, [ACCEPT])]),  # past what was acquired
    ):
        refused = member.acknowledge(acks)
        assert only_partition(refused).error_code == ErrorCode.INVALID_RECORD_STATE
    # Nothing changed: a still holds all three, and may settle them.
    assert acquired(b.fetch(max_wait_ms=200)) == []
    accepted = a.acknowledge([(0, 2, [ACCEPT])])
    assert only_partition(accepted).error_code == ErrorCode.NONE


def test_share_session_epochs(broker: BrokerProcess) -> None:
    (a,), _ = opened(broker, 1)
    stale = a.fetch(epoch=a.epoch + 3)
    assert stale.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert a.acknowledge([], epoch=a.epoch + 1).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # Only ShareFetch opens a session; a member with none is told so.
    assert a.acknowledge([], epoch=0).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    stranger = Member(broker, a.group, a.topic_id)
    assert stranger.acknowledge([], epoch=1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert stranger.fetch(epoch=4).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    # The session goes on at the right epoch, and a full fetch may carry no acknowledgement.
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 0, 1)]
    refused = a.fetch([(0, 0, [ACCEPT])], epoch=0)
    assert refused.error_code == ErrorCode.INVALID_REQUEST


def test_the_last_request_of_a_session_releases_what_the_member_holds(
    broker: BrokerProcess,
) -> None:
    (a, b), _ = opened(broker, 2, members=2)
    assert acquired(a.fetch(max_wait_ms=5_000)) == [(0, 1, 1)]
    closing = a.acknowledge([(0, 0, [ACCEPT])], epoch=-1)
    assert only_partition(closing).error_code == ErrorCode.NONE
    assert acquired(b.fetch(max_wait_ms=5_000)) == [(1, 1, 2)]
    assert a.fetch(epoch=1).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_bad_requests_get_kafka_errors(broker: BrokerProcess) -> None:
    (a,), _ = opened(broker, 1)
    overlapping = a.fetch([(0, 3, [ACCEPT]), (2, 5, [ACCEPT])], epoch=a.epoch)
    assert overlapping.error_code == ErrorCode.INVALID_REQUEST
    got = Member(broker, a.group, uuid.uuid4()).fetch()
    assert only_partition(got).error_code == ErrorCode.UNKNOWN_TOPIC_ID
    nameless = Member(broker, "", a.topic_id)
    assert nameless.fetch().error_code == ErrorCode.INVALID_REQUEST
