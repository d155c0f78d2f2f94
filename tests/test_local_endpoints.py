"""The console and the metrics endpoint stay on this machine unless told otherwise,
whatever address the broker's listeners take: they name every topic and group."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.support.broker import BrokerProcess, free_port

ANOTHER_ADDRESS = "127.0.0.2"  # this machine too, but not the address 127.0.0.1


def answers(host: str, port: int, timeout: float = 0.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)


def test_console_and_metrics_listen_on_127_0_0_1_beside_a_broker_on_every_address(
    tmp_path: Path,
) -> None:
    metrics, console = free_port(), free_port()
    args = ("--set", f"metrics.port={metrics}", "--console-port", str(console))
    broker = BrokerProcess(tmp_path / "data", *args, host="0.0.0.0").start()
    try:
        assert answers(ANOTHER_ADDRESS, broker.port)  # the broker: every address
        for port in (metrics, console):
            assert answers("127.0.0.1", port, timeout=30)
            assert not answers(ANOTHER_ADDRESS, port)
        assert f"metrics at http://127.0.0.1:{metrics}/metrics" in broker.log()
    finally:
        assert broker.stop() == 0


def test_told_otherwise_they_listen_there(tmp_path: Path) -> None:
    metrics, console = free_port(), free_port()
    args = (
        *("--set", f"metrics.port={metrics}", "--set", "metrics.host=0.0.0.0"),
        *("--console-port", str(console), "--console-host", "0.0.0.0"),
    )
    broker = BrokerProcess(tmp_path / "data", *args).start()
    try:
        for port in (metrics, console):
            assert answers(ANOTHER_ADDRESS, port, timeout=30)
    finally:
        assert broker.stop() == 0
