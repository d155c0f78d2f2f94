"""The admin client: one bootstrapped kafka-python client, and every failure in words.

It is an ordinary Kafka client, so it works against any Kafka-compatible broker;
every failure to connect or to read reaches its caller as an AdminError whose one
line names it. kafka-python takes longer to import than the rest of a command
together, so it is imported when a client is first made, never when this module
is: `herdless --help` imports this module and must answer at once.

The client settings (librdkafka's names, as security/client_config.py translates
them) are an argument of each client made: the console makes its clients in a
thread of its own and for each user who logs in, so no setting is read from the
caller's context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from herdless.admin.bootstrap import reachable
from herdless.admin.errors import AdminError

if TYPE_CHECKING:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import OffsetSpec
    from kafka.errors import KafkaError

# How long to keep trying to bootstrap from a server that accepts connections but
# does not answer as a broker (one that refuses them fails at once, in
# kafka_python_client). kafka-python waits 30 s by default, long for a command typed
# at a prompt; a broker that is up answers in milliseconds.
BOOTSTRAP_TIMEOUT_MS = 5_000
REQUEST_TIMEOUT_MS = 10_000
CLIENT_ID = "herdless-cli"
# Enough to get past every registered broker that does not answer, in a small cluster.
ANY_BROKER_ATTEMPTS = 3

T = TypeVar("T")
C = TypeVar("C")
# IncrementalAlterConfigs' config_operation values.
_OP_SET, _OP_DELETE = 0, 1


def kafka_python_settings(accepted: Collection[str], settings: Mapping[str, str]) -> dict[str, Any]:
    """The client settings as keyword arguments of a kafka-python client that takes
    `accepted`; AdminError names one it cannot take."""
    from herdless.security.client_config import ClientConfigError, kafka_python_config

    try:
        return kafka_python_config(settings, accepted)
    except ClientConfigError as exc:
        raise AdminError(f"client setting {exc}") from None


class ConnectionFailures(logging.Handler):
    """kafka-python's log, kept from the terminal, minus the last reason a connection failed.

    kafka-python retries a connection that fails (a refused password, a TLS handshake
    with an untrusted certificate) until its bootstrap timeout, logging each reason,
    then raises a timeout that names none: the reason is what the user needs.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        from kafka.errors import KafkaTimeoutError, SaslAuthenticationFailedError

        for arg in record.args if isinstance(record.args, tuple) else ():
            # The final timeout is the giving up, not a reason; and a refused login
            # stays the reason when later tries find the connection closed at once (a
            # broker slows down an address that failed to log in).
            if not isinstance(arg, BaseException) or isinstance(arg, KafkaTimeoutError):
                continue
            if not isinstance(self.last, SaslAuthenticationFailedError):
                self.last = arg


_failures = ConnectionFailures()


def connect_failure(exc: BaseException, bootstrap: str) -> str:
    """Why no client connected to `bootstrap`, in one line."""
    from kafka.errors import SaslAuthenticationFailedError

    cause = _failures.last
    if isinstance(cause, SaslAuthenticationFailedError):
        detail = _words(cause).removeprefix(f"{type(cause).__name__}: ")
        return f"authentication failed at {bootstrap}: {detail} (SASL_AUTHENTICATION_FAILED)"
    if cause is not None:
        return f"cannot connect to {bootstrap}: {_words(cause)}"
    return f"no broker answers at {bootstrap}"


def _words(exc: BaseException) -> str:
    text = str(exc.args[0]) if exc.args else str(exc)
    return text if len(text) <= 300 else text[:300] + "..."


def open_admin(
    bootstrap: str, client_id: str = CLIENT_ID, settings: Mapping[str, str] | None = None
) -> KafkaAdminClient:
    """An admin client, bootstrapped, with the client settings (none: plaintext);
    AdminError says why there is none."""
    return kafka_python_client(_admin_class, bootstrap, client_id, settings)


def kafka_python_client(
    client_class: Callable[[], type[C]],
    bootstrap: str,
    client_id: str = CLIENT_ID,
    settings: Mapping[str, str] | None = None,
    **own: Any,
) -> C:
    """A kafka-python client (admin, consumer...) of these brokers, bootstrapped, with the
    client settings (none: plaintext) and then its `own`; AdminError says why there is
    none. `client_class` imports kafka-python, once a broker answers."""
    # Kafka clients retry an absent broker for tens of seconds before giving up.
    if not reachable(bootstrap):
        raise AdminError(f"no broker answers at {bootstrap}")
    from kafka.errors import KafkaError

    made = client_class()
    logging.getLogger("kafka").addHandler(_failures)
    _failures.last = None
    config = {
        "client_id": client_id,
        "request_timeout_ms": REQUEST_TIMEOUT_MS,
        "bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS,
        **kafka_python_settings(made.DEFAULT_CONFIG, settings or {}),  # type: ignore[attr-defined]
        **own,
    }
    try:
        return made(bootstrap_servers=bootstrap, **config)
    except KafkaError as exc:
        raise AdminError(connect_failure(exc, bootstrap)) from None
    except Exception as exc:  # e.g. a host name that does not resolve
        raise AdminError(f"cannot connect to {bootstrap}: {exc}") from None


def from_any_broker(request: Callable[[], T]) -> T:
    """A request any broker may answer, tried on another when the one picked cannot be reached.

    kafka-python sends it to a broker picked at random from the metadata, which
    lists a broker from its registration: one just killed stays listed until its
    ZooKeeper session expires. A refused connection fails the request at once and
    makes the client back off from that broker, so the next try goes elsewhere.
    """
    from kafka.errors import KafkaConnectionError, NodeNotReadyError

    for _ in range(ANY_BROKER_ATTEMPTS - 1):
        try:
            return request()
        except (KafkaConnectionError, NodeNotReadyError):
            continue
    return request()


def send_to_any_broker(admin: KafkaAdminClient, request: Any) -> Any:
    """The response to a request any broker may answer (from_any_broker), through
    kafka-python's private client manager: the requests its admin has no call for."""
    return from_any_broker(lambda: admin._manager.run(admin._manager.send, request))


def refused(result: Any, what: str) -> None:
    """AdminError "cannot <what>: <the error in words>" if a response (or one of its
    results) carries an error code, with its error message where it has one."""
    if result.error_code:
        message = getattr(result, "error_message", None)
        raise AdminError(f"cannot {what}: {error_text(result.error_code, message)}")


def incremental_alter_configs(
    resource_type: int, name: str, changes: Mapping[str, str | None]
) -> Any:
    """An IncrementalAlterConfigs request of one resource: set each config given a
    value, delete each given None."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest

    entries = [
        (config, _OP_DELETE if value is None else _OP_SET, value)
        for config, value in changes.items()
    ]
    return IncrementalAlterConfigsRequest(
        resources=[(resource_type, name, entries)], validate_only=False
    )


def explain(exc: KafkaError, bootstrap: str) -> str:
    from kafka.errors import BrokerResponseError, KafkaTimeoutError, UnsupportedVersionError

    if isinstance(exc, KafkaTimeoutError):
        return f"the broker at {bootstrap} did not answer in time"
    if isinstance(exc, UnsupportedVersionError):
        return f"the broker at {bootstrap} does not support a request this command needs"
    if isinstance(exc, BrokerResponseError):
        return error_text(exc)
    return str(exc) or f"the client failed talking to {bootstrap}"


def error_text(error: object, message: str | None = None) -> str:
    """A Kafka error (an error code, an error class or an instance) in words:
    the broker's own message if it sent one, else the error's description,
    then the error's name as Kafka spells it (`TOPIC_ALREADY_EXISTS`)."""
    from kafka import errors

    if isinstance(error, int):
        error = errors.for_code(error)
    name = getattr(error, "message", "") or "UNKNOWN_ERROR"
    if isinstance(error, BaseException) and not message and error.args:
        # kafka-python's own text often embeds the whole request; keep a short one.
        detail = str(error.args[0])
        message = detail if len(detail) <= 200 else None
    words = message or getattr(error, "description", "") or name
    return f"{words.rstrip('.')} ({name})"


def offsets_at(
    admin: KafkaAdminClient, tps: Iterable[TopicPartition], spec: OffsetSpec
) -> dict[TopicPartition, int]:
    """ListOffsets: each partition's offset at `spec` (its log start, log end...)."""
    wanted = dict.fromkeys(tps, spec)
    if not wanted:
        return {}
    return {tp: found.offset for tp, found in admin.list_partition_offsets(wanted).items()}


def coordinator_ids(admin: KafkaAdminClient, group_ids: list[str]) -> dict[str, int]:
    """Each group's coordinator's broker id.

    kafka-python finds coordinators for its own requests but has no public call
    for it; this one private call is kept here, in one place.
    """
    return admin._manager.run(admin._find_coordinator_ids, group_ids)


def find_coordinators(admin: KafkaAdminClient, group_ids: list[str]) -> dict[str, str]:
    """Each group's coordinator as `host:port (id)`, as Kafka's tool shows it."""
    if not group_ids:
        return {}
    ids = coordinator_ids(admin, group_ids)
    brokers = {b["broker_id"]: b for b in admin.describe_cluster()["brokers"]}
    shown = {}
    for group_id in group_ids:
        node = ids.get(group_id)
        broker = brokers.get(node)
        shown[group_id] = f"{broker['host']}:{broker['port']} ({node})" if broker else f"? ({node})"
    return shown


def consumer_class() -> type[Any]:
    """kafka-python's consumer, for kafka_python_client: imported when first made."""
    from kafka import KafkaConsumer

    return KafkaConsumer


def _admin_class() -> type[KafkaAdminClient]:
    from kafka import KafkaAdminClient

    class Admin(KafkaAdminClient):
        """kafka-python's admin client, minus its decoding of ACL operation bits.

        DescribeGroups answers carry the operations the caller may perform;
        kafka-python turns them into enums and raises ValueError on a bit it does
        not know, which some Kafka-compatible brokers (tansu) set. No command
        shows them.
        """

        def _process_acl_operations(self, obj: dict[str, Any]) -> dict[str, Any]:
            obj.pop("authorized_operations", None)
            return obj

    return Admin
