"""A request handled as its frame arrives and that then waits is carried on by the
connection's serving task: what cancels that task in between (the request's own
timeout, entered before it first waited) is the request's, and the request is answered.
The real Connection over loopback, on asyncio's loop and on uvloop, with ApiVersions'
handler standing in for one that waits."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
from types import SimpleNamespace
from typing import Any

import pytest
import uvloop

from herdless.broker.handlers import apis
from herdless.broker.network.connection import Connection, RequestReader, start_server
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import REQUESTS

LOOPS = {"asyncio": asyncio.run, "uvloop": uvloop.run}


class _Metrics:
    def observe_request(self, api: str, seconds: float) -> None:
        pass


def _request(correlation_id: int) -> bytes:
    request = REQUESTS[ApiKey.API_VERSIONS][3](
        client_software_name="t", client_software_version="1"
    )
    request.with_header(correlation_id=correlation_id, client_id="handoff")
    body = bytes(request.encode(header=True))
    return struct.pack(">i", len(body)) + body


async def _exchange() -> list[int]:
    """Two ApiVersions requests, one after the other, to a Connection; the correlation
    ids answered, until the connection closes."""
    config = SimpleNamespace(
        max_request_bytes=1 << 20,
        connections_max_idle_ms=60_000,
        request_read_timeout_ms=30_000,
        group_share_enable=True,
    )
    context = SimpleNamespace(config=config, stopping=False, quotas=None)

    async def accept(reader: RequestReader, writer: asyncio.StreamWriter) -> None:
        await Connection(context, _Metrics(), reader, writer).serve()  # type: ignore[arg-type]

    loop = asyncio.get_running_loop()
    server = await start_server(accept, "127.0.0.1", 0)
    client = socket.socket()
    client.setblocking(False)
    await loop.sock_connect(client, server.sockets[0].getsockname())
    answered = []
    try:
        for correlation_id in (1, 2):
            await loop.sock_sendall(client, _request(correlation_id))
            head = await asyncio.wait_for(loop.sock_recv(client, 8), 10)
            if not head:
                break
            (size, answered_id) = struct.unpack(">ii", head)
            remaining = size - 4
            while remaining:
                remaining -= len(await asyncio.wait_for(loop.sock_recv(client, remaining), 10))
            answered.append(answered_id)
    finally:
        client.close()
        server.close()
    return answered


@pytest.fixture
def waiting_api_versions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ApiVersions' handler replaced by one that first enters asyncio.timeout(0), then
    waits: the timeout's cancellation is queued before the serving task can carry it on."""
    seen: list[str] = []
    real = apis.APIS[ApiKey.API_VERSIONS].handler

    async def handler(context: Any, request: Any) -> Any:
        try:
            async with asyncio.timeout(0):
                await asyncio.sleep(30)
        except TimeoutError:
            seen.append("timed out")
        return await real(context, request)

    monkeypatch.setitem(
        apis.APIS,
        ApiKey.API_VERSIONS,
        dataclasses.replace(apis.APIS[ApiKey.API_VERSIONS], handler=handler),
    )
    return seen


@pytest.mark.parametrize("loop", LOOPS)
def test_a_request_timing_out_before_it_is_carried_on_is_answered(
    loop: str, waiting_api_versions: list[str]
) -> None:
    assert LOOPS[loop](_exchange()) == [1, 2]
    assert waiting_api_versions == ["timed out", "timed out"]
