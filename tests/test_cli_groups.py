"""`herdless groups` against a running broker, with real consumer groups.

Every number is checked exactly: the topic has 3 partitions of 10 records
each, and the groups commit known offsets.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from herdless.cli.reset_offsets import parse_duration_ms
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.cli import herdless, refused, sigint_as_in_a_terminal, succeeded, table_rows
from tests.support.kafka_python import subscribe_safely

TOPIC = "cli-groups-events"
PARTITIONS = 3
RECORDS_PER_PARTITION = 10
CLIENT_ID = "cli-groups-test"
# Record j of every partition is stamped BASE_MS + j seconds. An hour ago, so that
# nothing is in the future and nothing is near the 7-day retention.
BASE_MS = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The conftest broker, except that a group's first join is not held back the 3 s
    of Kafka's default initial rebalance delay (design: 0 in tests)."""
    data = tmp_path_factory.mktemp("cli-groups") / "data"
    with module_broker(data, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(PARTITIONS):
        for j in range(RECORDS_PER_PARTITION):
            producer.produce(TOPIC, value=b"x", partition=p, timestamp=BASE_MS + j * 1000)
    assert producer.flush(30) == 0
    return TOPIC


def commit_standalone(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit offsets for a group without joining it (generation -1), as tools do."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        errors = admin.alter_group_offsets(
            group,
            {TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", None) for p, o in offsets.items()},
        )
    finally:
        admin.close()
    assert all(e.errno == 0 for e in errors.values()), errors


def committed(bootstrap: str, group: str) -> dict[int, int | None]:
    """The group's committed offsets as a consumer of it reads them."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()


class ActiveMember:
    """A subscribed consumer that commits 4 and 7 on partitions 0 and 1, none on 2,
    and keeps polling in its own thread (kafka-python consumers are not thread-safe,
    so the thread owns it) until stopped; stop() closes it, which leaves the group."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ActiveMember:
        self.thread.start()
        if not self.ready.wait(30):
            self.stop()
            raise AssertionError(f"the consumer did not join in 30 s: {self.error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                client_id=CLIENT_ID,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=6000,  # the broker's minimum
                heartbeat_interval_ms=1000,
            )
            try:
                subscribe_safely(consumer, [TOPIC])
                while not consumer.assignment():
                    consumer.poll(100)
                consumer.commit(
                    {
                        TopicPartition(TOPIC, 0): OffsetAndMetadata(4, "", -1),
                        TopicPartition(TOPIC, 1): OffsetAndMetadata(7, "", -1),
                    }
                )
                self.ready.set()
                while not self.stopping.is_set():
                    consumer.poll(100)
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc


def groups(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return herdless("groups", *args, "--bootstrap-server", broker.bootstrap)


def test_list_describe_lag_of_an_active_then_empty_group(broker: BrokerProcess, topic: str) -> None:
    group = "cli-orders"
    with ActiveMember(broker.bootstrap, group):
        listed = table_rows(succeeded(groups(broker, "list")))
        assert [group, "Stable", "consumer", "1"] in listed
        assert group in succeeded(groups(broker, "list", "--state", "stable"))
        assert group not in succeeded(groups(broker, "list", "--state", "Empty"))

        [member] = table_rows(succeeded(groups(broker, "describe", group, "--members")))
        _, member_id, instance_id, host, client_id, count, assignment = member
        assert member_id.startswith(CLIENT_ID)
        assert host.endswith("127.0.0.1")
        assert member == [group, member_id, "-", host, CLIENT_ID, "3", f"{topic}[0,1,2]"]
        assert (instance_id, client_id, count) == ("-", CLIENT_ID, "3")

        state = succeeded(groups(broker, "describe", group, "--state"))
        assert table_rows(state) == [[group, f"{broker.bootstrap} (0)", "range", "Stable", "1"]]

        # Kafka's columns, GROUP first; a partition with no committed offset counts
        # its lag from the log start offset, and the output says so.
        described = groups(broker, "describe", group)
        owner = [member_id, host, CLIENT_ID]
        assert table_rows(succeeded(described)) == [
            [group, topic, "0", "4", "10", "6", *owner],
            [group, topic, "1", "7", "10", "3", *owner],
            [group, topic, "2", "-", "10", "10", *owner],
        ]
        assert "1 partition has no committed offset: lag counted from the log start offset" in (
            described.stderr
        )
        lagging = groups(broker, "lag", group)
        assert table_rows(succeeded(lagging)) == [
            [topic, "0", "4", "10", "6"],
            [topic, "1", "7", "10", "3"],
            [topic, "2", "-", "10", "10"],
        ]
        assert "total lag 19 over 3 partitions" in lagging.stderr
        lag_json = json.loads(succeeded(groups(broker, "lag", group, "-o", "json")))
        assert (lag_json["total_lag"], lag_json["partitions_without_commit"]) == (19, 1)
        assert lag_json["partitions"][2] == {
            "topic": topic,
            "partition": 2,
            "current_offset": None,
            "log_start_offset": 0,
            "log_end_offset": 10,
            "lag": 10,
            "consumer_id": member_id,
            "host": host,
            "client_id": CLIENT_ID,
        }

        # A member could overwrite reset offsets at once, and deleting would drop
        # its offsets under it: both are refused while it is there.
        refused(
            groups(broker, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"),
            "the group must be inactive",
        )
        refused(groups(broker, "delete", group), "not empty")
        refused(groups(broker, "delete-offsets", group, "--topic", topic), "not deleted")
        assert committed(broker.bootstrap, group) == {0: 4, 1: 7, 2: None}

    # The member closed cleanly (LeaveGroup): the group is empty at once.
    assert [group, "Empty", "consumer", "0"] in table_rows(succeeded(groups(broker, "list")))
    assert group not in succeeded(groups(broker, "list", "--state", "Stable"))

    described = groups(broker, "describe", group)
    assert f"consumer group '{group}' has no active members" in described.stderr
    # Kafka's rows for an empty group: the committed partitions, nobody owning them.
    assert table_rows(succeeded(described)) == [
        [group, topic, "0", "4", "10", "6", "-", "-", "-"],
        [group, topic, "1", "7", "10", "3", "-", "-", "-"],
    ]
    lagging = groups(broker, "lag", group)
    assert table_rows(succeeded(lagging)) == [
        [topic, "0", "4", "10", "6"],
        [topic, "1", "7", "10", "3"],
    ]
    assert "total lag 9 over 2 partitions\n" in lagging.stderr
    assert "no committed offset" not in lagging.stderr


def test_describe_all_groups_and_json(broker: BrokerProcess, topic: str) -> None:
    commit_standalone(broker.bootstrap, "cli-all-a", {0: 1})
    commit_standalone(broker.bootstrap, "cli-all-b", {1: 2})
    rows = table_rows(succeeded(groups(broker, "describe", "--all-groups")))
    assert [r[:3] for r in rows if r[0].startswith("cli-all-")] == [
        ["cli-all-a", topic, "0"],
        ["cli-all-b", topic, "1"],
    ]
    [described] = json.loads(succeeded(groups(broker, "describe", "cli-all-a", "-o", "json")))
    assert {k: described[k] for k in ("group", "state", "members", "total_lag")} == {
        "group": "cli-all-a",
        "state": "Empty",
        "members": [],
        "total_lag": 9,
    }
    assert described["coordinator"] == f"{broker.bootstrap} (0)"
    assert [(o["partition"], o["current_offset"]) for o in described["offsets"]] == [(0, 1)]
    refused(groups(broker, "describe"), "--all-groups", 2)
    refused(groups(broker, "describe", "cli-all-a", "--members", "--state"), "at most one", 2)
    refused(groups(broker, "describe", "cli-all-a", "cli-nobody"), "'cli-nobody' does not exist")


def test_delete_offsets(broker: BrokerProcess, topic: str) -> None:
    group = "cli-forget"
    commit_standalone(broker.bootstrap, group, {0: 1, 1: 2, 2: 3})
    out = succeeded(groups(broker, "delete-offsets", group, "--topic", f"{topic}:0"))
    assert table_rows(out) == [[topic, "0", "deleted"]]
    assert committed(broker.bootstrap, group) == {0: None, 1: 2, 2: 3}
    out = succeeded(groups(broker, "delete-offsets", group, "--topic", topic, "-o", "json"))
    assert json.loads(out) == [{"topic": topic, "partition": p, "error": None} for p in (1, 2)]
    assert committed(broker.bootstrap, group) == {0: None, 1: None, 2: None}
    refused(groups(broker, "delete-offsets", group, "--topic", topic), "no committed offsets")


def test_reset_offsets_dry_run_changes_nothing(broker: BrokerProcess, topic: str) -> None:
    group = "cli-reset-dry"
    commit_standalone(broker.bootstrap, group, {0: 5, 1: 5})
    result = groups(broker, "reset-offsets", group, "--topic", topic, "--to-earliest")
    # Partition 2 has no committed offset: current '-', and it is planned all the same.
    assert table_rows(succeeded(result)) == [
        [group, topic, "0", "5", "0"],
        [group, topic, "1", "5", "0"],
        [group, topic, "2", "-", "0"],
    ]
    assert "dry run" in result.stderr
    assert committed(broker.bootstrap, group) == {0: 5, 1: 5, 2: None}


@pytest.mark.parametrize(
    ("args", "before", "planned"),
    [
        (["--topic", f"{TOPIC}:0", "--to-earliest"], {0: 5, 1: 5, 2: 5}, {0: 0}),
        (["--topic", f"{TOPIC}:1,2", "--to-latest"], {0: 5, 1: 5, 2: 5}, {1: 10, 2: 10}),
        (["--all-topics", "--to-offset", "3"], {0: 5, 1: 5}, {0: 3, 1: 3}),
        # Clamped into [log start, log end].
        (["--topic", TOPIC, "--to-offset", "99"], {0: 5}, {0: 10, 1: 10, 2: 10}),
        (["--all-topics", "--shift-by", "-2"], {0: 1, 1: 5, 2: 9}, {0: 0, 1: 3, 2: 7}),
        (["--all-topics", "--shift-by", "4"], {0: 1, 1: 5, 2: 9}, {0: 5, 1: 9, 2: 10}),
        # The committed offset; log end where there is none, as Kafka's tool plans it.
        (["--topic", TOPIC, "--to-current"], {0: 4}, {0: 4, 1: 10, 2: 10}),
        # The first record stamped at or after the time; none after it means log end.
        (
            ["--topic", TOPIC, "--to-datetime", datetime.fromtimestamp(BASE_MS / 1000 + 4.5, UTC)],
            {0: 9},
            {0: 5, 1: 5, 2: 5},
        ),
        (
            ["--topic", f"{TOPIC}:0", "--to-datetime", "2999-01-01T00:00:00+00:00"],
            {0: 1},
            {0: 10},
        ),
        # Records are an hour old: a week ago is before them all, a minute ago after.
        (["--topic", f"{TOPIC}:0", "--by-duration", "P7D"], {0: 9}, {0: 0}),
        (["--topic", f"{TOPIC}:0", "--by-duration", "PT1M"], {0: 1}, {0: 10}),
    ],
    ids=[
        "earliest",
        "latest",
        "offset",
        "offset-clamped",
        "shift-back-clamped",
        "shift-forward-clamped",
        "current",
        "datetime",
        "datetime-after-last",
        "duration-before-all",
        "duration-after-all",
    ],
)
def test_reset_offsets_execute(
    broker: BrokerProcess,
    topic: str,
    request: pytest.FixtureRequest,
    args: list[object],
    before: dict[int, int],
    planned: dict[int, int],
) -> None:
    group = f"cli-reset-{request.node.callspec.id}"
    commit_standalone(broker.bootstrap, group, before)
    result = groups(broker, "reset-offsets", group, *map(str, args), "--execute")
    assert table_rows(succeeded(result)) == [
        [group, topic, str(p), str(before.get(p, "-")), str(o)] for p, o in sorted(planned.items())
    ]
    assert f"committed new offsets for group {group}" in result.stderr
    # Only the named partitions change.
    after = {p: planned.get(p, before.get(p)) for p in range(PARTITIONS)}
    assert committed(broker.bootstrap, group) == after


def test_reset_offsets_warns_when_it_clamps(broker: BrokerProcess, topic: str) -> None:
    commit_standalone(broker.bootstrap, "cli-clamp", {0: 5, 1: 5})
    result = groups(broker, "reset-offsets", "cli-clamp", "--all-topics", "--shift-by", "7")
    assert table_rows(succeeded(result)) == [
        ["cli-clamp", topic, "0", "5", "10"],
        ["cli-clamp", topic, "1", "5", "10"],
    ]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: new offset 12 of {topic}:{p} is past its log end offset; using 10"
        for p in (0, 1)
    ]


def test_reset_offsets_export_then_from_file(
    broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    group = "cli-plan"
    commit_standalone(broker.bootstrap, group, {0: 2, 1: 2, 2: 2})
    exported = groups(broker, "reset-offsets", group, "--all-topics", "--shift-by", "3", "--export")
    # Kafka's CSV for one group: topic,partition,offset, nothing else on stdout.
    assert succeeded(exported) == "".join(f"{topic},{p},5\n" for p in range(PARTITIONS))
    assert committed(broker.bootstrap, group) == {0: 2, 1: 2, 2: 2}

    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,7\n{topic},2,99\n\n")
    result = groups(broker, "reset-offsets", group, "--from-file", str(plan), "--execute")
    assert table_rows(succeeded(result)) == [
        [group, topic, "0", "2", "7"],
        [group, topic, "2", "2", "10"],
    ]
    assert f"warning: new offset 99 of {topic}:2 is past its log end offset" in result.stderr
    assert committed(broker.bootstrap, group) == {0: 7, 1: 2, 2: 10}

    # Kafka's form for several groups: the lines of other groups are left alone.
    plan.write_text(f"other,{topic},1,1\n{group},{topic},1,4\n")
    succeeded(groups(broker, "reset-offsets", group, "--from-file", str(plan), "--execute"))
    assert committed(broker.bootstrap, group) == {0: 7, 1: 4, 2: 10}

    plan.write_text(f"{topic},0,7\n{topic},one,2\n")
    refused(groups(broker, "reset-offsets", group, "--from-file", str(plan)), f"{plan}:2", 2)
    refused(
        groups(broker, "reset-offsets", group, "--from-file", str(plan), "--all-topics"),
        "--from-file names its partitions",
        code=2,
    )


def test_reset_offsets_refuses_what_it_cannot_do(broker: BrokerProcess, topic: str) -> None:
    group = "cli-reset-bad"
    commit_standalone(broker.bootstrap, group, {0: 5})
    reset = ("reset-offsets", group)
    refused(groups(broker, *reset, "--topic", topic), "give exactly one of", 2)
    refused(groups(broker, *reset, "--topic", topic, "--to-earliest", "--to-latest"), "exactly", 2)
    refused(groups(broker, *reset, "--to-earliest"), "--all-topics", 2)
    refused(groups(broker, *reset, "--topic", "no-such-topic", "--to-earliest"), "does not exist")
    refused(groups(broker, *reset, "--topic", f"{topic}:7", "--to-earliest"), "no partition 7")
    refused(groups(broker, *reset, "--topic", topic, "--to-datetime", "noon"), "ISO 8601", 2)
    refused(groups(broker, *reset, "--topic", topic, "--by-duration", "1h"), "ISO 8601 duration", 2)
    refused(groups(broker, *reset, "--topic", topic, "--shift-by", "1"), f"{topic}:1, {topic}:2")
    refused(
        groups(broker, "reset-offsets", "cli-never", "--all-topics", "--to-latest"), "no commit"
    )
    assert committed(broker.bootstrap, group) == {0: 5, 1: None, 2: None}


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("P1D", 86_400_000),
        ("P1DT2H30M5.5S", ((26 * 60 + 30) * 60 + 5) * 1000 + 500),
        ("pt0.001s", 1),
        ("PT90M", 5_400_000),
    ],
)
def test_durations_read_as_java_reads_them(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1H", "PT1H30", "P1W", ""])
def test_durations_java_refuses_are_refused(text: str) -> None:
    with pytest.raises(typer.Exit):
        parse_duration_ms(text)


def test_delete_groups(broker: BrokerProcess, topic: str) -> None:
    commit_standalone(broker.bootstrap, "cli-del-a", {0: 1})
    commit_standalone(broker.bootstrap, "cli-del-b", {1: 2})
    out = succeeded(groups(broker, "delete", "cli-del-a", "cli-del-b"))
    assert out == "deleted group cli-del-a\ndeleted group cli-del-b\n"
    assert "cli-del-" not in succeeded(groups(broker, "list"))
    assert committed(broker.bootstrap, "cli-del-a") == {0: None, 1: None, 2: None}
    refused(groups(broker, "describe", "cli-del-a"), "consumer group 'cli-del-a' does not exist")
    refused(groups(broker, "lag", "cli-del-a"), "does not exist")

    # One unknown group fails alone; the others are still deleted.
    commit_standalone(broker.bootstrap, "cli-del-c", {0: 1})
    result = groups(broker, "delete", "cli-del-a", "cli-del-c")
    refused(result, "cannot delete group 'cli-del-a': the group does not exist")
    assert result.stdout == "deleted group cli-del-c\n"


def test_lag_watch_refreshes_until_interrupted(broker: BrokerProcess, topic: str) -> None:
    commit_standalone(broker.bootstrap, "cli-watch", {0: 8})
    process = subprocess.Popen(
        [sys.executable, "-m", "herdless", "groups", "lag", "cli-watch", "--watch", "0.2"]
        + ["-o", "json", "--bootstrap-server", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,  # Ctrl-C is what --watch is stopped with
    )
    try:
        assert process.stdout is not None
        # One JSON document a line, one line a refresh.
        totals = [json.loads(process.stdout.readline())["total_lag"] for _ in range(2)]
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert totals == [2, 2]
    assert process.returncode == 0, err
    assert "Traceback" not in err


def test_every_command_names_an_unreachable_broker() -> None:
    address = f"127.0.0.1:{free_port()}"
    commands = [
        ["list"],
        ["describe", "g"],
        ["lag", "g"],
        ["reset-offsets", "g", "--all-topics", "--to-earliest", "--execute"],
        ["delete", "g"],
        ["delete-offsets", "g", "--topic", "t"],
        ["history", "g"],
    ]
    # In parallel, in case the refused connection is not noticed at once.
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "herdless", "groups", *args, "-b", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    for args, process in zip(commands, processes, strict=True):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 1, (args, out, err)
        assert err == f"error: no broker answers at {address}\n", (args, err)
        assert out == ""


def test_history_shows_why_and_when_the_group_rebalanced(broker: BrokerProcess, topic: str) -> None:
    with ActiveMember(broker.bootstrap, "chronicled"):
        pass  # joins (generation 1), then leaves cleanly: the group empties
    deadline = time.monotonic() + 20
    rows: list[list[str]] = []
    while not (rows and rows[-1][1] == "member left") and time.monotonic() < deadline:
        rows = table_rows(succeeded(groups(broker, "history", "chronicled")))
    # kafka-python's leader may rejoin once in between (it rechecks its metadata).
    assert (rows[0][1], rows[0][2], rows[0][4]) == ("member joined", "0 → 1", "0 → 1"), rows
    assert (rows[-1][1], rows[-1][4]) == ("member left", "1 → 0"), rows
    generations = [tuple(int(g) for g in row[2].split(" → ")) for row in rows]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(generations)), generations
    assert all(row[3].endswith(" s") for row in rows)
    entries = json.loads(succeeded(groups(broker, "history", "chronicled", "-o", "json")))
    assert entries[-1]["cause"] == "member left" and entries[-1]["members_after"] == []
    never = groups(broker, "history", "never-seen")
    assert "no rebalance of group never-seen" in never.stderr
    assert table_rows(succeeded(never)) == []
