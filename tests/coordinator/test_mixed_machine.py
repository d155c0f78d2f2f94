"""Randomized runs of a consumer group upgraded online, classic and new-protocol members mixed.

A classic group of two members is upgraded by a member joining with
ConsumerGroupHeartbeat. Then clients of both protocols act at random, each as
librdkafka does: classic ones heartbeat, rejoin when told (REBALANCE_IN_PROGRESS)
saying what they own, take what SyncGroup gives them and drop at once what it no
longer does (cooperative), or give up everything before rejoining (eager); new
ones heartbeat with their epoch and what they own, take what they are given and
revoke the rest a while later. Clients crash, restart and leave; time passes.
A run stops interacting once the group went back to classic (the last
new-protocol member gone), which tests/coordinator/test_group_conversion.py covers.

Invariants, after every step: no two clients own a partition; a client owns only
what the coordinator counts as its own; replaying the log gives the shard's state.
And once the clients have cooperated for a while the group is Stable and every
partition has exactly one owner.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.messages import LeavingMember
from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, Context
from tests.coordinator.snapshot import snapshot
from tests.coordinator.test_group_conversion import (
    classic_group,
    partitions_of,
    protocols,
    tps,
)

GROUP = "g"
TICK_MS = 2_000
SETTLE_TICKS = 25  # long enough for sessions (10 s) and join deadlines (30 s) of the dead


@dataclass
class Client:
    name: str
    classic: bool
    eager: bool = False
    member_id: str = ""
    alive: bool = True
    joined: bool = False
    epoch: int = 0  # the generation of a classic client
    owned: Partitions = NO_PARTITIONS
    to_revoke: Partitions = NO_PARTITIONS  # a new-protocol client's, revoked later
    must_rejoin: bool = False
    incarnation: int = 1

    def drop_everything(self) -> None:
        self.joined, self.epoch, self.must_rejoin = False, 0, False
        self.owned = self.to_revoke = NO_PARTITIONS


class MixedGroupMachine(RuleBasedStateMachine):
    config = TEST_CONFIG

    def __init__(self) -> None:
        super().__init__()
        self.ctx = Context(self.config)
        a, b = classic_group(self.ctx)
        group = self.ctx.shard.groups[GROUP]
        self.clients = [
            Client("a", True, member_id=a, joined=True),
            Client("b", True, eager=True, member_id=b, joined=True),
            Client("c", True, eager=False),
            Client("n0", False, member_id="n0-1"),
            Client("n1", False, member_id="n1-1"),
        ]
        for client, member in zip(self.clients[:2], (a, b), strict=True):
            client.epoch = group.generation
            client.owned = tps(*partitions_of(group.members[member].assignment))
        self._new_heartbeat(self.clients[3])
        assert GROUP in self.ctx.shard.consumer.groups

    @property
    def downgraded(self) -> bool:
        return GROUP not in self.ctx.shard.consumer.groups

    # --- classic clients ---------------------------------------------------------------

    def _classic_heartbeat(self, c: Client) -> None:
        if not c.joined:
            return
        error = self.ctx.heartbeat(GROUP, c.member_id, c.epoch)
        if error is ErrorCode.REBALANCE_IN_PROGRESS:
            c.must_rejoin = True
        elif error is not ErrorCode.NONE:
            assert error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION), error
            c.drop_everything()  # its partitions are lost; it joins again from nothing
            c.member_id = ""

    def _classic_join(self, c: Client) -> None:
        if c.eager:
            c.owned = NO_PARTITIONS  # eager: everything revoked before joining
        owned = sorted(tp.partition for tp in c.owned)
        token, _ = self.ctx.join(GROUP, c.member_id, protocols=protocols(owned))
        joined = self.ctx.replies[token]
        if joined.error_code is ErrorCode.MEMBER_ID_REQUIRED:
            c.member_id = joined.member_id
            token, _ = self.ctx.join(GROUP, c.member_id, protocols=protocols(owned))
            joined = self.ctx.replies.get(token)
        if joined is None:
            # Parked: the group had emptied, and the join made it a classic group again.
            assert self.downgraded
            c.drop_everything()
            return
        if joined.error_code is not ErrorCode.NONE:
            assert self.downgraded or joined.error_code is ErrorCode.UNKNOWN_MEMBER_ID, joined
            c.drop_everything()
            return
        c.member_id, c.epoch, c.joined, c.must_rejoin = (
            joined.member_id,
            joined.generation_id,
            True,
            False,
        )
        token, _ = self.ctx.sync(GROUP, c.member_id, c.epoch)
        synced = self.ctx.replies[token]
        if synced.error_code is ErrorCode.REBALANCE_IN_PROGRESS:
            c.must_rejoin = True
            return
        assert synced.error_code is ErrorCode.NONE, synced
        given = tps(*partitions_of(synced.assignment))
        if c.owned - given:
            c.must_rejoin = True  # cooperative: revoked at once, then it rejoins
        c.owned = given

    # --- new-protocol clients ------------------------------------------------------------

    def _new_heartbeat(self, c: Client) -> None:
        epoch = c.epoch if c.joined else 0
        response, _ = self.ctx.consumer_heartbeat(
            GROUP, c.member_id, epoch, topics=("t",), owned=c.owned, rebalance_timeout_ms=30_000
        )
        if response.error_code is not ErrorCode.NONE:
            assert response.error_code in (
                ErrorCode.FENCED_MEMBER_EPOCH,
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.GROUP_ID_NOT_FOUND,
            ), response
            c.drop_everything()
            return
        c.joined, c.epoch = True, response.member_epoch
        if response.assignment is not None:
            c.owned |= response.assignment
            c.to_revoke = c.owned - response.assignment

    # --- rules -----------------------------------------------------------------------------

    def _act(self, c: Client) -> None:
        if self.downgraded or not c.alive:
            return
        if c.classic:
            if c.must_rejoin or not c.joined:
                self._classic_join(c)
            else:
                self._classic_heartbeat(c)
        else:
            c.owned -= c.to_revoke
            c.to_revoke = NO_PARTITIONS
            self._new_heartbeat(c)

    @rule(i=st.integers(0, 4))
    def act(self, i: int) -> None:
        self._act(self.clients[i])

    @rule(i=st.integers(0, 4))
    def heartbeat_only(self, i: int) -> None:
        c = self.clients[i]
        if not self.downgraded and c.alive and c.classic:
            self._classic_heartbeat(c)

    @rule(i=st.integers(0, 4))
    def crash(self, i: int) -> None:
        c = self.clients[i]
        c.drop_everything()
        c.alive = False

    @rule(i=st.integers(0, 4))
    def restart(self, i: int) -> None:
        c = self.clients[i]
        if not c.alive:
            c.alive, c.incarnation = True, c.incarnation + 1
            c.member_id = "" if c.classic else f"{c.name}-{c.incarnation}"

    @rule(i=st.integers(0, 4))
    def leave(self, i: int) -> None:
        c = self.clients[i]
        if self.downgraded or not (c.alive and c.joined):
            return
        if c.classic:
            self.ctx.leave(GROUP, LeavingMember(c.member_id))
        else:
            self.ctx.consumer_heartbeat(GROUP, c.member_id, -1)
        c.drop_everything()
        c.member_id = "" if c.classic else c.member_id

    @rule(ms=st.sampled_from([0, 1_000, 3_000, 9_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)

    @rule()
    def settle(self) -> None:
        for _ in range(SETTLE_TICKS):
            for c in self.clients:
                self._act(c)
            self.ctx.sleep(TICK_MS)
        if self.downgraded:
            return
        group = self.ctx.shard.consumer.groups[GROUP]
        live = [c for c in self.clients if c.alive]
        if not live:
            return
        assert all(c.joined for c in live), self._describe()
        assert group.state is ConsumerGroupState.STABLE, self._describe()
        owned = sorted(tp for c in live for tp in c.owned)
        assert owned == sorted(tps(*range(6))), self._describe()

    # --- invariants ------------------------------------------------------------------------

    @invariant()
    def no_client_owns_what_is_not_its_own(self) -> None:
        if self.downgraded:
            return
        members = self.ctx.shard.consumer.groups[GROUP].members
        claimed: dict[Any, str] = {}
        for c in self.clients:
            m = members.get(c.member_id)
            if not c.alive or m is None:
                continue  # dead, or fenced and yet to hear it (its commits are refused)
            assert c.owned <= m.assigned | m.assignment.pending_revocation, self._describe()
            for tp in c.owned:
                assert tp not in claimed, f"{tp}: {claimed[tp]} and {c.name}\n{self._describe()}"
                claimed[tp] = c.name

    @invariant()
    def replay_gives_the_same_state(self) -> None:
        if self.downgraded:
            return  # a classic group's rebalance state is not in the log
        assert snapshot(self.ctx.replayed(self.ctx.log)) == snapshot(self.ctx.shard)

    def _describe(self) -> str:
        lines = [f"clients: {self.clients}"]
        group = self.ctx.shard.consumer.groups.get(GROUP)
        if group is not None:
            lines.append(f"group epoch {group.group_epoch}")
            for m in group.members.values():
                lines.append(f"  {m.member_id} classic={m.uses_classic_protocol}: {m.assignment}")
            lines.append(f"  target: {group.target_assignment}")
        return "\n".join(lines)


class BatchedMixedGroupMachine(MixedGroupMachine):
    """Kafka 4.3's defaults: a target at most every second, by an offloaded assignor."""

    config = replace(
        TEST_CONFIG, consumer_assignment_interval_ms=1_000, consumer_assignor_offload_enable=True
    )


for machine in (MixedGroupMachine, BatchedMixedGroupMachine):
    machine.TestCase.settings = settings(
        max_examples=40,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
TestMixedGroupMachine = MixedGroupMachine.TestCase
TestBatchedMixedGroupMachine = BatchedMixedGroupMachine.TestCase
