"""Idempotent producers: retries recognised, gaps and stale epochs refused, state rebuilt."""

from __future__ import annotations

import pytest

from herdless.storage import AppendInfo, InvalidProducerEpoch, OutOfOrderSequence, PartitionLog
from tests.storage.batches import batch, offsets_of, split
from tests.storage.conftest import OpenLog

INT32_MAX = 2**31 - 1


def produce(
    log: PartitionLog, seq: int, count: int = 1, *, epoch: int = 0, pid: int = 7, now: int = 0
) -> AppendInfo:
    raw = batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return log.append(split(raw), now)


def test_a_retry_gets_the_original_offsets_and_writes_nothing(open_log: OpenLog) -> None:
    log = open_log()
    first = produce(log, 0, 3)
    produce(log, 3, 2)
    retry = produce(log, 0, 3)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 5
    assert produce(log, 3, 2).duplicate
    assert produce(log, 5).first_offset == 5


def test_only_the_last_five_batches_are_remembered(open_log: OpenLog) -> None:
    log = open_log()
    for seq in range(6):
        produce(log, seq)
    assert produce(log, 1).duplicate
    with pytest.raises(OutOfOrderSequence):
        produce(log, 0)


def test_a_gap_in_sequences_is_refused_and_nothing_written(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0, 2)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 3)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 1)  # overlaps a written batch without matching it
    assert log.log_end_offset == 2
    assert produce(log, 2).first_offset == 2


def test_every_batch_of_an_append_is_checked_before_any_is_written(open_log: OpenLog) -> None:
    log = open_log()
    good = batch(1, producer_id=7, producer_epoch=0, base_sequence=0)
    bad = batch(1, producer_id=7, producer_epoch=0, base_sequence=5)
    with pytest.raises(OutOfOrderSequence):
        log.append(split(good, bad), 0)
    assert log.log_end_offset == 0
    # Consecutive batches of one append follow each other.
    follow = batch(1, producer_id=7, producer_epoch=0, base_sequence=1)
    info = log.append(split(good, follow), 0)
    assert (info.first_offset, info.last_offset) == (0, 1)


def test_epochs(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0, 2, epoch=1)
    with pytest.raises(OutOfOrderSequence):
        produce(log, 4, epoch=2)  # a new epoch starts at sequence 0
    produce(log, 0, epoch=2)
    with pytest.raises(InvalidProducerEpoch):
        produce(log, 2, epoch=1)
    # A retry from the fenced epoch is not taken for a duplicate.
    with pytest.raises(InvalidProducerEpoch):
        produce(log, 0, 2, epoch=1)
    assert produce(log, 1, epoch=2).first_offset == 3


def test_an_unknown_producer_may_start_anywhere(open_log: OpenLog) -> None:
    log = open_log()
    assert produce(log, 1234, pid=99).first_offset == 0
    assert produce(log, 1235, pid=99).first_offset == 1


def test_sequences_wrap_after_int32_max(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, INT32_MAX - 1, 2)
    assert produce(log, 0).first_offset == 2


def test_producers_do_not_disturb_each_other_or_plain_batches(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0, pid=1)
    produce(log, 0, pid=2)
    log.append(split(batch()), 0)
    log.append(split(batch()), 0)
    assert produce(log, 1, pid=1).first_offset == 4
    assert produce(log, 0, pid=2).duplicate


def test_state_is_rebuilt_on_open(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14")
    produce(log, 0, 2, epoch=3)
    produce(log, 2, 2, epoch=3)
    log.close()
    again = open_log(segment_bytes="14")
    retry = produce(again, 0, 2, epoch=3)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 1)
    with pytest.raises(OutOfOrderSequence):
        produce(again, 5, epoch=3)
    with pytest.raises(InvalidProducerEpoch):
        produce(again, 4, epoch=2)
    assert produce(again, 4, epoch=3).first_offset == 4


def test_state_goes_with_the_segments_retention_deletes(open_log: OpenLog) -> None:
    log = open_log(segment_bytes="14")
    produce(log, 0, 2)
    log.append(split(batch()), 0)
    assert log.delete_records(3) == 3
    # The producer's batches are gone, so it is unknown again and may continue anywhere.
    assert produce(log, 40).first_offset == 3
    assert offsets_of(log.read(3, 100)) == [3]


def test_idle_producers_expire(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0, now=0)
    log.append(split(batch(first_timestamp=10**10)), 0)
    # Retention deletes segments; forgetting producers is a job of its own.
    assert log.apply_retention(now_ms=10**10) == 0
    assert log.producers.entry(7) is not None
    assert log.remove_expired_producers(now_ms=10**10) == 1
    # Expired (its last batch is a day old by its own timestamp), so any sequence goes.
    assert produce(log, 9).first_offset == 2


def test_a_producer_with_a_transaction_open_does_not_expire(open_log: OpenLog) -> None:
    log = open_log()
    log.append(split(batch(producer_id=8, base_sequence=0, transactional=True)), 0)
    produce(log, 0, pid=9)
    # Both a day old; only the one without an open transaction goes (Kafka's rule).
    assert log.remove_expired_producers(now_ms=1_000 + 86_400_000) == 1
    assert log.producers.entry(9) is None
    assert log.producers.entry(8) is not None
    assert log.first_unstable_offset == 0


def test_log_append_time_retry_reports_the_original_time(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_type="LogAppendTime")
    first = produce(log, 0, now=1_000)
    retry = produce(log, 0, now=2_000)
    assert retry.duplicate and retry.log_append_time_ms == first.log_append_time_ms == 1_000


def test_a_coordinators_transactional_batches_are_checked_for_their_epoch_alone(
    open_log: OpenLog,
) -> None:
    """What a group coordinator writes for TxnOffsetCommit (Kafka's AppendOrigin.COORDINATOR):
    each batch of a producer at sequence 0, every one written, none taken for a retry."""
    log = open_log()

    def coordinator_batch(epoch: int) -> AppendInfo:
        raw = batch(
            2, key=b"k", producer_id=9, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        return log.append(split(raw), 0, keyed=True)

    first, second = coordinator_batch(1), coordinator_batch(1)
    assert not second.duplicate
    assert (first.first_offset, second.first_offset) == (0, 2)
    assert coordinator_batch(2).first_offset == 4
    with pytest.raises(InvalidProducerEpoch):
        coordinator_batch(1)
    assert log.log_end_offset == 6
    # A client's batch of the same shape is still a retry.
    raw = batch(2, key=b"k", producer_id=9, producer_epoch=2, base_sequence=0, transactional=True)
    assert log.append(split(raw), 0).duplicate
