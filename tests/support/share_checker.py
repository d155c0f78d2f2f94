"""A share group under SIGKILL on a cluster, checked: every record produced is accepted
by exactly one member or archived, none is delivered again once its acceptance was
confirmed, and the share coordinator's persisted state says the same.

A writer produces numbered records to a topic of two partitions, replicated three
times. Members (tests/support/share_member.py, each a ShareConsumer in a process of its
own) accept every record and report each delivery, and each acceptance once the
broker's answer confirmed it. Faults SIGKILL and restart a member, the leader of a
share partition, or the broker leading the `__share_group_state` partition that holds
a share partition's state (its share coordinator). The group names a dead-letter topic,
so that records archived at the delivery limit (released twice by killed members) are
counted from it.

At the end, with every broker up, the members run until the share coordinator's start
offset of each share partition (ReadShareGroupStateSummary, which fences no one)
reaches the partition's end, then:

- accepted: records whose acceptance a member saw confirmed; archived: records in the
  dead-letter topic;
- duplicates after accept: deliveries of a record after its acceptance was confirmed,
  and acceptances confirmed twice; accepted and archived: both; must be 0;
- lost: records neither accepted nor archived, unless a member killed after it was
  delivered may have accepted it without living to report it (settled unreported);
  must be 0;
- state disagreeing: records accepted or archived that the persisted start offset
  has not passed, or a start offset short of the end; must be 0;
- delivered again as new: deliveries with a count of 1 after an earlier delivery. A
  share partition's leader does not persist acquisitions (neither does Kafka's
  SharePartition, which writes state on acknowledgement, release and lock expiry
  only), so records acquired but not acknowledged when their leader died come back
  with the delivery count last written; counted, not a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from herdless.broker.peers.connection import PeerConnection
from herdless.coordinator.share_state import SharePartitionKey
from herdless.coordinator.share_state.shard import SHARE_GROUP_STATE_TOPIC, share_state_partition
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.errors import ErrorCode
from tests.support.checker import Writer, high_watermarks, read_partitions
from tests.support.cluster import ClusterProcesses
from tests.support.wire import Wire
from tests.test_group_configs import alter
from tests.test_protocol_versions import topic_id_of

MEMBER = Path(__file__).with_name("share_member.py")
TOPIC, GROUP, DEAD_LETTERS = "share-chaos", "share-chaos", "dlq.share-chaos"
PARTITIONS = 2
MEMBERS = 4
# Short locks, so that a killed member's records come back within a cycle; the brokers
# must allow them (CLUSTER_SETTINGS).
LOCK_MS = 3_000
CLUSTER_SETTINGS = {"group.share.min.record.lock.duration.ms": "1000"}
# Kafka's lowest: a record whose member is killed twice while holding it is archived,
# so that the archive and its dead letters are checked too.
DELIVERY_LIMIT = 2
FAULTS = ("member", "share-leader", "share-coordinator")
REQUEST_TIMEOUT_S = 10


@dataclass
class Member:
    name: str
    incarnation: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def current(self) -> str:
        return f"{self.name}#{self.incarnation}"


class Members:
    """Member processes, killed and started again by the fault loop."""

    def __init__(self, bootstrap: str, workdir: Path, count: int = MEMBERS) -> None:
        self.bootstrap, self.workdir = bootstrap, workdir
        self.reports = workdir / "share-reports.log"
        self.members = [Member(f"m{i}") for i in range(count)]
        # Incarnations SIGKILLed: what they got they may have accepted unreported.
        self.killed: set[str] = set()
        self.exits: Counter[int] = Counter()

    def start(self, member: Member) -> None:
        member.incarnation += 1
        with open(self.workdir / f"{member.name}.log", "ab") as log:
            member.process = subprocess.Popen(
                [
                    sys.executable,
                    str(MEMBER),
                    self.bootstrap,
                    GROUP,
                    TOPIC,
                    str(self.reports),
                    member.current,
                    "accept",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def start_all(self) -> Members:
        for member in self.members:
            self.start(member)
        return self

    def kill(self, member: Member) -> None:
        if member.process is not None and member.process.poll() is None:
            member.process.kill()
            member.process.wait()
            self.killed.add(member.current)
        member.process = None

    def supervise(self) -> None:
        """Start again any member that exited on its own, as a supervisor would."""
        for member in self.members:
            if member.process is None or member.process.poll() is not None:
                if member.process is not None:
                    self.exits[member.process.returncode] += 1
                self.start(member)

    def stop_all(self) -> None:
        for member in self.members:
            self.kill(member)


@dataclass(frozen=True)
class MemberReport:
    """One line of a member's reports."""

    at: float
    member: str
    what: str
    partition: int
    offset: int
    delivery_count: int


def member_reports(path: Path) -> list[MemberReport]:
    found = []
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            parts = line.split(" ", 6)
            if len(parts) < 6:
                continue  # torn by a kill in the middle of a write: none is
            at, member, what, partition, offset, count = parts[:6]
            found.append(
                MemberReport(float(at), member, what, int(partition), int(offset), int(count))
            )
    return found


class ShareFaults:
    """The cluster's brokers, and the faults the share group takes."""

    def __init__(self, cluster: ClusterProcesses, topic_id: uuid.UUID) -> None:
        self.cluster, self.topic_id = cluster, topic_id
        self.state_partitions = int(
            cluster.settings.get("share.coordinator.state.topic.num.partitions", 50)
        )

    def coordinator_of(self, partition: int) -> int:
        """The broker holding the share partition's state: the leader of its
        `__share_group_state` partition."""
        key = SharePartitionKey(GROUP, self.topic_id, partition)
        state = share_state_partition(key, self.state_partitions)
        return self.cluster.leader_of(SHARE_GROUP_STATE_TOPIC, state)

    def inject(self, fault: str, members: Members, rng: random.Random) -> str:
        if fault == "member":
            member = rng.choice(members.members)
            members.kill(member)
            time.sleep(rng.uniform(0.0, 1.0))
            members.start(member)
            return f"SIGKILL of member {member.name}"
        partition = rng.randrange(PARTITIONS)
        if fault == "share-leader":
            victim = self.cluster.leader_of(TOPIC, partition)
            what = f"SIGKILL of broker {victim}, leader of {TOPIC}-{partition}"
        else:
            victim = self.coordinator_of(partition)
            what = f"SIGKILL of broker {victim}, share coordinator of {TOPIC}-{partition}"
        self.cluster.kill(victim)
        time.sleep(rng.uniform(0.2, 2.0))
        self.cluster.brokers[victim].start()
        return what

    def start_offsets(self) -> dict[int, int]:
        """Each share partition's start offset as its share coordinator persisted it
        (-1: not known yet, or the coordinator did not answer)."""
        return {p: self._start_offset(p) for p in range(PARTITIONS)}

    def _start_offset(self, partition: int) -> int:
        try:
            process = self.cluster.brokers[self.coordinator_of(partition)]
        except Exception:
            return -1

        async def ask() -> Any:
            connection = PeerConnection(
                process.host, process.port, "share-checker", REQUEST_TIMEOUT_S
            )
            try:
                return await connection.request(
                    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
                    0,
                    group_id=GROUP,
                    topics=[
                        {
                            "topic_id": self.topic_id,
                            "partitions": [{"partition": partition, "leader_epoch": -1}],
                        }
                    ],
                )
            finally:
                connection.close()

        try:
            (result,) = asyncio.run(ask()).results
        except Exception:
            return -1
        (found,) = result.partitions
        return int(found.start_offset) if found.error_code == ErrorCode.NONE else -1


@dataclass
class ShareReport:
    produced: int = 0
    delivered: int = 0
    accepted: int = 0
    archived: int = 0
    settled_unreported: int = 0
    delivered_again_as_new: int = 0
    duplicates_after_accept: int = 0
    accepted_and_archived: int = 0
    lost: int = 0
    state_disagreeing: int = 0
    details: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.duplicates_after_accept
            or self.accepted_and_archived
            or self.lost
            or self.state_disagreeing
        )

    def counts(self) -> dict[str, int]:
        return {
            "produced": self.produced,
            "deliveries": self.delivered,
            "accepted": self.accepted,
            "archived": self.archived,
            "settled unreported": self.settled_unreported,
            "delivered again as new": self.delivered_again_as_new,
            "duplicates after accept": self.duplicates_after_accept,
            "accepted and archived": self.accepted_and_archived,
            "lost": self.lost,
            "state disagreeing": self.state_disagreeing,
        }

    def __str__(self) -> str:
        counts = ", ".join(f"{name} {count}" for name, count in self.counts().items())
        return "\n".join([counts, *self.details[:20]])


Key = tuple[int, int]


def dead_letters(bootstrap: str, timeout: float = 60.0) -> set[Key]:
    """(partition, offset) of every record of the topic in the dead-letter topic."""
    ends = high_watermarks(bootstrap, DEAD_LETTERS, 1)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "share-checker", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(DEAD_LETTERS, 0, OFFSET_BEGINNING)])
    found: set[Key] = set()
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while seen < ends[0] and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is not None:
                    continue
                seen = message.offset() + 1
                headers = dict(message.headers() or ())
                if headers.get("__dlq.errors.topic") == TOPIC.encode():
                    found.add(
                        (
                            int(headers["__dlq.errors.partition"]),
                            int(headers["__dlq.errors.offset"]),
                        )
                    )
    finally:
        consumer.close()
    return found


def check_share_group(
    produced: set[Key],
    reports: list[MemberReport],
    archived: set[Key],
    start_offsets: dict[int, int],
    ends: dict[int, int],
    killed: set[str],
) -> ShareReport:
    report = ShareReport(produced=len(produced), archived=len(archived))
    deliveries: dict[Key, list[MemberReport]] = defaultdict(list)
    acceptances: dict[Key, list[MemberReport]] = defaultdict(list)
    for line in sorted(reports, key=lambda r: r.at):
        key = (line.partition, line.offset)
        (deliveries if line.what == "got" else acceptances)[key].append(line)
    report.delivered = sum(len(d) for d in deliveries.values())
    report.accepted = len(acceptances)
    for got in deliveries.values():
        fresh = [d for d in got if d.delivery_count == 1]
        report.delivered_again_as_new += max(len(fresh) - 1, 0)
    for key, accepted in acceptances.items():
        confirmed_at = accepted[0].at
        again = [d for d in deliveries.get(key, ()) if d.at > confirmed_at]
        twice = len(accepted) - 1
        if again or twice:
            report.duplicates_after_accept += len(again) + twice
            report.details.append(
                f"{key} accepted by {accepted[0].member}, then delivered to"
                f" {[d.member for d in again]} and accepted by {[a.member for a in accepted[1:]]}"
            )
        if key in archived:
            report.accepted_and_archived += 1
            report.details.append(f"{key} accepted by {accepted[0].member} and archived")
    for partition, end in ends.items():
        start = start_offsets.get(partition, -1)
        if start != end:
            report.state_disagreeing += 1
            report.details.append(
                f"partition {partition}: persisted start offset {start}, log end {end}"
            )
    for key in sorted(produced - acceptances.keys() - archived):
        got = deliveries.get(key, [])
        settled = key[1] < start_offsets.get(key[0], -1)
        if settled and got and got[-1].member in killed:
            report.settled_unreported += 1
            continue
        report.lost += 1
        report.details.append(
            f"{key} neither accepted nor archived; delivered to {[d.member for d in got]},"
            f" {'below' if settled else 'at or past'} the persisted start offset"
        )
    for key in sorted((acceptances.keys() | archived) & produced):
        if key[1] >= start_offsets.get(key[0], -1):
            report.state_disagreeing += 1
            report.details.append(f"{key} settled, but not below the persisted start offset")
    return report


def settle(
    faults: ShareFaults,
    members: Members,
    ends: dict[int, int],
    timeout: float,
) -> dict[int, int]:
    """The persisted start offsets once they reach `ends`, or at the deadline, while the
    members keep consuming."""
    deadline = time.monotonic() + timeout
    while True:
        members.supervise()
        starts = faults.start_offsets()
        if all(starts[p] >= end for p, end in ends.items()) or time.monotonic() > deadline:
            return starts
        time.sleep(0.5)


def run(
    cluster: ClusterProcesses,
    workdir: Path,
    cycles: int,
    rng: random.Random,
    *,
    advance: Callable[[str], None] = lambda fault: None,
    settle_timeout: float = 120.0,
) -> ShareReport:
    """Records written throughout, members accepting them, `cycles` random faults; then
    the cluster heals, the members finish, and the group's accounting is checked."""
    quiet = logging.getLogger("share-checker-clients")
    quiet.setLevel(logging.CRITICAL)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": quiet})
    created = admin.create_topics(
        [
            NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}),
            NewTopic(
                DEAD_LETTERS,
                1,
                3,
                config={"min.insync.replicas": "2", "errors.deadletterqueue.group.enable": "true"},
            ),
        ]
    )
    for future in created.values():
        future.result(30)
    configs = {
        "share_auto_offset_reset": "earliest",
        "share_record_lock_duration_ms": str(LOCK_MS),
        "share_delivery_count_limit": str(DELIVERY_LIMIT),
        "errors_deadletterqueue_topic_name": DEAD_LETTERS,
    }
    altered = alter(cluster.bootstrap, GROUP, **configs)
    assert altered == "OK", f"the group's configs: {altered}"
    cluster.wait_serving(TOPIC, DEAD_LETTERS)
    some = next(iter(cluster.brokers.values()))
    wire = Wire(some)
    try:
        topic_id = topic_id_of(wire, TOPIC)
    finally:
        wire.close()
    faults = ShareFaults(cluster, topic_id)
    writer = Writer(cluster.bootstrap, TOPIC, prefix="sc", pause_every=1, logger=quiet).start()
    members = Members(cluster.bootstrap, workdir).start_all()
    try:
        for _ in range(cycles):
            time.sleep(rng.uniform(0.5, 2.5))
            members.supervise()
            advance(faults.inject(rng.choice(FAULTS), members, rng))
        writer.stop()
        cluster.restore()
        ends = high_watermarks(cluster.bootstrap, TOPIC, PARTITIONS)
        starts = settle(faults, members, ends, settle_timeout)
    finally:
        members.stop_all()
    records = read_partitions(cluster.bootstrap, TOPIC, PARTITIONS, ends, timeout=60)
    produced = {(p, offset) for p, found in records.items() for offset, _ in found}
    report = check_share_group(
        produced,
        member_reports(members.reports),
        dead_letters(cluster.bootstrap),
        starts,
        ends,
        members.killed,
    )
    report.details.extend(
        f"members exited on their own with {code} {count} times"
        for code, count in members.exits.items()
    )
    return report
