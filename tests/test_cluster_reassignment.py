"""Partition reassignment (KIP-455) on a real four-broker cluster, through kafka-python's
admin client and `herdless cluster reassign` / `drain`: a partition moves to the fourth
broker under an acks=all producer and loses no acknowledged record, its leader leaving
on the way; the broker left deletes its replica; a reassignment is listed while in
progress and cancelled back; bad targets are refused with Kafka's error codes; a drained
broker hosts and leads nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from herdless.protocol.errors import ErrorCode
from tests.support.checker import Writer
from tests.support.cli import herdless, refused, succeeded
from tests.support.cluster import ClusterProcesses, running_cluster, verify_acknowledged
from tests.support.wire import Wire

# Both replication throttles on every broker; only the topics that name throttled
# replicas are slowed. Two windows of a second, so that a rate is not measured over ten
# seconds (Kafka's eleven windows) and a move of a few megabytes shows it.
THROTTLE_BYTES_PER_S = 1_000_000
THROTTLES = {
    "leader.replication.throttled.rate": str(THROTTLE_BYTES_PER_S),
    "follower.replication.throttled.rate": str(THROTTLE_BYTES_PER_S),
    "replication.quota.window.num": "2",
}
MOVED_BYTES = 5_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(
        tmp_path_factory.mktemp("reassignment"), brokers=4, **THROTTLES
    ) as processes:
        yield processes


@pytest.fixture
def admin(cluster: ClusterProcesses) -> Iterator[KafkaAdminClient]:
    cluster.restore()
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    yield client
    client.close()


def replicas(cluster: ClusterProcesses, topic: str, partition: int = 0) -> list[int]:
    return list(cluster.metadata(topic).topics[topic].partitions[partition].replicas)


def wait_reassigned(
    cluster: ClusterProcesses, admin: KafkaAdminClient, topic: str, target: list[int]
) -> None:
    deadline = time.monotonic() + 60
    while admin.list_partition_reassignments({topic: [0]}):
        assert time.monotonic() < deadline, "the reassignment did not complete in 60 s"
        time.sleep(0.1)
    cluster.wait_for(
        lambda m: (
            list(m.topics[topic].partitions[0].replicas) == target
            and sorted(m.topics[topic].partitions[0].isrs) == sorted(target)
        ),
        what=f"{topic}-0 on {target}",
    )


def test_a_partition_moves_to_the_fourth_broker_under_load_losing_nothing(
    cluster: ClusterProcesses, admin: KafkaAdminClient
) -> None:
    cluster.create_topic("moving", 1, 3)
    before = replicas(cluster, "moving")
    leader = cluster.metadata("moving").topics["moving"].partitions[0].leader
    (fourth,) = set(cluster.brokers) - set(before)
    # The leader leaves: the new one comes from the target.
    target = [fourth, *(r for r in before if r != leader)]
    writer = Writer(cluster.bootstrap, "moving")
    writer.start()
    time.sleep(1)
    answer = admin.alter_partition_reassignments({TopicPartition("moving", 0): target})
    assert answer == {TopicPartition("moving", 0): None}
    wait_reassigned(cluster, admin, "moving", target)
    time.sleep(1)
    verify_acknowledged(cluster, writer, "moving", 1)
    assert cluster.metadata("moving").topics["moving"].partitions[0].leader in target
    left = cluster.brokers[leader].data_dir / "moving-0"
    deadline = time.monotonic() + 10
    while left.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left.exists(), "the broker reassigned away keeps its replica"


def alter(wire: Wire, topic: str, replicas: list[int] | None) -> int:
    """One partition's error code for a reassignment (None: cancel) asked on the wire."""
    Request = AlterPartitionReassignmentsRequest[0]
    Topic = Request.ReassignableTopic
    answer = wire.call(
        Request(
            timeout_ms=10_000,
            topics=[
                Topic(
                    name=topic,
                    partitions=[Topic.ReassignablePartition(partition_index=0, replicas=replicas)],
                )
            ],
        ),
        AlterPartitionReassignmentsResponse,
    )
    return answer.responses[0].partitions[0].error_code  # type: ignore[attr-defined]


def listed(wire: Wire) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    answer = wire.call(
        ListPartitionReassignmentsRequest[0](timeout_ms=10_000, topics=None),
        ListPartitionReassignmentsResponse,
    )
    assert answer.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in answer.topics  # type: ignore[attr-defined]
        for p in t.partitions
    }


def test_a_reassignment_in_progress_is_listed_and_cancelled_back(
    cluster: ClusterProcesses, admin: KafkaAdminClient
) -> None:
    cluster.create_topic("cancelled", 1, 2)
    before = replicas(cluster, "cancelled")
    controller_id = cluster.metadata().controller_id
    joining = next(b for b in sorted(cluster.brokers) if b not in [*before, controller_id])
    wire = Wire(cluster.brokers[controller_id])
    # Paused, the joining broker is still registered but never catches up.
    cluster.pause(joining)
    try:
        assert alter(wire, "cancelled", [joining, before[0]]) == ErrorCode.NONE
        assert listed(wire) == {
            ("cancelled", 0): ([joining, before[0], before[1]], [joining], [before[1]])
        }
        # Meanwhile the topic's partitions are the reassignment's, as Kafka's controller
        # keeps them.
        grown = wire.call(
            CreatePartitionsRequest[1](
                topics=[
                    CreatePartitionsRequest[1].CreatePartitionsTopic(
                        name="cancelled", count=2, assignments=None
                    )
                ],
                timeout_ms=10_000,
                validate_only=False,
            ),
            CreatePartitionsResponse,
        )
        assert grown.results[0].error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS  # type: ignore[attr-defined]
        assert alter(wire, "cancelled", None) == ErrorCode.NONE
        assert listed(wire) == {}
        assert sorted(replicas(cluster, "cancelled")) == sorted(before)
        # Nothing left to cancel.
        assert alter(wire, "cancelled", None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    finally:
        cluster.resume(joining)
        wire.close()


def test_the_tool_starts_nothing_while_a_reassignment_is_in_progress_and_cancels_it(
    cluster: ClusterProcesses, admin: KafkaAdminClient, tmp_path: Path
) -> None:
    # Throttled, the joining replica takes seconds; killed, it never catches up.
    cluster.create_topic("stuck", 1, 1, follower_replication_throttled_replicas="*")
    cluster.produce("stuck", [os.urandom(1000) for _ in range(5000)], linger_ms=20)
    (source,) = replicas(cluster, "stuck")
    controller_id = cluster.metadata().controller_id
    joining = next(b for b in sorted(cluster.brokers) if b not in (source, controller_id))
    key = TopicPartition("stuck", 0)
    assert admin.alter_partition_reassignments({key: [source, joining]}) == {key: None}
    cluster.brokers[joining].kill()
    try:
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps({"partitions": [{"topic": "stuck", "partition": 0, "replicas": [source]}]})
        )
        args = (
            "cluster",
            "reassign",
            "-b",
            cluster.bootstrap,
            "--reassignment-json-file",
            str(plan),
        )
        refused(herdless(*args, "--execute"), "Use --additional to override this")
        result = herdless(*args, "--verify")
        refused(result, "1 partition not reassigned yet")
        assert "Reassignment of partition stuck-0 is still in progress." in result.stdout
        out = succeeded(herdless(*args, "--cancel"))
        assert "Successfully cancelled partition reassignments for: stuck-0" in out
        assert admin.list_partition_reassignments() == {}
        assert replicas(cluster, "stuck") == [source]
        # Its only replica down, the partition has nowhere to be copied from.
        cluster.brokers[source].kill()
        cluster.wait_for(
            lambda m: m.topics["stuck"].partitions[0].leader == -1, what="stuck-0 offline"
        )
        result = herdless("cluster", "drain", "-b", cluster.bootstrap, str(source))
        refused(result, f"stuck-0 have no leader: their records are only on broker {source}")
    finally:
        cluster.heal()  # starts what is down


def test_targets_kafka_refuses_are_refused_per_partition(
    cluster: ClusterProcesses, admin: KafkaAdminClient
) -> None:
    cluster.create_topic("refusing", 1, 2)
    answer = admin.alter_partition_reassignments(
        {
            TopicPartition("refusing", 0): [1, 99],
            TopicPartition("refusing", 7): [1, 2],
            TopicPartition("no-such-topic", 0): [1, 2],
        }
    )
    assert answer == {
        TopicPartition("refusing", 0): InvalidReplicationAssignmentError,
        TopicPartition("refusing", 7): UnknownTopicOrPartitionError,
        TopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError,
    }


def test_a_broker_that_is_not_the_controller_says_so(cluster: ClusterProcesses) -> None:
    controller_id = cluster.metadata().controller_id
    other = next(i for i in cluster.brokers if i != controller_id)
    wire = Wire(cluster.brokers[other])
    try:
        answer = wire.call(
            ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=None),
            ListPartitionReassignmentsResponse,
        )
    finally:
        wire.close()
    assert answer.error_code == ErrorCode.NOT_CONTROLLER


def test_the_reassign_command_generates_executes_and_verifies(
    cluster: ClusterProcesses, admin: KafkaAdminClient, tmp_path: Path
) -> None:
    cluster.create_topic("tool", 2, 2)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "tool"}]}))
    out = succeeded(
        herdless(
            "cluster",
            "reassign",
            "-b",
            cluster.bootstrap,
            "--generate",
            "--topics-to-move-json-file",
            str(topics),
            "--broker-list",
            "3,4",
        )
    )
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert [sorted(p["replicas"]) for p in proposed["partitions"]] == [[3, 4], [3, 4]]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    args = ("cluster", "reassign", "-b", cluster.bootstrap, "--reassignment-json-file", str(plan))
    before = {p: replicas(cluster, "tool", p) for p in (0, 1)}
    out = succeeded(herdless(*args, "--execute", "--throttle", "50000000"))
    assert "Successfully started partition reassignments for tool-0,tool-1" in out
    assert "You must run --verify periodically" in out
    # The brokers' rates are dynamic broker configs, set on every broker at once.
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    # The tool's throttled replicas: every current replica sends, every new one receives.
    throttled = topic_configs(cluster, "tool")
    targets = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
    leaders = throttled["leader.replication.throttled.replicas"].split(",")
    followers = throttled["follower.replication.throttled.replicas"].split(",")
    for p in (0, 1):
        if targets[p] != before[p]:
            assert {f"{p}:{b}" for b in before[p]} <= set(leaders)
            assert {f"{p}:{b}" for b in targets[p] if b not in before[p]} <= set(followers)
    deadline = time.monotonic() + 60
    while (result := herdless(*args, "--verify")).returncode != 0:
        assert "still in progress" in result.stdout, result.stdout + result.stderr
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert "Reassignment of partition tool-0 is completed." in result.stdout
    assert "Clearing topic-level throttles on topic tool" in result.stdout
    assert sorted(replicas(cluster, "tool", 1)) == [3, 4]
    cleared = topic_configs(cluster, "tool")
    assert cleared["leader.replication.throttled.replicas"] == ""
    assert cleared["follower.replication.throttled.replicas"] == ""
    # Nothing to cancel now.
    out = succeeded(herdless(*args, "--cancel"))
    assert "Successfully cancelled partition reassignments for: " in out


def test_the_reassign_command_names_bad_input(cluster: ClusterProcesses, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{")
    base = ("cluster", "reassign", "-b", cluster.bootstrap)
    refused(herdless(*base, "--verify", "--reassignment-json-file", str(plan)), "not JSON", 2)
    refused(herdless(*base, "--execute"), "--execute needs --reassignment-json-file", 2)
    refused(herdless(*base), "exactly one of", 2)
    plan.write_text(json.dumps({"partitions": [{"topic": "x", "partition": 0, "replicas": 1}]}))
    refused(herdless(*base, "--execute", "--reassignment-json-file", str(plan)), "entry 1", 2)
    plan.write_text(
        json.dumps({"partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}]})
    )
    refused(herdless(*base, "--execute", "--reassignment-json-file", str(plan)), "nope")


def test_a_broker_that_is_down_is_drained_all_the_same(
    cluster: ClusterProcesses, admin: KafkaAdminClient
) -> None:
    cluster.create_topic("orphaned", 2, 3)
    # Not one whose partition it holds alone: that one could not move until it is back;
    # not the controller, whose successor is elected only once its session has expired.
    metadata = cluster.metadata()
    alone = {
        p.replicas[0]
        for topic in metadata.topics.values()
        for p in topic.partitions.values()
        if len(p.replicas) == 1
    }
    down = next(b for b in sorted(cluster.brokers) if b not in {*alone, metadata.controller_id})
    cluster.brokers[down].kill()
    try:
        out = succeeded(
            herdless("cluster", "drain", "-b", cluster.bootstrap, str(down), timeout=120)
        )
        assert out.splitlines()[-1] == f"broker {down} hosts and leads nothing"
        for p in cluster.metadata("orphaned").topics["orphaned"].partitions.values():
            assert down not in p.replicas and len(p.replicas) == 3
    finally:
        cluster.heal()


def test_drain_leaves_the_broker_hosting_and_leading_nothing(
    cluster: ClusterProcesses, admin: KafkaAdminClient
) -> None:
    cluster.create_topic("drained", 4, 2)
    # Every partition it hosts moves, the internal topics' too.
    victim = max(cluster.brokers)
    writer = Writer(cluster.bootstrap, "drained")
    writer.start()
    out = succeeded(herdless("cluster", "drain", "-b", cluster.bootstrap, str(victim), timeout=120))
    assert out.splitlines()[-1] == f"broker {victim} hosts and leads nothing"
    metadata = cluster.metadata()
    for topic in metadata.topics.values():
        for p in topic.partitions.values():
            assert victim not in p.replicas and p.leader != victim, (topic.topic, p.id)
    verify_acknowledged(cluster, writer, "drained", 4)
    refused(herdless("cluster", "drain", "-b", cluster.bootstrap, "77"), "broker 77 is not")


def topic_configs(cluster: ClusterProcesses, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource("topic", topic)
    described = admin.describe_configs([resource])[resource].result(timeout=20)
    return {name: entry.value for name, entry in described.items()}


def log_bytes(cluster: ClusterProcesses, broker: int, topic: str) -> int:
    directory = cluster.brokers[broker].data_dir / f"{topic}-0"
    return sum(p.stat().st_size for p in directory.glob("*.log")) if directory.exists() else 0


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_move_under_load_keeps_to_the_rate_and_loses_nothing(
    cluster: ClusterProcesses, admin: KafkaAdminClient, side: str
) -> None:
    topic = f"throttled-{side}"
    cluster.create_topic(topic, 1, 1, **{f"{side}_replication_throttled_replicas": "*"})
    # Incompressible, so the bytes moved are the bytes produced; distinct, as the checker
    # counts a value read twice as a duplicate.
    cluster.produce(topic, [os.urandom(1000) for _ in range(MOVED_BYTES // 1000)], linger_ms=20)
    (source,) = replicas(cluster, topic)
    joining = next(b for b in sorted(cluster.brokers) if b != source)
    writer = Writer(cluster.bootstrap, topic)
    writer.start()
    started = time.monotonic()
    assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [source, joining]})
    wait_reassigned(cluster, admin, topic, [source, joining])
    elapsed = time.monotonic() - started
    moved = log_bytes(cluster, joining, topic)
    rate = moved / elapsed
    print(
        f"{side} throttle {THROTTLE_BYTES_PER_S} B/s: {moved} B in {elapsed:.1f}s, {rate:.0f} B/s"
    )
    assert moved >= MOVED_BYTES
    # The bound, but for the first window's bytes and one fetch past the bound (the quota
    # is checked before each fetch, as Kafka's): a replica fetch is at most 1 MiB.
    allowance = THROTTLE_BYTES_PER_S * 1 + 1024 * 1024
    assert moved <= THROTTLE_BYTES_PER_S * elapsed + allowance, f"{rate:.0f} B/s"
    verify_acknowledged(cluster, writer, topic, 1)
