"""Server-side assignors: what each promises of every target assignment it computes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.coordinator.assignors import MemberSpec, PartitionRacks, range_, uniform
from herdless.coordinator.topic_metadata import Partitions, TopicIdPartition

T1, T2, T3 = (uuid.UUID(int=n) for n in (1, 2, 3))


def tps(topic: uuid.UUID, *partitions: int) -> Partitions:
    return frozenset(TopicIdPartition(topic, p) for p in partitions)


@st.composite
def groups(
    draw: st.DrawFn, homogeneous: bool
) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    """Members with subscriptions and a previous target, which, like any target, gives a
    partition to one member at most, but may be stale: partitions that no longer exist,
    topics no longer subscribed."""
    counts = {t: draw(st.integers(0, 12)) for t in (T1, T2, T3)}
    topics = draw(st.frozensets(st.sampled_from((T1, T2, T3)), min_size=1))
    n = draw(st.integers(1, 7))
    previous: list[set[TopicIdPartition]] = [set() for _ in range(n)]
    every = [TopicIdPartition(t, p) for t in (T1, T2, T3) for p in range(14)]
    holders = draw(st.lists(st.integers(-n, n - 1), min_size=len(every), max_size=len(every)))
    for tp, holder in zip(every, holders, strict=True):
        if holder >= 0:  # half the time nobody
            previous[holder].add(tp)
    members = {}
    for i in range(n):
        subscribed = topics if homogeneous else draw(st.frozensets(st.sampled_from((T1, T2, T3))))
        members[f"m{i}"] = MemberSpec(None, subscribed, frozenset(previous[i]))
    return members, counts


def check_complete(
    members: Mapping[str, MemberSpec],
    counts: Mapping[uuid.UUID, int],
    result: Mapping[str, Partitions],
) -> None:
    """Every partition of a subscribed topic goes to exactly one of its subscribers."""
    assert result.keys() == members.keys()
    given_out = [tp for ps in result.values() for tp in ps]
    assert len(given_out) == len(set(given_out)), "a partition has two owners"
    subscribed = {t for m in members.values() for t in m.subscribed_topic_ids if t in counts}
    assert set(given_out) == {TopicIdPartition(t, p) for t in subscribed for p in range(counts[t])}
    for member_id, ps in result.items():
        assert all(tp.topic_id in members[member_id].subscribed_topic_ids for tp in ps)


@given(groups(homogeneous=True))
def test_uniform_with_one_subscription_is_balanced_and_moves_the_least(
    group: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]],
) -> None:
    members, counts = group
    result = uniform(members, counts)
    check_complete(members, counts, result)
    sizes = [len(ps) for ps in result.values()]
    assert max(sizes) - min(sizes) <= 1
    floor = min(sizes)
    # Sticky: a member within its share keeps everything it still validly had; one above
    # it keeps as much as its share allows.
    for member_id, spec in members.items():
        valid = {
            tp
            for tp in spec.assignment
            if tp.topic_id in spec.subscribed_topic_ids and tp.partition < counts[tp.topic_id]
        }
        kept = result[member_id] & valid
        assert len(kept) == min(len(valid), len(result[member_id])), member_id
        if len(valid) <= floor:
            assert kept == valid


@given(groups(homogeneous=False))
def test_uniform_with_different_subscriptions_leaves_no_gap_of_two(
    group: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]],
) -> None:
    members, counts = group
    result = uniform(members, counts)
    check_complete(members, counts, result)
    check_no_gap_of_two(members, result)


def check_no_gap_of_two(
    members: Mapping[str, MemberSpec], result: Mapping[str, Partitions]
) -> None:
    """No member holds a partition that a subscriber of its topic with two fewer could take."""
    for giver, ps in result.items():
        for tp in ps:
            for taker, spec in members.items():
                if tp.topic_id in spec.subscribed_topic_ids:
                    assert len(result[taker]) >= len(ps) - 1, (giver, taker, tp)


@given(groups(homogeneous=False))
def test_uniform_is_stable_on_its_own_result(
    group: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]],
) -> None:
    members, counts = group
    first = uniform(members, counts)
    again = {m: MemberSpec(None, s.subscribed_topic_ids, first[m]) for m, s in members.items()}
    assert uniform(again, counts) == first
    assert uniform(members, counts) == first  # and deterministic


def test_uniform_gives_a_new_member_only_what_others_have_too_many_of() -> None:
    members = {
        "a": MemberSpec(None, frozenset({T1}), tps(T1, 0, 1, 2)),
        "b": MemberSpec(None, frozenset({T1}), tps(T1, 3, 4, 5)),
        "c": MemberSpec(None, frozenset({T1})),
    }
    result = uniform(members, {T1: 6})
    assert result["a"] < tps(T1, 0, 1, 2) and result["b"] < tps(T1, 3, 4, 5)
    assert len(result["c"]) == 2


@given(groups(homogeneous=False))
def test_range_gives_each_topic_in_contiguous_ranges(
    group: tuple[dict[str, MemberSpec], dict[uuid.UUID, int]],
) -> None:
    members, counts = group
    result = range_(members, counts)
    check_complete(members, counts, result)
    for topic in counts:
        subscribers = sorted(m for m, s in members.items() if topic in s.subscribed_topic_ids)
        start = 0
        for i, member_id in enumerate(subscribers):
            share = counts[topic] // len(subscribers) + (i < counts[topic] % len(subscribers))
            assert {tp for tp in result[member_id] if tp.topic_id == topic} == tps(
                topic, *range(start, start + share)
            )
            start += share


def test_range_co_partitions_and_puts_static_members_first() -> None:
    members = {
        "m0": MemberSpec(None, frozenset({T1, T2})),
        "m1": MemberSpec(None, frozenset({T1, T2})),
    }
    result = range_(members, {T1: 3, T2: 3})
    assert result["m0"] == tps(T1, 0, 1) | tps(T2, 0, 1)
    assert result["m1"] == tps(T1, 2) | tps(T2, 2)
    members["a"] = MemberSpec("z", frozenset({T1, T2}))
    result = range_(members, {T1: 3, T2: 3})
    assert result["a"] == tps(T1, 0) | tps(T2, 0)


# --- racks ------------------------------------------------------------------------------

RACKS = ("a", "b", "c")
RackedGroup = tuple[dict[str, MemberSpec], dict[uuid.UUID, int], PartitionRacks]


@st.composite
def racked_groups(draw: st.DrawFn, homogeneous: bool, one_rack_each: bool = False) -> RackedGroup:
    """Groups as above whose members mostly have racks, and partitions whose replicas are
    in one to three racks (in exactly one with `one_rack_each`, every member then in one)."""
    members, counts = draw(groups(homogeneous))
    rack = st.sampled_from(RACKS)
    member_rack = rack if one_rack_each else st.none() | rack
    members = {m: replace(s, rack_id=draw(member_rack)) for m, s in members.items()}
    replica_racks = (
        rack.map(lambda r: frozenset({r}))
        if one_rack_each
        else st.frozensets(rack, min_size=1, max_size=3)
    )
    racks = {t: tuple(draw(replica_racks) for _ in range(n)) for t, n in counts.items()}
    return members, counts, racks


def matched(
    members: Mapping[str, MemberSpec], racks: PartitionRacks, result: Mapping[str, Partitions]
) -> int:
    """How many partitions went to a member in one of their replicas' racks."""
    return sum(
        1
        for m, ps in result.items()
        for tp in ps
        if members[m].rack_id in racks[tp.topic_id][tp.partition]
    )


def matchable(
    members: Mapping[str, MemberSpec], counts: Mapping[uuid.UUID, int], racks: PartitionRacks
) -> int:
    """With partitions in one rack each and every member in one: per rack, its partitions
    or as many as its members' smallest shares hold, whichever is fewer. No balanced
    assignment can be sure of more, and a rack-aware one must reach it."""
    total = sum(counts[t] for t in {t for s in members.values() for t in s.subscribed_topic_ids})
    floor = total // len(members)
    reachable = 0
    for rack in RACKS:
        partitions = sum(
            1
            for t in {t for s in members.values() for t in s.subscribed_topic_ids}
            for p in range(counts[t])
            if racks[t][p] == frozenset({rack})
        )
        in_rack = sum(1 for s in members.values() if s.rack_id == rack)
        reachable += min(partitions, floor * in_rack)
    return reachable


@settings(max_examples=40)
@given(racked_groups(homogeneous=True))
def test_uniform_with_racks_is_still_complete_balanced_and_deterministic(
    group: RackedGroup,
) -> None:
    members, counts, racks = group
    result = uniform(members, counts, racks)
    check_complete(members, counts, result)
    sizes = [len(ps) for ps in result.values()]
    assert max(sizes) - min(sizes) <= 1
    assert uniform(members, counts, racks) == result


@settings(max_examples=40)
@given(racked_groups(homogeneous=True, one_rack_each=True))
def test_uniform_puts_partitions_in_their_rack_as_far_as_balance_allows(
    group: RackedGroup,
) -> None:
    members, counts, racks = group
    result = uniform(members, counts, racks)
    assert matched(members, racks, result) >= matchable(members, counts, racks)


@settings(max_examples=40)
@given(racked_groups(homogeneous=True))
def test_uniform_with_racks_keeps_what_is_in_the_members_racks(
    group: RackedGroup,
) -> None:
    """Sticky after rack matching: run again on its own result, nothing in its member's
    racks moves while the member is within its share."""
    members, counts, racks = group
    first = uniform(members, counts, racks)
    again = {m: replace(s, assignment=first[m]) for m, s in members.items()}
    second = uniform(again, counts, racks)
    floor = min(len(ps) for ps in first.values())
    for m, spec in members.items():
        near = {
            tp
            for tp in first[m]
            if spec.rack_id is None or spec.rack_id in racks[tp.topic_id][tp.partition]
        }
        if len(near) <= floor:
            assert near <= second[m], m


@settings(max_examples=40)
@given(racked_groups(homogeneous=False))
def test_uniform_with_racks_and_different_subscriptions_leaves_no_gap_of_two(
    group: RackedGroup,
) -> None:
    members, counts, racks = group
    result = uniform(members, counts, racks)
    check_complete(members, counts, result)
    check_no_gap_of_two(members, result)


def test_uniform_moves_a_partition_into_its_rack_and_keeps_the_rest() -> None:
    racks = {T1: (frozenset("a"), frozenset("a"), frozenset("b"), frozenset("b"))}
    members = {
        "x": MemberSpec(None, frozenset({T1}), tps(T1, 0, 2), rack_id="a"),
        "y": MemberSpec(None, frozenset({T1}), tps(T1, 1, 3), rack_id="b"),
    }
    assert uniform(members, {T1: 4}, racks) == {"x": tps(T1, 0, 1), "y": tps(T1, 2, 3)}
    # The same racks everywhere: nothing to gain, nothing moves.
    same = {T1: (frozenset("ab"),) * 4}
    assert uniform(members, {T1: 4}, same) == {"x": tps(T1, 0, 2), "y": tps(T1, 1, 3)}


@settings(max_examples=40)
@given(racked_groups(homogeneous=False))
def test_range_with_racks_still_gives_each_subscriber_its_share_of_each_topic(
    group: RackedGroup,
) -> None:
    members, counts, racks = group
    result = range_(members, counts, racks)
    check_complete(members, counts, result)
    for topic, count in counts.items():
        subscribers = [m for m, s in members.items() if topic in s.subscribed_topic_ids]
        shares = sorted(sum(1 for tp in result[m] if tp.topic_id == topic) for m in subscribers)
        if subscribers:
            floor, extra = divmod(count, len(subscribers))
            assert shares == [floor] * (len(subscribers) - extra) + [floor + 1] * extra


@settings(max_examples=40)
@given(racked_groups(homogeneous=True, one_rack_each=True))
def test_range_puts_partitions_in_their_rack_as_far_as_balance_allows(
    group: RackedGroup,
) -> None:
    members, counts, racks = group
    subscribed = {t for s in members.values() for t in s.subscribed_topic_ids}
    for topic in subscribed:  # range balances each topic on its own: count per topic
        one = {t: (c if t == topic else 0) for t, c in counts.items()}
        result = range_(members, one, racks)
        assert matched(members, racks, result) >= matchable(members, one, racks)


def test_range_with_racks_keeps_co_partitioned_topics_together() -> None:
    racks = {T1: (frozenset("b"), frozenset("a")), T2: (frozenset("b"), frozenset("a"))}
    members = {
        "m0": MemberSpec(None, frozenset({T1, T2}), rack_id="a"),
        "m1": MemberSpec(None, frozenset({T1, T2}), rack_id="b"),
    }
    result = range_(members, {T1: 2, T2: 2}, racks)
    assert result == {"m0": tps(T1, 1) | tps(T2, 1), "m1": tps(T1, 0) | tps(T2, 0)}
    # Without racks: plain ranges, m0 first.
    assert range_(members, {T1: 2, T2: 2})["m0"] == tps(T1, 0) | tps(T2, 0)
