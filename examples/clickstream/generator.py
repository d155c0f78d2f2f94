"""Produce click events to a topic: JSON values keyed by user, as a web front end would.

python examples/clickstream/generator.py --rate 200 --seconds 120
python examples/clickstream/generator.py --count 10000        # as fast as possible
"""

from __future__ import annotations

import argparse
import json
import random
import time

from confluent_kafka import Producer

PAGES = ["/", "/search", "/product/42", "/product/7", "/cart", "/checkout", "/help"]
# Most visitors browse, few buy: a skewed page mix makes the counts worth looking at.
WEIGHTS = [30, 20, 15, 15, 10, 5, 5]


def click(rng: random.Random) -> tuple[bytes, bytes]:
    user = f"user-{rng.randrange(500)}"
    event = {
        "user": user,
        "page": rng.choices(PAGES, WEIGHTS)[0],
        "ts": int(time.time() * 1000),
    }
    return user.encode(), json.dumps(event).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", "-b", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--rate", type=float, default=0, help="events per second (0: unpaced)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--count", type=int, default=None, help="stop after this many events")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if args.seconds is None and args.count is None:
        parser.error("give --seconds or --count")

    rng = random.Random(args.seed)
    producer = Producer(
        {"bootstrap.servers": args.bootstrap_server, "enable.idempotence": True, "linger.ms": 10}
    )
    started = time.monotonic()
    sent = 0
    while (args.count is None or sent < args.count) and (
        args.seconds is None or time.monotonic() - started < args.seconds
    ):
        key, value = click(rng)
        try:
            producer.produce(args.topic, value, key)
        except BufferError:
            producer.poll(0.1)
            continue
        sent += 1
        producer.poll(0)
        if args.rate:
            # Pace against the start time, so slow moments are caught up.
            ahead = started + sent / args.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    if producer.flush(30):
        raise SystemExit("some events were not acknowledged by the broker")
    print(f"produced {sent} click events to {args.topic} in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
