"""A kazoo client that logs in to ZooKeeper as the broker's settings say and creates
every znode with the ACLs Kafka would give it.

With a login the session is SASL DIGEST-MD5 authenticated on every connection, and a
refused login ends it: ZooKeeperAuthenticationFailed, never retried with the same
password. Every znode is created through one client whose creates take their ACLs from
znode_acls, so no path can be created another way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import AuthFailedError, SASLException, ZookeeperError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.serialization import Connect
from kazoo.security import ACL

from herdless.cluster.errors import ClusterUnavailable, ZooKeeperAuthenticationFailed
from herdless.cluster.zookeeper import znode_acls
from herdless.security.zookeeper import ZooKeeperSecurity

# An unanswered session handshake is abandoned after a third of the session timeout,
# so that two more attempts still fit within the session; but never sooner than 2 s,
# since a new session's handshake waits for ZooKeeper to write it to its log.
HANDSHAKE_TIMEOUT_DIVISOR = 3
MIN_HANDSHAKE_TIMEOUT_S = 2.0


class ZooKeeperClient(KazooClient):
    """A kazoo client that logs in as `security` says and creates every znode with the
    ACLs znode_acls chooses for its path, transactions included."""

    def __init__(self, hosts: str, session_timeout: float, security: ZooKeeperSecurity) -> None:
        login = security.login
        super().__init__(
            hosts=hosts,
            timeout=session_timeout,
            # Retry a lost connection often: the session may still be saved within its
            # timeout. A connection made while ZooKeeper starts can hang unanswered until
            # the handshake is given up (_bound_handshake): only a short pause before the
            # next attempt leaves it time to save the session then.
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 0.25},
            sasl_options=None if login is None else login.sasl_options(),
        )
        self.hosts_given = hosts
        self.secure_acls = security.set_acl
        self.login = login
        # Set once the first SASL login is over, with why it failed if it did.
        self.sasl_over = threading.Event()
        self.sasl_failure: str | None = None
        self._bound_handshake(
            max(session_timeout / HANDSHAKE_TIMEOUT_DIVISOR, MIN_HANDSHAKE_TIMEOUT_S)
        )
        if login is not None:
            self._hook_sasl()

    def acls(self, path: str) -> list[ACL]:
        return znode_acls.default_acls(path, self.secure_acls)

    def create_async(  # type: ignore[override]
        self,
        path: str,
        value: bytes | None = b"",
        acl: list[ACL] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> IAsyncResult:
        return super().create_async(path, value, acl or self.acls(path), *args, **kwargs)

    def transaction(self) -> TransactionRequest:
        return ZooKeeperTransaction(self)

    def _bound_handshake(self, timeout: float) -> None:
        # Kazoo, as ZooKeeper's Java client, waits the session timeout over the host
        # count for the answer to a session handshake: with one server, the whole
        # session timeout. A ZooKeeper that is starting accepts connections before it
        # serves them, and one that arrives then may never be answered (ZooKeeper 3.8
        # fails to close it: a NullPointerException in removeCnxn). The restarted
        # server gives each saved session its full timeout from the moment it loads,
        # so a client that waits out the whole handshake reconnects just after its
        # session expired. Giving up on an unanswered handshake sooner, and trying
        # again, saves the session.
        connection = self._connection
        original = connection._invoke

        def invoke(invoke_timeout: float, request: Any, xid: int | None = None) -> Any:
            if isinstance(request, Connect):
                invoke_timeout = min(invoke_timeout, timeout)
            return original(invoke_timeout, request, xid)

        connection._invoke = invoke

    def _hook_sasl(self) -> None:
        # Kazoo reports a session as connected before its SASL login, and a login that
        # ZooKeeper refuses by closing the session ends kazoo's connection thread with a
        # traceback. This records how each login ended, and turns a refusal into
        # kazoo's AuthFailedError: the session ends, quietly and for good.
        connection = self._connection
        original = connection._authenticate_with_sasl
        assert self.login is not None
        username, hosts = self.login.username, self.hosts_given

        def authenticate(host: str, timeout: float) -> None:
            try:
                original(host, timeout)
            except (SASLException, ZookeeperError) as exc:  # AuthFailedError among them
                self.sasl_failure = (
                    f"ZooKeeper at {hosts} {_REFUSED} {username!r}"
                    f" ({type(exc).__name__}): check the password in the JAAS file's"
                    " section for ZooKeeper, and that ZooKeeper has this user"
                )
                self.sasl_over.set()
                raise AuthFailedError(self.sasl_failure) from None
            self.sasl_failure = None
            self.sasl_over.set()

        connection._authenticate_with_sasl = authenticate


class ZooKeeperTransaction(TransactionRequest):
    client: ZooKeeperClient

    def create(  # type: ignore[override]
        self,
        path: str,
        value: bytes | None = b"",
        acl: list[ACL] | None = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None:
        super().create(path, value, acl or self.client.acls(path), ephemeral, sequence)


def start(
    client: ZooKeeperClient,
    connect_timeout: float,
    address: str,
    monotonic_s: Callable[[], float],
) -> None:
    deadline = monotonic_s() + connect_timeout
    try:
        client.start(timeout=connect_timeout)
    except client.handler.timeout_exception:
        client.stop()
        client.close()
        raise ClusterUnavailable(
            f"could not connect to ZooKeeper at {address} within {connect_timeout}s"
        ) from None
    if client.login is None:
        return
    client.sasl_over.wait(max(0.0, deadline - monotonic_s()))
    if client.sasl_failure is not None or not client.sasl_over.is_set():
        client.stop()
        client.close()
        if client.sasl_failure is not None:
            raise ZooKeeperAuthenticationFailed(client.sasl_failure)
        raise ClusterUnavailable(
            f"the SASL login to ZooKeeper at {address} did not finish within {connect_timeout}s"
        )


@contextmanager
def open_client(
    hosts: str,
    session_timeout: float,
    connect_timeout: float,
    address: str,
    security: ZooKeeperSecurity,
    monotonic_s: Callable[[], float],
) -> Iterator[KazooClient]:
    client = ZooKeeperClient(hosts, session_timeout, security)
    start(client, connect_timeout, address, monotonic_s)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def sasl_required(address: str) -> ZooKeeperAuthenticationFailed:
    return ZooKeeperAuthenticationFailed(
        f"ZooKeeper at {address} takes only SASL logins: name a JAAS file with a Client"
        " section (java.security.auth.login.config) to log in with"
    )


class _ReportedByTheStore(logging.Filter):
    """Leaves out kazoo's own line about a SASL login that a ClusterStore refused: the
    store raises ZooKeeperAuthenticationFailed saying the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "AUTH_FAILED closing: %s" and _REFUSED in str(record.args or ""))


_REFUSED = "refused the SASL login of"
logging.getLogger("kazoo.client").addFilter(_ReportedByTheStore())
