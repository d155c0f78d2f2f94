"""Light consumer-group members that speak the classic group protocol over raw TCP.

A real client (librdkafka, the Java consumer) costs a thread or two and several
MB per member, so a 1000-member group of them would measure the client, not the
broker. These members are asyncio tasks holding one socket each and sending the
same requests a consumer sends: JoinGroup (v9, with the MEMBER_ID_REQUIRED
round trip of KIP-394), SyncGroup with a round-robin assignment computed by the
leader, then Heartbeat every interval, rejoining when told to. Requests are
built and parsed with kafka-python's protocol classes, so the bytes on the wire
are a real client's bytes.

By default each member has its own connection for everything. Kafka does not tie
a member to a connection, though: a client may heartbeat for several members over
one. With a SharedConnection given for heartbeats, a member joins over a
connection of its own (a broker answers a connection's requests strictly in
order and JoinGroup parks until the rebalance completes, so members joining over
one connection would wait behind each other's JoinGroup), closes it once synced,
and heartbeats over the shared one, its requests pipelined with the others'.
That lets more members live than a process may open sockets; the broker's work
per member is the same, only its socket count is not.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

# The versions a current consumer uses; both brokers benchmarked accept them.
JOIN_V = 9
SYNC_V = 5
HEARTBEAT_V = 4
LEAVE_V = 5
COMMIT_V = 8
FETCH_V = 8
FIND_COORDINATOR_V = 4

# Error codes this module reacts to (Kafka's numbering).
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79

ERROR_NAMES = {
    COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS",
    COORDINATOR_NOT_AVAILABLE: "COORDINATOR_NOT_AVAILABLE",
    NOT_COORDINATOR: "NOT_COORDINATOR",
    ILLEGAL_GENERATION: "ILLEGAL_GENERATION",
    UNKNOWN_MEMBER_ID: "UNKNOWN_MEMBER_ID",
    REBALANCE_IN_PROGRESS: "REBALANCE_IN_PROGRESS",
    MEMBER_ID_REQUIRED: "MEMBER_ID_REQUIRED",
    # Not errors of the protocol: what went wrong on our side of the socket.
    -1: "TIMEOUT",
    -2: "CONNECTION_LOST",
}
TIMEOUT = -1
CONNECTION_LOST = -2
# Errors after which a member asks its coordinator again after a short pause.
RETRIABLE = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
RETRY_BACKOFF_S = 0.1

PROTOCOL_TYPE = "consumer"
ASSIGNOR = "roundrobin"


def error_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"error {code}")


class ProtocolError(RuntimeError):
    """The broker answered in a way a consumer could not carry on from."""


class Connection:
    """One TCP connection; one request in flight at a time.

    Members send one request and wait for its answer before the next, so a
    lock around write-then-read is all the pipelining needed, and it saves a
    reader task per socket when thousands are open.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._correlation_id = 0
        self._lock = asyncio.Lock()
        self.closed = False

    @classmethod
    async def open(cls, bootstrap: str, client_id: str, timeout: float = 30.0) -> Connection:
        host, _, port = bootstrap.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
        return cls(reader, writer, client_id)

    async def request(self, request: Any, response_class: Any, timeout: float) -> Any:
        """Send ``request`` (or a frame from ``encode_once``) and return its decoded response.

        A timeout or a dropped socket closes the connection: a late answer
        would otherwise be read as the answer to the next request.
        """
        async with self._lock:
            if self.closed:
                raise ConnectionError("connection closed")
            self._correlation_id += 1
            correlation_id = self._correlation_id
            frame = self._frame(request, correlation_id)
            try:
                # asyncio.timeout rather than wait_for: no extra task per request,
                # which matters with thousands of members in one process.
                async with asyncio.timeout(timeout):
                    self._writer.write(frame)
                    await self._writer.drain()
                    (size,) = struct.unpack(">i", await self._reader.readexactly(4))
                    body = await self._reader.readexactly(size)
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                self.close()
                raise
            response = response_class.decode(body, version=request.API_VERSION, header=True)
            if response.header.correlation_id != correlation_id:
                self.close()
                raise ProtocolError(
                    f"correlation id {response.header.correlation_id} != {correlation_id}"
                )
            return response

    def _frame(self, request: Any, correlation_id: int) -> bytes:
        if isinstance(request, EncodedRequest):
            return request.with_correlation_id(correlation_id)
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        return bytes(request.encode(header=True, framed=True))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._writer.close()

    def encode_once(self, request: Any) -> EncodedRequest:
        return EncodedRequest(request, self._client_id)


class SharedConnection(Connection):
    """One TCP connection carrying the requests of several members at once.

    Requests are written as they come and answers matched to them by correlation
    id, read by one task per connection. Only for requests the broker answers
    without waiting (Heartbeat): a parked JoinGroup would hold up every request
    behind it.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        super().__init__(reader, writer, client_id)
        self._waiting: dict[int, asyncio.Future[bytes]] = {}
        self._reading = asyncio.get_running_loop().create_task(self._read_answers())

    async def request(self, request: Any, response_class: Any, timeout: float) -> Any:
        if self.closed:
            raise ConnectionError("connection closed")
        self._correlation_id += 1
        correlation_id = self._correlation_id
        answer = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = answer
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(self._frame(request, correlation_id))
                await self._writer.drain()
                body = await answer
        except (TimeoutError, OSError):
            # Answers are in request order: once one is given up, the stream is lost.
            self.close()
            raise
        finally:
            self._waiting.pop(correlation_id, None)
        return response_class.decode(body, version=request.API_VERSION, header=True)

    async def _read_answers(self) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await self._reader.readexactly(4))
                body = await self._reader.readexactly(size)
                (correlation_id,) = struct.unpack_from(">i", body)
                answer = self._waiting.pop(correlation_id, None)
                if answer is None:
                    raise ProtocolError(f"answer to correlation id {correlation_id}, not asked")
                if not answer.done():
                    answer.set_result(body)
        except (OSError, asyncio.IncompleteReadError, ProtocolError) as exc:
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_exception(ConnectionError(f"connection lost: {exc!r}"))
            self.close()

    def close(self) -> None:
        super().close()
        if self._reading is not asyncio.current_task():
            self._reading.cancel()


class EncodedRequest:
    """A request encoded once and sent many times, as a member sends its heartbeat:
    encoding it with kafka-python each time was a third of the members' CPU, which
    on a two-core machine the broker measured beside them does not have."""

    def __init__(self, request: Any, client_id: str) -> None:
        request.with_header(correlation_id=0, client_id=client_id)
        self._frame = bytearray(request.encode(header=True, framed=True))
        self.API_VERSION = request.API_VERSION

    def with_correlation_id(self, correlation_id: int) -> bytes:
        # Frame size, API key and version come first; then the correlation id.
        struct.pack_into(">i", self._frame, 8, correlation_id)
        return bytes(self._frame)


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """A Heartbeat v4 answer read where its fields lie. kafka-python's decode took 32 us
    a heartbeat, a third of what the members' process spent on one: CPU the broker
    measured beside them on a two-core machine does not get."""

    header: ResponseHeader
    error_code: int

    # Correlation id, header tagged fields (none), throttle time, error code.
    _LAYOUT = struct.Struct(">iBih")

    @classmethod
    def decode(cls, body: bytes, version: int, header: bool) -> Any:
        assert version == HEARTBEAT_V and header
        correlation_id, tagged_fields, _, error_code = cls._LAYOUT.unpack_from(body)
        if tagged_fields:  # a header with tagged fields: let kafka-python walk them
            return HeartbeatResponse.decode(body, version=version, header=True)
        return cls(ResponseHeader(correlation_id), error_code)


class EncodedCommit(EncodedRequest):
    """One committer's OffsetCommit (fixed group, topic and partitions, one offset for
    all), encoded once: each commit writes its offset where the frame holds it. Built
    and encoded by kafka-python per commit, with its answer decoded likewise, a commit
    cost the committing process more than it cost either broker, so from 8 committers
    the benchmark measured its own client."""

    def __init__(self, group_id: str, topic: str, partitions: Sequence[int], client_id: str):
        # Offsets no frame holds by chance, to find where each partition's goes.
        marks = {p: 0x7E5E_1234_0000_0000 + i for i, p in enumerate(partitions)}
        super().__init__(offset_commit_request(group_id, topic, marks), client_id)
        frame = bytes(self._frame)
        self._offsets = []
        for mark in marks.values():
            at = frame.find(struct.pack(">q", mark))
            assert at > 0 and frame.count(struct.pack(">q", mark)) == 1
            self._offsets.append(at)
        # What the next send commits (commit_encoded sets it).
        self.offset = 0

    def with_correlation_id(self, correlation_id: int) -> bytes:
        for at in self._offsets:
            struct.pack_into(">q", self._frame, at, self.offset)
        return super().with_correlation_id(correlation_id)


@dataclass(frozen=True, slots=True)
class CommitAnswer:
    """An OffsetCommit v8 answer read where its fields lie: the error code of every
    partition, in order (see EncodedCommit for why not kafka-python's decode)."""

    header: ResponseHeader
    error_codes: list[int]

    @classmethod
    def decode(cls, body: bytes, version: int, header: bool) -> Any:
        assert version == COMMIT_V and header
        (correlation_id,) = struct.unpack_from(">i", body)
        pos = _skip_tags(body, 4) + 4  # the header's tags, the throttle time
        codes = []
        topics, pos = _uvarint(body, pos)
        for _ in range(topics - 1):
            name, pos = _uvarint(body, pos)
            partitions, pos = _uvarint(body, pos + name - 1)
            for _ in range(partitions - 1):
                codes.append(struct.unpack_from(">h", body, pos + 4)[0])
                pos = _skip_tags(body, pos + 6)
            pos = _skip_tags(body, pos)
        return cls(ResponseHeader(correlation_id), codes)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _skip_tags(data: bytes, pos: int) -> int:
    """The position after a tag section."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def subscription(topic: str) -> bytes:
    return bytes(ConsumerProtocolSubscription(version=0, topics=[topic], user_data=None).encode())


def round_robin(member_ids: Sequence[str], topic: str, partitions: int) -> dict[str, bytes]:
    """The leader's job: partition p goes to the (p mod n)-th member, sorted by id."""
    ordered = sorted(member_ids)
    owned: dict[str, list[int]] = {m: [] for m in ordered}
    for p in range(partitions):
        owned[ordered[p % len(ordered)]].append(p)
    Topic = ConsumerProtocolAssignment.TopicPartition
    return {
        m: bytes(
            ConsumerProtocolAssignment(
                version=0,
                assigned_partitions=[Topic(topic=topic, partitions=ps)] if ps else [],
                user_data=None,
            ).encode()
        )
        for m, ps in owned.items()
    }


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group_id: str, partitions: int = 50) -> int:
    """The __consumer_offsets partition Kafka (and herdless) places a group on."""
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass
class HeartbeatStats:
    """Heartbeat outcomes of many members, collected per measurement window."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    rejoins: int = 0
    # How late this process sent a heartbeat after it fell due: when it grows,
    # the simulating process (not the broker) is what cannot keep up.
    max_send_lag: float = 0.0

    def reset(self) -> HeartbeatStats:
        """Start a new window; return the one just closed."""
        closed = HeartbeatStats(self.latencies, self.errors, self.rejoins, self.max_send_lag)
        self.latencies = []
        self.errors = Counter()
        self.rejoins = 0
        self.max_send_lag = 0.0
        return closed


@dataclass
class Generation:
    size: int | None = None
    synced: int = 0
    last_join_sent: float = 0.0
    last_synced: float = 0.0


class GroupProgress:
    """Watches one group's members and tells when it is whole in one generation.

    A rebalance is over when some generation has exactly the expected members
    and every one of them has its SyncGroup answer. Only the leader learns the
    generation's size (from JoinGroup); everyone reports their SyncGroup.
    """

    def __init__(self) -> None:
        self.generations: dict[int, Generation] = {}
        self._waiters: list[tuple[int, int, asyncio.Future[tuple[int, Generation]]]] = []

    def joined(self, generation: int, sent_at: float, size: int | None) -> None:
        g = self.generations.setdefault(generation, Generation())
        g.last_join_sent = max(g.last_join_sent, sent_at)
        if size is not None:
            g.size = size
        self._check(generation)

    def synced(self, generation: int, at: float) -> None:
        g = self.generations.setdefault(generation, Generation())
        g.synced += 1
        g.last_synced = max(g.last_synced, at)
        self._check(generation)

    def wait_whole(
        self, size: int, after_generation: int = -1
    ) -> asyncio.Future[tuple[int, Generation]]:
        """The first generation after ``after_generation`` with ``size`` members, all synced."""
        future: asyncio.Future[tuple[int, Generation]] = asyncio.get_running_loop().create_future()
        self._waiters.append((size, after_generation, future))
        for generation in sorted(self.generations):
            self._check(generation)
        return future

    def _check(self, generation: int) -> None:
        g = self.generations[generation]
        if g.size is None or g.synced < g.size:
            return
        for size, after, future in list(self._waiters):
            if not future.done() and generation > after and g.size == size:
                future.set_result((generation, g))


@dataclass
class MemberConfig:
    bootstrap: str
    group_id: str
    topic: str
    partitions: int
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_s: float
    # Spread the first heartbeat over one interval, as independent consumers
    # started at different times would be, instead of a synchronized burst.
    random_phase: bool = True


class Member:
    """One simulated consumer: join, sync, heartbeat; rejoin when the group says so."""

    def __init__(
        self,
        config: MemberConfig,
        stats: HeartbeatStats,
        progress: GroupProgress | None = None,
        client_id: str = "sim-member",
        heartbeat_connection: SharedConnection | None = None,
    ) -> None:
        self.config = config
        self.stats = stats
        self.progress = progress
        self.client_id = client_id
        # Where heartbeats go; None: over the member's own connection.
        self.heartbeat_connection = heartbeat_connection
        self.member_id = ""
        self.generation = -1
        self.assignment: list[int] = []
        self.connection: Connection | None = None
        self.synced = asyncio.Event()
        self.failure: BaseException | None = None
        self._metadata = subscription(config.topic)
        self._task: asyncio.Task[None] | None = None

    @property
    def _request_timeout(self) -> float:
        # JoinGroup may park for a whole rebalance timeout; leave it room.
        return self.config.rebalance_timeout_ms / 1000 + 10

    async def connect(self) -> None:
        self.connection = await Connection.open(self.config.bootstrap, self.client_id)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self.join()
            await self._heartbeat_loop()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # reported by the benchmark, not raised in a task
            self.failure = exc
            self.synced.set()

    async def join(self) -> None:
        """JoinGroup and SyncGroup until this member holds an assignment."""
        if self.connection is None or self.connection.closed:
            await self.connect()
        assert self.connection is not None
        cfg = self.config
        while True:
            self.synced.clear()
            request = JoinGroupRequest[JOIN_V](
                group_id=cfg.group_id,
                session_timeout_ms=cfg.session_timeout_ms,
                rebalance_timeout_ms=cfg.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type=PROTOCOL_TYPE,
                protocols=[
                    JoinGroupRequest.JoinGroupRequestProtocol(
                        name=ASSIGNOR, metadata=self._metadata
                    )
                ],
                reason=None,
            )
            sent = time.perf_counter()
            join = await self.connection.request(request, JoinGroupResponse, self._request_timeout)
            if join.error_code == MEMBER_ID_REQUIRED:
                # KIP-394: the broker names us and wants the JoinGroup again with that name.
                self.member_id = join.member_id
                continue
            if join.error_code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                self.stats.errors["join " + error_name(join.error_code)] += 1
                continue
            if join.error_code in RETRIABLE:
                self.stats.errors["join " + error_name(join.error_code)] += 1
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if join.error_code != NONE:
                raise ProtocolError(f"JoinGroup: {error_name(join.error_code)}")
            self.member_id = join.member_id
            self.generation = join.generation_id
            is_leader = join.leader == self.member_id
            if self.progress is not None:
                self.progress.joined(
                    self.generation, sent, len(join.members) if is_leader else None
                )
            assignments: list[Any] = []
            if is_leader:
                plan = round_robin([m.member_id for m in join.members], cfg.topic, cfg.partitions)
                assignments = [
                    SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in plan.items()
                ]
            sync = await self.connection.request(
                SyncGroupRequest[SYNC_V](
                    group_id=cfg.group_id,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type=PROTOCOL_TYPE,
                    protocol_name=join.protocol_name or ASSIGNOR,
                    assignments=assignments,
                ),
                SyncGroupResponse,
                self._request_timeout,
            )
            if sync.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
                # Another member joined between our JoinGroup and SyncGroup.
                self.stats.errors["sync " + error_name(sync.error_code)] += 1
                continue
            if sync.error_code == UNKNOWN_MEMBER_ID:
                self.stats.errors["sync " + error_name(sync.error_code)] += 1
                self.member_id = ""
                continue
            if sync.error_code in RETRIABLE:
                self.stats.errors["sync " + error_name(sync.error_code)] += 1
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if sync.error_code != NONE:
                raise ProtocolError(f"SyncGroup: {error_name(sync.error_code)}")
            assigned = ConsumerProtocolAssignment.decode(bytes(sync.assignment), version=0)
            self.assignment = [p for tp in assigned.assigned_partitions for p in tp.partitions]
            if self.progress is not None:
                self.progress.synced(self.generation, time.perf_counter())
            if self.heartbeat_connection is not None:
                self.connection.close()
            self.synced.set()
            return

    async def _heartbeat_loop(self) -> None:
        connection = self.heartbeat_connection or self.connection
        assert connection is not None
        cfg = self.config
        interval = cfg.heartbeat_interval_s
        first_wait = random.uniform(0, interval) if cfg.random_phase else interval
        next_due = time.perf_counter() + first_wait
        heartbeat: EncodedRequest | None = None
        heartbeat_of: tuple[int, str] | None = None
        while True:
            delay = next_due - time.perf_counter()
            if delay > 0:
                # stop() cancels this task, so a plain sleep is enough.
                await asyncio.sleep(delay)
            sent = time.perf_counter()
            self.stats.max_send_lag = max(self.stats.max_send_lag, sent - next_due)
            # The Java consumer starts the next interval when a heartbeat is sent.
            next_due = sent + interval
            if heartbeat is None or heartbeat_of != (self.generation, self.member_id):
                heartbeat_of = (self.generation, self.member_id)
                heartbeat = connection.encode_once(
                    HeartbeatRequest[HEARTBEAT_V](
                        group_id=cfg.group_id,
                        generation_id=self.generation,
                        member_id=self.member_id,
                        group_instance_id=None,
                    )
                )
            try:
                response = await connection.request(
                    heartbeat, HeartbeatAnswer, cfg.session_timeout_ms / 1000
                )
            except TimeoutError:
                self.stats.errors[error_name(TIMEOUT)] += 1
                raise
            except (OSError, asyncio.IncompleteReadError):
                self.stats.errors[error_name(CONNECTION_LOST)] += 1
                raise
            self.stats.latencies.append(time.perf_counter() - sent)
            code = response.error_code
            if code == NONE:
                continue
            self.stats.errors[error_name(code)] += 1
            if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                if code == UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.stats.rejoins += 1
                await self.join()
                next_due = time.perf_counter() + interval
            elif code in RETRIABLE:
                await asyncio.sleep(RETRY_BACKOFF_S)
            else:
                raise ProtocolError(f"Heartbeat: {error_name(code)}")

    async def stop(self) -> None:
        """Stop heartbeating without leaving (see leave_all) and close its own socket."""
        # Again until it ends: asyncio.wait_for (opening a connection to rejoin) can
        # swallow a cancellation that comes as it completes, and the member goes on.
        while self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task], timeout=1.0)
        if self.connection is not None:
            self.connection.close()


async def leave_all(
    connection: Connection, group_id: str, member_ids: Sequence[str], timeout: float = 30.0
) -> int:
    """LeaveGroup (v3+ batch form) for every member in one request; returns the error code.

    Closing sockets alone would leave the members to expire one session timeout
    later, in the middle of whatever is measured next.
    """
    if not member_ids:
        return NONE
    Identity = LeaveGroupRequest.MemberIdentity
    response = await connection.request(
        LeaveGroupRequest[LEAVE_V](
            group_id=group_id,
            members=[
                Identity(member_id=m, group_instance_id=None, reason=None) for m in member_ids
            ],
        ),
        LeaveGroupResponse,
        timeout,
    )
    return int(response.error_code)


async def find_coordinator(connection: Connection, group_id: str, timeout: float = 30.0) -> str:
    """Ask for the group's coordinator; returns ``host:port``."""
    response = await connection.request(
        FindCoordinatorRequest[FIND_COORDINATOR_V](key_type=0, coordinator_keys=[group_id]),
        FindCoordinatorResponse,
        timeout,
    )
    (coordinator,) = response.coordinators
    if coordinator.error_code != NONE:
        raise ProtocolError(f"FindCoordinator {group_id}: {error_name(coordinator.error_code)}")
    return f"{coordinator.host}:{coordinator.port}"


def offset_commit_request(
    group_id: str, topic: str, offsets: dict[int, int], metadata: str = ""
) -> Any:
    """A commit as a standalone consumer sends it: generation -1, no member id."""
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    return OffsetCommitRequest[COMMIT_V](
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            Topic(
                name=topic,
                partitions=[
                    Partition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )


async def offset_commit(
    connection: Connection,
    group_id: str,
    topic: str,
    offsets: dict[int, int],
    timeout: float = 30.0,
) -> list[int]:
    """Commit and return the error code of every partition (0 when all went well)."""
    response = await connection.request(
        offset_commit_request(group_id, topic, offsets), OffsetCommitResponse, timeout
    )
    return [p.error_code for t in response.topics for p in t.partitions]


async def commit_encoded(
    connection: Connection, commit: EncodedCommit, offset: int, timeout: float = 30.0
) -> list[int]:
    """Commit `offset` for every partition of `commit`; each partition's error code."""
    commit.offset = offset
    response = await connection.request(commit, CommitAnswer, timeout)
    return list(response.error_codes)


async def offset_fetch(
    connection: Connection,
    group_id: str,
    topic: str,
    partitions: Sequence[int],
    timeout: float = 30.0,
) -> tuple[int, dict[int, int]]:
    """OffsetFetch (v8 batch form, one group); returns (group error code, offsets)."""
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    response = await connection.request(
        OffsetFetchRequest[FETCH_V](
            groups=[
                Group(
                    group_id=group_id,
                    topics=[
                        Group.OffsetFetchRequestTopics(
                            name=topic, partition_indexes=list(partitions)
                        )
                    ],
                )
            ],
            require_stable=False,
        ),
        OffsetFetchResponse,
        timeout,
    )
    (group,) = response.groups
    offsets = {
        p.partition_index: p.committed_offset
        for t in group.topics
        for p in t.partitions
        if p.error_code == NONE
    }
    errors = [p.error_code for t in group.topics for p in t.partitions if p.error_code != NONE]
    return (group.error_code or (errors[0] if errors else NONE)), offsets
