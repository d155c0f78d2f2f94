"""Every client over SASL/OAUTHBEARER listeners of one broker, as users would: unsecured
tokens (Kafka's default validator) and signed ones (Kafka's OIDC validator against a
JWKS file, and over SASL_SSL against a JWKS served over https), on SASL_PLAINTEXT and
SASL_SSL. Each client produces, consumes in a group and commits.

Then sessions that end with their tokens (KIP-368): a client that re-authenticates keeps
its connections past its first token's expiry; one that cannot is disconnected when
its session ends, and carries on on a new connection with a new token.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import Consumer, Producer
from kafka.net.sasl.oauth import AbstractTokenProvider
from prometheus_client.parser import text_string_to_metric_families

from herdless.broker.auth.oauthbearer import OIDC_VALIDATORS
from herdless.cli.certs import CertificateFiles, write_certificates
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.jwks_server import JwksServer
from tests.support.secured_clients import (
    RECORDS,
    committed,
    run_aiokafka,
    run_confluent,
    run_kafka_python,
    run_kcat,
    values,
)
from tests.support.tokens import SigningKey, claims, unsecured_token, write_jwks

AUDIENCE = "herdless"
ISSUER = "https://idp.test"
# The short-lived tokens of the session tests, and how long those tests run.
SHORT_LIFETIME_S = 4
SESSION_TEST_S = 3 * SHORT_LIFETIME_S
# librdkafka re-authenticates at 90% of its session: a longer token leaves it a margin
# of a second, which a loaded machine's thread scheduling does not eat.
REAUTH_LIFETIME_S = 10
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

# listener: (security protocol, whether its tokens are signed)
LISTENERS = {
    "UNSECURED": ("SASL_PLAINTEXT", False),
    "UNSECURED_SSL": ("SASL_SSL", False),
    "SIGNED": ("SASL_PLAINTEXT", True),
    "SIGNED_SSL": ("SASL_SSL", True),
    "REAUTH": ("SASL_PLAINTEXT", False),
}


class OAuth:
    def __init__(
        self,
        broker: BrokerProcess,
        certificates: CertificateFiles,
        ports: dict[str, int],
        key: SigningKey,
        metrics_port: int,
    ) -> None:
        self.broker = broker
        self.certificates = certificates
        self.ports = ports
        self.key = key
        self.metrics_port = metrics_port

    def token(self, listener: str, lifetime_s: float = 3600, now_s: float | None = None) -> str:
        now_s = time.time() if now_s is None else now_s
        token_claims = claims("alice", now_s, lifetime_s, aud=AUDIENCE, iss=ISSUER)
        if LISTENERS[listener][1]:
            return self.key.sign(token_claims)
        return unsecured_token(token_claims)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def oauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuth]:
    base = tmp_path_factory.mktemp("oauthbearer")
    certificates = write_certificates(base / "certs", ["127.0.0.1", "localhost"])
    key = SigningKey.named("idp-key-1")
    jwks_file = write_jwks(base / "jwks.json", key)
    ports = {name: free_port() for name in LISTENERS}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    protocols = ",".join(f"{name}:{protocol}" for name, (protocol, _) in LISTENERS.items())
    with JwksServer(certificates.broker, key) as jwks_server:
        settings = {
            "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{protocols}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certificates.broker,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certificates.ca,
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": (
                OIDC_VALIDATORS[0]
            ),
            "listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (
                jwks_file.as_uri()
            ),
            "listener.name.signed_ssl.oauthbearer.sasl.server.callback.handler.class": (
                OIDC_VALIDATORS[1]
            ),
            "listener.name.signed_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (
                jwks_server.url
            ),
            # The https JWKS is trusted as Kafka trusts it: by the JAAS entry's ssl.*.
            "listener.name.signed_ssl.oauthbearer.sasl.jaas.config": (
                f'{LOGIN_MODULE} required ssl.truststore.type="PEM"'
                f' ssl.truststore.location="{certificates.ca}";'
            ),
            "listener.name.reauth.connections.max.reauth.ms": "60000",
            "group.initial.rebalance.delay.ms": "0",
        }
        args = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
        metrics_port = free_port()
        args += ["--metrics-port", str(metrics_port)]
        with module_broker(base / "data", *args, listeners=listeners) as broker:
            yield OAuth(broker, certificates, ports, key, metrics_port)


def librdkafka_settings(oauth: OAuth, listener: str) -> dict[str, Any]:
    protocol, signed = LISTENERS[listener]
    settings: dict[str, Any] = {
        "bootstrap.servers": oauth.bootstrap(listener),
        "security.protocol": protocol,
        "sasl.mechanism": "OAUTHBEARER",
    }
    if protocol == "SASL_SSL":
        settings["ssl.ca.location"] = str(oauth.certificates.ca)
    if signed:
        settings["oauth_cb"] = lambda _config: (oauth.token(listener), time.time() + 3600)
    else:
        # librdkafka's own unsecured JWT, as kcat users write it.
        settings |= {
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=alice",
        }
    return settings


class KafkaPythonTokens(AbstractTokenProvider):
    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    def token(self) -> str:
        return self.make()


class AioTokens(AioTokenProvider):
    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    async def token(self) -> str:
        return self.make()


def python_settings(oauth: OAuth, listener: str, provider: Any) -> dict[str, Any]:
    protocol, _ = LISTENERS[listener]
    settings: dict[str, Any] = {
        "bootstrap_servers": oauth.bootstrap(listener),
        "security_protocol": protocol,
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": provider(lambda: oauth.token(listener)),
    }
    if protocol == "SASL_SSL":
        settings["ssl_cafile"] = str(oauth.certificates.ca)
    return settings


CLIENTS: dict[str, Callable[[OAuth, str, str, str], list[bytes]]] = {
    "confluent-kafka": lambda o, lst, t, g: run_confluent(librdkafka_settings(o, lst), t, g),
    "kafka-python": lambda o, lst, t, g: run_kafka_python(
        python_settings(o, lst, KafkaPythonTokens), t, g
    ),
    "aiokafka": lambda o, lst, t, g: run_aiokafka(python_settings(o, lst, AioTokens), t, g),
    "kcat": lambda o, lst, t, g: run_kcat(librdkafka_settings(o, lst), t, g),
}
CASES = [
    (client, listener)
    for client in CLIENTS
    for listener in ("UNSECURED", "UNSECURED_SSL", "SIGNED", "SIGNED_SSL")
    # kcat cannot be handed a signed token: it has no token callback.
    if not (client == "kcat" and LISTENERS[listener][1])
]


@pytest.mark.parametrize(("client", "listener"), CASES, ids=[f"{c}-{lst}" for c, lst in CASES])
def test_a_client_produces_consumes_in_a_group_and_commits(
    oauth: OAuth, client: str, listener: str
) -> None:
    name = f"{client}-{listener}".lower().replace("_", "-")
    topic, group = f"t-{name}", f"g-{name}"
    seen = CLIENTS[client](oauth, listener, topic, group)
    assert sorted(seen) == values(topic)
    assert committed(oauth.broker.bootstrap, group, topic) == RECORDS


# -- sessions that end with their tokens ----------------------------------------------------


def produce_slowly(oauth: OAuth, topic: str, count: int, every_s: float) -> list[bytes]:
    """Records spread over the test, written through the PLAINTEXT listener."""
    producer = Producer({"bootstrap.servers": oauth.broker.bootstrap})
    sent = [f"{topic}-{n}".encode() for n in range(count)]
    for value in sent:
        producer.produce(topic, value)
        producer.flush(10)
        time.sleep(every_s)
    return sent


def session_closures(oauth: OAuth) -> int:
    """Connections the broker closed because their SASL session ran out: its counter, not
    its log, whose warnings about connections from one host are rate-limited."""
    url = f"http://127.0.0.1:{oauth.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = answer.read().decode()
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(body)
            for sample in family.samples
            if sample.name == "herdless_expired_connections_killed_total"
        )
    )


def test_confluent_kafka_re_authenticates_before_its_token_expires(oauth: OAuth) -> None:
    issued: list[float] = []

    def fresh_token(_config: str) -> tuple[str, float]:
        now = time.time()
        issued.append(now)
        # librdkafka is told the token's own exp: it renews the token at 80% of that,
        # before it re-authenticates at 90% of the session the broker gave it.
        token = oauth.token("REAUTH", lifetime_s=REAUTH_LIFETIME_S, now_s=now)
        return token, int(now + REAUTH_LIFETIME_S)

    topic = group = "confluent-reauth"
    settings = librdkafka_settings(oauth, "REAUTH") | {"oauth_cb": fresh_token}
    del settings["enable.sasl.oauthbearer.unsecure.jwt"], settings["sasl.oauthbearer.config"]
    closures_before = session_closures(oauth)
    consumer = Consumer(
        settings | {"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    # Long enough for two renewals, at 80% of each token's lifetime.
    count = 2 * (2 * REAUTH_LIFETIME_S)
    with ThreadPoolExecutor(1) as pool:
        producing = pool.submit(produce_slowly, oauth, topic, count, 0.5)
        seen: list[bytes] = []
        deadline = time.monotonic() + 2 * REAUTH_LIFETIME_S + 30
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append(message.value())
        sent = producing.result()
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(seen) == sorted(sent)
    assert committed(oauth.broker.bootstrap, group, topic) == count
    assert len(issued) >= 3, "the token was not renewed"
    # Its sessions were renewed on the same connections: none ended for want of it.
    assert session_closures(oauth) == closures_before


def test_aiokafka_is_disconnected_when_its_token_expires_and_carries_on(oauth: OAuth) -> None:
    topic = group = "aiokafka-reauth"
    tokens: list[float] = []

    def fresh_token() -> str:
        tokens.append(time.time())
        return oauth.token("REAUTH", lifetime_s=SHORT_LIFETIME_S)

    settings = python_settings(oauth, "REAUTH", AioTokens)
    settings["sasl_oauth_token_provider"] = AioTokens(fresh_token)
    closures_before = session_closures(oauth)

    async def consume(expected: int) -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **settings,
        )
        await consumer.start()
        seen: list[bytes] = []
        try:
            async with asyncio.timeout(SESSION_TEST_S + 30):
                while len(seen) < expected:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        seen.extend(record.value for record in records)
            await consumer.commit()
        finally:
            # aiokafka's stop() awaits tasks it has just cancelled and can raise their
            # CancelledError (aio-libs/aiokafka#1000); here the broker closes connections
            # every few seconds, so a fetcher task is often in flight when it stops. What
            # was read and committed is checked below.
            with contextlib.suppress(asyncio.CancelledError):
                await consumer.stop()
        return seen

    count = 2 * SESSION_TEST_S
    producing = asyncio.new_event_loop()
    try:
        sent_future = producing.run_in_executor(None, produce_slowly, oauth, topic, count, 0.5)
        seen = producing.run_until_complete(consume(count))
        sent = producing.run_until_complete(sent_future)
    finally:
        producing.close()
    assert sorted(seen) == sorted(sent)
    assert committed(oauth.broker.bootstrap, group, topic) == count
    assert len(tokens) >= 2, "no new connection took a new token"
    assert session_closures(oauth) > closures_before
    assert "Traceback" not in oauth.broker.log()


def test_kcat_with_a_short_lived_unsecured_token_and_its_principal_claim(oauth: OAuth) -> None:
    """librdkafka's unsecured JWT builder with its options, as kcat users write them."""
    topic = group = "kcat-unsecured-options"
    settings = librdkafka_settings(oauth, "UNSECURED") | {
        "sasl.oauthbearer.config": "principal=alice lifeSeconds=60 scope=read,write",
    }
    assert sorted(run_kcat(settings, topic, group)) == values(topic)
