"""Exactly once under SIGKILL, soaked: consume-transform-produce with confluent-kafka's
`send_offsets_to_transaction`, killed at random, then every input record counted.

Runs an idempotent writer into an input topic and two transformer processes
(tests/support/transformer.py) that copy it into an output topic, each batch in a
transaction with the consumer group's offsets. Each cycle waits a random moment and
SIGKILLs one of: a transformer (started again with the same transactional id, which
fences the killed one); on one broker, the broker; on a three-broker cluster, the
leader of an output partition or the broker of a transformer's transaction
coordinator (started again 0.2-2 s later). At the end the transformers catch up and
the output, read with read_committed, is compared with the input:

    python bench/txn_soak.py --cycles 100 [--seed N]            # one broker
    python bench/txn_soak.py --cycles 100 --brokers 3           # a cluster (needs ZooKeeper)
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.broker import BrokerProcess  # noqa: E402 - after the path is set
from tests.support.cluster import running_cluster  # noqa: E402
from tests.support.exactly_once import (  # noqa: E402
    Cluster,
    ExactlyOnceReport,
    OneBroker,
    System,
    Transformers,
    run,
)
from tests.support.soak import print_counts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    console = Console(width=140)
    console.print(f"seed {seed}, {args.cycles} cycles, {args.brokers} broker(s)")
    # Kept after a run that found something: the brokers' and transformers' logs.
    base = tempfile.mkdtemp(prefix="herdless-txn-soak-")
    workdir = Path(base)
    with Progress(console=console) as progress:
        task = progress.add_task("SIGKILL cycles", total=args.cycles)

        def advance(fault: str) -> None:
            progress.advance(task)
            progress.update(task, description=fault[:60])

        if args.brokers == 1:
            broker = BrokerProcess(
                workdir / "data", "--set", "group.initial.rebalance.delay.ms=0"
            ).start()
            try:
                report, _ = _run(OneBroker(broker), workdir, args, seed, advance)
            finally:
                broker.kill()
            logs = [broker.log()]
        else:
            with running_cluster(workdir / "cluster") as cluster:
                system = Cluster(cluster, "eos-output", 3)
                report, _ = _run(system, workdir, args, seed, advance)
                logs = [process.log() for process in cluster.brokers.values()]
    tracebacks = sum(log.count("Traceback") for log in logs)
    counts = {**report.counts(), "tracebacks in broker logs": tracebacks}
    print_counts(console, f"{args.cycles} SIGKILL cycles (seed {seed})", counts)
    for line in report.details[:20]:
        console.print(line)
    clean = report.clean and not tracebacks
    if clean:
        shutil.rmtree(base, ignore_errors=True)
    else:
        console.print(f"logs kept in {base}")
    sys.exit(0 if clean else 1)


def _run(
    system: System,
    workdir: Path,
    args: argparse.Namespace,
    seed: int,
    advance: Callable[[str], None],
) -> tuple[ExactlyOnceReport, Transformers]:
    replication = 3 if args.brokers == 3 else 1
    return run(
        system,
        workdir,
        args.cycles,
        random.Random(seed),
        replication_factor=replication,
        advance=advance,
    )


if __name__ == "__main__":
    main()
