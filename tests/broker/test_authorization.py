"""The authorizer log and counts, the caller of a request, and the authorized-operations
int32, without a broker."""

from __future__ import annotations

import logging

import pytest

from herdless.broker.auth.authorizer_audit import AuthorizerAudit
from herdless.broker.handlers.authorization import caller, operations_field
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request
from herdless.security.acls import AclOperation, ResourceType
from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import ANONYMOUS, user
from herdless.security.session import ClientSession


def request(session: ClientSession | None = None) -> Request:
    return Request(ApiKey.PRODUCE, 9, 1, "client", None, client_host="/10.0.0.7", session=session)


def test_the_caller_is_the_sessions_principal_or_anonymous() -> None:
    session = ClientSession(user("alice"), "SASL", SecurityProtocol.SASL_PLAINTEXT, "10.0.0.8")
    assert caller(request(session)) == (user("alice"), "10.0.0.8")
    assert caller(request()) == (ANONYMOUS, "10.0.0.7")


def test_denials_are_logged_at_info_a_few_a_window_and_all_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    audit = AuthorizerAudit()
    caplog.set_level(logging.INFO, logger="herdless.authorizer")
    for _ in range(20):
        audit.decided(
            request(), user("bob"), "10.0.0.7", AclOperation.WRITE, ResourceType.TOPIC, "t", False
        )
    audit.decided(
        request(), user("bob"), "10.0.0.7", AclOperation.READ, ResourceType.TOPIC, "t", True, 3
    )
    lines = [r for r in caplog.records if r.name == "herdless.authorizer"]
    assert 1 <= len(lines) <= 5 and {r.levelno for r in lines} == {logging.INFO}
    assert lines[0].getMessage() == (
        "Principal = User:bob is Denied Operation = Write from host = 10.0.0.7 on resource ="
        " Topic:LITERAL:t for request = Produce with resourceRefCount = 1"
    )
    assert audit.counts == {
        (AclOperation.WRITE, ResourceType.TOPIC, False): 20,
        (AclOperation.READ, ResourceType.TOPIC, True): 3,
    }


def test_a_denial_not_asked_for_is_counted_and_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    audit = AuthorizerAudit()
    caplog.set_level(logging.DEBUG, logger="herdless.authorizer")
    audit.decided(
        request(),
        user("bob"),
        "10.0.0.7",
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        "kafka-cluster",
        False,
        log_denied=False,
    )
    assert not [r for r in caplog.records if r.name == "herdless.authorizer"]
    assert audit.counts[AclOperation.DESCRIBE, ResourceType.CLUSTER, False] == 1


def test_operations_as_the_int32_field() -> None:
    assert operations_field(set()) == 0
    assert operations_field({3, 8}) == (1 << 3) | (1 << 8)
    assert operations_field({31}) == -(2**31)
