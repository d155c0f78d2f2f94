"""`herdless groups` against a running broker, with real consumer groups.

Every number is checked exactly: the topic has 3 partitions of 10 records
each, and the groups commit known offsets.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.cli import herdless, table_rows
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


def succeeded(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert words in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_list_describe_lag_of_an_active_then_empty_group(broker: BrokerProcess, topic: str) -> None:
    group = "cli-orders"
    with ActiveMember(broker.bootstrap, group):
        listed = table_rows(succeeded(groups(broker, "list")))
        assert [group, "Stable", "consumer", "1"] in listed
        assert group in str(table_rows(succeeded(groups(broker, "list", "--state", "stable"))))
        assert group not in succeeded(groups(broker, "list", "--state", "Empty"))

        out = succeeded(groups(broker, "describe", group))
        assert f"group {group}  state Stable  protocol type consumer  assignor range" in out
        rows = table_rows(out)
        [member] = [r for r in rows if len(r) == 5]
        member_id, client_id, host, instance_id, partitions = member
        assert member_id.startswith(CLIENT_ID)
        assert (client_id, instance_id, partitions) == (CLIENT_ID, "-", f"{topic}[0,1,2]")
        assert host.endswith("127.0.0.1")
        owner = [member_id, host, CLIENT_ID]
        assert [r for r in rows if len(r) == 8] == [
            [topic, "0", "4", "10", "6", *owner],
            [topic, "1", "7", "10", "3", *owner],
            [topic, "2", "-", "10", "-", *owner],
        ]

        out = succeeded(groups(broker, "lag", group))
        assert table_rows(out) == [
            [topic, "0", "4", "10", "6"],
            [topic, "1", "7", "10", "3"],
            [topic, "2", "-", "10", "-"],
        ]
        assert "total lag 9 over 3 partitions; 1 without a committed offset" in out

        # A member could overwrite reset offsets at once, and deleting would drop
        # its offsets under it: both are refused while it is there.
        refused(
            groups(broker, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"),
            "the group must be inactive",
        )
        refused(groups(broker, "delete", group), "not empty")
        assert committed(broker.bootstrap, group) == {0: 4, 1: 7, 2: None}

    # The member closed cleanly (LeaveGroup): the group is empty at once.
    assert [group, "Empty", "consumer", "0"] in table_rows(succeeded(groups(broker, "list")))
    assert group not in succeeded(groups(broker, "list", "--state", "Stable"))

    out = succeeded(groups(broker, "describe", group))
    assert "has no active members" in out
    # Kafka's rows for an empty group: the committed partitions, nobody owning them.
    assert table_rows(out) == [
        [topic, "0", "4", "10", "6", "-", "-", "-"],
        [topic, "1", "7", "10", "3", "-", "-", "-"],
    ]
    out = succeeded(groups(broker, "lag", group))
    assert table_rows(out) == [[topic, "0", "4", "10", "6"], [topic, "1", "7", "10", "3"]]
    assert "total lag 9 over 2 partitions\n" in out


def test_reset_offsets_dry_run_changes_nothing(broker: BrokerProcess, topic: str) -> None:
    group = "cli-reset-dry"
    commit_standalone(broker.bootstrap, group, {0: 5, 1: 5})
    out = succeeded(groups(broker, "reset-offsets", group, "--topic", topic, "--to-earliest"))
    # Partition 2 has no committed offset: current '-', and it is planned all the same.
    assert table_rows(out) == [
        [topic, "0", "5", "0"],
        [topic, "1", "5", "0"],
        [topic, "2", "-", "0"],
    ]
    assert "dry run" in out
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
    ],
    ids=[
        "earliest",
        "latest",
        "offset",
        "offset-clamped",
        "shift-back-clamped",
        "shift-forward-clamped",
        "datetime",
        "datetime-after-last",
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
    out = succeeded(groups(broker, "reset-offsets", group, *map(str, args), "--execute"))
    assert table_rows(out) == [
        [topic, str(p), str(before.get(p, "-")), str(o)] for p, o in sorted(planned.items())
    ]
    assert f"committed new offsets for group {group}" in out
    # Only the named partitions change.
    after = {p: planned.get(p, before.get(p)) for p in range(PARTITIONS)}
    assert committed(broker.bootstrap, group) == after


def test_reset_offsets_refuses_what_it_cannot_do(broker: BrokerProcess, topic: str) -> None:
    group = "cli-reset-bad"
    commit_standalone(broker.bootstrap, group, {0: 5})
    reset = ("reset-offsets", group)
    refused(groups(broker, *reset, "--topic", topic), "give exactly one of")
    refused(groups(broker, *reset, "--topic", topic, "--to-earliest", "--to-latest"), "exactly one")
    refused(groups(broker, *reset, "--to-earliest"), "--all-topics")
    refused(groups(broker, *reset, "--topic", "no-such-topic", "--to-earliest"), "does not exist")
    refused(groups(broker, *reset, "--topic", f"{topic}:7", "--to-earliest"), "no partition 7")
    refused(groups(broker, *reset, "--topic", topic, "--to-datetime", "noon"), "ISO 8601")
    refused(groups(broker, *reset, "--topic", topic, "--shift-by", "1"), f"{topic}:1, {topic}:2")
    refused(
        groups(broker, "reset-offsets", "cli-never", "--all-topics", "--to-latest"), "no commit"
    )
    assert committed(broker.bootstrap, group) == {0: 5, 1: None, 2: None}


def test_delete_groups(broker: BrokerProcess, topic: str) -> None:
    commit_standalone(broker.bootstrap, "cli-del-a", {0: 1})
    commit_standalone(broker.bootstrap, "cli-del-b", {1: 2})
    out = succeeded(groups(broker, "delete", "cli-del-a", "cli-del-b"))
    assert "deleted group cli-del-a" in out and "deleted group cli-del-b" in out
    assert "cli-del-" not in succeeded(groups(broker, "list"))
    assert committed(broker.bootstrap, "cli-del-a") == {0: None, 1: None, 2: None}
    refused(groups(broker, "describe", "cli-del-a"), "consumer group 'cli-del-a' does not exist")
    refused(groups(broker, "lag", "cli-del-a"), "does not exist")

    # One unknown group fails alone; the others are still deleted.
    commit_standalone(broker.bootstrap, "cli-del-c", {0: 1})
    result = groups(broker, "delete", "cli-del-a", "cli-del-c")
    refused(result, "cannot delete group 'cli-del-a': the group does not exist")
    assert "deleted group cli-del-c" in result.stdout


def test_lag_watch_refreshes_until_interrupted(broker: BrokerProcess, topic: str) -> None:
    commit_standalone(broker.bootstrap, "cli-watch", {0: 8})
    process = subprocess.Popen(
        [sys.executable, "-m", "herdless", "groups", "lag", "cli-watch", "--watch", "0.2"]
        + ["--bootstrap-server", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        # A shell running tests in the background ignores SIGINT, and children
        # inherit that; Ctrl-C is what --watch is stopped with.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        totals = []
        for line in process.stdout:
            if line.startswith("total lag"):
                totals.append(line.strip())
                if len(totals) == 2:
                    break
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert totals == ["total lag 2 over 1 partition"] * 2
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
        ["history", "g"],
    ]
    # In parallel, in case the refused connection is not noticed at once.
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "herdless", "groups", *args, "-b", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        for args in commands
    ]
    for args, process in zip(commands, processes, strict=True):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 1, (args, out, err)
        assert f"no broker answers at {address}" in out, (args, out)
        assert "Traceback" not in out + err


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
    assert "no rebalance of group" in succeeded(groups(broker, "history", "never-seen"))
