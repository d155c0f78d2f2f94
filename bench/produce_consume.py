"""Produce and consume throughput of herdless beside the peer broker tansu.

Each round starts a fresh broker, creates a topic, produces ``--mib`` MiB of
``--record-size`` byte records with confluent-kafka (acks=all, linger.ms=5,
other batching settings left at librdkafka's defaults) and then consumes them
all back from the beginning. Brokers alternate within a run, and their order
flips every round, because absolute figures drift on a shared machine: the
number to read is the herdless/tansu ratio, the median of the per-round ratios.

This prints figures; it is not a timed test.

    python bench/produce_consume.py                 # 256 MiB, 3 rounds each
    python bench/produce_consume.py --mib 64 --markdown
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import confluent_kafka
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from rich.console import Console
from rich.table import Table

from peers import (
    BASELINE,
    PEERS,
    BrokerError,
    PhaseError,
    baseline_peer,
    broker_cpu_seconds,
    create_topic,
)

MIB = 1024 * 1024
# Throughput is reported in MB/s (10**6 bytes of record values per second), the
# unit the project issue asks for; sizes are chosen in MiB.
MB = 1_000_000

# Rich falls back to 80 columns when piped, which wraps the table into
# unreadable cells in logs; a fixed width keeps rows on one line.
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
out_console = Console(width=None if sys.stdout.isatty() else 120)


@dataclass
class Measurement:
    broker: str
    round: int
    produce_mb_s: float | None = None
    consume_mb_s: float | None = None
    # The broker's CPU seconds per GiB of record values, user and system: what the
    # rates above cost it, which the machine's other load does not change.
    produce_cpu_s_per_gib: float | None = None
    consume_cpu_s_per_gib: float | None = None
    records: int = 0
    error: str | None = None


@dataclass
class Settings:
    mib: int
    record_size: int
    partitions: int
    rounds: int
    brokers: list[str]
    timeout: float
    stall: float
    versions: dict[str, str] = field(default_factory=dict)


class Progress:
    """Deadline plus stall detection, so a stuck broker fails a phase quickly.

    A broker that stops answering shows up as no progress; waiting the whole
    phase timeout for it would make a failed run take many minutes.
    """

    def __init__(self, what: str, timeout: float, stall: float) -> None:
        self.what = what
        self.timeout = timeout
        self.stall = stall
        self.start = time.monotonic()
        self.last_value = -1
        self.last_change = self.start

    def check(self, value: int, detail: Callable[[], str] = lambda: "") -> None:
        now = time.monotonic()
        if value != self.last_value:
            self.last_value = value
            self.last_change = now
        if now - self.start > self.timeout:
            raise PhaseError(f"{self.what} not done after {self.timeout:.0f}s {detail()}")
        if now - self.last_change > self.stall:
            raise PhaseError(f"{self.what} made no progress for {self.stall:.0f}s {detail()}")


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    record_size: int,
    timeout: float,
    stall: float,
    client: Mapping[str, str] | None = None,
) -> float:
    """Produce ``count`` records and return seconds until all were acknowledged.
    ``client``: more librdkafka settings (a secured listener's, bench/security.py)."""
    payload = os.urandom(record_size)
    client_errors: list[str] = []
    producer = Producer(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            # librdkafka retries until message.timeout.ms; bound it by the phase
            # so a broken broker yields failed deliveries instead of a hang.
            "message.timeout.ms": int(timeout * 1000),
            "error_cb": lambda err: client_errors.append(str(err)),
        }
    )
    delivered = 0
    failed = 0
    first_failure: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered, failed
        if err is None:
            delivered += 1
        else:
            failed += 1
            if not first_failure:
                first_failure.append(str(err))

    def detail() -> str:
        return (
            f"(acknowledged {delivered}/{count}, failed {failed}, "
            f"client errors: {client_errors[-3:]})"
        )

    progress = Progress("produce", timeout, stall)
    try:
        start = time.perf_counter()
        for sent in range(count):
            while True:
                try:
                    producer.produce(topic, payload, on_delivery=on_delivery)
                    break
                except BufferError:
                    # The local queue is full: wait for acknowledgements.
                    producer.poll(0.05)
                    progress.check(delivered + failed, detail)
            if sent % 1024 == 0:
                producer.poll(0)
        while delivered + failed < count:
            producer.poll(0.1)
            progress.check(delivered + failed, detail)
        elapsed = time.perf_counter() - start
    except BaseException:
        # Drop what is still queued so destroying the producer does not block.
        producer.purge()
        producer.flush(0)
        raise
    if failed:
        raise PhaseError(f"{failed} of {count} records failed, first: {first_failure[0]}")
    return elapsed


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    count: int,
    timeout: float,
    stall: float,
    client: Mapping[str, str] | None = None,
) -> tuple[float, int]:
    """Read ``count`` records from the start of every partition.

    Returns the seconds taken and the number of value bytes read. Partitions are
    assigned directly rather than subscribed, so the figure is fetch throughput
    without group rebalancing in it; librdkafka still wants a group.id.
    """
    consumer = Consumer(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # When its queue of fetched records is full (the application reads them more
            # slowly than a broker delivers), librdkafka stops fetching for this long,
            # 1 s by default: with a fast broker the phase measured that pause.
            "fetch.queue.backoff.ms": 10,
        }
    )
    received = 0
    value_bytes = 0
    errors: list[str] = []

    def detail() -> str:
        return f"(received {received}/{count}, errors: {errors[-3:]})"

    try:
        # Offset 0 rather than OFFSET_BEGINNING: a fresh topic starts at 0, and
        # the logical offset costs a ListOffsets round that added ~0.5 s against
        # tansu; auto.offset.reset still covers a broker whose log starts later.
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        progress = Progress("consume", timeout, stall)
        start = time.perf_counter()
        while received < count:
            # consume() waits for the full batch or the timeout, so never ask
            # for more than remain or the last call idles until its timeout.
            batch = min(10_000, count - received)
            for msg in consumer.consume(num_messages=batch, timeout=0.5):
                err = msg.error()
                if err is not None:
                    # Transient errors are retried by librdkafka; keep them for
                    # the report in case the phase then stalls.
                    errors.append(str(err))
                    if err.fatal():
                        raise PhaseError(f"consume failed: {err}")
                    continue
                received += 1
                value_bytes += len(msg.value() or b"")
            progress.check(received, detail)
        elapsed = time.perf_counter() - start
        # A broker serving some records twice would reach the count early;
        # positions summing to the count show every offset was read once.
        positions = consumer.position(consumer.assignment())
        next_offsets = sum(max(tp.offset, 0) for tp in positions)
        if next_offsets != count:
            raise PhaseError(
                f"read {received} records but partition positions sum to {next_offsets}"
            )
    finally:
        consumer.close()
    return elapsed, value_bytes


def run_one(name: str, round_no: int, settings: Settings) -> Measurement:
    result = Measurement(broker=name, round=round_no)
    count = settings.mib * MIB // settings.record_size
    topic = f"bench-{round_no}"
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        try:
            with PEERS[name](Path(tmp)) as bootstrap:
                create_topic(bootstrap, topic, settings.partitions, settings.stall)
                gib = settings.mib / 1024
                cpu = broker_cpu_seconds()
                seconds = produce(
                    bootstrap,
                    topic,
                    count,
                    settings.record_size,
                    settings.timeout,
                    settings.stall,
                )
                result.produce_mb_s = count * settings.record_size / seconds / MB
                result.produce_cpu_s_per_gib = (broker_cpu_seconds() - cpu) / gib
                result.records = count
                cpu = broker_cpu_seconds()
                seconds, value_bytes = consume(
                    bootstrap, topic, settings.partitions, count, settings.timeout, settings.stall
                )
                result.consume_mb_s = value_bytes / seconds / MB
                result.consume_cpu_s_per_gib = (broker_cpu_seconds() - cpu) / gib
        except (BrokerError, PhaseError, KafkaException) as exc:
            result.error = f"{type(exc).__name__}: {exc}"
    return result


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def paired_ratios(
    results: list[Measurement], attr: str, num: str = "herdless", den: str = "tansu"
) -> list[float]:
    """Per-round num/den ratios: pairing rounds cancels drift between rounds."""
    by_round: dict[int, dict[str, float]] = {}
    for r in results:
        value = getattr(r, attr)
        if value is not None:
            by_round.setdefault(r.round, {})[r.broker] = value
    return [v[num] / v[den] for v in by_round.values() if num in v and den in v and v[den] > 0]


def fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def summary_rows(results: list[Measurement], brokers: list[str]) -> list[list[str]]:
    rows: list[list[str]] = []
    for name in brokers:
        mine = [r for r in results if r.broker == name]
        prod = [r.produce_mb_s for r in mine if r.produce_mb_s is not None]
        cons = [r.consume_mb_s for r in mine if r.consume_mb_s is not None]
        prod_cpu = [r.produce_cpu_s_per_gib for r in mine if r.produce_cpu_s_per_gib is not None]
        cons_cpu = [r.consume_cpu_s_per_gib for r in mine if r.consume_cpu_s_per_gib is not None]
        rows.append(
            [
                name,
                fmt(median_or_none(prod)),
                " ".join(fmt(v) for v in prod) or "failed",
                fmt(median_or_none(cons)),
                " ".join(fmt(v) for v in cons) or "failed",
                f"{fmt(median_or_none(prod_cpu), 2)} / {fmt(median_or_none(cons_cpu), 2)}",
            ]
        )
    if "tansu" in brokers:
        # Each herdless tree against tansu: the working tree's, and the baseline's if any.
        for name in (b for b in brokers if b != "tansu"):
            prod_r = paired_ratios(results, "produce_mb_s", num=name)
            cons_r = paired_ratios(results, "consume_mb_s", num=name)
            rows.append(
                [
                    f"{name} / tansu",
                    fmt(median_or_none(prod_r), 3),
                    " ".join(fmt(v, 3) for v in prod_r) or "—",
                    fmt(median_or_none(cons_r), 3),
                    " ".join(fmt(v, 3) for v in cons_r) or "—",
                    "",
                ]
            )
    return rows


HEADERS = [
    "broker",
    "produce MB/s",
    "produce rounds",
    "consume MB/s",
    "consume rounds",
    "broker CPU s/GiB (produce / consume)",
]


def print_table(rows: list[list[str]], settings: Settings) -> None:
    table = Table(
        title=(
            f"{settings.mib} MiB of {settings.record_size} B records, acks=all, "
            f"{settings.partitions} partitions, {settings.rounds} rounds"
        ),
        caption=(
            "MB/s: median, 10^6 bytes of record values per second; "
            "herdless / tansu: median of per-round ratios; "
            "broker CPU: median seconds per GiB of record values"
        ),
    )
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row, style="bold" if "/" in row[0] else None)
    out_console.print(table)


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" + "---:|" * (len(HEADERS) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB to produce per round")
    parser.add_argument("--record-size", type=int, default=1024, help="bytes per record value")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per broker")
    parser.add_argument(
        "--brokers",
        nargs="+",
        choices=sorted(PEERS),
        default=["herdless", "tansu"],
        help="brokers to run, alternating",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a produce or consume may take"
    )
    parser.add_argument(
        "--stall", type=float, default=60.0, help="seconds without progress before giving up"
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="keep running a broker's later rounds after one failed",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also run herdless from this checkout of an earlier commit, as herdless-base",
    )
    parser.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    parser.add_argument("--json", type=Path, help="write every measurement to this file")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        PEERS[BASELINE] = baseline_peer(args.baseline)
        args.brokers.append(BASELINE)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(
        mib=args.mib,
        record_size=args.record_size,
        partitions=args.partitions,
        rounds=args.rounds,
        brokers=list(dict.fromkeys(args.brokers)),
        timeout=args.timeout,
        stall=args.stall,
        versions={
            "python": sys.version.split()[0],
            "confluent-kafka": str(confluent_kafka.__version__),
            "librdkafka": confluent_kafka.libversion()[0],
        },
    )
    results: list[Measurement] = []
    given_up: set[str] = set()
    for round_no in range(1, settings.rounds + 1):
        # Flip the order each round so neither broker always runs on a machine
        # just warmed (or loaded) by the other.
        order = settings.brokers if round_no % 2 else settings.brokers[::-1]
        for name in order:
            if name in given_up:
                continue
            err_console.log(f"round {round_no}: {name} ...")
            m = run_one(name, round_no, settings)
            results.append(m)
            if m.error:
                err_console.log(f"[red]round {round_no}: {name} failed[/red]: {m.error}")
                if not args.keep_going:
                    err_console.log(f"skipping {name}'s remaining rounds (see --keep-going)")
                    given_up.add(name)
            else:
                err_console.log(
                    f"round {round_no}: {name} produce {m.produce_mb_s:.1f} MB/s, "
                    f"consume {m.consume_mb_s:.1f} MB/s"
                )

    rows = summary_rows(results, settings.brokers)
    print_table(rows, settings)
    failures = [m for m in results if m.error]
    for m in failures:
        out_console.print(f"[red]{m.broker} round {m.round} failed:[/red] {m.error}")
    if args.markdown:
        out_console.print(markdown_table(rows), markup=False, highlight=False, soft_wrap=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"settings": asdict(settings), "results": [asdict(m) for m in results]},
                indent=2,
            )
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
