"""One ZooKeeper session: connecting, sending requests and waiting for their answers,
the session's states, and its lease.

The session lease (see cluster/lease.py). Every answered request moves it:
lease_deadline() is until when this session is certainly alive, and a leader must not
act past it.

The clocks are the builder's: `monotonic_ms` times the lease and the wait for a login;
`wall_ms` is what the znode families write into brokers' and the controller's znodes
for people and other brokers to read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from enum import Enum
from typing import Any, Self

from kazoo.client import KazooState, TransactionRequest
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    OperationTimeoutError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import Callback

from herdless.cluster import layout
from herdless.cluster.errors import ClusterUnavailable, ZooKeeperAuthenticationFailed
from herdless.cluster.lease import SessionLease
from herdless.cluster.zookeeper.client import ZooKeeperClient, open_client, sasl_required, start
from herdless.cluster.zookeeper.watches import Watch, guarded
from herdless.security.zookeeper import ZooKeeperSecurity

logger = logging.getLogger(__name__)

# Kafka's zookeeper.session.timeout.ms default.
DEFAULT_SESSION_TIMEOUT_S = 18.0
DEFAULT_CONNECT_TIMEOUT_S = 18.0
DEFAULT_REQUEST_TIMEOUT_S = 10.0
# Share of the session timeout kept back from the lease.
DEFAULT_LEASE_MARGIN = 0.1
_CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)


class SessionState(Enum):
    CONNECTED = "connected"
    # Disconnected; the session may still be alive and may come back.
    SUSPENDED = "suspended"
    # The session expired (or the store was closed): ephemeral znodes are gone.
    LOST = "lost"


class ZooKeeperSession:
    """One ZooKeeper session, and the requests the znode families send through it."""

    def __init__(
        self,
        connect: str,
        *,
        wall_ms: Callable[[], int],
        monotonic_ms: Callable[[], float],
        session_timeout: float = DEFAULT_SESSION_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        lease_margin: float = DEFAULT_LEASE_MARGIN,
        security: ZooKeeperSecurity | None = None,
    ) -> None:
        """Connect to "host:port[,host:port...][/chroot]", creating the chroot and Kafka's
        top-level paths if missing. Raises ClusterUnavailable if no session is established
        within connect_timeout seconds, ZooKeeperAuthenticationFailed if ZooKeeper
        refuses `security`'s login."""
        security = security or ZooKeeperSecurity()
        self.connect_string = connect
        self._wall_ms = wall_ms
        self._request_timeout = request_timeout

        def monotonic_s() -> float:
            # The lease's deadlines are a send time plus the session timeout in seconds.
            return monotonic_ms() / 1000

        self._lease = SessionLease(lease_margin, monotonic_s)
        # The session that last registered this broker: its leftover znode is ours.
        self._registered_session: int | None = None
        hosts, _, chroot = connect.partition("/")
        if chroot:
            with open_client(
                hosts, session_timeout, connect_timeout, connect, security, monotonic_s
            ) as root:
                for prefix in _prefixes("/" + chroot):
                    with suppress(NodeExistsError):
                        try:
                            root.create(prefix, None)
                        except SessionClosedRequireSaslError:
                            raise sasl_required(connect) from None
        self._client = ZooKeeperClient(connect, session_timeout, security)
        self._hook_negotiated_timeout()
        self._client.add_listener(self._on_kazoo_state)
        start(self._client, connect_timeout, connect, monotonic_s)
        try:
            for path in layout.PERSISTENT_PATHS:
                self._ensure_path(path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the session: this broker's ephemeral znodes go at once."""
        self._client.stop()
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- session and lease ---------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        return self._client._session_id  # noqa: SLF001 - kazoo exposes it only with the password

    @property
    def negotiated_session_timeout(self) -> float | None:
        """Seconds, as the server granted them; None before the first session."""
        return self._lease.session_timeout

    def lease_deadline(self) -> float:
        """Seconds on the monotonic_ms clock (its value / 1000) until which this client's
        current session is certainly alive; -inf when nothing proves it (no answered
        request in this session)."""
        return self._lease.deadline(self.session_id)

    def renew_lease(self, timeout: float | None = None) -> float:
        """One cheap round trip to ZooKeeper; returns lease_deadline() after it. A round
        trip that fails or times out leaves the lease as it was."""
        try:
            self._run(lambda: self._client.exists_async("/"), timeout)
        except ClusterUnavailable as exc:
            logger.debug("lease not renewed: %s", exc)
        return self.lease_deadline()

    def add_session_listener(self, callback: Callable[[SessionState], None]) -> Watch:
        """Call back on every session state change, in order, on kazoo's callback thread.

        On LOST this broker's registration and any controllership are gone: stop leading,
        then register again (a new session, so a new broker epoch).
        """
        watch: Watch

        def listener(state: str) -> bool:
            if watch.cancelled:
                return True
            session_state = SessionState(state.lower())
            # The listener runs on kazoo's connection thread, which must not block.
            self._client.handler.dispatch_callback(
                Callback("session", guarded(callback), (session_state,))
            )
            return False

        watch = Watch(lambda: self._client.remove_listener(listener))
        self._client.add_listener(listener)
        return watch

    # -- requests ------------------------------------------------------------------------

    def _run(self, request: Callable[[], IAsyncResult], timeout: float | None = None) -> Any:
        """Send one request and wait for its answer; an answer, error codes included,
        proves the session alive when the request was sent (see the module's notes)."""
        sent = self._lease.sending(self.session_id)
        try:
            result = request().get(timeout=self._request_timeout if timeout is None else timeout)
        except self._client.handler.timeout_exception:
            raise ClusterUnavailable(
                f"ZooKeeper at {self.connect_string} did not answer within "
                f"{self._request_timeout if timeout is None else timeout}s"
            ) from None
        except SessionClosedRequireSaslError:
            raise sasl_required(self.connect_string) from None
        except (ConnectionClosedError, AuthFailedError) as exc:
            if self._client.sasl_failure is not None:
                raise ZooKeeperAuthenticationFailed(self._client.sasl_failure) from None
            raise ClusterUnavailable(f"the ZooKeeper session is closed: {exc}") from None
        except _CONNECTION_ERRORS as exc:
            raise ClusterUnavailable(
                f"lost ZooKeeper at {self.connect_string}: {type(exc).__name__}"
            ) from None
        except Exception:
            self._lease.answered(sent, self.session_id)
            raise
        self._lease.answered(sent, self.session_id)
        return result

    def _commit(self, tx: TransactionRequest) -> list[Any]:
        return self._run(tx.commit_async)

    def _ensure_path(self, path: str) -> None:
        """Create path and its missing parents with no data, as Kafka's createRecursive
        does (kazoo's ensure_path would write empty data instead of none)."""
        for prefix in _prefixes(path):
            with suppress(NodeExistsError):
                self._run(lambda p=prefix: self._client.create_async(p, None))

    def _exists(self, path: str) -> bool:
        return self._run(lambda: self._client.exists_async(path)) is not None

    # -- kazoo's hooks -------------------------------------------------------------------

    def _on_kazoo_state(self, state: str) -> None:
        # On kazoo's connection thread: quick, no requests.
        if state == KazooState.LOST:
            self._lease.lost()

    def _hook_negotiated_timeout(self) -> None:
        # Kazoo keeps the session timeout the server granted to itself, deriving its
        # read timeout as two thirds of it; the lease needs the granted one, which the
        # server may have lowered below what was asked.
        connection = getattr(self._client, "_connection", None)
        original = getattr(connection, "_connect", None)
        if original is None:
            raise RuntimeError("this kazoo version does not expose its connection handler")

        def connect(*args: Any) -> tuple[float, float]:
            read_timeout_ms, connect_timeout_ms = original(*args)
            self._lease.session_timeout = read_timeout_ms * 1.5 / 1000
            return read_timeout_ms, connect_timeout_ms

        connection._connect = connect  # type: ignore[union-attr]


def _prefixes(path: str) -> list[str]:
    parts = [part for part in path.split("/") if part]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]
