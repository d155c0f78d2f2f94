"""Fair shares on hand-written world states."""

from __future__ import annotations

from herdless.marshal.fairness import ClaimStrategy, plan
from herdless.marshal.rationalizer import ClaimKey, rationalize
from tests.marshal.logs import GROUP, PARTITIONS, LogBuilder

KEYS = [ClaimKey(GROUP, "t", p) for p in range(12)]


def world(holdings: dict[str, list[int]], present: list[str], at: int = 1000):
    log = LogBuilder()
    for client in present:
        log.present(client, at)
    for client, partitions in holdings.items():
        for p in partitions:
            log.claim(client, p, at)
    return rationalize(PARTITIONS, log.entries)


def test_alone_it_claims_everything_one_at_a_time() -> None:
    state = world({}, ["a"])
    decision = plan(state, GROUP, "a", KEYS, ClaimStrategy.FAIR)
    assert decision.release is None and len(decision.claimable) == 12


def test_it_stops_at_its_fair_share() -> None:
    state = world({"a": [0, 1, 2, 3]}, ["a", "b", "c"])
    assert plan(state, GROUP, "a", KEYS, ClaimStrategy.FAIR).claimable == []
    assert len(plan(state, GROUP, "b", KEYS, ClaimStrategy.FAIR).claimable) == 8


def test_only_the_busiest_releases_and_only_while_someone_waits() -> None:
    state = world({"a": list(range(8)), "b": list(range(8, 12))}, ["a", "b", "c"])
    assert plan(state, GROUP, "a", KEYS, ClaimStrategy.FAIR).release == KEYS[7]
    assert plan(state, GROUP, "b", KEYS, ClaimStrategy.FAIR).release is None
    balanced = world({"a": [0, 1, 2, 3, 4], "b": [5, 6, 7, 8], "c": [9, 10, 11]}, ["a", "b", "c"])
    # c holds 3 of a floor of 4: a, busiest, gives one up.
    assert plan(balanced, GROUP, "a", KEYS, ClaimStrategy.FAIR).release == KEYS[4]


def test_uneven_shares_settle_without_churn() -> None:
    # 12 over 5: ceil 3, floor 2. Nobody below 2, so nobody releases.
    state = world(
        {"a": [0, 1, 2], "b": [3, 4, 5], "c": [6, 7], "d": [8, 9], "e": [10, 11]},
        ["a", "b", "c", "d", "e"],
    )
    for client in "abcde":
        decision = plan(state, GROUP, client, KEYS, ClaimStrategy.FAIR)
        assert decision.release is None and decision.claimable == []


def test_a_member_at_its_floor_leaves_free_partitions_to_one_waiting() -> None:
    state = world({"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}, ["a", "b", "c"])
    # 4 free partitions, c holds none: a and b are at their share.
    assert plan(state, GROUP, "a", KEYS, ClaimStrategy.FAIR).claimable == []
    assert len(plan(state, GROUP, "c", KEYS, ClaimStrategy.FAIR).claimable) == 4


def test_stale_members_do_not_count() -> None:
    log = LogBuilder()
    log.present("gone", 1000)
    log.present("a", 5000)
    state = rationalize(PARTITIONS, log.entries)
    assert len(plan(state, GROUP, "a", KEYS, ClaimStrategy.FAIR).claimable) == 12


def test_greedy_claims_all_free() -> None:
    state = world({"a": [0, 1, 2, 3]}, ["a", "b", "c"])
    assert len(plan(state, GROUP, "a", KEYS, ClaimStrategy.GREEDY).claimable) == 8
