"""Partition reassignment as Kafka's ZooKeeper-era controller does it (KIP-455).

Pure: each rule takes a partition's replica assignment and state and returns what the
controller should write. The controller's steps (KafkaController.onPartitionReassignment),
with ORS the original replicas, TRS the target's, RS all of them:

1. start: RS = TRS + (ORS - TRS), adding = TRS - ORS, removing = ORS - TRS, written in
   /brokers/topics/<topic>; the leader epoch is bumped. The brokers joining see they are
   replicas, create their logs and fetch from the leader.
2. wait until every target replica is in the ISR: the leader adds each one as it
   catches up.
3. complete: a leader that is leaving (or not live) gives way to the first target replica
   live and in the ISR; the ISR shrinks to the target; then RS = TRS with nothing adding
   or removing, and the brokers no longer replicas delete their logs.

Cancelling (a null target) goes back to ORS at once: the replicas that were joining leave,
and a leader among them gives way to an original replica in the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from herdless.cluster.election import Offline
from herdless.cluster.layout import PartitionState, TopicAssignment


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition's replicas, and the reassignment in progress if any (Kafka's
    ReplicaAssignment)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def origin(self) -> tuple[int, ...]:
        """The replicas before the reassignment."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas after it."""
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """A reassignment to `target`; one in progress is replaced, from its origin."""
        origin = self.origin
        replicas = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(
            replicas,
            tuple(r for r in replicas if r not in origin),
            tuple(r for r in replicas if r not in target),
        )

    def revert(self) -> ReplicaAssignment:
        """The reassignment cancelled: the original replicas, in their order."""
        return ReplicaAssignment(self.origin)


def of(assignment: TopicAssignment, partition: int) -> ReplicaAssignment:
    return ReplicaAssignment(
        assignment.replicas[partition],
        assignment.adding.get(partition, ()),
        assignment.removing.get(partition, ()),
    )


def with_partition(
    assignment: TopicAssignment, partition: int, replicas: ReplicaAssignment
) -> TopicAssignment:
    """The topic's assignment with one partition's replaced."""

    def put(
        table: dict[int, tuple[int, ...]], value: tuple[int, ...]
    ) -> dict[int, tuple[int, ...]]:
        rest = {p: r for p, r in table.items() if p != partition}
        return dict(sorted({**rest, partition: value}.items())) if value else rest

    return replace(
        assignment,
        replicas=put(assignment.replicas, replicas.replicas),
        adding=put(assignment.adding, replicas.adding),
        removing=put(assignment.removing, replicas.removing),
    )


def invalid_target(target: Sequence[int], brokers: Collection[int]) -> str | None:
    """Why a target may not be reassigned to (Kafka's validateReplicas), or None."""
    if not target:
        return "The replica list is empty."
    if len(set(target)) != len(target):
        return f"The proposed assignment contains duplicate replicas: {list(target)}."
    if any(r < 0 for r in target):
        return f"The proposed assignment contains a negative broker id: {list(target)}."
    unknown = sorted(set(target) - set(brokers))
    if unknown:
        return f"The proposed assignment contains non-live brokers: {unknown}."
    return None


def started_state(state: PartitionState, controller_epoch: int) -> PartitionState:
    """Step 1's state: the same leader and ISR in a new leader epoch, so that the leader
    and every replica act on the new replica set (Kafka's updateLeaderEpochAndSendRequest)."""
    return replace(state, leader_epoch=state.leader_epoch + 1, controller_epoch=controller_epoch)


def completed(
    replicas: ReplicaAssignment,
    state: PartitionState,
    live: Collection[int],
    controller_epoch: int,
) -> PartitionState | Offline | None:
    """Step 3's state once every target replica is in the ISR; None while one is not yet,
    Offline if no target replica may lead."""
    target = replicas.target
    if not set(target) <= set(state.isr):
        return None
    isr = tuple(r for r in state.isr if r in target)
    return _led_by_target(target, state, isr, live, controller_epoch)


def cancelled(
    replicas: ReplicaAssignment,
    state: PartitionState,
    live: Collection[int],
    controller_epoch: int,
) -> PartitionState | Offline:
    """The state once a reassignment is cancelled: the replicas that were joining leave."""
    origin = replicas.origin
    isr = tuple(r for r in state.isr if r in origin)
    if not isr:
        # Only joining replicas were in sync: the original leader stays on record, as
        # Kafka never writes an empty ISR.
        isr = (state.leader,) if state.leader in origin else origin[:1]
    return _led_by_target(origin, state, isr, live, controller_epoch)


def _led_by_target(
    target: Sequence[int],
    state: PartitionState,
    isr: tuple[int, ...],
    live: Collection[int],
    controller_epoch: int,
) -> PartitionState | Offline:
    leader = state.leader
    if leader not in target or leader not in live or leader not in isr:
        # Kafka's reassignPartitionLeaderElection: the first target replica live and in sync.
        leader = next((r for r in target if r in live and r in isr), -1)
        if leader < 0:
            return Offline(
                f"no target replica is live and in sync: target {list(target)},"
                f" ISR {list(state.isr)}"
            )
    return replace(
        state,
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=isr,
        controller_epoch=controller_epoch,
    )
