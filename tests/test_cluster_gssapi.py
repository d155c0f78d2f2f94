"""A 3-broker cluster whose brokers log in to each other with Kerberos (SASL_SSL, GSSAPI)
against a real MIT KDC, and clients that use it through the same listener:
confluent-kafka (built with Cyrus SASL, tests/support/librdkafka_gssapi.py), kcat,
kafka-python and aiokafka produce with acks=all through a full ISR, consume in a group and
commit. A fourth broker whose keytab holds stale keys cannot reach its leader and says
why in one line.

Each broker has its own host (127.0.0.N, all loopback), principal (kafka/127.0.0.N@REALM)
and keytab, as Kafka brokers do; the authorizer is on and only User:kafka (every broker,
through Kafka's DEFAULT rule) and User:alice are super users, so replication works only
if the brokers are who their tickets say. The PLAINTEXT listener each broker also has is
for the suite's helpers (ANONYMOUS, allowed to describe topics and groups).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourceType,
)

from herdless.cli.certs import CertificateFiles, write_certificates
from herdless.testing import BrokerProcess, free_port
from herdless.testing.kerberos import MitKdc
from tests.support.cluster import ClusterProcesses
from tests.support.librdkafka_gssapi import run_confluent_with_gssapi
from tests.support.secured_clients import committed, run_aiokafka, run_kafka_python, run_kcat
from tests.support.secured_clients import values as records_of

BROKERS = 3
# A broker that joins later with a keytab made before its keys were changed.
STALE_BROKER = 4


def host_of(broker_id: int) -> str:
    return f"127.0.0.{broker_id}"


def principal_of(broker_id: int) -> str:
    return f"kafka/{host_of(broker_id)}"


class KerberizedCluster(ClusterProcesses):
    """Brokers on 127.0.0.N with a SASL_SSL listener (the inter-broker one) serving GSSAPI,
    each logging in with its own keytab."""

    def __init__(self, base_dir: Path, kdc: MitKdc, certificates: CertificateFiles) -> None:
        self.kdc = kdc
        self.certificates = certificates
        self.sasl_ports: dict[int, int] = {}
        super().__init__(
            base_dir,
            BROKERS,
            **{
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.enabled.mechanisms": "GSSAPI",
                "sasl.mechanism.inter.broker.protocol": "GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                "ssl.keystore.location": str(certificates.broker),
                "ssl.truststore.location": str(certificates.ca),
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:kafka;User:alice",
                "group.initial.rebalance.delay.ms": "0",
            },
        )

    def keytab(self, broker_id: int) -> Path:
        return self.kdc.directory / f"{principal_of(broker_id).replace('/', '_')}.keytab"

    def broker_process(
        self,
        broker_id: int,
        *extra_args: str,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> BrokerProcess:
        login = (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true"
            f' keyTab="{self.keytab(broker_id)}"'
            f' principal="{self.kdc.principal(principal_of(broker_id))}";'
        )
        environment = [f"{key}={value}" for key, value in self.kdc.environment().items()]
        process = super().broker_process(
            broker_id,
            *("--set", f"listener.name.sasl_ssl.gssapi.sasl.jaas.config={login}"),
            *extra_args,
            host=host_of(broker_id),
            prefix=("env", *environment, *prefix),
        )
        self.sasl_ports[broker_id] = free_port()
        process.listeners = f"SASL_SSL://{host_of(broker_id)}:{self.sasl_ports[broker_id]}"
        return process

    @property
    def sasl_bootstrap(self) -> str:
        return ",".join(
            f"{host_of(broker_id)}:{self.sasl_ports[broker_id]}"
            for broker_id, process in self.brokers.items()
            if process.alive()
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberizedCluster]:
    base = tmp_path_factory.mktemp("gssapi-cluster")
    hosts = [host_of(n) for n in range(1, STALE_BROKER + 1)]
    certificates = write_certificates(base / "certs", [*hosts, "localhost"])
    with MitKdc(base / "kdc") as kdc, pytest.MonkeyPatch.context() as env:
        for broker_id in range(1, STALE_BROKER + 1):
            kdc.add_principal(principal_of(broker_id))
            kdc.keytab(principal_of(broker_id))
        kdc.change_keys(principal_of(STALE_BROKER))
        kdc.add_principal("alice")
        cluster = KerberizedCluster(base, kdc, certificates)
        try:
            cluster.start()
            # The test's clients are alice, with her tickets (kcat kinits from her keytab).
            ticket_cache = base / "alice.cc"
            for key, value in kdc.environment(ticket_cache).items():
                env.setenv(key, value)
            kdc.kinit("alice", kdc.keytab("alice"), ticket_cache)
            grant_anonymous(cluster)
            yield cluster
        finally:
            cluster.stop()


def python_settings(cluster: KerberizedCluster) -> dict[str, Any]:
    return {
        "bootstrap_servers": cluster.sasl_bootstrap,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(cluster.certificates.ca),
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
    }


def librdkafka_settings(cluster: KerberizedCluster) -> dict[str, str]:
    return {
        "bootstrap.servers": cluster.sasl_bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(cluster.certificates.ca),
        "sasl.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal": "alice",
        "sasl.kerberos.keytab": str(cluster.kdc.directory / "alice.keytab"),
    }


def admin(cluster: KerberizedCluster) -> KafkaAdminClient:
    return KafkaAdminClient(**python_settings(cluster))


def grant_anonymous(
    cluster: KerberizedCluster,
    operation: ACLOperation = ACLOperation.DESCRIBE,
    *kinds_and_names: Any,
) -> None:
    """As alice: ANONYMOUS (the suite's helpers on PLAINTEXT) may do `operation` on the
    resources given as kind, name pairs (by default: describe every topic and group)."""
    pairs = kinds_and_names or (ResourceType.TOPIC, "*", ResourceType.GROUP, "*")
    client = admin(cluster)
    try:
        acls = [
            ACL(
                "User:ANONYMOUS",
                "*",
                operation,
                ACLPermissionType.ALLOW,
                ResourcePattern(kind, name, ACLResourcePatternType.LITERAL),
            )
            for kind, name in zip(pairs[::2], pairs[1::2], strict=True)
        ]
        result = client.create_acls(acls)
        assert not result["failed"], result["failed"]
    finally:
        client.close()


def create_topic(cluster: KerberizedCluster, topic: NewTopic) -> None:
    client = admin(cluster)
    try:
        client.create_topics([topic], timeout_ms=30_000)
    finally:
        client.close()


CLIENTS = {
    "confluent-kafka": (run_confluent_with_gssapi, librdkafka_settings, {"acks": "all"}),
    "kcat": (run_kcat, librdkafka_settings, {"acks": "all"}),
    "kafka-python": (run_kafka_python, python_settings, {"acks": "all"}),
    # aiokafka's default is acks=1.
    "aiokafka": (run_aiokafka, python_settings, {"acks": "all"}),
}


@pytest.mark.parametrize("client", CLIENTS)
def test_a_client_produces_with_acks_all_through_the_full_isr_and_commits_in_a_group(
    cluster: KerberizedCluster, client: str
) -> None:
    run, settings_for, producer_settings = CLIENTS[client]
    topic, group = f"gssapi-cluster-{client}", f"gssapi-group-{client}"
    create_topic(cluster, NewTopic(topic, 1, 3, topic_configs={"min.insync.replicas": "2"}))
    # Both followers fetch from the leader, logged in with their own keytabs.
    cluster.wait_serving(topic)
    seen = run(settings_for(cluster), topic, group, producer_settings)
    assert sorted(seen) == records_of(topic)
    assert committed(cluster.bootstrap, group, topic) == len(records_of(topic))
    # The writes went through every replica: the ISR is still whole.
    cluster.wait_serving(topic, timeout=10)


def login_failures(process: BrokerProcess) -> list[str]:
    return [line for line in process.log().splitlines() if "cannot log in as" in line]


def test_a_broker_whose_keytab_is_stale_cannot_reach_its_leader_and_says_so_once(
    cluster: KerberizedCluster,
) -> None:
    topic = "gssapi-stale-follower"
    # Created over PLAINTEXT as ANONYMOUS: an admin client on the SASL_SSL listener may ask
    # the stale broker itself, whose own listener cannot take tickets either.
    grant_anonymous(cluster, ACLOperation.CREATE, ResourceType.TOPIC, topic)
    stale = cluster.add_broker(STALE_BROKER)
    try:
        stale.start()
        cluster.wait_registered(STALE_BROKER)
        plaintext = KafkaAdminClient(bootstrap_servers=cluster.listener_bootstrap()["PLAINTEXT"])
        try:
            plaintext.create_topics(
                [NewTopic(topic, replica_assignments={0: [1, STALE_BROKER]})], timeout_ms=30_000
            )
        finally:
            plaintext.close()
        deadline = time.monotonic() + 30
        while not login_failures(stale) and time.monotonic() < deadline:
            time.sleep(0.2)
        # Its fetcher retries every 200 ms meanwhile: still one line.
        time.sleep(2)
        lines = login_failures(stale)
        assert len(lines) == 1, lines
        assert (
            f"cannot log in as {cluster.kdc.principal(principal_of(STALE_BROKER))}"
            f" with keytab {cluster.keytab(STALE_BROKER)}: Decrypt integrity check failed"
        ) in lines[0]
        assert "Traceback" not in stale.log()
        # Its leader drops it from the ISR once it has lagged replica.lag.time.max.ms.
        cluster.wait_for(
            lambda m: topic in m.topics and m.topics[topic].partitions[0].isrs == [1],
            30,
            what=f"broker {STALE_BROKER} out of {topic}'s ISR",
        )
    finally:
        stale.kill()
        del cluster.brokers[STALE_BROKER]
