"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), with the per-user
errors Kafka's brokers answer (ZkAdminManager): one bad alteration fails every alteration
of its user, and only that user.

The client salts and hashes the password itself; what arrives is a salt, the salted
password and the iterations, from which the broker keeps the stored and server keys.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from herdless.broker.handlers.authorization import REFUSALS, authorize_cluster
from herdless.cluster.errors import ClusterUnavailable, StateVersionConflict
from herdless.protocol.api_keys import ApiKey
from herdless.protocol.codec import Request, response_class
from herdless.protocol.errors import ErrorCode
from herdless.security.acls import AclOperation, ResourceType
from herdless.security.scram import (
    MECHANISM_TYPES,
    SCRAM_MECHANISMS,
    CredentialNotFound,
    ScramCredential,
    UnacceptableCredential,
    check_iterations,
    credential_from_salted_password,
    mechanism_of_type,
)
from herdless.storage import StorageError

if TYPE_CHECKING:
    from herdless.broker.handlers.context import BrokerContext

log = logging.getLogger(__name__)


EMPTY_USER = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


async def handle_describe_user_scram_credentials(context: BrokerContext, request: Request) -> Any:
    Response = response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    Result = Response.DescribeUserScramCredentialsResult
    Info = Result.CredentialInfo
    names = None if request.body.users is None else [u.name for u in request.body.users]
    # DESCRIBE on the cluster, else every user named is refused.
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        code, message = REFUSALS[ResourceType.CLUSTER]
        return Response(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            results=[
                Result(user=name, error_code=code, error_message=message, credential_infos=[])
                for name in names or []
            ],
        )
    store = context.credentials

    def described(user: str, credentials: dict[str, ScramCredential]) -> Any:
        infos = [
            Info(mechanism=MECHANISM_TYPES[m], iterations=credentials[m].iterations)
            for m in SCRAM_MECHANISMS
            if m in credentials
        ]
        return Result(
            user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos
        )

    def refused(user: str, code: ErrorCode, message: str) -> Any:
        return Result(user=user, error_code=code, error_message=message, credential_infos=[])

    results = []
    if not names:  # null or empty: every user that has a credential
        users = store.users() if store is not None else {}
        results = [described(user, users[user]) for user in sorted(users)]
    else:
        counts = Counter(names)
        for name in dict.fromkeys(names):
            credentials = store.of(name) if store is not None else {}
            if not name:
                results.append(refused(name, ErrorCode.RESOURCE_NOT_FOUND, EMPTY_USER))
            elif counts[name] > 1:
                results.append(
                    refused(
                        name,
                        ErrorCode.DUPLICATE_RESOURCE,
                        "Cannot describe SCRAM credentials for the same user twice in a"
                        f" single request: {name}",
                    )
                )
            elif not credentials:
                results.append(
                    refused(
                        name,
                        ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {name}",
                    )
                )
            else:
                results.append(described(name, credentials))
    return Response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results
    )


@dataclass(slots=True)
class UserAlteration:
    """What one request changes of one user's credentials, by mechanism name."""

    upsertions: dict[str, ScramCredential] = field(default_factory=dict)
    deletions: list[str] = field(default_factory=list)


@dataclass(slots=True)
class AlterationPlan:
    # user -> (error, message): users none of whose alterations is made.
    refused: dict[str, tuple[ErrorCode, str]]
    alterations: dict[str, UserAlteration]


def plan_alterations(upsertions: Sequence[Any], deletions: Sequence[Any]) -> AlterationPlan:
    """Kafka's checks of an AlterUserScramCredentials request, before anything is read:
    an empty user name or bad iterations (UNACCEPTABLE_CREDENTIAL), an unknown mechanism
    (UNSUPPORTED_SASL_MECHANISM), then the same credential twice (DUPLICATE_RESOURCE)."""
    refused: dict[str, tuple[ErrorCode, str]] = {}
    # Deletions first: for a user with both, Kafka reports the upsertion's error.
    for deletion in deletions:
        if not deletion.name:
            refused[""] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
        elif mechanism_of_type(deletion.mechanism) is None:
            refused[deletion.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
    for upsertion in upsertions:
        if not upsertion.name:
            refused[""] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, EMPTY_USER)
        elif mechanism_of_type(upsertion.mechanism) is None:
            refused[upsertion.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM)
        else:
            try:
                check_iterations(upsertion.iterations)
                if not upsertion.salt or not upsertion.salted_password:
                    raise UnacceptableCredential("The salt and salted password must not be empty")
            except UnacceptableCredential as exc:
                refused[upsertion.name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc))
    pairs = Counter(
        (item.name, item.mechanism)
        for item in (*upsertions, *deletions)
        if item.name not in refused
    )
    for (name, _), count in pairs.items():
        if count > 1:
            refused[name] = (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
    alterations: dict[str, UserAlteration] = {}
    for deletion in deletions:
        if deletion.name not in refused:
            alteration = alterations.setdefault(deletion.name, UserAlteration())
            alteration.deletions.append(mechanism_of_type(deletion.mechanism) or "")
    for upsertion in upsertions:
        if upsertion.name not in refused:
            mechanism = mechanism_of_type(upsertion.mechanism) or ""
            alterations.setdefault(upsertion.name, UserAlteration()).upsertions[mechanism] = (
                credential_from_salted_password(
                    mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
                )
            )
    return AlterationPlan(refused, alterations)


async def handle_alter_user_scram_credentials(context: BrokerContext, request: Request) -> Any:
    body = request.body
    Response = response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    Result = Response.AlterUserScramCredentialsResult
    if not authorize_cluster(context, request, AclOperation.ALTER):
        code, message = REFUSALS[ResourceType.CLUSTER]
        named = sorted({d.name for d in body.deletions} | {u.name for u in body.upsertions})
        return Response(
            throttle_time_ms=0,
            results=[Result(user=name, error_code=code, error_message=message) for name in named],
        )
    plan = plan_alterations(body.upsertions, body.deletions)
    results = [
        Result(user=user, error_code=code, error_message=message)
        for user, (code, message) in plan.refused.items()
    ]
    store = context.credentials
    for user, alteration in plan.alterations.items():
        code, message = ErrorCode.NONE, None
        try:
            if store is None:
                raise ClusterUnavailable("this broker keeps no credentials")
            await store.alter(user, alteration.upsertions, alteration.deletions)
        except CredentialNotFound as exc:
            code, message = ErrorCode.RESOURCE_NOT_FOUND, str(exc)
        except ValueError as exc:  # a name the store cannot hold
            code, message = ErrorCode.UNACCEPTABLE_CREDENTIAL, str(exc)
        except (ClusterUnavailable, StateVersionConflict, StorageError, OSError) as exc:
            log.error("the SCRAM credentials of user %r were not altered: %s", user, exc)
            code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"not stored: {exc}"
        except Exception as exc:
            # As Kafka, one user's failure is that user's answer; the others are still
            # altered.
            log.exception("the SCRAM credentials of user %r were not altered", user)
            code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"not stored: {type(exc).__name__}"
        else:
            log.info(
                "SCRAM credentials of user %r: set %s, deleted %s",
                user,
                sorted(alteration.upsertions) or "none",
                sorted(alteration.deletions) or "none",
            )
        results.append(Result(user=user, error_code=code, error_message=message))
    return Response(throttle_time_ms=0, results=results)
