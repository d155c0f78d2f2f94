"""Kafka's client settings, as Kafka's tools read them, for librdkafka and kafka-python."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from herdless.broker.config import read_properties
from herdless.security.client_config import (
    PLAIN_LOGIN,
    ClientConfigError,
    kafka_python_config,
    librdkafka_config,
)

SCRAM_LOGIN = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="s3 cr;et";'
)


def test_a_kafka_tools_file_becomes_librdkafka_settings() -> None:
    assert librdkafka_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_LOGIN,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/kafka/ca.pem",
            "ssl.truststore.password": "",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/etc/kafka/client.pem",
            "ssl.keystore.password": "ignored",
            "ssl.key.password": "key-secret",
            "ssl.endpoint.identification.algorithm": "",
            "ssl.enabled.protocols": "TLSv1.3",
            "default.api.timeout.ms": "60000",
            "client.id": "ops",
        }
    ) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "s3 cr;et",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        # One PEM key store holds the key and its chain.
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.pem",
        "ssl.key.password": "key-secret",
        "ssl.endpoint.identification.algorithm": "none",
        "client.id": "ops",
    }


def test_librdkafka_names_pass_as_they_are() -> None:
    settings = {"sasl.mechanisms": "PLAIN", "ssl.ca.location": "/ca.pem", "debug": "security"}
    assert librdkafka_config(settings) == settings


def test_inline_pem_and_pkcs12_stores() -> None:
    assert librdkafka_config(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",
        }
    ) == {
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
    }
    pkcs12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/c.p12"}
    assert librdkafka_config({**pkcs12, "ssl.keystore.password": "p"}) == {
        "ssl.keystore.location": "/c.p12",
        "ssl.keystore.password": "p",
    }


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"ssl.truststore.location": "/ca.jks"}, "a JKS trust store cannot be read"),
        (
            {"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"},
            "a JKS key store cannot be read",
        ),
        ({"sasl.jaas.config": "PlainLoginModule required"}, "ending with ';'"),
        (
            {"sasl.jaas.config": "com.example.Login required;"},
            "login module 'com.example.Login' cannot be translated",
        ),
        (
            {"sasl.jaas.config": f"{PLAIN_LOGIN} required;"},
            "names no username and password",
        ),
    ],
)
def test_settings_that_cannot_be_honoured_are_named(settings: dict[str, str], words: str) -> None:
    with pytest.raises(ClientConfigError, match=words) as refused:
        librdkafka_config(settings)
    assert "s3 cr" not in str(refused.value)


def test_librdkafka_settings_become_kafka_python_arguments() -> None:
    accepted = KafkaAdminClient.DEFAULT_CONFIG
    config = kafka_python_config(
        {
            "bootstrap.servers": "ignored:9092",  # the command's brokers are its own
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "scram-sha-256",
            "sasl.username": "alice",
            "sasl.password": "secret",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/client.pem",
            "ssl.key.location": "/client-key.pem",
            "ssl.key.password": "key-secret",
            "ssl.endpoint.identification.algorithm": "none",
            "sasl.kerberos.service.name": "kafka",
            "request.timeout.ms": "30000",
            "client.id": "ops",
        },
        accepted,
    )
    assert config == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "secret",
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/client.pem",
        "ssl_keyfile": "/client-key.pem",
        "ssl_password": "key-secret",
        "ssl_check_hostname": False,
        "sasl_kerberos_service_name": "kafka",
        "request_timeout_ms": 30000,
        "client_id": "ops",
    }
    assert set(config) <= set(accepted)


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("ssl.ca.pem", "ssl.ca.pem: kafka-python cannot take it; give the CA certificates"),
        ("ssl.keystore.location", "give a PEM key store"),
        ("queue.buffering.max.ms", "queue.buffering.max.ms: kafka-python has no such setting"),
    ],
)
def test_what_kafka_python_cannot_take_is_named(key: str, words: str) -> None:
    with pytest.raises(ClientConfigError, match=words):
        kafka_python_config({key: "x"}, KafkaAdminClient.DEFAULT_CONFIG)


def test_a_properties_line_ending_in_a_backslash_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# a comment ending in a backslash \\\n"
        "security.protocol=SASL_SSL\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="s3 cr;et";\n'
    )
    properties = read_properties(path)
    assert properties == {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": SCRAM_LOGIN,
    }
    assert librdkafka_config(properties)["sasl.password"] == "s3 cr;et"
