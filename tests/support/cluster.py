"""A real cluster for the suite: herdless.testing's cluster, with the settings and
extras the cluster tests share, on 127.0.0.1 or in a network lab where tests can
partition it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from herdless.testing import BrokerProcess, HerdlessCluster, free_port
from herdless.testing.zookeeper import ZooKeeperProcess
from tests.support.checker import (
    Writer,
    check,
    divergent_partitions,
    high_watermarks,
    read_partitions,
)
from tests.support.network import NetworkLab, NetworkLabUnavailable

# ZooKeeper's node in a LabCluster's network lab; broker N's is LabCluster.node(N).
ZOOKEEPER_NODE = "zookeeper"
# Short timeouts, so that failures are detected (and tests finish) in seconds.
SESSION_TIMEOUT_MS = 4000
BROKER_SETTINGS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "share.coordinator.state.topic.num.partitions": "6",
    # The fault tests measure where leadership goes after a kill and a restart; Kafka's
    # periodic preferred-leader check (every 300 s) moving it back in the middle of one
    # would change what they measure. tests/test_cluster_leader_balance.py turns it on.
    "auto.leader.rebalance.enable": "false",
}


class ClusterProcesses(HerdlessCluster):
    def __init__(
        self,
        base_dir: Path,
        brokers: int = 3,
        *,
        racks: Mapping[int, str] | None = None,
        **settings: str,
    ) -> None:
        # Where each broker serves its Prometheus metrics.
        self.metrics_ports: dict[int, int] = {}
        # Each broker's broker.rack (`--rack`), by id; a broker left out has none.
        self.racks = dict(racks or {})
        super().__init__(base_dir, brokers, {**BROKER_SETTINGS, **settings})

    def broker_process(
        self,
        broker_id: int,
        *extra_args: str,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> BrokerProcess:
        """The cluster's broker, given a metrics port of its own, in its rack if it has one."""
        self.metrics_ports[broker_id] = free_port()
        rack = self.racks.get(broker_id)
        return super().broker_process(
            broker_id,
            "--metrics-port",
            str(self.metrics_ports[broker_id]),
            *(("--rack", rack) if rack is not None else ()),
            *extra_args,
            host=host,
            prefix=prefix,
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

    def restore(self, timeout: float = 60.0) -> None:
        """Resume what is paused and start what is down (heal()), then wait until every
        partition of every topic has a live leader and all its replicas in the ISR: the
        state a new cluster starts in, for tests that share one."""
        self.heal()
        self.wait_for(
            lambda m: (
                len(m.brokers) == len(self.brokers)
                and all(
                    p.leader in m.brokers and len(p.isrs) == len(p.replicas)
                    for topic in m.topics.values()
                    for p in topic.partitions.values()
                )
            ),
            timeout,
            what="every broker registered, every partition led, every ISR full",
        )

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
    base_dir: Path, brokers: int = 3, *, racks: Mapping[int, str] | None = None, **settings: str
) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(base_dir, brokers, racks=racks, **settings)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


class LabCluster(ClusterProcesses):
    """A cluster whose ZooKeeper and brokers each run in a network namespace of their
    own (a NetworkLab, `self.lab`), listening and advertising on their own addresses,
    so that a test can cut the network between them, silently, as a real partition.

    The test process and its clients stay in the root namespace: metadata, topics,
    clients and kazoo reach every process as before, and kill() and pause() signal
    the processes themselves. Stopping or shutting the cluster down closes the lab:
    it does not start twice.
    """

    def __init__(self, base_dir: Path, brokers: int = 3, **settings: str) -> None:
        self.lab = NetworkLab()
        try:
            super().__init__(base_dir, brokers, **settings)
        except BaseException:
            self.lab.close()
            raise

    @staticmethod
    def node(broker_id: int) -> str:
        """The broker's node in the lab."""
        return f"broker-{broker_id}"

    def zookeeper_process(self, data_dir: Path) -> ZooKeeperProcess:
        host = self.lab.add(ZOOKEEPER_NODE)
        return ZooKeeperProcess(data_dir, host=host, prefix=self.lab.prefix(ZOOKEEPER_NODE))

    def broker_process(
        self,
        broker_id: int,
        *extra_args: str,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> BrokerProcess:
        """The broker in a node of its own, listening on the node's address (not
        `host`), running under `prefix` inside the node's namespace."""
        node = self.node(broker_id)
        if node not in self.lab.nodes:
            self.lab.add(node)
        return super().broker_process(
            broker_id,
            *extra_args,
            host=self.lab.address(node),
            prefix=(*self.lab.prefix(node), *prefix),
        )

    def cut_from_zookeeper(self, broker_id: int) -> None:
        """The broker keeps its clients and its peers but loses ZooKeeper: its session
        expires after zookeeper.session.timeout.ms and the cluster deems it gone."""
        self.lab.cut(self.node(broker_id), ZOOKEEPER_NODE)

    def cut_between(self, broker_id: int, other_id: int) -> None:
        self.lab.cut(self.node(broker_id), self.node(other_id))

    def cut_from_brokers(self, broker_id: int) -> None:
        """The broker keeps ZooKeeper and its clients but reaches no other broker: a
        leader whose followers stop fetching, a follower that cannot fetch."""
        for other_id in self.brokers:
            if other_id != broker_id:
                self.cut_between(broker_id, other_id)

    def cut_from_clients(self, broker_id: int) -> None:
        """The test's clients (the root namespace) no longer reach the broker."""
        self.lab.cut_from_clients(self.node(broker_id))

    def isolate(self, broker_id: int) -> None:
        """The broker reaches nothing and nothing reaches it: not ZooKeeper, not its
        peers, not the clients."""
        self.lab.isolate(self.node(broker_id))

    def heal_network(self, broker_id: int | None = None) -> None:
        """Remove the cuts of one broker, or every cut."""
        self.lab.heal(None if broker_id is None else self.node(broker_id))

    def heal(self) -> None:
        """Heal the network, then resume and start the processes (HerdlessCluster.heal)."""
        self.heal_network()
        super().heal()

    def logs(self) -> str:
        """The processes' logs after the lab's cuts and heals, timestamped."""
        events = "\n".join(self.lab.events)
        return f"--- network lab {self.lab.name} ---\n{events}\n{super().logs()}"

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            self.lab.close()

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.lab.close()


@contextlib.contextmanager
def running_lab_cluster(base_dir: Path, brokers: int = 3, **settings: str) -> Iterator[LabCluster]:
    """A started LabCluster, stopped after; a machine that cannot host its lab (not root,
    no ip or iptables) fails the test, naming what is missing."""
    try:
        cluster = LabCluster(base_dir, brokers, **settings)
    except NetworkLabUnavailable as exc:
        pytest.fail(str(exc))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def verify_acknowledged(
    cluster: ClusterProcesses, writer: Writer, topic: str, partitions: int
) -> None:
    """Stop the writer; once every partition of `topic` is led with a full ISR, every
    record it had acknowledged must be read back, once and in order, and the replicas'
    logs must agree byte for byte."""
    writer.stop()
    cluster.wait_serving(topic)
    ends = high_watermarks(cluster.bootstrap, topic, partitions)
    seen = read_partitions(cluster.bootstrap, topic, partitions, ends)
    report = check(writer.acked, seen)
    data_dirs = [p.data_dir for p in cluster.brokers.values()]
    report.divergent = len(divergent_partitions(data_dirs, topic, partitions))
    print(report)
    assert report.acknowledged > 0
    assert report.clean, f"{report}\n{cluster.logs()}"
    # The cluster recovered well within message.timeout.ms: a record the producer gave
    # up on was stuck, not refused (retriable errors are retried until then).
    assert not writer.failed, f"{len(writer.failed)} records failed: {writer.failed[:3]}"


def cluster_fixture(
    name: str, brokers: int = 3, *, racks: Mapping[int, str] | None = None, **settings: str
) -> Callable[..., Iterator[ClusterProcesses]]:
    """A module-scoped fixture, named as the module names it (`cluster = cluster_fixture(
    "quota-cluster")`): one running cluster that the module's tests share, started in a
    temporary directory named `name`."""

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
        with running_cluster(
            tmp_path_factory.mktemp(name), brokers, racks=racks, **settings
        ) as processes:
            yield processes

    return cluster


def zookeeper_fixture() -> Callable[..., Iterator[KazooClient]]:
    """A module-scoped fixture (`zookeeper = zookeeper_fixture()`): a kazoo client of the
    module's `cluster`'s ZooKeeper, to read what the brokers keep there."""

    @pytest.fixture(scope="module")
    def zookeeper(cluster: ClusterProcesses) -> Iterator[KazooClient]:
        client = KazooClient(hosts=cluster.zookeeper.connect)
        client.start(timeout=10)
        yield client
        client.stop()
        client.close()

    return zookeeper
