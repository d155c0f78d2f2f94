"""The race between verifying a transaction's first batch with its coordinator and
appending it (Kafka's VerificationGuard): a transaction that ends in between must not
get the batch, nor may a newer transaction take an older verification for its own."""

from __future__ import annotations

import pytest

from herdless.protocol.control_records import ControlRecordType, EndTransactionMarker
from herdless.storage import PartitionLog
from herdless.storage.errors import InvalidTxnState
from herdless.storage.verification_guard import SENTINEL, VerificationGuard
from tests.storage.batches import batch, split
from tests.storage.conftest import OpenLog

PID = 8
ABORT = EndTransactionMarker(ControlRecordType.ABORT, 0)


def append_transactional(
    log: PartitionLog, sequence: int, guard: VerificationGuard, epoch: int = 0
) -> int:
    raw = batch(producer_id=PID, producer_epoch=epoch, base_sequence=sequence, transactional=True)
    return log.append(split(raw), 0, verification=guard).first_offset


def test_an_abort_between_verification_and_append_keeps_the_batch_out(
    open_log: OpenLog,
) -> None:
    log = open_log()
    guard = log.start_transaction_verification(PID, 0, now_ms=0)
    # The coordinator answered "in the transaction"; before the append, the
    # transaction times out and its ABORT marker is written here.
    log.append_end_txn_marker(PID, 0, ABORT, 0)
    end = log.log_end_offset
    with pytest.raises(InvalidTxnState, match="not part of an ongoing transaction"):
        append_transactional(log, 0, guard)
    assert log.log_end_offset == end
    assert log.first_unstable_offset is None


def test_a_stale_verification_does_not_open_the_next_transaction(open_log: OpenLog) -> None:
    """The ABA case: a verification started, the transaction aborted, a new one began
    and started its own verification; the first answer must not pass for the second."""
    log = open_log()
    stale = log.start_transaction_verification(PID, 0, now_ms=0)
    log.append_end_txn_marker(PID, 0, ABORT, 0)
    fresh = log.start_transaction_verification(PID, 0, now_ms=0)
    assert fresh is not stale
    with pytest.raises(InvalidTxnState):
        append_transactional(log, 0, stale)
    assert append_transactional(log, 0, fresh) == 1
    assert log.first_unstable_offset == 1


def test_once_open_the_transaction_needs_no_guard(open_log: OpenLog) -> None:
    log = open_log()
    # Nothing verified: the batch cannot open a transaction.
    with pytest.raises(InvalidTxnState):
        append_transactional(log, 0, SENTINEL)
    guard = log.start_transaction_verification(PID, 0, now_ms=0)
    # A second request verifying meanwhile shares the verification under way.
    assert log.start_transaction_verification(PID, 0, now_ms=0) is guard
    assert append_transactional(log, 0, guard) == 0
    # The guard went with the append: the open transaction is what lets batches in now.
    assert log.producers.verification_guard(PID) is None
    assert log.start_transaction_verification(PID, 0, now_ms=0) is SENTINEL
    assert append_transactional(log, 1, SENTINEL) == 1
    log.append_end_txn_marker(PID, 0, ABORT, 0)
    with pytest.raises(InvalidTxnState):
        append_transactional(log, 2, SENTINEL)


def test_without_verification_nothing_is_checked(open_log: OpenLog) -> None:
    """transaction.partition.verification.enable=false: no guard is asked for."""
    log = open_log()
    raw = batch(producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)
    assert log.append(split(raw), 0).first_offset == 0


def test_an_unused_guard_is_forgotten_with_idle_producers(open_log: OpenLog) -> None:
    log = open_log()
    log.start_transaction_verification(PID, 0, now_ms=1_000)
    log.remove_expired_producers(now_ms=1_000 + 86_399_999)
    assert log.producers.verification_guard(PID) is not None
    log.remove_expired_producers(now_ms=1_000 + 86_400_000)
    assert log.producers.verification_guard(PID) is None
