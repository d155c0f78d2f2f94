"""Offsets committed inside transactions (TxnOffsetCommit): pending until the marker that
ends the transaction, then committed or dropped, as Kafka's OffsetMetadataManager does;
and a shard replayed from the log, markers and all, ends in the same state."""

from __future__ import annotations

import random
from typing import Any

import pytest

from herdless.coordinator import CoordinatorShard, Result
from herdless.coordinator.messages import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from herdless.coordinator.records import OffsetCommitKey, decode_key
from herdless.coordinator.result import TransactionalProducer
from herdless.coordinator.runtime import EndTransaction, ReplayItem, TransactionalRun
from herdless.coordinator.runtime.loader import replay_transactional
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import Context
from tests.coordinator.snapshot import snapshot

PRODUCER = 4000
EPOCH = 3
OTHER_PRODUCER = 4001
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


def txn_request(
    group_id: str,
    offsets: dict[tuple[str, int], int],
    producer_id: int = PRODUCER,
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "",
) -> TxnOffsetCommitRequest:
    topics: dict[str, list[CommitPartition]] = {}
    for (topic, p), offset in offsets.items():
        topics.setdefault(topic, []).append(CommitPartition(p, offset, metadata))
    return TxnOffsetCommitRequest(
        group_id,
        f"txn-{producer_id}",
        producer_id,
        EPOCH,
        tuple(CommitTopic(t, tuple(ps)) for t, ps in topics.items()),
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
    )


class TxnContext(Context):
    """Context whose log keeps each result's records as the broker's writer reads them
    back: a transaction's as its batch, and the markers that end transactions."""

    def __init__(self) -> None:
        self.items: list[ReplayItem] = []
        super().__init__()

    def apply(self, result: Result) -> Result:
        if result.records:
            keys = [r.key for r in result.records]
            values = [r.value for r in result.records]
            producer = result.producer
            if producer is None:
                self.items.append((keys, values))
            else:
                # Applied once written, as the runtime applies a transaction's records.
                run = TransactionalRun(producer, keys, values)
                self.items.append(run)
                replay_transactional(self.shard, run)
        return super().apply(result)

    def txn_commit(self, group_id: str, offsets: dict[tuple[str, int], int], **kw: Any) -> Any:
        req = txn_request(group_id, offsets, **kw)
        token, result = self.send(lambda shard, t, now: shard.txn_offset_commit(req, t, now))
        return {
            (t.name, p.partition): p.error_code
            for t in result.reply_to(token).topics
            for p in t.partitions
        }

    def end_txn(self, producer_id: int, committed: bool) -> None:
        """The transaction coordinator's marker reaches the partition (WriteTxnMarkers)."""
        marker = EndTransaction(TransactionalProducer(producer_id, EPOCH), committed)
        replay_transactional(self.shard, marker)
        self.items.append(marker)

    def fetch_stable(self, group_id: str, topics: dict[str, list[int]] | None = None) -> Any:
        req = OffsetFetchRequest(
            group_id,
            None if topics is None else tuple(FetchTopic(t, tuple(ps)) for t, ps in topics.items()),
            require_stable=True,
        )
        token, result = self.send(lambda shard, t, now: shard.offset_fetch(req, t, now))
        return {
            (t.name, p.partition): (p.offset, p.error_code)
            for t in result.reply_to(token).topics
            for p in t.partitions
        }

    def replayed_items(self) -> CoordinatorShard:
        """A new shard that replayed the log as the runtime's loader does."""
        shard = self.new_shard()
        for item in self.items:
            if isinstance(item, TransactionalRun | EndTransaction):
                replay_transactional(shard, item)
            else:
                shard.replay_records(*item)
        return shard

    def assert_replays_alike(self) -> None:
        shard = self.replayed_items()
        assert snapshot(shard) == snapshot(self.shard)
        assert shard.offset_manager.pending.snapshot() == (
            self.shard.offset_manager.pending.snapshot()
        )


def test_offsets_of_a_transaction_count_once_it_commits() -> None:
    ctx = TxnContext()
    assert ctx.txn_commit("g", {("t", 0): 10, ("t", 1): 20}) == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.NONE,
    }
    # Written as one transactional batch of the producer, in Kafka's record format.
    run = ctx.items[-1]
    assert isinstance(run, TransactionalRun)
    assert (run.producer.producer_id, run.producer.producer_epoch) == (PRODUCER, EPOCH)
    assert [decode_key(k) for k in run.keys] == [
        OffsetCommitKey("g", "t", 0),
        OffsetCommitKey("g", "t", 1),
    ]
    # Not visible before the marker, and unstable to a fetch that requires stability.
    assert ctx.committed("g") == {}
    assert ctx.fetch_stable("g", {"t": [0, 1, 2]}) == {
        ("t", 0): (-1, UNSTABLE),
        ("t", 1): (-1, UNSTABLE),
        ("t", 2): (-1, ErrorCode.NONE),
    }
    ctx.assert_replays_alike()
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 10, ("t", 1): 20}
    assert ctx.fetch_stable("g") == {("t", 0): (10, ErrorCode.NONE), ("t", 1): (20, ErrorCode.NONE)}
    ctx.assert_replays_alike()


def test_an_aborted_transaction_leaves_the_committed_offsets_as_they_were() -> None:
    ctx = TxnContext()
    ctx.commit("g", {("t", 0): 5})
    ctx.txn_commit("g", {("t", 0): 10})
    assert ctx.fetch_stable("g") == {("t", 0): (-1, UNSTABLE)}
    # A fetch that does not require stability sees the last committed offset.
    assert ctx.committed("g") == {("t", 0): 5}
    ctx.end_txn(PRODUCER, committed=False)
    assert ctx.fetch_stable("g") == {("t", 0): (5, ErrorCode.NONE)}
    ctx.assert_replays_alike()


def test_a_plain_commit_after_the_transactions_offset_wins_one_before_loses() -> None:
    """Kafka keeps the commit later in the log: a transaction's offset replaces one
    committed before it, and not one committed after it, whenever the marker comes."""
    ctx = TxnContext()
    ctx.commit("g", {("t", 0): 1, ("t", 1): 1})
    ctx.txn_commit("g", {("t", 0): 10, ("t", 1): 10})
    ctx.commit("g", {("t", 1): 2})
    ctx.assert_replays_alike()
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 10, ("t", 1): 2}
    ctx.assert_replays_alike()


def test_two_transactions_on_one_partition_the_later_written_wins() -> None:
    ctx = TxnContext()
    ctx.txn_commit("g", {("t", 0): 10}, producer_id=PRODUCER)
    ctx.txn_commit("g", {("t", 0): 20}, producer_id=OTHER_PRODUCER)
    ctx.end_txn(OTHER_PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 20}
    # The first is still open: the partition stays unstable until it ends.
    assert ctx.fetch_stable("g") == {("t", 0): (-1, UNSTABLE)}
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 20}
    ctx.assert_replays_alike()
    # A later transaction wins over all of them.
    ctx.txn_commit("g", {("t", 0): 30}, producer_id=PRODUCER)
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 30}
    ctx.assert_replays_alike()


def test_a_marker_without_pending_offsets_changes_nothing() -> None:
    ctx = TxnContext()
    ctx.commit("g", {("t", 0): 5})
    ctx.end_txn(PRODUCER, committed=True)
    ctx.end_txn(OTHER_PRODUCER, committed=False)
    assert ctx.committed("g") == {("t", 0): 5}
    ctx.assert_replays_alike()


def test_a_simple_group_is_made_by_a_transactions_commit_with_no_generation() -> None:
    ctx = TxnContext()
    ctx.txn_commit("simple", {("t", 0): 1})
    assert "simple" in ctx.shard.groups
    assert ctx.shard.groups["simple"].protocol_type is None
    # An unknown group with a generation is refused, before anything is written.
    written = len(ctx.items)
    assert ctx.txn_commit("nobody", {("t", 0): 1}, generation=3, member_id="m") == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert len(ctx.items) == written
    assert ctx.txn_commit("", {("t", 0): 1}) == {("t", 0): ErrorCode.INVALID_GROUP_ID}


def test_a_members_commit_is_checked_against_its_generation() -> None:
    ctx = TxnContext()
    members = ctx.stable_group("g", 2)
    generation = ctx.shard.groups["g"].generation
    ok = ctx.txn_commit("g", {("t", 0): 1}, generation=generation, member_id=members[0])
    assert ok == {("t", 0): ErrorCode.NONE}
    stale = ctx.txn_commit("g", {("t", 0): 1}, generation=generation - 1, member_id=members[0])
    assert stale == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    stranger = ctx.txn_commit("g", {("t", 0): 1}, generation=generation, member_id="who")
    assert stranger == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # Before v3 a transaction's commit names no member, and a live group takes it.
    assert ctx.txn_commit("g", {("t", 1): 1}) == {("t", 1): ErrorCode.NONE}


def test_a_commit_without_a_producer_is_refused() -> None:
    ctx = TxnContext()
    assert ctx.txn_commit("g", {("t", 0): 1}, producer_id=-1) == {
        ("t", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING
    }
    assert ctx.items == []


def test_metadata_over_the_limit_is_refused_per_partition() -> None:
    ctx = TxnContext()
    too_long = "x" * (ctx.config.offset_metadata_max_bytes + 1)
    assert ctx.txn_commit("g", {("t", 0): 1}, metadata=too_long) == {
        ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE
    }
    assert ctx.fetch_stable("g", {"t": [0]}) == {("t", 0): (-1, ErrorCode.NONE)}


def test_offset_delete_drops_what_a_transaction_has_pending() -> None:
    ctx = TxnContext()
    ctx.txn_commit("g", {("t", 0): 10})
    response, result = ctx.offset_delete("g", {"t": [0]})
    assert response.error_code is ErrorCode.NONE
    assert [r.value for r in result.records] == [None]
    assert ctx.fetch_stable("g", {"t": [0]}) == {("t", 0): (-1, ErrorCode.NONE)}
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {}
    ctx.assert_replays_alike()


def test_deleting_a_group_tombstones_its_pending_offsets_too() -> None:
    ctx = TxnContext()
    ctx.commit("g", {("t", 0): 1})
    ctx.txn_commit("g", {("t", 0): 10, ("t", 1): 10})
    response, result = ctx.delete_groups("g")
    assert response.results == (("g", ErrorCode.NONE),)
    tombstoned = {decode_key(r.key) for r in result.records if r.value is None}
    assert {OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1)} <= tombstoned
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {}
    ctx.assert_replays_alike()


def test_expiry_waits_for_an_open_transaction() -> None:
    ctx = TxnContext()
    ctx.commit("g", {("t", 0): 1, ("t", 1): 1})
    ctx.txn_commit("g", {("t", 0): 10})
    ctx.sleep(ctx.config.offsets_retention_ms + ctx.config.offsets_retention_check_interval_ms)
    # t-1 expired; t-0 has a pending offset, and the group a transaction open.
    assert ctx.committed("g") == {("t", 0): 1}
    assert "g" in ctx.shard.groups
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 10}
    ctx.assert_replays_alike()


def test_a_group_with_only_pending_offsets_may_expire_as_in_kafka() -> None:
    """Kafka's cleanupExpiredOffsets: a group without committed offsets is removable even
    while a transaction has offsets pending for it; the commit then makes it again."""
    ctx = TxnContext()
    ctx.txn_commit("g", {("t", 0): 10})
    ctx.sleep(ctx.config.offsets_retention_check_interval_ms)
    ctx.end_txn(PRODUCER, committed=True)
    assert ctx.committed("g") == {("t", 0): 10}
    assert "g" in ctx.shard.groups


def test_unload_drops_pending_offsets() -> None:
    ctx = TxnContext()
    ctx.txn_commit("g", {("t", 0): 10})
    ctx.shard.unload()
    assert ctx.shard.offset_manager.pending.snapshot() == {}


@pytest.mark.parametrize("seed", range(12))
def test_random_runs_agree_with_kafkas_rule_by_record_offsets(seed: int) -> None:
    """Random transactional and plain commits, markers, OffsetDelete and DeleteGroups on one
    group, against a model that decides as Kafka does, by each record's offset in the log;
    after every step the shard answers as the model, and its replay is the same shard."""
    rng = random.Random(seed)
    ctx = TxnContext()
    keys = [("t", p) for p in range(3)]
    producers = [PRODUCER, OTHER_PRODUCER, OTHER_PRODUCER + 1]
    # key -> (offset committed, offset of its record in the log)
    main: dict[tuple[str, int], tuple[int, int]] = {}
    pending: dict[int, dict[tuple[str, int], tuple[int, int]]] = {}
    for step in range(120):
        position = len(ctx.items)
        op = rng.choice(["txn", "txn", "plain", "end", "end", "delete", "delete_group"])
        key = rng.choice(keys)
        if op == "txn":
            producer = rng.choice(producers)
            ctx.txn_commit("g", {key: step}, producer_id=producer)
            pending.setdefault(producer, {})[key] = (step, position)
        elif op == "plain":
            ctx.commit("g", {key: step})
            main[key] = (step, position)
        elif op == "end":
            producer = rng.choice(producers)
            committed = rng.random() < 0.6
            ctx.end_txn(producer, committed)
            for k, (offset, at) in pending.pop(producer, {}).items():
                if committed and (k not in main or at > main[k][1]):
                    main[k] = (offset, at)
        elif op == "delete":
            ctx.offset_delete("g", {key[0]: [key[1]]})
            main.pop(key, None)
            for offsets in pending.values():
                offsets.pop(key, None)
        else:
            ctx.delete_groups("g")
            main.clear()
            for offsets in pending.values():
                offsets.clear()
        expected = {
            k: (-1, UNSTABLE)
            if any(k in offsets for offsets in pending.values())
            else (main[k][0] if k in main else -1, ErrorCode.NONE)
            for k in keys
        }
        assert ctx.fetch_stable("g", {"t": [0, 1, 2]}) == expected, (seed, step, op)
        ctx.assert_replays_alike()
