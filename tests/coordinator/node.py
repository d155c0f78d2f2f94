"""Brokers around the real runtime, as the asyncio glue will be, with no loop: each Node
keeps what the Outputs told it (replies, errors, timers, replay to do, offloaded work)
and a Cluster moves leadership and the high watermark over shared in-memory logs."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable
from typing import Any

from herdless.coordinator import Now
from herdless.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorType,
    LoadSummary,
    Offload,
    Output,
    Reload,
    ReplicaRole,
    RuntimeConfig,
    TopicPartition,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import WALL_START_MS
from tests.coordinator.memory_writer import MemoryLog, MemoryWriter

# Where the fake monotonic clock starts: far from the wall clock, as a broker's is.
MONOTONIC_START_MS = 5_000_000


class Clock:
    def __init__(self) -> None:
        self.elapsed_ms = 0

    def now(self) -> Now:
        return Now(WALL_START_MS + self.elapsed_ms, MONOTONIC_START_MS + self.elapsed_ms)

    def advance(self, ms: int) -> Now:
        self.elapsed_ms += ms
        return self.now()


class Node:
    """One broker: its runtime, and what the broker must do after each input."""

    def __init__(
        self,
        logs: dict[TopicPartition, MemoryLog],
        broker_id: int,
        kinds: Iterable[CoordinatorType[Any]],
        config: RuntimeConfig | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.writer = MemoryWriter(logs, broker_id)
        self.runtime = CoordinatorRuntime(self.writer, kinds, config)
        # Every answer a caller got, by token: each caller is answered once.
        self.replies: dict[Hashable, Any] = {}
        self.errors: dict[Hashable, ErrorCode] = {}
        # Tokens in the order their replies were released, and each partition's high
        # watermark when each was.
        self.released: list[Hashable] = []
        self.committed_at_release: dict[Hashable, dict[TopicPartition, int]] = {}
        self.deadlines: dict[TopicPartition, int] = {}
        self.to_replay: dict[TopicPartition, None] = {}
        self.offloads: list[Offload] = []
        self.rebalances: list[tuple[TopicPartition, Any]] = []
        self.loaded: list[LoadSummary] = []
        self.reloads: list[Reload] = []

    def take(self, out: Output) -> Output:
        for reply in out.replies:
            self._answered(reply.token)
            self.replies[reply.token] = reply.response
            self.released.append(reply.token)
            self.committed_at_release[reply.token] = {
                tp: log.high_watermark for tp, log in self.logs.items()
            }
        for token, error in out.errors:
            self._answered(token)
            self.errors[token] = error
        for tp, deadline in out.deadlines.items():
            if deadline is None:
                self.deadlines.pop(tp, None)
            else:
                self.deadlines[tp] = deadline
        self.to_replay.update(dict.fromkeys(out.replay))
        self.offloads += out.offloads
        self.rebalances += out.rebalances
        self.loaded += out.loaded
        self.reloads += out.reloads
        return out

    def _answered(self, token: Hashable) -> None:
        assert token not in self.replies and token not in self.errors, f"{token} answered twice"

    def answer(self, token: Hashable) -> Any:
        """The response `token` was released with; KeyError if it was not."""
        return self.replies[token]

    def replay_step(self, tp: TopicPartition, now: Now) -> None:
        del self.to_replay[tp]
        self.take(self.runtime.replay(tp, now))

    def replay_all(self, now: Now) -> int:
        """Replay until nothing is left to replay; how many steps it took."""
        steps = 0
        while self.to_replay:
            self.replay_step(next(iter(self.to_replay)), now)
            steps += 1
            assert steps < 10_000, "replay does not end"
        return steps

    def poll_due(self, now: Now) -> None:
        """Fire every partition's timer that is due, as the loop would."""
        for tp, deadline in list(self.deadlines.items()):
            if deadline <= now.monotonic_ms:
                del self.deadlines[tp]
                self.take(self.runtime.poll(tp, now))

    def run_offloads(self, now: Now) -> None:
        offloads, self.offloads = self.offloads, []
        for offload in offloads:
            self.take(self.runtime.offloaded_done(offload, offload.work.run(), now))


class Cluster:
    """Brokers sharing the logs of their partitions; broker 0 leads at first."""

    def __init__(
        self,
        kinds: Iterable[CoordinatorType[Any]],
        brokers: int = 2,
        config: RuntimeConfig | None = None,
    ) -> None:
        kinds = list(kinds)
        self.logs: dict[TopicPartition, MemoryLog] = {}
        self.clock = Clock()
        self.nodes = [Node(self.logs, i, kinds, config) for i in range(brokers)]
        self._tokens = itertools.count()

    def token(self) -> int:
        return next(self._tokens)

    def log(self, tp: TopicPartition) -> MemoryLog:
        return self.logs.setdefault(tp, MemoryLog())

    def elect(self, tp: TopicPartition, leader: int, *, truncate: bool = False) -> None:
        """`leader` leads `tp` from now on, every other broker follows it; `truncate`: the
        new leader never had the uncommitted tail, so every replica loses it."""
        log = self.log(tp)
        if truncate:
            log.truncate(log.high_watermark)
        log.leader = leader
        now = self.clock.now()
        # The old leader hears that it lost the partition before the new one serves.
        for node in sorted(self.nodes, key=lambda n: n.broker_id == leader):
            role = ReplicaRole.LEADER if node.broker_id == leader else ReplicaRole.FOLLOWER
            node.take(node.runtime.on_leadership(tp, role, now))

    def commit(self, tp: TopicPartition, offset: int | None = None) -> None:
        """The high watermark moves to `offset` (the log end by default) and every broker
        hears of it."""
        log = self.log(tp)
        log.high_watermark = log.log_end if offset is None else offset
        for node in self.nodes:
            node.take(node.runtime.high_watermark_moved(tp, log.high_watermark))

    def settle(self) -> None:
        now = self.clock.now()
        for node in self.nodes:
            node.replay_all(now)
