"""A real cluster on 127.0.0.1 for the suite: herdless.testing's cluster, with the
settings and extras the cluster tests share."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from herdless.testing import BrokerProcess, HerdlessCluster, free_port

# Short timeouts, so that failures are detected (and tests finish) in seconds.
SESSION_TIMEOUT_MS = 4000
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "offsets.topic.num.partitions": "6",
}


class ClusterProcesses(HerdlessCluster):
    def __init__(self, base_dir: Path, brokers: int = 3, **settings: str) -> None:
        # Where each broker serves its Prometheus metrics.
        self.metrics_ports: dict[int, int] = {}
        super().__init__(base_dir, brokers, {**BROKER_SETTINGS, **settings})

    def broker_process(self, broker_id: int, *extra_args: str) -> BrokerProcess:
        """The cluster's broker, given a metrics port of its own."""
        self.metrics_ports[broker_id] = free_port()
        return super().broker_process(
            broker_id, "--metrics-port", str(self.metrics_ports[broker_id]), *extra_args
        )

    def add_broker(self, broker_id: int, *extra_args: str) -> BrokerProcess:
        """A broker of this cluster, not started (one that never comes up)."""
        self.brokers[broker_id] = process = self.broker_process(broker_id, *extra_args)
        return process

    def wait_serving(self, *topics: str, timeout: float = 60.0) -> float:
        """Seconds until every broker is registered and each partition of `topics` has a
        live leader and all its replicas in the ISR again."""
        started = time.monotonic()
        self.wait_for(
            lambda m: (
                len(m.brokers) == len(self.brokers)
                and all(
                    p.leader in m.brokers and len(p.isrs) == len(p.replicas)
                    for topic in topics
                    for p in m.topics[topic].partitions.values()
                )
            ),
            timeout,
            what=f"every partition of {', '.join(topics)} led, ISRs full",
        )
        return time.monotonic() - started

    def stop(self) -> None:
        """SIGKILL everything: the tests are done with it and want no wait."""
        for process in self.brokers.values():
            with contextlib.suppress(Exception):
                process.resume()
                process.kill()
        with contextlib.suppress(Exception):
            self.zookeeper.kill()


@contextlib.contextmanager
def running_cluster(
    base_dir: Path, brokers: int = 3, **settings: str
) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(base_dir, brokers, **settings)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
