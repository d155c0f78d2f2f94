"""A rolling upgrade of a consumer group from the classic protocol to KIP-848's, and back.

Three confluent-kafka members (each its own OS process, tests/support/member.py)
consume a 6-partition topic a producer keeps writing, with the classic protocol
(librdkafka's default eager assignors, or cooperative-sticky). One by one they are
stopped cleanly and started again with ``group.protocol=consumer``: the first one
turns the group into a consumer group online, with the classic members still in it
(the coordinator assigns them through JoinGroup and SyncGroup); then back, one by
one, to the classic protocol, the last new-protocol member leaving turning the group
back into a classic one. Checked from the members' own reports:

- consumption never stops for long: across all members, no two consecutive
  acknowledged commits (each follows a processed batch, with records arriving every
  few milliseconds) are further apart than MAX_PAUSE_S;
- no partition is ever owned by two members: the member giving one up reports its
  revocation (after its last commit) before the next owner reports the assignment,
  by the one clock of this machine;
- every record produced is processed exactly once (commit after process, every
  member shut down cleanly), and no member ever loses its partitions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import herdless, succeeded
from tests.support.members import (
    BackgroundProducer,
    Member,
    MemberSet,
    commit_failures,
    coverage_problem,
    overlapping_ownership,
    wait_balanced,
    wait_until,
)
from tests.test_groups_consumer_protocol import BROKER_ARGS as CONSUMER_PROTOCOL_BROKER_ARGS
from tests.test_groups_consumer_protocol import broker_tail

PARTITIONS = 6
SETTLE_TIMEOUT_S = 60.0  # a loaded 2-core machine runs the broker, a producer and 4 clients
# A member restarting is a rebalance; with the classic protocol's eager assignors a
# rebalance stops the whole group until every member has rejoined, which users accept
# for about a heartbeat round and a join (seconds, well under the 10 s session). The
# conversions themselves must cost no more than that.
MAX_PAUSE_S = 5.0
# The consumer protocol tests' broker (short KIP-848 sessions and heartbeats), its classic
# groups' first generation without the initial delay.
BROKER_ARGS = (*CONSUMER_PROTOCOL_BROKER_ARGS, "--set", "group.initial.rebalance.delay.ms=0")


@pytest.fixture(scope="module")
def migration_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("migration") / "data"
    with module_broker(data, *BROKER_ARGS) as process:
        yield process


def group_type(bootstrap: str, group: str) -> ConsumerGroupType:
    """The group's type as ListGroups v5 tells confluent-kafka's admin client."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=30).result(30)
    types = {g.group_id: g.type for g in listed.valid}
    del admin
    return types[group]


def member_protocols(bootstrap: str, group: str) -> dict[str, str]:
    """Client id -> the protocol each member speaks, as `herdless groups describe` shows it
    (ConsumerGroupDescribe v1's member type)."""
    out = succeeded(herdless("groups", "describe", group, "-o", "json", "-b", bootstrap))
    (described,) = json.loads(out)
    return {m["client_id"]: m["member_protocol"] for m in described["members"]}


def longest_pause(members: list[Member], since: float) -> tuple[float, float]:
    """The longest time (wall clock) with no commit acknowledged to any member after `since`,
    and when it began."""
    times = sorted(
        float(e.data["time"])
        for m in members
        for e in m.snapshot()
        if e.kind == "committed" and float(e.data["time"]) >= since
    )
    gaps = [(b - a, a) for a, b in zip(times, times[1:], strict=False)]
    return max(gaps, default=(0.0, since))


@pytest.mark.parametrize("assignor", [None, "cooperative-sticky"], ids=["eager", "cooperative"])
def test_a_rolling_upgrade_to_the_consumer_protocol_and_back(
    migration_broker: BrokerProcess, tmp_path: Path, assignor: str | None
) -> None:
    name = f"migrate-{'eager' if assignor is None else 'coop'}"
    bootstrap = migration_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    with (
        BackgroundProducer(bootstrap, name, PARTITIONS, prefix=name) as producer,
        MemberSet(bootstrap, name, name, tmp_path, assignor=assignor) as group,
    ):
        members = [group.start("confluent-kafka", name=f"c{i}") for i in range(3)]
        wait_balanced(
            members,
            PARTITIONS,
            SETTLE_TIMEOUT_S,
            "3 classic members",
            broker_tail(migration_broker),
        )
        assert group_type(bootstrap, name) is ConsumerGroupType.CLASSIC
        started = time.time()

        # Up: each classic member restarts with the new protocol.
        for i in range(3):
            members[i].close()
            members[i] = group.start(
                "confluent-kafka", name=f"n{i}", group_protocol="consumer", assignor=None
            )
            wait_balanced(
                members,
                PARTITIONS,
                SETTLE_TIMEOUT_S,
                f"upgrade step {i + 1}",
                broker_tail(migration_broker),
            )
            # From the first new-protocol member on, one consumer group holds them all.
            assert group_type(bootstrap, name) is ConsumerGroupType.CONSUMER
            expected = {f"n{j}": "consumer" for j in range(i + 1)}
            expected.update({f"c{j}": "classic" for j in range(i + 1, 3)})
            assert member_protocols(bootstrap, name) == expected

        # Down: each new-protocol member restarts with the classic protocol.
        for i in range(3):
            members[i].close()
            members[i] = group.start("confluent-kafka", name=f"d{i}")
            wait_balanced(
                members,
                PARTITIONS,
                SETTLE_TIMEOUT_S,
                f"downgrade step {i + 1}",
                broker_tail(migration_broker),
            )
            # The last new-protocol member gone, the group is classic again.
            expected = ConsumerGroupType.CLASSIC if i == 2 else ConsumerGroupType.CONSUMER
            assert group_type(bootstrap, name) is expected

        pause, at = longest_pause(group.members, started)
        delivered = producer.stop()
        wait_until(
            lambda: coverage_problem(group.members, delivered) is None,
            SETTLE_TIMEOUT_S,
            "every record processed",
            lambda: f"{coverage_problem(group.members, delivered)}\n{group.describe()}",
        )
        for member in members:
            member.close()
        problem = coverage_problem(group.members, delivered)
        assert problem is None, f"{problem}\n{group.describe()}"
        assert overlapping_ownership(group.members, {}) == [], group.describe()
        # A commit in flight when the member's generation (member epoch) moves on is
        # refused, as by Kafka; the member's next commit carries its offsets (and a
        # revocation's commit is made at the generation that still holds them).
        racing = ("ILLEGAL_GENERATION", "STALE_MEMBER_EPOCH", "REBALANCE_IN_PROGRESS")
        failures = [f for f in commit_failures(group.members) if not any(r in f for r in racing)]
        assert failures == [], group.describe()
        lost = [f"{m.name}: {e}" for m in group.members for e in m.snapshot() if e.kind == "lost"]
        assert lost == [], group.describe()
        print(f"longest pause in consumption: {pause:.2f}s")
        assert pause < MAX_PAUSE_S, (
            f"no commit for {pause:.1f}s from {at - started:.1f}s into the roll\n{group.describe()}"
        )
        assert len(delivered) > 1_000, "too few records to show anything"
