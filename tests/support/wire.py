"""A raw Kafka protocol connection, for what client libraries hide or retry."""

from __future__ import annotations

import socket
import struct

from kafka.protocol.consumer import OffsetCommitRequest

from tests.support.broker import BrokerProcess


class Wire:
    """A raw protocol connection, for what client libraries hide (sequences, waits).

    call() sends a request and waits for its answer. send() and receive() split the
    two, e.g. to send to a stopped broker and read what it answers once it runs again.
    """

    def __init__(
        self,
        broker: BrokerProcess,
        timeout: float = 30.0,
        *,
        port: int | None = None,
        source_host: str | None = None,
    ) -> None:
        """To `port` (another listener's) when given, from `source_host` when given (a
        loopback address of its own, for what the broker keeps per client address)."""
        self.sock = socket.create_connection(
            (broker.host, broker.port if port is None else port),
            timeout=timeout,
            source_address=None if source_host is None else (source_host, 0),
        )
        self.correlation_id = 0

    def call(self, request: object, response_class: type) -> object:
        self.send(request)
        return self.receive(request, response_class)

    def send(self, request: object) -> None:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="wire-test")
        body = bytes(request.encode(header=True))
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def receive(self, request: object, response_class: type, *, behind: int = 0) -> object:
        """The answer to `request`: the last one sent, or the one sent `behind` requests
        before it (answers come in order)."""
        size = struct.unpack(">i", self._read(4))[0]
        response = response_class.decode(self._read(size), version=request.API_VERSION, header=True)
        assert response.header.correlation_id == self.correlation_id - behind
        return response

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionResetError("broker closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def simple_commit(group: str, offsets: dict[tuple[str, int], int]) -> OffsetCommitRequest:
    """OffsetCommit v8 outside any generation (a consumer that assigns itself partitions)."""
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    topics: dict[str, list[object]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            Partition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
        )
    return OffsetCommitRequest[8](
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[Topic(name=name, partitions=partitions) for name, partitions in topics.items()],
    )
