"""RequestReader: request frames come out whole and in order however the bytes arrive, a
refused size or a client gone mid-frame ends the read, and a client that keeps sending
while its request is handled is paused rather than buffered without bound. On asyncio's
loop and on uvloop, over a real loopback connection."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop

from herdless.broker.network.connection import RequestReader, start_server

LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}
Serve = Callable[[RequestReader, asyncio.StreamWriter], Awaitable[Any]]


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _connected(serve: Serve) -> tuple[socket.socket, asyncio.Future[Any], asyncio.Server]:
    """A server running `serve` for one connection, a client socket to it, and what
    `serve` returned or raised."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Any] = loop.create_future()

    async def accept(reader: RequestReader, writer: asyncio.StreamWriter) -> None:
        try:
            outcome.set_result(await serve(reader, writer))
        except Exception as exc:
            outcome.set_result(exc)
        finally:
            writer.close()

    server = await start_server(accept, "127.0.0.1", 0)
    client = socket.socket()
    client.setblocking(False)
    await loop.sock_connect(client, server.sockets[0].getsockname())
    return client, outcome, server


def ignore_size(size: int) -> None:
    pass


async def read_frames(reader: RequestReader, count: int) -> list[bytes]:
    return [await reader.read_frame(ignore_size) for _ in range(count)]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("piece", [1, 3, 1 << 20])
def test_frames_come_out_whole_and_in_order(loop: str, piece: int) -> None:
    bodies = [b"a" * 10, b"", b"b" * 70_000, b"c"]
    stream = b"".join(frame(b) for b in bodies)

    async def main() -> Any:
        client, outcome, server = await _connected(lambda r, w: read_frames(r, len(bodies)))
        for start in range(0, len(stream), piece):
            await asyncio.get_running_loop().sock_sendall(client, stream[start : start + piece])
        result = await asyncio.wait_for(outcome, 30)
        client.close()
        server.close()
        return result

    assert LOOPS[loop](main()) == bodies


@pytest.mark.parametrize("loop", LOOPS)
def test_each_size_is_told_before_its_frame_is_whole(loop: str) -> None:
    told: list[int] = []

    async def serve(reader: RequestReader, writer: asyncio.StreamWriter) -> bytes:
        return await reader.read_frame(told.append)

    async def main() -> tuple[list[int], Any]:
        client, outcome, server = await _connected(serve)
        loop_ = asyncio.get_running_loop()
        await loop_.sock_sendall(client, frame(b"x" * 100)[:50])
        for _ in range(100):
            if told:
                break
            await asyncio.sleep(0.01)
        seen = list(told)
        await loop_.sock_sendall(client, frame(b"x" * 100)[50:])
        result = await asyncio.wait_for(outcome, 30)
        client.close()
        server.close()
        return seen, result

    seen, result = LOOPS[loop](main())
    assert seen == [100]
    assert result == b"x" * 100


@pytest.mark.parametrize("loop", LOOPS)
def test_a_refused_size_ends_the_read(loop: str) -> None:
    class Refused(Exception):
        pass

    def refuse(size: int) -> None:
        raise Refused(f"{size} bytes")

    async def main() -> Any:
        client, outcome, server = await _connected(lambda r, w: r.read_frame(refuse))
        await asyncio.get_running_loop().sock_sendall(client, struct.pack(">i", 1 << 30))
        result = await asyncio.wait_for(outcome, 30)
        client.close()
        server.close()
        return result

    result = LOOPS[loop](main())
    assert isinstance(result, Refused) and str(result) == f"{1 << 30} bytes"


@pytest.mark.parametrize("loop", LOOPS)
def test_a_client_gone_mid_frame_ends_the_read_and_is_reported(loop: str) -> None:
    hung_up: list[bool] = []

    async def serve(reader: RequestReader, writer: asyncio.StreamWriter) -> Any:
        reader.on_hang_up = lambda: hung_up.append(True)
        return await read_frames(reader, 2)

    async def main() -> Any:
        client, outcome, server = await _connected(serve)
        await asyncio.get_running_loop().sock_sendall(client, frame(b"whole") + frame(b"half")[:5])
        client.shutdown(socket.SHUT_WR)
        result = await asyncio.wait_for(outcome, 30)
        client.close()
        server.close()
        return result

    result = LOOPS[loop](main())
    assert isinstance(result, asyncio.IncompleteReadError)
    assert hung_up == [True]


@pytest.mark.parametrize("loop", LOOPS)
def test_frames_sent_before_the_client_closed_its_end_are_still_read(loop: str) -> None:
    async def main() -> Any:
        gone = asyncio.Event()

        async def serve(reader: RequestReader, writer: asyncio.StreamWriter) -> Any:
            reader.on_hang_up = gone.set
            await gone.wait()  # the client has sent two frames and closed its end
            frames = await read_frames(reader, 2)
            try:
                await reader.read_frame(ignore_size)
            except asyncio.IncompleteReadError:
                return frames
            raise AssertionError("a third frame from nowhere")

        client, outcome, server = await _connected(serve)
        await asyncio.get_running_loop().sock_sendall(client, frame(b"one") + frame(b"two"))
        client.shutdown(socket.SHUT_WR)
        result = await asyncio.wait_for(outcome, 30)
        client.close()
        server.close()
        return result

    assert LOOPS[loop](main()) == [b"one", b"two"]


@pytest.mark.parametrize("loop", LOOPS)
def test_a_client_sending_while_its_request_is_handled_is_paused(loop: str) -> None:
    """Bytes beyond PAUSE_ABOVE wait in the client's socket, not in the broker's memory,
    until the connection reads again; then every frame arrives."""
    bodies = [bytes([i]) * 100_000 for i in range(20)]
    handled = asyncio.Event

    async def main() -> tuple[int, list[bytes]]:
        may_read = handled()
        buffered: list[int] = []

        async def serve(reader: RequestReader, writer: asyncio.StreamWriter) -> list[bytes]:
            frames = [await reader.read_frame(ignore_size)]
            await may_read.wait()  # the first request is being handled meanwhile
            buffered.append(len(reader._buffer))
            frames += await read_frames(reader, len(bodies) - 1)
            return frames

        client, outcome, server = await _connected(serve)
        sent = asyncio.ensure_future(
            asyncio.get_running_loop().sock_sendall(client, b"".join(frame(b) for b in bodies))
        )
        await asyncio.sleep(0.5)
        may_read.set()
        result = await asyncio.wait_for(outcome, 30)
        await sent
        client.close()
        server.close()
        return buffered[0], result

    buffered, result = LOOPS[loop](main())
    assert result == bodies
    # At most one transport read (256 KiB on uvloop, 64 KiB on asyncio) past the mark, of
    # the 2 MB sent.
    assert buffered <= RequestReader.PAUSE_ABOVE + (1 << 18) <= 1 << 19
