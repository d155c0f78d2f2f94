"""A share group on a three-broker cluster through SIGKILLs of its members, the leaders
of its share partitions and the brokers of its share coordinator, checked by
tests/support/share_checker.py: every record accepted once or archived, none delivered
again after its acceptance was confirmed, none lost, and the persisted state agreeing.

The short form of bench/share_soak.py.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.support.cluster import running_cluster
from tests.support.share_checker import CLUSTER_SETTINGS, run

CYCLES = 4


def test_a_share_group_through_sigkills_on_a_cluster(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    faults: list[str] = []
    with running_cluster(tmp_path / "cluster", **CLUSTER_SETTINGS) as cluster:
        report = run(cluster, tmp_path, CYCLES, random.Random(seed), advance=faults.append)
        logs = {broker_id: process.log() for broker_id, process in cluster.brokers.items()}
    print(report)
    assert report.clean, f"seed {seed}; faults {faults}\n{report}"
    assert report.accepted > 0
    assert report.produced == report.accepted + report.archived + report.settled_unreported
    assert not [broker_id for broker_id, log in logs.items() if "Traceback" in log]
