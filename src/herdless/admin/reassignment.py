"""Partition reassignment as `herdless cluster reassign` and `cluster drain` ask for it
(AlterPartitionReassignments, ListPartitionReassignments; KIP-455), and a drain's moves
off one broker. kafka-reassign-partitions.sh's proposal over a broker list is
cluster/assignment.py's (propose_reassignment).

Plans are pure (partition -> replicas in, partition -> replicas out); the rest asks the
controller through kafka-python's admin client.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from herdless.admin.client import error_text, from_any_broker
from herdless.admin.errors import AdminError

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

Key = tuple[str, int]
Assignment = dict[Key, list[int]]

# KIP-73's configs, which kafka-reassign-partitions.sh --throttle sets and --verify clears.
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"


# -- plans -------------------------------------------------------------------------------


def drain_plan(
    current: Mapping[Key, Sequence[int]], broker: int, brokers: Collection[int]
) -> Assignment:
    """Targets that move every replica off `broker`: each goes to the other broker, not
    already a replica, that hosts fewest replicas so far (lowest id on a tie), and goes
    last, so that a replica already in sync becomes the preferred leader.
    AdminError when a partition has nowhere to go."""
    others = sorted(set(brokers) - {broker})
    load = Counter({b: 0 for b in others})
    for replicas in current.values():
        load.update(r for r in replicas if r != broker and r in load)
    plan: Assignment = {}
    for key, replicas in sorted(current.items()):
        if broker not in replicas:
            continue
        candidates = [b for b in others if b not in replicas]
        if not candidates:
            raise AdminError(
                f"{key[0]}-{key[1]} has {len(replicas)} replicas and only"
                f" {len(others)} other brokers: it cannot leave broker {broker}"
            )
        chosen = min(candidates, key=lambda b: (load[b], b))
        load[chosen] += 1
        plan[key] = [r for r in replicas if r != broker] + [chosen]
    return plan


def read_plan(document: object, where: str) -> Assignment:
    """A reassignment in kafka-reassign-partitions.sh's JSON form; AdminError naming what is
    wrong with it."""
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise AdminError(
            f'{where} must hold {{"version": 1, "partitions": [{{"topic": T, "partition": P,'
            ' "replicas": [B, ...]}, ...]}, as kafka-reassign-partitions.sh reads it'
        )
    plan: Assignment = {}
    for number, entry in enumerate(entries, 1):
        fields = entry if isinstance(entry, dict) else {}
        topic, partition, replicas = (fields.get(k) for k in ("topic", "partition", "replicas"))
        if (
            not isinstance(topic, str)
            or not topic
            or not _is_int(partition)
            or partition < 0
            or not isinstance(replicas, list)
            or not replicas
            or not all(_is_int(r) and r >= 0 for r in replicas)
        ):
            raise AdminError(
                f"{where}: partition entry {number} needs a topic, a partition >= 0 and a"
                f" list of broker ids as replicas, got {_dumps(entry)}"
            )
        if len(set(replicas)) != len(replicas):
            raise AdminError(f"{where}: {topic}-{partition} lists a broker twice: {replicas}")
        if (topic, partition) in plan:
            raise AdminError(f"{where}: {topic}-{partition} is given twice")
        plan[(topic, partition)] = list(replicas)
    return plan


def plan_document(plan: Mapping[Key, Sequence[int]]) -> dict[str, Any]:
    """kafka-reassign-partitions.sh's JSON form of an assignment."""
    return {
        "version": 1,
        "partitions": [
            {
                "topic": topic,
                "partition": partition,
                "replicas": list(replicas),
                "log_dirs": ["any"] * len(replicas),
            }
            for (topic, partition), replicas in sorted(plan.items())
        ],
    }


def throttled_replicas(
    current: Mapping[Key, Sequence[int]], plan: Mapping[Key, Sequence[int]]
) -> dict[str, dict[str, str]]:
    """Each topic's throttled-replica configs for a reassignment, as the tool computes
    them: of each partition that moves, every current replica may send (it may lead), and
    every replica joining receives."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for (topic, partition), target in sorted(plan.items()):
        before = list(current.get((topic, partition), []))
        if list(target) == before:
            continue
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in before)
        followers.setdefault(topic, []).extend(
            f"{partition}:{b}" for b in target if b not in before
        )
    return {
        topic: {
            LEADER_THROTTLED_REPLICAS: ",".join(leaders[topic]),
            FOLLOWER_THROTTLED_REPLICAS: ",".join(followers.get(topic, [])),
        }
        for topic in leaders
    }


# -- asking the cluster ------------------------------------------------------------------


def current_assignment(admin: KafkaAdminClient, topics: list[str] | None = None) -> Assignment:
    """Each partition's replicas now (of `topics`, or of every topic); AdminError names a
    topic that does not exist."""
    described = from_any_broker(lambda: admin.describe_topics(topics))
    assignment: Assignment = {}
    for topic in described:
        if topic.get("error_code"):
            raise AdminError(f"topic {topic['name']}: {error_text(topic['error_code'])}")
        for p in topic["partitions"]:
            assignment[(topic["name"], p["partition_index"])] = list(p["replica_nodes"])
    return assignment


def leaders(admin: KafkaAdminClient) -> dict[Key, int]:
    described = from_any_broker(admin.describe_topics)
    return {
        (t["name"], p["partition_index"]): p["leader_id"]
        for t in described
        for p in t["partitions"]
    }


def broker_ids(admin: KafkaAdminClient) -> list[int]:
    cluster = from_any_broker(admin.describe_cluster)
    return sorted(b["broker_id"] for b in cluster.get("brokers", []))


def alter(admin: KafkaAdminClient, targets: Mapping[Key, Sequence[int] | None]) -> dict[Key, str]:
    """Start (a list) or cancel (None) each partition's reassignment; the partitions the
    controller refused, with why."""
    from kafka import TopicPartition

    asked = {TopicPartition(t, p): None if r is None else list(r) for (t, p), r in targets.items()}
    answer = from_any_broker(lambda: admin.alter_partition_reassignments(asked))
    return {
        (tp.topic, tp.partition): error_text(error)
        for tp, error in answer.items()
        if error is not None
    }


def in_progress(admin: KafkaAdminClient) -> dict[Key, dict[str, list[int]]]:
    """The reassignments in progress: replicas, adding_replicas, removing_replicas."""
    listed = from_any_broker(admin.list_partition_reassignments)
    return {(tp.topic, tp.partition): value for tp, value in listed.items()}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _dumps(value: object) -> str:
    return json.dumps(value)


def set_throttles(
    admin: KafkaAdminClient,
    topics: Mapping[str, Mapping[str, str]],
    brokers: Sequence[int],
    rate: int,
) -> list[str]:
    """Throttle a reassignment: the topics' throttled replicas, and both rates on each
    broker. What could not be set, in words (AdminError for a topic)."""
    from kafka.admin import ConfigResourceType

    for topic, configs in topics.items():
        problem = _alter(admin, ConfigResourceType.TOPIC, topic, dict(configs))
        if problem is not None:
            raise AdminError(f"cannot throttle topic {topic}: {problem}")
    rates = {LEADER_THROTTLED_RATE: str(rate), FOLLOWER_THROTTLED_RATE: str(rate)}
    return _alter_brokers(admin, brokers, rates)


def clear_throttles(
    admin: KafkaAdminClient, topics: Collection[str], brokers: Sequence[int]
) -> list[str]:
    """Remove a reassignment's throttles; what could not be removed, in words."""
    from kafka.admin import AlterConfigOp, ConfigResourceType

    delete = (AlterConfigOp.DELETE, None)
    problems = []
    for topic in sorted(topics):
        problem = _alter(
            admin,
            ConfigResourceType.TOPIC,
            topic,
            {LEADER_THROTTLED_REPLICAS: delete, FOLLOWER_THROTTLED_REPLICAS: delete},
        )
        if problem is not None:
            problems.append(f"topic {topic}: {problem}")
    rates = {LEADER_THROTTLED_RATE: delete, FOLLOWER_THROTTLED_RATE: delete}
    return problems + _alter_brokers(admin, brokers, rates)


def _alter_brokers(
    admin: KafkaAdminClient, brokers: Sequence[int], changes: Mapping[str, object]
) -> list[str]:
    from kafka.admin import ConfigResourceType

    problems = []
    for broker in brokers:
        problem = _alter(admin, ConfigResourceType.BROKER, str(broker), dict(changes))
        if problem is not None:
            problems.append(f"broker {broker}: {problem}")
    return problems


def _alter(admin: KafkaAdminClient, kind: Any, name: str, changes: dict[str, object]) -> str | None:
    """IncrementalAlterConfigs of one resource; None once done, else why not."""
    from kafka.admin import ConfigResource

    resource = ConfigResource(kind, name, configs=changes)
    result = from_any_broker(
        lambda: admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
    )
    outcome = result.get(kind.name.lower(), {}).get(name)
    return None if outcome == "OK" else str(outcome)
