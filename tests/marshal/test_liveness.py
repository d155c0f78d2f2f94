"""Heartbeats on time, released partitions taken up at once, and a consumer cut off
from the log stopping in time.

Consumers against a real broker. In the first test they run in their own processes
(runner.py) with records arriving all the time, so that each caller's thread is
inside the fetcher whenever the coordination needs the broker; the log's timestamps
(the broker's clock) are what every other consumer judges a claim by, so the gaps
are measured there.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Producer

from herdless.marshal import Batch, Marshaler
from herdless.marshal.consumer import METADATA_REFRESH_S
from herdless.marshal.messages import Kind, Message
from tests.marshal.cluster import (
    COORDINATION_PARTITIONS,
    Runner,
    create_topic,
    history,
    owners,
    state,
    stop_all,
    wait_for,
)
from tests.support.broker import BrokerProcess

INTERVAL_S = 2.0
# Heartbeats go out every interval/2 and a claim goes stale after two intervals. A
# gap of at most one interval plus this margin (a coordination round trip and the
# scheduling of a busy 2-core machine) leaves a whole interval before anyone may
# take a partition over. A released partition is claimed by the next claim cycle
# (every interval/4) of a consumer that wants it; the same bound holds for it.
MARGIN_S = 0.5
BOUND_MS = (INTERVAL_S + MARGIN_S) * 1000


@contextlib.contextmanager
def producing(bootstrap: str, topic: str, partitions: int) -> Iterator[None]:
    """About 200 records a second into every partition of topic, until the block ends."""
    stop = threading.Event()

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        sent = 0
        while not stop.wait(0.005):
            producer.produce(topic, value=str(sent).encode(), partition=sent % partitions)
            producer.poll(0)
            sent += 1
        producer.flush(10)

    thread = threading.Thread(target=run, name="producing", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(15)


def gaps(times: list[int]) -> list[int]:
    return [later - earlier for earlier, later in zip(times, times[1:], strict=False)]


def heartbeat_gaps(log: list[tuple[int, Message]], client: str) -> list[int]:
    """The gaps between a client's messages that keep each of its claims alive: from
    the claim through every heartbeat to the release."""
    found = []
    last: dict[int, int] = {}
    for at, message in log:
        if message.client_id != client:
            continue
        if message.kind is Kind.CLAIMING_PARTITION:
            last[message.partition] = at
        elif message.kind in (Kind.HEARTBEAT, Kind.RELEASING_PARTITION):
            if message.partition in last:
                found.append(at - last[message.partition])
            if message.kind is Kind.HEARTBEAT:
                last[message.partition] = at
            else:
                del last[message.partition]
    return found


def test_heartbeats_keep_their_interval_and_a_released_partition_is_taken_at_once(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    group, topic = "busy-g", "busy"
    create_topic(broker.bootstrap, topic, 4, 0)
    with producing(broker.bootstrap, topic, 4):
        runners = {
            c: Runner(broker.bootstrap, tmp_path, group, topic, c, interval=INTERVAL_S)
            for c in "ab"
        }
        try:
            wait_for(
                "a 2/2 split",
                lambda: (
                    Counter(owners(state(broker.bootstrap), group).values()) == {"a": 2, "b": 2}
                ),
                60,
            )
            # Past the consumers' first re-read of the partitions of their topic.
            time.sleep(METADATA_REFRESH_S + INTERVAL_S)
            # a leaves gracefully, releasing its two partitions; b is to take them.
            runners["a"].terminate()
            assert runners["a"].process.wait(30) == 0, runners["a"].log()
            wait_for(
                "b holding all four",
                lambda: Counter(owners(state(broker.bootstrap), group).values()) == {"b": 4},
                30,
            )
        finally:
            codes = stop_all(list(runners.values()))
    assert codes == [0, 0], runners["b"].log()

    log = [(at, m) for at, m in history(broker.bootstrap) if m.group_id == group]
    for client in "ab":
        present = [at for at, m in log if m.client_id == client and m.kind is Kind.PRESENT]
        assert max(gaps(present)) <= BOUND_MS, f"{client}'s Present gaps (ms): {gaps(present)}"
        beats = heartbeat_gaps(log, client)
        print(f"{client}: longest gap {max(gaps(present))} ms between Presents, {max(beats)} ms")
        assert max(beats) <= BOUND_MS, f"{client}'s heartbeat gaps (ms): {beats}"

    released = [
        (at, m.partition)
        for at, m in log
        if m.client_id == "a" and m.kind is Kind.RELEASING_PARTITION
    ]
    assert len(released) >= 2
    for released_at, partition in released:
        taken_at = next(
            (
                at
                for at, m in log
                if m.client_id == "b"
                and m.kind is Kind.CLAIMING_PARTITION
                and m.partition == partition
                and at >= released_at
            ),
            None,
        )
        print(
            f"partition {partition} taken {taken_at - released_at} ms after its release"
            if taken_at is not None
            else f"partition {partition} never taken"
        )
        assert taken_at is not None, f"partition {partition} released at {released_at}, never taken"
        assert taken_at - released_at <= BOUND_MS, (
            f"partition {partition} released at {released_at}, taken at {taken_at}"
        )


def test_a_consumer_that_cannot_heartbeat_pauses_within_an_interval_and_resumes(
    own_broker: BrokerProcess,
) -> None:
    """Go Marshal's rule: a consumer whose own heartbeats have not got through for
    an interval stops consuming, an interval before anyone may take over."""
    bootstrap = own_broker.bootstrap
    interval = 1.0
    # Far more than one fetch brings: the consumer has records in hand when cut off.
    create_topic(bootstrap, "cut", 2, 20_000)
    with Marshaler(bootstrap, coordination_partitions=COORDINATION_PARTITIONS) as marshaler:
        consumer = marshaler.consumer(
            "cut-g", ["cut"], "cut-1", heartbeat_interval=interval, max_batch=10
        )
        wait_for("both partitions held", lambda: len(consumer.held()) == 2, 30, every=0.1)
        handed: dict[int, int] = {}

        def work(batch: Batch) -> None:
            assert batch.records[0].offset == handed.get(batch.partition, -1) + 1, (
                f"partition {batch.partition} resumed at {batch.records[0].offset}, "
                f"after {handed.get(batch.partition)}"
            )
            handed[batch.partition] = batch.last_offset
            time.sleep(0.05)  # processing: what is in hand lasts well past the cut

        def take(timeout: float) -> bool:
            batch = consumer.poll(timeout)
            if batch is not None:
                work(batch)
            return batch is not None

        wait_for("a batch", lambda: take(0.5), 30)
        own_broker.kill()  # no heartbeat gets through from now on
        cut_at = time.monotonic()
        last_batch_at = None
        while time.monotonic() < cut_at + 4 * interval:
            if take(0.1):
                last_batch_at = time.monotonic()
        assert last_batch_at is not None, "nothing consumed from what was fetched before"
        print(f"last batch {last_batch_at - cut_at:.2f} s after the cut")
        assert last_batch_at - cut_at <= interval + MARGIN_S

        # Nobody claimed meanwhile: the next heartbeat renews the claims, and consuming
        # goes on where it paused (work() checks), not from the claims' start.
        own_broker.restart()
        before = dict(handed)
        wait_for(
            "consuming again",
            lambda: take(0.5) and any(handed.get(p, -1) > before.get(p, -1) for p in (0, 1)),
            60,
            every=0,
        )
