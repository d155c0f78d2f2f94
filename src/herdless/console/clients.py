"""The console's clients page: the clients pushing their own metrics to the brokers
(KIP-714), each with what it pushed last, read from the brokers' /metrics
(admin/client_telemetry.py) at most once per console interval, whichever page thread
asks first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from herdless.admin.client_telemetry import PushingClient, read_pushing_clients


@dataclass(frozen=True, slots=True)
class ClientsLook:
    clients: Sequence[PushingClient] = ()
    # Why a broker's /metrics could not be read, by its URL.
    problems: dict[str, str] = field(default_factory=dict)
    # The URLs read; none when the console was given none.
    sources: Sequence[str] = ()


class ClientTelemetry:
    def __init__(
        self,
        metrics_urls: Sequence[str],
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        read: Callable[
            [Sequence[str]], tuple[list[PushingClient], dict[str, str]]
        ] = read_pushing_clients,
    ) -> None:
        self.metrics_urls = tuple(metrics_urls)
        self._read = read
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: ClientsLook | None = None
        self._looked_at = 0.0

    def look(self) -> ClientsLook:
        """The clients as last read, read again when older than the interval."""
        if not self.metrics_urls:
            return ClientsLook()
        with self._lock:
            now = self._clock()
            if self._last is None or now - self._looked_at >= self._interval_s:
                clients, problems = self._read(self.metrics_urls)
                self._last = ClientsLook(clients, problems, self.metrics_urls)
                self._looked_at = now
            return self._last
