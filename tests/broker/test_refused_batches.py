"""Which out-of-order batches a leader answers with the refusal of the batch before them."""

from __future__ import annotations

from herdless.broker.replication.refused_batches import REFUSAL_MEMORY_MS, RefusedBatches
from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import CONTROL_FLAG, BatchHeader, encode_batch, parse_header

TOPIC = "t"


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def header(
    sequence: int, *, pid: int = 7, epoch: int = 0, count: int = 1, flags: int = 0
) -> BatchHeader:
    raw = encode_batch(
        [(0, None, b"v")] * count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        flags=flags,
    )
    return parse_header(raw)


def test_the_batch_behind_a_refused_one_gets_its_refusal_until_the_producer_writes() -> None:
    refused = RefusedBatches(Clock())
    refused.refused(TOPIC, 0, header(10, count=5), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    refused.refused(TOPIC, 0, header(15, count=5), ErrorCode.NOT_ENOUGH_REPLICAS)
    # The gap starts at the first refused batch, whichever refusal came last.
    assert refused.gap_cause(TOPIC, 0, header(20)) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert refused.gap_cause(TOPIC, 0, header(15)) == ErrorCode.NOT_ENOUGH_REPLICAS
    # Not a gap behind the refused batch: the batch itself, or one before it.
    assert refused.gap_cause(TOPIC, 0, header(10)) is None
    assert refused.gap_cause(TOPIC, 0, header(4)) is None
    refused.written(TOPIC, 0, header(10, count=5))
    assert refused.gap_cause(TOPIC, 0, header(20)) is None
    assert len(refused) == 0


def test_only_that_producer_epoch_and_partition_are_concerned() -> None:
    refused = RefusedBatches(Clock())
    refused.refused(TOPIC, 0, header(10), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert refused.gap_cause(TOPIC, 1, header(20)) is None
    assert refused.gap_cause("other", 0, header(20)) is None
    assert refused.gap_cause(TOPIC, 0, header(20, pid=8)) is None
    assert refused.gap_cause(TOPIC, 0, header(20, epoch=1)) is None
    # A new epoch starts a new sequence space: its refusal replaces the old epoch's.
    refused.refused(TOPIC, 0, header(3, epoch=1), ErrorCode.NOT_ENOUGH_REPLICAS)
    assert refused.gap_cause(TOPIC, 0, header(5, epoch=1)) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert refused.gap_cause(TOPIC, 0, header(20)) is None


def test_lasting_errors_and_unsequenced_batches_are_not_remembered() -> None:
    refused = RefusedBatches(Clock())
    refused.refused(TOPIC, 0, header(10), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    refused.refused(TOPIC, 0, header(10), ErrorCode.MESSAGE_TOO_LARGE)
    refused.refused(TOPIC, 0, header(-1, pid=-1, epoch=-1), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    refused.refused(TOPIC, 0, header(10, flags=CONTROL_FLAG), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert len(refused) == 0
    assert refused.gap_cause(TOPIC, 0, header(20)) is None


def test_a_refusal_is_forgotten_once_the_batches_behind_it_have_all_arrived() -> None:
    clock = Clock()
    refused = RefusedBatches(clock)
    refused.refused(TOPIC, 0, header(10), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    clock.now = REFUSAL_MEMORY_MS - 1
    assert refused.gap_cause(TOPIC, 0, header(20)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    clock.now = REFUSAL_MEMORY_MS
    assert refused.gap_cause(TOPIC, 0, header(20)) is None
    # A refusal after the memory ran out starts a gap of its own.
    refused.refused(TOPIC, 0, header(30), ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert refused.gap_cause(TOPIC, 0, header(20)) is None
    assert refused.gap_cause(TOPIC, 0, header(31)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
