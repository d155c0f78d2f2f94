"""A real Apache ZooKeeper server (Debian's zookeeper package) on 127.0.0.1, for tests."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from herdless.cli.zookeeper import ZooKeeperMissing, ZooKeeperServer
from herdless.cli.zookeeper import require_zookeeper as _require_zookeeper
from tests.support.broker import free_port

# Sessions expire at a tick boundary: a short tick keeps expiry close to the timeout.
TICK_MS = 100
MIN_SESSION_TIMEOUT_MS = 2000
MAX_SESSION_TIMEOUT_MS = 30000


def require_zookeeper() -> str:
    """The java command that runs ZooKeeper, or a loud failure saying what to install."""
    try:
        return _require_zookeeper()
    except ZooKeeperMissing as exc:
        raise RuntimeError(str(exc)) from None


class ZooKeeperProcess(ZooKeeperServer):
    """A standalone ZooKeeper with short ticks and sessions, that tests can pause."""

    def __init__(self, data_dir: Path) -> None:
        require_zookeeper()
        super().__init__(
            data_dir,
            free_port(),
            tick_ms=TICK_MS,
            min_session_timeout_ms=MIN_SESSION_TIMEOUT_MS,
            max_session_timeout_ms=MAX_SESSION_TIMEOUT_MS,
            # Tests write little; no need to fsync every transaction to the log.
            sync_writes=False,
        )

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections but answers nothing."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> ZooKeeperProcess:
        """Stop and start again on the same port with the same data; sessions survive if
        their clients reconnect within the session timeout."""
        self.stop()
        self.start()
        return self
