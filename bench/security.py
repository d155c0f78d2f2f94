"""What security costs: produce and consume over SASL_SSL beside PLAINTEXT, and new
authenticated connections per second with SCRAM over TLS.

One herdless broker with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512, a
throw-away CA). Each round produces ``--mib`` MiB of 1 KiB records with confluent-kafka
(acks=all, linger.ms=5) and consumes them back, once through each listener, the order
flipping every round: the figure to read is the SASL_SSL / PLAINTEXT ratio, the median
of the per-round ratios (absolute rates drift on a shared machine). Beside each rate, the
CPU seconds per GiB of the broker and of the client (this process: confluent-kafka's
Python calls and librdkafka's threads, its TLS included): when the two together keep
every core busy, the ratio is bounded by the machine as much as by the broker.

Then ``--logins`` new connections, ``--concurrency`` at a time, each shaking hands over
TLS, logging in with SCRAM-SHA-512 and asking ApiVersions (herdless's own client side,
broker/peers/connection.py, as brokers use it between themselves), beside as many PLAINTEXT
connections asking ApiVersions alone; with the broker's CPU time per connection.

    python bench/security.py
    python bench/security.py --mib 64 --rounds 3 --logins 2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.table import Table

from herdless.broker.auth.tls import client_context
from herdless.broker.peers.connection import PeerConnection, PeerSecurity
from herdless.cli.certs import CertificateFiles, write_certificates
from herdless.protocol.api_keys import ApiKey
from herdless.security.sasl_client import sasl_client
from herdless.security.settings import SecuritySettings
from peers import (
    _broker_process,
    broker_cpu_seconds,
    create_topic,
    delete_topic,
    free_port,
    tree_env,
)
from produce_consume import MB, MIB, consume, produce

USER, PASSWORD = "bench", "bench-Password-1"
RECORD_SIZE = 1024
PARTITIONS = 4
TIMEOUT_S, STALL_S = 300.0, 60.0
console = Console(width=None if sys.stdout.isatty() else 120)


def prepare(directory: Path) -> tuple[CertificateFiles, Path]:
    """A throw-away CA with a broker keystore, and a data directory that already holds
    the SCRAM-SHA-512 user the clients log in as."""
    certificates = write_certificates(directory / "certs", ["127.0.0.1"])
    data_dir = directory / "data"
    subprocess.run(
        [sys.executable, "-m", "herdless", "users", "add", USER, "--password-stdin"]
        + ["--mechanism", "SCRAM-SHA-512", "--data-dir", str(data_dir)],
        input=PASSWORD,
        text=True,
        check=True,
        capture_output=True,
    )
    return certificates, data_dir


def serve(
    directory: Path, data_dir: Path, settings: dict[str, str], port: int
) -> contextlib.AbstractContextManager[str]:
    """The broker of this tree with these settings, once it listens on `port`."""
    command = [sys.executable, "-m", "herdless", "serve", "--data-dir", str(data_dir)]
    command += [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    src = Path(__file__).resolve().parent.parent / "src"
    return _broker_process("herdless", command, port, directory, tree_env(src))


def sasl_ssl_client(ca: Path) -> dict[str, str]:
    """librdkafka's settings to log in as the benchmark's user over SASL_SSL."""
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }


def start(directory: Path) -> tuple[contextlib.AbstractContextManager[str], dict[str, int], Path]:
    certificates, data_dir = prepare(directory)
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    settings = {
        "listeners": listeners,
        "ssl.keystore.location": str(certificates.broker),
        "ssl.truststore.location": str(certificates.ca),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": "0",
    }
    return serve(directory, data_dir, settings, ports["PLAINTEXT"]), ports, certificates.ca


def librdkafka(listener: str, ports: dict[str, int], ca: Path) -> tuple[str, dict[str, str]]:
    bootstrap = f"127.0.0.1:{ports[listener]}"
    return bootstrap, {} if listener == "PLAINTEXT" else sasl_ssl_client(ca)


def client_cpu_seconds() -> float:
    """CPU seconds this process (the client) used so far, all its threads."""
    times = os.times()
    return times.user + times.system


class Phase(NamedTuple):
    rate: float  # MB/s of record values
    broker_cpu: float  # CPU seconds per GiB
    client_cpu: float

    def cell(self) -> str:
        return f"{self.rate:.1f} MB/s ({self.broker_cpu:.2f} + {self.client_cpu:.2f})"


def throughput(
    listener: str, round_no: int, mib: int, ports: dict[str, int], ca: Path
) -> tuple[Phase, Phase]:
    """Produce, then consume, through `listener`. The CPU figures do not move with the
    machine's other load as the rates do."""
    bootstrap, client = librdkafka(listener, ports, ca)
    topic = f"bench-{listener.lower()}-{round_no}"
    create_topic(f"127.0.0.1:{ports['PLAINTEXT']}", topic, PARTITIONS, STALL_S)
    count = mib * MIB // RECORD_SIZE
    gib = mib / 1024
    cpu = broker_cpu_seconds(), client_cpu_seconds()
    seconds = produce(bootstrap, topic, count, RECORD_SIZE, TIMEOUT_S, STALL_S, client)
    produced = broker_cpu_seconds(), client_cpu_seconds()
    consumed_s, value_bytes = consume(
        bootstrap, topic, PARTITIONS, count, TIMEOUT_S, STALL_S, client
    )
    consumed = broker_cpu_seconds(), client_cpu_seconds()
    delete_topic(f"127.0.0.1:{ports['PLAINTEXT']}", topic, STALL_S)
    return (
        Phase(
            count * RECORD_SIZE / seconds / MB,
            (produced[0] - cpu[0]) / gib,
            (produced[1] - cpu[1]) / gib,
        ),
        Phase(
            value_bytes / consumed_s / MB,
            (consumed[0] - produced[0]) / gib,
            (consumed[1] - produced[1]) / gib,
        ),
    )


async def connections(
    port: int, security: PeerSecurity | None, total: int, concurrency: int
) -> tuple[float, float]:
    """(connections per second, broker CPU ms per connection): each connects, logs in if
    `security` says so, asks ApiVersions and hangs up."""
    done = 0

    async def one() -> None:
        nonlocal done
        while done < total:
            done += 1
            peer = PeerConnection("127.0.0.1", port, "bench", 30.0, security)
            try:
                await peer.request(
                    ApiKey.API_VERSIONS,
                    3,
                    client_software_name="bench",
                    client_software_version="1",
                )
            finally:
                peer.close()

    cpu = broker_cpu_seconds()
    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return total / elapsed, (broker_cpu_seconds() - cpu) * 1000 / total


def costs(rows: list[tuple[int, dict[str, tuple[Phase, Phase]]]]) -> Table:
    """What SASL_SSL adds per GiB to the broker and to the client, and how many cores the
    two kept busy together (medians of the rounds): near the machine's count, a cheaper
    broker alone cannot bring the ratio to 1."""
    table = Table(title="the cost of SASL_SSL (medians of the rounds)")
    for column in (
        "phase",
        "broker CPU s/GiB added",
        "client CPU s/GiB added",
        "cores busy, PLAINTEXT",
        "cores busy, SASL_SSL",
    ):
        table.add_column(column, justify="right")
    for index, phase in enumerate(("produce", "consume")):
        plain = [rates["PLAINTEXT"][index] for _, rates in rows]
        secured = [rates["SASL_SSL"][index] for _, rates in rows]

        def busy(phases: list[Phase]) -> float:
            # CPU s/GiB × GiB/s: the cores in use while the phase ran.
            return statistics.median(
                (p.broker_cpu + p.client_cpu) * p.rate * MB / 2**30 for p in phases
            )

        pairs = list(zip(secured, plain, strict=True))
        table.add_row(
            phase,
            f"{statistics.median(s.broker_cpu - p.broker_cpu for s, p in pairs):+.2f}",
            f"{statistics.median(s.client_cpu - p.client_cpu for s, p in pairs):+.2f}",
            f"{busy(plain):.2f} of {os.cpu_count()}",
            f"{busy(secured):.2f} of {os.cpu_count()}",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=128, help="MiB produced per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--logins", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-security-") as temporary:
        process, ports, ca = start(Path(temporary))
        with process:
            ratios: dict[str, list[float]] = {"produce": [], "consume": []}
            rows = []
            for round_no in range(args.rounds):
                order = ["PLAINTEXT", "SASL_SSL"][:: 1 if round_no % 2 == 0 else -1]
                rates = {name: throughput(name, round_no, args.mib, ports, ca) for name in order}
                for index, phase in enumerate(("produce", "consume")):
                    ratio = rates["SASL_SSL"][index].rate / rates["PLAINTEXT"][index].rate
                    ratios[phase].append(ratio)
                rows.append((round_no, rates))
            settings = SecuritySettings({"ssl.truststore.location": str(ca)})
            secured = PeerSecurity(
                client_context(settings, "SASL_SSL"),
                lambda _host: sasl_client("SCRAM-SHA-512", USER, PASSWORD),
            )
            plain_rate, plain_cpu = asyncio.run(
                connections(ports["PLAINTEXT"], None, args.logins, args.concurrency)
            )
            login_rate, login_cpu = asyncio.run(
                connections(ports["SASL_SSL"], secured, args.logins, args.concurrency)
            )
    table = Table(title=f"produce and consume, {args.mib} MiB of 1 KiB records per round")
    for column in (
        "round",
        "PLAINTEXT produce",
        "SASL_SSL produce",
        "PLAINTEXT consume",
        "SASL_SSL consume",
    ):
        table.add_column(column, justify="right")
    for round_no, rates in rows:
        table.add_row(
            str(round_no),
            *(rates[name][phase].cell() for phase in (0, 1) for name in ("PLAINTEXT", "SASL_SSL")),
        )
    table.add_row(
        "ratio",
        "",
        f"{statistics.median(ratios['produce']):.2f}",
        "",
        f"{statistics.median(ratios['consume']):.2f}",
    )
    table.caption = "(broker + client CPU seconds per GiB of record values)"
    console.print(table)
    console.print(costs(rows))
    logins = Table(title=f"new connections, {args.logins} each, {args.concurrency} at a time")
    for column in ("connection", "per second", "broker CPU per connection"):
        logins.add_column(column, justify="right")
    logins.add_row("PLAINTEXT, ApiVersions", f"{plain_rate:.0f}", f"{plain_cpu:.2f} ms")
    logins.add_row("TLS + SCRAM-SHA-512, ApiVersions", f"{login_rate:.0f}", f"{login_cpu:.2f} ms")
    console.print(logins)


if __name__ == "__main__":
    main()
