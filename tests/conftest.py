from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import herdless
from tests.support.broker import BrokerProcess, module_broker
from tests.support.bytecode import share_compiled_sources


def pytest_configure(config: pytest.Config) -> None:
    share_compiled_sources([Path(herdless.__file__).parent, Path(__file__).parent])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker process shared by a test module."""
    with module_broker(tmp_path_factory.mktemp("broker") / "data") as process:
        yield process


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker this test may stop, kill and restart; groups form without delay."""
    process = BrokerProcess(tmp_path / "data", "--set", "group.initial.rebalance.delay.ms=0")
    process.start()
    yield process
    process.kill()
