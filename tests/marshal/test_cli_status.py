"""`herdless marshal status` against a real broker and a live Marshal consumer."""

from __future__ import annotations

import json
import time

from herdless.marshal import Marshaler
from tests.marshal.cluster import COORDINATION_PARTITIONS, create_topic, wait_for
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


def test_status_of_an_unknown_group_fails_in_one_line(broker: BrokerProcess) -> None:
    with Marshaler(broker.bootstrap, coordination_partitions=COORDINATION_PARTITIONS):
        pass
    result = herdless("marshal", "status", "--group", "nobody", "-b", broker.bootstrap)
    refused(result, "no Marshal group 'nobody'")


def test_status_without_a_broker_fails_in_one_line() -> None:
    result = herdless("marshal", "status", "--group", "g", "-b", "127.0.0.1:1")
    refused(result, "no broker answers at 127.0.0.1:1")
