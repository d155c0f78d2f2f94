"""The transaction coordinator stays pure, as the runtime that hosts it does: no clock,
thread, loop, socket or file, and nothing from the layers above coordinator/."""

from __future__ import annotations

from pathlib import Path

import herdless.coordinator.transactions
from tests.coordinator.runtime.test_purity import ALLOWED_HERDLESS, FORBIDDEN, imports

PACKAGE = Path(herdless.coordinator.transactions.__file__).parent


def test_the_transaction_coordinator_imports_no_clock_thread_loop_socket_or_file() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 5
    for module in modules:
        for name in imports(module):
            top = name.split(".")[0]
            assert top not in FORBIDDEN, f"{module.name} imports {name}"
            if top == "herdless":
                assert name.startswith(ALLOWED_HERDLESS), f"{module.name} imports {name}"


def test_no_module_of_the_transaction_coordinator_is_large() -> None:
    for module in PACKAGE.glob("*.py"):
        assert len(module.read_text().splitlines()) <= 450, module.name
