"""Why a TLS connection's reading stays on the event loop: receiving over TLS on a thread
of its own, beside a main thread that is idle or busy with Python work.

A client process sends ``--mib`` MiB over TLS 1.3 (the broker's certificates, `herdless
certs`); this process receives them in one of these ways:

- on the main thread through a MemoryBIO, as the event loop's TLS transport does: one
  socket read of up to 256 KiB, then `SSLObject.read` once per TLS record;
- on a second thread with a non-blocking `ssl.SSLSocket` and a selector (Kafka's network
  threads), the main thread idle, then busy running Python (a stand-in for an event loop
  handling requests);
- the same with a blocking `SSLSocket` (one thread per connection).

Each `SSL_read` returns at most one TLS record (16 KiB) and gives up the GIL around it, so
a reader on a thread of its own takes the GIL back once per record: while the main thread
holds it, each time costs up to the switch interval (5 ms), and the reader stalls.

    python bench/tls_reader_thread.py
    python bench/tls_reader_thread.py --mib 256
"""

from __future__ import annotations

import argparse
import resource
import selectors
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from herdless.broker.auth.tls import server_context
from herdless.cli.certs import write_certificates
from herdless.security.settings import SecuritySettings

CHUNK = 256 * 1024
console = Console(width=None if sys.stdout.isatty() else 120)

SENDER = """
import socket, ssl, sys
port, ca, mib = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
context = ssl.create_default_context(cafile=ca)
context.check_hostname = False
with context.wrap_socket(socket.create_connection(("127.0.0.1", port))) as tls:
    data = b"x" * (1 << 20)
    for _ in range(mib):
        tls.sendall(data)
    tls.recv(1)
"""


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def on_loop_thread(connection: socket.socket, context: ssl.SSLContext, total: int) -> int:
    """Receive as asyncio's and uvloop's TLS transports do; the count of SSL reads."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_side=True)
    raw, plain = bytearray(CHUNK), bytearray(CHUNK)
    received = reads = 0
    while received < total:
        count = connection.recv_into(raw)
        incoming.write(memoryview(raw)[:count])
        try:
            if tls.version() is None:
                tls.do_handshake()
            while (count := tls.read(CHUNK, plain)) > 0:
                reads += 1
                received += count
        except ssl.SSLWantReadError:
            pass
        if outgoing.pending:
            connection.sendall(outgoing.read())
    tls.write(b"!")
    connection.sendall(outgoing.read())
    return reads


def on_network_thread(
    connection: socket.socket, context: ssl.SSLContext, total: int, blocking: bool
) -> int:
    """Receive on this thread through an SSLSocket; the count of SSL reads."""
    tls = context.wrap_socket(connection, server_side=True)
    selector = selectors.DefaultSelector()
    if not blocking:
        tls.setblocking(False)
        selector.register(tls, selectors.EVENT_READ)
    plain = memoryview(bytearray(CHUNK))
    received = reads = 0
    while received < total:
        if not blocking:
            selector.select()
        try:
            while received < total:
                count = tls.recv_into(plain)
                reads += 1
                received += count
                if blocking:
                    break
        except ssl.SSLWantReadError:
            pass
    tls.setblocking(True)
    tls.sendall(b"!")
    return reads


def busy_until(done: threading.Event) -> None:
    """Python work that keeps the GIL between switches, as an event loop under load does."""
    while not done.is_set():
        sum(range(2000))


def run(
    mib: int, certificates: Path, ca: Path, receive: Callable[..., int], *args: object
) -> tuple[float, float, int]:
    """(MiB/s, this process's CPU seconds per GiB, SSL reads) of one transfer."""
    settings = SecuritySettings(
        {"ssl.keystore.location": str(certificates), "ssl.truststore.location": str(ca)}
    )
    context = server_context(settings, "SSL")
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        sender = subprocess.Popen([sys.executable, "-c", SENDER, str(port), str(ca), str(mib)])
        connection, _ = listening.accept()
        started, cpu = time.perf_counter(), cpu_seconds()
        reads = receive(connection, context, mib << 20, *args)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds() - cpu
        connection.close()
        sender.wait()
    return mib / elapsed, cpu / (mib / 1024), reads


def threaded(blocking: bool, busy: bool) -> Callable[..., int]:
    def receive(connection: socket.socket, context: ssl.SSLContext, total: int) -> int:
        result: list[int] = []
        done = threading.Event()

        def reader() -> None:
            try:
                result.append(on_network_thread(connection, context, total, blocking))
            finally:
                done.set()

        thread = threading.Thread(target=reader)
        thread.start()
        if busy:
            busy_until(done)
        thread.join()
        return result[0]

    return receive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=128, help="MiB sent in each way")
    args = parser.parse_args()
    ways = [
        ("event loop's way: MemoryBIO on the main thread", on_loop_thread),
        ("network thread, selector; main thread idle", threaded(False, False)),
        ("network thread, blocking; main thread idle", threaded(True, False)),
        ("network thread, selector; main thread busy", threaded(False, True)),
        ("network thread, blocking; main thread busy", threaded(True, True)),
    ]
    table = Table(title=f"receiving {args.mib} MiB over TLS 1.3")
    for column in ("receiver", "MiB/s", "process CPU s/GiB", "SSL reads per MiB"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory(prefix="bench-tls-thread-") as temporary:
        certificates = write_certificates(Path(temporary), ["127.0.0.1"])
        for name, receive in ways:
            rate, cpu, reads = run(args.mib, certificates.broker, certificates.ca, receive)
            busy = "busy" in name  # the busy main thread's own CPU is in the figure
            table.add_row(
                name, f"{rate:.0f}", "-" if busy else f"{cpu:.2f}", f"{reads / args.mib:.0f}"
            )
    table.caption = f"switch interval {sys.getswitchinterval() * 1000:g} ms"
    console.print(table)


if __name__ == "__main__":
    main()
