"""Real clients (confluent-kafka, kafka-python, aiokafka, kcat) that log in to a secured
listener, produce, consume in a group and commit: what the security tests ask of each."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider

from tests.support.tokens import claims, unsecured_token

RECORDS = 3
# Settings of the producer alone (acks...), in the client's own names.
Settings = Mapping[str, Any]
NONE: Settings = MappingProxyType({})

# (listener, SASL mechanism or None, whether the client shows a certificate)
SETUPS = [
    ("SSL", None, False),
    ("SSL", None, True),
    *[("SASL_PLAINTEXT", m, False) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")],
    *[("SASL_SSL", m, False) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")],
]


def setup_id(setup: tuple[str, str | None, bool]) -> str:
    listener, mechanism, certificate = setup
    return "-".join(
        [listener, mechanism or ("client-certificate" if certificate else "no-certificate")]
    )


@dataclass(frozen=True)
class Login:
    """How a client reaches a listener: its protocol, the CA it trusts, its own
    certificate if it shows one, and its SASL mechanism and user if it logs in."""

    bootstrap: str
    security_protocol: str
    ca: Path | None = None
    certificate: Path | None = None
    key: Path | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None


class UnsecuredTokens(KafkaPythonTokenProvider):
    """kafka-python's token provider: a fresh unsecured OAUTHBEARER token for `user`
    (run_aiokafka hands aiokafka the same tokens through its own provider type)."""

    def __init__(self, user: str) -> None:
        self.user = user

    def token(self) -> str:
        return unsecured_token(claims(self.user, time.time()))


class _AioTokens(AioTokenProvider):
    def __init__(self, tokens: UnsecuredTokens) -> None:
        self.tokens = tokens

    async def token(self) -> str:
        return self.tokens.token()


def librdkafka_settings(login: Login) -> dict[str, str]:
    settings = {"bootstrap.servers": login.bootstrap, "security.protocol": login.security_protocol}
    if login.ca is not None:
        settings["ssl.ca.location"] = str(login.ca)
    if login.certificate is not None and login.key is not None:
        settings["ssl.certificate.location"] = str(login.certificate)
        settings["ssl.key.location"] = str(login.key)
    if login.mechanism == "OAUTHBEARER":
        # librdkafka's own unsecured JWT, as kcat users write it.
        settings["sasl.mechanism"] = "OAUTHBEARER"
        settings["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
        settings["sasl.oauthbearer.config"] = f"principal={login.username}"
    elif login.mechanism is not None:
        settings["sasl.mechanism"] = login.mechanism
        settings["sasl.username"] = login.username or ""
        settings["sasl.password"] = login.password or ""
    return settings


def python_settings(login: Login) -> dict[str, Any]:
    """kafka-python's names (aiokafka takes an ssl_context instead of the files)."""
    settings: dict[str, Any] = {
        "bootstrap_servers": login.bootstrap,
        "security_protocol": login.security_protocol,
    }
    if login.ca is not None:
        settings["ssl_cafile"] = str(login.ca)
    if login.certificate is not None and login.key is not None:
        settings["ssl_certfile"] = str(login.certificate)
        settings["ssl_keyfile"] = str(login.key)
    if login.mechanism == "OAUTHBEARER":
        settings["sasl_mechanism"] = "OAUTHBEARER"
        settings["sasl_oauth_token_provider"] = UnsecuredTokens(login.username or "")
    elif login.mechanism is not None:
        settings["sasl_mechanism"] = login.mechanism
        settings["sasl_plain_username"] = login.username
        settings["sasl_plain_password"] = login.password
    return settings


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's committed offset of partition 0, read through `bootstrap` (a PLAINTEXT
    listener, beside the one under test)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [partition] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        return partition.offset if partition.offset >= 0 else None
    finally:
        consumer.close()


def values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{n}".encode() for n in range(RECORDS)]


def run_confluent(
    settings: dict[str, str], topic: str, group: str, producer_settings: Settings = NONE
) -> list[bytes]:
    errors: list[Any] = []
    producer = Producer({**settings, **producer_settings, "error_cb": errors.append})
    for value in values(topic):
        producer.produce(
            topic, value, on_delivery=lambda error, _: errors.append(error) if error else None
        )
    assert producer.flush(30) == 0, errors
    consumer = Consumer(
        {
            **settings,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return seen


def run_kafka_python(
    settings: dict[str, Any], topic: str, group: str, producer_settings: Settings = NONE
) -> list[bytes]:
    producer = KafkaProducer(**settings, **producer_settings)
    for value in values(topic):
        producer.send(topic, value).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **settings
    )
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < RECORDS and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            seen.extend(record.value for record in records)
    consumer.commit()
    consumer.close()
    return seen


def run_aiokafka(
    settings: dict[str, Any], topic: str, group: str, producer_settings: Settings = NONE
) -> list[bytes]:
    files = {
        key: settings.pop(key)
        for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
        if key in settings
    }
    tokens = settings.get("sasl_oauth_token_provider")
    if isinstance(tokens, UnsecuredTokens):
        settings["sasl_oauth_token_provider"] = _AioTokens(tokens)
    if files:
        settings["ssl_context"] = create_ssl_context(
            cafile=files.get("ssl_cafile"),
            certfile=files.get("ssl_certfile"),
            keyfile=files.get("ssl_keyfile"),
        )

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**settings, **producer_settings)
        await producer.start()
        try:
            for value in values(topic):
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **settings,
        )
        await consumer.start()
        seen = []
        try:
            async with asyncio.timeout(30):
                while len(seen) < RECORDS:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        seen.extend(record.value for record in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


def run_kcat(
    settings: dict[str, str], topic: str, group: str, producer_settings: Settings = NONE
) -> list[bytes]:
    options = [
        arg
        for key, value in settings.items()
        if key != "bootstrap.servers"
        for arg in ("-X", f"{key}={value}")
    ]
    bootstrap = ["-b", settings["bootstrap.servers"]]
    producer_options = [arg for item in producer_settings.items() for arg in ("-X", "=".join(item))]
    subprocess.run(
        ["kcat", *bootstrap, *options, *producer_options, "-P", "-t", topic],
        input=b"\n".join(values(topic)) + b"\n",
        check=True,
        capture_output=True,
        timeout=60,
    )
    consumed = subprocess.run(
        [
            "kcat",
            *bootstrap,
            *options,
            "-X",
            "auto.offset.reset=earliest",
            "-G",
            group,
            topic,
            "-e",
            "-q",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return consumed.stdout.split()


CLIENTS: dict[str, tuple[Callable[..., list[bytes]], Callable[[Login], Any]]] = {
    "confluent-kafka": (run_confluent, librdkafka_settings),
    "kafka-python": (run_kafka_python, python_settings),
    "aiokafka": (run_aiokafka, python_settings),
    "kcat": (run_kcat, librdkafka_settings),
}


def run_client(client: str, login: Login, topic: str, group: str) -> list[bytes]:
    """What `client` consumed of the RECORDS it produced to `topic`, in group `group`."""
    run, settings_for = CLIENTS[client]
    return run(settings_for(login), topic, group)
