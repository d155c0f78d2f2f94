"""The console's Transactions page: open transactions with their age, producer id and
epoch, state and partitions, and those hanging on partitions, flagged with the command
that aborts them.

Against a real broker: a confluent-kafka producer leaves a transaction open, and a
producer that skips AddPartitionsToTxn (the broker's verification turned off, as a
broker before KIP-890 was) leaves one hanging, its batch stamped 20 minutes ago so
that it is older than the longest transaction timeout. Each check reads one look of
the console's sampler, drawn once: everything asserted comes from one state.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka.record.default_records import DefaultRecordBatchBuilder
from playwright.sync_api import expect

from herdless.broker.peers.connection import PeerConnection
from herdless.console.login import Login, Viewer
from herdless.console.pages import Pages
from herdless.console.sampler import Sampler
from herdless.console.snapshot import Snapshot, Transactions
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from herdless.testing.broker import HerdlessBroker
from tests.support.broker import free_port
from tests.support.browser import chromium, screenshot
from tests.support.cli import herdless, sigint_as_in_a_terminal, succeeded

TOPIC = "console-txn"
OPEN_ID = "console-open"
HANGING_ID = "console-hanging"
TIMEOUT_S = 30
INTERVAL_S = 0.5  # the console's sampling interval in the browser test
# Older than transaction.max.timeout.ms (15 minutes): a candidate for hanging.
HANGING_AGE_MS = 20 * 60 * 1000


@pytest.fixture(scope="module")
def broker(herdless_broker_factory: Any) -> Iterator[HerdlessBroker]:
    with herdless_broker_factory(
        group_initial_rebalance_delay_ms=0, transaction_partition_verification_enable=False
    ) as process:
        process.create_topic(TOPIC, 2)
        yield process


def look(broker: HerdlessBroker) -> tuple[Snapshot, str]:
    """One look at the brokers, and the Transactions page drawn from it."""
    sampler = Sampler(broker.bootstrap, interval_s=1.0)
    try:
        sampler.look()
    finally:
        sampler.stop()
    assert sampler.snapshot is not None, sampler.problem
    response = Pages(sampler).get("/transactions", fragment=True)
    assert response.status == 200
    return sampler.snapshot, response.body.decode()


def leave_hanging(broker: HerdlessBroker) -> tuple[int, int]:
    """A transactional batch on partition 1 that its coordinator never heard of:
    (producer id, epoch)."""

    async def send() -> tuple[int, int]:
        connection = PeerConnection(broker.host, broker.port, "console-txn-test", TIMEOUT_S)
        try:
            init = await connection.request(
                ApiKey.INIT_PRODUCER_ID,
                4,
                transactional_id=HANGING_ID,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
            )
            assert init.error_code == ErrorCode.NONE
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=0,
                is_transactional=True,
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                base_sequence=0,
                batch_size=1 << 20,
            )
            stamped = int(time.time() * 1000) - HANGING_AGE_MS
            builder.append(0, timestamp=stamped, key=None, value=b"late", headers=[])
            answer = await connection.request(
                ApiKey.PRODUCE,
                9,
                transactional_id=HANGING_ID,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    {
                        "name": TOPIC,
                        "partition_data": [{"index": 1, "records": bytes(builder.build())}],
                    }
                ],
            )
            error = answer.responses[0].partition_responses[0].error_code
            assert error == ErrorCode.NONE
            return init.producer_id, init.producer_epoch
        finally:
            connection.close()

    return asyncio.run(send())


def test_open_and_hanging_transactions_are_shown(broker: HerdlessBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": OPEN_ID})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, b"pending", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    hanging_producer, hanging_epoch = leave_hanging(broker)

    snapshot, page = look(broker)
    assert "transactions" not in snapshot.problems, snapshot.problems
    assert snapshot.transactions is not None
    (shown,) = snapshot.transactions.open
    assert (shown["transactional_id"], shown["state"]) == (OPEN_ID, "Ongoing")
    assert shown["partitions"] == [f"{TOPIC}-0"]
    (hanging,) = snapshot.transactions.hanging
    assert (hanging["topic"], hanging["partition"]) == (TOPIC, 1)
    assert (hanging["producer_id"], hanging["producer_epoch"]) == (hanging_producer, hanging_epoch)
    # The page says the same as the look it was drawn from.
    assert f'data-transactional-id="{OPEN_ID}"' in page
    assert f'<td class="num" data-field="producer-id">{shown["producer_id"]}</td>' in page
    assert f'<td class="num" data-field="producer-epoch">{shown["producer_epoch"]}</td>' in page
    assert f'<td data-field="partitions">{TOPIC}-0</td>' in page
    assert '<span class="flag">past its timeout' not in page
    assert f'data-partition="{TOPIC}-1" class="hanging"' in page
    command = (
        f"herdless transactions abort --topic {TOPIC} --partition 1"
        f" --start-offset {hanging['start_offset']}"
    )
    assert command in page

    # The command the page shows ends it; the open transaction ends as its producer says.
    succeeded(herdless(*command.split()[1:], "-b", broker.bootstrap))
    producer.commit_transaction(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        snapshot, page = look(broker)
        if snapshot.transactions == Transactions([], []):
            break
        assert time.monotonic() < deadline, snapshot.transactions
        time.sleep(0.2)
    assert "No open transactions." in page and "No hanging transactions." in page


class TopicAndIdNamed(Login):
    """A login that lets its user describe the topic `orders` and the id `mine` alone."""

    def describable(self, user: str, host: str, kind: str, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in ("orders", "mine")]


def test_a_late_transaction_is_flagged_and_a_viewer_sees_only_what_they_may_describe() -> None:
    def row(transactional_id: str, partitions: list[str], duration_ms: int) -> dict[str, Any]:
        return {
            "transactional_id": transactional_id,
            "coordinator": 0,
            "producer_id": 7,
            "producer_epoch": 2,
            "state": "Ongoing",
            "timeout_ms": 60_000,
            "start_time_ms": 1_700_000_000_000,
            "duration_ms": duration_ms,
            "partitions": partitions,
        }

    hanging = {
        "topic": "payroll",
        "partition": 0,
        "producer_id": 9,
        "producer_epoch": 0,
        "coordinator_epoch": -1,
        "start_offset": 12,
        "last_timestamp_ms": 0,
        "duration_ms": HANGING_AGE_MS,
    }
    sampler = Sampler("127.0.0.1:9092", interval_s=2.0)  # never started: no broker asked
    sampler.snapshot = Snapshot(
        1_700_000_100,
        transactions=Transactions(
            [
                row("mine", ["orders-0"], 90_000),
                row("theirs", ["orders-1"], 1_000),
                row("mine-too", ["payroll-0"], 1_000),
            ],
            [hanging],
        ),
    )
    whole = Pages(sampler).get("/transactions").body.decode()
    assert 'data-transactional-id="mine" class="late"' in whole
    assert '90.00 s <span class="flag">past its timeout</span>' in whole
    assert 'data-partition="payroll-0" class="hanging"' in whole
    viewer = Viewer("alice", "127.0.0.1", TopicAndIdNamed())
    trimmed = Pages(sampler).get("/transactions", viewer=viewer).body.decode()
    assert 'data-transactional-id="mine"' in trimmed
    assert "theirs" not in trimmed and "payroll" not in trimmed
    assert "No hanging transactions." in trimmed


def test_the_page_in_a_browser(
    broker: HerdlessBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`herdless console` as a user starts it; the row of an open transaction, read once
    as a person sees it."""
    transactional_id = "console-browser"
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id}
    )
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, b"watched", partition=1)
    assert producer.flush(TIMEOUT_S) == 0
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
    url = f"http://127.0.0.1:{port}/transactions"
    try:
        deadline = time.monotonic() + TIMEOUT_S
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
            row = page.locator(f'tr[data-transactional-id="{transactional_id}"]')
            expect(row).to_be_visible(timeout=15_000)
            # One read of the row: every cell from the same refresh.
            cells = row.locator("td").all_inner_texts()
            assert cells[0] == transactional_id and cells[1] == "Ongoing", cells
            assert cells[-1] == f"{TOPIC}-1", cells
            screenshot(page, "console/transactions")
    finally:
        console.send_signal(signal.SIGINT)
        assert console.wait(30) == 130, log.read_text()
        producer.abort_transaction(TIMEOUT_S)
    assert "Traceback" not in log.read_text(), log.read_text()
