"""The transaction coordinator alone, with a fake clock: records, states, every request's
error codes, timeouts, expiration, replay, and a run on the real runtime."""

from __future__ import annotations

import itertools
import struct
from dataclasses import replace

import pytest

from herdless.coordinator.now import Now
from herdless.coordinator.records import Record
from herdless.coordinator.runtime import ShardState, TopicPartition
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
        ProducerIdAndEpoch(E.NONE, 1000, 2), TxnMarkers("t", 1000, 2, False, frozenset())
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
    assert ctx.shard.pending_markers() == [TxnMarkers("t", 1000, 2, False, frozenset({TP0, TP1}))]
    assert ctx.run("end_transaction", "t", 1000, 0, True).response.error_code is E.PRODUCER_FENCED
    assert ctx.replayed() == ctx.live()


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


def test_a_promoted_standby_keeps_every_acknowledged_transaction() -> None:
    ids = itertools.count(1)
    kind = transaction_coordinator(CONFIG, lambda: next(ids))
    tp = TopicPartition(kind.topic, 0)
    cluster = Cluster([kind], brokers=2)
    cluster.elect(tp, 0)
    cluster.settle()

    def write(broker: int, op):  # noqa: ANN001, ANN202
        node, token = cluster.nodes[broker], cluster.token()
        node.take(node.runtime.write(kind, 0, token, op, cluster.clock.now()))
        return token

    init = write(0, lambda s, t, now: s.init_producer_id("t", 60_000, None, t, now))
    add = write(0, lambda s, t, now: s.add_partitions("t", 1, 0, [TP0], t, now))
    end = write(0, lambda s, t, now: s.end_transaction("t", 1, 0, True, t, now))
    node0 = cluster.nodes[0]
    assert end not in node0.replies  # EndTxn waits for its PrepareCommit to commit
    cluster.commit(tp)
    assert node0.answer(init) == ProducerIdAndEpoch(E.NONE, 1, 0)
    assert node0.answer(add) == {TP0: E.NONE}
    markers = node0.answer(end).markers
    assert markers == TxnMarkers("t", 1, 0, True, frozenset({TP0}))
    cluster.settle()

    cluster.elect(tp, 1)
    cluster.settle()
    node1 = cluster.nodes[1]
    assert node1.runtime.state(tp) is ShardState.ACTIVE
    pending = cluster.token()
    node1.take(node1.runtime.read(kind, 0, pending, lambda s: s.pending_markers()))
    assert node1.answer(pending) == [markers]
    done = write(1, lambda s, t, now: s.complete_markers(markers, t, now))
    cluster.commit(tp)
    assert node1.answer(done) is E.NONE
    shard = node1.runtime.shard(kind, 0)
    assert shard is not None and shard.describe("t").state is S.COMPLETE_COMMIT
