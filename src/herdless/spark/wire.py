"""A blocking Kafka connection for executors: Fetch answers with their record batches as sent.

No client library hands out the record batches a broker sends, and decoding them
in bulk (decode.py) needs exactly those. So executors speak the Kafka protocol
themselves, with the message classes protocol.codec uses (kafka-python's,
generated from Kafka's schemas): ApiVersions to agree on versions, Metadata to
find a partition's leader, Fetch. Plaintext only; a connection that needs TLS
or SASL is read through librdkafka (see fetch.py).
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import FRAME_SIZE, REQUESTS, RESPONSES
from herdless.protocol.errors import ErrorCode
from herdless.protocol.schema_codec import read_uvarint
from herdless.spark.api_versions import host_port
from herdless.spark.decode import AbortedTransaction

# Fetch v4 brought isolation levels and aborted transactions; v13 names topics by id.
_FETCH_VERSIONS = (4, 12)
_METADATA_VERSIONS = (1, 12)
_CORRELATION_ID = struct.Struct(">i")

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class WireError(Exception):
    """A broker could not be reached, or answered with something unreadable."""


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition's part of a Fetch answer."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    aborted: list[AbortedTransaction] | None  # None: the broker sent no list
    records: bytes


class BrokerConnection:
    """One socket to one broker. Requests may be sent ahead; their answers come in order."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float,
        receive_buffer_bytes: int | None = None,
    ) -> None:
        self.address = f"{host}:{port}"
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._correlation_ids = itertools.count(1)
        self._in_flight: deque[tuple[int, int, int]] = deque()  # (api key, version, id)
        try:
            self._socket = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise WireError(f"{self.address}: {exc}") from None
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if receive_buffer_bytes is not None and receive_buffer_bytes > 0:
            # Java's receive.buffer.bytes: -1 (the system's default) leaves it alone.
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        self._versions: dict[int, tuple[int, int]] = {}
        answer = self.request(ApiKey.API_VERSIONS, 0, REQUESTS[ApiKey.API_VERSIONS]())
        if answer.error_code != ErrorCode.NONE:
            raise WireError(f"{self.address}: ApiVersions failed with error {answer.error_code}")
        self._versions = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}

    def version(self, api_key: int, wanted: tuple[int, int]) -> int:
        """The highest version of `api_key` in `wanted` that the broker serves."""
        low, high = self._versions.get(api_key, (0, -1))
        chosen = min(high, wanted[1])
        if chosen < max(low, wanted[0]):
            raise WireError(
                f"{self.address} serves API {api_key} versions {low}-{high}; "
                f"this reader needs one of {wanted[0]}-{wanted[1]}"
            )
        return chosen

    def request(self, api_key: int, version: int, body: Any, timeout_s: float = 0) -> Any:
        """Send one request and return the decoded response body."""
        self.send(api_key, version, body)
        return self.receive(timeout_s)

    def send(self, api_key: int, version: int, body: Any) -> None:
        """Send a request; its answer comes from receive(), after those of earlier requests.

        Kafka answers a connection's requests in order, so a reader can ask for
        the next batches before decoding the last ones: the broker reads while
        the reader decodes.
        """
        body.API_VERSION = version
        correlation_id = next(self._correlation_ids)
        body.with_header(correlation_id=correlation_id, client_id=self._client_id)
        try:
            self._socket.sendall(bytes(body.encode(header=True, framed=True)))
        except OSError as exc:
            self.close()
            raise WireError(f"{self.address}: {exc}") from None
        self._in_flight.append((api_key, version, correlation_id))

    def receive(self, timeout_s: float = 0) -> Any:
        """The answer to the earliest request not yet answered, decoded."""
        api_key, version, correlation_id = self._in_flight.popleft()
        try:
            self._socket.settimeout(self._timeout_s + timeout_s)
            (size,) = FRAME_SIZE.unpack(self._receive(FRAME_SIZE.size))
            frame = self._receive(size)
        except OSError as exc:
            self.close()
            raise WireError(f"{self.address}: {exc}") from None
        (answered,) = _CORRELATION_ID.unpack_from(frame, 0)
        if answered != correlation_id:
            self.close()
            raise WireError(f"{self.address}: response {answered} does not answer {correlation_id}")
        cls = RESPONSES[api_key]
        # ApiVersions answers with the old header whatever its version (KIP-511).
        flexible = api_key != ApiKey.API_VERSIONS and cls.flexible_version_q(version)
        try:
            # The body is decoded from a view: a Fetch answer's records are copied once.
            return cls.decode(memoryview(frame)[_header_size(frame, flexible) :], version=version)
        except Exception as exc:  # the codec raises assorted errors on bad input
            self.close()
            raise WireError(f"{self.address}: unreadable answer to API {api_key}: {exc}") from None

    def _receive(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = self._socket.recv_into(view[got:])
            if n == 0:
                raise ConnectionResetError("connection closed by the broker")
            got += n
        return buffer

    def close(self) -> None:
        self._socket.close()


def _header_size(frame: bytearray, flexible: bool) -> int:
    """Bytes of the response header: a correlation id, then tagged fields if flexible."""
    if not flexible:
        return _CORRELATION_ID.size
    pos = _CORRELATION_ID.size
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _, pos = read_uvarint(frame, pos)  # tag
        size, pos = read_uvarint(frame, pos)
        pos += size
    return pos


class PartitionFetcher:
    """Fetches one partition from its leader, found through any of the bootstrap servers."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        client_id: str,
        timeout_s: float,
        isolation_level: int,
        receive_buffer_bytes: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self._bootstrap = [host_port(a) for a in bootstrap.split(",") if a.strip()]
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._isolation_level = isolation_level
        self._receive_buffer_bytes = receive_buffer_bytes
        self._leader: BrokerConnection | None = None
        self._max_wait_s: deque[float] = deque()  # of each fetch sent and not yet received

    def fetch(self, offset: int, max_wait_ms: int, max_bytes: int) -> FetchedPartition:
        self.send_fetch(offset, max_wait_ms, max_bytes)
        return self.receive_fetch()

    def send_fetch(self, offset: int, max_wait_ms: int, max_bytes: int) -> None:
        """Ask for records from `offset`; receive_fetch() returns the answers in order."""
        leader = self._leader or self._find_leader()
        fetch = REQUESTS[ApiKey.FETCH]
        body = fetch(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=self._isolation_level,
            session_id=0,
            session_epoch=-1,  # a full fetch that opens no fetch session
            topics=[
                fetch.FetchTopic(
                    topic=self.topic,
                    partitions=[
                        fetch.FetchTopic.FetchPartition(
                            partition=self.partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=max_bytes,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        leader.send(ApiKey.FETCH, leader.version(ApiKey.FETCH, _FETCH_VERSIONS), body)
        self._max_wait_s.append(max_wait_ms / 1000)

    def receive_fetch(self) -> FetchedPartition:
        leader = self._leader
        assert leader is not None and self._max_wait_s, "receive_fetch without send_fetch"
        answer = leader.receive(self._max_wait_s.popleft())
        if answer.error_code:
            return FetchedPartition(answer.error_code, -1, -1, None, b"")
        for topic in answer.responses:
            for data in topic.partitions:
                if topic.topic == self.topic and data.partition_index == self.partition:
                    aborted = data.aborted_transactions
                    return FetchedPartition(
                        data.error_code,
                        data.high_watermark,
                        data.last_stable_offset,
                        None
                        if aborted is None
                        else [AbortedTransaction(a.producer_id, a.first_offset) for a in aborted],
                        data.records or b"",
                    )
        raise WireError(f"{leader.address}: no {self.topic}-{self.partition} in the Fetch answer")

    def reset(self) -> None:
        """Forget the leader and any unanswered fetch; the next fetch finds the leader anew."""
        if self._leader is not None:
            self._leader.close()
            self._leader = None
        self._max_wait_s.clear()

    close = reset

    def _find_leader(self) -> BrokerConnection:
        failures = []
        for host, port in self._bootstrap:
            try:
                connection = self._connect(host, port)
            except WireError as exc:
                failures.append(str(exc))
                continue
            try:
                leader = self._leader_address(connection)
            except WireError as exc:
                connection.close()
                failures.append(str(exc))
                continue
            if leader == (host, port):
                self._leader = connection
            else:
                connection.close()
                self._leader = self._connect(*leader)
            return self._leader
        raise WireError("; ".join(failures) or "no bootstrap server given")

    def _connect(self, host: str, port: int) -> BrokerConnection:
        return BrokerConnection(
            host, port, self._client_id, self._timeout_s, self._receive_buffer_bytes
        )

    def _leader_address(self, connection: BrokerConnection) -> tuple[str, int]:
        metadata = REQUESTS[ApiKey.METADATA]
        body = metadata(
            topics=[metadata.MetadataRequestTopic(name=self.topic)],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        answer = connection.request(
            ApiKey.METADATA, connection.version(ApiKey.METADATA, _METADATA_VERSIONS), body
        )
        brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        for topic in answer.topics:
            if topic.name != self.topic:
                continue
            if topic.error_code:
                raise WireError(f"{connection.address}: {self.topic}: error {topic.error_code}")
            for partition in topic.partitions:
                if partition.partition_index == self.partition and partition.leader_id in brokers:
                    return brokers[partition.leader_id]
        raise WireError(f"{connection.address}: no leader known for {self.topic}-{self.partition}")
