"""Partition leader election, as Kafka's ZooKeeper-era controller decides it.

Pure: each rule takes a partition's replica assignment (preferred leader first), its
current state and the brokers that count as live, and returns the state the controller
should write (conditionally, see store.py), or says why there is none. Every leader or
ISR change the controller makes bumps the leader epoch, as Kafka's newLeaderAndIsr does;
ISR changes a leader makes itself move only the znode version.

"Live" is the caller's to decide, as Kafka's isReplicaOnline does: a broker registered in
ZooKeeper and not shutting down. How a controller composes the rules:

- new partition: initial_state.
- broker B's session expired: elect_offline_leader for each partition B led (with B no
  longer live), then remove_replica_from_isr(B) for each partition whose ISR still holds
  B. A partition with no electable replica ends with leader -1 and an ISR that is never
  empty: the last ISR member stays, so that a clean election is possible when it returns.
- controlled shutdown of B: elect_controlled_shutdown_leader for each partition B leads,
  then remove_replica_from_isr(B) for those it follows.
- preferred election (ElectLeaders, the imbalance check): elect_preferred_leader.
- unclean election (ElectLeaders): elect_offline_leader with unclean=True, only for a
  partition whose leader is gone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from herdless.cluster.layout import NO_LEADER, LeaderRecoveryState, PartitionState


@dataclass(frozen=True, slots=True)
class Offline:
    """No replica may lead the partition; the reason is for logs and error messages."""

    reason: str


def initial_state(
    assignment: Sequence[int], live_brokers: Collection[int], controller_epoch: int
) -> PartitionState | Offline:
    """A new partition: the first live replica leads, every live replica is in the ISR."""
    live = [replica for replica in assignment if replica in live_brokers]
    if not live:
        return Offline(
            f"no assigned replica is alive: replicas [{_join(assignment)}], "
            f"live brokers [{_join(sorted(live_brokers))}]"
        )
    return PartitionState(
        leader=live[0], leader_epoch=0, isr=tuple(live), controller_epoch=controller_epoch
    )


def elect_offline_leader(
    assignment: Sequence[int],
    state: PartitionState | None,
    live_brokers: Collection[int],
    controller_epoch: int,
    *,
    unclean: bool = False,
) -> PartitionState | Offline:
    """A partition whose leader is gone: the first live replica, in assignment order, that
    is in the ISR; the new ISR is the old one less the dead.

    With unclean election allowed and no live ISR member, the first live replica leads
    alone and must recover first (records the old ISR had may be lost).
    """
    if state is None:
        return Offline("the partition has no state in ZooKeeper")
    isr = state.isr
    leader = next((r for r in assignment if r in live_brokers and r in isr), None)
    if leader is not None:
        new_isr = tuple(r for r in isr if r in live_brokers)
        return _changed(state, leader, new_isr, controller_epoch)
    if unclean:
        leader = next((r for r in assignment if r in live_brokers), None)
        if leader is not None:
            return _changed(
                state,
                leader,
                (leader,),
                controller_epoch,
                recovery=LeaderRecoveryState.RECOVERING,
            )
    return Offline(
        f"no live replica in the ISR: ISR [{_join(isr)}], replicas [{_join(assignment)}], "
        f"live brokers [{_join(sorted(live_brokers))}]"
        + ("" if unclean else "; unclean leader election is disabled")
    )


def elect_preferred_leader(
    assignment: Sequence[int],
    state: PartitionState,
    live_brokers: Collection[int],
    controller_epoch: int,
) -> PartitionState | Offline:
    """Leadership back to the preferred replica (the assignment's first), if it is live and
    in the ISR; the ISR stays as it is. Kafka's preferredReplicaPartitionLeaderElection."""
    if not assignment:
        return Offline("the partition has no replicas")
    preferred = assignment[0]
    if preferred not in live_brokers:
        return Offline(f"the preferred leader {preferred} is not alive")
    if preferred not in state.isr:
        return Offline(f"the preferred leader {preferred} is not in the ISR [{_join(state.isr)}]")
    return _changed(state, preferred, state.isr, controller_epoch)


def elect_controlled_shutdown_leader(
    assignment: Sequence[int],
    state: PartitionState,
    live_brokers: Collection[int],
    shutting_down: Collection[int],
    controller_epoch: int,
) -> PartitionState | None:
    """Move leadership off brokers that are shutting down, which also leave the ISR.

    The new leader is the first replica in assignment order that is live, in the ISR and
    not shutting down. None: no such replica, and Kafka leaves the partition as it is.
    `live_brokers` may include or exclude the brokers shutting down.
    """
    leader = next(
        (r for r in assignment if r in state.isr and r not in shutting_down and r in live_brokers),
        None,
    )
    if leader is None:
        return None
    new_isr = tuple(r for r in state.isr if r not in shutting_down)
    return _changed(state, leader, new_isr, controller_epoch)


def remove_replica_from_isr(
    state: PartitionState, replica: int, controller_epoch: int
) -> PartitionState | None:
    """The controller's ISR shrink for a replica that went offline.

    If it led, the partition is left without a leader (-1). It leaves the ISR unless it is
    the last member: Kafka never writes an empty ISR. None: it was not in the ISR, so there
    is nothing to write.
    """
    if replica not in state.isr:
        return None
    leader = NO_LEADER if state.leader == replica else state.leader
    new_isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
    return _changed(state, leader, new_isr, controller_epoch)


def _changed(
    state: PartitionState,
    leader: int,
    isr: tuple[int, ...],
    controller_epoch: int,
    *,
    recovery: LeaderRecoveryState | None = None,
) -> PartitionState:
    return replace(
        state,
        leader=leader,
        leader_epoch=state.leader_epoch + 1,
        isr=isr,
        controller_epoch=controller_epoch,
        leader_recovery_state=state.leader_recovery_state if recovery is None else recovery,
    )


def _join(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)
