"""The fetch session cache with a fake clock: sessions, epochs, errors, what is answered, eviction.

The eviction cases replay those of Kafka's FetchSessionTest (testSessionCache,
testResizeCachedSessions), so the two caches keep and evict the same sessions.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from herdless.broker.handlers.fetch_sessions import (
    CachedPartition,
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    PartitionKey,
    SessionErrorContext,
    SessionlessContext,
    next_epoch,
)
from herdless.protocol.errors import ErrorCode
from herdless.protocol.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    MAX_EPOCH,
)

EVICTION_MS = 100


@dataclass
class Answer:
    """A partition's answer as the Fetch handler builds it."""

    high_watermark: int = 10
    last_stable_offset: int = 10
    log_start_offset: int = 0
    error_code: int = ErrorCode.NONE
    preferred_read_replica: int = -1
    records: bytes = b""


def partitions(
    count: int, topic: str = "t", fetch_offset: int = 0
) -> dict[PartitionKey, CachedPartition]:
    made = [CachedPartition(topic, None, i, fetch_offset, 1 << 20) for i in range(count)]
    return {p.key(False): p for p in made}


def cache(max_sessions: int = 10) -> FetchSessionCache:
    return FetchSessionCache(max_sessions, EVICTION_MS, random.Random(7))


def create(store: FetchSessionCache, now: int, size: int, privileged: bool = False) -> int:
    return store.create(now, privileged, False, partitions(size))


def held(store: FetchSessionCache, *ids: int) -> bool:
    return len(store) == len(ids) and all(store.get(i) is not None for i in ids)


def open_session(
    store: FetchSessionCache, wanted: dict[PartitionKey, CachedPartition], now: int = 0
) -> int:
    """A full fetch at epoch 0 answered with every partition unchanged at offset 10."""
    context = store.new_context(now, INVALID_SESSION_ID, INITIAL_EPOCH, False, False, wanted, [])
    assert isinstance(context, FullContext)
    answer = context.answer([(p, Answer()) for p in context.partitions])
    assert answer.error_code == ErrorCode.NONE and answer.session_id != INVALID_SESSION_ID
    return answer.session_id


def incremental(
    store: FetchSessionCache,
    session_id: int,
    epoch: int,
    wanted: dict[PartitionKey, CachedPartition] | None = None,
    forgotten: list[PartitionKey] | None = None,
    now: int = 0,
    uses_topic_ids: bool = False,
) -> object:
    return store.new_context(
        now, session_id, epoch, False, uses_topic_ids, wanted or {}, forgotten or []
    )


# -- epochs ---------------------------------------------------------------------------


def test_epochs_count_up_wrap_past_the_largest_to_1_and_final_stays_final() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


# -- eviction, as Kafka's testSessionCache and testResizeCachedSessions ------------------


def test_full_cache_evicts_the_stale_then_the_smaller_and_followers_evict_consumers() -> None:
    store = cache(3)
    id1 = create(store, 0, 10)
    id2 = create(store, 10, 20)
    id3 = create(store, 20, 30)
    # Full, and every session is younger than the eviction time: no room.
    assert create(store, 30, 40) == INVALID_SESSION_ID
    assert create(store, 40, 5) == INVALID_SESSION_ID
    assert held(store, id1, id2, id3)
    session1 = store.get(id1)
    assert session1 is not None
    store.touch(session1, 200)
    # id2, unused since 10, is stale at 210.
    id4 = create(store, 210, 11)
    assert held(store, id1, id3, id4)
    for session_id, now in ((id1, 400), (id3, 400), (id4, 400)):
        session = store.get(session_id)
        assert session is not None
        store.touch(session, now)
    # None stale; the smallest old enough to be evicted (id1, 10 partitions) gives way
    # to one with more.
    id5 = create(store, 410, 50)
    assert held(store, id3, id4, id5)
    # ...but not to one with fewer: id4 (11) is the least valuable, 5 is worth less.
    assert create(store, 410, 5) == INVALID_SESSION_ID
    # A follower's session evicts a consumer's, however small it is.
    id6 = create(store, 410, 5, privileged=True)
    assert held(store, id3, id5, id6)
    assert store.evictions == 3


def test_a_tie_in_size_evicts_nothing() -> None:
    store = cache(1)
    first = create(store, 0, 3)
    session = store.get(first)
    assert session is not None
    store.touch(session, 150)
    assert create(store, 160, 3) == INVALID_SESSION_ID
    assert create(store, 160, 4) != INVALID_SESSION_ID
    assert store.get(first) is None


def test_a_young_follower_session_is_safe_even_from_followers() -> None:
    store = cache(1)
    follower = create(store, 0, 1, privileged=True)
    assert create(store, 50, 100) == INVALID_SESSION_ID
    assert create(store, 50, 100, privileged=True) == INVALID_SESSION_ID
    session = store.get(follower)
    assert session is not None
    store.touch(session, 150)
    # Old enough now: a consumer's session still cannot take its place, a larger
    # follower's can.
    assert create(store, 160, 100) == INVALID_SESSION_ID
    assert create(store, 160, 2, privileged=True) != INVALID_SESSION_ID
    assert store.get(follower) is None


def test_sizes_and_partition_totals_follow_touches_and_removals() -> None:
    store = cache(2)
    id1 = create(store, 0, 2)
    assert store.total_partitions == 2 and len(store) == 1 and store.evictions == 0
    id2 = create(store, 0, 4)
    assert store.total_partitions == 6 and held(store, id1, id2)
    session1, session2 = store.get(id1), store.get(id2)
    assert session1 is not None and session2 is not None
    store.touch(session1, 200)
    store.touch(session2, 200)
    id3 = create(store, 200, 5)
    assert held(store, id2, id3)
    assert store.total_partitions == 9 and store.evictions == 1
    store.remove(id3)
    assert held(store, id2) and store.total_partitions == 4
    # A removal is not an eviction.
    assert store.evictions == 1
    session2.partitions.pop(next(iter(session2.partitions)))
    store.touch(session2, session2.last_used_ms)
    assert store.total_partitions == 3


def test_no_slots_no_sessions() -> None:
    store = cache(0)
    assert create(store, 0, 1) == INVALID_SESSION_ID
    assert create(store, 0, 1, privileged=True) == INVALID_SESSION_ID
    assert len(store) == 0


def test_session_ids_are_positive_and_unique() -> None:
    store = FetchSessionCache(500, EVICTION_MS, random.Random(1))
    ids = {create(store, 0, 1) for _ in range(500)}
    assert len(ids) == 500 and min(ids) > 0


# -- contexts: which partitions are read, which are answered ------------------------------


def test_full_fetch_at_epoch_0_opens_a_session_at_epoch_1_with_every_partition() -> None:
    store = cache()
    wanted = partitions(3)
    session_id = open_session(store, wanted)
    session = store.get(session_id)
    assert session is not None and session.epoch == 1 and not session.privileged
    assert list(session.partitions) == [("t", 0), ("t", 1), ("t", 2)]
    assert [p.high_watermark for p in session.partitions.values()] == [10, 10, 10]


def test_full_fetch_at_final_epoch_opens_no_session_and_answers_everything() -> None:
    store = cache()
    context = store.new_context(0, INVALID_SESSION_ID, FINAL_EPOCH, False, False, partitions(2), [])
    assert isinstance(context, SessionlessContext)
    read = [(p, Answer()) for p in context.partitions]
    answer = context.answer(read)
    assert answer.session_id == INVALID_SESSION_ID and answer.partitions == read
    assert len(store) == 0


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    store = cache()
    old = open_session(store, partitions(2))
    # Epoch 0: close it and open another.
    context = store.new_context(0, old, INITIAL_EPOCH, False, False, partitions(2), [])
    assert store.get(old) is None
    new = context.answer([(p, Answer()) for p in context.partitions]).session_id
    assert new not in (old, INVALID_SESSION_ID) and held(store, new)
    # Epoch -1: close it and open none.
    store.new_context(0, new, FINAL_EPOCH, False, False, partitions(2), [])
    assert len(store) == 0


def test_incremental_fetch_reads_the_whole_session_and_answers_only_what_changed() -> None:
    store = cache()
    session_id = open_session(store, partitions(4))
    moved = partitions(1, fetch_offset=7)  # partition 0 moved on to offset 7
    context = incremental(store, session_id, 1, moved)
    assert isinstance(context, IncrementalContext)
    assert [(p.partition, p.fetch_offset) for p in context.partitions] == [
        (0, 7),
        (1, 0),
        (2, 0),
        (3, 0),
    ]
    answers = {
        0: Answer(records=b"batch"),  # new records
        1: Answer(),  # nothing new
        2: Answer(high_watermark=11, last_stable_offset=11),  # the high watermark moved
        3: Answer(log_start_offset=5),  # the log start moved
    }
    answer = context.answer([(p, answers[p.partition]) for p in context.partitions])
    assert answer.error_code == ErrorCode.NONE and answer.session_id == session_id
    assert [p.partition for p, _ in answer.partitions] == [0, 2, 3]
    # Told once: the same figures again leave the partitions out.
    context = incremental(store, session_id, 2)
    answer = context.answer([(p, answers[p.partition]) for p in context.partitions])
    assert [p.partition for p, _ in answer.partitions] == [0]


def test_a_changed_last_stable_offset_is_answered() -> None:
    store = cache()
    session_id = open_session(store, partitions(1))
    context = incremental(store, session_id, 1)
    answer = context.answer([(context.partitions[0], Answer(last_stable_offset=9))])
    assert len(answer.partitions) == 1


def test_an_error_is_answered_every_time_and_once_more_when_it_clears() -> None:
    store = cache()
    session_id = open_session(store, partitions(1))
    failing = Answer(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    for epoch in (1, 2):
        context = incremental(store, session_id, epoch)
        assert len(context.answer([(context.partitions[0], failing)]).partitions) == 1
    # Cleared, with the same offsets as before the error: still told.
    context = incremental(store, session_id, 3)
    assert len(context.answer([(context.partitions[0], Answer())]).partitions) == 1
    context = incremental(store, session_id, 4)
    assert context.answer([(context.partitions[0], Answer())]).partitions == []


def test_partitions_that_returned_records_are_read_last_next_time() -> None:
    store = cache()
    session_id = open_session(store, partitions(3))
    context = incremental(store, session_id, 1)
    read = [(p, Answer(records=b"x" if p.partition < 2 else b"")) for p in context.partitions]
    context.answer(read)
    context = incremental(store, session_id, 2)
    assert [p.partition for p in context.partitions] == [2, 0, 1]


def test_added_and_forgotten_partitions_change_the_session() -> None:
    store = cache()
    session_id = open_session(store, partitions(2))
    added = {("u", 0): CachedPartition("u", None, 0, 3, 1 << 20)}
    context = incremental(store, session_id, 1, added, forgotten=[("t", 0)])
    assert [p.key(False) for p in context.partitions] == [("t", 1), ("u", 0)]
    assert store.total_partitions == 2


def test_forgetting_every_partition_closes_the_session() -> None:
    store = cache()
    session_id = open_session(store, partitions(2))
    context = incremental(store, session_id, 1, forgotten=[("t", 0), ("t", 1)])
    assert isinstance(context, SessionlessContext) and context.partitions == []
    assert context.answer([]).session_id == INVALID_SESSION_ID
    assert len(store) == 0


def test_an_unknown_session_is_fetch_session_id_not_found() -> None:
    store = cache()
    context = incremental(store, 12345, 1, partitions(1))
    assert isinstance(context, SessionErrorContext) and context.partitions == []
    answer = context.answer([])
    assert answer.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert answer.session_id == INVALID_SESSION_ID
    assert store.errors == {ErrorCode.FETCH_SESSION_ID_NOT_FOUND: 1}


def test_a_wrong_epoch_is_invalid_fetch_session_epoch_and_changes_nothing() -> None:
    store = cache()
    session_id = open_session(store, partitions(2))
    for epoch in (2, 7):
        context = incremental(store, session_id, epoch, forgotten=[("t", 0)])
        assert context.answer([]).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    session = store.get(session_id)
    assert session is not None and session.epoch == 1 and len(session.partitions) == 2


def test_two_fetches_at_once_in_one_session_fail_the_earlier() -> None:
    store = cache()
    session_id = open_session(store, partitions(1))
    waiting = incremental(store, session_id, 1)  # parked in a long poll...
    later = incremental(store, session_id, 2)  # ...while the client sends the next
    answer = waiting.answer([(waiting.partitions[0], Answer(records=b"x"))])
    assert answer.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert answer.session_id == session_id and answer.partitions == []
    assert later.answer([(later.partitions[0], Answer())]).error_code == ErrorCode.NONE
    assert store.errors == {ErrorCode.INVALID_FETCH_SESSION_EPOCH: 1}


def test_a_session_keeps_the_naming_it_was_opened_with() -> None:
    store = cache()
    by_name = open_session(store, partitions(1))
    context = incremental(store, by_name, 1, uses_topic_ids=True)
    assert context.answer([]).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    topic_id = uuid.uuid4()
    wanted = {(topic_id, 0): CachedPartition("t", topic_id, 0, 0, 1 << 20)}
    opened = store.new_context(0, INVALID_SESSION_ID, INITIAL_EPOCH, False, True, wanted, [])
    by_id = opened.answer([(p, Answer()) for p in opened.partitions]).session_id
    context = incremental(store, by_id, 1)
    assert context.answer([]).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    context = incremental(store, by_id, 1, forgotten=[(topic_id, 0)], uses_topic_ids=True)
    assert isinstance(context, SessionlessContext) and len(store) == 1


def test_incremental_fetches_keep_a_session_in_use() -> None:
    store = cache(1)
    session_id = open_session(store, partitions(1), now=0)
    for epoch, now in ((1, 90), (2, 180), (3, 270)):
        incremental(store, session_id, epoch, now=now)
    # Used 30 ms ago, not stale: a newcomer of the same size finds no room.
    assert create(store, 300, 1) == INVALID_SESSION_ID
    assert create(store, 371, 1) != INVALID_SESSION_ID
    assert store.get(session_id) is None


def test_a_follower_session_is_privileged() -> None:
    store = cache()
    context = store.new_context(
        0, INVALID_SESSION_ID, INITIAL_EPOCH, True, False, partitions(1), []
    )
    session_id = context.answer([(p, Answer()) for p in context.partitions]).session_id
    session = store.get(session_id)
    assert session is not None and session.privileged
