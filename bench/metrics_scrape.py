"""What a Prometheus scrape of `herdless serve --metrics-port` costs the broker.

Commits one offset per partition for many groups, then scrapes /metrics a few
times while a probe sends ApiVersions every 50 ms on its own connection: the
probe's latency during a scrape is what every heartbeat would see. herdless
only: the peer broker has no such endpoint.

    python bench/metrics_scrape.py --groups 1000 --partitions 100
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request

from rich.console import Console
from rich.table import Table

from groups import LOAD_TOPIC, probe_broker, write_offsets
from peers import create_topic, free_port, herdless

console = Console()


def scrape(port: int) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=300) as answer:
        size = len(answer.read())
    return time.perf_counter() - started, size


async def scrape_while_probing(
    bootstrap: str, port: int, seconds: float
) -> tuple[float, int, list[float]]:
    probe = asyncio.create_task(probe_broker(bootstrap, seconds))
    await asyncio.sleep(0.5)  # the probe connects and settles first
    took, size = await asyncio.to_thread(scrape, port)
    return took, size, await probe


def ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--scrapes", type=int, default=3)
    args = parser.parse_args()
    metrics_port = free_port()
    extra = ("--set", "group.initial.rebalance.delay.ms=0", "--metrics-port", str(metrics_port))
    with (
        tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp,
        herdless(tmp, extra) as bootstrap,
    ):
        create_topic(bootstrap, LOAD_TOPIC, args.partitions)
        groups = [f"scraped-{i}" for i in range(args.groups)]
        console.log(f"committing {args.groups * args.partitions:,} offsets ...")
        asyncio.run(write_offsets(bootstrap, groups, args.partitions, args.writers))
        baseline = asyncio.run(probe_broker(bootstrap, 3.0))
        table = Table(
            "scrape", "seconds", "MB", "probe p50 ms", "probe max ms", "probes",
            title=f"{args.groups:,} groups x {args.partitions} committed partitions",
        )  # fmt: skip
        table.add_row("none", "-", "-", ms(baseline, 0.5), ms(baseline, 1.0), str(len(baseline)))
        took_all = []
        for i in range(args.scrapes):
            took, size, probes = asyncio.run(scrape_while_probing(bootstrap, metrics_port, 8.0))
            took_all.append(took)
            table.add_row(
                str(i + 1), f"{took:.2f}", f"{size / 1e6:.1f}",
                ms(probes, 0.5), ms(probes, 1.0), str(len(probes)),
            )  # fmt: skip
        console.print(table)
        console.print(f"median scrape {statistics.median(took_all):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
