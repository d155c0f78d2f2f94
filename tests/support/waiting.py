"""Waiting in a test for what a broker does in the background."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], what: str, timeout: float = 30, interval: float = 0.1
) -> T:
    """Poll `condition` until it returns something true, and return that; fail naming
    `what` was not reached within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(interval)
