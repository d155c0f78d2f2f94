"""Exactly once through SIGKILL: confluent-kafka's consume-transform-produce loop with
`send_offsets_to_transaction`, its transformers, partition leaders and transaction
coordinators killed at random moments, on one broker and on a three-broker cluster.

The short form of bench/txn_soak.py: the output read with read_committed holds every
input record exactly once, no record of an aborted transaction, and the group's
committed offsets name exactly the input records that are in it.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.support.broker import BrokerProcess
from tests.support.cluster import running_cluster
from tests.support.exactly_once import Cluster, OneBroker, run

CYCLES = 8


def test_exactly_once_on_one_broker_through_sigkills(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    broker = BrokerProcess(tmp_path / "data", "--set", "group.initial.rebalance.delay.ms=0").start()
    faults: list[str] = []
    try:
        report, transformers = run(
            OneBroker(broker), tmp_path, CYCLES, random.Random(seed), advance=faults.append
        )
    finally:
        broker.kill()
    assert report.clean, f"seed {seed}; faults {faults}\n{report}"
    assert report.inputs > 0 and report.committed_transactions > 0
    assert "Traceback" not in broker.log()


def test_exactly_once_on_a_cluster_through_sigkills(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    faults: list[str] = []
    with running_cluster(tmp_path / "cluster") as cluster:
        report, transformers = run(
            Cluster(cluster, "eos-output", 3),
            tmp_path,
            CYCLES,
            random.Random(seed),
            replication_factor=3,
            advance=faults.append,
        )
        logs = [process.log() for process in cluster.brokers.values()]
    assert report.clean, f"seed {seed}; faults {faults}\n{report}"
    assert report.inputs > 0 and report.committed_transactions > 0
    assert not [log for log in logs if "Traceback" in log]
