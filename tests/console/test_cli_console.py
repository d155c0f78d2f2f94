"""What `herdless console` and `herdless serve --console-port` say about a console they
cannot start: one `error:` line each, before anything else starts."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herdless.cli.certs import write_certificates
from tests.support.broker import free_port
from tests.support.cli import COMMAND, herdless, refused, sigint_as_in_a_terminal


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


def test_a_keystore_that_will_not_do_is_named(tmp_path: Path) -> None:
    not_pem = tmp_path / "keystore.pem"
    not_pem.write_text("not a key\n")
    for keystore in (not_pem, tmp_path / "missing.pem"):
        result = herdless("console", "--port", "0", "--ssl-keystore", str(keystore))
        refused(result, f"cannot serve the console over TLS with {keystore}")


def test_herdless_console_serves_https(tmp_path: Path, herdless_broker: Any) -> None:
    """`herdless console --ssl-keystore`: the console in a process of its own, over TLS."""
    files = write_certificates(tmp_path / "certs")
    port = free_port()
    command = [*COMMAND, "console", "--port", str(port), "--ssl-keystore", str(files.broker)]
    process = subprocess.Popen(
        [*command, "-b", herdless_broker.bootstrap],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,  # stopped with Ctrl-C below
    )
    try:
        context = ssl.create_default_context(cafile=files.ca)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/brokers", context=context, timeout=5
                ) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    assert f"console at https://127.0.0.1:{port}/" in stderr


def test_serve_console_client_settings_that_will_not_do_are_a_usage_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ("--console-port", str(free_port()), "--console-command-config", "/no/such.properties")
    result = herdless("serve", "--port", str(free_port()), "--data-dir", str(data), *args)
    refused(result, "--console-command-config: cannot read config file", code=2)
    assert not data.exists()
