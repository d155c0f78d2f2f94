from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process shared by a test module."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data").start()
    yield process
    if process.alive():
        code = process.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log()}"
