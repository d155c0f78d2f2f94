"""`herdless cluster elect-leaders` and ElectLeaders (KIP-460) as Kafka operators use
them: preferred leaders back after a restart, an unclean election of an offline
partition, Kafka's per-partition answers, the controller alone answering, and
kafka-leader-election.sh's options with usage errors exiting 2.

The cluster runs without the automatic rebalance, so that only the elections asked
for move leadership.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from herdless.protocol.broker_messages import ControlledShutdownRequest, ControlledShutdownResponse
from herdless.protocol.errors import ErrorCode
from herdless.testing import BrokerProcess
from tests.support.broker import module_broker
from tests.support.cli import herdless, refused, succeeded, table_rows
from tests.support.cluster import ClusterProcesses, running_cluster
from tests.support.wire import Wire


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    with running_cluster(
        tmp_path_factory.mktemp("elect-leaders"), **{"auto.leader.rebalance.enable": "false"}
    ) as processes:
        yield processes


@pytest.fixture
def cluster(shared_cluster: ClusterProcesses) -> ClusterProcesses:
    shared_cluster.restore()
    return shared_cluster


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("alone") / "data") as process:
        yield process


def elect(bootstrap: str, *args: str) -> list[list[str]]:
    return table_rows(succeeded(herdless("cluster", "elect-leaders", "-b", bootstrap, *args)))


def partitions(cluster: ClusterProcesses, topic: str) -> dict[int, object]:
    return dict(cluster.metadata(topic).topics[topic].partitions)


def test_preferred_election_hands_leadership_back_after_a_restart(
    cluster: ClusterProcesses, tmp_path: Path
) -> None:
    cluster.create_topic("prefer", 3, 3)
    preferred = {p: m.replicas[0] for p, m in partitions(cluster, "prefer").items()}
    victim = preferred[0]
    cluster.brokers[victim].stop()
    cluster.brokers[victim].start()
    cluster.wait_serving("prefer")
    moved = sorted(p for p, m in partitions(cluster, "prefer").items() if m.leader != preferred[p])
    assert moved, "the restarted broker leads nothing until an election"

    rows = elect(
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "prefer",
        "--partition",
        str(moved[0]),
    )
    assert rows == [["prefer", str(moved[0]), "elected", str(victim), "-"]]

    rows = elect(cluster.bootstrap, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert [r[:3] for r in rows if r[0] == "prefer"] == [
        ["prefer", str(p), "elected"] for p in moved[1:]
    ]
    assert {p: m.leader for p, m in partitions(cluster, "prefer").items()} == preferred

    # Asked by name, a partition already led by its preferred replica says so.
    path = tmp_path / "partitions.json"
    path.write_text(json.dumps({"partitions": [{"topic": "prefer", "partition": 0}]}))
    rows = elect(
        cluster.bootstrap, "--election-type", "preferred", "--path-to-json-file", str(path)
    )
    assert rows == [["prefer", "0", "not needed", str(preferred[0]), "-"]]
    # Over every partition, those that need nothing are left out, as Kafka answers.
    result = succeeded(
        herdless(
            "cluster",
            "elect-leaders",
            "-b",
            cluster.bootstrap,
            "--election-type",
            "preferred",
            "--all-topic-partitions",
        )
    )
    assert table_rows(result) == []


def test_unclean_election_brings_an_offline_partition_back_on_a_replica_out_of_the_isr(
    cluster: ClusterProcesses,
) -> None:
    cluster.create_topic("offline", 1, 2)
    first, second = partitions(cluster, "offline")[0].replicas
    cluster.brokers[first].stop()  # the second leads, alone in the ISR
    cluster.wait_for(lambda m: m.topics["offline"].partitions[0].isrs == [second])
    cluster.brokers[second].stop()  # no other replica may take over: offline
    cluster.brokers[first].start()
    cluster.wait_registered(first)
    cluster.wait_for(lambda m: m.topics["offline"].partitions[0].leader == -1)

    preferred = herdless(
        "cluster",
        "elect-leaders",
        "-b",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "offline",
        "--partition",
        "0",
    )
    refused(preferred, "could not be elected")
    assert "PREFERRED_LEADER_NOT_AVAILABLE" in preferred.stdout

    rows = elect(
        cluster.bootstrap, "--election-type", "unclean", "--topic", "offline", "--partition", "0"
    )
    assert rows == [["offline", "0", "elected", str(first), "-"]]
    # Once it has a live leader, an unclean election is not needed.
    rows = elect(
        cluster.bootstrap, "--election-type", "unclean", "--topic", "offline", "--partition", "0"
    )
    assert rows[0][2] == "not needed"


def test_unknown_partitions_fail_and_the_command_exits_1(cluster: ClusterProcesses) -> None:
    result = herdless(
        "cluster",
        "elect-leaders",
        "-b",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "no-such-topic",
        "--partition",
        "0",
    )
    refused(result, "1 partition could not be elected")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in result.stdout


def test_only_the_controller_elects_and_handles_controlled_shutdowns(
    cluster: ClusterProcesses,
) -> None:
    controller_id = cluster.metadata().controller_id
    other = next(i for i in cluster.brokers if i != controller_id)
    asked = ElectLeadersRequest[2](
        election_type=0,
        topic_partitions=[ElectLeadersRequest[2].TopicPartitions(topic="any", partitions=[0])],
        timeout_ms=1000,
    )
    wire = Wire(cluster.brokers[other])
    try:
        answer = wire.call(asked, ElectLeadersResponse)
        assert answer.replica_election_results[0].partition_result[0].error_code == (
            ErrorCode.NOT_CONTROLLER
        )
        shutdown = wire.call(
            ControlledShutdownRequest[3](broker_id=other, broker_epoch=-1),
            ControlledShutdownResponse,
        )
        assert shutdown.error_code == ErrorCode.NOT_CONTROLLER
    finally:
        wire.close()
    wire = Wire(cluster.brokers[controller_id])
    try:
        shutdown = wire.call(
            ControlledShutdownRequest[3](broker_id=99, broker_epoch=-1),
            ControlledShutdownResponse,
        )
        assert shutdown.error_code == ErrorCode.BROKER_NOT_AVAILABLE
        stale = wire.call(
            ControlledShutdownRequest[3](broker_id=other, broker_epoch=1),
            ControlledShutdownResponse,
        )
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    finally:
        wire.close()


def test_one_broker_alone_needs_no_election(broker: BrokerProcess) -> None:
    bootstrap = f"{broker.host}:{broker.port}"
    succeeded(herdless("topics", "create", "alone", "--partitions", "2", "-b", bootstrap))
    rows = elect(bootstrap, "--election-type", "preferred", "--topic", "alone", "--partition", "1")
    assert rows == [["alone", "1", "not needed", "0", "-"]]
    assert elect(bootstrap, "--election-type", "unclean", "--all-topic-partitions") == []
    missing = herdless(
        "cluster",
        "elect-leaders",
        "-b",
        bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "alone",
        "--partition",
        "7",
    )
    refused(missing, "could not be elected")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--all-topic-partitions"], "--election-type"),
        (["--election-type", "random", "--all-topic-partitions"], "preferred or unclean"),
        (["--election-type", "preferred"], "exactly one of"),
        (
            [
                "--election-type",
                "preferred",
                "--all-topic-partitions",
                "--topic",
                "t",
                "--partition",
                "0",
            ],
            "exactly one of",
        ),
        (["--election-type", "preferred", "--topic", "t"], "--topic and --partition"),
        (["--election-type", "preferred", "--topic", "t", "--partition", "-1"], "--partition"),
        (
            ["--election-type", "preferred", "--path-to-json-file", "/nonexistent.json"],
            "cannot read",
        ),
    ],
)
def test_bad_usage_exits_2_naming_the_problem(args: list[str], words: str) -> None:
    result = herdless("cluster", "elect-leaders", "-b", "127.0.0.1:1", *args)
    refused(result, words, code=2)


def test_a_json_file_not_in_the_tools_form_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "wrong.json"
    for document, words in [
        ("not json", "is not JSON"),
        ('{"partitions": []}', '{"partitions": [{"topic": T, "partition": P}'),
        ('{"partitions": [{"topic": "t"}]}', "partition entry 1 needs"),
        (
            '{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}',
            "given twice",
        ),
    ]:
        path.write_text(document)
        result = herdless(
            "cluster",
            "elect-leaders",
            "-b",
            "127.0.0.1:1",
            "--election-type",
            "preferred",
            "--path-to-json-file",
            str(path),
        )
        refused(result, words, code=2)
