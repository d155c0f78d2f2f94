"""A classic group's membership: members, leader, protocols, generation, state.

This is the bookkeeping half of Kafka's ClassicGroup; what requests do with it
(rebalances, timers, records) is in classic_group_manager.py, classic_join.py and
classic_rebalance.py. Members are kept in insertion order, so the leader chosen when
the old one leaves is deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

from herdless.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from herdless.coordinator.history import RebalanceHistory
from herdless.coordinator.messages import (
    JoinGroupMember,
    JoinGroupResponse,
    Protocol,
    SyncGroupResponse,
)
from herdless.coordinator.records import GroupMetadataValue, MemberMetadata
from herdless.coordinator.result import Reply
from herdless.coordinator.state import GroupState, transition
from herdless.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class JoinWaiter:
    """A parked JoinGroup: who to answer, and the request version the answer depends on."""

    token: Hashable
    api_version: int


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    awaiting_join: JoinWaiter | None = None
    awaiting_sync: Hashable | None = None
    # Set until the member's first join phase completes: a new member cannot
    # heartbeat yet, so its join request times out instead (Kafka's isNew).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        # A member parked in a rebalance cannot heartbeat; the rebalance's own
        # timeouts deal with it.
        return self.awaiting_join is not None or self.awaiting_sync is not None


class ClassicGroup:
    def __init__(
        self,
        group_id: str,
        current_state_timestamp: int | None,
        history_size: int,
        state: GroupState = GroupState.EMPTY,
        generation: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        # None only for groups loaded from records older than v2, which lack it;
        # offset expiry then falls back to commit timestamps, as in Kafka.
        self.current_state_timestamp = current_state_timestamp
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.num_awaiting_join = 0
        self.subscribed_topics: frozenset[str] | None = None
        self.new_member_added = False
        self.history = RebalanceHistory(history_size)
        # Who was in the last completed generation, for the rebalance history.
        self.generation_members: tuple[str, ...] = ()

    # --- state -----------------------------------------------------------------

    def transition_to(self, target: GroupState, wall_ms: int) -> None:
        """`wall_ms`: the wall clock, since the time is written in the group's record and
        offset expiry compares it with commit times, on any broker that loads it."""
        new_state = transition(self.group_id, self.state, target)
        self.previous_state = self.state
        self.state = new_state
        self.current_state_timestamp = wall_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # --- members -----------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def add_pending(self, member_id: str) -> None:
        assert member_id not in self.members
        self.pending_join_members.add(member_id)

    def add(self, member: Member, waiter: JoinWaiter | None = None) -> None:
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(p.name for p in member.protocols)
        member.awaiting_join = waiter
        if waiter is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(p.name for p in member.protocols)
            if member.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: Member,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: JoinWaiter | None,
    ) -> None:
        self.supported_protocols.subtract(p.name for p in member.protocols)
        member.protocols = protocols
        self.supported_protocols.update(p.name for p in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if waiter is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif waiter is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = waiter

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> tuple[Member, list[Reply]]:
        """Give a static member's place to a new member id; fence whatever the old id had parked."""
        old = self.members.pop(old_member_id)
        replies = []
        fenced_join = JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id)
        if (reply := self.complete_join(old, fenced_join)) is not None:
            replies.append(reply)
        if reply := self.complete_sync(old, SyncGroupResponse(ErrorCode.FENCED_INSTANCE_ID)):
            replies.append(reply)
        new = Member(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return new, replies

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def member_ids(self) -> tuple[str, ...]:
        return tuple(self.members)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # --- protocols -----------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all support."""
        if not self.members:
            raise ValueError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        # Ties: Kafka takes whichever its HashMap iterates first; we take the
        # first to reach the top count in member order, which is deterministic.
        return max(votes, key=lambda name: votes[name])

    def supports_protocols(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        names = {p.name for p in protocols}
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == n for name in names
        )

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics

    # --- parked requests ---------------------------------------------------------------

    def complete_join(self, member: Member, response: JoinGroupResponse) -> Reply | None:
        if member.awaiting_join is None:
            return None
        reply = Reply(member.awaiting_join.token, response)
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        return reply

    def complete_sync(self, member: Member, response: SyncGroupResponse) -> Reply | None:
        if member.awaiting_sync is None:
            return None
        reply = Reply(member.awaiting_sync, response)
        member.awaiting_sync = None
        return reply

    def init_next_generation(self, wall_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, wall_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, wall_ms)
        self.pending_sync_members.clear()

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """The members as the leader sees them in its JoinGroup response."""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def join_response(self, member_id: str, *, as_leader: bool) -> JoinGroupResponse:
        return JoinGroupResponse(
            ErrorCode.NONE,
            member_id=member_id,
            generation_id=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=self.join_members() if as_leader else (),
        )

    # --- persistence ---------------------------------------------------------------------

    def metadata_value(self) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka would write for this group now."""
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name),
                m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=(
                -1 if self.current_state_timestamp is None else self.current_state_timestamp
            ),
            members=members,
        )

    @classmethod
    def from_metadata(
        cls, group_id: str, value: GroupMetadataValue, history_size: int
    ) -> ClassicGroup:
        group = cls(
            group_id,
            None if value.current_state_timestamp == -1 else value.current_state_timestamp,
            history_size,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        for m in value.members:
            group.add(
                Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                    m.session_timeout,
                    value.protocol_type,
                    (Protocol(value.protocol or "", m.subscription),),
                    m.assignment,
                )
            )
        group.subscribed_topics = group.compute_subscribed_topics()
        group.generation_members = group.member_ids()
        return group
