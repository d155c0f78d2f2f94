"""Exactly-once Spark writes under SIGKILL, soaked: a streaming query copying a topic
through the herdless sink with transactionalIdPrefix is SIGKILLed at random moments
and restarted from its checkpoint, then the output, read with read_committed, is
compared with the input (tests/spark/eos_kills.py does the work):

    python bench/spark_eos_soak.py --cycles 20 [--seed N] [--rows 6000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.spark.eos_kills import CopyQuery, check_copy  # noqa: E402 - after the path is set
from tests.spark.kafka import create_topic, produce  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.soak import print_counts  # noqa: E402

PARTITIONS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--rows", type=int, default=6000)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    console = Console(width=140)
    console.print(f"seed {seed}, {args.cycles} SIGKILLs of the Spark driver, {args.rows} rows")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="herdless-spark-eos-soak-") as base:
        workdir = Path(base)
        broker = BrokerProcess(workdir / "data", "--set", "group.initial.rebalance.delay.ms=0")
        broker.start()
        try:
            inputs = [f"row-{i}".encode() for i in range(args.rows)]
            create_topic(broker.bootstrap, "soak-in", PARTITIONS)
            create_topic(broker.bootstrap, "soak-out", PARTITIONS)
            produce(
                broker.bootstrap,
                "soak-in",
                ((None, v, i % PARTITIONS) for i, v in enumerate(inputs)),
            )
            query = CopyQuery(broker.bootstrap, "soak-in", "soak-out", PARTITIONS, workdir)
            for cycle in range(args.cycles):
                query.run_and_kill(rng)
                console.print(f"kill {cycle + 1} at {time.monotonic() - started:.0f}s")
            query.run_to_end()
            report = check_copy(broker.bootstrap, inputs, "soak-out", PARTITIONS, args.cycles)
            tracebacks = broker.log().count("Traceback")
        finally:
            broker.kill()
    counts = {**report.counts(), "tracebacks in the broker log": tracebacks}
    print_counts(console, f"{args.cycles} SIGKILLs of a Spark query (seed {seed})", counts)
    console.print(f"{time.monotonic() - started:.0f}s")
    for line in report.details[:20]:
        console.print(line)
    clean = not (report.missing or report.duplicated or tracebacks)
    sys.exit(0 if clean and report.outputs == len(inputs) else 1)


if __name__ == "__main__":
    main()
