"""Listener settings read as Kafka reads them, and refused with a message naming the setting."""

from __future__ import annotations

import pytest

from herdless.broker.config import BrokerConfig, ConfigError
from herdless.security.listeners import Endpoint, SecurityProtocol


def config(**settings: str) -> BrokerConfig:
    broker = BrokerConfig()
    broker.apply_properties(settings)
    broker.validate()
    return broker


def test_without_listeners_host_and_port_are_one_plaintext_listener() -> None:
    broker = BrokerConfig(host="0.0.0.0", port=9092)
    assert broker.listener_endpoints() == [
        Endpoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "0.0.0.0", 9092)
    ]
    # A wildcard is never advertised: clients are told a host they can reach.
    assert broker.advertised_endpoints()[0].host == "127.0.0.1"
    assert broker.inter_broker_listener() == "PLAINTEXT"


def test_named_listeners_with_a_protocol_map_and_advertised_addresses() -> None:
    broker = config(
        **{
            "listeners": "INTERNAL://0.0.0.0:9093,EXTERNAL://:9094",
            "advertised.listeners": "INTERNAL://10.0.0.5:9093,EXTERNAL://kafka.example.com:9094",
            "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
            "inter.broker.listener.name": "INTERNAL",
        }
    )
    assert broker.listener_endpoints() == [
        Endpoint("INTERNAL", SecurityProtocol.SASL_SSL, "0.0.0.0", 9093),
        Endpoint("EXTERNAL", SecurityProtocol.SSL, "", 9094),
    ]
    assert [str(e) for e in broker.advertised_endpoints()] == [
        "INTERNAL://10.0.0.5:9093",
        "EXTERNAL://kafka.example.com:9094",
    ]
    assert broker.inter_broker_listener() == "INTERNAL"
    # --host and --port now name the first listener (the metrics endpoint binds there).
    assert (broker.host, broker.port) == ("0.0.0.0", 9093)


def test_a_listener_on_port_0_is_advertised_on_the_port_it_bound() -> None:
    broker = config(listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0")
    advertised = broker.advertised_endpoints({"PLAINTEXT": 40001, "SASL_PLAINTEXT": 40002})
    assert [e.port for e in advertised] == [40001, 40002]


def test_the_inter_broker_listener_follows_security_inter_broker_protocol() -> None:
    broker = config(
        **{
            "listeners": "SASL_SSL://:9094,PLAINTEXT://:9092",
            "security.inter.broker.protocol": "SASL_SSL",
        }
    )
    assert broker.inter_broker_listener() == "SASL_SSL"
    # With neither set, PLAINTEXT as Kafka; without a PLAINTEXT listener, the first.
    assert config(listeners="SSL://:9093,PLAINTEXT://:9092").inter_broker_listener() == "PLAINTEXT"
    assert config(listeners="SSL://:9093").inter_broker_listener() == "SSL"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "PLAINTEXT:/127.0.0.1:9092"}, "look like NAME://host:port"),
        ({"listeners": "INTERNAL://:9093"}, "listener INTERNAL has no security protocol"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "more than once"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "port 9092 for more than one"),
        ({"listeners": "PLAINTEXT://:99999"}, "port must be between"),
        ({"listener.security.protocol.map": "A:TLS"}, "no security protocol 'TLS'"),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"},
            "advertised.listeners names SSL, which is not among the listeners",
        ),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "cannot advertise",
        ),
        (
            {"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "INTERNAL"},
            "inter.broker.listener.name is INTERNAL, which is not among the listeners",
        ),
    ],
)
def test_bad_listener_settings_are_refused_naming_the_setting(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**settings)
