"""The Marshaler: one per process, sharing one coordination log among its consumers."""

from __future__ import annotations

from collections.abc import Sequence

from herdless.marshal.consumer import MarshalConsumer, Mode
from herdless.marshal.fairness import ClaimStrategy
from herdless.marshal.log import CoordinationLog
from herdless.marshal.placement import DEFAULT_PARTITIONS, DEFAULT_TOPIC
from herdless.marshal.rationalizer import WorldState


class Marshaler:
    def __init__(
        self,
        bootstrap: str,
        *,
        coordination_topic: str = DEFAULT_TOPIC,
        coordination_partitions: int = DEFAULT_PARTITIONS,
        config: dict[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self._config = dict(config or {})
        self.log = CoordinationLog(
            bootstrap, coordination_topic, coordination_partitions, self._config
        )
        self._consumers: list[MarshalConsumer] = []

    def consumer(
        self,
        group_id: str,
        topics: Sequence[str],
        client_id: str,
        *,
        heartbeat_interval: float = 5.0,
        mode: Mode = Mode.AT_LEAST_ONCE,
        strategy: ClaimStrategy = ClaimStrategy.FAIR,
        max_batch: int = 100,
        start: str = "earliest",
    ) -> MarshalConsumer:
        """A consumer of topics in group_id.

        A stable client_id lets a restarted process take back its own claims;
        it must be unique among the group's running consumers.
        """
        consumer = MarshalConsumer(
            self.log,
            self.bootstrap,
            group_id,
            topics,
            client_id,
            heartbeat_interval=heartbeat_interval,
            mode=mode,
            strategy=strategy,
            max_batch=max_batch,
            start=start,
            config=self._config,
        )
        self._consumers.append(consumer)
        return consumer

    def state(self) -> WorldState:
        """The world state as of everything written before this call."""
        return self.log.sync()

    def close(self) -> None:
        for consumer in self._consumers:
            consumer.close()
        self.log.close()

    def __enter__(self) -> Marshaler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
