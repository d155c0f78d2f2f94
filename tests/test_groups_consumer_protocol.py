"""Consumer groups of the next-generation protocol (KIP-848) with real confluent-kafka consumers.

Members run with ``group.protocol=consumer``, each in its own OS process
(tests/support/member.py), committing after they process. The broker runs the
uniform assignor and sets sessions: 3 s here (``group.consumer.session.timeout.ms``,
its minimum lowered from Kafka's 45 s), heartbeats every 500 ms. What the
protocol promises is checked from the members' own reports: no barrier (members
keep what they have and keep consuming while others come and go), a partition
never owned by two members at once, and every record processed once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupState
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import herdless, succeeded, table_rows
from tests.support.members import (
    BackgroundProducer,
    Member,
    MemberSet,
    commit_failures,
    coverage_problem,
    overlapping_ownership,
    settled_at,
    wait_balanced,
    wait_until,
)

PARTITIONS = 6
SESSION_MS = 3_000
SETTLE_TIMEOUT_S = 60.0  # a loaded 2-core machine runs the broker, a producer and 4 clients
BROKER_ARGS = (
    "--set",
    f"group.consumer.session.timeout.ms={SESSION_MS}",
    "--set",
    "group.consumer.min.session.timeout.ms=1000",
    "--set",
    "group.consumer.heartbeat.interval.ms=500",
    "--set",
    "group.consumer.min.heartbeat.interval.ms=100",
)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("consumer-protocol") / "data"
    with module_broker(data, *BROKER_ARGS) as process:
        yield process


def broker_tail(broker: BrokerProcess) -> str:
    return "broker log tail:\n" + "\n".join(broker.log().splitlines()[-30:])


def described(bootstrap: str, group: str) -> object:
    """ConsumerGroupDescribe, as confluent-kafka's admin client sends it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    del admin
    return description


def subscribed(bootstrap: str, topic: str, **config: str) -> Consumer:
    """A consumer-protocol member of the group named after `topic`, subscribed to it."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "group.protocol": "consumer", **config}
    )
    consumer.subscribe([topic])
    return consumer


def owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def polled_until(
    broker: BrokerProcess, condition: Callable[[], bool], what: str, *consumers: Consumer
) -> None:
    """Poll the consumers (what moves their assignments on) until `condition` holds."""

    def polled() -> bool:
        for consumer in consumers:
            consumer.poll(0.1)
        return condition()

    wait_until(polled, SETTLE_TIMEOUT_S, what, lambda: broker_tail(broker))


def uncommitted_work(member: Member) -> set[tuple[int, int]]:
    """What a killed member processed past the last commit it was told succeeded: the next
    owner of those partitions processes it again (commit after process is at least once)."""
    committed: dict[int, int] = {}
    for commit in member.commits():
        for partition, offset in commit.offsets.items():
            committed[partition] = max(committed.get(partition, 0), offset)
    return {(p, o) for p, o, _ in member.processed() if o >= committed.get(p, 0)}


def test_members_split_take_over_from_a_killed_one_and_make_room_without_stopping(
    group_broker: BrokerProcess, tmp_path: Path
) -> None:
    name = "kip848"
    bootstrap = group_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    with (
        BackgroundProducer(bootstrap, name, PARTITIONS, prefix=name) as producer,
        MemberSet(bootstrap, name, name, tmp_path, group_protocol="consumer") as group,
    ):
        members = [group.start("confluent-kafka") for _ in range(3)]
        wait_balanced(
            members,
            PARTITIONS,
            SETTLE_TIMEOUT_S,
            "3 members split 6 partitions",
            broker_tail(group_broker),
        )
        description = described(bootstrap, name)
        assert description.state is ConsumerGroupState.STABLE, description
        assert description.partition_assignor == "uniform"
        by_client = {m.client_id: m for m in description.members}
        for member in members:
            assigned = by_client[member.name].assignment.topic_partitions
            assert {tp.partition for tp in assigned} == member.assignment

        wait_until(
            lambda: all(m.commits() for m in members),
            SETTLE_TIMEOUT_S,
            "every member processes and commits",
            group.describe,
        )

        # SIGKILL: no leave. The others get its partitions once its session ends, from its
        # last commit on, and keep consuming their own meanwhile.
        victim, survivors = members[1], [members[0], members[2]]
        done_before = {m.name: len(m.processed()) for m in survivors}
        killed_at_wall, killed_at = time.time(), time.monotonic()
        victim.kill()
        wait_balanced(
            survivors,
            PARTITIONS,
            SESSION_MS / 1000 + SETTLE_TIMEOUT_S,
            f"the survivors take over {victim.name}'s partitions",
            broker_tail(group_broker),
        )
        took = settled_at(survivors) - killed_at
        assert SESSION_MS / 1000 - 0.5 < took < SESSION_MS / 1000 + 15, (
            f"takeover {took:.1f}s after SIGKILL with a {SESSION_MS} ms session\n"
            + group.describe()
        )
        for member in survivors:
            assert len(member.processed()) > done_before[member.name], (
                f"{member.name} stopped consuming while {victim.name}'s session ran out\n"
                + member.describe()
            )
            kinds = {e.kind for e in member.assignment_events()}
            assert "lost" not in kinds, member.describe()

        # A new member: the others give it a partition each and keep the rest, consuming on.
        marks = {m.name: len(m.assignment_events()) for m in survivors}
        done_before = {m.name: len(m.processed()) for m in survivors}
        newcomer = group.start("confluent-kafka")
        everyone = [*survivors, newcomer]
        wait_balanced(
            everyone,
            PARTITIONS,
            SETTLE_TIMEOUT_S,
            "a new member gets its share",
            broker_tail(group_broker),
        )
        for member in survivors:
            changes = member.assignment_events()[marks[member.name] :]
            assert changes and all(e.kind in ("revoke", "assign") for e in changes)
            assert all(e.partitions for e in changes), (
                f"{member.name} was left with nothing while {newcomer.name} joined\n"
                + member.describe()
            )
            assert len(member.processed()) > done_before[member.name]
        assert len(newcomer.assignment or ()) == 2

        delivered = producer.stop()
        allowed_twice = uncommitted_work(victim)
        wait_until(
            lambda: coverage_problem(group.members, delivered, allowed_twice) is None,
            SETTLE_TIMEOUT_S,
            "every record processed",
            lambda: (
                f"{coverage_problem(group.members, delivered, allowed_twice)}\n"
                f"commit failures: {commit_failures(group.members)}\n{group.describe()}"
            ),
        )
        for member in everyone:
            member.close()
        problem = coverage_problem(group.members, delivered, allowed_twice)
        assert problem is None, f"{problem}\n{group.describe()}"
        assert overlapping_ownership(group.members, {victim.name: killed_at_wall}) == []
        assert commit_failures(everyone) == []
        assert len(delivered) > 1_000, "too few records to show anything"


def test_a_regex_subscription_takes_matching_topics_and_new_ones(
    group_broker: BrokerProcess,
) -> None:
    bootstrap = group_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("re848-a", "re848-b", "other848"):
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "re848",
            "group.protocol": "consumer",
            "group.remote.assignor": "range",
        }
    )
    consumer.subscribe(["^re848-.*"])
    try:

        def assigned() -> set[tuple[str, int]]:
            consumer.poll(0.2)
            return {(tp.topic, tp.partition) for tp in consumer.assignment()}

        def assigned_text() -> str:
            return f"{sorted(assigned())}\n{broker_tail(group_broker)}"

        expected = {(t, p) for t in ("re848-a", "re848-b") for p in (0, 1)}
        wait_until(
            lambda: assigned() == expected, SETTLE_TIMEOUT_S, "the matching topics", assigned_text
        )
        admin.create_topics([NewTopic("re848-c", 1, 1)])["re848-c"].result(30)
        expected.add(("re848-c", 0))
        wait_until(
            lambda: assigned() == expected, SETTLE_TIMEOUT_S, "a new matching topic", assigned_text
        )
        description = described(bootstrap, "re848")
        assert description.partition_assignor == "range"
        (member,) = description.members
        topics = {tp.topic for tp in member.assignment.topic_partitions}
        assert topics == {"re848-a", "re848-b", "re848-c"}
        # herdless's own tool shows the consumer group (DescribeGroups calls it Dead).
        state = table_rows(
            succeeded(herdless("groups", "describe", "re848", "--state", "-b", bootstrap))
        )
        assert [row[2:6] for row in state] == [["range", "Stable", "1", "consumer"]]
        members = table_rows(
            succeeded(herdless("groups", "describe", "re848", "--members", "-b", bootstrap))
        )
        assert [row[6] for row in members] == ["re848-a[0,1] re848-b[0,1] re848-c[0]"]
    finally:
        consumer.close()


def test_a_static_member_that_restarts_gets_its_partitions_back_and_no_one_else_moves(
    group_broker: BrokerProcess,
) -> None:
    bootstrap = group_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("static848", 4, 1)])["static848"].result(30)

    def static(instance: str) -> Consumer:
        return subscribed(bootstrap, "static848", **{"group.instance.id": instance})

    def poll_until(condition: Callable[[], bool], what: str, *consumers: Consumer) -> None:
        polled_until(group_broker, condition, what, *consumers)

    a, b = static("a"), static("b")
    poll_until(lambda: len(owned(a)) == len(owned(b)) == 2, "two static members split", a, b)
    kept, away = owned(a), owned(b)
    b.close()  # a static member leaves for a while (epoch -2): nothing is reassigned
    deadline = time.monotonic() + SESSION_MS / 3000  # well within its session
    while time.monotonic() < deadline:
        a.poll(0.1)
        assert owned(a) == kept
    b = static("b")
    poll_until(lambda: owned(b) == away, "b has its partitions back", a, b)
    assert owned(a) == kept
    a.close()
    b.close()


def test_describe_and_history_show_each_member_against_its_target(
    group_broker: BrokerProcess,
) -> None:
    bootstrap = group_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("vis848", 4, 1)])["vis848"].result(30)

    def member(name: str) -> Consumer:
        return subscribed(bootstrap, "vis848", **{"client.id": name, "client.rack": f"rack-{name}"})

    def poll_until(condition: Callable[[], bool], what: str, *consumers: Consumer) -> None:
        polled_until(group_broker, condition, what, *consumers)

    def history() -> list[dict[str, object]]:
        out = succeeded(herdless("groups", "history", "vis848", "-o", "json", "-b", bootstrap))
        return json.loads(out)

    a = member("a")
    poll_until(lambda: owned(a) == {0, 1, 2, 3}, "a takes every partition", a)
    b = member("b")
    poll_until(lambda: len(owned(a)) == len(owned(b)) == 2, "a and b split", a, b)

    def stable() -> bool:
        a.poll(0.1)
        b.poll(0.1)
        out = herdless("groups", "describe", "vis848", "-o", "json", "-b", bootstrap)
        (group,) = json.loads(succeeded(out))
        return group["state"] == "Stable"

    wait_until(stable, SETTLE_TIMEOUT_S, "a stable group", lambda: broker_tail(group_broker))
    (group,) = json.loads(
        succeeded(herdless("groups", "describe", "vis848", "-o", "json", "-b", bootstrap))
    )
    assert group["group_protocol"] == "consumer"
    assert group["group_epoch"] == group["target_assignment_epoch"] == 2
    by_client = {m["client_id"]: m for m in group["members"]}
    assert set(by_client) == {"a", "b"}
    for name, m in by_client.items():
        assert m["rack"] == f"rack-{name}"
        assert (m["member_epoch"], m["member_state"]) == (2, "stable")
        assert m["target_partitions"] == m["partitions"] and len(m["partitions"]) == 2
        assert m["partitions_to_revoke"] == m["partitions_to_assign"] == []
        assert m["member_protocol"] == "consumer"
    state = table_rows(
        succeeded(herdless("groups", "describe", "vis848", "--state", "-b", bootstrap))
    )
    assert [row[3:] for row in state] == [["Stable", "2", "consumer", "2", "2"]]
    members = table_rows(
        succeeded(herdless("groups", "describe", "vis848", "--members", "-b", bootstrap))
    )
    assert sorted((row[4], row[8], row[9], row[11], row[12], row[13]) for row in members) == [
        ("a", "2", "stable", "-", "-", "consumer"),
        ("b", "2", "stable", "-", "-", "consumer"),
    ]

    # The history: a joined (epoch 1), b joined (epoch 2) and both reached it.
    entries = history()
    assert [(e["cause"], e["from_generation"], e["to_generation"]) for e in entries] == [
        ("member joined", 0, 1),
        ("member joined", 1, 2),
    ]
    assert all(e["protocol"] == "consumer" and not e["superseded"] for e in entries)
    second = entries[1]
    times = {r["member_id"]: r for r in second["reconciliations"]}
    assert set(times) == set(second["members_after"]) and len(times) == 2
    assert all(r["assigned_ms"] is not None for r in times.values())
    assert second["duration_ms"] == max(r["assigned_ms"] for r in times.values())

    b.close()  # leaves: a takes all four again under a new target
    poll_until(lambda: owned(a) == {0, 1, 2, 3}, "a takes back every partition", a)

    def recorded() -> bool:
        a.poll(0.1)
        return len(history()) == 3

    wait_until(recorded, SETTLE_TIMEOUT_S, "the third target on record", lambda: str(history()))
    third = history()[-1]
    assert (third["cause"], third["from_generation"], third["to_generation"]) == (
        "member left",
        2,
        3,
    )
    rows = table_rows(succeeded(herdless("groups", "history", "vis848", "-b", bootstrap)))
    # The entries, then each member's way to each target.
    assert [row[1] for row in rows[:3]] == ["member joined", "member joined", "member left"]
    assert rows[2][2] == "2 → 3" and rows[2][6] == "consumer"
    assert [row[0] for row in rows[3:]] == ["1", "2", "2", "3"]
    a.close()
