"""The broker's CPU per OffsetCommit, herdless beside tansu: what each commit cost it.

`bench/groups.py --only commits` measures commits per second, which on a shared
machine says as much about the other load as about the broker. This runs the
same committers (each its own group, a few partitions per commit, one in
flight) and divides the broker's CPU seconds over the run, from /proc, by the
commits made: a figure the machine's load changes far less. Each broker first
runs the committers once unmeasured, so that the first appends to each offsets
partition (which write its leader-epoch checkpoint) are not counted. Brokers
alternate, their order flipping every round. This prints figures; it is not a
timed test.

    python bench/commit_cpu.py --committers 1 8 32 --rounds 3
    python bench/commit_cpu.py --baseline /tmp/before     # also an earlier checkout
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from groups import BASELINE, TOPIC, commit_run, create_topic, parse_args, start_broker
from peers import broker_cpu_seconds


def cpu_per_commit(broker: str, round_no: int, committers: int, args: argparse.Namespace) -> float:
    """Broker CPU microseconds per commit over one measured run on a fresh broker."""
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-commit-cpu-{broker}-") as tmp,
        start_broker(broker, Path(tmp), args) as bootstrap,
    ):
        create_topic(bootstrap, TOPIC, args.topic_partitions)
        asyncio.run(commit_run(bootstrap, broker, -1, committers, args))
        before = broker_cpu_seconds()
        result = asyncio.run(commit_run(bootstrap, broker, round_no, committers, args))
        spent = broker_cpu_seconds() - before
    if not result.commits:
        raise SystemExit(f"{broker}: no commit acknowledged ({result.error or result.errors})")
    print(
        f"round {round_no} {broker} {committers} committers: {result.commits_per_s:,.0f}"
        f" commits/s, {spent / result.commits * 1e6:.0f} us broker CPU per commit",
        file=sys.stderr,
    )
    return spent / result.commits * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--committers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per broker")
    parser.add_argument("--seconds", type=float, default=4.0, help="measured time per run")
    parser.add_argument("--baseline", type=Path, help="also run herdless from this checkout")
    own = parser.parse_args()
    argv = ["--only", "commits", "--commit-seconds", str(own.seconds)]
    if own.baseline is not None:
        argv += ["--baseline", str(own.baseline)]
    args = parse_args(argv)
    brokers = ["herdless", "tansu"] + ([BASELINE] if own.baseline is not None else [])
    print("| committers | " + " | ".join(f"{b} µs CPU per commit (rounds)" for b in brokers) + " |")
    print("|---|" + "---:|" * len(brokers))
    for committers in own.committers:
        spent: dict[str, list[float]] = {b: [] for b in brokers}
        for round_no in range(1, own.rounds + 1):
            for broker in brokers if round_no % 2 else brokers[::-1]:
                spent[broker].append(cpu_per_commit(broker, round_no, committers, args))
        cells = [
            f"{statistics.median(v):.0f} ({' '.join(f'{x:.0f}' for x in v)})"
            for v in spent.values()
        ]
        print(f"| {committers} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
