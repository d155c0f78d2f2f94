"""Working around a kafka-python 3.0.12 hang when joining a group (see subscribe_safely)."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer


def subscribe_safely(
    consumer: KafkaConsumer, topics: list[str], listener: Any = None, timeout_s: float = 60
) -> None:
    """Subscribe once the topics' partitions are known.

    With the broker's initial rebalance delay at 0 (as tests run it), a JoinGroup
    can complete before the topic metadata arrives: the leader assigns nothing and
    rejoins when it does, and kafka-python 3.0.12 can lose that rejoin when it
    finishes after poll() timed out; the member then never gets an assignment and
    stops heartbeating. The broker answers correctly throughout (tests/support/member.py
    has the full story).
    """
    deadline = time.monotonic() + timeout_s
    for topic in topics:
        while not consumer.partitions_for_topic(topic):
            if time.monotonic() > deadline:
                raise AssertionError(f"no metadata for topic {topic} within {timeout_s}s")
            time.sleep(0.1)
    consumer.subscribe(topics, listener=listener)
