"""A consumer that coordinates through the log: claims, heartbeats, batches.

Three threads share the work. A heartbeat thread keeps the claims alive on a
fixed schedule and nothing else, so that no wait of claiming's can delay it (Go
Marshal likewise ran a heartbeat loop per claim beside its claim loop). A
balance thread watches the world state and claims or releases partitions. The
caller's thread fetches records from the partitions held and hands them out in
per-partition batches from poll(). At-most-once takes the claim on each batch in
the log before poll() returns it; at-least-once counts a batch processed when the
next poll() or close() comes, and heartbeats that offset.

The coordination threads never touch the caller's fetcher: asked for metadata
from one thread while another calls its consume() in a loop, a confluent-kafka
consumer does not answer, whatever the timeout given, until the loop stops
(measured with 2.16: list_topics(timeout=2) still waiting after 8 s, with or
without traffic). Partition lists come from a metadata client of their own.
"""

from __future__ import annotations

import enum
import logging
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from herdless.marshal.fairness import ClaimStrategy, plan
from herdless.marshal.log import CoordinationLog, MarshalError, client_config
from herdless.marshal.messages import NO_OFFSET, Kind, Message
from herdless.marshal.rationalizer import ClaimKey, Freshness, WorldState

log = logging.getLogger(__name__)

# How often the partition list of the consumed topics is re-read, so that
# added partitions get claimed without a restart (Go Marshal's issue #51).
METADATA_REFRESH_S = 10.0
# How long one read of a topic's partition list may take before the balance
# thread gives up on it for this cycle.
METADATA_TIMEOUT_S = 5.0


class Mode(enum.Enum):
    AT_LEAST_ONCE = "at-least-once"
    AT_MOST_ONCE = "at-most-once"


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Batch:
    topic: str
    partition: int
    records: list[Record]
    claim_position: int  # the claim it was fetched under

    @property
    def last_offset(self) -> int:
        return self.records[-1].offset


@dataclass(frozen=True, slots=True)
class Holding:
    """A partition this consumer holds, under the claim at claim_position."""

    resume_after: int  # the last offset its previous holders took care of
    claim_position: int


def try_claim(
    coordination: CoordinationLog, key: ClaimKey, client_id: str, interval_ms: int
) -> tuple[WorldState, int | None]:
    """Send a ClaimingPartition and read the log back to it.

    Returns the state and, if this claim won, its log position. The log
    decides: the claim wins only if, at its own place in the log, nobody
    else held the partition freshly.
    """
    message = Message(
        Kind.CLAIMING_PARTITION,
        client_id,
        key.group_id,
        key.topic,
        key.partition,
        interval_ms=interval_ms,
    )
    [(partition, offset)] = coordination.send([message])
    state = coordination.wait_past([(partition, offset)])
    claim = state.claims.get(key)
    if claim is not None and claim.owner == client_id and claim.claim_position == offset:
        return state, offset
    return state, None


class MarshalConsumer:
    def __init__(
        self,
        coordination: CoordinationLog,
        bootstrap: str,
        group_id: str,
        topics: Sequence[str],
        client_id: str,
        *,
        heartbeat_interval: float = 5.0,
        mode: Mode = Mode.AT_LEAST_ONCE,
        strategy: ClaimStrategy = ClaimStrategy.FAIR,
        max_batch: int = 100,
        start: str = "earliest",
        config: dict[str, str] | None = None,
    ) -> None:
        self.group_id = group_id
        self.topics = list(topics)
        self.client_id = client_id
        self.mode = mode
        self.strategy = strategy
        self.max_batch = max_batch
        self._coordination = coordination
        self._interval_s = heartbeat_interval
        self._interval_ms = int(heartbeat_interval * 1000)
        self._start = OFFSET_BEGINNING if start == "earliest" else OFFSET_END
        self._lock = threading.Lock()
        self._held: dict[ClaimKey, Holding] = {}
        # When the last acknowledged message renewing each holding (its claim or a
        # heartbeat) was sent, by the monotonic clock: the log stamped it later.
        self._renewed: dict[ClaimKey, float] = {}
        # ALO: last processed offset; AMO: last offset claimed and committed.
        self._done: dict[ClaimKey, int] = {}
        self._released_at: dict[ClaimKey, float] = {}
        self._keys: list[ClaimKey] = []
        self._keys_read_at = 0.0
        self._closing = threading.Event()
        self._closed = False

        settings = client_config(config)
        self._fetcher = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"herdless-marshal-{group_id}",  # never joined: assign only
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 100,
                **settings,
            }
        )
        self._metadata = AdminClient({"bootstrap.servers": bootstrap, **settings})
        self._assigned: dict[ClaimKey, Holding] = {}
        self._next: dict[ClaimKey, int] = {}
        self._next_under: dict[ClaimKey, Holding] = {}  # the holding each _next belongs to
        self._paused: set[ClaimKey] = set()
        self._buffer: dict[ClaimKey, list[Record]] = {}
        self._outstanding: Batch | None = None

        self._resume()
        self._threads = [
            threading.Thread(target=run, name=f"marshal-{client_id}-{job}", daemon=True)
            for job, run in (("heartbeat", self._beat), ("balance", self._coordinate))
        ]
        for thread in self._threads:
            thread.start()

    # -- what the caller sees -----------------------------------------------

    def held(self) -> dict[ClaimKey, Holding]:
        with self._lock:
            return dict(self._held)

    def poll(self, timeout: float = 1.0) -> Batch | None:
        """The next batch of one partition's records, or None if none came in time."""
        self._finish_outstanding()
        deadline = time.monotonic() + timeout
        while True:
            self._follow_holdings()
            batch = self._next_batch()
            if batch is not None:
                if self.mode is Mode.AT_MOST_ONCE:
                    batch = self._claim_messages(batch)
                    if batch is None:
                        continue
                else:
                    self._outstanding = batch
                return batch
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._fetch(min(left, 0.1))

    def close(self) -> None:
        """Release every claim (at-least-once: the last batch counts as processed)."""
        if self._closed:
            return
        self._closed = True
        self._finish_outstanding()
        self._closing.set()
        for thread in self._threads:
            thread.join()
        with self._lock:
            held, self._held = self._held, {}
        messages = [self._message(Kind.RELEASING_PARTITION, key, self._done[key]) for key in held]
        messages.append(Message(Kind.PRESENT, self.client_id, self.group_id, interval_ms=0))
        try:
            self._coordination.send(messages)
        finally:
            self._fetcher.close()

    def __enter__(self) -> MarshalConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- coordination thread ----------------------------------------------

    def _message(self, kind: Kind, key: ClaimKey, offset: int = NO_OFFSET) -> Message:
        return Message(
            kind,
            self.client_id,
            self.group_id,
            key.topic,
            key.partition,
            offset,
            self._interval_ms,
        )

    def _resume(self) -> None:
        """Take back the claims a previous run with this client id left in the log."""
        state = self._coordination.sync()
        self._heartbeat()
        for key, claim in state.group_claims(self.group_id).items():
            if claim.owner == self.client_id and key.topic in self.topics:
                self._claim(key)

    def _beat(self) -> None:
        """Heartbeat every interval/2, on a schedule of its own.

        The schedule is fixed (each beat due one period after the last was due), so
        that the time a beat takes to be written and read back does not add up;
        after a beat late by more than a period the next goes at once.
        """
        period = self._interval_s / 2
        due = time.monotonic() + period
        while not self._closing.wait(max(0.0, due - time.monotonic())):
            try:
                self._heartbeat()
            except MarshalError as exc:
                # The log is unreachable: without heartbeats our claims go stale
                # and others take over, which is the protocol working.
                log.warning("%s: %s", self.client_id, exc)
            due = max(due + period, time.monotonic())

    def _coordinate(self) -> None:
        """Claim or release one partition per cycle, every interval/4 or so."""
        while not self._closing.is_set():
            try:
                self._balance()
            except MarshalError as exc:
                log.warning("%s: %s", self.client_id, exc)
            self._closing.wait(self._interval_s / 4 * random.uniform(0.75, 1.25))

    def _heartbeat(self) -> None:
        with self._lock:
            held = dict(self._held)
            done = dict(self._done)
        messages = [
            Message(Kind.PRESENT, self.client_id, self.group_id, interval_ms=self._interval_ms)
        ]
        messages += [self._message(Kind.HEARTBEAT, key, done[key]) for key in held]
        sent_at = time.monotonic()
        positions = self._coordination.send(messages)
        with self._lock:
            for key, holding in held.items():
                if self._held.get(key) == holding:
                    self._renewed[key] = sent_at
        state = self._coordination.wait_past(positions)
        for key, holding in held.items():
            claim = state.claims.get(key)
            if (
                claim is None
                or claim.owner != self.client_id
                or (claim.claim_position != holding.claim_position)
            ):
                log.info("%s lost %s/%d", self.client_id, key.topic, key.partition)
                self._drop(key, holding.claim_position)

    def _drop(self, key: ClaimKey, claim_position: int) -> None:
        """Stop holding key, unless it has been claimed afresh since."""
        with self._lock:
            holding = self._held.get(key)
            if holding is not None and holding.claim_position == claim_position:
                del self._held[key]

    def _partition_keys(self) -> list[ClaimKey]:
        if time.monotonic() - self._keys_read_at > METADATA_REFRESH_S or not self._keys:
            keys = []
            for topic in self.topics:
                try:
                    found = self._metadata.list_topics(topic, timeout=METADATA_TIMEOUT_S)
                except KafkaException as exc:
                    raise MarshalError(f"cannot list the partitions of {topic}: {exc}") from None
                metadata = found.topics.get(topic)
                if metadata is not None and metadata.error is None:
                    keys += [ClaimKey(self.group_id, topic, p) for p in metadata.partitions]
            self._keys = sorted(keys, key=lambda k: (k.topic, k.partition))
            self._keys_read_at = time.monotonic()
        return self._keys

    def _balance(self) -> None:
        keys = self._partition_keys()
        if not keys:
            return
        state = self._coordination.state()
        now_ms = int(time.time() * 1000)
        hints = frozenset(
            key
            for key in keys
            if state.owner(key) not in (None, self.client_id)
            and state.freshness(key, now_ms) is Freshness.STALE
        )
        decision = plan(state, self.group_id, self.client_id, keys, self.strategy, hints)
        if decision.release is not None:
            self._release(decision.release)
            return
        recently = time.monotonic() - 2 * self._interval_s
        candidates = [
            k for k in decision.claimable if self._released_at.get(k, float("-inf")) < recently
        ]
        if candidates:
            self._claim(random.choice(candidates))

    def _claim(self, key: ClaimKey) -> None:
        sent_at = time.monotonic()
        state, position = try_claim(self._coordination, key, self.client_id, self._interval_ms)
        if position is None:
            return
        resume_after = state.claims[key].resume_after(self.mode is Mode.AT_MOST_ONCE)
        with self._lock:
            self._held[key] = Holding(resume_after, position)
            self._renewed[key] = sent_at
            self._done[key] = resume_after
        # The document's step 11: an immediate heartbeat once the claim is won.
        self._coordination.send([self._message(Kind.HEARTBEAT, key, resume_after)])
        log.info(
            "%s claimed %s/%d after %d", self.client_id, key.topic, key.partition, resume_after
        )

    def _release(self, key: ClaimKey) -> None:
        with self._lock:
            holding = self._held.pop(key, None)
            done = self._done.get(key, NO_OFFSET)
        if holding is None:
            return
        self._released_at[key] = time.monotonic()
        self._coordination.send([self._message(Kind.RELEASING_PARTITION, key, done)])
        log.info("%s released %s/%d for fairness", self.client_id, key.topic, key.partition)

    # -- caller's thread: fetching ----------------------------------------

    def _follow_holdings(self) -> None:
        """Point the fetcher at exactly the partitions held and renewed in time, from
        the right offsets.

        Go Marshal's rule: a consumer whose own last heartbeat of a partition is
        over one interval old stops consuming it, a whole interval before anyone
        may take it over (two intervals by the log). Paused, not dropped: the next
        heartbeat that gets through either renews the claim (nobody claimed it
        meanwhile) and consuming goes on where it stopped, or finds it lost.
        """
        now = time.monotonic()
        with self._lock:
            held = {
                key: holding
                for key, holding in self._held.items()
                if now - self._renewed[key] <= self._interval_s
            }
            paused = self._held.keys() - held.keys()
        for key in paused - self._paused:
            log.warning(
                "%s cannot heartbeat: pauses %s/%d", self.client_id, key.topic, key.partition
            )
        self._paused = paused
        if held == self._assigned:
            return
        for key, holding in held.items():
            if self._next_under.get(key) != holding:  # newly claimed: start after the claim
                after = holding.resume_after
                self._next[key] = after + 1 if after != NO_OFFSET else self._start
                self._next_under[key] = holding
        self._assigned = held
        self._buffer.clear()
        self._fetcher.assign([TopicPartition(k.topic, k.partition, self._next[k]) for k in held])

    def _fetch(self, timeout: float) -> None:
        if not self._assigned:
            time.sleep(timeout)
            return
        for message in self._fetcher.consume(self.max_batch, timeout=timeout):
            if message.error() is not None:
                continue
            key = ClaimKey(self.group_id, message.topic(), message.partition())
            self._buffer.setdefault(key, []).append(
                Record(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                )
            )

    def _next_batch(self) -> Batch | None:
        for key in list(self._buffer):
            holding = self._assigned.get(key)
            next_offset = self._next.get(key)
            records = [
                r
                for r in self._buffer.pop(key)
                if holding is not None
                and (next_offset is None or next_offset < 0 or r.offset >= next_offset)
            ]
            if holding is None or not records:
                continue
            taken, rest = records[: self.max_batch], records[self.max_batch :]
            if rest:
                self._buffer[key] = rest
            self._next[key] = taken[-1].offset + 1
            return Batch(key.topic, key.partition, taken, holding.claim_position)
        return None

    def _finish_outstanding(self) -> None:
        batch, self._outstanding = self._outstanding, None
        if batch is None:
            return
        key = ClaimKey(self.group_id, batch.topic, batch.partition)
        with self._lock:
            holding = self._held.get(key)
            if holding is not None and holding.claim_position == batch.claim_position:
                self._done[key] = batch.last_offset

    def _claim_messages(self, batch: Batch) -> Batch | None:
        """At-most-once: claim the batch in the log, check the claim, commit, hand out."""
        key = ClaimKey(self.group_id, batch.topic, batch.partition)
        [(partition, offset)] = self._coordination.send(
            [self._message(Kind.CLAIMING_MESSAGES, key, batch.last_offset)]
        )
        state = self._coordination.wait_past([(partition, offset)])
        claim = state.claims.get(key)
        if (
            claim is None
            or claim.owner != self.client_id
            or claim.claim_position != batch.claim_position
            or claim.messages_position != offset
        ):
            # Someone took the partition before our claim on these messages:
            # they are theirs now, never ours.
            self._drop(key, batch.claim_position)
            return None
        with self._lock:
            self._done[key] = batch.last_offset
        self._coordination.send([self._message(Kind.HEARTBEAT, key, batch.last_offset)])
        return batch
