"""Incremental (cooperative-sticky) rebalancing with confluent-kafka over the classic protocol.

Members join one at a time while records flow. Under the cooperative protocol a
member gives up only the partitions that move and keeps consuming the rest; a
partition moves in two rebalances (revoked in one, assigned in the next), so no
partition ever has two owners.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.members import (
    BackgroundProducer,
    Member,
    MemberSet,
    assert_group_matches,
    commit_failures,
    coverage_problem,
    two_owners_within_a_generation,
    wait_balanced,
    wait_until,
)

PARTITIONS = 6
SETTLE_TIMEOUT_S = 60.0
GROUP_BROKER_ARGS = ("--set", "group.initial.rebalance.delay.ms=0")


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(
        tmp_path_factory.mktemp("cooperative") / "data", *GROUP_BROKER_ARGS
    ) as process:
        yield process


def events_since(member: Member, mark: int) -> list[str]:
    return [str(e) for e in member.assignment_events()[mark:]]


def assert_incremental(member: Member, mark: int, *, kept_at_least: int) -> None:
    """Since event number mark, the member only ever gave up part of what it held."""
    events = member.assignment_events()[mark:]
    held_before = member.assignment_events()[mark - 1].partitions if mark else frozenset()
    for event in events:
        assert event.kind != "lost", (
            f"{member.name} lost its partitions: {events_since(member, mark)}"
        )
        if event.kind == "revoke":
            assert len(event.partitions) >= kept_at_least, (
                f"{member.name} was left with {sorted(event.partitions)} after a revoke; "
                f"a cooperative rebalance takes only what moves: {events_since(member, mark)}"
            )
            assert event.partitions < held_before, (
                f"{member.name} revoked {event.data['delta']} of {sorted(held_before)}: "
                f"{events_since(member, mark)}"
            )
    assert member.assignment is not None and member.assignment <= held_before, (
        f"{member.name} gained partitions while others joined (sticky assignor keeps its own): "
        f"{events_since(member, mark)}"
    )


def test_cooperative_sticky_members_join_one_by_one(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    name = "cooperative"
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    with (
        BackgroundProducer(group_broker.bootstrap, name, PARTITIONS, prefix=name) as producer,
        MemberSet(
            group_broker.bootstrap,
            name,
            name,
            tmp_path,
            session_timeout_ms=10_000,
            assignor="cooperative-sticky",
        ) as group,
    ):
        m1 = group.start("confluent-kafka")
        wait_balanced([m1], PARTITIONS, SETTLE_TIMEOUT_S, "the first member owns everything")
        assert m1.assignment == frozenset(range(PARTITIONS))

        mark1 = len(m1.assignment_events())
        m2 = group.start("confluent-kafka")
        wait_balanced([m1, m2], PARTITIONS, SETTLE_TIMEOUT_S, "a second member joins")
        assert_incremental(m1, mark1, kept_at_least=3)
        assert any(e.kind == "revoke" for e in m1.assignment_events()[mark1:]), (
            f"m1 gave up 3 partitions without a revoke callback: {events_since(m1, mark1)}"
        )

        mark1, mark2 = len(m1.assignment_events()), len(m2.assignment_events())
        m3 = group.start("confluent-kafka")
        wait_balanced([m1, m2, m3], PARTITIONS, SETTLE_TIMEOUT_S, "a third member joins")
        assert_incremental(m1, mark1, kept_at_least=2)
        assert_incremental(m2, mark2, kept_at_least=2)
        for member in (m1, m2, m3):
            kinds = {e.kind for e in member.assignment_events()}
            assert "assign" in kinds, f"{member.name} saw no assign callback: {kinds}"
        revokes = [e for m in (m1, m2) for e in m.assignment_events() if e.kind == "revoke"]
        assert revokes and all(e.data["delta"] for e in revokes), (
            f"incremental revokes name the partitions that move: {[str(e) for e in revokes]}"
        )
        description = assert_group_matches(group_broker.bootstrap, [m1, m2, m3], PARTITIONS)
        assert description.protocol == "cooperative-sticky", str(description)
        assert two_owners_within_a_generation(group.members) == []

        # Leaving is incremental too: the two that stay only gain partitions.
        mark1, mark3 = len(m1.assignment_events()), len(m3.assignment_events())
        held1, held3 = m1.assignment, m3.assignment
        m2.close()
        wait_balanced([m1, m3], PARTITIONS, SETTLE_TIMEOUT_S, "m2 left, m1 and m3 share")
        for member, mark, held in ((m1, mark1, held1), (m3, mark3, held3)):
            later = member.assignment_events()[mark:]
            assert all(e.kind == "assign" for e in later), (
                f"{member.name} gave up partitions when m2 left: {events_since(member, mark)}"
            )
            assert held is not None and member.assignment is not None
            assert held < member.assignment, (
                f"{member.name} held {sorted(held)}, now {sorted(member.assignment)}"
            )
        assert_group_matches(group_broker.bootstrap, [m1, m3], PARTITIONS)
        assert two_owners_within_a_generation(group.members) == []

        delivered = producer.stop()
        wait_until(
            lambda: coverage_problem(group.members, delivered) is None,
            SETTLE_TIMEOUT_S,
            "every record processed once",
            lambda: (
                f"{coverage_problem(group.members, delivered)}\n"
                f"commit failures: {commit_failures(group.members)}\n{group.describe()}"
            ),
        )
        m1.close()
        m3.close()
        problem = coverage_problem(group.members, delivered)
        assert problem is None, f"{problem}\n{group.describe()}"
