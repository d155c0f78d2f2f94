"""A cluster for tests: Debian's ZooKeeper and N `herdless serve` processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from herdless.testing.broker import BROKER_DEFAULTS, set_args
from herdless.testing.clients import Brokers, kafka_settings
from herdless.testing.process import STOP_TIMEOUT_S, BrokerProcess, free_port
from herdless.testing.security import Security, listener_addresses
from herdless.testing.zookeeper import ZooKeeperProcess

if TYPE_CHECKING:
    from confluent_kafka.admin import ClusterMetadata

# Short timeouts, so that a killed broker is noticed (and a test goes on) in seconds.
CLUSTER_DEFAULTS = {
    **BROKER_DEFAULTS,
    "zookeeper.session.timeout.ms": "4000",
    "zookeeper.connection.timeout.ms": "10000",
    "replica.lag.time.max.ms": "3000",
    # A broker stopping while no other can take its leaderships (the whole cluster
    # stopping at once) gives up its controlled shutdown in a second, not fifteen.
    "controlled.shutdown.retry.backoff.ms": "500",
    # Fewer offsets partitions to create and elect leaders for at startup.
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "share.coordinator.state.topic.num.partitions": "6",
}
REGISTRATION_TIMEOUT_S = 60.0


class HerdlessCluster(Brokers):
    """ZooKeeper and brokers 1..N, each with its data under `base_dir`.

    Topics are replicated on min(3, N) brokers unless created otherwise, and so are
    `__consumer_offsets` and `__rebalance_history`. Settings take Kafka's names as
    for HerdlessBroker. Constructing one raises
    herdless.cli.zookeeper.ZooKeeperMissing when ZooKeeper is not installed.

    With `security` (herdless.testing.security.Security) every broker also serves the
    secured listeners, with one throw-away CA's certificates (in `certificates`); the
    users are written to ZooKeeper before the brokers start; brokers talk to each
    other over the first secured listener, logging in as admin when it is a SASL one,
    and with `security.zookeeper_login` log in to ZooKeeper too.
    `bootstrap` is then that listener's addresses, and the helpers connect as admin.
    """

    def __init__(
        self,
        base_dir: Path,
        brokers: int = 3,
        settings: Mapping[str, object] | None = None,
        /,
        *,
        security: Security | None = None,
        **names: object,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        replicas = str(min(3, brokers))
        self.security = security
        # Each broker's secured listeners' addresses, by broker id and listener name.
        self.secured: dict[int, dict[str, str]] = {}
        secured_settings: dict[str, str] = {}
        if security is not None:
            self.certificates = security.write_certificates(base_dir / "certificates")
            secured_settings = {
                **security.inter_broker_settings(self.certificates),
                **security.zookeeper_settings(base_dir / "zookeeper-login"),
            }
        self.settings = {
            **CLUSTER_DEFAULTS,
            "default.replication.factor": replicas,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "share.coordinator.state.topic.replication.factor": replicas,
            **secured_settings,
            **kafka_settings(settings, names),
        }
        self.base_dir = base_dir
        self.zookeeper = self.zookeeper_process(base_dir / "zookeeper")
        self.brokers = {
            broker_id: self.broker_process(broker_id) for broker_id in range(1, brokers + 1)
        }

    def zookeeper_process(self, data_dir: Path) -> ZooKeeperProcess:
        """The cluster's ZooKeeper, not started."""
        users = self.security.zookeeper_users() if self.security is not None else None
        return ZooKeeperProcess(data_dir, sasl_users=users)

    def broker_process(
        self,
        broker_id: int,
        *extra_args: str,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> BrokerProcess:
        """Broker `broker_id` of this cluster, not started, with `extra_args` after the
        cluster's own arguments; it listens on `host` and runs under `prefix` (see
        BrokerProcess)."""
        listeners = None
        if self.security is not None:
            ports = {name: free_port() for name in self.security.listeners}
            listeners = listener_addresses(self.security.listeners, host, ports)
            self.secured[broker_id] = {name: f"{host}:{port}" for name, port in ports.items()}
        return BrokerProcess(
            self.base_dir / f"broker-{broker_id}",
            *("--zookeeper", self.zookeeper.connect, "--broker-id", str(broker_id)),
            *set_args(self.settings),
            *extra_args,
            host=host,
            prefix=prefix,
            listeners=listeners,
        )

    @property
    def bootstrap(self) -> str:
        """The brokers that are running, comma-separated (on the first secured listener,
        when there are secured ones)."""
        listener = "PLAINTEXT" if self.security is None else self.security.listeners[0]
        return self.listener_bootstrap()[listener]

    def listener_bootstrap(self) -> dict[str, str]:
        running = {i: p for i, p in self.brokers.items() if p.alive()}
        addresses = {"PLAINTEXT": ",".join(p.bootstrap for p in running.values())}
        for name in self.security.listeners if self.security is not None else ():
            addresses[name] = ",".join(self.secured[i][name] for i in running)
        return addresses

    def start(self) -> HerdlessCluster:
        """Start ZooKeeper, then every broker side by side; return once all of them are
        registered and a controller is elected."""
        try:
            self.zookeeper.start()
            if self.security is not None:
                # Before the brokers start, as an operator makes the first admin.
                self.security.add_users_to_zookeeper(self.zookeeper.connect)
            for process in self.brokers.values():
                process.launch()
            for process in self.brokers.values():
                process.wait_listening()
            self.wait_for(
                lambda m: len(m.brokers) == len(self.brokers) and m.controller_id >= 0,
                REGISTRATION_TIMEOUT_S,
                what="every broker registered and a controller elected",
            )
        except BaseException:
            self.shutdown()
            raise
        return self

    def shutdown(self) -> None:
        """SIGTERM to every broker at once, SIGKILL to those still running after 15 s,
        then ZooKeeper."""
        running = [p for p in self.brokers.values() if p.alive()]
        for process in running:
            assert process.process is not None
            process.resume()  # a stopped process takes SIGTERM only once it runs again
            process.process.terminate()
        for process in running:
            assert process.process is not None
            try:
                process.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            if self.zookeeper.alive():
                self.zookeeper.stop(STOP_TIMEOUT_S)
        self.zookeeper.kill()

    def kill(self, broker_id: int) -> None:
        """SIGKILL one broker: the cluster notices when its ZooKeeper session expires
        (zookeeper.session.timeout.ms, 4 s here) and elects new leaders."""
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int, *, hard: bool = False) -> None:
        """Stop one broker (SIGTERM; SIGKILL with `hard`) and start it again, or start it
        if it was down; return once it is registered again."""
        self.brokers[broker_id].restart(hard=hard)
        self.wait_registered(broker_id)

    def pause(self, broker_id: int) -> None:
        """SIGSTOP one broker: it keeps its connections and answers nothing, like a
        broker in a long stall; past its session it loses its leaderships."""
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    def wait_registered(self, broker_id: int, timeout: float = REGISTRATION_TIMEOUT_S) -> None:
        self.wait_for(
            lambda m: broker_id in m.brokers, timeout, what=f"broker {broker_id} registered"
        )

    def leader_of(self, topic: str, partition: int = 0, timeout: float = 30.0) -> int:
        """The id of the broker leading the partition, once there is one."""

        def leader(m: ClusterMetadata) -> tuple[int] | None:
            found = m.topics[topic].partitions[partition].leader
            return (found,) if found >= 0 else None  # a truthy answer, even for broker 0

        (found,) = self.wait_for(leader, timeout, what=f"a leader of {topic}-{partition}")
        return found

    def coordinator_of(self, group_id: str) -> int:
        """The id of the broker coordinating the group (FindCoordinator's answer)."""
        return self.describe_group(group_id).coordinator.id

    def heal(self) -> None:
        """Resume what is paused and start what is down, ZooKeeper first; return once every
        broker is registered."""
        zookeeper_down = not self.zookeeper.alive()
        if zookeeper_down:
            self.zookeeper.start()
        self.zookeeper.resume()
        for process in self.brokers.values():
            process.resume()  # SIGCONT: nothing to a process that runs
        down = [i for i, p in self.brokers.items() if not p.alive()]
        for broker_id in down:
            self.brokers[broker_id].launch()
        for broker_id in down:
            self.brokers[broker_id].wait_listening()
        if down or zookeeper_down:
            self.wait_for(
                lambda m: all(i in m.brokers for i in self.brokers),
                REGISTRATION_TIMEOUT_S,
                what="every broker registered again",
            )

    def logs(self) -> str:
        parts = [f"--- zookeeper ({self.zookeeper.log_path}) ---\n{self.zookeeper.log_tail()}"]
        for broker_id, process in self.brokers.items():
            parts.append(f"--- broker {broker_id} ({process.log_path}) ---\n{process.log_tail()}")
        return "\n".join(parts)

    def started(self) -> bool:
        return self.zookeeper.process is not None

    def __repr__(self) -> str:
        return f"<HerdlessCluster of {len(self.brokers)} brokers: {self.bootstrap}>"
