"""TxnOffsetCommit on a broker process, sent raw: the offsets are written to
`__consumer_offsets` as the producer's transactional batches, stay out of OffsetFetch,
make a fetch that requires stable offsets answer UNSTABLE_OFFSET_COMMIT, and are still
pending after a restart replays the log.

What makes them count, the transaction coordinator's markers (WriteTxnMarkers, which
calls GroupCoordinator.complete_transaction), is checked in the coordinator's tests
(tests/coordinator/runtime/test_transaction_markers.py) until markers are written here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import (
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from herdless.coordinator import partition_for
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import iter_batches
from tests.support.broker import BrokerProcess, module_broker
from tests.support.wire import Wire, simple_commit

TOPIC = "txn-offsets"
PRODUCER_ID, PRODUCER_EPOCH = 4242, 0
OFFSETS_PARTITIONS = 50


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("txn-offsets") / "data") as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield process


def txn_commit(
    wire: Wire, version: int, group: str, offsets: dict[tuple[str, int], int], **member: Any
) -> dict[tuple[str, int], ErrorCode]:
    Request = TxnOffsetCommitRequest[version]
    Topic = Request.TxnOffsetCommitRequestTopic
    Partition = Topic.TxnOffsetCommitRequestPartition
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            Partition(partition_index=partition, committed_offset=offset, committed_metadata="m")
        )
    fields = {"generation_id": -1, "member_id": "", "group_instance_id": None} | member
    request = Request(
        transactional_id="txn-a",
        group_id=group,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        topics=[Topic(name=name, partitions=ps) for name, ps in topics.items()],
        **(fields if version >= 3 else {}),
    )
    response = wire.call(request, TxnOffsetCommitResponse)
    return {
        (t.name, p.partition_index): ErrorCode(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def fetch(wire: Wire, group: str, partitions: list[int], stable: bool) -> dict[int, Any]:
    Topic = OffsetFetchRequest[7].OffsetFetchRequestTopic
    request = OffsetFetchRequest[7](
        group_id=group,
        topics=[Topic(name=TOPIC, partition_indexes=partitions)],
        require_stable=stable,
    )
    response = wire.call(request, OffsetFetchResponse)
    assert response.error_code == ErrorCode.NONE
    [topic] = response.topics
    return {
        p.partition_index: (p.committed_offset, ErrorCode(p.error_code)) for p in topic.partitions
    }


def offsets_batches(broker: BrokerProcess, group: str) -> list[Any]:
    """The batch headers of the group's `__consumer_offsets` partition, read from its files."""
    partition = partition_for(group, OFFSETS_PARTITIONS)
    directory = Path(broker.data_dir) / f"__consumer_offsets-{partition}"
    return [
        header
        for segment in sorted(directory.glob("*.log"))
        for _, header in iter_batches(segment.read_bytes())
    ]


def test_transactional_offsets_are_pending_unstable_and_survive_a_restart(
    broker: BrokerProcess,
) -> None:
    group = "txn-group"
    wire = Wire(broker)
    try:
        assert txn_commit(wire, 3, group, {(TOPIC, 0): 5}) == {(TOPIC, 0): ErrorCode.NONE}
        # A second commit of the same shape in the same transaction is written too: the
        # log takes neither for a retry of the other.
        assert txn_commit(wire, 3, group, {(TOPIC, 0): 6}) == {(TOPIC, 0): ErrorCode.NONE}
        transactional = [h for h in offsets_batches(broker, group) if h.producer_id == PRODUCER_ID]
        assert len(transactional) == 2
        assert all(h.is_transactional and not h.is_control for h in transactional)
        assert {h.producer_epoch for h in transactional} == {PRODUCER_EPOCH}

        assert fetch(wire, group, [0, 1], stable=True) == {
            0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
            1: (-1, ErrorCode.NONE),
        }
        # Without require_stable: the committed offset, which the transaction has not set.
        assert fetch(wire, group, [0], stable=False) == {0: (-1, ErrorCode.NONE)}
    finally:
        wire.close()

    broker.restart()
    wire = Wire(broker)
    try:
        assert fetch(wire, group, [0], stable=True) == {0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    finally:
        wire.close()


def test_every_version_is_served_and_a_plain_commit_beside_it_counts(
    broker: BrokerProcess,
) -> None:
    group = "txn-versions"
    wire = Wire(broker)
    try:
        for version in range(5):
            assert txn_commit(wire, version, group, {(TOPIC, 1): version}) == {
                (TOPIC, 1): ErrorCode.NONE
            }
        wire.call(simple_commit(group, {(TOPIC, 0): 9}), OffsetCommitResponse)
        assert fetch(wire, group, [0, 1], stable=True) == {
            0: (9, ErrorCode.NONE),
            1: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        }
    finally:
        wire.close()


def test_unknown_partitions_and_stale_members_are_refused(broker: BrokerProcess) -> None:
    wire = Wire(broker)
    try:
        assert txn_commit(wire, 3, "txn-refused", {(TOPIC, 7): 1, ("no-such-topic", 0): 1}) == {
            (TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        # A member's commit to a group that does not exist (v3+ names one).
        assert txn_commit(
            wire, 3, "txn-nobody", {(TOPIC, 0): 1}, generation_id=4, member_id="m-1"
        ) == {(TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
        assert txn_commit(wire, 3, "", {(TOPIC, 0): 1}) == {(TOPIC, 0): ErrorCode.INVALID_GROUP_ID}
    finally:
        wire.close()
