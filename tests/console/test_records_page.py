"""The console's message browser in a real headless chromium, against a real broker.

`herdless console` runs as a user starts it. Partition 0 of the topic holds JSON
records with keys, headers (text and binary) and timestamps a test knows, then a
binary value, a large value, a transaction that was aborted and records after it;
partition 1 is empty; partition 2 lost its first records to `herdless topics
delete-records`. Each test reads what a person sees, every row of a page in one
evaluation of it, and saves a screenshot under tests/artifacts/console/.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import Producer
from playwright.sync_api import Page, expect

from herdless.admin import partition_records
from herdless.admin.partition_records import PartitionReader
from herdless.testing.broker import HerdlessBroker
from tests.support.broker import free_port
from tests.support.browser import screenshot, wait_answering
from tests.support.cli import herdless, sigint_as_in_a_terminal, succeeded

TOPIC = "browse-records"
JSON_RECORDS = 50  # offsets 0-49, record i stamped BASE_MS + i seconds
BINARY_OFFSET = 50
LARGE_OFFSET = 51
LARGE_VALUE = b"x" * 3000 + b"END"
ABORTED = 3
AFTER = 5
BASE_MS = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
DELETED_BEFORE = 4  # partition 2's new log start offset
# Every row of the records table, read in one evaluation of the page.
ROWS_JS = """() => [...document.querySelectorAll('table.records tbody tr')].map(tr => ({
  offset: Number(tr.dataset.offset),
  timestamp: tr.querySelector('.timestamp').textContent,
  type: tr.querySelector('.timestamp-type').textContent,
  key: tr.querySelector('td.key pre')?.textContent ?? null,
  keyFormat: tr.querySelector('td.key pre')?.dataset.format ?? null,
  value: tr.querySelector('td.value pre')?.textContent ?? null,
  valueFormat: tr.querySelector('td.value pre')?.dataset.format ?? null,
  valueNote: tr.querySelector('td.value .field-note')?.textContent ?? null,
  headers: Object.fromEntries([...tr.querySelectorAll('.header')].map(
    h => [h.dataset.header, h.querySelector('pre').textContent])),
}))"""


@pytest.fixture(scope="module")
def broker(herdless_broker_factory: Any) -> Iterator[HerdlessBroker]:
    with herdless_broker_factory() as process:
        process.create_topic(TOPIC, 3)
        _produce(process.bootstrap)
        yield process


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(JSON_RECORDS):
        producer.produce(
            TOPIC,
            key=f"key-{i}",
            value=json.dumps({"n": i, "item": "widget"}),
            headers=[("source", b"browser-test"), ("trace", bytes([0xFF, i]))],
            timestamp=BASE_MS + i * 1000,
            partition=0,
        )
    producer.produce(TOPIC, value=b"\x00\x01\xfe\xff", partition=0)
    producer.produce(TOPIC, key=b"large", value=LARGE_VALUE, partition=0)
    producer.flush(30)
    aborting = Producer({"bootstrap.servers": bootstrap, "transactional.id": "browse-aborted"})
    aborting.init_transactions(30)
    aborting.begin_transaction()
    for i in range(ABORTED):
        aborting.produce(TOPIC, value=f"aborted-{i}", partition=0)
    aborting.flush(30)
    aborting.abort_transaction(30)
    for i in range(AFTER):
        producer.produce(TOPIC, value=json.dumps({"after": i}), partition=0)
    for i in range(10):
        producer.produce(TOPIC, value=f"doomed-{i}", partition=2)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def console_url(broker: HerdlessBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`herdless console` against the broker, as a user runs it."""
    port = free_port()
    log = tmp_path_factory.mktemp("records-console") / "console.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "herdless", "console", "-b", broker.bootstrap]
            + ["--port", str(port), "--interval", "0.5"],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=sigint_as_in_a_terminal,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(url, process, log)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
    assert "Traceback" not in log.read_text(), log.read_text()


def records_url(console_url: str, partition: int = 0, query: str = "") -> str:
    return f"{console_url}/topics/{TOPIC}/partitions/{partition}" + (f"?{query}" if query else "")


def open_records(page: Page, url: str, status: int = 200) -> list[dict[str, Any]]:
    response = page.goto(url)
    assert response is not None and response.status == status, (
        response and response.status,
        page.content(),
    )
    return page.evaluate(ROWS_JS)


def offsets(rows: list[dict[str, Any]]) -> list[int]:
    return [row["offset"] for row in rows]


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------


def test_a_topic_page_links_each_partition_to_its_records(page: Page, console_url: str) -> None:
    page.goto(f"{console_url}/topics/{TOPIC}")
    for partition in range(3):
        link = page.locator(f'tr[data-partition="{partition}"]').get_by_role("link", name="browse")
        expect(link).to_have_attribute("href", f"/topics/{TOPIC}/partitions/{partition}")
    page.locator('tr[data-partition="0"]').get_by_role("link", name="browse").click()
    expect(page.locator("h1")).to_have_text(f"Topic {TOPIC}, partition 0")
    rows = page.evaluate(ROWS_JS)
    first = rows[0]
    assert first["offset"] == 0 and first["key"] == "key-0" and first["keyFormat"] == "text"
    # A JSON object is shown pretty; a header that is not UTF-8 as hex.
    assert first["valueFormat"] == "json"
    assert first["value"] == json.dumps({"n": 0, "item": "widget"}, indent=2)
    assert first["headers"] == {"source": "browser-test", "trace": "ff 00"}
    assert (first["timestamp"], first["type"]) == ("2026-01-01 00:00:00.000", "CreateTime")
    assert offsets(rows) == list(range(50))  # a page holds 50 records unless asked
    screenshot(page, "console/records")
    (binary,) = open_records(page, records_url(console_url, query=f"from={BINARY_OFFSET}&size=1"))
    assert (binary["key"], binary["valueFormat"], binary["value"]) == (None, "hex", "00 01 fe ff")


def test_read_committed_hides_the_aborted_transaction_and_markers(
    page: Page, console_url: str
) -> None:
    rows = open_records(page, records_url(console_url, query="size=100"))
    values = [row["value"] for row in rows]
    assert not any(v and v.startswith("aborted-") for v in values)
    visible = JSON_RECORDS + 2 + AFTER
    assert len(rows) == visible
    assert [json.loads(v) for v in values[-AFTER:]] == [{"after": i} for i in range(AFTER)]
    # The aborted records and the abort marker take offsets, and are not shown.
    end = int(page.locator('[data-field="end"]').inner_text())
    assert end == visible + ABORTED + 1

    page.get_by_label("Isolation").select_option("read_uncommitted")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile("isolation=read_uncommitted"))
    rows = page.evaluate(ROWS_JS)
    aborted = [row["value"] for row in rows if (row["value"] or "").startswith("aborted-")]
    assert aborted == [f"aborted-{i}" for i in range(ABORTED)]
    assert len(rows) == visible + ABORTED
    # Still no marker among the records: one offset of the partition is not shown.
    assert offsets(rows) == sorted(set(offsets(rows))) and len(rows) == end - 1
    screenshot(page, "console/records-uncommitted")


def test_paging_forward_and_back(page: Page, console_url: str) -> None:
    rows = open_records(page, records_url(console_url, query="size=20"))
    assert offsets(rows) == list(range(20))
    expect(page.get_by_role("link", name="‹ Older")).to_have_count(0)

    page.get_by_role("link", name="Newer ›").click()
    expect(page.locator("tr[data-offset]").first).to_have_attribute("data-offset", "20")
    assert offsets(page.evaluate(ROWS_JS)) == list(range(20, 40))
    page.get_by_role("link", name="Newer ›").click()
    expect(page.locator("tr[data-offset]").first).to_have_attribute("data-offset", "40")
    third = offsets(page.evaluate(ROWS_JS))
    # 40-51, then past the aborted records and their marker to the records after them:
    # the last page, of the 57 records shown.
    assert third[:12] == list(range(40, 52)) and len(third) == 12 + AFTER and third[12] > 54
    expect(page.get_by_role("link", name="Newer ›")).to_have_count(0)

    page.get_by_role("link", name="‹ Older").click()
    expect(page.locator("tr[data-offset]").first).to_have_attribute("data-offset", "20")
    assert offsets(page.evaluate(ROWS_JS)) == list(range(20, 40))

    page.get_by_role("link", name="Newest »").click()
    expect(page.get_by_role("link", name="Newer ›")).to_have_count(0)
    newest = page.evaluate(ROWS_JS)
    assert [json.loads(r["value"]) for r in newest[-AFTER:]] == [{"after": i} for i in range(AFTER)]
    assert len(newest) == 20
    # Back from the newest page over the hidden offsets: a full page, just before it.
    page.get_by_role("link", name="‹ Older").click()
    expect(page.locator("tr[data-offset]").last).to_have_attribute(
        "data-offset", str(newest[0]["offset"] - 1)
    )
    assert len(page.evaluate(ROWS_JS)) == 20
    page.get_by_role("link", name="« Oldest").click()
    expect(page.locator("tr[data-offset]").first).to_have_attribute("data-offset", "0")
    assert len(page.evaluate(ROWS_JS)) == 20
    screenshot(page, "console/records-paged")


def test_from_an_offset_and_from_a_time(page: Page, console_url: str) -> None:
    assert offsets(open_records(page, records_url(console_url, query="from=7&size=3"))) == [
        7,
        8,
        9,
    ]
    # The first record stamped at or after the time; a zone-less time is UTC.
    at = iso(BASE_MS + 10_000)
    assert offsets(open_records(page, records_url(console_url, query=f"from={at}&size=2"))) == [
        10,
        11,
    ]
    between = "2026-01-01T00:00:10.500"
    assert (
        offsets(open_records(page, records_url(console_url, query=f"from={between}&size=1")))[0]
        == 11
    )
    page.get_by_label("From offset or time (UTC)").fill("2100-01-01T00:00:00Z")
    page.get_by_role("button", name="Show").click()
    expect(page.locator('[data-field="range"]')).to_contain_text(
        "No record at or after 2100-01-01T00:00:00Z"
    )
    assert page.evaluate(ROWS_JS) == []


def test_a_large_value_is_cut_and_shown_whole_on_asking(page: Page, console_url: str) -> None:
    url = records_url(console_url, query=f"from={LARGE_OFFSET}&size=1")
    (row,) = open_records(page, url)
    assert row["value"] == "x" * 1024 and "cut" in row["valueNote"]
    page.get_by_role("link", name="show all").click()
    expect(page).to_have_url(re.compile(f"whole={LARGE_OFFSET}"))
    (row,) = page.evaluate(ROWS_JS)
    assert row["value"] == LARGE_VALUE.decode() and "cut" not in row["valueNote"]


def test_a_format_chosen_overrides_the_guess(page: Page, console_url: str) -> None:
    (row,) = open_records(page, records_url(console_url, query="from=0&size=1&value=hex"))
    assert row["valueFormat"] == "hex"
    assert row["value"] == json.dumps({"n": 0, "item": "widget"}).encode().hex(" ")
    (row,) = open_records(page, records_url(console_url, query="from=0&size=1&value=text"))
    assert (row["valueFormat"], row["value"]) == ("text", json.dumps({"n": 0, "item": "widget"}))
    query = f"from={BINARY_OFFSET}&size=1&value=json&headers=text"
    (row,) = open_records(page, records_url(console_url, query=query))
    # Bytes that are no JSON stay hex, and say why.
    assert row["valueFormat"] == "hex" and "not JSON" in row["valueNote"]
    (row,) = open_records(page, records_url(console_url, query="from=0&size=1&headers=hex"))
    assert row["headers"] == {"source": b"browser-test".hex(" "), "trace": "ff 00"}


def test_an_empty_partition_says_so(page: Page, console_url: str) -> None:
    assert open_records(page, records_url(console_url, partition=1)) == []
    expect(page.locator('[data-field="empty"]')).to_have_text(
        "The partition is empty: its log starts and ends at offset 0."
    )


def test_offsets_out_of_range_and_bad_input_are_named(
    page: Page, console_url: str, broker: HerdlessBroker
) -> None:
    succeeded(
        herdless(
            "topics", "delete-records", TOPIC, "--partition", "2",
            "--before", str(DELETED_BEFORE), "-b", broker.bootstrap,
        )
    )  # fmt: skip
    problems = {
        (2, "from=0"): "Offset 0 is out of range: partition 2 of browse-records holds"
        " offsets 4 to 9 (log start offset 4, end offset 10).",
        (2, "from=11"): "Offset 11 is out of range: partition 2 of browse-records holds"
        " offsets 4 to 9 (log start offset 4, end offset 10).",
        (2, "before=2"): "Offset 2 is out of range: partition 2 of browse-records holds"
        " offsets 4 to 9 (log start offset 4, end offset 10).",
        (1, "from=3"): "Offset 3 is out of range: partition 1 of browse-records is empty"
        " (its log starts and ends at 0).",
        (0, "from=-1"): "From is an offset (0 or more) or an ISO time such as"
        " 2026-11-29T08:00:00Z; got '-1'.",
        (0, "from=yesterday"): "From is an offset (0 or more) or an ISO time such as"
        " 2026-11-29T08:00:00Z; got 'yesterday'.",
        (0, "before=abc"): "Before is a whole number, 0 or more; got 'abc'.",
        (0, "from=1&before=9"): "Give where to read from or what to read before, not both.",
        (0, "size=0"): "Size is records a page, 1 to 500; got 0.",
        (0, "size=100000"): "Size is records a page, 1 to 500; got 100000.",
        (0, "isolation=dirty"): "Isolation is read_committed or read_uncommitted; got 'dirty'.",
        (0, "value=base64"): "Value is shown as one of auto, text, json, hex; got 'base64'.",
    }
    for (partition, query), message in problems.items():
        open_records(page, records_url(console_url, partition, query), status=400)
        expect(page.locator('[data-field="message"]')).to_have_text(message)
    # What is left of partition 2 reads from its new log start.
    assert offsets(open_records(page, records_url(console_url, partition=2))) == list(
        range(DELETED_BEFORE, 10)
    )
    open_records(page, records_url(console_url, partition=7), status=404)
    expect(page.locator('[data-field="message"]')).to_have_text(
        "Topic browse-records has no partition 7 (it has 3)."
    )
    open_records(page, f"{console_url}/topics/no-such-topic/partitions/0", status=404)
    expect(page.locator('[data-field="message"]')).to_have_text(
        "The brokers list no topic no-such-topic."
    )
    open_records(page, f"{console_url}/topics/{TOPIC}/partitions/zero", status=400)
    expect(page.locator('[data-field="message"]')).to_have_text(
        "The partition is a whole number, 0 or more; got 'zero'."
    )
    screenshot(page, "console/records-bad-partition")


def test_a_page_stops_once_its_records_hold_page_bytes(
    broker: HerdlessBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_records, "PAGE_BYTES", len(LARGE_VALUE))
    with PartitionReader(broker.bootstrap, TOPIC, 0) as reader:
        forward = reader.from_offset(JSON_RECORDS - 2, 10)
        # Two small records, the binary one, then the large one reaches the bound.
        assert [r.offset for r in forward.records] == [48, 49, BINARY_OFFSET, LARGE_OFFSET]
        assert forward.next_offset == LARGE_OFFSET + 1
        # The next page goes on from there.
        after = reader.from_offset(forward.next_offset, 10).records
        assert [json.loads(r.value or b"") for r in after] == [{"after": i} for i in range(AFTER)]
        # Back from past the large record, the page ends where the bound was reached.
        back = reader.before(LARGE_OFFSET + 1, 20)
        assert back.records[0].offset == LARGE_OFFSET + 1 - 20
        assert back.records[-1].offset == LARGE_OFFSET and back.next_offset == LARGE_OFFSET + 1
