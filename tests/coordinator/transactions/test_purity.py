"""The transaction coordinator stays pure, as the runtime that hosts it does: no clock,
thread, loop, socket or file, and nothing from the layers above coordinator/."""

from __future__ import annotations

from pathlib import Path

import herdless.coordinator.transactions
from tests.coordinator.runtime.test_purity import assert_pure

PACKAGE = Path(herdless.coordinator.transactions.__file__).parent


def test_the_transaction_coordinator_imports_no_clock_thread_loop_socket_or_file() -> None:
    assert_pure(PACKAGE)


def test_no_module_of_the_transaction_coordinator_is_large() -> None:
    for module in PACKAGE.glob("*.py"):
        assert len(module.read_text().splitlines()) <= 450, module.name
