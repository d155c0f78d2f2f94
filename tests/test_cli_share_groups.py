"""`herdless share-groups` against a real broker, as an operator uses it: list and
describe share groups (start offsets and lag, members and their assignments, state),
reset the start offsets (a dry run unless --execute, the group Empty), delete offsets
and groups; and `herdless groups list` naming share groups as such. Usage mistakes
exit 2, other failures 1, each with one line naming the problem."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded, table_rows
from tests.test_group_configs import alter
from tests.test_share_group_offsets import consume, join, leave

TOPIC = "jobs"
PARTITIONS = 2
RECORDS = 10
BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("cli-share-groups") / "data") as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": process.bootstrap})
        for p in range(PARTITIONS):
            for j in range(RECORDS):
                producer.produce(TOPIC, b"x", partition=p, timestamp=BASE_MS + j * 1000)
        assert producer.flush(30) == 0
        yield process


def share_groups(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return herdless("share-groups", *args, "-b", broker.bootstrap)


def consumed(broker: BrokerProcess, group: str) -> str:
    """A share group that has read and accepted every record, and is Empty."""
    assert alter(broker.bootstrap, group, share_auto_offset_reset="earliest") == "OK"
    consume(broker, group, RECORDS * PARTITIONS)
    return group


def test_list_and_describe_show_start_offsets_and_lag(broker: BrokerProcess) -> None:
    group = consumed(broker, "cli-shared")
    assert [group, "Empty", "0"] in table_rows(succeeded(share_groups(broker, "list")))
    # `groups list` names it a share group, not a Dead one.
    listed = table_rows(succeeded(herdless("groups", "list", "-b", broker.bootstrap)))
    assert [group, "Empty", "share", "0"] in listed
    rows = table_rows(succeeded(share_groups(broker, "describe", group)))
    # Nothing in flight nor archived: every record was accepted.
    assert rows == [[group, TOPIC, str(p), "10", "10", "0", "0", "0"] for p in range(PARTITIONS)]

    member_id, _ = join(broker, group)
    try:
        (member,) = table_rows(succeeded(share_groups(broker, "describe", group, "--members")))
        assert member[:2] == [group, member_id]
        assert member[4:] == ["2", f"{TOPIC}[0,1]"]
        (state,) = table_rows(succeeded(share_groups(broker, "describe", group, "--state")))
        assert (state[0], state[2], state[-1]) == (group, "Stable", "1")
        document = json.loads(succeeded(share_groups(broker, "describe", group, "-o", "json")))
        assert_documented("share-groups describe G", document)
        assert document[0]["offsets"][0]["consumer_ids"] == [member_id]
        # A group with members keeps its offsets.
        refused(
            share_groups(
                broker, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"
            ),
            "must be Empty",
        )
    finally:
        leave(broker, group, member_id)
    assert_documented(
        "share-groups list", json.loads(succeeded(share_groups(broker, "list", "-o", "json")))
    )


def test_reset_offsets_is_a_dry_run_unless_executed(broker: BrokerProcess) -> None:
    group = consumed(broker, "cli-rewound")
    planned = share_groups(broker, "reset-offsets", group, "--all-topics", "--to-earliest")
    assert table_rows(succeeded(planned)) == [
        [group, TOPIC, str(p), "10", "0"] for p in range(PARTITIONS)
    ]
    assert "dry run" in planned.stderr
    starts = [row[3] for row in table_rows(succeeded(share_groups(broker, "describe", group)))]
    assert starts == ["10", "10"]

    at = datetime.fromtimestamp((BASE_MS + 5000) / 1000, UTC).isoformat()
    executed = share_groups(
        broker, "reset-offsets", group, "--topic", f"{TOPIC}:0", "--to-datetime", at, "--execute"
    )
    assert table_rows(succeeded(executed)) == [[group, TOPIC, "0", "10", "5"]]
    document = json.loads(
        succeeded(
            share_groups(
                broker,
                "reset-offsets",
                group,
                "-t",
                f"{TOPIC}:1",
                "--to-offset",
                "99",
                "-o",
                "json",
            )
        )
    )
    assert_documented("share-groups reset-offsets G", document)
    assert document["partitions"][0]["new_start_offset"] == RECORDS  # clamped to the log end
    rows = table_rows(succeeded(share_groups(broker, "describe", group)))
    # The reset partition's state is read again at its next fetch: until then, no counts.
    assert rows == [
        [group, TOPIC, "0", "5", "10", "5", "-", "-"],
        [group, TOPIC, "1", "10", "10", "0", "0", "0"],
    ]
    # The next member receives the records from the new start again.
    assert sorted(consume(broker, group, 5)) == [(0, offset) for offset in range(5, 10)]


def test_delete_offsets_and_delete_groups(broker: BrokerProcess) -> None:
    group = consumed(broker, "cli-deleted")
    deleted = share_groups(broker, "delete-offsets", group, "--topic", TOPIC, "-o", "json")
    document = json.loads(succeeded(deleted))
    assert_documented("share-groups delete-offsets G", document)
    assert document == [{"topic": TOPIC, "error": None}]
    assert table_rows(succeeded(share_groups(broker, "describe", group))) == []

    assert "deleted share group" in succeeded(share_groups(broker, "delete", group))
    refused(share_groups(broker, "describe", group), f"share group '{group}' does not exist")
    refused(share_groups(broker, "delete", group), "does not exist")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["describe"], "name groups or give --all-groups"),
        (["describe", "g", "--members", "--state"], "at most one of"),
        (["reset-offsets", "g", "--all-topics"], "give exactly one of"),
        (["reset-offsets", "g", "--to-latest"], "--topic"),
        (["reset-offsets", "g", "-t", "x", "--to-latest", "--dry-run", "--execute"], "not both"),
        (["reset-offsets", "g", "-t", "x", "--to-datetime", "yesterday"], "ISO 8601"),
        (["delete-offsets", "g", "--topic", f"{TOPIC}:0"], "whole topics"),
    ],
)
def test_usage_mistakes_exit_2(broker: BrokerProcess, args: list[str], words: str) -> None:
    refused(share_groups(broker, *args), words, code=2)


def test_unknown_groups_and_topics_are_named(broker: BrokerProcess) -> None:
    refused(share_groups(broker, "describe", "nobody"), "share group 'nobody' does not exist")
    group = consumed(broker, "cli-unknown-topic")
    refused(
        share_groups(broker, "reset-offsets", group, "-t", "nowhere", "--to-latest"),
        "topic 'nowhere' does not exist",
    )
