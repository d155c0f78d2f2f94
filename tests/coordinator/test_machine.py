"""Randomized runs of well-behaved clients, a clock, and coordinator restarts.

Invariants checked after every step:
- within one generation no partition is owned twice (owner: the instance id of
  a static member, else the member id), judging by SyncGroup answers;
- every acknowledged commit is in the shard until a tombstone deletes it, and
  never replaced by an older value (commit offsets only grow);
- after a restart (replay of everything written) the shard's groups and
  offsets equal what they were, whenever no rebalance was in flight.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from herdless.coordinator import CoordinatorConfig
from herdless.coordinator.messages import JoinGroupResponse, LeavingMember, SyncGroupResponse
from herdless.coordinator.records import GroupMetadataKey, OffsetCommitKey, decode_key
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import Context, decode_assignment, range_assign
from tests.coordinator.snapshot import quiescent, snapshot

GROUP = "g"
SIMPLE = "s"
PARTITIONS = 5
DAY = 24 * 3600 * 1000


@dataclass
class Client:
    index: int
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    join_token: int | None = None
    sync_token: int | None = None
    owner_ids: dict[str, str] = field(default_factory=dict)  # member_id -> owner, from join


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = Context(CoordinatorConfig(initial_rebalance_delay_ms=1000))
        self.clients = [Client(i, f"i{i}" if i < 2 else None) for i in range(4)]
        self.owners: dict[int, dict[int, str]] = {}  # generation -> partition -> owner
        self.acked: dict[tuple[str, str, int], int] = {}
        self.log_seen = 0
        self.offsets = itertools.count(1)

    # --- client behaviour -------------------------------------------------------------

    def _owner(self, client: Client) -> str:
        return client.instance_id or client.member_id

    def _send_join(self, client: Client) -> None:
        if client.join_token is not None:
            return  # one JoinGroup in flight per client
        token, _ = self.ctx.join(
            GROUP, client.member_id, instance_id=client.instance_id, client_id=f"c{client.index}"
        )
        client.join_token = token

    def _react(self) -> None:
        """Deliver every completed reply to its client, which acts as a real one would."""
        progress = True
        while progress:
            progress = False
            for client in self.clients:
                if client.join_token is not None and client.join_token in self.ctx.replies:
                    response = self.ctx.replies.pop(client.join_token)
                    client.join_token = None
                    self._on_join(client, response)
                    progress = True
                if client.sync_token is not None and client.sync_token in self.ctx.replies:
                    response = self.ctx.replies.pop(client.sync_token)
                    client.sync_token = None
                    self._on_sync(client, response)
                    progress = True

    def _on_join(self, client: Client, response: JoinGroupResponse) -> None:
        if response.error_code is ErrorCode.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
            self._send_join(client)
        elif response.error_code is ErrorCode.NONE:
            client.member_id = response.member_id
            client.generation = response.generation_id
            assignments = None
            if response.leader == client.member_id and not response.skip_assignment:
                ids = [m.member_id for m in response.members]
                assignments = range_assign(ids, "t", PARTITIONS)
                client.owner_ids = {
                    m.member_id: m.group_instance_id or m.member_id for m in response.members
                }
            token, _ = self.ctx.sync(
                GROUP, client.member_id, client.generation, assignments, client.instance_id
            )
            client.sync_token = token
        elif response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.member_id, client.generation = "", -1

    def _on_sync(self, client: Client, response: SyncGroupResponse) -> None:
        if response.error_code is ErrorCode.NONE:
            owned = self.owners.setdefault(client.generation, {})
            for _topic, p in decode_assignment(response.assignment):
                holder = owned.setdefault(p, self._owner(client))
                assert holder == self._owner(client), (
                    f"partition {p} owned by {holder} and {self._owner(client)} "
                    f"in generation {client.generation}"
                )
        elif response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            client.member_id, client.generation = "", -1

    def _absorb_log(self) -> None:
        for record in self.ctx.log[self.log_seen :]:
            key = decode_key(record.key)
            if isinstance(key, OffsetCommitKey) and record.value is None:
                self.acked.pop((key.group, key.topic, key.partition), None)
            if key == GroupMetadataKey(GROUP) and record.value is None:
                # A deleted group starts again from generation 0, as in Kafka.
                self.owners.clear()
        self.log_seen = len(self.ctx.log)

    def _after(self) -> None:
        self._absorb_log()
        self._react()
        self._absorb_log()

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

    @rule(i=st.integers(0, 3))
    def heartbeat(self, i: int) -> None:
        c = self.clients[i]
        if c.member_id:
            error = self.ctx.heartbeat(GROUP, c.member_id, c.generation, c.instance_id)
            if error in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION):
                self._send_join(c)
            elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                c.member_id, c.generation = "", -1
        self._after()

    @rule(i=st.integers(0, 3))
    def leave(self, i: int) -> None:
        c = self.clients[i]
        if c.member_id and c.join_token is None:
            self.ctx.leave(GROUP, LeavingMember(c.member_id, c.instance_id))
            c.member_id, c.generation = "", -1
        self._after()

    @rule(i=st.integers(0, 3), p=st.integers(0, PARTITIONS - 1))
    def commit(self, i: int, p: int) -> None:
        c = self.clients[i]
        offset = next(self.offsets)
        response, _ = self.ctx.commit(
            GROUP,
            {("t", p): offset},
            generation=c.generation,
            member_id=c.member_id,
            instance_id=c.instance_id if c.member_id else None,
        )
        if response.topics[0].partitions[0].error_code is ErrorCode.NONE:
            self.acked[(GROUP, "t", p)] = offset
        self._after()

    @rule(p=st.integers(0, 2))
    def simple_commit(self, p: int) -> None:
        offset = next(self.offsets)
        response, _ = self.ctx.commit(SIMPLE, {("x", p): offset})
        assert response.topics[0].partitions[0].error_code is ErrorCode.NONE
        self.acked[(SIMPLE, "x", p)] = offset
        self._after()

    @rule()
    def delete_simple_group(self) -> None:
        self.ctx.delete_groups(SIMPLE)
        self._after()

    @rule(ms=st.sampled_from([0, 500, 1_000, 3_000, 9_000, 11_000, 31_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)
        self._after()

    @rule(n=st.integers(1, 5))
    def live_clients_tick(self, n: int) -> None:
        """Time passes while every client that has joined heartbeats, as real clients do."""
        for _ in range(n):
            for c in self.clients:
                if c.member_id and c.generation >= 0:
                    self.heartbeat(c.index)
            self.ctx.sleep(3_000)
            self._after()

    @rule()
    def sleep_past_retention(self) -> None:
        self.ctx.sleep(7 * DAY + 600_000)
        self._after()

    @rule()
    def restart(self) -> None:
        before = snapshot(self.ctx.shard)
        was_quiescent = quiescent(self.ctx.shard)
        self.ctx.restart()
        after = snapshot(self.ctx.shard)
        assert after["offsets"] == before["offsets"]
        if was_quiescent:
            assert after["groups"] == before["groups"]
        self._after()

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def acknowledged_commits_are_there(self) -> None:
        held: dict[tuple[str, str, int], Any] = {}
        for group_id in (GROUP, SIMPLE):
            for (topic, p), offset in self.ctx.committed(group_id).items():
                held[(group_id, topic, p)] = offset
        assert held == self.acked

    @invariant()
    def timers_agree(self) -> None:
        assert self.ctx.timers == self.ctx.shard.scheduled()


CoordinatorMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorMachine = CoordinatorMachine.TestCase
