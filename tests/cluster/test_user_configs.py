"""Users' configs (SCRAM credentials) in Kafka's ZooKeeper layout: names sanitized as
Kafka's Sanitizer does, the config's JSON, and the change notification every broker
follows, written together."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from herdless.cluster import layout
from herdless.cluster.errors import MalformedZNode
from tests.cluster.conftest import OpenStore, Recorder

CREDENTIAL = "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"


@pytest.mark.parametrize(
    ("user", "znode"),
    [
        ("alice", "alice"),
        ("a.b-c_d", "a.b-c_d"),
        ("first last", "first%20last"),
        ("CN=bob,O=org", "CN%3Dbob%2CO%3Dorg"),
        ("star*", "star%2A"),
        ("slash/tilde~plus+", "slash%2Ftilde%7Eplus%2B"),
        ("zoë", "zo%C3%AB"),
    ],
)
def test_user_names_are_sanitized_as_kafka_does(user: str, znode: str) -> None:
    assert layout.sanitize(user) == znode
    assert layout.desanitize(znode) == user
    assert layout.user_config_path(user) == f"/config/users/{znode}"


def test_a_plus_in_a_znode_name_is_a_space_as_javas_url_decoder_reads_it() -> None:
    assert layout.desanitize("first+last") == "first last"


def test_config_change_notifications_in_kafkas_versions() -> None:
    assert layout.encode_config_change("users/alice") == (
        b'{"version":2,"entity_path":"users/alice"}'
    )
    assert (
        layout.decode_config_change(
            "config_change_0000000003", layout.encode_config_change("users/a")
        )
        == "users/a"
    )
    version_1 = b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    assert layout.decode_config_change("config_change_0000000004", version_1) == "topics/t"
    with pytest.raises(MalformedZNode):
        layout.decode_config_change("config_change_0000000005", b'{"version":3}')
    assert layout.config_change_number("config_change_0000000042") == 42
    assert layout.config_change_number("something_else") is None


def test_an_unreadable_config_names_its_keys_not_its_values() -> None:
    with pytest.raises(MalformedZNode) as caught:
        layout.decode_user_config("alice", b'{"version":1,"config":{"SCRAM-SHA-256":1}}')
    assert "SCRAM-SHA-256" in str(caught.value)


def test_altering_a_users_config_writes_kafkas_znodes_and_a_notification(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    written = store.alter_user_config(
        "CN=bob", lambda config: {**config, "SCRAM-SHA-256": CREDENTIAL}
    )
    assert written == {"SCRAM-SHA-256": CREDENTIAL}
    data, _ = raw.get("/config/users/CN%3Dbob")
    assert json.loads(data) == {"version": 1, "config": {"SCRAM-SHA-256": CREDENTIAL}}
    (change,) = raw.get_children("/config/changes")
    assert change.startswith("config_change_")
    data, _ = raw.get(f"/config/changes/{change}")
    assert data == b'{"version":2,"entity_path":"users/CN%3Dbob"}'
    assert store.config_change(change).entity_path == "users/CN%3Dbob"
    assert store.user_configs() == {"CN=bob": {"SCRAM-SHA-256": CREDENTIAL}}


def test_other_settings_of_a_user_are_kept_and_an_empty_config_goes(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    raw.create("/config/users/carol", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    store.alter_user_config("carol", lambda config: {**config, "SCRAM-SHA-512": CREDENTIAL})
    assert store.user_config("carol") == {"producer_byte_rate": "1024", "SCRAM-SHA-512": CREDENTIAL}
    store.alter_user_config("carol", lambda config: {})
    assert not raw.exists("/config/users/carol")
    assert len(raw.get_children("/config/changes")) == 2
    assert store.user_config("carol") == {}


def test_an_alteration_raced_by_another_writer_is_applied_to_what_that_one_wrote(
    open_store: OpenStore, raw: KazooClient
) -> None:
    store = open_store()
    store.alter_user_config("dave", lambda config: {"a": "1"})
    calls = 0

    def change(config: dict[str, str]) -> dict[str, str]:
        nonlocal calls
        calls += 1
        if calls == 1:  # another writer gets in between this read and its write
            raw.set("/config/users/dave", b'{"version":1,"config":{"a":"1","b":"2"}}')
        return {**config, "c": "3"}

    assert store.alter_user_config("dave", change) == {"a": "1", "b": "2", "c": "3"}
    assert calls == 2


def test_a_change_that_raises_writes_nothing(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()

    def refuse(config: dict[str, str]) -> dict[str, str]:
        raise LookupError("no such credential")

    with pytest.raises(LookupError):
        store.alter_user_config("erin", refuse)
    assert not raw.exists("/config/users/erin")
    assert raw.get_children("/config/changes") == []


def test_notifications_are_watched_and_deleted(open_store: OpenStore, raw: KazooClient) -> None:
    store = open_store()
    seen: Recorder[list[str]] = Recorder()
    store.watch_config_changes(seen)
    store.alter_user_config("frank", lambda config: {"SCRAM-SHA-256": CREDENTIAL})
    names = seen.wait_for(lambda names: len(names) == 1)
    store.delete_config_change(names[0])
    store.delete_config_change(names[0])  # gone already: no error
    seen.wait_for(lambda names: names == [])
    assert store.config_change(names[0]) is None
