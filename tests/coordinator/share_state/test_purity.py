"""The share coordinator stays pure, as the runtime that hosts it does: no clock, thread,
loop, socket or file, and nothing from the layers above coordinator/."""

from __future__ import annotations

from pathlib import Path

import herdless.coordinator.share_state
from tests.coordinator.runtime.test_purity import assert_pure

PACKAGE = Path(herdless.coordinator.share_state.__file__).parent


def test_the_share_coordinator_imports_no_clock_thread_loop_socket_or_file() -> None:
    assert_pure(PACKAGE)
