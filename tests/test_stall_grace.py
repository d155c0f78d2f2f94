"""A broker that could not run (SIGSTOP, a long pause) does not count that time against
members' sessions: a group whose members kept trying carries on without a rebalance,
and a member that really died meanwhile is still expired, at most one stall later."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.members import MemberSet, wait_balanced

PARTITIONS = 6
# Below Kafka's 6 s minimum session (lowered here), so that a stall past every
# member's session, and the expiry after it, take seconds less.
SESSION_MS = 4_000
STALL_S = 6.0
BROKER_ARGS = (
    "--set",
    "group.initial.rebalance.delay.ms=0",
    "--set",
    f"group.min.session.timeout.ms={SESSION_MS}",
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("stall") / "data"
    with module_broker(data_dir, *BROKER_ARGS) as process:
        yield process


def create_topic(broker: BrokerProcess, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


def stall(broker: BrokerProcess, seconds: float, meanwhile: object = None) -> None:
    broker.pause()
    try:
        if callable(meanwhile):
            meanwhile()
        time.sleep(seconds)
    finally:
        broker.resume()


def test_a_paused_broker_does_not_expire_members_that_kept_trying(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker, "paused")
    with MemberSet(
        broker.bootstrap, "paused", "paused", tmp_path, session_timeout_ms=SESSION_MS
    ) as group:
        # Not librdkafka: it gives up on its own after a session without an answer
        # (SESSTMOUT), rejoining with a new member id whatever the broker does.
        members = [group.start(c) for c in ("kafka-python", "aiokafka", "kafka-python")]
        wait_balanced(members, PARTITIONS, 60, "three members sharing the topic")
        time.sleep(2)  # any follow-up rebalance settles
        before = {m.name: (len(m.assignment_events()), m.generation) for m in members}

        # Longer than every member's session: without grace all three would be expired.
        stall(broker, STALL_S)
        time.sleep(SESSION_MS / 1000 + 2)

        after = {m.name: (len(m.assignment_events()), m.generation) for m in members}
        assert after == before, f"members saw a rebalance:\n{group.describe()}"
    assert "could not run for" in broker.log()


def test_a_member_that_died_during_a_pause_is_still_expired(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker, "died")
    with MemberSet(
        broker.bootstrap, "died", "died", tmp_path, session_timeout_ms=SESSION_MS
    ) as group:
        members = [group.start("kafka-python") for _ in range(3)]
        wait_balanced(members, PARTITIONS, 60, "three members sharing the topic")
        dead, *survivors = members

        stall(broker, STALL_S, meanwhile=dead.kill)
        resumed = time.monotonic()

        wait_balanced(
            survivors, PARTITIONS, SESSION_MS / 1000 + STALL_S + 15, "the survivors taking over"
        )
        # Expired once its session ran out, the stall not counted: about one session
        # after the resume, and no later than a session plus the stall.
        took = time.monotonic() - resumed
        assert took <= SESSION_MS / 1000 + STALL_S + 5, took
