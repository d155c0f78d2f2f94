"""A TCP relay in front of a server, for tests: it forwards every connection until told
to cut them all and to hold the next ones accepted but unanswered, as a server that is
still starting may do."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpRelay:
    """Listens on 127.0.0.1 on a free port and forwards to (host, port)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        host_bound, port_bound = self._listener.getsockname()[:2]
        self.address = f"{host_bound}:{port_bound}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._to_hold = 0
        # How many connections were accepted and left unanswered.
        self.held = 0
        self._closed = False
        threading.Thread(target=self._accept, name="tcp-relay", daemon=True).start()

    def cut(self, hold_next: int = 0) -> None:
        """Close every open connection; the next `hold_next` connections are accepted
        and then neither forwarded nor answered nor closed."""
        with self._lock:
            self._to_hold = hold_next
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._to_hold:
                    self._to_hold -= 1
                    self.held += 1
                    self._open.append(client)
                    continue
                server = socket.create_connection(self.target)
                self._open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
