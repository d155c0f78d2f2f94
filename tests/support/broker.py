"""A real herdless broker process on 127.0.0.1, started and stopped by tests."""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterator
from pathlib import Path

# The plugin's broker process is the suite's too.
from herdless.testing.process import BrokerProcess, free_port

__all__ = ["BrokerProcess", "free_port", "loopback_host_with_free", "module_broker"]


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


@contextlib.contextmanager
def module_broker(
    data_dir: Path,
    *extra_args: str,
    host: str = "127.0.0.1",
    port: int | None = None,
    listeners: str | None = None,
    prefix: tuple[str, ...] = (),
) -> Iterator[BrokerProcess]:
    """A broker a test module shares; at the end SIGTERM must stop it with exit code 0.
    `prefix` is a command it runs under (e.g. `env NAME=value`)."""
    process = BrokerProcess(
        data_dir, *extra_args, host=host, port=port, listeners=listeners, prefix=prefix
    )
    process.start()
    yield process
    if process.alive():
        code = process.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{process.log_tail()}"
