"""Which replica a consumer should read a partition from (KIP-392): Kafka's
`replica.selector.class`.

The leader asks its selector at each consumer Fetch (v11 on, the versions that carry
the client's rack). When the answer is another replica, the leader sends no records
but names that broker in the partition's `preferred_read_replica`, and the client
fetches from it until it errs, its connection drops or the lease runs out (five
minutes in librdkafka, `metadata.max.age.ms` in Java's consumer).

Only replicas in the ISR that hold the fetch offset are offered to the selector,
as Kafka's ReplicaManager.findPreferredReadReplica offers them: a replica that fell
out of the ISR is never chosen, so a consumer sent back to the leader stays there.

Unset (the default, as in Kafka) every consumer reads from the leader. Two
selectors, by Kafka's class names:

- `org.apache.kafka.common.replica.LeaderSelector`: the leader, always.
- `org.apache.kafka.common.replica.RackAwareReplicaSelector`: a replica in the
  client's rack (`client.rack`): the leader if it is there, else the most caught-up
  of the others there; the leader when the client names no rack or none is there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What a selector knows of one replica, as Kafka's ReplicaView says it."""

    node_id: int
    rack: str | None
    log_end_offset: int
    # How long since the replica last had all the leader had; 0 for the leader.
    time_since_caught_up_ms: int


# (the client's rack, "" when it names none; the leader; every replica offered, the
# leader among them) -> the replica to read from.
ReplicaSelector = Callable[[str, ReplicaView, Sequence[ReplicaView]], ReplicaView]

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def select_leader(
    client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]
) -> ReplicaView:
    return leader


def select_rack_aware(
    client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]
) -> ReplicaView:
    if not client_rack:
        return leader
    nearby = [r for r in replicas if r.rack == client_rack]
    if not nearby or leader in nearby:
        return leader
    # Kafka's ReplicaView.comparator: the furthest log end, then the most recently caught
    # up; the lowest broker id settles ties, so that every fetch picks the same one.
    return min(nearby, key=lambda r: (-r.log_end_offset, r.time_since_caught_up_ms, r.node_id))


SELECTORS: dict[str, ReplicaSelector] = {
    LEADER_SELECTOR: select_leader,
    RACK_AWARE_SELECTOR: select_rack_aware,
}


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector `replica.selector.class` names; None when unset (the leader serves
    every consumer). ValueError naming the known classes for any other name."""
    if class_name is None or not class_name.strip():
        return None
    selector = SELECTORS.get(class_name.strip())
    if selector is None:
        raise ValueError(
            f"replica.selector.class: no replica selector {class_name.strip()!r};"
            f" known: {', '.join(SELECTORS)}"
        )
    return selector
