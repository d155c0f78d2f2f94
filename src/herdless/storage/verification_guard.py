"""The token that ties a transaction's first append on a partition to the verification
that allowed it (Kafka's VerificationGuard, KIP-890 part 1).

A partition leader asks the transaction coordinator whether a producer's transaction
holds the partition before appending its first batch there, and the answer comes back
later. Meanwhile the transaction may end: its ABORT marker written here, and perhaps
a new transaction begun that the coordinator has not added the partition to. The
answer then speaks of a transaction that is gone, and appending on its word would
leave data no coordinator will ever end. So the leader makes a new guard when it
starts to verify, and forgets it as soon as any transactional batch or marker of the
producer is appended; an append is let through only with the guard the leader still
holds. Each guard is a fresh object, so a stale one can never match a newer one (the
ABA problem Kafka's comment in UnifiedLog describes).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, eq=False, slots=True)
class VerificationGuard:
    """Compared by identity: one per verification started."""

    producer_epoch: int
    # The wall-clock time verification started, so that a guard no append ever used
    # is forgotten with idle producers (producer.id.expiration.ms).
    started_ms: int = field(default=0, compare=False)


# Given to an append whose producer already had a transaction open on the partition
# when its request came: no guard of its own. It verifies nothing: an append with it
# passes only while that transaction is still open.
SENTINEL = VerificationGuard(-1)


def verifies(held: VerificationGuard | None, given: VerificationGuard) -> bool:
    """Whether an append carrying `given` may open a transaction on the partition,
    where the leader holds `held` for the producer."""
    return given is not SENTINEL and given is held
