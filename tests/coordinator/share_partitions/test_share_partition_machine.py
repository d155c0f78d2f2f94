"""Randomized runs of members acquiring, acknowledging and losing locks on one share
partition, against a model of what each member holds and what was accepted.

Invariants, after every step:
- no offset is held by two members at once (what each member was given and has not
  settled or lost is disjoint from every other's);
- an accepted record is never acquired again;
- no record is delivered more often than the delivery count limit;
- no record is in flight past start offset + max record locks;
- every Acquired record has a lock that will run out, and the earliest is reported;
- a partition loaded from what its changes wrote equals it, but for locks (Acquired
  records come back Available).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from herdless.coordinator.share_partitions.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgeType,
)
from herdless.coordinator.share_partitions.config import SharePartitionConfig
from herdless.coordinator.share_partitions.partition import (
    InvalidRecordState,
    SharePartition,
    StateChange,
)
from herdless.coordinator.share_state.state import PartitionState, RecordState, StateBatch

MEMBERS = ("m0", "m1", "m2")
LOCK_MS = 1_000
LIMIT = 3
MAX_LOCKS = 12
BATCH = 4  # records per log batch
# The log's record offsets: every offset but those compacted away (each 7th).
LOG_END = 60


def log_batches(from_offset: int, max_bytes_batches: int) -> list[tuple[int, int]]:
    """Batches as a read from `from_offset` returns them: from the one holding it."""
    first = from_offset - from_offset % BATCH
    return [(base, min(base + BATCH - 1, LOG_END - 1)) for base in range(first, LOG_END, BATCH)][
        :max_bytes_batches
    ]


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        config = SharePartitionConfig(
            delivery_count_limit=LIMIT, max_record_locks=MAX_LOCKS, record_lock_duration_ms=LOCK_MS
        )
        self.config = config
        self.partition = SharePartition(config, 0)
        self.now = 0
        # offset -> (member, lock deadline) as the members were told.
        self.held: dict[int, tuple[str, int]] = {}
        self.accepted: set[int] = set()
        self.deliveries: dict[int, int] = {}
        # The persisted state, as a share coordinator would combine the writes.
        self.persisted_start = 0
        self.persisted: dict[int, tuple[RecordState, int]] = {}

    def persist(self, change: StateChange | None) -> None:
        if change is None:
            return
        for batch in change.batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                self.persisted[offset] = (batch.delivery_state, batch.delivery_count)
        self.persisted_start = change.start_offset
        self.persisted = {o: v for o, v in self.persisted.items() if o >= change.start_offset}

    def forget_expired(self) -> None:
        self.held = {o: h for o, h in self.held.items() if h[1] > self.now}

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 10), reach=st.integers(1, 4))
    def fetch(self, member: str, max_records: int, reach: int) -> None:
        self.persist(self.partition.expire_locks(self.now))
        self.forget_expired()
        offset = self.partition.next_fetch_offset()
        got = self.partition.acquire(
            member, offset, log_batches(offset, reach), max_records, self.now
        )
        for run in got:
            for acquired in range(run.first_offset, run.last_offset + 1):
                assert acquired not in self.held, f"{acquired} acquired while held"
                assert acquired not in self.accepted, f"{acquired} acquired once accepted"
                self.held[acquired] = (member, self.now + LOCK_MS)
                self.deliveries[acquired] = self.deliveries.get(acquired, 0) + 1
                assert run.delivery_count == self.deliveries[acquired]

    @rule(
        member=st.sampled_from(MEMBERS),
        kind=st.sampled_from(list(AcknowledgeType)),
        count=st.integers(1, 5),
        data=st.data(),
    )
    def acknowledge(
        self, member: str, kind: AcknowledgeType, count: int, data: st.DataObject
    ) -> None:
        self.persist(self.partition.expire_locks(self.now))
        self.forget_expired()
        mine = sorted(o for o, (m, _) in self.held.items() if m == member)
        # Mostly what the member holds; now and then something it does not.
        if mine and data.draw(st.booleans()):
            first = data.draw(st.sampled_from(mine))
        else:
            first = data.draw(st.integers(0, LOG_END))
        last = first + count - 1
        wanted = range(max(first, self.partition.start_offset), last + 1)
        # A batch wholly below the start offset was settled already: refused.
        valid = bool(wanted) and all(self.held.get(o, ("", 0))[0] == member for o in wanted)
        before = self.partition.start_offset
        try:
            change = self.partition.acknowledge(
                member, [AcknowledgementBatch(first, last, (kind,))]
            )
        except InvalidRecordState:
            assert not valid, f"{member} refused {first}-{last}, which it holds"
            assert self.partition.start_offset == before
            return
        assert valid, f"{member} acknowledged {first}-{last}, which it does not hold"
        self.persist(change)
        for offset in wanted:
            del self.held[offset]
            if kind == AcknowledgeType.ACCEPT:
                self.accepted.add(offset)

    @rule(member=st.sampled_from(MEMBERS))
    def session_closes(self, member: str) -> None:
        self.persist(self.partition.release_member(member))
        self.held = {o: h for o, h in self.held.items() if h[0] != member}

    @rule(ms=st.integers(1, 2 * LOCK_MS))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @precondition(lambda self: self.partition.next_lock_deadline() is not None)
    @rule()
    def locks_run_out(self) -> None:
        deadline = self.partition.next_lock_deadline()
        assert deadline is not None
        self.now = max(self.now, deadline)
        self.persist(self.partition.expire_locks(self.now))
        self.forget_expired()

    @invariant()
    def no_delivery_past_the_limit(self) -> None:
        assert all(count <= LIMIT for count in self.deliveries.values())

    @invariant()
    def locks_are_bounded_and_timed(self) -> None:
        partition = self.partition
        assert partition.end_offset - partition.start_offset <= MAX_LOCKS
        acquired = [
            o
            for o in range(partition.start_offset, partition.end_offset)
            if partition.record(o).state == RecordState.ACQUIRED  # type: ignore[union-attr]
        ]
        deadlines = [partition.record(o).lock_deadline_ms for o in acquired]  # type: ignore[union-attr]
        assert partition.next_lock_deadline() == (min(deadlines) if deadlines else None)
        # What the model says a member holds, the partition says it holds (or its lock
        # ran out and was not yet expired, which the model keeps too).
        for offset, (member, _) in self.held.items():
            record = partition.record(offset)
            assert record is not None and record.state == RecordState.ACQUIRED
            assert record.member_id == member

    @invariant()
    def loading_what_was_written_gives_the_same_partition(self) -> None:
        partition = self.partition
        assert self.persisted_start == partition.start_offset or not self.persisted
        state = PartitionState(
            state_epoch=0,
            start_offset=partition.start_offset,
            leader_epoch=0,
            batches=tuple(StateBatch(o, o, s, c) for o, (s, c) in sorted(self.persisted.items())),
        )
        loaded = SharePartition.loaded(self.config, state)
        for offset in range(partition.start_offset, partition.end_offset):
            live = partition.record(offset)
            assert live is not None
            back = loaded.record(offset)
            if live.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                assert back is not None and back.state == live.state, offset
            elif live.state == RecordState.AVAILABLE and live.delivery_count:
                assert back is not None and back.state == RecordState.AVAILABLE, offset
                assert back.delivery_count == live.delivery_count, offset


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
