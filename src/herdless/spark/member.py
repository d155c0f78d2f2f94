"""The streaming query's seat in its consumer group.

It lives in the Python process where Spark runs the stream reader's planning
methods (one per query run, long-lived; SPARK.md). It subscribes like any
Kafka consumer, but pauses every partition it is given: it never fetches, a
background thread polls only so that librdkafka can heartbeat and run
rebalances. The planner asks it which partitions this query owns and tells it
when a batch is complete; it commits those offsets to the group.

Only the background thread touches the group's consumer: confluent-kafka
deadlocks when one thread waits for a broker answer (watermarks) while another
polls the same consumer. Commits are handed to that thread; offsets and
watermarks are asked through a second, group-less consumer (`lookup`).

It joins with KIP-848's consumer protocol where the broker serves it, and with
the classic one otherwise (group_protocol.py says when): the consumer
protocol's first join answers at once, the classic one's waits the broker's
group.initial.rebalance.delay.ms (3 s by default) before every query's first
batch.

Handing a partition over without losing records: when the group takes
partitions away (on_revoke), the member waits until the micro-batch in flight
is complete and its end offsets are committed, so the next owner starts where
this query stopped. That wait is bounded (a query whose batches take longer
than the rebalance allows would otherwise be evicted from the group); past it
the next owner re-reads the batch in flight: records may be read twice, never
skipped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from herdless.spark.client import (
    commit,
    committed_offsets,
    describe_group,
    query_client_id,
    quiet_admin,
    quiet_consumer,
    unreachable,
)
from herdless.spark.errors import HerdlessSparkError
from herdless.spark.group_protocol import CLASSIC, group_protocol
from herdless.spark.offsets import TopicPartition
from herdless.spark.options import ReadOptions

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1
# A consumer-protocol member's first heartbeat answers within milliseconds; with
# no partitions by then, the coordinator is asked whether the member has none.
EMPTY_ASSIGNMENT_CHECK_S = 1.0
EXIT_DEADLINE_S = 10.0


class GroupMember:
    def __init__(self, options: ReadOptions) -> None:
        assert options.group_id is not None
        self.options = options
        self._cond = threading.Condition(threading.RLock())
        # None between losing partitions and being given new ones: plan nothing then.
        self._assignment: frozenset[TopicPartition] | None = None
        # Assigned, but no batch planned from them yet: they start at the group's offset.
        self._fresh: set[TopicPartition] = set()
        self._in_flight = False
        self._committed: dict[TopicPartition, int] = {}
        self._stopping = False
        self._closer: int | None = None  # the thread running close()
        self._closed = threading.Event()
        self._failure: str | None = None
        self._pending: dict[TopicPartition, int] = {}  # commits for the thread to send
        self.client_id = query_client_id(options.connection)
        self.protocol = group_protocol(options.connection, options.group_id, self.client_id)
        # Same group.id, never subscribed: fetches committed offsets without joining.
        self.lookup: Consumer = quiet_consumer(
            options.connection, options.group_id, defaults={"client.id": self.client_id}
        )
        # The consumer protocol's assignor is the broker's (kafka.group.remote.assignor).
        protocol_settings: dict[str, object] = {"group.protocol": self.protocol}
        if self.protocol == CLASSIC:
            protocol_settings["partition.assignment.strategy"] = "range"
        self.consumer: Consumer = quiet_consumer(
            options.connection,
            options.group_id,
            defaults={"client.id": self.client_id},
            error_cb=self._on_error,
            **protocol_settings,
        )
        self._member_id = self.consumer.memberid()  # the consumer protocol's is the client's own
        self._admin: AdminClient | None = None
        self.consumer.subscribe(
            options.subscription.for_librdkafka(),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self._parent = os.getppid()
        self._thread = threading.Thread(target=self._serve, name="herdless-group", daemon=True)
        self._thread.start()

    # -- the background thread and librdkafka's callbacks ------------------

    def _serve(self) -> None:
        while not self._stopping:
            if os.getppid() != self._parent:
                # Spark's JVM died without ending us: a member that heartbeats on
                # for a dead query would hold its partitions forever.
                log.warning("Spark went away; leaving group %s", self.options.group_id)
                os.kill(os.getpid(), signal.SIGTERM)
                return
            try:
                self._send_commits()
                # Every partition is paused, so this returns no records: it drives
                # heartbeats, rebalance callbacks and error events.
                self.consumer.poll(POLL_INTERVAL_S)
            except (KafkaException, RuntimeError) as exc:
                if not self._stopping:
                    with self._cond:
                        self._failure = str(exc)
                        self._cond.notify_all()
                return

    def _on_error(self, error) -> None:  # librdkafka's error_cb
        if error.fatal():
            with self._cond:
                self._failure = error.str()
                self._cond.notify_all()

    # The classic protocol's rebalances are eager here (range): every partition is
    # taken away, then the new assignment given whole. The consumer protocol's are
    # incremental: partitions are given and taken a few at a time, the rest stay.

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self.protocol == CLASSIC:
            consumer.assign(partitions)
        else:
            consumer.incremental_assign(partitions)
        if partitions:
            consumer.pause(partitions)
        with self._cond:
            given = frozenset((tp.topic, tp.partition) for tp in partitions)
            self._assignment = given if self.protocol == CLASSIC else self._owned() | given
            self._fresh |= given
            self._cond.notify_all()
        log.info("group %s assigned %s", self.options.group_id, sorted(given))

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        with self._cond:
            deadline = self.options.group_join_timeout_s / 2
            self._cond.wait_for(lambda: not self._in_flight or self._stopping, timeout=deadline)
        self._send_commits()
        with self._cond:
            self._drop(partitions)
        self._unassign(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        # Someone else may own them already: no waiting, no commits.
        with self._cond:
            self._drop(partitions)
        self._unassign(consumer, partitions)

    def _unassign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        if self.protocol == CLASSIC:
            consumer.unassign()
        else:
            consumer.incremental_unassign(partitions)

    def _owned(self) -> frozenset[TopicPartition]:
        return self._assignment or frozenset()

    def _drop(self, partitions: list[KafkaTopicPartition]) -> None:
        taken = {(tp.topic, tp.partition) for tp in partitions}
        # Classic: nothing is owned until the next assignment arrives, whole.
        self._assignment = None if self.protocol == CLASSIC else self._owned() - taken
        self._fresh -= taken
        for tp in taken:
            self._committed.pop(tp, None)
            self._pending.pop(tp, None)
        self._cond.notify_all()

    def _send_commits(self) -> None:
        with self._cond:
            offsets, self._pending = self._pending, {}
        if offsets:
            commit(self.consumer, offsets, self.options.group_id)

    # -- what the planner asks -------------------------------------------

    def assignment(self) -> tuple[frozenset[TopicPartition], set[TopicPartition]]:
        """This query's partitions and which of them are fresh, once the group settles."""
        deadline = time.monotonic() + self.options.group_join_timeout_s
        while True:
            with self._cond:
                wait = deadline - time.monotonic()
                if self.protocol != CLASSIC:
                    wait = min(wait, EMPTY_ASSIGNMENT_CHECK_S)
                settled = self._cond.wait_for(
                    lambda: self._assignment is not None or self._failure is not None,
                    max(wait, 0.0),
                )
                if self._failure is not None:
                    raise HerdlessSparkError(
                        f"consumer group {self.options.group_id!r} at "
                        f"{self.options.connection.bootstrap}: {self._failure}"
                    )
                if settled:
                    assert self._assignment is not None
                    return self._assignment, set(self._fresh & self._assignment)
            if time.monotonic() >= deadline:
                raise self._join_timeout()
            if self.protocol != CLASSIC and self._joined_without_partitions():
                with self._cond:
                    if self._assignment is None:
                        self._assignment = frozenset()

    def _joined_without_partitions(self) -> bool:
        """Is this member in the group with nothing assigned (the coordinator says)?

        librdkafka tells a consumer-protocol member of its partitions only when
        there are some: a query in a group with more members than partitions
        would otherwise wait for an assignment that never comes.
        """
        if self._admin is None:
            self._admin = quiet_admin(self.options.connection)
        assert self.options.group_id is not None
        group = describe_group(self._admin, self.options.connection, self.options.group_id)
        return group is not None and any(m.member_id == self._member_id for m in group.members)

    def _join_timeout(self) -> HerdlessSparkError:
        try:
            self.lookup.list_topics(timeout=self.options.connection.connect_timeout_s)
        except KafkaException as exc:
            return unreachable(self.options.connection, exc, self.lookup)
        return HerdlessSparkError(
            f"no partitions were assigned in consumer group {self.options.group_id!r} within "
            f"{self.options.group_join_timeout_s:g}s (groupJoinTimeoutMs); "
            "is a rebalance stuck on a member that does not answer?"
        )

    def planned(self, partitions: set[TopicPartition], in_flight: bool) -> None:
        """A batch was planned: these partitions continue from it, and it is running."""
        with self._cond:
            self._fresh -= partitions
            self._in_flight = in_flight

    def completed(self, positions: Mapping[TopicPartition, int], batch_done: bool) -> None:
        """Every batch up to these end offsets is complete: commit what this query owns.

        batch_done says that no batch is running any more (true when Spark asks
        for the next offsets, not when its late commit(end) arrives).

        Only partitions owned and already continued by this query are committed:
        a fresh partition's position in our checkpoint may be stale, and
        committing it would move the group's offset backwards.
        """
        with self._cond:
            owned = self._assignment or frozenset()
            advanced = {
                tp: offset
                for tp, offset in positions.items()
                if tp in owned and tp not in self._fresh and offset > self._committed.get(tp, -1)
            }
            self._pending.update(advanced)
            self._committed.update(advanced)
            if batch_done:
                self._in_flight = False
            self._cond.notify_all()

    def committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        return committed_offsets(self.lookup, self.options.connection, partitions)

    def close(self) -> None:
        """Leave the group now, so the others take our partitions without a session timeout."""
        with self._cond:
            if self._closer is not None:
                if self._closer != threading.get_ident():
                    self._closed.wait(EXIT_DEADLINE_S / 2)
                return
            self._closer = threading.get_ident()
            self._stopping = True
            self._cond.notify_all()
        try:
            self._thread.join(timeout=5)
            self._send_commits()
            with contextlib.suppress(Exception):
                self.consumer.close()  # LeaveGroup
            with contextlib.suppress(Exception):
                self.lookup.close()
            self._admin = None
        finally:
            self._closed.set()

    def closing_here(self) -> bool:
        """Is this thread in the middle of close() (a signal handler interrupted it)?"""
        return self._closer == threading.get_ident() and not self._closed.is_set()


def leave_group_on_sigterm(member: GroupMember) -> None:
    """Leave the group when Spark ends the query's planning process.

    Spark stops a query by sending that process SIGTERM, without calling
    reader.stop(); when a query ends by itself (Trigger.AvailableNow) the
    SIGTERM may land while the process is already in reader.stop().
    """
    previous = signal.getsignal(signal.SIGTERM)

    def leave(signum: int, frame: object) -> None:
        # Whatever happens to the broker, the process ends soon after SIGTERM.
        deadline = threading.Timer(EXIT_DEADLINE_S, os._exit, args=(143,))
        deadline.daemon = True
        deadline.start()
        if member.closing_here():
            # SIGTERM interrupted reader.stop(): let it finish leaving the group;
            # Spark's runner exits right after it, and the deadline guards that.
            return
        started = time.monotonic()
        member.close()
        log.info("left group %s in %.2fs", member.options.group_id, time.monotonic() - started)
        if callable(previous):
            previous(signum, frame)
        else:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, leave)
