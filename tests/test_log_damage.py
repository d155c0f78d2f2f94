"""A broker over damaged partition files: a file it cannot use stops the start with one line
naming it; a damaged index is rebuilt; missing or corrupt records are reported (a log
line, a metric) and answered CORRUPT_MESSAGE, never served as sound. The scrubber finds
what the start does not look at: a sealed batch that no longer matches its CRC."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka.protocol.consumer import FetchResponse

from herdless.protocol.records import iter_batches
from tests.support.broker import BrokerProcess, free_port
from tests.support.wire import Wire
from tests.test_data_path import batch, create_topic, fetch_request, produce_raw
from tests.test_metrics import scrape, value

TOPIC = "kept"
RECORDS = 60
NONE, CORRUPT_MESSAGE = 0, 2


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory, cleanly shut down, whose partition has several sealed segments."""
    broker = BrokerProcess(tmp_path_factory.mktemp("pristine") / "data").start()
    try:
        create_topic(broker, TOPIC, **{"segment.bytes": "2048", "index.interval.bytes": "256"})
        wire = Wire(broker)
        for n in range(RECORDS):
            assert produce_raw(wire, TOPIC, batch([b"record-%03d" % n * 8])).error_code == NONE
        wire.close()
    finally:
        assert broker.stop() == 0, broker.log_tail()
    assert len(list((broker.data_dir / f"{TOPIC}-0").glob("*.log"))) >= 5
    return broker.data_dir


@pytest.fixture
def data(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(pristine, copy)
    return copy


def segment(data: Path, n: int, suffix: str = ".log") -> Path:
    return sorted((data / f"{TOPIC}-0").glob("*.log"))[n].with_suffix(suffix)


def base_of(path: Path) -> int:
    return int(path.name.split(".")[0])


def refusal(data: Path, prefix: tuple[str, ...] = ()) -> str:
    """The one error line of a broker that will not start on `data`."""
    command = [*prefix, sys.executable, "-m", "herdless", "serve", "--port", "0"]
    result = subprocess.run(
        [*command, "--data-dir", str(data)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "listening" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def unreadable(path: Path) -> tuple[str, ...]:
    """Make `path` unreadable to the broker; returns what to run it under for that."""
    path.chmod(0)
    if os.geteuid() != 0:
        return ()
    # Root reads anything: run the broker without the capabilities that let it.
    return ("setpriv", "--bounding-set=-dac_override,-dac_read_search", "--")


def test_a_file_the_broker_cannot_use_stops_the_start_naming_it(data: Path) -> None:
    middle = segment(data, 2)
    middle.unlink()
    middle.mkdir()
    assert refusal(data) == (
        f"error: cannot open the log of {TOPIC}-0: {middle} is a directory, not a file"
    )
    middle.rmdir()
    middle.symlink_to(data / "moved-away.log")
    assert refusal(data) == (
        f"error: cannot open the log of {TOPIC}-0: {middle} is a symbolic link to"
        f" {data / 'moved-away.log'}, which does not exist"
    )


def test_an_unreadable_segment_stops_the_start_naming_it(data: Path) -> None:
    middle = segment(data, 2)
    prefix = unreadable(middle)
    assert refusal(data, prefix) == (
        f"error: cannot open the log of {TOPIC}-0: {middle} cannot be read or written:"
        " Permission denied"
    )


def test_a_log_file_not_named_by_an_offset_stops_the_start_naming_it(data: Path) -> None:
    stray = data / f"{TOPIC}-0" / "00000000000000000007-copy.log"
    shutil.copy(segment(data, 1), stray)
    assert refusal(data) == (
        f"error: cannot open the log of {TOPIC}-0: {stray} is not named as a segment is"
        " (its base offset in 20 digits, then .log)"
    )


def fetch(wire: Wire, offset: int) -> tuple[int, list[int]]:
    """(error code, offsets of the batches) of a fetch of partition 0 at `offset`."""
    request = fetch_request(TOPIC, {0: offset}, max_wait_ms=0, min_bytes=0)
    answer = wire.call(request, FetchResponse).responses[0].partitions[0]
    return answer.error_code, [h.base_offset for _, h in iter_batches(answer.records or b"")]


def read_all(wire: Wire, start: int) -> tuple[list[int], int]:
    """Fetch from `start` on as a consumer does: the offsets read, and the error code
    that ended the reading (NONE: the end of the log)."""
    offsets: list[int] = []
    while True:
        code, found = fetch(wire, start)
        if code != NONE or not found:
            return offsets, code
        offsets += found
        start = found[-1] + 1


@pytest.fixture
def started() -> Iterator[Callable[..., BrokerProcess]]:
    brokers: list[BrokerProcess] = []

    def start(data: Path, *args: str) -> BrokerProcess:
        brokers.append(BrokerProcess(data, *args).start())
        return brokers[-1]

    yield start
    for broker in brokers:
        broker.kill()


def test_a_damaged_index_is_rebuilt_and_everything_served(
    data: Path, started: Callable[..., BrokerProcess]
) -> None:
    index = segment(data, 2, ".index")
    index.write_bytes(os.urandom(len(index.read_bytes()) or 64))
    broker = started(data)
    wire = Wire(broker)
    assert read_all(wire, 0) == (list(range(RECORDS)), NONE)
    wire.close()
    assert f"{index.name}" in broker.log() and "rebuilding the indexes" in broker.log()


def test_a_missing_segment_is_reported_and_never_skipped_over(
    data: Path, started: Callable[..., BrokerProcess]
) -> None:
    middle = segment(data, 2)
    first, end = base_of(middle), base_of(segment(data, 3))
    for suffix in (".log", ".index", ".timeindex"):
        middle.with_suffix(suffix).unlink()
    port = free_port()
    broker = started(data, "--metrics-port", str(port))
    assert f"offsets {first}..{end - 1} of {TOPIC}-0 are missing from every segment" in broker.log()
    wire = Wire(broker)
    # A consumer reads up to the gap, is told CORRUPT_MESSAGE there, and past it reads on.
    assert read_all(wire, 0) == (list(range(first)), CORRUPT_MESSAGE)
    assert fetch(wire, end - 1) == (CORRUPT_MESSAGE, [])
    assert read_all(wire, end) == (list(range(end, RECORDS)), NONE)
    wire.close()
    damaged = value(scrape(port), "herdless_partition_damaged_offsets", topic=TOPIC, partition="0")
    assert damaged == end - first


def flip_a_record_byte(path: Path, n: int) -> int:
    """Spoil the n-th batch's record (not its header): its CRC fails. Returns its offset."""
    data = bytearray(path.read_bytes())
    position, header = list(iter_batches(bytes(data)))[n]
    data[position + header.size - 5] ^= 0xFF
    path.write_bytes(bytes(data))
    return header.base_offset


def test_the_scrubber_finds_a_batch_that_no_longer_matches_its_crc(
    data: Path, started: Callable[..., BrokerProcess]
) -> None:
    spoiled = flip_a_record_byte(segment(data, 2), 4)
    port = free_port()
    broker = started(
        data,
        *("--metrics-port", str(port)),
        *("--set", "log.scrubber.bytes.per.second=1000000"),
    )
    wire = Wire(broker)
    found = f"offsets {spoiled}..{spoiled} of {TOPIC}-0 are in a batch that fails its CRC"
    deadline = time.monotonic() + 20
    while found not in broker.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found in broker.log()
    assert [line for line in broker.log().splitlines() if "fails its CRC" in line] == [
        line for line in broker.log().splitlines() if found in line
    ]
    assert read_all(wire, 0) == (list(range(spoiled)), CORRUPT_MESSAGE)
    assert read_all(wire, spoiled + 1) == (list(range(spoiled + 1, RECORDS)), NONE)
    wire.close()
    samples = scrape(port)
    assert value(samples, "herdless_partition_damaged_offsets", topic=TOPIC, partition="0") == 1
    scrubbed = value(samples, "herdless_log_scrubbed_bytes_total")
    assert scrubbed is not None and scrubbed > 0
    # A real client is told, at that offset, rather than handed the batch.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader"})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    offsets, errors = [], []
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        for message in consumer.consume(100, timeout=0.2):
            if message.error() is None:
                offsets.append(message.offset())
            else:
                errors.append(message.error())
    consumer.close()
    assert offsets == list(range(spoiled))
    assert errors and errors[0].code() == CORRUPT_MESSAGE, errors
    # Known across a restart, before any scrubbing.
    assert broker.stop() == 0
    broker = started(data, "--set", "log.scrubber.enable=false")
    wire = Wire(broker)
    assert fetch(wire, spoiled) == (CORRUPT_MESSAGE, [])
    wire.close()
    assert "Traceback" not in broker.log()
