"""One consumer-group member in its own OS process, for the group integration tests.

Run as ``python tests/support/member.py --client confluent-kafka ...``. The member
subscribes to one topic and then:

- prints one JSON line to stdout for every event: ``started``, each change of
  its assignment (``assign``, ``revoke``, ``lost``, carrying the change, the
  whole assignment after it, the generation and member id as the client sees
  them), each acknowledged commit (``committed``: the offsets, and the
  coordinator's broker id where the client tells it), ``commit_retry``,
  ``commit_failed``, ``error`` and finally ``closed``;
- processes records by appending ``partition offset value`` lines to ``--out``
  and flushing it, and only then commits the next offsets synchronously
  (commit after process), retrying while the coordinator is away or moving as
  an application would; partitions being revoked get a last commit of
  anything processed but not yet committed;
- on SIGTERM finishes the batch in hand, closes the consumer (which leaves the
  group, or for a static member just disconnects) and exits 0.

With ``--group-protocol consumer`` (confluent-kafka only) the member joins a KIP-848
consumer group; its ``generation`` is then its member epoch, its own, not the group's.

It imports nothing from the tests package, only kafka_python.py beside it, so it
runs as a plain script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
POLL_TIMEOUT_S = 0.2
MAX_BATCH = 500
# How long a commit is retried while its errors say "try again" (the coordinator is
# away, loading or moving): longer than a coordinator failover on a loaded machine.
COMMIT_RETRY_S = 60.0
COMMIT_RETRY_BACKOFF_S = 0.1


class Reporter:
    """Event lines on stdout, processed records in the output file."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.owned: set[int] = set()
        # Processed but not yet committed: partition -> next offset to commit.
        self.uncommitted: dict[int, int] = {}

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "time": time.time(), **fields})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def change(
        self,
        kind: str,
        partitions: Iterable[int],
        generation: int | None,
        member_id: str | None,
    ) -> None:
        delta = sorted(set(partitions))
        if kind == "assign":
            self.owned |= set(delta)
        else:
            self.owned -= set(delta)
        self.emit(
            kind,
            delta=delta,
            partitions=sorted(self.owned),
            generation=generation,
            member_id=member_id,
        )

    def process(self, records: Iterable[tuple[int, int, bytes | None]]) -> dict[int, int]:
        """Record what was consumed; returns the offsets to commit now."""
        positions: dict[int, int] = {}
        for partition, offset, value in records:
            text = (value or b"").decode(errors="replace")
            self.out.write(f"{partition} {offset} {text}\n")
            positions[partition] = max(positions.get(partition, -1), offset + 1)
        self.out.flush()
        self.uncommitted.update(positions)
        return dict(self.uncommitted)

    def committed(self, offsets: dict[int, int], coordinator: int | None) -> None:
        self.emit("committed", offsets=offsets, coordinator=coordinator)
        for partition, offset in offsets.items():
            if self.uncommitted.get(partition) == offset:
                del self.uncommitted[partition]

    def pending_for(self, partitions: Iterable[int]) -> dict[int, int]:
        return {p: self.uncommitted[p] for p in partitions if p in self.uncommitted}


def commit_with_retries(
    reporter: Reporter,
    offsets: dict[int, int],
    send: Callable[[], None],
    retriable: Callable[[Exception], bool],
    coordinator: Callable[[], int | None],
) -> None:
    """Commit `offsets` with `send`, again after errors that say "try again"; report how it
    ended: ``committed`` (with the coordinator that took it, where known) or ``commit_failed``."""
    if not offsets:
        return
    deadline = time.monotonic() + COMMIT_RETRY_S
    while True:
        try:
            send()
        except Exception as exc:  # noqa: BLE001 - each client raises its own kinds
            if retriable(exc) and time.monotonic() < deadline:
                reporter.emit("commit_retry", offsets=offsets, error=repr(exc))
                time.sleep(COMMIT_RETRY_BACKOFF_S)
                continue
            reporter.emit("commit_failed", offsets=offsets, error=repr(exc))
            return
        reporter.committed(offsets, coordinator())
        return


def python_assignors(names: str | None, by_name: dict[str, Any]) -> tuple[Any, ...] | None:
    """The assignor classes for a comma-separated list of names (None: the client's default)."""
    if not names:
        return None
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise SystemExit(f"assignors {unknown} not available; known: {sorted(by_name)}")
    return tuple(by_name[n] for n in names.split(","))


def install_stop_flag() -> list[bool]:
    stop = [False]

    def on_term(_signum: int, _frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    return stop


# -- confluent-kafka (librdkafka) ---------------------------------------------


def ck_generation(consumer: Any) -> int | None:
    """The generation from librdkafka's serialized group metadata.

    ``consumer_group_metadata()`` returns ``b"CGMDv2:" + int32 generation (host
    order) + group id, member id and instance id, each NUL-terminated``.
    """
    try:
        raw = consumer.consumer_group_metadata()
    except Exception:  # noqa: BLE001 - the generation is a diagnostic extra
        return None
    if not isinstance(raw, bytes) or not raw.startswith(b"CGMDv2:"):
        return None
    return struct.unpack_from("=i", raw, 7)[0]


def run_confluent(args: argparse.Namespace, reporter: Reporter) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    # Errors after which the same commit may succeed: no coordinator known yet, or it
    # moved, is loading or is unreachable. Listed because confluent-kafka reports every
    # commit error with retriable() False.
    retry_codes = {
        KafkaError._WAIT_COORD,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        # KIP-848: a heartbeat gave the member a new epoch while its commit was on the way
        # with the old one. librdkafka does not retry a manual commit that gets it, but
        # documents it as retriable (rd_kafka_commit() in rdkafka.h) and sends a heartbeat
        # at once, so the next try carries the new epoch. The partitions are still ours:
        # no revocation completes while this loop keeps the consumer out of poll().
        KafkaError.STALE_MEMBER_EPOCH,
    }

    def retriable(exc: Exception) -> bool:
        error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        return isinstance(error, KafkaError) and (error.retriable() or error.code() in retry_codes)

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": args.max_poll_interval_ms,
    }
    if args.group_protocol == "consumer":
        # KIP-848: the broker sets sessions and heartbeats and runs the assignor.
        config["group.protocol"] = "consumer"
        if args.assignor:
            config["group.remote.assignor"] = args.assignor
    else:
        config["session.timeout.ms"] = args.session_timeout_ms
        config["heartbeat.interval.ms"] = args.heartbeat_interval_ms
        if args.assignor:
            config["partition.assignment.strategy"] = args.assignor
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)
    stop = install_stop_flag()

    def commit(offsets: dict[int, int]) -> None:
        commit_with_retries(
            reporter,
            offsets,
            lambda: consumer.commit(
                offsets=[TopicPartition(args.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            ),
            retriable,
            lambda: None,  # librdkafka does not say which broker coordinates
        )

    def on_assign(c: Any, partitions: list[Any]) -> None:
        reporter.change(
            "assign", (tp.partition for tp in partitions), ck_generation(c), c.memberid()
        )

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        commit(reporter.pending_for(tp.partition for tp in partitions))
        reporter.change(
            "revoke", (tp.partition for tp in partitions), ck_generation(c), c.memberid()
        )

    def on_lost(c: Any, partitions: list[Any]) -> None:
        reporter.change("lost", (tp.partition for tp in partitions), ck_generation(c), None)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    reporter.emit("started", pid=os.getpid(), client=args.client)
    while not stop[0]:
        messages = consumer.consume(MAX_BATCH, timeout=POLL_TIMEOUT_S)
        records = []
        for message in messages:
            if message.error() is not None:
                reporter.emit("error", error=str(message.error()))
                continue
            records.append((message.partition(), message.offset(), message.value()))
        if records:
            commit(reporter.process(records))
    consumer.close()


# -- kafka-python -------------------------------------------------------------


def python_client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The consumer settings kafka-python and aiokafka share, under the same names."""
    options: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap,
        "group_id": args.group,
        "client_id": args.name,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "max_poll_interval_ms": args.max_poll_interval_ms,
    }
    if args.instance_id:
        options["group_instance_id"] = args.instance_id
    return options


def kafka_python_broker_id(node_id: int | str | None) -> int | None:
    """kafka-python names its coordinator connection "coordinator-<broker id>"."""
    if node_id is None:
        return None
    return int(str(node_id).removeprefix("coordinator-"))


def run_kafka_python(args: argparse.Namespace, reporter: Reporter) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka_python import subscribe_safely  # beside this script

    options = python_client_options(args)
    options["partition_assignment_strategy"] = python_assignors(
        args.assignor, {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    ) or (RangePartitionAssignor, RoundRobinPartitionAssignor)
    consumer = KafkaConsumer(**options)
    stop = install_stop_flag()

    def identity() -> tuple[int | None, str | None]:
        meta = consumer.group_metadata()
        return meta.generation_id, meta.member_id

    def commit(offsets: dict[int, int]) -> None:
        # commit() already retries retriable errors until its timeout (KafkaTimeoutError,
        # itself retriable); membership errors (a rebalance) are not retriable.
        commit_with_retries(
            reporter,
            offsets,
            lambda: consumer.commit(
                {
                    TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1)
                    for p, o in offsets.items()
                }
            ),
            lambda exc: bool(getattr(exc, "retriable", False)),
            lambda: kafka_python_broker_id(consumer._coordinator.coordinator_id),  # noqa: SLF001
        )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            commit(reporter.pending_for(tp.partition for tp in revoked))
            reporter.change("revoke", (tp.partition for tp in revoked), *identity())

        def on_partitions_assigned(self, assigned: Any) -> None:
            # Eager assignors hand over the whole assignment after revoking everything.
            reporter.change("assign", (tp.partition for tp in assigned), *identity())

        def on_partitions_lost(self, lost: Any) -> None:
            reporter.change("lost", (tp.partition for tp in lost), *identity())

    subscribe_safely(consumer, [args.topic], listener=Listener())
    reporter.emit("started", pid=os.getpid(), client=args.client)
    while not stop[0]:
        batches = consumer.poll(timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=MAX_BATCH)
        records = [(tp.partition, m.offset, m.value) for tp, ms in batches.items() for m in ms]
        if records:
            commit(reporter.process(records))
    consumer.close()


# -- aiokafka ------------------------------------------------------------------


async def run_aiokafka_async(args: argparse.Namespace, reporter: Reporter) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata

    options = python_client_options(args)
    assignors = python_assignors(
        args.assignor, {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    )
    if assignors:
        options["partition_assignment_strategy"] = assignors
    consumer = AIOKafkaConsumer(**options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def identity() -> tuple[int | None, str | None]:
        coordinator = consumer._coordinator  # noqa: SLF001 - no public accessor
        if coordinator is None:
            return None, None
        return coordinator.generation, coordinator.member_id

    async def commit(offsets: dict[int, int]) -> None:
        # commit() itself retries retriable errors for as long as it takes; what it
        # raises is final (membership errors: the group rebalanced).
        if not offsets:
            return
        try:
            await consumer.commit(
                {
                    TopicPartition(args.topic, p): OffsetAndMetadata(o, "")
                    for p, o in offsets.items()
                }
            )
        except KafkaError as exc:
            reporter.emit("commit_failed", offsets=offsets, error=repr(exc))
            return
        coordinator = consumer._coordinator  # noqa: SLF001 - no public accessor
        reporter.committed(offsets, coordinator.coordinator_id if coordinator else None)

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await commit(reporter.pending_for(tp.partition for tp in revoked))
            reporter.change("revoke", (tp.partition for tp in revoked), *identity())

        async def on_partitions_assigned(self, assigned: Any) -> None:
            reporter.change("assign", (tp.partition for tp in assigned), *identity())

    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    reporter.emit("started", pid=os.getpid(), client=args.client)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(
                timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=MAX_BATCH
            )
            records = [(tp.partition, m.offset, m.value) for tp, ms in batches.items() for m in ms]
            if records:
                await commit(reporter.process(records))
    finally:
        await consumer.stop()


def run_aiokafka(args: argparse.Namespace, reporter: Reporter) -> None:
    asyncio.run(run_aiokafka_async(args, reporter))


RUNNERS = {
    "confluent-kafka": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--name", required=True, help="client id, unique within the test")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True, help="file of processed records")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--max-poll-interval-ms", type=int, default=60_000)
    parser.add_argument("--instance-id", help="group.instance.id: a static member")
    parser.add_argument(
        "--assignor",
        help="partition.assignment.strategy: librdkafka's names; range or roundrobin otherwise",
    )
    parser.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="consumer: KIP-848's protocol (confluent-kafka only); --assignor is then the"
        " broker's assignor and the session and heartbeat options are the broker's",
    )
    parser.add_argument("--log-level", default="INFO", help="Python client logging, to stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s",
    )
    with open(args.out, "a", encoding="utf-8") as out:
        reporter = Reporter(out)
        RUNNERS[args.client](args, reporter)
        reporter.emit("closed", uncommitted=reporter.uncommitted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
