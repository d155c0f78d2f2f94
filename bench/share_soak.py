"""A share group under SIGKILL, soaked: four ShareConsumer members accepting numbered
records on a three-broker cluster while members, share-partition leaders and the brokers
of the share coordinator are SIGKILLed at random, then every record counted
(tests/support/share_checker.py says what each count means):

    python bench/share_soak.py --cycles 100 [--seed N]      # needs ZooKeeper, as the suite

Exits 1, keeping the brokers' and members' logs, if a record was lost, delivered again
after its acceptance was confirmed, both accepted and archived, or the persisted state
disagrees.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.cluster import running_cluster  # noqa: E402 - after the path is set
from tests.support.share_checker import CLUSTER_SETTINGS, run  # noqa: E402
from tests.support.soak import print_counts, seeded_cycles  # noqa: E402


def main() -> None:
    cycles, seed, rng = seeded_cycles(__doc__.split("\n")[0])
    console = Console(width=160)
    console.print(f"seed {seed}, {cycles} cycles")
    base = tempfile.mkdtemp(prefix="herdless-share-soak-")
    workdir = Path(base)
    with Progress(console=console) as progress:
        task = progress.add_task("SIGKILL cycles", total=cycles)

        def advance(fault: str) -> None:
            progress.advance(task)
            progress.update(task, description=fault[:60])

        with running_cluster(workdir / "cluster", **CLUSTER_SETTINGS) as cluster:
            report = run(cluster, workdir, cycles, rng, advance=advance)
            logs = [process.log() for process in cluster.brokers.values()]
    tracebacks = sum(log.count("Traceback") for log in logs)
    counts = {**report.counts(), "tracebacks in broker logs": tracebacks}
    print_counts(console, f"{cycles} SIGKILL cycles (seed {seed})", counts)
    for line in report.details[:20]:
        console.print(line)
    clean = report.clean and not tracebacks
    if clean:
        shutil.rmtree(base, ignore_errors=True)
    else:
        console.print(f"logs kept in {base}")
    sys.exit(0 if clean else 1)


if __name__ == "__main__":
    main()
