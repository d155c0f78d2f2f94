"""One Marshal consumer in its own OS process, for tests that SIGKILL it.

Every record it processes is appended to --out as "partition offset", one
os.write per record so that a SIGKILL loses nothing already written. SIGTERM
closes the consumer gracefully (releasing its claims) and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

from herdless.marshal import ClaimStrategy, Marshaler, Mode


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--mode", choices=[m.value for m in Mode], default="at-least-once")
    parser.add_argument("--strategy", choices=[s.value for s in ClaimStrategy], default="fair")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--coordination-topic", default="__marshal")
    parser.add_argument("--coordination-partitions", type=int, default=4)
    parser.add_argument("--max-batch", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="processing time per record")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format=f"%(asctime)s {args.client_id} %(message)s"
    )

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    out = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with Marshaler(
        args.bootstrap,
        coordination_topic=args.coordination_topic,
        coordination_partitions=args.coordination_partitions,
    ) as marshaler:
        consumer = marshaler.consumer(
            args.group,
            [args.topic],
            args.client_id,
            heartbeat_interval=args.interval,
            mode=Mode(args.mode),
            strategy=ClaimStrategy(args.strategy),
            max_batch=args.max_batch,
        )
        while not stop.is_set():
            batch = consumer.poll(0.2)
            if batch is None:
                continue
            for record in batch.records:
                if args.delay_ms:
                    time.sleep(args.delay_ms / 1000)
                os.write(out, f"{record.partition} {record.offset}\n".encode())
    os.close(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
