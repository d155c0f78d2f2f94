"""Kafka client settings as Kafka's Java client names them, for the clients herdless uses.

Kafka's tools read client settings from a properties file (`--command-config`) in the
Java client's names; kcat and confluent-kafka take librdkafka's names; Spark's Kafka
source takes Java names behind its `kafka.` prefix. herdless's own clients run on
librdkafka (confluent-kafka) and kafka-python, so the settings go through two steps:

- `librdkafka_config`: Java names (or librdkafka's own) to librdkafka's. Most Java
  settings are librdkafka settings of the same name and meaning; the rest are renamed,
  translated (`sasl.jaas.config`, PEM trust and key stores), or dropped when they only
  tune the Java client. A Java trust store librdkafka cannot read is refused.
- `kafka_python_config`: librdkafka's names to kafka-python's keyword arguments.
  kafka-python names its settings after Java's with `_` for `.`; the security settings
  are translated; what kafka-python cannot take is refused, named.

Nothing here reads a file: paths stay paths, for the client libraries to open.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from herdless.protocol.config_values import InvalidConfigValue, parse_boolean
from herdless.security.jaas import JaasConfigError, parse_jaas_config

# librdkafka's RD_KAFKA_RESP_ERR__AUTHENTICATION and RD_KAFKA_RESP_ERR__SSL.
AUTHENTICATION_FAILED = -169
TLS_FAILED = -181


class Refusals:
    """A librdkafka client's error callback (`error_cb`), keeping the last error no retry
    mends: a refused login or certificate. librdkafka retries those until its wait runs
    out and then names only a transport failure; this says what it was."""

    def __init__(self) -> None:
        self.error: Any = None  # a confluent_kafka.KafkaError

    def __call__(self, error: Any) -> None:
        if error.code() in (AUTHENTICATION_FAILED, TLS_FAILED):
            self.error = error

    def reason(self) -> str | None:
        if self.error is None:
            return None
        login = self.error.code() == AUTHENTICATION_FAILED
        return f"{'authentication failed' if login else 'TLS failed'}: {self.error.str()}"


class ClientConfigError(ValueError):
    """A client setting that cannot be honoured; the message names it (never a secret)."""


# Java names of settings librdkafka has under another name.
RENAMED = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "max.request.size": "message.max.bytes",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
}

# Java client settings with no librdkafka counterpart that change only how the Java
# client itself runs (metrics, its own timeouts and buffers, the TLS versions it
# offers): accepted and dropped, so that settings written for Kafka's tools work.
IGNORED = frozenset(
    {
        "auto.include.jmx.reporter",
        "buffer.memory",
        "default.api.timeout.ms",
        "exclude.internal.topics",
        "internal.leave.group.on.close",
        "max.block.ms",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "socket.connection.setup.timeout.max.ms",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.truststore.password",  # a PEM trust store has none
    }
)

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
KERBEROS_LOGIN = "com.sun.security.auth.module.Krb5LoginModule"

# librdkafka's security settings and kafka-python's names for them.
_KAFKA_PYTHON = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}
# librdkafka settings kafka-python has no way to take, and what to give instead.
_NOT_FOR_KAFKA_PYTHON = {
    "ssl.ca.pem": "give the CA certificates as a file (ssl.truststore.location)",
    "ssl.certificate.pem": "give the certificate chain as a file (ssl.keystore.location)",
    "ssl.key.pem": "give the key as a file (ssl.keystore.location)",
    "ssl.keystore.location": "give a PEM key store (ssl.keystore.type=PEM)",
}


def librdkafka_config(settings: Mapping[str, str]) -> dict[str, str]:
    """Java client settings (or librdkafka's own names) as librdkafka configuration."""
    config: dict[str, str] = {}
    truststore_type = settings.get("ssl.truststore.type", "JKS").strip().upper()
    keystore_type = settings.get("ssl.keystore.type", "").strip().upper()
    for key, value in settings.items():
        if key in IGNORED or key in ("ssl.truststore.type", "ssl.keystore.type"):
            continue
        if key == "sasl.jaas.config":
            config.update(_jaas(value))
        elif key == "ssl.truststore.location":
            if truststore_type != "PEM":
                raise ClientConfigError(
                    f"ssl.truststore.location: a {truststore_type} trust store cannot be read"
                    " here (Java TrustStores are not supported); give a PEM file with"
                    " ssl.truststore.type=PEM, or librdkafka's ssl.ca.location"
                )
            config["ssl.ca.location"] = value
        elif key == "ssl.keystore.location" and keystore_type == "PEM":
            # One PEM file holding the key and its certificate chain: OpenSSL reads
            # each from it.
            config["ssl.certificate.location"] = value
            config["ssl.key.location"] = value
        elif key == "ssl.keystore.location" and keystore_type == "JKS":
            raise ClientConfigError(
                "ssl.keystore.location: a JKS key store cannot be read here; give a PEM"
                " (ssl.keystore.type=PEM) or PKCS12 one"
            )
        elif key == "ssl.keystore.password" and keystore_type == "PEM":
            # Kafka reads a PEM store's encrypted key with ssl.key.password.
            continue
        elif key == "ssl.endpoint.identification.algorithm":
            # Java turns host name checks off with an empty value, librdkafka with none.
            config[key] = value.strip() or "none"
        else:
            config[RENAMED.get(key, key)] = value
    return config


def kafka_python_config(settings: Mapping[str, str], accepted: Collection[str]) -> dict[str, Any]:
    """librdkafka configuration as keyword arguments of a kafka-python client whose
    settings are `accepted` (e.g. KafkaAdminClient.DEFAULT_CONFIG)."""
    config: dict[str, Any] = {}
    for key, value in settings.items():
        if key in ("bootstrap.servers", "metadata.broker.list"):
            continue
        if key in _KAFKA_PYTHON:
            name = _KAFKA_PYTHON[key]
            upper = name in ("security_protocol", "sasl_mechanism")
            config[name] = value.upper() if upper else value
        elif key == "ssl.endpoint.identification.algorithm":
            config["ssl_check_hostname"] = value.strip().lower() not in ("", "none")
        elif key in _NOT_FOR_KAFKA_PYTHON:
            raise ClientConfigError(
                f"{key}: kafka-python cannot take it; {_NOT_FOR_KAFKA_PYTHON[key]}"
            )
        elif key.replace(".", "_") in accepted:
            config[key.replace(".", "_")] = _number_or_text(key, value)
        else:
            raise ClientConfigError(f"{key}: kafka-python has no such setting")
    return config


def _jaas(value: str) -> dict[str, str]:
    """librdkafka's settings for a JAAS login line (PLAIN, SCRAM or a Kerberos keytab)."""
    try:
        entry = parse_jaas_config(value)
    except JaasConfigError as exc:
        raise ClientConfigError(str(exc)) from None
    if entry.login_module == KERBEROS_LOGIN:
        config = {}
        if "keyTab" in entry.options:
            config["sasl.kerberos.keytab"] = entry.options["keyTab"]
        if "principal" in entry.options:
            config["sasl.kerberos.principal"] = entry.options["principal"]
        return config
    if entry.login_module not in (PLAIN_LOGIN, SCRAM_LOGIN):
        raise ClientConfigError(
            f"sasl.jaas.config: login module {entry.login_module!r} cannot be translated;"
            " herdless translates PlainLoginModule, ScramLoginModule and Krb5LoginModule,"
            " or set librdkafka's sasl.username and sasl.password"
        )
    if "username" not in entry.options or "password" not in entry.options:
        raise ClientConfigError("sasl.jaas.config: the login line names no username and password")
    return {"sasl.username": entry.options["username"], "sasl.password": entry.options["password"]}


def _number_or_text(key: str, value: str) -> bool | int | str:
    """A properties value as kafka-python wants it: its settings are typed."""
    try:
        return parse_boolean(key, value)
    except InvalidConfigValue:
        stripped = value.strip()
        return int(stripped) if stripped.lstrip("-").isdigit() else value
