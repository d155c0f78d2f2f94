"""The two group protocols side by side at scale: 1,000 light members each, 10,000 partitions.

bench/consumer_protocol.py runs real librdkafka consumers, a thread or more
each: 1,000 of them do not fit on a 2-core machine. Here members are asyncio
tasks holding one socket each, sending what a consumer sends, built with the
same protocol classes: classic members as bench/simulated_members.py has them
(JoinGroup, SyncGroup with the leader's round-robin plan, Heartbeat, eager: a
member gives up everything when it rejoins), consumer members (KIP-848) with
ConsumerGroupHeartbeat, revoking at once what the broker takes away and saying
so in their next heartbeat, sent straight away (as clients do).

`consumer` runs with Kafka 4.3's defaults: a group's next target assignment no
sooner than group.consumer.assignment.interval.ms (1 s) after the last, computed
off the event loop (KIP-1263); `consumer-unbatched` with a target at every change,
computed on the loop, as Kafka 4.2 and herdless before it did.

For each protocol, on a fresh broker: N members form the group, then one joins,
then one leaves. For each event it prints how long until every member holds its
final assignment (every partition with exactly one member, shares within one of
each other, no member with partitions still to give up or receive), and, for the
members there before and after the event, how long each went without any
partition it may fetch from (eager classic members: from the rebalance's news
to their SyncGroup answer; consumer members: only if they held none at all).

    python bench/consumer_members.py                            # 1,000 members, 10,000 partitions
    python bench/consumer_members.py --members 100 --partitions 1000 --protocols consumer
    python bench/consumer_members.py --protocols consumer consumer-unbatched
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

import simulated_members as sm
from herdless.protocol.consumer_group_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from peers import create_topic, herdless

TOPIC = "bench-members"
HEARTBEAT_V = 1
HEARTBEAT_INTERVAL_MS = 3_000
SESSION_TIMEOUT_MS = 45_000
REBALANCE_TIMEOUT_MS = 60_000
CONNECT_CONCURRENCY = 100
BROKER_ARGS = (
    "--set",
    "group.initial.rebalance.delay.ms=0",
    "--set",
    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
    "--set",
    "group.consumer.min.heartbeat.interval.ms=1000",
    "--set",
    "max.partitions.per.request=100000",
)
# Broker settings per protocol beyond BROKER_ARGS.
PROTOCOL_ARGS = {
    "classic": (),
    "consumer": (),
    "consumer-unbatched": (
        "--set",
        "group.consumer.assignment.interval.ms=0",
        "--set",
        "group.consumer.assignor.offload.enable=false",
    ),
}
# Kafka's error codes a consumer member reacts to.
FENCED_MEMBER_EPOCH = 110
UNKNOWN_MEMBER_ID = 25

console = Console(width=None if sys.stdout.isatty() else 120)


class Holdings:
    """Who holds what, and for each member how long it has held nothing (the gaps)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.held: dict[str, frozenset[int]] = {}
        self.pending: set[str] = set()  # members with something still to give up or get
        self._empty_since: dict[str, float] = {}
        self.gaps: dict[str, float] = {}
        self.changed = asyncio.Event()
        # How long each ConsumerGroupHeartbeat took to be answered, since the window began:
        # what a broker whose event loop computes a whole target makes everyone wait.
        self.latencies: list[float] = []

    def hold(self, member: str, partitions: frozenset[int], pending: bool = False) -> None:
        now = time.perf_counter()
        self.held[member] = partitions
        if pending:
            self.pending.add(member)
        else:
            self.pending.discard(member)
        if partitions:
            since = self._empty_since.pop(member, None)
            if since is not None:
                self.gaps[member] = self.gaps.get(member, 0.0) + now - since
        else:
            self._empty_since.setdefault(member, now)
        self.changed.set()

    def drop(self, member: str) -> None:
        self.held.pop(member, None)
        self.pending.discard(member)
        self._empty_since.pop(member, None)
        self.changed.set()

    def start_window(self) -> None:
        """Gaps count from now; a member empty now is counted from now."""
        now = time.perf_counter()
        self.gaps = {}
        self.latencies = []
        for member in self._empty_since:
            self._empty_since[member] = now

    def settled(self, members: int) -> bool:
        if len(self.held) != members or self.pending:
            return False
        sizes = [len(ps) for ps in self.held.values()]
        if max(sizes) - min(sizes) > 1 or sum(sizes) != self.partitions:
            return False
        return len(frozenset().union(*self.held.values())) == self.partitions

    def gap_of(self, member: str, now: float) -> float:
        since = self._empty_since.get(member)
        return self.gaps.get(member, 0.0) + (now - since if since is not None else 0.0)


class ConsumerMember:
    """A KIP-848 member: heartbeats at the broker's interval, and at once after a change."""

    def __init__(self, bootstrap: str, group: str, holdings: Holdings) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.holdings = holdings
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}
        self.owned_changed = True
        self.connection: sm.Connection | None = None
        self.failure: BaseException | None = None
        self.rejoins = 0  # after a heartbeat that timed out or a lost connection
        self._task: asyncio.Task[None] | None = None
        self._interval = HEARTBEAT_INTERVAL_MS / 1000

    async def connect(self) -> None:
        self.connection = await sm.Connection.open(self.bootstrap, "sim-consumer")

    def start(self) -> None:
        self.holdings.hold(self.member_id, frozenset())
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while True:
                try:
                    changed = await self._heartbeat()
                except (TimeoutError, OSError, asyncio.IncompleteReadError):
                    # As a client does: the broker is lost to it, it starts over.
                    self.rejoins += 1
                    await self._start_over()
                    continue
                if not changed:
                    await asyncio.sleep(self._interval)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.failure = exc

    async def _start_over(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.epoch, self.owned, self.owned_changed = 0, {}, True
        self.holdings.hold(self.member_id, frozenset())
        await self.connect()

    async def _heartbeat(self) -> bool:
        """One heartbeat; True if the assignment changed (the member says so at once)."""
        assert self.connection is not None
        joining = self.epoch == 0
        Owned = ConsumerGroupHeartbeatRequest[HEARTBEAT_V].TopicPartitions
        owned = None
        if joining or self.owned_changed:
            owned = [Owned(topic_id=t, partitions=ps) for t, ps in self.owned.items() if ps]
        request = ConsumerGroupHeartbeatRequest[HEARTBEAT_V](
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if joining else -1,
            subscribed_topic_names=[TOPIC] if joining else None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=owned,
        )
        self.owned_changed = False
        sent = time.perf_counter()
        response = await self.connection.request(
            request, ConsumerGroupHeartbeatResponse, SESSION_TIMEOUT_MS / 1000
        )
        self.holdings.latencies.append(time.perf_counter() - sent)
        if response.error_code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
            self.epoch, self.owned, self.owned_changed = 0, {}, True
            self.holdings.hold(self.member_id, frozenset())
            return True
        if response.error_code != 0:
            raise sm.ProtocolError(f"ConsumerGroupHeartbeat: error {response.error_code}")
        self._interval = response.heartbeat_interval_ms / 1000
        self.epoch = response.member_epoch
        if response.assignment is None:
            return False
        # Revoked at once (nothing to commit here); what stays is kept without a pause.
        topics = response.assignment.topic_partitions
        self.owned = {t.topic_id: sorted(t.partitions) for t in topics}
        self.owned_changed = True
        held = frozenset(p for ps in self.owned.values() for p in ps)
        self.holdings.hold(self.member_id, held)
        return True

    async def leave(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        assert self.connection is not None
        request = ConsumerGroupHeartbeatRequest[HEARTBEAT_V](
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=-1,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=-1,
            subscribed_topic_names=None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=None,
        )
        await self.connection.request(request, ConsumerGroupHeartbeatResponse, 30)
        self.holdings.drop(self.member_id)
        self.connection.close()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.connection is not None:
            self.connection.close()


class ClassicMember(sm.Member):
    """bench/simulated_members.py's member, eager: it holds nothing while it rejoins."""

    holdings: Holdings

    async def join(self) -> None:
        self.holdings.hold(self.key, frozenset(), pending=True)
        await super().join()
        self.holdings.hold(self.key, frozenset(self.assignment))

    @property
    def key(self) -> str:
        return str(id(self))

    async def leave(self) -> None:
        assert self.connection is not None
        await self.stop()
        connection = await sm.Connection.open(self.config.bootstrap, "sim-leaver")
        await sm.leave_all(connection, self.config.group_id, [self.member_id])
        connection.close()
        self.holdings.drop(self.key)


@dataclass
class EventResult:
    protocol: str
    event: str
    settled_s: float | None
    staying: int = 0
    paused: int = 0
    longest_gap_s: float = 0.0
    median_gap_s: float = 0.0
    heartbeat_p99_ms: float | None = None
    heartbeat_max_ms: float | None = None


def latency_figures(latencies: list[float]) -> dict[str, float]:
    """p99 and max of heartbeat answers in ms; none for members that sent none."""
    if not latencies:
        return {}
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"heartbeat_p99_ms": p99 * 1000, "heartbeat_max_ms": ordered[-1] * 1000}


async def gather_limited(limit: int, jobs: Sequence[Callable[[], object]]) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(job: Callable[[], object]) -> None:
        async with semaphore:
            await job()  # type: ignore[misc]

    await asyncio.gather(*(one(j) for j in jobs))


async def wait_settled(holdings: Holdings, members: int, timeout: float) -> float | None:
    """Seconds from now until the group is settled with `members`, None after `timeout`."""
    started = time.perf_counter()
    deadline = started + timeout
    while not holdings.settled(members):
        holdings.changed.clear()
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(holdings.changed.wait(), min(remaining, 1.0))
    return time.perf_counter() - started


def describe_stall(protocol: str, members: Sequence[object], holdings: Holdings) -> None:
    """Why a group did not settle: who failed, and how the partitions are spread."""
    failures = [m.failure for m in members if m.failure is not None]  # type: ignore[attr-defined]
    sizes = sorted(len(ps) for ps in holdings.held.values())
    console.print(
        f"[red]{protocol}: not settled: {len(holdings.held)} members holding"
        f" {sum(sizes)} partitions ({len(frozenset().union(*holdings.held.values()))} distinct),"
        f" shares {sizes[:3]}..{sizes[-3:]}, {len(holdings.pending)} pending,"
        f" {len(failures)} failed{': ' + repr(failures[0]) if failures else ''}"
    )


def keys_of(protocol: str, members: Sequence[object]) -> list[str]:
    if protocol.startswith("consumer"):
        return [m.member_id for m in members]  # type: ignore[attr-defined]
    return [m.key for m in members]  # type: ignore[attr-defined]


async def run_protocol(
    protocol: str, bootstrap: str, args: argparse.Namespace
) -> list[EventResult]:
    holdings = Holdings(args.partitions)
    group = f"bench-{protocol}"

    def new_member() -> ConsumerMember | ClassicMember:
        if protocol.startswith("consumer"):
            return ConsumerMember(bootstrap, group, holdings)
        config = sm.MemberConfig(
            bootstrap,
            group,
            TOPIC,
            args.partitions,
            SESSION_TIMEOUT_MS,
            REBALANCE_TIMEOUT_MS,
            HEARTBEAT_INTERVAL_MS / 1000,
        )
        member = ClassicMember(config, sm.HeartbeatStats())
        member.holdings = holdings
        return member

    members = [new_member() for _ in range(args.members)]
    await gather_limited(CONNECT_CONCURRENCY, [m.connect for m in members])
    results = []
    started = time.perf_counter()
    for member in members:
        member.start()
    settled = await wait_settled(holdings, len(members), args.timeout)
    formed = None if settled is None else time.perf_counter() - started
    if settled is None:
        describe_stall(protocol, members, holdings)
    results.append(
        EventResult(
            protocol,
            f"{args.members} members form the group",
            formed,
            **latency_figures(holdings.latencies),
        )
    )

    async def event(name: str, act: Callable[[], object], size: int, staying: list[str]) -> None:
        await asyncio.sleep(args.quiet)
        holdings.start_window()
        began = time.perf_counter()
        done = act()
        if asyncio.iscoroutine(done):
            await done
        took = await wait_settled(holdings, size, args.timeout)
        now = time.perf_counter()
        gaps = [holdings.gap_of(m, now) for m in staying]
        paused = [g for g in gaps if g > 0]
        results.append(
            EventResult(
                protocol,
                name,
                None if took is None else now - began,
                len(staying),
                len(paused),
                max(gaps, default=0.0),
                statistics.median(paused) if paused else 0.0,
                **latency_figures(holdings.latencies),
            )
        )

    joiner = new_member()
    await joiner.connect()
    before = keys_of(protocol, members)
    await event("a member joins", joiner.start, len(members) + 1, before)
    members.append(joiner)
    leaver = members.pop(0)
    await event("a member leaves", leaver.leave, len(members), keys_of(protocol, members))
    rejoins = sum(getattr(m, "rejoins", 0) for m in members)
    if rejoins:
        console.print(f"{protocol}: {rejoins} heartbeats timed out or lost their connection")
    failures = [m.failure for m in members if m.failure is not None]
    if failures:
        console.print(f"[red]{protocol}: {len(failures)} members failed: {failures[0]!r}")
    await asyncio.gather(*(m.stop() for m in members))
    return results


def table(results: list[EventResult], args: argparse.Namespace) -> Table:
    out = Table(title=f"{args.members} members, {args.partitions} partitions, one broker")
    for column in ("protocol", "event", "settled after s", "staying members paused",
                   "longest pause s", "median pause s", "heartbeat p99 ms",
                   "heartbeat max ms"):  # fmt: skip
        out.add_column(column, justify="left" if column in ("protocol", "event") else "right")
    for r in results:
        formed = r.staying == 0
        out.add_row(
            r.protocol,
            r.event,
            "timed out" if r.settled_s is None else f"{r.settled_s:.2f}",
            "" if formed else f"{r.paused} of {r.staying}",
            "" if formed else f"{r.longest_gap_s:.2f}",
            "" if formed else f"{r.median_gap_s:.2f}",
            "" if r.heartbeat_p99_ms is None else f"{r.heartbeat_p99_ms:.0f}",
            "" if r.heartbeat_max_ms is None else f"{r.heartbeat_max_ms:.0f}",
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument(
        "--protocols", nargs="+", choices=sorted(PROTOCOL_ARGS), default=["classic", "consumer"]
    )
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds between events")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    results: list[EventResult] = []
    for protocol in args.protocols:
        broker_args = BROKER_ARGS + PROTOCOL_ARGS[protocol]
        with tempfile.TemporaryDirectory() as tmp, herdless(Path(tmp), broker_args) as bootstrap:
            create_topic(bootstrap, TOPIC, args.partitions, timeout=600)
            results += asyncio.run(run_protocol(protocol, bootstrap, args))
    console.print(table(results, args))


if __name__ == "__main__":
    main()
