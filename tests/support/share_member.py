"""A member of a share group in a process of its own, for tests that SIGKILL it.

confluent-kafka's ShareConsumer with explicit acknowledgement. Every record it is given
is reported at once (`got`); in `accept` mode it then accepts each and commits with
commit_sync, and reports an acceptance (`accepted`) only once the acknowledgement
commit callback has said the broker took it. In `hold` mode it acknowledges nothing
and stops polling after the first records, holding their locks until it is killed.

    python tests/support/share_member.py BOOTSTRAP GROUP TOPIC REPORT NAME accept|hold

Each report is one line, appended with one write(2) to a file several members share:
`<unix time> <name> got|accepted <partition> <offset> <delivery count> <value>`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer, TopicPartition

# A record takes this long to process, so that kills land while records are held.
PROCESSING_S = 0.002
COMMIT_TIMEOUT_S = 30.0


class Reports:
    def __init__(self, path: str, name: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._name = name

    def say(self, what: str, partition: int, offset: int, count: int, value: bytes) -> None:
        line = (
            f"{time.time():.6f} {self._name} {what} {partition} {offset} {count}"
            f" {value.decode(errors='replace')}\n"
        )
        os.write(self._fd, line.encode())


def main(argv: list[str]) -> int:
    bootstrap, group, topic, report_path, name, mode = argv
    reports = Reports(report_path, name)
    quiet = logging.getLogger("share-member-client")
    quiet.setLevel(logging.CRITICAL)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "share.acknowledgement.mode": "explicit",
            "logger": quiet,
        }
    )
    # (partition, offset) -> (delivery count, value), until the broker confirms it.
    pending: dict[tuple[int, int], tuple[int, bytes]] = {}

    def confirmed(offsets: dict[TopicPartition, set[int]], error: Any) -> None:
        for tp, acknowledged in offsets.items():
            for offset in sorted(acknowledged):
                count, value = pending.pop((tp.partition, offset), (0, b""))
                if error is None:
                    reports.say("accepted", tp.partition, offset, count, value)
        if error is not None:
            print(f"{name}: acknowledgement failed: {error}", file=sys.stderr, flush=True)

    consumer.set_acknowledgement_commit_callback(confirmed)
    consumer.subscribe([topic])
    while True:
        messages = consumer.poll(0.5)
        taken = [m for m in messages if m.error() is None]
        for message in messages:
            if message.error() is not None:
                print(f"{name}: {message.error()}", file=sys.stderr, flush=True)
        for message in taken:
            value = message.value() or b""
            reports.say(
                "got", message.partition(), message.offset(), message.delivery_count(), value
            )
        if mode == "hold":
            if taken:
                while True:  # hold the locks until killed
                    time.sleep(60)
            continue
        for message in taken:
            time.sleep(PROCESSING_S)
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            pending[(message.partition(), message.offset())] = (
                message.delivery_count(),
                message.value() or b"",
            )
        if taken:
            try:
                consumer.commit_sync(COMMIT_TIMEOUT_S)
            except Exception as exc:  # a broker down: the callback said which, poll goes on
                print(f"{name}: commit_sync: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
