"""One racer process: at agreed wall-clock moments, claim the same partition as everyone.

Prints "ready" once connected, then reads the moment of the first round (wall-clock
seconds) from stdin, and prints "<round> <client> won|lost" per round.
"""

from __future__ import annotations

import sys
import time

from herdless.marshal.consumer import try_claim
from herdless.marshal.log import CoordinationLog
from herdless.marshal.rationalizer import ClaimKey

SPACING_S = 0.5


def main() -> int:
    bootstrap, client, rounds, partitions = sys.argv[1:5]
    coordination = CoordinationLog(bootstrap, partitions=int(partitions))
    try:
        print("ready", flush=True)
        start_at = sys.stdin.readline()
        for round_ in range(int(rounds)):
            time.sleep(max(0.0, float(start_at) + round_ * SPACING_S - time.time()))
            key = ClaimKey("race", "contested", round_)
            _, position = try_claim(coordination, key, client, 10_000)
            print(round_, client, "won" if position is not None else "lost", flush=True)
    finally:
        coordination.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
