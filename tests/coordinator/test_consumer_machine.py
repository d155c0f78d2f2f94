"""Randomized runs of consumer group (KIP-848) members, a clock, replication and leadership moves.

Clients behave as librdkafka's consumer does with group.protocol=consumer: they
join with an id of their own, heartbeat with their epoch, take the partitions
they are given, revoke what they are told to give up (at once or a while
later) and say what they own when they do; they lose answers, crash, leave,
leave for a while as static members, come back, and change what they subscribe
to; topics gain partitions. The shard's partition is replicated
(RuntimeContext): an answer reaches its client once what its heartbeat wrote
is committed, standbys replay, and leadership moves with or without the
uncommitted tail.

Invariants, after every step:
- at no moment is a partition owned by two members, across epochs: the
  coordinator gives each partition to one member at most (assigned or still
  revoking), and every live client owns only what the coordinator counts as
  its own, so no two clients ever own a partition at once;
- every member has a session that can end, and every member asked to revoke a
  revocation deadline;
- a standby that replayed the log equals a fresh replay of it, and so does the
  shard that takes over.
And once the clients have heartbeated long enough with nothing disturbing them,
the group is Stable and every subscribed partition is owned by exactly one client.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from herdless.coordinator import CoordinatorConfig, TimerKey, TimerKind
from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.topic_metadata import (
    NO_PARTITIONS,
    Partitions,
    TopicIdPartition,
    TopicMetadata,
    TopicsImage,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TOPIC_T, TOPIC_U
from tests.coordinator.runtime_context import NOT_COORDINATOR, RuntimeContext
from tests.coordinator.snapshot import snapshot

GROUP = "g"
CLIENTS = 4
SESSION_MS = 10_000
# Longer than settling takes: live clients revoke at once, so a group that needs a revocation
# deadline to converge has lost track of what a client was told.
REBALANCE_MS = 60_000
TICK_MS = 2_000  # how often live clients heartbeat
ALL = 10_000
SUBSCRIPTIONS: tuple[tuple[tuple[str, ...] | None, str | None], ...] = (
    (("t",), None),
    (("t", "u"), None),
    (None, "[tu]"),
)


@dataclass
class Client:
    index: int
    instance_id: str | None
    incarnation: int = 1
    alive: bool = True
    joined: bool = False  # a member, as far as the client knows
    epoch: int = 0
    owned: Partitions = NO_PARTITIONS
    to_revoke: Partitions = NO_PARTITIONS
    ack_due: bool = False
    full_next: bool = False
    in_flight: bool = False
    subscription: int = 0  # index into SUBSCRIPTIONS

    @property
    def member_id(self) -> str:
        return f"c{self.index}-{self.incarnation}"

    def drop_everything(self) -> None:
        self.joined, self.epoch = False, 0
        self.owned = self.to_revoke = NO_PARTITIONS
        self.ack_due = self.full_next = False


class ConsumerGroupMachine(RuleBasedStateMachine):
    """Kafka's defaults: targets batched per assignment interval (1 s) and computed by an
    offloaded assignor, which finishes whenever the machine says (`assignor_finishes`)
    or at the latest before time passes in a tick."""

    config = CoordinatorConfig(consumer_session_timeout_ms=SESSION_MS)

    def __init__(self) -> None:
        super().__init__()
        self.ctx = RuntimeContext(self.config)
        self.ctx.complete_offloaded_at_once = False
        self.partitions_of_t = TOPIC_T.num_partitions
        self.ctx.topics = TopicsImage([TOPIC_T, TOPIC_U], version=0)
        self.clients = [Client(i, f"i{i}" if i < 2 else None) for i in range(CLIENTS)]
        self.on_reply: dict[int, Callable[[Any], None]] = {}
        self.versions = itertools.count(1)

    # --- client behaviour -------------------------------------------------------------

    def _send(self, client: Client, epoch: int, *, lost: bool = False) -> None:
        if client.in_flight or not client.alive:
            return
        joining = epoch == 0
        full = joining or client.full_next
        fields: dict[str, Any] = {"instance_id": client.instance_id}
        if full:
            # Everything: what it subscribes to (and not), its rebalance timeout, what it owns.
            names, regex = SUBSCRIPTIONS[client.subscription]
            fields.update(topics=names or (), subscribed_topic_regex=regex or "")
            fields["rebalance_timeout_ms"] = REBALANCE_MS
        if joining:
            sent_owned: Partitions | None = NO_PARTITIONS
        else:
            sent_owned = client.owned if (full or client.ack_due) else None
        token, _ = self.ctx.send_consumer_heartbeat(
            GROUP, client.member_id, epoch, owned=sent_owned, **fields
        )
        client.in_flight = True
        incarnation = client.incarnation
        self.on_reply[token] = lambda response: self._on_heartbeat(
            client, incarnation, epoch, sent_owned, lost, response
        )

    def _on_heartbeat(
        self,
        client: Client,
        incarnation: int,
        epoch: int,
        sent_owned: Partitions | None,
        lost: bool,
        response: Any,
    ) -> None:
        if client.incarnation != incarnation or not client.alive:
            return
        client.in_flight = False
        if response is NOT_COORDINATOR:
            client.full_next = True  # an error from the coordinator: tell everything again
            return
        if lost:
            # Timed out: librdkafka sends its next heartbeat as if nothing happened (an
            # acknowledgement still due is sent again), not a full request.
            return
        error = response.error_code
        if epoch < 0:
            return  # the answer to leaving: nothing more to do
        if error is ErrorCode.NONE:
            client.joined, client.epoch, client.full_next = True, response.member_epoch, False
            if sent_owned is not None:
                client.ack_due = client.owned != sent_owned
            if response.assignment is not None:
                # New partitions are free: taken at once. The others go when it revokes.
                client.owned |= response.assignment
                client.to_revoke = client.owned - response.assignment
                client.ack_due = True
        elif error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            client.drop_everything()  # and rejoins, under the same id
        elif error is ErrorCode.FENCED_INSTANCE_ID:
            client.drop_everything()
            client.alive = False  # another process has its instance id: it stops
        elif error is ErrorCode.GROUP_ID_NOT_FOUND:
            # Its session ended and the empty group expired since (librdkafka stops here;
            # this client starts over, as its application would).
            client.drop_everything()
        else:
            assert error is ErrorCode.UNRELEASED_INSTANCE_ID, response

    def _revoke(self, client: Client) -> None:
        if client.to_revoke:
            client.owned -= client.to_revoke
            client.to_revoke = NO_PARTITIONS
            client.ack_due = True

    def _react(self) -> None:
        """Deliver released replies, in order, to the clients waiting for them."""
        self.ctx.deliver(self.on_reply)

    def _replicate(self, n: int) -> None:
        for _ in range(n):
            if self.ctx.high_watermark == len(self.ctx.log):
                return
            self.ctx.replicate(1)
            self._react()

    def _heartbeat(self, client: Client, lost: bool = False) -> None:
        self._send(client, client.epoch if client.joined else 0, lost=lost)

    # --- rules -------------------------------------------------------------------------

    @rule(i=st.integers(0, CLIENTS - 1), lost=st.booleans())
    def heartbeat(self, i: int, lost: bool) -> None:
        self._heartbeat(self.clients[i], lost)
        self._react()

    @rule(i=st.integers(0, CLIENTS - 1))
    def revoke(self, i: int) -> None:
        self._revoke(self.clients[i])

    @rule(i=st.integers(0, CLIENTS - 1), static_leave=st.booleans())
    def leave(self, i: int, static_leave: bool) -> None:
        c = self.clients[i]
        if c.alive and c.joined and not c.in_flight:
            epoch = -2 if static_leave and c.instance_id is not None else -1
            c.drop_everything()  # a leaving client gives up everything first
            self._send(c, epoch)
            self._react()

    @rule(i=st.integers(0, CLIENTS - 1))
    def crash(self, i: int) -> None:
        c = self.clients[i]
        c.drop_everything()
        c.alive = False

    @rule(i=st.integers(0, CLIENTS - 1))
    def restart(self, i: int) -> None:
        c = self.clients[i]
        if not c.alive:
            c.incarnation += 1
            c.alive, c.in_flight = True, False
            c.drop_everything()

    @rule(i=st.integers(0, CLIENTS - 1), subscription=st.integers(0, len(SUBSCRIPTIONS) - 1))
    def resubscribe(self, i: int, subscription: int) -> None:
        c = self.clients[i]
        if c.subscription != subscription:
            c.subscription = subscription
            c.full_next = True

    @rule()
    def topic_grows(self) -> None:
        if self.partitions_of_t < 9:
            self.partitions_of_t += 1
            t = TopicMetadata(TOPIC_T.topic_id, "t", self.partitions_of_t)
            self.ctx.topics = TopicsImage([t, TOPIC_U], version=next(self.versions))

    @rule(ms=st.sampled_from([0, 1_000, 3_000, 9_000, 11_000, 25_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)
        self._react()

    @rule(n=st.sampled_from([1, 3, ALL]))
    def replicate(self, n: int) -> None:
        self._replicate(n)

    @rule()
    def assignor_finishes(self) -> None:
        self.ctx.complete_offloaded(1)
        self._react()

    @rule(n=st.sampled_from([0, 2, ALL]))
    def standby_replays(self, n: int) -> None:
        ctx = self.ctx
        ctx.standby_replays(n)
        assert snapshot(ctx.standby) == snapshot(ctx.replayed(ctx.log[: ctx.standby_offset]))

    @rule(truncate=st.booleans(), warm=st.booleans())
    def leadership_moves(self, truncate: bool, warm: bool) -> None:
        ctx = self.ctx
        ctx.move_leadership(truncate=truncate, warm=warm)
        assert snapshot(ctx.shard) == snapshot(ctx.replayed(ctx.log))
        self._react()

    @rule(rounds=st.integers(1, 4))
    def live_clients_tick(self, rounds: int) -> None:
        """Time passes as live clients revoke, heartbeat and followers keep up."""
        for _ in range(rounds):
            self._tick()

    def _tick(self) -> None:
        for c in self.clients:
            if c.alive:
                self._revoke(c)
                self._heartbeat(c)
        self.ctx.complete_offloaded()
        self._replicate(ALL)
        self.ctx.sleep(TICK_MS)
        self._react()

    @rule()
    def settle(self) -> None:
        """Nothing disturbs the group for a while: it converges."""
        # Sessions of the dead end, the last answers and acks go.
        for _ in range(SESSION_MS // TICK_MS + 6):
            self._tick()
        group = self.ctx.shard.consumer.groups.get(GROUP)
        live = [c for c in self.clients if c.alive]
        assert group is not None or not live
        if group is None:
            return
        expected = ConsumerGroupState.STABLE if live else ConsumerGroupState.EMPTY
        assert group.state is expected, self._describe()
        members = group.members
        for c in live:
            if c.member_id in members:
                assert c.owned == members[c.member_id].assigned, self._describe()
        owned = [tp for c in live for tp in c.owned]
        subscribed = group.subscription_metadata.values()
        every = {tp for t in subscribed for tp in t.partitions()}
        assert sorted(owned) == sorted(every), self._describe()

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        group = self.ctx.shard.consumer.groups.get(GROUP)
        held: dict[TopicIdPartition, str] = {}
        members = {} if group is None else group.members
        for m in members.values():
            for tp in m.assigned | m.assignment.pending_revocation:
                assert tp not in held, f"{tp} held by {held[tp]} and {m.member_id}"
                held[tp] = m.member_id
        claimed: dict[TopicIdPartition, str] = {}
        for c in self.clients:
            if not c.alive or c.member_id not in members:
                continue  # dead, or a member no more and yet to hear it (fenced by epoch)
            m = members[c.member_id]
            assert c.owned <= m.assigned | m.assignment.pending_revocation, (
                f"{c.member_id} owns {sorted(c.owned - m.assigned)} the coordinator did not "
                f"give it\n{self._describe()}"
            )
            for tp in c.owned:
                assert tp not in claimed, f"{tp} owned by {claimed[tp]} and {c.member_id}"
                claimed[tp] = c.member_id

    @invariant()
    def every_member_can_be_removed(self) -> None:
        group = self.ctx.shard.consumer.groups.get(GROUP)
        if group is None:
            return
        timers = self.ctx.timers
        for member_id, m in group.members.items():
            assert TimerKey(TimerKind.SESSION, GROUP, member_id) in timers
            if m.is_revoking:
                assert TimerKey(TimerKind.REVOCATION, GROUP, member_id) in timers

    def _describe(self) -> str:
        group = self.ctx.shard.consumer.groups.get(GROUP)
        lines = [f"clients: {self.clients}"]
        if group is not None:
            lines.append(
                f"group epoch {group.group_epoch}, target epoch {group.target_assignment_epoch}"
            )
            for m in group.members.values():
                lines.append(f"  {m.member_id}: {m.assignment}")
            lines.append(f"  target: {group.target_assignment}")
        return "\n".join(lines)


class InlineAssignmentMachine(ConsumerGroupMachine):
    """Kafka 4.2's behaviour: a target at every change, computed inline."""

    config = CoordinatorConfig(
        consumer_session_timeout_ms=SESSION_MS,
        consumer_assignment_interval_ms=0,
        consumer_assignor_offload_enable=False,
    )


for machine in (ConsumerGroupMachine, InlineAssignmentMachine):
    machine.TestCase.settings = settings(
        max_examples=120,
        stateful_step_count=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
TestInlineAssignmentMachine = InlineAssignmentMachine.TestCase
