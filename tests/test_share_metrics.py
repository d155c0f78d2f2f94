"""Share groups in the Prometheus endpoint, as a dashboard of a queue reads them: groups
and members by state, each share partition's records in flight (available, acquired),
and counters of records acquired, acknowledged by type, archived by reason, and
released when an acquisition lock ran out."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.support.broker import BrokerProcess, free_port
from tests.test_group_configs import alter
from tests.test_metrics import fill, scrape, value

TOPIC = "tasks"
GROUP = "workers"
LOCK_MS = 1000


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    process = BrokerProcess(
        tmp_path_factory.mktemp("share-metrics") / "data",
        "--metrics-port",
        str(port),
        *("--set", f"group.share.record.lock.duration.ms={LOCK_MS}"),
        *("--set", f"group.share.min.record.lock.duration.ms={LOCK_MS}"),
    ).start()
    yield process, port
    assert process.stop() == 0, process.log_tail()


def received(consumer: ShareConsumer, want: int) -> list[object]:
    messages: list[object] = []
    deadline = time.monotonic() + 30
    while len(messages) < want:
        assert time.monotonic() < deadline, f"received {len(messages)} of {want}"
        messages += [m for m in consumer.poll(0.5) if m.error() is None]
    return messages


def wait_for(port: int, name: str, expected: float, **labels: str) -> None:
    deadline = time.monotonic() + 30
    while (found := value(scrape(port), name, **labels)) != expected:
        assert time.monotonic() < deadline, f"{name}{labels} = {found}, expected {expected}"
        time.sleep(0.2)


def test_share_groups_and_their_records_as_prometheus_reads_them(
    metered: tuple[BrokerProcess, int],
) -> None:
    broker, port = metered
    fill(broker, TOPIC, 1, 10)
    assert alter(broker.bootstrap, GROUP, share_auto_offset_reset="earliest") == "OK"
    config = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": GROUP,
        "share.acknowledgement.mode": "explicit",
    }
    first = ShareConsumer(config)
    first.subscribe([TOPIC])
    try:
        messages = received(first, 10)
        wait_for(port, "herdless_share_groups", 1, state="Stable")
        wait_for(port, "herdless_share_group_members", 1, state="Stable")
        samples = scrape(port)
        assert value(samples, "herdless_group_state", group=GROUP, state="Stable") == 1
        held = {"group": GROUP, "topic": TOPIC, "partition": "0"}
        assert (
            value(samples, "herdless_share_partition_in_flight_records", **held, state="acquired")
            == 10
        )
        for n, message in enumerate(sorted(messages, key=lambda m: m.offset())):
            kind = (
                AcknowledgeType.REJECT
                if n >= 8
                else AcknowledgeType.RELEASE
                if n >= 6
                else AcknowledgeType.ACCEPT
            )
            first.acknowledge(message, kind)
        first.commit_sync()
        # The two released come back; held past their lock, they are released again.
        received(first, 2)
        wait_for(port, "herdless_share_lock_expiries_total", 2, group=GROUP)
    finally:
        first.close()
    samples = scrape(port)
    assert value(samples, "herdless_share_acquired_records_total", group=GROUP) >= 12
    for kind, count in (("accept", 6), ("release", 2), ("reject", 2)):
        assert (
            value(samples, "herdless_share_acknowledged_records_total", group=GROUP, type=kind)
            == count
        )
    assert (
        value(samples, "herdless_share_archived_records_total", group=GROUP, reason="rejected") == 2
    )
    wait_for(port, "herdless_share_groups", 1, state="Empty")
    wait_for(port, "herdless_share_partition_in_flight_records", 2, **held, state="available")
