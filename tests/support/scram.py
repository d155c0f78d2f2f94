"""SCRAM credentials asked of one broker, raw (each broker answers from its own cache),
and the search for passwords where none may be."""

from __future__ import annotations

import secrets
from pathlib import Path

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from tests.support.broker import BrokerProcess
from tests.support.wire import Wire

# Kafka's mechanism types in the admin APIs.
SHA_256, SHA_512 = 1, 2

Upsertion = tuple[str, int, int, bytes, bytes]  # user, mechanism, iterations, salt, salted


def new_password(user: str) -> str:
    """A password no file could hold by chance, to look for afterwards."""
    return f"pw-{user}-{secrets.token_hex(8)}"


def described(broker: BrokerProcess, users: list[str] | None) -> dict[str | None, object]:
    """DescribeUserScramCredentials asked of `broker` itself: user -> (error code,
    {mechanism type: iterations}), and the answer's own error code under None."""
    request = DescribeUserScramCredentialsRequest[0](
        users=None if users is None else [(user,) for user in users]
    )
    wire = Wire(broker)
    try:
        response = wire.call(request, DescribeUserScramCredentialsResponse[0])
    finally:
        wire.close()
    answer: dict[str | None, object] = {None: response.error_code}  # type: ignore[attr-defined]
    for result in response.results:  # type: ignore[attr-defined]
        infos = {info.mechanism: info.iterations for info in result.credential_infos}
        answer[result.user] = (result.error_code, infos)
    return answer


def altered(
    broker: BrokerProcess,
    upsertions: list[Upsertion] | None = None,
    deletions: list[tuple[str, int]] | None = None,
) -> dict[str, tuple[int, str | None]]:
    """AlterUserScramCredentials asked of `broker`: user -> (error code, message)."""
    request = AlterUserScramCredentialsRequest[0](
        deletions=deletions or [], upsertions=upsertions or []
    )
    wire = Wire(broker)
    try:
        response = wire.call(request, AlterUserScramCredentialsResponse[0])
    finally:
        wire.close()
    return {r.user: (r.error_code, r.error_message) for r in response.results}  # type: ignore[attr-defined]


def files_holding(directory: Path, passwords: list[str]) -> list[str]:
    """`file: password` for each file under `directory` (data, logs) holding a password."""
    found = []
    for path in directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {p}" for p in passwords if p.encode() in data]
    return found
