"""The share coordinator alone: every operation's answers and records, Kafka's epoch
fencing, snapshots every N updates, replay equal to the live state, and a run on the
real runtime where a warm standby takes over without losing anything acknowledged."""

from __future__ import annotations

import itertools
import random
import uuid

import pytest

from herdless.coordinator.now import Now
from herdless.coordinator.records import Record
from herdless.coordinator.runtime import ShardState, TopicPartition, WriteOperation
from herdless.coordinator.share_state import (
    UNINITIALIZED_START_OFFSET,
    PartitionState,
    RecordState,
    ShareCoordinatorConfig,
    ShareCoordinatorShard,
    SharePartitionKey,
    StateBatch,
    share_coordinator,
)
from herdless.coordinator.share_state.manager import ShareGroupOffset
from herdless.coordinator.share_state.records import (
    SHARE_SNAPSHOT_RECORD_TYPE,
    SHARE_UPDATE_RECORD_TYPE,
    decode_key,
)
from herdless.protocol.errors import ErrorCode as E
from tests.coordinator.node import Cluster

TOPIC = uuid.UUID(int=7)
KEY = SharePartitionKey("g", TOPIC, 0)
OTHER = SharePartitionKey("g", TOPIC, 1)
A, ACK, ARC = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
CONFIG = ShareCoordinatorConfig(snapshot_update_records_per_snapshot=3)


def b(first: int, last: int, state: RecordState = ACK, count: int = 1) -> StateBatch:
    return StateBatch(first, last, state, count)


class Context:
    def __init__(self, config: ShareCoordinatorConfig = CONFIG) -> None:
        self.shard = ShareCoordinatorShard(config)
        self.now = Now(1_700_000_000_000, 5_000_000)
        self.records: list[Record] = []
        self.tokens = itertools.count()

    def run(self, op: str, *args: object) -> object:
        token = next(self.tokens)
        out = getattr(self.shard, op)(*args, token, self.now)
        self.records += out.records
        return out.reply_to(token)

    def record_types(self) -> list[int]:
        return [decode_key(r.key)[0] for r in self.records]

    def replayed(self) -> dict[SharePartitionKey, ShareGroupOffset]:
        fresh = ShareCoordinatorShard(CONFIG)
        for r in self.records:
            fresh.replay(r.key, r.value)
        return fresh.shares.states


def test_a_partition_never_initialized_reads_as_uninitialized() -> None:
    ctx = Context()
    state = ctx.run("read", KEY, -1)
    assert state == PartitionState(0, UNINITIALIZED_START_OFFSET, -1)
    assert not state.initialized  # type: ignore[attr-defined]
    assert ctx.records == []


def test_initialize_sets_the_start_and_state_epoch_and_drops_batches() -> None:
    ctx = Context()
    assert ctx.run("initialize", KEY, 1, 10) is E.NONE
    assert ctx.run("write", KEY, 1, 0, -1, (b(10, 12),)) is E.NONE
    assert ctx.run("initialize", KEY, 2, 50) is E.NONE
    assert ctx.run("read", KEY, 0) == PartitionState(2, 50, 0)
    # Writes keep the leader epoch (only a read raises it): the read records epoch 0.
    assert ctx.record_types() == [0, 1, 0, 1]


def test_a_new_leader_epoch_read_is_recorded_and_fences_older_leaders() -> None:
    ctx = Context()
    ctx.run("initialize", KEY, 0, 0)
    assert ctx.run("read", KEY, 4) == PartitionState(0, 0, 4)
    assert len(ctx.records) == 2  # the leader epoch, made durable before it is answered
    assert ctx.run("read", KEY, 4) == PartitionState(0, 0, 4)
    assert len(ctx.records) == 2
    assert ctx.run("read", KEY, 3) is E.FENCED_LEADER_EPOCH
    assert ctx.run("write", KEY, 0, 3, 5, ()) is E.FENCED_LEADER_EPOCH
    assert ctx.shard.read_summary(KEY, 3) is E.FENCED_LEADER_EPOCH
    # -1 names no leader epoch: never fenced.
    assert ctx.run("write", KEY, 0, -1, 5, ()) is E.NONE
    assert ctx.replayed()[KEY].leader_epoch == 4


def test_an_older_state_epoch_is_fenced() -> None:
    ctx = Context()
    ctx.run("initialize", KEY, 3, 0)
    assert ctx.run("initialize", KEY, 2, 0) is E.FENCED_STATE_EPOCH
    assert ctx.run("write", KEY, 2, 0, 5, ()) is E.FENCED_STATE_EPOCH
    assert ctx.run("write", KEY, 3, 0, 5, ()) is E.NONE
    assert ctx.run("write", KEY, -1, 0, 6, ()) is E.NONE
    assert ctx.run("read", KEY, 0) == PartitionState(3, 6, 0)


def test_writes_merge_batches_and_move_the_start() -> None:
    ctx = Context()
    ctx.run("initialize", KEY, 0, 0)
    ctx.run("write", KEY, 0, 0, -1, (b(0, 9, A, 1),))
    ctx.run("write", KEY, 0, 0, -1, (b(2, 4, ACK, 1), b(7, 7, ARC, 5)))
    ctx.run("write", KEY, 0, 0, 3, ())
    assert ctx.run("read", KEY, 0) == PartitionState(
        0, 3, 0, (b(3, 4, ACK), b(5, 6, A), b(7, 7, ARC, 5), b(8, 9, A))
    )


def test_every_nth_write_is_a_whole_snapshot() -> None:
    ctx = Context()
    ctx.run("initialize", KEY, 0, 0)
    for i in range(8):
        ctx.run("write", KEY, 0, 0, -1, (b(i, i),))
    # Three updates after each snapshot (CONFIG), then a snapshot of everything.
    assert ctx.record_types() == [0, 1, 1, 1, 0, 1, 1, 1, 0]
    last = ctx.records[-1]
    assert decode_key(last.key)[0] == SHARE_SNAPSHOT_RECORD_TYPE
    assert ctx.shard.shares.states[KEY].batches == (b(0, 7),)
    assert ctx.shard.shares.states[KEY].snapshot_epoch == 2
    assert SHARE_UPDATE_RECORD_TYPE in ctx.record_types()


def test_delete_forgets_the_partition_and_is_idempotent() -> None:
    ctx = Context()
    ctx.run("initialize", KEY, 0, 5)
    ctx.run("initialize", OTHER, 0, 6)
    assert ctx.run("delete", KEY) is E.NONE
    assert ctx.run("delete", KEY) is E.NONE
    assert ctx.run("read", KEY, -1) == PartitionState(0, UNINITIALIZED_START_OFFSET, -1)
    assert KEY not in ctx.replayed() and OTHER in ctx.replayed()
    assert [r.value for r in ctx.records[-2:]] == [None, None]


def test_the_summary_has_no_batches_and_writes_nothing() -> None:
    ctx = Context()
    ctx.run("initialize", KEY, 1, 5)
    ctx.run("write", KEY, 1, -1, -1, (b(5, 6),))
    before = len(ctx.records)
    assert ctx.shard.read_summary(KEY, -1) == PartitionState(1, 5, -1)
    assert len(ctx.records) == before


@pytest.mark.parametrize("seed", range(20))
def test_random_runs_replay_to_the_live_state(seed: int) -> None:
    rng = random.Random(seed)
    ctx = Context()
    keys = [KEY, OTHER, SharePartitionKey("h", TOPIC, 0)]
    for _ in range(150):
        key = rng.choice(keys)
        op = rng.random()
        if op < 0.1:
            ctx.run("initialize", key, rng.randint(0, 3), rng.randint(0, 50))
        elif op < 0.25:
            ctx.run("read", key, rng.randint(-1, 5))
        elif op < 0.3:
            ctx.run("delete", key)
        else:
            first = rng.randint(0, 60)
            batch = b(
                first, first + rng.randint(0, 5), rng.choice([A, ACK, ARC]), rng.randint(1, 4)
            )
            start = rng.choice([-1, -1, rng.randint(0, 60)])
            ctx.run("write", key, rng.randint(-1, 3), rng.randint(-1, 5), start, (batch,))
    live = {k: _comparable(v) for k, v in ctx.shard.shares.states.items()}
    assert {k: _comparable(v) for k, v in ctx.replayed().items()} == live


def _comparable(offset: ShareGroupOffset) -> PartitionState:
    return offset.partition_state()


# -- on the runtime ---------------------------------------------------------------


class OnRuntime:
    """Two brokers around the real runtime over in-memory logs; broker 0 leads."""

    def __init__(self) -> None:
        self.kind = share_coordinator(CONFIG)
        self.tp = TopicPartition(self.kind.topic, 0)
        self.cluster = Cluster([self.kind], brokers=2)
        self.cluster.elect(self.tp, 0)
        self.cluster.settle()

    def write(self, broker: int, op: WriteOperation[ShareCoordinatorShard]) -> int:
        node, token = self.cluster.nodes[broker], self.cluster.token()
        node.take(node.runtime.write(self.kind, 0, token, op, self.cluster.clock.now()))
        return token


def test_a_promoted_standby_keeps_every_acknowledged_write() -> None:
    rt = OnRuntime()
    init = rt.write(0, lambda s, t, now: s.initialize(KEY, 0, 0, t, now))
    writes = [
        rt.write(0, lambda s, t, now, i=i: s.write(KEY, 0, 0, -1, (b(i, i),), t, now))
        for i in range(5)
    ]
    node0 = rt.cluster.nodes[0]
    assert writes[-1] not in node0.replies  # answered only once committed
    rt.cluster.commit(rt.tp)
    assert node0.answer(init) is E.NONE
    assert all(node0.answer(w) is E.NONE for w in writes)
    rt.cluster.settle()
    # Written on the old leader, never committed: lost with its answer.
    lost = rt.write(0, lambda s, t, now: s.write(KEY, 0, 0, -1, (b(9, 9),), t, now))

    rt.cluster.elect(rt.tp, 1, truncate=True)
    rt.cluster.settle()
    node1 = rt.cluster.nodes[1]
    assert node1.runtime.state(rt.tp) is ShardState.ACTIVE
    assert node0.errors[lost] is E.NOT_COORDINATOR
    # The new leader of the share partition reads, with its new leader epoch.
    read = rt.write(1, lambda s, t, now: s.read(KEY, 1, t, now))
    rt.cluster.commit(rt.tp)
    assert node1.answer(read) == PartitionState(0, 0, 1, (b(0, 4),))
    # The old leader epoch is fenced on the new coordinator.
    stale = rt.write(1, lambda s, t, now: s.write(KEY, 0, 0, -1, (b(5, 5),), t, now))
    rt.cluster.commit(rt.tp)
    assert node1.answer(stale) is E.FENCED_LEADER_EPOCH
    # Broker 0 is now the standby, and holds the same state by replay.
    rt.cluster.settle()
    standby = rt.cluster.nodes[0].runtime.shard(rt.kind, 0)
    assert standby is not None
    assert standby.shares.states[KEY].partition_state() == PartitionState(0, 0, 1, (b(0, 4),))
