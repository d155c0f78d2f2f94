"""The console's one client of the brokers: a thread that looks every interval.

It holds one admin client and one consumer of `__rebalance_history` for as long
as they work, and makes them anew after a failure (a broker restarted, a cluster
whose bootstrap broker went away), so the console outlives the brokers it shows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from herdless.admin.errors import AdminError
from herdless.admin.rebalance_history import HistoryReader
from herdless.console.memory import LagHistory, Rebalances
from herdless.console.snapshot import Snapshot, take_snapshot

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

log = logging.getLogger(__name__)

CLIENT_ID = "herdless-console"
# Reading the history must not hold up the next look for long; what is left is
# read the next time.
HISTORY_READ_S = 5.0
# The console asks the brokers at most this share of the time: when a look takes
# long (many groups), the next ones are spaced out, whatever the interval says.
BUSY_SHARE = 0.2


class Sampler:
    def __init__(
        self, bootstrap: str, interval_s: float, client_settings: Mapping[str, str] | None = None
    ) -> None:
        self.bootstrap = bootstrap
        # Read here, in the thread that made the console: the sampler's own has none.
        self.client_settings = dict(client_settings or {})
        self.interval_s = interval_s
        # How long the last look took, and so how far apart looks are now.
        self.took_s = 0.0
        self.period_s = interval_s
        self.lag = LagHistory()
        self.rebalances = Rebalances()
        # None until the first look; then the last one that reached the brokers.
        self.snapshot: Snapshot | None = None
        # Why the last look failed as a whole (no broker answered), or None.
        self.problem: str | None = None
        self._admin: KafkaAdminClient | None = None
        self._history: HistoryReader | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="herdless-console-sampler")
        self._thread.daemon = True  # never holds up the exit of a process that stops

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._close()

    def look(self) -> None:
        """One look at the brokers: a snapshot, then the new rebalances."""
        started = time.monotonic()
        try:
            if self._admin is None:
                from herdless.admin.client import open_admin

                self._admin = open_admin(self.bootstrap, CLIENT_ID, self.client_settings)
            snapshot = take_snapshot(self._admin, self.bootstrap)
        except AdminError as exc:
            self._fail(str(exc))
            return
        finally:
            # The history is left out: reading it from the start once may take long.
            self.took_s = time.monotonic() - started
        if "topics" in snapshot.problems and not snapshot.topics:
            # Nothing answered: keep showing the last look, and say why it is old.
            self._fail(snapshot.problems["topics"])
            return
        self.problem = None
        self.snapshot = snapshot
        self.lag.record(snapshot)
        self._read_history()

    def _read_history(self) -> None:
        try:
            if self._history is None:
                self._history = HistoryReader(self.bootstrap, CLIENT_ID, self.client_settings)
            self.rebalances.add(self._history.read_to_end(HISTORY_READ_S))
            self.rebalances.problem = None
        except AdminError as exc:
            self.rebalances.problem = str(exc)
            if not str(exc).endswith("timed out"):
                self._close_history()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.look()
            except Exception:
                # A bug must not end the console's sampling silently; the next look may work.
                log.exception("the console's look at the brokers failed")
                self._close()
            self.period_s = max(self.interval_s, self.took_s / BUSY_SHARE)
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - started)))

    def _fail(self, reason: str) -> None:
        self.problem = reason
        self._close()

    def _close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()
        self._close_history()

    def _close_history(self) -> None:
        if self._history is not None:
            history, self._history = self._history, None
            history.close()
