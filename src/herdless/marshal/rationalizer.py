"""The rationalizer: the world state as a pure function of the coordination log.

It never reads a clock. Time is the log's own: the coordination topic is
created with message.timestamp.type=LogAppendTime, so the broker stamps every
message, and "now" for a coordination partition is the latest timestamp read
from it. Two readers of the same log prefix therefore derive the same state,
whenever and wherever they read it, and replaying a log gives the state that
live processing gave.

Every key (a group's claim on a topic partition, or a group's membership)
lives on exactly one coordination partition, and each is judged by that
partition's clock alone, so the state does not depend on how the reads of
different partitions interleave either. A message found on a partition other
than its own (the partition count changed, or a foreign writer) is ignored
for the same reason.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from herdless.marshal.messages import NO_OFFSET, DecodeError, Kind, Message, decode
from herdless.marshal.placement import coordinating_partition, member_partition


class Freshness(enum.Enum):
    FRESH = "fresh"  # heard from within one interval
    UNKNOWN = "unknown"  # between one and two intervals
    STALE = "stale"  # more than two intervals: anyone may claim it


def freshness(now_ms: int, at_ms: int, interval_ms: int) -> Freshness:
    age = now_ms - at_ms
    if age < interval_ms:
        return Freshness.FRESH
    if age <= 2 * interval_ms:
        return Freshness.UNKNOWN
    return Freshness.STALE


@dataclass(frozen=True, slots=True)
class Entry:
    """One record read from the coordination topic."""

    partition: int
    offset: int
    timestamp_ms: int  # LogAppendTime: the broker's clock
    value: bytes | None


@dataclass(frozen=True, slots=True)
class ClaimKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Claim:
    owner: str | None  # None once released
    claimed_at_ms: int
    heartbeat_at_ms: int  # the last message from the owner that counted
    interval_ms: int  # the owner's HeartbeatInterval
    last_offset: int  # last processed (ALO) or committed (AMO) offset, inclusive
    claimed_through: int  # highest accepted proposed_last_offset (AMO)
    claim_position: int  # log offset of the ClaimingPartition that won
    messages_position: int  # log offset of the latest accepted ClaimingMessages

    def resume_after(self, at_most_once: bool) -> int:
        """The last offset a new owner must not consume again (NO_OFFSET: none)."""
        if at_most_once:
            return max(self.last_offset, self.claimed_through)
        return self.last_offset


@dataclass(frozen=True, slots=True)
class Member:
    seen_at_ms: int
    interval_ms: int  # 0: it said goodbye


@dataclass(frozen=True)
class WorldState:
    partitions: int  # of the coordination topic
    clocks: dict[int, int] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)  # next offset read per partition
    claims: dict[ClaimKey, Claim] = field(default_factory=dict)
    members: dict[tuple[str, str], Member] = field(default_factory=dict)

    def now(self, coordination_partition: int, reading_at_ms: int | None = None) -> int:
        """The log's clock of a coordination partition, or, given the moment someone
        reads the state (their wall clock), that moment if it is later.

        The log's clock moves only when somebody writes to the partition: once the
        only writer there dies or stalls it stands still, and a claim judged by it
        alone never ages. The log decides claims; a reader asking how old a claim is
        now (a person running `marshal status`, a consumer choosing when to try a
        claim) gives its own clock."""
        log_now = self.clocks.get(coordination_partition, 0)
        return log_now if reading_at_ms is None else max(log_now, reading_at_ms)

    def freshness(self, key: ClaimKey, reading_at_ms: int | None = None) -> Freshness | None:
        """How recently the owner of key spoke (by the clock now() gives); None if
        unowned."""
        claim = self.claims.get(key)
        if claim is None or claim.owner is None:
            return None
        partition = coordinating_partition(key.topic, key.partition, self.partitions)
        now = self.now(partition, reading_at_ms)
        return freshness(now, claim.heartbeat_at_ms, claim.interval_ms)

    def owner(self, key: ClaimKey) -> str | None:
        claim = self.claims.get(key)
        return claim.owner if claim else None

    def group_claims(self, group_id: str) -> dict[ClaimKey, Claim]:
        return {k: c for k, c in self.claims.items() if k.group_id == group_id}

    def live_members(self, group_id: str, reading_at_ms: int | None = None) -> list[str]:
        """Clients whose Present is not stale, by the clock of the group's member
        partition (see now())."""
        now = self.now(member_partition(group_id, self.partitions), reading_at_ms)
        return sorted(
            client
            for (group, client), member in self.members.items()
            if group == group_id
            and member.interval_ms > 0
            and freshness(now, member.seen_at_ms, member.interval_ms) is not Freshness.STALE
        )


class Rationalizer:
    """Folds coordination entries, in log order per partition, into a WorldState."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._clocks: dict[int, int] = {}
        self._positions: dict[int, int] = {}
        self._claims: dict[ClaimKey, Claim] = {}
        self._members: dict[tuple[str, str], Member] = {}

    def state(self) -> WorldState:
        return WorldState(
            self.partitions,
            dict(self._clocks),
            dict(self._positions),
            dict(self._claims),
            dict(self._members),
        )

    def position(self, partition: int) -> int:
        return self._positions.get(partition, 0)

    def apply(self, entry: Entry) -> None:
        if entry.offset < self._positions.get(entry.partition, 0):
            return  # already applied: a reader that re-reads must not count twice
        self._positions[entry.partition] = entry.offset + 1
        # max(): a broker clock stepping back must not make a claim younger.
        now = max(self._clocks.get(entry.partition, 0), entry.timestamp_ms)
        self._clocks[entry.partition] = now
        try:
            message = decode(entry.value)
        except DecodeError:
            return
        if message.kind is Kind.PRESENT:
            if entry.partition == member_partition(message.group_id, self.partitions):
                self._members[(message.group_id, message.client_id)] = Member(
                    now, message.interval_ms
                )
            return
        if entry.partition != coordinating_partition(
            message.topic, message.partition, self.partitions
        ):
            return
        key = ClaimKey(message.group_id, message.topic, message.partition)
        claim = self._claims.get(key)
        updated = _transition(claim, message, now, entry.offset)
        if updated is not None:
            self._claims[key] = updated


def _transition(claim: Claim | None, message: Message, now: int, position: int) -> Claim | None:
    """The claim after message, or None when the message does not count."""
    me = message.client_id
    if message.kind is Kind.CLAIMING_PARTITION:
        # The claim is judged at its own place in the log, by the log's clock:
        # it wins if nobody holds the partition, or the holder has gone stale,
        # or it is the holder's own renewal. The earliest such claim wins a
        # race; every later one finds a fresh owner and loses.
        if (
            claim is not None
            and claim.owner is not None
            and claim.owner != me
            and freshness(now, claim.heartbeat_at_ms, claim.interval_ms) is not Freshness.STALE
        ):
            return None
        if claim is None:
            return Claim(me, now, now, message.interval_ms, NO_OFFSET, NO_OFFSET, position, -1)
        return replace(
            claim,
            owner=me,
            claimed_at_ms=now,
            heartbeat_at_ms=now,
            interval_ms=message.interval_ms,
            claim_position=position,
        )
    # Everything else counts only from the owner. (Go Marshal let any heartbeat
    # take ownership, one source of its double claims.)
    if claim is None or claim.owner != me:
        return None
    if message.kind is Kind.HEARTBEAT:
        return replace(
            claim, heartbeat_at_ms=now, interval_ms=message.interval_ms, last_offset=message.offset
        )
    if message.kind is Kind.RELEASING_PARTITION:
        return replace(claim, owner=None, heartbeat_at_ms=now, last_offset=message.offset)
    if message.kind is Kind.CLAIMING_MESSAGES:
        return replace(
            claim,
            heartbeat_at_ms=now,
            claimed_through=max(claim.claimed_through, message.offset),
            messages_position=position,
        )
    return None


def rationalize(partitions: int, entries: Iterable[Entry]) -> WorldState:
    """The state a fresh reader derives from entries."""
    rationalizer = Rationalizer(partitions)
    for entry in entries:
        rationalizer.apply(entry)
    return rationalizer.state()
