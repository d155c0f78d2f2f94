"""Send a broker malformed frames for every API and version it serves; count the damage.

For each API herdless serves, at each version, a well-formed sample request is built
from the message schema (one element in every array, a value in every field; the
records of Produce v0-v2 a message set of their magic, plain and gzip-wrapped), and
then spoiled one of five ways:

  truncated  the body cut short, with a length prefix that matches the cut
  bitflip    one to three bits flipped anywhere after the length prefix
  inflated   a 2- or 4-byte window overwritten with the largest length it can hold
  oversized  a length prefix longer than what follows (then the client hangs up),
             or beyond socket.request.max.bytes
  null       a field the schema says is never null sent as null (-1 / 0 length)

Flexible versions are also sampled with unknown tagged fields in the request header's
tag section and the message's own (as a newer client may send them), and spoiled the
same ways. `--apis` keeps some APIs only: `--apis compiled` those whose requests and
responses go through the code written per version from the schemas (schema_codec.py).

Each frame is followed, on the same connection, by an ApiVersions probe: an answer
means the broker read the frame, dealt with it and kept the connection; a close
means it closed that connection. Counted: frames, closes, probe timeouts, broker
crashes (the process exits; it is restarted), tracebacks in the broker's log, and
the broker's resident memory (peak and last).

Before the fuzzing, the partition the samples name (topic "fuzz", partition 1) is
given batches of every codec and up-converted message sets, so that fetches of
every version read real data (Fetch v0-v3 down-convert it) and ListOffsets finds it;
the batch holding the offset the samples fetch is large enough to be sent from its
segment file (sendfile), so Fetch answers take the zero-copy path.

`--sasl-plain` fuzzes connections that logged in first: the broker gets a
SASL_PLAINTEXT listener and a user, and each connection logs in with SASL PLAIN
(SaslHandshake v1, SaslAuthenticate v2) before its frames, so the frames meet the
handlers as an authenticated principal's (with `--set authorizer.class.name=acls
--set super.users=User:fuzz`, past the authorizer too).

`--in-process` sends nothing: each spoiled frame is decoded in this process, by
codec.decode_request and, for the compiled APIs, by kafka-python too, and the two
outcomes are tallied side by side. A decode that raises anything but MalformedRequest,
or two decoders that both accept a frame and disagree, is counted and shown.

    python tools/fuzz_frames.py --frames 1000000
    python tools/fuzz_frames.py --frames 20000 --seed 7 --keep-log fuzz.log
    python tools/fuzz_frames.py --frames 100000 --apis compiled
    python tools/fuzz_frames.py --frames 100000 --sasl-plain
    python tools/fuzz_frames.py --frames 1000000 --in-process --apis compiled
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from herdless.broker.handlers.apis import APIS
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import (
    COMPILED_APIS,
    REQUESTS,
    MalformedRequest,
    decode_request,
    read_prefix,
)
from herdless.protocol.schema_codec import uvarint

KINDS = ("truncated", "bitflip", "inflated", "oversized", "null")
PROBE = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 0x7FFF_0000, 5) + b"probe"
PROBE_TIMEOUT_S = 10.0
# The user `--sasl-plain` connections log in as.
SASL_USER, SASL_PASSWORD = "fuzz", "fuzz-Password-1"
ALWAYS_NULLABLE = (0, 32767)


def _records(compression: int = 0, value: bytes = b"fuzz", count: int = 2) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for i in range(count):
        key = b"k" if i == 0 else None
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def _message_set(magic: int, compression: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(
        magic=magic, compression_type=compression, batch_size=1 << 16
    )
    builder.append(0, timestamp=1_700_000_000_000, key=b"k", value=b"fuzz")
    builder.append(1, timestamp=1_700_000_000_001, key=None, value=b"fuzz")
    return bytes(builder.build())


def _produced_records(api_key: int, version: int) -> list[bytes]:
    """What a sample Produce request carries: a message set of the version's magic
    (plain and gzip-wrapped) where the version predates v2 batches."""
    if api_key != ApiKey.PRODUCE or version >= 3:
        return [_records()]
    magic = 0 if version < 2 else 1
    return [_message_set(magic), _message_set(magic, GZIP)]


GZIP = 1
ZSTD = 4


_PRIMITIVES: dict[str, Any] = {
    "int8": 1,
    "int16": 1,
    "uint16": 1,
    "int32": 1,
    "int64": 1,
    "float64": 0.5,
    "bool": True,
    "string": "fuzz",
    "bytes": b"\x00\x01fuzz",
}


# What a consumer sends where the sample value 1 would have the broker refuse before it
# reads anything: a follower's replica id, a leader epoch it does not have, a fetch
# session that does not exist.
_AS_A_CONSUMER = {
    "replica_id": -1,
    "current_leader_epoch": -1,
    "last_fetched_epoch": -1,
    "session_id": 0,
    "session_epoch": -1,
}
# The topic id of samples built with no broker to ask (--in-process).
ANY_TOPIC_ID = uuid.UUID(int=0x0123456789ABCDEF)


def _primitive(type_str: str, records: bytes, topic_id: uuid.UUID) -> Any:
    if type_str == "uuid":
        return topic_id
    if type_str == "records":
        return records
    return _PRIMITIVES.get(type_str, 1)


def _fields(struct_field: Any, version: int) -> Iterator[Any]:
    return (f for f in struct_field._fields if f.for_version_q(version))


def _sample(
    struct_field: Any,
    version: int,
    null_at: tuple[str, ...],
    records: bytes,
    topic_id: uuid.UUID,
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in _fields(struct_field, version):
        here = null_at[:1] == (f.name,)
        if here and len(null_at) == 1:
            values[f.name] = None
            continue
        rest = null_at[1:] if here else ()
        if f.is_struct_array():
            inner = _sample(f.array_of, version, rest, records, topic_id)
            values[f.name] = [f.data_class(**inner)]
        elif f.is_struct():
            values[f.name] = f.data_class(**_sample(f, version, rest, records, topic_id))
        elif f.is_array():
            values[f.name] = [_primitive(f.array_of.type_str, records, topic_id)]
        elif f.name in _AS_A_CONSUMER and f.type_str != "string":
            values[f.name] = _AS_A_CONSUMER[f.name]
        else:
            values[f.name] = _primitive(f.type_str, records, topic_id)
    return values


_NULLABLE_KINDS = ("string", "bytes", "records")


def _null_paths(struct_field: Any, version: int, prefix: tuple[str, ...] = ()) -> Iterator[Any]:
    """Every field that can be sent as null (strings, bytes, arrays, structs) and the
    schema field object, so that its nullability can be forced while encoding."""
    for f in _fields(struct_field, version):
        path = (*prefix, f.name)
        if f.is_array() or f.is_struct() or f.type_str in _NULLABLE_KINDS:
            yield path, f
        if f.is_struct_array():
            yield from _null_paths(f.array_of, version, path)
        elif f.is_struct():
            yield from _null_paths(f, version, path)


def _clear_encoders(struct_field: Any) -> None:
    for f in struct_field._fields:
        inner = f.array_of if f.is_struct_array() else f
        if hasattr(inner, "_compiled_encoders"):
            inner._compiled_encoders.clear()
            _clear_encoders(inner)
    if hasattr(struct_field, "_compiled_encoders"):
        struct_field._compiled_encoders.clear()


CLIENT_ID = "fuzz"
# Where a request header's tag section starts: key, version, correlation id, client id.
_HEADER_TAGS_AT = 2 + 2 + 4 + 2 + len(CLIENT_ID)
# Two tags no schema knows, one of them empty.
_UNKNOWN_TAGS = b"\x02" + uvarint(100) + b"\x03abc" + uvarint(7000) + b"\x00"


def _encode(cls: Any, version: int, values: dict[str, Any]) -> bytes:
    request = cls[version](**values)
    request.with_header(correlation_id=1, client_id=CLIENT_ID)
    return bytes(request.encode(header=True))


def _with_unknown_tags(cls: Any, version: int, frame: bytes) -> bytes:
    """The frame with unknown tags in the header's tag section, and in the message's own
    when that one is empty (kafka-python's encoder writes none)."""
    assert frame[_HEADER_TAGS_AT] == 0, "a header with tagged fields already"
    frame = frame[:_HEADER_TAGS_AT] + _UNKNOWN_TAGS + frame[_HEADER_TAGS_AT + 1 :]
    if frame[-1] == 0:
        candidate = frame[:-1] + _UNKNOWN_TAGS
        with contextlib.suppress(Exception):
            if cls.decode(candidate, version=version, header=True).unknown_tags:
                return candidate
    return frame


@dataclass
class Templates:
    valid: list[tuple[str, bytes]] = field(default_factory=list)
    nulls: list[tuple[str, bytes]] = field(default_factory=list)
    unbuildable: int = 0


def build_templates(api_keys: frozenset[int], topic_id: uuid.UUID = ANY_TOPIC_ID) -> Templates:
    templates = Templates()
    for api in APIS.values():
        if api.key not in api_keys:
            continue
        cls = REQUESTS[api.key]
        for version in range(api.min_version, api.max_version + 1):
            label = f"{api.name} v{version}"
            samples = _produced_records(api.key, version)
            for path, schema_field in list(_null_paths(cls._struct, version)):
                saved = schema_field._nullable_versions
                schema_field._nullable_versions = ALWAYS_NULLABLE
                _clear_encoders(cls._struct)
                try:
                    values = _sample(cls._struct, version, path, samples[0], topic_id)
                    frame = _encode(cls, version, values)
                    templates.nulls.append((f"{label} {'.'.join(path)}=null", frame))
                except Exception:
                    templates.unbuildable += 1
                finally:
                    schema_field._nullable_versions = saved
                    _clear_encoders(cls._struct)
            for records in samples:
                frame = _encode(cls, version, _sample(cls._struct, version, (), records, topic_id))
                templates.valid.append((label, frame))
                if cls.flexible_version_q(version):
                    tagged = _with_unknown_tags(cls, version, frame)
                    templates.valid.append((f"{label} with unknown tags", tagged))
    return templates


def spoil(
    templates: Templates, rng: random.Random, max_request_bytes: int
) -> tuple[str, bytes, bool]:
    """One fuzzed frame (with its length prefix), its kind, and whether the client must
    hang up after it (the frame promises more bytes than it carries)."""
    kind = rng.choice(KINDS)
    if kind == "null":
        _, body = rng.choice(templates.nulls)
        return kind, struct.pack(">i", len(body)) + body, False
    _, valid = rng.choice(templates.valid)
    body = bytearray(valid)
    if kind == "truncated":
        body = body[: rng.randrange(0, len(body))]
    elif kind == "bitflip":
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(len(body))
            body[position] ^= 1 << rng.randrange(8)
    elif kind == "inflated":
        width = rng.choice((2, 4))
        if len(body) > width:
            position = rng.randrange(4, len(body) - width + 1) if len(body) > 4 + width else 0
            body[position : position + width] = b"\x7f" + b"\xff" * (width - 1)
    else:  # oversized
        if rng.random() < 0.2:
            return kind, struct.pack(">i", max_request_bytes + rng.randint(1, 1 << 20)), True
        return kind, struct.pack(">i", len(body) + rng.randint(1, 1 << 16)) + body, True
    return kind, struct.pack(">i", len(body)) + bytes(body), False


@dataclass
class Counts:
    frames: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    closed: int = 0
    probe_timeouts: int = 0
    crashes: int = 0
    peak_rss_kib: int = 0
    start_rss_kib: int = 0
    rss_kib: int = 0
    target: int = 0
    stopped_early: str = ""
    failed_logins: int = 0


class BrokerUnderTest:
    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        port: int,
        extra_args: tuple[str, ...] = (),
        listeners: str | None = None,
        sasl_port: int | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = port
        # With a SASL_PLAINTEXT port, the fuzzed connections go there and log in first.
        self.sasl_plain = sasl_port is not None
        self.fuzz_port = port if sasl_port is None else sasl_port
        if sasl_port is not None:
            listeners = f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
            extra_args = (*extra_args, "--set", "sasl.enabled.mechanisms=PLAIN")
            add_user(data_dir)
        # More of `herdless serve`'s arguments, and listeners beside PLAINTEXT on `port`
        # (tools/fuzz_security.py fuzzes secured ones).
        self.extra_args = extra_args
        self.listeners = listeners
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "herdless",
            "serve",
            *(
                ("--host", "127.0.0.1", "--port", str(self.port))
                if self.listeners is None
                else ("--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port},{self.listeners}")
            ),
            "--data-dir",
            str(self.data_dir),
            "--set",
            "group.initial.rebalance.delay.ms=0",
            *self.extra_args,
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"broker exited at start; see {self.log_path}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            time.sleep(0.05)
        raise SystemExit(f"broker did not listen within 60 s; see {self.log_path}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def rss_kib(self) -> int:
        assert self.process is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.terminate()
        return self.process.wait(60)

    def tracebacks(self) -> int:
        text = self.log_path.read_text(errors="replace")
        return text.count("Traceback (most recent call last)")


class LoginRefused(Exception):
    """The broker refused the fuzzer's own SASL login (a broker problem, counted)."""


def _login_requests() -> list[tuple[Any, Any]]:
    """SASL PLAIN as SASL_USER, the way clients log in (KIP-152's framed tokens)."""
    token = f"\0{SASL_USER}\0{SASL_PASSWORD}".encode()
    return [
        (SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse),
        (SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse),
    ]


def _check_login(request: Any, answer: Any) -> None:
    if answer.error_code != 0:
        raise LoginRefused(f"{type(request).__name__}: error {answer.error_code}")


async def _log_in(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    for correlation_id, (request, response_class) in enumerate(_login_requests(), 1):
        request.with_header(correlation_id=correlation_id, client_id="fuzz")
        body = bytes(request.encode(header=True))
        writer.write(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        answer = response_class.decode(
            await reader.readexactly(size), version=request.API_VERSION, header=True
        )
        _check_login(request, answer)


def add_user(data_dir: Path, user: str = SASL_USER, password: str = SASL_PASSWORD) -> None:
    """A SCRAM user in the data directory of a broker not yet started."""
    subprocess.run(
        [sys.executable, "-m", "herdless", "users", "add", user, "--password-stdin"]
        + ["--data-dir", str(data_dir)],
        input=password,
        text=True,
        check=True,
        capture_output=True,
    )


async def _read_until_probe(reader: asyncio.StreamReader) -> bool:
    """True once the probe's answer arrives; False if the broker closed first."""
    try:
        while True:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            payload = await reader.readexactly(size)
            if payload[:4] == PROBE[4:8]:
                return True
    except (asyncio.IncompleteReadError, ConnectionError):
        return False


async def _worker(
    broker: BrokerUnderTest,
    templates: Templates,
    rng: random.Random,
    counts: Counts,
    total: int,
    max_request_bytes: int,
) -> None:
    probe = struct.pack(">i", len(PROBE)) + PROBE
    writer: asyncio.StreamWriter | None = None
    reader: asyncio.StreamReader | None = None
    while counts.frames < counts.target:
        if writer is None:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", broker.fuzz_port)
                if broker.sasl_plain:
                    await asyncio.wait_for(_log_in(reader, writer), PROBE_TIMEOUT_S)
            except (OSError, TimeoutError, LoginRefused, asyncio.IncompleteReadError) as error:
                counts.failed_logins += isinstance(error, LoginRefused)
                if writer is not None:
                    writer.close()
                writer = reader = None
                await asyncio.sleep(0.2)
                continue
        assert reader is not None
        kind, frame, hang_up = spoil(templates, rng, max_request_bytes)
        counts.frames += 1
        counts.kinds[kind] += 1
        kept = False
        try:
            if hang_up:
                writer.write(frame)
                writer.write_eof()
                await asyncio.wait_for(reader.read(), PROBE_TIMEOUT_S)
            else:
                writer.write(frame + probe)
                kept = await asyncio.wait_for(_read_until_probe(reader), PROBE_TIMEOUT_S)
        except TimeoutError:
            counts.probe_timeouts += 1
        except (ConnectionError, OSError):
            pass
        if not kept:
            counts.closed += 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            writer = reader = None


async def _watch(
    broker: BrokerUnderTest, counts: Counts, total: int, progress: Progress, max_rss_kib: int
) -> None:
    task = progress.add_task("fuzzing", total=total)
    reported = time.monotonic()
    while counts.frames < counts.target:
        await asyncio.sleep(0.5)
        if not broker.alive():
            counts.crashes += 1
            broker.start()
        rss = broker.rss_kib()
        counts.rss_kib = rss
        counts.peak_rss_kib = max(counts.peak_rss_kib, rss)
        if rss > max_rss_kib:
            counts.stopped_early = f"broker RSS {rss // 1024} MiB passed --max-rss-mib"
            counts.target = counts.frames  # the workers stop at their next frame
            break
        progress.update(
            task,
            completed=counts.frames,
            description=(
                f"frames · closed {counts.closed} · crashes {counts.crashes}"
                f" · rss {rss // 1024} MiB (peak {counts.peak_rss_kib // 1024})"
            ),
        )
        if not progress.console.is_terminal and time.monotonic() - reported >= 30:
            # Redirected to a file: a plain line now and then instead of a bar.
            reported = time.monotonic()
            progress.console.print(
                f"{counts.frames:,} frames, {counts.closed:,} closed, {counts.crashes} crashes,"
                f" {counts.probe_timeouts} probe timeouts, {broker.tracebacks()} tracebacks,"
                f" rss {rss // 1024} MiB (peak {counts.peak_rss_kib // 1024})"
            )
    progress.update(task, completed=counts.frames)


def fuzz_progress() -> Progress:
    """The bar a fuzzer shows on stderr (tools/fuzz_security.py's too)."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    return Progress(*columns, console=Console(stderr=True))


async def run(
    broker: BrokerUnderTest,
    templates: Templates,
    total: int,
    workers: int,
    seed: int,
    max_rss_mib: int,
) -> Counts:
    counts = Counts(start_rss_kib=broker.rss_kib(), target=total)
    max_request_bytes = 104_857_600
    with fuzz_progress() as progress:
        jobs = [
            _worker(
                broker, templates, random.Random(seed * 1000 + n), counts, total, max_request_bytes
            )
            for n in range(workers)
        ]
        watch = _watch(broker, counts, total, progress, max_rss_mib * 1024)
        await asyncio.gather(watch, *jobs)
    return counts


def seed(broker: BrokerUnderTest) -> uuid.UUID:
    """Create the samples' topic and give its partition data of every codec, some of it
    from message sets; the topic's id. On the fuzzed listener, logged in as the fuzzed
    connections are."""
    Topic = ProduceRequest.TopicProduceData
    # First a batch past fetch.ZERO_COPY_MIN_BYTES holding offset 1, which the samples fetch.
    sets = [(9, _records(value=bytes(1024), count=80))]
    sets += [(9, _records(c)) for c in (0, GZIP, 2, 3, ZSTD)]
    sets += [(2, _message_set(1, GZIP)), (1, _message_set(1, 3)), (0, _message_set(0, 2))]
    with socket.create_connection(("127.0.0.1", broker.fuzz_port), timeout=30) as sock:
        reader = sock.makefile("rb")

        def call(request: Any, response_class: Any) -> Any:
            request.with_header(correlation_id=1, client_id="fuzz-seed")
            body = bytes(request.encode(header=True))
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", reader.read(4))
            return response_class.decode(
                reader.read(size), version=request.API_VERSION, header=True
            )

        if broker.sasl_plain:
            for request, response_class in _login_requests():
                _check_login(request, call(request, response_class))
        Create = CreateTopicsRequest.CreatableTopic
        created = call(
            CreateTopicsRequest[7](
                topics=[
                    Create(
                        name="fuzz",
                        num_partitions=2,
                        replication_factor=1,
                        assignments=[],
                        configs=[],
                    )
                ],
                timeout_ms=10_000,
                validate_only=False,
            ),
            CreateTopicsResponse,
        )
        if created.topics[0].error_code != 0:
            raise SystemExit(f"creating the topic got error {created.topics[0].error_code}")
        for version, records in sets:
            request = ProduceRequest[version](
                transactional_id=None,
                acks=1,
                timeout_ms=5000,
                topic_data=[
                    Topic(
                        name="fuzz",
                        partition_data=[Topic.PartitionProduceData(index=1, records=records)],
                    )
                ],
            )
            code = call(request, ProduceResponse).responses[0].partition_responses[0].error_code
            if code != 0:
                raise SystemExit(f"seeding Produce v{version} got error {code}")
    return created.topics[0].topic_id


@dataclass
class InProcessCounts:
    frames: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    # (our outcome, kafka-python's): accepted, refused, or not decoded (a key or version
    # the broker does not serve; it closes the connection before decoding).
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    crashes: int = 0
    disagreements: int = 0
    # Decoded alike but for an array count below -1: null here, as in Kafka; kafka-python
    # reads an empty array.
    negative_counts: int = 0
    examples: list[str] = field(default_factory=list)


def _tree(value: Any) -> Any:
    """A decoded message as plain data, tags and unknown tags included."""
    if hasattr(value, "_struct"):
        version = value._version
        out = {"tags": value.tags, "unknown_tags": value.unknown_tags}
        for f in value._struct._fields:
            if version is None or f.for_version_q(version):
                out[f.name] = _tree(getattr(value, f.name))
        return out
    if isinstance(value, list):
        return [_tree(item) for item in value]
    return bytes(value) if isinstance(value, memoryview) else value


def _differences(ours: Any, theirs: Any) -> set[str]:
    """How two decoded trees differ: "negative count" where ours holds null and kafka-python's
    an empty list, "apart" anywhere else."""
    if isinstance(ours, dict) and isinstance(theirs, dict) and ours.keys() == theirs.keys():
        return set().union(*(_differences(ours[k], theirs[k]) for k in ours))
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return set().union(*(_differences(a, b) for a, b in zip(ours, theirs, strict=True)))
    if ours is None and theirs == []:
        return {"negative count"}
    return set() if ours == theirs else {"apart"}


def fuzz_in_process(templates: Templates, total: int, seed: int) -> InProcessCounts:
    """Decode spoiled frames here, with the broker's decoder and kafka-python's."""
    counts = InProcessCounts()
    rng = random.Random(seed)
    for _ in range(total):
        kind, frame, _ = spoil(templates, rng, 104_857_600)
        counts.frames += 1
        counts.kinds[kind] += 1
        body = frame[4:]
        try:
            prefix = read_prefix(body)
        except MalformedRequest:
            counts.outcomes["not decoded", "not decoded"] += 1
            continue
        api = APIS.get(prefix.api_key)
        if api is None or not api.min_version <= prefix.api_version <= api.max_version:
            counts.outcomes["not decoded", "not decoded"] += 1
            continue
        ours: Any = None
        try:
            ours = decode_request(body, prefix)
        except MalformedRequest:
            pass
        except Exception as exc:  # what the broker would log as an internal error
            counts.crashes += 1
            counts.examples.append(f"{api.name} v{prefix.api_version} {kind}: {exc!r}")
            continue
        theirs: Any = None
        if prefix.api_key in COMPILED_APIS:
            with contextlib.suppress(Exception):
                theirs = REQUESTS[prefix.api_key].decode(
                    body, version=prefix.api_version, header=True
                )
        else:
            theirs = ours and ours.body
        outcome = ("accepted" if ours else "refused", "accepted" if theirs else "refused")
        counts.outcomes[outcome] += 1
        differences = _differences(_tree(ours.body), _tree(theirs)) if ours and theirs else set()
        if "apart" in differences:
            counts.disagreements += 1
            if len(counts.examples) < 20:
                counts.examples.append(f"{api.name} v{prefix.api_version} {kind}: decoded apart")
        elif differences:
            counts.negative_counts += 1
    return counts


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _built(api_keys: frozenset[int], topic_id: uuid.UUID = ANY_TOPIC_ID) -> Templates:
    templates = build_templates(api_keys, topic_id)
    print(
        f"{len(templates.valid)} sample requests, {len(templates.nulls)} null-injected"
        f" requests ({templates.unbuildable} fields could not be sent as null)",
        file=sys.stderr,
    )
    return templates


def _api_keys(names: list[str] | None) -> frozenset[int]:
    if not names:
        return frozenset(APIS)
    if names == ["compiled"]:
        return COMPILED_APIS
    by_name = {api.name.lower(): api.key for api in APIS.values()}
    unknown = [n for n in names if n.lower() not in by_name]
    if unknown:
        raise SystemExit(f"--apis: no API named {', '.join(unknown)}")
    return frozenset(by_name[n.lower()] for n in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8, help="concurrent connections")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-log", type=Path, help="where to keep the broker's log")
    parser.add_argument(
        "--max-rss-mib", type=int, default=2048, help="stop early if the broker grows past this"
    )
    parser.add_argument(
        "--apis", nargs="+", help="API names to sample (Fetch, Heartbeat...), or: compiled"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting, as `herdless serve --set` takes it (e.g. the authorizer's)",
    )
    parser.add_argument(
        "--sasl-plain",
        action="store_true",
        help="fuzz on a SASL_PLAINTEXT listener, each connection logged in with PLAIN first",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="decode the frames here, beside kafka-python, instead of sending them",
    )
    args = parser.parse_args()

    api_keys = _api_keys(args.apis)
    if args.in_process:
        _report_in_process(_built(api_keys), args.frames, args.seed)
        return
    with tempfile.TemporaryDirectory(prefix="herdless-fuzz-") as tmp:
        log_path = args.keep_log or Path(tmp) / "broker.log"
        settings = tuple(arg for setting in args.set for arg in ("--set", setting))
        sasl_port = _free_port() if args.sasl_plain else None
        broker = BrokerUnderTest(
            Path(tmp) / "data", log_path, _free_port(), settings, sasl_port=sasl_port
        )
        broker.start()
        templates = _built(api_keys, seed(broker))
        started = time.monotonic()
        try:
            counts = asyncio.run(
                run(broker, templates, args.frames, args.workers, args.seed, args.max_rss_mib)
            )
        finally:
            code = broker.stop()
        elapsed = time.monotonic() - started
        tracebacks = broker.tracebacks()
        warnings = log_path.read_text(errors="replace").count(" WARNING ")
    kinds = ", ".join(f"{k} {counts.kinds[k]:,}" for k in KINDS)
    print(
        f"frames: {counts.frames:,} in {elapsed:.0f} s ({kinds})\n"
        f"connections closed by the broker: {counts.closed:,}\n"
        f"probe timeouts: {counts.probe_timeouts:,}\n"
        + (f"refused logins: {counts.failed_logins:,}\n" if args.sasl_plain else "")
        + f"crashes: {counts.crashes}\n"
        f"tracebacks in the broker log: {tracebacks}\n"
        f"WARNING lines in the broker log: {warnings:,}\n"
        f"broker RSS: {counts.start_rss_kib // 1024} MiB at start,"
        f" peak {counts.peak_rss_kib // 1024} MiB, last {counts.rss_kib // 1024} MiB\n"
        f"exit code on SIGTERM: {code}"
        + (f"\nstopped early: {counts.stopped_early}" if counts.stopped_early else "")
    )


def _report_in_process(templates: Templates, total: int, seed: int) -> None:
    started = time.monotonic()
    counts = fuzz_in_process(templates, total, seed)
    elapsed = time.monotonic() - started
    kinds = ", ".join(f"{k} {counts.kinds[k]:,}" for k in KINDS)
    outcomes = ", ".join(
        f"{ours} here / {theirs} by kafka-python {n:,}"
        for (ours, theirs), n in sorted(counts.outcomes.items())
    )
    print(
        f"frames: {counts.frames:,} in {elapsed:.0f} s ({kinds})\n"
        f"outcomes: {outcomes}\n"
        f"crashes (an error other than MalformedRequest): {counts.crashes}\n"
        f"accepted by both but decoded apart: {counts.disagreements}\n"
        f"accepted by both, alike but for an array count below -1 (null here, as in Kafka;"
        f" empty in kafka-python): {counts.negative_counts:,}"
    )
    for example in counts.examples[:20]:
        print(f"  {example}")


if __name__ == "__main__":
    main()
