"""Client-metrics subscriptions (KIP-714) alone: which settings Kafka accepts, which
clients a subscription's selectors match, what a client matching several is subscribed
to, and the subscription id."""

from __future__ import annotations

import uuid

import pytest

from herdless.broker.telemetry.subscriptions import (
    DEFAULT_INTERVAL_MS,
    InvalidSubscription,
    resolve,
    subscription,
    subscription_id,
)

INSTANCE = uuid.UUID("6b0b9b3a-3c4a-4e57-9a1e-2f8a3c1d5e7f")
PRODUCER = {
    "client_instance_id": "awubOjxKTleaHi-KPB1efw",
    "client_id": "orders-producer",
    "client_software_name": "confluent-kafka-python",
    "client_software_version": "2.16.1-rdkafka-2.16.0",
    "client_source_address": "10.0.0.7",
    "client_source_port": "52100",
}


def test_a_config_reads_as_kafka_reads_it() -> None:
    found = subscription(
        "producers",
        {
            "metrics": "org.apache.kafka.producer. , org.apache.kafka.client.",
            "interval.ms": "1000",
            "match": "client_id=orders-.*, client_software_name=confluent-kafka-python",
        },
    )
    assert found.metrics == {"org.apache.kafka.producer.", "org.apache.kafka.client."}
    assert found.interval_ms == 1000
    assert set(found.match) == {"client_id", "client_software_name"}
    assert subscription("empty", {}).interval_ms == DEFAULT_INTERVAL_MS


@pytest.mark.parametrize(
    ("config", "words", "is_config"),
    [
        ({"metric": "x"}, "Unknown client metrics configuration: metric", False),
        ({"interval.ms": "99"}, "interval must be between 100 and 3600000", False),
        ({"interval.ms": "3600001"}, "interval must be between 100 and 3600000", False),
        ({"interval.ms": "soon"}, "not an integer", True),
        ({"match": "client_id"}, "Illegal client matching pattern: client_id", True),
        ({"match": "client_name=x"}, "Illegal client matching pattern: client_name=x", True),
        ({"match": "client_id=a=b"}, "Illegal client matching pattern", True),
        ({"match": "client_id=(unclosed"}, "Illegal client matching pattern", True),
    ],
)
def test_what_kafka_refuses_is_refused(config: dict[str, str], words: str, is_config: bool) -> None:
    with pytest.raises(InvalidSubscription, match=words) as refused:
        subscription("s", config)
    assert refused.value.config is is_config


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(InvalidSubscription, match="name can't be empty"):
        subscription("", {"metrics": "*"})


def test_selectors_match_whole_values_and_all_must_match() -> None:
    def matches(match: str) -> bool:
        return subscription("s", {"match": match}).matches(PRODUCER)

    assert matches("")  # no selector: every client
    assert matches("client_id=orders-.*")
    assert not matches("client_id=orders")  # a whole match, as Java's matches()
    assert matches("client_id=orders-producer,client_source_address=10\\.0\\.0\\.\\d+")
    assert not matches("client_id=orders-producer,client_source_port=1")
    assert matches("client_software_version=2\\.16\\..*")
    assert matches("client_instance_id=awubOjxKTleaHi-KPB1efw")
    assert not subscription("s", {"match": "client_id=.*"}).matches({"client_id": None})


def test_a_client_gets_the_union_of_its_subscriptions_at_the_shortest_interval() -> None:
    found = resolve(
        [
            subscription("a", {"metrics": "org.apache.kafka.producer.", "interval.ms": "5000"}),
            subscription("b", {"metrics": "org.apache.kafka.client.", "interval.ms": "2000"}),
            subscription(
                "c", {"metrics": "org.apache.kafka.consumer.", "match": "client_id=other"}
            ),
        ],
        PRODUCER,
        INSTANCE,
    )
    assert found.metrics == ("org.apache.kafka.client.", "org.apache.kafka.producer.")
    assert found.interval_ms == 2000


def test_a_subscription_longer_than_kafkas_default_interval_keeps_it() -> None:
    hourly = subscription("hourly", {"metrics": "org.", "interval.ms": "3600000"})
    assert resolve([hourly], PRODUCER, INSTANCE).interval_ms == 3600000


def test_all_metrics_is_said_with_a_star_alone() -> None:
    found = resolve(
        [subscription("a", {"metrics": "*"}), subscription("b", {"metrics": "org.x."})],
        PRODUCER,
        INSTANCE,
    )
    assert found.metrics == ("*",)


def test_no_subscription_means_no_metrics_at_kafkas_default_interval() -> None:
    found = resolve(
        [subscription("c", {"metrics": "*", "match": "client_id=x"})], PRODUCER, INSTANCE
    )
    assert found.metrics == ()
    assert found.interval_ms == DEFAULT_INTERVAL_MS


def test_the_subscription_id_changes_with_what_is_subscribed_and_the_instance() -> None:
    base = subscription_id(["a.", "b."], 1000, INSTANCE)
    assert base == subscription_id(["a.", "b."], 1000, INSTANCE)
    assert -(2**31) <= base < 2**31
    others = {
        subscription_id(["a."], 1000, INSTANCE),
        subscription_id(["a.", "b."], 2000, INSTANCE),
        subscription_id(["a.", "b."], 1000, uuid.uuid4()),
    }
    assert base not in others and len(others) == 3


def test_the_instance_id_is_hashed_as_javas_uuid_hash_code() -> None:
    # Uuid(1, 2).hashCode() == 3 in Java: the halves XORed, then their 32-bit halves.
    one_two = uuid.UUID(int=(1 << 64) | 2)
    crc_only = subscription_id([], 1000, uuid.UUID(int=0))
    assert subscription_id([], 1000, one_two) == crc_only ^ 3
