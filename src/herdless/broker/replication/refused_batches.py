"""Idempotent batches a leader refused unwritten, so that the batches sent behind one
are refused the same way instead of as OUT_OF_ORDER_SEQUENCE_NUMBER.

A producer pipelines up to five batches of a partition. When the leader refuses the
first unwritten with a passing error (NOT_LEADER_OR_FOLLOWER while it cannot prove its
ZooKeeper session, NOT_ENOUGH_REPLICAS while the ISR is short) and the cause is gone
by the time the second is read, the second's sequence leaves a gap: Kafka's answer is
OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka (2.15 and its main branch of July 2026; issue
#4953) answers that by bumping the producer epoch and renumbering every message not yet
acknowledged, on every partition, including batches that leaders wrote but whose answer
was lost or an error: those are written a second time under the new epoch. The Java
client retries such a batch instead. Refusing the batch behind a refused one
with the same passing error makes every client retry both in order, which fills the
gap with nothing renumbered.

Only a gap that starts at a refused batch is answered so: any other gap (a batch the
log lost) is out of order as in Kafka. A refusal is forgotten once a batch of its
producer is written to the partition, or after REFUSAL_MEMORY_MS, a producer's
request timeout, by which time the batches pipelined behind it have all arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from herdless.protocol.errors import ErrorCode
from herdless.protocol.records import BatchHeader

REFUSAL_MEMORY_MS = 30_000
# The refusals that pass on their own: a producer retries the batch as it was.
PASSING_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
# Past this many remembered refusals the expired ones are swept out.
_SWEEP_ABOVE = 1024


class Refusal(NamedTuple):
    producer_epoch: int
    # The lowest refused sequence since the producer last wrote here: where its gap starts.
    base_sequence: int
    error: ErrorCode
    at_ms: int


class RefusedBatches:
    """Per partition and producer, the first batch refused unwritten (thread-unsafe: the
    event loop's)."""

    def __init__(self, clock: Callable[[], int], memory_ms: int = REFUSAL_MEMORY_MS) -> None:
        """clock: monotonic milliseconds."""
        self._clock = clock
        self._memory_ms = memory_ms
        self._refused: dict[tuple[str, int, int], Refusal] = {}

    def __len__(self) -> int:
        return len(self._refused)

    def refused(self, topic: str, partition: int, header: BatchHeader, error: ErrorCode) -> None:
        """The leader refused `header`'s batch, writing nothing."""
        if error not in PASSING_ERRORS or not _sequenced(header):
            return
        now = self._clock()
        if len(self._refused) > _SWEEP_ABOVE:
            self._sweep(now)
        key = (topic, partition, header.producer_id)
        held = self._refused.get(key)
        base_sequence = header.base_sequence
        if (
            held is not None
            and held.producer_epoch == header.producer_epoch
            and now - held.at_ms < self._memory_ms
        ):
            base_sequence = min(base_sequence, held.base_sequence)
        self._refused[key] = Refusal(header.producer_epoch, base_sequence, error, now)

    def written(self, topic: str, partition: int, header: BatchHeader) -> None:
        """A batch of `header`'s producer was written (or found written): its gap, if it
        had one, is being filled in order."""
        if header.producer_id >= 0 and self._refused:
            self._refused.pop((topic, partition, header.producer_id), None)

    def gap_cause(self, topic: str, partition: int, header: BatchHeader) -> ErrorCode | None:
        """The error to answer `header`'s out-of-order batch with, if its gap starts at a
        batch refused here lately; None if the gap is one to answer as out of order."""
        if not _sequenced(header):
            return None
        held = self._refused.get((topic, partition, header.producer_id))
        if (
            held is None
            or held.producer_epoch != header.producer_epoch
            or held.base_sequence >= header.base_sequence
            or self._clock() - held.at_ms >= self._memory_ms
        ):
            return None
        return held.error

    def _sweep(self, now: int) -> None:
        for key, held in list(self._refused.items()):
            if now - held.at_ms >= self._memory_ms:
                del self._refused[key]


def _sequenced(header: BatchHeader) -> bool:
    """An idempotent producer's data batch (a control batch carries no sequence)."""
    return header.producer_id >= 0 and header.base_sequence >= 0 and not header.is_control
