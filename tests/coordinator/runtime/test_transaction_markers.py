"""A transaction's offsets and its marker through the runtime, over in-memory logs: the
TxnOffsetCommit is written as the producer's transactional batch, complete_transaction
appends the marker and replays it into the serving shard, and a standby that replays
both ends in the same state, before and after a failover."""

from __future__ import annotations

from typing import Any

from herdless.coordinator import CoordinatorShard
from herdless.coordinator.messages import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from herdless.coordinator.result import TransactionalProducer
from herdless.coordinator.runtime import (
    CoordinatorType,
    EndTransaction,
    ShardState,
    TopicPartition,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, commit_request
from tests.coordinator.node import Cluster, Node

GROUPS = CoordinatorType("__consumer_offsets", lambda tp: CoordinatorShard(TEST_CONFIG))
TP = TopicPartition(GROUPS.topic, 0)
PRODUCER = TransactionalProducer(7000, 2)


def serving(leader: int = 0) -> Cluster:
    cluster = Cluster([GROUPS], brokers=2)
    cluster.elect(TP, leader)
    cluster.settle()
    assert cluster.nodes[leader].runtime.state(TP) is ShardState.ACTIVE
    return cluster


def txn_commit(cluster: Cluster, node: int, offset: int, epoch: int | None = None) -> int:
    req = TxnOffsetCommitRequest(
        "g",
        "txn",
        PRODUCER.producer_id,
        PRODUCER.producer_epoch if epoch is None else epoch,
        (CommitTopic("t", (CommitPartition(0, offset, ""),)),),
    )
    token = cluster.token()
    n = cluster.nodes[node]
    n.take(
        n.runtime.write(
            GROUPS,
            TP.partition,
            token,
            lambda shard, t, now: shard.txn_offset_commit(req, t, now),
            cluster.clock.now(),
        )
    )
    return token


def complete(cluster: Cluster, node: int, committed: bool, epoch: int | None = None) -> int:
    token = cluster.token()
    n = cluster.nodes[node]
    producer_epoch = PRODUCER.producer_epoch if epoch is None else epoch
    n.take(
        n.runtime.complete_transaction(
            GROUPS,
            TP.partition,
            token,
            PRODUCER.producer_id,
            producer_epoch,
            5,
            committed,
            cluster.clock.now(),
        )
    )
    return token


def shard_of(node: Node) -> CoordinatorShard:
    shard = node.runtime.shard(GROUPS, TP.partition)
    assert shard is not None
    return shard


def offsets(node: Node) -> dict[tuple[str, int], int]:
    shard = shard_of(node)
    return {(t, p): o.offset for t, p, o in shard.offsets.entries("g")}


def pending(node: Node) -> dict[int, Any]:
    return shard_of(node).offset_manager.pending.snapshot()


def fetch_stable(cluster: Cluster, node: int) -> Any:
    req = OffsetFetchRequest("g", (FetchTopic("t", (0,)),), require_stable=True)
    token = cluster.token()
    n = cluster.nodes[node]
    n.take(
        n.runtime.write(
            GROUPS,
            TP.partition,
            token,
            lambda s, t, now: s.offset_fetch(req, t, now),
            cluster.clock.now(),
        )
    )
    return n.answer(token).topics[0].partitions[0]


def test_the_marker_is_appended_replayed_and_answered_once_committed() -> None:
    cluster = serving()
    leader = cluster.nodes[0]
    token = txn_commit(cluster, 0, 42)
    cluster.commit(TP)
    assert leader.answer(token).topics[0].partitions[0].error_code is ErrorCode.NONE
    # The batch is the producer's transactional batch.
    assert list(cluster.log(TP).producers.values()) == [PRODUCER]
    assert fetch_stable(cluster, 0).error_code is ErrorCode.UNSTABLE_OFFSET_COMMIT

    done = complete(cluster, 0, committed=True)
    log = cluster.log(TP)
    assert list(log.markers.values()) == [EndTransaction(PRODUCER, True)]
    # Applied at once, answered once the marker is committed.
    assert offsets(leader) == {("t", 0): 42}
    assert done not in leader.replies
    cluster.commit(TP)
    assert leader.answer(done) is ErrorCode.NONE
    assert fetch_stable(cluster, 0).offset == 42


def test_a_standby_replays_pending_offsets_then_the_marker_and_takes_over() -> None:
    cluster = serving()
    standby = cluster.nodes[1]
    txn_commit(cluster, 0, 42)
    cluster.commit(TP)
    cluster.settle()
    assert pending(standby) == pending(cluster.nodes[0]) != {}
    assert offsets(standby) == {}

    complete(cluster, 0, committed=True)
    cluster.commit(TP)
    cluster.settle()
    assert pending(standby) == {}
    assert offsets(standby) == {("t", 0): 42}

    # The standby takes over with the same state, and serves it.
    cluster.elect(TP, 1)
    cluster.settle()
    assert standby.runtime.state(TP) is ShardState.ACTIVE
    assert fetch_stable(cluster, 1).offset == 42


def test_a_new_leader_completes_a_transaction_the_old_one_left_open() -> None:
    cluster = serving()
    txn_commit(cluster, 0, 42)
    cluster.commit(TP)
    cluster.elect(TP, 1)
    cluster.settle()
    new = cluster.nodes[1]
    assert fetch_stable(cluster, 1).error_code is ErrorCode.UNSTABLE_OFFSET_COMMIT
    done = complete(cluster, 1, committed=False)
    cluster.commit(TP)
    assert new.answer(done) is ErrorCode.NONE
    assert pending(new) == {} and offsets(new) == {}
    # The old leader, a standby now, rebuilt from the log, agrees.
    cluster.settle()
    assert pending(cluster.nodes[0]) == {} and offsets(cluster.nodes[0]) == {}


def test_a_marker_the_log_refuses_changes_nothing_and_says_why() -> None:
    cluster = serving()
    leader = cluster.nodes[0]
    txn_commit(cluster, 0, 42)
    cluster.commit(TP)
    token = complete(cluster, 0, committed=True, epoch=PRODUCER.producer_epoch - 1)
    assert leader.errors[token] is ErrorCode.INVALID_PRODUCER_EPOCH
    assert cluster.log(TP).markers == {}
    assert offsets(leader) == {} and pending(leader) != {}
    assert leader.reloads == []


def test_a_follower_is_not_the_coordinator_for_markers() -> None:
    cluster = serving()
    token = complete(cluster, 1, committed=True)
    assert cluster.nodes[1].errors[token] is ErrorCode.NOT_COORDINATOR
    assert cluster.log(TP).markers == {}


def test_plain_commits_replay_unchanged_beside_transactions() -> None:
    cluster = serving()
    leader = cluster.nodes[0]
    token = cluster.token()
    req = commit_request("g", {("t", 1): 5})
    leader.take(
        leader.runtime.write(
            GROUPS,
            TP.partition,
            token,
            lambda s, t, now: s.offset_commit(req, t, now),
            cluster.clock.now(),
        )
    )
    txn_commit(cluster, 0, 42)
    complete(cluster, 0, committed=True)
    cluster.commit(TP)
    cluster.settle()
    assert offsets(cluster.nodes[1]) == offsets(leader) == {("t", 0): 42, ("t", 1): 5}


def test_a_fenced_producers_commit_is_refused_by_the_log_and_changes_nothing() -> None:
    cluster = serving()
    leader = cluster.nodes[0]
    txn_commit(cluster, 0, 42)
    cluster.commit(TP)
    before = pending(leader)
    token = txn_commit(cluster, 0, 43, epoch=PRODUCER.producer_epoch - 1)
    assert leader.errors[token] is ErrorCode.INVALID_PRODUCER_EPOCH
    # Applied only once written: nothing to rebuild.
    assert pending(leader) == before
    assert leader.reloads == []
    assert leader.runtime.state(TP) is ShardState.ACTIVE
