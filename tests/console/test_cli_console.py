"""What `herdless console` and `herdless serve --console-port` say about a console they
cannot start: one `error:` line each, before anything else starts."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import free_port
from tests.support.cli import herdless, refused


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_console_port_out_of_range_is_a_usage_error() -> None:
    refused(herdless("console", "--port", "70000"), "invalid value for '--port'", code=2)
    refused(herdless("console", "--port", "-1"), "invalid value for '--port'", code=2)


def test_console_port_in_use_is_named(taken_port: int) -> None:
    words = f"cannot listen for the console on 127.0.0.1:{taken_port}: address already in use"
    refused(herdless("console", "--port", str(taken_port), "-b", "127.0.0.1:1"), words)


def test_console_without_a_broker_says_so() -> None:
    refused(herdless("console", "--port", "0", "-b", "127.0.0.1:1"), "no broker answers at")


def test_console_interval_below_the_minimum_is_a_usage_error() -> None:
    refused(herdless("console", "--interval", "0.05"), "invalid value for '--interval'", code=2)


def test_serve_with_its_console_port_in_use_does_not_start(taken_port: int, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = herdless(
        "serve", "--port", str(free_port()), "--data-dir", str(data),
        "--console-port", str(taken_port),
    )  # fmt: skip
    refused(result, f"cannot listen for the console on 127.0.0.1:{taken_port}")
    assert not data.exists(), "the broker started before its console port was checked"


def test_serve_console_port_must_be_its_own(tmp_path: Path) -> None:
    port = str(free_port())
    data = str(tmp_path / "data")
    refused(
        herdless("serve", "--port", port, "--data-dir", data, "--console-port", port),
        f"--console-port {port} is the --port too",
        code=2,
    )
    refused(
        herdless("serve", "--data-dir", data, "--console-port", "65536"),
        "invalid value for '--console-port'",
        code=2,
    )
