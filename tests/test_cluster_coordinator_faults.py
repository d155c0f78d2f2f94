"""The group coordinator under broker faults, with real clients on a three-broker cluster.

Two groups consume a topic with replication factor 3 that an idempotent acks=all
producer keeps filling: a mixed group of confluent-kafka, kafka-python and aiokafka
members (all with the range assignor), each recording what it consumed and then
committing it, and a group of kcat -G members (librdkafka's auto commit). Both group
ids hash to the same `__consumer_offsets` partition, so one broker coordinates both.

That broker is killed (SIGKILL) at random moments and restarted, or stopped
(SIGSTOP) past its ZooKeeper session and resumed. What users rely on is checked each
time: the groups are served by the new coordinator without rebalancing, no
acknowledged commit is lost and no committed offset goes backwards, every record is
consumed (exactly once by members that commit after processing and close cleanly),
and a broker that lost the coordinator's partition answers nothing from its old state.

No client rejoins a Stable group only because its coordinator moved: kafka-python
and aiokafka (`coordinator_dead()`) forget the coordinator, find the new one and keep
their member id and generation, and librdkafka keeps its join state while it
re-queries ("Remain in joined state and keep querying for coordinator" in
rdkafka_cgrp.c, 2.0.2 as kcat has it and 2.16). Each rejoins only when no heartbeat
succeeds for a whole session timeout, so members here have a session longer than any
failover.

Random choices come from one seed, printed at the start; HERDLESS_FAULT_SEED=<seed>
replays it, HERDLESS_COORDINATOR_KILLS=<n> runs more kill cycles.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from herdless.coordinator import partition_for
from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess
from tests.support.cluster import SESSION_TIMEOUT_MS, ClusterProcesses, running_cluster
from tests.support.group_wire import (
    ask,
    error_of,
    fetched_offsets,
    find_coordinator_request,
    heartbeat_request,
    offset_commit_request,
    offset_fetch_request,
    response_class,
)
from tests.support.members import (
    PYTHON_CLIENTS,
    BackgroundProducer,
    Member,
    MemberSet,
    assert_group_matches,
    commit_failures,
    coverage_problem,
    processed_by,
    two_owners_within_a_generation,
    wait_balanced,
    wait_until,
)
from tests.support.wire import Wire

KILL_CYCLES = int(os.environ.get("HERDLESS_COORDINATOR_KILLS", "3"))
SEED = int(os.environ.get("HERDLESS_FAULT_SEED") or random.randrange(2**32))

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions of tests/support/cluster.py
PARTITIONS = 6
# Longer than any failover here (session expiry, election, load, rediscovery on a
# loaded machine): a member whose heartbeats fail for a whole session rejoins.
MEMBER_SESSION_MS = 30_000
SETTLE_TIMEOUT_S = 60.0
MOVE_TIMEOUT_S = SESSION_TIMEOUT_MS / 1000 + 30
PAUSE_S = 2 * SESSION_TIMEOUT_MS / 1000
# How long a resumed broker is asked about the group it no longer coordinates.
RESUME_WATCH_S = 3.0
PRODUCER_SETTINGS = {"enable.idempotence": True, "acks": "all"}
# What a broker that does not coordinate a group may answer about it.
NOT_SERVING = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)


# KIP-848 members heartbeat every 500 ms rather than Kafka's 5 s: a member learns of
# partitions to give up at its next heartbeat, so a group settles in a second, not ten.
CONSUMER_PROTOCOL_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    base = tmp_path_factory.mktemp("coordinator-faults")
    with running_cluster(base, **CONSUMER_PROTOCOL_SETTINGS) as processes:
        yield processes


@pytest.fixture
def rng(record_property: Any, request: pytest.FixtureRequest) -> random.Random:
    print(f"seed {SEED} (replay with HERDLESS_FAULT_SEED={SEED})")
    record_property("seed", SEED)
    return random.Random(f"{SEED}/{request.node.name}")


# -- where a group is coordinated ------------------------------------------------------


def offsets_partition(group: str) -> int:
    return partition_for(group, OFFSETS_PARTITIONS)


def groups_sharing_a_coordinator(*prefixes: str) -> list[str]:
    """A group id per prefix, all on the first one's `__consumer_offsets` partition."""
    target = offsets_partition(prefixes[0])
    return [prefixes[0]] + [
        next(
            name for name in (f"{prefix}-{i}" for i in count()) if offsets_partition(name) == target
        )
        for prefix in prefixes[1:]
    ]


def coordinator_of(cluster: ClusterProcesses, group: str) -> int:
    return cluster.leader_of(OFFSETS_TOPIC, offsets_partition(group))


def find_coordinator(cluster: ClusterProcesses, group: str, via: int) -> int | None:
    response = ask(cluster.brokers[via], find_coordinator_request(group))
    return response.node_id if response.error_code == ErrorCode.NONE else None


def wait_coordinator_found(
    cluster: ClusterProcesses, groups: list[str], via: list[int], not_: int, context: str
) -> int:
    """The coordinator every broker in `via` names for every group, once it is not `not_`."""
    answers: dict[tuple[str, int], int | None] = {}

    def agreed() -> bool:
        for group in groups:
            for broker_id in via:
                answers[(group, broker_id)] = find_coordinator(cluster, group, broker_id)
        named = set(answers.values())
        return len(named) == 1 and None not in named and not_ not in named

    wait_until(
        agreed,
        MOVE_TIMEOUT_S,
        f"FindCoordinator for {groups} names one broker other than {not_} everywhere",
        lambda: f"answers (group, asked broker) -> coordinator: {answers}\n{context}",
    )
    (found,) = set(answers.values())
    assert found is not None
    return found


def answered(broker: BrokerProcess, request: Any, what: str, timeout: float = 30.0) -> Any:
    """Ask until the answer is not COORDINATOR_LOAD_IN_PROGRESS (a shard still replaying)."""
    deadline = time.monotonic() + timeout
    while True:
        response = ask(broker, request)
        if error_of(response) != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return response
        assert time.monotonic() < deadline, f"{what}: still loading after {timeout}s"
        time.sleep(0.1)


# -- committed offsets -------------------------------------------------------------------


def acknowledged(members: list[Member], before: float) -> dict[int, int]:
    """The highest commit acknowledged to any of `members` before `before`, per partition."""
    highest: dict[int, int] = {}
    for member in members:
        for commit in member.commits():
            if commit.seen_at < before:
                for partition, offset in commit.offsets.items():
                    highest[partition] = max(highest.get(partition, -1), offset)
    return highest


class CommittedOffsets:
    """What a group's coordinator answers to OffsetFetch, asked straight at it, over time.

    Each answer must hold every commit acknowledged to the members before it was asked
    (where the members report their acknowledgements), and no partition's offset may be
    lower than in an earlier answer.
    """

    def __init__(self, cluster: ClusterProcesses, group: str, topic: str, partitions: int) -> None:
        self.cluster = cluster
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self.highest: dict[int, int] = {}
        self.history: list[str] = []

    def check(self, coordinator: int, members: list[Member], label: str) -> dict[int, int]:
        asked_at = time.monotonic()
        response = answered(
            self.cluster.brokers[coordinator],
            offset_fetch_request(self.group, self.topic, list(range(self.partitions))),
            f"OffsetFetch of {self.group} at broker {coordinator}",
        )
        assert error_of(response) == ErrorCode.NONE, (
            f"{label}: OffsetFetch of {self.group} at its coordinator {coordinator} answered"
            f" {ErrorCode(error_of(response)).name}"
        )
        committed = fetched_offsets(response)
        self.history.append(f"{label} at broker {coordinator}: {committed}")
        acks = acknowledged(members, asked_at)
        lost = {p: (committed.get(p), o) for p, o in acks.items() if committed.get(p, -1) < o}
        backwards = {
            p: (committed.get(p), o) for p, o in self.highest.items() if committed.get(p, -1) < o
        }
        assert not lost and not backwards, (
            f"{label}: {self.group} at broker {coordinator}:"
            f" (committed, acknowledged) {lost} lost commits;"
            f" (committed, earlier answer) {backwards} went backwards\n" + "\n".join(self.history)
        )
        for partition, offset in committed.items():
            self.highest[partition] = max(self.highest.get(partition, -1), offset)
        return committed


def ends_of(delivered: list[tuple[int, int, str]]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for partition, offset, _ in delivered:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def wait_all_committed(
    offsets: CommittedOffsets,
    coordinator: int,
    members: list[Member],
    delivered: list[tuple[int, int, str]],
) -> None:
    """Wait until the group has committed past every delivered record."""
    ends = ends_of(delivered)
    wait_until(
        lambda: offsets.check(coordinator, members, "draining") == ends,
        SETTLE_TIMEOUT_S,
        f"{offsets.group} consumes and commits every record ({len(delivered)})",
        lambda: f"ends {ends}\n" + "\n".join(offsets.history[-3:]),
    )


# -- what members saw --------------------------------------------------------------------


def rebalances_since(members: list[Member], marks: dict[str, int]) -> list[str]:
    return [
        f"{m.name}: {event}" for m in members for event in m.assignment_events()[marks[m.name] :]
    ]


def marks_of(members: list[Member]) -> dict[str, int]:
    return {m.name: len(m.assignment_events()) for m in members}


def broker_tails(cluster: ClusterProcesses, lines: int = 25) -> str:
    return "\n".join(
        f"--- broker {broker_id} (last {lines} lines) ---\n"
        + "\n".join(process.log().splitlines()[-lines:])
        for broker_id, process in cluster.brokers.items()
    )


class ResumedAnswers:
    """What a broker that no longer coordinates a group answered about it, once resumed.

    Anything but NOT_SERVING is stale: a Heartbeat it accepts keeps a member on a dead
    coordinator, an OffsetFetch it answers returns old offsets, an OffsetCommit it
    acknowledges (recorded in `acks` as (when, broker, offset)) is lost.
    """

    def __init__(self, acks: list[tuple[str, int, int]]) -> None:
        self.acks = acks
        self.counts: Counter[tuple[str, str]] = Counter()
        self.first: dict[tuple[str, str], str] = {}
        self.stale: list[str] = []

    def _record(self, kind: str, answer: str, when: str) -> None:
        key = (kind, answer)
        self.counts[key] += 1
        self.first.setdefault(key, when)

    def none(self, kind: str, when: str, exc: Exception) -> None:
        self._record(kind, f"no answer ({type(exc).__name__})", when)

    def judge(self, kind: str, request: Any, response: Any, when: str, broker: int) -> None:
        """Record an answer; `kind` starts with the request's name."""
        error = error_of(response)
        answer = ErrorCode(error).name
        if kind.startswith("OffsetFetch") and error == ErrorCode.NONE:
            answer += f" with offsets {fetched_offsets(response)}"
        if kind.startswith("OffsetCommit") and error == ErrorCode.NONE:
            self.acks.append((when, broker, request.topics[0].partitions[0].committed_offset))
        self._record(kind, answer, when)
        if error not in NOT_SERVING:
            self.stale.append(f"{kind} {when}: {answer}")

    def watch(
        self,
        broker: BrokerProcess,
        broker_id: int,
        requests: Callable[[int], dict[str, Any]],
        since: float,
    ) -> None:
        """Ask `broker` again and again for RESUME_WATCH_S, from the moment it resumes:
        a stale answer may come only in the moments before it hears it lost leadership."""
        wires: dict[str, Wire] = {}
        attempt = 0
        while time.monotonic() - since < RESUME_WATCH_S:
            for kind, request in requests(attempt).items():
                when = f"{time.monotonic() - since:.2f}s after the resume"
                try:
                    wire = wires.get(kind) or wires.setdefault(kind, Wire(broker, 10))
                    response = wire.call(request, response_class(request))
                except OSError as exc:
                    wires.pop(kind, None)
                    self.none(kind, when, exc)
                    continue
                self.judge(kind, request, response, when, broker_id)
            attempt += 1
            time.sleep(0.02)
        for wire in wires.values():
            wire.close()

    def summary(self) -> str:
        return "\n".join(
            f"{kind}: {answer} x{n}, first {self.first[(kind, answer)]}"
            for (kind, answer), n in sorted(self.counts.items())
        )


# -- the tests ---------------------------------------------------------------------------


@dataclass
class KilledCoordinator:
    """One kill cycle of the broker that coordinates both groups of the first test."""

    cluster: ClusterProcesses
    topic: str
    python_members: list[Member]
    kcat_members: list[Member]
    mixed_offsets: CommittedOffsets
    kcat_offsets: CommittedOffsets
    context: Callable[[], str]

    def run(self, cycle: int, rng: random.Random) -> None:
        cluster, context = self.cluster, self.context
        time.sleep(rng.uniform(0.5, 3.0))
        victim = coordinator_of(cluster, self.mixed_offsets.group)
        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        label = f"cycle {cycle} (broker {victim} killed)"
        coordinator = wait_coordinator_found(
            cluster,
            [self.mixed_offsets.group, self.kcat_offsets.group],
            [b for b in cluster.brokers if b != victim],
            victim,
            context(),
        )
        moved_at = time.monotonic()
        leader = coordinator_of(cluster, self.mixed_offsets.group)
        assert coordinator == leader and cluster.brokers[coordinator].alive(), (
            f"{label}: FindCoordinator names {coordinator}, {OFFSETS_TOPIC} is led by {leader}"
        )
        print(f"{label}: coordinator {victim} -> {coordinator} in {moved_at - killed_at:.1f}s")

        # The groups carry on at the new coordinator: the same members, Stable ...
        gone = [m.name for m in self.python_members + self.kcat_members if not m.alive()]
        assert not gone, f"{label}: members exited: {gone}\n{context()}"
        for members in (self.python_members, self.kcat_members):
            assert_group_matches(cluster.bootstrap, members, PARTITIONS, SETTLE_TIMEOUT_S)
        # ... nothing acknowledged before is missing, and their commits succeed there.
        self.mixed_offsets.check(coordinator, self.python_members, f"{label}, moved")
        kcat_at_move = self.kcat_offsets.check(coordinator, [], f"{label}, moved")
        wait_until(
            lambda: all(
                any(c.seen_at > moved_at for c in m.commits()) for m in self.python_members
            ),
            SETTLE_TIMEOUT_S,
            f"{label}: every Python member has a commit acknowledged after the move",
            context,
        )
        wait_until(
            lambda: any(
                self.kcat_offsets.check(coordinator, [], f"{label}, kcat committing")[p] > o
                for p, o in kcat_at_move.items()
            ),
            SETTLE_TIMEOUT_S,
            f"{label}: the kcat group commits at the new coordinator",
            context,
        )
        # kafka-python and aiokafka tell which coordinator acknowledged a commit.
        since_move = {
            (m.name, c.coordinator)
            for m in self.python_members
            for c in m.commits()
            if c.seen_at > moved_at and c.coordinator is not None
        }
        telling = {m.name for m in self.python_members if m.client != "confluent-kafka"}
        assert telling <= {name for name, _ in since_move} and all(
            named == coordinator for _, named in since_move
        ), (
            f"{label}: (member, coordinator) of commits acknowledged since the move to"
            f" {coordinator}: {sorted(since_move)}"
        )

        time.sleep(rng.uniform(0.5, 2.0))
        cluster.brokers[victim].start()
        cluster.wait_serving(self.topic, OFFSETS_TOPIC)
        current = coordinator_of(cluster, self.mixed_offsets.group)
        self.mixed_offsets.check(current, self.python_members, f"{label}, restarted")
        self.kcat_offsets.check(current, [], f"{label}, restarted")


def test_groups_follow_a_killed_coordinator_without_rebalancing_or_losing_commits(
    cluster: ClusterProcesses, rng: random.Random, tmp_path: Path
) -> None:
    topic = "coordinator-kills"
    mixed_group, kcat_group = groups_sharing_a_coordinator("kills-mixed", "kills-kcat")
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    member_options = {"session_timeout_ms": MEMBER_SESSION_MS, "assignor": "range"}
    with (
        BackgroundProducer(
            cluster.bootstrap, topic, PARTITIONS, prefix="k", settings=PRODUCER_SETTINGS
        ) as producer,
        MemberSet(cluster.bootstrap, mixed_group, topic, tmp_path, **member_options) as mixed,
        MemberSet(cluster.bootstrap, kcat_group, topic, tmp_path, **member_options) as kcats,
    ):
        python_members = [mixed.start(client, f"py-{client}") for client in PYTHON_CLIENTS]
        kcat_members = [kcats.start("kcat", f"kcat-{i}") for i in (1, 2)]
        everyone = python_members + kcat_members

        def context() -> str:
            return f"seed {SEED}\n{mixed.describe()}\n{kcats.describe()}\n{broker_tails(cluster)}"

        for members in (python_members, kcat_members):
            wait_balanced(members, PARTITIONS, SETTLE_TIMEOUT_S, "the group settles", context())
            assert_group_matches(cluster.bootstrap, members, PARTITIONS, SETTLE_TIMEOUT_S)
        stable_marks = marks_of(everyone)
        cycles = KilledCoordinator(
            cluster,
            topic,
            python_members,
            kcat_members,
            CommittedOffsets(cluster, mixed_group, topic, PARTITIONS),
            CommittedOffsets(cluster, kcat_group, topic, PARTITIONS),
            context,
        )
        for cycle in range(1, KILL_CYCLES + 1):
            cycles.run(cycle, rng)
            assert rebalances_since(everyone, stable_marks) == [], (
                f"cycle {cycle}: a Stable group rebalanced when its coordinator moved:\n"
                + "\n".join(rebalances_since(everyone, stable_marks))
                + f"\n{context()}"
            )

        delivered = producer.stop()
        current = coordinator_of(cluster, mixed_group)
        for offsets, members in (
            (cycles.mixed_offsets, python_members),
            (cycles.kcat_offsets, []),
        ):
            wait_all_committed(offsets, current, members, delivered)
        assert rebalances_since(everyone, stable_marks) == [], "\n".join(
            rebalances_since(everyone, stable_marks)
        )
        assert commit_failures(python_members) == [], commit_failures(python_members)

        for member in everyone:
            member.close()
        assert two_owners_within_a_generation(python_members) == []
        # Committed after processing, no rebalance, clean shutdown: exactly once.
        assert coverage_problem(python_members, delivered) is None, (
            f"{coverage_problem(python_members, delivered)}\n{context()}"
        )
        kcat_seen = processed_by(kcat_members)
        missing = sorted({(p, o) for p, o, _ in delivered} - set(kcat_seen))
        assert not missing, f"kcat group never consumed {len(missing)}: {missing[:10]}"
        repeated = sum(len(names) - 1 for names in kcat_seen.values())
        print(f"{len(delivered)} records; the kcat group consumed {repeated} of them twice")


def test_a_coordinator_paused_past_its_session_answers_nothing_stale(
    cluster: ClusterProcesses, rng: random.Random, tmp_path: Path
) -> None:
    topic, probe = "coordinator-pause", "coordinator-pause-probe"
    (group,) = groups_sharing_a_coordinator("pause-group")
    cluster.create_topic(topic, 3, 3)
    cluster.create_topic(probe, 1, 3)
    offsets = CommittedOffsets(cluster, group, topic, 3)
    member_options = {"session_timeout_ms": MEMBER_SESSION_MS, "assignor": "range"}
    with (
        BackgroundProducer(
            cluster.bootstrap, topic, 3, prefix="p", settings=PRODUCER_SETTINGS
        ) as producer,
        MemberSet(cluster.bootstrap, group, topic, tmp_path, **member_options) as members,
    ):
        kafka_python = members.start("kafka-python", "py-kafka-python")
        confluent = members.start("confluent-kafka", "py-confluent-kafka")
        python_members = [kafka_python, confluent]

        def context() -> str:
            return f"seed {SEED}\n{members.describe()}\n{broker_tails(cluster)}"

        wait_balanced(python_members, 3, SETTLE_TIMEOUT_S, "the group settles", context())
        assert_group_matches(cluster.bootstrap, python_members, 3, SETTLE_TIMEOUT_S)
        cluster.wait_serving(topic, OFFSETS_TOPIC)  # every broker in the ISR, to be paused
        stable_marks = marks_of(python_members)
        # Raw requests speak for kafka-python's member: its id and generation.
        joined = kafka_python.last("assign")
        assert joined is not None and kafka_python.generation is not None
        generation, member_id = kafka_python.generation, joined.data["member_id"]

        def commit_probe(offset: int, note: str) -> Any:
            return offset_commit_request(group, probe, {0: offset}, generation, member_id, note)

        # Which broker acknowledged which raw commit of the probe partition.
        acks: list[tuple[str, int, int]] = []
        old = coordinator_of(cluster, group)
        others = [b for b in cluster.brokers if b != old]
        response = answered(cluster.brokers[old], commit_probe(1, "before"), "probe commit")
        assert error_of(response) == ErrorCode.NONE, ErrorCode(error_of(response)).name
        acks.append(("before the pause", old, 1))

        # Sent on connections the coordinator accepted, while it is stopped: it reads
        # them the moment it runs again, before it can have heard from ZooKeeper.
        queued = {
            "Heartbeat": heartbeat_request(group, generation, member_id),
            "OffsetFetch": offset_fetch_request(group, probe, [0]),
            "OffsetCommit": commit_probe(1000, "sent while paused"),
        }
        waiting = {kind: Wire(cluster.brokers[old], timeout=PAUSE_S + 30) for kind in queued}
        time.sleep(rng.uniform(0.2, 1.5))
        # The coordinator stops with no write of the group in flight (the members have
        # committed all there is): a write still waiting for its replicas would hold
        # back every later answer of the shard until the broker hears that it lost its
        # partition, hiding what the shard answers on its own. The members commit
        # again as soon as records come, while it is stopped.
        producer.pause()
        wait_all_committed(offsets, old, python_members, producer.acknowledged())
        cluster.pause(old)
        paused_at = time.monotonic()
        producer.resume()
        try:
            for kind, request in queued.items():
                waiting[kind].send(request)
            coordinator = wait_coordinator_found(cluster, [group], others, old, context())
            moved_at = time.monotonic()
            print(f"coordinator {old} (paused) -> {coordinator} in {moved_at - paused_at:.1f}s")
            response = answered(cluster.brokers[coordinator], commit_probe(2, "moved"), "commit")
            assert error_of(response) == ErrorCode.NONE, ErrorCode(error_of(response)).name
            acks.append(("after the move", coordinator, 2))
            time.sleep(max(0.0, PAUSE_S - (time.monotonic() - paused_at)))
        finally:
            cluster.resume(old)
        resumed_at = time.monotonic()
        assert resumed_at - paused_at > SESSION_TIMEOUT_MS / 1000

        # Whatever the resumed broker answers about the group must say "not here": asked
        # from the moment it runs again, and what it answers to what waited for it.
        answers = ResumedAnswers(acks)
        answers.watch(
            cluster.brokers[old],
            old,
            lambda attempt: {
                "Heartbeat": heartbeat_request(group, generation, member_id),
                "OffsetFetch": offset_fetch_request(group, probe, [0]),
                "OffsetCommit": commit_probe(3000 + attempt, "after the resume"),
            },
            resumed_at,
        )
        for kind, request in queued.items():
            try:
                response = waiting[kind].receive(request, response_class(request))
            except OSError as exc:  # closed or silent: it answered nothing stale
                answers.none(f"{kind} sent while stopped", "after the resume", exc)
                continue
            finally:
                waiting[kind].close()
            answers.judge(f"{kind} sent while stopped", request, response, "after the resume", old)
        print(answers.summary())
        print(f"probe commits acknowledged (when, broker, offset): {acks}")
        assert not answers.stale, (
            f"broker {old}, resumed after {resumed_at - paused_at:.1f}s stopped, no longer"
            f" coordinates {group} (broker {coordinator} does) yet answered:\n"
            + "\n".join(answers.stale[:10])
            + f"\nall answers:\n{answers.summary()}\n{context()}"
        )

        # What the group committed at the new coordinator stands; nothing the resumed
        # broker took in exists.
        current = wait_coordinator_found(cluster, [group], list(cluster.brokers), -1, context())
        response = answered(
            cluster.brokers[current], offset_fetch_request(group, probe, [0]), "fetch"
        )
        assert fetched_offsets(response) == {0: 2}, (
            f"probe partition committed {fetched_offsets(response)}; acknowledged: {acks}"
        )

        # The real members moved too: they commit at the new coordinator, none rebalanced.
        wait_until(
            lambda: all(any(c.seen_at > resumed_at for c in m.commits()) for m in python_members),
            SETTLE_TIMEOUT_S,
            "both members commit after the resume",
            context,
        )
        late = [c for c in kafka_python.commits() if c.seen_at > paused_at and c.coordinator == old]
        assert not late, f"kafka-python commits acknowledged by the paused broker {old}: {late}"
        offsets.check(current, python_members, "after the resume")
        assert rebalances_since(python_members, stable_marks) == [], (
            "a Stable group rebalanced when its coordinator was paused:\n"
            + "\n".join(rebalances_since(python_members, stable_marks))
        )

        delivered = producer.stop()
        wait_all_committed(offsets, current, python_members, delivered)
        for member in python_members:
            member.close()
        assert coverage_problem(python_members, delivered) is None, coverage_problem(
            python_members, delivered
        )


def test_a_consumer_group_follows_a_killed_coordinator_at_the_same_epochs(
    cluster: ClusterProcesses, tmp_path: Path
) -> None:
    """A KIP-848 group (group.protocol=consumer) is its records: the follower that takes
    over the coordinator's partition has them replayed (a warm standby), so the members
    go on at the epochs and with the partitions they had, and their commits stand."""
    topic = "coordinator-kills-848"
    (group,) = groups_sharing_a_coordinator("kills-848")
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    with (
        BackgroundProducer(
            cluster.bootstrap, topic, PARTITIONS, prefix="c", settings=PRODUCER_SETTINGS
        ) as producer,
        MemberSet(cluster.bootstrap, group, topic, tmp_path, group_protocol="consumer") as set_,
    ):
        members = [set_.start("confluent-kafka", f"c848-{i}") for i in (1, 2)]

        def context() -> str:
            return f"{set_.describe()}\n{broker_tails(cluster)}"

        wait_balanced(members, PARTITIONS, SETTLE_TIMEOUT_S, "the group settles", context())
        offsets = CommittedOffsets(cluster, group, topic, PARTITIONS)
        cluster.wait_serving(topic, OFFSETS_TOPIC)  # a follower in the ISR, replaying
        stable_marks = marks_of(members)
        epochs = {m.name: m.generation for m in members}
        victim = coordinator_of(cluster, group)
        offsets.check(victim, members, "before the kill")
        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        others = [b for b in cluster.brokers if b != victim]
        coordinator = wait_coordinator_found(cluster, [group], others, victim, context())
        offsets.check(coordinator, members, "moved")
        wait_until(
            lambda: all(any(c.seen_at > killed_at for c in m.commits()) for m in members),
            SETTLE_TIMEOUT_S,
            "both members commit at the new coordinator",
            context,
        )
        assert rebalances_since(members, stable_marks) == [], (
            "a consumer group's assignment changed when its coordinator moved:\n"
            + "\n".join(rebalances_since(members, stable_marks))
            + f"\n{context()}"
        )
        assert {m.name: m.generation for m in members} == epochs

        cluster.brokers[victim].start()
        cluster.wait_serving(topic, OFFSETS_TOPIC)
        delivered = producer.stop()
        wait_all_committed(offsets, coordinator_of(cluster, group), members, delivered)
        for member in members:
            member.close()
        assert coverage_problem(members, delivered) is None, (
            f"{coverage_problem(members, delivered)}\n{context()}"
        )
