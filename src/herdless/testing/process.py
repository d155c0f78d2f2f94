"""A `herdless serve` process on 127.0.0.1: started, paused, stopped and killed by tests."""

from __future__ import annotations

import random
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from herdless.cli.child_process import ChildProcess

STARTUP_TIMEOUT_S = 60.0
# How long SIGTERM may take before terminate() falls back to SIGKILL.
STOP_TIMEOUT_S = 15.0


class BrokerStartError(RuntimeError):
    """The broker exited, or did not listen, before it was ready; the message has its log."""


def free_port() -> int:
    """A port nothing listens on now, from below the kernel's ephemeral range: there no
    outgoing connection takes its source port, so a broker restarted on its port (or
    its metrics port) does not find it taken by some client's connection meanwhile, as
    a port the kernel hands out for bind(0) can be."""
    low = _ephemeral_ports()[0]
    candidates = range(max(1024, low - 12_000), low)
    for _ in range(100):
        port = _ports.randrange(candidates.start, candidates.stop)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as sock:  # that range is full: any free port will do
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Chosen apart from the tests' own random draws, and never the same port twice per process.
_ports = random.Random()
_handed_out: set[int] = set()


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


class BrokerProcess(ChildProcess):
    """One broker process whose output goes to a log file beside its data directory."""

    def __init__(
        self,
        data_dir: Path,
        *extra_args: str,
        host: str = "127.0.0.1",
        port: int | None = None,
        prefix: tuple[str, ...] = (),
        listeners: str | None = None,
    ) -> None:
        # A command the broker runs under, e.g. prlimit for a smaller file limit.
        self.prefix = prefix
        # Listeners beside the PLAINTEXT one on host:port (NAME://host:port,...).
        self.listeners = listeners
        self.data_dir = data_dir
        self.host = host
        self.port = free_port() if port is None else port
        self.extra_args = list(extra_args)
        super().__init__(data_dir.parent / f"{data_dir.name}-broker.log")

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def command(self) -> list[str]:
        return [
            *self.prefix,
            sys.executable,
            "-m",
            "herdless",
            "serve",
            *self._address_args(),
            "--data-dir",
            str(self.data_dir),
            *self.extra_args,
        ]

    def _address_args(self) -> list[str]:
        plaintext = f"PLAINTEXT://{self.host}:{self.port}"
        if self.listeners is None:
            return ["--host", self.host, "--port", str(self.port)]
        return ["--set", f"listeners={plaintext},{self.listeners}"]

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> BrokerProcess:
        """Start the broker and return once it accepts connections."""
        self.launch()
        return self.wait_listening(timeout)

    def launch(self) -> None:
        """Start the process without waiting: several brokers start side by side."""
        self.spawn(self.command)

    def wait_listening(self, timeout: float = STARTUP_TIMEOUT_S) -> BrokerProcess:
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerStartError(
                    self._start_failure(f"exited with {self.process.returncode}")
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise BrokerStartError(self._start_failure(f"did not listen within {timeout:g}s"))

    def _start_failure(self, what: str) -> str:
        return (
            f"broker {what}: {shlex.join(self.command)}\n"
            f"--- its log ({self.log_path}) ---\n{self.log_tail()}"
        )

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM, then SIGKILL if the broker has not stopped within `timeout`."""
        if not self.alive():
            return
        try:
            self.stop(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        if hard:
            self.kill()
        elif self.alive():
            self.stop()
        return self.start()
