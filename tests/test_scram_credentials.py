"""Users' SCRAM credentials on a real broker: DescribeUserScramCredentials and
AlterUserScramCredentials from kafka-python's and confluent-kafka's admin clients, Kafka's
per-user errors, the credentials file across a restart, `herdless users` online and
offline, and no password anywhere the broker writes."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
)
from confluent_kafka.admin import (
    ScramMechanism as ConfluentMechanism,
)
from confluent_kafka.admin import (
    UserScramCredentialDeletion as ConfluentDeletion,
)
from confluent_kafka.admin import (
    UserScramCredentialUpsertion as ConfluentUpsertion,
)
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

from herdless.broker.auth.credential_store import CREDENTIALS_FILE
from tests.support.broker import BrokerProcess, module_broker
from tests.support.cli import COMMAND, herdless, refused, succeeded, table_rows
from tests.support.scram import SHA_256, SHA_512, altered, described, files_holding, new_password

NONE, UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND = 0, 33, 91
DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 92, 93


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with module_broker(tmp_path_factory.mktemp("scram") / "data") as process:
        yield process


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


# -- the admin APIs ----------------------------------------------------------------------


def test_kafka_python_adds_describes_and_deletes_credentials(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    password = new_password("alice")
    assert admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, password, 8192),
            UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_512, password),
        ]
    ) == {"alice": None}
    alice = admin.describe_user_scram_credentials(["alice"])["alice"]
    assert alice["error"] is None
    assert [(i["mechanism"], i["iterations"]) for i in alice["credential_infos"]] == [
        (ScramMechanism.SCRAM_SHA_256, 8192),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]
    assert "alice" in admin.describe_user_scram_credentials()
    assert admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)]
    ) == {"alice": None}
    assert described(broker, ["alice"])["alice"] == (NONE, {SHA_512: 4096})
    assert admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)]
    ) == {"alice": None}
    gone = admin.describe_user_scram_credentials(["alice"])["alice"]
    assert "does not exist" in gone["error"]
    assert "alice" not in admin.describe_user_scram_credentials()
    assert files_holding(broker.data_dir.parent, [password]) == []


def test_kafkas_errors_are_per_user(broker: BrokerProcess) -> None:
    salt, salted = b"some salt", b"\x01" * 32
    results = altered(
        broker,
        upsertions=[
            ("", SHA_256, 4096, salt, salted),
            ("few", SHA_256, 4095, salt, salted),
            ("many", SHA_512, 16385, salt, salted * 2),
            ("odd", 3, 4096, salt, salted),
            ("twice", SHA_256, 4096, salt, salted),
            ("twice", SHA_256, 8192, salt, salted),
            ("both", SHA_256, 4096, salt, salted),
            ("fine", SHA_512, 16384, salt, salted * 2),
        ],
        deletions=[("nobody", SHA_512), ("both", SHA_512), ("oddly", 0)],
    )
    assert results == {
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "few": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "odd": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "oddly": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (
            DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        # Deleting the credential "both" does not have fails the whole of "both".
        "both": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "nobody": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "fine": (NONE, None),
    }
    answer = described(broker, ["", "fine", "dup", "dup", "both", "few"])
    assert answer[None] == NONE
    assert answer[""] == (RESOURCE_NOT_FOUND, {})
    assert answer["fine"] == (NONE, {SHA_512: 16384})
    assert answer["dup"] == (DUPLICATE_RESOURCE, {})
    assert answer["both"] == answer["few"] == (RESOURCE_NOT_FOUND, {})
    everyone = described(broker, None)
    assert "fine" in everyone and "both" not in everyone
    assert altered(broker, deletions=[("fine", SHA_512)]) == {"fine": (NONE, None)}


def test_confluent_kafka_adds_describes_and_deletes_credentials(broker: BrokerProcess) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    password = new_password("grace")
    info = ScramCredentialInfo(ConfluentMechanism.SCRAM_SHA_512, 10000)
    futures = client.alter_user_scram_credentials(
        [ConfluentUpsertion("grace", info, password.encode(), os.urandom(32))]
    )
    assert futures["grace"].result(30) is None
    grace = client.describe_user_scram_credentials(["grace"])["grace"].result(30)
    assert [(i.mechanism, i.iterations) for i in grace.scram_credential_infos] == [
        (ConfluentMechanism.SCRAM_SHA_512, 10000)
    ]
    everyone = client.describe_user_scram_credentials().result(30)
    assert "grace" in everyone
    futures = client.alter_user_scram_credentials(
        [ConfluentDeletion("grace", ConfluentMechanism.SCRAM_SHA_512)]
    )
    assert futures["grace"].result(30) is None
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND"):
        client.describe_user_scram_credentials(["grace"])["grace"].result(30)
    # librdkafka checks the iterations too, so the broker's check is seen raw above.
    assert files_holding(broker.data_dir.parent, [password]) == []


def test_credentials_outlive_a_restart_in_a_file_only_the_broker_reads(tmp_path: Path) -> None:
    password = new_password("henry")
    process = BrokerProcess(tmp_path / "data").start()
    try:
        upsertion = UserScramCredentialUpsertion("henry", ScramMechanism.SCRAM_SHA_256, password)
        admin = KafkaAdminClient(bootstrap_servers=process.bootstrap)
        assert admin.alter_user_scram_credentials([upsertion]) == {"henry": None}
        admin.close()
        process.stop()
        path = tmp_path / "data" / CREDENTIALS_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert '"henry"' in path.read_text()
        process = BrokerProcess(tmp_path / "data", port=process.port).start()
        assert described(process, ["henry"])["henry"] == (NONE, {SHA_256: 4096})
    finally:
        process.stop()
    assert files_holding(tmp_path, [password]) == []


# -- herdless users -------------------------------------------------------------------------


def test_the_cli_adds_lists_and_removes_users_through_a_broker(broker: BrokerProcess) -> None:
    password = new_password("ivy")

    def users(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return herdless("users", *args, "-b", broker.bootstrap, input=input)

    added = succeeded(users("add", "ivy", "--password-stdin", input=password + "\n"))
    assert "added user ivy (SCRAM-SHA-256, SCRAM-SHA-512, 4096 iterations)" in added
    succeeded(
        users("add", "jack", "-m", "scram-sha-512", "--iterations", "8192", "--password", password)
    )
    assert table_rows(succeeded(users("list", "ivy", "jack"))) == [
        ["ivy", "SCRAM-SHA-256", "4096"],
        ["ivy", "SCRAM-SHA-512", "4096"],
        ["jack", "SCRAM-SHA-512", "8192"],
    ]
    listed = json.loads(succeeded(users("list", "-o", "json")))
    assert {"user": "jack", "mechanism": "SCRAM-SHA-512", "iterations": 8192} in listed
    assert "removed SCRAM-SHA-256 of user ivy" in succeeded(
        users("remove", "ivy", "-m", "SCRAM-SHA-256")
    )
    assert "removed SCRAM-SHA-512 of user ivy" in succeeded(users("remove", "ivy"))
    refused(users("remove", "ivy"), "user ivy has no SCRAM credential")
    refused(users("list", "jack", "ivy"), "no SCRAM credential for user(s): ivy")
    refused(
        users("add", "kim", "-m", "MD5", "--password", "x"), "--mechanism 'MD5' is not one of", 2
    )
    refused(
        users("add", "kim", "--iterations", "100", "--password", "x"), "between 4096 and 16384", 2
    )
    refused(users("add", "kim"), "no password")
    refused(users("add", "kim", "--password-stdin", input="\n"), "must not be empty", 2)
    refused(users("add", "kim", "--password", "x", "--data-dir", "d"), "give one of", 2)
    succeeded(users("remove", "jack"))
    assert files_holding(broker.data_dir.parent, [password]) == []
    assert password not in broker.log()


def test_the_first_admin_is_added_offline_before_the_first_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    password = new_password("root")
    offline = ("--data-dir", str(data))
    succeeded(herdless("users", "add", "root", *offline, "--password-stdin", input=password))
    assert table_rows(succeeded(herdless("users", "list", *offline))) == [
        ["root", "SCRAM-SHA-256", "4096"],
        ["root", "SCRAM-SHA-512", "4096"],
    ]
    process = BrokerProcess(data).start()
    try:
        assert described(process, ["root"])["root"] == (NONE, {SHA_256: 4096, SHA_512: 4096})
        # A running broker would not see a change behind its back.
        refused(
            herdless("users", "add", "late", *offline, "--password", "x"),
            "in use by a running broker",
        )
    finally:
        process.stop()
    succeeded(herdless("users", "remove", "root", *offline, "-m", "SCRAM-SHA-512"))
    process = BrokerProcess(data, port=process.port).start()
    try:
        assert described(process, ["root"])["root"] == (NONE, {SHA_256: 4096})
    finally:
        process.stop()
    assert files_holding(tmp_path, [password]) == []
    assert password not in process.log()


def test_the_prompt_asks_twice_and_never_shows_the_password(tmp_path: Path) -> None:
    password = new_password("tty")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command on a terminal
        os.execvpe(
            COMMAND[0],
            [*COMMAND, "users", "add", "tty", "--data-dir", str(tmp_path / "data")],
            os.environ,
        )
    screen = b""

    def read_until(text: bytes) -> None:
        nonlocal screen
        deadline = time.monotonic() + 60
        while text not in screen:
            assert time.monotonic() < deadline, screen
            if select.select([fd], [], [], 1)[0]:
                try:
                    screen += os.read(fd, 1024)
                except OSError:  # the command ended
                    break

    # The space after the colon comes from getpass once it has turned echo off: typed
    # before, the terminal would show it (and getpass would then discard it).
    read_until(b"Password: ")
    os.write(fd, password.encode() + b"\n")
    read_until(b"Repeat for confirmation: ")
    os.write(fd, password.encode() + b"\n")
    read_until(b"added user tty")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, screen
    assert password.encode() not in screen
    assert files_holding(tmp_path, [password]) == []
