"""Randomized runs of the real runtime on three brokers: counter writes and reads,
parked waits, offloaded sums, high watermark moves, replay steps, time, leadership in
doubt, failed appends, and leadership moves that keep or lose the uncommitted tail.

Invariants, checked after every step:
- no reply is released before its records, and those of every earlier operation
  of its shard, are committed (the high watermark when it was released had passed
  the log end as it was when its operation ran);
- replies of one broker's writes and reads are released in the order they ran;
- no acknowledged write is lost: its record is still at its offset, committed, and
  the serving leader's state, which is its whole log replayed, contains it;
- a standby equals a fresh replay of the committed log up to where it has applied;
- a broker that does not serve owes no caller an answer: whatever it left
  unanswered got unload()'s reply or NOT_COORDINATOR;
- every caller is answered at most once (Node).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from herdless.coordinator.runtime import ShardState
from tests.coordinator.node import Cluster
from tests.coordinator.runtime.counters import (
    COUNTERS,
    IDLE_RESET_MS,
    TP,
    CounterShard,
    Unloaded,
    get,
    increment,
    replayed,
    sum_offloaded,
    wait_for,
)

BROKERS = 3
NAMES = st.sampled_from("abc")


class RuntimeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster([COUNTERS], BROKERS)
        self.log = self.cluster.log(TP)
        self.leader = 0
        self.cluster.elect(TP, 0)
        self.cluster.settle()
        # Per token: the broker asked, the log end its answer waits for, and for an
        # increment, the offset of its record.
        self.asked: dict[int, tuple[int, int, int | None]] = {}
        # Tokens of writes and reads, whose replies keep their order.
        self.ordered: set[int] = set()
        self.acknowledged: dict[int, tuple[int, Any]] = {}

    # -- callers ---------------------------------------------------------------------

    def _ask(self, token: int, log_end_before: int) -> None:
        log_end = self.log.log_end
        offset = log_end - 1 if log_end > log_end_before else None
        self.asked[token] = (self.leader, log_end, offset)

    @rule(name=NAMES, by=st.integers(1, 3))
    def increment(self, name: str, by: int) -> None:
        before = self.log.log_end
        token = increment(self.cluster, self.leader, name, by)
        self._ask(token, before)
        self.ordered.add(token)

    @rule(name=NAMES)
    def get(self, name: str) -> None:
        token = get(self.cluster, self.leader, name)
        self._ask(token, self.log.log_end)
        self.ordered.add(token)

    @rule(name=NAMES, value=st.integers(1, 8))
    def wait_for(self, name: str, value: int) -> None:
        token = wait_for(self.cluster, self.leader, name, value)
        self._ask(token, self.log.log_end)

    @rule(name=NAMES, numbers=st.lists(st.integers(1, 3), max_size=3))
    def sum_offloaded(self, name: str, numbers: list[int]) -> None:
        token = sum_offloaded(self.cluster, self.leader, name, numbers)
        # Its record comes when the work completes: its answer waits at least for what
        # was written before it.
        self._ask(token, self.log.log_end)

    # -- the broker ------------------------------------------------------------------

    @rule(broker=st.integers(0, BROKERS - 1))
    def complete_offloads(self, broker: int) -> None:
        self.cluster.nodes[broker].run_offloads(self.cluster.clock.now())

    @rule(n=st.integers(1, 4))
    def commit(self, n: int) -> None:
        """Followers fetch n more batches: the high watermark moves on."""
        log = self.log
        ends = [end for end in log.batch_ends if end > log.high_watermark]
        if ends:
            self.cluster.commit(TP, ends[min(n, len(ends)) - 1])

    @rule(broker=st.integers(0, BROKERS - 1))
    def replay_step(self, broker: int) -> None:
        node = self.cluster.nodes[broker]
        if node.to_replay:
            node.replay_step(next(iter(node.to_replay)), self.cluster.clock.now())

    @rule()
    def settle(self) -> None:
        """Followers catch up with the leader, and every broker replays what it can."""
        if self.log.high_watermark < self.log.log_end:
            self.cluster.commit(TP)
        self.cluster.settle()

    # Mostly short: a commit not made within its timeout reloads the leader.
    @rule(ms=st.sampled_from([100, 100, 1_000, 1_000, 30_000, IDLE_RESET_MS]))
    def tick(self, ms: int) -> None:
        now = self.cluster.clock.advance(ms)
        for node in self.cluster.nodes:
            node.poll_due(now)

    @rule(reason=st.sampled_from(["disk full", "storage failed"]))
    def refuse_next_append(self, reason: str) -> None:
        self.log.refuse(reason)

    @rule(ms=st.sampled_from([100, IDLE_RESET_MS]))
    def tick_in_doubt(self, ms: int) -> None:
        """Time passes while leadership is in doubt (a lapsed session, renewed after)."""
        self.log.in_doubt = True
        self.tick(ms)
        for broker in range(BROKERS):
            self.complete_offloads(broker)
        self.log.in_doubt = False

    @rule(ms=st.sampled_from([500, 20_000]))
    def stall(self, ms: int) -> None:
        for node in self.cluster.nodes:
            node.take(node.runtime.postpone_timers(ms))

    @rule(
        leader=st.integers(0, BROKERS - 1),
        truncate=st.booleans(),
        warm=st.booleans(),
        load=st.booleans(),
        last_writes=st.integers(0, 2),
    )
    def elect(self, leader: int, truncate: bool, warm: bool, load: bool, last_writes: int) -> None:
        """Leadership moves (or is confirmed); `truncate`: the new leader never had the
        uncommitted tail; `warm`: the standbys caught up first; `load`: the new leader
        loads at once, else callers find it loading; `last_writes`: increments the old
        leader took just before, which are the tail unless something committed them."""
        if warm:
            self.cluster.settle()
        for _ in range(last_writes):
            self.increment("a", 1)
        self.cluster.elect(TP, leader, truncate=truncate and leader != self.leader)
        self.leader = leader
        if load:
            self.cluster.nodes[leader].replay_all(self.cluster.clock.now())

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def replies_wait_for_their_commit(self) -> None:
        for node in self.cluster.nodes:
            for token, committed in node.committed_at_release.items():
                response = node.replies[token]
                if isinstance(response, Unloaded):
                    continue
                _, log_end, _ = self.asked[token]
                assert committed[TP] >= log_end, (token, committed[TP], log_end)

    @invariant()
    def replies_keep_the_order_of_their_operations(self) -> None:
        for node in self.cluster.nodes:
            released = [t for t in node.released if t in self.ordered]
            assert released == sorted(released)

    @invariant()
    def acknowledged_writes_are_kept(self) -> None:
        log = self.log
        for node in self.cluster.nodes:
            for token in node.released:
                _, _, offset = self.asked[token]
                if offset is not None and isinstance(node.replies[token], int):
                    self.acknowledged[token] = (offset, node.replies[token])
        for offset, value in self.acknowledged.values():
            assert offset < log.high_watermark
            assert int(log.records[offset].value or b"-1") == value

    @invariant()
    def shards_are_their_log_replayed(self) -> None:
        log = self.log
        for node in self.cluster.nodes:
            state = node.runtime.state(TP)
            shard = node.runtime.shard(COUNTERS, TP.partition)
            if state is ShardState.ACTIVE:
                assert isinstance(shard, CounterShard)
                assert node.broker_id == log.leader
                assert shard.values == replayed(log.records)
            elif state is ShardState.STANDBY:
                assert isinstance(shard, CounterShard)
                applied = node.runtime.applied_offset(TP)
                assert applied is not None and applied <= log.high_watermark
                assert shard.values == replayed(log.records[:applied])

    @invariant()
    def only_a_serving_broker_owes_answers(self) -> None:
        for node in self.cluster.nodes:
            if node.runtime.state(TP) is ShardState.ACTIVE:
                continue
            for token, (asked_of, _, _) in self.asked.items():
                if asked_of == node.broker_id:
                    assert token in node.replies or token in node.errors, token


RuntimeMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRuntimeMachine = RuntimeMachine.TestCase
