"""The `herdless` command against a running broker, and its errors."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from tests.support.broker import BrokerProcess, free_port
from tests.support.cli import herdless, table_rows


def test_topics_create_list_describe_delete(broker: BrokerProcess) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    created = herdless("topics", "create", "cli-topic", "-p", "3", "-c", "retention.ms=3600000", *b)
    assert created.returncode == 0, created.stderr
    assert "cli-topic" in created.stdout

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("cli-topic", value=b"x", partition=i % 3)
    assert producer.flush(30) == 0

    listed = herdless("topics", "list", *b)
    assert listed.returncode == 0, listed.stderr
    assert ["cli-topic", "3", "False"] in table_rows(listed.stdout), listed.stdout

    described = herdless("topics", "describe", "cli-topic", *b)
    assert described.returncode == 0, described.stderr
    rows = table_rows(described.stdout)
    partitions = [r for r in rows if len(r) == 5 and r[0].isdigit()]
    assert partitions == [[str(p), "0", "0", "10", "10"] for p in range(3)]
    assert ["retention.ms", "3600000", "dynamic_topic_config"] in rows

    again = herdless("topics", "create", "cli-topic", *b)
    assert again.returncode == 1
    assert "already exists" in again.stdout + again.stderr
    assert "Traceback" not in again.stdout + again.stderr
    bad = herdless("topics", "create", "bad-config", "-c", "compression.type=brotli", *b)
    assert bad.returncode == 1
    # The broker's own words, naming the config and what it accepts.
    assert "compression.type" in bad.stdout and "zstd" in bad.stdout, bad.stdout

    deleted = herdless("topics", "delete", "cli-topic", *b)
    assert deleted.returncode == 0, deleted.stderr
    missing = herdless("topics", "describe", "cli-topic", *b)
    assert missing.returncode == 1
    assert "does not exist" in missing.stdout


def test_unreachable_broker_is_named() -> None:
    address = f"127.0.0.1:{free_port()}"
    result = herdless("topics", "list", "--bootstrap-server", address)
    assert result.returncode == 1
    assert address in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_serve_refuses_a_bad_setting(tmp_path: Path) -> None:
    result = herdless(
        "serve", "--data-dir", str(tmp_path), "--port", "0", "--set", "num.partitions=many"
    )
    assert result.returncode == 2
    assert "num.partitions" in result.stderr
    assert "Traceback" not in result.stderr

    config = tmp_path / "broker.properties"
    config.write_text("no.such.setting=1\n")
    result = herdless("serve", "--data-dir", str(tmp_path), "--config", str(config))
    assert result.returncode == 2
    assert "no.such.setting" in result.stderr
