"""Delegation tokens (KIP-48) on a real broker with a SASL_PLAINTEXT listener and the ACL
authorizer: tokens created, renewed, expired and described as Kafka answers, a login
with a token (SCRAM with `tokenauth=true`) as the token's owner whose ACLs apply, tokens
refused where Kafka refuses them, the expiry check, the tokens file across a restart,
and `herdless tokens`.

No Python or librdkafka client sends the tokenauth extension (Kafka's Java client does,
from its JAAS settings), so logins with a token are spoken raw, with scramp as the
client."""

from __future__ import annotations

import base64
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from herdless.broker.auth.token_store import TOKENS_FILE
from herdless.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess, free_port, module_broker
from tests.support.cli import assert_documented, herdless, refused, succeeded, table_rows
from tests.support.delegation_tokens import (
    Login,
    create_token,
    describe_tokens,
    expire_token,
    password,
    renew_token,
    scram_login,
)
from tests.support.requests import fetch_request, produce_request, v2_batch
from tests.support.wire import Wire

SECRET_KEY = "token-Secret-3f9a"
PASSWORDS = {"admin": "admin-Secret-11", "alice": "alice-Secret-22", "bob": "bob-Secret-33"}
ALLOWED, DENIED = "tokens-allowed", "tokens-denied"
DAY_MS, WEEK_MS = 24 * 60 * 60 * 1000, 7 * 24 * 60 * 60 * 1000
TOPIC_AUTHORIZATION_FAILED = 29


class TokenBroker:
    def __init__(self, broker: BrokerProcess, sasl_port: int) -> None:
        self.broker = broker
        self.sasl_port = sasl_port

    def login(self, user: str) -> Login:
        login = scram_login(self.broker, self.sasl_port, user, PASSWORDS[user])
        assert login.error_code == ErrorCode.NONE, login.answer
        return login

    def token_login(self, token_id: str, hmac: bytes) -> Login:
        return scram_login(self.broker, self.sasl_port, token_id, password(hmac), token=True)

    def client_settings(self, user: str) -> dict[str, str]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
        }


def start_sasl_broker(data_dir: Path, *settings: str) -> Iterator[TokenBroker]:
    """A broker with PLAINTEXT and SASL_PLAINTEXT listeners and the users of PASSWORDS."""
    for user, secret in PASSWORDS.items():
        succeeded(
            herdless(
                "users", "add", user, "--data-dir", str(data_dir), "--password-stdin", input=secret
            )
        )
    sasl_port = free_port()
    args = [arg for setting in settings for arg in ("--set", setting)]
    with module_broker(
        data_dir, *args, listeners=f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    ) as broker:
        yield TokenBroker(broker, sasl_port)


@pytest.fixture(scope="module")
def brokered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenBroker]:
    yield from start_sasl_broker(
        tmp_path_factory.mktemp("tokens") / "data",
        f"delegation.token.secret.key={SECRET_KEY}",
        "delegation.token.expiry.check.interval.ms=200",
        "authorizer.class.name=acls",
        "super.users=User:admin",
    )


@pytest.fixture(scope="module")
def topics(brokered: TokenBroker) -> None:
    """Two topics; alice may write and read the first alone."""
    admin = AdminClient(brokered.client_settings("admin"))
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (ALLOWED, DENIED)]).values():
        future.result(timeout=30)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            ALLOWED,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.WRITE, AclOperation.READ)
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def test_a_token_logs_in_as_its_owner_whose_acls_apply(brokered: TokenBroker, topics: None) -> None:
    alice = brokered.login("alice")
    try:
        before = int(time.time() * 1000)
        created = create_token(alice.wire, renewers=["bob"])
    finally:
        alice.close()
    assert created.error_code == ErrorCode.NONE
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    assert created.token_requester_principal_name == "alice"
    assert before <= created.issue_timestamp_ms <= before + 5_000
    # Kafka's defaults: good for a day unless renewed, for a week at most.
    assert created.expiry_timestamp_ms == created.issue_timestamp_ms + DAY_MS
    assert created.max_timestamp_ms == created.issue_timestamp_ms + WEEK_MS
    assert len(created.hmac) == 64  # HmacSHA512

    login = brokered.token_login(created.token_id, created.hmac)
    try:
        assert login.error_code == ErrorCode.NONE, login.answer
        # The session ends when the token expires (KIP-368).
        assert 0 < login.answer.session_lifetime_ms <= DAY_MS
        batch = v2_batch([(b"k", b"as-alice", int(time.time() * 1000))])
        written = login.wire.call(produce_request(8, ALLOWED, batch), ProduceResponse)
        assert written.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        refused_write = login.wire.call(produce_request(8, DENIED, batch), ProduceResponse)
        assert (
            refused_write.responses[0].partition_responses[0].error_code
            == TOPIC_AUTHORIZATION_FAILED
        )
        fetched = login.wire.call(fetch_request(11, ALLOWED, 0, 1 << 20), FetchResponse)
        partition = fetched.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE
        assert b"as-alice" in bytes(partition.records)
        # A connection authenticated with a token may not ask for tokens.
        again = create_token(login.wire)
        assert again.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert describe_tokens(login.wire).error_code == (
            ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        )
    finally:
        login.close()

    wrong = scram_login(
        brokered.broker, brokered.sasl_port, created.token_id, "not-the-hmac", token=True
    )
    wrong.close()
    assert wrong.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    # Without the extension the token id is a user name like any other: no such user.
    plain = scram_login(
        brokered.broker, brokered.sasl_port, created.token_id, password(created.hmac)
    )
    plain.close()
    assert plain.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_owner_and_renewers_renew_and_expire_and_an_expired_token_logs_nobody_in(
    brokered: TokenBroker,
) -> None:
    alice, bob, admin = (brokered.login(u) for u in ("alice", "bob", "admin"))
    try:
        created = create_token(alice.wire, renewers=["bob"], max_lifetime_ms=60 * 60 * 1000)
        assert created.error_code == ErrorCode.NONE
        # A lifetime asked for is the token's maximum; the expiry is no later.
        assert created.max_timestamp_ms == created.issue_timestamp_ms + 60 * 60 * 1000
        assert created.expiry_timestamp_ms == created.max_timestamp_ms

        now = int(time.time() * 1000)
        renewed = renew_token(bob.wire, created.hmac, 10 * 60 * 1000)
        assert renewed.error_code == ErrorCode.NONE
        assert now + 10 * 60 * 1000 <= renewed.expiry_timestamp_ms <= now + 11 * 60 * 1000
        # Never past the maximum.
        capped = renew_token(alice.wire, created.hmac, WEEK_MS)
        assert capped.expiry_timestamp_ms == created.max_timestamp_ms
        # A super user is no owner nor renewer: Kafka checks no ACL here.
        assert renew_token(admin.wire, created.hmac).error_code == (
            ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        )
        assert expire_token(admin.wire, created.hmac).error_code == (
            ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        )
        assert renew_token(alice.wire, b"\x00" * 64).error_code == (
            ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        )

        login = brokered.token_login(created.token_id, created.hmac)
        login.close()
        assert login.error_code == ErrorCode.NONE
        expired = expire_token(bob.wire, created.hmac, -1)
        assert expired.error_code == ErrorCode.NONE
        refused_login = brokered.token_login(created.token_id, created.hmac)
        refused_login.close()
        assert refused_login.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert renew_token(alice.wire, created.hmac).error_code == (
            ErrorCode.DELEGATION_TOKEN_NOT_FOUND
        )
        assert created.token_id not in _token_ids(describe_tokens(alice.wire))
    finally:
        for login in (alice, bob, admin):
            login.close()


def test_a_token_session_ends_when_the_token_expires(brokered: TokenBroker) -> None:
    alice = brokered.login("alice")
    try:
        created = create_token(alice.wire, max_lifetime_ms=2_000)
    finally:
        alice.close()
    login = brokered.token_login(created.token_id, created.hmac)
    try:
        first = login.answer.session_lifetime_ms
        assert 0 < first <= 2_000
        # KIP-368: the client logs in again on the same connection while the token is
        # valid, as the same principal; the session still ends with the token.
        time.sleep(0.2)
        again = scram_login(
            brokered.broker,
            brokered.sasl_port,
            created.token_id,
            password(created.hmac),
            token=True,
            wire=login.wire,
        )
        assert again.error_code == ErrorCode.NONE, again.answer
        assert 0 < again.answer.session_lifetime_ms < first
        time.sleep(again.answer.session_lifetime_ms / 1000 + 0.1)
        # A request after the session's end closes the connection.
        login.wire.send(MetadataRequest[12](topics=[], allow_auto_topic_creation=False))
        login.wire.sock.settimeout(5)
        with pytest.raises(ConnectionResetError):
            login.wire.receive(MetadataRequest[12](), MetadataResponse)
    finally:
        login.close()


def test_the_expiry_check_removes_expired_tokens(brokered: TokenBroker) -> None:
    alice = brokered.login("alice")
    try:
        short = create_token(alice.wire, max_lifetime_ms=1)
        assert short.error_code == ErrorCode.NONE
        kept = create_token(alice.wire)
        time.sleep(0.05)
        # Expired, not yet removed, or removed already: either way no renewal.
        assert renew_token(alice.wire, short.hmac).error_code in (
            ErrorCode.DELEGATION_TOKEN_EXPIRED,
            ErrorCode.DELEGATION_TOKEN_NOT_FOUND,
        )
        deadline = time.monotonic() + 5
        while short.token_id in _token_ids(describe_tokens(alice.wire)):
            assert time.monotonic() < deadline, "the expired token was not removed"
            time.sleep(0.05)
        assert kept.token_id in _token_ids(describe_tokens(alice.wire))
        stored = json.loads((brokered.broker.data_dir / TOKENS_FILE).read_text())["tokens"]
        assert short.token_id not in stored and kept.token_id in stored
    finally:
        alice.close()


def test_describe_shows_what_each_principal_may_see(brokered: TokenBroker) -> None:
    alice, bob, admin = (brokered.login(u) for u in ("alice", "bob", "admin"))
    try:
        hers = create_token(alice.wire).token_id
        renewed_by_alice = create_token(bob.wire, renewers=["alice"]).token_id
        bobs = create_token(bob.wire).token_id
        # v3: a token for another owner needs CreateTokens on that User; a super user has it.
        for_carol = create_token(admin.wire, owner="carol")
        assert for_carol.error_code == ErrorCode.NONE
        assert (for_carol.principal_name, for_carol.token_requester_principal_name) == (
            "carol",
            "admin",
        )
        refused_create = create_token(bob.wire, owner="alice")
        assert refused_create.error_code == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED

        seen_by_alice = _token_ids(describe_tokens(alice.wire))
        assert {hers, renewed_by_alice} <= seen_by_alice
        assert bobs not in seen_by_alice and for_carol.token_id not in seen_by_alice
        # Owners named: tokens they own or may renew, of those the caller may see.
        bobs_seen_by_alice = _token_ids(describe_tokens(alice.wire, ["bob"]))
        assert renewed_by_alice in bobs_seen_by_alice
        assert bobs not in bobs_seen_by_alice and hers not in bobs_seen_by_alice
        assert {hers, renewed_by_alice} <= _token_ids(describe_tokens(admin.wire, ["alice"]))
        assert bobs not in _token_ids(describe_tokens(admin.wire, ["alice"]))
        everything = _token_ids(describe_tokens(admin.wire))
        assert {hers, renewed_by_alice, bobs, for_carol.token_id} <= everything
        assert describe_tokens(admin.wire, []).tokens == []
        described = {t.token_id: t for t in describe_tokens(admin.wire, ["carol"]).tokens}
        token = described[for_carol.token_id]
        assert (token.principal_name, token.token_requester_principal_name) == ("carol", "admin")
        assert token.hmac == for_carol.hmac
        # Older versions answer without the requester.
        assert hers in _token_ids(describe_tokens(alice.wire, version=1))
    finally:
        for login in (alice, bob, admin):
            login.close()


def test_tokens_are_refused_over_plaintext(brokered: TokenBroker) -> None:
    wire = Wire(brokered.broker)
    try:
        assert create_token(wire).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert describe_tokens(wire).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert renew_token(wire, b"x").error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert expire_token(wire, b"x").error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    finally:
        wire.close()


def test_tokens_file_is_private_and_tokens_outlive_a_restart(brokered: TokenBroker) -> None:
    alice = brokered.login("alice")
    try:
        created = create_token(alice.wire)
    finally:
        alice.close()
    path = brokered.broker.data_dir / TOKENS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # Where Kafka keeps a token's information, as Kafka writes it: never its HMAC.
    stored = json.loads(path.read_text())["tokens"][created.token_id]
    assert stored["owner"] == "User%3Aalice" and stored["version"] == 3
    assert base64.b64encode(created.hmac).decode() not in path.read_text()
    brokered.broker.restart()
    login = brokered.token_login(created.token_id, created.hmac)
    login.close()
    assert login.error_code == ErrorCode.NONE, login.answer


def connect_as(brokered: TokenBroker, user: str, directory: Path) -> tuple[str, ...]:
    """A command's options to connect as `user` over SASL_PLAINTEXT."""
    config = directory / f"{user}.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{user}" password="{PASSWORDS[user]}";\n'
    )
    return ("-b", f"127.0.0.1:{brokered.sasl_port}", "--command-config", str(config))


def test_acls_on_a_user_let_others_create_and_describe_its_tokens(
    brokered: TokenBroker, tmp_path: Path
) -> None:
    as_admin = connect_as(brokered, "admin", tmp_path)
    grant = ("acls", "add", *as_admin, "--allow-principal", "User:bob")
    succeeded(herdless(*grant, "--operation", "CreateTokens", "--user-principal", "User:dave"))
    succeeded(herdless(*grant, "--operation", "DescribeTokens", "--user-principal", "User:erin"))
    listed = succeeded(herdless("acls", "list", *as_admin, "--user-principal", "User:dave"))
    assert "CreateTokens" in listed
    bob, admin = brokered.login("bob"), brokered.login("admin")
    try:
        for_dave = create_token(bob.wire, owner="dave")
        assert for_dave.error_code == ErrorCode.NONE
        assert (for_dave.principal_name, for_dave.token_requester_principal_name) == (
            "dave",
            "bob",
        )
        assert create_token(bob.wire, owner="erin").error_code == (
            ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        )
        for_erin = create_token(admin.wire, owner="erin").token_id
        for_frank = create_token(admin.wire, owner="frank").token_id
        seen = _token_ids(describe_tokens(bob.wire))
        # dave's: bob asked for it; erin's: DescribeTokens on User:erin; frank's: neither.
        assert {for_dave.token_id, for_erin} <= seen and for_frank not in seen
    finally:
        bob.close()
        admin.close()
    succeeded(herdless("acls", "remove", *as_admin, "--force", "--user-principal", "User:erin"))


def test_herdless_tokens_commands(brokered: TokenBroker, tmp_path: Path) -> None:
    connect = connect_as(brokered, "alice", tmp_path)
    created = json.loads(
        succeeded(
            herdless(
                "tokens",
                "create",
                *connect,
                "--renewer-principal",
                "User:bob",
                "--max-life-time-period",
                "3600000",
                "-o",
                "json",
            )
        )
    )
    assert_documented("tokens create", created)
    assert created["owner"] == "User:alice" and created["renewers"] == ["User:bob"]
    assert created["max_timestamp_ms"] == created["issue_timestamp_ms"] + 3_600_000
    hmac = created["hmac"]
    login = brokered.token_login(created["token_id"], base64.b64decode(hmac))
    login.close()
    assert login.error_code == ErrorCode.NONE

    rows = table_rows(
        succeeded(herdless("tokens", "describe", *connect, "--owner-principal", "User:alice"))
    )
    [row] = [r for r in rows if r[0] == created["token_id"]]
    assert row[1:5] == [hmac, "User:alice", "User:alice", "User:bob"]
    listed = json.loads(succeeded(herdless("tokens", "describe", *connect, "-o", "json")))
    assert_documented("tokens describe", listed)
    assert created in listed
    said = succeeded(
        herdless("tokens", "renew", *connect, "--hmac", hmac, "--renew-time-period", "60000")
    )
    assert "now expires at" in said
    succeeded(herdless("tokens", "expire", *connect, "--hmac", hmac))
    refused(herdless("tokens", "renew", *connect, "--hmac", hmac), "DELEGATION_TOKEN_NOT_FOUND")
    refused(herdless("tokens", "renew", *connect, "--hmac", "%%%"), "--hmac: not base64", code=2)
    refused(
        herdless("tokens", "create", *connect, "--renewer-principal", "bob"),
        "--renewer-principal",
        code=2,
    )
    # Over PLAINTEXT: Kafka's refusal, in words.
    refused(
        herdless("tokens", "describe", "-b", brokered.broker.bootstrap),
        "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    )


def test_the_secret_key_is_never_described(brokered: TokenBroker) -> None:
    admin = AdminClient(brokered.client_settings("admin"))
    (broker_id,) = admin.list_topics(timeout=30).brokers
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    key = described["delegation.token.secret.key"]
    assert key.is_sensitive and key.value is None
    assert all(SECRET_KEY not in str(entry.value) for entry in described.values())


def test_without_a_secret_key_tokens_are_disabled(tmp_path: Path) -> None:
    for brokered in start_sasl_broker(tmp_path / "data"):
        alice = brokered.login("alice")
        try:
            assert create_token(alice.wire).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            assert (
                describe_tokens(alice.wire).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            )
            assert renew_token(alice.wire, b"x").error_code == (
                ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            )
        finally:
            alice.close()
        refused_login = brokered.token_login("some-token", b"x")
        refused_login.close()
        assert refused_login.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def _token_ids(answer: object) -> set[str]:
    assert answer.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    return {t.token_id for t in answer.tokens}  # type: ignore[attr-defined]
