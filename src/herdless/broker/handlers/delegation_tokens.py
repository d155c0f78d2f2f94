"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
DescribeDelegationToken (KIP-48), checked and answered as Kafka's KafkaApis does.

Tokens are asked for only over a connection that proved who it is (SASL, or TLS with a
client certificate) and not itself authenticated with a token:
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED otherwise. Without `delegation.token.secret.key`
the broker has no tokens: DELEGATION_TOKEN_AUTH_DISABLED. A token for another owner
(v3) needs CREATE_TOKENS on that owner (a User resource); DescribeDelegationToken shows
the tokens the caller owns, asked for or may renew, and those its ACLs let it describe
(DESCRIBE on the token, or DESCRIBE_TOKENS on the owner).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import authorize, caller
from herdless.cluster.errors import ClusterUnavailable
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.security.delegation_tokens import ERROR_TIMESTAMP, visible
from herdless.security.listeners import SecurityProtocol
from herdless.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from herdless.storage import StorageError

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)

# Where tokens are kept could not be written: the client is told, the change is not made.
_NOT_STORED = (ClusterUnavailable, StorageError, OSError)


def allow_token_requests(request: Request) -> bool:
    """Kafka's allowTokenRequests: not over PLAINTEXT, not one-way TLS, not with a token."""
    session = request.session
    if session is None:
        return False
    principal: KafkaPrincipal = session.principal
    protocol = session.security_protocol
    return not (
        principal.token_authenticated
        or protocol is SecurityProtocol.PLAINTEXT
        or (protocol is SecurityProtocol.SSL and principal == ANONYMOUS)
    )


async def handle_create_delegation_token(context: BrokerContext, request: Request) -> Any:
    body = request.body
    requester, _ = caller(request)
    owner = requester
    if body.owner_principal_name:  # v3: on behalf of another principal
        owner = KafkaPrincipal(body.owner_principal_type or USER_TYPE, body.owner_principal_name)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in body.renewers]
    Response = response_class(ApiKey.CREATE_DELEGATION_TOKEN)

    def answer(error: ErrorCode, **fields: Any) -> Any:
        values = {
            "issue_timestamp_ms": ERROR_TIMESTAMP,
            "expiry_timestamp_ms": ERROR_TIMESTAMP,
            "max_timestamp_ms": ERROR_TIMESTAMP,
            "token_id": "",
            "hmac": b"",
            **fields,
        }
        return Response(
            error_code=error,
            principal_type=owner.principal_type,
            principal_name=owner.name,
            token_requester_principal_type=requester.principal_type,
            token_requester_principal_name=requester.name,
            throttle_time_ms=0,
            **values,
        )

    if not allow_token_requests(request):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if owner != requester and not authorize(
        context, request, AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)
    ):
        return answer(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    if any(r.principal_type != USER_TYPE for r in renewers):
        return answer(ErrorCode.INVALID_PRINCIPAL_TYPE)
    manager = context.delegation_tokens
    if manager is None:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    try:
        token = await manager.create(owner, requester, renewers, body.max_lifetime_ms)
    except _NOT_STORED as exc:
        log.error("a delegation token for %s was not created: %s", owner, exc)
        return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
    return answer(
        ErrorCode.NONE,
        issue_timestamp_ms=token.info.issue_timestamp_ms,
        expiry_timestamp_ms=token.info.expiry_timestamp_ms,
        max_timestamp_ms=token.info.max_timestamp_ms,
        token_id=token.info.token_id,
        hmac=token.hmac,
    )


async def handle_renew_delegation_token(context: BrokerContext, request: Request) -> Any:
    return await _change(context, request, ApiKey.RENEW_DELEGATION_TOKEN)


async def handle_expire_delegation_token(context: BrokerContext, request: Request) -> Any:
    return await _change(context, request, ApiKey.EXPIRE_DELEGATION_TOKEN)


async def _change(context: BrokerContext, request: Request, api: ApiKey) -> Any:
    Response = response_class(api)

    def answer(error: ErrorCode, timestamp: int = ERROR_TIMESTAMP) -> Any:
        return Response(error_code=error, expiry_timestamp_ms=timestamp, throttle_time_ms=0)

    if not allow_token_requests(request):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    manager = context.delegation_tokens
    if manager is None:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    principal, _ = caller(request)
    body = request.body
    try:
        if api == ApiKey.RENEW_DELEGATION_TOKEN:
            change = await manager.renew(principal, body.hmac, body.renew_period_ms)
        else:
            change = await manager.expire(principal, body.hmac, body.expiry_time_period_ms)
    except _NOT_STORED as exc:
        log.error("a delegation token was not changed (%s): %s", api.name, exc)
        return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
    if change is None:
        return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    return answer(change.error, change.timestamp_ms)


async def handle_describe_delegation_token(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_DELEGATION_TOKEN)
    Token = Response.DescribedDelegationToken
    Renewer = Token.DescribedDelegationTokenRenewer

    def answer(error: ErrorCode, tokens: list[Any]) -> Any:
        return Response(error_code=error, tokens=tokens, throttle_time_ms=0)

    if not allow_token_requests(request):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    manager = context.delegation_tokens
    if manager is None:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
    asked = request.body.owners
    if asked is not None and not asked:  # an empty list: no owner, so no token
        return answer(ErrorCode.NONE, [])
    owners = None
    if asked is not None:
        owners = [KafkaPrincipal(o.principal_type, o.principal_name) for o in asked]
    requester, _ = caller(request)

    def may_describe_token(token_id: str) -> bool:
        return authorize(
            context,
            request,
            AclOperation.DESCRIBE,
            ResourceType.DELEGATION_TOKEN,
            token_id,
            log_denied=False,
        )

    def may_describe_owner_tokens(owner: KafkaPrincipal) -> bool:
        return authorize(
            context,
            request,
            AclOperation.DESCRIBE_TOKENS,
            ResourceType.USER,
            str(owner),
            log_denied=False,
        )

    found = manager.tokens(
        lambda t: visible(t, requester, owners, may_describe_token, may_describe_owner_tokens)
    )
    return answer(
        ErrorCode.NONE,
        [
            Token(
                principal_type=t.info.owner.principal_type,
                principal_name=t.info.owner.name,
                token_requester_principal_type=t.info.requester.principal_type,
                token_requester_principal_name=t.info.requester.name,
                issue_timestamp=t.info.issue_timestamp_ms,
                expiry_timestamp=t.info.expiry_timestamp_ms,
                max_timestamp=t.info.max_timestamp_ms,
                token_id=t.info.token_id,
                hmac=t.hmac,
                renewers=[
                    Renewer(principal_type=r.principal_type, principal_name=r.name)
                    for r in t.info.renewers
                ],
            )
            for t in found
        ],
    )
