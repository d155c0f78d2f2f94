"""The transaction coordinator alone, with a fake clock: records, states, every request's
error codes, timeouts, expiration, replay, and a run on the real runtime."""

from __future__ import annotations

import itertools
import random
import struct
from dataclasses import replace
from typing import NoReturn

import pytest

from herdless.coordinator.now import Now
from herdless.coordinator.records import Record
from herdless.coordinator.runtime import ReadOperation, ShardState, TopicPartition, WriteOperation
from herdless.coordinator.transactions import (
    EndTxnAnswer,
    ProducerIdAndEpoch,
    TransactionConfig,
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionState,
    TxnMarkers,
    transaction_coordinator,
)
from herdless.coordinator.transactions.records import (
    TransactionLogValue,
    decode_transaction_key,
    decode_transaction_value,
    encode_transaction_key,
    encode_transaction_value,
)
from herdless.coordinator.transactions.state import IllegalTransition, check_transition
from herdless.protocol.errors import ErrorCode as E
from tests.coordinator.node import Cluster

S = TransactionState
TP0, TP1 = TopicPartition("out", 0), TopicPartition("out", 1)
CONFIG = TransactionConfig(transactional_id_expiration_ms=3_600_000)


class Context:
    def __init__(self, config: TransactionConfig = CONFIG) -> None:
        self.ids = itertools.count(1000)
        self.shard = TransactionCoordinatorShard(config, lambda: next(self.ids))
        self.now = Now(1_700_000_000_000, 5_000_000)
        self.records: list[Record] = []
        self.tokens = itertools.count()

    def run(self, op: str, *args: object, **kwargs: object) -> object:
        token = next(self.tokens)
        out = getattr(self.shard, op)(*args, token=token, now=self.now, **kwargs)
        self.records += out.records
        return out.reply_to(token)

    def sleep(self, ms: int) -> None:
        self.now = Now(self.now.wall_ms + ms, self.now.monotonic_ms + ms)
        self.records += self.shard.poll(self.now).records

    def meta(self, txn_id: str = "t") -> TransactionMetadata:
        return self.shard.transactions.transactions[txn_id]

    def replayed(self) -> dict[str, TransactionLogValue]:
        fresh = TransactionCoordinatorShard(CONFIG, lambda: 0)
        for r in self.records:
            fresh.replay(r.key, r.value)
        return {k: m.to_value() for k, m in fresh.transactions.transactions.items()}

    def live(self) -> dict[str, TransactionLogValue]:
        return {k: m.to_value() for k, m in self.shard.transactions.transactions.items()}

    def open(self, txn_id: str = "t", tv: int = 0) -> ProducerIdAndEpoch:
        init = self.run("init_producer_id", txn_id, 60_000, None)
        assert isinstance(init, ProducerIdAndEpoch) and init.error_code is E.NONE
        added = self.run(
            "add_partitions",
            txn_id,
            init.producer_id,
            init.producer_epoch,
            [TP0, TP1],
            client_transaction_version=tv,
        )
        assert added == {TP0: E.NONE, TP1: E.NONE}
        return init


# -- records ----------------------------------------------------------------------


def test_the_key_is_kafkas_version_0_layout() -> None:
    assert encode_transaction_key("tx") == b"\x00\x00" + b"\x00\x02tx"
    assert decode_transaction_key(b"\x00\x00\x00\x02tx") == "tx"


def test_a_v0_value_is_the_plain_struct_of_the_json_spec() -> None:
    value = TransactionLogValue(
        7, 3, 60_000, 1, (TopicPartition("a", 2), TopicPartition("a", 0)), 11, 10
    )
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60_000, 1)
        + struct.pack(">i", 1)
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 11, 10)
    )
    assert encode_transaction_value(value, 0) == expected
    assert decode_transaction_value(expected) == TransactionLogValue(
        7, 3, 60_000, 1, (TopicPartition("a", 0), TopicPartition("a", 2)), 11, 10
    )


def test_a_v1_value_is_flexible_with_its_tagged_fields_at_the_end() -> None:
    value = TransactionLogValue(
        7, 3, 60_000, 0, None, 11, -1, previous_producer_id=6, client_transaction_version=2
    )
    expected = (
        struct.pack(">hqhib", 1, 7, 3, 60_000, 0)
        + b"\x00"  # null compact array
        + struct.pack(">qq", 11, -1)
        + b"\x02"
        + b"\x00\x08"
        + struct.pack(">q", 6)
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )
    assert encode_transaction_value(value, 1) == expected
    assert decode_transaction_value(expected) == value


def test_values_round_trip_in_both_versions() -> None:
    value = TransactionLogValue(1, 2, 3, 2, (TP0, TP1), 4, 5, next_producer_id=9)
    assert decode_transaction_value(encode_transaction_value(value, 1)) == value
    v0 = decode_transaction_value(encode_transaction_value(value, 0))
    assert v0.next_producer_id == -1 and v0.transaction_partitions == (TP0, TP1)


# -- states -----------------------------------------------------------------------


def test_the_transition_table_refuses_what_kafka_refuses() -> None:
    check_transition(S.ONGOING, S.PREPARE_COMMIT)
    check_transition(S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT)
    for current, target in [
        (S.EMPTY, S.PREPARE_COMMIT),
        (S.PREPARE_COMMIT, S.COMPLETE_ABORT),
        (S.ONGOING, S.DEAD),
    ]:
        with pytest.raises(IllegalTransition):
            check_transition(current, target)
    assert S.PREPARE_EPOCH_FENCE.state_name == "PrepareEpochFence"


# -- requests ---------------------------------------------------------------------


@pytest.mark.parametrize("committed", [True, False])
def test_a_transaction_commits_or_aborts_through_prepare_and_markers(committed: bool) -> None:
    ctx = Context()
    init = ctx.open()
    assert (init.producer_id, init.producer_epoch) == (1000, 0)
    assert ctx.meta().state is S.ONGOING
    answer = ctx.run("end_transaction", "t", 1000, 0, committed)
    markers = TxnMarkers("t", 1000, 0, committed, frozenset({TP0, TP1}))
    # Version 1 of transactions has no epoch to tell the producer.
    assert answer == EndTxnAnswer(ProducerIdAndEpoch(E.NONE), markers)
    assert ctx.meta().state is (S.PREPARE_COMMIT if committed else S.PREPARE_ABORT)
    assert ctx.shard.pending_markers() == [markers]
    assert ctx.run("complete_markers", markers) is E.NONE
    assert ctx.meta().state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    assert ctx.shard.pending_markers() == []
    assert ctx.run("complete_markers", markers) is E.INVALID_TXN_STATE
    # A retried EndTxn gets the same answer; the opposite one is refused.
    assert ctx.run("end_transaction", "t", 1000, 0, committed) == EndTxnAnswer(
        ProducerIdAndEpoch(E.NONE)
    )
    assert (
        ctx.run("end_transaction", "t", 1000, 0, not committed).response.error_code
        is E.INVALID_TXN_STATE
    )
    assert ctx.replayed() == ctx.live()


def test_kip_890_bumps_the_epoch_at_every_transaction_end() -> None:
    ctx = Context()
    ctx.open(tv=2)
    answer = ctx.run("end_transaction", "t", 1000, 0, True, client_transaction_version=2)
    assert answer.response == ProducerIdAndEpoch(E.NONE, 1000, 1)
    # A retry with the epoch before the bump is a retry, not a zombie.
    assert ctx.run(
        "end_transaction", "t", 1000, 0, True, client_transaction_version=2
    ).response.error_code is (E.CONCURRENT_TRANSACTIONS)
    ctx.run("complete_markers", answer.markers)
    retried = ctx.run("end_transaction", "t", 1000, 0, True, client_transaction_version=2)
    assert retried == EndTxnAnswer(ProducerIdAndEpoch(E.NONE, 1000, 1))
    assert ctx.run("add_partitions", "t", 1000, 0, [TP0]) == {TP0: E.PRODUCER_FENCED}
    # The epoch before the bump commits nothing new; the current one cannot commit
    # with nothing open, but may abort (the producer may not know whether one is).
    v2 = {"client_transaction_version": 2}
    assert ctx.run("end_transaction", "t", 1000, 0, False, **v2).response.error_code is (
        E.INVALID_TXN_STATE
    )
    assert ctx.run("end_transaction", "t", 1000, 1, True, **v2).response.error_code is (
        E.INVALID_TXN_STATE
    )
    aborted = ctx.run("end_transaction", "t", 1000, 1, False, **v2)
    assert aborted == EndTxnAnswer(
        ProducerIdAndEpoch(E.NONE, 1000, 2), TxnMarkers("t", 1000, 2, False, frozenset(), 2)
    )
    assert ctx.replayed() == ctx.live()


def test_an_exhausted_epoch_at_end_txn_moves_the_producer_to_its_next_id() -> None:
    ctx = Context()
    ctx.open(tv=2)
    ctx.shard.transactions.transactions["t"] = replace(ctx.meta(), producer_epoch=32766)
    answer = ctx.run("end_transaction", "t", 1000, 32766, True, client_transaction_version=2)
    assert answer.response == ProducerIdAndEpoch(E.NONE, 1000, 32767)
    assert ctx.meta().next_producer_id == 1001
    ctx.run("complete_markers", answer.markers)
    assert (ctx.meta().producer_id, ctx.meta().producer_epoch) == (1001, 0)
    # A retry with the old id and its last epoch is recognised after the rotation.
    retried = ctx.run("end_transaction", "t", 1000, 32766, True, client_transaction_version=2)
    assert retried == EndTxnAnswer(ProducerIdAndEpoch(E.NONE, 1001, 0))
    assert ctx.replayed() == ctx.live()


def test_with_transaction_version_2_a_fenced_abort_is_bumped_twice() -> None:
    ctx = Context()
    ctx.open()
    ctx.run("init_producer_id", "t", 60_000, None)
    assert (ctx.meta().state, ctx.meta().producer_epoch) == (S.PREPARE_ABORT, 2)
    v1 = Context(TransactionConfig(transaction_version=1))
    v1.open()
    v1.run("init_producer_id", "t", 60_000, None)
    assert (v1.meta().state, v1.meta().producer_epoch) == (S.PREPARE_ABORT, 1)


def test_a_new_producer_fences_the_open_transaction_and_the_zombie() -> None:
    ctx = Context()
    ctx.open()
    assert ctx.run("init_producer_id", "t", 60_000, None) == ProducerIdAndEpoch(
        E.CONCURRENT_TRANSACTIONS
    )
    assert ctx.meta().state is S.PREPARE_ABORT and ctx.meta().producer_epoch == 2
    assert ctx.run("init_producer_id", "t", 60_000, None) == ProducerIdAndEpoch(
        E.CONCURRENT_TRANSACTIONS
    )
    ctx.run("complete_markers", ctx.shard.pending_markers()[0])
    assert ctx.run("init_producer_id", "t", 60_000, None) == ProducerIdAndEpoch(E.NONE, 1000, 3)
    # The zombie at epoch 0 is fenced everywhere.
    assert ctx.run("add_partitions", "t", 1000, 0, [TP0]) == {TP0: E.PRODUCER_FENCED}
    assert ctx.run("add_offsets", "t", 1000, 0, "g") is E.PRODUCER_FENCED
    assert ctx.run("end_transaction", "t", 1000, 0, True).response.error_code is E.PRODUCER_FENCED
    assert ctx.run("init_producer_id", "t", 60_000, (1000, 0)) == ProducerIdAndEpoch(
        E.PRODUCER_FENCED
    )
    assert ctx.run("init_producer_id", "t", 60_000, (999, 2)) == ProducerIdAndEpoch(
        E.PRODUCER_FENCED
    )
    assert ctx.replayed() == ctx.live()


def test_a_recovering_producer_bumps_its_own_epoch_and_a_retry_gets_it_again() -> None:
    ctx = Context()
    ctx.run("init_producer_id", "t", 60_000, None)
    assert ctx.run("init_producer_id", "t", 60_000, (1000, 0)) == ProducerIdAndEpoch(
        E.NONE, 1000, 1
    )
    assert ctx.run("init_producer_id", "t", 60_000, (1000, 0)) == ProducerIdAndEpoch(
        E.NONE, 1000, 1
    )


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    ctx = Context()
    ctx.run("init_producer_id", "t", 60_000, None)
    ctx.shard.transactions.transactions["t"] = replace(ctx.meta(), producer_epoch=32766)
    assert ctx.run("init_producer_id", "t", 60_000, None) == ProducerIdAndEpoch(E.NONE, 1001, 0)
    assert ctx.meta().previous_producer_id == 1000


def test_bad_requests_get_kafkas_error_codes() -> None:
    ctx = Context()
    assert ctx.run("init_producer_id", "", 60_000, None).error_code is E.INVALID_REQUEST
    assert (
        ctx.run("init_producer_id", "t", 900_001, None).error_code is E.INVALID_TRANSACTION_TIMEOUT
    )
    assert ctx.run("init_producer_id", "t", 0, None).error_code is E.INVALID_TRANSACTION_TIMEOUT
    assert (
        ctx.run("end_transaction", "nobody", 1, 0, True).response.error_code
        is E.INVALID_PRODUCER_ID_MAPPING
    )
    assert ctx.run("add_partitions", "nobody", 1, 0, [TP0]) == {TP0: E.INVALID_PRODUCER_ID_MAPPING}
    assert ctx.run("add_offsets", "", 1, 0, "g") is E.INVALID_REQUEST
    ctx.run("init_producer_id", "t", 60_000, None)
    assert ctx.run("add_partitions", "t", 1, 0, [TP0]) == {TP0: E.INVALID_PRODUCER_ID_MAPPING}
    assert ctx.run("end_transaction", "t", 1000, 0, True).response.error_code is E.INVALID_TXN_STATE
    assert ctx.run("add_offsets", "t", 1000, 0, "g") is E.NONE
    offsets = next(iter(ctx.meta().partitions))
    assert offsets.topic == "__consumer_offsets"
    ctx.run("end_transaction", "t", 1000, 0, True)
    assert ctx.run("add_partitions", "t", 1000, 0, [TP0]) == {TP0: E.CONCURRENT_TRANSACTIONS}
    assert (
        ctx.run("end_transaction", "t", 1000, 0, False).response.error_code is E.INVALID_TXN_STATE
    )
    assert ctx.shard.describe("x") is E.TRANSACTIONAL_ID_NOT_FOUND


def test_adding_partitions_already_in_the_transaction_writes_nothing() -> None:
    ctx = Context()
    ctx.open()
    written = len(ctx.records)
    assert ctx.run("add_partitions", "t", 1000, 0, [TP0]) == {TP0: E.NONE}
    assert len(ctx.records) == written


def test_a_transaction_open_past_its_timeout_is_aborted_at_a_fenced_epoch() -> None:
    ctx = Context()
    ctx.open()
    ctx.sleep(59_999)
    assert ctx.meta().state is S.ONGOING
    ctx.sleep(1)
    assert ctx.meta().state is S.PREPARE_ABORT
    assert ctx.shard.pending_markers() == [
        TxnMarkers("t", 1000, 2, False, frozenset({TP0, TP1}), transaction_version=2)
    ]
    assert ctx.run("end_transaction", "t", 1000, 0, True).response.error_code is E.PRODUCER_FENCED
    assert ctx.replayed() == ctx.live()


@pytest.mark.parametrize("wall_behind_ms", [1, 3_600_000])
def test_a_timeouts_abort_reads_as_one_with_the_wall_clock_behind(wall_behind_ms: int) -> None:
    """The timer fires on the monotonic clock, on time whatever the wall clock does; with
    the wall clock behind it (rounding, or stepped back an hour), the abort is still
    written as one past the timeout, which the broker counts and logs as a timeout, not
    a fence."""
    ctx = Context()
    ctx.open()
    ctx.now = Now(ctx.now.wall_ms + 60_000 - wall_behind_ms, ctx.now.monotonic_ms + 60_000)
    ctx.records += ctx.shard.poll(ctx.now).records
    meta = ctx.meta()
    assert meta.state is S.PREPARE_ABORT
    assert meta.last_update_timestamp_ms - meta.start_timestamp_ms >= meta.timeout_ms
    assert ctx.replayed() == ctx.live()


class _NotToBeWalked(dict[str, TransactionMetadata]):
    """The ids of a shard, refusing to be walked: only looked up by id."""

    def _walked(self, *_: object) -> NoReturn:
        raise AssertionError("every transactional id was walked")

    values = items = keys = __iter__ = _walked  # type: ignore[assignment]


def test_the_markers_sweep_looks_at_prepared_transactions_alone() -> None:
    """The broker asks every second which transactions wait for markers: the answer
    comes from an index of the ids in Prepare*, never from a walk over every id."""
    ctx = Context()
    for n in range(200):
        ctx.run("init_producer_id", f"idle-{n}", 60_000, None)
    ctx.open("a")
    ctx.open("b")
    ctx.run("end_transaction", "a", 1200, 0, True)
    ids = ctx.shard.transactions.transactions
    ctx.shard.transactions.transactions = _NotToBeWalked(ids)
    (markers,) = ctx.shard.pending_markers()
    assert (markers.transactional_id, markers.committed) == ("a", True)
    # The index follows every change: completion, a timeout's abort, replay.
    ctx.run("complete_markers", markers)
    assert ctx.shard.pending_markers() == []
    ctx.sleep(60_000)
    assert [m.transactional_id for m in ctx.shard.pending_markers()] == ["b"]
    fresh = TransactionCoordinatorShard(CONFIG, lambda: 0)
    for r in ctx.records:
        fresh.replay(r.key, r.value)
    assert fresh.pending_markers() == ctx.shard.pending_markers()


def test_an_idle_transactional_id_expires_with_a_tombstone() -> None:
    ctx = Context()
    ctx.run("init_producer_id", "t", 60_000, None)
    ctx.sleep(3_600_000)
    assert "t" not in ctx.shard.transactions.transactions
    assert ctx.records[-1] == Record(encode_transaction_key("t"), None)
    assert ctx.replayed() == {}


def test_timers_after_a_load_keep_the_time_already_spent() -> None:
    ctx = Context()
    ctx.open()
    ctx.sleep(40_000)
    loaded = TransactionCoordinatorShard(CONFIG, lambda: 0)
    for r in ctx.records:
        loaded.replay(r.key, r.value)
    later = Now(ctx.now.wall_ms, 9_000_000)
    loaded.on_loaded(later)
    assert loaded.next_deadline() == 9_000_000 + 20_000


# -- on the runtime ---------------------------------------------------------------


class OnRuntime:
    """Two brokers around the real runtime over in-memory logs; broker 0 leads."""

    def __init__(self) -> None:
        ids = itertools.count(1)
        self.kind = transaction_coordinator(CONFIG, lambda: next(ids))
        self.tp = TopicPartition(self.kind.topic, 0)
        self.cluster = Cluster([self.kind], brokers=2)
        self.cluster.elect(self.tp, 0)
        self.cluster.settle()

    def write(self, broker: int, op: WriteOperation[TransactionCoordinatorShard]) -> int:
        node, token = self.cluster.nodes[broker], self.cluster.token()
        node.take(node.runtime.write(self.kind, 0, token, op, self.cluster.clock.now()))
        return token

    def read(self, broker: int, op: ReadOperation[TransactionCoordinatorShard]) -> int:
        node, token = self.cluster.nodes[broker], self.cluster.token()
        node.take(node.runtime.read(self.kind, 0, token, op))
        return token

    def shard(self, broker: int) -> TransactionCoordinatorShard:
        shard = self.cluster.nodes[broker].runtime.shard(self.kind, 0)
        assert shard is not None
        return shard


def test_a_promoted_standby_keeps_every_acknowledged_transaction() -> None:
    rt = OnRuntime()
    init = rt.write(0, lambda s, t, now: s.init_producer_id("t", 60_000, None, t, now))
    add = rt.write(0, lambda s, t, now: s.add_partitions("t", 1, 0, [TP0], t, now))
    end = rt.write(0, lambda s, t, now: s.end_transaction("t", 1, 0, True, t, now))
    node0 = rt.cluster.nodes[0]
    assert end not in node0.replies  # EndTxn waits for its PrepareCommit to commit
    rt.cluster.commit(rt.tp)
    assert node0.answer(init) == ProducerIdAndEpoch(E.NONE, 1, 0)
    assert node0.answer(add) == {TP0: E.NONE}
    markers = node0.answer(end).markers
    assert markers == TxnMarkers("t", 1, 0, True, frozenset({TP0}))
    rt.cluster.settle()

    rt.cluster.elect(rt.tp, 1)
    rt.cluster.settle()
    node1 = rt.cluster.nodes[1]
    assert node1.runtime.state(rt.tp) is ShardState.ACTIVE
    pending = rt.read(1, lambda s: s.pending_markers())
    assert node1.answer(pending) == [markers]
    done = rt.write(1, lambda s, t, now: s.complete_markers(markers, t, now))
    rt.cluster.commit(rt.tp)
    assert node1.answer(done) is E.NONE
    assert rt.shard(1).describe("t").state is S.COMPLETE_COMMIT


def test_an_end_txn_lost_in_a_failover_was_never_acknowledged() -> None:
    rt = OnRuntime()
    rt.write(0, lambda s, t, now: s.init_producer_id("t", 60_000, None, t, now))
    rt.write(0, lambda s, t, now: s.add_partitions("t", 1, 0, [TP0], t, now))
    rt.cluster.commit(rt.tp)
    rt.cluster.settle()
    end = rt.write(0, lambda s, t, now: s.end_transaction("t", 1, 0, True, t, now))
    # Broker 1 never had the PrepareCommit: it is lost, and so is the answer.
    rt.cluster.elect(rt.tp, 1, truncate=True)
    rt.cluster.settle()
    assert rt.cluster.nodes[0].errors[end] is E.NOT_COORDINATOR
    assert rt.shard(1).describe("t").state is S.ONGOING
    assert rt.shard(1).pending_markers() == []
    # The producer retries on the new coordinator, which commits it.
    again = rt.write(1, lambda s, t, now: s.end_transaction("t", 1, 0, True, t, now))
    rt.cluster.commit(rt.tp)
    assert rt.cluster.nodes[1].answer(again).markers == TxnMarkers(
        "t", 1, 0, True, frozenset({TP0})
    )


def test_a_timeout_started_on_the_old_leader_fires_on_the_new_one() -> None:
    rt = OnRuntime()
    rt.write(0, lambda s, t, now: s.init_producer_id("t", 60_000, None, t, now))
    rt.write(0, lambda s, t, now: s.add_partitions("t", 1, 0, [TP0], t, now))
    rt.cluster.commit(rt.tp)
    rt.cluster.clock.advance(50_000)
    rt.cluster.elect(rt.tp, 1)
    rt.cluster.settle()
    node1 = rt.cluster.nodes[1]
    node1.poll_due(rt.cluster.clock.advance(9_999))
    assert rt.shard(1).describe("t").state is S.ONGOING
    node1.poll_due(rt.cluster.clock.advance(1))
    assert rt.shard(1).describe("t").state is S.PREPARE_ABORT


def test_a_partition_leader_verifies_its_partition_is_in_the_transaction() -> None:
    ctx = Context()
    ctx.open()
    other = TopicPartition("other", 0)
    verify = ctx.shard.verify_partitions
    assert verify("t", 1000, 0, [TP0, other]) == {TP0: E.NONE, other: E.TRANSACTION_ABORTABLE}
    assert verify("t", 1000, 1, [TP0]) == {TP0: E.PRODUCER_FENCED}
    assert verify("t", 7, 0, [TP0]) == {TP0: E.INVALID_PRODUCER_ID_MAPPING}
    assert verify("", 1000, 0, [TP0]) == {TP0: E.INVALID_REQUEST}
    ctx.run("end_transaction", "t", 1000, 0, True)
    assert verify("t", 1000, 0, [TP0]) == {TP0: E.CONCURRENT_TRANSACTIONS}


def test_transactions_are_listed_by_state_producer_and_age() -> None:
    ctx = Context()
    ctx.open("a")
    ctx.sleep(5_000)
    ctx.run("init_producer_id", "b", 60_000, None)
    ids = ctx.shard.list_transactions
    assert {m.transactional_id for m in ids()} == {"a", "b"}
    assert [m.transactional_id for m in ids(states=["Ongoing"])] == ["a"]
    assert [m.transactional_id for m in ids(producer_ids=[1001])] == ["b"]
    wall = ctx.now.wall_ms
    assert [m.transactional_id for m in ids(min_duration_ms=5_000, now_wall_ms=wall)] == ["a"]
    assert ids(min_duration_ms=5_001, now_wall_ms=wall) == []


@pytest.mark.parametrize("seed", range(5))
def test_random_runs_replay_to_the_live_state(seed: int) -> None:
    """Any mix of requests, right or stale, timeouts and expirations: replaying what
    was written gives the state the coordinator serves, and the open transactions'
    markers name exactly their partitions."""
    rng = random.Random(seed)
    ctx = Context(TransactionConfig(transactional_id_expiration_ms=200_000))
    txn_ids = ["a", "b", "c"]
    for _ in range(300):
        txn_id = rng.choice(txn_ids)
        meta = ctx.shard.transactions.transactions.get(txn_id)
        pid = meta.producer_id if meta else 1
        epoch = (meta.producer_epoch if meta else 0) - rng.choice([0, 0, 0, 1])
        tv = rng.choice([0, 2])
        step = rng.randrange(7)
        if step == 0:
            expected = (pid, epoch) if meta and rng.random() < 0.3 else None
            ctx.run("init_producer_id", txn_id, rng.choice([10_000, 60_000]), expected)
        elif step == 1:
            tps = rng.sample([TP0, TP1, TopicPartition("x", 3)], 2)
            ctx.run("add_partitions", txn_id, pid, epoch, tps, client_transaction_version=tv)
        elif step == 2:
            ctx.run("add_offsets", txn_id, pid, epoch, rng.choice(["g1", "g2"]))
        elif step == 3:
            ctx.run(
                "end_transaction",
                txn_id,
                pid,
                epoch,
                rng.random() < 0.5,
                client_transaction_version=tv,
            )
        elif step == 4 and ctx.shard.pending_markers():
            ctx.run("complete_markers", rng.choice(ctx.shard.pending_markers()))
        else:
            ctx.sleep(rng.choice([1_000, 20_000, 100_000]))
        assert ctx.replayed() == ctx.live()
        for markers in ctx.shard.pending_markers():
            assert markers.partitions == ctx.meta(markers.transactional_id).partitions
