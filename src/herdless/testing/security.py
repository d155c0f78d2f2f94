"""Secured brokers for tests: throw-away certificates, SASL users made before the first
start, Kafka's ACL authorizer if asked for, and how each user connects, in the settings
of each client library.

    security = Security(users={"alice": "alice-secret"}, authorizer=True)
    with HerdlessBroker(path, security=security) as broker:
        Producer(broker.client_settings("alice").librdkafka())
        KafkaConsumer(**broker.client_settings("alice").kafka_python())

Nothing here starts a process: HerdlessBroker and HerdlessCluster do, with the
settings and users this gives them.
"""

from __future__ import annotations

import os
import secrets
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from herdless.security import jaas

SASL_PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SECURED_PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT", "SSL")
DEFAULT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The super user every secured broker has: the helpers (create_topic, produce...) act as it.
ADMIN = "admin"
# Who the brokers of a cluster log in to ZooKeeper as, with Security(zookeeper_login=True).
ZOOKEEPER_USER = "kafka"
# Kafka's class name, which herdless's authorizer answers to.
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class ClientSettings:
    """How one user connects to one secured listener, in each client library's names."""

    bootstrap: str
    security_protocol: str
    ca: Path | None = None  # the CA's certificate, for TLS
    username: str | None = None  # for SASL
    password: str | None = field(default=None, repr=False)
    mechanism: str | None = None
    keystore: Path | None = None  # a client's key and certificate chain in one PEM file

    def java(self) -> dict[str, str]:
        """Kafka's Java client names: Kafka's tools (`--command-config`), `herdless
        --command-config`, and Spark's Kafka options behind `kafka.` (spark_options)."""
        settings = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.security_protocol,
        }
        if self.mechanism is not None:
            settings["sasl.mechanism"] = self.mechanism
            settings["sasl.jaas.config"] = (
                f"{_LOGIN_MODULES[self.mechanism]} required"
                f" username={jaas.quote(self.username or '')}"
                f" password={jaas.quote(self.password or '')};"
            )
        if self.ca is not None:
            settings["ssl.truststore.type"] = "PEM"
            settings["ssl.truststore.location"] = str(self.ca)
        if self.keystore is not None:
            settings["ssl.keystore.type"] = "PEM"
            settings["ssl.keystore.location"] = str(self.keystore)
        return settings

    def librdkafka(self, **settings: Any) -> dict[str, Any]:
        """librdkafka's names: confluent-kafka's clients, kcat -X; then `settings`."""
        from herdless.security.client_config import librdkafka_config

        return {**librdkafka_config(self.java()), **settings}

    def kafka_python(self, **settings: Any) -> dict[str, Any]:
        """Keyword arguments of kafka-python's clients; then `settings`."""
        from herdless.security.client_config import kafka_python_config

        translated = kafka_python_config(self.librdkafka(), accepted=())
        return {"bootstrap_servers": self.bootstrap, **translated, **settings}

    def aiokafka(self, **settings: Any) -> dict[str, Any]:
        """Keyword arguments of aiokafka's clients (TLS as an ssl_context); then `settings`."""
        config: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.mechanism is not None:
            config |= {
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.security_protocol in TLS_PROTOCOLS:
            context = ssl.create_default_context(cafile=self.ca)
            if self.keystore is not None:
                context.load_cert_chain(self.keystore)
            config["ssl_context"] = context
        return {**config, **settings}

    def spark_options(self) -> dict[str, str]:
        """Options of Spark's Kafka source and sink (and herdless's): `kafka.` + Java's."""
        return {f"kafka.{key}": value for key, value in self.java().items()}

    def write_properties(self, path: Path) -> Path:
        """The Java settings as a properties file, for `--command-config`."""
        lines = [f"{key}={value}" for key, value in self.java().items()]
        path.write_text("\n".join(lines) + "\n")
        return path


@dataclass
class Security:
    """What a secured broker or cluster serves.

    `listeners`: the secured listeners, each on its own free port beside the PLAINTEXT
    one (which the harness waits on). `users`: name to password, made before the first
    start with SCRAM-SHA-256 and SCRAM-SHA-512 credentials (PLAIN logins are checked
    against them); `admin` is always among them, with a generated password unless
    given, and is a super user. `authorizer`: Kafka's ACL authorizer on, so that users
    other than admin and `super_users` may do only what ACLs allow (a PLAINTEXT
    client is User:ANONYMOUS). `mechanisms`: the SASL mechanisms served.
    `zookeeper_login` (clusters): ZooKeeper takes only sessions that log in with SASL
    DIGEST-MD5, and the brokers log in as ZOOKEEPER_USER and create their znodes with
    Kafka's ACLs (`zookeeper.set.acl`), so that nothing else may change or read what
    they keep there.
    """

    users: dict[str, str] = field(default_factory=dict)
    listeners: tuple[str, ...] = ("SASL_SSL",)
    mechanisms: tuple[str, ...] = DEFAULT_MECHANISMS
    authorizer: bool = False
    super_users: tuple[str, ...] = ()
    zookeeper_login: bool = False

    def __post_init__(self) -> None:
        self.users = {ADMIN: secrets.token_urlsafe(16), **self.users}
        self.zookeeper_password = secrets.token_urlsafe(16)
        for listener in self.listeners:
            if listener not in SECURED_PROTOCOLS:
                raise ValueError(
                    f"listener {listener!r}: a secured listener is one of"
                    f" {', '.join(SECURED_PROTOCOLS)}"
                )
        for mechanism in self.mechanisms:
            if mechanism not in _LOGIN_MODULES:
                raise ValueError(
                    f"mechanism {mechanism!r}: these brokers serve {', '.join(_LOGIN_MODULES)}"
                )

    def broker_settings(self, certificates: Path) -> dict[str, str]:
        """Broker settings (not the listeners) serving the certificates in `certificates`."""
        from herdless.cli.certs import CertificateFiles

        files = CertificateFiles.under(certificates)
        settings = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(files.broker),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(files.ca),
            "ssl.client.auth": "requested",
            "sasl.enabled.mechanisms": ",".join(self.mechanisms),
            # Every client of a test comes from 127.0.0.1: one test's wrong passwords
            # must not have the next test's clients turned away.
            "connection.failed.authentication.limit": "0",
        }
        if self.authorizer:
            settings["authorizer.class.name"] = AUTHORIZER
            # admin always: the helpers act as it.
            supers = dict.fromkeys([ADMIN, *self.super_users])
            settings["super.users"] = ";".join(f"User:{user}" for user in supers)
        return settings

    def inter_broker_settings(self, certificates: Path) -> dict[str, str]:
        """broker_settings, and brokers talking to each other over the first secured
        listener, logging in as admin when it is a SASL one."""
        listener = self.listeners[0]
        settings = {**self.broker_settings(certificates), "inter.broker.listener.name": listener}
        if listener in SASL_PROTOCOLS:
            admin = self.client_settings({listener: ""}, certificates, ADMIN)
            assert admin.mechanism is not None
            settings["sasl.mechanism.inter.broker.protocol"] = admin.mechanism
            settings["sasl.jaas.config"] = admin.java()["sasl.jaas.config"]
        return settings

    def write_certificates(self, directory: Path) -> Path:
        """A throw-away CA, a broker certificate for 127.0.0.1 and localhost, and a client
        key store (key and chain in one PEM file), in `directory`."""
        from herdless.cli.certs import write_certificates

        files = write_certificates(directory, ["127.0.0.1", "localhost"], force=True)
        keystore = directory / "client-keystore.pem"
        keystore.write_bytes(files.client_key.read_bytes() + files.client.read_bytes())
        keystore.chmod(0o600)
        return directory

    def add_users_offline(self, data_dir: Path) -> None:
        """Write every user's credentials into the data directory of a broker not running."""
        from herdless.broker.auth.credential_store import alter_offline

        for user, password in self.users.items():
            alter_offline(data_dir, user, credentials(password), ())

    def zookeeper_users(self) -> dict[str, str] | None:
        """The users ZooKeeper takes sessions from (name -> password), or None when it
        takes anyone's."""
        return {ZOOKEEPER_USER: self.zookeeper_password} if self.zookeeper_login else None

    def zookeeper_settings(self, directory: Path) -> dict[str, str]:
        """The brokers' settings for their login to ZooKeeper, with its JAAS file written
        in `directory` (nothing without `zookeeper_login`)."""
        if not self.zookeeper_login:
            return {}
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "zookeeper_jaas.conf"
        path.write_text(
            "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f"  username={jaas.quote(ZOOKEEPER_USER)}\n"
            f"  password={jaas.quote(self.zookeeper_password)};\n}};\n"
        )
        path.chmod(0o600)
        return {"java.security.auth.login.config": str(path), "zookeeper.set.acl": "true"}

    def add_users_to_zookeeper(self, connect: str) -> None:
        """Write every user's credentials where a cluster's brokers read them."""
        from herdless.broker.clock import monotonic_ms, wall_ms
        from herdless.cluster.store import ClusterStore
        from herdless.security.scram import altered_config
        from herdless.security.zookeeper import ZooKeeperLogin, ZooKeeperSecurity

        login = ZooKeeperLogin(ZOOKEEPER_USER, self.zookeeper_password)
        security = ZooKeeperSecurity(login, set_acl=True) if self.zookeeper_login else None
        with ClusterStore(
            connect, wall_ms=wall_ms, monotonic_ms=monotonic_ms, security=security
        ) as store:
            for user, password in self.users.items():
                upsertions = credentials(password)
                store.alter_user_config(
                    user, lambda config, u=upsertions: altered_config(config, u, ())
                )

    def client_settings(
        self,
        bootstrap: Mapping[str, str],
        certificates: Path,
        user: str | None = ADMIN,
        *,
        listener: str | None = None,
        mechanism: str | None = None,
        certificate: bool = False,
    ) -> ClientSettings:
        """How `user` connects over `listener` (the first secured one unless named), whose
        address is `bootstrap[listener]`; with SASL by `mechanism` (SCRAM-SHA-512 if served,
        else the first), and with the client certificate if `certificate`."""
        chosen = listener or self.listeners[0]
        if chosen not in bootstrap:
            raise ValueError(f"no {chosen} listener: these brokers have {', '.join(bootstrap)}")
        sasl = chosen in SASL_PROTOCOLS
        if sasl and user not in self.users:
            raise ValueError(f"no user {user!r}: the users are {', '.join(self.users)}")
        if mechanism is None and sasl:
            scram = "SCRAM-SHA-512"
            mechanism = scram if scram in self.mechanisms else self.mechanisms[0]
        tls = chosen in TLS_PROTOCOLS
        return ClientSettings(
            bootstrap=bootstrap[chosen],
            security_protocol=chosen,
            ca=certificates / "ca.pem" if tls else None,
            username=user if sasl else None,
            password=self.users.get(user or "") if sasl else None,
            mechanism=mechanism if sasl else None,
            keystore=certificates / "client-keystore.pem" if tls and certificate else None,
        )


def credentials(password: str) -> dict[str, Any]:
    """SCRAM-SHA-256 and SCRAM-SHA-512 credentials for `password`, each freshly salted."""
    from herdless.security.scram import SALT_BYTES, SCRAM_MECHANISMS, make_credential

    return {m: make_credential(m, password, os.urandom(SALT_BYTES)) for m in SCRAM_MECHANISMS}


def listener_addresses(listeners: Iterable[str], host: str, ports: Mapping[str, int]) -> str:
    """`NAME://host:port,...`, as the broker's listeners setting takes them."""
    return ",".join(f"{name}://{host}:{ports[name]}" for name in listeners)
