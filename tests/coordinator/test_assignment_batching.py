"""Target assignments batched per assignment interval and computed off the loop (KIP-1263).

With a fake clock: when the next target starts (at once, or when the interval since
the last one has passed), that the changes meanwhile share it, and what an offloaded
assignor's result does to a group that moved on while it ran.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from herdless.coordinator import TimerKey, TimerKind
from herdless.coordinator.consumer_group import ConsumerGroupState
from herdless.coordinator.consumer_records import (
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    decode_consumer_group_key,
    decode_consumer_group_value,
    encode_consumer_group_value,
)
from herdless.coordinator.group_config import (
    CONSUMER_ASSIGNMENT_INTERVAL_MS,
    CONSUMER_ASSIGNOR_OFFLOAD_ENABLE,
    GroupConfigLimits,
    GroupConfigs,
    InvalidGroupConfig,
)
from herdless.coordinator.reconciliation import MemberState
from herdless.coordinator.records import Record
from herdless.coordinator.target_assignment import next_target_due
from herdless.protocol.errors import ErrorCode
from tests.coordinator.context import TEST_CONFIG, TOPIC_T, Context
from tests.coordinator.test_consumer_groups import kinds, member, parts
from tests.coordinator.test_group_conversion import classic_group, roll

T0 = 1_000_000  # a clock that is not at 0, as no real one is
W0 = 1_763_900_000_000  # the wall clock then: far from the monotonic one, as on a broker
INTERVAL_MS = 1_000
ASSIGNMENT_TIMER = TimerKey(TimerKind.ASSIGNMENT, "g")
TARGET_METADATA = ConsumerGroupTargetAssignmentMetadataKey.__name__


def batched(*, offload: bool = False, at_once: bool = True) -> Context:
    config = replace(
        TEST_CONFIG,
        consumer_assignment_interval_ms=INTERVAL_MS,
        consumer_assignor_offload_enable=offload,
        group_configs=GroupConfigs(),
    )
    ctx = Context(config, now_ms=T0, wall_ms=W0)
    ctx.complete_offloaded_at_once = at_once
    return ctx


def group(ctx: Context):  # type: ignore[no-untyped-def]
    return ctx.shard.consumer.groups["g"]


def without_assignment_times(records: list[Record]) -> list[Record]:
    """The records as a log written before targets carried their time (KIP-1263)."""
    out = []
    for record in records:
        key = decode_consumer_group_key(record.key)
        if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey) and record.value:
            value = decode_consumer_group_value(key, record.value)
            assert isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
            value = replace(value, assignment_timestamp_ms=0)
            record = record._replace(value=encode_consumer_group_value(value))
        out.append(record)
    return out


# --- batching ---------------------------------------------------------------------------


def test_joins_within_the_interval_share_the_next_target_computed_when_it_ends() -> None:
    ctx = batched()
    resp, _ = ctx.consumer_heartbeat("g", "m1", 0)
    assert (resp.member_epoch, resp.assignment) == (1, parts(TOPIC_T, *range(6)))
    assert group(ctx).assignment_timestamp_ms == W0  # written: the wall clock
    ctx.sleep(100)
    resp, result = ctx.consumer_heartbeat("g", "m2", 0)
    # Joined at the last target's epoch, with nothing yet; no target computed.
    assert (resp.member_epoch, resp.assignment) == (1, frozenset())
    assert TARGET_METADATA not in kinds(result.records)
    assert ctx.timers[ASSIGNMENT_TIMER] == T0 + INTERVAL_MS
    ctx.sleep(100)
    ctx.consumer_heartbeat("g", "m3", 0)
    assert (group(ctx).group_epoch, group(ctx).target_assignment_epoch) == (3, 1)
    assert group(ctx).state is ConsumerGroupState.ASSIGNING
    # m1 keeps consuming everything meanwhile.
    resp, _ = ctx.consumer_heartbeat("g", "m1", 1)
    assert (resp.error_code, resp.member_epoch) == (ErrorCode.NONE, 1)
    assert member(ctx, "m1").assigned == parts(TOPIC_T, *range(6))

    result = ctx.sleep(800)
    assert kinds(result.records).count(TARGET_METADATA) == 1  # one target for both joins
    assert (group(ctx).target_assignment_epoch, group(ctx).assignment_timestamp_ms) == (
        3,
        W0 + INTERVAL_MS,
    )
    targets = group(ctx).target_assignment
    assert [len(targets[m]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    assert ASSIGNMENT_TIMER not in ctx.timers


def test_a_change_after_a_quiet_interval_gets_its_target_at_once() -> None:
    ctx = batched()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.sleep(INTERVAL_MS)
    resp, result = ctx.consumer_heartbeat("g", "m2", 0)
    assert TARGET_METADATA in kinds(result.records)
    assert resp.member_epoch == 2
    assert ASSIGNMENT_TIMER not in ctx.timers


def test_a_leave_schedules_the_next_target_and_the_rest_take_its_partitions() -> None:
    ctx = batched()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)
    ctx.sleep(INTERVAL_MS)  # the target for both
    ctx.consumer_heartbeat("g", "m1", 1, owned=parts(TOPIC_T, *range(6)))
    m1 = member(ctx, "m1")
    ctx.consumer_heartbeat("g", "m1", m1.member_epoch, owned=m1.assigned)
    ctx.consumer_heartbeat("g", "m2", 2, owned=frozenset())
    ctx.sleep(10)
    ctx.consumer_heartbeat("g", "m2", -1)
    assert ctx.timers[ASSIGNMENT_TIMER] == T0 + 2 * INTERVAL_MS
    ctx.sleep(INTERVAL_MS)
    resp, _ = ctx.consumer_heartbeat("g", "m1", member(ctx, "m1").member_epoch)
    assert resp.assignment == parts(TOPIC_T, *range(6))
    assert group(ctx).state is ConsumerGroupState.STABLE


def test_the_last_member_leaving_brings_the_target_epoch_level_with_the_group_epoch() -> None:
    ctx = batched()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m1", -1)
    ctx.sleep(INTERVAL_MS)
    assert (group(ctx).group_epoch, group(ctx).target_assignment_epoch) == (2, 2)
    assert group(ctx).state is ConsumerGroupState.EMPTY


def test_a_group_sets_its_own_interval() -> None:
    ctx = batched()
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "0"})
    ctx.consumer_heartbeat("g", "m1", 0)
    _, result = ctx.consumer_heartbeat("g", "m2", 0)
    assert TARGET_METADATA in kinds(result.records)
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "5000"})
    ctx.consumer_heartbeat("g", "m3", 0)
    assert ctx.timers[ASSIGNMENT_TIMER] == T0 + 5_000


@pytest.mark.parametrize("step_ms", [3_600_000, -3_600_000])
def test_a_stepped_wall_clock_moves_no_assignment_interval(step_ms: int) -> None:
    ctx = batched()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.step_wall(step_ms)
    ctx.consumer_heartbeat("g", "m2", 0)
    assert ctx.timers[ASSIGNMENT_TIMER] == T0 + INTERVAL_MS
    ctx.sleep(INTERVAL_MS - 1)
    assert group(ctx).target_assignment_epoch == 1
    ctx.sleep(1)
    assert group(ctx).target_assignment_epoch == 2


def test_the_timestamp_survives_replay_and_a_new_leader_waits_for_the_interval() -> None:
    ctx = batched()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.sleep(200)
    ctx.consumer_heartbeat("g", "m2", 0)  # waits for T0 + 1000
    ctx.restart()
    assert group(ctx).assignment_timestamp_ms == W0
    # When the last target finished is a time on another clock (the last leader's wall
    # clock): the interval counts from the load, as members' sessions do.
    assert ctx.timers[ASSIGNMENT_TIMER] == T0 + 200 + INTERVAL_MS
    ctx.sleep(INTERVAL_MS - 1)
    assert group(ctx).target_assignment_epoch == 1
    ctx.sleep(1)
    assert group(ctx).target_assignment_epoch == 2


def test_a_log_without_the_time_gets_its_next_target_at_once_after_a_load() -> None:
    ctx = batched()
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.consumer_heartbeat("g", "m2", 0)  # waits for T0 + 1000
    ctx.log = without_assignment_times(ctx.log)
    ctx.restart()
    assert group(ctx).target_assignment_epoch == 2
    assert ASSIGNMENT_TIMER not in ctx.timers


@pytest.mark.parametrize("timestamp", [0, 1, 1_763_900_000_000])
def test_the_timestamp_is_a_tagged_field_absent_when_zero(timestamp: int) -> None:
    value = ConsumerGroupTargetAssignmentMetadataValue(7, timestamp)
    data = encode_consumer_group_value(value)
    key = ConsumerGroupTargetAssignmentMetadataKey("g")
    assert decode_consumer_group_value(key, data) == value
    # version 0, epoch 7, then the tagged fields: none, or tag 0 with 8 bytes.
    header = bytes.fromhex("000000000007")
    tagged = b"\x00" if not timestamp else b"\x01\x00\x08" + timestamp.to_bytes(8, "big")
    assert data == header + tagged


# --- offload ------------------------------------------------------------------------------


def test_an_offloaded_target_is_written_when_the_assignor_finishes() -> None:
    ctx = batched(offload=True, at_once=False)
    token, result = ctx.send_consumer_heartbeat("g", "m1", 0)
    assert len(result.offloaded) == 1
    assert TARGET_METADATA not in kinds(result.records)
    # The join waits for the target it started: its answer has its partitions.
    assert result.reply_to(token) is None
    assert group(ctx).state is ConsumerGroupState.ASSIGNING
    ctx.sleep(5)
    ctx.consumer_heartbeat("g", "m1", 0)  # a retry while it waits: parked as well
    ctx.complete_offloaded()
    assert (group(ctx).target_assignment_epoch, group(ctx).assignment_timestamp_ms) == (1, W0 + 5)
    resp = ctx.replies[token]
    assert (resp.member_epoch, resp.assignment) == (1, parts(TOPIC_T, *range(6)))
    assert group(ctx).state is ConsumerGroupState.STABLE


def test_a_join_within_the_interval_is_answered_at_once_with_the_last_target() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.complete_offloaded()
    resp, result = ctx.consumer_heartbeat("g", "m2", 0)
    assert result.offloaded == []
    assert (resp.member_epoch, resp.assignment) == (1, frozenset())


def test_unloading_answers_the_parked_joins() -> None:
    ctx = batched(offload=True, at_once=False)
    token, _ = ctx.send_consumer_heartbeat("g", "m1", 0)
    ctx.restart()
    assert ctx.replies[token].error_code is ErrorCode.NOT_COORDINATOR
    ctx.complete_offloaded(1)  # the old shard's work: dropped
    assert group(ctx).target_assignment_epoch == 0
    ctx.complete_offloaded()  # the target the loaded shard started
    assert group(ctx).target_assignment_epoch == 1


def test_one_assignor_runs_at_a_time_and_the_next_starts_when_it_finishes() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "0"})
    ctx.consumer_heartbeat("g", "m1", 0)
    _, result = ctx.consumer_heartbeat("g", "m2", 0)  # while m1's target is computed
    assert result.offloaded == [] and len(ctx.offloaded) == 1
    ctx.complete_offloaded(1)  # m1's: epoch 1, and m2's starts at once
    assert group(ctx).target_assignment_epoch == 1
    assert len(ctx.offloaded) == 1
    ctx.complete_offloaded(1)
    assert group(ctx).target_assignment_epoch == 2
    assert sorted(len(p) for p in group(ctx).target_assignment.values()) == [3, 3]


def test_a_member_that_left_while_the_assignor_ran_gets_no_target() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "0"})
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.complete_offloaded()
    ctx.consumer_heartbeat("g", "m2", 0)  # the assignor runs for m1 and m2
    ctx.consumer_heartbeat("g", "m2", -1)
    ctx.complete_offloaded(1)
    assert "m2" not in group(ctx).target_assignment
    assert group(ctx).target_assignment_epoch == 2
    ctx.complete_offloaded()  # the target without m2
    assert group(ctx).target_assignment == {"m1": parts(TOPIC_T, *range(6))}
    assert group(ctx).target_assignment_epoch == group(ctx).group_epoch == 3


def test_a_static_member_back_under_a_new_id_gets_its_instances_target() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "0"})
    ctx.consumer_heartbeat("g", "m1", 0)
    ctx.complete_offloaded()
    ctx.consumer_heartbeat("g", "s1", 0, instance_id="i1")  # the assignor runs for m1, s1
    ctx.consumer_heartbeat("g", "s1", -2, instance_id="i1")
    ctx.consumer_heartbeat("g", "s2", 0, instance_id="i1")
    ctx.complete_offloaded(1)
    assert len(group(ctx).target_assignment["s2"]) == 3
    assert "s1" not in group(ctx).target_assignment


def test_a_result_for_a_deleted_or_reloaded_group_is_dropped() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.consumer_heartbeat("g", "m1", 0)
    _, work = ctx.offloaded[0]
    ctx.consumer_heartbeat("g", "m1", -1)
    ctx.delete_groups("g")
    assert "g" not in ctx.shard.consumer.groups
    assert ctx.apply(work.complete(work.run(), ctx.clock())).records == []


def test_a_failed_assignor_is_tried_again_after_an_interval() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.consumer_heartbeat("g", "m1", 0)
    _, work = ctx.offloaded.pop(0)
    ctx.apply(work.complete(None, ctx.clock()))
    assert ctx.timers[ASSIGNMENT_TIMER] == T0 + INTERVAL_MS
    ctx.sleep(INTERVAL_MS)
    assert len(ctx.offloaded) == 1
    ctx.complete_offloaded()
    assert group(ctx).target_assignment_epoch == 1


def test_a_group_may_turn_offload_off() -> None:
    ctx = batched(offload=True, at_once=False)
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNOR_OFFLOAD_ENABLE: "FALSE"})
    _, result = ctx.consumer_heartbeat("g", "m1", 0)
    assert result.offloaded == [] and TARGET_METADATA in kinds(result.records)


# --- classic members inside a consumer group ---------------------------------------------


def test_a_classic_member_is_told_to_rejoin_only_once_there_is_a_newer_target() -> None:
    ctx = batched()
    classic = classic_group(ctx, 1)[0]
    ctx.consumer_heartbeat("g", "n1", 0)  # converts the group; its target at once
    owned = set(range(6))
    for _ in range(2):  # it revokes half, rejoins, and is at the target
        _, owned = roll(ctx, classic, 0, owned)
    assert member(ctx, classic).state is MemberState.STABLE
    epoch = member(ctx, classic).member_epoch
    ctx.config.group_configs.put("g", {CONSUMER_ASSIGNMENT_INTERVAL_MS: "5000"})
    ctx.consumer_heartbeat("g", "n2", 0)  # the next target waits for the interval
    assert group(ctx).group_epoch > group(ctx).target_assignment_epoch
    assert ctx.heartbeat("g", classic, epoch) is ErrorCode.NONE
    ctx.sleep(5_000)
    assert group(ctx).target_assignment_epoch > epoch
    assert ctx.heartbeat("g", classic, epoch) is ErrorCode.REBALANCE_IN_PROGRESS


# --- configs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({CONSUMER_ASSIGNMENT_INTERVAL_MS: "-1"}, "greater than or equal"),
        ({CONSUMER_ASSIGNMENT_INTERVAL_MS: "15001"}, "less than or equal"),
        ({CONSUMER_ASSIGNMENT_INTERVAL_MS: "1.5"}, "Not a number"),
        ({CONSUMER_ASSIGNOR_OFFLOAD_ENABLE: "yes"}, "either true or false"),
    ],
)
def test_group_configs_outside_the_brokers_bounds_are_refused(
    configs: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidGroupConfig, match=message):
        GroupConfigLimits().validate(configs)


def test_group_config_defaults_are_the_brokers() -> None:
    limits = GroupConfigLimits(assignment_interval_ms=250, assignor_offload_enable=False)
    defaults = limits.defaults()
    assert defaults[CONSUMER_ASSIGNMENT_INTERVAL_MS] == "250"
    assert defaults[CONSUMER_ASSIGNOR_OFFLOAD_ENABLE] == "false"
    assert limits.validate({CONSUMER_ASSIGNOR_OFFLOAD_ENABLE: "True"})


@pytest.mark.parametrize(
    ("last", "due"),
    [
        (None, None),  # none finished since the load: at once
        (T0, T0 + INTERVAL_MS),
    ],
)
def test_when_the_next_target_is_due(last: int | None, due: int | None) -> None:
    assert next_target_due(last, INTERVAL_MS) == due
