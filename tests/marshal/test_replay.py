"""Property: the world state is a function of the log prefix and nothing else."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from herdless.marshal.messages import Kind, Message
from herdless.marshal.rationalizer import Entry, Rationalizer, rationalize
from tests.marshal.logs import GROUP, PARTITIONS, LogBuilder

CLIENTS = ["a", "b", "c"]

steps = st.lists(
    st.tuples(
        st.sampled_from(Kind),
        st.sampled_from(CLIENTS),
        st.integers(0, 5),  # topic partition
        st.integers(-1, 200),  # offset
        st.integers(0, 1500),  # time step: often more than two intervals
        st.sampled_from([0, 1000, 1000, 2000]),  # interval
    ),
    max_size=60,
)


def build(raw_steps) -> list[Entry]:
    log = LogBuilder()
    at = 1000
    for kind, client, partition, offset, step, interval in raw_steps:
        at += step
        if kind is Kind.PRESENT:
            log.add(Message(kind, client, GROUP, interval_ms=interval), at)
        else:
            log.add(Message(kind, client, GROUP, "t", partition, offset, interval), at)
    return log.entries


@settings(max_examples=300, deadline=None)
@given(steps, st.randoms(use_true_random=False))
def test_replaying_any_prefix_gives_the_incremental_state(raw_steps, rnd: random.Random) -> None:
    entries = build(raw_steps)
    live = Rationalizer(PARTITIONS)
    for n, entry in enumerate(entries, 1):
        live.apply(entry)
        prefix = entries[:n]
        assert rationalize(PARTITIONS, prefix) == live.state()
        # A reader that reads the coordination partitions in another interleaving
        # (each in its own order) derives the same state.
        assert rationalize(PARTITIONS, _interleave(prefix, rnd)) == live.state()


@settings(max_examples=200, deadline=None)
@given(steps)
def test_deterministic(raw_steps) -> None:
    entries = build(raw_steps)
    assert rationalize(PARTITIONS, entries) == rationalize(PARTITIONS, list(entries))


@settings(max_examples=200, deadline=None)
@given(steps)
def test_ownership_changes_hands_only_by_a_claim(raw_steps) -> None:
    entries = build(raw_steps)
    rationalizer = Rationalizer(PARTITIONS)
    for entry in entries:
        before = rationalizer.state()
        rationalizer.apply(entry)
        after = rationalizer.state()
        for key, claim in after.claims.items():
            old = before.claims.get(key)
            if claim.owner is not None and (old is None or old.owner != claim.owner):
                # A new owner only ever comes from its own ClaimingPartition, at this entry.
                assert claim.claim_position == entry.offset


def _interleave(entries: list[Entry], rnd: random.Random) -> list[Entry]:
    queues: dict[int, list[Entry]] = {}
    for entry in entries:
        queues.setdefault(entry.partition, []).append(entry)
    merged = []
    while queues:
        partition = rnd.choice(sorted(queues))
        merged.append(queues[partition].pop(0))
        if not queues[partition]:
            del queues[partition]
    return merged
