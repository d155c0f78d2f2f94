"""The broker's CPU per Fetch answered, by the size of the records it sends.

herdless only. For each size, a fresh broker gets 200 one-record batches of that many
bytes (librdkafka, linger.ms=0), then a raw-socket client sends --fetches Fetch v12
requests one after another, each for one batch (partition max bytes 1), reading each
answer whole: the broker's CPU seconds (user and system, from /proc) over those fetches,
per fetch. It is what decides fetch.ZERO_COPY_MIN_BYTES, the size from which records
are sent from the segment file rather than copied: run it against two trees that
differ only in that constant (--baseline), rounds alternating.

--floor measures what moving the bytes costs any sender on this machine, without a
broker: a Python thread sends 1 MiB at a time from a page-cached file over loopback,
with sendfile() and with pread() and send(), and reports its CPU per GiB.

    python bench/fetch_cost.py --sizes 1000 16000 65536 262144 1048576
    python bench/fetch_cost.py --baseline /tmp/copy-always   # a tree with the constant raised
    python bench/fetch_cost.py --floor
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import struct
import tempfile
import threading
from pathlib import Path

from confluent_kafka import Producer
from kafka.protocol.consumer import FetchRequest

from peers import BASELINE, baseline_peer, broker_cpu_seconds, create_topic, herdless

BATCHES = 200
TOPIC = "fetch-cost"
MIB = 1 << 20


def _fetch(offset: int) -> bytes:
    Topic = FetchRequest.FetchTopic
    request = FetchRequest[12](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=64 * MIB,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Topic(
                topic=TOPIC,
                partitions=[
                    Topic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    request.with_header(correlation_id=1, client_id="fetch-cost")
    body = bytes(request.encode(header=True))
    return struct.pack(">i", len(body)) + body


def _receive(sock: socket.socket, buffer: memoryview) -> int:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    left = size
    while left:
        got = sock.recv_into(buffer[: min(left, len(buffer))])
        if not got:
            raise ConnectionError("the broker closed the connection")
        left -= got
    return size


def measure(tree: str, args: argparse.Namespace, size: int) -> tuple[float, int]:
    """(broker CPU microseconds per fetch, bytes per answer) for batches of `size`."""
    peer = herdless if tree == "herdless" else baseline_peer(args.baseline)
    with (
        tempfile.TemporaryDirectory(prefix="bench-fetch-cost-") as tmp,
        peer(Path(tmp)) as bootstrap,
    ):
        create_topic(bootstrap, TOPIC, 1)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
        value = os.urandom(size)
        for _ in range(BATCHES):
            producer.produce(TOPIC, value)
            producer.flush(30)
        del producer  # its threads would go on reconnecting to the stopped broker
        host, port = bootstrap.rsplit(":", 1)
        frames = [_fetch(offset) for offset in range(BATCHES)]
        buffer = memoryview(bytearray(4 * MIB))
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(frames[0])  # the first answer of a version compiles its codec
            _receive(sock, buffer)
            before = broker_cpu_seconds()
            answered = 0
            for n in range(args.fetches):
                sock.sendall(frames[n % BATCHES])
                answered += _receive(sock, buffer)
            spent = broker_cpu_seconds() - before
    return spent / args.fetches * 1e6, answered // args.fetches


def floor(mebibytes: int = 2000) -> None:
    """CPU per GiB of a bare sender over loopback, sendfile() beside pread() + send()."""
    with tempfile.TemporaryFile() as file:
        file.write(os.urandom(8 * MIB))
        file.flush()
        server = socket.create_server(("127.0.0.1", 0))
        port = server.getsockname()[1]

        def drain() -> None:
            with socket.create_connection(("127.0.0.1", port)) as client:
                buffer = bytearray(4 * MIB)
                while client.recv_into(buffer):
                    pass

        for mode in ("sendfile", "pread + send") * 2:
            reader = threading.Thread(target=drain)
            reader.start()
            sender, _ = server.accept()
            start = resource.getrusage(resource.RUSAGE_THREAD)
            for i in range(mebibytes):
                position = (i % 8) * MIB
                if mode == "sendfile":
                    left = MIB
                    while left:
                        sent = os.sendfile(sender.fileno(), file.fileno(), position, left)
                        position += sent
                        left -= sent
                else:
                    sender.sendall(os.pread(file.fileno(), MIB, position))
            end = resource.getrusage(resource.RUSAGE_THREAD)
            sender.close()
            reader.join()
            cpu = end.ru_utime - start.ru_utime + end.ru_stime - start.ru_stime
            print(f"{mode:13} sender CPU {cpu / (mebibytes / 1024):.3f} s/GiB")
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 16_000, 65_536, 262_144])
    parser.add_argument("--fetches", type=int, default=3000, help="fetches timed per size")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per tree; medians shown")
    parser.add_argument("--baseline", type=Path, help="also measure this checkout's tree")
    parser.add_argument("--floor", action="store_true", help="measure a bare sender instead")
    args = parser.parse_args()
    if args.floor:
        floor()
        return
    trees = ["herdless"] + ([BASELINE] if args.baseline else [])
    for size in args.sizes:
        spent: dict[str, list[float]] = {tree: [] for tree in trees}
        answer = 0
        for round_no in range(args.rounds):
            for tree in trees if round_no % 2 == 0 else trees[::-1]:
                cpu, answer = measure(tree, args, size)
                spent[tree].append(cpu)
        figures = ", ".join(
            f"{tree} {statistics.median(values):.0f} us ({' '.join(f'{v:.0f}' for v in values)})"
            for tree, values in spent.items()
        )
        print(f"batches of {size} B ({answer} B answers): broker CPU per fetch: {figures}")


if __name__ == "__main__":
    main()
