"""How long a group coordinator with a full `__consumer_offsets` partition takes to fail over.

Starts Debian's ZooKeeper and three herdless brokers on 127.0.0.1
(`__consumer_offsets` with replication factor 3) and fills ONE offsets
partition with N offset records: groups whose ids all hash to that partition,
each committing every partition of a topic, through raw OffsetCommit requests
on a few connections. Then, a few times, it SIGKILLs the broker that
coordinates those groups and measures the time from the kill to the first
OffsetCommit the new coordinator accepts, with a client that every 20 ms asks
a live broker for the coordinator (FindCoordinator) and commits there,
ignoring errors. The killed broker is restarted before the next kill.

It runs two clusters at once: one with `group.coordinator.standby.enable`
true (followers keep a warm standby of the partition's groups, so a new leader
serves at once), one with it false (the new leader replays the partition
first); the kills alternate between them, so that a busier spell of a shared
machine falls on both alike, and it prints both side by side with their ratio.
`--without-standby-only` runs only the second and does not pass the setting at
all, for brokers that predate it.

    python bench/coordinator_failover.py                            # 1,000,000 records, 3 kills
    python bench/coordinator_failover.py --records 200000 --without-standby-only

What bounds the time: the killed broker's ZooKeeper session must expire before
the controller elects another leader (`--session-timeout-ms`, subtracted in a
column of its own), then the new leader must be able to serve. The brokers'
logs tell when it was elected and, when it replays the partition, how long that
took ("coordinating the groups of __consumer_offsets-N: ... R of them since it
became leader, S s ago"): with a warm standby, it replays only the uncommitted
tail. Before each kill, the bench waits until every follower's standby of the
partition says it is ready (or `--settle` seconds without standby).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from confluent_kafka.admin import ClusterMetadata
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import simulated_members as sm
from cluster import create
from groups import LOAD_TOPIC, write_offsets
from peers import SRC_DIR

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(SRC_DIR))

from tests.support.cluster import BROKER_SETTINGS, ClusterProcesses  # noqa: E402

from herdless.coordinator import partition_for  # noqa: E402 - after the path is set

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITION = 0
STANDBY_SETTING = "group.coordinator.standby.enable"
RETRY_INTERVAL_S = 0.02
REQUEST_TIMEOUT_S = 10.0
FAILOVER_TIMEOUT_S = 300.0
# Groups per call of write_offsets: the progress bar moves once per chunk.
FILL_CHUNK = 100
LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"

console = Console(width=None if sys.stdout.isatty() else 120)


@dataclass
class Failover:
    seconds: float  # SIGKILL to the first accepted OffsetCommit
    elected_after_s: float | None  # SIGKILL to the new leader's election, from its log
    loaded_in_s: float | None  # the new leader's replay of the partition, from its log
    new_leader: int


@dataclass
class Mode:
    name: str
    standby: bool | None  # None: the setting is not passed

    @property
    def settings(self) -> dict[str, str]:
        if self.standby is None:
            return {}
        return {STANDBY_SETTING: str(self.standby).lower()}


def placed_groups(count: int, partitions: int) -> list[str]:
    """`count` group ids that all hash to OFFSETS_PARTITION."""
    found: list[str] = []
    i = 0
    while len(found) < count:
        group = f"failover-{i}"
        if partition_for(group, partitions) == OFFSETS_PARTITION:
            found.append(group)
        i += 1
    return found


def address_of(cluster: ClusterProcesses, broker_id: int) -> str:
    return cluster.brokers[broker_id].bootstrap


def offsets_partition_whole(cluster: ClusterProcesses, timeout: float = 120.0) -> int:
    """Wait until the filled partition is led with every broker in its ISR; return its leader."""
    wanted = len(cluster.brokers)

    def whole(m: ClusterMetadata) -> tuple[int] | None:
        partition = m.topics[OFFSETS_TOPIC].partitions[OFFSETS_PARTITION]
        if partition.leader in m.brokers and len(partition.isrs) == wanted:
            return (partition.leader,)  # a truthy answer, even for broker 0
        return None

    (leader,) = cluster.wait_for(whole, timeout=timeout, what="the offsets partition whole")
    return leader


def fill(cluster: ClusterProcesses, groups: list[str], partitions: int, writers: int) -> float:
    """Commit every partition of LOAD_TOPIC for every group; returns records per second."""
    coordinator = address_of(cluster, offsets_partition_whole(cluster))
    started = time.monotonic()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("offset records", total=len(groups) * partitions)
        for first in range(0, len(groups), FILL_CHUNK):
            chunk = groups[first : first + FILL_CHUNK]
            asyncio.run(write_offsets(coordinator, chunk, partitions, writers))
            progress.advance(task, len(chunk) * partitions)
    return len(groups) * partitions / (time.monotonic() - started)


async def commit_until_accepted(live: list[str], group: str) -> float:
    """When (time.monotonic) an OffsetCommit for `group` was first accepted.

    Every RETRY_INTERVAL_S: FindCoordinator to the next live broker, then
    OffsetCommit to the broker it names; any error or refused connection is
    ignored. Connections are kept between tries, as a client keeps them.
    """
    connections: dict[str, sm.Connection] = {}

    async def connection(address: str) -> sm.Connection:
        existing = connections.get(address)
        if existing is None or existing.closed:
            existing = await sm.Connection.open(address, "failover-probe", timeout=1.0)
            connections[address] = existing
        return existing

    try:
        for attempt in range(int(FAILOVER_TIMEOUT_S / RETRY_INTERVAL_S)):
            try:
                asked = await connection(live[attempt % len(live)])
                coordinator = await sm.find_coordinator(asked, group, REQUEST_TIMEOUT_S)
                answer = await connection(coordinator)
                codes = await sm.offset_commit(
                    answer, group, LOAD_TOPIC, {0: attempt}, REQUEST_TIMEOUT_S
                )
                if not any(codes):
                    return time.monotonic()
            except (OSError, TimeoutError, EOFError, sm.ProtocolError):
                pass
            await asyncio.sleep(RETRY_INTERVAL_S)
    finally:
        for open_connection in connections.values():
            open_connection.close()
    raise RuntimeError(f"no OffsetCommit accepted within {FAILOVER_TIMEOUT_S:.0f} s")


def log_after(path: Path, since_wall: float, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first line of a broker's log matching `pattern` logged at or after `since_wall`."""
    for line in path.read_text(errors="replace").splitlines():
        match = pattern.search(line)
        if match and logged_at(line) >= since_wall - 0.001:
            return match
    return None


def logged_at(line: str) -> float:
    return datetime.strptime(line[:23], LOG_TIME).timestamp()


def standbys_ready(cluster: ClusterProcesses, victim: int, timeout_s: float = 300.0) -> None:
    """Wait until each follower has logged, since it last registered, that its standby of
    the partition caught up with the high watermark."""
    partition = re.escape(f"{OFFSETS_TOPIC}-{OFFSETS_PARTITION}")
    ready = re.compile(rf"standby of {partition} ready")
    registered = re.compile(r"registered as broker \d+ at")
    deadline = time.monotonic() + timeout_s
    for broker_id, process in cluster.brokers.items():
        if broker_id == victim:
            continue
        while True:
            lines = process.log_path.read_text(errors="replace").splitlines()
            starts = [i for i, line in enumerate(lines) if registered.search(line)]
            after = lines[starts[-1] if starts else 0 :]
            if any(ready.search(line) for line in after):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker {broker_id}'s standby never said it was ready")
            time.sleep(0.2)


def failover_once(
    cluster: ClusterProcesses, probe_group: str, settle_s: float, standby: bool
) -> Failover:
    victim = offsets_partition_whole(cluster)
    if standby:
        standbys_ready(cluster, victim)
    else:
        # Nothing to wait for but a quieter moment after the last restart.
        time.sleep(settle_s)
    live = [address_of(cluster, i) for i in cluster.brokers if i != victim]
    killed_wall = time.time()
    killed_at = time.monotonic()
    cluster.brokers[victim].kill()
    took = asyncio.run(commit_until_accepted(live, probe_group)) - killed_at
    new_leader = cluster.leader_of(OFFSETS_TOPIC, OFFSETS_PARTITION)
    log = cluster.brokers[new_leader].log_path
    partition = re.escape(f"{OFFSETS_TOPIC}-{OFFSETS_PARTITION}")
    elected = re.compile(rf"{partition}: leader in leader epoch")
    loaded = re.compile(
        rf"coordinating the groups of {partition}: \d+ groups; \d+ records replayed,"
        r" \d+ of them since it became leader, ([\d.]+)s ago"
    )
    elected_match = log_after(log, killed_wall, elected)
    elected_after = (
        logged_at(elected_match.string) - killed_wall if elected_match is not None else None
    )
    loaded_match = log_after(log, killed_wall, loaded)
    cluster.brokers[victim].start()
    offsets_partition_whole(cluster)
    return Failover(
        took,
        elected_after,
        float(loaded_match.group(1)) if loaded_match is not None else None,
        new_leader,
    )


@contextlib.contextmanager
def filled_cluster(
    mode: Mode, args: argparse.Namespace, groups: list[str]
) -> Iterator[ClusterProcesses]:
    """A running cluster for `mode` whose offsets partition holds the groups' offsets."""
    settings = {
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "offsets.topic.replication.factor": "3",
        **mode.settings,
    }
    with contextlib.ExitStack() as stack:
        if args.work_dir is None:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="herdless-bench-")))
        else:
            base = args.work_dir / mode.name.replace(" ", "-")
            base.mkdir(parents=True)
        cluster = ClusterProcesses(base, 3, **settings)
        try:
            cluster.start()
            create(cluster, LOAD_TOPIC, args.topic_partitions, 3)
            # The first FindCoordinator creates __consumer_offsets.
            asyncio.run(commit_until_accepted(cluster.bootstrap.split(","), groups[0]))
            rate = fill(cluster, groups, args.topic_partitions, args.writers)
            console.print(
                f"{mode.name}: {len(groups) * args.topic_partitions:,} offset records in"
                f" {OFFSETS_TOPIC}-{OFFSETS_PARTITION} ({rate:,.0f} records/s)"
            )
            yield cluster
        finally:
            cluster.stop()


def run(
    modes: list[Mode], args: argparse.Namespace, groups: list[str]
) -> dict[str, list[Failover]]:
    """Kill the coordinator `args.repeats` times in each mode's cluster, alternating
    between the clusters (both stay up), so that a busier spell of the machine falls
    on both alike."""
    failovers: dict[str, list[Failover]] = {mode.name: [] for mode in modes}
    with contextlib.ExitStack() as stack:
        clusters = {
            mode.name: stack.enter_context(filled_cluster(mode, args, groups)) for mode in modes
        }
        for round_no in range(args.repeats):
            names = list(clusters) if round_no % 2 == 0 else list(reversed(clusters))
            for name in names:
                mode = next(m for m in modes if m.name == name)
                failover = failover_once(
                    clusters[name], groups[-1], args.settle, bool(mode.standby)
                )
                failovers[name].append(failover)
                console.print(
                    f"{name}: {failover.seconds:.2f} s to the first commit on broker"
                    f" {failover.new_leader}; elected after {seconds(failover.elected_after_s)},"
                    f" replayed in {seconds(failover.loaded_in_s)}"
                )
    return failovers


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def report(results: dict[str, list[Failover]], args: argparse.Namespace, records: int) -> None:
    session_s = args.session_timeout_ms / 1000
    rows: dict[str, dict[str, float | None]] = {
        name: {
            "kill to first commit": median([f.seconds for f in failovers]),
            "minus the session timeout": median([f.seconds - session_s for f in failovers]),
            "kill to election (broker log)": median([f.elected_after_s for f in failovers]),
            "replay of the partition (broker log)": median([f.loaded_in_s for f in failovers]),
            "election to first commit": median(
                [
                    f.seconds - f.elected_after_s if f.elected_after_s is not None else None
                    for f in failovers
                ]
            ),
        }
        for name, failovers in results.items()
    }
    names = list(results)
    table = Table(
        title=f"{records:,} offset records in one partition, {args.repeats} kills,"
        f" zookeeper.session.timeout.ms={args.session_timeout_ms} (medians)"
    )
    table.add_column("")
    for name in names:
        table.add_column(name, justify="right")
    if len(names) == 2:
        table.add_column(" / ".join(name.split()[0] for name in names), justify="right")
    for metric in rows[names[0]]:
        values = [rows[name][metric] for name in names]
        cells = [seconds(v) for v in values]
        if len(names) == 2:
            first, second = values
            ratio = first / second if first is not None and second else None
            cells.append("-" if ratio is None else f"{ratio:.2f}")
        table.add_row(metric, *cells)
    console.print(table)
    for name, failovers in results.items():
        console.print(f"{name}, each kill: " + ", ".join(f"{f.seconds:.2f} s" for f in failovers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="offset records")
    parser.add_argument(
        "--topic-partitions", type=int, default=200, help="partitions each group commits"
    )
    parser.add_argument("--repeats", type=int, default=3, help="kills per setting")
    parser.add_argument("--writers", type=int, default=32, help="connections that fill")
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    parser.add_argument(
        "--settle",
        type=float,
        default=15.0,
        help="seconds between a full ISR and the kill, for followers to build their standby",
    )
    parser.add_argument(
        "--without-standby-only",
        action="store_true",
        help=f"only replay on election, without passing {STANDBY_SETTING}",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="keep ZooKeeper's and the brokers' data and logs here (default: a temporary one)",
    )
    args = parser.parse_args()
    # Brokers are child processes: they run the working tree's herdless too.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SRC_DIR), os.environ.get("PYTHONPATH", "")) if p
    )
    partitions = int(BROKER_SETTINGS["offsets.topic.num.partitions"])
    groups = placed_groups(math.ceil(args.records / args.topic_partitions), partitions)
    records = len(groups) * args.topic_partitions
    modes = (
        [Mode("without standby", None)]
        if args.without_standby_only
        else [Mode("with standby", True), Mode("without standby", False)]
    )
    load_before = os.getloadavg()[0]
    try:
        results = run(modes, args, groups)
    except RuntimeError as exc:
        if f"unknown broker setting '{STANDBY_SETTING}'" not in str(exc):
            raise
        sys.exit(f"these brokers do not know {STANDBY_SETTING}: run with --without-standby-only")
    report(results, args, records)
    # The figures move with what else runs on the machine: say how busy it was.
    console.print(
        f"1-minute load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )


if __name__ == "__main__":
    main()
