"""Share groups (KIP-932) on one partition: records per second with 1, 4 and 16 members
when each record takes a millisecond to process, and the broker's CPU per record of
acquire and acknowledge beside a plain consumer group's fetch and commit.

Sharing one partition among members is what share groups are for: a consumer group gives
a partition to one member, so slow records on one partition are processed one at a time
whatever the group's size. The goal: 16 members at least 8 times one member's rate.

**Rate.** For each member count, a fresh topic of one partition; the members, each a
confluent-kafka ShareConsumer in a process of its own (threads would share the GIL), join
the share group and poll until every one has been answered once; then the records are
written, and each member sleeps ``--process-ms`` per record it receives and accepts what
a poll returned at its next poll (implicit acknowledgement). The rate is the records over
the time from the first record written to the last one processed; every record must be
processed, and those delivered more than once are counted.

Each member count runs at each ``--max-poll-records`` (the members' ``max.poll.records``,
which each ShareFetch sends as MaxRecords): 500, librdkafka's default, and 50. A share
partition keeps at most ``group.share.partition.max.record.locks`` records in flight
(2,000, Kafka's default): in Kafka, at 500 a poll no more than four members hold records
at once, however many there are. herdless gives each member fetching a partition at most
an even share of its locks (share_fetch.py), so that sixteen members all have work.

**Cost.** The records are written first; then one reader takes them all with no work per
record, while the broker's CPU seconds (user and system, from /proc) are counted: a share
consumer that acquires and accepts them, and a classic consumer-group member that fetches
them and commits its offset after each batch (``commit(asynchronous=False)``, as a
consumer that acknowledges its work does). Figures are CPU microseconds per record, which
the machine's other load changes far less than a rate.

This prints figures; it is not a timed test.

    python bench/share_groups.py                       # 1, 4, 16 members; cost; 2 rounds
    python bench/share_groups.py --members 1 16 --max-poll-records 50 --rounds 3
    python bench/share_groups.py --only rate
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from rich.console import Console
from rich.table import Table

from peers import SRC_DIR, BrokerError, PhaseError, broker_cpu_seconds, create_topic, herdless

console = Console(width=None if sys.stdout.isatty() else 120)
# Members' processes must not inherit librdkafka's threads: fork would copy a half-made
# client; spawn starts each member clean.
SPAWN = mp.get_context("spawn")
GOAL = 8.0


@dataclass(frozen=True)
class MemberReport:
    """What one member processed: offsets and when it finished its last record."""

    offsets: list[int]
    last_done: float
    errors: list[str]
    polls_with_records: int


def member(
    bootstrap: str,
    group: str,
    topic: str,
    process_ms: float,
    max_poll_records: int | None,
    polled: Any,
    stop: Event,
    reports: Any,
) -> None:
    """One share consumer: join, say so after the first poll, then process until told to
    stop. Runs in a process of its own."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"member-{os.getpid()}",
        # librdkafka warns at every start that its share consumer is a preview.
        "log_level": 3,
    }
    if max_poll_records is not None:
        # What each ShareFetch asks for (MaxRecords): the records acquired at once.
        config["max.poll.records"] = max_poll_records
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    offsets: list[int] = []
    errors: list[str] = []
    last_done = 0.0
    polls_with_records = 0
    first = True
    try:
        while not stop.is_set():
            messages = consumer.poll(0.2)
            if first:
                first = False
                polled.put(os.getpid())
            for message in messages:
                if message.error() is not None:
                    errors.append(str(message.error()))
                    continue
                if process_ms:
                    time.sleep(process_ms / 1000)
                offsets.append(message.offset())
                last_done = time.time()
            if messages:
                polls_with_records += 1
                reports.put(("progress", len(messages)))
        # Accept what the last poll returned before leaving.
        consumer.commit_sync(30)
    except Exception as exc:  # noqa: BLE001 - the parent reports it
        errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        consumer.close()
        reports.put(("done", MemberReport(offsets, last_done, errors, polls_with_records)))


def produce(bootstrap: str, topic: str, records: int, args: argparse.Namespace) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.num.messages": args.batch_records,
        }
    )
    payload = b"x" * args.record_size
    for n in range(records):
        while True:
            try:
                producer.produce(topic, payload, key=str(n).encode(), partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60):
        raise PhaseError("records not acknowledged in time")


def set_earliest(bootstrap: str, group: str) -> None:
    """A new share group starts at the log end; the cost runs read what was written."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        resource = ConfigResource(
            ConfigResourceType.GROUP, group, {"share.auto.offset.reset": "earliest"}
        )
        result = admin.alter_configs([resource], raise_on_unknown=False)
        if str(result["group"][group]) != "OK":
            raise PhaseError(f"cannot set share.auto.offset.reset of {group}: {result}")
    finally:
        admin.close()


@dataclass
class Members:
    """Member processes and the queues they report on."""

    processes: list[Any]
    stop: Event
    reports: Any

    @classmethod
    def started(
        cls,
        bootstrap: str,
        group: str,
        topic: str,
        count: int,
        process_ms: float,
        max_poll_records: int | None,
    ) -> Members:
        polled, reports, stop = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
        processes = [
            SPAWN.Process(
                target=member,
                args=(bootstrap, group, topic, process_ms, max_poll_records, polled, stop, reports),
            )
            for _ in range(count)
        ]
        for process in processes:
            process.start()
        for _ in range(count):
            polled.get(timeout=120)
        return cls(processes, stop, reports)

    def wait_for(self, records: int, timeout: float) -> list[MemberReport]:
        """Until `records` deliveries are processed (or `timeout`): stop the members and
        collect what each did."""
        deadline = time.monotonic() + timeout
        seen = 0
        done: list[MemberReport] = []
        while seen < records and time.monotonic() < deadline:
            try:
                kind, value = self.reports.get(timeout=1)
            except Exception:  # noqa: BLE001 - queue.Empty: check the deadline
                continue
            if kind == "progress":
                seen += value
            else:
                done.append(value)
        self.stop.set()
        while len(done) < len(self.processes):
            kind, value = self.reports.get(timeout=60)
            if kind == "done":
                done.append(value)
        for process in self.processes:
            process.join(30)
        return done


@dataclass(frozen=True)
class RateRun:
    members: int
    max_poll_records: int
    records_per_s: float
    redelivered: int
    busiest_share: float
    records_per_poll: float
    # The broker's CPU seconds per second from the first record written to the members'
    # stop (writing the records included).
    broker_load: float


def rate_run(
    bootstrap: str, members: int, max_poll_records: int, round_no: int, args: argparse.Namespace
) -> RateRun:
    topic = group = f"share-rate-{members}-{round_no}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    group_members = Members.started(
        bootstrap, group, topic, members, args.process_ms, max_poll_records
    )
    # Every member has joined and sent its first ShareFetch; a moment more for the
    # last ones' fetches to be parked at the broker.
    time.sleep(1.0)
    cpu_before = broker_cpu_seconds()
    started = time.time()
    produce(bootstrap, topic, args.records, args)
    expected = args.records
    timeout = expected * args.process_ms / 1000 * 3 + 60
    reports = group_members.wait_for(expected, timeout)
    broker_cpu = broker_cpu_seconds() - cpu_before
    errors = [e for r in reports for e in r.errors]
    if errors:
        raise PhaseError(f"{len(errors)} member errors, the first: {errors[0]}")
    offsets = [o for r in reports for o in r.offsets]
    missing = set(range(expected)) - set(offsets)
    if missing:
        raise PhaseError(f"{len(missing)} records never processed (first {min(missing)})")
    finished = max(r.last_done for r in reports)
    busiest = max(len(r.offsets) for r in reports) / len(offsets)
    per_poll = len(offsets) / max(sum(r.polls_with_records for r in reports), 1)
    return RateRun(
        members,
        max_poll_records,
        expected / (finished - started),
        len(offsets) - len(set(offsets)),
        busiest,
        per_poll,
        broker_cpu / (finished - started),
    )


def share_cost(bootstrap: str, round_no: int, args: argparse.Namespace) -> float:
    """Broker CPU µs per record for a share consumer that acquires and accepts them all."""
    topic = group = f"share-cost-{round_no}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, args.cost_records, args)
    set_earliest(bootstrap, group)
    before = broker_cpu_seconds()
    # librdkafka's own max.poll.records, as the consumer group's reader has its defaults.
    group_members = Members.started(bootstrap, group, topic, 1, 0.0, None)
    reports = group_members.wait_for(args.cost_records, 300)
    spent = broker_cpu_seconds() - before
    got = {o for r in reports for o in r.offsets}
    if len(got) != args.cost_records:
        raise PhaseError(f"share consumer read {len(got)} of {args.cost_records} records")
    return spent / args.cost_records * 1e6


def consumer_group_cost(bootstrap: str, round_no: int, args: argparse.Namespace) -> float:
    """Broker CPU µs per record for a consumer-group member that fetches them and commits
    after each batch."""
    topic = group = f"group-cost-{round_no}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, args.cost_records, args)
    before = broker_cpu_seconds()
    process = SPAWN.Process(
        target=classic_reader, args=(bootstrap, group, topic, args.cost_records)
    )
    process.start()
    process.join(300)
    spent = broker_cpu_seconds() - before
    if process.exitcode != 0:
        raise PhaseError(f"the consumer-group reader exited with {process.exitcode}")
    return spent / args.cost_records * 1e6


def classic_reader(bootstrap: str, group: str, topic: str, records: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    read = 0
    try:
        while read < records:
            messages = consumer.consume(500, 1.0)
            good = [m for m in messages if m.error() is None]
            read += len(good)
            if good:
                consumer.commit(
                    offsets=[TopicPartition(topic, 0, good[-1].offset() + 1)], asynchronous=False
                )
    finally:
        consumer.close()


def rate_table(runs: list[RateRun], max_poll_records: int, args: argparse.Namespace) -> float:
    """Prints the figures of one max.poll.records; returns the most members' rate over one
    member's."""
    runs = [r for r in runs if r.max_poll_records == max_poll_records]
    table = Table(
        title=f"one partition, {args.records} records, {args.process_ms} ms of work each,"
        f" max.poll.records={max_poll_records}"
    )
    columns = (
        "members",
        "records/s (rounds)",
        "× one member",
        "redelivered",
        "busiest member's share",
        "records a poll",
        "broker CPU, % of a core",
    )
    for column in columns:
        table.add_column(column, justify="right")
    counts = sorted({r.members for r in runs})
    one = statistics.median(r.records_per_s for r in runs if r.members == counts[0])
    ratio = 1.0
    for count in counts:
        mine = [r for r in runs if r.members == count]
        rate = statistics.median(r.records_per_s for r in mine)
        ratio = rate / one
        table.add_row(
            str(count),
            f"{rate:,.0f} ({' '.join(f'{r.records_per_s:,.0f}' for r in mine)})",
            f"{ratio:.2f}",
            str(sum(r.redelivered for r in mine)),
            f"{max(r.busiest_share for r in mine):.0%}",
            f"{statistics.median(r.records_per_poll for r in mine):.0f}",
            f"{statistics.median(r.broker_load for r in mine):.0%}",
        )
    console.print(table)
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--records", type=int, default=12_000, help="records per rate run")
    parser.add_argument("--process-ms", type=float, default=1.0, help="work per record")
    parser.add_argument("--cost-records", type=int, default=50_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument(
        "--batch-records", type=int, default=10, help="the producer's batch.num.messages"
    )
    parser.add_argument(
        "--max-poll-records",
        type=int,
        nargs="+",
        default=[50, 500],
        help="the members' max.poll.records, each measured (librdkafka's default: 500)",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=["rate", "cost"])
    parser.add_argument("--set", action="append", default=[], help="broker setting key=value")
    parser.add_argument(
        "--tree", type=Path, help="measure the broker of this checkout (e.g. the tree before)"
    )
    args = parser.parse_args()
    for name in ("members", "max_poll_records"):
        if any(value < 1 for value in getattr(args, name)):
            parser.error(f"--{name.replace('_', '-')} takes counts of 1 or more")
    for name in ("records", "cost_records", "record_size", "batch_records", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be 1 or more")
    if args.process_ms < 0:
        parser.error("--process-ms cannot be negative")
    if args.tree is not None and not (args.tree / "src" / "herdless").is_dir():
        parser.error(f"--tree {args.tree}: no src/herdless there")
    extra = [a for setting in args.set for a in ("--set", setting)]
    with (
        tempfile.TemporaryDirectory(prefix="bench-share-") as tmp,
        herdless(
            Path(tmp), extra, src=SRC_DIR if args.tree is None else args.tree / "src"
        ) as bootstrap,
    ):
        ratios: dict[int, float] = {}
        if args.only != "cost":
            runs = []
            settings = [(m, p) for p in args.max_poll_records for m in args.members]
            for round_no in range(1, args.rounds + 1):
                for count, max_poll in settings if round_no % 2 else settings[::-1]:
                    run = rate_run(bootstrap, count, max_poll, round_no, args)
                    console.print(
                        f"round {round_no}, {count} members, max.poll.records={max_poll}:"
                        f" {run.records_per_s:,.0f} records/s, {run.redelivered} redelivered,"
                        f" busiest {run.busiest_share:.0%}, {run.records_per_poll:.0f} a poll,"
                        f" broker CPU {run.broker_load:.0%}"
                    )
                    runs.append(run)
            for max_poll in args.max_poll_records:
                ratios[max_poll] = rate_table(runs, max_poll, args)
        if args.only != "rate":
            share, classic = [], []
            for round_no in range(1, args.rounds + 1):
                share.append(share_cost(bootstrap, round_no, args))
                classic.append(consumer_group_cost(bootstrap, round_no, args))
                console.print(
                    f"round {round_no}: share {share[-1]:.1f} µs, consumer group"
                    f" {classic[-1]:.1f} µs broker CPU per record"
                )
            table = Table(title=f"broker CPU per record, {args.cost_records} records, one reader")
            for column in ("reader", "µs per record (rounds)"):
                table.add_column(column, justify="right")
            for name, values in (
                ("share: acquire, accept", share),
                ("group: fetch, commit", classic),
            ):
                table.add_row(
                    name,
                    f"{statistics.median(values):.1f} ({' '.join(f'{v:.1f}' for v in values)})",
                )
            console.print(table)
            ratio_cost = statistics.median(share) / statistics.median(classic)
            console.print(f"share / consumer group: {ratio_cost:.2f}")
        for max_poll, ratio in ratios.items():
            reached = "reached" if ratio >= GOAL else "not reached"
            console.print(
                f"goal, {max(args.members)} members ≥ {GOAL:.0f}× one member, at"
                f" max.poll.records={max_poll}: {ratio:.2f}, {reached}"
            )
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (BrokerError, PhaseError) as exc:
        raise SystemExit(f"share_groups.py: {exc}") from None
