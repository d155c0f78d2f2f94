"""`herdless marshal status` against a real broker and a live Marshal consumer."""

from __future__ import annotations

import json
import time
from pathlib import Path

from herdless.marshal import Marshaler
from tests.marshal.cluster import (
    COORDINATION_PARTITIONS,
    INTERVAL,
    Runner,
    create_topic,
    owners,
    state,
    wait_for,
)
from tests.support.broker import BrokerProcess
from tests.support.cli import assert_documented, herdless, refused, table_rows


def test_status_shows_owner_offset_age_and_freshness(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "shown", 3, 30)
    with Marshaler(broker.bootstrap, coordination_partitions=COORDINATION_PARTITIONS) as m:
        consumer = m.consumer("viewers", ["shown"], "viewer-1", heartbeat_interval=1.0)
        wait_for("three claims", lambda: len(consumer.held()) == 3, 30, every=0.1)
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            batch = consumer.poll(0.5)
            seen += len(batch.records) if batch else 0
        consumer.poll(0.1)  # the last batch counts as processed
        time.sleep(1.0)  # and a heartbeat carries it

        result = herdless("marshal", "status", "--group", "viewers", "-b", broker.bootstrap)
        assert result.returncode == 0, result.stderr + result.stdout
        cells = table_rows(result.stdout)
        assert [c[:4] for c in cells] == [["shown", str(p), "viewer-1", "9"] for p in range(3)], (
            result.stdout
        )
        assert all(c[-1] == "fresh" for c in cells), result.stdout
        assert "live members: viewer-1" in result.stderr
        shown = herdless("marshal", "status", "-g", "viewers", "-o", "json", "-b", broker.bootstrap)
        assert_documented("marshal status", json.loads(shown.stdout))

    # Closed: released, and the member gone.
    result = herdless("marshal", "status", "--group", "viewers", "-b", broker.bootstrap)
    assert result.stdout.count("released") == 3, result.stdout
    assert "live members: -" in result.stderr


def test_status_judges_freshness_when_it_reads(broker: BrokerProcess, tmp_path: Path) -> None:
    """A consumer killed outright writes no more, and nobody else writes to its
    coordination partitions: the log's clock stands still there, yet its claims age."""
    create_topic(broker.bootstrap, "abandoned", 2, 10)
    runner = Runner(broker.bootstrap, tmp_path, "abandoners", "abandoned", "gone-1")
    try:
        wait_for(
            "gone-1 holding both partitions",
            lambda: owners(state(broker.bootstrap), "abandoners") == {0: "gone-1", 1: "gone-1"},
            30,
        )
    finally:
        runner.kill()
    time.sleep(2 * INTERVAL + 0.5)

    result = herdless("marshal", "status", "-g", "abandoners", "-o", "json", "-b", broker.bootstrap)
    assert result.returncode == 0, result.stderr + result.stdout
    shown = json.loads(result.stdout)
    claims = shown["claims"]
    assert [c["owner"] for c in claims] == ["gone-1", "gone-1"], claims
    assert all(c["heartbeat_age_s"] > 2 * INTERVAL for c in claims), claims
    assert [c["freshness"] for c in claims] == ["stale", "stale"], claims
    assert shown["live_members"] == []


def test_status_of_an_unknown_group_fails_in_one_line(broker: BrokerProcess) -> None:
    with Marshaler(broker.bootstrap, coordination_partitions=COORDINATION_PARTITIONS):
        pass
    result = herdless("marshal", "status", "--group", "nobody", "-b", broker.bootstrap)
    refused(result, "no Marshal group 'nobody'")


def test_status_without_a_broker_fails_in_one_line() -> None:
    result = herdless("marshal", "status", "--group", "g", "-b", "127.0.0.1:1")
    refused(result, "no broker answers at 127.0.0.1:1")
