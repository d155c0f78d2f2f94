"""Order totals per customer: a consumer-group member that sums orders and commits.

Orders are records keyed by customer whose value is JSON, `{"amount": 1250}`
(cents). Each batch is summed, then its offsets are committed: a member that
stops and another that takes over go on from the last commit (at least once).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

from confluent_kafka import Consumer, KafkaException


def order(customer: str, amount: int) -> tuple[str, str]:
    """An order as a (key, value) record: keyed by customer, the amount in cents."""
    return customer, json.dumps({"amount": amount})


class OrderTotals:
    """One member of `group_id` reading `topic`; `totals` is what it has summed."""

    def __init__(self, bootstrap: str, topic: str, group_id: str) -> None:
        self.totals: Counter[str] = Counter()
        self.records = 0
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                # A new group starts from the beginning of the topic.
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self._consumer.subscribe([topic])

    def step(self, timeout: float = 0.5) -> int:
        """Sum one batch and commit it; return how many records it had."""
        messages = self._consumer.consume(500, timeout=timeout)
        for message in messages:
            if message.error() is not None:
                raise KafkaException(message.error())
            customer = (message.key() or b"").decode()
            self.totals[customer] += json.loads(message.value())["amount"]
        if messages:
            self.records += len(messages)
            self._consumer.commit(asynchronous=False)
        return len(messages)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()

    def run_until_idle(self, idle: float = 0.5, timeout: float = 60.0) -> Counter[str]:
        """Consume until no record has come for `idle` seconds after partitions were
        assigned; return the totals."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            if self.step() or not self._consumer.assignment():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= idle:
                return self.totals
        raise TimeoutError(f"still consuming after {timeout}s")

    def close(self) -> None:
        """Leave the group, so that the others take over its partitions at once."""
        self._consumer.close()
