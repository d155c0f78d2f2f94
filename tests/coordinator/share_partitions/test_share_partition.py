"""A share partition alone, with a fake clock: acquisition, acknowledgement, lock expiry,
the delivery limit, the start offset, the lock cap, and loading persisted state."""

from __future__ import annotations

import pytest

from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
    InvalidAcknowledgement,
    acknowledgement_batches,
)
from herdless.coordinator.share_partitions.config import SharePartitionConfig
from herdless.coordinator.share_partitions.dead_letters import ArchivedRecord, ArchiveReason
from herdless.coordinator.share_partitions.partition import (
    AcquiredRecords,
    InvalidRecordState,
    SharePartition,
    StateChange,
)
from herdless.coordinator.share_state.state import PartitionState, RecordState, StateBatch

LOCK_MS = 30_000
A, B = "member-a", "member-b"


def partition(start: int = 0, **config: int) -> SharePartition:
    return SharePartition(SharePartitionConfig(record_lock_duration_ms=LOCK_MS, **config), start)


def limit_reached(offset: int, delivery_count: int) -> ArchivedRecord:
    return ArchivedRecord(offset, delivery_count, ArchiveReason.DELIVERY_LIMIT_REACHED)


def ack(first: int, last: int, *types: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def test_acquire_gives_new_records_once_with_a_first_delivery() -> None:
    sp = partition()
    got = sp.acquire(A, 0, [(0, 4), (5, 9)], max_records=100, now_ms=0)
    assert got == (AcquiredRecords(0, 9, 1),)
    assert sp.end_offset == 10
    assert sp.next_fetch_offset() == 10
    # Another member reading the same batches gets nothing: they are A's.
    assert sp.acquire(B, 0, [(0, 4), (5, 9)], max_records=100, now_ms=1) == ()
    assert sp.next_lock_deadline() == LOCK_MS


def test_max_records_stops_at_a_batch_boundary() -> None:
    sp = partition()
    got = sp.acquire(A, 0, [(0, 4), (5, 9)], max_records=3, now_ms=0)
    assert got == (AcquiredRecords(0, 4, 1),)
    assert sp.next_fetch_offset() == 5


def test_a_read_for_an_acquisition_stops_after_max_records_it_could_take() -> None:
    """What the broker reads of the log for one fetch: enough for max_records, counting
    the Available records in flight and new ones past them, within the lock cap."""
    sp = partition(max_record_locks=50)
    assert sp.read_end(0, 10) == 10
    sp.acquire(A, 0, [(0, 9), (10, 19)], max_records=100, now_ms=0)
    # Records 0-19 are A's: a read for B starts past them and needs 10 new ones.
    assert sp.read_end(sp.next_fetch_offset(), 10) == 30
    sp.acknowledge(A, [ack(4, 6, AcknowledgeType.RELEASE)])
    # Three Available in flight (4-6), then 7 new ones from 20.
    assert sp.read_end(sp.next_fetch_offset(), 10) == 27
    assert sp.read_end(sp.next_fetch_offset(), 2) == 6
    # Never past the start offset + max record locks.
    assert sp.read_end(sp.next_fetch_offset(), 500) == 50


def test_accept_moves_the_start_offset_and_writes_it() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 9)], 100, 0)
    change = sp.acknowledge(A, [ack(0, 3, AcknowledgeType.ACCEPT)])
    assert change == StateChange(4, ())
    assert sp.start_offset == 4
    change = sp.acknowledge(A, [ack(6, 9, AcknowledgeType.ACCEPT)])
    assert change == StateChange(4, (StateBatch(6, 9, RecordState.ACKNOWLEDGED, 1),))
    change = sp.acknowledge(A, [ack(4, 5, AcknowledgeType.ACCEPT)])
    assert change == StateChange(10, ())
    assert sp.end_offset == 10


def test_release_redelivers_with_a_higher_count() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 2)], 100, 0)
    change = sp.acknowledge(A, [ack(0, 2, AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                    AcknowledgeType.ACCEPT)])  # fmt: skip
    assert change == StateChange(
        1,
        (
            StateBatch(1, 1, RecordState.AVAILABLE, 1),
            StateBatch(2, 2, RecordState.ACKNOWLEDGED, 1),
        ),
    )
    assert sp.next_fetch_offset() == 1
    assert sp.acquire(B, 1, [(0, 2)], 100, 5) == (AcquiredRecords(1, 1, 2),)


def test_reject_and_gap_archive() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 3)], 100, 0)
    change = sp.acknowledge(A, [ack(1, 1, AcknowledgeType.REJECT), ack(2, 2, AcknowledgeType.GAP)])
    assert change.batches == (StateBatch(1, 2, RecordState.ARCHIVED, 1),)
    assert sp.acquire(B, 0, [(0, 3)], 100, 1) == ()


def test_acknowledging_what_the_member_does_not_hold_changes_nothing() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 4)], 100, 0)
    before = [(sp.record(o).state, sp.record(o).member_id) for o in range(5)]
    for member, batches in (
        (B, [ack(0, 0, AcknowledgeType.ACCEPT)]),  # another member's
        (A, [ack(3, 7, AcknowledgeType.ACCEPT)]),  # past the end offset
        # The first batch is fine, the second not: neither is applied.
        (A, [ack(0, 1, AcknowledgeType.ACCEPT), ack(4, 5, AcknowledgeType.ACCEPT)]),
    ):
        with pytest.raises(InvalidRecordState):
            sp.acknowledge(member, batches)
    assert [(sp.record(o).state, sp.record(o).member_id) for o in range(5)] == before
    sp.acknowledge(A, [ack(1, 1, AcknowledgeType.ACCEPT)])
    with pytest.raises(InvalidRecordState):  # once is all
        sp.acknowledge(A, [ack(1, 1, AcknowledgeType.RELEASE)])


def test_offsets_below_the_start_offset_are_passed_over() -> None:
    sp = partition(start=10)
    sp.acquire(A, 10, [(8, 12)], 100, 0)
    # The batch starts below the start offset: those offsets are settled already and
    # passed over; the ones from the start offset on are accepted.
    assert sp.acknowledge(A, [ack(8, 12, AcknowledgeType.ACCEPT)]) == StateChange(13, ())
    assert sp.start_offset == 13


def test_a_batch_wholly_below_the_start_offset_is_refused() -> None:
    """A accepted 0-4; B held them under a state read back without A's acquisition (a
    new leader epoch): B's acceptance must not be confirmed as well."""
    sp = partition()
    sp.acquire(A, 0, [(0, 4)], 100, 0)
    sp.acknowledge(A, [ack(0, 4, AcknowledgeType.ACCEPT)])
    with pytest.raises(InvalidRecordState, match="below the start offset 5"):
        sp.acknowledge(B, [ack(0, 4, AcknowledgeType.ACCEPT)])
    with pytest.raises(InvalidRecordState):  # nor A's own, sent twice
        sp.acknowledge(A, [ack(2, 3, AcknowledgeType.ACCEPT)])
    assert sp.start_offset == 5


def test_a_lock_that_runs_out_releases_then_archives_at_the_limit() -> None:
    sp = partition(delivery_count_limit=2)
    sp.acquire(A, 0, [(0, 1)], 100, 0)
    assert sp.expire_locks(LOCK_MS - 1) is None
    change = sp.expire_locks(LOCK_MS)
    assert change == StateChange(0, (StateBatch(0, 1, RecordState.AVAILABLE, 1),))
    with pytest.raises(InvalidRecordState):  # A's lock ran out
        sp.acknowledge(A, [ack(0, 0, AcknowledgeType.ACCEPT)])
    assert sp.acquire(B, 0, [(0, 1)], 100, LOCK_MS) == (AcquiredRecords(0, 1, 2),)
    change = sp.expire_locks(2 * LOCK_MS)
    # Archived at the limit, and behind the start; said so for the dead-letter topic.
    assert change == StateChange(2, (), (limit_reached(0, 2), limit_reached(1, 2)))
    assert sp.next_lock_deadline() is None


def test_release_at_the_limit_archives() -> None:
    sp = partition(delivery_count_limit=2)
    sp.acquire(A, 0, [(0, 0)], 100, 0)
    sp.acknowledge(A, [ack(0, 0, AcknowledgeType.RELEASE)])
    sp.acquire(A, 0, [(0, 0)], 100, 1)
    assert sp.acknowledge(A, [ack(0, 0, AcknowledgeType.RELEASE)]) == StateChange(
        1, (), (limit_reached(0, 2),)
    )


def test_a_member_whose_session_closes_releases_its_records() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 1)], 1, 0)
    sp.acquire(B, 2, [(2, 3)], 1, 0)
    change = sp.release_member(A)
    assert change == StateChange(0, (StateBatch(0, 1, RecordState.AVAILABLE, 1),))
    assert sp.release_member(A) is None
    assert sp.record(2).member_id == B


def test_no_record_is_acquired_past_the_lock_cap() -> None:
    sp = partition(max_record_locks=4)
    assert sp.acquire(A, 0, [(0, 9)], 100, 0) == (AcquiredRecords(0, 3, 1),)
    assert not sp.can_acquire()
    assert sp.acquire(B, 4, [(0, 9)], 100, 0) == ()
    sp.acknowledge(A, [ack(0, 1, AcknowledgeType.ACCEPT)])
    assert sp.can_acquire()
    assert sp.acquire(B, 4, [(0, 9)], 100, 0) == (AcquiredRecords(4, 5, 1),)


def test_offsets_the_log_skips_are_acquired_as_gaps() -> None:
    sp = partition()
    # 3 was compacted away; 0-1 come in a batch the read began in the middle of.
    got = sp.acquire(A, 2, [(0, 2), (4, 5)], 100, 0)
    assert got == (AcquiredRecords(2, 5, 1),)
    assert sp.start_offset == 0 and sp.record(0).state == RecordState.AVAILABLE


def test_the_log_start_moving_past_the_start_offset() -> None:
    sp = partition()
    sp.acquire(A, 0, [(0, 9)], 100, 0)
    assert sp.move_start(4) == StateChange(4, ())
    assert sp.move_start(2) is None
    assert sp.acknowledge(A, [ack(0, 9, AcknowledgeType.ACCEPT)]) == StateChange(10, ())


def test_loading_makes_acquired_records_available() -> None:
    state = PartitionState(
        state_epoch=3,
        start_offset=5,
        leader_epoch=0,
        batches=(
            StateBatch(3, 6, RecordState.ACKNOWLEDGED, 1),
            StateBatch(7, 8, RecordState.ACQUIRED, 2),
            StateBatch(10, 10, RecordState.AVAILABLE, 5),
        ),
    )
    sp = SharePartition.loaded(SharePartitionConfig(), state)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (7, 11, 3)
    assert sp.record(7).state == RecordState.AVAILABLE
    assert sp.record(9).delivery_count == 0  # never delivered: read from the log afresh
    assert sp.record(10).state == RecordState.ARCHIVED  # delivered to the limit
    got = sp.acquire(A, 7, [(7, 11)], 100, 0)
    assert got == (AcquiredRecords(7, 8, 3), AcquiredRecords(9, 9, 1), AcquiredRecords(11, 11, 1))


def test_malformed_acknowledgements_are_refused_whatever_the_state() -> None:
    assert acknowledgement_batches([(0, 1, [1]), (2, 3, [0, 3])]) == (
        ack(0, 1, AcknowledgeType.ACCEPT),
        ack(2, 3, AcknowledgeType.GAP, AcknowledgeType.REJECT),
    )
    for raw in (
        [(3, 2, [1])],  # not a range
        [(0, 4, [1]), (4, 5, [1])],  # overlapping
        [(5, 6, [1]), (0, 1, [1])],  # descending
        [(0, 2, [1, 1])],  # neither one type nor one per offset
        [(0, 0, [4])],  # RENEW is v2's
        [(0, 0, [])],
    ):
        with pytest.raises(InvalidAcknowledgement):
            acknowledgement_batches(raw)


def test_aborted_batches_are_archived_not_acquired() -> None:
    sp = partition()
    got = sp.acquire(A, 0, [(0, 1), (2, 3), (4, 4)], 100, 0, aborted={(0, 1), (4, 4)})
    assert got == (AcquiredRecords(2, 3, 1),)
    assert sp.start_offset == 2
    assert sp.record(4).state == RecordState.ARCHIVED
    sp.acknowledge(A, [ack(2, 3, AcknowledgeType.ACCEPT)])
    assert (sp.start_offset, sp.end_offset) == (5, 5)
