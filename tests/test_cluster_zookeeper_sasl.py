"""A 3-broker cluster whose brokers log in to Debian's ZooKeeper with SASL DIGEST-MD5 and
create their znodes with Kafka's ACLs (`zookeeper.set.acl=true`), as Kafka 3.x in
ZooKeeper mode does: it works as before, and nobody else may change its znodes or read
its credentials."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.security import ACL, Id, Permissions

from herdless.broker.clock import monotonic_ms, wall_ms
from herdless.cluster import ClusterStore, ZooKeeperAuthenticationFailed
from herdless.security.jaas import quote
from herdless.security.zookeeper import ZooKeeperLogin, ZooKeeperSecurity
from herdless.testing import BrokerProcess
from tests.support.cli import herdless, refused, succeeded, table_rows
from tests.support.cluster import ClusterProcesses
from tests.support.zookeeper import ZooKeeperProcess

BROKER_USER, BROKER_PASSWORD = "kafka", "kafka-zk-" + uuid.uuid4().hex
# Another user ZooKeeper knows: logged in, but not the creator of herdless's znodes.
OTHER_USER, OTHER_PASSWORD = "intruder", "intruder-zk-" + uuid.uuid4().hex
CHROOT = "/herdless"
SENSITIVE = "/config/users"
OWNER_ALL = ACL(Permissions.ALL, Id("sasl", BROKER_USER))
EVERYONE_READS = ACL(Permissions.READ, Id("world", "anyone"))


class SaslZooKeeper(ZooKeeperProcess):
    """ZooKeeper taking only SASL sessions of the two users, the cluster under a chroot:
    as Kafka's documentation advises, so that the znode every cluster znode hangs from
    is the brokers' too (ZooKeeper's / lets anyone delete an empty child)."""

    def __init__(self, data_dir: Path) -> None:
        users = {BROKER_USER: BROKER_PASSWORD, OTHER_USER: OTHER_PASSWORD}
        super().__init__(data_dir, sasl_users=users)

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}{CHROOT}"


class SaslZooKeeperCluster(ClusterProcesses):
    def zookeeper_process(self, data_dir: Path) -> ZooKeeperProcess:
        return SaslZooKeeper(data_dir)


def client_jaas(path: Path, username: str, password: str) -> Path:
    """A JAAS file as an operator writes it for Kafka's brokers and tools."""
    path.write_text(
        "// The brokers' login to ZooKeeper\n"
        "Client {\n"
        "  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f"  username={quote(username)}\n"
        f"  password={quote(password)};\n"
        "};\n"
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def jaas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("zookeeper-jaas")
    return client_jaas(directory / "kafka_jaas.conf", BROKER_USER, BROKER_PASSWORD)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, jaas: Path) -> Iterator[ClusterProcesses]:
    settings = {"java.security.auth.login.config": str(jaas), "zookeeper.set.acl": "true"}
    cluster = SaslZooKeeperCluster(tmp_path_factory.mktemp("zookeeper-sasl"), 3, **settings)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def kazoo(
    cluster: ClusterProcesses, user: str | None, password: str = "", chroot: str = CHROOT
) -> KazooClient:
    options = None if user is None else ZooKeeperLogin(user, password).sasl_options()
    hosts = f"{cluster.zookeeper.host}:{cluster.zookeeper.port}{chroot}"
    client = KazooClient(hosts=hosts, sasl_options=options, timeout=10)
    client.start(timeout=10)
    return client


@pytest.fixture(scope="module")
def owner(cluster: ClusterProcesses) -> Iterator[KazooClient]:
    client = kazoo(cluster, BROKER_USER, BROKER_PASSWORD)
    yield client
    client.stop()
    client.close()


def herdless_znodes(client: KazooClient, path: str = "/") -> list[str]:
    """Every znode under `path`, ZooKeeper's own (/zookeeper) left out."""
    found = []
    for child in sorted(client.get_children(path)):
        child_path = f"{path.rstrip('/')}/{child}"
        if child_path != "/zookeeper":
            found += [child_path, *herdless_znodes(client, child_path)]
    return found


def test_the_cluster_creates_elects_replicates_and_serves_a_group(
    cluster: ClusterProcesses,
) -> None:
    sent = [f"order-{i}".encode() for i in range(30)]
    cluster.create_topic("orders", 3, 3)
    cluster.produce("orders", sent)
    consumer = Consumer(
        cluster.client_config(
            **{"group.id": "billing", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
    )
    try:
        consumer.subscribe(["orders"])
        values: list[bytes] = []
        while len(values) < len(sent):
            message = consumer.poll(30)
            assert message is not None, f"{len(values)} of {len(sent)} records read"
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(values) == sorted(sent)
    assert sum(cluster.committed("billing", "orders").values()) == len(sent)
    # A leader's death: the controller elects another from the replicas, which have it all.
    leader = cluster.leader_of("orders", 0)
    cluster.kill(leader)
    try:
        cluster.wait_for(
            lambda m: m.topics["orders"].partitions[0].leader not in (-1, leader),
            30,
            what="a new leader of orders-0",
        )
        assert sorted(r.value for r in cluster.consume("orders", len(sent), 30)) == sorted(sent)
    finally:
        cluster.heal()


def test_every_znode_has_kafkas_acls(cluster: ClusterProcesses, owner: KazooClient) -> None:
    cluster.create_topic("acl-check", 1, 3)
    succeeded(add_user(cluster, "alice", {"KAFKA_OPTS": login_option(cluster)}))
    znodes = herdless_znodes(owner)
    assert "/brokers/ids/1" in znodes and f"{SENSITIVE}/alice" in znodes
    assert "/brokers/topics/acl-check/partitions/0/state" in znodes
    assert "/config/changes" in znodes and "/controller" in znodes
    root = kazoo(cluster, BROKER_USER, BROKER_PASSWORD, chroot="")
    try:
        assert root.get_acls(CHROOT)[0] == [OWNER_ALL, EVERYONE_READS]
    finally:
        root.stop()
        root.close()
    for path in znodes:
        acls, _ = owner.get_acls(path)
        if path.startswith(SENSITIVE):
            assert acls == [OWNER_ALL], path
        else:
            assert acls == [OWNER_ALL, EVERYONE_READS], path


def test_another_zookeeper_user_changes_nothing_and_reads_no_credentials(
    cluster: ClusterProcesses, owner: KazooClient
) -> None:
    succeeded(add_user(cluster, "bob", {"KAFKA_OPTS": login_option(cluster)}))
    znodes = herdless_znodes(owner)
    other = kazoo(cluster, OTHER_USER, OTHER_PASSWORD)
    try:
        for path in znodes:
            with pytest.raises(NoAuthError):
                other.set(path, b"{}")
            with pytest.raises(NoAuthError):
                other.create(f"{path}/intruder", b"")
            with pytest.raises(NoAuthError):
                other.delete(path, recursive=False)
            if path.startswith(SENSITIVE):  # the users, and even their names
                with pytest.raises(NoAuthError):
                    other.get(path)
            else:
                other.get(path)
        # Nor may it add a topic, a user or a broker beside the brokers' own znodes.
        for parent in ("/brokers/topics", SENSITIVE, "/brokers/ids", "/admin/delete_topics"):
            with pytest.raises(NoAuthError):
                other.create(f"{parent}/intruder", b"{}")
    finally:
        other.stop()
        other.close()


# Kazoo's connection thread dies of a refused login (ClusterStore turns that into one
# error); here it is kazoo as an intruder would run it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("login", [None, (BROKER_USER, "wrong-password")])
def test_a_client_without_the_password_gets_nothing(
    cluster: ClusterProcesses, login: tuple[str, str] | None
) -> None:
    client = KazooClient(
        hosts=cluster.zookeeper.connect,
        sasl_options=None if login is None else ZooKeeperLogin(*login).sasl_options(),
        timeout=5,
        connection_retry={"max_tries": 0},
    )
    try:
        client.start(timeout=10)
        with pytest.raises(KazooException):
            client.get("/brokers/ids")
        with pytest.raises(KazooException):
            client.create("/brokers/topics/intruder", b"{}")
    except KazooException:
        pass  # refused at once: as good
    finally:
        client.stop()
        client.close()


def test_the_cluster_store_refuses_a_wrong_password_in_one_error(
    cluster: ClusterProcesses,
) -> None:
    security = ZooKeeperSecurity(ZooKeeperLogin(BROKER_USER, "wrong-password"), set_acl=True)
    with pytest.raises(ZooKeeperAuthenticationFailed, match="refused the SASL login of 'kafka'"):
        ClusterStore(
            cluster.zookeeper.connect,
            wall_ms=wall_ms,
            monotonic_ms=monotonic_ms,
            connect_timeout=10,
            security=security,
        )


def test_users_add_offline_logs_in_with_the_jaas_file_kafka_opts_or_properties_name(
    cluster: ClusterProcesses, owner: KazooClient, jaas: Path, tmp_path: Path
) -> None:
    succeeded(add_user(cluster, "carol", {"KAFKA_OPTS": login_option(cluster)}))
    properties = tmp_path / "server.properties"
    properties.write_text(f"java.security.auth.login.config={jaas}\nzookeeper.set.acl=true\n")
    succeeded(add_user(cluster, "dave", {}, "--zookeeper-config", str(properties)))
    listed = succeeded(
        herdless(
            "users",
            "list",
            "--zookeeper",
            cluster.zookeeper.connect,
            "--zookeeper-config",
            str(properties),
        )
    )
    assert {"carol", "dave"} <= {row[0] for row in table_rows(listed)}
    for user in ("carol", "dave"):
        assert owner.get_acls(f"{SENSITIVE}/{user}")[0] == [OWNER_ALL]
    refused(add_user(cluster, "eve", {}), "ZooKeeper")
    wrong = client_jaas(tmp_path / "wrong_jaas.conf", BROKER_USER, "wrong-password")
    refused(
        add_user(cluster, "eve", {"KAFKA_OPTS": f"-Djava.security.auth.login.config={wrong}"}),
        "refused the SASL login of 'kafka'",
    )
    assert not owner.exists(f"{SENSITIVE}/eve")


def test_a_broker_with_a_wrong_password_exits_with_one_line(
    cluster: ClusterProcesses, tmp_path: Path
) -> None:
    wrong = client_jaas(tmp_path / "wrong_jaas.conf", BROKER_USER, "wrong-password")
    broker = BrokerProcess(
        tmp_path / "broker-4",
        *("--zookeeper", cluster.zookeeper.connect, "--broker-id", "4"),
        *("--set", f"java.security.auth.login.config={wrong}"),
        *("--set", "zookeeper.set.acl=true"),
        *("--set", "zookeeper.connection.timeout.ms=10000"),
    )
    broker.launch()
    assert broker.process is not None
    try:
        code = broker.process.wait(60)
    finally:
        broker.kill()
    log = broker.log()
    assert code != 0, log
    assert "Traceback" not in log, log
    errors = [line for line in log.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, log
    assert "refused the SASL login of 'kafka'" in errors[0], log
    assert "wrong-password" not in log


def test_a_broker_asked_for_acls_without_a_login_refuses_to_start(
    cluster: ClusterProcesses, tmp_path: Path
) -> None:
    result = subprocess.run(
        [
            *(sys.executable, "-m", "herdless", "serve", "--data-dir", str(tmp_path / "b")),
            *("--zookeeper", cluster.zookeeper.connect, "--broker-id", "5"),
            *("--set", "zookeeper.set.acl=true"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"},
    )
    assert result.returncode != 0
    assert "zookeeper.set.acl=true needs a SASL login" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def login_option(cluster: ClusterProcesses) -> str:
    jaas = cluster.base_dir / "tool_jaas.conf"
    if not jaas.exists():
        client_jaas(jaas, BROKER_USER, BROKER_PASSWORD)
    return f"-Djava.security.auth.login.config={jaas}"


def add_user(
    cluster: ClusterProcesses, user: str, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    command = [
        *(sys.executable, "-m", "herdless", "users", "add", user),
        *("--zookeeper", cluster.zookeeper.connect, "--password", f"{user}-secret", *args),
    ]
    environ = {k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "COLUMNS")}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**environ, **env}
    )


def test_no_log_holds_the_zookeeper_password(cluster: ClusterProcesses) -> None:
    logs = cluster.logs()
    assert BROKER_PASSWORD not in logs
    assert OTHER_PASSWORD not in logs
