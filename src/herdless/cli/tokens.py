"""`herdless tokens create|renew|expire|describe`: delegation tokens (KIP-48), as
kafka-delegation-tokens.sh manages them, through any broker.

Tokens are asked for over an authenticated connection (a SASL listener, or TLS with a
client certificate), so these commands take the client settings of one
(`--command-config FILE`, `-X key=value`). A token's id is the user name and its HMAC
the password a client then logs in with through SCRAM, with `tokenauth=true`.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from herdless.cli.client import connect
from herdless.cli.errors import USAGE, fail
from herdless.cli.options import DEFAULT_BOOTSTRAP, Bootstrap, command_group
from herdless.cli.output import OutputOption, Table, View, say, show
from herdless.protocol.errors import ErrorCode
from herdless.security.principal import USER_TYPE, parse_principal

if TYPE_CHECKING:
    from kafka import KafkaAdminClient

tokens_app = command_group(
    "Create, renew, expire and describe delegation tokens (KIP-48), through a broker, over"
    " an authenticated listener."
)

_COLUMNS = (
    "TOKENID",
    "HMAC",
    "OWNER",
    "REQUESTER",
    "RENEWERS",
    "ISSUEDATE",
    "EXPIRYDATE",
    "MAXDATE",
)

HmacOption = Annotated[
    str, typer.Option("--hmac", help="The token's HMAC, in base64 as `create` printed it.")
]


@tokens_app.command("create")
def create(
    max_life_time_period: Annotated[
        int,
        typer.Option(
            "--max-life-time-period",
            help="The token's maximum lifetime in ms; -1: the broker's"
            " delegation.token.max.lifetime.ms, which also caps any other.",
        ),
    ] = -1,
    renewer_principal: Annotated[
        list[str] | None,
        typer.Option(
            "--renewer-principal",
            metavar="User:NAME",
            help="Who else may renew it; repeatable.",
            show_default=False,
        ),
    ] = None,
    owner_principal: Annotated[
        str | None,
        typer.Option(
            "--owner-principal",
            metavar="User:NAME",
            help="Create it for another owner (needs CreateTokens on that User).",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Create a token and print its id and HMAC (the user name and password to log in with)."""
    from herdless.protocol.delegation_token_messages import CreateDelegationTokenRequest

    renewers = [_user_principal(text, "--renewer-principal") for text in renewer_principal or []]
    owner = (
        None if owner_principal is None else _user_principal(owner_principal, "--owner-principal")
    )
    Renewer = CreateDelegationTokenRequest.CreatableRenewers
    request = CreateDelegationTokenRequest(
        owner_principal_type=None if owner is None else USER_TYPE,
        owner_principal_name=owner,
        renewers=[Renewer(principal_type=USER_TYPE, principal_name=r) for r in renewers],
        max_lifetime_ms=max_life_time_period,
    )
    with connect(bootstrap) as admin:
        answer = _send(admin, request)
    _check(answer.error_code, "create the token")
    row = {
        "token_id": answer.token_id,
        "hmac": base64.b64encode(answer.hmac).decode(),
        "owner": f"{answer.principal_type}:{answer.principal_name}",
        "requester": _requester(answer, answer.principal_type, answer.principal_name),
        "renewers": [f"{USER_TYPE}:{r}" for r in renewers],
        "issue_timestamp_ms": answer.issue_timestamp_ms,
        "expiry_timestamp_ms": answer.expiry_timestamp_ms,
        "max_timestamp_ms": answer.max_timestamp_ms,
    }
    show(View(row, [_table([row])]), output)


@tokens_app.command("renew")
def renew(
    hmac: HmacOption,
    renew_time_period: Annotated[
        int,
        typer.Option(
            "--renew-time-period",
            help="How long from now the token is good for, in ms; -1: the broker's"
            " delegation.token.expiry.time.ms. Never past its maximum lifetime.",
        ),
    ] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Renew a token (its owner or a renewer)."""
    from herdless.protocol.delegation_token_messages import RenewDelegationTokenRequest

    request = RenewDelegationTokenRequest(hmac=_hmac(hmac), renew_period_ms=renew_time_period)
    with connect(bootstrap) as admin:
        answer = _send(admin, request)
    _check(answer.error_code, "renew the token")
    say(f"renewed; the token now expires at {_date(answer.expiry_timestamp_ms)}")


@tokens_app.command("expire")
def expire(
    hmac: HmacOption,
    expiry_time_period: Annotated[
        int,
        typer.Option(
            "--expiry-time-period",
            help="Expire the token this many ms from now; -1: at once, and remove it.",
        ),
    ] = -1,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Expire a token (its owner or a renewer)."""
    from herdless.protocol.delegation_token_messages import ExpireDelegationTokenRequest

    request = ExpireDelegationTokenRequest(
        hmac=_hmac(hmac), expiry_time_period_ms=expiry_time_period
    )
    with connect(bootstrap) as admin:
        answer = _send(admin, request)
    _check(answer.error_code, "expire the token")
    say(f"expired; the token expires at {_date(answer.expiry_timestamp_ms)}")


@tokens_app.command("describe")
def describe(
    owner_principal: Annotated[
        list[str] | None,
        typer.Option(
            "--owner-principal",
            metavar="User:NAME",
            help="Only the tokens these principals own or may renew; repeatable.",
            show_default="every token you may describe",
        ),
    ] = None,
    output: OutputOption = None,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """List the tokens you own, asked for or may renew, and those your ACLs let you see."""
    from herdless.protocol.delegation_token_messages import DescribeDelegationTokenRequest

    Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    owners = None
    if owner_principal:
        owners = [
            Owner(principal_type=USER_TYPE, principal_name=_user_principal(o, "--owner-principal"))
            for o in owner_principal
        ]
    with connect(bootstrap) as admin:
        answer = _send(admin, DescribeDelegationTokenRequest(owners=owners))
    _check(answer.error_code, "describe tokens")
    rows = [
        {
            "token_id": t.token_id,
            "hmac": base64.b64encode(t.hmac).decode(),
            "owner": f"{t.principal_type}:{t.principal_name}",
            "requester": _requester(t, t.principal_type, t.principal_name),
            "renewers": [f"{r.principal_type}:{r.principal_name}" for r in t.renewers],
            "issue_timestamp_ms": t.issue_timestamp,
            "expiry_timestamp_ms": t.expiry_timestamp,
            "max_timestamp_ms": t.max_timestamp,
        }
        for t in answer.tokens
    ]
    show(View(rows, [_table(rows)]), output)


def _send(admin: KafkaAdminClient, request: Any) -> Any:
    """One request to any broker: every broker answers token requests alike."""
    return admin._manager.run(admin._manager.send, request)


def _check(code: int, doing: str) -> None:
    """Fails with Kafka's name of the error and its words."""
    if code != ErrorCode.NONE:
        from kafka import errors

        try:
            name = ErrorCode(code).name
        except ValueError:
            name = "error"
        raise fail(f"cannot {doing}: {name} ({code}): {errors.for_code(code).description}")


def _user_principal(text: str, option: str) -> str:
    """The name of a User principal written User:NAME; fails naming the option if not."""
    try:
        principal = parse_principal(text)
    except ValueError as exc:
        raise fail(f"{option}: {exc}", USAGE) from None
    if principal.principal_type != USER_TYPE:
        raise fail(f"{option}: tokens name User principals, not {text!r}", USAGE)
    return principal.name


def _hmac(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise fail(f"--hmac: not base64: {text!r}", USAGE) from None


def _requester(message: Any, owner_type: str, owner_name: str) -> str:
    """The requester (v3 answers); before v3 the owner asked for it."""
    name = getattr(message, "token_requester_principal_name", None) or owner_name
    kind = getattr(message, "token_requester_principal_type", None) or owner_type
    return f"{kind}:{name}"


def _date(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _table(rows: list[dict[str, Any]]) -> Table:
    return Table(
        _COLUMNS,
        [
            (
                r["token_id"],
                r["hmac"],
                r["owner"],
                r["requester"],
                ",".join(r["renewers"]) or "-",
                _date(r["issue_timestamp_ms"]),
                _date(r["expiry_timestamp_ms"]),
                _date(r["max_timestamp_ms"]),
            )
            for r in rows
        ],
    )
