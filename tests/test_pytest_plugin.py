"""The pytest plugin as users get it: pytest run on a project of their own, in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "pytest-plugin"
PLUGIN = "herdless.testing.plugin"


def run_pytest(project: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in `project`, as its own user runs it; the plugin comes through herdless's
    entry point when the installed herdless has it, and is named otherwise (an editable
    install made before the entry point existed)."""
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", PLUGIN]
    command = [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider"]
    command += ["--basetemp", str(tmp_path / "basetemp"), *args]
    # Nothing written into the checkout's example.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=300
    )


def outcomes(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """pytest's summary line as counts: {"passed": 3, "failed": 1}."""
    summary = result.stdout.strip().splitlines()[-1]
    return {word: int(count) for count, word in re.findall(r"(\d+) (\w+)", summary)}


def test_the_example_project_passes_against_a_broker_and_a_cluster(tmp_path: Path) -> None:
    result = run_pytest(EXAMPLE, tmp_path, "-q")
    assert result.returncode == 0, result.stdout + result.stderr
    assert set(outcomes(result)) == {"passed"}, result.stdout
    assert outcomes(result)["passed"] >= 4


CHECKS = """
import json
from pathlib import Path


def test_a_broker_that_cannot_start(herdless_broker_factory):
    herdless_broker_factory(num_partitions="zero")


def test_no_zookeeper(herdless_cluster):
    pass


def test_stops_the_module_broker(herdless_broker):
    Path("first.json").write_text(json.dumps(herdless_broker.bootstrap))
    herdless_broker.kill()


def test_the_module_broker_is_back(herdless_broker):
    assert herdless_broker.bootstrap == json.loads(Path("first.json").read_text())
    herdless_broker.create_topic("back")
    herdless_broker.produce("back", ["v"])
    assert [r.value for r in herdless_broker.consume("back", 1)] == [b"v"]
"""

OTHER_MODULE = """
import json
from pathlib import Path


def test_another_module_has_another_broker(herdless_broker):
    assert herdless_broker.bootstrap != json.loads(Path("first.json").read_text())
"""


def docs_example() -> str:
    """The first Python block of docs/testing.md: the test it shows a user."""
    text = (ROOT / "docs" / "testing.md").read_text()
    return re.search(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)[1]


# The machine may well have ZooKeeper; this project's pytest acts as if it had not.
NO_ZOOKEEPER = """
from pathlib import Path

import herdless.cli.zookeeper

herdless.cli.zookeeper.ZOOKEEPER_JAR = Path("/nonexistent/zookeeper.jar")
"""


def test_failures_are_clear_shared_brokers_come_back_and_the_docs_example_runs(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(NO_ZOOKEEPER)
    (project / "test_a_checks.py").write_text(CHECKS)
    # With the docs' example, which shares that module's broker.
    (project / "test_b_other.py").write_text(OTHER_MODULE + docs_example())

    result = run_pytest(project, tmp_path, "-q", "--herdless-broker-scope=module")
    output = result.stdout + result.stderr
    assert outcomes(result) == {"failed": 1, "passed": 4, "error": 1}, output
    # The broker's exit, and its own words from its log, without a traceback of ours.
    assert "herdless broker did not start: broker exited with 2" in output
    assert "num.partitions must be an integer, not 'zero'" in output
    assert "herdless_cluster needs ZooKeeper" in output
    assert "apt-get install -y zookeeper" in output
    assert "src/herdless/testing" not in output
    assert "During handling of the above exception" not in output


SECURED = """
import asyncio
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kazoo.client import KazooClient
from kazoo.security import Permissions

from herdless.testing.security import ZOOKEEPER_USER, Security


@pytest.fixture(scope="module")
def broker(herdless_broker_factory):
    security = Security(
        users={"alice": "alice-Secret-1"}, listeners=("SASL_SSL", "SSL"), authorizer=True
    )
    with herdless_broker_factory(security=security) as broker:
        # With the authorizer on, admin grants alice and the test's certificate their topic.
        admin = AdminClient(broker.client_settings("admin").librdkafka())
        grants = [
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, principal,
                       "*", AclOperation.ALL, AclPermissionType.ALLOW)
            for principal in ("User:alice", "User:CN=client")
        ]
        for future in admin.create_acls(grants, request_timeout=30).values():
            future.result()
        yield broker


def test_the_helpers_go_through_the_secured_listener(herdless_secured_broker):
    broker = herdless_secured_broker
    assert broker.bootstrap != broker.plaintext_bootstrap
    assert broker.client_config()["security.protocol"] == "SASL_SSL"
    broker.create_topic("secured", partitions=2)
    broker.produce("secured", ["a", "b"])
    assert sorted(r.value for r in broker.consume("secured", 2)) == [b"a", b"b"]


def test_each_client_library_logs_in(broker):
    broker.create_topic("orders")
    alice = broker.client_settings("alice")
    assert "orders" in KafkaAdminClient(**alice.kafka_python()).list_topics()
    plain = broker.client_settings("alice", mechanism="PLAIN")
    producer = Producer(plain.librdkafka())
    producer.produce("orders", b"from-librdkafka")
    assert producer.flush(10) == 0

    async def produce():
        client = AIOKafkaProducer(**alice.aiokafka())
        await client.start()
        await client.send_and_wait("orders", b"from-aiokafka")
        await client.stop()

    asyncio.run(produce())
    values = sorted(r.value for r in broker.consume("orders", 2))
    assert values == [b"from-aiokafka", b"from-librdkafka"]


def test_a_client_certificate_over_ssl(broker):
    settings = broker.client_settings(None, listener="SSL", certificate=True)
    admin = AdminClient(settings.librdkafka())
    assert "orders" in admin.list_topics(timeout=10).topics


def test_a_wrong_password_is_refused(broker):
    alice = broker.client_settings("alice")
    wrong = {**alice.librdkafka(), "sasl.password": "wrong", "group.id": "g"}
    errors = []
    consumer = Consumer({**wrong, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        consumer.list_topics(timeout=3)
    consumer.poll(0)
    assert any("Authentication failed" in e.str() for e in errors), errors


def test_the_herdless_command_with_kafkas_settings(broker, tmp_path):
    config = broker.client_settings().write_properties(tmp_path / "admin.properties")
    listed = subprocess.run(
        [sys.executable, "-m", "herdless", "topics", "list", "--command-config", str(config)],
        capture_output=True, text=True, timeout=60,
    )
    assert "orders" in listed.stdout, listed.stderr


def test_a_secured_cluster(herdless_cluster_factory):
    security = Security(zookeeper_login=True)
    with herdless_cluster_factory(3, security=security) as cluster:
        assert len(cluster.bootstrap.split(",")) == 3
        cluster.create_topic("replicated", partitions=2)  # 3 replicas, in sync over SASL_SSL
        cluster.produce("replicated", ["x"])
        assert [r.value for r in cluster.consume("replicated", 1)] == [b"x"]
        # The brokers logged in to ZooKeeper and keep what they write there to themselves.
        zookeeper = KazooClient(
            cluster.zookeeper.connect,
            sasl_options={
                "mechanism": "DIGEST-MD5",
                "username": ZOOKEEPER_USER,
                "password": security.zookeeper_password,
            },
        )
        zookeeper.start(10)
        try:
            acls, _ = zookeeper.get_acls("/brokers/topics/replicated")
        finally:
            zookeeper.stop()
        assert ("sasl", ZOOKEEPER_USER, Permissions.ALL) in {
            (acl.id.scheme, acl.id.id, acl.perms) for acl in acls
        }
        assert ("world", "anyone", Permissions.READ) in {
            (acl.id.scheme, acl.id.id, acl.perms) for acl in acls
        }
"""


def test_secured_brokers_and_clusters_for_each_client_library(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_secured.py").write_text(SECURED)
    result = run_pytest(project, tmp_path, "-q")
    assert result.returncode == 0, result.stdout + result.stderr
    assert outcomes(result)["passed"] == 6, result.stdout
