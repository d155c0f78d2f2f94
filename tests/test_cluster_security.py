"""A 3-broker cluster whose brokers replicate over SASL_SSL, and clients that use it
through its SASL_SSL listener: produce with acks=all, consume in a group and commit.

Each broker has a PLAINTEXT listener too (the suite's helpers find the cluster there);
the brokers reach each other on SASL_SSL alone, logging in with SCRAM as User:broker,
whose credential is in ZooKeeper as Kafka keeps it.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kazoo.client import KazooClient

from herdless.cli.certs import CertificateFiles, write_certificates
from herdless.protocol.errors import ErrorCode
from herdless.testing import BrokerProcess, free_port
from tests.support.cluster import ClusterProcesses
from tests.support.delegation_tokens import create_token, expire_token, password, scram_login
from tests.support.secured_clients import CLIENTS, SETUPS, Login, run_client, setup_id, values
from tests.support.wire import Wire

BROKER_PASSWORD = "broker-Secret-91c2"
ALICE_PASSWORD = "alice-Secret-55d0"
BOB_PASSWORD = "bob-Secret-0a7e"
TOPIC = "replicated-over-sasl-ssl"
TOPIC_AUTHORIZATION_FAILED = 29


SECURED = ("SASL_SSL", "SSL", "SASL_PLAINTEXT")


class SecuredCluster(ClusterProcesses):
    """Brokers with a SASL_SSL (the inter-broker one), an SSL and a SASL_PLAINTEXT
    listener each."""

    def __init__(self, base_dir: Path, certificates: CertificateFiles) -> None:
        self.certificates = certificates
        # listener -> broker id -> port
        self.ports: dict[str, dict[int, int]] = {name: {} for name in SECURED}
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required"
            f' username="broker" password="{BROKER_PASSWORD}";'
        )
        super().__init__(
            base_dir,
            3,
            **{
                "inter.broker.listener.name": "SASL_SSL",
                # OAUTHBEARER with unsecured tokens (no validator class set).
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
                "ssl.keystore.location": str(certificates.broker),
                "ssl.truststore.location": str(certificates.ca),
                "ssl.client.auth": "requested",
                "authorizer.class.name": "acls",
                # The test's certificate is a super user; without one a client is
                # ANONYMOUS, granted below what the tests' clients do.
                "super.users": "User:broker;User:alice;User:CN=client",
                "group.initial.rebalance.delay.ms": "0",
                "delegation.token.secret.key": "cluster-token-Secret-7e1",
            },
        )

    def broker_process(
        self,
        broker_id: int,
        *extra_args: str,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> BrokerProcess:
        process = super().broker_process(broker_id, *extra_args, host=host, prefix=prefix)
        for name in SECURED:
            self.ports[name][broker_id] = free_port()
        process.listeners = ",".join(
            f"{name}://127.0.0.1:{self.ports[name][broker_id]}" for name in SECURED
        )
        return process

    def bootstrap_on(self, listener: str) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports[listener].values())

    @property
    def sasl_bootstrap(self) -> str:
        return self.bootstrap_on("SASL_SSL")


def add_user(cluster: SecuredCluster, name: str, password: str) -> None:
    subprocess.run(
        ["herdless", "users", "add", name, "--password-stdin"]
        + ["--zookeeper", cluster.zookeeper.connect],
        input=password,
        text=True,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    base = tmp_path_factory.mktemp("secured-cluster")
    certificates = write_certificates(base / "certs", ["127.0.0.1", "localhost"])
    cluster = SecuredCluster(base, certificates)
    try:
        cluster.start()
        # Until the broker's credential is in, followers' logins fail and they retry.
        add_user(cluster, "broker", BROKER_PASSWORD)
        add_user(cluster, "alice", ALICE_PASSWORD)
        add_user(cluster, "bob", BOB_PASSWORD)
        grant_anonymous(cluster)
        yield cluster
    finally:
        cluster.stop()


def grant_anonymous(cluster: SecuredCluster) -> None:
    """As alice, over SASL_SSL: ANONYMOUS (the PLAINTEXT listener the suite's helpers use,
    SSL without a certificate) may describe every topic, and use the tests' own."""
    admin = AdminClient(client_settings(cluster))
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "*",
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            "cluster-",
            ResourcePatternType.PREFIXED,
            "User:ANONYMOUS",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "group-",
            ResourcePatternType.PREFIXED,
            "User:ANONYMOUS",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()


def client_settings(cluster: SecuredCluster) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.sasl_bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(cluster.certificates.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": ALICE_PASSWORD,
    }


def test_registrations_name_every_listener_with_its_protocol(cluster: SecuredCluster) -> None:
    zookeeper = KazooClient(cluster.zookeeper.connect)
    zookeeper.start()
    try:
        for broker_id, port in cluster.ports["SASL_SSL"].items():
            data, _ = zookeeper.get(f"/brokers/ids/{broker_id}")
            registration = json.loads(data)
            assert f"SASL_SSL://127.0.0.1:{port}" in registration["endpoints"]
            assert registration["listener_security_protocol_map"]["SASL_SSL"] == "SASL_SSL"
    finally:
        zookeeper.stop()


def test_replication_over_sasl_ssl_keeps_acks_all_writes_and_a_group_commits(
    cluster: SecuredCluster,
) -> None:
    admin = AdminClient(client_settings(cluster))
    created = admin.create_topics(
        [NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "3"})], request_timeout=30
    )
    created[TOPIC].result()
    # Every follower fetches from its leaders over SASL_SSL: the ISRs fill.
    cluster.wait_serving(TOPIC)
    settings = client_settings(cluster)
    errors: list[KafkaError] = []
    producer = Producer({**settings, "acks": "all", "enable.idempotence": True})
    for n in range(30):
        producer.produce(TOPIC, f"v{n}".encode(), on_delivery=lambda e, _: e and errors.append(e))
    assert producer.flush(60) == 0 and not errors, errors
    consumer = Consumer(
        {
            **settings,
            "group.id": "secured",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    committed = consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(seen) == sorted(f"v{n}".encode() for n in range(30))
    # Partitions the sticky partitioner gave no record have nothing to commit (-1001).
    assert committed is not None and sum(max(p.offset, 0) for p in committed) == 30


OAUTHBEARER_SETUPS = [
    (listener, "OAUTHBEARER", False) for listener in ("SASL_PLAINTEXT", "SASL_SSL")
]


@pytest.mark.parametrize("setup", SETUPS + OAUTHBEARER_SETUPS, ids=setup_id)
@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_produces_consumes_in_a_group_and_commits_on_every_listener(
    cluster: SecuredCluster, client: str, setup: tuple[str, str | None, bool]
) -> None:
    listener, mechanism, certificate = setup
    files = cluster.certificates
    login = Login(
        cluster.bootstrap_on(listener),
        listener,
        ca=files.ca if listener != "SASL_PLAINTEXT" else None,
        certificate=files.client if certificate else None,
        key=files.client_key if certificate else None,
        mechanism=mechanism,
        username="alice" if mechanism else None,
        password=ALICE_PASSWORD if mechanism else None,
    )
    name = f"{client}-{setup_id(setup)}".lower().replace("_", "-")
    seen = run_client(client, login, f"cluster-{name}", f"group-{name}")
    assert sorted(seen) == values(f"cluster-{name}")


def test_no_password_is_in_zookeeper_a_data_directory_or_a_log(cluster: SecuredCluster) -> None:
    needles = [BROKER_PASSWORD.encode(), ALICE_PASSWORD.encode(), BOB_PASSWORD.encode()]
    files = [cluster.zookeeper.log_path, *Path(cluster.base_dir / "zookeeper").rglob("*")]
    for process in cluster.brokers.values():
        files += [process.log_path, *process.data_dir.rglob("*")]
    for path in files:
        if path.is_file():
            content = path.read_bytes()
            assert not any(needle in content for needle in needles), f"{path} holds a password"


def logged_in(cluster: SecuredCluster, broker_id: int, user: str, password: str) -> Wire:
    """A raw connection to one broker's SASL_PLAINTEXT listener, logged in with PLAIN."""
    wire = Wire(cluster.brokers[broker_id], port=cluster.ports["SASL_PLAINTEXT"][broker_id])
    handshake = wire.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse[1])
    assert handshake.error_code == 0
    token = f"\0{user}\0{password}".encode()
    answer = wire.call(SaslAuthenticateRequest[2](auth_bytes=token), SaslAuthenticateResponse[2])
    assert answer.error_code == 0, answer.error_message
    return wire


def topic_error(cluster: SecuredCluster, broker_id: int, topic: str) -> int:
    """What broker `broker_id` answers bob's Metadata for `topic` with."""
    wire = logged_in(cluster, broker_id, "bob", BOB_PASSWORD)
    try:
        request = MetadataRequest[12](
            topics=[MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=topic)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        [answer] = wire.call(request, MetadataResponse[12]).topics
        return answer.error_code
    finally:
        wire.close()


def test_an_acl_created_through_one_broker_is_enforced_by_all_three_within_a_second(
    cluster: SecuredCluster,
) -> None:
    topic = "enforced-everywhere"
    topics = AdminClient(client_settings(cluster))
    topics.create_topics([NewTopic(topic, 1, 3)])[topic].result()
    assert all(topic_error(cluster, b, topic) == TOPIC_AUTHORIZATION_FAILED for b in (1, 2, 3))
    # Through broker 1 alone: alice grants bob Describe on the topic.
    admin = logged_in(cluster, 1, "alice", ALICE_PASSWORD)
    creation = CreateAclsRequest[3].AclCreation(
        resource_type=2,
        resource_name=topic,
        resource_pattern_type=3,
        principal="User:bob",
        host="*",
        operation=8,
        permission_type=3,
    )
    [result] = admin.call(CreateAclsRequest[3](creations=[creation]), CreateAclsResponse[3]).results
    admin.close()
    assert result.error_code == 0
    granted = time.monotonic()
    waiting = {1, 2, 3}
    while waiting and time.monotonic() - granted < 5:
        waiting = {b for b in waiting if topic_error(cluster, b, topic) != 0}
    took = time.monotonic() - granted
    assert not waiting, f"brokers {sorted(waiting)} still refuse bob after {took:.1f} s"
    assert took <= 1.0, f"every broker enforced the new ACL only after {took:.2f} s"


def token_login_error(cluster: SecuredCluster, broker_id: int, token_id: str, hmac: bytes) -> int:
    login = scram_login(
        cluster.brokers[broker_id],
        cluster.ports["SASL_PLAINTEXT"][broker_id],
        token_id,
        password(hmac),
        token=True,
    )
    login.close()
    return login.error_code


def seconds_until_every_broker_answers(
    cluster: SecuredCluster, token_id: str, hmac: bytes, error_code: int
) -> float:
    started = time.monotonic()
    waiting = {1, 2, 3}
    while waiting and time.monotonic() - started < 5:
        waiting = {
            b for b in waiting if token_login_error(cluster, b, token_id, hmac) != error_code
        }
    took = time.monotonic() - started
    assert not waiting, f"brokers {sorted(waiting)} still answer otherwise after {took:.1f} s"
    return took


def test_a_token_created_through_one_broker_logs_in_at_every_broker(
    cluster: SecuredCluster,
) -> None:
    alice = scram_login(
        cluster.brokers[1], cluster.ports["SASL_PLAINTEXT"][1], "alice", ALICE_PASSWORD
    )
    created = create_token(alice.wire)
    alice.close()
    assert created.error_code == 0
    # Where Kafka keeps it: the token's information, never its HMAC.
    zookeeper = KazooClient(hosts=cluster.zookeeper.connect)
    zookeeper.start(timeout=10)
    try:
        data, _ = zookeeper.get(f"/delegation_token/tokens/{created.token_id}")
        stored = json.loads(data)
        assert (stored["owner"], stored["tokenId"]) == ("User%3Aalice", created.token_id)
        assert password(created.hmac).encode() not in data
        assert zookeeper.get_children("/delegation_token/token_changes")
    finally:
        zookeeper.stop()
        zookeeper.close()
    took = seconds_until_every_broker_answers(cluster, created.token_id, created.hmac, 0)
    assert took <= 1.0, f"every broker took the token only after {took:.2f} s"

    bob = scram_login(cluster.brokers[2], cluster.ports["SASL_PLAINTEXT"][2], "bob", BOB_PASSWORD)
    mismatch = ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert expire_token(bob.wire, created.hmac).error_code == mismatch  # not bob's
    bob.close()
    owner = scram_login(
        cluster.brokers[2], cluster.ports["SASL_PLAINTEXT"][2], "alice", ALICE_PASSWORD
    )
    assert expire_token(owner.wire, created.hmac).error_code == 0
    owner.close()
    refused = ErrorCode.SASL_AUTHENTICATION_FAILED
    seconds_until_every_broker_answers(cluster, created.token_id, created.hmac, refused)
