"""A share group's offsets changed by an admin on a 3-broker cluster, where the group's
coordinator, the share coordinator and the partitions' leaders are different brokers:
a reset reaches the leaders, so the next member is delivered the records from the new
start; deleting the group deletes its share state wherever it is kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cli import herdless, succeeded
from tests.support.cluster import running_cluster
from tests.test_group_configs import alter
from tests.test_share_group_offsets import consume

TOPIC = "jobs"
GROUP = "cluster-workers"
PARTITIONS = 3
RECORDS = 5  # per partition


def describe(bootstrap: str) -> dict[int, Any]:
    shown = herdless("share-groups", "describe", GROUP, "-o", "json", "-b", bootstrap)
    (group,) = json.loads(succeeded(shown))
    return {row["partition"]: (row["start_offset"], row["lag"]) for row in group["offsets"]}


def test_reset_and_delete_reach_every_broker(tmp_path_factory: pytest.TempPathFactory) -> None:
    base: Path = tmp_path_factory.mktemp("share-offsets-cluster")
    with running_cluster(base, 3) as cluster:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for n in range(PARTITIONS * RECORDS):
            producer.produce(TOPIC, b"job", partition=n % PARTITIONS)
        assert producer.flush(30) == 0
        assert alter(bootstrap, GROUP, share_auto_offset_reset="earliest") == "OK"
        everything = sorted((p, o) for p in range(PARTITIONS) for o in range(RECORDS))

        assert sorted(consume(cluster, GROUP, PARTITIONS * RECORDS)) == everything
        assert describe(bootstrap) == {p: (RECORDS, 0) for p in range(PARTITIONS)}

        reset = herdless(
            "share-groups", "reset-offsets", GROUP, "--all-topics", "--to-earliest", "--execute",
            "-b", bootstrap,
        )  # fmt: skip
        succeeded(reset)
        assert describe(bootstrap) == {p: (0, RECORDS) for p in range(PARTITIONS)}
        # The leaders held the old start: the next member is delivered every record again.
        assert sorted(consume(cluster, GROUP, PARTITIONS * RECORDS)) == everything

        succeeded(herdless("share-groups", "delete", GROUP, "-b", bootstrap))
        # A group of the same name starts afresh (share.auto.offset.reset=earliest).
        assert sorted(consume(cluster, GROUP, PARTITIONS * RECORDS)) == everything
