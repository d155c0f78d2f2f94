"""Randomized runs of well-behaved clients, a clock, replication and leadership moves.

The shard's partition is replicated and hosted by the real coordinator runtime
(RuntimeContext): a reply reaches its
client only once the high watermark passes what its operation wrote, a
follower keeps a warm standby, and leadership moves, with the uncommitted tail
kept or lost. Clients act on what they are told as real ones do, and retry
against the new leader whatever the old one left unanswered.

Invariants, checked after every step unless said otherwise:
- within one generation no partition is owned twice (owner: the instance id of
  a static member, else the member id), judging by the SyncGroup answers
  clients received, across moves too: a generation number that a new leader
  hands out again must not give a partition to someone else;
- the active shard's offsets are what its log says (the committed part, then
  the uncommitted tail); every acknowledged commit stays committed until a
  committed tombstone deletes it, and is never replaced by an older value
  (offsets committed only grow);
- a standby that has replayed the log up to X equals a fresh shard replaying
  the same records (after each standby step, and once it has caught up to take over);
- after a move that lost no record, the new shard's offsets equal the old
  one's, and so do its groups whenever no rebalance was in flight;
- a request the old leader left unanswered gets NOT_COORDINATOR (the runtime's
  errors, or the shard's own unload() answers);
- the broker's timer fires no later than the shard's first deadline, and every
  member can still expire: it has a session timer, or is parked in a rebalance
  that has its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from herdless.coordinator import CoordinatorConfig, GroupState, TimerKey, TimerKind
from herdless.coordinator.messages import HeartbeatRequest, LeavingMember
from herdless.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    Record,
    decode_key,
    decode_offset_commit_value,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import commit_request, decode_assignment, range_assign
from tests.coordinator.runtime_context import NOT_COORDINATOR, RuntimeContext
from tests.coordinator.snapshot import quiescent, snapshot

GROUP = "g"
SIMPLE = "s"
PARTITIONS = 5
DAY = 24 * 3600 * 1000
# Enough records for the high watermark or a standby to reach the log end.
ALL = 10_000

OffsetKey = tuple[str, str, int]  # group, topic, partition


def offset_change(record: Record) -> tuple[OffsetKey, int | None] | None:
    """The committed offset a record sets (None: deletes), or None if it is no offset record."""
    key = decode_key(record.key)
    if not isinstance(key, OffsetCommitKey):
        return None
    offset = None if record.value is None else decode_offset_commit_value(record.value).offset
    return (key.group, key.topic, key.partition), offset


def apply_offset_change(
    offsets: dict[OffsetKey, int], record: Record
) -> tuple[OffsetKey, int | None] | None:
    change = offset_change(record)
    if change is not None:
        key, offset = change
        if offset is None:
            offsets.pop(key, None)
        else:
            offsets[key] = offset
    return change


@dataclass
class Client:
    index: int
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    join_token: int | None = None
    sync_token: int | None = None
    # A leader's assignment not yet sent: it syncs when its assignor is done.
    assignment: dict[str, bytes] | None = None
    rejoin_needed: bool = False  # told to rejoin while its SyncGroup was in flight


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = RuntimeContext(CoordinatorConfig(initial_rebalance_delay_ms=1000))
        self.clients = [Client(i, f"i{i}" if i < 2 else None) for i in range(4)]
        self.owners: dict[int, dict[int, str]] = {}  # generation -> partition -> owner
        self.acked: dict[OffsetKey, int] = {}  # commits a client was told succeeded
        self.durable: dict[OffsetKey, int] = {}  # offsets as the committed log has them
        self.committed_seen = 0  # how much of the committed log `durable` has taken in
        self.on_reply: dict[int, Callable[[Any], None]] = {}
        self.offsets = itertools.count(1)

    # --- client behaviour -------------------------------------------------------------

    def _owner(self, client: Client) -> str:
        return client.instance_id or client.member_id

    def _reset(self, client: Client) -> None:
        client.member_id, client.generation = "", -1

    def _send_join(self, client: Client) -> None:
        if client.join_token is not None:
            return
        if client.sync_token is not None:
            # Like real clients, one JoinGroup or SyncGroup in flight at a time.
            client.rejoin_needed = True
            return
        client.rejoin_needed, client.assignment = False, None
        token, _ = self.ctx.join(
            GROUP, client.member_id, instance_id=client.instance_id, client_id=f"c{client.index}"
        )
        client.join_token = token
        self.on_reply[token] = lambda response: self._on_join(client, response)

    def _send_sync(self, client: Client, assignments: dict[str, bytes] | None) -> None:
        client.assignment = None
        generation, owner = client.generation, self._owner(client)
        token, _ = self.ctx.sync(
            GROUP, client.member_id, generation, assignments, client.instance_id
        )
        client.sync_token = token
        self.on_reply[token] = lambda response: self._on_sync(client, generation, owner, response)

    def _send_heartbeat(self, client: Client) -> None:
        member_id, generation = client.member_id, client.generation
        req = HeartbeatRequest(GROUP, generation, member_id, client.instance_id)
        token, _ = self.ctx.send(lambda shard, t, now: shard.heartbeat(req, t, now))
        self.on_reply[token] = lambda response: self._on_heartbeat(
            client, member_id, generation, response
        )

    def _send_commit(self, key: OffsetKey, must_succeed: bool = False, **member: Any) -> None:
        group_id, topic, partition = key
        offset = next(self.offsets)
        req = commit_request(group_id, {(topic, partition): offset}, **member)
        token, _ = self.ctx.send(lambda shard, t, now: shard.offset_commit(req, t, now))
        self.on_reply[token] = lambda response: self._on_commit(key, offset, must_succeed, response)

    def _react(self) -> None:
        """Deliver released replies, in order, to the clients waiting for them."""
        self.ctx.deliver(self.on_reply)

    def _on_join(self, client: Client, response: Any) -> None:
        client.join_token = None
        if response is NOT_COORDINATOR:
            self._send_join(client)  # to the new leader, with the member id it has
        elif response.error_code is ErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
            self._send_join(client)
        elif response.error_code is ErrorCode.NONE:
            client.member_id = response.member_id
            client.generation = response.generation_id
            if response.leader == client.member_id and not response.skip_assignment:
                ids = [m.member_id for m in response.members]
                client.assignment = range_assign(ids, "t", PARTITIONS)
            else:
                self._send_sync(client, None)
        elif response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self._reset(client)

    def _on_sync(self, client: Client, generation: int, owner: str, response: Any) -> None:
        client.sync_token = None
        rejoin = client.rejoin_needed
        if response is NOT_COORDINATOR or response.error_code in (
            ErrorCode.REBALANCE_IN_PROGRESS,
            ErrorCode.ILLEGAL_GENERATION,
        ):
            rejoin = True
        elif response.error_code is ErrorCode.NONE:
            owned = self.owners.setdefault(generation, {})
            for _topic, p in decode_assignment(response.assignment):
                holder = owned.setdefault(p, owner)
                assert holder == owner, (
                    f"partition {p} owned by {holder} and {owner} in generation {generation}"
                )
        elif response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self._reset(client)
        if rejoin:
            self._send_join(client)

    def _on_heartbeat(self, client: Client, member_id: str, generation: int, response: Any) -> None:
        stale = (client.member_id, client.generation) != (member_id, generation)
        if response is NOT_COORDINATOR or stale:
            return  # the next heartbeat goes to the new leader; a stale answer tells nothing
        error = response.error_code
        if error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
            self._send_join(client)
        elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self._reset(client)

    def _on_commit(self, key: OffsetKey, offset: int, must_succeed: bool, response: Any) -> None:
        # A commit the old leader never answered may or may not have survived the move.
        if response is NOT_COORDINATOR:
            return
        error = response.topics[0].partitions[0].error_code
        assert error is ErrorCode.NONE or not must_succeed, error
        if error is ErrorCode.NONE:
            self.acked[key] = offset

    def _absorb_committed(self) -> None:
        """Take in what the high watermark has passed: it can no longer be lost."""
        for record in self.ctx.log[self.committed_seen : self.ctx.high_watermark]:
            change = apply_offset_change(self.durable, record)
            if change is not None and change[1] is None:
                self.acked.pop(change[0], None)
            elif decode_key(record.key) == GroupMetadataKey(GROUP) and record.value is None:
                # A deleted group starts again from generation 0, as in Kafka.
                self.owners.clear()
        self.committed_seen = self.ctx.high_watermark

    def _after(self) -> None:
        self._absorb_committed()
        self._react()

    def _replicate(self, n: int) -> None:
        """Advance the high watermark record by record: each reply it releases reaches its
        client after the records written before it are taken in, and before later ones."""
        for _ in range(n):
            if self.ctx.high_watermark == len(self.ctx.log):
                return
            self.ctx.replicate(1)
            self._after()

    # --- rules -------------------------------------------------------------------------

    @rule(i=st.integers(0, 3))
    def join(self, i: int) -> None:
        self._send_join(self.clients[i])
        self._after()

    @rule()
    def everyone_joins(self) -> None:
        for c in self.clients:
            if not c.member_id or c.generation < 0:
                self._send_join(c)
        self._after()

    @rule()
    def leaders_assign(self) -> None:
        self._leaders_assign()
        self._after()

    def _leaders_assign(self) -> None:
        for c in self.clients:
            if c.assignment is not None:
                self._send_sync(c, c.assignment)

    @rule(i=st.integers(0, 3))
    def heartbeat(self, i: int) -> None:
        if self.clients[i].member_id:
            self._send_heartbeat(self.clients[i])
        self._after()

    @rule(i=st.integers(0, 3))
    def leave(self, i: int) -> None:
        c = self.clients[i]
        if c.member_id and c.join_token is None:
            self.ctx.leave(GROUP, LeavingMember(c.member_id, c.instance_id))
            self._reset(c)  # a leaving client does not wait for the answer
        self._after()

    @rule(i=st.integers(0, 3), p=st.integers(0, PARTITIONS - 1))
    def commit(self, i: int, p: int) -> None:
        c = self.clients[i]
        self._send_commit(
            (GROUP, "t", p),
            generation=c.generation,
            member_id=c.member_id,
            instance_id=c.instance_id if c.member_id else None,
        )
        self._after()

    @rule(p=st.integers(0, 2))
    def simple_commit(self, p: int) -> None:
        self._send_commit((SIMPLE, "x", p), must_succeed=True)
        self._after()

    @rule()
    def delete_simple_group(self) -> None:
        self.ctx.delete_groups(SIMPLE)
        self._after()

    @rule(ms=st.sampled_from([0, 500, 1_000, 3_000, 9_000, 11_000, 31_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)
        self._after()

    @rule(n=st.integers(1, 5), replicated=st.booleans())
    def live_clients_tick(self, n: int, replicated: bool) -> None:
        """Time passes while every client that has joined heartbeats and leaders assign,
        as real clients do; with `replicated`, followers keep up meanwhile."""
        for _ in range(n):
            self._leaders_assign()
            for c in self.clients:
                if c.member_id and c.generation >= 0:
                    self._send_heartbeat(c)
            self.ctx.sleep(3_000)
            self._after()
            if replicated:
                self._replicate(ALL)

    @rule()
    def sleep_past_retention(self) -> None:
        self.ctx.sleep(7 * DAY + 600_000)
        self._after()

    @rule(n=st.sampled_from([1, 2, 5, ALL]))
    def replicate(self, n: int) -> None:
        self._replicate(n)

    @rule(n=st.sampled_from([0, 1, 3, ALL]))
    def standby_replays(self, n: int) -> None:
        ctx = self.ctx
        ctx.standby_replays(n)
        replayed = ctx.replayed(ctx.log[: ctx.standby_offset])
        assert snapshot(ctx.standby) == snapshot(replayed)

    @rule(truncate=st.booleans(), warm=st.booleans())
    def leadership_moves(self, truncate: bool, warm: bool) -> None:
        ctx = self.ctx
        before, was_quiescent = snapshot(ctx.shard), quiescent(ctx.shard)
        lost = truncate and ctx.high_watermark < len(ctx.log)
        ctx.move_leadership(truncate=truncate, warm=warm)
        after = snapshot(ctx.shard)
        if warm:
            assert after == snapshot(ctx.replayed(ctx.log))
        if not lost:
            assert after["offsets"] == before["offsets"]
            if was_quiescent:
                assert after["groups"] == before["groups"]
        self._after()

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def offsets_follow_the_log(self) -> None:
        held: dict[OffsetKey, Any] = {}
        for group_id in (GROUP, SIMPLE):
            for (topic, p), offset in self.ctx.committed(group_id).items():
                held[(group_id, topic, p)] = offset
        expected = dict(self.durable)
        for record in self.ctx.log[self.ctx.high_watermark :]:
            apply_offset_change(expected, record)
        assert held == expected
        for key, offset in self.acked.items():
            assert self.durable.get(key, -1) >= offset, f"acknowledged {key}={offset} lost"

    @invariant()
    def timers_agree(self) -> None:
        self.ctx.check_timer()

    @invariant()
    def everyone_can_expire(self) -> None:
        """A client that goes silent is removed in the end, by its session timer, or, while
        parked in a rebalance, by the rebalance's timer (a loaded shard must start them)."""
        timers = self.ctx.timers
        assert TimerKey(TimerKind.RETENTION) in timers
        for group_id, group in self.ctx.shard.groups.items():
            if group.state is GroupState.PREPARING_REBALANCE:
                assert TimerKey(TimerKind.JOIN, group_id) in timers
            if group.state is GroupState.COMPLETING_REBALANCE:
                assert TimerKey(TimerKind.SYNC, group_id) in timers
            for member_id, member in group.members.items():
                parked = member.awaiting_join is not None or member.awaiting_sync is not None
                assert parked or TimerKey(TimerKind.HEARTBEAT, group_id, member_id) in timers


CoordinatorMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorMachine = CoordinatorMachine.TestCase
