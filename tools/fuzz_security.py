"""Send a broker's secured listeners malformed SASL and TLS traffic; count the damage.

The broker under test has a SASL_PLAINTEXT, a SASL_SSL and an SSL listener (PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; a throw-away CA; one user), with
connection.failed.authentication.delay.ms=0 and no limit on failed logins per address,
so that the fuzzer is not slowed down by what protects the broker from guessing. Each
connection gets one exchange, spoiled one of these ways, in equal shares:

  handshake   a SaslHandshake frame bit-flipped, truncated or naming any mechanism
  plain       a valid handshake, then a PLAIN message with random or mutated tokens
  scram-first a valid handshake, then a mutated SCRAM client-first message
  scram-final a valid SCRAM client-first, then a mutated client-final message
  raw         a v0 handshake, then bare tokens of random sizes and bytes (v0 flow)
  sequence    requests out of order: other APIs before authenticating, SaslAuthenticate
              before any handshake, a second handshake, a frame spoiled as a whole
  tls         bytes to a TLS port: a real ClientHello bit-flipped or truncated, random
              records, a PLAINTEXT Kafka request

Every frame sent counts. Every 500 connections a valid SCRAM login and an ApiVersions
request check the broker still serves. Counted: frames, crashes (the process exits; it
is restarted), tracebacks in its log, failed health checks, and its resident memory.

    python tools/fuzz_security.py --frames 1000000 --workers 16 --seed 5 --keep-log fuzz.log
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import ssl
import struct
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import scramp
from fuzz_frames import BrokerUnderTest, _free_port, add_user, fuzz_progress
from rich.progress import Progress

from herdless.cli.certs import write_certificates
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import REQUESTS, RESPONSES

KINDS = ("handshake", "plain", "scram-first", "scram-final", "raw", "sequence", "tls")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USER, PASSWORD = "fuzz-user", "fuzz-Password-1"
HEALTH_EVERY = 500
TIMEOUT_S = 10.0


def request(api_key: int, version: int, correlation_id: int, **fields: object) -> bytes:
    message = REQUESTS[api_key](**fields)
    message.API_VERSION = version
    message.with_header(correlation_id=correlation_id, client_id="fuzz")
    return bytes(message.encode(header=True, framed=True))


def handshake(mechanism: str, version: int = 1) -> bytes:
    return request(ApiKey.SASL_HANDSHAKE, version, 1, mechanism=mechanism)


def authenticate(auth_bytes: bytes, version: int = 2) -> bytes:
    return request(ApiKey.SASL_AUTHENTICATE, version, 2, auth_bytes=auth_bytes)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """Bit flips, a cut, an insertion or random bytes in place of `data`."""
    body = bytearray(data)
    way = rng.randrange(4)
    if way == 0 and body:
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
    elif way == 1:
        body = body[: rng.randrange(len(body) + 1)]
    elif way == 2:
        at = rng.randrange(len(body) + 1)
        body[at:at] = rng.randbytes(rng.randint(1, 64))
    else:
        body = bytearray(rng.randbytes(rng.randint(0, 512)))
    return bytes(body)


def spoil_frame(frame: bytes, rng: random.Random) -> bytes:
    """A whole frame spoiled after its length prefix, the prefix kept consistent."""
    body = mutate(frame[4:], rng)
    return struct.pack(">i", len(body)) + body


def client_hello(rng: random.Random) -> bytes:
    """A real TLS ClientHello, as a client's first flight."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def exchange(kind: str, rng: random.Random) -> list[bytes]:
    """What one connection sends, frame by frame, for `kind` (not tls)."""
    mechanism = rng.choice(MECHANISMS)
    if kind == "handshake":
        name = rng.choice([*MECHANISMS, "GSSAPI", "", "x" * rng.randint(1, 300)])
        frame = handshake(name, rng.randint(0, 1))
        return [spoil_frame(frame, rng) if rng.random() < 0.7 else frame]
    if kind == "plain":
        token = f"\0{USER}\0{PASSWORD}".encode()
        return [handshake("PLAIN"), authenticate(mutate(token, rng), rng.randint(0, 2))]
    client = scramp.ScramClient([rng.choice(MECHANISMS[1:])], USER, PASSWORD)
    scram = client.mechanism_name
    first = client.get_client_first().encode()
    if rng.random() < 0.3:
        # Kafka's SCRAM extensions: a delegation token login's, and broken ones.
        first += rng.choice([b",tokenauth=true", b",tokenauth=TRUE", b",tokenauth", b",=x"])
    if kind == "scram-first":
        return [handshake(scram), authenticate(mutate(first, rng))]
    if kind == "scram-final":
        # The server's first message is not read here: a made-up final, mutated.
        final = b"c=biws,r=" + first.split(b"r=")[1] + b"x" * 32 + b",p=" + rng.randbytes(32)
        return [handshake(scram), authenticate(first), authenticate(mutate(final, rng))]
    if kind == "raw":
        tokens = [rng.randbytes(rng.randint(0, 300)) for _ in range(rng.randint(1, 3))]
        return [handshake(mechanism, 0)] + [struct.pack(">i", len(t)) + t for t in tokens]
    # sequence
    frames = [
        request(ApiKey.METADATA, 12, 9, topics=None, allow_auto_topic_creation=True),
        authenticate(b"\0a\0b"),
        handshake(mechanism) + handshake(mechanism),
        spoil_frame(authenticate(first), rng),
    ]
    rng.shuffle(frames)
    return frames[: rng.randint(1, len(frames))]


def tls_bytes(rng: random.Random, hello: bytes) -> bytes:
    way = rng.randrange(4)
    if way == 0:
        return mutate(hello, rng)
    if way == 1:
        return hello[: rng.randrange(len(hello))]
    if way == 2:  # a TLS record header with random contents
        body = rng.randbytes(rng.randint(0, 2000))
        return bytes([rng.choice((20, 21, 22, 23, rng.randrange(256))), 3, rng.randrange(5)]) + (
            struct.pack(">H", len(body)) + body
        )
    return request(
        ApiKey.API_VERSIONS, 3, 1, client_software_name="fuzz", client_software_version="1"
    )


@dataclass
class Counts:
    frames: int = 0
    connections: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    health_failures: int = 0
    peak_rss_kib: int = 0
    start_rss_kib: int = 0
    target: int = 0


async def healthy(port: int) -> bool:
    """A valid SCRAM-SHA-512 login, then ApiVersions, on the SASL_PLAINTEXT listener."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, TimeoutError):
        return False
    try:
        client = scramp.ScramClient(["SCRAM-SHA-512"], USER, PASSWORD)

        async def call(frame: bytes) -> bytes:
            writer.write(frame)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            return await reader.readexactly(size)

        async with asyncio.timeout(TIMEOUT_S):
            await call(handshake("SCRAM-SHA-512"))
            answer = await call(authenticate(client.get_client_first().encode()))
            decoded = RESPONSES[ApiKey.SASL_AUTHENTICATE].decode(answer, version=2, header=True)
            client.set_server_first(decoded.auth_bytes.decode())
            answer = await call(authenticate(client.get_client_final().encode()))
            decoded = RESPONSES[ApiKey.SASL_AUTHENTICATE].decode(answer, version=2, header=True)
            if decoded.error_code != 0:
                return False
            await call(
                request(
                    ApiKey.API_VERSIONS, 3, 3, client_software_name="h", client_software_version="1"
                )
            )
        return True
    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
        return False
    finally:
        writer.close()


async def worker(ports: dict[str, int], rng: random.Random, counts: Counts, hello: bytes) -> None:
    while counts.frames < counts.target:
        kind = rng.choice(KINDS)
        if kind == "tls":
            port = rng.choice((ports["SASL_SSL"], ports["SSL"]))
            frames = [tls_bytes(rng, hello)]
        else:
            port = ports["SASL_PLAINTEXT"]
            frames = exchange(kind, rng)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        counts.connections += 1
        counts.kinds[kind] += 1
        try:
            for frame in frames:
                counts.frames += 1
                writer.write(frame)
            writer.write_eof()
            await asyncio.wait_for(reader.read(), TIMEOUT_S)
        except (OSError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        if counts.connections % HEALTH_EVERY == 0 and not await healthy(ports["SASL_PLAINTEXT"]):
            counts.health_failures += 1


async def watch(broker: BrokerUnderTest, counts: Counts, progress: Progress) -> None:
    task = progress.add_task("fuzzing", total=counts.target)
    reported = time.monotonic()
    while counts.frames < counts.target:
        await asyncio.sleep(0.5)
        if not broker.alive():
            counts.crashes += 1
            broker.start()
        rss = broker.rss_kib()
        counts.peak_rss_kib = max(counts.peak_rss_kib, rss)
        progress.update(task, completed=counts.frames)
        if not progress.console.is_terminal and time.monotonic() - reported >= 30:
            reported = time.monotonic()
            progress.console.print(
                f"{counts.frames:,} frames, {counts.connections:,} connections,"
                f" {counts.crashes} crashes, {broker.tracebacks()} tracebacks,"
                f" {counts.health_failures} failed health checks, rss {rss // 1024} MiB"
            )
    progress.update(task, completed=counts.frames)


async def run(broker: BrokerUnderTest, ports: dict[str, int], args: argparse.Namespace) -> Counts:
    counts = Counts(start_rss_kib=broker.rss_kib(), target=args.frames)
    hello = client_hello(random.Random(args.seed))
    with fuzz_progress() as progress:
        jobs = [
            worker(ports, random.Random(args.seed * 1000 + n), counts, hello)
            for n in range(args.workers)
        ]
        await asyncio.gather(watch(broker, counts, progress), *jobs)
    if not await healthy(ports["SASL_PLAINTEXT"]):
        counts.health_failures += 1
    return counts


def start_broker(directory: Path, log_path: Path) -> tuple[BrokerUnderTest, dict[str, int]]:
    certificates = write_certificates(directory / "certs", ["127.0.0.1"])
    data_dir = directory / "data"
    add_user(data_dir, USER, PASSWORD)
    ports = {name: _free_port() for name in ("SASL_PLAINTEXT", "SASL_SSL", "SSL")}
    settings = {
        "ssl.keystore.location": certificates.broker,
        "ssl.truststore.location": certificates.ca,
        "ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "connection.failed.authentication.delay.ms": "0",
        "connection.failed.authentication.limit": "0",
        # Delegation tokens on: a first message with tokenauth=true looks for a token.
        "delegation.token.secret.key": "fuzz-token-key",
    }
    args = tuple(arg for key, value in settings.items() for arg in ("--set", f"{key}={value}"))
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker = BrokerUnderTest(data_dir, log_path, _free_port(), args, listeners)
    broker.start()
    return broker, ports


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=16, help="concurrent connections")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-log", type=Path, help="where to keep the broker's log")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        log_path = args.keep_log or directory / "broker.log"
        broker, ports = start_broker(directory, log_path)
        started = time.monotonic()
        try:
            counts = asyncio.run(run(broker, ports, args))
        finally:
            code = broker.stop()
        elapsed = time.monotonic() - started
        log = log_path.read_text(errors="replace")
        print(f"frames                 {counts.frames:,} in {elapsed:.0f} s")
        print(f"connections            {counts.connections:,}")
        print(f"by kind                {dict(sorted(counts.kinds.items()))}")
        print(f"crashes                {counts.crashes}")
        print(f"tracebacks in the log  {log.count('Traceback (most recent call last)')}")
        print(f"failed health checks   {counts.health_failures}")
        print(f"WARNING lines          {log.count(' WARNING ')}")
        print(
            f"broker RSS             {counts.start_rss_kib // 1024} MiB at start,"
            f" peak {counts.peak_rss_kib // 1024} MiB"
        )
        print(f"exit code on SIGTERM   {code}")


if __name__ == "__main__":
    main()
