"""A ZooKeeper server for tests: Debian's package, short ticks and sessions, on a free port."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from herdless.cli.zookeeper import ZooKeeperServer
from herdless.testing.process import free_port

# Sessions expire at a tick boundary: a short tick keeps expiry close to the timeout.
TICK_MS = 100
MIN_SESSION_TIMEOUT_MS = 2000
MAX_SESSION_TIMEOUT_MS = 30000


class ZooKeeperProcess(ZooKeeperServer):
    """A standalone ZooKeeper with short ticks and sessions, that tests can pause.

    With `sasl_users` (name -> password) it takes only sessions that log in as one of
    them with SASL DIGEST-MD5. Raises herdless.cli.zookeeper.ZooKeeperMissing, naming
    the package to install, when Java or Debian's zookeeper package is absent.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            data_dir,
            free_port(),
            host=host,
            prefix=prefix,
            tick_ms=TICK_MS,
            min_session_timeout_ms=MIN_SESSION_TIMEOUT_MS,
            max_session_timeout_ms=MAX_SESSION_TIMEOUT_MS,
            # Tests write little; no need to fsync every transaction to the log.
            sync_writes=False,
            sasl_users=sasl_users,
        )

    def restart(self) -> ZooKeeperProcess:
        """Stop and start again on the same port with the same data; sessions survive if
        their clients reconnect within the session timeout."""
        self.stop()
        self.start()
        return self
