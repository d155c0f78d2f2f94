"""Consumer groups with each real client: splitting, failure, clean leaving, exactly-once.

Every member is its own OS process (tests/support/member.py, or kcat -G), so a
member can be killed with SIGKILL. All tests share one broker started with
``group.initial.rebalance.delay.ms=0`` and ``group.min.session.timeout.ms=1000``
(lowered from Kafka's 6 s so that failure detection takes seconds, not tens of
seconds); each test has its own topic and group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.members import (
    CLIENTS,
    BackgroundProducer,
    Member,
    MemberSet,
    assert_group_matches,
    commit_failures,
    coverage_problem,
    settled_at,
    two_owners_within_a_generation,
    wait_balanced,
    wait_until,
)

PARTITIONS = 6
GROUP_BROKER_ARGS = (
    "--set",
    "group.initial.rebalance.delay.ms=0",
    "--set",
    "group.min.session.timeout.ms=1000",
)
SETTLE_TIMEOUT_S = 60.0  # generous: a loaded 2-core machine runs the broker and 3-4 clients


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("groups") / "data", *GROUP_BROKER_ARGS) as process:
        yield process


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def broker_tail(broker: BrokerProcess) -> str:
    return "broker log tail:\n" + "\n".join(broker.log().splitlines()[-30:])


@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_split_partitions_and_take_over_from_a_killed_one(
    group_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    session_ms = 3_000
    name = f"split-kill-{client}"
    create_topic(group_broker.bootstrap, name)
    with MemberSet(
        group_broker.bootstrap, name, name, tmp_path, session_timeout_ms=session_ms
    ) as group:
        members = [group.start(client) for _ in range(3)]
        wait_balanced(
            members,
            PARTITIONS,
            SETTLE_TIMEOUT_S,
            "3 members own 6 partitions, one owner each",
            broker_tail(group_broker),
        )
        assert_group_matches(group_broker.bootstrap, members, PARTITIONS)

        victim, survivors = members[1], [members[0], members[2]]
        lost = victim.assignment
        killed_at = time.monotonic()
        victim.kill()
        wait_balanced(
            survivors,
            PARTITIONS,
            session_ms / 1000 + SETTLE_TIMEOUT_S,
            f"survivors take over {victim.name}'s partitions {sorted(lost or ())} after SIGKILL",
            broker_tail(group_broker),
        )
        took = settled_at(survivors) - killed_at
        # Session expiry (3 s) plus a rebalance; the margin is for a loaded machine.
        assert took < session_ms / 1000 + 15, (
            f"takeover after SIGKILL took {took:.1f}s with a {session_ms} ms session:\n"
            + group.describe()
        )
        assert_group_matches(group_broker.bootstrap, survivors, PARTITIONS)
        assert two_owners_within_a_generation(members) == []
        for member in survivors:
            member.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_clean_close_rebalances_at_once(
    group_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    """A member that closes sends LeaveGroup: the rest rebalance long before its session ends."""
    session_ms = 30_000
    name = f"clean-close-{client}"
    create_topic(group_broker.bootstrap, name)
    with MemberSet(
        group_broker.bootstrap, name, name, tmp_path, session_timeout_ms=session_ms
    ) as group:
        members = [group.start(client) for _ in range(3)]
        wait_balanced(
            members,
            PARTITIONS,
            SETTLE_TIMEOUT_S,
            "3 members own 6 partitions, one owner each",
            broker_tail(group_broker),
        )
        leaving, staying = members[0], members[1:]
        closed_at = time.monotonic()
        leaving.close()
        wait_balanced(
            staying,
            PARTITIONS,
            session_ms / 1000,
            f"the others take over {leaving.name}'s partitions after it closed",
            broker_tail(group_broker),
        )
        took = settled_at(staying) - closed_at
        assert took < 10, (
            f"rebalance after a clean close took {took:.1f}s (session {session_ms} ms): "
            f"the leave was not acted on\n{group.describe()}"
        )
        assert_group_matches(group_broker.bootstrap, staying, PARTITIONS)
        assert two_owners_within_a_generation(members) == []
        for member in staying:
            member.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_every_record_processed_once_while_members_come_and_go(
    group_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    """Commit after processing and clean shutdowns: no record lost, none processed twice.

    Records flow the whole time while four members join and two leave. kcat is
    closed only once it has caught up: it drops a message that poll() returns
    after SIGTERM although librdkafka has already stored its offset for commit.
    """
    name = f"exactly-once-{client}"
    create_topic(group_broker.bootstrap, name)
    with (
        BackgroundProducer(group_broker.bootstrap, name, PARTITIONS, prefix=name) as producer,
        MemberSet(group_broker.bootstrap, name, name, tmp_path, session_timeout_ms=10_000) as group,
    ):

        def settle(members: list[Member], what: str) -> None:
            wait_balanced(members, PARTITIONS, SETTLE_TIMEOUT_S, what, broker_tail(group_broker))

        def caught_up() -> None:
            wait_until(
                lambda: coverage_problem(group.members, producer.acknowledged()) is None,
                SETTLE_TIMEOUT_S,
                "every acknowledged record processed once",
                lambda: (
                    f"{coverage_problem(group.members, producer.acknowledged())}\n"
                    + group.describe()
                ),
            )

        def leave(member: Member) -> None:
            if client == "kcat":
                producer.pause()
                caught_up()
            member.close()
            producer.resume()

        m1 = group.start(client)
        settle([m1], "the first member owns everything")
        m2 = group.start(client)
        settle([m1, m2], "a second member joins")
        m3 = group.start(client)
        settle([m1, m2, m3], "a third member joins")
        leave(m1)
        settle([m2, m3], "the first member left")
        m4 = group.start(client)
        settle([m2, m3, m4], "a fourth member joins")
        leave(m2)
        settle([m3, m4], "the second member left")

        delivered = producer.stop()
        assert len(delivered) > 500, f"only {len(delivered)} records flowed: too few to mean much"
        caught_up()
        m3.close()
        m4.close()
        problem = coverage_problem(group.members, delivered)
        assert problem is None, (
            f"{problem}\ncommit failures: {commit_failures(group.members)}\n{group.describe()}"
        )
        assert two_owners_within_a_generation(group.members) == []
        by_member = {m.name: len(m.processed()) for m in group.members}
        assert all(by_member.values()), f"some member processed nothing: {by_member}"
