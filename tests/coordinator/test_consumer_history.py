"""A consumer group's history of target assignments, with a fake clock: why each target
came, when (on the wall clock, as W + ms since each test began), and how long each member
took to reach it."""

from __future__ import annotations

from dataclasses import replace

from herdless.coordinator.group_config import CONSUMER_ASSIGNMENT_INTERVAL_MS, GroupConfigs
from herdless.coordinator.messages import MemberReconciliation, RebalanceRecord
from herdless.coordinator.topic_metadata import TopicMetadata
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, TOPIC_U, WALL_START_MS, Context
from tests.coordinator.test_consumer_groups import SESSION_MS, member, parts

W = WALL_START_MS


def entries(ctx: Context, group_id: str = "g") -> list[RebalanceRecord]:
    """What the shard published for the group, in order."""
    return [entry for g, entry in ctx.rebalances if g == group_id]


def test_the_first_member_reaches_the_first_target_at_once() -> None:
    ctx = Context(now_ms=1_000)
    ctx.consumer_heartbeat("g", "m1", 0, client_id="rdkafka")
    (entry,) = entries(ctx)
    assert (entry.protocol, entry.cause, entry.detail) == (
        "consumer",
        "member joined",
        "m1 (rdkafka)",
    )
    assert (entry.from_generation, entry.to_generation) == (0, 1)
    assert (entry.started_ms, entry.ended_ms, entry.superseded) == (W, W, False)
    assert (entry.members_before, entry.members_after) == ((), ("m1",))
    assert entry.reconciliations == (MemberReconciliation("m1", 0, 0),)


def test_each_member_is_timed_from_the_new_target_until_it_has_revoked_and_holds_it() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.sleep(100)
    ctx.consumer_heartbeat("g", "m2", 0)  # target 2: m1 must give 3-5 to m2
    ctx.sleep(200)
    ctx.consumer_heartbeat("g", "m1", 1)  # told to revoke
    ctx.sleep(300)
    ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2))  # revoked: epoch 2
    assert len(entries(ctx)) == 1, "closed before m2 holds its partitions"
    ctx.sleep(400)
    ctx.consumer_heartbeat("g", "m2", 2)  # gets 3-5
    entry = entries(ctx)[-1]
    assert (entry.cause, entry.from_generation, entry.to_generation) == ("member joined", 1, 2)
    assert (entry.started_ms, entry.ended_ms) == (W + 100, W + 1_000)
    assert (entry.members_before, entry.members_after) == (("m1",), ("m1", "m2"))
    # m2 reached epoch 2 at once, with nothing: 3-5 were still m1's.
    assert entry.reconciliations == (
        MemberReconciliation("m1", 500, 500),
        MemberReconciliation("m2", 0, 900),
    )


def test_a_newer_target_supersedes_one_not_every_member_reached() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.sleep(100)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.sleep(100)
    ctx.consumer_heartbeat("g", "m3", 0, topics=("t", "u"))
    superseded = entries(ctx)[-1]
    assert (superseded.to_generation, superseded.superseded) == (2, True)
    assert (superseded.started_ms, superseded.ended_ms) == (W + 100, W + 200)
    assert superseded.reconciliations == (
        MemberReconciliation("m1", None, None),
        MemberReconciliation("m2", 0, None),
    )


def test_a_subscription_change_is_the_cause() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m1", 1, topics=("t", "u"))
    entry = entries(ctx)[-1]
    assert (entry.cause, entry.to_generation, entry.ended_ms) == ("subscription changed", 2, W)


def test_new_partitions_are_the_cause() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.topics = type(ctx.topics)([TopicMetadata(TOPIC_T.topic_id, "t", 8), TOPIC_U])
    ctx.consumer_heartbeat("g", "m1", 1)
    assert entries(ctx)[-1].cause == "topic metadata changed"


def test_the_changes_before_the_next_target_are_all_in_it_the_first_as_its_cause() -> None:
    ctx = Context(replace(TEST_CONFIG, group_configs=GroupConfigs()), now_ms=1)
    for m in ("m1", "m2", "m3"):
        ctx.consumer_heartbeat("g", m, 0, rebalance_timeout_ms=60_000)
    ctx.sleep(1_000)
    ctx.consumer_heartbeat("g", "m1", 1)
    ctx.consumer_heartbeat("g", "m2", 2)
    # From now on a target at most every minute: both removals wait for the same one.
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "60000"})
    ctx.sleep(SESSION_MS - 1_000)  # m3's session expires
    ctx.consumer_heartbeat("g", "m2", -1)
    for _ in range(3):
        m1 = member(ctx, "m1")
        ctx.consumer_heartbeat("g", "m1", m1.member_epoch, owned=m1.assigned)
        ctx.sleep(20_000)
    m1 = member(ctx, "m1")
    ctx.consumer_heartbeat("g", "m1", m1.member_epoch, owned=m1.assigned)
    entry = entries(ctx)[-1]
    assert (entry.cause, entry.detail) == (
        "session expired",
        "m3 (client); m2 (client); member left",
    )
    assert entry.members_after == ("m1",)


def test_a_member_that_leaves_counts_as_done_and_may_complete_the_entry() -> None:
    ctx = Context()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)  # m2 waits for 3-5
    ctx.sleep(20)
    ctx.consumer_heartbeat("g", "m1", 1)
    ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, 0, 1, 2))  # revoked 3-5
    ctx.sleep(30)
    ctx.consumer_heartbeat("g", "m2", -1)  # before it took them
    entry = entries(ctx)[-1]
    assert (entry.to_generation, entry.ended_ms, entry.superseded) == (2, W + 50, False)
    assert entry.reconciliations == (
        MemberReconciliation("m1", 20, 20),
        MemberReconciliation("m2", 0, None, left=True),
    )
