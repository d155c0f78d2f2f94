"""Working around a kafka-python 3.0.12 hang when joining a group (see subscribe_safely).

Imported by tests and by tests/support/member.py, which runs as a plain script
beside this file; so this module imports nothing from the tests package.
"""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer


def subscribe_safely(
    consumer: KafkaConsumer, topics: list[str], listener: Any = None, timeout_s: float = 60
) -> None:
    """Subscribe, then wait until the group coordinator has seen the topics' partitions.

    kafka-python's group leader remembers the metadata it assigned with and
    rejoins as soon as its metadata snapshot changes; the snapshot is only rebuilt
    when a metadata response arrives after subscribe(). With the broker's initial
    rebalance delay at 0 (as tests run it) the first join can finish before that
    response: the leader assigns, then rejoins the moment the response lands.
    kafka-python 3.0.12 can lose such a metadata-triggered rejoin: when it
    finishes after poll() has timed out, join_group_async() finds need_rejoin()
    False (the new assignment snapshot now matches the metadata) and returns
    without completing the join, so the member never gets its assignment and
    stops heartbeating; its session expires and the group rebalances without it.
    The broker answers correctly throughout. topics() always fetches metadata,
    which rebuilds the snapshot with the subscription in place, so the first
    join assigns from complete metadata and nothing changes after it.
    """
    consumer.subscribe(topics, listener=listener)
    deadline = time.monotonic() + timeout_s
    while not set(topics) <= consumer.topics():
        if time.monotonic() > deadline:
            raise AssertionError(f"no metadata for topics {topics} within {timeout_s}s")
        time.sleep(0.1)
