"""The console beside a secured broker (`herdless serve --console-port --console-login
--console-ssl-keystore`): HTTPS with its own certificate, a login checked against the
broker's SCRAM credentials, and each user shown only the topics and groups their ACLs
let them describe.

alice may describe alice-orders and the group alice-readers, and read alice-events;
bob-orders and bob-readers exist too, and she is never shown them.
"""

from __future__ import annotations

import http.client
import signal
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from playwright.sync_api import expect

from herdless.cli.certs import CertificateFiles
from herdless.testing.broker import HerdlessBroker
from herdless.testing.security import Security, listener_addresses
from tests.support.broker import BrokerProcess, free_port
from tests.support.browser import chromium, screenshot
from tests.support.cli import COMMAND, herdless, refused, sigint_as_in_a_terminal

PASSWORD = "alice-Console-7d21"
SHOWN_WITHIN_S = 20.0


@dataclass
class SecuredConsole:
    broker: BrokerProcess
    port: int
    ca: Path

    def connection(self) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=self.ca)
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)

    def request(
        self, method: str, path: str, cookie: str | None = None, form: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        connection = self.connection()
        headers = {"Cookie": cookie} if cookie else {}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read().decode()
        finally:
            connection.close()

    def login(self, user: str, password: str) -> str:
        status, headers, _ = self.request(
            "POST", "/login", form={"user": user, "password": password}
        )
        assert status == 303, status
        return headers["Set-Cookie"].split(";")[0]


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredConsole]:
    base = tmp_path_factory.mktemp("console-login")
    security = Security(users={"alice": PASSWORD, "bob": "bob-Console-1"}, authorizer=True)
    certificates = security.write_certificates(base / "certificates")
    data_dir = base / "data"
    security.add_users_offline(data_dir)
    ports = {"SASL_SSL": free_port()}
    admin = security.client_settings({"SASL_SSL": f"127.0.0.1:{ports['SASL_SSL']}"}, certificates)
    settings = {**security.broker_settings(certificates), "group.initial.rebalance.delay.ms": "0"}
    console_port = free_port()
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    files = CertificateFiles.under(certificates)
    args += ["--console-port", str(console_port), "--console-login"]
    args += ["--console-ssl-keystore", str(files.broker)]
    # The console's own client: admin, over the SASL_SSL listener (on the PLAINTEXT one
    # it would be User:ANONYMOUS, whom the authorizer lets see nothing).
    args += ["--console-command-config", str(admin.write_properties(base / "console.properties"))]
    broker = BrokerProcess(
        data_dir, *args, listeners=listener_addresses(ports, "127.0.0.1", ports)
    ).start()
    try:
        _prepare(admin.librdkafka())
        yield SecuredConsole(broker, console_port, files.ca)
    finally:
        assert broker.stop() == 0, broker.log_tail()


def _prepare(settings: dict[str, str]) -> None:
    """Topics and groups for alice and bob, and alice's ACLs."""
    from confluent_kafka.admin import NewTopic

    admin = AdminClient(settings)
    for future in admin.create_topics(
        [NewTopic(t, 1) for t in ("alice-orders", "alice-events", "bob-orders")]
    ).values():
        future.result(30)
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            "alice-orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            "alice-events",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.GROUP,
            "alice-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(acls).values():
        future.result(30)
    producer = Producer(settings)
    for topic in ("alice-orders", "alice-events"):
        producer.produce(topic, value=f"first of {topic}")
    assert producer.flush(30) == 0
    for group, topic in (("alice-readers", "alice-orders"), ("bob-readers", "bob-orders")):
        consumer = Consumer({**settings, "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        consumer.close()


def shown(console: SecuredConsole, cookie: str, path: str, wanted: str) -> str:
    """The page once it shows `wanted` (the console samples the brokers every 2 s)."""
    deadline = time.monotonic() + SHOWN_WITHIN_S
    while True:
        status, _, body = console.request("GET", path, cookie)
        if status == 200 and wanted in body:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not show {wanted!r}: {status}\n{body}")
        time.sleep(0.3)


def test_pages_ask_for_a_login_first(console: SecuredConsole) -> None:
    for path in ("/groups", "/topics/alice-orders", "/brokers"):
        status, headers, _ = console.request("GET", path)
        assert (status, headers["Location"]) == (303, "/login")
    status, _, body = console.request("GET", "/login")
    assert status == 200 and 'type="password"' in body
    # The page script's refresh is told to log in again, not redirected.
    assert console.request("GET", "/groups?fragment=1")[0] == 401


def test_a_wrong_password_or_unknown_user_is_refused_alike(console: SecuredConsole) -> None:
    for user, password in (("alice", "wrong"), ("nobody", PASSWORD)):
        status, headers, body = console.request(
            "POST", "/login", form={"user": user, "password": password}
        )
        assert status == 401 and "Set-Cookie" not in headers
        assert "Wrong user name or password." in body
    assert PASSWORD not in console.broker.log()


def test_a_user_sees_only_what_their_acls_let_them_describe(console: SecuredConsole) -> None:
    cookie = console.login("alice", PASSWORD)
    topics = shown(console, cookie, "/topics", "alice-orders")
    assert "bob-orders" not in topics
    groups = shown(console, cookie, "/groups", "alice-readers")
    assert "bob-readers" not in groups
    assert console.request("GET", "/groups/bob-readers", cookie)[0] == 404
    assert console.request("GET", "/topics/bob-orders", cookie)[0] == 404
    assert 'class="user">alice<' in groups


def test_the_message_browser_reads_as_the_signed_in_user(console: SecuredConsole) -> None:
    cookie = console.login("alice", PASSWORD)
    status, _, body = console.request("GET", "/topics/alice-events/partitions/0", cookie)
    assert status == 200 and "first of alice-events" in body
    # DESCRIBE lets her see the topic, not its records: READ does, as Fetch asks.
    status, _, body = console.request("GET", "/topics/alice-orders/partitions/0", cookie)
    assert status == 403 and "User alice may not read topic alice-orders." in body
    assert "first of alice-orders" not in body
    assert console.request("GET", "/topics/bob-orders/partitions/0", cookie)[0] == 404


def test_the_session_cookie_and_logout(console: SecuredConsole) -> None:
    status, headers, _ = console.request(
        "POST", "/login", form={"user": "alice", "password": PASSWORD}
    )
    assert status == 303 and headers["Location"] == "/groups"
    attributes = {part.strip() for part in headers["Set-Cookie"].split(";")}
    assert {"HttpOnly", "Secure", "SameSite=Strict", "Path=/"} <= attributes
    cookie = headers["Set-Cookie"].split(";")[0]
    assert console.request("GET", "/brokers", cookie)[0] == 200
    status, headers, _ = console.request("POST", "/logout", cookie)
    assert status == 303 and "Max-Age=0" in headers["Set-Cookie"]
    assert console.request("GET", "/brokers", cookie)[0] == 303


def test_plain_http_gets_no_page(console: SecuredConsole) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", console.port, timeout=10)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        connection.request("GET", "/login")
        connection.getresponse().read()
    connection.close()
    assert console.request("GET", "/login")[0] == 200  # and the console goes on


def test_logging_in_with_a_browser(console: SecuredConsole, tmp_path: Path) -> None:
    with chromium(tmp_path / "profile", ignore_https_errors=True) as browser:
        page = browser.new_page()
        page.goto(f"https://127.0.0.1:{console.port}/topics")
        expect(page).to_have_url(f"https://127.0.0.1:{console.port}/login")
        page.get_by_label("User").fill("alice")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page).to_have_url(f"https://127.0.0.1:{console.port}/groups")
        expect(page.get_by_role("link", name="alice-readers")).to_be_visible(
            timeout=SHOWN_WITHIN_S * 1000
        )
        expect(page.get_by_role("link", name="bob-readers")).to_have_count(0)
        screenshot(page, "console/login-groups")
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"https://127.0.0.1:{console.port}/login")


# -- `herdless console --login`: a console in a process of its own -------------------


@pytest.fixture(scope="module")
def own_process_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredConsole]:
    base = tmp_path_factory.mktemp("console-own-login")
    security = Security(users={"alice": PASSWORD})
    with HerdlessBroker(base / "data", security=security) as broker:
        broker.create_topic("alice-orders")
        broker.produce("alice-orders", [b"first order"])
        admin = broker.client_settings().write_properties(base / "admin.properties")
        port = free_port()
        files = CertificateFiles.under(broker.certificates)
        command = [
            *COMMAND, "console", "--login", "--port", str(port), "--interval", "0.5",
            "--ssl-keystore", str(files.broker),
            "-b", broker.bootstrap, "--command-config", str(admin),
        ]  # fmt: skip
        process = subprocess.Popen(
            command, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_in_a_terminal
        )
        console = SecuredConsole(broker, port, files.ca)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    console.request("GET", "/login")
                    break
                except OSError:
                    assert process.poll() is None, process.communicate()[1]
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            yield console
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=30)


def test_its_login_is_a_sasl_login_to_the_brokers(own_process_console: SecuredConsole) -> None:
    console = own_process_console
    status, _, body = console.request("POST", "/login", form={"user": "alice", "password": "no"})
    assert status == 401 and "Wrong user name or password." in body
    cookie = console.login("alice", PASSWORD)
    # What alice's own client lists: the brokers' authorizer decides what is in it.
    shown(console, cookie, "/topics", "alice-orders")
    assert 'class="user">alice<' in shown(console, cookie, "/groups", "Consumer groups")
    # Her records are read by a client logged in as her.
    status, _, body = console.request("GET", "/topics/alice-orders/partitions/0", cookie)
    assert status == 200 and "first order" in body


def test_its_login_needs_a_sasl_listener() -> None:
    result = herdless("console", "--login", "--port", "0", "-b", "127.0.0.1:1")
    refused(result, "--login: a login is checked by logging in to the brokers over SASL", 2)
