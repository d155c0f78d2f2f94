"""One `herdless serve` process with a temporary data directory, and the test helpers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from herdless.testing.clients import Brokers, kafka_settings
from herdless.testing.process import BrokerProcess

# Groups form as soon as their first member joins, rather than after Kafka's 3 s.
BROKER_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


def set_args(settings: Mapping[str, str]) -> list[str]:
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


class HerdlessBroker(BrokerProcess, Brokers):
    """A real broker process on 127.0.0.1 and a free port, with its data in `data_dir`.

    Settings take Kafka's names, in a mapping or as keywords where `_` stands for
    `.`: `HerdlessBroker(path, num_partitions=3)` runs with `num.partitions=3`.
    As a context manager it is started on entry (if it is not yet) and stopped on
    exit: SIGTERM, then SIGKILL if it has not stopped within 15 seconds.
    """

    def __init__(
        self, data_dir: Path, settings: Mapping[str, object] | None = None, /, **names: object
    ) -> None:
        self.settings = {**BROKER_DEFAULTS, **kafka_settings(settings, names)}
        super().__init__(data_dir, *set_args(self.settings))

    def logs(self) -> str:
        return f"--- broker log ({self.log_path}) ---\n{self.log()}"

    def heal(self) -> None:
        """Resume the broker if a test paused it, and start it again if one stopped it."""
        if self.alive():
            self.resume()
        elif self.process is not None:
            self.start()

    def started(self) -> bool:
        return self.process is not None

    def shutdown(self) -> None:
        self.terminate()

    def __repr__(self) -> str:
        return f"<HerdlessBroker {self.bootstrap} data_dir={self.data_dir}>"
