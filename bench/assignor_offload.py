"""How long a server assignor holds the broker's event loop, on the loop and offloaded.

The coordinator computes a consumer group's target assignment with a server
assignor (uniform or range). Run on the event loop, the whole computation is a
stall every connection of the broker waits out; offloaded (KIP-1263,
group.consumer.assignor.offload.enable) it runs on the broker's worker thread,
and the loop gets the interpreter back every switch interval (5 ms by default).

This runs the assignor for N members on P partitions (a new member among
settled ones, so stickiness is exercised) a number of times, on the loop and
then on a one-thread executor as the broker does, while a ticker on the loop
records how late each of its 1 ms sleeps woke: the longest and the 99th
percentile lateness are the stall a request would see.

    python bench/assignor_offload.py                      # 1,000 members, 10,000 partitions
    python bench/assignor_offload.py --members 100 --partitions 1000 --assignor range
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import statistics
import time
import uuid

from rich.console import Console
from rich.table import Table

from herdless.coordinator.assignors import ASSIGNORS, MemberSpec
from herdless.coordinator.topic_metadata import TopicIdPartition

TOPIC = uuid.UUID(int=1)
TICK_S = 0.001


def group_of(members: int, partitions: int) -> dict[str, MemberSpec]:
    """`members` members sharing the topic round robin, and one more that holds nothing."""
    specs = {}
    for m in range(members):
        held = frozenset(TopicIdPartition(TOPIC, p) for p in range(m, partitions, members))
        specs[f"member-{m:05d}"] = MemberSpec(None, frozenset({TOPIC}), held)
    specs["member-new"] = MemberSpec(None, frozenset({TOPIC}))
    return specs


async def lateness_while(run: object, runs: int) -> tuple[list[float], list[float]]:
    """(how late each 1 ms tick woke, how long each run took), both in ms."""
    late: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            due = time.perf_counter() + TICK_S
            await asyncio.sleep(TICK_S)
            late.append(max(0.0, time.perf_counter() - due) * 1000)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        await run()  # type: ignore[operator]
        took.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0.05)  # the loop's own work between two targets
    stop.set()
    await task
    return late, took


async def measure(args: argparse.Namespace) -> Table:
    assignor = ASSIGNORS[args.assignor]
    specs = group_of(args.members, args.partitions)
    counts = {TOPIC: args.partitions}
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    loop = asyncio.get_running_loop()

    async def inline() -> None:
        assignor(specs, counts)

    async def offloaded() -> None:
        await loop.run_in_executor(executor, assignor, specs, counts)

    table = Table(
        title=f"{args.assignor} assignor, {args.members} members, {args.partitions} partitions,"
        f" {args.runs} runs"
    )
    for column in ("where it runs", "run median ms", "loop late p99 ms", "loop late max ms"):
        table.add_column(column, justify="left" if column == "where it runs" else "right")
    for name, run in (("on the event loop", inline), ("offloaded to a thread", offloaded)):
        late, took = await lateness_while(run, args.runs)
        ordered = sorted(late)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        table.add_row(name, f"{statistics.median(took):.1f}", f"{p99:.1f}", f"{ordered[-1]:.1f}")
    executor.shutdown()
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--assignor", choices=sorted(ASSIGNORS), default="uniform")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    Console().print(asyncio.run(measure(args)))


if __name__ == "__main__":
    main()
