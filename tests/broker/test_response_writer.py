"""ResponseWriter: a response's bytes and file regions reach the client whole and in order,
on asyncio's loop and on uvloop, however slowly the client reads."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
import uvloop

from herdless.broker.network.response_writer import ResponseWriter, TruncatedRegion
from herdless.protocol.regions import Chunk, FileRegion

LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}
FILE_SIZE = 3 << 20


@pytest.fixture(scope="module")
def segment() -> Iterator[int]:
    with tempfile.TemporaryFile() as file:
        file.write(os.urandom(FILE_SIZE))
        file.flush()
        yield file.fileno()


def region(fd: int, position: int, length: int) -> FileRegion:
    return FileRegion(os.dup(fd), position, length)


def expected(chunks: list[Chunk], fd: int) -> bytes:
    return b"".join(
        os.pread(fd, c.length, c.position) if isinstance(c, FileRegion) else bytes(c)
        for c in chunks
    )


async def _exchange(
    chunks: list[Chunk], read_slowly: bool, send: Callable[[ResponseWriter, list[Chunk]], Any]
) -> tuple[bytes, BaseException | None]:
    """Send `chunks` through a ResponseWriter on a loopback connection; what the client read
    and what the send raised."""
    outcome: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Small socket buffers fill at once: the sender must wait for the client to read.
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        responses = ResponseWriter(writer)
        try:
            await send(responses, chunks)
            outcome.set_result(None)
        except Exception as exc:
            outcome.set_result(exc)
        finally:
            responses.close()
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
    received = bytearray()
    while True:
        if read_slowly:
            await asyncio.sleep(0.001)
        data = await asyncio.get_running_loop().sock_recv(client, 1 << 16)
        if not data:
            break
        received += data
    client.close()
    server.close()
    return bytes(received), await outcome


def run(loop: str, coroutine: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return LOOPS[loop](coroutine())


async def send_chunks(responses: ResponseWriter, chunks: list[Chunk]) -> None:
    await responses.send(chunks)


@pytest.mark.parametrize("loop", LOOPS)
def test_bytes_and_regions_arrive_in_order(loop: str, segment: int) -> None:
    chunks: list[Chunk] = [
        bytearray(b"head"),
        region(segment, 10, 400_000),
        b"between",
        region(segment, 5, 100_000),
        bytearray(b"tail"),
    ]
    want = expected(chunks, segment)
    received, error = run(loop, lambda: _exchange(chunks, True, send_chunks))
    assert error is None
    assert received == want
    assert all(c._fd is None for c in chunks if isinstance(c, FileRegion))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_file_shorter_than_its_region_ends_the_send(loop: str, segment: int) -> None:
    short: list[Chunk] = [b"head", region(segment, FILE_SIZE - 100, 1000), b"tail"]
    received, error = run(loop, lambda: _exchange(short, False, send_chunks))
    assert isinstance(error, TruncatedRegion)
    assert received.startswith(b"head") and len(received) == 104


def test_without_a_socket_to_send_from_regions_are_copied(segment: int) -> None:
    chunks: list[Chunk] = [b"head", region(segment, 0, 300_000), b"tail"]
    want = expected(chunks, segment)

    async def send_as_over_tls(responses: ResponseWriter, chunks: list[Chunk]) -> None:
        responses._socket_fd = None  # what a TLS transport gives
        await responses.send(chunks)

    received, error = run("uvloop", lambda: _exchange(chunks, False, send_as_over_tls))
    assert error is None and received == want


def _now(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a send that must not wait (as a request answered in data_received does)."""
    with pytest.raises(StopIteration):
        coroutine.send(None)


@pytest.mark.parametrize("loop", LOOPS)
def test_answers_given_in_one_pass_leave_together_at_its_end_in_order(loop: str) -> None:
    async def scenario() -> tuple[bool, bytes, bytes]:
        accepted: asyncio.Queue[ResponseWriter] = asyncio.Queue()
        done = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            responses = ResponseWriter(writer)
            await accepted.put(responses)
            await done.wait()
            responses.close()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        first, second = [await accepted.get() for _ in clients]
        # Which accepted writer is which client: told by their peers' ports.
        if first._writer.get_extra_info("peername")[1] != clients[0].getsockname()[1]:
            first, second = second, first
        _now(first.send([b"a1"]))
        _now(second.send([b"b1"]))
        _now(first.send([bytearray(b"a2")]))
        for client in clients:
            client.setblocking(False)
        try:
            clients[0].recv(100)
            written_at_once = True
        except BlockingIOError:
            written_at_once = False
        await asyncio.sleep(0)  # the loop's next pass
        await asyncio.sleep(0.05)
        received = [client.recv(100) for client in clients]
        done.set()
        for client in clients:
            client.close()
        server.close()
        return written_at_once, received[0], received[1]

    written_at_once, first, second = run(loop, scenario)
    assert not written_at_once
    assert first == b"a1a2"
    assert second == b"b1"


@pytest.mark.parametrize("loop", LOOPS)
def test_an_answer_given_just_before_the_connection_closes_is_written(loop: str) -> None:
    received, error = run(loop, lambda: _exchange([b"last words"], False, send_chunks))
    assert error is None
    assert received == b"last words"


@pytest.mark.parametrize("loop", LOOPS)
def test_a_file_answer_waits_for_the_answers_given_before_it(loop: str, segment: int) -> None:
    chunks: list[Chunk] = [b"head", region(segment, 0, 200_000), b"tail"]

    async def small_then_file(responses: ResponseWriter, chunks: list[Chunk]) -> None:
        await responses.send([b"earlier"])
        await responses.send(chunks)

    want = b"earlier" + expected(chunks, segment)
    received, error = run(loop, lambda: _exchange(chunks, True, small_then_file))
    assert error is None
    assert received == want
