"""The plans `cluster reassign --generate` and `cluster drain` make, and the JSON files
kafka-reassign-partitions.sh reads, as pure functions."""

from __future__ import annotations

from collections import Counter

import pytest

from herdless.admin.errors import AdminError
from herdless.admin.reassignment import drain_plan, plan_document, read_plan
from herdless.cluster.assignment import propose_reassignment
from herdless.cluster.errors import InvalidReplicationFactor


def test_a_drain_moves_every_replica_off_the_broker_keeping_the_replication_factor() -> None:
    current = {("t", p): [1 + p % 4, 1 + (p + 1) % 4, 1 + (p + 2) % 4] for p in range(8)}
    plan = drain_plan(current, 2, [1, 2, 3, 4])
    assert set(plan) == {k for k, r in current.items() if 2 in r}
    for key, target in plan.items():
        assert 2 not in target
        assert len(target) == len(set(target)) == 3
        # The replicas that stay keep their order; the newcomer goes last.
        assert target[:-1] == [r for r in current[key] if r != 2]
    after = {**current, **plan}
    load = Counter(r for replicas in after.values() for r in replicas)
    assert load[2] == 0
    # The other three brokers end within one replica of each other.
    assert max(load.values()) - min(load[b] for b in (1, 3, 4)) <= 1


def test_a_drain_with_nowhere_to_go_says_which_partition() -> None:
    with pytest.raises(AdminError, match="t-0 has 3 replicas and only 2 other brokers"):
        drain_plan({("t", 0): [1, 2, 3]}, 1, [1, 2, 3])


def test_a_proposal_spreads_each_topic_over_the_brokers_listed() -> None:
    current = {("a", p): [1, 2] for p in range(4)} | {("b", 0): [1]}
    proposed = propose_reassignment(current, [3, 4, 5])
    assert set(proposed) == set(current)
    assert all(len(proposed[k]) == len(current[k]) for k in current)
    assert all(set(r) <= {3, 4, 5} for r in proposed.values())
    with pytest.raises(InvalidReplicationFactor, match="larger than available brokers: 1"):
        propose_reassignment(current, [3])


def test_the_tools_json_form_round_trips() -> None:
    plan = {("t", 1): [2, 3], ("t", 0): [1, 2]}
    document = plan_document(plan)
    assert document["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "replicas": [1, 2],
        "log_dirs": ["any", "any"],
    }
    assert read_plan(document, "f") == plan


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"version": 1}, "must hold"),
        ({"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}, "entry 1"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}, "entry 1"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "twice"),
        (
            {
                "partitions": [
                    {"topic": "t", "partition": 0, "replicas": [1]},
                    {"topic": "t", "partition": 0, "replicas": [2]},
                ]
            },
            "given twice",
        ),
    ],
)
def test_bad_files_are_named(document: object, words: str) -> None:
    with pytest.raises(AdminError, match=words):
        read_plan(document, "f")
