"""A follower's side of a fetch session: what each fetch names, and how answers move it on."""

from __future__ import annotations

from herdless.broker.replication.fetch_session_handler import FetchSessionHandler, PartitionFetch
from herdless.protocol.errors import ErrorCode

SESSION = 4242


def at(offset: int, epoch: int = 3) -> PartitionFetch:
    return PartitionFetch(
        fetch_offset=offset, current_leader_epoch=epoch, log_start_offset=0, partition_max_bytes=1
    )


def opened(wanted: dict[tuple[str, int], PartitionFetch]) -> FetchSessionHandler:
    handler = FetchSessionHandler(leader=1)
    fetch = handler.build(wanted)
    assert handler.handle_response(fetch, ErrorCode.NONE, SESSION, set(wanted))
    return handler


def test_the_first_fetch_is_full_and_opens_the_session() -> None:
    handler = FetchSessionHandler(leader=1)
    wanted = {("t", 0): at(5), ("t", 1): at(7)}
    fetch = handler.build(wanted)
    assert (fetch.session_id, fetch.epoch, fetch.partitions, fetch.forgotten) == (0, 0, wanted, [])
    assert handler.handle_response(fetch, ErrorCode.NONE, SESSION, set(wanted))
    assert (handler.session_id, handler.epoch) == (SESSION, 1)


def test_later_fetches_name_only_what_changed_and_forget_what_is_gone() -> None:
    handler = opened({("t", 0): at(5), ("t", 1): at(7), ("u", 0): at(1)})
    fetch = handler.build({("t", 0): at(9), ("t", 1): at(7), ("v", 0): at(0)})
    assert (fetch.session_id, fetch.epoch) == (SESSION, 1)
    assert fetch.partitions == {("t", 0): at(9), ("v", 0): at(0)}
    assert fetch.forgotten == [("u", 0)]
    # An answer may leave out any partition of the session, but not name another.
    assert handler.handle_response(fetch, ErrorCode.NONE, SESSION, {("t", 0)})
    assert handler.epoch == 2
    fetch = handler.build({("t", 0): at(9), ("t", 1): at(7), ("v", 0): at(0)})
    assert (fetch.epoch, fetch.partitions, fetch.forgotten) == (2, {}, [])
    # A new leader epoch is a change too.
    fetch = handler.build({("t", 0): at(9, epoch=4), ("t", 1): at(7), ("v", 0): at(0)})
    assert fetch.partitions == {("t", 0): at(9, epoch=4)}


def test_a_lost_session_starts_over_with_a_full_fetch_opening_a_new_one() -> None:
    wanted = {("t", 0): at(5)}
    handler = opened(wanted)
    fetch = handler.build(wanted)
    assert not handler.handle_response(fetch, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, set())
    fetch = handler.build(wanted)
    assert (fetch.session_id, fetch.epoch, fetch.partitions) == (0, 0, wanted)


def test_other_session_errors_and_lost_answers_close_the_session_with_a_full_fetch() -> None:
    wanted = {("t", 0): at(5)}
    handler = opened(wanted)
    fetch = handler.build(wanted)
    assert not handler.handle_response(fetch, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, set())
    fetch = handler.build(wanted)
    # Epoch 0 naming the session: the leader closes it and opens another.
    assert (fetch.session_id, fetch.epoch, fetch.partitions) == (SESSION, 0, wanted)
    handler = opened(wanted)
    handler.build(wanted)
    handler.handle_error()
    assert (handler.build(wanted).session_id, handler.build(wanted).epoch) == (SESSION, 0)


def test_answers_the_session_cannot_explain_are_not_used() -> None:
    wanted = {("t", 0): at(5), ("t", 1): at(5)}
    handler = FetchSessionHandler(leader=1)
    full = handler.build(wanted)
    # A full fetch's answer must carry every partition asked for.
    assert not handler.handle_response(full, ErrorCode.NONE, SESSION, {("t", 0)})
    assert handler.build(wanted).epoch == 0
    handler = opened(wanted)
    fetch = handler.build(wanted)
    assert not handler.handle_response(fetch, ErrorCode.NONE, SESSION, {("x", 9)})
    assert handler.build(wanted).epoch == 0


def test_no_session_granted_means_full_fetches() -> None:
    wanted = {("t", 0): at(5)}
    handler = FetchSessionHandler(leader=1)
    fetch = handler.build(wanted)
    assert handler.handle_response(fetch, ErrorCode.NONE, 0, set(wanted))
    fetch = handler.build({("t", 0): at(6)})
    assert (fetch.session_id, fetch.epoch, fetch.partitions) == (0, 0, {("t", 0): at(6)})
