"""The Prometheus endpoint of `herdless serve --metrics-port`: what a lag dashboard reads."""

from __future__ import annotations

import json
import os
import re
import resource
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.support.broker import BrokerProcess, free_port
from tests.support.members import wait_until

DASHBOARD = Path(__file__).parents[1] / "examples" / "grafana" / "herdless-groups.json"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    process = BrokerProcess(
        tmp_path_factory.mktemp("metrics") / "data",
        *("--metrics-port", str(port), "--set", "group.initial.rebalance.delay.ms=0"),
    ).start()
    yield process, port
    assert process.stop() == 0, process.log_tail()


def get(port: int, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def scrape(port: int) -> Samples:
    status, kind, body = get(port, "/metrics")
    assert status == 200 and kind.startswith("text/plain"), (status, kind)
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def fill(broker: BrokerProcess, topic: str, partitions: int, records: int) -> None:
    """A new topic with `records` records in each partition."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(partitions):
        for i in range(records):
            producer.produce(topic, b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_lag_members_and_requests_as_prometheus_reads_them(
    metered: tuple[BrokerProcess, int],
) -> None:
    broker, port = metered
    wait_until(lambda: _answers(port), 30, "the metrics endpoint answers", broker.log)
    fill(broker, "metered", 3, 10)

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "dashboard",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["metered"])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < 3 and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert len(consumer.assignment()) == 3
    consumer.commit(
        offsets=[TopicPartition("metered", 0, 10), TopicPartition("metered", 1, 4)],
        asynchronous=False,
    )

    samples = scrape(port)
    group = {"group": "dashboard"}
    assert value(samples, "herdless_group_members", **group) == 1
    assert value(samples, "herdless_group_state", **group, state="Stable") == 1
    assert value(samples, "herdless_group_state", **group, state="Empty") == 0
    assert value(samples, "herdless_group_generation", **group) == 1
    lag = {p: value(samples, "herdless_group_lag", **group, topic="metered", partition=p)
           for p in ("0", "1", "2")}  # fmt: skip
    assert lag == {"0": 0, "1": 6, "2": None}  # partition 2 has no commit yet
    assert value(samples, "herdless_group_lag_sum", **group, topic="metered") == 6
    committed = value(
        samples, "herdless_group_committed_offset", **group, topic="metered", partition="1"
    )
    assert committed == 4
    assert value(samples, "herdless_group_rebalances_total", **group, cause="member joined") == 1
    for p in ("0", "1", "2"):
        labels = {"topic": "metered", "partition": p}
        assert value(samples, "herdless_partition_log_end_offset", **labels) == 10
        assert value(samples, "herdless_partition_log_start_offset", **labels) == 0
        assert value(samples, "herdless_partition_size_bytes", **labels) > 0
    assert value(samples, "herdless_request_seconds_count", api="Produce") >= 1
    assert value(samples, "herdless_request_seconds_count", api="OffsetCommit") >= 1
    assert value(samples, "herdless_coordinator_shards_loading") == 0
    # The broker raises its soft file limit to the hard one it inherits from here.
    assert value(samples, "process_max_fds") == resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert broker.process is not None
    open_fds = len(os.listdir(f"/proc/{broker.process.pid}/fd"))
    assert abs(value(samples, "process_open_fds") - open_fds) <= 5

    consumer.close()  # leaves the group
    samples = scrape(port)
    assert value(samples, "herdless_group_members", **group) == 0
    assert value(samples, "herdless_group_state", **group, state="Empty") == 1
    # The commits stay, and so does the lag they define.
    assert value(samples, "herdless_group_lag_sum", **group, topic="metered") == 6


def test_a_consumer_groups_lag_members_and_state(metered: tuple[BrokerProcess, int]) -> None:
    """A KIP-848 group (group.protocol=consumer) is on the dashboard as any other."""
    broker, port = metered
    wait_until(lambda: _answers(port), 30, "the metrics endpoint answers", broker.log)
    fill(broker, "metered848", 2, 5)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "dashboard848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["metered848"])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert len(consumer.assignment()) == 2
    consumer.commit(offsets=[TopicPartition("metered848", 0, 2)], asynchronous=False)
    group = {"group": "dashboard848"}

    def stable() -> bool:
        return value(scrape(port), "herdless_group_state", **group, state="Stable") == 1

    wait_until(stable, 30, "the group is Stable", broker.log)
    samples = scrape(port)
    assert value(samples, "herdless_group_members", **group) == 1
    assert value(samples, "herdless_group_state", **group, state="Reconciling") == 0
    assert value(samples, "herdless_group_generation", **group) == 1  # the group epoch
    assert value(samples, "herdless_group_lag", **group, topic="metered848", partition="0") == 3
    consumer.close()


def _answers(port: int) -> bool:
    try:
        return get(port, "/metrics")[0] == 200
    except OSError:
        return False


def test_other_paths_and_garbage_get_http_errors(metered: tuple[BrokerProcess, int]) -> None:
    broker, port = metered
    wait_until(lambda: _answers(port), 30, "the metrics endpoint answers", broker.log)
    assert get(port, "/nope")[0] == 404
    for garbage in (b"\x00\x01\x02\x03\r\n\r\n", b"POST /metrics HTTP/1.1\r\n\r\n", b"x" * 70_000):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            answer = sock.recv(100)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 405"), answer
    assert _answers(port)
    assert broker.alive()


def test_lag_per_topic_only_when_partitions_would_be_too_many(tmp_path: Path) -> None:
    port = free_port()
    process = BrokerProcess(
        tmp_path / "data",
        *("--metrics-port", str(port), "--set", "metrics.lag.per.partition=false"),
    ).start()
    try:
        wait_until(lambda: _answers(port), 30, "the metrics endpoint answers", process.log)
        producer = Producer({"bootstrap.servers": process.bootstrap})
        for i in range(5):
            producer.produce("few-series", b"%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": "coarse"})
        consumer.commit(offsets=[TopicPartition("few-series", 0, 2)], asynchronous=False)
        consumer.close()
        samples = scrape(port)
        assert value(samples, "herdless_group_lag_sum", group="coarse", topic="few-series") == 3
        names = {name for name, _ in samples}
        assert "herdless_group_lag" not in names
        assert "herdless_group_committed_offset" not in names
    finally:
        assert process.stop() == 0, process.log_tail()


def test_the_grafana_dashboard_queries_only_exported_metrics(
    metered: tuple[BrokerProcess, int],
) -> None:
    broker, port = metered
    wait_until(lambda: _answers(port), 30, "the metrics endpoint answers", broker.log)
    # Make sure every family has samples: a group with a commit, a request, a rebalance.
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("plotted", b"x")  # creates the topic
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "plotted"})
    consumer.subscribe(["plotted"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition("plotted", 0, 0)], asynchronous=False)
    exported = {name for name, _ in scrape(port)}
    consumer.close()
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = {name for query in queries for name in re.findall(r"herdless_[a-z_]+", query)}
    assert len(used) >= 6
    assert used <= exported, f"the dashboard queries metrics nobody exports: {used - exported}"


def test_transactions_as_prometheus_reads_them(metered: tuple[BrokerProcess, int]) -> None:
    """An open transaction shows in the state gauge, the oldest age and the last stable
    offset's lag; ending it counts it, and times its markers; a second producer with
    the same transactional id counts a fence, and a forgotten transaction a timeout."""
    broker, port = metered
    wait_until(lambda: _answers(port), 30, "the metrics endpoint answers", broker.log)
    fill(broker, "metered-txn", 2, 0)

    def count(name: str, **labels: str) -> float:
        return value(scrape(port), name, **labels) or 0.0

    def states(state: str) -> float:
        samples = scrape(port)
        return sum(
            v
            for (name, labels), v in samples.items()
            if name == "herdless_transactions" and ("state", state) in labels
        )

    committed = count("herdless_transactions_ended_total", result="committed")
    aborted = count("herdless_transactions_ended_total", result="aborted")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("metered-txn", b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    open_partition = {"topic": "metered-txn", "partition": "0"}
    samples = scrape(port)
    assert value(samples, "herdless_partition_last_stable_offset_lag", **open_partition) == 3
    assert value(samples, "herdless_partition_last_stable_offset_lag", topic="metered-txn",
                 partition="1") is None  # fmt: skip
    assert states("Ongoing") == 1
    time.sleep(0.2)
    assert count("herdless_transaction_oldest_open_seconds") >= 0.2

    producer.commit_transaction(30)
    wait_until(
        lambda: count("herdless_transactions_ended_total", result="committed") == committed + 1,
        30,
        "the commit counted",
        broker.log,
    )
    samples = scrape(port)
    assert value(samples, "herdless_partition_last_stable_offset_lag", **open_partition) is None
    assert value(samples, "herdless_transaction_oldest_open_seconds") == 0
    assert states("Ongoing") == 0 and states("CompleteCommit") == 1
    assert value(samples, "herdless_transaction_marker_write_seconds_count") == 1

    # A new producer with the id fences the old one and aborts its open transaction.
    producer.begin_transaction()
    producer.produce("metered-txn", b"zombie", partition=1)
    assert producer.flush(30) == 0
    Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "metered-1"}
    ).init_transactions(30)
    assert count("herdless_transaction_producers_fenced_total") == 1
    wait_until(
        lambda: count("herdless_transactions_ended_total", result="aborted") == aborted + 1,
        30,
        "the fenced transaction's abort counted",
        broker.log,
    )

    forgotten = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "metered-2",
            "transaction.timeout.ms": 1000,
        }
    )
    forgotten.init_transactions(30)
    forgotten.begin_transaction()
    forgotten.produce("metered-txn", b"forgotten", partition=1)
    assert forgotten.flush(30) == 0
    wait_until(
        lambda: count("herdless_transactions_timed_out_total") == 1,
        30,
        "the timeout counted",
        broker.log,
    )
    assert count("herdless_transactions_ended_total", result="aborted") == aborted + 2
