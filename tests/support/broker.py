"""A real herdless broker process on 127.0.0.1, started and stopped by tests."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loopback_host_with_free(port: int) -> str:
    """A loopback address (127.x.y.z) where `port` is free: for tests of Kafka's
    default port 9092, which a broker on 127.0.0.1 may already hold."""
    for _ in range(50):
        host = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(2, 254)}"
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return host
    raise RuntimeError(f"no loopback address with port {port} free")


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        *extra_args: str,
        host: str = "127.0.0.1",
        port: int | None = None,
        prefix: tuple[str, ...] = (),
    ) -> None:
        # A command the broker runs under, e.g. prlimit for a smaller file limit.
        self.prefix = prefix
        self.data_dir = data_dir
        self.host = host
        self.port = free_port() if port is None else port
        self.extra_args = list(extra_args)
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerProcess:
        command = [
            *self.prefix,
            sys.executable,
            "-m",
            "herdless",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *self.extra_args,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not listen within {STARTUP_TIMEOUT_S}s:\n{self.log()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the graceful path."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: nothing gets to flush or close."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""


@contextlib.contextmanager
def module_broker(
    data_dir: Path, *extra_args: str, host: str = "127.0.0.1", port: int | None = None
) -> Iterator[BrokerProcess]:
    """A broker a test module shares; at the end SIGTERM must stop it with exit code 0."""
    process = BrokerProcess(data_dir, *extra_args, host=host, port=port).start()
    yield process
    if process.alive():
        code = process.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log()}"
