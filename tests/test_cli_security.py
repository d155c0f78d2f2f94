"""The `herdless` commands against a broker reached only over SASL_SSL, with the client
settings a user gives Kafka's tools (`--command-config FILE`) or kcat (`-X key=value`).

The broker also has a PLAINTEXT listener, which the test harness waits on; with the
ACL authorizer on, a client there is User:ANONYMOUS and may do nothing, so whatever a
command shows came through the SASL_SSL listener as alice, a super user. alice is
made in the data directory before the first start, as an operator makes the first
admin (herdless.testing.security).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from herdless.cli.certs import CertificateFiles
from herdless.cli.main import app
from herdless.cli.options import add_client_options
from herdless.testing.broker import HerdlessBroker
from herdless.testing.security import Security
from tests.support.cli import herdless, refused, succeeded, table_rows

PASSWORD = "alice-Secret-5c1e"


@dataclass
class Secured:
    broker: HerdlessBroker
    certificates: CertificateFiles
    bootstrap: str  # the SASL_SSL listener
    command_config: Path  # alice's settings in Kafka's names, as Kafka's tools read them
    wrong_password: Path

    def librdkafka(self, password: str = PASSWORD, *, trusting: bool = True) -> list[str]:
        """alice's settings as kcat's -X options (PLAIN)."""
        settings = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": password,
        }
        if trusting:
            settings["ssl.ca.location"] = str(self.certificates.ca)
        return [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]


def command_config(path: Path, certificates: CertificateFiles, password: str) -> Path:
    # A long sasl.jaas.config continued over lines, as such files are written.
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="alice" \\\n'
        f'    password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certificates.ca}\n"
    )
    return path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("cli-security")
    security = Security(users={"alice": PASSWORD}, authorizer=True, super_users=("alice",))
    with HerdlessBroker(base / "data", security=security) as broker:
        files = CertificateFiles.under(broker.certificates)
        yield Secured(
            broker,
            files,
            broker.bootstrap,
            command_config(base / "alice.properties", files, PASSWORD),
            command_config(base / "wrong.properties", files, "not-" + PASSWORD),
        )


def test_admin_commands_take_kafkas_command_config(secured: Secured) -> None:
    connect = ("-b", secured.bootstrap, "--command-config", str(secured.command_config))
    succeeded(herdless("topics", "create", "orders", "--partitions", "2", *connect))
    assert ["orders", "2", "false"] in table_rows(succeeded(herdless("topics", "list", *connect)))
    described = table_rows(succeeded(herdless("topics", "describe", "orders", *connect)))
    assert [row[0] for row in described[:2]] == ["0", "1"]
    users = table_rows(succeeded(herdless("users", "list", *connect)))
    assert ["alice", "SCRAM-SHA-512", "4096"] in users
    succeeded(
        herdless(
            "acls",
            "add",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            "orders",
            *connect,
        )
    )
    acls = succeeded(herdless("acls", "list", *connect))
    assert "User:bob" in acls and "orders" in acls


def test_records_and_groups_over_kcat_style_settings(secured: Secured) -> None:
    connect = ("-b", secured.bootstrap, *secured.librdkafka())
    succeeded(herdless("topics", "create", "events", *connect))
    produced = herdless("produce", "events", *connect, input="one\ntwo\nthree\n")
    assert "produced 3 records" in succeeded(produced) + produced.stderr
    consumed = succeeded(herdless("consume", "events", "-g", "readers", "-e", *connect))
    assert consumed.split() == ["one", "two", "three"]
    # The same group seen through Kafka's settings (SCRAM) rather than kcat's (PLAIN).
    kafka_style = ("-b", secured.bootstrap, "--command-config", str(secured.command_config))
    lag = table_rows(succeeded(herdless("groups", "lag", "readers", *kafka_style)))
    assert [row[:2] for row in lag] == [["events", "0"]] and lag[0][-1] == "0"
    described = succeeded(herdless("groups", "describe", "readers", *kafka_style))
    assert "events" in described
    # -X wins over the file, as the later word.
    records = succeeded(
        herdless("consume", "events", "-e", *kafka_style, "-X", "sasl.mechanism=PLAIN")
    )
    assert records.split() == ["one", "two", "three"]


def test_bootstrap_servers_from_a_kcat_settings_file(secured: Secured, tmp_path: Path) -> None:
    """The file `herdless certs` writes for kcat -F names the brokers: no -b needed."""
    settings = tmp_path / "client.properties"
    settings.write_text(
        f"bootstrap.servers={secured.bootstrap}\n"
        + "".join(f"{pair}\n" for pair in secured.librdkafka()[1::2])
    )
    assert "events" in succeeded(herdless("topics", "list", "--command-config", str(settings)))


@pytest.mark.parametrize(
    "command",
    [("groups", "lag", "readers"), ("consume", "events", "-e")],
    ids=["kafka-python", "librdkafka"],
)
def test_a_wrong_password_is_one_line(secured: Secured, command: tuple[str, ...]) -> None:
    from_file = herdless(
        *command, "-b", secured.bootstrap, "--command-config", str(secured.wrong_password)
    )
    refused(from_file, "authentication failed")
    from_options = herdless(*command, "-b", secured.bootstrap, *secured.librdkafka(password="no"))
    refused(from_options, "authentication failed")


def test_an_untrusted_broker_is_one_line(secured: Secured) -> None:
    without_ca = secured.librdkafka(trusting=False)
    for command in (("topics", "list"), ("produce", "events")):
        result = herdless(*command, "-b", secured.bootstrap, *without_ca, input="x\n")
        refused(result, "certificate verify failed")


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (("-X", "security.protocol"), "expected key=value"),
        (("--command-config", "/no/such/file"), "cannot read"),
        (("-X", "ssl.truststore.location=/x.jks"), "JKS trust store"),
        (("-X", "sasl.jaas.config=Nonsense"), "sasl.jaas.config"),
    ],
)
def test_bad_client_settings_are_named(
    secured: Secured, settings: tuple[str, ...], words: str
) -> None:
    refused(herdless("topics", "list", "-b", secured.bootstrap, *settings), words, code=2)


def test_a_setting_kafka_python_cannot_take_is_named(secured: Secured) -> None:
    result = herdless("topics", "list", "-b", secured.bootstrap, "-X", "ssl.ca.pem=-----BEGIN")
    refused(result, "ssl.ca.pem: kafka-python cannot take it")


def test_every_command_that_connects_takes_client_settings() -> None:
    command = typer.main.get_command(app)
    add_client_options(command)

    def leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
        if hasattr(node, "commands"):
            for name, sub in node.commands.items():
                yield from leaves(sub, (*path, name))
        else:
            yield path, node

    connecting = 0
    for path, leaf in leaves(command):
        names = {param.name for param in leaf.params}
        if "bootstrap" in names:
            connecting += 1
            assert {"command_config", "setting"} <= names, path
    assert connecting > 20
