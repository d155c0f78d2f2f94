"""Randomized runs of share group (KIP-932) members, a clock, restarts and growing topics.

Clients behave as librdkafka's share consumer does: they join with an id of their
own, heartbeat with the epoch they last heard, take what they are given, lose
answers, go silent until their session ends, leave, come back, and change what
they subscribe to; topics gain partitions; the coordinator restarts from its log.

Invariants, after every step:
- replaying the log gives the share groups the live shard holds;
- every member has a session that can end;
- every member's target holds only partitions of topics it subscribes to.
And once the clients have heartbeated with nothing disturbing them, every member is
at the target's epoch with its target, and every partition of a subscribed topic is
given to at least one member.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from herdless.coordinator import TimerKey, TimerKind
from herdless.coordinator.share_messages import ShareGroupHeartbeatRequest
from herdless.coordinator.topic_metadata import TopicMetadata, TopicsImage
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TOPIC_U, Context

GROUP = "g"
CLIENTS = ("a", "b", "c", "d", "e")
SUBSCRIPTIONS = (("t",), ("u",), ("t", "u"))
SESSION_MS = 45_000


class ShareGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = Context()
        # The epoch each live client last heard (0: joining); a client not here is gone.
        self.heard: dict[str, int] = {}

    def beat(self, client: str, epoch: int, topics: tuple[str, ...] | None = None) -> Any:
        req = ShareGroupHeartbeatRequest(GROUP, client, epoch, subscribed_topic_names=topics)
        image = self.ctx.topics
        token, result = self.ctx.send(
            lambda shard, t, now: shard.share_group_heartbeat(req, image, t, now)
        )
        return result.reply_to(token)

    # --- what clients do --------------------------------------------------------------

    @rule(client=st.sampled_from(CLIENTS), topics=st.sampled_from(SUBSCRIPTIONS))
    def join(self, client: str, topics: tuple[str, ...]) -> None:
        response = self.beat(client, 0, topics)
        assert response.error_code is ErrorCode.NONE, response
        assert response.assignment is not None
        self.heard[client] = response.member_epoch

    @rule(client=st.sampled_from(CLIENTS), lost=st.booleans())
    def heartbeat(self, client: str, lost: bool) -> None:
        if client not in self.heard:
            return
        response = self.beat(client, self.heard[client])
        if response.error_code is ErrorCode.UNKNOWN_MEMBER_ID:
            del self.heard[client]  # gone: its session ended
            return
        if response.error_code is ErrorCode.FENCED_MEMBER_EPOCH:
            # Two answers lost in a row: it rejoins under its own id, as librdkafka does.
            topics = self.ctx.shard.share.groups[GROUP].members[client].subscribed_topic_names
            response = self.beat(client, 0, tuple(sorted(topics)))
        assert response.error_code is ErrorCode.NONE, response
        if not lost:
            self.heard[client] = response.member_epoch

    @rule(client=st.sampled_from(CLIENTS), topics=st.sampled_from(SUBSCRIPTIONS))
    def resubscribe(self, client: str, topics: tuple[str, ...]) -> None:
        if client in self.heard:
            response = self.beat(client, self.heard[client], topics)
            if response.error_code is ErrorCode.NONE:
                self.heard[client] = response.member_epoch

    @rule(client=st.sampled_from(CLIENTS))
    def leave(self, client: str) -> None:
        if client in self.heard:
            response = self.beat(client, -1)
            assert response.error_code in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID)
            del self.heard[client]

    @rule(ms=st.sampled_from([1_000, 20_000, SESSION_MS]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)

    @rule()
    def grow_a_topic(self) -> None:
        t = self.ctx.topics.topic("t")
        assert t is not None
        grown = TopicMetadata(t.topic_id, "t", t.num_partitions + 1)
        self.ctx.topics = TopicsImage([grown, self.ctx.topics.topic("u") or TOPIC_U])

    @rule()
    def restart(self) -> None:
        self.ctx.restart()

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def the_log_makes_the_same_groups(self) -> None:
        replayed = self.ctx.replayed(self.ctx.log).share.groups
        live = self.ctx.shard.share.groups
        assert set(replayed) == set(live)
        for group_id, group in live.items():
            other = replayed[group_id]
            assert (other.group_epoch, other.target_assignment_epoch) == (
                group.group_epoch,
                group.target_assignment_epoch,
            )
            assert other.metadata_hash == group.metadata_hash
            assert other.members == group.members
            assert other.target_assignment == group.target_assignment

    @invariant()
    def every_member_has_a_session(self) -> None:
        group = self.ctx.shard.share.groups.get(GROUP)
        for member_id in group.members if group else ():
            assert TimerKey(TimerKind.SHARE_SESSION, GROUP, member_id) in self.ctx.timers

    @invariant()
    def targets_follow_subscriptions(self) -> None:
        group = self.ctx.shard.share.groups.get(GROUP)
        if group is None:
            return
        for member_id, target in group.target_assignment.items():
            subscribed = {
                t.topic_id
                for name in group.members[member_id].subscribed_topic_names
                if (t := self.ctx.topics.topic(name)) is not None
            }
            assert {tp.topic_id for tp in target} <= subscribed

    def teardown(self) -> None:
        """Undisturbed, every live client reaches its target and every subscribed partition
        has a member."""
        for _ in range(2):
            for client in list(self.heard):
                self.heartbeat(client, lost=False)
        group = self.ctx.shard.share.groups.get(GROUP)
        if group is None or not group.members:
            return
        for member in group.members.values():
            assert member.member_epoch == group.target_assignment_epoch
            assert member.assigned == group.target_of(member.member_id)
        held = {tp for m in group.members.values() for tp in m.assigned}
        for name in {n for m in group.members.values() for n in m.subscribed_topic_names}:
            topic = self.ctx.topics.topic(name)
            assert topic is not None and set(topic.partitions()) <= held


TestShareGroupMachine = ShareGroupMachine.TestCase
TestShareGroupMachine.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
