"""The rebalance history as the broker records it: JSON entries keyed by group id
in the internal topic `__rebalance_history`, read back like any topic, with a
plain consumer."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from herdless.admin.client import CLIENT_ID, consumer_class, kafka_python_client
from herdless.admin.errors import AdminError

HISTORY_TOPIC = "__rebalance_history"
READ_TIMEOUT_S = 30.0


class HistoryReader:
    """A plain consumer of `__rebalance_history`, from its beginning: each call of
    `read_to_end` returns the entries recorded since the previous one, as (key, entry).

    Failures are AdminError, in words.
    """

    def __init__(
        self,
        bootstrap: str,
        client_id: str = CLIENT_ID,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._consumer = kafka_python_client(
            consumer_class,
            bootstrap,
            client_id,
            settings,
            enable_auto_commit=False,
            # Retention may delete what was not read yet: go on from what is left.
            auto_offset_reset="earliest",
        )
        self._assigned: list[Any] = []

    def __enter__(self) -> HistoryReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def read_to_end(self, timeout_s: float = READ_TIMEOUT_S) -> list[tuple[bytes, dict[str, Any]]]:
        from kafka.errors import KafkaError

        try:
            return self._read_to_end(timeout_s)
        except KafkaError as exc:
            raise AdminError(f"cannot read {HISTORY_TOPIC} from {self._bootstrap}: {exc}") from None

    def _read_to_end(self, timeout_s: float) -> list[tuple[bytes, dict[str, Any]]]:
        consumer = self._consumer
        if not self._assigned:
            from kafka import TopicPartition

            partitions = consumer.partitions_for_topic(HISTORY_TOPIC)
            if not partitions:
                raise AdminError(f"the broker at {self._bootstrap} keeps no {HISTORY_TOPIC} topic")
            self._assigned = [TopicPartition(HISTORY_TOPIC, p) for p in sorted(partitions)]
            consumer.assign(self._assigned)
            consumer.seek_to_beginning(*self._assigned)
        tps = self._assigned
        ends = consumer.end_offsets(tps)
        entries: list[tuple[bytes, dict[str, Any]]] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AdminError(f"reading {HISTORY_TOPIC} from {self._bootstrap} timed out")
            for records in consumer.poll(timeout_ms=1000).values():
                entries += [(r.key, _decode(r.value)) for r in records]
        return entries


def _decode(value: bytes) -> dict[str, Any]:
    try:
        decoded = json.loads(value)
    except ValueError:
        return {"cause": "unreadable entry"}
    return decoded if isinstance(decoded, dict) else {"cause": "unreadable entry"}
