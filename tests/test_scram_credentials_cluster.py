"""SCRAM credentials on a 3-broker cluster: kept in ZooKeeper as Kafka keeps them, and a
change made through any broker, or by `herdless users --zookeeper` beside the running
brokers, in every broker's cache within a second."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
from kazoo.client import KazooClient

from tests.support.broker import BrokerProcess
from tests.support.cli import herdless, refused, succeeded, table_rows
from tests.support.cluster import ClusterProcesses, cluster_fixture, zookeeper_fixture
from tests.support.scram import (
    SHA_256,
    SHA_512,
    altered,
    described,
    files_holding,
    new_password,
)

NONE, RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL = 0, 91, 93
# Every password this module uses: none may be found anywhere at its end.
PASSWORDS: list[str] = []


cluster = cluster_fixture("scram-cluster")
zookeeper = zookeeper_fixture()


def upsertion(user: str, mechanism: ScramMechanism, iterations: int = 4096) -> tuple:
    """An upsertion as kafka-python's admin client salts and hashes it."""
    password = new_password(user)
    PASSWORDS.append(password)
    made = UserScramCredentialUpsertion(user, mechanism, password, iterations)
    return (user, int(mechanism), iterations, made.salt, made.salted_password)


def seconds_until_everywhere(
    brokers: dict[int, BrokerProcess], user: str, expected: object, timeout: float = 1.0
) -> float:
    """From now until every broker answers `expected` for the user: at most `timeout`."""
    started = time.monotonic()
    waiting = dict(brokers)
    while waiting:
        for broker_id, broker in list(waiting.items()):
            if described(broker, [user])[user] == expected:
                del waiting[broker_id]
        elapsed = time.monotonic() - started
        assert elapsed <= timeout, {
            broker_id: described(broker, [user]) for broker_id, broker in waiting.items()
        }
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_change_through_one_broker_is_on_every_broker_within_a_second(
    cluster: ClusterProcesses, zookeeper: KazooClient
) -> None:
    first, second, _ = cluster.brokers.values()
    added = altered(
        first,
        [upsertion("alice", ScramMechanism.SCRAM_SHA_256, 8192)]
        + [upsertion("alice", ScramMechanism.SCRAM_SHA_512)],
    )
    assert added == {"alice": (NONE, None)}
    # The broker that made it has it before it answers.
    assert described(first, ["alice"])["alice"] == (NONE, {SHA_256: 8192, SHA_512: 4096})
    seconds_until_everywhere(cluster.brokers, "alice", (NONE, {SHA_256: 8192, SHA_512: 4096}))
    # Where Kafka keeps it, as Kafka writes it.
    data, _ = zookeeper.get("/config/users/alice")
    config = json.loads(data)
    assert config["version"] == 1
    assert sorted(config["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert config["config"]["SCRAM-SHA-256"].endswith(",iterations=8192")
    changes = zookeeper.get_children("/config/changes")
    notes = [zookeeper.get(f"/config/changes/{name}")[0] for name in changes]
    assert b'{"version":2,"entity_path":"users/alice"}' in notes

    assert altered(second, deletions=[("alice", SHA_256)]) == {"alice": (NONE, None)}
    seconds_until_everywhere(cluster.brokers, "alice", (NONE, {SHA_512: 4096}))
    assert altered(second, deletions=[("alice", SHA_512)]) == {"alice": (NONE, None)}
    seconds_until_everywhere(cluster.brokers, "alice", (RESOURCE_NOT_FOUND, {}))
    assert not zookeeper.exists("/config/users/alice")


def test_users_added_in_zookeeper_beside_the_running_brokers_reach_them_all(
    cluster: ClusterProcesses,
) -> None:
    password = new_password("CN=ops,O=example")
    PASSWORDS.append(password)
    offline = ("--zookeeper", cluster.zookeeper.connect)
    succeeded(
        herdless("users", "add", "CN=ops,O=example", *offline, "--password-stdin", input=password)
    )
    seconds_until_everywhere(
        cluster.brokers, "CN=ops,O=example", (NONE, {SHA_256: 4096, SHA_512: 4096})
    )
    expected = [
        ["CN=ops,O=example", "SCRAM-SHA-256", "4096"],
        ["CN=ops,O=example", "SCRAM-SHA-512", "4096"],
    ]
    assert table_rows(succeeded(herdless("users", "list", *offline))) == expected
    online = succeeded(herdless("users", "list", "-b", cluster.bootstrap))
    assert table_rows(online) == expected


def test_a_user_name_zookeeper_cannot_hold_fails_that_user_alone(
    cluster: ClusterProcesses,
) -> None:
    first = cluster.brokers[1]
    answer = altered(
        first,
        [upsertion("..", ScramMechanism.SCRAM_SHA_256)]
        + [upsertion("dot.ted", ScramMechanism.SCRAM_SHA_256)],
    )
    assert answer["dot.ted"] == (NONE, None)
    assert answer[".."] == (UNACCEPTABLE_CREDENTIAL, "ZooKeeper cannot hold a user named '..'")
    assert described(first, [".."])[".."] == (RESOURCE_NOT_FOUND, {})
    assert described(first, ["dot.ted"])["dot.ted"] == (NONE, {SHA_256: 4096})
    offline = ("--zookeeper", cluster.zookeeper.connect, "--password", "x")
    refused(herdless("users", "add", "..", *offline), "ZooKeeper cannot hold a user named '..'")


def test_a_broker_started_later_reads_every_user(cluster: ClusterProcesses) -> None:
    first = cluster.brokers[1]
    assert altered(first, [upsertion("bob", ScramMechanism.SCRAM_SHA_512)]) == {"bob": (NONE, None)}
    cluster.restart(3)
    restarted = cluster.brokers[3]
    assert described(restarted, ["bob"])["bob"] == (NONE, {SHA_512: 4096})
    assert described(restarted, ["CN=ops,O=example"])["CN=ops,O=example"][0] == NONE


def test_no_password_is_in_any_data_directory_log_or_znode(
    cluster: ClusterProcesses, zookeeper: KazooClient
) -> None:
    assert len(PASSWORDS) >= 4
    # The brokers' data directories and logs, ZooKeeper's data and log: all under base_dir.
    assert files_holding(cluster.base_dir, PASSWORDS) == []

    def znodes(path: str) -> Iterator[tuple[str, bytes]]:
        data, _ = zookeeper.get(path)
        yield path, data or b""
        for child in zookeeper.get_children(path):
            yield from znodes(f"{path.rstrip('/')}/{child}")

    held = [(path, p) for path, data in znodes("/") for p in PASSWORDS if p.encode() in data]
    assert held == []
