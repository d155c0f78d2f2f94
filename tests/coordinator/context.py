"""A fake broker around one CoordinatorShard: two clocks, a log, a timer table.

Like Kafka's GroupMetadataManagerTestContext: `sleep(ms)` advances the clocks and
fires due timers through the shard; every result's records go to `log` and its
timer changes to `timers`, which must always agree with the shard's own table.

The two clocks read far apart, as a real broker's do (its monotonic clock counts
from boot), so a deadline computed from the wall clock, or a timestamp written
from the monotonic one, shows in any test; `step_wall` moves the wall clock alone,
as NTP or an operator does.
"""

from __future__ import annotations

import itertools
import struct
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from typing import Any

from herdless.coordinator import (
    CancelTimer,
    CoordinatorConfig,
    CoordinatorShard,
    Now,
    OffloadedWork,
    Reply,
    Result,
    ScheduleTimer,
    TimerChange,
    TimerKey,
)
from herdless.coordinator.consumer_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
)
from herdless.coordinator.consumer_protocol import encode_subscription
from herdless.coordinator.messages import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    Protocol,
    SyncGroupRequest,
)
from herdless.coordinator.records import Record
from herdless.coordinator.topic_metadata import Partitions, TopicMetadata, TopicsImage
from herdless.protocol.errors import ErrorCode

# Kafka's defaults, but for the delays: no initial rebalance delay, and each consumer
# group's target assignment computed at once, inline (assignment batching and offload
# have tests of their own, which set them).
TEST_CONFIG = CoordinatorConfig(
    initial_rebalance_delay_ms=0,
    consumer_assignment_interval_ms=0,
    consumer_assignor_offload_enable=False,
)

# The cluster consumer group tests run against unless they say otherwise: topic ids
# that read as their names in failures.
TOPIC_T = TopicMetadata(uuid.UUID(int=0x7), "t", 6)
TOPIC_U = TopicMetadata(uuid.UUID(int=0x8), "u", 3)

# One request to a shard, as the broker runs it: (shard, token, now) -> Result.
Operation = Callable[[CoordinatorShard, Hashable, Now], Result]

# Where the fake wall clock starts: 2025-11-23, far from any monotonic reading here.
WALL_START_MS = 1_763_900_000_000


def subscription(*topics: str) -> bytes:
    return encode_subscription(list(topics))


def range_protocols(*topics: str) -> tuple[Protocol, ...]:
    return (Protocol("range", subscription(*topics)),)


def encode_assignment(partitions: list[tuple[str, int]]) -> bytes:
    """A compact test assignment: count, then (topic, partition) pairs."""
    out = bytearray(struct.pack(">i", len(partitions)))
    for topic, p in partitions:
        t = topic.encode()
        out += struct.pack(">h", len(t)) + t + struct.pack(">i", p)
    return bytes(out)


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    (n,), pos, out = struct.unpack_from(">i", data), 4, []
    for _ in range(n):
        (tl,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + tl].decode()
        (p,) = struct.unpack_from(">i", data, pos + 2 + tl)
        pos += 2 + tl + 4
        out.append((topic, p))
    return out


def range_assign(member_ids: list[str], topic: str, partitions: int) -> dict[str, bytes]:
    """Kafka's range assignor for one topic, over members sorted by id."""
    ordered = sorted(member_ids)
    per, extra = divmod(partitions, len(ordered))
    result, start = {}, 0
    for i, m in enumerate(ordered):
        n = per + (1 if i < extra else 0)
        result[m] = encode_assignment([(topic, p) for p in range(start, start + n)])
        start += n
    return result


def commit_request(
    group_id: str,
    offsets: dict[tuple[str, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "",
    retention_ms: int = -1,
    version: int = 8,
) -> OffsetCommitRequest:
    topics: dict[str, list[CommitPartition]] = {}
    for (topic, p), offset in offsets.items():
        topics.setdefault(topic, []).append(CommitPartition(p, offset, metadata))
    return OffsetCommitRequest(
        group_id,
        tuple(CommitTopic(t, tuple(ps)) for t, ps in topics.items()),
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time_ms=retention_ms,
        api_version=version,
    )


def replay(shard: CoordinatorShard, records: Iterable[Record]) -> None:
    for record in records:
        shard.replay(record.key, record.value)


class Context:
    def __init__(
        self, config: CoordinatorConfig = TEST_CONFIG, now_ms: int = 0, wall_ms: int = WALL_START_MS
    ) -> None:
        self.config = config
        # The monotonic clock, which every deadline and timer is on.
        self.now = now_ms
        # The wall clock, which every written timestamp is on.
        self.wall = wall_ms
        self._uuids = itertools.count()
        self._tokens = itertools.count()
        self.shard = self.new_shard()
        self.log: list[Record] = []
        self.timers: dict[TimerKey, int] = {}
        self.replies: dict[Hashable, Any] = {}
        # Completed rebalances the shard reported, as the broker would publish them.
        self.rebalances: list[tuple[str, Any]] = []
        # What the broker tells consumer group operations of the cluster's topics.
        self.topics = TopicsImage([TOPIC_T, TOPIC_U])
        # Work a shard offloaded (a server assignor's run), with the shard that asked, in
        # the order asked. By default the worker finishes it at once, at the same time.
        self.offloaded: list[tuple[CoordinatorShard, OffloadedWork]] = []
        self.complete_offloaded_at_once = True
        self.apply(self.shard.on_loaded(self.clock()))

    # --- plumbing ----------------------------------------------------------------

    def new_shard(self) -> CoordinatorShard:
        return CoordinatorShard(self.config, new_uuid=lambda: f"uuid{next(self._uuids)}")

    def replayed(self, records: Iterable[Record]) -> CoordinatorShard:
        """A new shard that has replayed `records` (not yet loaded: no timers)."""
        shard = self.new_shard()
        replay(shard, records)
        return shard

    def apply(self, result: Result) -> Result:
        self.log += result.records
        self.change_timers(result.timers)
        self.answer(result.replies)
        self.rebalances += result.rebalances
        assert self.timers == self.shard.scheduled()
        # What the broker arms its one loop timer for.
        assert self.shard.next_deadline() == min(self.timers.values(), default=None)
        self.offloaded += [(self.shard, work) for work in result.offloaded]
        if self.complete_offloaded_at_once:
            self.complete_offloaded()
        return result

    def complete_offloaded(self, count: int | None = None) -> None:
        """The worker finishes `count` pieces of offloaded work (None: all), oldest first,
        and the shard takes each result now. Work of a shard that no longer leads is
        dropped, as the broker drops it."""
        while self.offloaded and (count is None or count > 0):
            shard, work = self.offloaded.pop(0)
            if shard is self.shard:
                self.apply(work.complete(work.run(), self.clock()))
            count = None if count is None else count - 1

    def change_timers(self, changes: Iterable[TimerChange]) -> None:
        for change in changes:
            if isinstance(change, ScheduleTimer):
                self.timers.pop(change.key, None)  # re-insert: ties fire in scheduling order
                self.timers[change.key] = change.deadline_ms
            else:
                assert isinstance(change, CancelTimer)
                del self.timers[change.key]

    def answer(self, replies: Iterable[Reply]) -> None:
        """Hand replies to their requests: here at once, as if every write were durable."""
        for reply in replies:
            self.replies[reply.token] = reply.response

    def token(self) -> int:
        return next(self._tokens)

    def clock(self) -> Now:
        """Both clocks' readings, as the broker hands them to every operation."""
        return Now(self.wall, self.now)

    def step_wall(self, ms: int) -> None:
        """The wall clock steps by `ms` (back if negative); the monotonic one does not."""
        self.wall += ms

    def send(self, operation: Operation) -> tuple[int, Result]:
        """Run one request against the shard now; the token names it in `replies`."""
        token = self.token()
        return token, self.apply(operation(self.shard, token, self.clock()))

    def sleep(self, ms: int) -> Result:
        """Let `ms` pass on both clocks; every timer due meanwhile fires, as the broker
        fires them: one poll at the shard's next deadline."""
        self.now += ms
        self.wall += ms
        total = Result()
        while (deadline := self.shard.next_deadline()) is not None and deadline <= self.now:
            result = self.shard.poll(self.clock())
            # A timer that fired is gone from the broker's table; one scheduled and fired
            # within this poll shows only as scheduled.
            self.change_timers(result.timers)
            live = self.shard.scheduled()
            for key in [k for k, d in self.timers.items() if d <= self.now and k not in live]:
                del self.timers[key]
            total.extend(self.apply(replace(result, timers=[])))
            total.timers += result.timers
        return total

    def restart(self) -> None:
        """A new shard loaded by replaying everything written so far."""
        shard = self.replayed(self.log)
        self.apply(self.shard.unload())
        self.shard = shard
        self.timers = {}
        self.apply(shard.on_loaded(self.clock()))

    # --- requests ------------------------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols: tuple[Protocol, ...] | None = None,
        protocol_type: str = "consumer",
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        version: int = 9,
        client_id: str = "client",
    ) -> tuple[int, Result]:
        req = JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=protocols if protocols is not None else range_protocols("t"),
            group_instance_id=instance_id,
            client_id=client_id,
            client_host="/127.0.0.1",
            api_version=version,
        )
        return self.send(lambda shard, t, now: shard.join_group(req, t, now))

    def join_new_member(self, group_id: str, **kw: Any) -> tuple[int, str]:
        """JoinGroup twice, as a v4+ client does: get an id, then join with it (parked)."""
        token, result = self.join(group_id, **kw)
        first = result.reply_to(token)
        assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED, first
        token, _ = self.join(group_id, first.member_id, **kw)
        return token, first.member_id

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
        protocol_name: str | None = None,
    ) -> tuple[int, Result]:
        req = SyncGroupRequest(
            group_id,
            generation,
            member_id,
            tuple((assignments or {}).items()),
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocol_name=protocol_name,
        )
        return self.send(lambda shard, t, now: shard.sync_group(req, t, now))

    def heartbeat(
        self, group_id: str, member_id: str, generation: int, instance_id: str | None = None
    ) -> ErrorCode:
        req = HeartbeatRequest(group_id, generation, member_id, instance_id)
        token, result = self.send(lambda shard, t, now: shard.heartbeat(req, t, now))
        return result.reply_to(token).error_code

    def leave(self, group_id: str, *members: LeavingMember) -> Any:
        req = LeaveGroupRequest(group_id, members)
        token, result = self.send(lambda shard, t, now: shard.leave_group(req, t, now))
        return result.reply_to(token)

    def commit(
        self, group_id: str, offsets: dict[tuple[str, int], int], **kw: Any
    ) -> tuple[Any, Result]:
        """OffsetCommit; `kw` as for commit_request."""
        req = commit_request(group_id, offsets, **kw)
        token, result = self.send(lambda shard, t, now: shard.offset_commit(req, t, now))
        return result.reply_to(token), result

    def fetch(self, group_id: str, topics: dict[str, list[int]] | None = None) -> Any:
        req = OffsetFetchRequest(
            group_id,
            None if topics is None else tuple(FetchTopic(t, tuple(ps)) for t, ps in topics.items()),
        )
        token, result = self.send(lambda shard, t, now: shard.offset_fetch(req, t, now))
        return result.reply_to(token)

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        return {
            (t.name, p.partition): p.offset
            for t in self.fetch(group_id).topics
            for p in t.partitions
        }

    def offset_delete(self, group_id: str, topics: dict[str, list[int]]) -> tuple[Any, Result]:
        req = OffsetDeleteRequest(
            group_id, tuple(FetchTopic(t, tuple(ps)) for t, ps in topics.items())
        )
        token, result = self.send(lambda shard, t, now: shard.offset_delete(req, t, now))
        return result.reply_to(token), result

    def delete_groups(self, *group_ids: str) -> tuple[Any, Result]:
        token, result = self.send(lambda shard, t, now: shard.delete_groups(group_ids, t, now))
        return result.reply_to(token), result

    def list_groups(self, *states: str) -> Any:
        token = self.token()
        return self.apply(self.shard.list_groups(token, states)).reply_to(token)

    def describe(self, group_id: str, version: int = 5) -> Any:
        token = self.token()
        return self.apply(self.shard.describe_groups([group_id], token, version)).reply_to(token)[0]

    # --- consumer groups (KIP-848) -------------------------------------------------------

    def consumer_heartbeat(
        self, group_id: str, member_id: str, epoch: int, **fields: Any
    ) -> tuple[ConsumerGroupHeartbeatResponse, Result]:
        """A ConsumerGroupHeartbeat answered at once; `fields` as for send_consumer_heartbeat.
        A join parked for its offloaded target has its answer once the work is done: at
        once, unless the test holds offloaded work back (None then)."""
        token, result = self.send_consumer_heartbeat(group_id, member_id, epoch, **fields)
        response = result.reply_to(token)
        return (self.replies.get(token) if response is None else response), result

    def send_consumer_heartbeat(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        topics: tuple[str, ...] | None = None,
        owned: Partitions | None = None,
        rebalance_timeout_ms: int | None = None,
        **fields: Any,
    ) -> tuple[int, Result]:
        """A ConsumerGroupHeartbeat; when joining (epoch 0) the fields a join needs default
        to a subscription of topic t, owning nothing, a 30 s rebalance timeout."""
        if epoch == 0:
            topics = ("t",) if topics is None and "subscribed_topic_regex" not in fields else topics
            owned = frozenset() if owned is None else owned
            rebalance_timeout_ms = 30_000 if rebalance_timeout_ms is None else rebalance_timeout_ms
        req = ConsumerGroupHeartbeatRequest(
            group_id,
            member_id,
            epoch,
            subscribed_topic_names=topics,
            owned_partitions=owned,
            rebalance_timeout_ms=-1 if rebalance_timeout_ms is None else rebalance_timeout_ms,
            client_id=fields.pop("client_id", "client"),
            client_host=fields.pop("client_host", "/127.0.0.1"),
            **fields,
        )
        image = self.topics
        return self.send(lambda shard, t, now: shard.consumer_group_heartbeat(req, image, t, now))

    def consumer_describe(self, *group_ids: str) -> list[DescribedConsumerGroup]:
        token = self.token()
        result = self.apply(self.shard.consumer_group_describe(group_ids, self.topics, token))
        return list(result.reply_to(token))

    # --- whole scenarios ----------------------------------------------------------------

    def stable_group(
        self, group_id: str, n: int, *, partitions: int = 4, static: bool = False, **kw: Any
    ) -> list[str]:
        """n members joined, leader synced a range assignment of topic t, followers synced."""
        tokens, members = [], []
        for i in range(n):
            if static:
                token, result = self.join(group_id, instance_id=f"i{i}", **kw)
                tokens.append(token)
                members.append(None)
            else:
                token, member_id = self.join_new_member(group_id, **kw)
                tokens.append(token)
                members.append(member_id)
        self.sleep(0)
        self.sleep(self.config.initial_rebalance_delay_ms)
        responses: list[JoinGroupResponse] = [self.replies[t] for t in tokens]
        assert all(r is not None and r.error_code is ErrorCode.NONE for r in responses), responses
        members = [r.member_id for r in responses]
        leader = responses[0].leader
        generation = responses[0].generation_id
        assignment = range_assign(members, "t", partitions)
        self.sync(group_id, leader, generation, assignment, instance_id=self._instance(leader))
        for m in members:
            if m != leader:
                self.sync(group_id, m, generation, instance_id=self._instance(m))
        return members

    def _instance(self, member_id: str) -> str | None:
        for group in self.shard.groups.values():
            if member_id in group.members:
                return group.members[member_id].group_instance_id
        return None


def resp(response: Any, **changes: Any) -> Any:
    return replace(response, **changes)
