"""The coordinator runtime's rules, driven through its inputs over in-memory logs.

No broker, no files, no event loop: the counter coordinator (counters.py) on its own
topic, and the group coordinator's shard beside it, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from herdless.coordinator import CoordinatorShard as GroupShard
from herdless.coordinator.messages import (
    FetchTopic,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from herdless.coordinator.records import Record
from herdless.coordinator.runtime import (
    CoordinatorType,
    ReplicaRole,
    RuntimeConfig,
    ShardState,
    TopicPartition,
    WriteOperation,
)
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, commit_request, range_protocols
from tests.coordinator.node import MONOTONIC_START_MS, Cluster, Node
from tests.coordinator.runtime.counters import (
    COUNTERS,
    COUNTERS_TOPIC,
    IDLE_RESET_MS,
    TP,
    CounterShard,
    Unloaded,
    counters,
    get,
    idle_key,
    increment,
    record,
    replayed,
    sum_offloaded,
    wait_for,
)

GROUPS = CoordinatorType("__consumer_offsets", lambda tp: GroupShard(TEST_CONFIG))
OFFSETS_TP = TopicPartition(GROUPS.topic, 0)
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR


def counter_shard(node: Node) -> CounterShard:
    shard = node.runtime.shard(COUNTERS, TP.partition)
    assert shard is not None
    return shard


def leading(
    brokers: int = 2, config: RuntimeConfig | None = None, auto_commit: bool = False
) -> Cluster:
    """Broker 0 leads the counters' partition and serves; the others keep standbys."""
    cluster = Cluster([COUNTERS, GROUPS], brokers, config)
    cluster.log(TP).auto_commit = auto_commit
    cluster.elect(TP, 0)
    cluster.settle()
    assert cluster.nodes[0].runtime.state(TP) is ShardState.ACTIVE
    return cluster


def prefill(cluster: Cluster, tp: TopicPartition, batches: Sequence[Sequence[Record]]) -> None:
    """Records a leader of long ago wrote and committed."""
    log = cluster.log(tp)
    for batch in batches:
        log.records += batch
        log.batch_ends.append(log.log_end)
    log.high_watermark = log.log_end


# -- loading and standbys --------------------------------------------------------


def test_a_leader_answers_load_in_progress_until_it_has_replayed_its_log() -> None:
    cluster = Cluster([COUNTERS], brokers=1)
    prefill(cluster, TP, [[record("a", i)] for i in range(1, 8)])
    cluster.elect(TP, 0)
    node = cluster.nodes[0]
    for _ in range(2):  # 7 records, read 3 at a time
        token = increment(cluster, 0, "a")
        assert node.errors[token] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        node.replay_step(TP, cluster.clock.now())
    assert node.runtime.state(TP) is ShardState.LOADING
    node.replay_all(cluster.clock.now())
    assert node.runtime.state(TP) is ShardState.ACTIVE
    assert [(s.records, s.records_since_leader) for s in node.loaded] == [(7, 7)]
    assert counter_shard(node).values == {"a": 7}
    assert counter_shard(node).loaded


class RunCounterShard(CounterShard):
    """Counters that also apply a run of records at once, and say how each came."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.calls.append(1)
        super().replay(key, value)

    def replay_records(self, keys: Sequence[bytes], values: Sequence[bytes | None]) -> None:
        self.calls.append(len(keys))
        for key, value in zip(keys, values, strict=True):
            super().replay(key, value)


@pytest.mark.parametrize("runs", [True, False])
def test_whole_batches_are_replayed_a_run_at_a_time(runs: bool) -> None:
    kind = CoordinatorType(COUNTERS_TOPIC, lambda tp: RunCounterShard() if runs else CounterShard())
    cluster = Cluster([kind], brokers=1)
    # Read 3 records at a time: the first batch is read whole, the second is cut.
    prefill(cluster, TP, [[record(n, 1) for n in "abc"], [record(n, 2) for n in "abcd"]])
    cluster.elect(TP, 0)
    node = cluster.nodes[0]
    node.replay_all(cluster.clock.now())
    shard = node.runtime.shard(kind, 0)
    assert shard is not None and shard.values == {"a": 2, "b": 2, "c": 2, "d": 2}
    if isinstance(shard, RunCounterShard):
        assert shard.calls == [3, 1, 1, 1, 1]


def test_a_standby_answers_not_coordinator_and_replays_only_what_is_committed() -> None:
    cluster = leading()
    for _ in range(3):
        increment(cluster, 0, "a")
    standby = cluster.nodes[1]
    cluster.commit(TP, 1)
    cluster.settle()
    assert standby.runtime.state(TP) is ShardState.STANDBY
    assert counter_shard(standby).values == {"a": 1}
    assert standby.runtime.applied_offset(TP) == 1
    assert not counter_shard(standby).loaded
    assert standby.errors[increment(cluster, 1, "a")] is NOT_COORDINATOR
    assert standby.errors[get(cluster, 1, "a")] is NOT_COORDINATOR

    cluster.commit(TP)
    cluster.settle()
    assert counter_shard(standby).values == {"a": 3}
    assert standby.loaded == []


def test_a_follower_without_standby_holds_nothing() -> None:
    cold = CoordinatorType(COUNTERS_TOPIC, lambda tp: CounterShard(), standby=False)
    cluster = Cluster([cold])
    cluster.elect(TP, 0)
    cluster.settle()
    assert cluster.nodes[1].runtime.state(TP) is None
    cluster.elect(TP, 1)
    assert cluster.nodes[0].runtime.state(TP) is None


def test_partitions_of_other_topics_are_ignored() -> None:
    cluster = Cluster([COUNTERS])
    node = cluster.nodes[0]
    out = node.runtime.on_leadership(
        TopicPartition("orders", 0), ReplicaRole.LEADER, cluster.clock.now()
    )
    assert not out.replay and node.runtime.partitions() == {}


# -- replies and commits ---------------------------------------------------------


def test_replies_wait_for_their_records_and_every_earlier_operations() -> None:
    cluster = leading()
    leader = cluster.nodes[0]
    first = increment(cluster, 0, "a")
    read_a = get(cluster, 0, "a")
    second = increment(cluster, 0, "b")
    read_b = get(cluster, 0, "b")
    assert leader.released == []

    cluster.commit(TP, 1)
    # The read wrote nothing, but showed what `first` wrote: it goes out with it.
    assert leader.released == [first, read_a]
    assert leader.replies[read_a] == 1

    cluster.commit(TP)
    assert leader.released == [first, read_a, second, read_b]
    assert leader.replies[read_b] == 1


def test_a_reply_goes_at_once_when_the_append_commits_it() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    token = increment(cluster, 0, "a", 5)
    assert node.replies[token] == 5
    assert node.replies[get(cluster, 0, "a")] == 5


def test_a_reply_that_wrote_nothing_needs_leadership_when_released() -> None:
    cluster = leading()
    leader = cluster.nodes[0]
    increment(cluster, 0, "a")
    read = get(cluster, 0, "a")
    cluster.log(TP).in_doubt = True
    cluster.commit(TP)
    assert leader.errors[read] is NOT_COORDINATOR


# -- leadership moves ------------------------------------------------------------


def test_a_promoted_standby_replays_only_its_uncommitted_tail() -> None:
    cluster = leading()
    for name in "aabbcc":
        increment(cluster, 0, name)
    cluster.commit(TP, 4)
    cluster.settle()
    old, new = cluster.nodes
    assert new.runtime.applied_offset(TP) == 4

    cluster.elect(TP, 1)
    assert new.runtime.state(TP) is ShardState.LOADING
    assert new.replay_all(cluster.clock.now()) == 1
    assert [(s.records, s.records_since_leader) for s in new.loaded] == [(6, 2)]
    assert counter_shard(new).values == {"a": 2, "b": 2, "c": 2}
    # The tail was replayed, not committed: nothing it shows goes out before it is.
    read = get(cluster, 1, "c")
    assert read not in new.replies
    cluster.commit(TP)
    assert new.replies[read] == 2

    # The old leader is a standby again, rebuilt from the log's start.
    assert old.runtime.state(TP) is ShardState.STANDBY
    cluster.settle()
    assert counter_shard(old).values == replayed(cluster.log(TP).records)
    assert not counter_shard(old).loaded


def test_a_failover_that_loses_the_tail_keeps_every_acknowledged_write() -> None:
    cluster = leading()
    old, new = cluster.nodes
    acknowledged = increment(cluster, 0, "a")
    cluster.commit(TP)
    cluster.settle()
    lost = increment(cluster, 0, "a")

    cluster.elect(TP, 1, truncate=True)
    assert old.replies[acknowledged] == 1
    assert old.errors[lost] is NOT_COORDINATOR
    cluster.settle()
    read = get(cluster, 1, "a")
    assert new.replies[read] == 1


def test_losing_leadership_answers_parked_requests_through_unload() -> None:
    cluster = leading()
    old = cluster.nodes[0]
    parked = wait_for(cluster, 0, "a", 10)
    pending = increment(cluster, 0, "b")
    assert TP in old.deadlines

    old.take(old.runtime.on_leadership(TP, None, cluster.clock.now()))
    assert old.replies[parked] == Unloaded()
    assert old.errors[pending] is NOT_COORDINATOR
    assert TP not in old.deadlines
    assert old.runtime.state(TP) is None
    # Nothing more comes out for them when the write commits after all.
    cluster.commit(TP)
    assert old.released == [parked]


def test_a_follower_that_leads_again_reloads_from_the_start() -> None:
    cluster = leading()
    old = cluster.nodes[0]
    for _ in range(4):
        increment(cluster, 0, "a")
    cluster.commit(TP)
    cluster.elect(TP, 1)
    cluster.settle()
    cluster.elect(TP, 0)
    assert old.replay_all(cluster.clock.now()) >= 1
    assert old.loaded[-1].records == 4
    assert counter_shard(old).values == {"a": 4}


def test_a_standby_under_an_unclean_truncation_is_rebuilt() -> None:
    cluster = leading()
    for name in "abcd":
        increment(cluster, 0, name)
    cluster.commit(TP)
    cluster.settle()
    standby = cluster.nodes[1]
    assert standby.runtime.applied_offset(TP) == 4

    cluster.log(TP).truncate(2)
    cluster.commit(TP, 2)
    cluster.settle()
    assert "no longer holds offset 4" in standby.reloads[-1].reason
    assert counter_shard(standby).values == {"a": 1, "b": 1}


# -- state ahead of the log ------------------------------------------------------


def test_a_failed_append_reloads_the_shard_to_what_the_log_holds() -> None:
    cluster = leading()
    leader = cluster.nodes[0]
    committed = increment(cluster, 0, "a")
    cluster.commit(TP)
    uncommitted = increment(cluster, 0, "a")
    parked = wait_for(cluster, 0, "a", 10)
    before = counter_shard(leader)

    cluster.log(TP).refuse("disk full")
    refused = increment(cluster, 0, "b")
    assert leader.replies[committed] == 1
    assert leader.errors[uncommitted] is NOT_COORDINATOR
    assert leader.errors[refused] is NOT_COORDINATOR
    assert leader.replies[parked] == Unloaded()
    assert "disk full" in leader.reloads[-1].reason
    assert leader.runtime.state(TP) is ShardState.LOADING
    assert leader.errors[get(cluster, 0, "a")] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    leader.replay_all(cluster.clock.now())
    after = counter_shard(leader)
    assert after is not before
    # The refused write is gone; the uncommitted one is in the leader's log, the truth.
    assert after.values == replayed(cluster.log(TP).records) == {"a": 2}


def test_a_write_not_committed_in_time_reloads_the_shard() -> None:
    cluster = leading(config=RuntimeConfig(commit_timeout_ms=1_000))
    leader = cluster.nodes[0]
    token = increment(cluster, 0, "a")
    assert leader.deadlines[TP] == cluster.clock.now().monotonic_ms + 1_000
    leader.poll_due(cluster.clock.advance(999))
    assert leader.reloads == []
    leader.poll_due(cluster.clock.advance(1))
    assert leader.errors[token] is NOT_COORDINATOR
    assert "not committed within 1000 ms" in leader.reloads[-1].reason
    cluster.commit(TP)
    leader.replay_all(cluster.clock.now())
    assert counter_shard(leader).values == {"a": 1}


def test_a_commit_that_failed_reloads_only_a_shard_still_waiting_on_it() -> None:
    cluster = leading()
    leader = cluster.nodes[0]
    increment(cluster, 0, "a")
    cluster.commit(TP)
    committed_end = cluster.log(TP).log_end
    # A failure heard after its records were committed after all changes nothing.
    leader.take(leader.runtime.commit_failed(TP, committed_end, "flush failed"))
    assert leader.reloads == []
    token = increment(cluster, 0, "a")
    leader.take(leader.runtime.commit_failed(TP, cluster.log(TP).log_end, "flush failed"))
    assert leader.errors[token] is NOT_COORDINATOR
    assert leader.reloads[-1].reason == "flush failed"
    assert leader.runtime.state(TP) is ShardState.LOADING
    # Once reloading, a late failure of the same records is not a second reload.
    leader.take(leader.runtime.commit_failed(TP, cluster.log(TP).log_end, "flush failed"))
    assert len(leader.reloads) == 1


# -- timers ------------------------------------------------------------------------


def test_timers_start_once_loaded_and_fire_through_poll() -> None:
    cluster = Cluster([COUNTERS], brokers=1)
    prefill(cluster, TP, [[record("a", 3)]])
    cluster.log(TP).auto_commit = True
    cluster.elect(TP, 0)
    node = cluster.nodes[0]
    assert TP not in node.deadlines
    node.replay_all(cluster.clock.now())
    deadline = MONOTONIC_START_MS + IDLE_RESET_MS
    assert node.deadlines[TP] == deadline

    node.poll_due(cluster.clock.advance(IDLE_RESET_MS - 1))
    assert counter_shard(node).values == {"a": 3}
    node.poll_due(cluster.clock.advance(1))
    assert counter_shard(node).values == {}
    assert cluster.log(TP).records[-1] == record("a", None)
    assert TP not in node.deadlines


def test_an_earlier_deadline_rearms_and_a_later_one_polls_early() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    increment(cluster, 0, "a")
    first = node.deadlines[TP]
    cluster.clock.advance(10)
    increment(cluster, 0, "a")
    # Moved later: the timer stays armed early, and the poll finds nothing due.
    assert node.deadlines[TP] == first
    node.poll_due(cluster.clock.advance(IDLE_RESET_MS - 10))
    assert counter_shard(node).values == {"a": 2}
    assert node.deadlines[TP] == first + 10


def test_timers_due_while_leadership_is_in_doubt_wait_until_it_is_settled() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    increment(cluster, 0, "a")
    cluster.log(TP).in_doubt = True
    assert node.errors[increment(cluster, 0, "a")] is NOT_COORDINATOR
    for _ in range(3):
        node.poll_due(cluster.clock.advance(IDLE_RESET_MS))
        assert counter_shard(node).values == {"a": 1}
        assert node.deadlines[TP] == cluster.clock.now().monotonic_ms + 100
    cluster.log(TP).in_doubt = False
    node.poll_due(cluster.clock.advance(100))
    assert counter_shard(node).values == {}


def test_a_stall_postpones_every_deadline() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    increment(cluster, 0, "a")
    node.take(node.runtime.postpone_timers(10_000))
    node.poll_due(cluster.clock.advance(IDLE_RESET_MS))
    assert counter_shard(node).values == {"a": 1}
    node.poll_due(cluster.clock.advance(10_000))
    assert counter_shard(node).values == {}


# -- offloaded work --------------------------------------------------------------


def test_offloaded_work_completes_with_the_time_it_completes_at() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    token = sum_offloaded(cluster, 0, "a", [1, 2, 3])
    assert token not in node.replies and len(node.offloads) == 1
    later = cluster.clock.advance(500)
    node.run_offloads(later)
    assert node.replies[token] == 6
    assert counter_shard(node).timer.scheduled() == {
        idle_key("a"): later.monotonic_ms + IDLE_RESET_MS
    }


def test_offloaded_work_of_a_state_since_rebuilt_is_dropped() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    token = sum_offloaded(cluster, 0, "a", [1, 2, 3])
    cluster.log(TP).refuse("disk full")
    increment(cluster, 0, "b")
    assert node.errors[token] is NOT_COORDINATOR
    node.replay_all(cluster.clock.now())
    node.run_offloads(cluster.clock.now())
    assert counter_shard(node).values == {}
    assert cluster.log(TP).records == []


def test_offloaded_work_done_while_leadership_is_in_doubt_waits() -> None:
    cluster = leading(brokers=1, auto_commit=True)
    node = cluster.nodes[0]
    token = sum_offloaded(cluster, 0, "a", [4])
    cluster.log(TP).in_doubt = True
    node.run_offloads(cluster.clock.now())
    assert token not in node.replies
    cluster.log(TP).in_doubt = False
    node.poll_due(cluster.clock.advance(100))
    assert node.replies[token] == 4


# -- the group coordinator beside it ---------------------------------------------


def send(cluster: Cluster, broker: int, operation: WriteOperation[GroupShard]) -> int:
    node, token = cluster.nodes[broker], cluster.token()
    node.take(node.runtime.write(GROUPS, 0, token, operation, cluster.clock.now()))
    return token


def join_parked(cluster: Cluster, broker: int, group_id: str) -> tuple[str, int]:
    """A member of a new group whose JoinGroup waits for the end of the join phase: its
    member id, and the token of its parked JoinGroup."""
    node = cluster.nodes[broker]
    first = JoinGroupRequest(group_id, 10_000, 30_000, "", "consumer", range_protocols("t"))
    member_id = node.replies[send(cluster, broker, lambda s, t, n: s.join_group(first, t, n))]
    member_id = member_id.member_id
    join = replace(first, member_id=member_id)
    token = send(cluster, broker, lambda s, t, n: s.join_group(join, t, n))
    assert token not in node.replies
    return member_id, token


def test_the_group_shard_runs_beside_the_counters_unchanged() -> None:
    cluster = Cluster([COUNTERS, GROUPS])
    cluster.log(OFFSETS_TP).auto_commit = True
    for tp in (TP, OFFSETS_TP):
        cluster.elect(tp, 0)
    cluster.settle()
    old, new = cluster.nodes
    member_id, joined = join_parked(cluster, 0, "g")
    # The end of the join phase is a timer of the group shard's, fired through poll.
    old.poll_due(cluster.clock.now())
    assert old.replies[joined].generation_id == 1
    sync = SyncGroupRequest("g", 1, member_id, ((member_id, b"assignment"),))
    synced = send(cluster, 0, lambda s, t, n: s.sync_group(sync, t, n))
    assert old.replies[synced].assignment == b"assignment"
    # The completed rebalance comes out as the shard gave it, for the history topic.
    assert [tp for tp, _ in old.rebalances] == [OFFSETS_TP]
    commit = commit_request("g", {("t", 0): 42}, generation=1, member_id=member_id)
    send(cluster, 0, lambda s, t, n: s.offset_commit(commit, t, n))
    counted = increment(cluster, 0, "a")
    assert counted not in old.replies  # the counters' log is not committed yet

    cluster.settle()
    cluster.elect(OFFSETS_TP, 1)
    cluster.settle()
    # The group partition moved; the counters' did not.
    assert old.runtime.state(TP) is ShardState.ACTIVE
    assert old.runtime.state(OFFSETS_TP) is ShardState.STANDBY
    fetch = OffsetFetchRequest("g", (FetchTopic("t", (0,)),))
    fetched = send(cluster, 1, lambda s, t, n: s.offset_fetch(fetch, t, n))
    assert new.replies[fetched].topics[0].partitions[0].offset == 42
    shard = new.runtime.shard(GROUPS, 0)
    assert shard is not None and shard.groups["g"].generation == 1


def test_a_parked_join_is_answered_by_the_group_shards_unload() -> None:
    cluster = Cluster([GROUPS])
    cluster.log(OFFSETS_TP).auto_commit = True
    cluster.elect(OFFSETS_TP, 0)
    cluster.settle()
    _, joined = join_parked(cluster, 0, "g")
    cluster.elect(OFFSETS_TP, 1)
    response = cluster.nodes[0].replies[joined]
    assert isinstance(response, JoinGroupResponse)
    assert response.error_code is NOT_COORDINATOR


# -- the runtime as a whole ------------------------------------------------------


def test_a_closed_runtime_answers_coordinator_not_available() -> None:
    cluster = leading()
    leader = cluster.nodes[0]
    pending = increment(cluster, 0, "a")
    leader.take(leader.runtime.close())
    assert leader.errors[pending] is NOT_COORDINATOR
    assert leader.errors[increment(cluster, 0, "a")] is ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_one_topic_has_one_coordinator() -> None:
    with pytest.raises(ValueError, match="two coordinators"):
        Cluster([COUNTERS, counters()])
