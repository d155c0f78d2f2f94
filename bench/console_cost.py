"""What the web console costs the broker that hosts it (`herdless serve --console-port`).

Commits one offset per partition for many groups, then, on the same data, runs
the broker without the console and with it, while a probe sends ApiVersions
every 50 ms on its own connection: the probe's latency is what every heartbeat
would see. Also times one look of the console (every group's offsets and lag,
every partition's offsets and size, the cluster) from this process.

    python bench/console_cost.py --groups 200 --partitions 50
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from rich.console import Console
from rich.table import Table

from groups import LOAD_TOPIC, probe_broker, write_offsets
from herdless.admin.client import open_admin
from herdless.console.snapshot import take_snapshot
from peers import create_topic, free_port, herdless

console = Console()


def ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"


def time_looks(bootstrap: str, looks: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU seconds of each look (this process's CPU: the client's I/O thread
    does much of the work), and how many groups the last one saw."""
    admin = open_admin(bootstrap)
    walls, cpus, seen = [], [], 0
    try:
        for _ in range(looks):
            wall, cpu = time.perf_counter(), time.process_time()
            snapshot = take_snapshot(admin, bootstrap)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            assert not snapshot.problems, snapshot.problems
            seen = len(snapshot.groups)
    finally:
        admin.close()
    return walls, cpus, seen


def wait_for_first_look(port: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/groups", timeout=10) as page:
                if b"As of" in page.read():
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the console on port {port} made no look within {timeout_s:g}s")


def probe(table: Table, name: str, bootstrap: str, seconds: float) -> None:
    probes = asyncio.run(probe_broker(bootstrap, seconds))
    table.add_row(name, ms(probes, 0.5), ms(probes, 0.99), ms(probes, 1.0), str(len(probes)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0, help="probe time per run")
    parser.add_argument("--looks", type=int, default=5)
    args = parser.parse_args()
    settings = ("--set", "group.initial.rebalance.delay.ms=0")
    table = Table(
        "broker", "probe p50 ms", "probe p99 ms", "probe max ms", "probes",
        title=f"{args.groups:,} groups x {args.partitions} committed partitions",
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        with herdless(tmp, settings) as bootstrap:
            create_topic(bootstrap, LOAD_TOPIC, args.partitions)
            console.log(f"committing {args.groups * args.partitions:,} offsets ...")
            groups = [f"watched-{i}" for i in range(args.groups)]
            asyncio.run(write_offsets(bootstrap, groups, args.partitions, args.writers))
            walls, cpus, seen = time_looks(bootstrap, args.looks)
            probe(table, "no console", bootstrap, args.seconds)
            port = free_port()
            alone = subprocess.Popen(
                [sys.executable, "-m", "herdless", "console", "-b", bootstrap, "--port", str(port)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_for_first_look(port)
                probe(table, "console in its own process", bootstrap, args.seconds)
            finally:
                alone.send_signal(signal.SIGINT)
                alone.wait(60)
        port = free_port()
        with herdless(tmp, (*settings, "--console-port", str(port))) as bootstrap:
            wait_for_first_look(port)
            probe(table, "console in the broker's process", bootstrap, args.seconds)
    console.print(table)
    console.print(
        f"one look ({seen} groups): wall median {statistics.median(walls) * 1000:.0f} ms,"
        f" client CPU median {statistics.median(cpus) * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
