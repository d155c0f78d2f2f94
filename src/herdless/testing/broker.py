"""One `herdless serve` process with a temporary data directory, and the test helpers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from herdless.testing.clients import Brokers, kafka_settings
from herdless.testing.process import STARTUP_TIMEOUT_S, BrokerProcess, free_port
from herdless.testing.security import Security, listener_addresses

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

    With `security` (herdless.testing.security.Security) it also serves secured
    listeners with throw-away certificates (in `certificates`, beside the data) and
    the users made before its first start; `bootstrap` is then the first secured
    listener, `plaintext_bootstrap` the PLAINTEXT one, and the helpers connect as
    the super user admin.
    """

    def __init__(
        self,
        data_dir: Path,
        settings: Mapping[str, object] | None = None,
        /,
        *,
        security: Security | None = None,
        **names: object,
    ) -> None:
        self.security = security
        self.settings = {**BROKER_DEFAULTS, **kafka_settings(settings, names)}
        self.secured_ports: dict[str, int] = {}
        listeners = None
        if security is not None:
            self.certificates = security.write_certificates(
                data_dir.parent / f"{data_dir.name}-certificates"
            )
            self.settings = {**security.broker_settings(self.certificates), **self.settings}
            self.secured_ports = {name: free_port() for name in security.listeners}
            listeners = listener_addresses(security.listeners, "127.0.0.1", self.secured_ports)
        super().__init__(data_dir, *set_args(self.settings), listeners=listeners)
        self._users_written = False

    @property
    def plaintext_bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        if self.security is None:
            return self.plaintext_bootstrap
        return self.listener_bootstrap()[self.security.listeners[0]]

    def listener_bootstrap(self) -> dict[str, str]:
        return {
            "PLAINTEXT": self.plaintext_bootstrap,
            **{name: f"{self.host}:{port}" for name, port in self.secured_ports.items()},
        }

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> HerdlessBroker:
        if self.security is not None and not self._users_written:
            # Before the first start, as an operator makes the first admin.
            self.security.add_users_offline(self.data_dir)
            self._users_written = True
        super().start(timeout)
        return self

    def logs(self) -> str:
        return f"--- broker log ({self.log_path}) ---\n{self.log_tail()}"

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
