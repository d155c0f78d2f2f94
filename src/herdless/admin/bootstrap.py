"""Where the brokers are: bootstrap servers as every Kafka tool writes them, and
whether any of them accepts a connection."""

from __future__ import annotations

import socket

DEFAULT_PORT = 9092


def parse_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`host[:port]` entries, comma-separated, as (host, port); the port defaults to 9092,
    as in every Kafka tool. IPv6 hosts go in brackets when a port follows: `[::1]:9093`."""
    addresses = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest.removeprefix(":") if rest.startswith(":") else ""
            if rest and not rest.startswith(":"):
                raise ValueError(f"{entry!r} is not host:port")
        elif entry.count(":") > 1:  # a bare IPv6 address
            host, port = entry, ""
        else:
            host, _, port = entry.partition(":")
        if not host:
            raise ValueError(f"{entry!r} names no host")
        if not port:
            addresses.append((host, DEFAULT_PORT))
            continue
        if not port.isdigit() or not 0 < int(port) <= 65_535:
            raise ValueError(f"{entry!r} has no port between 1 and 65535")
        addresses.append((host, int(port)))
    if not addresses:
        raise ValueError("no broker address given")
    return addresses


def reachable(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """Whether any bootstrap server accepts a connection."""
    for host, port in parse_addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False
