"""The share assignor (``simple``) over random groups: Kafka's rules as invariants.

Every partition of a subscribed topic goes to at least one subscriber and to no more
than ceil(subscribers / partitions); only subscribers hold a topic's partitions; no
member could hand a partition to a subscriber holding two fewer; the same input gives
the same target; and a target given back as the current one stays where it is.
"""

from __future__ import annotations

import random
import uuid

import pytest

from herdless.coordinator.assignors import MemberSpec
from herdless.coordinator.share_assignor import simple
from herdless.coordinator.topic_metadata import NO_PARTITIONS, Partitions, TopicIdPartition


def _group(seed: int) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, int]]:
    rng = random.Random(seed)
    topics = [uuid.UUID(int=t + 1) for t in range(rng.randint(1, 4))]
    counts = {t: rng.randint(1, 8) for t in topics}
    members = {}
    for i in range(rng.randint(1, 12)):
        subscribed = frozenset(rng.sample(topics, rng.randint(1, len(topics))))
        current: Partitions = frozenset(
            TopicIdPartition(t, p)
            for t in subscribed
            for p in range(counts[t] + 1)  # one beyond the count: a partition since gone
            if rng.random() < 0.3
        )
        members[f"m{i:02}"] = MemberSpec(None, subscribed, current)
    return members, counts


@pytest.mark.parametrize("seed", range(200))
def test_random_groups_follow_kafkas_rules(seed: int) -> None:
    members, counts = _group(seed)
    targets = simple(members, counts, {})
    assert targets == simple(members, counts, {})
    assert set(targets) == set(members)
    for topic_id, count in counts.items():
        subscribers = [m for m, spec in members.items() if topic_id in spec.subscribed_topic_ids]
        for partition in range(count):
            tp = TopicIdPartition(topic_id, partition)
            holders = [m for m in targets if tp in targets[m]]
            assert set(holders) <= set(subscribers)
            if subscribers:
                assert 1 <= len(holders) <= -(-len(subscribers) // count)
    for member_id, target in targets.items():
        assert all(tp.partition < counts[tp.topic_id] for tp in target)
        for other, other_target in targets.items():
            if len(target) - len(other_target) >= 2:
                movable = [
                    tp
                    for tp in target
                    if tp.topic_id in members[other].subscribed_topic_ids and tp not in other_target
                ]
                assert not movable, (member_id, other)
    settled = {m: MemberSpec(None, s.subscribed_topic_ids, targets[m]) for m, s in members.items()}
    assert simple(settled, counts, {}) == targets


def test_no_members_no_partitions() -> None:
    assert simple({}, {uuid.UUID(int=1): 3}, {}) == {}
    spec = MemberSpec(None, frozenset({uuid.UUID(int=1)}), NO_PARTITIONS)
    assert simple({"m": spec}, {}, {}) == {"m": NO_PARTITIONS}
