"""The `herdless` command against a running broker: topics, its output forms, its errors,
its start-up, and `herdless serve`'s checks of its settings and data directory."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from herdless.marshal.placement import DEFAULT_TOPIC
from tests.support.broker import (
    BrokerProcess,
    free_port,
    loopback_host_with_free,
    module_broker,
)
from tests.support.cli import (
    COMMAND,
    assert_documented,
    herdless,
    refused,
    succeeded,
    table_rows,
    tables,
)

KAFKA_PORT = 9092
BROKER_PARTITIONS = 4  # the broker's num.partitions


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """On a loopback address of its own at Kafka's port, so that `-b HOST` alone reaches it."""
    host = loopback_host_with_free(KAFKA_PORT)
    data = tmp_path_factory.mktemp("cli") / "data"
    with module_broker(
        data, "--set", f"num.partitions={BROKER_PARTITIONS}", host=host, port=KAFKA_PORT
    ) as process:
        yield process


def test_topics_create_list_describe_alter_delete(broker: BrokerProcess) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    created = herdless("topics", "create", "cli-topic", "-p", "3", "-c", "retention.ms=3600000", *b)
    assert succeeded(created) == "created topic cli-topic with 3 partitions\n"

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("cli-topic", value=b"x", partition=i % 3)
    assert producer.flush(30) == 0

    assert ["cli-topic", "3", "false"] in table_rows(succeeded(herdless("topics", "list", *b)))

    partitions, configs = tables(succeeded(herdless("topics", "describe", "cli-topic", *b)))
    assert partitions == [
        [
            "PARTITION",
            "LEADER",
            "EPOCH",
            "REPLICAS",
            "ISR",
            "OFFLINE",
            "LOG-START-OFFSET",
            "LOG-END-OFFSET",
            "RECORDS",
        ],
        *([str(p), "0", "0", "0", "0", "-", "0", "10", "10"] for p in range(3)),
    ]
    assert configs[0] == ["CONFIG", "VALUE", "SOURCE"]
    assert ["retention.ms", "3600000", "dynamic_topic_config"] in configs

    described = json.loads(succeeded(herdless("topics", "describe", "cli-topic", "-o", "json", *b)))
    assert described["topic"] == "cli-topic" and described["topic_id"]
    assert described["partitions"][0] == {
        "partition": 0,
        "leader": 0,
        "leader_epoch": 0,
        "replicas": [0],
        "isr": [0],
        "offline_replicas": [],
        "log_start_offset": 0,
        "log_end_offset": 10,
        "records": 10,
    }
    assert {"name": "retention.ms", "value": "3600000", "source": "dynamic_topic_config"} in (
        described["configs"]
    )

    assert succeeded(herdless("topics", "alter", "cli-topic", "--partitions", "5", *b)) == (
        "topic cli-topic now has 5 partitions\n"
    )
    partitions, _ = tables(succeeded(herdless("topics", "describe", "cli-topic", *b)))
    assert [row[0] for row in partitions[1:]] == ["0", "1", "2", "3", "4"]
    refused(herdless("topics", "alter", "cli-topic", "-p", "2", *b), "cannot give topic")

    refused(herdless("topics", "create", "cli-topic", *b), "already exists")
    # The broker's own words, naming the config and what it accepts.
    bad = refused(herdless("topics", "create", "bad", "-c", "compression.type=brotli", *b), "")
    assert "compression.type" in bad and "zstd" in bad

    assert succeeded(herdless("topics", "delete", "cli-topic", *b)) == "deleted topic cli-topic\n"
    refused(herdless("topics", "describe", "cli-topic", *b), "topic 'cli-topic' does not exist")
    refused(herdless("topics", "delete", "cli-topic", *b), "cannot delete topic 'cli-topic'")


def test_create_without_partitions_takes_the_brokers_num_partitions(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    out = succeeded(herdless("topics", "create", "cli-default", *b))
    assert out == f"created topic cli-default with {BROKER_PARTITIONS} partitions\n"
    listed = json.loads(succeeded(herdless("topics", "list", "-o", "json", *b)))
    assert {"topic": "cli-default", "partitions": BROKER_PARTITIONS, "internal": False} in listed


def test_topics_list_hides_internal_topics_unless_asked(broker: BrokerProcess) -> None:
    b = ("-b", broker.bootstrap)
    assert "__consumer_offsets" not in succeeded(herdless("topics", "list", *b))
    rows = table_rows(succeeded(herdless("topics", "list", "--internal", *b)))
    assert ["__consumer_offsets", "50", "true"] in rows


def test_an_address_without_a_port_means_9092(broker: BrokerProcess) -> None:
    assert broker.port == KAFKA_PORT
    listed = json.loads(succeeded(herdless("topics", "list", "-o", "json", "-b", broker.host)))
    assert isinstance(listed, list)


def test_output_off_a_terminal_is_never_cut_or_wrapped(broker: BrokerProcess) -> None:
    name = "a-topic-with-a-name-longer-than-any-terminal-is-wide-" + "x" * 120
    b = ("-b", broker.bootstrap)
    succeeded(herdless("topics", "create", name, "-p", "1", *b))
    plain = succeeded(herdless("topics", "list", *b))
    assert plain.splitlines()[0] == "TOPIC\tPARTITIONS\tINTERNAL"
    assert f"{name}\t1\tfalse" in plain.splitlines()
    # Asked for a table off a terminal: rich's, at its natural width, one line a row.
    table = succeeded(herdless("topics", "list", "-o", "table", *b))
    [row] = [line for line in table.splitlines() if name in line]
    assert [cell.strip() for cell in row.split("│")[1:-1]] == [name, "1", "false"]
    assert "PARTITIONS" in table and "INTERNAL" in table
    # An error too stays one line, whatever its length.
    error = refused(herdless("topics", "describe", name + "-missing", *b), name + "-missing")
    assert error == f"error: topic '{name}-missing' does not exist"


def on_a_terminal(*args: str, columns: int = 100) -> str:
    """What the command shows on a terminal `columns` wide, without its colours."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    process = subprocess.Popen(
        [*COMMAND, *args],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(60) == 0, process.stderr.read() if process.stderr else ""
    return re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode())  # bold headers


def test_a_terminal_gets_a_table(broker: BrokerProcess) -> None:
    """Without --output a terminal gets rich's table (a pipe gets plain, as above)."""
    shown = on_a_terminal("topics", "list", "-b", broker.bootstrap)
    assert "┃ TOPIC" in shown and "┃ PARTITIONS ┃" in shown and "\t" not in shown, shown
    assert "…" not in shown  # a cell too wide folds onto more lines; nothing is cut


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize(
    "command",
    [("topics", "describe", "term-words"), ("cluster", "describe"), ("groups", "list")],
    ids=["topics-describe", "cluster-describe", "groups-list"],
)
def test_a_narrow_terminal_never_splits_a_header_or_an_address(
    broker: BrokerProcess, command: tuple[str, ...], columns: int
) -> None:
    b = ("-b", broker.bootstrap)
    if not table_rows(succeeded(herdless("topics", "list", *b))).count(
        ["term-words", "2", "false"]
    ):
        succeeded(herdless("topics", "create", "term-words", "-p", "2", *b))
    plain = succeeded(herdless(*command, "-o", "plain", *b))
    shown = on_a_terminal(*command, *b, columns=columns)
    assert max(len(line) for line in shown.splitlines()) <= columns, shown
    words = {word for table in tables(plain) for word in table[0]}
    words |= {value for row in table_rows(plain) for value in row if len(value) <= 24}
    assert broker.host in words or command[0] != "cluster", plain
    on_screen = set(re.split(r"[\s│┃║|]+", shown))
    split = sorted(word for word in words if word not in on_screen)
    assert not split, f"split or missing on a {columns}-column terminal: {split}\n{shown}"


def test_errors_are_one_line_on_stderr() -> None:
    address = f"127.0.0.1:{free_port()}"
    error = refused(herdless("topics", "list", "-b", address), f"no broker answers at {address}")
    assert error == f"error: no broker answers at {address}"
    # A mistyped command line: the same form, exit code 2 as option parsers use.
    refused(herdless("topics", "list", "--colour"), "no such option: --colour", code=2)
    refused(herdless("topics", "list", "-b", "host:port"), "'host:port'", code=2)
    refused(herdless("groups", "lag"), "missing argument", code=2)
    refused(herdless("groups", "list", "--output", "yaml"), "--output", code=2)


def test_version() -> None:
    from herdless import __version__

    assert succeeded(herdless("--version")) == f"herdless {__version__}\n"
    assert succeeded(herdless("version")) == f"{__version__}\n"


HEAVY_MODULES = (
    "kafka",
    "confluent_kafka",
    "rich",
    "pyspark",
    "herdless.broker",
    "herdless.marshal",
)


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["topics", "list", "-b", "127.0.0.1:1"]],
    ids=["version", "help", "unreachable"],
)
def test_start_up_imports_no_client_library(args: list[str]) -> None:
    """What makes a command slow to start is importing the client libraries and the
    broker; none is needed to answer --version or --help, or to find the broker absent."""
    probe = (
        "import sys\n"
        "from herdless.cli.main import run\n"
        f"code = run({args!r})\n"
        "loaded = sorted({m.split('.')[0] if not m.startswith('herdless') else m"
        " for m in sys.modules})\n"
        f"print([m for m in {HEAVY_MODULES!r} if m in loaded])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.splitlines()[-1] == "[]", result.stdout + result.stderr


def test_help_shows_the_defaults() -> None:
    shown = " ".join(succeeded(herdless("serve", "--help")).split())
    for default in ("127.0.0.1", "9092", "./herdless-data", "info"):
        assert f"[default: {default}]" in shown or f"[default: ({default})]" in shown, default
    shown = " ".join(succeeded(herdless("marshal", "status", "--help")).split())
    assert f"({DEFAULT_TOPIC})" in shown


def command_paths() -> list[list[str]]:
    """Every `herdless` command, as the words that name it."""
    import typer

    from herdless.cli.main import app

    paths = []

    def walk(command: object, path: list[str]) -> None:
        subs = getattr(command, "commands", None)
        if subs is None:
            paths.append(path)
            return
        for name, sub in subs.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


def test_help_names_values_and_defaults_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    """No Python types (`<list[str]>`) and no doubled brackets (`((0))`) in any help."""
    from herdless.cli.main import run

    paths = command_paths()
    assert ["topics", "delete-records"] in paths and ["cluster", "up"] in paths
    for path in paths:
        assert run([*path, "--help"]) == 0, path
        shown = capsys.readouterr().out
        for wrong in ("list[", "((", "))", "<Output>"):
            assert wrong not in shown, f"herdless {' '.join(path)} --help shows {wrong}:\n{shown}"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--port", "70000"], "port must be between 0 and 65535, not 70000"),
        (["--advertised-port", "-1"], "advertised port must be between 0 and 65535"),
        (["--metrics-port", "65536"], "metrics.port must be between 0 and 65535"),
        (["--set", "metrics.port=99999"], "metrics.port must be between 0 and 65535"),
        (["--set", "num.partitions=-3"], "num.partitions must be at least 1, not -3"),
        (["--set", "num.partitions=many"], "num.partitions must be an integer"),
        (["--set", "offsets.topic.num.partitions=0"], "offsets.topic.num.partitions"),
        (["--set", "connections.max.idle.ms=0"], "connections.max.idle.ms must be at least 1"),
        (["--set", "max.partitions.per.request=0"], "max.partitions.per.request must be at"),
        (["--set", "group.min.session.timeout.ms=60000", "--set",
          "group.max.session.timeout.ms=6000"], "must not exceed group.max.session.timeout.ms"),
        (["--set", "listeners=PLAINTEXT://:99999"], "port must be between"),
        (["--set", "no.such.setting=1"], "unknown broker setting 'no.such.setting'"),
        (["--set", "auto.create.topics.enable=yes"],
         "Invalid value yes for configuration auto.create.topics.enable"),
        (["--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "--set",
          "allow.everyone.if.no.acl.found=maybe"],
         "Invalid value maybe for configuration allow.everyone.if.no.acl.found"),
        (["--log-level", "loud"], "'loud' is not one of"),
    ],
)  # fmt: skip
def test_serve_names_a_setting_it_cannot_use(tmp_path: Path, args: list[str], named: str) -> None:
    result = herdless("serve", "--data-dir", str(tmp_path / "data"), *args, timeout=30)
    refused(result, named, code=2)
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not (tmp_path / "data").exists()  # nothing started


def test_serve_names_a_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("no.such.setting=1\n")
    refused(herdless("serve", "--config", str(config)), "no.such.setting", code=2)
    refused(herdless("serve", "--config", str(tmp_path / "absent")), "cannot read config", code=2)


def test_serve_names_a_bad_boolean_in_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("log.cleaner.enable = TRUE\ndelete.topic.enable=sometimes\n")
    result = herdless("serve", "--data-dir", str(tmp_path / "data"), "--config", str(config))
    refused(result, "Invalid value sometimes for configuration delete.topic.enable", code=2)
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_serve_names_a_data_directory_in_use(broker: BrokerProcess) -> None:
    result = herdless("serve", "--port", "0", "--data-dir", str(broker.data_dir), timeout=30)
    refused(result, f"data directory {broker.data_dir} is in use by another broker")
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert broker.alive()


def test_serve_names_a_data_directory_it_cannot_use(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = herdless("serve", "--port", "0", "--data-dir", str(a_file), timeout=30)
    refused(result, f"data directory {a_file} is not a directory")
    assert len(result.stderr.splitlines()) == 1, result.stderr
    below = a_file / "data"
    result = herdless("serve", "--port", "0", "--data-dir", str(below), timeout=30)
    refused(result, f"cannot use data directory {below}: Not a directory")


def test_serve_names_its_port_in_use_and_its_holder_before_writing_anything(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    result = herdless(
        "serve", "--host", broker.host, "--port", str(broker.port), "--data-dir", str(data),
        timeout=30,
    )  # fmt: skip
    line = refused(result, f"cannot listen on {broker.host}:{broker.port}: address already in use")
    assert (
        broker.process is not None
        and f"pid {broker.process.pid}" in line
        and line.endswith("give another --port")
    ), line
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert not data.exists(), "the data directory was initialised before the port was checked"


def test_serve_names_its_metrics_port_in_use_before_saying_it_listens(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = herdless(
            "serve", "--port", "0", "--data-dir", str(tmp_path / "data"),
            "--metrics-port", str(port), timeout=30,
        )  # fmt: skip
    line = refused(result, f"cannot listen on 127.0.0.1:{port}: address already in use")
    assert "--metrics-port" in line, line
    assert "listening" not in result.stderr, result.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "t", "-H", "novalue"],
        ["produce", "t", "--key-separator", ""],
        ["consume", "t", "--from", "soon"],
        ["consume", "t", "-o", "beginning"],
        ["consume", "t", "-f", "%q"],
        ["topics", "alter", "t"],
        ["topics", "create", "t", "--config", "novalue"],
        ["groups", "describe"],
        ["groups", "reset-offsets", "g", "--to-earliest"],
        ["users", "add", "kim", "--iterations", "100", "--password", "x"],
        ["topics", "delete-records", "t", "--partition", "0"],
    ],
    ids=lambda args: "-".join(args[:2]),
)
def test_a_bad_value_exits_2_before_asking_a_broker(args: list[str]) -> None:
    """As docs/cli.md says: a command line that cannot be run is exit code 2, whatever
    the command (nothing listens at port 1: asking a broker would fail with 1)."""
    refused(herdless(*args, "-b", "127.0.0.1:1"), "", code=2)


def test_topics_delete_records_by_options_and_by_kafkas_json_file(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    b = ("-b", broker.bootstrap)
    succeeded(herdless("topics", "create", "purged", "-p", "2", *b))
    for p in (0, 1):
        succeeded(herdless("produce", "purged", "-p", str(p), *b, input="a\nb\nc\nd\ne\n"))

    out = succeeded(herdless("topics", "delete-records", "purged", "-p", "0", "--before", "3", *b))
    assert table_rows(out) == [["purged", "0", "3"]]
    read = ("consume", "purged", "-e", "-f", "%p:%o %s\\n", *b)
    assert sorted(succeeded(herdless(*read)).splitlines()) == [
        "0:3 d", "0:4 e", "1:0 a", "1:1 b", "1:2 c", "1:3 d", "1:4 e"
    ]  # fmt: skip

    plan = tmp_path / "offsets.json"
    plan.write_text(
        json.dumps(
            {"partitions": [{"topic": "purged", "partition": 1, "offset": -1}], "version": 1}
        )
    )
    result = herdless("topics", "delete-records", "--offset-json-file", str(plan), "-o", "json", *b)
    document = json.loads(succeeded(result))
    assert document == [{"topic": "purged", "partition": 1, "low_watermark": 5}]
    assert_documented("topics delete-records", document)
    assert sorted(succeeded(herdless(*read)).splitlines()) == ["0:3 d", "0:4 e"]

    delete = ("topics", "delete-records", "purged")
    refused(herdless(*delete, "-p", "0", "--before", "9", *b), "OFFSET_OUT_OF_RANGE")
    refused(herdless(*delete, "-p", "5", "--before", "1", *b), "no such partition: purged:5")
    refused(herdless(*delete, "-p", "0", "--before", "soon", *b), "--before expects", code=2)
    plan.write_text('{"partitions": [{"topic": "purged", "partition": 0}]}')
    refused(
        herdless("topics", "delete-records", "--offset-json-file", str(plan), *b),
        "partition entry 1 needs a topic, a partition >= 0 and an offset >= -1",
        code=2,
    )


def test_one_broker_is_counted_in_the_singular(broker: BrokerProcess) -> None:
    result = herdless("cluster", "describe", "-b", broker.bootstrap)
    succeeded(result)
    assert ": 1 broker, controller 0," in result.stderr, result.stderr
