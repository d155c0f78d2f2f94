"""The web console in a real headless chromium, against a real broker and a real group.

`herdless console` runs as a user starts it; a confluent-kafka member of a group
commits known offsets and then stops reading (its partitions paused, still
heartbeating), so the lag is known exactly and grows only when a test produces.
Each test looks at a page as a person would (text on the screen, not the HTML)
and saves a screenshot under tests/artifacts/console/.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from playwright.sync_api import BrowserContext, Page, expect

from herdless.testing.broker import HerdlessBroker
from tests.support.broker import BrokerProcess, free_port
from tests.support.browser import screenshot, wait_answering
from tests.support.cli import sigint_as_in_a_terminal

TOPIC = "console-orders"
PARTITIONS = 3
RECORDS = 10  # per partition, before any test produces more
COMMITTED = 4  # the group's committed offset on every partition
GROUP = "console-readers"
CLIENT_ID = "console-test-reader"
INTERVAL_S = 0.5  # the console's sampling interval: pages refresh as often
SIZE = re.compile(r"^\d+(\.\d)? (B|KiB|MiB)$")  # as the console writes sizes
DURATION = re.compile(r"^took \d+(\.\d+)? (ms|s)$")


@pytest.fixture(scope="module")
def broker(herdless_broker_factory: Any) -> Iterator[HerdlessBroker]:
    with herdless_broker_factory(group_initial_rebalance_delay_ms=0) as process:
        yield process


@pytest.fixture(scope="module")
def topic(broker: HerdlessBroker) -> str:
    broker.create_topic(TOPIC, PARTITIONS)
    for partition in range(PARTITIONS):
        broker.produce(TOPIC, [b"order"] * RECORDS, partition=partition)
    return TOPIC


class IdleMember:
    """A member of GROUP that commits offset COMMITTED on what it is assigned, then
    reads nothing more: its partitions stay paused while it polls, so it takes part
    in every rebalance and heartbeats, and its lag changes only when records arrive."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "client.id": client_id,
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
            }
        )
        self.assigned: list[TopicPartition] = []
        self.committed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> IdleMember:
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign)
        self._thread.start()
        return self

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)
        consumer.pause(partitions)
        self.assigned = partitions

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)
            if self.assigned and not self.committed.is_set():
                offsets = [TopicPartition(TOPIC, tp.partition, COMMITTED) for tp in self.assigned]
                self.consumer.commit(offsets=offsets, asynchronous=False)
                self.committed.set()

    def close(self) -> None:
        """Leave the group (LeaveGroup), as a consumer that shuts down does."""
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


@pytest.fixture(scope="module")
def member(broker: HerdlessBroker, topic: str) -> Iterator[IdleMember]:
    reader = IdleMember(broker.bootstrap, CLIENT_ID).start()
    assert reader.committed.wait(60), "the member was never assigned partitions"
    yield reader
    reader.close()


@pytest.fixture(scope="module")
def console_url(broker: HerdlessBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`herdless console` against the broker, as a user runs it."""
    port = free_port()
    log = tmp_path_factory.mktemp("console-log") / "console.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "herdless",
                "console",
                "-b",
                broker.bootstrap,
                "--port",
                str(port),
                "--interval",
                str(INTERVAL_S),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=sigint_as_in_a_terminal,  # stopped with Ctrl-C below
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(url, process, log)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(30)
        assert code == 130, f"the console exited with {code} on Ctrl-C:\n{log.read_text()}"
    assert "Traceback" not in log.read_text(), log.read_text()


def cell(page: Page, row: str, column: str) -> Any:
    """The cell of a table row under the column headed `column`, once the row shows."""
    expect(page.locator(row)).to_be_visible()
    table = page.locator("table", has=page.locator(row))
    headers = [h.strip().lower() for h in table.locator("thead th").all_inner_texts()]
    return page.locator(row).locator("td").nth(headers.index(column.lower()))


# ---------------------------------------------------------------------------


def test_brokers_page_shows_the_broker(
    page: Page, console_url: str, broker: HerdlessBroker
) -> None:
    page.goto(f"{console_url}/brokers")
    row = '[data-broker="0"]'
    expect(cell(page, row, "Host")).to_have_text(broker.host)
    expect(cell(page, row, "Port")).to_have_text(str(broker.port))
    expect(cell(page, row, "Controller")).to_have_text("yes")
    expect(page.locator('[data-field="cluster-id"]')).not_to_have_text("-")
    screenshot(page, "console/brokers")


def test_topics_page_shows_partitions_records_and_sizes(
    page: Page, console_url: str, topic: str
) -> None:
    page.goto(f"{console_url}/topics")
    row = f'tr[data-topic="{topic}"]'
    expect(cell(page, row, "Partitions")).to_have_text(str(PARTITIONS))
    expect(cell(page, row, "Records")).to_have_text(str(PARTITIONS * RECORDS))
    # Sizes come from DescribeLogDirs: bytes of the log, more than the values alone.
    expect(cell(page, row, "Size")).to_have_text(SIZE)
    screenshot(page, "console/topics")

    page.get_by_role("link", name=topic, exact=True).click()
    expect(page.locator("h1")).to_have_text(f"Topic {topic}")
    for partition in range(PARTITIONS):
        row = f'tr[data-partition="{partition}"]'
        expect(cell(page, row, "Log end offset")).to_have_text(str(RECORDS))
        expect(cell(page, row, "Records")).to_have_text(str(RECORDS))
        expect(cell(page, row, "Size")).to_have_text(SIZE)
    screenshot(page, "console/topic")


def test_groups_page_lists_the_group_with_state_members_and_lag(
    page: Page, console_url: str, member: IdleMember
) -> None:
    page.goto(f"{console_url}/groups")
    row = f'tr[data-group="{GROUP}"]'
    expect(cell(page, row, "State")).to_have_text("Stable")
    expect(cell(page, row, "Members")).to_have_text("1")
    expect(cell(page, row, "Assignment strategy")).to_have_text("range")
    expect(cell(page, row, "Total lag")).to_have_text(str(PARTITIONS * (RECORDS - COMMITTED)))
    screenshot(page, "console/groups")


def test_group_page_shows_members_assignment_and_lag_per_partition(
    page: Page, console_url: str, member: IdleMember
) -> None:
    page.goto(f"{console_url}/groups/{GROUP}")
    expect(page.locator('[data-field="state"]')).to_have_text("Stable")
    expect(page.locator('[data-field="protocol-type"]')).to_have_text("consumer")
    expect(page.locator('[data-field="protocol"]')).to_have_text("range")
    members = page.locator("table.members tbody tr")
    expect(members).to_have_count(1)
    expect(members.locator("td").nth(2)).to_have_text(CLIENT_ID)
    expect(members.locator("td").nth(5)).to_have_text(f"{TOPIC}[0,1,2]")
    for partition in range(PARTITIONS):
        row = f'tr[data-partition="{TOPIC}:{partition}"]'
        expect(cell(page, row, "Committed offset")).to_have_text(str(COMMITTED))
        expect(cell(page, row, "Lag")).to_have_text(str(RECORDS - COMMITTED))
        expect(cell(page, row, "Owner")).to_contain_text(CLIENT_ID)


def test_lag_updates_live_and_its_plot_grows(
    page: Page, console_url: str, broker: HerdlessBroker, member: IdleMember
) -> None:
    page.goto(f"{console_url}/groups/{GROUP}")
    lag_0 = cell(page, f'tr[data-partition="{TOPIC}:0"]', "Lag")
    expect(lag_0).to_have_text(str(RECORDS - COMMITTED))
    plot = page.locator("svg.lag-plot")
    expect(plot).to_be_visible()
    # A mark that a reload would wipe out: the numbers must change in place.
    page.evaluate("window.notReloaded = true")
    points_before = int(plot.get_attribute("data-points") or 0)

    broker.produce(TOPIC, [b"order"] * 7, partition=0)
    expect(lag_0).to_have_text(str(RECORDS + 7 - COMMITTED))
    total = PARTITIONS * (RECORDS - COMMITTED) + 7
    expect(page.locator('[data-field="total-lag"]')).to_have_text(str(total))
    assert page.evaluate("window.notReloaded") is True

    # The plot has gained samples, drawn as a line through one point each, the
    # last at the new lag: higher on the screen (smaller y) than the last before the
    # records came. (Not the first: the console may have sampled the group before its
    # member committed, at a higher lag.)
    # Both read from one drawing of the plot: the page redraws it in place every 2 s.
    drawn, count = plot.evaluate(
        "svg => [svg.querySelector('polyline.line').getAttribute('points'),"
        " svg.getAttribute('data-points')]"
    )
    points = [tuple(map(float, pair.split(","))) for pair in (drawn or "").split()]
    assert len(points) == int(count or 0) > points_before
    assert points[-1][1] < points[points_before - 1][1], points
    screenshot(page, "console/group")


def test_rebalances_show_on_a_timeline_with_cause_and_duration(
    page: Page, console_url: str, broker: HerdlessBroker, member: IdleMember
) -> None:
    page.goto(f"{console_url}/groups/{GROUP}")
    timeline = page.locator("ol.timeline li")
    expect(timeline.filter(has_text="member joined")).to_have_count(1)

    second = IdleMember(broker.bootstrap, "console-test-second").start()
    try:
        expect(page.locator('[data-field="member-count"]')).to_have_text("2")
        expect(page.locator('[data-field="state"]')).to_have_text("Stable")
    finally:
        second.close()
    expect(page.locator('[data-field="member-count"]')).to_have_text("1")
    left = timeline.filter(has_text="member left")
    expect(left).to_have_count(1)
    # Newest first: the leave is on top, with its generations, its duration and
    # the members before and after.
    expect(timeline.first).to_contain_text("member left")
    expect(left.locator(".duration")).to_have_text(DURATION)
    expect(left.locator(".members")).to_have_text("2 → 1 members")
    # One span on the strip per entry, both counted in one drawing: the page redraws
    # them in place every 2 s, and two reads could straddle a redraw.
    entries, spans = page.evaluate(
        "() => [document.querySelectorAll('ol.timeline li').length,"
        " document.querySelectorAll('svg.strip rect.span').length]"
    )
    assert spans == entries > 0, (spans, entries)
    screenshot(page, "console/group-rebalanced")

    page.goto(f"{console_url}/rebalances")
    entries = page.locator("ol.timeline li", has=page.get_by_role("link", name=GROUP))
    expect(entries.first).to_contain_text("member left")
    screenshot(page, "console/rebalances")


def test_serve_hosts_the_console_beside_its_broker(browser: BrowserContext, tmp_path: Path) -> None:
    """`herdless serve --console-port`: the broker's own process serves the console,
    which shows that broker, and stops with it."""
    console_port = free_port()
    broker = BrokerProcess(tmp_path / "data", "--console-port", str(console_port)).start()
    try:
        url = f"http://127.0.0.1:{console_port}"
        assert broker.process is not None
        wait_answering(url, broker.process, broker.log_path)
        page = browser.new_page()
        page.goto(f"{url}/brokers")
        expect(cell(page, '[data-broker="0"]', "Port")).to_have_text(str(broker.port))
        expect(page.locator("header .source")).to_have_text(f"brokers at {broker.bootstrap}")
        screenshot(page, "console/serve-brokers")
        page.close()
    finally:
        code = broker.stop()
    assert code == 0, broker.log_tail()
    assert f"console at {url}/" in broker.log()
