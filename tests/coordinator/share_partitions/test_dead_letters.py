"""Which archived records a share partition reports for its group's dead-letter topic,
and why: rejected, or the delivery limit reached (by a release, a lock running out, a
share session closing, or under the leader before a load); gaps, acceptances and
aborted transactions are not. And what their dead letters say (KIP-1191's headers)."""

from __future__ import annotations

from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.config import SharePartitionConfig
from herdless.coordinator.share_partitions.dead_letters import (
    ArchivedRecord,
    ArchiveReason,
    dead_letter_headers,
    dead_letter_partition,
)
from herdless.coordinator.share_partitions.partition import SharePartition
from herdless.coordinator.share_state.state import PartitionState, RecordState, StateBatch

LOCK_MS = 30_000
A = "member-a"
REJECTED = ArchiveReason.REJECTED
LIMIT = ArchiveReason.DELIVERY_LIMIT_REACHED


def partition(limit: int = 3) -> SharePartition:
    config = SharePartitionConfig(delivery_count_limit=limit, record_lock_duration_ms=LOCK_MS)
    return SharePartition(config, 0)


def ack(first: int, last: int, *types: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def test_reject_reports_each_record_with_its_delivery_count() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 3)], 100, 0)
    sp.acknowledge(A, [ack(0, 0, AcknowledgeType.RELEASE)])
    sp.acquire(A, 0, [(0, 3)], 100, 1)
    change = sp.acknowledge(
        A,
        [ack(0, 3, AcknowledgeType.REJECT, AcknowledgeType.ACCEPT, AcknowledgeType.GAP,
             AcknowledgeType.REJECT)],
    )  # fmt: skip
    # Accepted and gap offsets are archived silently; rejected ones are told of.
    assert change.archived == (ArchivedRecord(0, 2, REJECTED), ArchivedRecord(3, 1, REJECTED))
    assert change.start_offset == 4


def test_release_below_the_limit_reports_nothing_and_at_the_limit_reports_it() -> None:
    sp = partition(limit=2)
    sp.acquire(A, 0, [(0, 0)], 100, 0)
    assert sp.acknowledge(A, [ack(0, 0, AcknowledgeType.RELEASE)]).archived == ()
    sp.acquire(A, 0, [(0, 0)], 100, 1)
    change = sp.acknowledge(A, [ack(0, 0, AcknowledgeType.RELEASE)])
    assert change.archived == (ArchivedRecord(0, 2, LIMIT),)


def test_a_lock_running_out_at_the_limit_reports_the_limit() -> None:
    sp = partition(limit=2)
    sp.acquire(A, 0, [(0, 1)], 100, 0)
    first = sp.expire_locks(LOCK_MS)
    assert first is not None and first.archived == ()
    sp.acquire(A, 0, [(0, 1)], 100, LOCK_MS)
    second = sp.expire_locks(2 * LOCK_MS)
    assert second is not None
    assert second.archived == (ArchivedRecord(0, 2, LIMIT), ArchivedRecord(1, 2, LIMIT))


def test_a_session_closing_at_the_limit_reports_the_limit() -> None:
    sp = partition(limit=2)
    sp.acquire(A, 0, [(0, 0)], 100, 0)
    sp.release_member(A)
    sp.acquire(A, 0, [(0, 0)], 100, 1)
    change = sp.release_member(A)
    assert change is not None and change.archived == (ArchivedRecord(0, 2, LIMIT),)


def test_aborted_transactions_are_archived_without_a_report() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 1), (2, 3)], 100, 0, aborted={(0, 1)})
    change = sp.acknowledge(A, [ack(2, 3, AcknowledgeType.ACCEPT)])
    assert change.archived == () and change.start_offset == 4


def test_a_report_is_made_once() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 1)], 100, 0)
    assert len(sp.acknowledge(A, [ack(0, 0, AcknowledgeType.REJECT)]).archived) == 1
    assert sp.acknowledge(A, [ack(1, 1, AcknowledgeType.ACCEPT)]).archived == ()


def test_loading_records_acquired_at_their_last_delivery_reports_them_once() -> None:
    # The leader before went away while offsets 5-6 were out for their last delivery.
    state = PartitionState(
        state_epoch=1,
        start_offset=5,
        leader_epoch=0,
        batches=(
            StateBatch(5, 6, RecordState.ACQUIRED, 3),
            StateBatch(7, 7, RecordState.ACQUIRED, 1),
        ),
    )
    config = SharePartitionConfig(delivery_count_limit=3)
    sp = SharePartition.loaded(config, state)
    change = sp.archived_at_load()
    assert change is not None
    assert change.archived == (ArchivedRecord(5, 3, LIMIT), ArchivedRecord(6, 3, LIMIT))
    # Written as Archived: the start offset moves past them; 7 is delivered again.
    assert change.start_offset == 7
    assert sp.next_fetch_offset() == 7
    assert sp.archived_at_load() is None


def test_dead_letter_headers_name_the_group_topic_partition_offset_count_and_reason() -> None:
    headers = dead_letter_headers("g", "orders", 2, ArchivedRecord(41, 5, LIMIT))
    assert headers == [
        ("__dlq.errors.topic", b"orders"),
        ("__dlq.errors.partition", b"2"),
        ("__dlq.errors.offset", b"41"),
        ("__dlq.errors.group", b"g"),
        ("__dlq.errors.delivery.count", b"5"),
        ("__dlq.errors.reason", b"delivery limit reached"),
    ]
    assert (
        dict(dead_letter_headers("g", "t", 0, ArchivedRecord(0, 1, REJECTED)))[
            "__dlq.errors.reason"
        ]
        == b"rejected"
    )


def test_dead_letters_keep_the_partition_index_wrapped_round() -> None:
    assert [dead_letter_partition(p, 2) for p in range(5)] == [0, 1, 0, 1, 0]
    assert dead_letter_partition(7, 1) == 0
