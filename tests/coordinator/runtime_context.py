"""Context, with the shard hosted by the real coordinator runtime on two brokers.

The requests of Context (join, sync, commit, ...) go through CoordinatorRuntime.write
on the broker that leads the `__consumer_offsets` partition, over an in-memory log
(node.py, memory_writer.py), so the runtime's own rules are what the tests see:
- a reply reaches `replies` only once the high watermark has passed what its
  operation and every earlier one wrote; `replicate` moves the high watermark a
  whole batch at a time, as followers fetch;
- the other broker keeps a warm standby, replaying only what is committed
  (`standby_replays`);
- `move_leadership`: the old leader's shard is unloaded through its own unload(), and
  every request still waiting on it gets NOT_COORDINATOR; the records above the high
  watermark may be lost; the standby (or a fresh shard replaying the whole log) catches
  up to the log end and takes over; the old leader starts a new standby.

`timers` is the serving shard's own table; what the runtime adds is checked after
every input: the broker's one timer never fires later than the shard's first deadline.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any

from herdless.coordinator import CoordinatorConfig, CoordinatorShard, Now, Result, TimerKey
from herdless.coordinator.records import Record
from herdless.coordinator.result import OffloadedWork
from herdless.coordinator.runtime import CoordinatorType, Output, TopicPartition
from herdless.coordinator.topic_metadata import TopicsImage
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import (
    TEST_CONFIG,
    TOPIC_T,
    TOPIC_U,
    WALL_START_MS,
    Context,
    Operation,
)
from tests.coordinator.node import Cluster, Node

# What a request gets when the shard it reached stopped leading before answering it.
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
OFFSETS = TopicPartition("__consumer_offsets", 0)


class _ContextClock:
    def __init__(self, ctx: RuntimeContext) -> None:
        self._ctx = ctx

    def now(self) -> Now:
        return self._ctx.clock()


class RuntimeContext(Context):
    def __init__(self, config: CoordinatorConfig = TEST_CONFIG, now_ms: int = 0) -> None:
        # Context's state, less the shard, the log and the timers: the runtime's here.
        self.config = config
        self.now = now_ms
        self.wall = WALL_START_MS
        self._uuids = itertools.count()
        self._tokens = itertools.count()
        self.replies: dict[Hashable, Any] = {}
        self.rebalances: list[tuple[str, Any]] = []
        self.topics = TopicsImage([TOPIC_T, TOPIC_U])
        self.offloaded: list[tuple[CoordinatorShard, OffloadedWork]] = []
        self.complete_offloaded_at_once = True
        kind: CoordinatorType[CoordinatorShard] = CoordinatorType(
            OFFSETS.topic, lambda tp: self.new_shard()
        )
        self.kind = kind
        self.cluster = Cluster([kind], brokers=2)
        self.cluster.clock = _ContextClock(self)  # type: ignore[assignment]
        # Every answer is the first a request gets: the runtime answers each once.
        self._taken: dict[int, tuple[int, int]] = {n.broker_id: (0, 0) for n in self.nodes}
        self.leader_id = 0
        self.cluster.elect(OFFSETS, 0)
        self.cluster.settle()
        self._collect()

    # --- the brokers ---------------------------------------------------------------

    @property
    def nodes(self) -> list[Node]:
        return self.cluster.nodes

    @property
    def leader(self) -> Node:
        return self.nodes[self.leader_id]

    @property
    def follower(self) -> Node:
        return self.nodes[1 - self.leader_id]

    @property
    def shard(self) -> CoordinatorShard:
        shard = self.leader.runtime.shard(self.kind, OFFSETS.partition)
        assert shard is not None
        return shard

    @property
    def log(self) -> list[Record]:
        return self.cluster.log(OFFSETS).records

    @property
    def timers(self) -> dict[TimerKey, int]:
        return self.shard.scheduled()

    @property
    def high_watermark(self) -> int:
        return self.cluster.log(OFFSETS).high_watermark

    @property
    def standby(self) -> CoordinatorShard:
        shard = self.follower.runtime.shard(self.kind, OFFSETS.partition)
        assert shard is not None
        return shard

    @property
    def standby_offset(self) -> int:
        offset = self.follower.runtime.applied_offset(OFFSETS)
        assert offset is not None
        return offset

    # --- inputs --------------------------------------------------------------------

    def apply(self, result: Result) -> Result:
        """What the shard returned: its records are the runtime's to append, its replies the
        runtime's to release; the rebalances are kept, as the broker publishes them."""
        self.rebalances += result.rebalances
        return result

    def _take(self, node: Node, out: Output) -> None:
        node.take(out)
        self._collect()

    def _collect(self) -> None:
        """Move what each broker released into `replies`, in the order it was released;
        NOT_COORDINATOR stands for the error, as clients see it. A leader that reloads (a
        write not committed in time) replays at once, as the broker does."""
        if self.leader.to_replay:
            self.leader.replay_all(self.clock())
        for node in self.nodes:
            released, errors = self._taken[node.broker_id]
            for token in node.released[released:]:
                response = node.replies[token]
                if getattr(response, "error_code", None) is NOT_COORDINATOR:
                    # A parked request the shard's unload() answered: to its client, the
                    # same as any other NOT_COORDINATOR.
                    response = NOT_COORDINATOR
                self.replies[token] = response
            for token, error in list(node.errors.items())[errors:]:
                self.replies[token] = error
            self._taken[node.broker_id] = (len(node.released), len(node.errors))
        self.check_timer()
        if self.complete_offloaded_at_once and self.leader.offloads:
            self.complete_offloaded()

    def check_timer(self) -> None:
        """The broker's one timer for the partition fires no later than the shard's first
        deadline (it may fire earlier: the runtime polls early rather than ask the shard
        after every operation)."""
        if self.leader.runtime.shard(self.kind, OFFSETS.partition) is None:
            return
        first = self.shard.next_deadline()
        if first is not None:
            armed = self.leader.deadlines.get(OFFSETS)
            assert armed is not None and armed <= first, (armed, first)

    def send(self, operation: Operation) -> tuple[int, Result]:
        """Run one request through the leader's runtime; the token names it in `replies`
        once the runtime releases its answer. The Result is the shard's own."""
        token = self.token()
        results: list[Result] = []

        def run(shard: CoordinatorShard, t: Hashable, now: Now) -> Result:
            result = operation(shard, t, now)
            results.append(result)
            return result

        out = self.leader.runtime.write(self.kind, OFFSETS.partition, token, run, self.clock())
        self._take(self.leader, out)
        if results:
            self.apply(results[0])
        return token, results[0] if results else Result()

    def deliver(self, on_reply: dict[Any, Callable[[Any], None]]) -> None:
        """Hand the released replies, in order, to the callbacks of the requests they answer."""
        replies = self.replies
        while replies:
            token = next(iter(replies))
            response = replies.pop(token)
            callback = on_reply.pop(token, None)
            if callback is not None:
                callback(response)

    def complete_offloaded(self, count: int | None = None) -> None:
        leader = self.leader
        while leader.offloads and (count is None or count > 0):
            offload = leader.offloads.pop(0)
            out = leader.runtime.offloaded_done(offload, offload.work.run(), self.clock())
            self._take(leader, out)
            count = None if count is None else count - 1

    def sleep(self, ms: int) -> Result:
        """Let `ms` pass on both clocks; the broker polls at each deadline it armed."""
        self.now += ms
        self.wall += ms
        leader = self.leader
        while any(d <= self.now for d in leader.deadlines.values()):
            leader.poll_due(self.clock())
            self._collect()
        return Result()

    def replicate(self, n: int) -> None:
        """Followers fetch n more records, and the rest of the batch the last one is in: the
        high watermark moves towards the log end."""
        log = self.cluster.log(OFFSETS)
        target = min(log.high_watermark + n, log.log_end)
        if target > log.high_watermark:
            self.cluster.commit(OFFSETS, log.batch_end_after(target - 1))
            self._collect()

    def standby_replays(self, n: int) -> None:
        """The standby applies up to n more committed records."""
        follower = self.follower
        if n and OFFSETS in follower.to_replay:
            follower.writer.read_records = n
            follower.replay_step(OFFSETS, self.clock())
            self._collect()

    def move_leadership(self, *, truncate: bool, warm: bool) -> None:
        """The follower becomes leader; `truncate`: it never had the uncommitted tail;
        `warm`: it takes over with its standby, else it loads by replaying its whole log."""
        new = self.follower
        if not warm:
            self._take(new, new.runtime.on_leadership(OFFSETS, None, self.clock()))
        self.cluster.elect(OFFSETS, new.broker_id, truncate=truncate)
        self.leader_id = new.broker_id
        new.replay_all(self.clock())
        self._collect()

    def restart(self) -> None:
        raise NotImplementedError("a restart is a leadership move here")
