"""How big are the TLS records a client sends? A broker pays for TLS per record as much
as per byte (each record is a call into OpenSSL, a nonce set, a tag checked), so the
number of records in a GiB produced says what the broker's TLS costs.

One broker with a SASL_SSL listener that advertises the port of a TCP relay in this
process; the relay passes the bytes on untouched and reads the 5-byte header of every
TLS record the client sends. confluent-kafka produces ``--mib`` MiB of ``--record-size``
records (acks=all, linger.ms=5) through it; then a table of the record sizes.

    python bench/tls_records.py
    python bench/tls_records.py --mib 128 --record-size 10240
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import struct
import sys
import tempfile
import threading
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console(width=None if sys.stdout.isatty() else 120)

TLS_HEADER = struct.Struct(">BHH")  # content type, legacy version, length
APPLICATION_DATA = 23
BUCKETS = (512, 1024, 2048, 4096, 8192, 16384, 16384 + 256)


class RecordCensus:
    """Reads TLS record headers out of a byte stream cut anywhere."""

    def __init__(self) -> None:
        self.sizes: collections.Counter[int] = collections.Counter()  # bucket → records
        self.payload = 0
        self._pending = bytearray()
        self._skip = 0

    def feed(self, data: bytes) -> None:
        view = memoryview(data)
        if self._skip:
            taken = min(self._skip, len(view))
            self._skip -= taken
            view = view[taken:]
        while view:
            need = TLS_HEADER.size - len(self._pending)
            self._pending += view[:need]
            view = view[need:]
            if len(self._pending) < TLS_HEADER.size:
                return
            kind, _version, length = TLS_HEADER.unpack(self._pending)
            self._pending.clear()
            if kind == APPLICATION_DATA:
                self.sizes[next(b for b in BUCKETS if length <= b)] += 1
                self.payload += length
            taken = min(length, len(view))
            self._skip = length - taken
            view = view[taken:]


async def relay(listen: int, target: int, census: RecordCensus, ready: threading.Event) -> None:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: bool):
        try:
            while data := await reader.read(1 << 18):
                if count:
                    census.feed(data)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def accepted(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        broker_r, broker_w = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(client_r, broker_w, True), pipe(broker_r, client_w, False))

    server = await asyncio.start_server(accepted, "127.0.0.1", listen)
    ready.set()
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--record-size", type=int, default=1024)
    args = parser.parse_args()

    from peers import create_topic, free_port
    from produce_consume import MIB, produce
    from security import PARTITIONS, STALL_S, TIMEOUT_S, prepare, sasl_ssl_client, serve

    with tempfile.TemporaryDirectory(prefix="bench-tls-records-") as temporary:
        directory = Path(temporary)
        certificates, data_dir = prepare(directory)
        ports = {name: free_port() for name in ("PLAINTEXT", "SASL_SSL", "RELAY")}
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},"
            f"SASL_SSL://127.0.0.1:{ports['SASL_SSL']}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},"
            f"SASL_SSL://127.0.0.1:{ports['RELAY']}",
            "ssl.keystore.location": str(certificates.broker),
            "ssl.truststore.location": str(certificates.ca),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
        census = RecordCensus()
        ready = threading.Event()
        threading.Thread(
            target=lambda: asyncio.run(relay(ports["RELAY"], ports["SASL_SSL"], census, ready)),
            daemon=True,
        ).start()
        ready.wait(10)
        with serve(directory, data_dir, settings, ports["PLAINTEXT"]):
            create_topic(f"127.0.0.1:{ports['PLAINTEXT']}", "records", PARTITIONS, STALL_S)
            client = sasl_ssl_client(certificates.ca)
            count = args.mib * MIB // args.record_size
            produce(
                f"127.0.0.1:{ports['RELAY']}",
                "records",
                count,
                args.record_size,
                TIMEOUT_S,
                STALL_S,
                client,
            )
    total = sum(census.sizes.values())
    table = Table(
        title=f"TLS records from confluent-kafka producing {args.mib} MiB"
        f" of {args.record_size}-byte records"
    )
    for column in ("record size up to", "records", "share"):
        table.add_column(column, justify="right")
    for bucket in BUCKETS:
        table.add_row(
            f"{bucket:,} B",
            f"{census.sizes[bucket]:,}",
            f"{census.sizes[bucket] / max(total, 1):.1%}",
        )
    table.caption = (
        f"{total:,} application-data records, {census.payload / max(total, 1):,.0f} B each on"
        f" average: {total * 1024 / args.mib:,.0f} records a GiB produced"
    )
    console.print(table)


if __name__ == "__main__":
    main()
