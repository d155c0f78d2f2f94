"""Transactional produce beside idempotent produce, and EndTxn latency, herdless beside
the peer broker tansu.

Each round starts a fresh broker and, with confluent-kafka (acks=all, linger.ms=5):
produces ``--records`` records of ``--record-size`` bytes idempotently; produces as
many again inside transactions of 100 records and of 10,000 records (one commit each);
and commits ``--commits`` transactions of one record each, timing commit_transaction()
(EndTxn and the markers it waits for). Brokers alternate within a run and their order
flips every round, because absolute figures drift on a shared machine: the figures to
read are the ratios, transactional over idempotent for each broker, and herdless over
tansu.

This prints figures; it is not a timed test.

    python bench/transactions.py                  # 3 rounds each
    python bench/transactions.py --records 200000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

from peers import PEERS, BrokerError, PhaseError, create_topic

console = Console(width=None if sys.stdout.isatty() else 120)
TRANSACTION_SIZES = (100, 10_000)


@dataclass
class Round:
    broker: str
    idempotent_rps: float = 0.0
    transactional_rps: dict[int, float] = field(default_factory=dict)
    commit_ms: list[float] = field(default_factory=list)
    error: str | None = None


def _producer(bootstrap: str, transactional: bool) -> Producer:
    settings = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": True,
        "message.timeout.ms": 60_000,
    }
    if transactional:
        settings["transactional.id"] = f"bench-{uuid.uuid4()}"
    producer = Producer(settings)
    if transactional:
        producer.init_transactions(60)
    return producer


def _send(producer: Producer, topic: str, count: int, payload: bytes) -> None:
    failures: list[str] = []

    def delivered(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if failures:
        raise PhaseError(f"{len(failures)} records failed: {failures[0]}")


def idempotent(bootstrap: str, topic: str, records: int, payload: bytes) -> float:
    producer = _producer(bootstrap, transactional=False)
    # Connections and metadata first, as the transactional producer's init has them.
    _send(producer, topic, 1, payload)
    producer.flush(60)
    started = time.perf_counter()
    _send(producer, topic, records, payload)
    if producer.flush(120):
        raise PhaseError("idempotent records not acknowledged in time")
    return records / (time.perf_counter() - started)


def transactional(bootstrap: str, topic: str, records: int, size: int, payload: bytes) -> float:
    producer = _producer(bootstrap, transactional=True)
    started = time.perf_counter()
    for _ in range(max(1, records // size)):
        producer.begin_transaction()
        _send(producer, topic, size, payload)
        producer.commit_transaction(120)
    return max(1, records // size) * size / (time.perf_counter() - started)


def commit_latencies(bootstrap: str, topic: str, commits: int, payload: bytes) -> list[float]:
    producer = _producer(bootstrap, transactional=True)
    latencies = []
    for _ in range(commits):
        producer.begin_transaction()
        _send(producer, topic, 1, payload)
        producer.flush(60)
        started = time.perf_counter()
        producer.commit_transaction(60)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def measure(broker: str, args: argparse.Namespace) -> Round:
    result = Round(broker)
    payload = os.urandom(args.record_size)
    with tempfile.TemporaryDirectory(prefix=f"bench-txn-{broker}-") as tmp:
        try:
            with PEERS[broker](Path(tmp)) as bootstrap:
                create_topic(bootstrap, "txn-bench", 1)
                result.idempotent_rps = idempotent(bootstrap, "txn-bench", args.records, payload)
                for size in TRANSACTION_SIZES:
                    result.transactional_rps[size] = transactional(
                        bootstrap, "txn-bench", args.records, size, payload
                    )
                result.commit_ms = commit_latencies(bootstrap, "txn-bench", args.commits, payload)
        except (BrokerError, PhaseError, Exception) as exc:  # noqa: BLE001 - reported per round
            result.error = f"{type(exc).__name__}: {exc}"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--brokers", nargs="+", default=["herdless", "tansu"])
    args = parser.parse_args()
    rounds: list[Round] = []
    for n in range(args.rounds):
        order = args.brokers if n % 2 == 0 else list(reversed(args.brokers))
        for broker in order:
            result = measure(broker, args)
            rounds.append(result)
            console.print(f"round {n + 1} {broker}: {result.error or 'ok'}")
    table = Table(title=f"transactions, {args.records} records of {args.record_size} B")
    columns = ["broker", "idempotent rec/s"]
    for size in TRANSACTION_SIZES:
        columns += [f"txn of {size} rec/s", f"txn {size} / idempotent"]
    columns += ["EndTxn p50 ms", "EndTxn p99 ms"]
    for column in columns:
        table.add_column(column, justify="right")
    medians: dict[str, dict[str, float]] = {}
    for broker in args.brokers:
        good = [r for r in rounds if r.broker == broker and r.error is None]
        if not good:
            table.add_row(broker, *["failed"] * (len(columns) - 1))
            continue
        figures = {"idempotent": statistics.median(r.idempotent_rps for r in good)}
        row = [broker, f"{figures['idempotent']:,.0f}"]
        for size in TRANSACTION_SIZES:
            rate = statistics.median(r.transactional_rps[size] for r in good)
            ratio = statistics.median(r.transactional_rps[size] / r.idempotent_rps for r in good)
            figures[f"txn{size}"] = rate
            row += [f"{rate:,.0f}", f"{ratio:.2f}"]
        latencies = sorted(ms for r in good for ms in r.commit_ms)
        p50 = latencies[len(latencies) // 2]
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        figures["p50"] = p50
        row += [f"{p50:.1f}", f"{p99:.1f}"]
        medians[broker] = figures
        table.add_row(*row)
    console.print(table)
    if "herdless" in medians and "tansu" in medians:
        h, t = medians["herdless"], medians["tansu"]
        console.print(
            "herdless/tansu: "
            + ", ".join(
                f"{name} {h[name] / t[name]:.2f}"
                for name in ("idempotent", *(f"txn{s}" for s in TRANSACTION_SIZES))
            )
            + f"; EndTxn p50 {h['p50'] / t['p50']:.2f} (lower is faster)"
        )


if __name__ == "__main__":
    main()
