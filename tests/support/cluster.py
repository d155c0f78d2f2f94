"""A real cluster on 127.0.0.1: Debian's ZooKeeper and N herdless broker processes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from tests.support.broker import BrokerProcess, free_port
from tests.support.zookeeper import ZooKeeperProcess

T = TypeVar("T")

# Short timeouts, so that failures are detected (and tests finish) in seconds.
SESSION_TIMEOUT_MS = 4000
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "zookeeper.connection.timeout.ms": "10000",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
}


class ClusterProcesses:
    def __init__(self, base_dir: Path, brokers: int = 3, **settings: str) -> None:
        self.base_dir = base_dir
        self.zookeeper = ZooKeeperProcess(base_dir / "zookeeper")
        self.settings = {**BROKER_SETTINGS, **settings}
        self.brokers: dict[int, BrokerProcess] = {}
        # Where each broker serves its Prometheus metrics.
        self.metrics_ports: dict[int, int] = {}
        for broker_id in range(1, brokers + 1):
            self.add_broker(broker_id)

    def add_broker(self, broker_id: int, *extra_args: str) -> BrokerProcess:
        args = ["--zookeeper", self.zookeeper.connect, "--broker-id", str(broker_id)]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        self.metrics_ports[broker_id] = free_port()
        args += ["--metrics-port", str(self.metrics_ports[broker_id])]
        process = BrokerProcess(self.base_dir / f"broker-{broker_id}", *args, *extra_args)
        self.brokers[broker_id] = process
        return process

    def start(self) -> ClusterProcesses:
        self.zookeeper.start()
        for process in self.brokers.values():
            process.start()
        self.wait_for(
            lambda m: len(m.brokers) == len(self.brokers) and m.controller_id >= 0,
            timeout=60,
            what="every broker registered and a controller elected",
        )
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.brokers.values() if p.alive())

    def metadata(self, topic: str | None = None) -> ClusterMetadata:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return admin.list_topics(topic, timeout=10)

    def wait_for(
        self, predicate: Callable[[ClusterMetadata], T], timeout: float = 30.0, what: str = ""
    ) -> T:
        """Poll the cluster's metadata until `predicate` holds; return its value."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = predicate(self.metadata())
                if result:
                    return result
            except Exception as exc:  # a broker down, metadata not there yet
                last = exc
            time.sleep(0.1)
        raise AssertionError(
            f"cluster did not reach {what or predicate} within {timeout}s (last error: {last})\n"
            + self.logs()
        )

    def create_topic(
        self, name: str, partitions: int, replication_factor: int = 3, **configs: str
    ) -> None:
        """Create a topic; return once every partition has a leader and a full ISR."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        new = NewTopic(name, partitions, replication_factor, config=configs)
        admin.create_topics([new], operation_timeout=20)[name].result(timeout=30)
        self.wait_for(
            lambda m: (
                name in m.topics
                and len(m.topics[name].partitions) == partitions
                and all(
                    p.leader >= 0 and len(p.isrs) == replication_factor
                    for p in m.topics[name].partitions.values()
                )
            ),
            what=f"{name} online with full ISRs",
        )

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
            timeout=timeout,
            what=f"every partition of {', '.join(topics)} led, ISRs full",
        )
        return time.monotonic() - started

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader, once the cluster names one."""

        def leader(m: ClusterMetadata) -> tuple[int] | None:
            found = m.topics[topic].partitions[partition].leader
            return (found,) if found >= 0 else None  # a truthy answer, even for broker 0

        (found,) = self.wait_for(leader, what=f"a leader of {topic}-{partition}")
        return found

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        process = self.brokers[broker_id].process
        assert process is not None
        os.kill(process.pid, signal.SIGCONT)

    def logs(self) -> str:
        parts = [f"--- zookeeper ---\n{self.zookeeper.log()}"]
        for broker_id, process in self.brokers.items():
            parts.append(f"--- broker {broker_id} ---\n{process.log()}")
        return "\n".join(parts)

    def stop(self) -> None:
        for process in self.brokers.values():
            with contextlib.suppress(Exception):
                if process.process is not None and process.alive():
                    self.resume_quietly(process)
                    process.kill()
        with contextlib.suppress(Exception):
            self.zookeeper.kill()

    @staticmethod
    def resume_quietly(process: BrokerProcess) -> None:
        assert process.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.process.pid, signal.SIGCONT)


@contextlib.contextmanager
def running_cluster(
    base_dir: Path, brokers: int = 3, **settings: str
) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(base_dir, brokers, **settings)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
