"""Consumer-group members in separate OS processes, and checks over a whole group.

A ``Member`` is one consumer process: ``tests/support/member.py`` for the Python
clients, or ``kcat -G`` (librdkafka's balanced consumer) whose stderr and stdout
are translated into the same events. Every event carries the monotonic time
the test saw it, so a test can tell how long a rebalance took. Records a member
processed end up in its ``processed`` file as ``partition offset value`` lines.

Members are started through ``MemberSet``, which kills whatever is still
running when the test ends and describes every member when a check fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from kafka.admin import KafkaAdminClient

from tests.support.cli import herdless

MEMBER_SCRIPT = Path(__file__).with_name("member.py")
PYTHON_CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
CLIENTS = (*PYTHON_CLIENTS, "kcat")
EXIT_TIMEOUT_S = 60.0

_KCAT_EAGER = re.compile(r"Group \S+ rebalanced \(memberid ([^)]*)\): (assigned|revoked):(.*)$")
_KCAT_COOPERATIVE = re.compile(
    r"Group \S+ rebalanced: incremental (assignment|revoke) of \d+ partition\(s\) "
    r"\(memberid ([^,)]*)[^)]*\): ?(.*)$"
)
_KCAT_PARTITION = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Event:
    kind: str
    seen_at: float  # time.monotonic() in the test process when the line was read
    data: dict[str, Any]

    @property
    def partitions(self) -> frozenset[int]:
        return frozenset(self.data.get("partitions", ()))

    @property
    def generation(self) -> int | None:
        generation = self.data.get("generation")
        return generation if isinstance(generation, int) and generation >= 0 else None

    def __str__(self) -> str:
        fields = {k: v for k, v in self.data.items() if k not in ("event", "time")}
        return f"{self.kind}{fields}"


ASSIGNMENT_KINDS = ("assign", "revoke", "lost")


@dataclass(frozen=True)
class Commit:
    """A commit the member's client acknowledged."""

    seen_at: float
    offsets: dict[int, int]  # partition -> next offset to consume
    coordinator: int | None  # the broker that coordinated the group, where the client says


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, seen: Callable[[], str]
) -> float:
    """Poll until condition() holds; returns the seconds it took, fails saying what was seen."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        if condition():
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout:.0f}s; seen:\n{seen()}")
        time.sleep(0.05)


@dataclass
class Member:
    client: str
    name: str
    bootstrap: str
    group: str
    topic: str
    workdir: Path
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 500
    max_poll_interval_ms: int = 60_000
    instance_id: str | None = None
    assignor: str | None = None
    group_protocol: str = "classic"  # "consumer": KIP-848 (confluent-kafka only)
    log_level: str = "INFO"  # the Python clients' logging, kept in the member's stderr file
    incarnation: int = 1  # a member restarted under the same name gets fresh files
    events: list[Event] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def processed_path(self) -> Path:
        return self.workdir / f"{self.name}.{self.incarnation}.processed"

    @property
    def stderr_path(self) -> Path:
        return self.workdir / f"{self.name}.{self.incarnation}.stderr"

    # -- life cycle --------------------------------------------------------

    def start(self) -> Member:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.client == "kcat":
            command = self._kcat_command()
        else:
            command = [
                sys.executable,
                str(MEMBER_SCRIPT),
                "--client",
                self.client,
                "--name",
                self.name,
                "--bootstrap",
                self.bootstrap,
                "--group",
                self.group,
                "--topic",
                self.topic,
                "--out",
                str(self.processed_path),
                "--session-timeout-ms",
                str(self.session_timeout_ms),
                "--heartbeat-interval-ms",
                str(self.heartbeat_interval_ms),
                "--max-poll-interval-ms",
                str(self.max_poll_interval_ms),
            ]
            if self.instance_id:
                command += ["--instance-id", self.instance_id]
            if self.assignor:
                command += ["--assignor", self.assignor]
            command += ["--group-protocol", self.group_protocol]
            command += ["--log-level", self.log_level]
        self.processed_path.touch()
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        if self.client == "kcat":
            self._record("started", {"pid": self.process.pid, "client": "kcat"})
            readers = [self._read_kcat_stdout, self._read_kcat_stderr]
        else:
            readers = [self._read_member_stdout, self._read_stderr_to_file]
        for reader in readers:
            thread = threading.Thread(target=reader, daemon=True, name=f"{self.name}-{reader}")
            thread.start()
            self._threads.append(thread)
        return self

    def _kcat_command(self) -> list[str]:
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        assert kcat, "kcat is not installed: apt-get install -y kcat"
        settings = {
            "client.id": self.name,
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_interval_ms,
            "max.poll.interval.ms": self.max_poll_interval_ms,
            # kcat -G leaves offsets to librdkafka's auto commit (on by default):
            # stored when a message is handed to kcat, committed every interval,
            # on revoke and on close.
            "auto.commit.interval.ms": 200,
            # Not -o: in -G mode it would override the committed offsets.
            "topic.auto.offset.reset": "earliest",
            # kcat exits when librdkafka reports all broker connections down. With
            # sparse connections (the default) it keeps none to brokers it has no use
            # for, nor reconnects to a restarted one, so in a cluster the death of the
            # one broker it talks to would end it; with connections to every broker
            # only a whole cluster down does.
            "enable.sparse.connections": "false",
        }
        if self.instance_id:
            settings["group.instance.id"] = self.instance_id
        if self.assignor:
            settings["partition.assignment.strategy"] = self.assignor
        command = [kcat, "-b", self.bootstrap, "-G", self.group, "-u", "-f", "%p %o %s\\n"]
        for key, value in settings.items():
            command += ["-X", f"{key}={value}"]
        return [*command, self.topic]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no last commit."""
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(EXIT_TIMEOUT_S)
        self._join_readers()

    def terminate(self) -> int:
        """SIGTERM: the member commits, closes its consumer (leaving the group) and exits."""
        assert self.process is not None
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.name} did not exit within {EXIT_TIMEOUT_S}s of SIGTERM:\n{self.describe()}"
            ) from None
        self._join_readers()
        return code

    def close(self) -> None:
        """A clean shutdown that must succeed: exit code 0 (and for our program, 'closed')."""
        code = self.terminate()
        assert code == 0, f"{self.name} exited with {code} on SIGTERM:\n{self.describe()}"
        if self.client != "kcat":
            assert self.last("closed") is not None, (
                f"{self.name} exited without closing its consumer:\n{self.describe()}"
            )

    def _join_readers(self) -> None:
        for thread in self._threads:
            thread.join(10)

    # -- events ------------------------------------------------------------

    def _record(self, kind: str, data: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(Event(kind, time.monotonic(), {"event": kind, **data}))

    def _read_member_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except ValueError:
                self._record("output", {"line": line})
                continue
            self._record(data.get("event", "unknown"), data)

    def _read_stderr_to_file(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        with open(self.stderr_path, "ab") as log:
            for raw in self.process.stderr:
                log.write(raw)
                log.flush()

    def _read_kcat_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        with open(self.processed_path, "ab") as out:
            for raw in self.process.stdout:
                out.write(raw)
                out.flush()

    def _read_kcat_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        owned: set[int] = set()
        with open(self.stderr_path, "ab") as log:
            for raw in self.process.stderr:
                log.write(raw)
                log.flush()
                line = raw.decode(errors="replace").rstrip("\n")
                eager = _KCAT_EAGER.search(line)
                cooperative = _KCAT_COOPERATIVE.search(line)
                if eager:
                    member_id, what, rest = eager.groups()
                    kind = "assign" if what == "assigned" else "revoke"
                elif cooperative:
                    what, member_id, rest = cooperative.groups()
                    kind = "assign" if what == "assignment" else "revoke"
                else:
                    continue
                delta = {int(p) for p in _KCAT_PARTITION.findall(rest)}
                if kind == "assign":
                    owned |= delta
                else:
                    owned -= delta
                self._record(
                    kind,
                    {
                        "delta": sorted(delta),
                        "partitions": sorted(owned),
                        "generation": None,
                        "member_id": member_id,
                    },
                )
            code = self.process.wait()
            self._record("exited", {"code": code})

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)

    def last(self, *kinds: str) -> Event | None:
        for event in reversed(self.snapshot()):
            if event.kind in kinds:
                return event
        return None

    def assignment_events(self) -> list[Event]:
        return [e for e in self.snapshot() if e.kind in ASSIGNMENT_KINDS]

    def commits(self) -> list[Commit]:
        """The commits acknowledged to this member (our member program reports them)."""
        return [
            Commit(
                e.seen_at,
                {int(p): o for p, o in e.data["offsets"].items()},
                e.data.get("coordinator"),
            )
            for e in self.snapshot()
            if e.kind == "committed"
        ]

    @property
    def assignment(self) -> frozenset[int] | None:
        """The partitions the member holds now, None before its first assignment."""
        event = self.last(*ASSIGNMENT_KINDS)
        return None if event is None else event.partitions

    @property
    def generation(self) -> int | None:
        for event in reversed(self.assignment_events()):
            if event.generation is not None:
                return event.generation
        return None

    def processed(self) -> list[tuple[int, int, str]]:
        """(partition, offset, value) of every record this member processed, in order."""
        try:
            text = self.processed_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        records = []
        for line in text.split("\n")[:-1]:  # the last piece is empty or a line being written
            if not line:
                continue
            partition, offset, value = line.split(" ", 2)
            records.append((int(partition), int(offset), value))
        return records

    def describe(self, events: int = 12) -> str:
        if self.process is None:
            state = "not started"
        elif self.alive():
            state = f"running (pid {self.process.pid})"
        else:
            state = f"exited {self.process.returncode} (pid {self.process.pid})"
        lines = [
            f"  {self.name} [{self.client}] {state}; assignment "
            f"{sorted(self.assignment) if self.assignment is not None else None}, "
            f"generation {self.generation}, processed {len(self.processed())} records"
        ]
        for event in self.snapshot()[-events:]:
            lines.append(f"    {event.seen_at:.2f} {event}")
        try:
            stderr = self.stderr_path.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            stderr = []
        lines += [f"    stderr: {line}" for line in stderr[-8:]]
        return "\n".join(lines)


class MemberSet:
    """The members of one test's group; kills any still running when the test ends."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, workdir: Path, **defaults: Any
    ) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.workdir = workdir
        self.defaults = defaults
        self.members: list[Member] = []

    def __enter__(self) -> MemberSet:
        return self

    def __exit__(self, *exc: object) -> None:
        for member in self.members:
            member.kill()

    def start(self, client: str, name: str | None = None, **options: Any) -> Member:
        name = name or f"m{len(self.members) + 1}"
        assert all(m.name != name for m in self.members), f"two members named {name}"
        member = Member(
            client=client,
            name=name,
            bootstrap=self.bootstrap,
            group=self.group,
            topic=self.topic,
            workdir=self.workdir,
            **{**self.defaults, **options},
        )
        self.members.append(member.start())
        return member

    def restart(self, member: Member) -> Member:
        """Start the same member again (same name, client id and instance id) once it is gone."""
        assert not member.alive(), f"{member.name} is still running"
        again = Member(
            client=member.client,
            name=member.name,
            bootstrap=member.bootstrap,
            group=member.group,
            topic=member.topic,
            workdir=member.workdir,
            session_timeout_ms=member.session_timeout_ms,
            heartbeat_interval_ms=member.heartbeat_interval_ms,
            max_poll_interval_ms=member.max_poll_interval_ms,
            instance_id=member.instance_id,
            assignor=member.assignor,
            group_protocol=member.group_protocol,
            log_level=member.log_level,
            incarnation=member.incarnation + 1,
        )
        self.members.append(again.start())
        return again

    def live(self) -> list[Member]:
        return [m for m in self.members if m.alive()]

    def describe(self) -> str:
        return "\n".join(m.describe() for m in self.members)


# -- checks over a group -------------------------------------------------------


def ownership_problem(members: list[Member], partitions: int) -> str | None:
    """Why these members' own views are not one settled, balanced split; None if they are.

    Settled means: each member reports an assignment, every partition has exactly
    one owner, shares differ by at most one partition and, where the client
    reports it, every member of a classic group is at the same generation.
    """
    views = {m.name: m.assignment for m in members}
    waiting = [name for name, view in views.items() if view is None]
    if waiting:
        return f"no assignment yet for {waiting}"
    owners: dict[int, list[str]] = defaultdict(list)
    for name, view in views.items():
        for partition in view or ():
            owners[partition].append(name)
    problems = []
    shared = {p: names for p, names in owners.items() if len(names) > 1}
    if shared:
        problems.append(f"owned twice: {shared}")
    missing = sorted(set(range(partitions)) - set(owners))
    if missing:
        problems.append(f"unowned: {missing}")
    sizes = {name: len(view or ()) for name, view in views.items()}
    if max(sizes.values()) - min(sizes.values()) > 1:
        problems.append(f"unbalanced: {sizes}")
    # A classic group's generation is the group's; a consumer group member's epoch its own.
    generations = {
        m.name: m.generation
        for m in members
        if m.generation is not None and m.group_protocol == "classic"
    }
    if len(set(generations.values())) > 1:
        problems.append(f"generations differ: {generations}")
    if problems:
        views_text = {name: sorted(view or ()) for name, view in views.items()}
        return f"{'; '.join(problems)} (views {views_text})"
    return None


def wait_balanced(
    members: list[Member], partitions: int, timeout: float, what: str, context: str = ""
) -> float:
    """Wait until the members' own views form a settled split; returns the seconds it took."""
    return wait_until(
        lambda: ownership_problem(members, partitions) is None,
        timeout,
        what,
        lambda: (
            f"{ownership_problem(members, partitions)}\n"
            + "\n".join(m.describe() for m in members)
            + (f"\n{context}" if context else "")
        ),
    )


def settled_at(members: list[Member]) -> float:
    """When the test saw the last assignment change among these members."""
    return max(e.seen_at for m in members for e in m.assignment_events())


def two_owners_within_a_generation(members: list[Member]) -> list[str]:
    """Within one generation no partition may have two owners (from the members' own views).

    Each member's holding at generation g is its assignment after the last event
    it reported at g; members that report no generation (kcat) are left out.
    """
    held: dict[int, dict[str, frozenset[int]]] = defaultdict(dict)
    for member in members:
        for event in member.assignment_events():
            if event.generation is not None:
                held[event.generation][member.name] = event.partitions
    problems = []
    for generation, views in sorted(held.items()):
        owners: dict[int, list[str]] = defaultdict(list)
        for name, view in views.items():
            for partition in view:
                owners[partition].append(name)
        for partition, names in sorted(owners.items()):
            if len(names) > 1:
                problems.append(f"generation {generation}: partition {partition} held by {names}")
    return problems


def overlapping_ownership(members: list[Member], ended: dict[str, float]) -> list[str]:
    """Times two members owned a partition at once, by their own clocks (one machine's).

    A member owns a partition from the assign event that gives it (reported before it
    processes any record of it) to the revoke or lost event that takes it (reported
    once its last commit is done), or else to when it ended: `ended` holds the
    wall-clock time a member was killed; a member not in it owns to its last event.
    """
    spans: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for member in members:
        since: dict[int, float] = {}
        events = member.assignment_events()
        for event in events:
            at = float(event.data["time"])
            delta = set(event.data.get("delta", ()))
            for partition in sorted(delta):
                if event.kind == "assign":
                    since.setdefault(partition, at)
                elif partition in since:
                    spans[partition].append((since.pop(partition), at, member.name))
        stamped = [float(e.data["time"]) for e in member.snapshot() if "time" in e.data]
        end = ended.get(member.name, max(stamped, default=0.0))
        for partition, start in since.items():
            spans[partition].append((start, end, member.name))
    problems = []
    for partition, owned in sorted(spans.items()):
        until, holder = float("-inf"), ""
        for start, end, name in sorted(owned):
            if start < until and name != holder:
                problems.append(
                    f"partition {partition}: {holder} owned it until {until:.3f}, "
                    f"{name} from {start:.3f}"
                )
            if end > until:
                until, holder = end, name
    return problems


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    instance_id: str | None
    partitions: frozenset[int]


@dataclass(frozen=True)
class GroupDescription:
    state: str
    protocol: str
    members: tuple[GroupMember, ...]

    def by_client(self) -> dict[str, GroupMember]:
        return {m.client_id: m for m in self.members}

    def __str__(self) -> str:
        members = ", ".join(
            f"{m.client_id}={sorted(m.partitions)}"
            + (f" ({m.instance_id})" if m.instance_id else "")
            for m in self.members
        )
        return f"state {self.state}, protocol {self.protocol!r}, members [{members}]"


def describe_group(bootstrap: str, group: str, topic: str) -> GroupDescription:
    """DescribeGroups through kafka-python's admin client, assignments decoded."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        info = admin.describe_groups([group])[group]
    finally:
        admin.close()
    assert info["error"] is None, f"DescribeGroups {group}: {info['error']}"
    members = []
    for member in info["members"]:
        assignment = member["member_assignment"] or {}
        partitions = frozenset(
            p
            for entry in (assignment.get("assigned_partitions") or [])
            if entry["topic"] == topic
            for p in entry["partitions"]
        )
        members.append(
            GroupMember(
                member_id=member["member_id"],
                client_id=member["client_id"],
                instance_id=member.get("group_instance_id"),
                partitions=partitions,
            )
        )
    return GroupDescription(
        state=info["group_state"],
        protocol=info["protocol_data"],
        members=tuple(sorted(members, key=lambda m: m.client_id)),
    )


def rebalance_history(bootstrap: str, group: str) -> str:
    """The group's rebalances as ``herdless groups history`` prints them: for failure messages."""
    result = herdless("groups", "history", group, "--members", "-b", bootstrap)
    return f"rebalance history of {group}:\n{result.stdout}{result.stderr}"


def assert_group_matches(
    bootstrap: str, members: list[Member], partitions: int, timeout: float = 30.0
) -> GroupDescription:
    """DescribeGroups shows the group Stable, with these members holding what they report.

    Retried until the deadline: a member can see its assignment a moment before
    the coordinator has recorded the group as Stable.
    """
    group, topic = members[0].group, members[0].topic
    seen: list[str] = []

    def matches() -> bool:
        description = describe_group(bootstrap, group, topic)
        seen.append(str(description))
        by_client = description.by_client()
        views = {m.name: m.assignment for m in members}
        owned = [p for m in description.members for p in m.partitions]
        return (
            description.state == "Stable"
            and set(by_client) == set(views)
            and all(by_client[name].partitions == views[name] for name in views)
            and sorted(owned) == list(range(partitions))
        )

    wait_until(
        matches,
        timeout,
        "DescribeGroups agrees with the members",
        lambda: (
            f"last description: {seen[-1] if seen else None}\nmembers:\n"
            + "\n".join(m.describe() for m in members)
        ),
    )
    return describe_group(bootstrap, group, topic)


# -- records ------------------------------------------------------------------------


class BackgroundProducer:
    """Produces unique values round-robin over the partitions until stopped.

    `settings` add to the producer's configuration (e.g. idempotence, so that retries
    while leaders move write nothing twice).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        prefix: str,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.prefix = prefix
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, **(settings or {})}
        )
        self.delivered: list[tuple[int, int, str]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._stopped = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="producer")
        self.sent = 0

    def start(self) -> BackgroundProducer:
        self._running.set()
        self._thread.start()
        return self

    def __enter__(self) -> BackgroundProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop producing whatever happened in the test (stop() checks; this only stops)."""
        self._stopped.set()
        self._running.set()
        self._thread.join(90)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.delivered.append((msg.partition(), msg.offset(), msg.value().decode()))
            else:
                self.errors.append(str(err))

    def _run(self) -> None:
        while not self._stopped.is_set():
            if not self._running.is_set():
                self.producer.flush(30)
                self._idle.set()
                self._running.wait(0.1)
                continue
            self._idle.clear()
            value = f"{self.prefix}-{self.sent}"
            try:
                self.producer.produce(
                    self.topic,
                    value=value.encode(),
                    partition=self.sent % self.partitions,
                    on_delivery=self._on_delivery,
                )
                self.sent += 1
            except (BufferError, KafkaException):
                self.producer.poll(0.05)
                continue
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(60)
        self._idle.set()

    def pause(self) -> None:
        """Stop producing and wait until everything sent is acknowledged."""
        self._running.clear()
        self._idle.clear()
        assert self._idle.wait(60), "producer did not drain within 60s"

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> list[tuple[int, int, str]]:
        self._stopped.set()
        self._running.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "producer did not finish within 90s"
        assert not self.errors, f"produce errors: {self.errors[:5]}"
        assert len(self.delivered) == self.sent, (
            f"sent {self.sent}, acknowledged {len(self.delivered)}"
        )
        return self.acknowledged()

    def acknowledged(self) -> list[tuple[int, int, str]]:
        with self._lock:
            return list(self.delivered)


def processed_by(members: list[Member]) -> dict[tuple[int, int], list[str]]:
    """(partition, offset) -> the names of the members that processed it, in order."""
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    for member in members:
        for partition, offset, _ in member.processed():
            seen[(partition, offset)].append(member.name)
    return seen


def coverage_problem(
    members: list[Member],
    delivered: list[tuple[int, int, str]],
    allowed_twice: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset(),
) -> str | None:
    """None if every acknowledged record was processed once; else what is missing or repeated.

    `allowed_twice`: records a killed member processed without its commit being
    acknowledged, which the next owner may process again (but no more than that).
    """
    seen = processed_by(members)
    values = {(p, o): v for m in members for p, o, v in m.processed()}
    expected = {(p, o): v for p, o, v in delivered}
    missing = sorted(set(expected) - set(seen))
    repeated = {
        key: names for key, names in seen.items() if len(names) > (2 if key in allowed_twice else 1)
    }
    unexpected = sorted(set(seen) - set(expected))
    wrong = sorted(k for k in set(seen) & set(expected) if values[k] != expected[k])
    problems = []
    if missing:
        problems.append(f"{len(missing)} of {len(expected)} not processed, e.g. {missing[:10]}")
    if repeated:
        examples = dict(sorted(repeated.items())[:10])
        problems.append(f"{len(repeated)} processed more than once, e.g. {examples}")
    if unexpected:
        problems.append(f"{len(unexpected)} processed but never acknowledged: {unexpected[:10]}")
    if wrong:
        problems.append(f"{len(wrong)} with another value than produced: {wrong[:10]}")
    return "; ".join(problems) or None


def commit_failures(members: list[Member]) -> list[str]:
    return [f"{m.name}: {e}" for m in members for e in m.snapshot() if e.kind == "commit_failed"]
