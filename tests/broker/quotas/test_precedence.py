"""Which quota applies to a client: Kafka's eight levels of precedence (KIP-55), the
entity paths Kafka keeps them under, and who shares a measured rate."""

from __future__ import annotations

import pytest

from herdless.broker.quotas.manager import ClientQuotaManager
from herdless.broker.quotas.precedence import applicable_quota
from herdless.protocol.client_quotas import (
    DEFAULT,
    InvalidEntity,
    QuotaEntity,
    QuotaType,
    quota_value,
)

KEY = "producer_byte_rate"
LEVELS = [
    (QuotaEntity("alice", "app"), "users/alice/clients/app"),
    (QuotaEntity("alice", DEFAULT), "users/alice/clients/<default>"),
    (QuotaEntity("alice"), "users/alice"),
    (QuotaEntity(DEFAULT, "app"), "users/<default>/clients/app"),
    (QuotaEntity(DEFAULT, DEFAULT), "users/<default>/clients/<default>"),
    (QuotaEntity(DEFAULT), "users/<default>"),
    (QuotaEntity(client_id="app"), "clients/app"),
    (QuotaEntity(client_id=DEFAULT), "clients/<default>"),
]


@pytest.mark.parametrize(("entity", "path"), LEVELS)
def test_entities_are_kept_where_kafka_keeps_them(entity: QuotaEntity, path: str) -> None:
    assert entity.path == path
    assert QuotaEntity.from_path(path) == entity


def test_names_are_sanitized_as_kafka_does() -> None:
    entity = QuotaEntity("CN=alice, O=x", "my app")
    assert entity.path == "users/CN%3Dalice%2C%20O%3Dx/clients/my%20app"
    assert QuotaEntity.from_path(entity.path) == entity


def test_each_level_wins_over_every_level_below_it() -> None:
    for i, (winner, _) in enumerate(LEVELS):
        quotas = {entity: {KEY: float(j)} for j, (entity, _) in enumerate(LEVELS) if j >= i}
        match = applicable_quota(quotas, KEY, "alice", "app")
        assert match is not None and match.entity == winner and match.bound == i


def test_other_users_and_clients_fall_to_the_defaults() -> None:
    quotas = {entity: {KEY: float(j)} for j, (entity, _) in enumerate(LEVELS)}
    bob = applicable_quota(quotas, KEY, "bob", "app")
    assert bob is not None and bob.entity == QuotaEntity(DEFAULT, "app")
    other = applicable_quota(quotas, KEY, "bob", "other")
    assert other is not None and other.entity == QuotaEntity(DEFAULT, DEFAULT)


def test_a_quota_of_another_kind_does_not_apply() -> None:
    quotas = {QuotaEntity("alice"): {"consumer_byte_rate": 10.0}}
    assert applicable_quota(quotas, KEY, "alice", "app") is None


def test_a_user_quota_is_shared_by_the_users_clients() -> None:
    # Kafka's metric tags: user alone for /config/users/<user>, client id alone for
    # /config/clients/<id>, both for a user's client id.
    quotas = {QuotaEntity("alice"): {KEY: 1.0}, QuotaEntity(client_id=DEFAULT): {KEY: 2.0}}
    a = applicable_quota(quotas, KEY, "alice", "one")
    b = applicable_quota(quotas, KEY, "alice", "two")
    assert a is not None and b is not None and a.sensor == b.sensor == ("alice", "")
    c = applicable_quota(quotas, KEY, "bob", "one")
    assert c is not None and c.sensor == ("", "one")


def test_an_empty_client_id_has_no_entity_of_its_own() -> None:
    quotas = {QuotaEntity(client_id=DEFAULT): {KEY: 5.0}}
    match = applicable_quota(quotas, KEY, "alice", "")
    assert match is not None and match.entity == QuotaEntity(client_id=DEFAULT)


def test_values_are_written_as_kafka_writes_them() -> None:
    assert quota_value("producer_byte_rate", 1024.0) == "1024"
    assert quota_value("request_percentage", 50) == "50.0"
    with pytest.raises(InvalidEntity, match="must be a LONG value"):
        quota_value("consumer_byte_rate", 1.5)
    with pytest.raises(InvalidEntity, match="Invalid configuration key"):
        quota_value("bytes_per_second", 1.0)


def test_bad_entities_are_refused_with_kafkas_words() -> None:
    with pytest.raises(InvalidEntity, match="Invalid empty client quota entity"):
        QuotaEntity.from_wire([])
    with pytest.raises(InvalidEntity, match="Empty user not supported"):
        QuotaEntity.from_wire([("user", "")])
    with pytest.raises(InvalidEntity, match="Unhandled client quota entity type"):
        QuotaEntity.from_wire([("group", "g")])


def test_the_manager_throttles_only_past_the_quota() -> None:
    now = [0]
    manager = ClientQuotaManager(11, 1000, lambda: now[0])
    assert manager.record(QuotaType.PRODUCE, "alice", "app", 10**9) == 0  # no quota yet
    manager.apply("clients/app", {KEY: "1000", "SCRAM-SHA-256": "ignored"})
    assert manager.record(QuotaType.PRODUCE, "alice", "app", 1000) == 0
    # Twice the quota in the first second: wait a second more.
    assert manager.record(QuotaType.PRODUCE, "alice", "app", 1000) == 1000
    assert manager.record(QuotaType.PRODUCE, "alice", "other", 15_000) == 0
    now[0] = 2000
    assert manager.record(QuotaType.PRODUCE, "alice", "app", 0) == 0
    manager.apply("clients/app", {})
    assert not manager.enabled(QuotaType.PRODUCE)
    assert manager.record(QuotaType.PRODUCE, "alice", "app", 10**9) == 0


def test_a_request_time_throttle_is_at_most_one_window() -> None:
    manager = ClientQuotaManager(11, 1000, lambda: 0)
    manager.apply("users/<default>", {"request_percentage": "1.0"})
    assert manager.record(QuotaType.REQUEST, "alice", "app", 500.0) == 1000


@pytest.mark.parametrize("request_bytes", [10_000, 90_000, 1_000_000])
def test_a_client_that_waits_out_its_throttles_goes_at_its_quota(request_bytes: int) -> None:
    """A flat-out client sending again as soon as each throttle is over: over 30 s (and
    over each 10 s of it) it sends at the quota, from the start, without bursts."""
    now = [0]
    manager = ClientQuotaManager(11, 1000, lambda: now[0])
    manager.apply("clients/app", {KEY: "1000000"})
    sent_at: list[int] = []
    while now[0] < 30_000:
        sent_at.append(now[0])
        now[0] += max(manager.record(QuotaType.PRODUCE, "u", "app", request_bytes), 1)
    for start in (0, 10_000, 20_000):
        sent = sum(request_bytes for t in sent_at if start <= t < start + 10_000)
        assert sent / 10 == pytest.approx(1_000_000, rel=0.10)
