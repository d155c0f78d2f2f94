"""`herdless produce` and `herdless consume` against a running broker: what kcat and
rpk users do first, with nothing else installed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import herdless, refused, succeeded

# Records of the stamped topic are BASE_MS + offset seconds: an hour ago.
BASE_MS = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("cli-records") / "data"
    with module_broker(data, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process


def create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    succeeded(herdless("topics", "create", topic, "-p", str(partitions), "-b", broker.bootstrap))


def test_produce_keys_headers_and_partition_then_consume_with_a_format(
    broker: BrokerProcess,
) -> None:
    create(broker, "rec-lines", 2)
    lines = "user1\tpage=/home\nuser2\tpage=/cart=1\nno key here\n\n"
    produced = herdless(
        "produce", "rec-lines", "--key-separator", "\\t", "-H", "src=cli", "-H", "v=2",
        "--partition", "1", "-b", broker.bootstrap, input=lines,
    )  # fmt: skip
    assert succeeded(produced) == ""
    assert "produced 4 records to rec-lines" in produced.stderr

    fmt = "%t|%p|%o|%k|%K|%s|%S|%h|%%\\n"
    out = succeeded(herdless("consume", "rec-lines", "-e", "-f", fmt, "-b", broker.bootstrap))
    assert out.splitlines() == [
        "rec-lines|1|0|user1|5|page=/home|10|src=cli,v=2|%",
        "rec-lines|1|1|user2|5|page=/cart=1|12|src=cli,v=2|%",
        "rec-lines|1|2||-1|no key here|11|src=cli,v=2|%",  # no separator: no key, as kcat
        "rec-lines|1|3||-1||0|src=cli,v=2|%",  # an empty line is an empty record
    ]
    # The default format is the value alone, a line each.
    only = herdless("consume", "rec-lines", "-n", "2", "-b", broker.bootstrap)
    assert succeeded(only) == "page=/home\npage=/cart=1\n"

    [first] = [
        json.loads(line)
        for line in succeeded(
            herdless("consume", "rec-lines", "-n", "1", "-o", "json", "-b", broker.bootstrap)
        ).splitlines()
    ]
    assert first["timestamp"] > 0
    assert first | {"timestamp": 0} == {
        "topic": "rec-lines",
        "partition": 1,
        "offset": 0,
        "timestamp": 0,
        "key": "user1",
        "value": "page=/home",
        "headers": [{"key": "src", "value": "cli"}, {"key": "v", "value": "2"}],
    }


def test_produce_by_key_spreads_over_partitions(broker: BrokerProcess) -> None:
    create(broker, "rec-keys", 3)
    lines = "".join(f"k{i}:v{i}\n" for i in range(60))
    succeeded(herdless("produce", "rec-keys", "-K", ":", "-b", broker.bootstrap, input=lines))
    out = succeeded(herdless("consume", "rec-keys", "-e", "-f", "%p %k\\n", "-b", broker.bootstrap))
    partition_of: dict[str, set[str]] = {}
    for line in out.splitlines():
        partition, key = line.split()
        partition_of.setdefault(key, set()).add(partition)
    assert len(partition_of) == 60 and all(len(p) == 1 for p in partition_of.values())
    assert len({p for ps in partition_of.values() for p in ps}) == 3


@pytest.fixture(scope="module")
def stamped(broker: BrokerProcess) -> str:
    """2 partitions of 10 records; record j is stamped BASE_MS + j s."""
    create(broker, "rec-stamped", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in range(2):
        for j in range(10):
            producer.produce(
                "rec-stamped", value=f"{p}-{j}".encode(), partition=p, timestamp=BASE_MS + j * 1000
            )
    assert producer.flush(30) == 0
    return "rec-stamped"


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("beginning", [f"{p}-{j}" for p in range(2) for j in range(10)]),
        ("end", []),
        ("7", [f"{p}-{j}" for p in range(2) for j in range(7, 10)]),
        ("-3", [f"{p}-{j}" for p in range(2) for j in range(7, 10)]),
        ("-25", [f"{p}-{j}" for p in range(2) for j in range(10)]),
        (f"@{BASE_MS + 7500}", [f"{p}-{j}" for p in range(2) for j in range(8, 10)]),
        (f"@{BASE_MS + 3_600_000}", []),
    ],
    ids=["beginning", "end", "offset", "last-3", "last-25", "timestamp", "timestamp-after-last"],
)
def test_consume_from(broker: BrokerProcess, stamped: str, start: str, expected: list[str]) -> None:
    out = succeeded(herdless("consume", stamped, "--from", start, "-e", "-b", broker.bootstrap))
    assert sorted(out.splitlines()) == expected


def test_consume_from_past_the_end_warns_and_reads_from_the_end(
    broker: BrokerProcess, stamped: str
) -> None:
    result = herdless("consume", stamped, "--from", "25", "-p", "1", "-e", "-b", broker.bootstrap)
    assert succeeded(result) == ""
    assert "warning: partition 1 of rec-stamped holds offsets 0 to 10; reading from 10" in (
        result.stderr
    )


def test_consume_count_and_partition(broker: BrokerProcess, stamped: str) -> None:
    args = ("-p", "1", "-n", "3", "-f", "%p:%o %s %T\\n", "-b", broker.bootstrap)
    out = succeeded(herdless("consume", stamped, *args))
    assert out.splitlines() == [f"1:{j} 1-{j} {BASE_MS + j * 1000}" for j in range(3)]


def test_consume_as_a_group_commits_what_it_printed(broker: BrokerProcess, stamped: str) -> None:
    args = ("--group", "rec-readers", "-b", broker.bootstrap)
    out = succeeded(herdless("consume", stamped, "-e", *args))
    assert len(out.splitlines()) == 20
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({"rec-readers": None})["rec-readers"]
    finally:
        admin.close()
    assert {tp.partition: oam.offset for tp, oam in offsets.items()} == {0: 10, 1: 10}
    # Read again as the group: nothing is left.
    assert succeeded(herdless("consume", stamped, "-e", *args)) == ""
    # Without a group nothing is committed, and no group is left behind.
    succeeded(herdless("consume", stamped, "-n", "1", "-b", broker.bootstrap))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="herdless-cli-consume")
    try:
        assert consumer.committed(TopicPartition(stamped, 0)) is None
    finally:
        consumer.close()


def test_produce_and_consume_refuse_what_they_cannot_do(
    broker: BrokerProcess, stamped: str
) -> None:
    b = ("-b", broker.bootstrap)
    refused(herdless("produce", stamped, "-p", "5", *b, input="x\n"), "has no partition 5")
    refused(herdless("produce", stamped, "-H", "novalue", *b, input="x\n"), "--header", 2)
    refused(herdless("consume", "rec-absent", "-e", *b), "topic 'rec-absent' does not exist")
    refused(herdless("consume", stamped, "-p", "2", *b), "has no partition 2")
    refused(herdless("consume", stamped, "-f", "%q", *b), "unknown format token %q", 2)
    refused(herdless("consume", stamped, "--from", "soon", *b), "@TIMESTAMP_MS", 2)
    refused(herdless("consume", stamped, "--from", "3", "-g", "g", *b), "reset-offsets", 2)


@pytest.mark.parametrize(("kcat", "ours"), [("beginning", "beginning"), ("-3", "-3"), ("5", "5")])
def test_consume_o_is_the_output_format_and_names_kcats_offset(
    broker: BrokerProcess, stamped: str, kcat: str, ours: str
) -> None:
    result = herdless("consume", stamped, "-o", kcat, "-e", "-b", broker.bootstrap)
    line = refused(result, f"kcat's `-o {kcat}` is `--from {ours}`", code=2)
    assert "-o is the output format" in line and "table, json, plain" in line, line


def test_a_group_whose_offsets_are_at_the_end_says_so_and_how_to_read_again(
    broker: BrokerProcess, stamped: str
) -> None:
    """As after the README's Python example: a consumer of the group that assigned the
    partitions itself and committed on close, at the end of each."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as Assigned

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rec-python"})
    consumer.assign([Assigned(stamped, p, OFFSET_BEGINNING) for p in range(2)])
    assert len(consumer.consume(20, timeout=10)) == 20
    consumer.close()

    b = ("-b", broker.bootstrap)
    result = herdless("consume", stamped, "--group", "rec-python", "--exit-at-end", *b)
    assert succeeded(result) == ""
    assert "nothing new for group rec-python" in result.stderr, result.stderr
    [hint] = [line for line in result.stderr.splitlines() if "reset-offsets" in line]
    again = hint.split("To read them again: ")[1].split(" (")[0].split()
    assert again[0] == "herdless"
    succeeded(herdless(*again[1:], *b))
    out = succeeded(herdless("consume", stamped, "--group", "rec-python", "-e", *b))
    assert len(out.splitlines()) == 20


def test_produce_of_a_record_over_the_limit_names_it_and_how_to_raise_it(
    broker: BrokerProcess,
) -> None:
    create(broker, "rec-big", 1)
    result = herdless("produce", "rec-big", "-b", broker.bootstrap, input="x" * 10_000_000)
    line = refused(result, "a record of 10000000 bytes is over topic rec-big's max.message.bytes")
    assert "(1048588 bytes)" in line and "--config max.message.bytes=N" in line, line
    # Up to the topic's limit, not librdkafka's smaller default of 1000000 bytes.
    succeeded(herdless("produce", "rec-big", "-b", broker.bootstrap, input="x" * 1_040_000))


def test_produce_of_nothing_creates_no_topic(broker: BrokerProcess) -> None:
    result = herdless("produce", "rec-never", "-b", broker.bootstrap, input="")
    refused(result, "topic 'rec-never' does not exist")
    listed = succeeded(herdless("topics", "list", "-b", broker.bootstrap))
    assert "rec-never" not in listed
    # A line to send creates it, as the broker's auto.create.topics.enable says.
    succeeded(herdless("produce", "rec-made", "-b", broker.bootstrap, input="x\n"))
    assert "rec-made" in succeeded(herdless("topics", "list", "-b", broker.bootstrap))
