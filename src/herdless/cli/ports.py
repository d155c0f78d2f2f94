"""Is an address free to listen on, and if not, who holds it.

`serve` and `cluster up` ask before they start anything, so that a port in use is
one line naming the address and its holder, before a data directory is written or
a "listening" line is printed. The real bind still decides: this only moves the
common mistake (a second broker on the same port) to the front.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
from pathlib import Path

# /proc/net/tcp's state column: 0A is LISTEN.
_LISTEN = "0A"


def bind_error(host: str, port: int) -> str | None:
    """`address already in use` when another socket listens on (host, port), else None.

    Only that: any other reason a bind could fail (an address not on this machine, a
    name that does not resolve) is left for the real bind to report in its own words.
    """
    if port == 0:
        return None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError:
        return None
    with socket.socket(family, kind, proto) as probe:
        # As asyncio's servers bind: a port in TIME_WAIT is free to them.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "address already in use"
    return None


def in_use(host: str, port: int) -> str | None:
    """`host:port: address already in use (held by pid N: COMMAND)` when another
    socket listens there, None otherwise."""
    reason = bind_error(host, port)
    if reason is None:
        return None
    shown = f"[{host}]:{port}" if ":" in host else f"{host or '0.0.0.0'}:{port}"
    holder = listener_of(host, port)
    return f"{shown}: {reason}" + (f" (held by {holder})" if holder else "")


def listener_of(host: str, port: int) -> str | None:
    """`pid N: command line` of the process listening on (host, port) (or on every
    address at that port), when this machine's /proc says: Linux, and a process this
    user may look at."""
    inodes = _listening_inodes(_addresses(host), port)
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return f"pid {entry.name}: {_command_line(entry)}"
        except OSError:  # gone, or not ours to look at
            continue
    return None


def _addresses(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address] | None:
    """The addresses host names; None: any (no host, or one that does not resolve)."""
    if not host:
        return None
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    return {ipaddress.ip_address(info[4][0]) for info in found}


def _listening_inodes(
    addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address] | None, port: int
) -> set[str]:
    """The socket inodes listening on the port at one of the addresses, or at every
    address (0.0.0.0, ::), which holds them all."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            hex_address, hex_port = local.rsplit(":", 1)
            if state != _LISTEN or int(hex_port, 16) != port:
                continue
            address = proc_net_address(hex_address)
            if addresses is None or address.is_unspecified or address in addresses:
                inodes.add(inode)
    return inodes


def proc_net_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp's address: 32-bit words of the address in this machine's order."""
    raw = bytes.fromhex(text)
    words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    packed = b"".join(word[::-1] if sys.byteorder == "little" else word for word in words)
    address = ipaddress.ip_address(packed)
    # A Java server listens on IPv6 sockets: 127.0.0.1 is ::ffff:127.0.0.1 there.
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def _command_line(process: Path) -> str:
    """The command line, short: the program's name, without a JVM's tuning flags and class
    path, so that what it runs (a main class, `-m herdless serve`) shows."""
    try:
        words = [
            w.decode(errors="replace") for w in (process / "cmdline").read_bytes().split(b"\0")
        ]
    except OSError:
        return "?"
    words = [" ".join(w.split()) for w in words if w]
    if not words:
        return "?"
    shown = [Path(words[0]).name]
    skip_next = False
    for word in words[1:]:
        if skip_next:
            skip_next = False
        elif word in ("-cp", "-classpath", "--class-path"):
            skip_next = True
        elif not word.startswith(("-X", "-D")):
            shown.append(word)
    text = " ".join(shown)
    return text if len(text) <= 160 else text[:157] + "..."
