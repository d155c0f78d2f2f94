"""Warnings limited per subject (connections from one host, topic creation) so that
one bad client cannot flood the log: the first few in a window are logged, the rest
counted and summarised in one line when the window ends."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# Per subject and window: enough to see what is wrong, not enough to flood.
WARNINGS_PER_WINDOW = 5
WINDOW_S = 60.0


@dataclass(slots=True)
class _Window:
    started: float
    logged: int = 0
    suppressed: int = 0
    last: str = ""


class LimitedWarnings:
    def __init__(
        self,
        log: logging.Logger,
        per_window: int = WARNINGS_PER_WINDOW,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.WARNING,
    ) -> None:
        self._log = log
        # The authorizer logs its denials at INFO, as Kafka's authorizer log does.
        self._level = level
        self._per_window = per_window
        self._window_s = window_s
        self._clock = clock
        self._windows: dict[str, _Window] = {}
        # Disk errors are reported from flush threads too.
        self._lock = threading.Lock()

    def warn(self, subject: str, message: str) -> None:
        with self._lock:
            self._warn(subject, message)

    def _warn(self, subject: str, message: str) -> None:
        now = self._clock()
        window = self._windows.get(subject)
        if window is None or now - window.started >= self._window_s:
            if window is not None:
                self._summarise(subject, window)
            window = self._windows[subject] = _Window(now)
        if window.logged < self._per_window:
            window.logged += 1
            self._log.log(self._level, "%s", message)
        else:
            window.suppressed += 1
            window.last = message

    def sweep(self) -> None:
        """Summarise and forget the windows that have ended (called periodically)."""
        with self._lock:
            now = self._clock()
            for subject, window in list(self._windows.items()):
                if now - window.started >= self._window_s:
                    self._summarise(subject, window)
                    del self._windows[subject]

    def _summarise(self, subject: str, window: _Window) -> None:
        if window.suppressed:
            self._log.log(
                self._level,
                "%d more warnings about %s in the last %.0f s were not logged; the last: %s",
                window.suppressed,
                subject,
                self._window_s,
                window.last,
            )
