"""Would a TLS-terminating process in front of a listener bring SASL_SSL closer to
PLAINTEXT? It would take TLS off the broker's event loop onto a process with a GIL of
its own, as Kafka's network threads take it off its request handlers.

One broker with three listeners: PLAINTEXT; SASL_SSL, TLS on the broker's event loop;
and RELAY, a SASL_PLAINTEXT listener that advertises the port of a relay process. The
relay (this file, run with ``--relay``) accepts TLS on that port with the broker's
certificate, and passes the decrypted bytes both ways to RELAY over loopback with
uvloop, so a client configured for SASL_SSL logs in with SCRAM-SHA-512 through it as
through the broker's own SASL_SSL listener. Each round produces ``--mib`` MiB of 1 KiB
records with confluent-kafka and consumes them back through each of the three, the
order reversed every other round; the figures to read are the ratios to PLAINTEXT in the
same round (medians), and the CPU seconds per GiB of the broker and of the relay.

    python bench/tls_terminating_process.py
    python bench/tls_terminating_process.py --mib 256 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console(width=None if sys.stdout.isatty() else 140)


class RelayHalf(asyncio.Protocol):
    """One side of a relayed connection: what it receives is written to the other side,
    and the other side stops reading while this side's transport cannot take more."""

    def __init__(self) -> None:
        self.other: RelayHalf | None = None
        self.transport: asyncio.Transport | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        for data in self.early:
            self.transport.write(data)  # type: ignore[union-attr]
        self.early.clear()

    def data_received(self, data: bytes) -> None:
        assert self.other is not None
        if self.other.transport is None:
            self.other.early.append(data)  # the broker side is still connecting
        else:
            self.other.transport.write(data)

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()

    def eof_received(self) -> bool:
        self._close_other()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_other()

    def _close_other(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()


async def relay(listen_port: int, target_port: int, keystore: Path) -> None:
    loop = asyncio.get_running_loop()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keystore)

    def accepted() -> RelayHalf:
        client, broker = RelayHalf(), RelayHalf()
        client.other, broker.other = broker, client
        task = loop.create_task(loop.create_connection(lambda: broker, "127.0.0.1", target_port))
        task.add_done_callback(lambda done: done.exception() and client._close_other())
        return client

    server = await loop.create_server(accepted, "127.0.0.1", listen_port, ssl=context)
    await server.serve_forever()


def measure(args: argparse.Namespace) -> None:
    from peers import (
        broker_cpu_seconds,
        create_topic,
        delete_topic,
        free_port,
        process_cpu_seconds,
    )
    from produce_consume import MB, MIB, consume, produce
    from security import (
        PARTITIONS,
        RECORD_SIZE,
        STALL_S,
        TIMEOUT_S,
        prepare,
        sasl_ssl_client,
        serve,
    )

    with tempfile.TemporaryDirectory(prefix="bench-tls-process-") as temporary:
        directory = Path(temporary)
        certificates, data_dir = prepare(directory)
        ports = {name: free_port() for name in ("PLAINTEXT", "SASL_SSL", "RELAY", "FRONT")}
        bound = ("PLAINTEXT", "SASL_SSL", "RELAY")
        advertised = {**ports, "RELAY": ports["FRONT"]}
        settings = {
            "listeners": ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in bound),
            "advertised.listeners": ",".join(
                f"{name}://127.0.0.1:{advertised[name]}" for name in bound
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,RELAY:SASL_PLAINTEXT"
            ),
            "ssl.keystore.location": str(certificates.broker),
            "ssl.truststore.location": str(certificates.ca),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "group.initial.rebalance.delay.ms": "0",
        }
        relay_command = [sys.executable, __file__, "--relay"]
        relay_command += [str(ports["FRONT"]), str(ports["RELAY"]), str(certificates.broker)]
        relay_process = subprocess.Popen(relay_command)
        try:
            with serve(directory, data_dir, settings, ports["PLAINTEXT"]):
                secured = sasl_ssl_client(certificates.ca)
                ways = {
                    "PLAINTEXT": (ports["PLAINTEXT"], {}),
                    "SASL_SSL on the loop": (ports["SASL_SSL"], secured),
                    "SASL_SSL through the relay": (ports["FRONT"], secured),
                }
                count = args.mib * MIB // RECORD_SIZE
                gib = args.mib / 1024
                rows: list[tuple[int, str, float, float, float, float, float, float]] = []
                for round_no in range(args.rounds):
                    order = list(ways) if round_no % 2 == 0 else list(ways)[::-1]
                    for way in order:
                        port, client = ways[way]
                        bootstrap = f"127.0.0.1:{port}"
                        topic = f"bench-{len(rows)}"
                        create_topic(f"127.0.0.1:{ports['PLAINTEXT']}", topic, PARTITIONS, STALL_S)
                        cpu = (broker_cpu_seconds(), process_cpu_seconds(relay_process.pid))
                        seconds = produce(
                            bootstrap, topic, count, RECORD_SIZE, TIMEOUT_S, STALL_S, client
                        )
                        produced = (broker_cpu_seconds(), process_cpu_seconds(relay_process.pid))
                        consumed_s, value_bytes = consume(
                            bootstrap, topic, PARTITIONS, count, TIMEOUT_S, STALL_S, client
                        )
                        done = (broker_cpu_seconds(), process_cpu_seconds(relay_process.pid))
                        delete_topic(f"127.0.0.1:{ports['PLAINTEXT']}", topic, STALL_S)
                        rows.append(
                            (
                                round_no,
                                way,
                                count * RECORD_SIZE / seconds / MB,
                                (produced[0] - cpu[0]) / gib,
                                (produced[1] - cpu[1]) / gib,
                                value_bytes / consumed_s / MB,
                                (done[0] - produced[0]) / gib,
                                (done[1] - produced[1]) / gib,
                            )
                        )
        finally:
            relay_process.kill()
            relay_process.wait()
    report(rows, args)


def report(
    rows: list[tuple[int, str, float, float, float, float, float, float]],
    args: argparse.Namespace,
) -> None:
    table = Table(title=f"{args.mib} MiB of 1 KiB records per round, each way")
    for column in ("round", "way", "produce", "consume"):
        table.add_column(column, justify="right")
    for round_no, way, produced, p_broker, p_relay, consumed, c_broker, c_relay in rows:
        relayed = way.endswith("relay")
        table.add_row(
            str(round_no),
            way,
            f"{produced:.1f} MB/s ({p_broker:.2f}" + (f" + {p_relay:.2f})" if relayed else ")"),
            f"{consumed:.1f} MB/s ({c_broker:.2f}" + (f" + {c_relay:.2f})" if relayed else ")"),
        )
    table.caption = "(broker CPU seconds per GiB of record values, + the relay's)"
    console.print(table)
    ratios = Table(title="against PLAINTEXT in the same round (medians)")
    for column in ("way", "produce", "consume"):
        ratios.add_column(column, justify="right")
    plain = {row[0]: row for row in rows if row[1] == "PLAINTEXT"}
    for way in ("SASL_SSL on the loop", "SASL_SSL through the relay"):
        mine = [row for row in rows if row[1] == way]
        produce_ratio = statistics.median(row[2] / plain[row[0]][2] for row in mine)
        consume_ratio = statistics.median(row[5] / plain[row[0]][5] for row in mine)
        ratios.add_row(way, f"{produce_ratio:.2f}", f"{consume_ratio:.2f}")
    console.print(ratios)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--relay":
        import uvloop

        uvloop.run(relay(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=128, help="MiB produced per round and way")
    parser.add_argument("--rounds", type=int, default=3)
    measure(parser.parse_args())


if __name__ == "__main__":
    main()
