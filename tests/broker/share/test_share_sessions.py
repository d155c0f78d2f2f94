"""Share sessions alone: epochs, the partitions a session keeps, the cap on sessions."""

from __future__ import annotations

import uuid

import pytest

from herdless.broker.share.share_sessions import ShareSessionCache, ShareSessionError
from herdless.protocol.errors import ErrorCode

T = uuid.uuid4()
KEY = ("group", "member")


def refused(call: object, *args: object) -> ErrorCode:
    with pytest.raises(ShareSessionError) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.error_code


def test_a_session_opens_at_0_and_moves_one_epoch_per_request() -> None:
    cache = ShareSessionCache()
    session = cache.for_fetch(KEY, 0, [(T, 0), (T, 1)], [], now=0)
    assert session.epoch == 1 and list(session.partitions) == [(T, 0), (T, 1)]
    assert cache.for_fetch(KEY, 1, [(T, 2)], [(T, 0)], now=1) is session
    assert list(session.partitions) == [(T, 1), (T, 2)]
    assert cache.for_acknowledge(KEY, 2, now=2) is session
    assert session.epoch == 3
    assert refused(cache.for_fetch, KEY, 2, [], [], 3) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert refused(cache.for_acknowledge, KEY, 4, 3) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert session.epoch == 3


def test_the_final_epoch_names_the_open_session_without_moving_it() -> None:
    cache = ShareSessionCache()
    assert refused(cache.for_fetch, KEY, -1, [], [], 0) == ErrorCode.SHARE_SESSION_NOT_FOUND
    session = cache.for_fetch(KEY, 0, [(T, 0)], [], now=0)
    assert cache.for_acknowledge(KEY, -1, now=1) is session
    assert session.epoch == 1
    assert cache.close(KEY) is session
    assert refused(cache.for_acknowledge, KEY, 1, 2) == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_only_share_fetch_opens_a_session() -> None:
    cache = ShareSessionCache()
    assert refused(cache.for_acknowledge, KEY, 0, 0) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert len(cache) == 0


def test_opening_again_replaces_the_members_own_and_the_cap_holds() -> None:
    cache = ShareSessionCache(max_sessions=2)
    first = cache.for_fetch(KEY, 0, [(T, 0)], [], now=0)
    cache.for_fetch(KEY, 1, [], [], now=1)
    again = cache.for_fetch(KEY, 0, [(T, 1)], [], now=2)
    assert again is not first and again.epoch == 1 and list(again.partitions) == [(T, 1)]
    cache.for_fetch(("group", "other"), 0, [], [], now=3)
    third = ("group", "third")
    assert refused(cache.for_fetch, third, 0, [], [], 4) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    # A member already holding a session may always open it again.
    cache.for_fetch(KEY, 0, [], [], now=5)
    assert len(cache) == 2


def test_the_members_sharing_a_partition_are_counted_as_sessions_come_and_go() -> None:
    """What the even share of a partition's record locks is divided by."""
    cache = ShareSessionCache()
    a, b, other_group = ("group", "a"), ("group", "b"), ("other", "a")
    cache.for_fetch(a, 0, [(T, 0), (T, 1)], [], now=0)
    cache.for_fetch(b, 0, [(T, 0)], [], now=0)
    cache.for_fetch(other_group, 0, [(T, 0)], [], now=0)
    assert cache.sharing("group", (T, 0)) == 2 and cache.sharing("group", (T, 1)) == 1
    cache.for_fetch(b, 1, [(T, 1), (T, 1)], [(T, 0), (T, 0), (T, 5)], now=1)
    assert cache.sharing("group", (T, 0)) == 1 and cache.sharing("group", (T, 1)) == 2
    # Named again, or forgotten when not fetched: no change.
    cache.for_fetch(a, 1, [(T, 0)], [(T, 7)], now=1)
    assert cache.sharing("group", (T, 0)) == 1 and cache.sharing("group", (T, 1)) == 2
    # Opened again: its old partitions are no longer counted.
    cache.for_fetch(a, 0, [(T, 2)], [], now=2)
    assert cache.sharing("group", (T, 0)) == 0 and cache.sharing("group", (T, 2)) == 1
    cache.close(b)
    assert cache.sharing("group", (T, 1)) == 0
    assert cache.sharing("other", (T, 0)) == 1
