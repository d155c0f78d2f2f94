"""A TCP echo server and a client that says what became of each byte it sent, run as
processes inside a network lab's nodes (tests/support/network.py).

    python tcp_probe.py serve HOST PORT   prints "listening", then echoes every connection
    python tcp_probe.py talk HOST PORT    connects, prints "connected", then per stdin line:
        "ping SECONDS"     send one byte, wait until everything sent has come back
        "connect SECONDS"  open (and close) a new connection to the same address
    and prints one answer per line: "ok", "timeout" or "error <what>". A probe
    distinguishes silence (a timeout) from a reset or refusal (an error).
"""

from __future__ import annotations

import socket
import sys
import threading


def serve(host: str, port: int) -> None:
    listener = socket.create_server((host, port))
    print("listening", flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=echo, args=(connection,), daemon=True).start()


def echo(connection: socket.socket) -> None:
    with connection:
        while data := connection.recv(4096):
            connection.sendall(data)


def talk(host: str, port: int) -> None:
    connection = socket.create_connection((host, port), timeout=10)
    print("connected", flush=True)
    sent = received = 0
    for line in sys.stdin:
        command, seconds = line.split()
        try:
            if command == "ping":
                connection.settimeout(float(seconds))
                connection.sendall(b"x")
                sent += 1
                while received < sent:
                    data = connection.recv(4096)
                    if not data:
                        raise ConnectionError("closed by the peer")
                    received += len(data)
            else:
                socket.create_connection((host, port), timeout=float(seconds)).close()
            print("ok", flush=True)
        except TimeoutError:
            print("timeout", flush=True)
        except OSError as exc:
            print(f"error {exc!r}", flush=True)


if __name__ == "__main__":
    role, host, port = sys.argv[1:]
    {"serve": serve, "talk": talk}[role](host, int(port))
