"""Static membership (group.instance.id, KIP-345): a quick restart causes no rebalance.

A static member that shuts down sends no LeaveGroup; when it comes back under
the same instance id within its session timeout, the coordinator hands it its
old assignment at the same generation and the other members notice nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.members import (
    Member,
    MemberSet,
    assert_group_matches,
    describe_group,
    rebalance_history,
    wait_balanced,
    wait_until,
)

PARTITIONS = 6
SETTLE_TIMEOUT_S = 60.0
SESSION_MS = 30_000  # the restart must fit in it with room to spare on a loaded machine
# Long enough for a rebalance triggered by the rejoin to reach the other members:
# they heartbeat every 500 ms and would be told REBALANCE_IN_PROGRESS.
QUIET_PERIOD_S = 3.0
STATIC_CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data_dir = tmp_path_factory.mktemp("static") / "data"
    with module_broker(data_dir, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process


def restart_without_rebalance(
    group: MemberSet, members: list[Member], index: int, bootstrap: str
) -> list[Member]:
    """Stop members[index], start it again; check nothing else moved. Returns the new members."""
    before = members[index]
    others = [m for i, m in enumerate(members) if i != index]
    generation = before.generation
    held = before.assignment
    marks = {m.name: len(m.assignment_events()) for m in others}
    old_id = describe_group(bootstrap, group.group, group.topic).by_client()[before.name].member_id

    stopped_at = time.monotonic()
    before.close()  # a static member closes without LeaveGroup
    after = group.restart(before)
    wait_until(
        lambda: after.assignment is not None and len(after.assignment) > 0,
        SETTLE_TIMEOUT_S,
        f"{after.name} ({after.instance_id}) gets an assignment back after its restart",
        lambda: "\n".join(m.describe() for m in [after, *others]),
    )
    took = time.monotonic() - stopped_at
    assert took < SESSION_MS / 1000, f"the restart took {took:.1f}s, longer than the session"
    time.sleep(QUIET_PERIOD_S)  # absence of a rebalance can only be observed over a while

    assert after.assignment == held, (
        f"{after.name} held {sorted(held or ())} before its restart, "
        f"got {sorted(after.assignment or ())} after:\n{after.describe()}"
    )
    if generation is not None:
        assert after.generation == generation, (
            f"generation moved from {generation} to {after.generation} on a static rejoin:\n"
            + after.describe()
            + "\n"
            + rebalance_history(bootstrap, group.group)
        )
    for member in others:
        moved = member.assignment_events()[marks[member.name] :]
        assert not moved, (
            f"{member.name} saw a rebalance when static member {after.instance_id} "
            f"restarted: {[str(e) for e in moved]}\n" + rebalance_history(bootstrap, group.group)
        )
        if generation is not None:
            assert member.generation == generation, (
                f"{member.name} is at generation {member.generation}, was {generation}:\n"
                + member.describe()
            )
    now = [*members[:index], after, *members[index + 1 :]]
    description = assert_group_matches(bootstrap, now, PARTITIONS)
    assert len(description.members) == len(members), str(description)
    rejoined = description.by_client()[after.name]
    assert rejoined.instance_id == after.instance_id, str(description)
    assert rejoined.member_id != old_id, (
        f"the rejoined static member kept member id {old_id}; the coordinator must give "
        "a new one so that the old incarnation is fenced"
    )
    return now


@pytest.mark.parametrize("client", STATIC_CLIENTS)
def test_static_member_restart_keeps_assignment_and_generation(
    group_broker: BrokerProcess, client: str, tmp_path: Path
) -> None:
    name = f"static-{client}"
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    with MemberSet(
        group_broker.bootstrap, name, name, tmp_path, session_timeout_ms=SESSION_MS
    ) as group:
        # The first member to join leads the group; start it alone so we know which it is.
        leader = group.start(client, "s1", instance_id=f"{name}-1")
        wait_balanced([leader], PARTITIONS, SETTLE_TIMEOUT_S, "the first static member")
        members = [
            leader,
            group.start(client, "s2", instance_id=f"{name}-2"),
            group.start(client, "s3", instance_id=f"{name}-3"),
        ]
        wait_balanced(members, PARTITIONS, SETTLE_TIMEOUT_S, "3 static members share")
        assert_group_matches(group_broker.bootstrap, members, PARTITIONS)

        members = restart_without_rebalance(group, members, 1, group_broker.bootstrap)
        members = restart_without_rebalance(group, members, 0, group_broker.bootstrap)
        for member in members:
            member.close()
