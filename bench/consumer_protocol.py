"""Rebalancing under the two group protocols, side by side on one herdless broker.

Real confluent-kafka consumers, one thread each, consume a topic that a
producer keeps writing to every partition. The group forms, then one member
joins and one leaves. For each event the script prints how long until every
member holds its final assignment (the partitions are split with no overlap
and nothing changes for `--quiet` seconds) and how long the members that were
there before the event and stay went without a record: for each of them, the
longest time between two records it received from the event until the group
was seen settled (the quiet period included), beside the longest such gap in a
window as long just before the event, when nothing happened (`--steady`
seconds of it). Records reach a consumer in bursts, a fetch at a time, so on a
busy machine a consumer goes a few hundred milliseconds without one in steady
state too: only the gap beyond its quiet window is the event's doing.

    python bench/consumer_protocol.py                          # 10 members, 900 partitions
    python bench/consumer_protocol.py --members 30 --partitions 300
    python bench/consumer_protocol.py --protocols consumer     # one protocol only

`classic` is librdkafka's default eager assignors (every member stops for the
rebalance); `classic-cooperative` uses cooperative-sticky; `consumer` is
KIP-848 (`group.protocol=consumer`) with the broker's uniform assignor.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from rich.console import Console
from rich.table import Table

from herdless.testing import HerdlessBroker

PROTOCOLS: dict[str, dict[str, str]] = {
    "classic": {"group.protocol": "classic"},
    "classic-cooperative": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
    },
    "consumer": {"group.protocol": "consumer"},
}
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
}


@dataclass
class Member:
    """One consumer in its own thread: what it holds and when it last received a record."""

    name: str
    config: dict[str, Any]
    topic: str
    assignment: frozenset[int] = frozenset()
    received: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        consumer = Consumer(self.config)
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                for message in consumer.consume(500, timeout=0.05):
                    if message.error() is None:
                        self.received.append(time.monotonic())
                self.assignment = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()  # leaves the group
            self.assignment = frozenset()

    def leave(self) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(60)

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time without a record between `start` and `end`."""
        times = [start, *(t for t in self.received if start < t < end), end]
        return max(b - a for a, b in zip(times, times[1:], strict=False))


def settle(members: list[Member], partitions: int, quiet_s: float, timeout_s: float) -> float:
    """Seconds until the members' assignments split every partition with no overlap and
    stay unchanged for `quiet_s`, every member holding some; the time returned is when
    they first did so."""
    started = time.monotonic()
    since: float | None = None
    last: tuple[frozenset[int], ...] = ()
    while time.monotonic() - started < timeout_s:
        now = time.monotonic()
        held = tuple(m.assignment for m in members)
        # Every member holds a share (there are more partitions than members), and
        # together they hold every partition once.
        split = (
            all(held)
            and sum(len(h) for h in held) == partitions
            and len(frozenset().union(*held)) == partitions
        )
        if split and held == last:
            if since is not None and now - since >= quiet_s:
                return since - started
        else:
            since = now if split else None
        last = held
        time.sleep(0.02)
    raise TimeoutError(f"the group did not settle within {timeout_s:.0f} s")


def keep_producing(
    bootstrap: str, topic: str, partitions: int, rate: int, stop: threading.Event
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    sent = 0
    started = time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        try:
            while sent < due:
                producer.produce(topic, b"x" * 64, partition=sent % partitions)
                sent += 1
        except BufferError:
            # A broker slower than the rate (a loaded machine) fills the client's queue: the
            # records wait for room rather than the producer dying, and catch up after.
            pass
        producer.poll(0.01)
    producer.flush(10)


@dataclass
class Gaps:
    """Over the members that stay: the longest gap during the event, the longest in the
    quiet window before it, and how far each member's event gap went beyond its own quiet
    one (the most, and the median)."""

    during_s: float
    quiet_s: float
    beyond_quiet_max_s: float
    beyond_quiet_median_s: float


@dataclass
class EventResult:
    protocol: str
    event: str
    settle_s: float
    gaps: Gaps | None  # None when no member was there before the event


def compare_with_quiet(
    stayers: list[Member], started: float, ended: float, quiet_since: float
) -> Gaps | None:
    """The event's gaps beside each staying member's own over a window as long just before
    the event, or as much of it as was quiet (after `quiet_since`)."""
    if not stayers:
        return None
    during = [m.longest_pause(started, ended) for m in stayers]
    window_start = max(started - (ended - started), quiet_since)
    quiet = [m.longest_pause(window_start, started) for m in stayers]
    beyond = [d - q for d, q in zip(during, quiet, strict=True)]
    return Gaps(max(during), max(quiet), max(beyond), statistics.median(beyond))


def run_protocol(
    protocol: str, bootstrap: str, topic: str, args: argparse.Namespace, results: list[EventResult]
) -> None:
    """The protocol's events, each added to `results` as it ends; on a loaded machine a
    group may not settle in time (TimeoutError), and what came before is kept."""
    group = f"bench-{protocol}-{time.monotonic_ns()}"

    def member(i: int) -> Member:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "latest",
            "enable.auto.commit": True,
            "log_level": 3,
            **PROTOCOLS[protocol],
        }
        if PROTOCOLS[protocol]["group.protocol"] == "classic":
            config["session.timeout.ms"] = 10_000
        return Member(f"{protocol}-{i}", config, topic)

    members = [member(i) for i in range(args.members)]
    newcomer = member(args.members)
    quiet_since = time.monotonic()

    def event(name: str, change: Callable[[], list[Member]], stayers: list[Member]) -> None:
        nonlocal quiet_since
        started = time.monotonic()
        now_members = change()
        took = settle(now_members, args.partitions, args.quiet, args.timeout)
        # Up to the end of the quiet period that proved the group settled: a member that
        # changed its assignment last may resume fetching only then.
        ended = time.monotonic()
        results.append(
            EventResult(
                protocol, name, took, compare_with_quiet(stayers, started, ended, quiet_since)
            )
        )
        # Steady consumption before the next event: the window its gaps are compared with.
        quiet_since = time.monotonic()
        time.sleep(args.steady)

    def form() -> list[Member]:
        for m in members:
            m.start()
        return members

    def join() -> list[Member]:
        newcomer.start()
        return [*members, newcomer]

    leaver = members[0]

    def leave() -> list[Member]:
        leaver.leave()
        return [*members[1:], newcomer]

    try:
        event(f"{args.members} members form the group", form, [])
        event("a member joins", join, list(members))
        event("a member leaves", leave, [*members[1:], newcomer])
    finally:
        started = [m for m in [*members, newcomer] if m.thread is not None]
        for m in started:
            m.stop.set()
        for m in started:
            assert m.thread is not None
            m.thread.join(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=900)
    parser.add_argument("--rate", type=int, default=3000, help="records/s produced")
    parser.add_argument("--quiet", type=float, default=3.0, help="s unchanged = settled")
    parser.add_argument(
        "--steady", type=float, default=10.0, help="s of steady consumption before an event"
    )
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS)
    args = parser.parse_args()
    console = Console(width=120)
    results: list[EventResult] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        HerdlessBroker(Path(tmp) / "data", BROKER_SETTINGS) as broker,
    ):
        for protocol in args.protocols:
            topic = f"bench-{protocol}"
            broker.create_topic(topic, args.partitions)
            stop = threading.Event()
            producer = threading.Thread(
                target=keep_producing,
                args=(broker.bootstrap, topic, args.partitions, args.rate, stop),
                daemon=True,
            )
            producer.start()
            try:
                with console.status(f"{protocol}: {args.members} members"):
                    run_protocol(protocol, broker.bootstrap, topic, args, results)
            except TimeoutError as exc:
                results.append(EventResult(protocol, str(exc), math.nan, None))
            finally:
                stop.set()
                producer.join(30)
    table = Table(
        title=f"{args.members} members, {args.partitions} partitions, {args.rate} records/s"
    )
    columns = (
        "protocol",
        "event",
        "settled after s",
        "longest gap s",
        "quiet gap s",
        "beyond quiet max s",
        "beyond quiet median s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("protocol", "event") else "right")
    for r in results:
        g = r.gaps
        shown = (
            [""] * 4
            if g is None
            else [
                f"{s:.2f}"
                for s in (g.during_s, g.quiet_s, g.beyond_quiet_max_s, g.beyond_quiet_median_s)
            ]
        )
        settled = "" if math.isnan(r.settle_s) else f"{r.settle_s:.2f}"
        table.add_row(r.protocol, r.event, settled, *shown)
    console.print(table)


if __name__ == "__main__":
    main()
