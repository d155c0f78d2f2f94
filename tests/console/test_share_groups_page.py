"""Share groups in the console: listed among the groups with their type, and a share
group's page with its members and, per partition, the start offset, the log end and
the lag, and the members that share the partition.

Against a real broker: a ShareConsumer reads and accepts every record, then a member
joins and stays, so that the start offsets and the assignment are known exactly. The
page is checked once drawn from one look of the sampler, and once in a real headless
chromium against `herdless console` as a user starts it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import expect

from herdless.console.pages import Pages
from herdless.console.sampler import Sampler
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.browser import chromium, screenshot
from tests.support.cli import sigint_as_in_a_terminal
from tests.test_group_configs import alter
from tests.test_share_group_offsets import consume, join, leave

TOPIC = "jobs"
GROUP = "console-workers"
PARTITIONS = 2
RECORDS = 10
INTERVAL_S = 0.5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("console-share") / "data") as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": process.bootstrap})
        for n in range(RECORDS * PARTITIONS):
            producer.produce(TOPIC, b"job", partition=n % PARTITIONS)
        assert producer.flush(30) == 0
        assert alter(process.bootstrap, GROUP, share_auto_offset_reset="earliest") == "OK"
        consume(process, GROUP, RECORDS * PARTITIONS)
        # Three more records on partition 0, not read: its lag.
        for _ in range(3):
            producer.produce(TOPIC, b"job", partition=0)
        assert producer.flush(30) == 0
        yield process


@pytest.fixture(scope="module")
def member(broker: BrokerProcess) -> Iterator[str]:
    member_id, _ = join(broker, GROUP)
    yield member_id
    leave(broker, GROUP, member_id)


def look(broker: BrokerProcess, path: str) -> str:
    sampler = Sampler(broker.bootstrap, interval_s=1.0)
    try:
        sampler.look()
    finally:
        sampler.stop()
    assert sampler.snapshot is not None, sampler.problem
    response = Pages(sampler).get(path, fragment=True)
    assert response.status == 200
    return response.body.decode()


def test_a_share_group_is_listed_with_its_type_and_lag(broker: BrokerProcess, member: str) -> None:
    listed = look(broker, "/groups")
    row = listed[listed.index(f'data-group="{GROUP}"') :]
    row = row[: row.index("</tr>")]
    assert "share" in row and "Stable" in row
    assert 'data-field="total-lag">3<' in row


def test_a_share_groups_page_shows_start_offsets_lag_and_who_shares_each_partition(
    broker: BrokerProcess, member: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    shown = look(broker, f"/groups/{GROUP}")
    assert "Start offsets and lag per partition" in shown
    assert member in shown
    port = free_port()
    log: Path = tmp_path_factory.mktemp("console-log") / "console.log"
    with open(log, "wb") as out:
        console = subprocess.Popen(
            [sys.executable, "-m", "herdless", "console", "-b", broker.bootstrap]
            + ["--port", str(port), "--interval", str(INTERVAL_S)],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=sigint_as_in_a_terminal,
        )
    url = f"http://127.0.0.1:{port}/groups/{GROUP}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert console.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
            page = browser.new_page()
            page.goto(url)
            expect(page.locator('[data-field="protocol-type"]')).to_have_text(
                "share", timeout=15_000
            )
            expect(page.locator('[data-field="state"]')).to_have_text("Stable")
            expect(page.locator("table.members tbody tr")).to_have_count(1)
            for partition, (start, lag) in enumerate(((RECORDS, 3), (RECORDS, 0))):
                row = page.locator(f'table.share tr[data-partition="{TOPIC}:{partition}"]')
                expect(row.locator('[data-field="start-offset"]')).to_have_text(str(start))
                expect(row.locator('[data-field="lag"]')).to_have_text(str(lag))
                expect(row.locator('[data-field="in-flight"]')).to_have_text("0")
                expect(row.locator('[data-field="owners"]')).to_contain_text(member)
            screenshot(page, "console/share-group")
    finally:
        console.send_signal(signal.SIGINT)
        assert console.wait(30) == 130, log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()
